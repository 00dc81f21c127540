/*
 * xattr.c - extended attributes describing keys and tensors:
 *   user.gguf.type    value type ("uint32", "array[string]") or ggml type
 *   user.gguf.shape   tensors: dimensions in file order, "4096,32000"
 *   user.gguf.offset  tensors: absolute offset of the data in the GGUF
 *   user.gguf.size    tensors: bytes of data
 *   user.gguf.file    tensors of a shard set: the shard file holding it
 *   user.gguf.error   meta files: why the last edit was refused; meta/:
 *                     why the last name was refused
 *   user.ggufs.commit root: the report of the last commit
 *   user.ggufs.pid    root: the daemon's process id (ggufs -u waits for it)
 *   user.ggufs.overlay root of an overlay mount: where the overlay is
 *   user.gguf.sha256, user.gguf.xxh64   tensors and tensors/: hashes.c
 *                     (gfs_views_xattr, asked first, without fs->lock)
 */
#include "ggufs.h"
#include "kinds.h"
#include "source/source.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const tensor_attrs[] = {
    "user.gguf.type",
    "user.gguf.shape",
    "user.gguf.offset",
    "user.gguf.size",
};
static const char *const kv_attrs[] = {"user.gguf.type"};

int gfs_add_str(struct gguf_buf *out, const char *s) {
    return gguf_buf_add(out, s, strlen(s)) == GGUF_OK ? 0 : ENOMEM;
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
    if (strcmp(name, "user.gguf.offset") == 0) {
        snprintf(tmp, sizeof tmp, "%" PRIu64, gguf_tensor_offset(c, i));
        return gfs_add_str(out, tmp);
    }
    if (strcmp(name, "user.gguf.file") == 0 && fs->n_shards > 1)
        return gfs_add_str(out, gguf_path(c));
    if (strcmp(name, "user.gguf.size") == 0) {
        snprintf(tmp, sizeof tmp, "%" PRIu64, gfs_tensor_bytes(fs, g));
        return gfs_add_str(out, tmp);
    }
    return ENODATA;
}

int gfs_xattr_get(struct gfs *fs, fuse_ino_t ino, const char *name,
                  struct gguf_buf *out) {
    int64_t i;
    const struct gfs_kind_ops *row = gfs_kind_row(gfs_kind(ino));
    if (row && row->getxattr)
        return row->getxattr(fs, ino, name, out);
    switch (gfs_kind(ino)) {
    case GFS_TENSOR:
        i = gfs_tensor_index(fs, ino);
        return i < 0 ? ENOENT : tensor_attr(fs, i, name, out);
    case GFS_KV: {
        char tmp[64];
        i = gfs_kv_index(fs, ino);
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
    default:
        return ENODATA;
    }
}

int gfs_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out) {
    const char *const *names = NULL;
    size_t n = 0;
    switch (gfs_kind(ino)) {
    case GFS_TENSOR:
        if (gfs_tensor_index(fs, ino) < 0)
            return ENOENT;
        names = tensor_attrs;
        n = sizeof tensor_attrs / sizeof *tensor_attrs;
        break;
    case GFS_KV:
        if (gfs_kv_index(fs, ino) < 0)
            return ENOENT;
        names = kv_attrs;
        n = sizeof kv_attrs / sizeof *kv_attrs;
        break;
    default:
        break;
    }
    for (size_t k = 0; k < n; k++)
        if (gguf_buf_add(out, names[k], strlen(names[k]) + 1) != GGUF_OK)
            return ENOMEM;
    if (gfs_kind(ino) == GFS_TENSOR && fs->n_shards > 1 &&
        gguf_buf_add(out, "user.gguf.file", 15) != GGUF_OK)
        return ENOMEM;
    if (gfs_kind(ino) == GFS_KV &&
        gfs_meta_get_error(fs, gguf_kv_id(fs->ctx, gfs_kv_index(fs, ino))) &&
        gguf_buf_add(out, "user.gguf.error", 16) != GGUF_OK)
        return ENOMEM;
    const struct gfs_kind_ops *row = gfs_kind_row(gfs_kind(ino));
    int err = row && row->listxattr ? row->listxattr(fs, ino, out) : 0;
    if (err)
        return err;
    return gfs_views_xattr_list(fs, ino, out);
}
