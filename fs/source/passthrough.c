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
 *    GGUF and no open uses it, or at unmount.
 *
 * Kernel facts relied on (include/uapi/linux/fuse.h, protocol 7.40; fs/fuse/
 * inode.c process_init_reply, backing.c, passthrough.c, iomode.c of 6.9+;
 * checked on 6.18):
 *  - The kernel offers FUSE_PASSTHROUGH (bit 37: bit 5 of fuse_init_in's
 *    flags2, which counts only with FUSE_INIT_EXT in flags) and accepts it
 *    when the INIT reply has that bit in fuse_init_out.flags2 (byte 32),
 *    FUSE_INIT_EXT in flags, 0 < max_stack_depth (byte 36) <=
 *    FILESYSTEM_MAX_STACK_DEPTH (2), and no FUSE_WRITEBACK_CACHE.  No
 *    protocol minor is required: libfuse 3.14 answers 7.38.  We ask for
 *    max_stack_depth 1: the GGUF may not sit on a stacked filesystem
 *    (overlayfs, another FUSE mount: BACKING_OPEN fails with ELOOP, and
 *    the view is served cached), and the mount may itself be a lower layer
 *    of an overlay.
 *  - ioctl(FUSE_DEV_IOC_BACKING_OPEN, struct fuse_backing_map {fd, flags 0,
 *    padding 0}) on the /dev/fuse fd needs CAP_SYS_ADMIN and a negotiated
 *    passthrough; it returns a backing id > 0 that holds a reference to
 *    the file.  FUSE_DEV_IOC_BACKING_CLOSE(id) drops the id; open files
 *    keep their own reference.
 *  - An OPEN reply with FOPEN_PASSTHROUGH (1 << 7) in open_flags and the id
 *    in fuse_open_out.backing_id (byte 12, the former padding) makes reads,
 *    splice and mmap go to the backing file from byte 0 (no offset: tensor
 *    files can never use it).
 *  - iomode.c: while an inode has passthrough opens (a backing attached),
 *    an open of it without FOPEN_PASSTHROUGH, or with another backing, or
 *    a cached open racing a passthrough one, fails with EIO; a direct-I/O
 *    open takes no mode unless mapped.  The kernel drops an open's mode
 *    before it sends RELEASE, so our count of opens never undercounts its.
 *
 * libfuse 3.14 has no passthrough API; fuse_session_custom_io() hooks its
 * device I/O: read() sees every request (splice_receive is left unset, so
 * requests are read, not spliced; we never ask for FUSE_CAP_SPLICE_READ),
 * writev() every reply but the spliced data replies (splice_send).  The
 * INIT reply is found by the unique of the INIT request; an OPEN reply by
 * a thread-local armed by the handler around its fuse_reply_open (handlers
 * reply on their own thread).
 *
 * Locks: pt->mu is a leaf, taken with fs->lock held (read at least) or
 * with no lock (release); nothing is taken while it is held.
 */
#include "source.h"
#include "../mounts.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

/* Protocol 7.40 items the system's header (Linux 6.1) predates. */
#define PT_INIT_FLAGS2_PASSTHROUGH (1u << 5) /* FUSE_PASSTHROUGH >> 32 */
#define PT_INIT_FLAGS2_DIO_MMAP (1u << 4) /* FUSE_DIRECT_IO_ALLOW_MMAP >> 32 */
#define PT_FOPEN_PASSTHROUGH (1u << 7)
#define PT_INIT_OUT_MAX_STACK_DEPTH 36 /* offset in struct fuse_init_out */
#define PT_OPEN_OUT_BACKING_ID 12      /* offset in struct fuse_open_out */
struct pt_backing_map {
    int32_t fd;
    uint32_t flags;
    uint64_t padding;
};
#define PT_IOC_BACKING_OPEN _IOW(229, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

_Static_assert(offsetof(struct fuse_init_out, flags2) == 32,
               "fuse_init_out.flags2 at byte 32");
_Static_assert(offsetof(struct fuse_init_out, unused) ==
                   PT_INIT_OUT_MAX_STACK_DEPTH,
               "max_stack_depth follows flags2");
_Static_assert(offsetof(struct fuse_open_out, padding) ==
                       PT_OPEN_OUT_BACKING_ID &&
                   sizeof(struct fuse_open_out) == 16,
               "fuse_open_out.backing_id at byte 12");
_Static_assert(sizeof(struct pt_backing_map) == 16, "fuse_backing_map");

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
    struct pt_backing *bk; /* passthrough: its backing */
    unsigned opens;        /* open files of this inode (any way) */
};

struct gfs_pt {
    enum gfs_pt_mode mode;
    int devfd;
    atomic_int offered;          /* the kernel's INIT offered passthrough */
    atomic_int offered_dio_mmap; /* ... and FUSE_DIRECT_IO_ALLOW_MMAP */
    int want_pt;                 /* ask for passthrough (auto, root) */
    int want_dio_mmap;           /* ask for DIRECT_IO_ALLOW_MMAP */
    atomic_int negotiated;       /* our INIT reply asked for passthrough */
    atomic_int dio_mmap;         /* ... and for DIRECT_IO_ALLOW_MMAP */
    atomic_uint_fast64_t init_unique;
    atomic_int init_seen;

    pthread_mutex_t mu;         /* guards what follows; a leaf */
    struct pt_epoch *epochs;    /* the current one first, then those with
                                open files */
    struct pt_backing *cur;     /* of the GGUF's current file, or NULL */
    struct pt_backing *retired; /* earlier files, still open */
    int failed;                 /* errno of the last BACKING_OPEN, once */
    uint64_t next_n;
};

static _Thread_local int reply_backing; /* armed by gfs_pt_arm */

/* ---- the session's I/O hooks ------------------------------------------ */

/* The session's userdata is the mount: passthrough is a single-file
 * mount's (gfs_pt_start). */
static ssize_t pt_read(int fd, void *buf, size_t len, void *ud) {
    struct gfs *fs = ((struct gfs_mount *)ud)->single;
    ssize_t r = read(fd, buf, len);
    if (r >= (ssize_t)(sizeof(struct fuse_in_header) + 20) && fs->pt) {
        struct fuse_in_header in;
        memcpy(&in, buf, sizeof in);
        if (in.opcode == FUSE_INIT && !atomic_load(&fs->pt->init_seen)) {
            uint32_t flags, flags2;
            const char *a = (const char *)buf + sizeof in;
            memcpy(&flags, a + offsetof(struct fuse_init_in, flags), 4);
            memcpy(&flags2, a + offsetof(struct fuse_init_in, flags2), 4);
            atomic_store(&fs->pt->offered,
                         (flags & FUSE_INIT_EXT) &&
                             (flags2 & PT_INIT_FLAGS2_PASSTHROUGH));
            atomic_store(&fs->pt->offered_dio_mmap,
                         (flags & FUSE_INIT_EXT) &&
                             (flags2 & PT_INIT_FLAGS2_DIO_MMAP));
            atomic_store(&fs->pt->init_unique, in.unique);
            atomic_store(&fs->pt->init_seen, 1);
        }
    }
    return r;
}

/* The INIT reply: ask for passthrough (see the top comment) and, for -o
 * tensor_direct_io and the converted views (f32/, npy/), for shared mmap
 * of direct-I/O files (FUSE_DIRECT_IO_ALLOW_MMAP, bit 36, protocol 7.39). */
static void patch_init(struct gfs_pt *pt, struct iovec *iov, int count) {
    if (count < 2 || iov[1].iov_len < PT_INIT_OUT_MAX_STACK_DEPTH + 4)
        return;
    char *o = iov[1].iov_base;
    uint32_t flags, flags2, depth = 1;
    memcpy(&flags, o + offsetof(struct fuse_init_out, flags), 4);
    memcpy(&flags2, o + offsetof(struct fuse_init_out, flags2), 4);
    if (!(flags & FUSE_INIT_EXT) || (flags & FUSE_WRITEBACK_CACHE))
        return;
    if (pt->want_dio_mmap && atomic_load(&pt->offered_dio_mmap)) {
        flags2 |= PT_INIT_FLAGS2_DIO_MMAP;
        atomic_store(&pt->dio_mmap, 1);
    }
    if (pt->want_pt && atomic_load(&pt->offered)) {
        flags2 |= PT_INIT_FLAGS2_PASSTHROUGH;
        memcpy(o + PT_INIT_OUT_MAX_STACK_DEPTH, &depth, 4);
        atomic_store(&pt->negotiated, 1);
    }
    memcpy(o + offsetof(struct fuse_init_out, flags2), &flags2, 4);
}

static ssize_t pt_writev(int fd, struct iovec *iov, int count, void *ud) {
    struct gfs *fs = ((struct gfs_mount *)ud)->single;
    struct gfs_pt *pt = fs->pt;
    struct fuse_out_header out;
    if (pt && count >= 1 && iov[0].iov_len >= sizeof out) {
        memcpy(&out, iov[0].iov_base, sizeof out);
        if (out.error == 0 && reply_backing > 0 && count == 2 &&
            iov[1].iov_len == sizeof(struct fuse_open_out)) {
            char *o = iov[1].iov_base;
            uint32_t fl;
            int32_t id = reply_backing;
            memcpy(&fl, o + offsetof(struct fuse_open_out, open_flags), 4);
            fl |= PT_FOPEN_PASSTHROUGH;
            fl &= ~(uint32_t)(FOPEN_DIRECT_IO | FOPEN_KEEP_CACHE);
            memcpy(o + offsetof(struct fuse_open_out, open_flags), &fl, 4);
            memcpy(o + PT_OPEN_OUT_BACKING_ID, &id, 4);
        } else if (out.error == 0 && atomic_load(&pt->init_seen) &&
                   out.unique == atomic_load(&pt->init_unique)) {
            patch_init(pt, iov, count);
        }
    }
    return writev(fd, iov, count);
}

static ssize_t pt_splice_send(int fdin, off_t *offin, int fdout, off_t *offout,
                              size_t len, unsigned int flags, void *ud) {
    (void)ud;
    return splice(fdin, offin, fdout, offout, len, flags);
}

int gfs_pt_start(struct gfs *fs, struct fuse_session *se, enum gfs_pt_mode mode,
                 int dio_mmap) {
    struct gfs_pt *pt = calloc(1, sizeof *pt);
    if (!pt)
        return -1;
    pt->mode = mode;
    pt->devfd = fuse_session_fd(se);
    pt->next_n = 1;
    pthread_mutex_init(&pt->mu, NULL);
    fs->pt = pt;
    /* Only root may register backing files: elsewhere nothing to ask. */
    pt->want_pt = mode == GFS_PT_AUTO && geteuid() == 0;
    pt->want_dio_mmap = dio_mmap;
    if (!pt->want_pt && !pt->want_dio_mmap)
        return 0;
    static const struct fuse_custom_io io = {
        .read = pt_read, .writev = pt_writev, .splice_send = pt_splice_send};
    if (fuse_session_custom_io(se, &io, pt->devfd) != 0) {
        gfs_log(fs, "%s: passthrough unavailable (libfuse custom I/O)",
                fs->path);
        return -1;
    }
    return 0;
}

int gfs_pt_auto(const struct gfs *fs) {
    return fs->pt && fs->pt->mode == GFS_PT_AUTO;
}

int gfs_pt_dio_mmap(struct gfs *fs) {
    return fs->pt && atomic_load(&fs->pt->dio_mmap);
}

static void backing_close(struct gfs_pt *pt, struct pt_backing *b) {
    uint32_t id = (uint32_t)b->id;
    (void)ioctl(pt->devfd, PT_IOC_BACKING_CLOSE, &id);
    free(b);
}

void gfs_pt_stop(struct gfs *fs) {
    struct gfs_pt *pt = fs->pt;
    if (!pt)
        return;
    /* The session's fd may be closed already: the ids went with it. */
    while (pt->epochs) {
        struct pt_epoch *e = pt->epochs;
        pt->epochs = e->next;
        gfs_text_put(e->hdr);
        free(e);
    }
    if (pt->cur)
        free(pt->cur);
    while (pt->retired) {
        struct pt_backing *b = pt->retired;
        pt->retired = b->next;
        free(b);
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
    struct pt_backing_map map = {.fd = gguf_fd(fs->ctx)};
    int id = ioctl(pt->devfd, PT_IOC_BACKING_OPEN, &map);
    if (id <= 0) {
        pt->failed = id < 0 ? errno : EINVAL;
        gfs_log(fs,
                "%s: the live view is served through the daemon, not by "
                "passthrough: registering the file failed (%s)",
                fs->path, strerror(pt->failed));
        return NULL;
    }
    struct pt_backing *b = calloc(1, sizeof *b);
    if (!b) {
        uint32_t u = (uint32_t)id;
        (void)ioctl(pt->devfd, PT_IOC_BACKING_CLOSE, &u);
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
    return fs->pt->mode == GFS_PT_AUTO && atomic_load(&fs->pt->negotiated) &&
           !gfs_view_merged(fs) && !gfs_remote_file(fs, 0) && !c->dirty &&
           !gfs_patch_any(fs); /* an overlay's tensors: not the file's */
}

void gfs_pt_inval_data(struct gfs *fs, struct fuse_session *se,
                       uint64_t data_rel, uint64_t len) {
    struct {
        fuse_ino_t ino;
        uint64_t off;
    } v[16];
    int n = 0, err = 0;
    if (fs->pt) {
        pthread_mutex_lock(&fs->pt->mu);
        for (struct pt_epoch *e = fs->pt->epochs; e && n < 16; e = e->next)
            if (e->how != PT_PASSTHROUGH && e->hdr)
                v[n].ino = epoch_ino(e->n), v[n++].off = e->hdr->len + data_rel;
        pthread_mutex_unlock(&fs->pt->mu);
    } else {
        struct gfs_text *hdr = gfs_view_header(fs, &err);
        if (hdr)
            v[n].ino = GFS_INO_LIVE, v[n++].off = hdr->len + data_rel;
        gfs_text_put(hdr);
    }
    for (int k = 0; k < n; k++)
        fuse_lowlevel_notify_inval_inode(se, gfs_ino_out(fs, v[k].ino),
                                         (off_t)v[k].off, (off_t)len);
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
            e->next = pt->epochs ? pt->epochs->next : NULL;
            if (pt->epochs)
                pt->epochs->next = e;
            else
                pt->epochs = e;
        }
        fi->keep_cache = 0;
    } else {
        /* A new inode only ever shows its version: keep its cache. */
        fi->keep_cache = !e->reused;
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
}

void gfs_pt_arm(const struct gfs_fh *fh) {
    const struct pt_backing *b = fh->pt_backing;
    reply_backing = b ? b->id : 0;
}

void gfs_pt_disarm(void) {
    reply_backing = 0;
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
        backing_close(pt, b);
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
            backing_close(pt, b);
        }
    }
    pthread_mutex_unlock(&pt->mu);
}
