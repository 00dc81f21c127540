/*
 * devio.h - the kernel shim (devio.c): what the FUSE session negotiated
 * at INIT beyond libfuse 3.14's API, and backing files registered by fd
 * for FUSE passthrough, shaped like libfuse 3.17's
 * fuse_passthrough_open/close.  It belongs to the session, not to a
 * model: it knows no model, no inode and no view.  Its users (the live
 * view's versions, source/passthrough.c; the direct-I/O mappings of the
 * views and tensors) ask it; a single-file mount's model and each model a
 * store opens use the same session's shim.
 *
 * Calling sequence (mount.c): fuse_session_new with a userdata whose
 * first member is the struct gfs_devio * (struct gfs_mount.devio), the
 * mount, gfs_devio_start before the first request is read (INIT),
 * the session's loop, gfs_devio_stop before fuse_session_unmount (the
 * device's fd closes there: later closes of backing ids are no-ops, the
 * kernel dropped them with the connection), gfs_devio_free at the end.
 *
 * Locks: none held; what INIT negotiated is atomic (set once, by the
 * thread that reads INIT, before any other request), the backing ioctls
 * are the kernel's.
 */
#ifndef GGUFS_DEVIO_H
#define GGUFS_DEVIO_H

#include <stdint.h>

struct fuse_session;

struct gfs_devio;

/* Sets up *out for se: want_pt asks the kernel for FUSE passthrough (the
 * caller's rule: -o passthrough=auto; only root may register backing
 * files, so nothing is asked otherwise), want_dio_mmap for shared
 * mappings of direct-I/O files (FUSE_DIRECT_IO_ALLOW_MMAP).  When either
 * is wanted the session's device I/O is hooked (fuse_session_custom_io).
 * 0; or -1 with *out set all the same (NULL if out of memory: every
 * function here takes NULL: nothing negotiated) and *why the
 * reason, for the caller's one log line. */
int gfs_devio_start(struct gfs_devio **out, struct fuse_session *se,
                    int want_pt, int want_dio_mmap, const char **why);
/* The session's device is going away: no ioctl reaches it from now on. */
void gfs_devio_stop(struct gfs_devio *d);
void gfs_devio_free(struct gfs_devio *d);

/* Our INIT reply asked for passthrough (the kernel offered it): backing
 * files may be opened.  d may be NULL (no session: 0). */
int gfs_devio_passthrough(const struct gfs_devio *d);
/* ... and for FUSE_DIRECT_IO_ALLOW_MMAP: only then may a file that must
 * support mmap(MAP_SHARED) be opened with direct I/O.  d may be NULL. */
int gfs_devio_dio_mmap(const struct gfs_devio *d);

/* FUSE_DEV_IOC_BACKING_OPEN of fd (libfuse 3.17: fuse_passthrough_open):
 * a backing id > 0, which holds a reference to the open file; or -errno
 * (EPERM: not root; ELOOP: a stacked filesystem; EOPNOTSUPP: nothing
 * negotiated or the session stopped). */
int gfs_passthrough_open(struct gfs_devio *d, int fd);
/* FUSE_DEV_IOC_BACKING_CLOSE of id (fuse_passthrough_close); files the
 * kernel opened with it keep their own reference.  A no-op once stopped. */
void gfs_passthrough_close(struct gfs_devio *d, int id);

/* The kernel is told to drop what it caches of kernel inode ino (a
 * fuse_ino_t: the model's number through gfs_ino_out): bytes [off, off +
 * len) of its pages (len 0: to the end), or its attributes only (off -1).
 * Called with no lock held that a request holding the inode's page lock
 * may wait for (fuse_lowlevel_notify_inval_inode waits for that lock).
 * d may be NULL (no session: nothing to tell); a no-op once stopped. */
void gfs_devio_inval(struct gfs_devio *d, uint64_t ino, int64_t off,
                     int64_t len);
/* Long requests (a hash reading a whole model) stop at their next step
 * when this is true: the session exited (its loop waits for every
 * handler before the last commit), or it was told to let the mount go
 * idle for ms milliseconds from now (gfs_devio_idle: SIGUSR2, sent by
 * ggufs -u before it unmounts).  d may be NULL (0).  No lock: atomic. */
void gfs_devio_idle(struct gfs_devio *d, long long ms);
int gfs_devio_yielding(const struct gfs_devio *d);

/* Around fuse_reply_open/fuse_reply_create on the handler's own thread:
 * while armed with id > 0 that reply is a passthrough open of backing id
 * (libfuse 3.17's fuse_file_info.backing_id); 0 disarms. */
void gfs_devio_arm(int id);

#endif
