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
 * gfs_ino_out.  What the session's life (mount.c) asks of it: the table.
 */
#ifndef GGUFS_MOUNTS_H
#define GGUFS_MOUNTS_H

#include "../base/mount.h"    /* struct gfs_mount */
#include "../stores/stores.h" /* the route, a store mount */

/* The session's table (dispatch.c). */
extern const struct fuse_lowlevel_ops gfs_session_ops;

#endif
