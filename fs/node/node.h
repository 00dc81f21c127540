/*
 * node.h - the core's bottom (fs/node/): what the core's handlers and
 * every row of kinds.h use to answer for a node.  rows.c: which row
 * serves an inode, from the kinds' table of the model (fs->kinds: the
 * table is kinds.c's, which names the rows, above them; model.c sets the
 * pointer), so that nothing here names a row.  reply.c: the replies and
 * attributes the rows share.  tree.c: inode numbers, the common
 * attributes, the name index, the texts (struct gfs_text) and the open
 * handles' state (struct gfs_fh), which every row is given.
 *
 * Nothing in fs/node/ calls a part above it: only fs/base/ and gguf/.
 */
#ifndef GGUFS_NODE_H
#define GGUFS_NODE_H

#include "../ggufs.h"

struct gfs_kind_ops; /* kinds.h */

/* Texts of values (tree.c).  The size of a file in meta/ is measured, never
 * made.  A text longer than GFS_TEXT_WHOLE is opened windowed (see struct
 * gfs_text); a shorter one is made whole at open.  Operations that need a
 * whole text (gfs_text_get: renames onto keys, type changes, backups) make
 * at most GFS_MAX_TEXT bytes (EFBIG past it, said in the log).  Whole texts
 * are kept for later opens while all kept texts stay under GFS_TEXT_CACHE
 * bytes. */
#define GFS_MAX_TEXT ((uint64_t)256 << 20)
#define GFS_TEXT_CACHE ((size_t)64 << 20)
/* Files in meta/ whose text is longer than this are opened windowed (see
 * struct gfs_text): an open costs a scan and 24 bytes of marks per 64 KiB
 * of text, a read the bytes it asks for plus at most 64 KiB and one
 * element, whatever the value (no GFS_MAX_TEXT bound there). */
#define GFS_TEXT_WHOLE ((uint64_t)1 << 20)
/* Texts from this size take their maker's buffer (gfs_text_take). */
#define GFS_TEXT_TAKE ((size_t)1 << 16)

/* Per-open state, in fi->fh (fileops.c). */
struct gfs_fh {
    struct gfs_fh *prev, *next; /* in gfs.open_fhs; guarded by gfs.fh_lock */
    /* Set at open, before the reply; read-only afterwards. */
    enum gfs_kind kind;
    fuse_ino_t ino;
    uid_t uid; /* who opened it (a store bounds other users' handles) */
    int shard; /* tensors: the file that holds it */
    int drop;  /* evict the GGUF's pages once served: they were
                              not cached before this open (see reply_file
                              in source/data.c) */
    uint64_t rel, size;    /* tensors: offset from the data start, bytes */
    struct gfs_text *text; /* opens of keys: the value's text at open;
                              the live view: its header at open.  A
                              writable open's draft starts from it: there
                              it is guarded by mu and dropped once the
                              draft is loaded */
    int writable;
    /* Writable opens of keys: the text being written, applied at flush.
     * Guarded by mu (first in the lock order, see struct gfs). */
    pthread_mutex_t mu;
    struct gguf_buf draft;
    size_t granted; /* bytes of fs->max_drafts draft may hold (memcap.c) */
    int created;    /* create made the file: a key is dropped if a write
                       fails before any value was applied
                       (gfs_meta_drop_new) */
    int loaded;     /* draft holds the value: copied from text at the
                       first write or truncate, not at open (an open
                       costs no copy; O_TRUNC starts empty) */
    int dirty;      /* draft differs from what was applied */
    int written;    /* a write or truncate reached the draft: only
                       then may a flush apply it (bash flushes
                       right after open, before writing) */
    int bad;        /* a write was refused (the errno, repeated to later
                       writes and at close): never apply */
    size_t checked; /* draft bytes validated so far */
    /* The live view (passthrough.c): the version (epoch) this open
     * counts in, and its backing file if it is a passthrough open.  Set
     * at open, dropped at release (gfs_pt_release). */
    void *pt_epoch;
    void *pt_backing;
    /* A tensor opened for writing (tensorw.c): in place (tensor_w), or
     * with O_TRUNC a whole replace, staged until flush, fsync or release
     * (stage; staged: bytes written since it was last applied).  Guarded
     * by mu. */
    int tensor_w;
    struct gguf_stage *stage;
    int staged;
    /* On an overlay mount (source/patch.c): ovl set; a whole replace
     * (ovl_whole) writes its own new region at ovl_doff, recorded at the
     * apply. */
    int ovl, ovl_whole;
    uint64_t ovl_doff;
    /* The first error of an in-place write answered before it was written
     * (tensorw.c, Pipelining), returned by the next write, flush or fsync
     * of the handle; 0 if none. */
    atomic_int werr;
};

/* A rendered meta file: immutable once made, shared by the cache and by
 * open handles, freed when the last reference goes. */
struct gfs_text {
    atomic_int refs;
    size_t len; /* the text's length */
    /* A windowed text (a value whose text is longer than GFS_TEXT_WHOLE,
     * opened as a file): no data; each read makes the bytes it needs from
     * the value's payload (gfs_text_read), starting at the nearest mark of
     * map.  Before the value changes or goes, under fs->lock (write),
     * gfs_text_keep gives a text still open a copy of the payload it was
     * made from (kept), so that its readers go on reading that one value
     * whole; stale is set then, and a stale text without a copy (the copy
     * would pass fs->max_drafts) fails reads with ESTALE, never mixing
     * two values. */
    int windowed;
    uint32_t id;
    atomic_int stale;
    struct gguf_text_map map;
    uint8_t *kept; /* the payload at open, once the value changed */
    size_t kept_len, kept_granted; /* granted: counted in fs->max_drafts */
    enum gguf_type kept_type;
    struct gfs *owner; /* for the grant's release at the last put */
    size_t cost;       /* bytes counted in fs->texts_bytes while cached */
    size_t held;       /* bytes counted in GFS_TEXTS_MAX (gfs_text_of_gen) */
    /* Whole texts: the len bytes, in inline_data (gfs_text_new) or in the
     * buffer the text took (gfs_text_take, a large one: not copied). */
    char *data;
    char inline_data[];
};

/* tree.c: inodes, names, attributes and the cache of rendered meta files.
 * Callers hold lock (read at least) unless noted. */
/* Tensors are numbered across the shards of a set, in shard order. */
int64_t gfs_n_tensors(const struct gfs *fs);
/* The context holding global tensor g, its index there in *i, its shard
 * number in *shard (may be NULL). */
gguf_ctx *gfs_tensor_ctx(const struct gfs *fs, int64_t g, int64_t *i,
                         int *shard);
int64_t gfs_tensor_index(const struct gfs *fs, fuse_ino_t ino);
/* The key index (tensors: the tensor index) whose file name in meta/
 * (tensors/) is name, or -1: canonical escaped names only, hashed long
 * names through their index (tree.c).  Caller holds fs->lock (read). */
int64_t gfs_find_by_fname(struct gfs *fs, const char *name, int tensors);
int64_t gfs_kv_index(const struct gfs *fs, fuse_ino_t ino);
/* Fills st for ino; returns 0 or an errno. */
int gfs_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st);
/* Fills a lookup reply for ino; 0 or errno. */
int gfs_fill_entry(struct gfs *fs, fuse_ino_t ino, struct fuse_entry_param *e);
/* How long the kernel may trust ino's attributes, seconds.  No lock. */
double gfs_attr_timeout(const struct gfs *fs, fuse_ino_t ino);
/* Resolves a name in a directory to an inode; 0 or errno. */
int gfs_lookup_name(struct gfs *fs, fuse_ino_t parent, const char *name,
                    fuse_ino_t *out);
/* The length of kv index i's text, measured once (gguf_render_size), never
 * rendered: 0 or errno.  Takes text_lock. */
int gfs_text_size(struct gfs *fs, int64_t i, uint64_t *size);
/* Returns the rendered text of kv index i with a new reference (release
 * with gfs_text_put), rendering it on first use; NULL and *err on failure
 * (EFBIG past GFS_MAX_TEXT).  Takes text_lock. */
struct gfs_text *gfs_text_get(struct gfs *fs, int64_t i, int *err);
/* The text of kv index i for a file opened in meta/ (open_kv): whole, as
 * gfs_text_get, when at most GFS_TEXT_WHOLE bytes; else windowed, shared by
 * all openers until the value changes.  NULL and *err on failure.  Caller
 * holds fs->lock; takes text_lock. */
struct gfs_text *gfs_text_open(struct gfs *fs, int64_t i, int *err);
/* Appends the bytes [off, off + n) of t (fewer at its end) to out: 0 or
 * errno (ESTALE: a windowed text's value changed since it was opened and
 * no copy could be kept, see gfs_text_keep).  Takes fs->lock (read) for a
 * windowed text: call it without fs->lock. */
int gfs_text_read(struct gfs *fs, struct gfs_text *t, uint64_t off, size_t n,
                  struct gguf_buf *out);
/* Drops a reference; no lock. */
void gfs_text_put(struct gfs_text *t);
/* A text made again at each edit generation (the live view's header,
 * meta.tsv): *slot if it was made at fs->generation (a new reference),
 * else make fills b, and the text is made, kept in *slot (for *gen) and
 * returned; when counted (the tokenizer's files), counted in the daemon's
 * GFS_TEXTS_MAX while it lives (make bounds what it makes by
 * gfs_texts_room).  NULL with *err (make's errno, or ENOMEM: out of
 * memory or past GFS_TEXTS_MAX).  Caller holds fs->lock (read at least);
 * takes text_lock. */
/* make is called with arg, passed through (one maker for several files,
 * as tokdir.c's; NULL for a maker of one file). */
typedef int (*gfs_text_make_arg)(struct gfs *fs, void *arg, struct gguf_buf *b);
struct gfs_text *gfs_text_of_gen(struct gfs *fs, struct gfs_text **slot,
                                 uint64_t *gen, gfs_text_make_arg make,
                                 void *arg, int counted, int *err);
/* A new text holding a copy of b, with one reference; NULL if out of
 * memory. */
struct gfs_text *gfs_text_new(const struct gguf_buf *b);
/* gfs_text_new, but a text of GFS_TEXT_TAKE bytes or more takes b's
 * buffer (b emptied; its spare room handed back) instead of a copy: a
 * 12 MB tokenizer.json's copy was a tenth of its first read.  b as it was
 * on NULL. */
struct gfs_text *gfs_text_take(struct gguf_buf *b);
/* Drops the cached text of a key id (after an edit).  Caller holds lock
 * (write). */
void gfs_text_forget(struct gfs *fs, uint32_t id);
/* Before kv index i's value changes or goes: a windowed text of it still
 * open keeps a copy of the payload (see struct gfs_text).  Caller holds
 * lock (write). */
void gfs_text_keep(struct gfs *fs, int64_t i);
/* Frees the index of hashed long names (at unmount). */
void gfs_lnames_free(struct gfs *fs);
void gfs_texts_free(struct gfs *fs);
/* True for keys not shown in meta/ (the filler). */
int gfs_kv_hidden(const struct gfs *fs, int64_t i);
/* The file name of kv i / tensor i into out (reset first). */
int gfs_kv_fname(const struct gfs *fs, int64_t i, struct gguf_buf *out);
int gfs_tensor_fname(const struct gfs *fs, int64_t i, struct gguf_buf *out);

/* tree.c: the FILEs of meta/ (struct gfs_scratch) by name or inode.
 * Caller holds lock (read at least). */
struct gfs_scratch *gfs_meta_scratch_find(struct gfs *fs, const char *name);
struct gfs_scratch *gfs_meta_scratch_by_ino(struct gfs *fs, fuse_ino_t ino);

/* tree.c: bytes of tensor i: the library's size, but for a type id ggufs
 * does not know and ggml does (ids >= 40), which the library sized up to
 * the next tensor's offset: ggml's size of its blocks.  No lock. */
uint64_t gfs_tensor_bytes(const struct gfs *fs, int64_t i);

/* rows.c.  The kind whose inode ranges hold ino, or GFS_NONE. */
enum gfs_kind gfs_kind(const struct gfs *fs, fuse_ino_t ino);
/* The row of kind k, or NULL (GFS_NONE). */
const struct gfs_kind_ops *gfs_kind_row(const struct gfs *fs, enum gfs_kind k);
/* The row whose inode ranges hold ino, or NULL: gfs_kind_row of
 * gfs_kind, in one walk of the table. */
const struct gfs_kind_ops *gfs_kind_row_of(const struct gfs *fs,
                                           fuse_ino_t ino);
/* Entry k (0-based) of the root of fs, from the rows that are root
 * entries and present: its name, inode (ino NULL: the name and type only,
 * which a lookup compares before it asks the one inode) and file type;
 * 0, or ENOENT past the last.  Caller holds fs->lock (read). */
int gfs_kind_root_entry(struct gfs *fs, int64_t k, const char **name,
                        fuse_ino_t *ino, mode_t *mode);
/* Every row's fini, at the model's close (model.c). */
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
/* The reply to getxattr or listxattr (the core's and a store's): err,
 * else b's size when the caller asked for it (size 0), ERANGE when b
 * passes size, else b. */
void gfs_reply_xattr(fuse_req_t req, size_t size, int err,
                     const struct gguf_buf *b);
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
 * the told flag (kinds.h), through gfs_io(fs). */
void gfs_kinds_edited(struct gfs *fs);

#endif
