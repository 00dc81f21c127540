/*
 * ggufs.h - state shared by the FUSE layer of ggufs.
 *
 * The FUSE layer never parses bytes: it asks the gguf library for keys,
 * values (as text) and tensor extents, and maps them onto inodes:
 *
 *   1                  /            (root)
 *   2                  /meta        one file per metadata key
 *   3                  /tensors     one file per tensor, raw bytes
 *   GFS_INO_TENSOR + i /tensors/N   tensor index i (never changes)
 *   GFS_INO_KV + id    /meta/K      key with stable library id `id`
 *
 * Concurrency: handlers run on several threads.  `lock` (a rwlock) guards
 * the library context and the text cache; tensor reads need neither once a
 * file is open, so the data path takes no lock at all.
 */
#ifndef GGUFS_FS_H
#define GGUFS_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "gguf.h"

#define GFS_INO_ROOT 1
#define GFS_INO_META 2
#define GFS_INO_TENSORS 3
#define GFS_INO_TENSOR (UINT64_C(1) << 32)
#define GFS_INO_KV (UINT64_C(2) << 32)

enum gfs_kind { GFS_NONE, GFS_ROOT, GFS_DIR_META, GFS_DIR_TENSORS,
                GFS_TENSOR, GFS_KV };

/* A rendered meta file: immutable once made, shared by the cache and by
 * open handles, freed when the last reference goes. */
struct gfs_text {
    atomic_int refs;
    size_t len;
    char data[];
};

struct gfs {
    gguf_ctx *ctx;
    const char *path;        /* absolute path of the GGUF */
    struct stat st;          /* of the GGUF at mount: times for every file */
    uid_t uid;
    gid_t gid;
    int readonly;
    double timeout;          /* entry/attr timeout, seconds */

    pthread_rwlock_t lock;
    struct gfs_text **texts; /* by kv id; NULL until rendered */
    size_t n_texts;
    pthread_mutex_t text_lock; /* guards filling texts[] under a read lock */
};

/* tree.c */
enum gfs_kind gfs_kind(fuse_ino_t ino);
int64_t gfs_tensor_index(const struct gfs *fs, fuse_ino_t ino);
int64_t gfs_kv_index(const struct gfs *fs, fuse_ino_t ino);
/* Fills st for ino; returns 0 or an errno.  Caller holds lock (read). */
int gfs_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st);
/* Resolves a name in a directory to an inode; 0 or errno.  Caller holds
 * lock (read). */
int gfs_lookup_name(struct gfs *fs, fuse_ino_t parent, const char *name,
                    fuse_ino_t *out);
/* Returns the rendered text of kv index i with a new reference (release
 * with gfs_text_put), rendering it on first use; NULL and *err on failure.
 * Caller holds lock (read). */
struct gfs_text *gfs_text_get(struct gfs *fs, int64_t i, int *err);
void gfs_text_put(struct gfs_text *t);
/* Drops the cached text of a key id (after an edit). Caller holds lock
 * (write). */
void gfs_text_forget(struct gfs *fs, uint32_t id);
void gfs_texts_free(struct gfs *fs);
/* True for keys not shown in meta/ (the filler). */
int gfs_kv_hidden(const struct gfs *fs, int64_t i);
/* The file name of kv i / tensor i into out (reset first). */
int gfs_kv_fname(const struct gfs *fs, int64_t i, struct gguf_buf *out);
int gfs_tensor_fname(const struct gfs *fs, int64_t i, struct gguf_buf *out);

/* xattr.c */
/* Fills out with the value of attribute name on ino; 0 or errno. */
int gfs_xattr_get(struct gfs *fs, fuse_ino_t ino, const char *name,
                  struct gguf_buf *out);
/* Fills out with the NUL-separated attribute names of ino. */
int gfs_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out);

/* errno.c: the one place library statuses become errno values. */
int gfs_errno(const struct gguf_error *err);

/* ops.c */
extern const struct fuse_lowlevel_ops gfs_ops;

#endif
