/*
 * tensors.h - tensors/ (tensors.c: a row of kinds.h) and its files
 * written (tensorw.c).  What the other parts call: the row's hooks are
 * tensors.c's; the commit of written tensors is the row's commit_sync
 * hook (node/rows.c's fan-out, called by edits/).
 */
#ifndef GGUFS_FS_TENSORS_H
#define GGUFS_FS_TENSORS_H

#include "../ggufs.h"

/* tensorw.c: tensors/NAME written (the contract: its top comment).  The
 * kinds' row of tensors (tensors.c) calls tw_open for an open that may
 * write (fs->lock held for writing), and its write, flush, fsync,
 * release, truncate hooks are these.  gfs_tw_writable: whether tensors of
 * this mount can be written (no lock).  gfs_tw_commit (the row's
 * commit_sync hook): at a commit (fs->lock write): syncs the GGUF if
 * tensors were written, and appends "; tensors written: NAMES" to what; 0
 * or EIO with err. */
int gfs_tw_writable(const struct gfs *fs);
/* ... and a tensor of shard (a shard set's first file, or any on an
 * overlay mount). */
int gfs_tw_tensor_writable(const struct gfs *fs, int shard);
int gfs_tw_open(struct gfs *fs, struct gfs_fh *fh, struct fuse_file_info *fi);
int gfs_tw_write(struct gfs *fs, struct gfs_fh *fh, const char *p, size_t n,
                 off_t off);
/* The row's write_req: an in-place write is answered before its pwrite
 * (Pipelining); the others as gfs_tw_write. */
void gfs_tw_write_req(struct gfs *fs, fuse_req_t req, struct gfs_fh *fh,
                      const char *p, size_t n, off_t off);
int gfs_tw_read(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh, off_t off,
                size_t size);
int gfs_tw_flush(struct gfs *fs, struct gfs_fh *fh);
int gfs_tw_fsync(struct gfs *fs, fuse_req_t req, struct gfs_fh *fh);
void gfs_tw_release(struct gfs *fs, struct gfs_fh *fh);
int gfs_tw_truncate(struct gfs *fs, struct gfs_fh *fh, fuse_ino_t ino,
                    off_t size);
/* The tensor row's hooks (kinds.h): tensor_changed (the tensor marked
 * for the commit's report; after an apply its own pages dropped) and
 * commit_sync. */
void gfs_tw_changed(struct gfs *fs, int64_t i, uint64_t off, uint64_t n,
                    int whole);
int gfs_tw_commit(struct gfs *fs, char *what, size_t n, struct gguf_error *err);
void gfs_tw_free(struct gfs *fs);

#endif
