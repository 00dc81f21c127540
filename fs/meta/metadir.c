/*
 * metadir.c - meta/, the directory of a model's keys, as a row of the
 * kinds' table (kinds.h): its entries are the keys in the file's order
 * (the hidden filler left out), then the FILEs editors made there (names
 * that are not keys: metanames.c), in the order made.  Names are created,
 * removed and renamed here (metaedit.c does the edit); fsync of it
 * commits every pending edit.  Its extended attribute user.gguf.error
 * says why the last name was refused.  Its files are metafiles.c's.
 */
#include "../kinds.h"
#include "meta.h"

#include <errno.h>
#include <string.h>

static int dir_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    (void)ino;
    st->st_mode = S_IFDIR | (fs->readonly ? 0555 : 0755);
    st->st_nlink = 2;
    return 0;
}

static int dir_lookup(struct gfs *fs, fuse_ino_t dir, const char *name,
                      fuse_ino_t *out) {
    (void)dir;
    struct gfs_scratch *sc = gfs_meta_scratch_find(fs, name);
    if (sc) {
        *out = sc->ino;
        return 0;
    }
    int64_t i = gfs_find_by_fname(fs, name, 0);
    if (i < 0 || gfs_kv_hidden(fs, i))
        return ENOENT;
    *out = GFS_INO_KV + gguf_kv_id(fs->ctx, i);
    return 0;
}

static int64_t dir_n(struct gfs *fs, fuse_ino_t dir) {
    (void)dir;
    return gguf_n_kv(fs->ctx) + (int64_t)fs->n_scratch;
}

/* The FILEs follow the keys; pos keeps the next one, so that a listing
 * walks their list once. */
static int dir_entry(struct gfs *fs, fuse_ino_t dir, int64_t k,
                     struct gfs_dir_pos *pos, struct gguf_buf *name,
                     fuse_ino_t *child, mode_t *mode) {
    (void)dir;
    int64_t n_kv = gguf_n_kv(fs->ctx);
    *mode = S_IFREG;
    if (k < n_kv) {
        if (gfs_kv_hidden(fs, k))
            return 0;
        if (gfs_kv_fname(fs, k, name))
            return -1;
        *child = GFS_INO_KV + gguf_kv_id(fs->ctx, k);
        return 1;
    }
    int64_t j = k - n_kv;
    const struct gfs_scratch *sc = fs->scratch;
    if (pos->at && pos->k == j)
        sc = pos->at;
    else
        for (int64_t m = 0; sc && m < j; m++)
            sc = sc->next;
    if (!sc)
        return 0;
    pos->at = sc->next, pos->k = j + 1;
    name->len = 0;
    if (gguf_buf_add(name, sc->name, strlen(sc->name) + 1) != GGUF_OK)
        return -1;
    *child = sc->ino;
    return 1;
}

static int dir_create(struct gfs *fs, fuse_ino_t dir, const char *name,
                      fuse_ino_t *out) {
    (void)dir;
    return gfs_meta_create(fs, name, out);
}

static int dir_unlink(struct gfs *fs, fuse_ino_t dir, const char *name) {
    (void)dir;
    gfs_edit_begin(fs);
    int err = gfs_meta_unlink(fs, name);
    gfs_edit_end(fs);
    return err;
}

static int dir_rename(struct gfs *fs, fuse_ino_t dir, const char *name,
                      const char *newname, unsigned int flags) {
    (void)dir;
    gfs_edit_begin(fs);
    int err = gfs_meta_rename(fs, name, newname, flags);
    gfs_edit_end(fs);
    return err;
}

static int dir_getxattr(struct gfs *fs, fuse_ino_t ino, const char *name,
                        struct gguf_buf *out) {
    (void)ino;
    if (strcmp(name, "user.gguf.error") == 0 && fs->meta->name_error[0])
        return gfs_add_str(out, fs->meta->name_error);
    return ENODATA;
}

static int dir_listxattr(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out) {
    (void)ino;
    if (fs->meta->name_error[0] &&
        gguf_buf_add(out, "user.gguf.error", 16) != GGUF_OK)
        return ENOMEM;
    return 0;
}

const struct gfs_kind_ops gfs_kind_dir_meta = {
    .kind = GFS_DIR_META,
    .ino_lo = GFS_INO_META,
    .ino_hi = GFS_INO_META + 1,
    .root_name = "meta",
    .root_mode = S_IFDIR,
    .commits = 1, /* its attributes (dir_stat) do not follow the edits */
    .stat = dir_stat,
    .lookup = dir_lookup,
    .n_entries = dir_n,
    .dirent = dir_entry,
    .create = dir_create,
    .unlink = dir_unlink,
    .rename = dir_rename,
    .getxattr = dir_getxattr,
    .listxattr = dir_listxattr,
};
