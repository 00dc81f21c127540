/*
 * ggufs.h - state shared by the FUSE layer of ggufs.
 *
 * The FUSE layer never parses bytes: it asks the gguf library for keys,
 * values (as text) and tensor extents, and maps them onto inodes:
 *
 *   1                  /            (root)
 *   2                  /meta        one file per metadata key
 *   3                  /tensors     one file per tensor, raw bytes
 *   4                  /NAME.gguf   the live view: the GGUF as a commit
 *                                   would write it now
 *   GFS_INO_TENSOR + i /tensors/N   tensor index i (never changes)
 *   GFS_INO_KV + id    /meta/K      key with stable library id `id`
 *   GFS_INO_SCRATCH+n  /meta/X      a file whose name is not a key (an
 *                                   editor's temporary file): kept in
 *                                   memory, never committed
 *
 * Concurrency: handlers run on several threads.  `lock` (a rwlock) guards
 * the library context, the edits and the caches; edits and commits take it
 * for writing.  Tensor reads take it for reading only, so that a commit
 * cannot move the data start or replace the fd under a read in flight;
 * readers never wait for each other.
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
#define GFS_INO_LIVE 4
#define GFS_INO_TENSOR (UINT64_C(1) << 32)
#define GFS_INO_KV (UINT64_C(2) << 32)
#define GFS_INO_SCRATCH (UINT64_C(3) << 32)

enum gfs_kind { GFS_NONE, GFS_ROOT, GFS_DIR_META, GFS_DIR_TENSORS,
                GFS_TENSOR, GFS_KV, GFS_SCRATCH, GFS_LIVE };

/* A file in meta/ whose name is not a valid key: vim's 4913 and .swp, sed's
 * temporary file.  Editors need them; only a rename onto a key name turns
 * the content into a metadata value. */
struct gfs_scratch {
    struct gfs_scratch *next;
    char *name;
    fuse_ino_t ino;
    struct gguf_buf data;
    struct timespec mtime;
};

/* A key that left meta/ (unlink, or rename to a non-key name as vim does
 * with its backup): if a file of that name is created again, the key comes
 * back with its type and its place in the KV order. */
struct gfs_ghost {
    struct gfs_ghost *next;
    char *key;
    size_t klen;
    enum gguf_type type, arr_type;
    int64_t pos;
};

/* Per-open state, in fi->fh. */
struct gfs_fh {
    struct gfs_fh *prev, *next; /* in gfs.open_fhs */
    enum gfs_kind kind;
    fuse_ino_t ino;
    int shard;              /* tensors: the file that holds it */
    int drop;               /* evict the GGUF's pages once served: they were
                               not cached before this open (see gfs_read) */
    uint64_t rel, size;     /* tensors: offset from the data start, bytes */
    struct gfs_text *text;  /* read-only opens of keys: snapshot at open;
                               the live view: its header at open */
    /* Writable opens of keys: the text being written, applied at flush. */
    int writable;
    pthread_mutex_t mu;
    struct gguf_buf draft;
    int dirty;              /* draft differs from what was applied */
    int written;            /* a write or truncate reached the draft: only
                               then may a flush apply it (bash flushes
                               right after open, before writing) */
    int bad;                /* a write was refused: never apply */
    size_t checked;         /* draft bytes validated so far */
};

/* A rendered meta file: immutable once made, shared by the cache and by
 * open handles, freed when the last reference goes. */
struct gfs_text {
    atomic_int refs;
    size_t len;
    char data[];
};

/* Where a byte range of a shard set's merged live view comes from. */
struct gfs_extent {
    uint64_t merged_rel; /* offset in the merged data section */
    uint64_t size;       /* tensor bytes; zero padding follows up to the next */
    int shard;
    uint64_t rel;        /* offset in that shard's data section */
};

struct gfs {
    gguf_ctx *ctx;           /* the (first) GGUF: metadata, edits, commit */
    gguf_ctx **shards;       /* every file of the set; shards[0] == ctx */
    int n_shards;
    int64_t *t_first;        /* global index of each shard's first tensor */
    struct gfs_extent *ext;  /* shard sets: the merged data layout */
    uint64_t merged_data_size;
    const char *path;        /* absolute path of the GGUF */
    struct stat st;          /* of the GGUF at mount: times for every file */
    uid_t uid;
    gid_t gid;
    int readonly;
    double timeout;          /* entry/attr timeout, seconds */

    pthread_rwlock_t lock;
    struct gfs_text **texts; /* by kv id; NULL until rendered */
    size_t n_texts;
    pthread_mutex_t text_lock; /* guards texts[] and live under a read lock */
    const char *live_name;   /* file name of the live view in the root */
    struct gfs_text *live;   /* its header, for generation live_gen */
    uint64_t live_gen;
    uint64_t live_opened_gen; /* generation at the last open of the view */

    /* Editing (guarded by lock held for writing). */
    struct fuse_session *se;
    int foreground;
    unsigned commit_flags;
    struct gfs_scratch *scratch;
    uint64_t next_scratch;
    struct gfs_ghost *ghosts;
    fuse_ino_t (*aliases)[2]; /* {old, new}: see gfs_resolve */
    size_t n_aliases;
    char **errors;           /* by kv id: why the last edit was refused */
    size_t n_errors;
    uint64_t generation;     /* bumped by every applied edit */
    uint64_t saved_generation; /* edits already saved after a failed commit */
    char commit_msg[1024];   /* report of the last commit, user.ggufs.commit */
    /* Open handles: the kernel sends no release for files still open when
     * the mount goes away, so unmount applies their drafts and frees them. */
    pthread_mutex_t fh_lock;
    struct gfs_fh *open_fhs;
    int commit_failed;
};

/* tree.c */
enum gfs_kind gfs_kind(fuse_ino_t ino);
/* Tensors are numbered across the shards of a set, in shard order. */
int64_t gfs_n_tensors(const struct gfs *fs);
/* The context holding global tensor g, its index there in *i, its shard
 * number in *shard (may be NULL). */
gguf_ctx *gfs_tensor_ctx(const struct gfs *fs, int64_t g, int64_t *i,
                         int *shard);
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

/* live.c: tensor numbering across shards and, for a shard set, the merged
 * layout of the live view.  0, or -1 with err. */
int gfs_layout(struct gfs *fs, struct gguf_error *err);
void gfs_layout_free(struct gfs *fs);
/* Reads [off, off+n) of a shard set's merged data section into buf
 * (tensor bytes from their shards, zeros between); 0 or errno.  Caller
 * holds lock (read). */
int gfs_merged_read(struct gfs *fs, char *buf, size_t n, uint64_t off);

/* live.c: the live view.  Returns its header (a new reference) as a commit
 * would write it now; the data section follows, mapped onto the GGUF's.
 * Caller holds lock (read). */
struct gfs_text *gfs_live_header(struct gfs *fs, int *err);
/* Size of the live view; 0 or errno. Caller holds lock (read). */
int gfs_live_size(struct gfs *fs, uint64_t *size);

/* xattr.c */
/* Fills out with the value of attribute name on ino; 0 or errno. */
int gfs_xattr_get(struct gfs *fs, fuse_ino_t ino, const char *name,
                  struct gguf_buf *out);
/* Fills out with the NUL-separated attribute names of ino. */
int gfs_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out);

/* edit.c: changes to meta/ (caller holds lock for writing unless noted) */
void gfs_log(struct gfs *fs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* After a rename that turns a temporary file into a key (sed -i, vim) or
 * back, the kernel keeps the source's inode number for the target name:
 * gfs_resolve maps such an old number to the object that now holds the
 * name.  Caller holds lock. */
fuse_ino_t gfs_resolve(const struct gfs *fs, fuse_ino_t ino);
struct gfs_scratch *gfs_scratch_find(struct gfs *fs, const char *name);
struct gfs_scratch *gfs_scratch_by_ino(struct gfs *fs, fuse_ino_t ino);
/* Records (msg) or clears (NULL) the refusal reason shown in
 * user.gguf.error of key id. */
void gfs_set_error(struct gfs *fs, uint32_t id, const char *msg);
const char *gfs_get_error(struct gfs *fs, uint32_t id);
/* Parses text as the value of kv i and stores it; 0 or errno.  quiet: a
 * refusal is not logged nor recorded (flush of a file still being
 * written: bash's redirection flushes right after open). */
int gfs_apply_text(struct gfs *fs, int64_t i, const char *text, size_t len,
                   int quiet);
int gfs_create(struct gfs *fs, const char *name, fuse_ino_t *ino);
int gfs_unlink(struct gfs *fs, const char *name);
int gfs_rename(struct gfs *fs, const char *from, const char *to,
               unsigned flags);
int gfs_set_type(struct gfs *fs, fuse_ino_t ino, const char *type,
                 size_t len);
int gfs_truncate(struct gfs *fs, fuse_ino_t ino, off_t size);
/* Writes edits back into the GGUF; 0 or errno; fills fs->commit_msg.
 * Caller holds lock for writing. */
int gfs_commit(struct gfs *fs);
void gfs_edit_free(struct gfs *fs);

/* errno.c: the one place library statuses become errno values. */
int gfs_errno(const struct gguf_error *err);

/* ops.c */
extern const struct fuse_lowlevel_ops gfs_ops;
/* Frees the handles the kernel never released (after the session ends). */
void gfs_fh_free_all(struct gfs *fs);

#endif
