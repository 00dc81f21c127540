/*
 * cache.c - the durable block cache of remote files.
 *
 * Layout: DIR/v1/KEY/ per file version, KEY the hex XXH3-128 of "URL\n
 * IDENTITY\nSIZE" (remote.h: identity), holding
 *   id    that text (checked at open: another version never shares an
 *         entry, even on a hash collision)
 *   data  a sparse file of the version's size; block b (RMT_BLOCK bytes)
 *         at b * RMT_BLOCK
 *   log   32-byte records {magic, kind (add/drop), block, XXH3-64 of the
 *         block's bytes, XXH3-64 of the first 24 bytes}
 * Directories are 0700, files 0600, all owned by the user and opened
 * without following symlinks; anything else is refused.
 *
 * Writes.  A run's bytes are written where the filesystem allows it by
 * direct I/O (rmt_cache_put): the fetching mount serves them from memory
 * (source.c, Hot runs), so the page cache would only hold a second copy of
 * what the kernel's FUSE cache holds, and filling it costs as much CPU as
 * the network does.  Later mounts read the data file through the page
 * cache as usual.
 *
 * Rules.  A block counts as present only once its bytes are durable: the
 * data is written and fdatasync'ed before its add record is appended, so
 * a crash or kill -9 leaves at worst bytes without a record (fetched
 * again).  Records are appended in batches (FLUSH_BLOCKS, and at close):
 * one fdatasync covers them all; the mount that wrote the bytes serves
 * them meanwhile (from memory or its own writes), a later mount only once
 * recorded.  Records are appended under flock with one write; a torn tail
 * (a record cut by a crash) is cut off at the next open, and a record
 * whose check does not match is ignored.  Every recorded block is hashed
 * again at its first read in a mount (source.c): bytes that do not match
 * their record are never served, they are fetched again.  Two mounts of
 * one version write the same bytes to the same places and append their own
 * records: nothing they do can make the other serve wrong bytes.
 * Eviction (a bound, -o cache_max): whole other entries, least recently
 * mounted first (the log's mtime is set at each open), then this entry's
 * least recently read blocks: a drop record is appended before the hole is
 * punched.
 */
#include "internal.h"

/* libxxhash's dispatching entry point where it has one (x86-64): the
 * widest vectors the CPU has (AVX2, AVX-512) for the hash of every fetched
 * byte, the same values as the scalar code; inlined elsewhere. */
#ifdef GGUFS_XXH_DISPATCH
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define BLOCK_HASH XXH3_64bits_dispatch
#else
#define XXH_INLINE_ALL
#include <xxhash.h>
#define BLOCK_HASH XXH3_64bits
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define REC_MAGIC 0x42434747u /* "GGCB" */
#define REC_ADD 1
#define REC_DROP 2
#define REC_SIZE 32

struct rmt_cache {
    int top, efd, data, log; /* DIR/v1, the entry, its files */
    /* data again, opened O_DIRECT (the same inode, checked), or -1 where
     * the filesystem has no direct I/O: rmt_cache_put writes through it,
     * so fetched bytes never pass through the page cache (source.c keeps
     * the runs it fetched in memory for the readers). */
    int ddata;
    atomic_int ddata_ok; /* 0 once the filesystem refused an aligned write */
    char name[40];       /* the entry's directory name */
    uint64_t size, nb, max;
    uint64_t others; /* bytes of the other entries, counted at open */
    /* Blocks written but not yet recorded: their records are appended by
     * flush(), after one fdatasync of the data covers all of them. */
    pthread_mutex_t mu;
    uint8_t *pending; /* REC_SIZE records */
    uint64_t n_pending, cap_pending;
};

#define FLUSH_BLOCKS 512 /* 32 MiB: one fdatasync per that many blocks */

static int flush(struct rmt_cache *c);

uint64_t rmt_block_hash(const void *p, size_t len) {
    return BLOCK_HASH(p, len);
}

/* Opens (making it if missing, mode 0700) directory name in dfd (or the
 * path name if dfd < 0) and checks it is the user's and private.  fd or
 * -1 with msg. */
static int private_dir(int dfd, const char *name, int make, char *msg,
                       size_t n) {
    if (make && (dfd >= 0 ? mkdirat(dfd, name, 0700) : mkdir(name, 0700)) &&
        errno != EEXIST) {
        snprintf(msg, n, "cache %s: %s", name, strerror(errno));
        return -1;
    }
    int fl = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd = dfd >= 0 ? openat(dfd, name, fl) : open(name, fl);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(msg, n, "cache %s: %s", name,
                 errno == ELOOP ? "a symbolic link" : strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (sb.st_uid != geteuid() || (sb.st_mode & 022)) {
        snprintf(msg, n,
                 "cache %s: not a private directory of this user "
                 "(owner %u, mode %03o)",
                 name, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 0777));
        close(fd);
        return -1;
    }
    return fd;
}

/* Opens file name in the entry, checked: regular, the user's, one link,
 * no access for others. */
static int private_file(int efd, const char *name, int flags, char *msg,
                        size_t n) {
    int fd = openat(efd, name, flags | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(msg, n, "cache file %s: %s", name, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || sb.st_nlink != 1 ||
        (sb.st_mode & 077)) {
        snprintf(msg, n, "cache file %s: not a private file of this user",
                 name);
        close(fd);
        return -1;
    }
    return fd;
}

/* The entry's id file says key, or is made to say it.  0 or -1. */
static int check_id(struct rmt_cache *c, const char *key, char *msg, size_t n) {
    size_t kl = strlen(key);
    for (int round = 0; round < 2; round++) {
        int fd = private_file(c->efd, "id", O_RDONLY, msg, n);
        if (fd >= 0) {
            char *b = malloc(kl + 2);
            ssize_t r = b ? read(fd, b, kl + 1) : -1;
            close(fd);
            int same = r == (ssize_t)kl && memcmp(b, key, kl) == 0;
            free(b);
            if (same)
                return 0;
            snprintf(msg, n, "cache entry %s belongs to another file", c->name);
            return -1;
        }
        /* Made whole under a temporary name, then put in place unless
         * another mount did it first. */
        char tmp[64];
        snprintf(tmp, sizeof tmp, "id.%ld", (long)getpid());
        fd =
            openat(c->efd, tmp,
                   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        int ok = fd >= 0 && write(fd, key, kl) == (ssize_t)kl && fsync(fd) == 0;
        if (fd >= 0)
            close(fd);
        if (ok && renameat2(c->efd, tmp, c->efd, "id", RENAME_NOREPLACE) != 0 &&
            errno != EEXIST)
            ok = 0;
        unlinkat(c->efd, tmp, 0);
        if (!ok) {
            snprintf(msg, n, "cache entry %s: cannot write its id: %s", c->name,
                     strerror(errno));
            return -1;
        }
    }
    return 0;
}

static void put_rec(uint8_t *p, uint32_t kind, uint64_t b, uint64_t h) {
    uint32_t w[2] = {REC_MAGIC, kind};
    memcpy(p, w, 8);
    memcpy(p + 8, &b, 8);
    memcpy(p + 16, &h, 8);
    uint64_t chk = XXH3_64bits(p, 24);
    memcpy(p + 24, &chk, 8);
}

/* Reads the log into present/hash, cutting a torn tail.  0 or -1. */
static int load_log(struct rmt_cache *c, uint8_t *present, uint64_t *hash,
                    char *msg, size_t n) {
    struct stat sb;
    flock(c->log, LOCK_EX);
    int r = -1;
    uint8_t *b = NULL;
    if (fstat(c->log, &sb) != 0)
        goto out;
    uint64_t len = (uint64_t)sb.st_size;
    /* A log far longer than the entry can need is not ours to trust. */
    if (len > (c->nb * 4 + 4096) * REC_SIZE) {
        if (ftruncate(c->log, 0) != 0)
            goto out;
        len = 0;
    }
    if (len % REC_SIZE && ftruncate(c->log, (off_t)(len - len % REC_SIZE)))
        goto out;
    len -= len % REC_SIZE;
    if (!(b = malloc(len ? len : 1)) ||
        pread(c->log, b, len, 0) != (ssize_t)len)
        goto out;
    for (uint64_t o = 0; o < len; o += REC_SIZE) {
        uint32_t w[2];
        uint64_t blk, h, chk;
        memcpy(w, b + o, 8);
        memcpy(&blk, b + o + 8, 8);
        memcpy(&h, b + o + 16, 8);
        memcpy(&chk, b + o + 24, 8);
        if (w[0] != REC_MAGIC || chk != XXH3_64bits(b + o, 24) || blk >= c->nb)
            continue;
        present[blk] = w[1] == REC_ADD;
        hash[blk] = h;
    }
    r = 0;
out:
    if (r)
        snprintf(msg, n, "cache entry %s: cannot read its log: %s", c->name,
                 strerror(errno));
    flock(c->log, LOCK_UN);
    free(b);
    return r;
}

/* Calls fn(c, name, st of its file `file`, arg) for each entry other
 * than ours (st zeroed when that file is missing). */
static void each_other(struct rmt_cache *c, const char *file,
                       void (*fn)(const char *name, const struct stat *st,
                                  void *arg),
                       void *arg) {
    int fd = dup(c->top);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[300];
        struct stat sb;
        if (e->d_name[0] == '.' || strcmp(e->d_name, c->name) == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", e->d_name, file);
        if (fstatat(c->top, p, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            memset(&sb, 0, sizeof sb);
        fn(e->d_name, &sb, arg);
    }
    if (d)
        closedir(d);
    else if (fd >= 0)
        close(fd);
}

static void add_blocks(const char *name, const struct stat *st, void *arg) {
    (void)name;
    *(uint64_t *)arg += (uint64_t)st->st_blocks * 512;
}

/* Bytes held by the entries other than ours. */
static uint64_t count_others(struct rmt_cache *c) {
    uint64_t sum = 0;
    each_other(c, "data", add_blocks, &sum);
    return sum;
}

struct oldest {
    char name[300];
    struct timespec t;
};

static void find_oldest(const char *name, const struct stat *st, void *arg) {
    struct oldest *o = arg;
    if (!o->name[0] || st->st_mtim.tv_sec < o->t.tv_sec ||
        (st->st_mtim.tv_sec == o->t.tv_sec &&
         st->st_mtim.tv_nsec < o->t.tv_nsec)) {
        snprintf(o->name, sizeof o->name, "%s", name);
        o->t = st->st_mtim;
    }
}

/* The cache's root: dir, or $XDG_CACHE_HOME/ggufs, else ~/.cache/ggufs
 * (~/.cache made 0700 if missing). */
static int open_root(const char *dir, char *msg, size_t n) {
    char path[4096];
    if (dir)
        return private_dir(-1, dir, 1, msg, n);
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') {
        snprintf(path, sizeof path, "%s/ggufs", xdg);
    } else if (home && home[0] == '/') {
        snprintf(path, sizeof path, "%s/.cache", home);
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            snprintf(msg, n, "cache %s: %s", path, strerror(errno));
            return -1;
        }
        snprintf(path, sizeof path, "%s/.cache/ggufs", home);
    } else {
        snprintf(msg, n,
                 "no cache directory: set -o cache=DIR, "
                 "XDG_CACHE_HOME or HOME");
        return -1;
    }
    return private_dir(-1, path, 1, msg, n);
}

/* Sets c->ddata: data opened again with O_DIRECT, kept only if it is the
 * same file (private_file's checks, then the inode).  Nothing is said
 * when it cannot be had: buffered writes are as correct. */
static void open_direct(struct rmt_cache *c) {
    char msg[200];
    int fd = private_file(c->efd, "data", O_RDWR | O_DIRECT, msg, sizeof msg);
    struct stat a, b;
    if (fd < 0)
        return;
    if (fstat(fd, &a) == 0 && fstat(c->data, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        c->ddata = fd, atomic_init(&c->ddata_ok, 1);
    else
        close(fd);
}

int rmt_cache_open(const char *dir, const char *key, uint64_t size,
                   uint64_t max, uint8_t *present, uint64_t *hash,
                   struct rmt_cache **out, char *msg, size_t n) {
    struct rmt_cache *c = calloc(1, sizeof *c);
    int root = -1;
    if (!c) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    c->top = c->efd = c->data = c->log = c->ddata = -1;
    pthread_mutex_init(&c->mu, NULL);
    c->size = size;
    c->nb = (size + RMT_BLOCK - 1) / RMT_BLOCK;
    c->max = max;
    XXH128_hash_t hk = XXH3_128bits(key, strlen(key));
    snprintf(c->name, sizeof c->name, "%016llx%016llx",
             (unsigned long long)hk.high64, (unsigned long long)hk.low64);
    if ((root = open_root(dir, msg, n)) < 0 ||
        (c->top = private_dir(root, "v1", 1, msg, n)) < 0 ||
        (c->efd = private_dir(c->top, c->name, 1, msg, n)) < 0 ||
        check_id(c, key, msg, n) != 0 ||
        (c->data = private_file(c->efd, "data", O_RDWR | O_CREAT, msg, n)) <
            0 ||
        (c->log = private_file(c->efd, "log", O_RDWR | O_APPEND | O_CREAT, msg,
                               n)) < 0)
        goto fail;
    struct stat sb;
    if (fstat(c->data, &sb) != 0 ||
        ((uint64_t)sb.st_size != size && ftruncate(c->data, (off_t)size))) {
        snprintf(msg, n, "cache entry %s: cannot size its data: %s", c->name,
                 strerror(errno));
        goto fail;
    }
    if (load_log(c, present, hash, msg, n) != 0)
        goto fail;
    open_direct(c);
    futimens(c->log, NULL); /* most recently used */
    c->others = count_others(c);
    close(root);
    *out = c;
    return 0;
fail:
    if (root >= 0)
        close(root);
    rmt_cache_close(c);
    return -1;
}

void rmt_cache_close(struct rmt_cache *c) {
    if (!c)
        return;
    if (c->data >= 0 && c->log >= 0) {
        pthread_mutex_lock(&c->mu);
        flush(c);
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_destroy(&c->mu);
    free(c->pending);
    int fds[] = {c->top, c->efd, c->data, c->log, c->ddata};
    for (int i = 0; i < 5; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(c);
}

/* Appends k records with one write under the log's lock. */
static int append(struct rmt_cache *c, const uint8_t *recs, size_t len) {
    flock(c->log, LOCK_EX);
    ssize_t w = write(c->log, recs, len);
    int e = errno;
    flock(c->log, LOCK_UN);
    return w == (ssize_t)len ? 0 : (w < 0 ? e : EIO);
}

/* Makes the pending blocks count: fdatasync of the data, then their
 * records.  Caller holds c->mu. */
static int flush(struct rmt_cache *c) {
    if (!c->n_pending)
        return 0;
    if (fdatasync(c->data) != 0)
        return errno;
    int r = append(c, c->pending, c->n_pending * REC_SIZE);
    c->n_pending = 0;
    return r;
}

/* pwrite of all n bytes, or an errno. */
static int write_all(int fd, uint64_t off, const char *p, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(fd, p + done, n - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        done += (size_t)w;
    }
    return 0;
}

int rmt_cache_put(struct rmt_cache *c, uint64_t off, const void *p, size_t n) {
    const char *q = p;
    int fd = atomic_load(&c->ddata_ok) ? c->ddata : -1;
    size_t direct =
        fd >= 0 && off % RMT_DIO_ALIGN == 0 && (uintptr_t)p % RMT_DIO_ALIGN == 0
            ? n / RMT_DIO_ALIGN * RMT_DIO_ALIGN
            : 0;
    if (direct) {
        int e = write_all(fd, off, q, direct);
        if (e == EINVAL) { /* alignment this filesystem refuses */
            atomic_store(&c->ddata_ok, 0);
            direct = 0;
        } else if (e) {
            return e;
        }
    }
    return write_all(c->data, off + direct, q + direct, n - direct);
}

int rmt_cache_commit(struct rmt_cache *c, uint64_t b0, uint64_t k,
                     const uint64_t *hash) {
    int r = 0;
    pthread_mutex_lock(&c->mu);
    if (c->n_pending + k > c->cap_pending) {
        uint64_t cap = c->n_pending + k + FLUSH_BLOCKS;
        uint8_t *p = realloc(c->pending, cap * REC_SIZE);
        if (!p) {
            pthread_mutex_unlock(&c->mu);
            return ENOMEM;
        }
        c->pending = p;
        c->cap_pending = cap;
    }
    for (uint64_t i = 0; i < k; i++)
        put_rec(c->pending + (c->n_pending + i) * REC_SIZE, REC_ADD, b0 + i,
                hash[i]);
    c->n_pending += k;
    if (c->n_pending >= FLUSH_BLOCKS)
        r = flush(c);
    pthread_mutex_unlock(&c->mu);
    return r;
}

int rmt_cache_pread(struct rmt_cache *c, uint64_t off, void *buf, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t r =
            pread(c->data, (char *)buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? errno : EIO;
        done += (size_t)r;
    }
    return 0;
}

uint64_t rmt_cache_bytes(const struct rmt_cache *c) {
    struct stat sb;
    uint64_t ours = fstat(c->data, &sb) == 0 ? (uint64_t)sb.st_blocks * 512 : 0;
    return c->others + ours;
}

/* Removes other entries, least recently mounted first, until the cache
 * is within its bound or none is left. */
static void evict_others(struct rmt_cache *c) {
    for (;;) {
        if (c->others == 0 || rmt_cache_bytes(c) <= c->max)
            return;
        struct oldest o = {.name = ""};
        each_other(c, "log", find_oldest, &o);
        const char *oldest = o.name;
        if (!oldest[0]) {
            c->others = 0;
            return;
        }
        int efd = openat(c->top, oldest,
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (efd >= 0) {
            /* The log first: without it no block of the entry counts. */
            unlinkat(efd, "log", 0);
            unlinkat(efd, "data", 0);
            unlinkat(efd, "id", 0);
            close(efd);
        }
        if (unlinkat(c->top, oldest, AT_REMOVEDIR) != 0) {
            c->others = 0; /* not ours to remove: stop trying */
            return;
        }
        c->others = count_others(c);
    }
}

uint64_t rmt_cache_evict(struct rmt_cache *c, const uint64_t *victims,
                         uint64_t k) {
    if (!c->max || rmt_cache_bytes(c) <= c->max)
        return 0;
    evict_others(c);
    pthread_mutex_lock(&c->mu);
    flush(c); /* a drop record must follow the block's add record */
    pthread_mutex_unlock(&c->mu);
    uint64_t done = 0;
    uint8_t rec[REC_SIZE];
    while (done < k && rmt_cache_bytes(c) > c->max) {
        uint64_t b = victims[done];
        put_rec(rec, REC_DROP, b, 0);
        if (append(c, rec, REC_SIZE) != 0)
            break;
        fallocate(c->data, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  (off_t)(b * RMT_BLOCK), (off_t)RMT_BLOCK);
        done++;
    }
    return done;
}
