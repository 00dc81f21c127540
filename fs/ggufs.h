/*
 * ggufs.h - the model's core: struct gfs (one model's state; each part's
 * own sits behind its pointer, declared in the part's header), its inode
 * numbers and node kinds, open handles and rendered texts, and the
 * functions of the core's files (tree.c, fileops.c, xattr.c, ops.c).
 *
 * The FUSE layer never parses bytes: it asks the gguf library for keys,
 * values (as text) and tensor extents, and maps them onto inodes (the
 * table below).  Names say the part, whose header declares them:
 *   gfs_op_, gfs_fh_     a model's FUSE handlers and open handles (here)
 *   gfs_meta_            meta/'s edit code (meta/meta.h)
 *   gfs_edits_           where the edits go, when they are durable
 *                        (edits/edits.h)
 *   gfs_view_, gfs_vlink_  the live view (live/live.h)
 *   gfs_tw_              tensors written (tensors/tensors.h)
 *   gfs_views_           f32/, npy/, index.tsv, hashes (views/views.h)
 *   gfs_data_, gfs_fds_, gfs_patch_, gfs_pt_, gfs_remote_  the model's
 *                        bytes (source/source.h)
 *   gfs_store_, gfs_st_  a directory of models (session/mounts.h,
 *                        stores/storefs.h)
 *   gfs_log, gfs_errno, gfs_mem_  the bottom (base/base.h); gfs_devio_
 *                        the session's kernel shim (base/devio.h)
 *   gguf_                the library (gguf/include/gguf.h), owner of
 *                        every rule of the format
 * Static helpers have no prefix.
 *
 * Concurrency: handlers run on several threads.  struct gfs says which lock
 * guards which fields and the order locks are taken in.  Edits and commits
 * hold `lock` for writing; everything else holds it for reading, tensor and
 * live-view reads included (through the reply), so that a commit cannot
 * move the data start or replace the fd under a read in flight, while
 * readers never wait for each other.  Reads of a key take no lock but
 * their handle's: they serve the text snapshot taken at open, or the
 * draft of a writable open.
 */
#ifndef GGUFS_FS_H
#define GGUFS_FS_H

#include "daemon.h" /* FUSE_USE_VERSION; the options, shared with cli/ */
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "gguf.h"
#include "edits/edits.h"

/* A model's inodes, each kind's row (kinds.h) owning its numbers.  A
 * model's are below GFS_INO_MODEL_SPAN; the kernel sees them plus the
 * model's base, slot << GFS_INO_SLOT_SHIFT (mounts.h): slot 0 is a
 * single-file mount's model (numbers as here) or a store's own nodes. */
#define GFS_INO_ROOT 1       /* /  (rootdir.c) */
#define GFS_INO_META 2       /* /meta: one file per metadata key */
#define GFS_INO_TENSORS 3    /* /tensors: one file per tensor, raw bytes */
#define GFS_INO_LIVE 4       /* /NAME.gguf, the live view (liveview.c) */
#define GFS_INO_DIR_F32 5    /* /f32 (views.c) */
#define GFS_INO_DIR_NPY 6    /* /npy */
#define GFS_INO_INDEX 7      /* /index.tsv */
#define GFS_INO_META_TSV 8   /* /meta.tsv (metatsv.c) */
#define GFS_INO_DIR_EXTRAS 9 /* a store's ollama model's ollama/ (extras.c) */
#define GFS_INO_DIR_TOK 10   /* /tokenizer (tokdir.c) */
#define GFS_INO_DIR_HF 11    /* /hf */
/* + tensor index i (never changes): /tensors/N */
#define GFS_INO_TENSOR (UINT64_C(1) << 32)
/* + the key's stable library id: /meta/K */
#define GFS_INO_KV (UINT64_C(2) << 32)
/* + n: /meta/X, a FILE (a name that is not a key): in memory, never
 * committed */
#define GFS_INO_SCRATCH (UINT64_C(3) << 32)
#define GFS_INO_F32 (UINT64_C(4) << 32) /* + i: /f32/N, float32 values */
#define GFS_INO_NPY (UINT64_C(5) << 32) /* + i: /npy/N.npy, the same */
/* + n, n >= 1: the live view's later versions ("epochs"), one inode each
 * (passthrough.c); the first one is GFS_INO_LIVE */
#define GFS_INO_VIEW (UINT64_C(6) << 32)
#define GFS_INO_VIEW_END (UINT64_C(7) << 32)
/* + n: a store's ollama model's ollama/ files (extras.c) */
#define GFS_INO_EXTRA (UINT64_C(7) << 32)
#define GFS_INO_EXTRA_END (UINT64_C(8) << 32)
/* + enum voc_file: /tokenizer/F, /hf/F (tokdir.c) */
#define GFS_INO_TOKFILE (UINT64_C(8) << 32)
#define GFS_INO_SLOT_SHIFT 36
#define GFS_INO_MODEL_SPAN (UINT64_C(1) << GFS_INO_SLOT_SHIFT)

enum gfs_kind {
    GFS_NONE,
    GFS_ROOT,
    GFS_DIR_META,
    GFS_DIR_TENSORS,
    GFS_TENSOR,
    GFS_KV,
    GFS_SCRATCH,
    GFS_LIVE,
    GFS_DIR_F32, /* views.c */
    GFS_DIR_NPY,
    GFS_F32,
    GFS_NPY,
    GFS_INDEX,
    GFS_META_TSV,   /* metatsv.c */
    GFS_DIR_EXTRAS, /* extras.c */
    GFS_EXTRA,
    GFS_DIR_TOK, /* tokdir.c */
    GFS_DIR_HF,
    GFS_TOKFILE
};

/* The state of a name in meta/: KEY, GHOST or FILE; the rule that moves a
 * name between them (create, rename, unlink) is written at the top of
 * metaedit.c and in ggufs(1), NAMES IN META/. */

/* A FILE: a name in meta/ that is not a key (an editor's temporary file, a
 * backup, any name).  Held in memory, listed, never committed (a commit
 * names it).  A FILE made by renaming a key away remembers that key's
 * type: renamed onto a free new key name, it makes a key of that type. */
struct gfs_scratch {
    struct gfs_scratch *next;
    char *name;
    fuse_ino_t ino;
    struct gguf_buf data;
    size_t granted; /* bytes of fs->max_drafts data may hold (memcap.c) */
    struct timespec mtime;
    int backup;                    /* renamed from a key: type and from hold */
    enum gguf_type type, arr_type; /* that key's */
    char *from;                    /* that key's file name */
};

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
                              in fileops.c) */
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
    char data[];       /* whole texts: the len bytes */
};

/* An index of hashed long file names (tree.c): the 64-bit hash a hashed
 * name ends with -> kv id (meta/) or tensor index (tensors/), so a lookup
 * costs one probe, not an escape of every name. */
struct gfs_lnames {
    struct gfs_lname {
        uint64_t h, v; /* v + 1; 0: empty slot */
    } * slot;
    size_t cap, n;
    uint64_t next; /* ids (indexes) below next are in */
};

/*
 * The state of a model: what one GGUF (or shard set, or remote file)
 * mounted as a tree holds.  A mount holds one model (a single-file mount)
 * or many (a store, mounts.h); the name struct gfs is older than stores.
 * Locks, in the order they are taken (never take
 * one while holding a later one):
 *
 *   1. gfs_fh.mu      one open handle's draft
 *   2. lock           rwlock: what the library contexts hold, the edits
 *   3. fh_lock        the list of open handles     } leaves: nothing is
 *      text_lock      the rendered-text caches     } taken while held
 *      alias_mu       a store's alias names        }
 *      pt->mu         the view's versions and      } (pt->mu after
 *                     backing ids (passthrough.c)  }  text_lock is freed)
 *
 * So write and flush take fh->mu, then lock to check or apply the draft;
 * create holds lock (write), then fh_lock to list its new handle; a stat
 * of a key holds lock (read), then text_lock to render it.  The fields
 * are grouped by the lock that guards them.
 */
struct gfs {
    /* Set at mount, read-only while mounted: no lock.  The contexts'
     * pointers never change; what they hold does (under lock). */
    /* Its place in the mount (mounts.h): the kernel's inode numbers are
     * the model's own (GFS_INO_*) plus ino_base; parent is the kernel's
     * inode of the directory that lists the model's root (the mount's
     * root for a single-file mount). */
    struct gfs_mount *mount;
    fuse_ino_t ino_base, parent;
    /* The kinds' table (kinds.h), n_kinds rows: kinds.c's, set by
     * model.c; the core's bottom (node/rows.c) walks it. */
    const struct gfs_kind_ops *const *kinds;
    size_t n_kinds;
    /* The session's kernel shim (base/devio.h: what INIT negotiated, the
     * kernel told of stale pages, whether long requests yield), or NULL
     * (no session: the commands that never mount).  Set before the
     * session serves the model. */
    struct gfs_devio *io;
    const struct gfs_extras *extras; /* a store's model's, or NULL */
    gguf_ctx *ctx;     /* the (first) GGUF: metadata, edits, commit */
    gguf_ctx **shards; /* every file of the set; shards[0] == ctx */
    int n_shards;
    int64_t *t_first; /* global index of each shard's first tensor */
    /* A mix (-o mix, mix.c): the files after the base's shards,
     * shards[n_shards .. n_files), are its sources, and picks[g] says
     * which file and which of its tensors base tensor g is (NULL: no
     * mix).  n_files counts every file the model reads. */
    int n_files;
    struct gfs_pick {
        int file;
        int64_t i;
    } * picks;
    struct gfs_extent *ext; /* shard sets: the merged data layout */
    uint64_t merged_data_size;
    const char *path;      /* absolute path of the GGUF */
    const char *mnt;       /* the mountpoint, for messages */
    const char *live_name; /* file name of the live view in the root, or
                              NULL */
    /* A store's other names of this model (its aliases, storefs.c), so
     * that MNT/NAME/NAME.gguf is the live view for every name: the
     * "BASE.gguf" of each alias whose last component differs, NUL
     * separated, n_alias_names of them; set by the store at each scan.
     * Guarded by alias_mu, a leaf (rootdir.c reads them with lock held). */
    pthread_mutex_t alias_mu;
    char *alias_names;
    size_t n_alias_names;
    uid_t uid;
    gid_t gid;
    int readonly;
    unsigned commit_flags;
    double timeout;    /* entry/attr timeout, seconds */
    size_t max_value;  /* bytes a meta file being written may hold (EFBIG) */
    int tensor_dio;    /* -o tensor_direct_io: tensor opens bypass the page
                          cache (see open_tensor in fileops.c) */
    size_t max_drafts; /* bytes all of them together may hold (ENOSPC) */
    atomic_size_t drafts_held; /* granted now (memcap.c): no lock */
    /* ggml's library once views.c loaded it (its own, freed by it), or
     * NULL: the size of a type only ggml knows (gfs_tensor_bytes, the
     * core's bottom, which may not reach into views/). */
    const gguf_ggml *ggml;
    struct gfs_remote *remote; /* a remote source (fs/remote.c), or NULL:
                                  local files */
    /* The parts' own state: each struct is declared in its part's
     * header, which says which lock guards each field; the pointers are
     * set at the model's open and never change. */
    struct gfs_views *views;     /* f32/, npy/, index.tsv, hashes (views.h) */
    struct gfs_tok *tok;         /* tokenizer/, hf/ (tok/tok.h) */
    struct gfs_metatsv *metatsv; /* meta.tsv (meta/meta.h) */
    struct gfs_meta *meta;       /* GHOSTs, aliases, refusals (meta/meta.h) */
    struct gfs_live *live;       /* the live view (live/live.h) */
    struct gfs_rfiles *rfiles;   /* remote files (source/source.h), or NULL */
    /* local: the descriptors of files that released theirs (source/fds.c),
     * or NULL */
    struct gfs_fds *fds;
    /* Read-only mounts: set once an open finds the GGUF changed since the
     * mount (fileops.c, file_changed); every open and read fails then. */
    atomic_int changed;

    /* Guarded by lock: held for reading to look, for writing to change
     * (edits, commits: only in an edit section, edits/edits.h).  It
     * also guards the contents of ctx and shards. */
    pthread_rwlock_t lock;
    struct stat st; /* of the GGUF, at mount and after each
                       commit: times for every file */
    struct gfs_scratch *scratch;
    size_t n_scratch;
    uint64_t next_scratch;
    uint64_t generation; /* bumped by every applied edit: gfs_edit_changed */
    /* Where the edits go and what of them is durable (edits/edits.h):
     * the backend chosen at mount, the report of the last commit. */
    struct gfs_edits edits;

    /* Guarded by text_lock, taken with lock held (for reading at least):
     * readers render and cache texts concurrently. */
    pthread_mutex_t text_lock;
    struct gfs_text **texts; /* by kv id; NULL until rendered */
    size_t n_texts;
    size_t texts_bytes; /* held by texts[]: at most GFS_TEXT_CACHE */
    uint64_t *sizes;    /* by kv id: text length + 1, 0 until measured */
    size_t n_sizes;
    struct gfs_lnames lkeys, ltensors; /* hashed long names (tree.c) */

    /* Guarded by fh_lock.  Open handles: the kernel sends no release for
     * files still open when the mount goes away, so unmount frees them
     * (gfs_fh_close_all: unapplied drafts are dropped, not committed). */
    pthread_mutex_t fh_lock;
    struct gfs_fh *open_fhs;

    /* The live view's versions and passthrough (passthrough.c, its own
     * leaf lock); NULL until the session starts. */
    struct gfs_pt *pt;

    /* The mount's log (log.c), shared by its models. */
    struct gfs_log *log;
    /* The running commit's progress (gfs_progress_cb): bytes done of
     * total, total 0 when none.  No lock. */
    _Atomic uint64_t prog_done, prog_total;
    /* Tensors written since the last commit (tensorw.c): one mark each,
     * allocated at the first open of a tensor for writing (fs->lock held
     * for writing), set by writers (atomic, fs->lock read), read and
     * cleared by the commit (fs->lock write). */
    _Atomic unsigned char *tw_marks;
    atomic_int tw_any;
    /* A read-write overlay mount's tensors (source/patch.c), or NULL. */
    struct gfs_patch *patch;
    /* In-place tensor writes answered and not yet written
     * (source/inflight.c; tensorw.c, Pipelining), or NULL: made at the
     * first open of a tensor for writing (fs->lock held for writing),
     * freed with the model. */
    struct gfs_twq *twq;
};

/* The kernel's inode number of this model's inode ino. */
static inline fuse_ino_t gfs_ino_out(const struct gfs *fs, fuse_ino_t ino) {
    return ino + fs->ino_base;
}

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
/* fileops.c: the text a read-only open of ino serves, as gfs_op_open
 * opens it (the row's open), with a reference for the caller
 * (gfs_text_put); NULL and *err for a file that is not a text (a tensor,
 * a view: EISDIR) or cannot be opened.  For the commands that run
 * without a mount (nomount.c).  Takes fs->lock (read). */
struct gfs_text *gfs_open_text(struct gfs *fs, fuse_ino_t ino, int *err);
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

/* xattr.c.  Caller holds lock (read). */
/* Fills out with the value of attribute name on ino; 0 or errno.  Not the
 * hashes: gfs_views_xattr, called first without the lock. */
int gfs_xattr_get(struct gfs *fs, fuse_ino_t ino, const char *name,
                  struct gguf_buf *out);
/* Fills out with the NUL-separated attribute names of ino. */
int gfs_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out);

/* tree.c: the FILEs of meta/ (struct gfs_scratch) by name or inode.
 * Caller holds lock (read at least). */
struct gfs_scratch *gfs_meta_scratch_find(struct gfs *fs, const char *name);
struct gfs_scratch *gfs_meta_scratch_by_ino(struct gfs *fs, fuse_ino_t ino);

/* What the attribute handlers asked before fs->lock is taken (hashes.c,
 * status.c) return for a name that is not theirs: the getxattr handler
 * then asks the others, under the lock.  Any errno, ENODATA included, is
 * their final answer: a commit holds the lock for seconds, and asking
 * the others would wait for it (a progress attribute that waited for the
 * end of the commit it reports on showed nothing). */
#define GFS_XATTR_OTHER (-1)
/* The meter and gfs_commit_metered: daemon.h. */

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

/* tree.c: bytes of tensor i: the library's size, but for a type id ggufs
 * does not know and ggml does (ids >= 40), which the library sized up to
 * the next tensor's offset: ggml's size of its blocks.  No lock. */
uint64_t gfs_tensor_bytes(const struct gfs *fs, int64_t i);

/* ops.c. */
/* The reply to getxattr or listxattr: err, else b's size when the caller
 * asked for it (size 0), ERANGE when b passes size, else b. */
void gfs_reply_xattr(fuse_req_t req, size_t size, int err,
                     const struct gguf_buf *b);
/* Appends one directory entry (ino: the kernel's) to b if it stays
 * within max bytes; 0 when it does not (the listing is full).  plus: a
 * readdirplus entry, its lookup reply, or GFS_DIRENT_PLUS_NONE (the name
 * and type alone: the kernel looks the name up when it needs it). */
#define GFS_DIRENT_PLUS_NONE ((const struct fuse_entry_param *)1)
int gfs_add_dirent(fuse_req_t req, struct gguf_buf *b, size_t max,
                   const char *name, fuse_ino_t ino, mode_t mode, off_t next,
                   const struct fuse_entry_param *plus);

#endif
