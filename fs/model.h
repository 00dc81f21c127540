/*
 * model.h - opening and closing a model (model.c): the one way a mount
 * (mount.c: a single file; storefs.c: a store's models) gets a struct gfs.
 */
#ifndef GGUFS_MODEL_H
#define GGUFS_MODEL_H

#include "catalog.h" /* struct cat_file: a store's files */
#include "ggufs.h"

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

/* One file of a store's model: where it is (absolute path) and the name
 * its set knows it by (a shard's NAME-0000K-of-0000N.gguf), and the file
 * the store's scan saw (dev, ino; 0: not checked). */
struct gfs_model_file {
    const char *path, *name;
    dev_t dev;
    ino_t ino;
    /* A local store's file: the directory that holds it, opened beneath
     * the store (no symlink on the way): the file is opened in it, path
     * never looked up (a link planted in the store could lead into a
     * stopped FUSE mount and hang the open); -1: by path. */
    int dfd;
};

struct gfs_model_args {
    const char *file;  /* the source as the user (or the store) names it */
    struct gfs_opts o; /* a copy: opening may make it read-only */
    const char *mnt;   /* the mountpoint as given */
    struct gfs_mount *mount;
    fuse_ino_t ino_base, parent; /* its place in the mount (mounts.h) */
    /* Inside a running store mount: messages go to the log, and the model
     * is read-only when the store is or the file cannot be written. */
    int store;
    const char *live_name; /* the live view's name, or NULL: the source's */
    /* A content-addressed store's model: "STORE\nNAME", the key its
     * edits follow (edits/carry.c); else NULL. */
    const char *name_key;
    /* A store's model: its files (NULL: the source alone, shards found
     * beside it by name). */
    const struct gfs_model_file *files;
    int n_files;
    /* Its other files (ollama's layers), or NULL: the model's from
     * gfs_model_open on, whether it opens or not (freed with it). */
    struct gfs_extras *extras;
};
/* Frees what a gfs_extras holds and itself. */
void gfs_extras_free(struct gfs_extras *x);

/* Opens the model a describes (a is copied).  NULL after one line (stderr,
 * or the log for a store) with *status the exit status it means
 * (status.h).  Its overlay is set up; its views (gfs_views_init) and
 * a single-file mount's shim (gfs_io(fs)) and passthrough (gfs_pt_start) are
 * the caller's to start; a store's model (a->store) is started on the
 * session's shim (mounts.h, devio.h) here. */
struct gfs *gfs_model_open(const struct gfs_model_args *a, int *status);
/* The model's last state freed (after gfs_model_destroy's commit at
 * unmount, or once a store let it go). */
void gfs_model_close(struct gfs *fs);
/* A store model's alias names (struct gfs, alias_names): names, n of
 * them NUL separated, taken (freed with the model or the next set); NULL
 * for none.  Takes alias_mu. */
void gfs_model_set_aliases(struct gfs *fs, char *names, size_t n);
/* The options after opening (read-only when the file was not writable). */
const struct gfs_opts *gfs_model_opts(const struct gfs *fs);

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

#endif
