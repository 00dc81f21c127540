/*
 * dispatch.c - the session's handler table: each handler finds the model
 * of the inode it is asked about (mount_enter), calls the
 * model's handler (ops.c, fileops.c) with the model's own inode number,
 * and drops the model after; a store's own nodes go to storefs.c's table,
 * where a handler it lacks answers as a read-only directory would.
 * init and destroy are the mount's: the connection's settings, and the
 * last commit of every model open at unmount.
 */
#include "../live/live.h"
#include "mounts.h"
#include "../ops.h"

#include <errno.h>
#include <string.h>

/* The model of kernel inode *ino; *ino becomes the model's own number
 * (a store's route: stores.h). */
static enum gfs_route mount_enter(fuse_req_t req, fuse_ino_t *ino,
                                  struct gfs **fs, enum gfs_enter how) {
    struct gfs_mount *m = fuse_req_userdata(req);
    if (m->store)
        return gfs_store_route(m->store, req, ino, fs, how);
    *fs = m->single; /* slot 0: the numbers are the model's own */
    return GFS_TO_MODEL;
}

/* Drops the reference mount_enter took. */
static void mount_leave(struct gfs *fs) {
    if (fs->mount->store)
        gfs_store_leave(fs->mount->store, fs);
}

/* Every model open now, for f (the last commit at unmount). */
static void mount_each(struct gfs_mount *m, void (*f)(struct gfs *fs, void *u),
                       void *u) {
    if (m->store)
        gfs_store_each(m->store, f, u);
    else if (m->single)
        f(m->single, u);
}

static void d_init(void *userdata, struct fuse_conn_info *conn) {
    (void)userdata;
    /* Large requests: 256 pages (libfuse 3.14's most), so that a direct-I/O
     * read of 1 MiB (the views, dd bs=1M) is one request, not 252 pages
     * and then 4 (bench/run, views: 20 to 40% faster).  Reads through the
     * page cache ask for what the kernel's readahead says (1008 KiB, set
     * per mount in main.c), which keeps their replies under the 1 MiB at
     * which libfuse 3.14 stops splicing when it cannot grow its pipe (a
     * daemon that is not root). */
    conn->max_write = 256 * 4096;
    conn->max_readahead = 252 * 4096;
    /* Replies splice from the GGUF, never with SPLICE_F_MOVE: tensor
     * offsets are not page-aligned (no page ever moves), and for the live
     * view it takes the GGUF's own pages out of its page cache. */
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE;
    /* readdirplus for every chunk of a listing, not only the first (the
     * kernel's "auto" mode): a store's root of a thousand models, read
     * by find or ls in 32 KiB getdents, gives every model's entry, not
     * one LOOKUP each past the first chunk; a model's directories give
     * their subdirectories' entries (ops.c, plus_entry), names alone
     * cost what a readdir costs. */
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
    /* O_TRUNC arrives with open: `echo x > f` is one edit, not two. */
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
}

static void destroy_one(struct gfs *fs, void *u) {
    (void)u;
    gfs_model_destroy(fs);
}

static void d_destroy(void *userdata) {
    struct gfs_mount *m = userdata;
    if (m->store)
        gfs_store_stop(m->store);
    mount_each(userdata, destroy_one, NULL);
}

/* The request goes to the model of INO (CALL, with fs the model and INO
 * its own number) after the checks HOW names (stores.h), or to the
 * store's handler OP (SCALL), or, when the store has none, gets the error
 * ERR. */
#define ROUTE(INO, HOW, CALL, OP, SCALL, ERR)                                  \
    do {                                                                       \
        struct gfs *fs;                                                        \
        switch (mount_enter(req, &(INO), &fs, HOW)) {                          \
        case GFS_TO_MODEL:                                                     \
            CALL;                                                              \
            mount_leave(fs);                                                   \
            break;                                                             \
        case GFS_TO_STORE:                                                     \
            if (gfs_store_ops.OP)                                              \
                gfs_store_ops.SCALL;                                           \
            else                                                               \
                fuse_reply_err(req, ERR);                                      \
            break;                                                             \
        case GFS_REPLIED:                                                      \
            break;                                                             \
        }                                                                      \
    } while (0)

static void d_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    struct gfs_mount *m = fuse_req_userdata(req);
    if (m->store && gfs_store_root_lookup(m->store, req, parent, name))
        return;
    ROUTE(parent, GFS_BY_NAME, gfs_op_lookup(fs, req, parent, name), lookup,
          lookup(req, parent, name), ENOENT);
}

static void d_getattr(fuse_req_t req, fuse_ino_t ino,
                      struct fuse_file_info *fi) {
    struct gfs_mount *m = fuse_req_userdata(req);
    if (m->store && gfs_store_root_attr(m->store, req, ino))
        return;
    /* A model's root shows its attributes to all, as a listing does; an
     * fstat asks of a handle opened before. */
    int root = (ino & (GFS_INO_MODEL_SPAN - 1)) == GFS_INO_ROOT;
    ROUTE(ino, root || fi ? GFS_ON_HANDLE : GFS_BY_NAME,
          gfs_op_getattr(fs, req, ino, fi), getattr, getattr(req, ino, fi),
          ENOENT);
}

static void d_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                      int to_set, struct fuse_file_info *fi) {
    ROUTE(ino, GFS_BY_NAME, gfs_op_setattr(fs, req, ino, attr, to_set, fi),
          setattr, setattr(req, ino, attr, to_set, fi), EROFS);
}

static void d_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                    mode_t mode, dev_t rdev) {
    ROUTE(parent, GFS_BY_NAME, gfs_op_mknod(fs, req, parent, name, mode, rdev),
          mknod, mknod(req, parent, name, mode, rdev), EROFS);
}

static void d_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                    mode_t mode) {
    ROUTE(parent, GFS_BY_NAME, gfs_op_mkdir(fs, req, parent, name, mode), mkdir,
          mkdir(req, parent, name, mode), EROFS);
}

static void d_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
    ROUTE(parent, GFS_BY_NAME, gfs_op_unlink(fs, req, parent, name), unlink,
          unlink(req, parent, name), EROFS);
}

/* A rename never crosses models: both directories must be of one. */
static void d_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                     fuse_ino_t newparent, const char *newname,
                     unsigned int flags) {
    if (parent >> GFS_INO_SLOT_SHIFT != newparent >> GFS_INO_SLOT_SHIFT) {
        fuse_reply_err(req, EXDEV);
        return;
    }
    newparent &= GFS_INO_MODEL_SPAN - 1;
    ROUTE(parent, GFS_BY_NAME,
          gfs_op_rename(fs, req, parent, name, newparent, newname, flags),
          rename, rename(req, parent, name, newparent, newname, flags), EROFS);
}

static void d_opendir(fuse_req_t req, fuse_ino_t ino,
                      struct fuse_file_info *fi) {
    struct gfs_mount *m = fuse_req_userdata(req);
    if (m->store && gfs_store_root_opendir(m->store, req, ino, fi))
        return;
    ROUTE(ino, GFS_BY_NAME, gfs_op_opendir(fs, req, ino, fi), opendir,
          opendir(req, ino, fi), ENOTDIR);
}

static void d_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi) {
    ROUTE(ino, GFS_ON_HANDLE, gfs_op_readdir(fs, req, ino, size, off, fi, 0),
          readdir, readdir(req, ino, size, off, fi), ENOTDIR);
}

/* readdirplus: a store's directories give their entries (a listing of
 * a thousand models with ls -l costs no lookup each); a model's give
 * names only (gfs_op_readdir). */
static void d_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                          off_t off, struct fuse_file_info *fi) {
    ROUTE(ino, GFS_ON_HANDLE, gfs_op_readdir(fs, req, ino, size, off, fi, 1),
          readdirplus, readdirplus(req, ino, size, off, fi), ENOTDIR);
}

static void d_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
                       struct fuse_file_info *fi) {
    ROUTE(ino, GFS_ON_HANDLE, gfs_op_fsyncdir(fs, req, ino, datasync, fi),
          fsyncdir, fsyncdir(req, ino, datasync, fi), 0);
}

static void d_statfs(fuse_req_t req, fuse_ino_t ino) {
    ROUTE(ino, GFS_BY_NAME, gfs_op_statfs(fs, req, ino), statfs,
          statfs(req, ino), ENOSYS);
}

static void d_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                       const char *value, size_t size, int flags) {
    ROUTE(ino, GFS_BY_NAME,
          gfs_op_setxattr(fs, req, ino, name, value, size, flags), setxattr,
          setxattr(req, ino, name, value, size, flags), ENOTSUP);
}

static void d_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                       size_t size) {
    /* Only user.* attributes exist here: no ACLs, no security labels.
     * Any other name is "not supported" (EOPNOTSUPP), not "none on this
     * file" (ENODATA), answered without opening a model: ls -l asks each
     * entry for security.selinux and the ACLs, and stops asking a file
     * system that said it has none (coreutils keeps the device), so a
     * listing of a thousand models costs two GETXATTRs, not 3000.  Not
     * ENOSYS: that would end getxattr for the whole mount (the kernel's
     * no_getxattr), user.ggufs.* included. */
    if (strncmp(name, "user.", 5) != 0) {
        fuse_reply_err(req, EOPNOTSUPP);
        return;
    }
    ROUTE(ino, GFS_BY_NAME, gfs_op_getxattr(fs, req, ino, name, size), getxattr,
          getxattr(req, ino, name, size), ENODATA);
}

static void d_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    ROUTE(ino, GFS_BY_NAME, gfs_op_listxattr(fs, req, ino, size), listxattr,
          listxattr(req, ino, size), ENOTSUP);
}

static void d_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name) {
    ROUTE(ino, GFS_BY_NAME, gfs_op_removexattr(fs, req, ino, name), removexattr,
          removexattr(req, ino, name), ENOTSUP);
}

static void d_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode, struct fuse_file_info *fi) {
    ROUTE(parent, GFS_TO_OPEN, gfs_op_create(fs, req, parent, name, mode, fi),
          create, create(req, parent, name, mode, fi), EROFS);
}

static void d_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    ROUTE(ino, GFS_TO_OPEN, gfs_op_open(fs, req, ino, fi), open,
          open(req, ino, fi), EISDIR);
}

static void d_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info *fi) {
    ROUTE(ino, GFS_ON_HANDLE, gfs_op_read(fs, req, ino, size, off, fi), read,
          read(req, ino, size, off, fi), EISDIR);
}

static void d_write(fuse_req_t req, fuse_ino_t ino, const char *p, size_t n,
                    off_t off, struct fuse_file_info *fi) {
    ROUTE(ino, GFS_ON_HANDLE, gfs_op_write(fs, req, ino, p, n, off, fi), write,
          write(req, ino, p, n, off, fi), EBADF);
}

static void d_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    ROUTE(ino, GFS_ON_HANDLE, gfs_op_flush(fs, req, ino, fi), flush,
          flush(req, ino, fi), 0);
}

static void d_release(fuse_req_t req, fuse_ino_t ino,
                      struct fuse_file_info *fi) {
    ROUTE(ino, GFS_ON_HANDLE, gfs_op_release(fs, req, ino, fi), release,
          release(req, ino, fi), 0);
}

/* Links: a store's aliases (storefs.c), a live view without privileges
 * (viewlink.c). */
static void d_readlink(fuse_req_t req, fuse_ino_t ino) {
    ROUTE(ino, GFS_BY_NAME, gfs_vlink_readlink(fs, req, ino), readlink,
          readlink(req, ino), EINVAL);
}

static void d_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
                    struct fuse_file_info *fi) {
    ROUTE(ino, GFS_ON_HANDLE, gfs_op_fsync(fs, req, ino, datasync, fi), fsync,
          fsync(req, ino, datasync, fi), 0);
}

/* FORGET: the store frees the nodes the kernel and the store hold no
 * more (a model's own inodes are numbered for the life of the model). */
static void d_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
    struct gfs_mount *m = fuse_req_userdata(req);
    if (m->store)
        gfs_store_forget(m->store, ino, nlookup);
    fuse_reply_none(req);
}

static void d_forget_multi(fuse_req_t req, size_t count,
                           struct fuse_forget_data *forgets) {
    struct gfs_mount *m = fuse_req_userdata(req);
    for (size_t i = 0; m->store && i < count; i++)
        gfs_store_forget(m->store, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

const struct fuse_lowlevel_ops gfs_session_ops = {
    .forget = d_forget,
    .forget_multi = d_forget_multi,
    .init = d_init,
    .destroy = d_destroy,
    .lookup = d_lookup,
    .getattr = d_getattr,
    .setattr = d_setattr,
    .mknod = d_mknod,
    .mkdir = d_mkdir,
    .unlink = d_unlink,
    .rename = d_rename,
    .opendir = d_opendir,
    .readdir = d_readdir,
    .readdirplus = d_readdirplus,
    .fsyncdir = d_fsyncdir,
    .statfs = d_statfs,
    .setxattr = d_setxattr,
    .getxattr = d_getxattr,
    .listxattr = d_listxattr,
    .removexattr = d_removexattr,
    .create = d_create,
    .open = d_open,
    .read = d_read,
    .write = d_write,
    .flush = d_flush,
    .release = d_release,
    .fsync = d_fsync,
    .readlink = d_readlink,
};
