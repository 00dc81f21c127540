/*
 * tensorw.c - tensors/NAME written (issue 24), the write half of
 * tensors.c's row.  The rules of the bytes on disk are the library's
 * (gguf/tensorw.c); this file decides which way an open writes and what
 * the rest of the mount shows.  ggufs(1), WRITING TENSORS, says it to
 * users.
 *
 * Who may write: a read-write mount, of a local model file whose edits go
 * into it (the file store, edits/file.c), or with an overlay (fs->patch:
 * the tensors go there, below); the mount's owner or root only (the core
 * asks gfs_may_commit at open for a row with owner_writes; the files are
 * 0644, owned by the mount's user, and default_permissions is on).  A
 * read-only mount: EROFS.  A shard set's later files are opened read-only
 * (metadata edits go to the first): their tensors are EROFS but on an
 * overlay mount.
 *
 * Sizes: a tensor's size never changes.  A write past its end is EFBIG,
 * a truncate to another size EINVAL (to its own size: nothing), O_TRUNC
 * drops no byte.
 *
 * Two ways, chosen at open:
 *  - without O_TRUNC, in place: each write (write(2), or the kernel's
 *    writeback of a shared writable mmap) goes into the GGUF at the
 *    tensor's offsets at once, like a regular file's.  fsync of the tensor
 *    file is fdatasync of the GGUF; a crash leaves what reached the disk.
 *    Served in direct I/O where the kernel maps such files
 *    (gfs_devio_dio_mmap, asked for at mount when tensors are writable): a
 *    write is copied once less (bench/run twrite), and the kernel drops
 *    the pages other opens of the tensor cached for the range written.
 *  - with O_TRUNC (cp of a whole tensor), a whole replace: writes go to a
 *    stage (gguf_stage), applied crash-safely at flush (close), fsync and
 *    release: after a crash the tensor is the old one or the new one.
 *    Served in direct I/O (the kernel caches nothing of the new bytes
 *    before they are applied); reads of that handle see its own bytes,
 *    others the file's until the apply.
 *
 * Pipelining.  An in-place write is answered before its bytes are
 * written: the writer's next write is read (by another thread) while this
 * one's pwrite runs, so a writer waits for one copy, not two (bench/run
 * twrite).  What keeps it a file:
 *  - a write first waits for the writes in flight that overlap its bytes
 *    (of any handle): writes of the same bytes land in the order they
 *    were answered;
 *  - every read the daemon serves (source/data.c: tensors/, f32/, npy/,
 *    the hashes, the live view but by passthrough) first waits for the
 *    writes in flight that overlap what it reads (source/inflight.c,
 *    where a write enters before its answer and leaves after its pwrite):
 *    a read after write(2) returned sees the bytes;
 *  - flush (each close(2)) and fsync of a tensor file wait for the
 *    tensor's writes in flight (of any handle: the kernel writes a shared
 *    mapping back through any writable open), release for the handle's;
 *    a write holds fs->lock (read) from before its
 *    answer to the end of its pwrite, so a commit (fs->lock for writing)
 *    never runs between them;
 *  - an error of a write already answered is kept in the handle (werr)
 *    and returned by its next write, flush or fsync, as a regular file's
 *    writeback error is.
 * A passthrough open of the live view reads the file itself: while
 * another process is still writing a tensor, it may see a write's old
 * bytes for the length of one pwrite (never once the writer's close(2)
 * returned).
 *
 * What the rest shows: the file's bytes as they are.  After each write or
 * apply, the kernel's cached pages of the live view's versions served
 * from the page cache (passthrough ones read the file itself), f32/ and
 * npy/ of the tensor, and (after an apply) the tensor file itself are
 * invalidated, and the tensor's hashes and tensors/'s are forgotten
 * (computed again on the next request).  Each row that shows tensor bytes
 * does its part in its own tensor_changed hook (kinds.h), which this file
 * calls through the table (gfs_kinds_tensor_changed): it names none of
 * them, and a new view of tensor bytes is one row.
 *
 * An overlay mount (source/patch.c) never writes the model: the first
 * open for writing copies the tensor whole into the overlay's data file
 * and records it (the overlay written again); writes in place go there; a
 * whole replace writes a new region, recorded at the apply (atomic: the
 * overlay's rename).  Reads of the model's bytes see them through data.c.
 *
 * The commit (ggufs -u, unmount) syncs the GGUF (or the overlay's data
 * file) and names the tensors written since the last one in its report
 * (gfs_tw_commit: the tensor row's commit_sync hook, which the edit
 * stores call through the table).
 *
 * Locks: writes in place hold fs->lock (read), like reads: a commit never
 * moves the data under them; the writes in flight are source/inflight.c's
 * (its lock a leaf, never held while waiting for anything but its own
 * condition); a stage's writes take fh->mu then fs->lock
 * (read); an apply holds fs->lock for writing (one at a time, none during
 * a commit).  The kernel is told to drop pages with no lock held.
 */
#include "../base/base.h"
#include "../kinds.h"
#include "../base/devio.h"
#include "../source/source.h"
#include "tensors.h"
#include "../base/mount.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gfs_tw_writable(const struct gfs *fs) {
    return !fs->readonly &&
           (fs->patch || (!fs->remote && fs->edits.ops == &gfs_edits_file &&
                          gguf_fd(fs->ctx) >= 0));
}

/* An overlay mount's open for writing (fs->lock held for writing): a whole
 * replace gets a new region holding the tensor's bytes as they are; an
 * open in place, the tensor's region, made and recorded (the overlay
 * written again: gfs_edits_keep) at its first such open.  0 or errno. */
static int ovl_open(struct gfs *fs, struct gfs_fh *fh) {
    char msg[4400] = "";
    uint64_t doff;
    int64_t g = gfs_tensor_index(fs, fh->ino);
    int err = 0;
    fh->ovl = 1;
    if (fh->ovl_whole)
        err = gfs_patch_region(fs, g, &fh->ovl_doff, msg, sizeof msg,
                               gfs_data_read);
    else if (!gfs_patch_find(fs, g, &doff)) {
        err = gfs_patch_region(fs, g, &doff, msg, sizeof msg, gfs_data_read);
        if (!err && !(err = gfs_patch_set(fs, g, doff))) {
            gfs_edit_changed(fs); /* the live view's version, the overlay */
            err = gfs_edits_keep(fs);
        }
    }
    if (msg[0])
        gfs_log(fs, "%s: %s", fs->path, msg);
    return err;
}

/* Writes n bytes at off of fh's tensor into the overlay's data file.
 * Caller holds fs->lock (read). */
static int ovl_pwrite(struct gfs *fs, struct gfs_fh *fh, const char *p,
                      size_t n, uint64_t off, struct gguf_error *err) {
    uint64_t doff = fh->ovl_doff;
    if (!fh->ovl_whole &&
        !gfs_patch_find(fs, gfs_tensor_index(fs, fh->ino), &doff))
        return gguf_fail(err, GGUF_E_IO, "the tensor has no region");
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(gfs_patch_fd(fs), p + done, n - done,
                           (off_t)(doff + off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return gguf_fail(err, GGUF_E_IO,
                             "cannot write the overlay's tensor bytes: %s",
                             strerror(w < 0 ? errno : EIO));
        done += (size_t)w;
    }
    return GGUF_OK;
}

/* The absolute offset of byte off of fh's tensor.  Caller holds fs->lock
 * (read). */
static uint64_t pos_of(const struct gfs *fs, const struct gfs_fh *fh,
                       uint64_t off) {
    return gguf_data_offset(fs->shards[fh->shard]) + fh->rel + off;
}

/* Bytes [off, off + n) of fh's tensor changed on disk (whole: an
 * apply): every row that shows them is told (kinds.h, tensor_changed:
 * this file's own, gfs_tw_changed, the live view's, f32/'s and npy/'s).
 * No lock held. */
static void changed(struct gfs *fs, struct gfs_fh *fh, uint64_t off, uint64_t n,
                    int whole) {
    gfs_kinds_tensor_changed(fs, gfs_tensor_index(fs, fh->ino), off, n, whole);
}

void gfs_tw_changed(struct gfs *fs, int64_t i, uint64_t off, uint64_t n,
                    int whole) {
    (void)off, (void)n;
    if (i < 0 || !fs->tw_marks)
        return;
    atomic_store(&fs->tw_marks[i], 1);
    atomic_store(&fs->tw_any, 1);
    if (whole) /* the tensor file's own pages: its stage's bytes now */
        gfs_devio_inval(gfs_io(fs),
                        gfs_ino_out(fs, GFS_INO_TENSOR + (uint64_t)i), 0, 0);
}

int gfs_tw_tensor_writable(const struct gfs *fs, int shard) {
    return gfs_tw_writable(fs) && (fs->patch || shard == 0);
}

int gfs_tw_open(struct gfs *fs, struct gfs_fh *fh, struct fuse_file_info *fi) {
    struct gguf_error err = {0};
    if (!gfs_tw_tensor_writable(fs, fh->shard))
        return EROFS;
    if (!fs->tw_marks) { /* fs->lock held for writing (open_writes) */
        int64_t n = gfs_n_tensors(fs);
        fs->tw_marks = calloc(n ? (size_t)n : 1, sizeof *fs->tw_marks);
        if (!fs->tw_marks)
            return ENOMEM;
    }
    if (gfs_inflight_init(fs))
        return ENOMEM;
    atomic_store(&fh->werr, 0);
    fh->tensor_w = 1;
    fi->noflush = 0;
    fh->drop = 0;
    fh->ovl_whole = fs->patch && (fi->flags & O_TRUNC);
    int e = fs->patch ? ovl_open(fs, fh) : 0;
    if (e)
        return e;
    if (fh->ovl_whole) {
        fi->direct_io = 1;
        fi->keep_cache = 0;
        return 0;
    }
    if (!(fi->flags & O_TRUNC) || fs->patch) {
        /* Direct I/O where the kernel still maps such files: a write is
         * copied once less (not into the mount's page cache too). */
        if (gfs_devio_dio_mmap(gfs_io(fs))) {
            fi->direct_io = 1;
            fi->keep_cache = 0;
        }
        return 0;
    }
    if (gguf_stage_new(fs->shards[fh->shard], pos_of(fs, fh, 0), fh->size,
                       &fh->stage, &err) != GGUF_OK) {
        gfs_log(fs, "%s: %s", fs->path, err.msg);
        return gfs_errno(&err);
    }
    fi->direct_io = 1;
    fi->keep_cache = 0;
    return 0;
}

int gfs_tw_write(struct gfs *fs, struct gfs_fh *fh, const char *p, size_t n,
                 off_t off) {
    struct gguf_error err = {0};
    enum gguf_status st;
    if (off < 0 || (uint64_t)off > fh->size || n > fh->size - (uint64_t)off)
        return EFBIG;
    if (n == 0)
        return 0;
    pthread_mutex_lock(&fh->mu);
    pthread_rwlock_rdlock(&fs->lock);
    gguf_ctx *c = fs->shards[fh->shard];
    if (fh->ovl)
        st = ovl_pwrite(fs, fh, p, n, (uint64_t)off, &err);
    else if (fh->stage)
        st = gguf_stage_write(c, fh->stage, (uint64_t)off, p, n, &err);
    else
        st = gguf_data_pwrite(c, pos_of(fs, fh, (uint64_t)off), p, n, &err);
    pthread_rwlock_unlock(&fs->lock);
    if (st == GGUF_OK && (fh->stage || fh->ovl_whole))
        fh->staged = 1;
    pthread_mutex_unlock(&fh->mu);
    if (st != GGUF_OK) {
        gfs_log(fs, "%s: a write of a tensor failed: %s", fs->path, err.msg);
        return gfs_errno(&err);
    }
    if (!fh->stage && !fh->ovl_whole)
        changed(fs, fh, (uint64_t)off, n, 0);
    return 0;
}

/* Tests only: GGUFS_TEST_TW_DELAY_US=N sleeps N microseconds between a
 * pipelined write's answer and its pwrite, so that the rules above are
 * seen to hold (tests/mount_tensorw.py); unset: 0. */
static unsigned test_delay_us(void) {
    static atomic_int v = -1;
    int x = atomic_load(&v);
    if (x < 0) {
        const char *e = getenv("GGUFS_TEST_TW_DELAY_US");
        long d = e ? strtol(e, NULL, 10) : 0;
        x = d > 0 && d < 1000000 ? (int)d : 0;
        atomic_store(&v, x);
    }
    return (unsigned)x;
}

void gfs_tw_write_req(struct gfs *fs, fuse_req_t req, struct gfs_fh *fh,
                      const char *p, size_t n, off_t off) {
    struct gguf_error err = {0};
    int e = atomic_exchange(&fh->werr, 0);
    if (!e &&
        (off < 0 || (uint64_t)off > fh->size || n > fh->size - (uint64_t)off))
        e = EFBIG;
    if (e || n == 0 || fh->stage || fh->ovl || fh->ovl_whole || !fs->twq) {
        if (!e)
            e = gfs_tw_write(fs, fh, p, n, off);
        if (e)
            fuse_reply_err(req, e);
        else
            fuse_reply_write(req, n);
        return;
    }
    /* In place (Pipelining): answered, then written.  What other files
     * cached of these bytes is dropped before the answer (a read after
     * write(2) returned finds no old page; one made meanwhile is served
     * after the pwrite: gfs_inflight_wait) and again after the pwrite (pages a
     * reader cached before the write entered the queue).  Never while in
     * the queue: a reader holding a page lock may be waiting for it. */
    changed(fs, fh, (uint64_t)off, n, 0);
    uint64_t at = pos_of(fs, fh, (uint64_t)off);
    int slot = gfs_inflight_enter(fs, fh, fh->shard, at, at + n);
    pthread_rwlock_rdlock(&fs->lock);
    fuse_reply_write(req, n);
    if (test_delay_us())
        usleep(test_delay_us());
    enum gguf_status st =
        gguf_data_pwrite(fs->shards[fh->shard], at, p, n, &err);
    pthread_rwlock_unlock(&fs->lock);
    if (st != GGUF_OK) {
        int zero = 0;
        atomic_compare_exchange_strong(&fh->werr, &zero, gfs_errno(&err));
        gfs_log(fs,
                "%s: a write of a tensor failed (returned by the next "
                "write, close or fsync): %s",
                fs->path, err.msg);
    }
    gfs_inflight_leave(fs, slot);
    if (st == GGUF_OK)
        changed(fs, fh, (uint64_t)off, n, 0);
}

/* A stage's handle reads its own bytes (the file's where not written). */
int gfs_tw_read(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh, off_t off,
                size_t size) {
    struct gguf_error err = {0};
    uint64_t o = (uint64_t)off < fh->size ? (uint64_t)off : fh->size;
    size_t n = fh->size - o < size ? (size_t)(fh->size - o) : size;
    char *buf = gfs_tbuf(GFS_TBUF_REPLY, n ? n : 1);
    if (!buf)
        return ENOMEM;
    pthread_mutex_lock(&fh->mu);
    pthread_rwlock_rdlock(&fs->lock);
    enum gguf_status st = GGUF_OK;
    if (fh->ovl_whole)
        st = pread(gfs_patch_fd(fs), buf, n, (off_t)(fh->ovl_doff + o)) ==
                     (ssize_t)n
                 ? GGUF_OK
                 : gguf_fail(&err, GGUF_E_IO, "cannot read the overlay");
    else
        st = gguf_stage_read(fs->shards[fh->shard], fh->stage, o, buf, n, &err);
    pthread_rwlock_unlock(&fs->lock);
    pthread_mutex_unlock(&fh->mu);
    if (st != GGUF_OK)
        return gfs_errno(&err);
    fuse_reply_buf(req, buf, n);
    return 0;
}

/* Applies fh's stage if it holds bytes not applied yet; 0 or errno (the
 * reason logged).  Caller holds fh->mu. */
/* An overlay's whole replace: its region synced, then recorded and the
 * overlay written again (the record's change is the overlay's rename).
 * Caller holds fs->lock for writing. */
static enum gguf_status ovl_apply(struct gfs *fs, struct gfs_fh *fh,
                                  struct gguf_error *err) {
    if (fdatasync(gfs_patch_fd(fs)) < 0)
        return gguf_fail(err, GGUF_E_IO, "cannot sync the overlay's tensors");
    if (gfs_patch_set(fs, gfs_tensor_index(fs, fh->ino), fh->ovl_doff))
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    gfs_edit_changed(fs);
    return gfs_edits_keep(fs)
               ? gguf_fail(err, GGUF_E_IO, "the overlay could not be written")
               : GGUF_OK;
}

static int apply(struct gfs *fs, struct gfs_fh *fh) {
    struct gguf_error err = {0};
    if ((!fh->stage && !fh->ovl_whole) || !fh->staged)
        return 0;
    gfs_edit_begin(fs);
    enum gguf_status st =
        fh->ovl_whole
            ? ovl_apply(fs, fh, &err)
            : gguf_stage_apply(fs->shards[fh->shard], fh->stage, &err);
    if (st == GGUF_OK && fh->shard == 0)
        fstat(gguf_fd(fs->ctx), &fs->st);
    gfs_edit_abort(fs); /* ovl_apply kept the record */
    if (st != GGUF_OK) {
        struct gguf_buf name = {0};
        (void)gfs_tensor_fname(fs, gfs_tensor_index(fs, fh->ino), &name);
        gfs_log(fs, "%s: the new bytes of tensor %s were not written in: %s",
                fs->path, name.p ? (char *)name.p : "?", err.msg);
        gguf_buf_free(&name);
        return gfs_errno(&err);
    }
    fh->staged = 0;
    changed(fs, fh, 0, fh->size, 1);
    return 0;
}

int gfs_tw_flush(struct gfs *fs, struct gfs_fh *fh) {
    /* the tensor's writes in flight, of any handle: the kernel writes a
     * shared mapping's pages back through any writable open */
    gfs_inflight_wait(fs, fh->shard, pos_of(fs, fh, 0), fh->size);
    int werr = atomic_exchange(&fh->werr, 0);
    pthread_mutex_lock(&fh->mu);
    int err = apply(fs, fh);
    pthread_mutex_unlock(&fh->mu);
    return werr ? werr : err;
}

int gfs_tw_fsync(struct gfs *fs, fuse_req_t req, struct gfs_fh *fh) {
    (void)req; /* the opener was checked at open */
    struct gguf_error err = {0};
    if (!fh->tensor_w)
        return 0;
    if (fh->stage || fh->ovl_whole)
        return gfs_tw_flush(fs, fh);
    /* the tensor's writes in flight, of any handle: the kernel writes a
     * shared mapping's pages back through any writable open */
    gfs_inflight_wait(fs, fh->shard, pos_of(fs, fh, 0), fh->size);
    int werr = atomic_exchange(&fh->werr, 0);
    if (werr)
        return werr;
    if (fh->ovl)
        return fdatasync(gfs_patch_fd(fs)) < 0 ? errno : 0;
    pthread_rwlock_rdlock(&fs->lock);
    enum gguf_status st = gguf_data_sync(fs->shards[fh->shard], &err);
    pthread_rwlock_unlock(&fs->lock);
    return st == GGUF_OK ? 0 : gfs_errno(&err);
}

void gfs_tw_release(struct gfs *fs, struct gfs_fh *fh) {
    gfs_inflight_wait_owner(fs, fh); /* the core frees fh after */
    pthread_mutex_lock(&fh->mu);
    (void)apply(fs, fh); /* a failure is logged */
    gguf_stage_free(fh->stage);
    fh->stage = NULL;
    pthread_mutex_unlock(&fh->mu);
}

int gfs_tw_truncate(struct gfs *fs, struct gfs_fh *fh, fuse_ino_t ino,
                    off_t size) {
    (void)fh;
    if (!gfs_tw_writable(fs))
        return EROFS;
    int64_t i = gfs_tensor_index(fs, ino);
    if (i < 0)
        return ENOENT;
    return (uint64_t)size == gfs_tensor_bytes(fs, i) ? 0 : EINVAL;
}

/* "; tensors written: A, B (N in all)" into what (n bytes), marks
 * cleared. */
static void report(struct gfs *fs, char *what, size_t n) {
    size_t used = strlen(what), count = 0, shown = 0;
    struct gguf_buf name = {0};
    const char *head = used ? "; tensors written: " : "tensors written: ";
    int64_t nt = gfs_n_tensors(fs);
    for (int64_t i = 0; i < nt; i++) {
        if (!atomic_exchange(&fs->tw_marks[i], 0))
            continue;
        count++;
        if (gfs_tensor_fname(fs, i, &name) || used + name.len + 40 > n)
            continue;
        used += (size_t)snprintf(what + used, n - used, "%s%.*s",
                                 shown ? ", " : head, (int)name.len,
                                 (char *)name.p);
        shown++;
    }
    if (count > shown && used + 24 < n)
        snprintf(what + used, n - used, "%s(%zu in all)", shown ? " " : head,
                 count);
    gguf_buf_free(&name);
}

int gfs_tw_commit(struct gfs *fs, char *what, size_t n,
                  struct gguf_error *err) {
    if (!atomic_exchange(&fs->tw_any, 0))
        return 0;
    if (fs->patch) { /* an overlay's: its data file */
        if (gfs_patch_fd(fs) >= 0 && fdatasync(gfs_patch_fd(fs)) < 0) {
            atomic_store(&fs->tw_any, 1);
            gguf_fail(err, GGUF_E_IO, "cannot sync the overlay's tensors: %s",
                      strerror(errno));
            return EIO;
        }
        report(fs, what, n);
        return 0;
    }
    /* Only the first file is written (gfs_tw_tensor_writable): a set's
     * later files are read-only and may hold no descriptor (source/fds.c). */
    gguf_data_adopt(fs->ctx);
    if (gguf_data_sync(fs->ctx, err) != GGUF_OK) {
        atomic_store(&fs->tw_any, 1);
        return EIO;
    }
    report(fs, what, n);
    return 0;
}

void gfs_tw_free(struct gfs *fs) {
    free((void *)fs->tw_marks);
    fs->tw_marks = NULL;
    gfs_inflight_free(fs);
}
