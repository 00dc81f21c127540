/*
 * node.h - the core's bottom (fs/node/): what the core's handlers and
 * every row of kinds.h use to answer for a node.  rows.c: which row
 * serves an inode, from the kinds' table of the model (fs->kinds: the
 * table is kinds.c's, which names the rows, above them; model.c sets the
 * pointer), so that nothing here names a row.  reply.c: the replies and
 * attributes the rows share.  tree.c's (inode numbers, the common
 * attributes, the name index, texts): ggufs.h.
 *
 * Nothing in fs/node/ calls a part above it: only fs/base/ and gguf/.
 */
#ifndef GGUFS_NODE_H
#define GGUFS_NODE_H

#include "../ggufs.h"

struct gfs_kind_ops; /* kinds.h */

/* rows.c.  The kind whose inode ranges hold ino, or GFS_NONE. */
enum gfs_kind gfs_kind(const struct gfs *fs, fuse_ino_t ino);
/* The row of kind k, or NULL (GFS_NONE). */
const struct gfs_kind_ops *gfs_kind_row(const struct gfs *fs, enum gfs_kind k);
/* Entry k (0-based) of the root of fs, from the rows that are root
 * entries and present: its name, inode (ino NULL: the name and type only,
 * which a lookup compares before it asks the one inode) and file type;
 * 0, or ENOENT past the last.  Caller holds fs->lock (read). */
int gfs_kind_root_entry(struct gfs *fs, int64_t k, const char **name,
                        fuse_ino_t *ino, mode_t *mode);
/* Every row's fini, at the model's close (tree.c's gfs_texts_free). */
void gfs_kinds_free(struct gfs *fs);

/* reply.c.  A read-only directory's attributes (0555, two links): the
 * stat of a row that lists what it does not let anyone change. */
int gfs_kind_dir_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st);
/* A read-only file whose text is made again after each edit (meta.tsv,
 * tokenizer/'s files; gfs_text_of_gen): its attributes from text t (its
 * reference dropped), or err when t is NULL; and its open, fh holding t
 * (in direct I/O on a writable mount, where the text changes; kept in the
 * page cache on a read-only one). */
int gfs_kind_text_stat(struct gfs_text *t, int err, struct stat *st);
int gfs_kind_text_open(struct gfs *fs, struct gfs_fh *fh,
                       struct fuse_file_info *fi, struct gfs_text *t, int err);
/* gfs_add_str appends s to out (0 or ENOMEM).  gfs_reply_bytes replies
 * with [off, off + size) of p's len bytes; gfs_reply_window the same of a
 * windowed text (made for this read; caller holds no lock); gfs_read_text
 * the bytes of the text fh holds (fh->text, taken at open), read without
 * fs->lock. */
int gfs_add_str(struct gguf_buf *out, const char *s);
void gfs_reply_bytes(fuse_req_t req, const void *p, size_t len, off_t off,
                     size_t size);
void gfs_reply_window(fuse_req_t req, struct gfs *fs, struct gfs_text *t,
                      off_t off, size_t size);
void gfs_read_text(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh, off_t off,
                   size_t size);
/* Appends one directory entry (ino: the kernel's) to b if it stays
 * within max bytes; 0 when it does not (the listing is full).  plus: a
 * readdirplus entry, its lookup reply, or GFS_DIRENT_PLUS_NONE (the name
 * and type alone: the kernel looks the name up when it needs it). */
#define GFS_DIRENT_PLUS_NONE ((const struct fuse_entry_param *)1)
int gfs_add_dirent(fuse_req_t req, struct gguf_buf *b, size_t max,
                   const char *name, fuse_ino_t ino, mode_t mode, off_t next,
                   const struct fuse_entry_param *plus);

/* rows.c. The hooks' fan-outs (the hooks' contracts: struct gfs_kind_ops).
 * gfs_kinds_tensor_changed: after a tensor's bytes changed (tensorw.c).
 * The commit's, called by the edit stores (edits/file.c, overlay.c):
 * gfs_kinds_commit_sync (the first error stops it), gfs_kinds_commit_flags
 * (every row's, or'ed), gfs_kinds_committed. */
void gfs_kinds_tensor_changed(struct gfs *fs, int64_t i, uint64_t off,
                              uint64_t n, int whole);
int gfs_kinds_commit_sync(struct gfs *fs, char *what, size_t n,
                          struct gguf_error *err);
unsigned gfs_kinds_commit_flags(struct gfs *fs);
void gfs_kinds_committed(struct gfs *fs);
/* An edit generation ended (edits/section.c, with no lock held): the
 * kernel is told to drop the attributes it caches of every row that has
 * the told flag (kinds.h), through fs->io. */
void gfs_kinds_edited(struct gfs *fs);

#endif
