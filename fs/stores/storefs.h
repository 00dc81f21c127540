/*
 * storefs.h - what storefs.c (a store's names, models and life) and
 * storeops.c (the store's own nodes: directories, links, models.tsv)
 * share: the nodes and the store's state.  Private to those two files;
 * their shared functions are named gfs_st_.
 */
#ifndef GGUFS_STOREFS_H
#define GGUFS_STOREFS_H

#include "catalog.h"
#include "stores.h"

#define GFS_STORE_TSV 2   /* models.tsv */
#define GFS_STORE_DIR0 16 /* directory node k: GFS_STORE_DIR0 + k */
/* A model's descriptors, for the bound: its file and directory (twice
 * each: opened once, and its context's, which holds the directory when
 * it writes: gguf's commit writes beside the file through it), and for a
 * shard set GFS_FDS_STORE_CAP shard descriptors (source/fds.c: the other
 * shards are opened on demand, one at a time but for a reader that holds
 * one while another opens). */
#define FD_PER_MODEL 5
#define FAIL_RETRY_S 1.0 /* a model that failed to open: tried again after */
/* The store's stamp: asked at most this often. */
#define RESCAN_EVERY_S 1.0
/* make_room: how long it waits for an open model to be let go. */
#define HOLD_WAIT_MS 1000
#define TSV_HEADER                                                             \
    "name\tarchitecture\tparameters\tfile_type\tsize\tcontext_length\t"        \
    "tensors\tsource\n"

/* Who may read a model (storeusers.c): a verdict for a user, trusted
 * for RESCAN_EVERY_S. */
struct gfs_st_seen {
    uid_t uid;
    gid_t gid;
    uint64_t groups; /* a hash of the supplementary groups */
    int ok;
    double t; /* 0: none */
};

struct node {
    char *path;       /* the whole name ("" for the root) */
    const char *base; /* its last component (in path) */
    uint32_t parent;  /* its directory's index */
    int model;        /* a model's directory, else a directory of names */
    int present;      /* in the last scan */
    /* Directories: their present children, sorted by base. */
    uint32_t *kids;
    size_t n_kids, cap_kids;
    /* Models (guarded by st->mu). */
    const struct cat_model *cm; /* in st->list while present */
    struct gfs *fs;             /* open, or NULL */
    int refs, opening;
    uint64_t used; /* st->tick at the last request: least recently used */
    double failed; /* when the last open failed (0: never) */
    /* Closed after a commit wrote it a new file (a passthrough reader
     * kept the old one, source/passthrough.c): the store is scanned
     * again before it opens, so that the scan names the file there now. */
    int renewed;
    /* Its model's root_listed (struct gfs) when it closed: the listing
     * the kernel may hold of its root, given to the model again when it
     * opens (ops.c compares it with the listing then). */
    uint64_t listed;
    /* Closed with what the kernel may hold of its root what a fresh open
     * would give (gfs_model_fresh_view), while no scan has run since:
     * the store answers its root's OPENDIR and its live view's LOOKUP
     * (live_e; its name is gfs_st_is_live's) without opening it
     * (storeops.c). */
    int fresh;
    struct fuse_entry_param live_e;
    struct stat file_st; /* its first file as the model had it open */
    char *line;          /* its models.tsv line, once made */
    /* The file the line was read from: kept while the store's scan sees
     * the same one (a rescan reads no header again). */
    dev_t line_dev;
    ino_t line_ino;
    uint64_t line_size;
    /* Another name of a model listed before it (the same first file: an
     * ollama model copied under a second name, one blob in two HF
     * snapshots, a hard link): a symbolic link to that model's directory
     * (alias: its index), never opened twice; -1 for none. */
    int64_t alias;
    /* Forgetting (storefs.c): the lookups the kernel holds of the node's
     * inode (a directory's, a link's or a model's root: each entry
     * replied adds one, FORGET takes them back); its live children; the
     * generation of its numbers (a freed index is used again); freed:
     * on st->free, waiting to be used again. */
    uint64_t nlookup;
    uint32_t n_live, gen;
    int freed;
    struct gfs_st_seen seen[2]; /* storeusers.c: the last verdicts */
};

/* A name that left the store, for the kernel to drop (storefs.c). */
struct gfs_st_inval {
    fuse_ino_t parent;
    char *name;
};

struct gfs_storefs {
    struct gfs_mount *mount;
    struct gfs_opts o; /* the mount's */
    const char *mnt;   /* the mountpoint, absolute when it resolved */
    char *mnt_abs;
    int dirfd; /* the store's directory (local stores) */
    char *dir; /* its absolute path, or the hf:// or s3:// URL of a remote
                  store (a Hub repo, a bucket prefix) */
    enum cat_kind kind;
    struct stat st; /* of the store's directory at mount: times of its nodes */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct cat_list list;
    uint32_t *node_of; /* list.models[i]'s node */
    struct node *nodes;
    size_t n_nodes, cap_nodes;
    /* Forgetting: the indexes of freed nodes; the names that left, for
     * the kernel to drop (by inval_thread: never in a request's path, a
     * lookup holds its directory's lock); the next generation. */
    uint32_t *free;
    size_t n_free, cap_free;
    struct gfs_st_inval *inval;
    size_t n_inval;
    pthread_cond_t inval_cv;
    pthread_t inval_thread;
    int inval_run, inval_quit, inval_stuck;
    uint32_t gen;
    uint64_t stamp, tick;
    double checked;
    int scanning; /* a request reads the store, st->mu let go */
    size_t n_open, max_open;
    char commit_msg[4096]; /* the last fsync of the root's reports */
};

/* A remote store (a Hub repo, an S3 bucket prefix): listed by its
 * server, its files remote URLs (cat_file.path), no directory. */
static inline int gfs_st_remote(const struct gfs_storefs *st) {
    return st->kind == CAT_HUB || st->kind == CAT_S3;
}

/* storefs.c.  Callers hold st->mu. */
/* The child of dir named base (len bytes), or -1; *at: where it is or
 * would go in dir's sorted children. */
int64_t gfs_st_kid_find(const struct gfs_storefs *st, const struct node *dir,
                        const char *base, size_t len, size_t *at);
/* At most once a second: the store read again if its stamp moved
 * (st->mu let go while it is read: nodes may move). */
void gfs_st_refresh(struct gfs_storefs *st);
/* Room for one more open model (the least recently used that may go
 * closed: with edits not yet committed only for the mount's owner,
 * owner true); 0 or EMFILE. */
int gfs_st_make_room(struct gfs_storefs *st, int owner);
/* Node k's model open (opened now, or by another request meanwhile);
 * 0 or an errno (ENOENT: gone; EIO: failed a moment ago; EMFILE: no
 * room).  st->mu may be dropped while it waits or opens. */
int gfs_st_ensure_open(struct gfs_storefs *st, size_t k);
/* The same for a request of the mount's owner (owner true) or another
 * user's (never closes a model with edits not yet committed). */
int gfs_st_ensure_open_as(struct gfs_storefs *st, size_t k, int owner);
/* A node whose inode the kernel holds no more, gone from the store and
 * closed: freed (and its directory, when that goes with it). */
void gfs_st_maybe_free(struct gfs_storefs *st, size_t k);
/* storeforget.c: the names that left the store in the last scan (was:
 * each node's present flag before it, n nodes then) queued for the inval
 * thread (started at the first need).  Caller holds st->mu. */
void gfs_st_queue_gone(struct gfs_storefs *st, const unsigned char *was,
                       size_t n);
/* Opens node k's model (st->mu dropped meanwhile); 0 or an errno.  The
 * caller has set its opening flag. */
int gfs_st_open_model(struct gfs_storefs *st, size_t k);
/* One line to the mount's log (a cat_log_fn: u is st).  No lock. */
void gfs_st_log(void *u, const char *line);
/* The store of a request's mount. */
struct gfs_storefs *gfs_st_of(fuse_req_t req);

/* storeusers.c: what other users may do (issue 33).  The mount's owner:
 * root or the daemon's user. */
int gfs_st_owner(uid_t uid);
/* Whether the request's user could read node k's model on disk (every
 * file, through the folders on its path): 0 or EACCES (ENOENT: gone).
 * Caller holds st->mu, dropped while the files are checked. */
int gfs_st_may_read(struct gfs_storefs *st, fuse_req_t req, size_t k);
/* A model's live view is BASE GFS_ST_LIVE_EXT in the store: the name
 * job_make gives the model at its open; gfs_st_is_live: whether name is
 * model node nd's. */
#define GFS_ST_LIVE_EXT ".gguf"
int gfs_st_is_live(const struct node *nd, const char *name);
/* Whether another user may hold one more file open in node k's model
 * (the per-user bound): 0, or EMFILE with the line for the mount's log in
 * why (why_size bytes), which the caller writes (this file calls nothing
 * of storefs.c: no file circle).  Caller holds st->mu. */
int gfs_st_may_hold(struct gfs_storefs *st, uid_t uid, size_t k, char *why,
                    size_t why_size);
/* models.tsv as the request's user may see it: the lines (node[i]'s is
 * line i + 1) of models it may not read keep their name only. */
int gfs_st_tsv_for(struct gfs_storefs *st, fuse_req_t req, const uint32_t *node,
                   size_t n, struct gguf_buf *b);

#endif
