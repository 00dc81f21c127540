/*
 * mounts.h - a mount and the models it holds (issue 22's split of the
 * mount from its model; issue 23's stores).
 *
 * A mount (struct gfs_mount) is the FUSE session, the log, and its models:
 * one (a single-file mount: the model's tree is the mount's tree) or many
 * (a store, storefs.c: the root lists models by name, each model's root is
 * a directory there).  A model (struct gfs, ggufs.h) is one GGUF, shard
 * set or remote file with its edits, views and live view.
 *
 * Inode numbers.  A model numbers its own inodes (GFS_INO_*, all below
 * GFS_INO_MODEL_SPAN); the kernel sees them plus the model's base, its
 * slot << GFS_INO_SLOT_SHIFT.  A single-file mount's model has slot 0, so
 * its numbers are the model's own.  In a store, slot 0 holds the store's
 * own nodes (the root, directories of names, models.tsv) and each model
 * gets a slot when first listed, kept for the life of the mount (a model
 * closed to bound memory and opened again has the same numbers).
 *
 * The session's handlers (dispatch.c) find the model of the inode they
 * are asked about, call the model's handler (ops.c, fileops.c) with the
 * model's own number, and drop the model's reference after.  No handler
 * assumes a mount holds one model: every reply names inodes through
 * gfs_ino_out.
 */
#ifndef GGUFS_MOUNTS_H
#define GGUFS_MOUNTS_H

#include "../base/base.h"
#include "../ggufs.h"

struct gfs_storefs;

struct gfs_mount {
    /* The session's kernel shim (devio.h): first, as the shim's device
     * hooks find it in the session's userdata, this struct. */
    struct gfs_devio *devio;
    /* Set before the session runs: handlers that read for long (the
     * hashes) stop once it has exited, as the last commit waits for them. */
    struct fuse_session *se;
    /* Until this CLOCK_MONOTONIC time (ms), hashes being computed stop and
     * none starts: set by SIGUSR2 (ggufs -u sends it before unmounting, so
     * that no long request keeps the mount busy).  No lock. */
    atomic_llong hash_yield_ms;
    struct gfs_log log;
    struct gfs *single;        /* a single-file mount's model, or NULL */
    struct gfs_storefs *store; /* a store mount (storefs.c), or NULL */
};

/* Where a request goes (gfs_mount_enter). */
enum gfs_route {
    GFS_TO_MODEL, /* *fs holds the model, with a reference */
    GFS_TO_STORE, /* the store's own node (storefs.c answers) */
    GFS_REPLIED   /* an error was replied (no such model, it cannot open) */
};
/* What a request does to a store's model (gfs_mount_enter): the checks
 * it passes first (storeusers.c). */
enum gfs_enter {
    GFS_ON_HANDLE, /* on a handle opened before (read, release): none */
    GFS_BY_NAME,   /* a name or an inode (lookup, getattr, opendir):
                      the user could read the model on disk */
    GFS_TO_OPEN    /* a file opened (open, create): that, and the bound
                      of files another user holds open */
};
/* The model of kernel inode *ino; *ino becomes the model's own number. */
enum gfs_route gfs_mount_enter(fuse_req_t req, fuse_ino_t *ino, struct gfs **fs,
                               enum gfs_enter how);
/* Drops the reference gfs_mount_enter took. */
void gfs_mount_leave(struct gfs *fs);
/* Every model open now, for f (the last commit at unmount, the hashes'
 * yield on SIGUSR2). */
void gfs_mount_each(struct gfs_mount *m, void (*f)(struct gfs *fs, void *u),
                    void *u);

/* The session's table (dispatch.c). */
extern const struct fuse_lowlevel_ops gfs_session_ops;

/* storefs.c: a store's own nodes and its models (issue 23). */
enum gfs_route gfs_store_route(struct gfs_storefs *st, fuse_req_t req,
                               fuse_ino_t *ino, struct gfs **fs,
                               enum gfs_enter how);
/* FORGET of a kernel inode: its node freed once the kernel and the
 * store hold it no more. */
void gfs_store_forget(struct gfs_storefs *st, fuse_ino_t ino, uint64_t n);
/* The end of the session (destroy): nothing more is said to the kernel. */
void gfs_store_stop(struct gfs_storefs *st);
void gfs_store_leave(struct gfs_storefs *st, struct gfs *fs);
void gfs_store_each(struct gfs_storefs *st, void (*f)(struct gfs *fs, void *u),
                    void *u);
extern const struct fuse_lowlevel_ops gfs_store_ops;
/* getattr of a model's root not opened yet: answered from the store (a
 * listing with ls -l opens no model); 1 if replied. */
int gfs_store_root_attr(struct gfs_storefs *st, fuse_req_t req, fuse_ino_t ino);
/* opendir of a closed model's root in a read-only store: answered from
 * the store after the user's check (gfs_st_may_read), with the cache
 * flags a read-only model's directory has (gfs_op_opendir), so that a
 * listing the kernel holds costs no model's open (find -maxdepth 2 of a
 * thousand models with -o max_models=32); its first READDIRPLUS opens
 * the model.  1 if replied. */
int gfs_store_root_opendir(struct gfs_storefs *st, fuse_req_t req,
                           fuse_ino_t ino, struct fuse_file_info *fi);
/* True if source names a store: a directory, or hf://OWNER/REPO[@REV]. */
int gfs_store_is(const char *source);
/* The store at o->file, scanned, its nodes made, set as mount's store;
 * NULL after one line on stderr with *status (status.h). */
struct gfs_storefs *gfs_store_open(struct gfs_mount *mount,
                                   const struct gfs_opts *o, const char *mnt,
                                   int *status);
/* The store's directory (absolute: the one mounted, which may be below
 * the one named, storefs.c descend_home) or URL. */
const char *gfs_store_dir(const struct gfs_storefs *st);
/* Its kind's name and how many models it lists (the mount's report). */
const char *gfs_store_kind(const struct gfs_storefs *st);
size_t gfs_store_n_models(const struct gfs_storefs *st);
/* Every model closed (after the last commit, destroy) and freed. */
void gfs_store_close(struct gfs_storefs *st);

#endif
