/*
 * ops.h - a model's FUSE handlers (ops.c: the tree; fileops.c: open
 * files; xattr.c: attributes) as the session's table (session/dispatch.c)
 * and a store's (stores/) call them, and what the commands that never
 * mount ask of them (cmd/nomount.c).  The rows' shared replies are the
 * core's bottom's (node/node.h).
 */
#ifndef GGUFS_OPS_H
#define GGUFS_OPS_H

#include "node/node.h"

/* struct gfs's root_listed beside a listing's hash (ops.c). */
#define GFS_LISTED_NONE 0
#define GFS_LISTED_MIXED 1

/* fileops.c: the text a read-only open of ino serves, as gfs_op_open
 * opens it (the row's open), with a reference for the caller
 * (gfs_text_put); NULL and *err for a file that is not a text (a tensor,
 * a view: EISDIR) or cannot be opened.  For the commands that run
 * without a mount (nomount.c).  Takes fs->lock (read). */
struct gfs_text *gfs_open_text(struct gfs *fs, fuse_ino_t ino, int *err);

/* xattr.c.  Caller holds lock (read). */
/* Fills out with the value of attribute name on ino; 0 or errno.  Not the
 * hashes: gfs_views_xattr, called first without the lock. */
int gfs_xattr_get(struct gfs *fs, fuse_ino_t ino, const char *name,
                  struct gguf_buf *out);
/* Fills out with the NUL-separated attribute names of ino. */
int gfs_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out);

/* The model's handlers (ops.c: the tree; fileops.c: open files): as
 * libfuse's low-level handlers, with the model first and inode numbers
 * the model's own (the session's table, dispatch.c, calls them). */
void gfs_op_lookup(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                   const char *name);
void gfs_op_getattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                    struct fuse_file_info *fi);
void gfs_op_setattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                    struct stat *attr, int to_set, struct fuse_file_info *fi);
void gfs_op_mknod(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                  const char *name, mode_t mode, dev_t rdev);
void gfs_op_mkdir(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                  const char *name, mode_t mode);
void gfs_op_unlink(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                   const char *name);
void gfs_op_rename(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                   const char *name, fuse_ino_t newparent, const char *newname,
                   unsigned int flags);
void gfs_op_opendir(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                    struct fuse_file_info *fi);
void gfs_op_readdir(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, size_t size,
                    off_t off, struct fuse_file_info *fi, int plus);
void gfs_op_fsyncdir(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                     int datasync, struct fuse_file_info *fi);
void gfs_op_statfs(struct gfs *fs, fuse_req_t req, fuse_ino_t ino);
void gfs_op_setxattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                     const char *name, const char *value, size_t size,
                     int flags);
void gfs_op_getxattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                     const char *name, size_t size);
void gfs_op_listxattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                      size_t size);
void gfs_op_removexattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                        const char *name);
void gfs_op_open(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                 struct fuse_file_info *fi);
void gfs_op_create(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                   const char *name, mode_t mode, struct fuse_file_info *fi);
void gfs_op_read(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, size_t size,
                 off_t off, struct fuse_file_info *fi);
void gfs_op_write(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, const char *p,
                  size_t n, off_t off, struct fuse_file_info *fi);
void gfs_op_flush(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                  struct fuse_file_info *fi);
void gfs_op_release(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                    struct fuse_file_info *fi);
void gfs_op_fsync(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, int datasync,
                  struct fuse_file_info *fi);
/* At unmount: edits still pending are committed (ops.c). */
void gfs_model_destroy(struct gfs *fs);
/* fsync of the model's root or meta/: every edit committed now, the
 * report in fs->commit_msg; 0 or errno.  Takes fs->lock (write). */
int gfs_model_commit(struct gfs *fs);
/* Unmount: frees the handles the kernel never released.  Their drafts
 * still unapplied (written, then neither flushed nor closed: the writer
 * may be half way through) are dropped, never committed: each is logged
 * ("meta/KEY: N bytes still being written at unmount, not committed") and
 * the same text, "; " separated, is appended to note (NUL-terminated, size
 * bytes) as far as it fits.  Returns how many were dropped.  Only once the
 * workers have stopped (destroy). */
size_t gfs_fh_close_all(struct gfs *fs, char *note, size_t size);

/* Whether what the kernel may hold of fs's root is what a fresh open of
 * the same file lists and shows (ops.c; a store asks before it closes
 * fs, and answers the root's OPENDIR and its live view's LOOKUP itself
 * while fs stays closed): writable, no edit applied since the open, none
 * pending, no overlay, the kernel's listing of the root the one it gives
 * now (root_listed), the live view a file at its first inode.  Then *e
 * is the live view's entry (the kernel's numbers) and *name its name
 * (fs's: copy it).  Takes fs->lock (read). */
int gfs_model_fresh_view(struct gfs *fs, struct fuse_entry_param *e,
                         const char **name);

#endif
