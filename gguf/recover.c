/*
 * recover.c - the commit journal: its byte layout, carrying out the plan it
 * records (shared by gguf_commit and recovery), undoing a plan that cannot
 * be finished, and gguf_recover, which completes or discards an
 * interrupted commit.  Also the small crash-safe I/O helpers and the fault
 * injection points both files use.
 *
 * Journal PATH.ggufs-journal, little-endian:
 *
 *   offset        size     field
 *   0             8        magic "GGUFSJNL"
 *   8             4        journal format version (1)
 *   12            4        op: 1 in place, 2 insert (enum gguf_jnl_op)
 *   16            8        st_dev of the GGUF when the commit began
 *   24            8        st_ino
 *   32            8        file size before the commit
 *   40            8        mtime (ns) before the commit
 *   48            8        k: bytes inserted at offset 0 (0 in place)
 *   56            8        old_len: D, the old data offset
 *   64            8        new_len: D + k, the new data offset
 *   72            old_len  the old header bytes [0, D)
 *   72+old_len    new_len  the new header bytes [0, D + k)
 *   end-16        8        FNV-1a 64 of every byte before it
 *   end-8         8        end mark "GGUFSEND"
 *
 * The trailer is written by a separate, later write, so a journal cut
 * short at any point has no valid trailer, and a torn one (blocks of the
 * body missing after a power cut) fails the checksum.  A journal is only
 * relied on after it was fsync'ed with its directory; until then the GGUF
 * is untouched, which is why an incomplete journal is simply removed.
 *
 * A complete journal means the commit was decided: recovery redoes it
 * (redo is idempotent: the insert is done only if the file still has its
 * old size, the header write is whole).  Before redoing, the file must be
 * recognisably the one the journal was written for: its size is the old
 * size (insert not yet done) or the old size + k, and each header byte is
 * either the old or the new byte at that position; otherwise someone
 * changed the file since and the journal is left alone (GGUF_E_CHANGED).
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
#include <sys/stat.h>
#include <unistd.h>

#define JNL_MAGIC "GGUFSJNL"
#define JNL_END "GGUFSEND"
#define JNL_VERSION 1
#define JNL_FIXED 72

/* ---- fault injection ------------------------------------------------ */

static long fault_at;    /* GGUFS_FAULT, 0 when off */
static long fault_count; /* points passed since gguf_fault_reset */
static bool fault_trace;

void gguf_fault_reset(void) {
    const char *s = getenv("GGUFS_FAULT");
    char *end = NULL;
    fault_at = 0;
    fault_count = 0;
    if (s && *s) {
        long n = strtol(s, &end, 10);
        if (end && *end == '\0' && n > 0)
            fault_at = n;
    }
    s = getenv("GGUFS_FAULT_TRACE");
    fault_trace = s && *s && strcmp(s, "0") != 0;
}

/* Called just before each durable step, so that GGUFS_FAULT=N stops the
 * process with the first N-1 steps done and the Nth not begun. */
void gguf_fault_point(const char *what) {
    fault_count++;
    if (fault_trace)
        fprintf(stderr, "ggufs fault point %ld: %s\n", fault_count, what);
    if (fault_at > 0 && fault_count == fault_at)
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
                             "%llu bytes expected", what,
                             (unsigned long long)off, (unsigned long long)n);
        p += r;
        n -= (uint64_t)r;
        off += (uint64_t)r;
    }
    return GGUF_OK;
}

char *gguf_path_with(const char *path, const char *suffix) {
    size_t a = strlen(path), b = strlen(suffix);
    char *s = malloc(a + b + 1);
    if (s) {
        memcpy(s, path, a);
        memcpy(s + a, suffix, b + 1);
    }
    return s;
}

/* Filesystems that cannot sync a directory (some FUSE and network ones)
 * say EINVAL; there is nothing better to do there, so that is success. */
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
    if (fsync(dfd) < 0 && errno != EINVAL && errno != EROFS) {
        st = gguf_sys_fail(err, errno, "cannot sync directory %s", dir);
        goto out;
    }
out:
    if (dfd >= 0)
        close(dfd);
    free(copy);
    return st;
}

/* An OFD lock (not flock: callers such as the mount hold flock on the very
 * same file description for their own purposes, and flock(LOCK_UN) here
 * would drop theirs).  Where the filesystem has no such locks, commits go
 * unlocked rather than not at all. */
enum gguf_status gguf_commit_lock(int fd, bool lock, struct gguf_error *err) {
    struct flock fl = {.l_type = lock ? F_WRLCK : F_UNLCK,
                       .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
        return GGUF_OK;
    if (errno == EAGAIN || errno == EACCES)
        return gguf_fail(err, GGUF_E_BUSY,
                         "another process is committing to the file");
    if (errno == EINVAL || errno == ENOLCK || errno == EOPNOTSUPP || !lock)
        return GGUF_OK;
    return gguf_sys_fail(err, errno, "cannot lock the file");
}

/* ---- journal layout ------------------------------------------------- */

static uint64_t jnl_hash(const uint8_t *p, uint64_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (uint64_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

enum gguf_status gguf_jnl_encode(const struct gguf_jnl *j,
                                 struct gguf_buf *out, struct gguf_error *err) {
    uint64_t total = (uint64_t)JNL_FIXED + GGUF_JNL_TRAILER;
    if (j->old_len > SIZE_MAX / 4 || j->new_len > SIZE_MAX / 4)
        return gguf_fail(err, GGUF_E_NOMEM, "header too large for a journal");
    total += j->old_len + j->new_len;
    size_t start = out->len;
    enum gguf_status st = gguf_buf_reserve(out, (size_t)total);
    if (st != GGUF_OK)
        return gguf_fail(err, st, "out of memory for a journal of %llu bytes",
                         (unsigned long long)total);
    uint8_t *p = out->p + start;
    memcpy(p, JNL_MAGIC, 8);
    gguf_wr32(p + 8, JNL_VERSION);
    gguf_wr32(p + 12, j->op);
    gguf_wr64(p + 16, j->dev);
    gguf_wr64(p + 24, j->ino);
    gguf_wr64(p + 32, j->orig_size);
    gguf_wr64(p + 40, (uint64_t)j->orig_mtime_ns);
    gguf_wr64(p + 48, j->k);
    gguf_wr64(p + 56, j->old_len);
    gguf_wr64(p + 64, j->new_len);
    if (j->old_len)
        memcpy(p + JNL_FIXED, j->old_hdr, (size_t)j->old_len);
    if (j->new_len)
        memcpy(p + JNL_FIXED + j->old_len, j->new_hdr, (size_t)j->new_len);
    uint64_t body = total - GGUF_JNL_TRAILER;
    gguf_wr64(p + body, jnl_hash(p, body));
    memcpy(p + body + 8, JNL_END, 8);
    out->len = start + (size_t)total;
    return GGUF_OK;
}

/* Parses a journal read whole into p[0, n).  *complete is false for
 * anything that lacks a valid trailer and checksum: such a journal was
 * never relied on.  A complete journal of an unknown version or with an
 * inconsistent plan is an error (never silently dropped).  On success j's
 * header pointers point into p. */
static enum gguf_status jnl_decode(const uint8_t *p, uint64_t n,
                                   struct gguf_jnl *j, bool *complete,
                                   struct gguf_error *err) {
    *complete = false;
    memset(j, 0, sizeof *j);
    if (n < (uint64_t)JNL_FIXED + GGUF_JNL_TRAILER ||
        memcmp(p, JNL_MAGIC, 8) != 0)
        return GGUF_OK;
    uint64_t body = n - GGUF_JNL_TRAILER;
    if (memcmp(p + body + 8, JNL_END, 8) != 0 ||
        gguf_rd64(p + body) != jnl_hash(p, body))
        return GGUF_OK;
    *complete = true;

    uint32_t version = gguf_rd32(p + 8);
    if (version != JNL_VERSION)
        return gguf_fail(err, GGUF_E_UNSUPPORTED,
                         "journal format version %u is not %u: written by "
                         "another ggufs version", version, JNL_VERSION);
    j->op = gguf_rd32(p + 12);
    j->dev = gguf_rd64(p + 16);
    j->ino = gguf_rd64(p + 24);
    j->orig_size = gguf_rd64(p + 32);
    j->orig_mtime_ns = (int64_t)gguf_rd64(p + 40);
    j->k = gguf_rd64(p + 48);
    j->old_len = gguf_rd64(p + 56);
    j->new_len = gguf_rd64(p + 64);
    uint64_t room = body - JNL_FIXED;
    if (j->old_len > room || j->new_len != room - j->old_len)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "journal header lengths %llu + %llu do not match its "
                         "size %llu", (unsigned long long)j->old_len,
                         (unsigned long long)j->new_len,
                         (unsigned long long)n);
    bool ok = false;
    if (j->op == GGUF_JNL_INPLACE)
        ok = j->k == 0 && j->old_len == j->new_len;
    else if (j->op == GGUF_JNL_INSERT)
        ok = j->k > 0 && j->new_len - j->old_len == j->k &&
             j->orig_size <= UINT64_MAX - j->k;
    if (!ok || j->new_len == 0)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "journal plan is inconsistent (op %u, k %llu, "
                         "header %llu -> %llu bytes)", j->op,
                         (unsigned long long)j->k,
                         (unsigned long long)j->old_len,
                         (unsigned long long)j->new_len);
    j->old_hdr = p + JNL_FIXED;
    j->new_hdr = p + JNL_FIXED + j->old_len;
    return GGUF_OK;
}

/* ---- carrying out and undoing a plan -------------------------------- */

/* Steps (fault points): [insert-range, fsync] for inserts, then the new
 * header in two halves (so a kill can land mid-header), then fsync. */
enum gguf_status gguf_jnl_apply(int fd, const struct gguf_jnl *j,
                                bool inserted, enum gguf_jnl_stage *stage,
                                struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    *stage = inserted ? GGUF_JNL_INSERTED : GGUF_JNL_UNTOUCHED;

    if (j->op == GGUF_JNL_INSERT && !inserted) {
        gguf_fault_point("insert-range");
        if (fallocate(fd, FALLOC_FL_INSERT_RANGE, 0, (off_t)j->k) < 0) {
            st = gguf_sys_fail(err, errno,
                               "cannot insert %llu bytes before the header",
                               (unsigned long long)j->k);
            goto out;
        }
        *stage = GGUF_JNL_INSERTED;
        gguf_fault_point("fsync after insert-range");
        if (fsync(fd) < 0) {
            st = gguf_sys_fail(err, errno, "cannot sync the file after the insert");
            goto out;
        }
    }
    /* Reserve the blocks of the header region (the inserted range is a
     * hole) so that a full device fails here, before any header byte has
     * changed.  KEEP_SIZE: never extends the file.  Filesystems without
     * fallocate (or that refuse this use of it) are fine: their writes below
     * report ENOSPC instead. */
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)j->new_len) < 0 &&
        errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL) {
        st = gguf_sys_fail(err, errno,
                           "cannot allocate %llu bytes for the header",
                           (unsigned long long)j->new_len);
        goto out;
    }

    uint64_t half = j->new_len / 2;
    gguf_fault_point("header write, first half");
    *stage = GGUF_JNL_WRITING;
    st = gguf_pwrite_full(fd, j->new_hdr, half, 0, "the new header", err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point("header write, second half");
    st = gguf_pwrite_full(fd, j->new_hdr + half, j->new_len - half, half,
                          "the new header", err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point("fsync file");
    if (fsync(fd) < 0) {
        st = gguf_sys_fail(err, errno, "cannot sync the file");
        goto out;
    }
out:
    return st;
}

/* Puts the file back as it was before j, after gguf_jnl_apply stopped at
 * stage.  The journal stays in place meanwhile: a crash during the undo
 * leaves a state recovery completes (forwards).  GGUF_OK means the file is
 * exactly as before and synced, and the journal may go. */
enum gguf_status gguf_jnl_rollback(int fd, const struct gguf_jnl *j,
                                   enum gguf_jnl_stage stage,
                                   struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    if (stage == GGUF_JNL_UNTOUCHED)
        goto out;
    if (stage == GGUF_JNL_WRITING) {
        /* The old header lies at k after an insert, at 0 in place. */
        uint64_t keep = j->old_len < j->orig_size ? j->old_len : j->orig_size;
        st = gguf_pwrite_full(fd, j->old_hdr, keep, j->k, "the old header back",
                              err);
        if (st != GGUF_OK)
            goto out;
        if (j->op == GGUF_JNL_INPLACE &&
            ftruncate(fd, (off_t)j->orig_size) < 0) {
            st = gguf_sys_fail(err, errno, "cannot restore the file size");
            goto out;
        }
    }
    if (j->op == GGUF_JNL_INSERT &&
        fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, (off_t)j->k) < 0) {
        st = gguf_sys_fail(err, errno, "cannot remove the %llu inserted bytes",
                           (unsigned long long)j->k);
        goto out;
    }
    if (fsync(fd) < 0) {
        st = gguf_sys_fail(err, errno, "cannot sync the file");
        goto out;
    }
out:
    return st;
}

/* ---- recovery ------------------------------------------------------- */

/* Checks that the file (size `size`, header bytes have[0, n)) is the one j
 * was written for, at some point of carrying it out, and says whether the
 * insert is done.  Byte rule: each byte is the new one or the one that was
 * there before (old header, shifted by k after the insert; zeros in the
 * inserted range and past the old end of file). */
static bool jnl_matches(const struct gguf_jnl *j, uint64_t size,
                        const uint8_t *have, uint64_t n, bool *inserted) {
    uint64_t lo = j->orig_size, hi;
    *inserted = false;
    if (j->op == GGUF_JNL_INSERT && size != j->orig_size) {
        *inserted = true;
        lo = j->orig_size + j->k;
    }
    hi = lo > j->new_len ? lo : j->new_len;
    if (size < lo || size > hi)
        return false;
    /* Before the insert only the old header is known: what follows it (up
     * to new_len) is tensor data. */
    if (!*inserted && n > j->old_len)
        n = j->old_len;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t shift = *inserted ? j->k : 0;
        uint8_t before = 0;
        if (i >= shift && i - shift < j->old_len && i - shift < j->orig_size)
            before = j->old_hdr[i - shift];
        bool was_new = j->op == GGUF_JNL_INPLACE || *inserted;
        if (have[i] != before && !(was_new && have[i] == j->new_hdr[i]))
            return false;
    }
    return true;
}

/* Completes the journaled commit described by the journal bytes (already
 * read) on the locked fd.  Leaves the journal file to the caller. */
static enum gguf_status redo(int fd, const char *path, const struct gguf_jnl *j,
                             bool *rolled_back, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    uint8_t *have = NULL;
    struct stat sb;
    bool inserted = false;
    enum gguf_jnl_stage stage;

    *rolled_back = false;
    if (fstat(fd, &sb) < 0) {
        st = gguf_sys_fail(err, errno, "cannot stat %s", path);
        goto out;
    }
    uint64_t size = (uint64_t)sb.st_size;
    uint64_t n = size < j->new_len ? size : j->new_len;
    have = malloc(n ? (size_t)n : 1);
    if (!have) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory reading the header");
        goto out;
    }
    st = gguf_pread_full(fd, have, n, 0, "the header", err);
    if (st != GGUF_OK)
        goto out;
    if (!jnl_matches(j, size, have, n, &inserted)) {
        st = gguf_fail(err, GGUF_E_CHANGED,
                       "the file (%llu bytes) is not in a state the journal "
                       "of an interrupted commit leads to (from %llu bytes, "
                       "%s); it was changed since: check it, then remove "
                       "the journal %s" GGUF_JOURNAL_SUFFIX,
                       (unsigned long long)size,
                       (unsigned long long)j->orig_size,
                       j->op == GGUF_JNL_INSERT ? "inserting before the header"
                                                : "header in place",
                       path);
        goto out;
    }
    st = gguf_jnl_apply(fd, j, inserted, &stage, err);
    int e = st != GGUF_OK ? err->sys_errno : 0;
    if (st != GGUF_OK && stage == GGUF_JNL_UNTOUCHED &&
        j->op == GGUF_JNL_INSERT &&
        (e == EOPNOTSUPP || e == EINVAL || e == ENOSYS || e == ENOTTY)) {
        /* No insert-range here (the commit was killed before it found
         * out): finish the same change by rewriting the file. */
        int nfd = -1;
        uint64_t copied = 0;
        memset(err, 0, sizeof *err);
        st = gguf_rewrite_file(fd, path, &sb, j->old_len, j->new_hdr,
                               j->new_len, &nfd, &copied, err);
        if (nfd >= 0)
            close(nfd);
    }
    if (st == GGUF_E_NOSPACE && stage != GGUF_JNL_WRITING) {
        /* No room to finish, and the header is still the old one: going
         * back is the only way to leave a valid file. */
        struct gguf_error e2 = {0};
        if (gguf_jnl_rollback(fd, j, stage, &e2) == GGUF_OK) {
            *rolled_back = true;
            st = gguf_fail(err, GGUF_E_NOSPACE,
                           "no space to complete the interrupted commit; it "
                           "was rolled back and the file is as before it");
            if (err)
                err->sys_errno = ENOSPC;
        }
    }
out:
    free(have);
    return st;
}

/* Reads the whole journal into *out (*n bytes). */
static enum gguf_status read_journal(const char *jpath, uint8_t **out,
                                     uint64_t *n, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    struct stat sb;
    int jfd = open(jpath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    *out = NULL;
    *n = 0;
    if (jfd < 0) {
        st = gguf_sys_fail(err, errno, "cannot open %s", jpath);
        goto out;
    }
    if (fstat(jfd, &sb) < 0) {
        st = gguf_sys_fail(err, errno, "cannot stat %s", jpath);
        goto out;
    }
    if ((uint64_t)sb.st_size > SIZE_MAX / 2) {
        st = gguf_fail(err, GGUF_E_NOMEM, "journal %s is too large", jpath);
        goto out;
    }
    *n = (uint64_t)sb.st_size;
    *out = malloc(*n ? (size_t)*n : 1);
    if (!*out) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory reading %s", jpath);
        goto out;
    }
    st = gguf_pread_full(jfd, *out, *n, 0, "the journal", err);
out:
    if (jfd >= 0)
        close(jfd);
    return st;
}

static bool exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

/* Fault points: unlink stale new file; then for an incomplete journal:
 * unlink journal; for a complete one: gguf_jnl_apply's points, unlink
 * journal; last, fsync directory. */
enum gguf_status gguf_recover(const char *path, bool *did,
                              struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char *jpath = NULL, *npath = NULL;
    uint8_t *jbytes = NULL;
    uint64_t jn = 0;
    int fd = -1;
    bool changed = false;
    struct gguf_error scratch;

    if (!err)
        err = &scratch; /* redo() reads the errno of failures */
    if (did)
        *did = false;
    if (!path) {
        st = gguf_fail(err, GGUF_E_INVAL, "missing path to gguf_recover");
        goto out;
    }
    jpath = gguf_path_with(path, GGUF_JOURNAL_SUFFIX);
    npath = gguf_path_with(path, GGUF_NEWFILE_SUFFIX);
    if (!jpath || !npath) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    gguf_fault_reset();
    /* Nothing pending: touch nothing (the file may well be read-only). */
    if (!exists(jpath) && !exists(npath))
        goto out;

    /* The lock commits hold (gguf_commit_lock): a journal or new file of a
     * commit that is running right now is not stale. */
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        st = gguf_sys_fail(err, errno, "cannot open %s to recover an "
                           "interrupted commit", path);
        goto out;
    }
    st = gguf_commit_lock(fd, true, err);
    if (st != GGUF_OK)
        goto out;

    if (exists(npath)) {
        /* A rewrite that never reached its rename: the original is whole. */
        gguf_fault_point("unlink stale new file");
        if (unlink(npath) < 0 && errno != ENOENT) {
            st = gguf_sys_fail(err, errno, "cannot remove %s", npath);
            goto out;
        }
        changed = true;
    }

    if (exists(jpath)) {
        struct gguf_jnl j;
        bool complete = false, rolled_back = false;
        st = read_journal(jpath, &jbytes, &jn, err);
        if (st != GGUF_OK)
            goto out;
        st = jnl_decode(jbytes, jn, &j, &complete, err);
        if (st != GGUF_OK)
            goto out;
        if (complete) {
            st = redo(fd, path, &j, &rolled_back, err);
            if (st != GGUF_OK && !rolled_back)
                goto out; /* journal kept: the file needs it */
        }
        gguf_fault_point("unlink journal");
        if (unlink(jpath) < 0 && errno != ENOENT) {
            st = gguf_sys_fail(err, errno, "cannot remove %s", jpath);
            goto out;
        }
        changed = true;
        if (st != GGUF_OK)
            goto out; /* rolled back: still worth reporting, dir synced below */
    }
out:
    if (changed) {
        struct gguf_error e2 = {0};
        gguf_fault_point("fsync directory");
        enum gguf_status s2 = gguf_fsync_dir(path, &e2);
        if (st == GGUF_OK && s2 != GGUF_OK) {
            st = s2;
            if (err)
                *err = e2;
        }
        if (did)
            *did = true;
    }
    if (fd >= 0)
        close(fd);
    free(jbytes);
    free(jpath);
    free(npath);
    return st;
}
