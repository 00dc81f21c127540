/*
 * metafiles.c - the files of meta/, as two rows of the kinds' table
 * (kinds.h):
 *   keys (GFS_KV): meta/KEY, the value's text (tree.c renders it).  A
 *     writable open edits a private draft, copied from the text at the
 *     first write or truncate and applied at flush and release
 *     (metaedit.c makes the edit, the store keeps it); fsync applies it
 *     and keeps it durable without committing.  Extended attributes:
 *     user.gguf.type (the value type, "uint32", "array[string]"; set to
 *     change it) and user.gguf.error (why the last edit was refused).
 *   FILEs (GFS_SCRATCH): meta/X whose name is not a key (an editor's
 *     temporary or backup file: metanames.c), held in memory, never
 *     committed.
 * Both are edited in place by tools: modes and the mounter's chown are
 * accepted and ignored (ops.c's setattr), and their sizes follow the
 * edits.
 *
 * Locks (see struct gfs): fh->mu, then fs->lock, then fs->fh_lock or
 * fs->text_lock.
 */
#include "../base/base.h"
#include "../kinds.h"
#include "../edits/edits.h"
#include "meta.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- keys ------------------------------------------------------------ */

static int kv_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    int64_t i = gfs_kv_index(fs, ino);
    if (i < 0)
        return ENOENT;
    uint64_t size = 0;
    int err = gfs_text_size(fs, i, &size);
    if (err)
        return err;
    st->st_mode = S_IFREG | (fs->readonly ? 0444 : 0644);
    st->st_nlink = 1;
    st->st_size = (off_t)size;
    st->st_blocks = (st->st_size + 511) / 512;
    return 0;
}

/* Caller holds fs->lock: for writing when the open may write (a refusal
 * is recorded in user.gguf.error). */
static int kv_open(struct gfs *fs, struct gfs_fh *fh, struct fuse_file_info *fi,
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

/* Nothing of fh may be touched once the reply is sent: the kernel can
 * release the handle on another thread right then.  So a draft's bytes
 * are copied out first.  Opened read-only: the text snapshot taken at
 * open (a windowed text: the value as it was at open, or ESTALE);
 * opened for writing: its draft (the text at open until the first write
 * or truncate). */
static void kv_read(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh,
                    off_t off, size_t size) {
    if (!fh->writable) {
        gfs_read_text(req, fs, fh, off, size);
        return;
    }
    pthread_mutex_lock(&fh->mu);
    if (!fh->loaded && fh->text->windowed) {
        gfs_reply_window(req, fs, fh->text, off, size);
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

/* Applies a writable handle's draft to the key; 0 or errno.  A flush
 * (quiet) that fails leaves the draft pending: the file may still be
 * written to through a dup'ed descriptor.  The last word is release's.
 * Takes fh->mu, then fs->lock for writing. */
static int fh_apply(struct gfs *fs, struct gfs_fh *fh, int quiet) {
    int err = 0;
    pthread_mutex_lock(&fh->mu);
    if (fh->writable && fh->dirty && !fh->bad && (fh->written || !quiet)) {
        gfs_edit_begin(fs);
        int64_t i = gfs_kv_index(fs, fh->ino);
        err = i < 0 ? ENOENT
                    : gfs_meta_apply_text(fs, i, (char *)fh->draft.p,
                                          fh->draft.len, quiet);
        gfs_edit_end(fs);
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
        gfs_edit_begin(fs); /* the refusal recorded: no edit */
        i = gfs_kv_index(fs, fh->ino);
        if (i >= 0)
            gfs_meta_set_error(fs, gguf_kv_id(fs->ctx, i), gerr.msg);
        gfs_edit_abort(fs);
        return err;
    }
    pthread_rwlock_unlock(&fs->lock);
    return err;
}

/* The cap, before anything is allocated.  A refused write leaves a key's
 * draft half-made: never applied (bad), the key keeps its value. */
static int kv_write(struct gfs *fs, struct gfs_fh *fh, const char *p, size_t n,
                    off_t off) {
    int err = 0;
    if (gfs_write_over_cap(fs, off, n)) {
        if (fh->writable) {
            pthread_mutex_lock(&fh->mu);
            /* an untouched draft is never applied; a key made by this
             * create is dropped at release (gfs_meta_drop_new) */
            if (fh->dirty || fh->created)
                fh->bad = EFBIG;
            pthread_mutex_unlock(&fh->mu);
        }
        return EFBIG;
    }
    if (!fh->writable)
        return EBADF;
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
    return err;
}

/* Cuts fh's draft to size.  Caller checked the cap. */
static int draft_truncate(struct gfs *fs, struct gfs_fh *fh, off_t size) {
    int err = 0;
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

/* truncate and ftruncate of a key or a FILE: through fh (may be NULL), a
 * writable key's draft is cut; otherwise the value itself changes. */
static int meta_truncate(struct gfs *fs, struct gfs_fh *fh, fuse_ino_t ino,
                         off_t size) {
    if (size < 0 || (uint64_t)size > fs->max_value)
        return EFBIG; /* before anything is allocated */
    if (fh && fh->kind == GFS_KV && fh->writable)
        return draft_truncate(fs, fh, size);
    gfs_edit_begin(fs);
    int err = gfs_meta_truncate(fs, ino, size);
    gfs_edit_end(fs);
    return err;
}

static int kv_flush(struct gfs *fs, struct gfs_fh *fh) {
    return fh_apply(fs, fh, 1);
}

static void kv_release(struct gfs *fs, struct gfs_fh *fh) {
    if (fh_apply(fs, fh, 0) && fh->created) {
        gfs_edit_begin(fs);
        gfs_meta_drop_new(fs, fh->ino);
        gfs_edit_end(fs);
    }
}

/* fsync means "durable", not "publish": the edit is applied and kept as
 * the pending record (which survives the daemon), and nothing is
 * committed, so that one editor's fsync never commits another's
 * half-done state.  fsync of meta/ or the root commits. */
static int kv_fsync(struct gfs *fs, fuse_req_t req, struct gfs_fh *fh) {
    if (fs->readonly)
        return fh_apply(fs, fh, 0);
    if (!gfs_edits_may_commit(fs, fuse_req_ctx(req)->uid))
        return EACCES;
    int err = fh_apply(fs, fh, 0);
    if (!err) {
        gfs_edit_begin(fs);
        err = gfs_edit_end(fs); /* the keep's status */
    }
    return err;
}

/* A draft still dirty at unmount was never applied by a flush: its
 * writer had not closed it, so it may be half a value. */
static int kv_lost(struct gfs *fs, struct gfs_fh *fh, char *line, size_t size) {
    if (!fh->writable || !fh->dirty)
        return 0;
    char q[GGUF_QUOTE_MAX];
    size_t klen = 0;
    const char *key = NULL;
    pthread_rwlock_rdlock(&fs->lock);
    int64_t i = gfs_kv_index(fs, fh->ino);
    if (i >= 0)
        key = gguf_kv_key(fs->ctx, i, &klen);
    snprintf(line, size,
             "meta/%s: %zu bytes still being written at unmount, not "
             "committed",
             key ? gguf_quote(q, sizeof q, key, klen) : "?",
             fh->loaded ? fh->draft.len : (size_t)0);
    pthread_rwlock_unlock(&fs->lock);
    return 1;
}

static int kv_getxattr(struct gfs *fs, fuse_ino_t ino, const char *name,
                       struct gguf_buf *out) {
    char tmp[64];
    int64_t i = gfs_kv_index(fs, ino);
    if (i < 0)
        return ENOENT;
    if (strcmp(name, "user.gguf.error") == 0) {
        const char *e = gfs_meta_get_error(fs, gguf_kv_id(fs->ctx, i));
        return e ? gfs_add_str(out, e) : ENODATA;
    }
    if (strcmp(name, "user.gguf.type") != 0)
        return ENODATA;
    return gfs_add_str(out, gguf_kv_type_str(fs->ctx, i, tmp, sizeof tmp));
}

static int kv_listxattr(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out) {
    int64_t i = gfs_kv_index(fs, ino);
    if (i < 0)
        return ENOENT;
    if (gguf_buf_add(out, "user.gguf.type", 15) != GGUF_OK)
        return ENOMEM;
    if (gfs_meta_get_error(fs, gguf_kv_id(fs->ctx, i)) &&
        gguf_buf_add(out, "user.gguf.error", 16) != GGUF_OK)
        return ENOMEM;
    return 0;
}

static int kv_setxattr(struct gfs *fs, fuse_ino_t ino, const char *name,
                       const char *value, size_t size) {
    if (strcmp(name, "user.gguf.type") != 0)
        return ENOTSUP;
    if (fs->readonly)
        return EROFS;
    gfs_edit_begin(fs);
    int err = gfs_meta_set_type(fs, ino, value, size);
    gfs_edit_end(fs);
    return err;
}

const struct gfs_kind_ops gfs_kind_kv = {
    .kind = GFS_KV,
    .ino_lo = GFS_INO_KV,
    .ino_hi = GFS_INO_SCRATCH,
    .changes = 1,
    .editable = 1,
    .open_writes = 1,
    .stat = kv_stat,
    .open = kv_open,
    .read = kv_read,
    .write = kv_write,
    .truncate = meta_truncate,
    .flush = kv_flush,
    .release = kv_release,
    .fsync = kv_fsync,
    .lost = kv_lost,
    .getxattr = kv_getxattr,
    .listxattr = kv_listxattr,
    .setxattr = kv_setxattr,
};

/* ---- FILEs ----------------------------------------------------------- */

static int scratch_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    struct gfs_scratch *sc = gfs_meta_scratch_by_ino(fs, ino);
    if (!sc)
        return ENOENT;
    st->st_mode = S_IFREG | 0644;
    st->st_nlink = 1;
    st->st_size = (off_t)sc->data.len;
    st->st_mtim = st->st_ctim = sc->mtime;
    return 0;
}

/* Caller holds fs->lock, for writing when the open may write: an O_TRUNC
 * open empties the file. */
static int scratch_open(struct gfs *fs, struct gfs_fh *fh,
                        struct fuse_file_info *fi, int wants_write) {
    if (!gfs_meta_scratch_by_ino(fs, fh->ino))
        return ENOENT;
    if (wants_write && fs->readonly)
        return EROFS;
    fh->writable = wants_write;
    return fi->flags & O_TRUNC ? gfs_meta_truncate(fs, fh->ino, 0) : 0;
}

static void scratch_read(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh,
                         off_t off, size_t size) {
    pthread_rwlock_rdlock(&fs->lock);
    struct gfs_scratch *sc = gfs_meta_scratch_by_ino(fs, fh->ino);
    if (sc)
        gfs_reply_bytes(req, sc->data.p, sc->data.len, off, size);
    else
        fuse_reply_err(req, ENOENT);
    pthread_rwlock_unlock(&fs->lock);
}

static int scratch_write(struct gfs *fs, struct gfs_fh *fh, const char *p,
                         size_t n, off_t off) {
    if (gfs_write_over_cap(fs, off, n))
        return EFBIG;
    gfs_edit_begin(fs); /* a FILE is no edit of the model: nothing kept */
    struct gfs_scratch *sc = gfs_meta_scratch_by_ino(fs, fh->ino);
    size_t end = (size_t)off + n;
    int err = !sc                  ? ENOENT
              : end > sc->data.len ? gfs_mem_grant(fs, &sc->granted, end)
                                   : 0;
    if (!err)
        err = buf_pwrite(&sc->data, p, n, off);
    if (sc)
        clock_gettime(CLOCK_REALTIME, &sc->mtime);
    gfs_edit_abort(fs);
    return err;
}

const struct gfs_kind_ops gfs_kind_scratch = {
    .kind = GFS_SCRATCH,
    .ino_lo = GFS_INO_SCRATCH,
    .ino_hi = GFS_INO_F32,
    .changes = 1,
    .editable = 1,
    .open_writes = 1,
    .stat = scratch_stat,
    .open = scratch_open,
    .read = scratch_read,
    .write = scratch_write,
    .truncate = meta_truncate,
};
