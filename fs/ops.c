/*
 * ops.c - a model's FUSE handlers of the tree (ops.h: lookup, attributes,
 * directories, names in meta/, extended attributes, statfs, and the last
 * commit at unmount, gfs_model_destroy); the handlers of open files are
 * in fileops.c, the session's table that calls them in
 * session/dispatch.c.
 *
 * Handlers translate between inodes and the rest of the fs layer, taking
 * the locks in the order written at struct gfs; what a node does is the
 * row of its kind's (kinds.h).
 */
#include "edits/edits.h"
#include "ggufs.h"
#include "kinds.h"
#include "meta/meta.h"
#include "source/source.h"
#include "views/views.h"
#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

/* Unmount: edits still pending are committed; a failure saves them beside
 * the GGUF (gfs_edits_commit says where) and makes ggufs exit non-zero.
 * Files still open when the mount goes away get no release: what their
 * flushes applied is committed, a draft never flushed is dropped (it may
 * be torn) and named in the log and the report (gfs_fh_close_all). */
void gfs_model_destroy(struct gfs *fs) {
    char dropped[sizeof fs->edits.commit_msg / 2] = "";
    size_t n_dropped = gfs_fh_close_all(fs, dropped, sizeof dropped);
    gfs_edit_begin(fs);
    /* Nobody may be waiting for this commit (fusermount3 -u, umount and
     * signals return first): its outcome is recorded for the next ggufs
     * command on the model to print, with the drafts left out. */
    int nothing = !gfs_edits_uncommitted(fs) && !fs->edits.commit_failed;
    int work = !fs->readonly && (!nothing || n_dropped);
    gfs_edits_commit(fs, gfs_meta_files_note);
    if (n_dropped) {
        if (nothing) /* else the commit wrote its report */
            snprintf(fs->edits.commit_msg, sizeof fs->edits.commit_msg,
                     "%s: nothing to commit", fs->path);
        size_t used = strlen(fs->edits.commit_msg);
        snprintf(fs->edits.commit_msg + used,
                 sizeof fs->edits.commit_msg - used, "%s", dropped);
    }
    if (work)
        gfs_record_outcome(fs, "at unmount");
    gfs_edit_abort(fs); /* the commit kept what it left */
}

void gfs_op_lookup(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                   const char *name) {
    struct fuse_entry_param e;
    fuse_ino_t ino = 0;

    pthread_rwlock_rdlock(&fs->lock);
    int err = gfs_lookup_name(fs, parent, name, &ino);
    if (!err)
        err = gfs_fill_entry(fs, ino, &e);
    pthread_rwlock_unlock(&fs->lock);
    if (err == ENOENT && !fs->readonly) {
        /* Negative entries are not cached: a key may appear by an edit. */
        memset(&e, 0, sizeof e);
        fuse_reply_entry(req, &e);
        return;
    }
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_entry(req, &e);
}

void gfs_op_getattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                    struct fuse_file_info *fi) {
    (void)fi;
    struct stat st;
    pthread_rwlock_rdlock(&fs->lock);
    int err = gfs_stat(fs, gfs_meta_resolve(fs, ino), &st);
    pthread_rwlock_unlock(&fs->lock);
    st.st_ino = gfs_ino_out(fs, ino);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, gfs_attr_timeout(fs, ino));
}

/* ---- the root's listing kept by the kernel ---------------------------
 * A read-only model's listings never change: the kernel keeps them
 * (FOPEN_CACHE_DIR and keep_cache).  A writable model's root lists the
 * same names, but the live view's entry moves to a new inode with each
 * version of it (passthrough.c) and may turn into a link (viewlink.c),
 * and a store's model lists its aliases' names, which a scan changes.
 * So the kernel is let keep the root's listing (find -maxdepth 2 -ls of
 * a store: no READDIRPLUS a model) only while it is what the root's
 * readdir gives now: at each OPENDIR (which the kernel always sends,
 * FUSE_NO_OPENDIR_SUPPORT is not taken: the store's permission check is
 * there) the listing's hash is compared with the hash of what the
 * readdirs gave since the kernel last dropped it; keep_cache unset drops
 * it.  Two different listings given meanwhile (readdirs racing an edit)
 * drop it at the next OPENDIR. */

/* The hash of a root's listing: FNV-1a over its entries (names, inodes,
 * types) in order, each folded in by root_hash_add from ROOT_HASH_SEED,
 * then root_hash_end: never GFS_LISTED_NONE nor GFS_LISTED_MIXED.  The
 * root's readdir folds in what it lists; root_hash walks the row. */
#define ROOT_HASH_SEED 0xcbf29ce484222325ULL

static uint64_t root_hash_add(uint64_t h, const struct gguf_buf *name,
                              fuse_ino_t child, mode_t mode) {
    uint64_t v[2] = {child, mode};
    const unsigned char *p[2] = {name->p, (void *)v};
    size_t len[2] = {name->len, sizeof v};
    for (int f = 0; f < 2; f++)
        for (size_t i = 0; i < len[f]; i++)
            h = (h ^ p[f][i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t root_hash_end(uint64_t h) {
    return h <= GFS_LISTED_MIXED ? h + 2 : h;
}

/* The hash of what the root lists now; GFS_LISTED_NONE if out of memory
 * (matches nothing).  Caller holds fs->lock (read). */
static uint64_t root_hash(struct gfs *fs, const struct gfs_kind_ops *row) {
    struct gguf_buf name = {0};
    struct gfs_dir_pos pos = {0};
    uint64_t h = ROOT_HASH_SEED;
    int64_t n = row->n_entries(fs, GFS_INO_ROOT);
    for (int64_t k = 0; k < n; k++) {
        fuse_ino_t child = 0;
        mode_t mode = 0;
        int r = row->dirent(fs, GFS_INO_ROOT, k, &pos, &name, &child, &mode);
        if (r < 0) {
            gguf_buf_free(&name);
            return GFS_LISTED_NONE; /* out of memory: never kept */
        }
        if (r > 0) /* 0: not listed */
            h = root_hash_add(h, &name, child, mode);
    }
    gguf_buf_free(&name);
    return root_hash_end(h);
}

/* A complete listing of the root given, its hash h: recorded (caller
 * holds fs->lock, read). */
static void root_given(struct gfs *fs, uint64_t h) {
    uint64_t was = GFS_LISTED_NONE;
    if (!atomic_compare_exchange_strong(&fs->root_listed, &was, h) && was != h)
        atomic_store(&fs->root_listed, GFS_LISTED_MIXED);
}

/* Whether what the kernel may hold of the root's listing is what the
 * root lists now: never, while no listing (or two) was recorded, and
 * then without walking the root (its live view's header may not be made
 * yet).  Caller holds fs->lock (read). */
static int root_held(struct gfs *fs, const struct gfs_kind_ops *row) {
    uint64_t listed = atomic_load(&fs->root_listed);
    return listed > GFS_LISTED_MIXED && root_hash(fs, row) == listed;
}

/* Whether the kernel may keep what it holds of the root's listing; when
 * not, it drops it at this open and what the readdirs give is recorded
 * anew.  Caller holds fs->lock (read). */
static int root_kept(struct gfs *fs, const struct gfs_kind_ops *row) {
    if (root_held(fs, row))
        return 1;
    atomic_store(&fs->root_listed, GFS_LISTED_NONE);
    return 0;
}

int gfs_model_fresh_view(struct gfs *fs, struct fuse_entry_param *e,
                         const char **name) {
    const struct gfs_kind_ops *root = gfs_kind_row(fs, GFS_ROOT);
    const struct gfs_kind_ops *live = gfs_kind_row(fs, GFS_LIVE);
    fuse_ino_t ino = 0;
    int fresh = 0;
    pthread_rwlock_rdlock(&fs->lock);
    if (!fs->readonly && root && live && live->root_entry &&
        fs->generation == 0 && !fs->edits.overlay &&
        !gfs_edits_uncommitted(fs) && root_held(fs, root) &&
        (*name = live->root_entry(fs, &ino)) && ino == GFS_INO_LIVE &&
        gfs_fill_entry(fs, ino, e) == 0)
        fresh = S_ISREG(e->attr.st_mode);
    pthread_rwlock_unlock(&fs->lock);
    return fresh;
}

void gfs_op_opendir(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                    struct fuse_file_info *fi) {
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    if (!row) {
        fuse_reply_err(req, ENOENT);
    } else if (!row->lookup) {
        fuse_reply_err(req, ENOTDIR);
    } else if (fs->readonly || ino != GFS_INO_ROOT) {
        fi->cache_readdir = fs->readonly;
        fi->keep_cache = fs->readonly;
        fuse_reply_open(req, fi);
    } else {
        pthread_rwlock_rdlock(&fs->lock);
        fi->keep_cache = root_kept(fs, row);
        pthread_rwlock_unlock(&fs->lock);
        fi->cache_readdir = 1;
        fuse_reply_open(req, fi);
    }
}

/* readdirplus's entry of child (a model's own number) into e, as a
 * lookup would give it, if its attributes cost nothing: a directory's
 * (find -ls of a store's models: no LOOKUP per model directory); the
 * files' (a key's text, meta.tsv, the live view's layout) cost a
 * rendering each, and a plain ls should not pay it: nodeid 0, the kernel
 * looks those up if it needs them.  Caller holds fs->lock. */
static const struct fuse_entry_param *plus_entry(struct gfs *fs,
                                                 fuse_ino_t child, mode_t mode,
                                                 struct fuse_entry_param *e) {
    if (S_ISDIR(mode) && gfs_fill_entry(fs, child, e) == 0)
        return e;
    return GFS_DIRENT_PLUS_NONE;
}

/* readdir and readdirplus (plus): with readdirplus a model's directories
 * give their subdirectories' entries (plus_entry; a model's own inodes
 * are numbered for the model's life: no lookup count to keep), the rest
 * names only; a store's directories give theirs (storeops.c). */
void gfs_op_readdir(struct gfs *fs, fuse_req_t req, fuse_ino_t ino, size_t size,
                    off_t off, struct fuse_file_info *fi, int plus) {
    (void)fi;
    struct gguf_buf out = {0}, name = {0};
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    struct gfs_dir_pos pos = {0};
    int err = 0, whole = 1;
    /* A writable root listed from its start: its hash, for root_given. */
    int hashing = off == 0 && ino == GFS_INO_ROOT && !fs->readonly;
    uint64_t h = ROOT_HASH_SEED;

    pthread_rwlock_rdlock(&fs->lock);
    if (!row || !row->dirent) {
        err = ENOTDIR;
        goto out;
    }
    /* Entry k (0-based) has offset k+1: ".", "..", then the row's entries
     * k - 2. */
    int64_t n = 2 + row->n_entries(fs, ino);
    for (int64_t k = off; k < n; k++) {
        const char *nm;
        fuse_ino_t child;
        mode_t mode = S_IFDIR;
        if (k < 2) {
            nm = k ? ".." : ".";
            child = k ? GFS_INO_ROOT : ino;
            if (k && ino == GFS_INO_ROOT) /* the model's root */
                child = fs->parent - fs->ino_base;
        } else {
            int r = row->dirent(fs, ino, k - 2, &pos, &name, &child, &mode);
            if (r < 0) {
                err = ENOMEM;
                goto out;
            }
            if (r == 0)
                continue;
            nm = (const char *)name.p;
            if (hashing)
                h = root_hash_add(h, &name, child, mode);
        }
        struct fuse_entry_param e;
        if (!gfs_add_dirent(req, &out, size, nm, gfs_ino_out(fs, child), mode,
                            k + 1,
                            !plus   ? NULL
                            : k < 2 ? GFS_DIRENT_PLUS_NONE
                                    : plus_entry(fs, child, mode, &e))) {
            whole = 0;
            break;
        }
    }
    if (whole && hashing)
        root_given(fs, root_hash_end(h)); /* the whole listing in one reply */
out:
    pthread_rwlock_unlock(&fs->lock);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, (char *)out.p, out.len);
    gguf_buf_free(&out);
    gguf_buf_free(&name);
}

void gfs_op_mknod(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                  const char *name, mode_t mode, dev_t rdev) {
    (void)rdev;
    struct fuse_entry_param e;
    fuse_ino_t ino = 0;
    if (!S_ISREG(mode)) {
        fuse_reply_err(req, EPERM);
        return;
    }
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, parent);
    if (fs->readonly || !row || !row->create) {
        fuse_reply_err(req, fs->readonly ? EROFS : EACCES);
        return;
    }
    gfs_edit_begin(fs);
    int err = row->create(fs, parent, name, &ino);
    if (!err)
        err = gfs_fill_entry(fs, ino, &e);
    gfs_edit_end(fs);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_entry(req, &e);
}

/* fsync of the root or meta/ commits every pending edit: `ggufs -u` uses
 * it to learn whether the commit succeeded before it unmounts.  Only the
 * owner or root (gfs_may_commit); others: EACCES. */
int gfs_model_commit(struct gfs *fs) {
    gfs_edit_begin(fs);
    int nothing = !gfs_edits_uncommitted(fs) && !fs->edits.commit_failed;
    if (nothing)
        snprintf(fs->edits.commit_msg, sizeof fs->edits.commit_msg,
                 "%s: nothing to commit", fs->path);
    int err = gfs_edits_commit(fs, gfs_meta_files_note);
    if (nothing) /* the commit logged them; the report names them too */
        gfs_meta_files_note(fs, fs->edits.commit_msg,
                            sizeof fs->edits.commit_msg, 0);
    gfs_edit_abort(fs); /* the commit kept what it left */
    return err;
}

void gfs_op_fsyncdir(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                     int datasync, struct fuse_file_info *fi) {
    (void)datasync;
    (void)fi;
    int err = 0;
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    int commits = !fs->readonly && row && row->commits;
    if (commits && !gfs_may_commit(fs, req))
        err = EACCES;
    else if (commits)
        err = gfs_model_commit(fs);
    fuse_reply_err(req, err);
}

/* Modes and owners.  Tools set modes on the files they write (install -m,
 * cp -p, rsync -p, sed -i and vim copy the old mode onto their temporary
 * file): on a read-write mount every mode change of a file in meta/
 * succeeds and is ignored (modes are not part of a GGUF; the file keeps
 * showing 0644), and so does a chown to the mounting user and group.
 * Other files, other owners and read-only mounts: only the values a file
 * already has.  0 or errno. */
static int setattr_owner(struct gfs *fs, fuse_ino_t ino,
                         const struct stat *attr, int to_set) {
    struct stat st;
    pthread_rwlock_rdlock(&fs->lock);
    int err = gfs_stat(fs, ino, &st);
    pthread_rwlock_unlock(&fs->lock);
    if (err)
        return err;
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    int meta_file = !fs->readonly && row && row->editable;
    if (meta_file) {
        st.st_uid = fs->uid;
        st.st_gid = fs->gid;
    }
    if (((to_set & FUSE_SET_ATTR_MODE) && !meta_file &&
         (attr->st_mode & 07777) != (st.st_mode & 07777)) ||
        ((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != st.st_uid) ||
        ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != st.st_gid))
        return fs->readonly ? EROFS : EPERM;
    return 0;
}

/* truncate and ftruncate (fi: the open file, may be NULL). */
static int setattr_size(struct gfs *fs, fuse_ino_t ino, off_t size,
                        struct fuse_file_info *fi) {
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    if (fs->readonly)
        return EROFS;
    if (!row || !row->truncate)
        return EISDIR;
    struct gfs_fh *fh = fi ? (struct gfs_fh *)(uintptr_t)fi->fh : NULL;
    return row->truncate(fs, fh, ino, size);
}

void gfs_op_setattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                    struct stat *attr, int to_set, struct fuse_file_info *fi) {
    struct stat st;
    int err = 0;
    fuse_ino_t kino = ino;
    pthread_rwlock_rdlock(&fs->lock);
    ino = gfs_meta_resolve(fs, ino);
    pthread_rwlock_unlock(&fs->lock);

    if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
        err = setattr_owner(fs, ino, attr, to_set);
    if (!err && (to_set & FUSE_SET_ATTR_SIZE))
        err = setattr_size(fs, ino, attr->st_size, fi);
    /* Times belong to the GGUF; touch(1) must still succeed. */
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    pthread_rwlock_rdlock(&fs->lock);
    err = gfs_stat(fs, ino, &st);
    pthread_rwlock_unlock(&fs->lock);
    st.st_ino = gfs_ino_out(fs, kino);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, gfs_attr_timeout(fs, ino));
}

/* Whether names may change in parent (its row has hook h): 0 or errno. */
static int names_change(struct gfs *fs, const struct gfs_kind_ops *row, int h) {
    if (fs->readonly)
        return EROFS;
    return h ? 0 : row ? EACCES : ENOENT;
}

void gfs_op_unlink(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                   const char *name) {
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, parent);
    int err = names_change(fs, row, row && row->unlink);
    if (!err)
        err = row->unlink(fs, parent, name);
    fuse_reply_err(req, err);
}

void gfs_op_rename(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                   const char *name, fuse_ino_t newparent, const char *newname,
                   unsigned int flags) {
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, parent);
    int err = names_change(fs, row, row && row->rename);
    if (!err && newparent != parent)
        err = EXDEV;
    if (!err)
        err = row->rename(fs, parent, name, newname, flags);
    fuse_reply_err(req, err);
}

void gfs_op_mkdir(struct gfs *fs, fuse_req_t req, fuse_ino_t parent,
                  const char *name, mode_t mode) {
    (void)parent;
    (void)name;
    (void)mode;
    fuse_reply_err(req, fs->readonly ? EROFS : EPERM);
}

void gfs_op_getxattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                     const char *name, size_t size) {
    struct gguf_buf b = {0};
    /* The hashes take the lock themselves, a chunk of reading at a time:
     * a first one may read the whole model.  Their inodes (tensors)
     * never need gfs_meta_resolve. */
    int err = gfs_views_xattr(req, fs, ino, name, &b);
    if (err == GFS_XATTR_OTHER) /* the status, a commit's progress */
        err = gfs_status_xattr(req, fs, ino, name, &b);
    if (err == GFS_XATTR_OTHER) {
        pthread_rwlock_rdlock(&fs->lock);
        err = gfs_xattr_get(fs, gfs_meta_resolve(fs, ino), name, &b);
        pthread_rwlock_unlock(&fs->lock);
    }
    gfs_reply_xattr(req, size, err, &b);
    gguf_buf_free(&b);
}

void gfs_op_listxattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                      size_t size) {
    struct gguf_buf b = {0};
    pthread_rwlock_rdlock(&fs->lock);
    int err = gfs_xattr_list(fs, gfs_meta_resolve(fs, ino), &b);
    pthread_rwlock_unlock(&fs->lock);
    gfs_reply_xattr(req, size, err, &b);
    gguf_buf_free(&b);
}

void gfs_op_setxattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                     const char *name, const char *value, size_t size,
                     int flags) {
    (void)flags;
    pthread_rwlock_rdlock(&fs->lock);
    ino = gfs_meta_resolve(fs, ino);
    pthread_rwlock_unlock(&fs->lock);
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    int err = row && row->setxattr ? row->setxattr(fs, ino, name, value, size)
                                   : ENOTSUP;
    if (err == ENOTSUP && fs->readonly)
        err = EROFS;
    fuse_reply_err(req, err);
}

void gfs_op_removexattr(struct gfs *fs, fuse_req_t req, fuse_ino_t ino,
                        const char *name) {
    (void)ino;
    (void)name;
    fuse_reply_err(req, fs->readonly ? EROFS : ENOTSUP);
}

void gfs_op_statfs(struct gfs *fs, fuse_req_t req, fuse_ino_t ino) {
    (void)ino;
    struct statvfs sv;
    memset(&sv, 0, sizeof sv);
    sv.f_bsize = sv.f_frsize = 4096;
    pthread_rwlock_rdlock(&fs->lock); /* a commit refreshes fs->st */
    sv.f_blocks = ((uint64_t)fs->st.st_size + 4095) / 4096;
    sv.f_files = 3 + (uint64_t)gguf_n_kv(fs->ctx) + (uint64_t)gfs_n_tensors(fs);
    if (fs->views) /* f32/, npy/, index.tsv: two files per tensor at most */
        sv.f_files += 3 + 2 * (uint64_t)gfs_n_tensors(fs);
    pthread_rwlock_unlock(&fs->lock);
    sv.f_namemax = 255;
    if (fs->readonly)
        sv.f_flag = ST_RDONLY;
    fuse_reply_statfs(req, &sv);
}
