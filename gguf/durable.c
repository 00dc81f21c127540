/*
 * durable.c - the low-level I/O of the crash-safe write path: whole reads
 * and writes, syncing a directory, the commit lock, free space, and the
 * fault-injection points.  Mechanism only: which step comes when, and why,
 * is the policy of commit.c (its crash-safety rules), journal.c,
 * rewrite.c and recover.c.
 *
 * Atomic replacement (gguf_replace_*, in the manner of git's tempfile.c
 * rename_tempfile), the one way a whole file is replaced: by the state
 * files (state.c), the overlay (overlay.c), whole new files (write.c) and
 * a commit's rewrite (rewrite.c).  NAME in a directory fd gets a new file
 * beside it (created O_EXCL | O_NOFOLLOW, then given exactly the mode
 * asked for, whatever the umask), written by the caller, fsync'ed,
 * renamed over NAME, and the directory fsync'ed.  Until the rename a
 * failure removes the new file and leaves the old NAME (or none) as it
 * was; a crash may leave the new file, which each caller's naming lets it
 * recognise and remove (GGUF_REPLACE_STALE, overlay.c's remove_stale,
 * recover.c).
 *
 * The rule for a failed directory fsync (here, gguf_fsync_dirfd, for every
 * caller): EINVAL and EROFS mean the filesystem cannot sync a directory
 * (some FUSE and network ones) and count as success, there being nothing
 * better to do; any other failure is an error naming the directory.  After
 * a rename that error is returned with the new NAME already in place (it is
 * not undone): a crash may still bring the old name back, and a caller
 * that reports durability (a commit, pending edits, an overlay) must not
 * call that durable.  The caller sees the error and the file as it is.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* ---- fault injection ------------------------------------------------ */

void gguf_faults_init(struct gguf_faults *f) {
    const char *s = getenv("GGUFS_FAULT");
    char *end = NULL;
    f->at = 0;
    f->count = 0;
    if (s && *s) {
        long n = strtol(s, &end, 10);
        if (end && *end == '\0' && n > 0)
            f->at = n;
    }
    s = getenv("GGUFS_FAULT_TRACE");
    f->trace = s && *s && strcmp(s, "0") != 0;
}

/* Called just before each durable step, so that GGUFS_FAULT=N stops the
 * process with the first N-1 steps done and the Nth not begun. */
void gguf_fault_point(struct gguf_faults *f, const char *what) {
    if (!f)
        return;
    f->count++;
    if (f->trace)
        fprintf(stderr, "ggufs fault point %ld: %s\n", f->count, what);
    if (f->at > 0 && f->count == f->at)
        raise(SIGKILL);
}

/* ---- I/O helpers ---------------------------------------------------- */

enum gguf_status gguf_sys_fail(struct gguf_error *err, int e, const char *fmt,
                               ...) {
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    enum gguf_status code =
        e == ENOSPC || e == EDQUOT ? GGUF_E_NOSPACE : GGUF_E_IO;
    gguf_fail(err, code, "%s: %s", what, strerror(e));
    if (err)
        err->sys_errno = e;
    return code;
}

enum gguf_status gguf_pwrite_full(int fd, const void *buf, uint64_t n,
                                  uint64_t off, const char *what,
                                  struct gguf_error *err) {
    const uint8_t *p = buf;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t w = pwrite(fd, p, chunk, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return gguf_sys_fail(err, w < 0 ? errno : EIO,
                                 "writing %s at offset %llu", what,
                                 (unsigned long long)off);
        p += w;
        n -= (uint64_t)w;
        off += (uint64_t)w;
    }
    return GGUF_OK;
}

enum gguf_status gguf_pread_full(int fd, void *buf, uint64_t n, uint64_t off,
                                 const char *what, struct gguf_error *err) {
    uint8_t *p = buf;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t r = pread(fd, p, chunk, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return gguf_sys_fail(err, errno, "reading %s at offset %llu", what,
                                 (unsigned long long)off);
        if (r == 0)
            return gguf_fail(err, GGUF_E_CHANGED,
                             "reading %s: the file ends at %llu, before the "
                             "%llu bytes expected",
                             what, (unsigned long long)off,
                             (unsigned long long)n);
        p += r;
        n -= (uint64_t)r;
        off += (uint64_t)r;
    }
    return GGUF_OK;
}

/* The one rule for names ggufs makes beside a GGUF (journal, new file,
 * saved edits): they must stay within NAME_MAX however long the model's
 * name is, stay recognisable (the base name's start is kept), and differ
 * for two models whose long names share that start (the hash is of the
 * whole base name).  A cut never splits a valid UTF-8 sequence, so a name
 * that was valid UTF-8 stays so. */
char *gguf_sidecar_path(const char *path, const char *suffix) {
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dir;
    size_t blen = strlen(base), slen = strlen(suffix);
    size_t keep = blen;
    char mark[GGUF_SIDECAR_HASH + 1] = "";

    if (slen + GGUF_SIDECAR_HASH > GGUF_NAME_MAX)
        return NULL; /* our suffixes are short; a caller's bug */
    if (blen + slen > GGUF_NAME_MAX) {
        size_t room = GGUF_NAME_MAX - slen - GGUF_SIDECAR_HASH;
        const uint8_t *b = (const uint8_t *)base;
        keep = 0;
        while (keep < blen) {
            size_t k = gguf_utf8_seq(b + keep, blen - keep);
            if (!k)
                k = 1; /* an invalid byte stands alone */
            if (keep + k > room)
                break;
            keep += k;
        }
        snprintf(mark, sizeof mark, "~%016llx",
                 (unsigned long long)gguf_hash(base, blen));
    }
    size_t mlen = strlen(mark);
    char *s = malloc(dir + keep + mlen + slen + 1);
    if (s) {
        memcpy(s, path, dir + keep);
        memcpy(s + dir + keep, mark, mlen);
        memcpy(s + dir + keep + mlen, suffix, slen + 1);
    }
    return s;
}

bool gguf_path_exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* The rule for a failed directory fsync: the top comment. */
enum gguf_status gguf_fsync_dirfd(int dfd, const char *of,
                                  struct gguf_error *err) {
    if (fsync(dfd) < 0 && errno != EINVAL && errno != EROFS)
        return gguf_sys_fail(err, errno, "cannot sync the directory of %s", of);
    return GGUF_OK;
}

enum gguf_status gguf_fsync_dir(const char *path, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char *copy = strdup(path);
    int dfd = -1;
    if (!copy) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    const char *dir = dirname(copy);
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        st = gguf_sys_fail(err, errno, "cannot open directory %s", dir);
        goto out;
    }
    st = gguf_fsync_dirfd(dfd, path, err);
out:
    if (dfd >= 0)
        close(dfd);
    free(copy);
    return st;
}

int gguf_open_dir_of(const char *path, const char **base,
                     struct gguf_error *err) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : NULL;
    int dfd = -1;
    *base = slash ? slash + 1 : path;
    if (slash && !dir) {
        gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        return -1;
    }
    dfd = open(dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        gguf_sys_fail(err, errno, "cannot open the directory of %s", path);
    free(dir);
    return dfd;
}

/* ---- atomic replacement (the top comment) ----------------------------- */

static void fault(struct gguf_replace *r, const char *step) {
    char label[96];
    snprintf(label, sizeof label, "%s%s", step, r->what ? r->what : "file");
    gguf_fault_point(r->f, label);
}

/* The trailing X's of r->tmp made random hex digits. */
static void randomize(char *tmp) {
    size_t n = strlen(tmp), x = 0;
    while (x < n && tmp[n - 1 - x] == 'X')
        x++;
    for (size_t i = n - x; i < n; i++) {
        uint8_t b = 0;
        if (getrandom(&b, 1, GRND_NONBLOCK) != 1)
            b = (uint8_t)(getpid() ^ time(NULL) ^ i);
        tmp[i] = "0123456789abcdef"[b & 15];
    }
}

enum gguf_status gguf_replace_open(struct gguf_replace *r, mode_t mode,
                                   unsigned flags, struct gguf_error *err) {
    char tmpl[sizeof r->tmp];
    memcpy(tmpl, r->tmp, sizeof tmpl);
    r->fd = -1;
    r->renamed = false;
    fault(r, "create new ");
    for (int attempt = 0; r->fd < 0; attempt++) {
        if (flags & GGUF_REPLACE_RANDOM) {
            memcpy(r->tmp, tmpl, sizeof tmpl);
            randomize(r->tmp);
        }
        r->fd =
            openat(r->dfd, r->tmp,
                   O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (r->fd >= 0 || errno != EEXIST || attempt >= 16)
            break;
        if (flags & GGUF_REPLACE_RANDOM)
            continue; /* another name */
        /* One removal of our leftover, then a last try. */
        if (!(flags & GGUF_REPLACE_STALE) || attempt > 0 ||
            unlinkat(r->dfd, r->tmp, 0) < 0)
            break;
    }
    if (r->fd < 0) {
        enum gguf_status st = gguf_sys_fail(
            err, errno, "cannot create %s beside %s", r->tmp, r->shown);
        r->tmp[0] = '\0'; /* nothing of ours to remove */
        return st;
    }
    if (fchmod(r->fd, mode) < 0)
        return gguf_sys_fail(err, errno, "cannot set the mode of %s", r->tmp);
    return GGUF_OK;
}

/* The rename for r->same_as (gguf_replace in internal.h): RENAME_EXCHANGE
 * swaps the two atomically, and the file swapped out must then be
 * same_as's, else the swap is undone and the result is GGUF_E_CHANGED.
 * Where the filesystem cannot exchange, the identity is checked just
 * before a plain rename.  The old file is unlinked after a swap (a crash
 * before that leaves it under the new file's name, a stale leftover). */
static enum gguf_status swap_in(struct gguf_replace *r,
                                struct gguf_error *err) {
    struct stat mine, there;
    if (fstat(r->same_as, &mine) < 0)
        return gguf_sys_fail(err, errno, "cannot stat %s", r->shown);
    if (renameat2(r->dfd, r->tmp, r->dfd, r->name, RENAME_EXCHANGE) == 0) {
        if (fstatat(r->dfd, r->tmp, &there, 0) == 0 &&
            there.st_dev == mine.st_dev && there.st_ino == mine.st_ino) {
            (void)unlinkat(r->dfd, r->tmp, 0);
            return GGUF_OK;
        }
        if (renameat2(r->dfd, r->tmp, r->dfd, r->name, RENAME_EXCHANGE) < 0)
            return gguf_sys_fail(err, errno,
                                 "%s is no longer the mounted file, and "
                                 "undoing the swap with %s failed",
                                 r->shown, r->tmp);
        return gguf_fail(err, GGUF_E_CHANGED,
                         "%s is no longer the file that was opened (replaced "
                         "while mounted): not written",
                         r->shown);
    }
    if (errno == ENOENT)
        return gguf_fail(err, GGUF_E_CHANGED,
                         "%s was moved or removed while it was open: the "
                         "commit writes only into the file that was opened",
                         r->shown);
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return gguf_sys_fail(err, errno, "cannot exchange %s and %s", r->tmp,
                             r->shown);
    if (fstatat(r->dfd, r->name, &there, 0) != 0 ||
        there.st_dev != mine.st_dev || there.st_ino != mine.st_ino)
        return gguf_fail(err, GGUF_E_CHANGED,
                         "%s is no longer the file that was opened: not "
                         "written",
                         r->shown);
    if (renameat(r->dfd, r->tmp, r->dfd, r->name) < 0)
        return gguf_sys_fail(err, errno, "cannot rename %s to %s", r->tmp,
                             r->shown);
    return GGUF_OK;
}

enum gguf_status gguf_replace_commit(struct gguf_replace *r,
                                     struct gguf_error *err) {
    enum gguf_status st;
    fault(r, "fsync new ");
    if (fsync(r->fd) < 0)
        return gguf_sys_fail(err, errno, "cannot sync %s", r->tmp);
    fault(r, "rename over ");
    if (r->same_as >= 0) {
        if ((st = swap_in(r, err)) != GGUF_OK)
            return st;
    } else if (renameat(r->dfd, r->tmp, r->dfd, r->name) < 0) {
        return gguf_sys_fail(err, errno, "cannot rename %s to %s", r->tmp,
                             r->shown);
    }
    r->renamed = true;
    gguf_fault_point(r->f, "fsync directory");
    return gguf_fsync_dirfd(r->dfd, r->shown, err);
}

void gguf_replace_end(struct gguf_replace *r) {
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    if (!r->renamed && r->tmp[0])
        (void)unlinkat(r->dfd, r->tmp, 0);
    r->tmp[0] = '\0';
}

/* Free bytes for us (the reserve counts for root). */
uint64_t gguf_free_bytes(int fd) {
    struct statvfs vs;
    if (fstatvfs(fd, &vs) < 0)
        return UINT64_MAX; /* unknown: let the writes tell */
    uint64_t blocks = geteuid() == 0 ? vs.f_bfree : vs.f_bavail;
    uint64_t unit = vs.f_frsize ? vs.f_frsize : vs.f_bsize;
    if (unit && blocks > UINT64_MAX / unit)
        return UINT64_MAX;
    return blocks * unit;
}

/* An OFD lock (not flock: callers such as the mount hold flock on the very
 * same file description for their own purposes, and flock(LOCK_UN) here
 * would drop theirs).  Where the filesystem has no such locks, commits go
 * unlocked rather than not at all. */
enum gguf_status gguf_commit_lock(int fd, bool lock, struct gguf_error *err) {
    struct flock fl = {.l_type = lock ? F_WRLCK : F_UNLCK,
                       .l_whence = SEEK_SET,
                       .l_start = 0,
                       .l_len = 0};
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
        return GGUF_OK;
    if (errno == EAGAIN || errno == EACCES)
        return gguf_fail(err, GGUF_E_BUSY,
                         "another process is committing to the file");
    if (errno == EINVAL || errno == ENOLCK || errno == EOPNOTSUPP || !lock)
        return GGUF_OK;
    return gguf_sys_fail(err, errno, "cannot lock the file");
}
