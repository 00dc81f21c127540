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
 *   5, 6, 7            /f32, /npy, /index.tsv   the converted views and
 *                                   the tensor index (views.c)
 *   8                  /meta.tsv    the metadata, one line a key
 *                                   (metatsv.c)
 *   GFS_INO_F32 + i    /f32/N       tensor i as float32 values
 *   GFS_INO_NPY + i    /npy/N.npy   the same with a NumPy header
 *   10, 11             /tokenizer, /hf   the files tools look for
 *   GFS_INO_TOKFILE+n  /tokenizer/F, /hf/F  file n (enum voc_file;
 *                                   tokdir.c)
 *   GFS_INO_VIEW + n   /NAME.gguf   later versions of the live view, one
 *                                   inode each (4 is the first;
 *                                   passthrough.c)
 *
 * Names say the layer:
 *   gfs_op_<operation>  a model's FUSE low-level handlers (ops.c: the
 *                       tree's; fileops.c: those of open files), called
 *                       by the session's table (dispatch.c, mounts.h)
 *   gfs_fh_             open handles, struct gfs_fh (fileops.c)
 *   gfs_meta_           changes through meta/ and the commit (metaedit.c,
 *                       metavalues.c)
 *   gfs_store_          where the edits go, when they are durable (store/)
 *   gfs_view_           the live view: header, byte mapping, the merged
 *                       layout of a shard set (liveview.c)
 *   gfs_pt_             the live view by FUSE passthrough and its
 *                       versions (passthrough.c)
 *   gfs_devio_, gfs_passthrough_  the session's kernel shim (devio.c)
 *   gfs_xattr_          extended attributes (xattr.c)
 *   gfs_<other>         the tree: inodes, names, attributes, rendered texts
 *                       (tree.c); gfs_errno (errno.c); gfs_log (log.c)
 *   gguf_               the library (gguf/include/gguf.h), owner of
 *                       every rule of the format
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

#include "catalog.h" /* struct cat_file: a store's files */
#include "gguf.h"
#include "edits/edits.h"

#define GFS_INO_ROOT 1
#define GFS_INO_META 2
#define GFS_INO_TENSORS 3
#define GFS_INO_LIVE 4
#define GFS_INO_TENSOR (UINT64_C(1) << 32)
#define GFS_INO_KV (UINT64_C(2) << 32)
#define GFS_INO_SCRATCH (UINT64_C(3) << 32)
/* Later versions ("epochs") of the live view: GFS_INO_VIEW + n, n >= 1
 * (passthrough.c); the first one is GFS_INO_LIVE. */
#define GFS_INO_VIEW (UINT64_C(6) << 32)
#define GFS_INO_VIEW_END (UINT64_C(7) << 32)
/* A model's inodes (above) are below GFS_INO_MODEL_SPAN; the kernel sees
 * them plus the model's base, slot << GFS_INO_SLOT_SHIFT (mounts.h): slot
 * 0 is a single-file mount's model (numbers as above) or a store's own
 * nodes. */
/* A store's ollama model: ollama/ and its files (extras.c). */
#define GFS_INO_DIR_EXTRAS 9
#define GFS_INO_EXTRA (UINT64_C(7) << 32)
#define GFS_INO_EXTRA_END (UINT64_C(8) << 32)
#define GFS_INO_SLOT_SHIFT 36
#define GFS_INO_MODEL_SPAN (UINT64_C(1) << GFS_INO_SLOT_SHIFT)
#define GFS_INO_DIR_F32 5
#define GFS_INO_DIR_NPY 6
#define GFS_INO_INDEX 7
#define GFS_INO_META_TSV 8
#define GFS_INO_F32 (UINT64_C(4) << 32)
#define GFS_INO_NPY (UINT64_C(5) << 32)
/* tokenizer/, hf/ and their files, GFS_INO_TOKFILE + enum voc_file
 * (tokdir.c) */
#define GFS_INO_DIR_TOK 10
#define GFS_INO_DIR_HF 11
#define GFS_INO_TOKFILE (UINT64_C(8) << 32)
#define GFS_N_TOKFILES 10 /* VOC_N_FILES (vocab.h) */

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

/* A GHOST: a key that left meta/ (unlink, or a rename that made its text a
 * FILE).  Not listed.  Creating its file name again, or renaming a FILE
 * onto it, brings the key back with its type and its place in the KV
 * order. */
struct gfs_ghost {
    struct gfs_ghost *next;
    char *key;
    size_t klen;
    char *fname; /* its file name in meta/ (escaped, maybe hashed) */
    enum gguf_type type, arr_type;
    uint64_t ord; /* its place in the KV order (metaedit.c, key_ord) */
};

/* The log lines a mount keeps in memory for its status (log.c), and
 * their most bytes each. */
#define GFS_LOG_RING 20
#define GFS_LOG_LINE 512

/* A store's model's other files (ollama's layers, extras.c): each a file
 * beneath the store's directory dirfd, opened by cat_open_file.  Owned by
 * the model (model.c). */
struct gfs_extras {
    int dirfd; /* the store's; not the model's to close */
    size_t n;
    struct gfs_extra {
        char *name;
        struct cat_file file;
    } * v;
};

/* Bounds on what names in meta/ can make a mount hold: FILEs (count and
 * bytes each), GHOSTs and inode aliases (the oldest are forgotten). */
#define GFS_MAX_FILES 4096
/* GFS_MAX_FILE_BYTES: daemon.h */
#define GFS_MAX_GHOSTS 65536
#define GFS_MAX_ALIASES 65536
/* GFS_MAX_VALUE_DEFAULT, GFS_MAX_DRAFTS_DEFAULT: daemon.h */
/* Texts of values (tree.c).  The size of a file in meta/ is measured, never
 * made.  A text longer than GFS_TEXT_WHOLE is opened windowed (see struct
 * gfs_text); a shorter one is made whole at open.  Operations that need a
 * whole text (gfs_text_get: renames onto keys, type changes, backups) make
 * at most GFS_MAX_TEXT bytes (EFBIG past it, said in the log).  Whole texts
 * are kept for later opens while all kept texts stay under GFS_TEXT_CACHE
 * bytes. */
#define GFS_MAX_TEXT ((uint64_t)256 << 20)
/* The texts of the tokenizer's files (tokdir.c, made whole at each edit
 * generation by gfs_text_of_gen) that the daemon holds at once, all
 * models together (memcap.c, gfs_texts_grant): a hostile vocabulary of 42 MB
 * rendered 360 MB of texts (escapes: \xHH, \u00HH).  A text is made with
 * what is left of it as its bound, so that one past it stops early; the
 * largest real tokenizer.json (a 256k vocabulary) is about 33 MB. */
#define GFS_TEXTS_MAX ((size_t)128 << 20)
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

/* Where a byte range of a shard set's merged live view comes from. */
struct gfs_extent {
    uint64_t merged_rel; /* offset in the merged data section */
    uint64_t size;       /* tensor bytes; zero padding follows up to the next */
    int shard;
    uint64_t rel; /* offset in that shard's data section */
};

/* The log (log.c): its last GFS_LOG_RING lines, and the log file
 * (fd, when file) of a mount without a terminal; where (set at mount) says
 * where the log goes, for the status.  One per mount, shared by its
 * models; lock is a leaf taken by gfs_log under any other lock. */
struct gfs_log {
    pthread_mutex_t lock;
    char ring[GFS_LOG_RING][GFS_LOG_LINE];
    unsigned n; /* lines logged so far */
    int fd, file;
    int foreground; /* lines go to stderr, not syslog */
    char where[4200];
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
    struct gfs_views *views;   /* f32/, npy/, index.tsv, hashes (views.c) */
    /* ggml's library once views.c loaded it (its own, freed by it), or
     * NULL: the size of a type only ggml knows (gfs_tensor_bytes, the
     * core's bottom, which may not reach into views/). */
    const gguf_ggml *ggml;
    struct gfs_remote *remote; /* a remote source (fs/remote.c), or NULL:
                                  local files */
    /* Which files (indexes of shards) are remote, and whose source they
     * are (source/remote.c): the model's, or a mix's remote sources
     * (more_remote).  n_rfiles 0: every file is local. */
    struct gfs_rfile {
        struct gfs_remote *r;
        int k;
    } * rfiles;
    int n_rfiles;
    struct gfs_remote **more_remote;
    int n_more_remote;
    struct gfs_fds *fds; /* local: the descriptors of files that released
                            theirs (source/fds.c), or NULL */
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
    struct gfs_ghost *ghosts;
    size_t n_ghosts;
    fuse_ino_t (*aliases)[2]; /* {old, new}: see gfs_meta_resolve */
    size_t n_aliases;
    struct gfs_ord {
        uint32_t id;
        uint64_t ord;
    } * ords; /* keys brought back from GHOSTs: their ordinal (key_ord) */
    size_t n_ords;
    char **errors; /* by kv id: why the last edit was refused */
    size_t n_errors;
    char name_error[512]; /* why the last name in meta/ was refused
                             (user.gguf.error of meta/), or "" */
    uint64_t generation;  /* bumped by every applied edit: gfs_edit_changed */
    /* Where the edits go and what of them is durable (edits/edits.h):
     * the backend chosen at mount, the report of the last commit. */
    struct gfs_edits edits;

    /* Guarded by text_lock, taken with lock held (for reading at least):
     * readers render and cache texts concurrently. */
    pthread_mutex_t text_lock;
    struct gfs_text **texts; /* by kv id; NULL until rendered */
    size_t n_texts;
    size_t texts_bytes; /* held by texts[]: at most GFS_TEXT_CACHE */
    /* meta.tsv's text (metatsv.c), for generation metatsv_gen */
    struct gfs_text *metatsv;
    uint64_t metatsv_gen;
    /* tokenizer/'s and hf/'s files (tokdir.c), by enum voc_file, each
     * for its generation; which are there (voc_present), for tok_mask_gen
     * + 1 (0: not asked yet) */
    struct gfs_text *tok[GFS_N_TOKFILES];
    uint64_t tok_gen[GFS_N_TOKFILES];
    uint32_t tok_mask;
    uint64_t tok_mask_gen;
    uint64_t *sizes; /* by kv id: text length + 1, 0 until measured */
    size_t n_sizes;
    struct gfs_lnames lkeys, ltensors; /* hashed long names (tree.c) */
    struct gfs_text *live;             /* the live view's header, for generation
                              live_gen */
    uint64_t live_gen;
    uint64_t live_opened_gen; /* generation at the last open of the view */
    /* The root's listing the kernel may hold (ops.c, gfs_op_opendir): a
     * hash of what the readdirs of the root gave since the kernel last
     * dropped it, GFS_LISTED_NONE (none yet) or GFS_LISTED_MIXED (two
     * listings: it may hold either).  A store keeps it across a close
     * of the model (storefs.c).  No lock: atomic. */
    _Atomic uint64_t root_listed;

    /* Guarded by fh_lock.  Open handles: the kernel sends no release for
     * files still open when the mount goes away, so unmount frees them
     * (gfs_fh_close_all: unapplied drafts are dropped, not committed). */
    pthread_mutex_t fh_lock;
    struct gfs_fh *open_fhs;

    /* The live view's versions and passthrough (passthrough.c, its own
     * leaf lock); NULL until the session starts. */
    struct gfs_pt *pt;
    /* A mount without privileges: its unedited view as a link to the
     * file (viewlink.c, its own leaf lock); NULL until first asked.
     * Atomic: made under fs->lock (read) by the first asker, read by
     * others without viewlink.c's lock. */
    struct gfs_vlink *_Atomic vlink;

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
/* struct gfs's root_listed beside a listing's hash (ops.c). */
#define GFS_LISTED_NONE 0
#define GFS_LISTED_MIXED 1
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

/* liveview.c: the live view.  At mount: gfs_view_number numbers the
 * tensors across shards (t_first); gfs_view_layout (numbering first if
 * not done) lays out the merged data section of a shard set or a mix.
 * 0, or -1 with err. */
int gfs_view_number(struct gfs *fs, struct gguf_error *err);
int gfs_view_layout(struct gfs *fs, struct gguf_error *err);
/* viewlink.c: the live view of a mount without privileges as a link to
 * the file while it is the file (the contract: that file's top).
 * gfs_vlink_decide: the root entry gave ino (an epoch), decided once;
 * caller holds fs->lock (read).  gfs_vlink_is: ino is a link;
 * gfs_vlink_stat: fills st and returns 1 if it is; gfs_vlink_readlink
 * replies (EINVAL for any other inode); gfs_vlink_commit_flags:
 * GGUF_COMMIT_NEW_FILE while a reader may hold the file by the link;
 * gfs_vlink_free at the model's close (the live row's fini). */
void gfs_vlink_decide(struct gfs *fs, fuse_ino_t ino);
int gfs_vlink_is(struct gfs *fs, fuse_ino_t ino);
int gfs_vlink_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st);
void gfs_vlink_readlink(struct gfs *fs, fuse_req_t req, fuse_ino_t ino);
unsigned gfs_vlink_commit_flags(struct gfs *fs);
void gfs_vlink_free(struct gfs *fs);
/* mix.c: -o mix=RECIPE (its rules: the file's top comment).  At mount,
 * after the base is open and before gfs_view_layout: opens the sources
 * read-only (appended to fs->shards, fs->n_files) and sets fs->picks.
 * warn gets one line per rule that matches nothing.  0, or -1 with one
 * line in msg (the sources opened so far stay in fs->shards, closed with
 * the model). */
int gfs_mix_open(struct gfs *fs, const char *recipe, unsigned flags,
                 const struct gfs_remote_opts *ro,
                 void (*warn)(void *u, const char *line), void *u, char *msg,
                 size_t n);
void gfs_mix_free(struct gfs *fs);
void gfs_view_layout_free(struct gfs *fs);
/* Returns the view's header (a new reference) as a commit would write it
 * now.  Caller holds lock (read); takes text_lock. */
struct gfs_text *gfs_view_header(struct gfs *fs, int *err);
/* Size of the live view; 0 or errno.  Caller holds lock (read). */
int gfs_view_size(struct gfs *fs, uint64_t *size);
/* Records an open of the view; true if its header is the one of the last
 * open (the kernel may keep its page cache).  Caller holds lock (read). */
int gfs_view_reopened(struct gfs *fs);
/* Where bytes [off, off+size) of the view come from, clamped to its end:
 * hdr_n bytes of the header from hdr_off, then data_n bytes of the data
 * section from data_rel.  One file: that is the GGUF's bytes from
 * data_pos, to be served from its fd.  Caller holds lock (read). */
struct gfs_view_span {
    size_t hdr_off, hdr_n;
    uint64_t data_rel, data_n;
    uint64_t data_pos; /* one file: offset of data_rel in the GGUF */
};
void gfs_view_span(const struct gfs *fs, size_t hdr_len, uint64_t off,
                   size_t size, struct gfs_view_span *sp);
/* A shard set's view: copies the span's bytes (hdr_n + data_n) into buf,
 * the data from the shards' tensors, zeros between; 0 or errno.  Caller
 * holds lock (read). */
int gfs_view_copy(struct gfs *fs, const struct gfs_text *hdr,
                  const struct gfs_view_span *sp, char *buf);

/* xattr.c.  Caller holds lock (read). */
/* Fills out with the value of attribute name on ino; 0 or errno.  Not the
 * hashes: gfs_views_xattr, called first without the lock. */
int gfs_xattr_get(struct gfs *fs, fuse_ino_t ino, const char *name,
                  struct gguf_buf *out);
/* Fills out with the NUL-separated attribute names of ino. */
int gfs_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out);

/* metaedit.c: changes through meta/ and the commit.  Caller holds lock
 * for writing unless noted. */
/* After a rename that turns a temporary file into a key (sed -i, vim) or
 * back, the kernel keeps the source's inode number for the target name:
 * gfs_meta_resolve maps such an old number to the object that now holds
 * the name.  Caller holds lock (read at least). */
fuse_ino_t gfs_meta_resolve(const struct gfs *fs, fuse_ino_t ino);
/* Scratch files by name or inode.  Caller holds lock (read at least). */
struct gfs_scratch *gfs_meta_scratch_find(struct gfs *fs, const char *name);
struct gfs_scratch *gfs_meta_scratch_by_ino(struct gfs *fs, fuse_ino_t ino);
/* Records (msg) or clears (NULL) the refusal reason shown in
 * user.gguf.error of key id; gfs_meta_get_error reads it (lock held for
 * reading suffices). */
void gfs_meta_set_error(struct gfs *fs, uint32_t id, const char *msg);
const char *gfs_meta_get_error(struct gfs *fs, uint32_t id);
/* Why kv i may not be changed while mounted (general.alignment; split.no,
 * split.count, split.tensors.count of a shard set), or NULL.  Caller
 * holds lock (read at least). */
const char *gfs_meta_protected(const struct gfs *fs, int64_t i);
/* Why the value of kv i may not be written (open for writing, truncate):
 * gfs_meta_protected's reasons, and arrays of arrays (-o allow_nested
 * shows them; the library cannot write them).  Caller holds lock (read at
 * least). */
const char *gfs_meta_unwritable(const struct gfs *fs, int64_t i);
/* Refuses a change (what: "opening for writing", "truncate") of protected
 * kv i: logs the reason, records it in user.gguf.error; returns EPERM. */
int gfs_meta_refuse_protected(struct gfs *fs, int64_t i, const char *what);
/* The FILEs in meta/ (never committed): logs "meta/X: not a key, not
 * committed (N bytes)" for each if log, and appends the same, "; "
 * separated, to msg (NUL-terminated, size bytes) if msg: as many as fit,
 * then "; K more files in meta/ ..." for the rest.  Returns their number.
 * Caller holds lock (read at least). */
size_t gfs_meta_files_note(struct gfs *fs, char *msg, size_t size, int log);
/* Parses text as the value of kv i and stores it; 0 or errno.  quiet: a
 * refusal is not logged nor recorded (flush of a file still being
 * written: bash's redirection flushes right after open). */
int gfs_meta_apply_text(struct gfs *fs, int64_t i, const char *text, size_t len,
                        int quiet);
int gfs_meta_create(struct gfs *fs, const char *name, fuse_ino_t *ino);
/* A key made by create (ino) whose first write failed: removed again if it
 * still holds the zero value create gave it, so that a failed write never
 * leaves a key that was not there (logged). */
void gfs_meta_drop_new(struct gfs *fs, fuse_ino_t ino);
/* metanames.c: editors' scratch names in meta/ (the patterns are its top
 * comment and ggufs(1), NAMES IN META/).  gfs_meta_backup_name: a backup
 * or temporary name, even if it is a valid key name; gfs_meta_scratch_name:
 * that, or a name with a random part.  No lock. */
int gfs_meta_backup_name(const char *name);
int gfs_meta_scratch_name(const char *name);
int gfs_meta_unlink(struct gfs *fs, const char *name);
int gfs_meta_rename(struct gfs *fs, const char *from, const char *to,
                    unsigned flags);
int gfs_meta_set_type(struct gfs *fs, fuse_ino_t ino, const char *type,
                      size_t len);
int gfs_meta_truncate(struct gfs *fs, fuse_ino_t ino, off_t size);

/* leftover.c: what earlier mounts left, for the next command.
 * gfs_record_outcome: the daemon records the commit report (when: "after
 * unmount") as the model's status record (gfs_print_outcome and
 * gfs_pending_note: daemon.h).  gfs_wait_previous: waits (at most 60 s, saying so)
 * while an earlier daemon still holds the file's lock for its last commit
 * (mounted: the file is mounted now, nothing to wait for); 0 or -1. */
void gfs_record_outcome(struct gfs *fs, const char *when);
int gfs_wait_previous(const char *path, const char *file, int mounted);
void gfs_meta_free(struct gfs *fs);

/* What the attribute handlers asked before fs->lock is taken (hashes.c,
 * status.c) return for a name that is not theirs: the getxattr handler
 * then asks the others, under the lock.  Any errno, ENODATA included, is
 * their final answer: a commit holds the lock for seconds, and asking
 * the others would wait for it (a progress attribute that waited for the
 * end of the commit it reports on showed nothing). */
#define GFS_XATTR_OTHER (-1)
/* log.c: gfs_status_note: a logged line (gfs_log's) kept and written to
 * the log file.  gfs_logfile_open: at mount, before detaching; 0, or -1
 * with why in msg.
 * status.c: user.ggufs.status and user.ggufs.progress, and what commands
 * show of them.  gfs_status_xattr: the root's two attributes (GFS_XATTR_OTHER
 * for other names); takes fs->lock (read) itself, for the status only.
 * gfs_progress_cb: the library's progress callback, user is fs. */
void gfs_status_note(struct gfs_log *l, const char *line);
int gfs_logfile_open(struct gfs_log *l, char *msg, size_t n);
void gfs_logfile_close(struct gfs_log *l);
int gfs_status_xattr(fuse_req_t req, struct gfs *fs, fuse_ino_t ino,
                     const char *name, struct gguf_buf *out);
void gfs_progress_cb(void *user, uint64_t done, uint64_t total);
/* A store's status (storeops.c): "model NAME: " and the model's pending
 * edits as its own status has them, nothing when it has none; takes
 * fs->lock (read).  0 or ENOMEM. */
int gfs_status_model_edits(struct gfs *fs, const char *name,
                           struct gguf_buf *b);
/* The meter and gfs_commit_metered: daemon.h. */

/* errno.c: the one place library statuses become errno values. */
int gfs_errno(const struct gguf_error *err);

/* Moves a buffer's grant (*granted) to want bytes (memcap.c): call before
 * it grows past *granted, and with the new size after it shrinks or is
 * freed (0).  0, or ENOSPC (nothing changed) past fs->max_drafts. */
int gfs_mem_grant(struct gfs *fs, size_t *granted, size_t want);
/* The daemon's texts made at an edit generation (GFS_TEXTS_MAX, all
 * models together): room is what is left now (the bound to make the next
 * one with); grant counts n more bytes (0, or ENOMEM past the bound,
 * nothing counted, one log line naming fs the first time); release
 * uncounts them.  No lock. */
size_t gfs_texts_room(void);
int gfs_texts_grant(struct gfs *fs, size_t n);
void gfs_texts_release(size_t n);

/* mountinfo.c: gfs_find_mount: daemon.h.  gfs_mount_point_of: whether
 * the directory at real (a resolved path) is a mount point: 1 with its
 * type and source in what, else 0 (or no mountinfo). */
int gfs_mount_point_of(const char *real, char *what, size_t n);

/* One line to stderr (foreground) or syslog, and to the log's memory
 * and file (gfs_status_note).  No lock. */
void gfs_log(struct gfs *fs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gfs_log_line(struct gfs_log *l, const char *line);
/* What the code shared by the commands and the mounts says on stderr
 * ("ggufs: ...\n", as fprintf would) goes to the log l instead, on this
 * thread, while l is set (gfs_say_to(l) ... gfs_say_to(NULL)): a store
 * opens its models after the daemon detached, when stderr is /dev/null
 * (issue 32: an overlay refused there was said to nobody). */
void gfs_say_to(struct gfs_log *l);
void gfs_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

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

/* views.c, vconv.c, hashes.c: the converted views f32/NAME, npy/NAME.npy,
 * index.tsv and the hashes of tensors (user.gguf.sha256, user.gguf.xxh64).
 * gfs_views_init: at mount, before the daemon detaches; finds ggml's
 * library (ggml: -o ggml=PATH, "none", or NULL for $GGUFS_GGML_LIB, then
 * the usual places) when a tensor needs it, and prints one line on
 * stderr naming the tensors left without a view and why.  0, or -1 after
 * one line (an -o ggml=PATH that cannot be used).  The others: caller
 * holds fs->lock (read). */
int gfs_views_init(struct gfs *fs, const char *ggml, const char *file);
void gfs_views_free(struct gfs *fs);
/* Whether some tensor has a view (f32/ and npy/ are not empty).  No lock. */
int gfs_views_any(const struct gfs *fs);
/* Their node kinds: rows of kinds.h, defined in views.c. */
/* user.gguf.sha256 and user.gguf.xxh64 of tensors/NAME (its bytes) and of
 * tensors/ (every tensor's bytes in order), and user.gguf.hash_progress;
 * GFS_XATTR_OTHER for other names, ENODATA for other inodes, EINTR if req
 * is interrupted first.  Unlike the others, called
 * WITHOUT fs->lock: a first request reads the whole tensor or model,
 * holding the lock for reading one chunk at a time, so that commits and
 * edits never wait for more than a chunk (hashes.c). */
int gfs_views_xattr(fuse_req_t req, struct gfs *fs, fuse_ino_t ino,
                    const char *name, struct gguf_buf *out);
int gfs_views_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out);
/* Bytes of tensor i: the library's size, but for a type id ggufs does not
 * know and ggml does (ids >= 40), which the library sized up to the next
 * tensor's offset: ggml's size of its blocks.  No lock. */
uint64_t gfs_tensor_bytes(const struct gfs *fs, int64_t i);
/* index.tsv's text (a new reference), rendered on first use. */
struct gfs_text *gfs_views_index(struct gfs *fs, int *err);

/* ops.c. */
/* The reply to getxattr or listxattr: err, else b's size when the caller
 * asked for it (size 0), ERANGE when b passes size, else b. */
void gfs_reply_xattr(fuse_req_t req, size_t size, int err,
                     const struct gguf_buf *b);
/* edits/edits.c: gfs_edits_may_commit (edits.h, which says who may) for
 * the user of req. */
int gfs_may_commit(const struct gfs *fs, fuse_req_t req);

/* edits/overlay.c: -o overlay[=PATH] (issue 14).
 * gfs_overlay_setup: at mount, after the GGUF (set) is open read-only:
 * where the overlay is (a->opt, else the default in the state
 * directory), its lock taken (read-write mounts), the source's identity,
 * and the overlay applied if it belongs to it; 0, or -1 after one line on
 * stderr (an overlay that does not belong, one not to be trusted, one in
 * use by another mount); the overlay chosen as the mount's edit store
 * (edits/overlay.c).  The overlay commands and gfs_overlay_dead_note:
 * daemon.h. */
struct gfs_overlay_args {
    const char *path;      /* the source: absolute path, or its http(s) URL */
    const char *remote_id; /* a remote source's version (gfs_remote_identity),
                              NULL for a local file */
    const char *opt;       /* -o overlay=PATH, or NULL for the default */
    const char *file;      /* the source as the user named it (messages) */
    const char *mnt;       /* the mountpoint, absolute, or NULL */
    int readonly;          /* -o ro: no lock, no record, never written */
    const char *name_key;  /* a store's model: "STORE\nNAME", its edits
                              follow the name (edits/carry.c); else NULL */
};
int gfs_overlay_setup(struct gfs *fs, const struct gfs_overlay_args *a);
void gfs_overlay_free(struct gfs *fs);
/* Where the overlay of an overlay mount is (user.ggufs.overlay), else
 * NULL.  No lock: set at mount. */
const char *gfs_overlay_where(const struct gfs *fs);
/* A mount without -o overlay of a file that has a default overlay: one
 * note on stderr saying so (its edits are not shown; a commit makes the
 * overlay stale). */
void gfs_overlay_note(const char *path, const char *file);
/* edits/carry.c, at a store's mount (stderr still the user's): one line per model of
 * store whose name's record names another file than the name leads to
 * now (now_of: its first file, resolved, into buf; NULL if the store has
 * no such name) while the new file has no overlay and the old one's is
 * there: its edits are carried when it is first opened, or (asked of
 * the two headers now) why they no longer apply. */
void gfs_carry_notes(const char *store,
                     const char *(*now_of)(void *u, const char *name, char *buf,
                                           size_t n),
                     void *u);

#endif
