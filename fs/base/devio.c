/*
 * devio.c - the kernel shim (devio.h): FUSE passthrough and
 * FUSE_DIRECT_IO_ALLOW_MMAP negotiated for the session, backing files
 * registered by fd, passthrough opens replied.  It knows no model.
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
 *    max_stack_depth 1: a backing file may not sit on a stacked filesystem
 *    (overlayfs, another FUSE mount: BACKING_OPEN fails with ELOOP), and
 *    the mount may itself be a lower layer of an overlay.
 *  - ioctl(FUSE_DEV_IOC_BACKING_OPEN, struct fuse_backing_map {fd, flags 0,
 *    padding 0}) on the /dev/fuse fd needs CAP_SYS_ADMIN and a negotiated
 *    passthrough; it returns a backing id > 0 that holds a reference to
 *    the file.  FUSE_DEV_IOC_BACKING_CLOSE(id) drops the id; open files
 *    keep their own reference.  The ids die with the connection.
 *  - An OPEN reply with FOPEN_PASSTHROUGH (1 << 7) in open_flags and the id
 *    in fuse_open_out.backing_id (byte 12, the former padding) makes reads,
 *    splice and mmap go to the backing file from byte 0 (no offset).
 *
 * libfuse 3.14 has no passthrough API; fuse_session_custom_io() hooks its
 * device I/O: read() sees every request (splice_receive is left unset, so
 * requests are read, not spliced; we never ask for FUSE_CAP_SPLICE_READ),
 * writev() every reply but the spliced data replies (splice_send).  The
 * INIT reply is found by the unique of the INIT request; an OPEN reply by
 * a thread-local armed by the handler around its fuse_reply_open (handlers
 * reply on their own thread).  The hooks get the session's userdata, whose
 * first member is the shim (devio.h).
 */
#include "devio.h"
#include "../daemon.h" /* FUSE_USE_VERSION */

#include <fuse_lowlevel.h>

#include <errno.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

/* Protocol 7.40 items the system's header (Linux 6.1) predates. */
#define IO_INIT_FLAGS2_PASSTHROUGH (1u << 5) /* FUSE_PASSTHROUGH >> 32 */
#define IO_INIT_FLAGS2_DIO_MMAP (1u << 4) /* FUSE_DIRECT_IO_ALLOW_MMAP >> 32 */
#define IO_FOPEN_PASSTHROUGH (1u << 7)
#define IO_INIT_OUT_MAX_STACK_DEPTH 36 /* offset in struct fuse_init_out */
#define IO_OPEN_OUT_BACKING_ID 12      /* offset in struct fuse_open_out */
struct io_backing_map {
    int32_t fd;
    uint32_t flags;
    uint64_t padding;
};
#define IO_IOC_BACKING_OPEN _IOW(229, 1, struct io_backing_map)
#define IO_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

_Static_assert(offsetof(struct fuse_init_out, flags2) == 32,
               "fuse_init_out.flags2 at byte 32");
_Static_assert(offsetof(struct fuse_init_out, unused) ==
                   IO_INIT_OUT_MAX_STACK_DEPTH,
               "max_stack_depth follows flags2");
_Static_assert(offsetof(struct fuse_open_out, padding) ==
                       IO_OPEN_OUT_BACKING_ID &&
                   sizeof(struct fuse_open_out) == 16,
               "fuse_open_out.backing_id at byte 12");
_Static_assert(sizeof(struct io_backing_map) == 16, "fuse_backing_map");

struct gfs_devio {
    struct fuse_session *se;     /* the session (its notifications) */
    atomic_int devfd;            /* the session's device; -1 once stopped */
    atomic_llong idle_ms;        /* gfs_devio_idle's time, or 0 */
    int want_pt, want_dio_mmap;  /* what the mount asks for */
    atomic_int offered;          /* the kernel's INIT offered passthrough */
    atomic_int offered_dio_mmap; /* ... and FUSE_DIRECT_IO_ALLOW_MMAP */
    atomic_int negotiated;       /* our INIT reply asked for passthrough */
    atomic_int dio_mmap;         /* ... and for DIRECT_IO_ALLOW_MMAP */
    atomic_uint_fast64_t init_unique;
    atomic_int init_seen;
};

static _Thread_local int reply_backing; /* armed by gfs_devio_arm */

/* The session's userdata begins with the shim's pointer (devio.h). */
static struct gfs_devio *of(void *ud) {
    return ud ? *(struct gfs_devio **)ud : NULL;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *ud) {
    struct gfs_devio *d = of(ud);
    ssize_t r = read(fd, buf, len);
    if (d && r >= (ssize_t)(sizeof(struct fuse_in_header) + 20) &&
        !atomic_load(&d->init_seen)) {
        struct fuse_in_header in;
        memcpy(&in, buf, sizeof in);
        if (in.opcode == FUSE_INIT) {
            uint32_t flags, flags2;
            const char *a = (const char *)buf + sizeof in;
            memcpy(&flags, a + offsetof(struct fuse_init_in, flags), 4);
            memcpy(&flags2, a + offsetof(struct fuse_init_in, flags2), 4);
            int ext = (flags & FUSE_INIT_EXT) != 0;
            atomic_store(&d->offered,
                         ext && (flags2 & IO_INIT_FLAGS2_PASSTHROUGH));
            atomic_store(&d->offered_dio_mmap,
                         ext && (flags2 & IO_INIT_FLAGS2_DIO_MMAP));
            atomic_store(&d->init_unique, in.unique);
            atomic_store(&d->init_seen, 1);
        }
    }
    return r;
}

/* The INIT reply: ask for what the mount wants and the kernel offered
 * (see the top comment). */
static void patch_init(struct gfs_devio *d, struct iovec *iov, int count) {
    if (count < 2 || iov[1].iov_len < IO_INIT_OUT_MAX_STACK_DEPTH + 4)
        return;
    char *o = iov[1].iov_base;
    uint32_t flags, flags2, depth = 1;
    memcpy(&flags, o + offsetof(struct fuse_init_out, flags), 4);
    memcpy(&flags2, o + offsetof(struct fuse_init_out, flags2), 4);
    if (!(flags & FUSE_INIT_EXT) || (flags & FUSE_WRITEBACK_CACHE))
        return;
    if (d->want_dio_mmap && atomic_load(&d->offered_dio_mmap)) {
        flags2 |= IO_INIT_FLAGS2_DIO_MMAP;
        atomic_store(&d->dio_mmap, 1);
    }
    if (d->want_pt && atomic_load(&d->offered)) {
        flags2 |= IO_INIT_FLAGS2_PASSTHROUGH;
        memcpy(o + IO_INIT_OUT_MAX_STACK_DEPTH, &depth, 4);
        atomic_store(&d->negotiated, 1);
    }
    memcpy(o + offsetof(struct fuse_init_out, flags2), &flags2, 4);
}

/* An OPEN (or CREATE: its fuse_open_out follows the entry) reply armed
 * with a backing id: a passthrough open, never direct I/O or kept cache. */
static void patch_open(struct iovec *iov, int count, int32_t id) {
    char *o = iov[count - 1].iov_base;
    uint32_t fl;
    memcpy(&fl, o + offsetof(struct fuse_open_out, open_flags), 4);
    fl |= IO_FOPEN_PASSTHROUGH;
    fl &= ~(uint32_t)(FOPEN_DIRECT_IO | FOPEN_KEEP_CACHE);
    memcpy(o + offsetof(struct fuse_open_out, open_flags), &fl, 4);
    memcpy(o + IO_OPEN_OUT_BACKING_ID, &id, 4);
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *ud) {
    struct gfs_devio *d = of(ud);
    struct fuse_out_header out;
    if (d && count >= 1 && iov[0].iov_len >= sizeof out) {
        memcpy(&out, iov[0].iov_base, sizeof out);
        if (out.error == 0 && reply_backing > 0 && count == 2 &&
            iov[1].iov_len == sizeof(struct fuse_open_out))
            patch_open(iov, count, reply_backing);
        else if (out.error == 0 && atomic_load(&d->init_seen) &&
                 out.unique == atomic_load(&d->init_unique))
            patch_init(d, iov, count);
    }
    return writev(fd, iov, count);
}

static ssize_t io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout,
                              size_t len, unsigned int flags, void *ud) {
    (void)ud;
    return splice(fdin, offin, fdout, offout, len, flags);
}

int gfs_devio_start(struct gfs_devio **out, struct fuse_session *se,
                    int want_pt, int want_dio_mmap, const char **why) {
    struct gfs_devio *d = calloc(1, sizeof *d);
    *out = d;
    if (!d) {
        *why = "out of memory";
        return -1;
    }
    d->se = se;
    atomic_store(&d->devfd, fuse_session_fd(se));
    d->want_pt = want_pt;
    d->want_dio_mmap = want_dio_mmap;
    if (!want_pt && !want_dio_mmap)
        return 0;
    static const struct fuse_custom_io io = {
        .read = io_read, .writev = io_writev, .splice_send = io_splice_send};
    if (fuse_session_custom_io(se, &io, fuse_session_fd(se)) != 0) {
        *why = "libfuse custom I/O";
        return -1;
    }
    return 0;
}

void gfs_devio_stop(struct gfs_devio *d) {
    if (d)
        atomic_store(&d->devfd, -1);
}

void gfs_devio_free(struct gfs_devio *d) {
    free(d);
}

int gfs_devio_passthrough(const struct gfs_devio *d) {
    return d && atomic_load(&d->negotiated);
}

int gfs_devio_dio_mmap(const struct gfs_devio *d) {
    return d && atomic_load(&d->dio_mmap);
}

int gfs_passthrough_open(struct gfs_devio *d, int fd) {
    int dev = d ? atomic_load(&d->devfd) : -1;
    if (dev < 0 || !atomic_load(&d->negotiated))
        return -EOPNOTSUPP;
    struct io_backing_map map = {.fd = fd};
    int id = ioctl(dev, IO_IOC_BACKING_OPEN, &map);
    if (id > 0)
        return id;
    return id < 0 ? -errno : -EINVAL;
}

void gfs_passthrough_close(struct gfs_devio *d, int id) {
    int dev = d ? atomic_load(&d->devfd) : -1;
    uint32_t u = (uint32_t)id;
    if (dev >= 0 && id > 0)
        (void)ioctl(dev, IO_IOC_BACKING_CLOSE, &u);
}

void gfs_devio_arm(int id) {
    reply_backing = id;
}

void gfs_devio_inval(struct gfs_devio *d, uint64_t ino, int64_t off,
                     int64_t len) {
    if (d && atomic_load(&d->devfd) >= 0)
        fuse_lowlevel_notify_inval_inode(d->se, (fuse_ino_t)ino, (off_t)off,
                                         (off_t)len);
}

static long long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

void gfs_devio_idle(struct gfs_devio *d, long long ms) {
    if (d)
        atomic_store(&d->idle_ms, now_ms() + ms);
}

int gfs_devio_yielding(const struct gfs_devio *d) {
    return d &&
           (fuse_session_exited(d->se) || now_ms() < atomic_load(&d->idle_ms));
}
