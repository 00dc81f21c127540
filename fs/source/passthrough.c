/*
 * passthrough.c - the live view (MNT/NAME.gguf) at the speed of the GGUF
 * itself: FUSE passthrough while the view is byte-identical to its file,
 * and the inode numbers ("epochs") that keep every open file of the view
 * on exactly one version of its bytes.
 *
 * Contract.
 *  - While the view is byte-identical to the GGUF (one local file, not a
 *    remote source, no overlay's tensor written (patch.c); no edit
 *    pending: the library's header planner then serves the file's own
 *    header bytes) and the daemon may register backing files (root), opens
 *    of the view are passthrough opens: the kernel reads and maps the GGUF
 *    itself, no request reaches the daemon.  Otherwise (-o passthrough=off,
 *    not root, edits pending, a shard set's merged view, a kernel without
 *    passthrough) the view is served from the daemon through FUSE's page
 *    cache, as before.
 *  - Every version of the view has its own inode number, an epoch: a new
 *    one whenever the view's bytes (an edit: the generation), the file
 *    under it (a commit that wrote a new file) or its way of being served
 *    (a commit made it identical to the file again) change.  The name
 *    resolves to the current epoch (its entry is never cached on a
 *    read-write mount); an open file keeps its epoch's inode.
 *  - An inode's attributes stay those of its version: the kernel caches
 *    them (gfs_attr_timeout), so a read(2) through FUSE's page cache sends
 *    no GETATTR (with FUSE_CAP_AUTO_INVAL_DATA, libfuse's default, the
 *    kernel refreshes timed-out attributes at every read).  The first
 *    open of a version, and every open of an older inode given the
 *    current version, drops what the kernel holds (its number may have
 *    shown other bytes: a store's model closed and opened again numbers
 *    its versions anew; the lookup of the name refreshes them too).
 *  - An epoch is served one way for all its opens: passthrough with one
 *    backing id, or cached; the first open of the current epoch decides.
 *    A late open of an older epoch (a lookup raced with an edit, or
 *    /proc/PID/fd/N reopened) that is still open elsewhere is served as
 *    those opens are (passthrough with the same backing, or cached with
 *    that version's header, kept while open); one that nothing holds open
 *    is given the current version, and every open of it then drops the
 *    inode's page cache (it may hold the old version).  So no open fails
 *    with EIO because of the kernel's rules below, and an open file never
 *    mixes versions.
 *  - While passthrough opens read the GGUF, a commit must not change that
 *    file's bytes: gfs_pt_commit_flags asks the library for a new file
 *    beside, renamed over (GGUF_COMMIT_NEW_FILE; costs a copy), so those
 *    readers keep the old inode.  Without such opens, commits go in place
 *    as always.
 *  - A backing id is registered (lazily, at the first passthrough open) per
 *    file the GGUF has been, and closed once that file is no longer the
 *    GGUF and no open uses it, or when the model closes (unmount, or a
 *    store letting it go with none of its files open).
 *
 * The kernel's side (what INIT negotiated, backing ids, the OPEN reply
 * that carries one) is the session's shim, fs/base/devio.c, which every model
 * of the mount shares: a single-file mount's and each of a store's.  What
 * this file adds, from iomode.c (Linux 6.9+): while an inode has
 * passthrough opens (a backing attached), an open of it without
 * FOPEN_PASSTHROUGH, or with another backing, or a cached open racing a
 * passthrough one, fails with EIO; a direct-I/O open takes no mode unless
 * mapped.  The kernel drops an open's mode before it sends RELEASE, so our
 * count of opens never undercounts its.
 *
 * Locks: pt->mu is a leaf, taken with fs->lock held (read at least) or
 * with no lock (release); nothing is taken while it is held.
 */
#include "../base/base.h"
#include "source.h"
#include "../base/devio.h"
#include "../node/node.h"
#include "../base/mount.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A file the GGUF has been, registered as a backing file. */
struct pt_backing {
    struct pt_backing *next;
    int id;         /* > 0 */
    ino_t ino;      /* the file's inode */
    unsigned opens; /* passthrough opens on it */
};

enum pt_how { PT_UNDECIDED, PT_PASSTHROUGH, PT_CACHED };

/* A version of the view: the generation of its header, whether edits are
 * pending, the file under it. */
struct pt_epoch {
    struct pt_epoch *next;
    uint64_t n; /* 0: GFS_INO_LIVE; else GFS_INO_VIEW + n */
    uint64_t gen;
    int dirty;
    ino_t file;
    uint64_t size;
    struct gfs_text *hdr; /* its header (a reference): a late open of a
                             cached epoch is served this version */
    enum pt_how how;
    int reused; /* an older inode given the version current when it was
                   reopened: its page cache may still hold pages of its
                   first version until each open drops it (see
                   gfs_pt_view_open) */
    int opened; /* opened before (its cache is this version's) */
    struct pt_backing *bk; /* passthrough: its backing */
    unsigned opens;        /* open files of this inode (any way) */
};

struct gfs_pt {
    enum gfs_pt_mode mode;

    pthread_mutex_t mu;         /* guards what follows; a leaf */
    struct pt_epoch *epochs;    /* the current one first, then those with
                                open files */
    struct pt_backing *cur;     /* of the GGUF's current file, or NULL */
    struct pt_backing *retired; /* earlier files, still open */
    int failed;                 /* errno of the last BACKING_OPEN, once */
    uint64_t next_n;
};

int gfs_pt_start(struct gfs *fs, enum gfs_pt_mode mode) {
    struct gfs_pt *pt = calloc(1, sizeof *pt);
    if (!pt)
        return -1;
    pt->mode = mode;
    pt->next_n = 1;
    pthread_mutex_init(&pt->mu, NULL);
    fs->pt = pt;
    return 0;
}

int gfs_pt_auto(const struct gfs *fs) {
    return fs->pt && fs->pt->mode == GFS_PT_AUTO;
}

static void backing_close(struct gfs *fs, struct pt_backing *b) {
    gfs_passthrough_close(gfs_io(fs), b->id);
    free(b);
}

void gfs_pt_stop(struct gfs *fs) {
    struct gfs_pt *pt = fs->pt;
    if (!pt)
        return;
    /* A store closes a model while its session runs (no file of it
     * open): its ids are let go.  After the session, closes are no-ops
     * (the ids went with the connection). */
    while (pt->epochs) {
        struct pt_epoch *e = pt->epochs;
        pt->epochs = e->next;
        gfs_text_put(e->hdr);
        free(e);
    }
    if (pt->cur)
        backing_close(fs, pt->cur);
    while (pt->retired) {
        struct pt_backing *b = pt->retired;
        pt->retired = b->next;
        backing_close(fs, b);
    }
    pthread_mutex_destroy(&pt->mu);
    free(pt);
    fs->pt = NULL;
}

/* ---- epochs ------------------------------------------------------------ */

static fuse_ino_t epoch_ino(uint64_t n) {
    return n == 0 ? GFS_INO_LIVE : GFS_INO_VIEW + n;
}

static int epoch_of(fuse_ino_t ino, uint64_t *n) {
    if (ino == GFS_INO_LIVE) {
        *n = 0;
        return 1;
    }
    if (ino > GFS_INO_VIEW && ino < GFS_INO_VIEW_END) {
        *n = ino - GFS_INO_VIEW;
        return 1;
    }
    return 0;
}

/* Frees epoch e (not the current one) once nothing has it open.  Holds
 * mu. */
static void epoch_drop_if_unused(struct gfs_pt *pt, struct pt_epoch *e) {
    if (e == pt->epochs || e->opens)
        return;
    for (struct pt_epoch **p = &pt->epochs; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            gfs_text_put(e->hdr);
            free(e);
            return;
        }
}

/* The current epoch, made anew if the view changed.  Caller holds
 * fs->lock (read) and mu; hdr and size are the view's now. */
static struct pt_epoch *current(struct gfs *fs, struct gfs_text *hdr,
                                uint64_t size) {
    struct gfs_pt *pt = fs->pt;
    struct pt_epoch *c = pt->epochs;
    int dirty = gguf_dirty(fs->ctx);
    if (c && c->gen == fs->generation && c->dirty == dirty &&
        c->file == fs->st.st_ino && c->size == size)
        return c;
    struct pt_epoch *e = calloc(1, sizeof *e);
    if (!e)
        return c; /* keep serving the last one */
    /* The very first version keeps the classic number 4. */
    e->n = c ? pt->next_n++ : 0;
    e->gen = fs->generation;
    e->dirty = dirty;
    e->file = fs->st.st_ino;
    e->size = size;
    e->hdr = hdr;
    atomic_fetch_add(&hdr->refs, 1);
    e->next = c;
    pt->epochs = e;
    if (c)
        epoch_drop_if_unused(pt, c);
    return e;
}

static struct pt_epoch *find_epoch(struct gfs_pt *pt, uint64_t n) {
    for (struct pt_epoch *e = pt->epochs; e; e = e->next)
        if (e->n == n)
            return e;
    return NULL;
}

fuse_ino_t gfs_pt_view_ino(struct gfs *fs, struct gfs_text *hdr,
                           uint64_t size) {
    if (!fs->pt || !hdr)
        return GFS_INO_LIVE;
    pthread_mutex_lock(&fs->pt->mu);
    struct pt_epoch *c = current(fs, hdr, size);
    fuse_ino_t ino = c ? epoch_ino(c->n) : GFS_INO_LIVE;
    pthread_mutex_unlock(&fs->pt->mu);
    return ino;
}

void gfs_pt_view_size(struct gfs *fs, fuse_ino_t ino, uint64_t *size) {
    uint64_t n;
    if (!fs->pt || !epoch_of(ino, &n))
        return;
    pthread_mutex_lock(&fs->pt->mu);
    struct pt_epoch *e = find_epoch(fs->pt, n);
    if (e) /* an older version still open: its own size */
        *size = e->size;
    pthread_mutex_unlock(&fs->pt->mu);
}

/* The backing of the GGUF's current file, registered on first use; NULL
 * if it cannot be (logged once).  Holds mu. */
static struct pt_backing *backing(struct gfs *fs) {
    struct gfs_pt *pt = fs->pt;
    if (pt->cur && pt->cur->ino == fs->st.st_ino)
        return pt->cur;
    if (pt->failed)
        return NULL;
    int id = gfs_passthrough_open(gfs_io(fs), gguf_fd(fs->ctx));
    if (id <= 0) {
        pt->failed = -id;
        gfs_log(fs,
                "%s: the live view is served through the daemon, not by "
                "passthrough: registering the file failed (%s)",
                fs->path, strerror(pt->failed));
        return NULL;
    }
    struct pt_backing *b = calloc(1, sizeof *b);
    if (!b) {
        gfs_passthrough_close(gfs_io(fs), id);
        return NULL;
    }
    b->id = id;
    b->ino = fs->st.st_ino;
    pt->cur = b;
    return b;
}

/* Passthrough may serve the current epoch c: one local file (a remote
 * source's bytes are in a cache, not a file that is the model), no edit
 * pending. */
static int eligible(const struct gfs *fs, const struct pt_epoch *c) {
    return fs->pt->mode == GFS_PT_AUTO && gfs_devio_passthrough(gfs_io(fs)) &&
           !gfs_data_merged(fs) && !gfs_remote_file(fs, 0) && !c->dirty &&
           !gfs_patch_any(fs); /* an overlay's tensors: not the file's */
}

void gfs_pt_inval_data(struct gfs *fs, uint64_t data_rel, uint64_t len) {
    struct {
        fuse_ino_t ino;
        uint64_t off;
    } v[16];
    int n = 0;
    pthread_mutex_lock(&fs->pt->mu);
    for (struct pt_epoch *e = fs->pt->epochs; e && n < 16; e = e->next)
        if (e->how != PT_PASSTHROUGH && e->hdr)
            v[n].ino = epoch_ino(e->n), v[n++].off = e->hdr->len + data_rel;
    pthread_mutex_unlock(&fs->pt->mu);
    for (int k = 0; k < n; k++)
        gfs_devio_inval(gfs_io(fs), gfs_ino_out(fs, v[k].ino),
                        (int64_t)v[k].off, (int64_t)len);
}

void gfs_pt_view_open(struct gfs *fs, struct gfs_fh *fh,
                      struct fuse_file_info *fi, struct gfs_text *hdr,
                      uint64_t size, int reopened) {
    struct gfs_pt *pt = fs->pt;
    uint64_t n;
    if (!pt) {
        fi->keep_cache = reopened;
        return;
    }
    if (!hdr || !epoch_of(fh->ino, &n)) {
        fi->direct_io = 1; /* cannot happen: kept as the safe way */
        return;
    }
    int stale = 0; /* the kernel may hold attributes of another version */
    pthread_mutex_lock(&pt->mu);
    struct pt_epoch *c = current(fs, hdr, size);
    struct pt_epoch *e = c && c->n == n ? c : find_epoch(pt, n);
    if (!e) {
        /* An older version's inode that nothing holds open (else its
         * record would be kept): it shows the current version from now
         * on.  Its page cache may hold pages of its old version: every
         * open of it drops the cache (keep_cache 0), so that none reads
         * them, even one the kernel completes before this open's own
         * invalidation. */
        e = calloc(1, sizeof *e);
        if (e) {
            e->n = n;
            e->gen = fs->generation;
            e->dirty = -1; /* never matches: not the current epoch */
            e->file = fs->st.st_ino;
            e->size = size;
            e->hdr = hdr;
            atomic_fetch_add(&hdr->refs, 1);
            e->how = PT_CACHED;
            e->reused = 1;
            stale = 1;
            e->next = pt->epochs ? pt->epochs->next : NULL;
            if (pt->epochs)
                pt->epochs->next = e;
            else
                pt->epochs = e;
        }
        fi->keep_cache = 0;
    } else {
        /* A new inode only ever shows its version: keep its cache, but
         * for the version's first open.  Its number may have shown other
         * bytes to the kernel before this record: a store's model closed
         * to bound memory and opened again numbers its versions from
         * GFS_INO_LIVE anew (session/mounts.h). */
        fi->keep_cache = !e->reused && e->opened;
        stale = !e->opened;
        e->opened = 1;
    }
    if (e && e == c && e->how == PT_UNDECIDED) {
        e->bk = eligible(fs, e) ? backing(fs) : NULL;
        e->how = e->bk ? PT_PASSTHROUGH : PT_CACHED;
    }
    if (e && e->how == PT_PASSTHROUGH && (e == c || e->opens)) {
        /* One backing for every open of the inode. */
        fh->pt_backing = e->bk;
        e->bk->opens++;
        fh->drop = 0;
    } else if (e && e->hdr != fh->text) {
        /* A cached version: its own header (the data never changes). */
        gfs_text_put(fh->text);
        fh->text = e->hdr;
        atomic_fetch_add(&e->hdr->refs, 1);
    }
    if (e) {
        e->opens++;
        fh->pt_epoch = e;
    } else {
        fi->direct_io = 1; /* out of memory: never the page cache */
    }
    pthread_mutex_unlock(&pt->mu);
    /* A version's attributes are cached (gfs_attr_timeout): an inode that
     * shows a version for the first time has the kernel's dropped (only
     * the attributes: offset -1).  The kernel takes no lock of the inode
     * for it, so an open in progress cannot deadlock with it. */
    if (stale)
        gfs_devio_inval(gfs_io(fs), gfs_ino_out(fs, fh->ino), -1, 0);
}

void gfs_pt_arm(const struct gfs_fh *fh) {
    const struct pt_backing *b = fh->pt_backing;
    gfs_devio_arm(b ? b->id : 0);
}

void gfs_pt_disarm(void) {
    gfs_devio_arm(0);
}

void gfs_pt_release(struct gfs *fs, struct gfs_fh *fh) {
    struct gfs_pt *pt = fs->pt;
    if (!pt || (!fh->pt_epoch && !fh->pt_backing))
        return;
    pthread_mutex_lock(&pt->mu);
    struct pt_backing *b = fh->pt_backing;
    if (b && --b->opens == 0 && b != pt->cur) {
        for (struct pt_backing **p = &pt->retired; *p; p = &(*p)->next)
            if (*p == b) {
                *p = b->next;
                break;
            }
        backing_close(fs, b);
    }
    struct pt_epoch *e = fh->pt_epoch;
    if (e) {
        e->opens--;
        epoch_drop_if_unused(pt, e);
    }
    fh->pt_backing = NULL;
    fh->pt_epoch = NULL;
    pthread_mutex_unlock(&pt->mu);
}

unsigned gfs_pt_commit_flags(struct gfs *fs) {
    struct gfs_pt *pt = fs->pt;
    unsigned flags = 0;
    if (!pt)
        return 0;
    pthread_mutex_lock(&pt->mu);
    if (pt->cur && pt->cur->opens)
        flags = GGUF_COMMIT_NEW_FILE;
    pthread_mutex_unlock(&pt->mu);
    return flags;
}

void gfs_pt_committed(struct gfs *fs) {
    struct gfs_pt *pt = fs->pt;
    if (!pt)
        return;
    pthread_mutex_lock(&pt->mu);
    struct pt_backing *b = pt->cur;
    if (b && b->ino != fs->st.st_ino) {
        /* Another file now: the old one's id goes once unused. */
        pt->cur = NULL;
        if (b->opens) {
            b->next = pt->retired;
            pt->retired = b;
        } else {
            backing_close(fs, b);
        }
    }
    pthread_mutex_unlock(&pt->mu);
}
