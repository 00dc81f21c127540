/*
 * plrec.c - an LD_PRELOAD recorder of the calls that decide what a power
 * cut leaves, for tests/mount_powerloss.py.  Two modes, by environment:
 *
 * PLREC_LOG=FILE PLREC_ROOT=DIR: record.  Every successful call that
 * changes a regular file's data or a directory's entries beneath DIR, or
 * makes them durable, is appended to FILE as one record (one write(2) of
 * an O_APPEND descriptor, so the records of the daemon, its threads and
 * the commands interleave whole): a text line, then the bytes written.
 *   W ST OFF N          data written at OFF (write, pwrite, writev,
 *                       pwritev, copy_file_range: the N bytes follow)
 *   T ST SIZE           ftruncate, truncate, an O_TRUNC open
 *   F ST MODE OFF LEN   fallocate (INSERT_RANGE, COLLAPSE_RANGE, ...)
 *   S ST                fsync or fdatasync of a file or a directory
 *   A                   sync or syncfs: everything durable
 *   N ST DIR NAME       a new inode (O_CREAT that created, mkdir,
 *                       O_TMPFILE with DIR and NAME "-")
 *   L ST DIR NAME       a new name for an inode (link, linkat)
 *   U DIR NAME          unlink, rmdir
 *   R DIR NAME DIR NAME FLAGS ST   rename, renameat, renameat2 (ST: the
 *                       inode now at the new name)
 * ST is DEV:INO:MODE:SIZE:MTIME_NS:CTIME_NS of the inode after the call,
 * DIR the ST of the directory, NAME hex.  The call and its record are one
 * step under a lock, so the log's order is the order the calls took
 * effect in (per process: an fsync logged after a write really followed
 * it); calls on other files (the FUSE device, pipes) are passed through
 * untouched.  sync_file_range makes nothing durable and is not recorded.
 *
 * PLREC_MAP=FILE: replay.  FILE's lines "DEV INO MTIME CTIME DEV INO
 * MTIME CTIME" map a file made by the test (its real identity) to the one
 * it stands for (the identity the recorded run saw): stat, fstat, fstatat,
 * lstat and statx answer the latter, the times only while they are still
 * the ones the file was made with.  So a state rebuilt from a log is, to
 * ggufs's identity checks (pending records, journals), the file the
 * recorded run left, as after a reboot.
 *
 * Limits: direct system calls (syscall(2)), writes through a shared
 * mapping and stdio's internal calls are not seen (ggufs writes none of
 * its durable files so); names are resolved by /proc/self/fd.
 */
#undef _FILE_OFFSET_BITS /* both the plain and the 64 names are defined here */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

static int logfd = -1;
static char root[PATH_MAX];
static size_t rootlen;
/* Held over each recorded call and its record; taken around fork(2) so
 * that a child never starts with it held by a thread it does not have. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void fork_lock(void) {
    pthread_mutex_lock(&mu);
}
static void fork_unlock(void) {
    pthread_mutex_unlock(&mu);
}

/* Resolved on first use: other libraries' constructors call us first. */
#define RL(name)                                                               \
    ((__typeof__(real_##name))resolve((void **)&real_##name, #name))
#define DECL(ret, name, ...) static ret (*real_##name)(__VA_ARGS__);
DECL(int, open, const char *, int, ...)
DECL(int, openat, int, const char *, int, ...)
DECL(ssize_t, write, int, const void *, size_t)
DECL(ssize_t, pwrite, int, const void *, size_t, off_t)
DECL(ssize_t, writev, int, const struct iovec *, int)
DECL(ssize_t, pwritev2, int, const struct iovec *, int, off_t, int)
DECL(ssize_t, copy_file_range, int, off_t *, int, off_t *, size_t, unsigned)
DECL(int, ftruncate, int, off_t)
DECL(int, fallocate, int, int, off_t, off_t)
DECL(int, fsync, int)
DECL(int, fdatasync, int)
DECL(int, syncfs, int)
DECL(void, sync, void)
DECL(int, renameat2, int, const char *, int, const char *, unsigned)
DECL(int, linkat, int, const char *, int, const char *, int)
DECL(int, unlinkat, int, const char *, int)
DECL(int, mkdirat, int, const char *, mode_t)
DECL(int, fstat, int, struct stat *)
DECL(int, fstatat, int, const char *, struct stat *, int)
DECL(int, statx, int, const char *, int, unsigned, struct statx *)

static void *resolve(void **slot, const char *name) {
    if (!*slot)
        *slot = dlsym(RTLD_NEXT, name);
    return *slot;
}

/* ---- replay: the identity map ---------------------------------------- */

struct ident {
    unsigned long long dev, ino;
    long long mtime, ctime;
};
static struct ident (*map)[2];
static size_t n_map;

static void load_map(const char *path) {
    FILE *f = fopen(path, "re");
    struct ident a, b;
    if (!f)
        return;
    while (fscanf(f, "%llu %llu %lld %lld %llu %llu %lld %lld", &a.dev, &a.ino,
                  &a.mtime, &a.ctime, &b.dev, &b.ino, &b.mtime,
                  &b.ctime) == 8) {
        void *m = realloc(map, (n_map + 1) * sizeof *map);
        if (!m)
            break;
        map = m;
        map[n_map][0] = a;
        map[n_map][1] = b;
        n_map++;
    }
    fclose(f);
}

static long long ns(struct timespec t) {
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static struct timespec ts(long long v) {
    struct timespec t = {v / 1000000000LL, v % 1000000000LL};
    return t;
}

static void map_stat(struct stat *st) {
    for (size_t i = 0; i < n_map; i++) {
        struct ident *a = &map[i][0], *b = &map[i][1];
        if (a->dev != st->st_dev || a->ino != st->st_ino)
            continue;
        if (ns(st->st_mtim) == a->mtime && ns(st->st_ctim) == a->ctime) {
            st->st_mtim = ts(b->mtime);
            st->st_ctim = ts(b->ctime);
        }
        st->st_dev = b->dev;
        st->st_ino = b->ino;
        return;
    }
}

static void map_statx(struct statx *sx) {
    struct stat st = {0};
    st.st_dev = makedev(sx->stx_dev_major, sx->stx_dev_minor);
    st.st_ino = sx->stx_ino;
    st.st_mtim =
        ts(sx->stx_mtime.tv_sec * 1000000000LL + sx->stx_mtime.tv_nsec);
    st.st_ctim =
        ts(sx->stx_ctime.tv_sec * 1000000000LL + sx->stx_ctime.tv_nsec);
    map_stat(&st);
    sx->stx_dev_major = major(st.st_dev);
    sx->stx_dev_minor = minor(st.st_dev);
    sx->stx_ino = st.st_ino;
    sx->stx_mtime.tv_sec = st.st_mtim.tv_sec;
    sx->stx_mtime.tv_nsec = (uint32_t)st.st_mtim.tv_nsec;
    sx->stx_ctime.tv_sec = st.st_ctim.tv_sec;
    sx->stx_ctime.tv_nsec = (uint32_t)st.st_ctim.tv_nsec;
}

/* ---- set-up ------------------------------------------------------------ */

__attribute__((constructor)) static void plrec_init(void) {
    pthread_atfork(fork_lock, fork_unlock, fork_unlock);
    const char *m = getenv("PLREC_MAP");
    if (m && *m)
        load_map(m);
    const char *lg = getenv("PLREC_LOG"), *rt = getenv("PLREC_ROOT");
    if (!lg || !*lg || !rt || !*rt || strlen(rt) >= sizeof root)
        return;
    strcpy(root, rt);
    rootlen = strlen(root);
    logfd = RL(open)(lg, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
}

/* ---- record: where a call lands ---------------------------------------- */

static bool under_root(const char *p) {
    return strncmp(p, root, rootlen) == 0 && (p[rootlen] == '/' || !p[rootlen]);
}

static bool fd_path(int fd, char *out) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, PATH_MAX - 1);
    if (n < 0)
        return false;
    out[n] = '\0';
    return true;
}

/* Whether fd is a regular file or directory beneath the root. */
static bool tracked_fd(int fd) {
    char p[PATH_MAX];
    struct stat st;
    if (logfd < 0 || fd < 0 || fd == logfd || RL(fstat)(fd, &st) != 0)
        return false;
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return false;
    return fd_path(fd, p) && under_root(p);
}

/* dirfd + name -> the absolute path of the directory and the last name. */
static bool split_at(int dirfd, const char *path, char *dir, char *name) {
    char full[PATH_MAX];
    if (logfd < 0 || !path)
        return false;
    if (path[0] == '/') {
        snprintf(full, sizeof full, "%s", path);
    } else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD ? !getcwd(base, sizeof base)
                              : !fd_path(dirfd, base))
            return false;
        if ((size_t)snprintf(full, sizeof full, "%s/%s", base, path) >=
            sizeof full)
            return false;
    }
    size_t n = strlen(full);
    while (n > 1 && full[n - 1] == '/')
        full[--n] = '\0';
    char *slash = strrchr(full, '/');
    if (!slash || !slash[1])
        return false;
    snprintf(name, NAME_MAX + 1, "%s", slash + 1);
    if (slash == full)
        strcpy(dir, "/");
    else {
        *slash = '\0';
        snprintf(dir, PATH_MAX, "%s", full);
    }
    return under_root(dir);
}

/* ---- record: the log ---------------------------------------------------- */

struct rec {
    char line[4 * PATH_MAX];
    size_t len;
};

static void add(struct rec *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->line + r->len, sizeof r->line - r->len, fmt, ap);
    va_end(ap);
    if (n > 0 && r->len + (size_t)n < sizeof r->line)
        r->len += (size_t)n;
}

static void add_st(struct rec *r, const struct stat *st) {
    add(r, " %llu:%llu:%o:%lld:%lld:%lld", (unsigned long long)st->st_dev,
        (unsigned long long)st->st_ino, (unsigned)st->st_mode,
        (long long)st->st_size, ns(st->st_mtim), ns(st->st_ctim));
}

static void add_fd(struct rec *r, int fd) {
    struct stat st;
    if (RL(fstat)(fd, &st) == 0)
        add_st(r, &st);
    else
        add(r, " -");
}

static void add_path(struct rec *r, const char *path) {
    struct stat st;
    if (RL(fstatat)(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0)
        add_st(r, &st);
    else
        add(r, " -");
}

static void add_name(struct rec *r, const char *name) {
    add(r, " ");
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        add(r, "%02x", *p);
}

/* dir/name's inode, its directory, and the name. */
static void add_entry(struct rec *r, const char *dir, const char *name) {
    char p[PATH_MAX + NAME_MAX + 2];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    add_path(r, p);
    add_path(r, dir);
    add_name(r, name);
}

static void emit(struct rec *r, const void *data, size_t n) {
    add(r, " %zu\n", n);
    char *buf = malloc(r->len + n);
    if (!buf)
        abort(); /* a record lost would make the log lie */
    memcpy(buf, r->line, r->len);
    if (n)
        memcpy(buf + r->len, data, n);
    size_t off = 0;
    while (off < r->len + n) {
        ssize_t w = RL(write)(logfd, buf + off, r->len + n - off);
        if (w <= 0)
            abort();
        off += (size_t)w;
    }
    free(buf);
}

static void rec_write(int fd, off_t off, const void *data, size_t n) {
    struct rec r = {.len = 0};
    add(&r, "W");
    add_fd(&r, fd);
    add(&r, " %lld %zu", (long long)off, n);
    emit(&r, data, n);
}

static void rec_fd(const char *op, int fd, const char *fmt, ...) {
    struct rec r = {.len = 0};
    add(&r, "%s", op);
    add_fd(&r, fd);
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(r.line + r.len, sizeof r.line - r.len, fmt, ap);
        va_end(ap);
        if (n > 0)
            r.len += (size_t)n;
    }
    emit(&r, NULL, 0);
}

static void rec_entry(const char *op, const char *dir, const char *name) {
    struct rec r = {.len = 0};
    add(&r, "%s", op);
    add_entry(&r, dir, name);
    emit(&r, NULL, 0);
}

static void rec_gone(const char *dir, const char *name) {
    struct rec r = {.len = 0};
    add(&r, "U");
    add_path(&r, dir);
    add_name(&r, name);
    emit(&r, NULL, 0);
}

/* ---- record: the calls --------------------------------------------------- */

#define LOCKED(expr)                                                           \
    pthread_mutex_lock(&mu);                                                   \
    expr;                                                                      \
    int saved_errno = errno;

#define UNLOCK(ret)                                                            \
    pthread_mutex_unlock(&mu);                                                 \
    errno = saved_errno;                                                       \
    return ret;

static bool is_tmpfile(int flags) {
    return (flags & O_TMPFILE) == O_TMPFILE;
}

static int open_common(int dirfd, const char *path, int flags, mode_t mode) {
    char dir[PATH_MAX], name[NAME_MAX + 1];
    bool tmp = is_tmpfile(flags);
    if (tmp) { /* no name: recorded if its directory is beneath the root */
        LOCKED(int fd = RL(openat)(dirfd, path, flags, mode));
        if (fd >= 0 && tracked_fd(fd))
            rec_fd("N", fd, " - -");
        UNLOCK(fd);
    }
    if (!(flags & (O_CREAT | O_TRUNC)) || !split_at(dirfd, path, dir, name))
        return RL(openat)(dirfd, path, flags, mode);
    struct stat was;
    bool existed = RL(fstatat)(dirfd, path, &was, 0) == 0;
    LOCKED(int fd = RL(openat)(dirfd, path, flags, mode));
    if (fd >= 0 && !existed) {
        rec_entry("N", dir, name);
    } else if (fd >= 0 && (flags & O_TRUNC) && S_ISREG(was.st_mode) &&
               (flags & O_ACCMODE) != O_RDONLY) {
        rec_fd("T", fd, " 0");
    }
    UNLOCK(fd);
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || is_tmpfile(flags) ? va_arg(ap, mode_t) : 0;
}

#define OPEN_PATH(fn)                                                          \
    int fn(const char *path, int flags, ...) {                                 \
        va_list ap;                                                            \
        va_start(ap, flags);                                                   \
        mode_t m = mode_arg(flags, ap);                                        \
        va_end(ap);                                                            \
        return open_common(AT_FDCWD, path, flags, m);                          \
    }
#define OPEN_AT(fn)                                                            \
    int fn(int dirfd, const char *path, int flags, ...) {                      \
        va_list ap;                                                            \
        va_start(ap, flags);                                                   \
        mode_t m = mode_arg(flags, ap);                                        \
        va_end(ap);                                                            \
        return open_common(dirfd, path, flags, m);                             \
    }
OPEN_PATH(open)
OPEN_PATH(open64)
OPEN_AT(openat)
OPEN_AT(openat64)
int __open_2(const char *p, int f) {
    return open_common(AT_FDCWD, p, f, 0);
}
int __open64_2(const char *p, int f) {
    return open_common(AT_FDCWD, p, f, 0);
}
int __openat_2(int d, const char *p, int f) {
    return open_common(d, p, f, 0);
}
int __openat64_2(int d, const char *p, int f) {
    return open_common(d, p, f, 0);
}
int creat(const char *p, mode_t m) {
    return open_common(AT_FDCWD, p, O_WRONLY | O_CREAT | O_TRUNC, m);
}

ssize_t write(int fd, const void *buf, size_t n) {
    if (!tracked_fd(fd))
        return RL(write)(fd, buf, n);
    LOCKED(ssize_t r = RL(write)(fd, buf, n));
    if (r > 0)
        rec_write(fd, lseek(fd, 0, SEEK_CUR) - r, buf, (size_t)r);
    UNLOCK(r);
}

static ssize_t pwrite_common(int fd, const void *buf, size_t n, off_t off) {
    if (!tracked_fd(fd))
        return RL(pwrite)(fd, buf, n, off);
    LOCKED(ssize_t r = RL(pwrite)(fd, buf, n, off));
    if (r > 0)
        rec_write(fd, off, buf, (size_t)r);
    UNLOCK(r);
}
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) {
    return pwrite_common(fd, b, n, o);
}
ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) {
    return pwrite_common(fd, b, n, o);
}

/* The first n bytes of iov in one buffer (the caller frees it). */
static void *gather(const struct iovec *iov, int cnt, size_t n) {
    char *b = malloc(n ? n : 1);
    size_t at = 0;
    if (!b)
        abort();
    for (int i = 0; i < cnt && at < n; i++) {
        size_t k = iov[i].iov_len < n - at ? iov[i].iov_len : n - at;
        memcpy(b + at, iov[i].iov_base, k);
        at += k;
    }
    return b;
}

/* off < 0: at the file position (writev, pwritev2 with -1). */
static ssize_t pwritev_common(int fd, const struct iovec *iov, int cnt,
                              off_t off, int flags) {
    if (!tracked_fd(fd))
        return off < 0 && !flags ? RL(writev)(fd, iov, cnt)
                                 : RL(pwritev2)(fd, iov, cnt, off, flags);
    LOCKED(ssize_t r = off < 0 && !flags
                           ? RL(writev)(fd, iov, cnt)
                           : RL(pwritev2)(fd, iov, cnt, off, flags));
    if (r > 0) {
        void *b = gather(iov, cnt, (size_t)r);
        rec_write(fd, off < 0 ? lseek(fd, 0, SEEK_CUR) - r : off, b, (size_t)r);
        free(b);
    }
    UNLOCK(r);
}
ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    return pwritev_common(fd, iov, cnt, -1, 0);
}
ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) {
    return pwritev_common(fd, iov, cnt, off, 0);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off) {
    return pwritev_common(fd, iov, cnt, off, 0);
}
ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int fl) {
    return pwritev_common(fd, iov, cnt, off, fl);
}

/* The bytes copied are read back from the source for the record. */
ssize_t copy_file_range(int in, off_t *in_off, int out, off_t *out_off,
                        size_t n, unsigned flags) {
    if (!tracked_fd(out))
        return RL(copy_file_range)(in, in_off, out, out_off, n, flags);
    LOCKED(ssize_t r = RL(copy_file_range)(in, in_off, out, out_off, n, flags));
    if (r > 0) {
        off_t src = (in_off ? *in_off : lseek(in, 0, SEEK_CUR)) - r;
        off_t dst = (out_off ? *out_off : lseek(out, 0, SEEK_CUR)) - r;
        char *b = malloc((size_t)r);
        if (!b || pread(in, b, (size_t)r, src) != r)
            abort();
        rec_write(out, dst, b, (size_t)r);
        free(b);
    }
    UNLOCK(r);
}

static int ftruncate_common(int fd, off_t len) {
    if (!tracked_fd(fd))
        return RL(ftruncate)(fd, len);
    LOCKED(int r = RL(ftruncate)(fd, len));
    if (r == 0)
        rec_fd("T", fd, " %lld", (long long)len);
    UNLOCK(r);
}
int ftruncate(int fd, off_t len) {
    return ftruncate_common(fd, len);
}
int ftruncate64(int fd, off_t len) {
    return ftruncate_common(fd, len);
}

int truncate(const char *path, off_t len) {
    int fd = RL(openat)(AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = ftruncate_common(fd, len), e = errno;
    close(fd);
    errno = e;
    return r;
}

static int fallocate_common(int fd, int mode, off_t off, off_t len) {
    if (!tracked_fd(fd))
        return RL(fallocate)(fd, mode, off, len);
    LOCKED(int r = RL(fallocate)(fd, mode, off, len));
    if (r == 0)
        rec_fd("F", fd, " %d %lld %lld", mode, (long long)off, (long long)len);
    UNLOCK(r);
}
int fallocate(int fd, int m, off_t o, off_t l) {
    return fallocate_common(fd, m, o, l);
}
int fallocate64(int fd, int m, off_t o, off_t l) {
    return fallocate_common(fd, m, o, l);
}

static int sync_common(int fd, int (*call)(int)) {
    if (!tracked_fd(fd))
        return call(fd);
    LOCKED(int r = call(fd));
    if (r == 0)
        rec_fd("S", fd, NULL);
    UNLOCK(r);
}
int fsync(int fd) {
    return sync_common(fd, RL(fsync));
}
int fdatasync(int fd) {
    return sync_common(fd, RL(fdatasync));
}

int syncfs(int fd) {
    LOCKED(int r = RL(syncfs)(fd));
    if (r == 0 && logfd >= 0) {
        struct rec x = {.len = 0};
        add(&x, "A");
        emit(&x, NULL, 0);
    }
    UNLOCK(r);
}

void sync(void) {
    pthread_mutex_lock(&mu);
    RL(sync)();
    if (logfd >= 0) {
        struct rec x = {.len = 0};
        add(&x, "A");
        emit(&x, NULL, 0);
    }
    pthread_mutex_unlock(&mu);
}

int renameat2(int od, const char *op, int nd, const char *np, unsigned fl) {
    char odir[PATH_MAX], oname[NAME_MAX + 1], ndir[PATH_MAX],
        nname[NAME_MAX + 1];
    bool src = split_at(od, op, odir, oname),
         dst = split_at(nd, np, ndir, nname);
    if (!src && !dst)
        return RL(renameat2)(od, op, nd, np, fl);
    LOCKED(int r = RL(renameat2)(od, op, nd, np, fl));
    if (r == 0 && src && dst) {
        struct rec x = {.len = 0};
        add(&x, "R");
        add_path(&x, odir);
        add_name(&x, oname);
        add_path(&x, ndir);
        add_name(&x, nname);
        add(&x, " %u", fl);
        char p[PATH_MAX + NAME_MAX + 2];
        snprintf(p, sizeof p, "%s/%s", ndir, nname);
        add_path(&x, p);
        emit(&x, NULL, 0);
    } else if (r == 0 && src) {
        rec_gone(odir, oname);
    } else if (r == 0) {
        rec_entry("N", ndir, nname); /* from outside: its bytes are unknown */
    }
    UNLOCK(r);
}
int renameat(int od, const char *op, int nd, const char *np) {
    return renameat2(od, op, nd, np, 0);
}
int rename(const char *op, const char *np) {
    return renameat2(AT_FDCWD, op, AT_FDCWD, np, 0);
}

int linkat(int od, const char *op, int nd, const char *np, int fl) {
    char dir[PATH_MAX], name[NAME_MAX + 1];
    if (!split_at(nd, np, dir, name))
        return RL(linkat)(od, op, nd, np, fl);
    LOCKED(int r = RL(linkat)(od, op, nd, np, fl));
    if (r == 0)
        rec_entry("L", dir, name);
    UNLOCK(r);
}
int link(const char *op, const char *np) {
    return linkat(AT_FDCWD, op, AT_FDCWD, np, 0);
}

int unlinkat(int d, const char *path, int fl) {
    char dir[PATH_MAX], name[NAME_MAX + 1];
    if (!split_at(d, path, dir, name))
        return RL(unlinkat)(d, path, fl);
    LOCKED(int r = RL(unlinkat)(d, path, fl));
    if (r == 0)
        rec_gone(dir, name);
    UNLOCK(r);
}
int unlink(const char *path) {
    return unlinkat(AT_FDCWD, path, 0);
}
int rmdir(const char *path) {
    return unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
}

int mkdirat(int d, const char *path, mode_t mode) {
    char dir[PATH_MAX], name[NAME_MAX + 1];
    if (!split_at(d, path, dir, name))
        return RL(mkdirat)(d, path, mode);
    LOCKED(int r = RL(mkdirat)(d, path, mode));
    if (r == 0)
        rec_entry("N", dir, name);
    UNLOCK(r);
}
int mkdir(const char *path, mode_t mode) {
    return mkdirat(AT_FDCWD, path, mode);
}

/* ---- replay: what stat says ---------------------------------------------- */

static int fstat_m(int fd, struct stat *st) {
    int r = RL(fstat)(fd, st);
    if (r == 0 && n_map)
        map_stat(st);
    return r;
}
static int fstatat_m(int d, const char *p, struct stat *st, int fl) {
    int r = RL(fstatat)(d, p, st, fl);
    if (r == 0 && n_map)
        map_stat(st);
    return r;
}
static int stat_m(const char *p, struct stat *st) {
    return fstatat_m(AT_FDCWD, p, st, 0);
}
static int lstat_m(const char *p, struct stat *st) {
    return fstatat_m(AT_FDCWD, p, st, AT_SYMLINK_NOFOLLOW);
}
/* struct stat64 is struct stat on LP64: one body, the names by asm. */
int plrec_fstat(int, struct stat *) __asm__("fstat");
int plrec_fstat64(int, struct stat *) __asm__("fstat64");
int plrec_fstatat(int, const char *, struct stat *, int) __asm__("fstatat");
int plrec_fstatat64(int, const char *, struct stat *, int) __asm__("fstatat64");
int plrec_stat(const char *, struct stat *) __asm__("stat");
int plrec_stat64(const char *, struct stat *) __asm__("stat64");
int plrec_lstat(const char *, struct stat *) __asm__("lstat");
int plrec_lstat64(const char *, struct stat *) __asm__("lstat64");
int plrec_fstat(int fd, struct stat *st) {
    return fstat_m(fd, st);
}
int plrec_fstat64(int fd, struct stat *st) {
    return fstat_m(fd, st);
}
int plrec_fstatat(int d, const char *p, struct stat *st, int f) {
    return fstatat_m(d, p, st, f);
}
int plrec_fstatat64(int d, const char *p, struct stat *st, int f) {
    return fstatat_m(d, p, st, f);
}
int plrec_stat(const char *p, struct stat *st) {
    return stat_m(p, st);
}
int plrec_stat64(const char *p, struct stat *st) {
    return stat_m(p, st);
}
int plrec_lstat(const char *p, struct stat *st) {
    return lstat_m(p, st);
}
int plrec_lstat64(const char *p, struct stat *st) {
    return lstat_m(p, st);
}

int statx(int d, const char *p, int fl, unsigned mask, struct statx *sx) {
    int r = RL(statx)(d, p, fl, mask, sx);
    if (r == 0 && n_map)
        map_statx(sx);
    return r;
}
