/*
 * stores.h - what the session asks of a store mount (stores/): where a
 * request goes (the route and the checks it passes first), the store's
 * own FUSE table, its life.  The session (session/dispatch.c, mount.c)
 * includes it; storefs.h, the stores' own, builds on it.
 */
#ifndef GGUFS_STORES_H
#define GGUFS_STORES_H

#include "../base/mount.h"

/* Where a request goes (session/dispatch.c's mount_enter). */
enum gfs_route {
    GFS_TO_MODEL, /* *fs holds the model, with a reference */
    GFS_TO_STORE, /* the store's own node (storefs.c answers) */
    GFS_REPLIED   /* an error was replied (no such model, it cannot open) */
};
/* What a request does to a store's model (dispatch.c's mount_enter): the checks
 * it passes first (storeusers.c). */
enum gfs_enter {
    GFS_ON_HANDLE, /* on a handle opened before (read, release): none */
    GFS_BY_NAME,   /* a name or an inode (lookup, getattr, opendir):
                      the user could read the model on disk */
    GFS_TO_OPEN    /* a file opened (open, create): that, and the bound
                      of files another user holds open */
};
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
/* opendir of a closed model's root in a read-only store, or of a fresh
 * one's in a writable store (storefs.h): answered from the store after
 * the user's check (gfs_st_may_read), with the cache flags a read-only
 * model's directory has (gfs_op_opendir), so that a
 * listing the kernel holds costs no model's open (find -maxdepth 2 of a
 * thousand models with -o max_models=32); its first READDIRPLUS opens
 * the model.  1 if replied. */
int gfs_store_root_opendir(struct gfs_storefs *st, fuse_req_t req,
                           fuse_ino_t ino, struct fuse_file_info *fi);
/* A LOOKUP of a closed fresh model's live view (storefs.h, fresh: a
 * writable store's) answered by the store with the entry the model gave
 * before it closed, after the user's check: 1 if it replied, 0 if the
 * model must (it is open, or not fresh, or another name). */
int gfs_store_root_lookup(struct gfs_storefs *st, fuse_req_t req,
                          fuse_ino_t parent, const char *name);
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
