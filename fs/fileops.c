/*
 * fileops.c - the FUSE handlers of open files (open, create, read, write,
 * flush, release, fsync) and their per-open state, struct gfs_fh.
 *
 * Each handler asks the row of the handle's kind (kinds.h) and replies;
 * what an open, a read or a write does is the row's (tensors.c,
 * metafiles.c, liveview.c, ...).
 *
 * Locks (see struct gfs): fh->mu, then fs->lock, then fs->fh_lock or
 * fs->text_lock.
 */
#include "base/base.h"
#include "edits/edits.h"
#include "ggufs.h"
#include "kinds.h"
#include "meta/meta.h"
#include "source/source.h"
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct gfs_fh *fh_of(const struct fuse_file_info *fi) {
    return (struct gfs_fh *)(uintptr_t)fi->fh;
}

/* A new handle for ino, listed in fs->open_fhs, owned by req's user (no
 * req: the command's own, nomount.c).  Takes fh_lock: the caller may hold
 * fs->lock, not fh_lock. */
static struct gfs_fh *fh_new(struct gfs *fs, fuse_req_t req, fuse_ino_t ino) {
    struct gfs_fh *fh = calloc(1, sizeof *fh);
    if (fh) {
        fh->uid = req ? fuse_req_ctx(req)->uid : getuid();
        fh->kind = gfs_kind(fs, ino);
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

size_t gfs_fh_close_all(struct gfs *fs, char *note, size_t size) {
    /* One handle at a time: fh_lock is a leaf, so it is not held while
     * fh->mu and fs->lock are taken.  The workers have stopped, so no
     * release frees the head between the two sections.  An edit a handle
     * still holds (a key's draft never applied by a flush: its writer had
     * not closed it, so it may be half a value, a chat template cut
     * mid-word, and committing it would publish a torn value) is
     * dropped, and said so (the row's lost); what flushes did apply stays
     * and is committed. */
    size_t dropped = 0;
    for (;;) {
        pthread_mutex_lock(&fs->fh_lock);
        struct gfs_fh *fh = fs->open_fhs;
        pthread_mutex_unlock(&fs->fh_lock);
        if (!fh)
            break;
        pthread_mutex_lock(&fh->mu);
        const struct gfs_kind_ops *row = gfs_kind_row(fs, fh->kind);
        char line[GGUF_QUOTE_MAX + 160];
        if (row && row->lost && row->lost(fs, fh, line, sizeof line)) {
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
    if (!fs->readonly || fs->remote) /* remote: checked by every request */
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

/* The row's open: prepares fh, sets fi's cache flags; 0 or errno.
 * Caller holds fs->lock as kinds.h says. */
static int fh_open(struct gfs *fs, struct gfs_fh *fh,
                   struct fuse_file_info *fi) {
    const struct gfs_kind_ops *row = gfs_kind_row(fs, fh->kind);
    int wants_write = open_wants_write(fi);
    if (!row)
        return ENOENT;
    if (!row->open)
        return EISDIR;
    if (wants_write && !row->write) /* a file no one writes: read-only */
        return fs->readonly ? EROFS : EACCES;
    return row->open(fs, fh, fi, wants_write);
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
    struct gfs_fh *fh = fh_new(fs, req, ino);
    if (!fh) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    const struct gfs_kind_ops *row = gfs_kind_row(fs, fh->kind);
    if (row && row->owner_writes && row->write && open_wants_write(fi) &&
        !gfs_may_commit(fs, req)) {
        fh_free(fs, fh);
        fuse_reply_err(req, EACCES);
        return;
    }
    /* An open that may write is a section: an O_TRUNC empties a FILE of
     * meta/, an overlay's tensor is recorded (kept there: tensorw.c). */
    int writes = row && row->open_writes && open_wants_write(fi);
    if (writes)
        gfs_edit_begin(fs);
    else
        pthread_rwlock_rdlock(&fs->lock);
    int err = fh_open(fs, fh, fi);
    if (writes)
        gfs_edit_abort(fs);
    else
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
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, parent);
    if (!row || !row->create) {
        fuse_reply_err(req, row ? EACCES : ENOENT);
        return;
    }
    gfs_edit_begin(fs);
    err = row->create(fs, parent, name, &ino);
    if (!err && !(fh = fh_new(fs, req, ino)))
        err = ENOMEM;
    if (!err)
        fh->created = 1;
    if (!err)
        err = fh_open(fs, fh, fi);
    if (!err)
        err = gfs_fill_entry(fs, ino, &e);
    gfs_edit_end(fs);
    if (err) {
        fh_free(fs, fh);
        fuse_reply_err(req, err);
        return;
    }
    reply_open(fs, req, fi, fh, &e);
}

void gfs_op_read(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, size_t size,
                 off_t off, struct fuse_file_info *fi) {
    (void)ino;
    struct gfs_fh *fh = fh_of(fi);

    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (atomic_load(&fs->changed)) { /* set by file_changed at an open */
        fuse_reply_err(req, EIO);
        return;
    }
    gfs_kind_row(fs, fh->kind)->read(req, fs, fh, off, size); /* opened */
}

void gfs_op_write(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, const char *p,
                  size_t n, off_t off, struct fuse_file_info *fi) {
    (void)ino; /* fh->ino was resolved at open */
    struct gfs_fh *fh = fh_of(fi);
    const struct gfs_kind_ops *row = gfs_kind_row(fs, fh->kind);
    if (row->write_req) {
        row->write_req(fs, req, fh, p, n, off);
        return;
    }
    int err = row->write                       ? row->write(fs, fh, p, n, off)
              : gfs_write_over_cap(fs, off, n) ? EFBIG
                                               : EBADF;
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_write(req, n);
}

void gfs_op_flush(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                  struct fuse_file_info *fi) {
    (void)ino;
    struct gfs_fh *fh = fh_of(fi);
    const struct gfs_kind_ops *row = gfs_kind_row(fs, fh->kind);
    fuse_reply_err(req, row->flush ? row->flush(fs, fh) : 0);
}

struct gfs_text *gfs_open_text(struct gfs *fs, fuse_ino_t ino, int *err) {
    struct fuse_file_info fi = {.flags = O_RDONLY};
    struct gfs_fh *fh = fh_new(fs, NULL, ino);
    struct gfs_text *t = NULL;
    if (!fh) {
        *err = ENOMEM;
        return NULL;
    }
    pthread_rwlock_rdlock(&fs->lock);
    *err = fh_open(fs, fh, &fi);
    pthread_rwlock_unlock(&fs->lock);
    if (!*err && !(t = fh->text))
        *err = EISDIR; /* bytes that are no text (a tensor, a view) */
    if (t)
        atomic_fetch_add(&t->refs, 1);
    const struct gfs_kind_ops *row = gfs_kind_row(fs, fh->kind);
    if (!*err && row->release)
        row->release(fs, fh);
    fh_free(fs, fh);
    return t;
}

void gfs_op_release(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                    struct fuse_file_info *fi) {
    (void)ino;
    struct gfs_fh *fh = fh_of(fi);
    const struct gfs_kind_ops *row = gfs_kind_row(fs, fh->kind);
    if (row->release)
        row->release(fs, fh);
    fh_free(fs, fh);
    fuse_reply_err(req, 0);
}

void gfs_op_fsync(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, int datasync,
                  struct fuse_file_info *fi) {
    (void)ino;
    (void)datasync;
    struct gfs_fh *fh = fh_of(fi);
    const struct gfs_kind_ops *row = gfs_kind_row(fs, fh->kind);
    fuse_reply_err(req, row->fsync ? row->fsync(fs, req, fh) : 0);
}
