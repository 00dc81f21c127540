/*
 * tensors.c - tensors/ and its files, as rows of the kinds' table
 * (kinds.h): tensors/NAME is tensor NAME's bytes, served from the GGUF's
 * own offsets (by descriptor for a local file: source/source.h), its
 * size ggml's (gfs_tensor_bytes); written through tensorw.c on a mount
 * that allows it (gfs_tw_writable: 0644 there, else 0444).  Names are the library's
 * escaped tensor names (tree.c's name index finds them).  Their extended
 * attributes (the hashes are hashes.c's):
 *   user.gguf.type    the ggml type ("q4_K")
 *   user.gguf.shape   dimensions in file order, "4096,32000"
 *   user.gguf.offset  absolute offset of the data in the GGUF (or, for a
 *                     tensor written through an overlay, in its data file)
 *   user.gguf.size    bytes of data
 *   user.gguf.file    a shard set's or a mix's: the file holding it; an
 *                     overlay's data file for a tensor written there
 *   user.gguf.source  that file (or URL) and the offset there, "PATH@OFF"
 */
#include "../kinds.h"
#include "../source/source.h"
#include "tensors.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int dir_lookup(struct gfs *fs, fuse_ino_t dir, const char *name,
                      fuse_ino_t *out) {
    (void)dir;
    int64_t i = gfs_find_by_fname(fs, name, 1);
    if (i < 0)
        return ENOENT;
    *out = GFS_INO_TENSOR + (fuse_ino_t)i;
    return 0;
}

static int64_t dir_n(struct gfs *fs, fuse_ino_t dir) {
    (void)dir;
    return gfs_n_tensors(fs);
}

static int dir_entry(struct gfs *fs, fuse_ino_t dir, int64_t k,
                     struct gfs_dir_pos *pos, struct gguf_buf *name,
                     fuse_ino_t *child, mode_t *mode) {
    (void)dir, (void)pos;
    if (gfs_tensor_fname(fs, k, name))
        return -1;
    *child = GFS_INO_TENSOR + (fuse_ino_t)k;
    *mode = S_IFREG;
    return 1;
}

static int tensor_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    int64_t i = gfs_tensor_index(fs, ino);
    if (i < 0)
        return ENOENT;
    int shard;
    int64_t j;
    (void)gfs_tensor_ctx(fs, i, &j, &shard);
    st->st_mode = S_IFREG | (gfs_tw_tensor_writable(fs, shard) ? 0644 : 0444);
    st->st_nlink = 1;
    st->st_size = (off_t)gfs_tensor_bytes(fs, i);
    st->st_blocks = (st->st_size + 511) / 512;
    return 0;
}

static int tensor_open(struct gfs *fs, struct gfs_fh *fh,
                       struct fuse_file_info *fi, int wants_write) {
    int64_t i = gfs_tensor_index(fs, fh->ino);
    if (i < 0)
        return ENOENT;
    int64_t j;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, &fh->shard);
    fh->rel = gguf_tensor_rel_offset(c, j);
    fh->size = gfs_tensor_bytes(fs, i);
    /* Tensor bytes never change while mounted: keep the page cache.  Then
     * the GGUF's own copy of bytes that were not cached before is dead
     * weight (the kernel would hold every byte twice). */
    fi->keep_cache = 1;
    fi->noflush = 1;
    fh->drop =
        !gfs_data_cached(fs, fh->shard, gguf_tensor_offset(c, j), fh->size);
    if (fs->tensor_dio) {
        /* -o tensor_direct_io: each read is one request served from the
         * GGUF, no FUSE page cache (so nothing to drop from the GGUF's);
         * an mmap still works (FUSE_DIRECT_IO_ALLOW_MMAP, base/devio.c)
         * through a cache dropped at each mmap.  ggufs(1) has the
         * figures behind the default (off). */
        fi->direct_io = 1;
        fi->keep_cache = 0;
        fh->drop = 0;
    }
    return wants_write ? gfs_tw_open(fs, fh, fi) : 0;
}

/* Holds fs->lock (read) for the reply: a commit must not move the data
 * start or replace the descriptor meanwhile. */
static void tensor_read(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh,
                        off_t off, size_t size) {
    if (fh->stage || fh->ovl_whole) { /* a whole replace: its own bytes */
        int err = gfs_tw_read(req, fs, fh, off, size);
        if (err)
            fuse_reply_err(req, err);
        return;
    }
    uint64_t o = (uint64_t)off < fh->size ? (uint64_t)off : fh->size;
    uint64_t n = fh->size - o < size ? fh->size - o : size;
    pthread_rwlock_rdlock(&fs->lock);
    gguf_ctx *c = fs->shards[fh->shard];
    uint64_t pos = gguf_data_offset(c) + fh->rel + o;
    gfs_data_reply(req, fs, fh->shard, NULL, 0, pos, n, fh->drop);
    pthread_rwlock_unlock(&fs->lock);
}

static int tensor_attr(struct gfs *fs, int64_t g, const char *name,
                       struct gguf_buf *out) {
    char tmp[64];
    int64_t i;
    int shard;
    gguf_ctx *c = gfs_tensor_ctx(fs, g, &i, &shard);
    if (strcmp(name, "user.gguf.type") == 0) {
        uint32_t ty = gguf_tensor_type(c, i);
        const char *tn = gguf_ggml_type_name(ty);
        if (!tn) {
            snprintf(tmp, sizeof tmp, "type%" PRIu32, ty);
            tn = tmp;
        }
        return gfs_add_str(out, tn);
    }
    if (strcmp(name, "user.gguf.shape") == 0) {
        uint32_t nd = gguf_tensor_n_dims(c, i);
        const int64_t *ne = gguf_tensor_ne(c, i);
        for (uint32_t d = 0; d < nd; d++) {
            snprintf(tmp, sizeof tmp, "%s%" PRId64, d ? "," : "", ne[d]);
            if (gfs_add_str(out, tmp))
                return ENOMEM;
        }
        return 0;
    }
    /* Where the bytes the mount shows are: a tensor written through an
     * overlay is whole in the overlay's data file, not in the model. */
    uint64_t off = gguf_tensor_offset(c, i), doff;
    const char *file = gguf_path(c);
    if (gfs_patch_find(fs, g, &doff) && gfs_patch_where(fs)) {
        file = gfs_patch_where(fs);
        off = doff;
    }
    if (strcmp(name, "user.gguf.offset") == 0) {
        snprintf(tmp, sizeof tmp, "%" PRIu64, off);
        return gfs_add_str(out, tmp);
    }
    if (strcmp(name, "user.gguf.file") == 0 &&
        (gfs_data_merged(fs) || file != gguf_path(c)))
        return gfs_add_str(out, file);
    if (strcmp(name, "user.gguf.source") == 0) {
        snprintf(tmp, sizeof tmp, "@%" PRIu64, off);
        return gfs_add_str(out, file) || gfs_add_str(out, tmp) ? ENOMEM : 0;
    }
    if (strcmp(name, "user.gguf.size") == 0) {
        snprintf(tmp, sizeof tmp, "%" PRIu64, gfs_tensor_bytes(fs, g));
        return gfs_add_str(out, tmp);
    }
    return ENODATA;
}

static int tensor_getxattr(struct gfs *fs, fuse_ino_t ino, const char *name,
                           struct gguf_buf *out) {
    int64_t i = gfs_tensor_index(fs, ino);
    return i < 0 ? ENOENT : tensor_attr(fs, i, name, out);
}

static int tensor_listxattr(struct gfs *fs, fuse_ino_t ino,
                            struct gguf_buf *out) {
    static const char names[] = "user.gguf.type\0user.gguf.shape\0"
                                "user.gguf.offset\0user.gguf.size\0"
                                "user.gguf.source";
    if (gfs_tensor_index(fs, ino) < 0)
        return ENOENT;
    if (gguf_buf_add(out, names, sizeof names) != GGUF_OK)
        return ENOMEM;
    uint64_t off;
    if ((gfs_data_merged(fs) ||
         gfs_patch_find(fs, gfs_tensor_index(fs, ino), &off)) &&
        gguf_buf_add(out, "user.gguf.file", 15) != GGUF_OK)
        return ENOMEM;
    return 0;
}

const struct gfs_kind_ops gfs_kind_dir_tensors = {
    .kind = GFS_DIR_TENSORS,
    .ino_lo = GFS_INO_TENSORS,
    .ino_hi = GFS_INO_TENSORS + 1,
    .root_name = "tensors",
    .root_mode = S_IFDIR,
    .stat = gfs_kind_dir_stat,
    .lookup = dir_lookup,
    .n_entries = dir_n,
    .dirent = dir_entry,
};

const struct gfs_kind_ops gfs_kind_tensor = {
    .kind = GFS_TENSOR,
    .ino_lo = GFS_INO_TENSOR,
    .ino_hi = GFS_INO_KV,
    .open_writes = 1,
    .owner_writes = 1,
    .stat = tensor_stat,
    .open = tensor_open,
    .read = tensor_read,
    .write = gfs_tw_write,
    .write_req = gfs_tw_write_req,
    .truncate = gfs_tw_truncate,
    .flush = gfs_tw_flush,
    .release = gfs_tw_release,
    .fsync = gfs_tw_fsync,
    .getxattr = tensor_getxattr,
    .listxattr = tensor_listxattr,
    .fini = gfs_tw_free,
    .tensor_changed = gfs_tw_changed,
    .commit_sync = gfs_tw_commit,
};
