/*
 * xattr.c - extended attributes: each node's are its kind's row's
 * (kinds.h: getxattr, listxattr, setxattr): tensors' in tensors.c,
 * meta/'s and its keys' in metadir.c and metafiles.c, the root's in
 * rootdir.c.  The hashes (user.gguf.sha256, user.gguf.xxh64 of tensors
 * and tensors/: hashes.c, gfs_views_xattr, asked first without fs->lock)
 * and the status (status.c) are listed or asked here after or before
 * the row.
 */
#include "ggufs.h"
#include "kinds.h"
#include "views/views.h"
#include "ops.h"

#include <errno.h>

int gfs_xattr_get(struct gfs *fs, fuse_ino_t ino, const char *name,
                  struct gguf_buf *out) {
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    return row && row->getxattr ? row->getxattr(fs, ino, name, out) : ENODATA;
}

int gfs_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out) {
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    int err = row && row->listxattr ? row->listxattr(fs, ino, out) : 0;
    return err ? err : gfs_views_xattr_list(fs, ino, out);
}
