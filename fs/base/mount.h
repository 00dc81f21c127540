/*
 * mount.h - what every part may know of the mount a model is served in
 * (struct gfs_mount: the session, its shim, its log, its one model or its
 * store): data only, so that a model's code (model.c, cmd/nomount.c,
 * stores/) reads its mount's log and shim without including the session's
 * header (session/mounts.h, which says what a mount is and does).
 */
#ifndef GGUFS_BASE_MOUNT_H
#define GGUFS_BASE_MOUNT_H

#include "../ggufs.h"
#include "base.h" /* struct gfs_log */

struct gfs_storefs;

struct gfs_mount {
    /* The session's kernel shim (devio.h): first, as the shim's device
     * hooks find it in the session's userdata, this struct. */
    struct gfs_devio *devio;
    /* Set before the session runs.  Handlers that read for long (the
     * hashes) ask the shim whether to stop (gfs_devio_yielding: the
     * session exited, or SIGUSR2 asked the mount to go idle). */
    struct fuse_session *se;
    struct gfs_log log;
    struct gfs *single;        /* a single-file mount's model, or NULL */
    struct gfs_storefs *store; /* a store mount (storefs.c), or NULL */
};

/* The session's kernel shim of fs's mount (devio.h: what INIT negotiated,
 * the kernel told of stale pages, whether long requests yield), or NULL:
 * no session (the commands that never mount) or not started yet.  The
 * mount's own field, asked where it is used, not copied into each model. */
static inline struct gfs_devio *gfs_io(const struct gfs *fs) {
    return fs->mount ? fs->mount->devio : NULL;
}

#endif
