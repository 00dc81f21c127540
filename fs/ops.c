/*
 * ops.c - the FUSE low-level handlers of ggufs (prefix gfs_).
 *
 * Handlers translate between inodes and the library; the data path for
 * tensors replies with a file-descriptor buffer on the GGUF itself, so libfuse
 * reads (or splices) straight from the backing file without our own copy.
 */
#include "ggufs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Chunk in which the GGUF's pages are dropped after serving: ext4 caches
 * big files in 2 MiB folios, and POSIX_FADV_DONTNEED skips partial ones. */
#define GFS_DROP_CHUNK (UINT64_C(2) << 20)

static struct gfs *gfs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* True if [off, off+len) of fd is entirely in the page cache (cachestat,
 * Linux 6.5+); false when unknown. */
static int range_cached(int fd, uint64_t off, uint64_t len)
{
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
    struct { uint64_t off, len; } range = { off, len };
    struct { uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted,
                      nr_recently_evicted; } cs;
    if (len == 0)
        return 1;
    if (syscall(SYS_cachestat, fd, &range, &cs, 0) != 0)
        return 0;
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t pages = (off + len + pg - 1) / pg - off / pg;
    return cs.nr_cache >= pages;
}

static void gfs_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    /* Large requests: libfuse sizes its buffers from max_write; 252 pages
     * keeps a reply under the 1 MiB at which libfuse 3.14 stops splicing.
     * The kernel's readahead (set per mount in main.c) decides how much
     * one read asks for. */
    conn->max_write = 252 * 4096;
    conn->max_readahead = 252 * 4096;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
    /* O_TRUNC arrives with open: `echo x > f` is one edit, not two. */
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
}

/* Unmount: edits still pending are committed; a failure saves them beside
 * the GGUF (gfs_commit says where) and makes ggufs exit non-zero. */
static int fh_apply(struct gfs *fs, struct gfs_fh *fh, int quiet);

static void gfs_destroy(void *userdata)
{
    struct gfs *fs = userdata;
    /* Files still open when the mount goes away get no release: their
     * writes must not be lost. */
    pthread_mutex_lock(&fs->fh_lock);
    for (struct gfs_fh *fh = fs->open_fhs; fh; fh = fh->next)
        if (fh->writable)
            fh_apply(fs, fh, 0);
    pthread_mutex_unlock(&fs->fh_lock);
    pthread_rwlock_wrlock(&fs->lock);
    gfs_commit(fs);
    pthread_rwlock_unlock(&fs->lock);
}

/* Meta files of a writable mount change size when an edit is applied (the
 * text is rendered anew): never let the kernel trust a stale size. */
static double attr_timeout(const struct gfs *fs, fuse_ino_t ino)
{
    enum gfs_kind k = gfs_kind(ino);
    if (!fs->readonly && (k == GFS_KV || k == GFS_SCRATCH || k == GFS_DIR_META ||
                          k == GFS_LIVE))
        return 0.0;
    return fs->timeout;
}

static int fill_entry(struct gfs *fs, fuse_ino_t ino, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    int err = gfs_stat(fs, ino, &e->attr);
    if (err)
        return err;
    e->ino = ino;
    e->generation = 1;
    e->attr_timeout = attr_timeout(fs, ino);
    e->entry_timeout = fs->timeout;
    return 0;
}

static void gfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct gfs *fs = gfs_of(req);
    struct fuse_entry_param e;
    fuse_ino_t ino = 0;

    pthread_rwlock_rdlock(&fs->lock);
    int err = gfs_lookup_name(fs, parent, name, &ino);
    if (!err)
        err = fill_entry(fs, ino, &e);
    pthread_rwlock_unlock(&fs->lock);
    if (err == ENOENT && !fs->readonly) {
        /* Negative entries are not cached: a key may appear by an edit. */
        memset(&e, 0, sizeof e);
        fuse_reply_entry(req, &e);
        return;
    }
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_entry(req, &e);
}

static void gfs_getattr(fuse_req_t req, fuse_ino_t ino,
                        struct fuse_file_info *fi)
{
    (void)fi;
    struct gfs *fs = gfs_of(req);
    struct stat st;
    pthread_rwlock_rdlock(&fs->lock);
    int err = gfs_stat(fs, gfs_resolve(fs, ino), &st);
    pthread_rwlock_unlock(&fs->lock);
    st.st_ino = ino;
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, attr_timeout(fs, ino));
}

static void gfs_opendir(fuse_req_t req, fuse_ino_t ino,
                        struct fuse_file_info *fi)
{
    switch (gfs_kind(ino)) {
    case GFS_ROOT:
    case GFS_DIR_META:
    case GFS_DIR_TENSORS:
        fi->cache_readdir = gfs_of(req)->readonly;
        fi->keep_cache = gfs_of(req)->readonly;
        fuse_reply_open(req, fi);
        return;
    case GFS_NONE:
        fuse_reply_err(req, ENOENT);
        return;
    default:
        fuse_reply_err(req, ENOTDIR);
        return;
    }
}

/* Appends one entry if it fits; returns 0 when the buffer is full. */
static int add_dirent(fuse_req_t req, struct gguf_buf *b, size_t max,
                      const char *name, fuse_ino_t ino, mode_t mode, off_t next)
{
    struct stat st = { .st_ino = ino, .st_mode = mode };
    size_t need = fuse_add_direntry(req, NULL, 0, name, NULL, 0);
    if (b->len + need > max)
        return 0;
    if (gguf_buf_reserve(b, need) != GGUF_OK)
        return 0;
    fuse_add_direntry(req, (char *)b->p + b->len, need, name, &st, next);
    b->len += need;
    return 1;
}

static void gfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
                        off_t off, struct fuse_file_info *fi)
{
    (void)fi;
    struct gfs *fs = gfs_of(req);
    struct gguf_buf out = {0}, name = {0};
    enum gfs_kind kind = gfs_kind(ino);
    int err = 0;

    pthread_rwlock_rdlock(&fs->lock);
    /* Entry k (0-based) has offset k+1: ".", "..", then the children. */
    int64_t n = kind == GFS_ROOT ? (fs->live_name ? 3 : 2)
              : kind == GFS_DIR_META ? gguf_n_kv(fs->ctx)
              : kind == GFS_DIR_TENSORS ? gfs_n_tensors(fs) : -1;
    if (n < 0) {
        err = ENOTDIR;
        goto out;
    }
    int64_t n_keys = n;
    if (kind == GFS_DIR_META)
        for (struct gfs_scratch *sc = fs->scratch; sc; sc = sc->next)
            n++;
    struct gfs_scratch *sc = fs->scratch;
    for (int64_t k = 2 + n_keys; k < off && sc; k++)
        sc = sc->next;
    for (int64_t k = off; k < n + 2; k++) {
        const char *nm;
        fuse_ino_t child;
        mode_t mode = S_IFREG;
        if (k == 0) {
            nm = ".";
            child = ino;
            mode = S_IFDIR;
        } else if (k == 1) {
            nm = "..";
            child = GFS_INO_ROOT;
            mode = S_IFDIR;
        } else if (kind == GFS_ROOT && k == 4) {
            nm = fs->live_name;
            child = GFS_INO_LIVE;
        } else if (kind == GFS_ROOT) {
            nm = k == 2 ? "meta" : "tensors";
            child = k == 2 ? GFS_INO_META : GFS_INO_TENSORS;
            mode = S_IFDIR;
        } else if (kind == GFS_DIR_META && k - 2 >= n_keys) {
            if (!sc)
                break;
            nm = sc->name;
            child = sc->ino;
            sc = sc->next;
        } else if (kind == GFS_DIR_META) {
            if (gfs_kv_hidden(fs, k - 2))
                continue;
            if ((err = gfs_kv_fname(fs, k - 2, &name)))
                goto out;
            nm = (char *)name.p;
            child = GFS_INO_KV + gguf_kv_id(fs->ctx, k - 2);
        } else {
            if ((err = gfs_tensor_fname(fs, k - 2, &name)))
                goto out;
            nm = (char *)name.p;
            child = GFS_INO_TENSOR + (fuse_ino_t)(k - 2);
        }
        if (!add_dirent(req, &out, size, nm, child, mode, k + 1))
            break;
    }
out:
    pthread_rwlock_unlock(&fs->lock);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, (char *)out.p, out.len);
    gguf_buf_free(&out);
    gguf_buf_free(&name);
}

static struct gfs_fh *fh_new(struct gfs *fs, fuse_ino_t ino)
{
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

static void fh_free(struct gfs *fs, struct gfs_fh *fh)
{
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
    gfs_text_put(fh->text);
    gguf_buf_free(&fh->draft);
    pthread_mutex_destroy(&fh->mu);
    free(fh);
}

void gfs_fh_free_all(struct gfs *fs)
{
    while (fs->open_fhs)
        fh_free(fs, fs->open_fhs);
}

/* Prepares fh for ino; caller holds the lock (read, or write for O_TRUNC
 * of scratch files). */
static int fh_open(struct gfs *fs, struct gfs_fh *fh, struct fuse_file_info *fi)
{
    int wants_write = (fi->flags & O_ACCMODE) != O_RDONLY ||
                      (fi->flags & O_TRUNC);
    int err = 0;
    switch (fh->kind) {
    case GFS_TENSOR: {
        int64_t i = gfs_tensor_index(fs, fh->ino);
        if (i < 0)
            return ENOENT;
        if (wants_write)
            return fs->readonly ? EROFS : EACCES;
        int64_t j;
        gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, &fh->shard);
        fh->rel = gguf_tensor_rel_offset(c, j);
        fh->size = gguf_tensor_size(c, j);
        /* Tensor bytes never change while mounted: keep the page cache.
         * Then the GGUF's own copy of bytes that were not cached before is
         * dead weight (the kernel would hold every byte twice). */
        fi->keep_cache = 1;
        fi->noflush = 1;
        fh->drop = !range_cached(gguf_fd(c), gguf_tensor_offset(c, j), fh->size);
        return 0;
    }
    case GFS_KV: {
        int64_t i = gfs_kv_index(fs, fh->ino);
        if (i < 0)
            return ENOENT;
        if (wants_write && fs->readonly)
            return EROFS;
        struct gfs_text *t = gfs_text_get(fs, i, &err);
        if (!t)
            return err;
        /* On a read-write mount the kernel's page cache of a meta file
         * would show one opener's unapplied writes to another: every read
         * and write comes to us instead, readers see applied values only. */
        fi->direct_io = !fs->readonly;
        if (!wants_write) {
            fh->text = t;
            return 0;
        }
        /* A writable open edits a private draft, applied at flush. */
        fh->writable = 1;
        if (fi->flags & O_TRUNC)
            fh->dirty = 1;
        else if (gguf_buf_add(&fh->draft, t->data, t->len) != GGUF_OK)
            err = ENOMEM;
        gfs_text_put(t);
        return err;
    }
    case GFS_LIVE:
        if (wants_write)
            return fs->readonly ? EROFS : EACCES;
        if (!(fh->text = gfs_live_header(fs, &err)))
            return err;
        /* Keep the page cache only while the header has not changed since
         * the last open: an edit must show up in a fresh open (and mmap). */
        fi->noflush = 1;
        if (fs->n_shards == 1) {
            uint64_t d = gguf_data_offset(fs->ctx), fsz = gguf_file_size(fs->ctx);
            fh->drop = fsz > d && !range_cached(gguf_fd(fs->ctx), d, fsz - d);
        }
        pthread_mutex_lock(&fs->text_lock);
        fi->keep_cache = fs->live_opened_gen == fs->generation;
        fs->live_opened_gen = fs->generation;
        pthread_mutex_unlock(&fs->text_lock);
        return 0;
    case GFS_SCRATCH:
        if (!gfs_scratch_by_ino(fs, fh->ino))
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

static void reply_open(fuse_req_t req, struct fuse_file_info *fi,
                       struct gfs_fh *fh, const struct fuse_entry_param *e)
{
    fi->fh = (uintptr_t)fh;
    int r = e ? fuse_reply_create(req, e, fi) : fuse_reply_open(req, fi);
    if (r == -ENOENT)
        fh_free(gfs_of(req), fh); /* interrupted: no release will come */
}

static void gfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct gfs *fs = gfs_of(req);
    pthread_rwlock_rdlock(&fs->lock);
    ino = gfs_resolve(fs, ino);
    pthread_rwlock_unlock(&fs->lock);
    struct gfs_fh *fh = fh_new(fs, ino);
    if (!fh) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    int trunc_scratch = fh->kind == GFS_SCRATCH && (fi->flags & O_TRUNC);
    if (trunc_scratch)
        pthread_rwlock_wrlock(&fs->lock);
    else
        pthread_rwlock_rdlock(&fs->lock);
    int err = fh_open(fs, fh, fi);
    if (!err && trunc_scratch && !fs->readonly)
        err = gfs_truncate(fs, ino, 0);
    pthread_rwlock_unlock(&fs->lock);
    if (err) {
        fh_free(fs, fh);
        fuse_reply_err(req, err);
        return;
    }
    reply_open(req, fi, fh, NULL);
}

static void gfs_create_op(fuse_req_t req, fuse_ino_t parent, const char *name,
                          mode_t mode, struct fuse_file_info *fi)
{
    (void)mode;
    struct gfs *fs = gfs_of(req);
    struct fuse_entry_param e;
    struct gfs_fh *fh = NULL;
    fuse_ino_t ino = 0;
    int err;

    if (fs->readonly) {
        fuse_reply_err(req, EROFS);
        return;
    }
    if (gfs_kind(parent) != GFS_DIR_META) {
        fuse_reply_err(req, gfs_kind(parent) == GFS_NONE ? ENOENT : EACCES);
        return;
    }
    pthread_rwlock_wrlock(&fs->lock);
    err = gfs_create(fs, name, &ino);
    if (!err && !(fh = fh_new(fs, ino)))
        err = ENOMEM;
    if (!err)
        err = fh_open(fs, fh, fi);
    if (!err)
        err = fill_entry(fs, ino, &e);
    pthread_rwlock_unlock(&fs->lock);
    if (err) {
        fh_free(fs, fh);
        fuse_reply_err(req, err);
        return;
    }
    reply_open(req, fi, fh, &e);
}

static void gfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                      mode_t mode, dev_t rdev)
{
    (void)rdev;
    struct gfs *fs = gfs_of(req);
    struct fuse_entry_param e;
    fuse_ino_t ino = 0;
    if (!S_ISREG(mode)) {
        fuse_reply_err(req, EPERM);
        return;
    }
    if (fs->readonly || gfs_kind(parent) != GFS_DIR_META) {
        fuse_reply_err(req, fs->readonly ? EROFS : EACCES);
        return;
    }
    pthread_rwlock_wrlock(&fs->lock);
    int err = gfs_create(fs, name, &ino);
    if (!err)
        err = fill_entry(fs, ino, &e);
    pthread_rwlock_unlock(&fs->lock);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_entry(req, &e);
}

static void reply_bytes(fuse_req_t req, const void *p, size_t len, off_t off,
                        size_t size)
{
    size_t o = (uint64_t)off < len ? (size_t)off : len;
    size_t n = len - o < size ? len - o : size;
    fuse_reply_buf(req, (const char *)p + o, n);
}

static void gfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    (void)ino;
    struct gfs *fs = gfs_of(req);
    struct gfs_fh *fh = (struct gfs_fh *)(uintptr_t)fi->fh;

    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    /* Nothing of fh may be touched once the reply is sent: the kernel can
     * release the handle on another thread right then.  So hold our own
     * reference on the text, and copy a draft's bytes out first. */
    if (fh->kind == GFS_KV && !fh->writable) {
        struct gfs_text *t = fh->text;
        atomic_fetch_add(&t->refs, 1);
        reply_bytes(req, t->data, t->len, off, size);
        gfs_text_put(t);
        return;
    }
    if (fh->kind == GFS_KV) {
        pthread_mutex_lock(&fh->mu);
        size_t o = (uint64_t)off < fh->draft.len ? (size_t)off : fh->draft.len;
        size_t n = fh->draft.len - o < size ? fh->draft.len - o : size;
        char *copy = malloc(n ? n : 1);
        if (copy && n)
            memcpy(copy, fh->draft.p + o, n);
        pthread_mutex_unlock(&fh->mu);
        if (copy)
            fuse_reply_buf(req, copy, n);
        else
            fuse_reply_err(req, ENOMEM);
        free(copy);
        return;
    }
    pthread_rwlock_rdlock(&fs->lock);
    if (fh->kind == GFS_SCRATCH) {
        struct gfs_scratch *sc = gfs_scratch_by_ino(fs, fh->ino);
        if (sc)
            reply_bytes(req, sc->data.p, sc->data.len, off, size);
        else
            fuse_reply_err(req, ENOENT);
        pthread_rwlock_unlock(&fs->lock);
        return;
    }
    uint64_t rel = fh->rel, fsize = fh->size;
    /* Up to two pieces: the live view's header (memory), then file bytes.
     * A reply must be complete: the kernel takes a short read for EOF. */
    struct {
        struct fuse_bufvec v;
        struct fuse_buf more;
    } bv = { .v = FUSE_BUFVEC_INIT(0) };
    struct fuse_buf *fb = &bv.v.buf[0];
    if (fh->kind == GFS_LIVE && fs->n_shards > 1) {
        /* A shard set's merged view gathers pieces of several files: copy. */
        uint64_t h = fh->text->len, end = h + fs->merged_data_size;
        uint64_t o = (uint64_t)off < end ? (uint64_t)off : end;
        size_t n = end - o < size ? (size_t)(end - o) : size;
        char *buf = malloc(n ? n : 1);
        int err = buf ? 0 : ENOMEM;
        size_t hn = o < h ? (h - o < n ? (size_t)(h - o) : n) : 0;
        if (!err && hn)
            memcpy(buf, fh->text->data + o, hn);
        if (!err && n > hn)
            err = gfs_merged_read(fs, buf + hn, n - hn, o + hn - h);
        if (err)
            fuse_reply_err(req, err);
        else
            fuse_reply_buf(req, buf, n);
        free(buf);
        pthread_rwlock_unlock(&fs->lock);
        return;
    }
    if (fh->kind == GFS_LIVE) {
        uint64_t h = fh->text->len, d = gguf_data_offset(fs->ctx);
        uint64_t fsz = gguf_file_size(fs->ctx);
        rel = 0;
        fsize = fsz > d ? fsz - d : 0;
        if ((uint64_t)off < h) {
            size_t m = h - (uint64_t)off < size ? (size_t)(h - (uint64_t)off)
                                                 : size;
            fb->mem = fh->text->data + off;
            fb->size = m;
            fb->flags = 0;
            bv.v.count = 2;
            fb = &bv.more;
            size -= m;
            off = 0;
        } else {
            off -= (off_t)h;
        }
    }
    /* The data is read straight from the GGUF.  The read lock keeps a
     * commit from moving the data start or replacing the fd meanwhile. */
    uint64_t o = (uint64_t)off < fsize ? (uint64_t)off : fsize;
    uint64_t n = fsize - o < size ? fsize - o : size;
    fb->size = n;
    fb->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
    gguf_ctx *c = fs->shards[fh->shard];
    fb->fd = gguf_fd(c);
    fb->pos = (off_t)(gguf_data_offset(c) + rel + o);
    if (bv.v.count == 2 && n == 0)
        bv.v.count = 1;
    /* fh must not be touched after the reply (see above): keep what the
     * page drop needs. */
    int drop = fh->drop, dfd = fb->fd;
    uint64_t pos = (uint64_t)fb->pos;
    fuse_reply_data(req, &bv.v, FUSE_BUF_SPLICE_MOVE);
    if (drop && n) {
        /* The bytes now live in the mount's page cache: drop the GGUF's
         * copy a whole chunk at a time, once a (sequential) read has
         * passed the chunk's end. */
        uint64_t c0 = pos / GFS_DROP_CHUNK * GFS_DROP_CHUNK;
        uint64_t c1 = (pos + n) / GFS_DROP_CHUNK * GFS_DROP_CHUNK;
        if (c1 > c0)
            posix_fadvise(dfd, (off_t)c0, (off_t)(c1 - c0), POSIX_FADV_DONTNEED);
    }
    pthread_rwlock_unlock(&fs->lock);
}

/* Writes into buf at off, zero-filling any gap. */
static int buf_pwrite(struct gguf_buf *b, const char *p, size_t n, off_t off)
{
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

static void gfs_write(fuse_req_t req, fuse_ino_t ino, const char *p,
                      size_t n, off_t off, struct fuse_file_info *fi)
{
    struct gfs *fs = gfs_of(req);
    struct gfs_fh *fh = (struct gfs_fh *)(uintptr_t)fi->fh;
    struct gguf_error gerr = {0};
    int err = 0;

    if (off < 0 || (uint64_t)off > (UINT64_C(1) << 40)) {
        fuse_reply_err(req, EFBIG);
        return;
    }
    ino = fh->ino; /* resolved at open */
    if (fh->kind == GFS_SCRATCH) {
        pthread_rwlock_wrlock(&fs->lock);
        struct gfs_scratch *sc = gfs_scratch_by_ino(fs, ino);
        err = sc ? buf_pwrite(&sc->data, p, n, off) : ENOENT;
        if (sc)
            clock_gettime(CLOCK_REALTIME, &sc->mtime);
        pthread_rwlock_unlock(&fs->lock);
        goto out;
    }
    if (fh->kind != GFS_KV || !fh->writable) {
        err = EBADF;
        goto out;
    }
    pthread_mutex_lock(&fh->mu);
    if (fh->bad) {
        err = EINVAL;
        goto unlock;
    }
    if ((size_t)off < fh->checked)
        fh->checked = 0; /* rewriting validated text: check again */
    if ((err = buf_pwrite(&fh->draft, p, n, off)))
        goto unlock;
    fh->dirty = 1;
    fh->written = 1;
    /* Complete lines are validated now, so a shell sees EINVAL at write. */
    pthread_rwlock_rdlock(&fs->lock);
    int64_t i = gfs_kv_index(fs, ino);
    if (i < 0) {
        err = ENOENT;
    } else if (gguf_text_check_prefix(gguf_kv_type(fs->ctx, i),
                                      gguf_kv_arr_type(fs->ctx, i),
                                      (char *)fh->draft.p, fh->draft.len,
                                      &fh->checked, &gerr) != GGUF_OK) {
        fh->bad = 1;
        err = gfs_errno(&gerr);
        size_t klen;
        const char *key = gguf_kv_key(fs->ctx, i, &klen);
        gfs_log(fs, "%s: refused write to '%s': %s", fs->path, key, gerr.msg);
        pthread_rwlock_unlock(&fs->lock);
        pthread_rwlock_wrlock(&fs->lock);
        i = gfs_kv_index(fs, ino);
        if (i >= 0)
            gfs_set_error(fs, gguf_kv_id(fs->ctx, i), gerr.msg);
    }
    pthread_rwlock_unlock(&fs->lock);
unlock:
    pthread_mutex_unlock(&fh->mu);
out:
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_write(req, n);
}

/* Applies a writable handle's draft to the key; 0 or errno.  A flush
 * (quiet) that fails leaves the draft pending: the file may still be
 * written to through a dup'ed descriptor.  The last word is release's. */
static int fh_apply(struct gfs *fs, struct gfs_fh *fh, int quiet)
{
    int err = 0;
    pthread_mutex_lock(&fh->mu);
    if (fh->writable && fh->kind == GFS_KV && fh->dirty && !fh->bad &&
        (fh->written || !quiet)) {
        pthread_rwlock_wrlock(&fs->lock);
        int64_t i = gfs_kv_index(fs, fh->ino);
        err = i < 0 ? ENOENT
                    : gfs_apply_text(fs, i, (char *)fh->draft.p, fh->draft.len,
                                     quiet);
        pthread_rwlock_unlock(&fs->lock);
        if (!err || !quiet)
            fh->dirty = 0;
        if (err && !quiet)
            fh->bad = 1;
    } else if (fh->bad) {
        err = EINVAL;
    }
    pthread_mutex_unlock(&fh->mu);
    return err;
}

static void gfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct gfs_fh *fh = (struct gfs_fh *)(uintptr_t)fi->fh;
    fuse_reply_err(req, fh_apply(gfs_of(req), fh, 1));
}

static void gfs_release(fuse_req_t req, fuse_ino_t ino,
                        struct fuse_file_info *fi)
{
    (void)ino;
    struct gfs_fh *fh = (struct gfs_fh *)(uintptr_t)fi->fh;
    fh_apply(gfs_of(req), fh, 0);
    fh_free(gfs_of(req), fh);
    fuse_reply_err(req, 0);
}

static void gfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
                      struct fuse_file_info *fi)
{
    (void)ino;
    (void)datasync;
    struct gfs *fs = gfs_of(req);
    struct gfs_fh *fh = (struct gfs_fh *)(uintptr_t)fi->fh;
    int err = fh->kind == GFS_KV ? fh_apply(fs, fh, 0) : 0;
    if (!err && !fs->readonly && fh->kind == GFS_KV) {
        pthread_rwlock_wrlock(&fs->lock);
        err = gfs_commit(fs);
        pthread_rwlock_unlock(&fs->lock);
    }
    fuse_reply_err(req, err);
}

/* fsync of the root or meta/ commits every pending edit: `ggufs -u` uses
 * it to learn whether the commit succeeded before it unmounts. */
static void gfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
                         struct fuse_file_info *fi)
{
    (void)datasync;
    (void)fi;
    struct gfs *fs = gfs_of(req);
    int err = 0;
    if (!fs->readonly && (ino == GFS_INO_ROOT || ino == GFS_INO_META)) {
        pthread_rwlock_wrlock(&fs->lock);
        if (!gguf_dirty(fs->ctx) && !fs->commit_failed)
            snprintf(fs->commit_msg, sizeof fs->commit_msg,
                     "%s: nothing to commit", fs->path);
        err = gfs_commit(fs);
        pthread_rwlock_unlock(&fs->lock);
    }
    fuse_reply_err(req, err);
}

static void gfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                        int to_set, struct fuse_file_info *fi)
{
    struct gfs *fs = gfs_of(req);
    struct stat st;
    int err = 0;
    fuse_ino_t kino = ino;
    pthread_rwlock_rdlock(&fs->lock);
    ino = gfs_resolve(fs, ino);
    pthread_rwlock_unlock(&fs->lock);
    enum gfs_kind kind = gfs_kind(ino);

    if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
        /* Modes and owners are fixed; editors (sed -i, vim) copy them onto
         * their temporary file, so a change to the same values succeeds. */
        pthread_rwlock_rdlock(&fs->lock);
        err = gfs_stat(fs, ino, &st);
        pthread_rwlock_unlock(&fs->lock);
        if (err)
            goto out;
        if (kind != GFS_SCRATCH &&
            (((to_set & FUSE_SET_ATTR_MODE) &&
              (attr->st_mode & 07777) != (st.st_mode & 07777)) ||
             ((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != st.st_uid) ||
             ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != st.st_gid))) {
            err = fs->readonly ? EROFS : EPERM;
            goto out;
        }
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
        if (fs->readonly) {
            err = EROFS;
            goto out;
        }
        if (kind != GFS_KV && kind != GFS_SCRATCH) {
            err = kind == GFS_TENSOR ? EACCES : EISDIR;
            goto out;
        }
        if (attr->st_size < 0 || attr->st_size > (off_t)1 << 40) {
            err = EFBIG;
            goto out;
        }
        struct gfs_fh *fh = fi ? (struct gfs_fh *)(uintptr_t)fi->fh : NULL;
        if (fh && fh->kind == GFS_KV && fh->writable) {
            pthread_mutex_lock(&fh->mu);
            size_t ns = (size_t)attr->st_size;
            if (ns <= fh->draft.len) {
                fh->draft.len = ns;
            } else if (gguf_buf_reserve(&fh->draft, ns - fh->draft.len) ==
                       GGUF_OK) {
                memset(fh->draft.p + fh->draft.len, 0, ns - fh->draft.len);
                fh->draft.len = ns;
            } else {
                err = ENOMEM;
            }
            if (fh->checked > ns)
                fh->checked = 0;
            fh->dirty = 1;
            fh->written = 1;
            pthread_mutex_unlock(&fh->mu);
        } else {
            pthread_rwlock_wrlock(&fs->lock);
            err = gfs_truncate(fs, ino, attr->st_size);
            pthread_rwlock_unlock(&fs->lock);
        }
        if (err)
            goto out;
    }
    /* Times belong to the GGUF; touch(1) must still succeed. */
out:
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    pthread_rwlock_rdlock(&fs->lock);
    err = gfs_stat(fs, ino, &st);
    pthread_rwlock_unlock(&fs->lock);
    st.st_ino = kino;
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, attr_timeout(fs, ino));
}

static int meta_change_allowed(struct gfs *fs, fuse_ino_t parent)
{
    if (fs->readonly)
        return EROFS;
    if (gfs_kind(parent) == GFS_DIR_META)
        return 0;
    return gfs_kind(parent) == GFS_NONE ? ENOENT : EACCES;
}

static void gfs_unlink_op(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct gfs *fs = gfs_of(req);
    int err = meta_change_allowed(fs, parent);
    if (!err) {
        pthread_rwlock_wrlock(&fs->lock);
        err = gfs_unlink(fs, name);
        pthread_rwlock_unlock(&fs->lock);
    }
    fuse_reply_err(req, err);
}

static void gfs_rename_op(fuse_req_t req, fuse_ino_t parent, const char *name,
                          fuse_ino_t newparent, const char *newname,
                          unsigned int flags)
{
    struct gfs *fs = gfs_of(req);
    int err = meta_change_allowed(fs, parent);
    if (!err && newparent != parent)
        err = EXDEV;
    if (!err) {
        pthread_rwlock_wrlock(&fs->lock);
        err = gfs_rename(fs, name, newname, flags);
        pthread_rwlock_unlock(&fs->lock);
    }
    fuse_reply_err(req, err);
}

static void gfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                      mode_t mode)
{
    (void)parent;
    (void)name;
    (void)mode;
    fuse_reply_err(req, gfs_of(req)->readonly ? EROFS : EPERM);
}

static void reply_xattr(fuse_req_t req, size_t size, int err,
                        const struct gguf_buf *b)
{
    if (err)
        fuse_reply_err(req, err);
    else if (size == 0)
        fuse_reply_xattr(req, b->len);
    else if (b->len > size)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, (const char *)b->p, b->len);
}

static void gfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                         size_t size)
{
    struct gfs *fs = gfs_of(req);
    struct gguf_buf b = {0};
    pthread_rwlock_rdlock(&fs->lock);
    int err = gfs_xattr_get(fs, gfs_resolve(fs, ino), name, &b);
    pthread_rwlock_unlock(&fs->lock);
    reply_xattr(req, size, err, &b);
    gguf_buf_free(&b);
}

static void gfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    struct gfs *fs = gfs_of(req);
    struct gguf_buf b = {0};
    pthread_rwlock_rdlock(&fs->lock);
    int err = gfs_xattr_list(fs, gfs_resolve(fs, ino), &b);
    pthread_rwlock_unlock(&fs->lock);
    reply_xattr(req, size, err, &b);
    gguf_buf_free(&b);
}

static void gfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                         const char *value, size_t size, int flags)
{
    (void)flags;
    struct gfs *fs = gfs_of(req);
    int err;
    pthread_rwlock_rdlock(&fs->lock);
    ino = gfs_resolve(fs, ino);
    pthread_rwlock_unlock(&fs->lock);
    if (gfs_kind(ino) != GFS_KV || strcmp(name, "user.gguf.type") != 0) {
        fuse_reply_err(req, fs->readonly ? EROFS : ENOTSUP);
        return;
    }
    if (fs->readonly) {
        fuse_reply_err(req, EROFS);
        return;
    }
    pthread_rwlock_wrlock(&fs->lock);
    err = gfs_set_type(fs, ino, value, size);
    pthread_rwlock_unlock(&fs->lock);
    fuse_reply_err(req, err);
}

static void gfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    (void)ino;
    (void)name;
    fuse_reply_err(req, gfs_of(req)->readonly ? EROFS : ENOTSUP);
}

static void gfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct gfs *fs = gfs_of(req);
    struct statvfs sv;
    memset(&sv, 0, sizeof sv);
    sv.f_bsize = sv.f_frsize = 4096;
    sv.f_blocks = ((uint64_t)fs->st.st_size + 4095) / 4096;
    pthread_rwlock_rdlock(&fs->lock);
    sv.f_files = 3 + (uint64_t)gguf_n_kv(fs->ctx) +
                 (uint64_t)gfs_n_tensors(fs);
    pthread_rwlock_unlock(&fs->lock);
    sv.f_namemax = 255;
    if (fs->readonly)
        sv.f_flag = ST_RDONLY;
    fuse_reply_statfs(req, &sv);
}

const struct fuse_lowlevel_ops gfs_ops = {
    .init = gfs_init,
    .lookup = gfs_lookup,
    .getattr = gfs_getattr,
    .opendir = gfs_opendir,
    .readdir = gfs_readdir,
    .open = gfs_open,
    .read = gfs_read,
    .release = gfs_release,
    .flush = gfs_flush,
    .fsync = gfs_fsync,
    .fsyncdir = gfs_fsyncdir,
    .write = gfs_write,
    .create = gfs_create_op,
    .mknod = gfs_mknod,
    .mkdir = gfs_mkdir,
    .unlink = gfs_unlink_op,
    .rename = gfs_rename_op,
    .setattr = gfs_setattr,
    .setxattr = gfs_setxattr,
    .removexattr = gfs_removexattr,
    .destroy = gfs_destroy,
    .getxattr = gfs_getxattr,
    .listxattr = gfs_listxattr,
    .statfs = gfs_statfs,
};
