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
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

/* Per-open state, in fi->fh. */
struct gfs_fh {
    enum gfs_kind kind;
    uint64_t off;           /* tensors: absolute offset in the GGUF */
    uint64_t size;          /* tensors: bytes */
    struct gfs_text *text;  /* meta files: snapshot at open */
};

static struct gfs *gfs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static void gfs_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    /* Large requests: the kernel may send up to 1 MiB per read. */
    conn->max_readahead = 1 << 20;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
}

static int fill_entry(struct gfs *fs, fuse_ino_t ino, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    int err = gfs_stat(fs, ino, &e->attr);
    if (err)
        return err;
    e->ino = ino;
    e->generation = 1;
    e->attr_timeout = fs->timeout;
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
    int err = gfs_stat(fs, ino, &st);
    pthread_rwlock_unlock(&fs->lock);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, fs->timeout);
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
    int64_t n = kind == GFS_ROOT ? 2
              : kind == GFS_DIR_META ? gguf_n_kv(fs->ctx)
              : kind == GFS_DIR_TENSORS ? gguf_n_tensors(fs->ctx) : -1;
    if (n < 0) {
        err = ENOTDIR;
        goto out;
    }
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
        } else if (kind == GFS_ROOT) {
            nm = k == 2 ? "meta" : "tensors";
            child = k == 2 ? GFS_INO_META : GFS_INO_TENSORS;
            mode = S_IFDIR;
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

static void gfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct gfs *fs = gfs_of(req);
    int err = 0;
    int wants_write = (fi->flags & O_ACCMODE) != O_RDONLY ||
                      (fi->flags & O_TRUNC);
    struct gfs_fh *fh = calloc(1, sizeof *fh);
    if (!fh) {
        fuse_reply_err(req, ENOMEM);
        return;
    }

    pthread_rwlock_rdlock(&fs->lock);
    fh->kind = gfs_kind(ino);
    if (fh->kind == GFS_TENSOR) {
        int64_t i = gfs_tensor_index(fs, ino);
        if (i < 0) {
            err = ENOENT;
        } else if (wants_write) {
            err = fs->readonly ? EROFS : EACCES;
        } else {
            fh->off = gguf_tensor_offset(fs->ctx, i);
            fh->size = gguf_tensor_size(fs->ctx, i);
            /* Tensor bytes never change while mounted: let the kernel keep
             * its page cache across opens. */
            fi->keep_cache = 1;
        }
    } else if (fh->kind == GFS_KV) {
        int64_t i = gfs_kv_index(fs, ino);
        if (i < 0)
            err = ENOENT;
        else if (wants_write)
            err = EROFS;
        else
            fh->text = gfs_text_get(fs, i, &err);
    } else {
        err = fh->kind == GFS_NONE ? ENOENT : EISDIR;
    }
    pthread_rwlock_unlock(&fs->lock);

    if (err) {
        free(fh);
        fuse_reply_err(req, err);
        return;
    }
    fi->fh = (uintptr_t)fh;
    if (fuse_reply_open(req, fi) == -ENOENT) {
        /* The opener was interrupted: nobody will release this handle. */
        gfs_text_put(fh->text);
        free(fh);
    }
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
    if (fh->kind == GFS_KV) {
        struct gfs_text *t = fh->text;
        size_t o = (uint64_t)off < t->len ? (size_t)off : t->len;
        size_t n = t->len - o < size ? t->len - o : size;
        fuse_reply_buf(req, t->data + o, n);
        return;
    }
    uint64_t o = (uint64_t)off < fh->size ? (uint64_t)off : fh->size;
    uint64_t n = fh->size - o < size ? fh->size - o : size;
    struct fuse_bufvec bv = FUSE_BUFVEC_INIT(n);
    bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
    bv.buf[0].fd = gguf_fd(fs->ctx);
    bv.buf[0].pos = (off_t)(fh->off + o);
    fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

static void gfs_release(fuse_req_t req, fuse_ino_t ino,
                        struct fuse_file_info *fi)
{
    (void)ino;
    struct gfs_fh *fh = (struct gfs_fh *)(uintptr_t)fi->fh;
    gfs_text_put(fh->text);
    free(fh);
    fuse_reply_err(req, 0);
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
    int err = gfs_xattr_get(fs, ino, name, &b);
    pthread_rwlock_unlock(&fs->lock);
    reply_xattr(req, size, err, &b);
    gguf_buf_free(&b);
}

static void gfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    struct gfs *fs = gfs_of(req);
    struct gguf_buf b = {0};
    pthread_rwlock_rdlock(&fs->lock);
    int err = gfs_xattr_list(fs, ino, &b);
    pthread_rwlock_unlock(&fs->lock);
    reply_xattr(req, size, err, &b);
    gguf_buf_free(&b);
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
                 (uint64_t)gguf_n_tensors(fs->ctx);
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
    .getxattr = gfs_getxattr,
    .listxattr = gfs_listxattr,
    .statfs = gfs_statfs,
};
