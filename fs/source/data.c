/*
 * data.c - the one way the FUSE layer reads bytes of the model's files
 * (source.h): into memory (gfs_data_read), or as a reply (gfs_data_reply:
 * by descriptor for a local file, copied for a remote one).  Views that
 * transform bytes (the merged live view of a shard set, the converted
 * views, the hashes) read through gfs_data_read, so a source other than a
 * local file has these functions to serve.  Both are the one choke point
 * of an overlay's tensors (patch.c): bytes a tensor written on an overlay
 * mount replaced are read from the overlay's data file, and a reply that
 * holds any is copied, never served from the model's descriptor.  And
 * of the writes in flight (inflight.c): each of the three waits for
 * those that overlap what it reads before it reads, so that a read after
 * write(2) returned sees the bytes, whichever path above asked.
 */
#include "../base/base.h"
#include "source.h"
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The calling thread's buffers (gfs_tbuf), freed when it ends. */
struct tbufs {
    struct {
        void *p;
        size_t cap;
    } b[GFS_TBUF_N];
};
static pthread_key_t tbuf_key;
static pthread_once_t tbuf_once = PTHREAD_ONCE_INIT;

static void tbufs_free(void *arg) {
    struct tbufs *t = arg;
    for (int i = 0; i < GFS_TBUF_N; i++)
        free(t->b[i].p);
    free(t);
}

static void tbuf_key_init(void) {
    pthread_key_create(&tbuf_key, tbufs_free);
}

void *gfs_tbuf(enum gfs_tbuf which, size_t n) {
    pthread_once(&tbuf_once, tbuf_key_init);
    struct tbufs *t = pthread_getspecific(tbuf_key);
    if (!t) {
        if (!(t = calloc(1, sizeof *t)))
            return NULL;
        if (pthread_setspecific(tbuf_key, t) != 0) {
            free(t);
            return NULL;
        }
    }
    if (n > t->b[which].cap) {
        void *p = malloc(n);
        if (!p)
            return NULL;
        free(t->b[which].p);
        t->b[which].p = p;
        t->b[which].cap = n;
    }
    return t->b[which].p;
}

/* Which descriptor serves file shard's bytes, the one rule: a context
 * that kept its own (the first shard: a commit replaces it only under
 * fs->lock held for writing, and callers hold it for reading) serves by
 * that; any other local file's comes from the model's cache (fds.c),
 * pinned until data_put.  A remote file has none (callers ask
 * gfs_remote_file first).  0 with *fd, or an errno. */
static int data_get(struct gfs *fs, int shard, int *fd) {
    if ((*fd = gguf_fd(fs->shards[shard])) >= 0)
        return 0;
    return gfs_fds_get(fs, shard, fd);
}

static void data_put(struct gfs *fs, int shard) {
    if (gguf_fd(fs->shards[shard]) < 0)
        gfs_fds_put(fs, shard);
}

/* Whether shard's file (descriptor fd) ends before pos + n, logged once:
 * a read past the end must be EIO, never a short read, which the kernel
 * takes for EOF. */
static int fd_short(struct gfs *fs, int shard, int fd, uint64_t pos,
                    uint64_t n) {
    struct stat sb;
    if (n == 0 || (fstat(fd, &sb) == 0 && (uint64_t)sb.st_size >= pos + n))
        return 0;
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
        gfs_log(fs,
                "%s: the file ends before byte %llu that a read needs (it "
                "was truncated under the mount): such reads fail with EIO",
                gguf_path(fs->shards[shard]), (unsigned long long)(pos + n));
    return 1;
}

/* The model's own bytes (before an overlay's tensors, patch.c). */
static int read_model(struct gfs *fs, int shard, uint64_t pos, void *buf,
                      size_t n) {
    if (gfs_remote_file(fs, shard))
        return gfs_remote_read(fs, shard, pos, buf, n);
    int fd, err = data_get(fs, shard, &fd);
    size_t done = 0;
    while (!err && done < n) {
        ssize_t r =
            pread(fd, (char *)buf + done, n - done, (off_t)(pos + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            err = errno;
        } else if (r == 0) {
            fd_short(fs, shard, fd, pos, n);
            err = EIO;
        }
        done += r > 0 ? (size_t)r : 0;
    }
    if (fd >= 0)
        data_put(fs, shard);
    return err;
}

int gfs_data_merged(const struct gfs *fs) {
    return fs->n_shards > 1 || fs->picks;
}

int gfs_data_read(struct gfs *fs, int shard, uint64_t pos, void *buf,
                  size_t n) {
    gfs_inflight_wait(fs, shard, pos, n);
    int err = read_model(fs, shard, pos, buf, n);
    return err || !fs->patch ? err : gfs_patch_read(fs, shard, pos, buf, n);
}

/* Chunk in which the GGUF's pages are dropped after serving: ext4 caches
 * big files in 2 MiB folios, and POSIX_FADV_DONTNEED skips partial ones. */
#define GFS_DROP_CHUNK (UINT64_C(2) << 20)

/* True if [off, off+len) of fd is entirely in the page cache (cachestat,
 * Linux 6.5+); false when unknown. */
static int range_cached(int fd, uint64_t off, uint64_t len) {
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
    struct {
        uint64_t off, len;
    } range = {off, len};
    struct {
        uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted,
            nr_recently_evicted;
    } cs;
    if (len == 0)
        return 1;
    if (syscall(SYS_cachestat, fd, &range, &cs, 0) != 0)
        return 0;
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t pages = (off + len + pg - 1) / pg - off / pg;
    return cs.nr_cache >= pages;
}

int gfs_data_cached(struct gfs *fs, int shard, uint64_t off, uint64_t len) {
    int fd;
    if (gfs_remote_file(fs, shard))
        return 1;
    if (data_get(fs, shard, &fd) != 0)
        return 0;
    int r = range_cached(fd, off, len);
    data_put(fs, shard);
    return r;
}

/* Replies with mem_n bytes at mem (may be 0), then n bytes of fd from pos,
 * which libfuse reads (or splices) straight from the file; if drop,
 * evicts the GGUF's copy of what was served.  A reply must be complete:
 * the kernel takes a short read for EOF.  Caller holds fs->lock (read): a
 * commit must not move the data start or replace the fd meanwhile. */
static void reply_file(fuse_req_t req, const char *mem, size_t mem_n, int fd,
                       uint64_t pos, uint64_t n, int drop) {
    struct {
        struct fuse_bufvec v;
        struct fuse_buf more;
    } bv = {.v = FUSE_BUFVEC_INIT(0)};
    struct fuse_buf *fb = &bv.v.buf[0];
    if (mem_n) {
        fb->mem = (void *)mem;
        fb->size = mem_n;
        fb->flags = 0;
        fb = &bv.more;
    }
    if (n || !mem_n) {
        bv.v.count = mem_n ? 2 : 1;
        fb->size = n;
        fb->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
        fb->fd = fd;
        fb->pos = (off_t)pos;
    }
    fuse_reply_data(req, &bv.v, 0); /* no SPLICE_F_MOVE: see gfs_op_init */
    if (drop && n) {
        /* The bytes now live in the mount's page cache: drop the GGUF's
         * copy a whole chunk at a time, once a (sequential) read has
         * passed the chunk's end. */
        uint64_t c0 = pos / GFS_DROP_CHUNK * GFS_DROP_CHUNK;
        uint64_t c1 = (pos + n) / GFS_DROP_CHUNK * GFS_DROP_CHUNK;
        if (c1 > c0)
            posix_fadvise(fd, (off_t)c0, (off_t)(c1 - c0), POSIX_FADV_DONTNEED);
    }
}

/* A remote source's reply: mem_n bytes at mem, then n bytes of shard's
 * file from pos, copied through gfs_data_read (there is no descriptor to
 * serve them from).  Caller holds fs->lock (read). */
static void reply_pieces_copy(fuse_req_t req, struct gfs *fs, const char *mem,
                              size_t mem_n, const struct gfs_data_piece *p,
                              int np, size_t total);

static void reply_copy(fuse_req_t req, struct gfs *fs, int shard,
                       const char *mem, size_t mem_n, uint64_t pos,
                       uint64_t n) {
    struct gfs_data_piece one = {shard, pos, n};
    reply_pieces_copy(req, fs, mem, mem_n, &one, n ? 1 : 0, mem_n + n);
}

/* A remote file's reply: mem_n bytes at mem, then n bytes of shard's file
 * from pos written to the device from where the source holds them (the
 * run a fetch received: no copy by the daemon), what it does not hold
 * read into a buffer.  Caller holds fs->lock (read). */
static void reply_remote(fuse_req_t req, struct gfs *fs, int shard,
                         const char *mem, size_t mem_n, uint64_t pos,
                         uint64_t n) {
    struct rmt_view v;
    struct iovec iov[RMT_VIEW_MAX + 1];
    char *spill = gfs_tbuf(GFS_TBUF_REPLY, n ? n : 1);
    int err = spill ? 0 : ENOMEM, k = 0;
    if (!err && n)
        err = gfs_remote_view(fs, shard, pos, (size_t)n, spill, &v);
    if (err) { /* the source logged it */
        fuse_reply_err(req, err);
        return;
    }
    if (mem_n)
        iov[k++] = (struct iovec){(void *)mem, mem_n};
    for (int i = 0; n && i < v.n; i++)
        iov[k++] = v.iov[i];
    fuse_reply_iov(req, iov, k);
    if (n)
        rmt_view_release(&v);
}

void gfs_data_reply(fuse_req_t req, struct gfs *fs, int shard, const char *mem,
                    size_t mem_n, uint64_t pos, uint64_t n, int drop) {
    int fd, err;
    gfs_inflight_wait(fs, shard, pos, n);
    /* A remote file has no descriptor; an overlay's tensors are not the
     * file's bytes: both are copied (gfs_data_read lays them over). */
    if (gfs_patch_overlaps(fs, shard, pos, n)) {
        reply_copy(req, fs, shard, mem, mem_n, pos, n);
        return;
    }
    if (gfs_remote_file(fs, shard)) {
        reply_remote(req, fs, shard, mem, mem_n, pos, n);
        return;
    }
    if ((err = data_get(fs, shard, &fd)) != 0) {
        fuse_reply_err(req, err);
        return;
    }
    /* Pinned until libfuse has read (or spliced) the bytes. */
    if (fd_short(fs, shard, fd, pos, n))
        fuse_reply_err(req, EIO);
    else
        reply_file(req, mem, mem_n, fd, pos, n, drop);
    data_put(fs, shard);
}

/* Zeros for the padding between a merged view's tensors. */
static const char zeros[65536];

/* Pieces a reply by descriptor takes at most (a read of 1 MiB crosses few
 * tensors; a view of many tiny tensors is copied instead). */
#define GFS_MAX_PIECES 32

int gfs_data_read_pieces(struct gfs *fs, const struct gfs_data_piece *p, int np,
                         char *buf) {
    int err = 0;
    for (int k = 0; !err && k < np; buf += p[k++].n)
        if (p[k].shard < 0)
            memset(buf, 0, p[k].n);
        else
            err = gfs_data_read(fs, p[k].shard, p[k].pos, buf, p[k].n);
    return err;
}

/* gfs_data_reply_pieces's copy: a remote file, or too many pieces. */
static void reply_pieces_copy(fuse_req_t req, struct gfs *fs, const char *mem,
                              size_t mem_n, const struct gfs_data_piece *p,
                              int np, size_t total) {
    char *buf = gfs_tbuf(GFS_TBUF_REPLY, total ? total : 1);
    int err = buf ? 0 : ENOMEM;
    if (buf && mem_n)
        memcpy(buf, mem, mem_n);
    if (!err)
        err = gfs_data_read_pieces(fs, p, np, buf + mem_n);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, buf, total);
}

void gfs_data_reply_pieces(fuse_req_t req, struct gfs *fs, const char *mem,
                           size_t mem_n, const struct gfs_data_piece *p,
                           int np) {
    struct {
        struct fuse_bufvec v;
        struct fuse_buf more[2 * GFS_MAX_PIECES + 1];
    } bv = {.v = FUSE_BUFVEC_INIT(0)};
    size_t nb = 0, total = mem_n;
    int by_fd = np <= GFS_MAX_PIECES, pinned = 0, err = 0;
    for (int k = 0; k < np; k++) {
        total += p[k].n;
        if (p[k].shard >= 0)
            gfs_inflight_wait(fs, p[k].shard, p[k].pos, p[k].n);
        by_fd =
            by_fd && (p[k].shard < 0 ||
                      (!gfs_remote_file(fs, p[k].shard) &&
                       !gfs_patch_overlaps(fs, p[k].shard, p[k].pos, p[k].n)));
    }
    if (!by_fd) { /* a remote file, an overlay's tensor, many pieces */
        reply_pieces_copy(req, fs, mem, mem_n, p, np, total);
        return;
    }
    struct fuse_buf *b = bv.v.buf;
    if (mem_n)
        b[nb++] = (struct fuse_buf){.size = mem_n, .mem = (void *)mem};
    /* Each file's descriptor pinned until libfuse has read the bytes. */
    for (; !err && pinned < np; pinned++) {
        const struct gfs_data_piece *q = &p[pinned];
        int fd = -1;
        for (uint64_t z = 0; q->shard < 0 && !err && z < q->n;
             z += sizeof zeros) {
            size_t m = q->n - z < sizeof zeros ? q->n - z : sizeof zeros;
            if (nb == 2 * GFS_MAX_PIECES + 2)
                err = EIO; /* a vast padding: cannot happen */
            else
                b[nb++] = (struct fuse_buf){.size = m, .mem = (void *)zeros};
        }
        if (q->shard < 0 || err)
            continue;
        if ((err = data_get(fs, q->shard, &fd)) != 0)
            break;
        if (fd_short(fs, q->shard, fd, q->pos, q->n))
            err = EIO;
        b[nb++] = (struct fuse_buf){.size = q->n,
                                    .flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK |
                                             FUSE_BUF_FD_RETRY,
                                    .fd = fd,
                                    .pos = (off_t)q->pos};
    }
    bv.v.count = nb;
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_data(req, &bv.v, 0); /* no SPLICE_F_MOVE: gfs_op_init */
    for (int k = 0; k < pinned; k++)
        if (p[k].shard >= 0)
            data_put(fs, p[k].shard);
}
