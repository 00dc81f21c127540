/*
 * reply.c - the replies and attributes every row of kinds.h shares (and
 * the core's handlers with them): bytes and texts read, directory
 * entries, extended attributes' names and replies, a read-only
 * directory's and a text file's attributes (node.h).
 */
#include "node.h"

#include <errno.h>
#include <string.h>

int gfs_add_str(struct gguf_buf *out, const char *s) {
    return gguf_buf_add(out, s, strlen(s)) == GGUF_OK ? 0 : ENOMEM;
}

void gfs_reply_xattr(fuse_req_t req, size_t size, int err,
                     const struct gguf_buf *b) {
    if (err)
        fuse_reply_err(req, err);
    else if (size == 0)
        fuse_reply_xattr(req, b->len);
    else if (b->len > size)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, (const char *)b->p, b->len);
}

/* Reads.  Nothing of fh may be touched once the reply is sent: the kernel
 * can release the handle on another thread right then.  So each reader
 * holds its own reference on a text. */

void gfs_reply_bytes(fuse_req_t req, const void *p, size_t len, off_t off,
                     size_t size) {
    size_t o = (uint64_t)off < len ? (size_t)off : len;
    size_t n = len - o < size ? len - o : size;
    fuse_reply_buf(req, (const char *)p + o, n);
}

void gfs_reply_window(fuse_req_t req, struct gfs *fs, struct gfs_text *t,
                      off_t off, size_t size) {
    struct gguf_buf b = {0};
    int err = gfs_text_read(fs, t, (uint64_t)off, size, &b);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, (const char *)b.p, b.len);
    gguf_buf_free(&b);
}

/* A text opened read-only: the snapshot taken at open (a windowed text:
 * the value as it was at open, or ESTALE). */
void gfs_read_text(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh, off_t off,
                   size_t size) {
    struct gfs_text *t = fh->text;
    if (t->windowed) {
        gfs_reply_window(req, fs, t, off, size);
        return;
    }
    atomic_fetch_add(&t->refs, 1);
    gfs_reply_bytes(req, t->data, t->len, off, size);
    gfs_text_put(t);
}

int gfs_add_dirent(fuse_req_t req, struct gguf_buf *b, size_t max,
                   const char *name, fuse_ino_t ino, mode_t mode, off_t next,
                   const struct fuse_entry_param *plus) {
    struct stat st = {.st_ino = ino, .st_mode = mode}; /* the kernel's */
    struct fuse_entry_param none = {.attr = st};       /* nodeid 0: no entry */
    size_t need = plus ? fuse_add_direntry_plus(req, NULL, 0, name, plus, 0)
                       : fuse_add_direntry(req, NULL, 0, name, NULL, 0);
    if (b->len + need > max)
        return 0;
    if (gguf_buf_reserve(b, need) != GGUF_OK)
        return 0;
    char *at = (char *)b->p + b->len;
    if (plus)
        fuse_add_direntry_plus(req, at, need, name,
                               plus == GFS_DIRENT_PLUS_NONE ? &none : plus,
                               next);
    else
        fuse_add_direntry(req, at, need, name, &st, next);
    b->len += need;
    return 1;
}

int gfs_kind_dir_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    (void)fs, (void)ino;
    st->st_mode = S_IFDIR | 0555;
    st->st_nlink = 2;
    return 0;
}

int gfs_kind_text_stat(struct gfs_text *t, int err, struct stat *st) {
    if (!t)
        return err;
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = (off_t)t->len;
    st->st_blocks = (st->st_size + 511) / 512;
    gfs_text_put(t);
    return 0;
}

int gfs_kind_text_open(struct gfs *fs, struct gfs_fh *fh,
                       struct fuse_file_info *fi, struct gfs_text *t, int err) {
    if (!(fh->text = t))
        return err;
    fi->noflush = 1;
    if (fs->readonly)
        fi->keep_cache = 1; /* never changes */
    else
        fi->direct_io = 1;
    return 0;
}
