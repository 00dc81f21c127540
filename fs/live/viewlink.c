/*
 * viewlink.c - the live view of a mount without privileges, while it is
 * byte-identical to its file: a symbolic link to that file (issue 35).
 *
 * Why.  A daemon without CAP_SYS_ADMIN cannot register backing files, so
 * FUSE passthrough (source/passthrough.c) is root's only; every byte such
 * a mount serves goes through the daemon and FUSE's page cache (4 KiB
 * folios on 6.18: mmap + touch of the view was 14-30x the file).  A link
 * makes the kernel open the GGUF itself: reads, mmap and the page cache
 * are the file's, at the file's speed, and the kernel checks the reader's
 * permissions on the file, so nothing is widened.
 *
 * Contract.
 *  - Link epochs: the view's version (epoch, passthrough.c) current when
 *    its name is first resolved is a link when the daemon is not root,
 *    passthrough is not off (-o passthrough=off serves everything), the
 *    mount is one local, unmerged file without an overlay, no edit is
 *    pending, and fs->path still names the file the mount reads (same
 *    device and inode).  The decision is made once per epoch and never
 *    changes for its inode (the kernel fixes an inode's type: a change
 *    would make it a bad inode): an edit makes a new epoch, a regular
 *    file served by the daemon; a commit that makes the view the file
 *    again makes a new link epoch.
 *  - The link's target is fs->path (absolute), while that path names the
 *    file the mount reads (else READLINK fails with ESTALE).  READLINK is answered on
 *    every resolution (FUSE_CAP_CACHE_SYMLINKS is not asked), so the
 *    daemon knows when a reader may hold the file: from then until the
 *    GGUF is another file, commits go to a new file renamed over
 *    (GGUF_COMMIT_NEW_FILE), so an open of the unedited view keeps its
 *    bytes, as a passthrough open does.
 *
 * Locks: vl->mu is a leaf, taken with fs->lock held (read at least) or
 * none (commit flags); nothing is taken while it is held.
 */
#include "../edits/edits.h"
#include "../kinds.h"
#include "../source/source.h"
#include "live.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct gfs_vlink {
    pthread_mutex_t mu;
    fuse_ino_t cur;    /* the last epoch decided, 0 if none */
    fuse_ino_t *links; /* epochs that are links, ascending */
    size_t n, cap;
    ino_t resolved; /* the GGUF's inode when a link was last read */
    int any_resolved;
};

/* fs->path still names the file the mount reads (same device and
 * inode): the one check of a link's decision and of each READLINK.
 * Caller holds fs->lock (read). */
static int path_is_file(const struct gfs *fs) {
    struct stat st;
    return stat(fs->path, &st) == 0 && S_ISREG(st.st_mode) &&
           st.st_dev == fs->st.st_dev && st.st_ino == fs->st.st_ino;
}

/* The mount may present its unedited view as a link (see the top).
 * Caller holds fs->lock (read). */
static int may_link(const struct gfs *fs) {
    if (geteuid() == 0 || !fs->pt || !gfs_pt_auto(fs) || !fs->path ||
        fs->path[0] != '/' || gfs_data_merged(fs) || gfs_remote_file(fs, 0) ||
        gfs_overlay_where(fs) || gfs_patch_any(fs) || gguf_dirty(fs->ctx))
        return 0;
    return path_is_file(fs);
}

static int is_link(const struct gfs_vlink *vl, fuse_ino_t ino) {
    for (size_t k = 0; k < vl->n; k++)
        if (vl->links[k] == ino)
            return 1;
    return 0;
}

static struct gfs_vlink *state(struct gfs *fs) {
    struct gfs_live *lv = fs->live;
    if (!lv->vlink) { /* made under fs->lock (read) by several: once
                         (lv->vlink is atomic: the check outside `once`) */
        static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&once);
        if (!lv->vlink) {
            struct gfs_vlink *vl = calloc(1, sizeof *vl);
            if (vl)
                pthread_mutex_init(&vl->mu, NULL);
            lv->vlink = vl;
        }
        pthread_mutex_unlock(&once);
    }
    return lv->vlink;
}

void gfs_vlink_decide(struct gfs *fs, fuse_ino_t ino) {
    if (geteuid() == 0 || !fs->pt)
        return; /* root's view: passthrough (no state kept) */
    struct gfs_vlink *vl = state(fs);
    if (!vl)
        return;
    pthread_mutex_lock(&vl->mu);
    /* Epoch numbers only grow: one already decided is never again. */
    if (ino > vl->cur) {
        vl->cur = ino;
        if (may_link(fs) && vl->n < (size_t)1 << 20) {
            if (vl->n == vl->cap) {
                size_t c = vl->cap ? vl->cap * 2 : 4;
                fuse_ino_t *p = realloc(vl->links, c * sizeof *p);
                if (p)
                    vl->links = p, vl->cap = c;
            }
            if (vl->n < vl->cap)
                vl->links[vl->n++] = ino;
        }
    }
    pthread_mutex_unlock(&vl->mu);
}

int gfs_vlink_is(struct gfs *fs, fuse_ino_t ino) {
    struct gfs_vlink *vl = fs->live->vlink;
    if (!vl)
        return 0;
    pthread_mutex_lock(&vl->mu);
    int r = is_link(vl, ino);
    pthread_mutex_unlock(&vl->mu);
    return r;
}

int gfs_vlink_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    if (!gfs_vlink_is(fs, ino))
        return 0;
    st->st_mode = S_IFLNK | 0777;
    st->st_nlink = 1;
    st->st_size = (off_t)strlen(fs->path);
    st->st_blocks = 0;
    return 1;
}

void gfs_vlink_readlink(struct gfs *fs, fuse_req_t req, fuse_ino_t ino) {
    struct gfs_vlink *vl = fs->live->vlink;
    if (!vl || !gfs_vlink_is(fs, ino)) {
        fuse_reply_err(req, EINVAL); /* not a link */
        return;
    }
    /* The path must still name the file the mount reads: a file renamed
     * over it behind the mount is not this model (ESTALE, not its bytes). */
    pthread_rwlock_rdlock(&fs->lock);
    int same = path_is_file(fs);
    pthread_mutex_lock(&vl->mu);
    vl->resolved = fs->st.st_ino;
    vl->any_resolved = 1;
    pthread_mutex_unlock(&vl->mu);
    pthread_rwlock_unlock(&fs->lock);
    if (same)
        fuse_reply_readlink(req, fs->path);
    else
        fuse_reply_err(req, ESTALE);
}

unsigned gfs_vlink_commit_flags(struct gfs *fs) {
    struct gfs_vlink *vl = fs->live->vlink;
    if (!vl)
        return 0;
    pthread_mutex_lock(&vl->mu);
    int held = vl->any_resolved && vl->resolved == fs->st.st_ino;
    pthread_mutex_unlock(&vl->mu);
    return held ? GGUF_COMMIT_NEW_FILE : 0;
}

void gfs_vlink_free(struct gfs *fs) {
    struct gfs_vlink *vl = fs->live->vlink;
    if (!vl)
        return;
    pthread_mutex_destroy(&vl->mu);
    free(vl->links);
    free(vl);
    fs->live->vlink = NULL;
}
