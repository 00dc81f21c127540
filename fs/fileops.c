/*
 * fileops.c - the FUSE handlers of open files (open, create, read, write,
 * flush, release, fsync) and their per-open state, struct gfs_fh.
 *
 * Reads of tensors and of the one-file live view reply with a
 * file-descriptor buffer on the GGUF itself, so libfuse reads (or splices)
 * straight from the backing file without our own copy.  A writable open of
 * a key edits a private draft, applied at flush and release.
 *
 * Locks (see struct gfs): fh->mu, then fs->lock, then fs->fh_lock or
 * fs->text_lock.
 */
#include "ggufs.h"
#include "kinds.h"
#include "source/source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct gfs_fh *fh_of(const struct fuse_file_info *fi) {
    return (struct gfs_fh *)(uintptr_t)fi->fh;
}

/* A new handle for ino, listed in fs->open_fhs.  Takes fh_lock: the caller
 * may hold fs->lock, not fh_lock. */
static struct gfs_fh *fh_new(struct gfs *fs, fuse_ino_t ino) {
    struct gfs_fh *fh = calloc(1, sizeof *fh);
    if (fh) {
        fh->kind = gfs_kind(ino);
        fh->ino = ino;
        pthread_mutex_init(&fh->mu, NULL);
        pthread_mutex_lock(&fs->fh_lock);
        fh->next = fs->open_fhs;
        if (fh->next)
            fh->next->prev = fh;
        fs->open_fhs = fh;
        pthread_mutex_unlock(&fs->fh_lock);
    }
    return fh;
}

static void fh_free(struct gfs *fs, struct gfs_fh *fh) {
    if (!fh)
        return;
    pthread_mutex_lock(&fs->fh_lock);
    if (fh->prev)
        fh->prev->next = fh->next;
    else
        fs->open_fhs = fh->next;
    if (fh->next)
        fh->next->prev = fh->prev;
    pthread_mutex_unlock(&fs->fh_lock);
    gfs_pt_release(fs, fh);
    gfs_text_put(fh->text);
    gguf_buf_free(&fh->draft);
    (void)gfs_mem_grant(fs, &fh->granted, 0);
    pthread_mutex_destroy(&fh->mu);
    free(fh);
}

/* Applies a writable handle's draft to the key; 0 or errno.  A flush
 * (quiet) that fails leaves the draft pending: the file may still be
 * written to through a dup'ed descriptor.  The last word is release's.
 * Takes fh->mu, then fs->lock for writing. */
static int fh_apply(struct gfs *fs, struct gfs_fh *fh, int quiet) {
    int err = 0;
    pthread_mutex_lock(&fh->mu);
    if (fh->writable && fh->kind == GFS_KV && fh->dirty && !fh->bad &&
        (fh->written || !quiet)) {
        pthread_rwlock_wrlock(&fs->lock);
        int64_t i = gfs_kv_index(fs, fh->ino);
        err = i < 0 ? ENOENT
                    : gfs_meta_apply_text(fs, i, (char *)fh->draft.p,
                                          fh->draft.len, quiet);
        gfs_meta_unlock(fs);
        if (!err || !quiet)
            fh->dirty = 0;
        if (err && !quiet)
            fh->bad = err;
    } else if (fh->bad) {
        err = fh->bad;
    }
    pthread_mutex_unlock(&fh->mu);
    return err;
}

size_t gfs_fh_close_all(struct gfs *fs, char *note, size_t size) {
    /* One handle at a time: fh_lock is a leaf, so it is not held while
     * fh->mu and fs->lock are taken.  The workers have stopped, so no
     * release frees the head between the two sections.  A draft that is
     * still dirty was never applied by a flush: its writer had not closed
     * it, so it may be half a value (a chat template cut mid-word), and
     * committing it would publish a torn value.  It is dropped, and said
     * so; what flushes did apply stays and is committed. */
    size_t dropped = 0;
    for (;;) {
        pthread_mutex_lock(&fs->fh_lock);
        struct gfs_fh *fh = fs->open_fhs;
        pthread_mutex_unlock(&fs->fh_lock);
        if (!fh)
            break;
        pthread_mutex_lock(&fh->mu);
        if (fh->writable && fh->kind == GFS_KV && fh->dirty) {
            char line[GGUF_QUOTE_MAX + 160], q[GGUF_QUOTE_MAX];
            size_t klen = 0;
            const char *key = NULL;
            pthread_rwlock_rdlock(&fs->lock);
            int64_t i = gfs_kv_index(fs, fh->ino);
            if (i >= 0)
                key = gguf_kv_key(fs->ctx, i, &klen);
            snprintf(line, sizeof line,
                     "meta/%s: %zu bytes still being written at unmount, not "
                     "committed",
                     key ? gguf_quote(q, sizeof q, key, klen) : "?",
                     fh->loaded ? fh->draft.len : (size_t)0);
            pthread_rwlock_unlock(&fs->lock);
            gfs_log(fs, "%s: %s", fs->path, line);
            size_t used = note ? strlen(note) : 0;
            if (note && used + strlen(line) + 3 < size)
                snprintf(note + used, size - used, "; %s", line);
            dropped++;
        }
        pthread_mutex_unlock(&fh->mu);
        fh_free(fs, fh);
    }
    return dropped;
}

/* A read-only mount serves what it read at mount: the metadata in memory,
 * the data from the file.  If the GGUF at its path is no longer that file
 * (another inode: replaced or removed; or another size or mtime: written
 * in place), meta/ and the live view's header would be old while data
 * reads are new.  So each open stats the path (one stat per open, never
 * per read: a read only tests the flag) and, once a change is seen, every
 * open and read fails with EIO and one line says why.  Read-write mounts
 * hold the file locked, and their commit refuses a changed file.  No lock:
 * fs->st does not change on a read-only mount.  0 or EIO. */
static int file_changed(struct gfs *fs) {
    if (!fs->readonly || gfs_data_fd(fs, 0) < 0) /* remote: checked by
                                                     every request */
        return 0;
    if (atomic_load(&fs->changed))
        return EIO;
    struct stat sb;
    char what[160] = "";
    if (stat(fs->path, &sb) != 0)
        snprintf(what, sizeof what, "it is gone (%s)", strerror(errno));
    else if (sb.st_dev != fs->st.st_dev || sb.st_ino != fs->st.st_ino)
        snprintf(what, sizeof what, "it was replaced (inode %llu, was %llu)",
                 (unsigned long long)sb.st_ino,
                 (unsigned long long)fs->st.st_ino);
    else if (sb.st_size != fs->st.st_size)
        snprintf(what, sizeof what, "its size is %lld bytes, was %lld",
                 (long long)sb.st_size, (long long)fs->st.st_size);
    else if (sb.st_mtim.tv_sec != fs->st.st_mtim.tv_sec ||
             sb.st_mtim.tv_nsec != fs->st.st_mtim.tv_nsec)
        snprintf(what, sizeof what, "it was modified (mtime changed)");
    if (!what[0])
        return 0;
    if (!atomic_exchange(&fs->changed, 1))
        gfs_log(fs,
                "%s: changed since it was mounted read-only: %s; reads "
                "fail with EIO until it is mounted again",
                fs->path, what);
    return EIO;
}

/* True if an open with these flags may change the file. */
static int open_wants_write(const struct fuse_file_info *fi) {
    return (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
}

/* The open of each kind of file: prepare fh, set fi's cache flags; 0 or
 * errno.  Caller holds fs->lock: for writing when the open may write a key
 * (a refusal is recorded in user.gguf.error) or truncates a scratch file,
 * for reading otherwise. */

static int open_kv(struct gfs *fs, struct gfs_fh *fh, struct fuse_file_info *fi,
                   int wants_write) {
    int err = 0;
    int64_t i = gfs_kv_index(fs, fh->ino);
    if (i < 0)
        return ENOENT;
    if (wants_write && fs->readonly)
        return EROFS;
    /* A key that may not change is refused here, where the shell sees it
     * (`echo 32 > meta/general.alignment` fails), not at close. */
    if (wants_write && gfs_meta_unwritable(fs, i))
        return gfs_meta_refuse_protected(fs, i, "opening for writing");
    struct gfs_text *t = gfs_text_open(fs, i, &err);
    if (!t)
        return err;
    /* On a read-write mount the kernel's page cache of a meta file would
     * show one opener's unapplied writes to another: every read and write
     * comes to us instead, readers see applied values only. */
    fi->direct_io = !fs->readonly;
    if (!wants_write) {
        fh->text = t;
        return 0;
    }
    /* A writable open edits a private draft, applied at flush.  The draft
     * is copied from the text at the first write or truncate (draft_load),
     * not here: opening costs no copy of a big value, and an O_TRUNC open
     * starts empty. */
    fh->writable = 1;
    if (fi->flags & O_TRUNC) {
        fh->dirty = 1;
        fh->loaded = 1;
        gfs_text_put(t);
    } else {
        fh->text = t;
    }
    return 0;
}

static int fh_open(struct gfs *fs, struct gfs_fh *fh,
                   struct fuse_file_info *fi) {
    int wants_write = open_wants_write(fi);
    const struct gfs_kind_ops *row = gfs_kind_row(fh->kind);
    if (row)
        return row->open ? row->open(fs, fh, fi, wants_write) : EISDIR;
    switch (fh->kind) {
    case GFS_KV:
        return open_kv(fs, fh, fi, wants_write);
    case GFS_SCRATCH:
        if (!gfs_meta_scratch_by_ino(fs, fh->ino))
            return ENOENT;
        if (wants_write && fs->readonly)
            return EROFS;
        fh->writable = wants_write;
        return 0;
    case GFS_NONE:
        return ENOENT;
    default:
        return EISDIR;
    }
}

static void reply_open(struct gfs *fs, fuse_req_t req,
                       struct fuse_file_info *fi, struct gfs_fh *fh,
                       const struct fuse_entry_param *e) {
    fi->fh = (uintptr_t)fh;
    gfs_pt_arm(fh);
    int r = e ? fuse_reply_create(req, e, fi) : fuse_reply_open(req, fi);
    gfs_pt_disarm();
    if (r == -ENOENT)
        fh_free(fs, fh); /* interrupted: no release will come */
}

void gfs_op_open(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                 struct fuse_file_info *fi) {
    int changed = file_changed(fs);
    if (changed) {
        fuse_reply_err(req, changed);
        return;
    }
    pthread_rwlock_rdlock(&fs->lock);
    ino = gfs_meta_resolve(fs, ino);
    pthread_rwlock_unlock(&fs->lock);
    struct gfs_fh *fh = fh_new(fs, ino);
    if (!fh) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    int trunc_scratch = fh->kind == GFS_SCRATCH && (fi->flags & O_TRUNC);
    if (trunc_scratch || (fh->kind == GFS_KV && open_wants_write(fi)))
        pthread_rwlock_wrlock(&fs->lock);
    else
        pthread_rwlock_rdlock(&fs->lock);
    int err = fh_open(fs, fh, fi);
    if (!err && trunc_scratch && !fs->readonly)
        err = gfs_meta_truncate(fs, ino, 0);
    pthread_rwlock_unlock(&fs->lock);
    if (err) {
        fh_free(fs, fh);
        fuse_reply_err(req, err);
        return;
    }
    reply_open(fs, req, fi, fh, NULL);
}

void gfs_op_create(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                   const char *name, mode_t mode, struct fuse_file_info *fi) {
    (void)mode;
    struct fuse_entry_param e;
    struct gfs_fh *fh = NULL;
    fuse_ino_t ino = 0;
    int err;

    if (fs->readonly) {
        fuse_reply_err(req, EROFS);
        return;
    }
    const struct gfs_kind_ops *row = gfs_kind_row(gfs_kind(parent));
    if (!row || !row->create) {
        fuse_reply_err(req, gfs_kind(parent) != GFS_NONE ? EACCES : ENOENT);
        return;
    }
    pthread_rwlock_wrlock(&fs->lock);
    err = row->create(fs, parent, name, &ino);
    if (!err && !(fh = fh_new(fs, ino)))
        err = ENOMEM;
    if (!err)
        fh->created = gfs_kind(ino) == GFS_KV;
    if (!err)
        err = fh_open(fs, fh, fi);
    if (!err)
        err = gfs_fill_entry(fs, ino, &e);
    gfs_meta_unlock(fs);
    if (err) {
        fh_free(fs, fh);
        fuse_reply_err(req, err);
        return;
    }
    reply_open(fs, req, fi, fh, &e);
}

/* Reads.  Nothing of fh may be touched once the reply is sent: the kernel
 * can release the handle on another thread right then.  So each reader
 * holds its own reference on a text and copies a draft's bytes out first. */

static void reply_bytes(fuse_req_t req, const void *p, size_t len, off_t off,
                        size_t size) {
    size_t o = (uint64_t)off < len ? (size_t)off : len;
    size_t n = len - o < size ? len - o : size;
    fuse_reply_buf(req, (const char *)p + o, n);
}

/* Replies with the bytes [off, off + size) of a windowed text (tree.c:
 * made for this read).  Caller holds no lock but fh->mu. */
static void reply_window(fuse_req_t req, struct gfs *fs, struct gfs_text *t,
                         off_t off, size_t size) {
    struct gguf_buf b = {0};
    int err = gfs_text_read(fs, t, (uint64_t)off, size, &b);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, (const char *)b.p, b.len);
    gguf_buf_free(&b);
}

/* A key opened read-only: the text snapshot taken at open (a windowed
 * text: the value as it was at open, or ESTALE). */
void gfs_read_text(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh, off_t off,
                   size_t size) {
    struct gfs_text *t = fh->text;
    if (t->windowed) {
        reply_window(req, fs, t, off, size);
        return;
    }
    atomic_fetch_add(&t->refs, 1);
    reply_bytes(req, t->data, t->len, off, size);
    gfs_text_put(t);
}

/* A key opened for writing: its draft (the text at open until the first
 * write or truncate). */
static void read_draft(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh,
                       off_t off, size_t size) {
    pthread_mutex_lock(&fh->mu);
    if (!fh->loaded && fh->text->windowed) {
        reply_window(req, fs, fh->text, off, size);
        pthread_mutex_unlock(&fh->mu);
        return;
    }
    const char *p = fh->loaded ? (const char *)fh->draft.p : fh->text->data;
    size_t len = fh->loaded ? fh->draft.len : fh->text->len;
    size_t o = (uint64_t)off < len ? (size_t)off : len;
    size_t n = len - o < size ? len - o : size;
    char *copy = malloc(n ? n : 1);
    if (copy && n)
        memcpy(copy, p + o, n);
    pthread_mutex_unlock(&fh->mu);
    if (copy)
        fuse_reply_buf(req, copy, n);
    else
        fuse_reply_err(req, ENOMEM);
    free(copy);
}

/* An editor's temporary file.  Caller holds fs->lock (read). */
static void read_scratch(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh,
                         off_t off, size_t size) {
    struct gfs_scratch *sc = gfs_meta_scratch_by_ino(fs, fh->ino);
    if (sc)
        reply_bytes(req, sc->data.p, sc->data.len, off, size);
    else
        fuse_reply_err(req, ENOENT);
}

void gfs_op_read(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, size_t size,
                 off_t off, struct fuse_file_info *fi) {
    (void)ino;
    struct gfs_fh *fh = fh_of(fi);

    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (atomic_load(&fs->changed)) { /* set by gguf_changed at an open */
        fuse_reply_err(req, EIO);
        return;
    }
    const struct gfs_kind_ops *row = gfs_kind_row(fh->kind);
    if (row) {
        row->read(req, fs, fh, off, size);
        return;
    }
    if (fh->kind == GFS_KV) {
        if (fh->writable)
            read_draft(req, fs, fh, off, size);
        else
            gfs_read_text(req, fs, fh, off, size);
        return;
    }
    pthread_rwlock_rdlock(&fs->lock);
    read_scratch(req, fs, fh, off, size);
    pthread_rwlock_unlock(&fs->lock);
}

/* Makes fh's draft hold the value before it is changed: copies the first
 * keep bytes of the text taken at open (all of it: SIZE_MAX) unless that
 * was done.  The text may be longer than the cap (a value already in the
 * model): a change that would copy more than fs->max_value bytes is
 * EFBIG.  Caller holds fh->mu.  0 or errno. */
static int draft_load(struct gfs *fs, struct gfs_fh *fh, size_t keep) {
    if (fh->loaded)
        return 0;
    size_t n = fh->text->len < keep ? fh->text->len : keep;
    if (n > fs->max_value)
        return EFBIG;
    int e = gfs_mem_grant(fs, &fh->granted, n);
    if (e)
        return e;
    if ((e = gfs_text_read(fs, fh->text, 0, n, &fh->draft)))
        return e;
    fh->loaded = 1;
    gfs_text_put(fh->text);
    fh->text = NULL;
    return 0;
}

/* Writes into buf at off, zero-filling any gap. */
static int buf_pwrite(struct gguf_buf *b, const char *p, size_t n, off_t off) {
    size_t end = (size_t)off + n;
    if (end > b->len) {
        if (gguf_buf_reserve(b, end - b->len) != GGUF_OK)
            return ENOMEM;
        if ((size_t)off > b->len)
            memset(b->p + b->len, 0, (size_t)off - b->len);
        b->len = end;
    }
    memcpy(b->p + off, p, n);
    return 0;
}

static int write_scratch(struct gfs *fs, fuse_ino_t ino, const char *p,
                         size_t n, off_t off) {
    pthread_rwlock_wrlock(&fs->lock);
    struct gfs_scratch *sc = gfs_meta_scratch_by_ino(fs, ino);
    size_t end = (size_t)off + n;
    int err = !sc                                 ? ENOENT
              : (uint64_t)off + n > fs->max_value ? EFBIG
              : end > sc->data.len ? gfs_mem_grant(fs, &sc->granted, end)
                                   : 0;
    if (!err)
        err = buf_pwrite(&sc->data, p, n, off);
    if (sc)
        clock_gettime(CLOCK_REALTIME, &sc->mtime);
    pthread_rwlock_unlock(&fs->lock);
    return err;
}

/* Validates the draft's complete lines now, so a shell sees EINVAL at
 * write; a refusal marks the handle bad and is recorded on the key.
 * Caller holds fh->mu; takes fs->lock. */
static int draft_check(struct gfs *fs, struct gfs_fh *fh) {
    struct gguf_error gerr = {0};
    int err = 0;
    pthread_rwlock_rdlock(&fs->lock);
    int64_t i = gfs_kv_index(fs, fh->ino);
    if (i < 0) {
        err = ENOENT;
    } else if (gguf_text_check_prefix(gguf_kv_type(fs->ctx, i),
                                      gguf_kv_arr_type(fs->ctx, i),
                                      (char *)fh->draft.p, fh->draft.len,
                                      &fh->checked, &gerr) != GGUF_OK) {
        err = gfs_errno(&gerr);
        fh->bad = err;
        size_t klen;
        const char *key = gguf_kv_key(fs->ctx, i, &klen);
        char q[GGUF_QUOTE_MAX];
        gfs_log(fs, "%s: refused write to '%s': %s", fs->path,
                gguf_quote(q, sizeof q, key, klen), gerr.msg);
        pthread_rwlock_unlock(&fs->lock);
        pthread_rwlock_wrlock(&fs->lock);
        i = gfs_kv_index(fs, fh->ino);
        if (i >= 0)
            gfs_meta_set_error(fs, gguf_kv_id(fs->ctx, i), gerr.msg);
    }
    pthread_rwlock_unlock(&fs->lock);
    return err;
}

void gfs_op_write(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, const char *p,
                  size_t n, off_t off, struct fuse_file_info *fi) {
    (void)ino; /* fh->ino was resolved at open */
    struct gfs_fh *fh = fh_of(fi);
    int err = 0;

    /* The cap, before anything is allocated.  A refused write leaves a
     * key's draft half-made: never applied (bad), the key keeps its
     * value. */
    if (off < 0 || (uint64_t)off + n > fs->max_value) {
        if (fh->kind == GFS_KV && fh->writable) {
            pthread_mutex_lock(&fh->mu);
            /* an untouched draft is never applied; a key made by this
             * create is dropped at release (gfs_meta_drop_new) */
            if (fh->dirty || fh->created)
                fh->bad = EFBIG;
            pthread_mutex_unlock(&fh->mu);
        }
        fuse_reply_err(req, EFBIG);
        return;
    }
    if (fh->kind == GFS_SCRATCH) {
        err = write_scratch(fs, fh->ino, p, n, off);
        goto out;
    }
    if (fh->kind != GFS_KV || !fh->writable) {
        err = EBADF;
        goto out;
    }
    pthread_mutex_lock(&fh->mu);
    if (fh->bad) {
        err = fh->bad;
        goto unlock;
    }
    if ((size_t)off < fh->checked)
        fh->checked = 0; /* rewriting validated text: check again */
    if ((err = draft_load(fs, fh, SIZE_MAX)) ||
        ((size_t)off + n > fh->draft.len &&
         (err = gfs_mem_grant(fs, &fh->granted, (size_t)off + n))) ||
        (err = buf_pwrite(&fh->draft, p, n, off))) {
        if (fh->dirty || fh->created) /* half-made (or emptied by O_TRUNC):
                                          never applied */
            fh->bad = err;
        goto unlock;
    }
    fh->dirty = 1;
    fh->written = 1;
    err = draft_check(fs, fh);
unlock:
    pthread_mutex_unlock(&fh->mu);
out:
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_write(req, n);
}

int gfs_fh_truncate(struct gfs *fs, struct gfs_fh *fh, fuse_ino_t ino,
                    off_t size) {
    int err = 0;
    if (size < 0 || (uint64_t)size > fs->max_value)
        return EFBIG; /* before anything is allocated */
    if (!fh || fh->kind != GFS_KV || !fh->writable) {
        pthread_rwlock_wrlock(&fs->lock);
        err = gfs_meta_truncate(fs, ino, size);
        gfs_meta_unlock(fs);
        return err;
    }
    pthread_mutex_lock(&fh->mu);
    size_t ns = (size_t)size;
    if ((err = draft_load(fs, fh, ns)))
        goto unlock;
    if (ns > fh->draft.len && (err = gfs_mem_grant(fs, &fh->granted, ns)))
        goto unlock;
    if (ns <= fh->draft.len) {
        fh->draft.len = ns;
    } else if (gguf_buf_reserve(&fh->draft, ns - fh->draft.len) == GGUF_OK) {
        memset(fh->draft.p + fh->draft.len, 0, ns - fh->draft.len);
        fh->draft.len = ns;
    } else {
        err = ENOMEM;
    }
    if (fh->checked > ns)
        fh->checked = 0;
    fh->dirty = 1;
    fh->written = 1;
unlock:
    pthread_mutex_unlock(&fh->mu);
    return err;
}

void gfs_op_flush(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                  struct fuse_file_info *fi) {
    (void)ino;
    fuse_reply_err(req, fh_apply(fs, fh_of(fi), 1));
}

void gfs_op_release(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                    struct fuse_file_info *fi) {
    (void)ino;
    struct gfs_fh *fh = fh_of(fi);
    if (fh_apply(fs, fh, 0) && fh->created) {
        pthread_rwlock_wrlock(&fs->lock);
        gfs_meta_drop_new(fs, fh->ino);
        gfs_meta_unlock(fs);
    }
    fh_free(fs, fh);
    fuse_reply_err(req, 0);
}

void gfs_op_fsync(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, int datasync,
                  struct fuse_file_info *fi) {
    (void)ino;
    (void)datasync;
    struct gfs_fh *fh = fh_of(fi);
    if (fh->kind == GFS_KV && !fs->readonly && !gfs_may_commit(fs, req)) {
        fuse_reply_err(req, EACCES);
        return;
    }
    /* fsync means "durable", not "publish": the edit is applied and kept
     * as the pending record (which survives the daemon), and nothing is
     * committed, so that one editor's fsync never commits another's
     * half-done state.  fsync of meta/ or the root commits. */
    int err = fh->kind == GFS_KV ? fh_apply(fs, fh, 0) : 0;
    if (!err && !fs->readonly && fh->kind == GFS_KV) {
        pthread_rwlock_wrlock(&fs->lock);
        err = gfs_meta_keep(fs);
        pthread_rwlock_unlock(&fs->lock);
    }
    fuse_reply_err(req, err);
}
