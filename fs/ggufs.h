/*
 * ggufs.h - the model's core: struct gfs (one model's state; each part's
 * own sits behind its pointer, declared in the part's header), its inode
 * numbers and node kinds.  Open handles, rendered texts and tree.c's
 * functions are the core's bottom's (node/node.h), a model's handlers the
 * core's top's (ops.h).
 *
 * The FUSE layer never parses bytes: it asks the gguf library for keys,
 * values (as text) and tensor extents, and maps them onto inodes (the
 * table below).  Names say the part, whose header declares them:
 *   gfs_op_, gfs_model_  a model's FUSE handlers (ops.h); its open and
 *                        close (model.h)
 *   gfs_fh, gfs_text_, gfs_kind  open handles, texts, inodes, the row of
 *                        a node, the hooks' fan-outs (gfs_kinds_)
 *                        (node/node.h)
 *   gfs_edit_            the edit section (edits/edits.h)
 *   gfs_meta_            meta/'s edit code (meta/meta.h)
 *   gfs_edits_           where the edits go, when they are durable;
 *                        gfs_overlay_, gfs_carry_, gfs_status_ its
 *                        overlay, carried edits, status (edits/edits.h)
 *   gfs_view_, gfs_vlink_  the live view (live/live.h)
 *   gfs_tw_              tensors written (tensors/tensors.h)
 *   gfs_views_           f32/, npy/, index.tsv, hashes (views/views.h)
 *   gfs_data_, gfs_fds_, gfs_patch_, gfs_pt_, gfs_remote_,
 *   gfs_inflight_        the model's bytes (source/source.h)
 *   gfs_store_, gfs_st_  a directory of models (stores/stores.h,
 *                        stores/storefs.h); struct gfs_mount a mount
 *                        (base/mount.h; the session's table:
 *                        session/mounts.h)
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
 * one while holding a later one; docs/architecture.md, Locks, has them
 * all with their reasons):
 *
 *   0. a store's st->mu (stores/storefs.h), never while a model's
 *      handler runs
 *   1. gfs_fh.mu      one open handle's draft
 *   2. lock           rwlock: what the library contexts hold, the edits
 *   3. fh_lock        the list of open handles     } leaves: nothing is
 *      text_lock      the rendered-text caches     } taken while held
 *      alias_mu       a store's alias names        }
 *      pt->mu         the view's versions and      } (pt->mu after
 *                     backing ids (passthrough.c)  }  text_lock is freed)
 *      and the parts' own leaves, where each part declares them:
 *      views->mu, fds->mu, twq->mu, the log's lock
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
    /* A shard set's or a mix's merged data layout (live/live.h: made by
     * gfs_view_layout at the model's open, freed by gfs_view_layout_free),
     * or NULL: the GGUF's own.  Read-only after the open. */
    struct gfs_layout *layout;
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
                          cache (tensors/tensors.c, the open) */
    size_t max_drafts; /* bytes all of them together may hold (ENOSPC) */
    atomic_size_t drafts_held; /* granted now (memcap.c): no lock */
    /* ggml's library once views.c loaded it (its own, freed by it), or
     * NULL: the size of a type only ggml knows (gfs_tensor_bytes, the
     * core's bottom, which may not reach into views/). */
    const gguf_ggml *ggml;
    struct gfs_remote *remote; /* a remote source (source/remote.c), or NULL:
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
    /* The root's listing the kernel may hold (ops.c, gfs_op_opendir): a
     * hash of what the readdirs of the root gave since the kernel last
     * dropped it, GFS_LISTED_NONE (none yet) or GFS_LISTED_MIXED (two
     * listings: it may hold either; ops.h).  A store keeps it across a
     * close of the model (storefs.c).  No lock: atomic. */
    _Atomic uint64_t root_listed;

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

/* What the attribute handlers asked before fs->lock is taken (hashes.c,
 * status.c) return for a name that is not theirs: the getxattr handler
 * then asks the others, under the lock.  Any errno, ENODATA included, is
 * their final answer: a commit holds the lock for seconds, and asking
 * the others would wait for it (a progress attribute that waited for the
 * end of the commit it reports on showed nothing). */
#define GFS_XATTR_OTHER (-1)
/* The meter and gfs_commit_metered: daemon.h. */

#endif
