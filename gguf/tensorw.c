/*
 * tensorw.c - writing tensor bytes into a GGUF (issue 24): in place, as a
 * regular file is written, and whole ranges replaced crash-safely (a
 * "stage").  The GGUF's header never changes here; commit.c's rules hold
 * (one committer at a time, the journal before the file changes).
 *
 * In place (gguf_data_pwrite): bytes go straight into the file at their
 * offsets; durable after gguf_data_sync (fdatasync); a crash leaves what
 * reached the disk, as for any file.  The context then adopts the file's
 * new mtime and ctime (gguf_data_adopt) so that a later commit does not
 * take its own writes for someone else's (commit.c rule 1).
 *
 * A stage (gguf_stage_*): the new bytes of [pos, pos + len) of the file,
 * written into an unnamed file (O_TMPFILE, mode 0600) in the directory the
 * journal goes to (beside the GGUF, or the user's state directory when
 * that cannot be written).  Bytes never written keep the file's old ones
 * (filled in from the file before they are read or applied).  Applying it
 * (gguf_stage_apply), fault points in order:
 *
 *   1 fsync stage          the staged bytes durable
 *   2 link stage           named JOURNAL.data (linkat, never over a file)
 *   3 fsync directory      the name durable
 *   4-7 journal            body, trailer, fsync, fsync directory (journal.c):
 *                          op GGUF_JNL_PATCH, k = pos, its record says len
 *                          and the FNV-1a 64 of the staged bytes
 *   8, 9 copy              the staged bytes into the file, two halves
 *  10 fsync file
 *  11, 12 journal dropped  unlink, fsync directory
 *  13 unlink stage
 *  14 fsync directory      the stage's removal durable
 *
 * A crash before step 7 leaves the file untouched (recovery removes the
 * incomplete journal and the stage); from step 7 on, recovery copies the
 * stage in again (redo is idempotent) once its length and checksum match
 * the journal's.  So after a crash the range is the old bytes or the new,
 * never a mix.  recover.c does the recovery (its Trust rules apply to the
 * stage as to a journal).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Written ranges of a stage are kept as at most this many intervals;
 * past it the gaps are filled from the file at once (one interval). */
#define STAGE_MAX_RANGES 256
#define STAGE_COPY ((size_t)1 << 20)

struct gguf_stage {
    int fd;  /* the unnamed file */
    int dfd; /* the journal's directory, held (stage_place) */
    uint64_t pos, len;
    char *jpath;       /* the journal's path (for messages); the stage's is
                          jpath + .data */
    const char *jname; /* the journal's name in dfd (points into jpath) */
    struct range {
        uint64_t lo, hi;
    } r[STAGE_MAX_RANGES];
    int n; /* written ranges, sorted, disjoint */
};

static int64_t ns_of(const struct timespec *t) {
    return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

enum gguf_status gguf_data_pwrite(gguf_ctx *ctx, uint64_t pos, const void *p,
                                  size_t n, struct gguf_error *err) {
    if (!ctx || ctx->fd < 0)
        return gguf_fail(err, GGUF_E_INVAL, "not a local file");
    if (pos < ctx->data_offset || pos + n > ctx->file_size || pos + n < pos)
        return gguf_fail(
            err, GGUF_E_RANGE, "bytes [%llu, %llu) are not tensor data of %s",
            (unsigned long long)pos, (unsigned long long)(pos + n), ctx->path);
    return gguf_pwrite_full(ctx->fd, p, n, pos, "tensor bytes", err);
}

enum gguf_status gguf_data_sync(gguf_ctx *ctx, struct gguf_error *err) {
    if (fdatasync(ctx->fd) < 0)
        return gguf_sys_fail(err, errno, "cannot sync %s", ctx->path);
    return GGUF_OK;
}

void gguf_data_adopt(gguf_ctx *ctx) {
    struct stat sb;
    if (ctx && ctx->fd >= 0 && fstat(ctx->fd, &sb) == 0 &&
        sb.st_dev == ctx->dev && sb.st_ino == ctx->ino &&
        (uint64_t)sb.st_size == ctx->file_size) {
        ctx->mtime_ns = ns_of(&sb.st_mtim);
        ctx->ctime_ns = ns_of(&sb.st_ctim);
    }
}

/* The journal's place for ctx's file (as commit.c's write_journal
 * chooses it): beside the file if an unnamed file can be made there, else
 * the state directory.  s->fd: that unnamed file; s->dfd: the directory,
 * held, through which the stage is named and the journal written (never
 * by path: commit.c rule 1). */
static enum gguf_status stage_place(gguf_ctx *ctx, struct gguf_stage *s,
                                    struct gguf_error *err) {
    struct gguf_at self = {ctx->dfd, ctx->base, ctx->path};
    s->jpath = gguf_sidecar_path(ctx->path, GGUF_JOURNAL_SUFFIX);
    if (!s->jpath)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    s->jname = gguf_at_beside(&self, s->jpath).name;
    if ((s->dfd = fcntl(ctx->dfd, F_DUPFD_CLOEXEC, 0)) < 0)
        return gguf_sys_fail(err, errno, "cannot hold the directory of %s",
                             ctx->path);
    s->fd = openat(s->dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    int e = errno;
    if (s->fd >= 0)
        return GGUF_OK;
    if (e != EACCES && e != EPERM && e != EROFS)
        return gguf_sys_fail(err, e,
                             "cannot make a file for the new bytes of %s "
                             "beside it",
                             ctx->path);
    char here[4096];
    struct stat sb;
    close(s->dfd);
    s->dfd = -1;
    if (fstat(ctx->fd, &sb) < 0 ||
        gguf_state_journal(&sb, true, here, sizeof here, &s->dfd, err) !=
            GGUF_OK)
        return gguf_sys_fail(err, e,
                             "no place for the new bytes of %s (its "
                             "directory and the state directory)",
                             ctx->path);
    free(s->jpath);
    if (!(s->jpath = strdup(here)))
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    s->jname = strrchr(s->jpath, '/') + 1;
    s->fd = openat(s->dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (s->fd < 0)
        return gguf_sys_fail(err, errno,
                             "cannot make a file for the new bytes of %s in "
                             "the state directory",
                             ctx->path);
    return GGUF_OK;
}

enum gguf_status gguf_stage_new(gguf_ctx *ctx, uint64_t pos, uint64_t len,
                                gguf_stage **out, struct gguf_error *err) {
    *out = NULL;
    if (!ctx || ctx->fd < 0 || ctx->dfd < 0 || pos < ctx->data_offset ||
        pos + len > ctx->file_size || pos + len < pos)
        return gguf_fail(err, GGUF_E_RANGE, "no such tensor bytes to replace");
    gguf_stage *s = calloc(1, sizeof *s);
    if (!s)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    s->pos = pos;
    s->len = len;
    s->fd = s->dfd = -1;
    enum gguf_status st = stage_place(ctx, s, err);
    /* Exactly 0600 whatever the umask: recovery trusts only that (as a
     * journal's, recover.c). */
    if (st == GGUF_OK && fchmod(s->fd, 0600) < 0)
        st = gguf_sys_fail(err, errno, "cannot set the mode of the stage");
    if (st == GGUF_OK && ftruncate(s->fd, (off_t)len) < 0)
        st = gguf_sys_fail(err, errno, "cannot size the staged bytes");
    if (st != GGUF_OK) {
        gguf_stage_free(s);
        return st;
    }
    *out = s;
    return GGUF_OK;
}

void gguf_stage_free(gguf_stage *s) {
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    if (s->dfd >= 0)
        close(s->dfd);
    free(s->jpath);
    free(s);
}

/* Copies [lo, hi) of the range from the file into the stage. */
static enum gguf_status fill(gguf_ctx *ctx, gguf_stage *s, uint64_t lo,
                             uint64_t hi, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char *buf = malloc(STAGE_COPY);
    if (!buf)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    for (uint64_t o = lo; o < hi && st == GGUF_OK;) {
        size_t n = hi - o < STAGE_COPY ? (size_t)(hi - o) : STAGE_COPY;
        st = gguf_pread_full(ctx->fd, buf, n, s->pos + o, "tensor bytes", err);
        if (st == GGUF_OK)
            st = gguf_pwrite_full(s->fd, buf, n, o, "the staged bytes", err);
        o += n;
    }
    free(buf);
    return st;
}

/* Every byte not written yet copied from the file: one whole range. */
static enum gguf_status fill_gaps(gguf_ctx *ctx, gguf_stage *s,
                                  struct gguf_error *err) {
    uint64_t at = 0;
    for (int i = 0; i <= s->n; i++) {
        uint64_t end = i < s->n ? s->r[i].lo : s->len;
        if (end > at && fill(ctx, s, at, end, err) != GGUF_OK)
            return err ? err->code : GGUF_E_IO;
        if (i < s->n)
            at = s->r[i].hi;
    }
    s->n = 1;
    s->r[0].lo = 0;
    s->r[0].hi = s->len;
    return GGUF_OK;
}

/* Adds [lo, hi) to the written ranges, merging neighbours. */
static void mark(gguf_stage *s, uint64_t lo, uint64_t hi) {
    int i = 0;
    while (i < s->n && s->r[i].hi < lo)
        i++;
    int j = i;
    while (j < s->n && s->r[j].lo <= hi) {
        lo = s->r[j].lo < lo ? s->r[j].lo : lo;
        hi = s->r[j].hi > hi ? s->r[j].hi : hi;
        j++;
    }
    /* r[i, j) merge into one */
    memmove(&s->r[i + 1], &s->r[j], (size_t)(s->n - j) * sizeof s->r[0]);
    s->n += 1 - (j - i);
    s->r[i].lo = lo;
    s->r[i].hi = hi;
}

enum gguf_status gguf_stage_write(gguf_ctx *ctx, gguf_stage *s, uint64_t off,
                                  const void *p, size_t n,
                                  struct gguf_error *err) {
    if (off > s->len || n > s->len - off)
        return gguf_fail(err, GGUF_E_RANGE, "past the end of the tensor");
    enum gguf_status st =
        gguf_pwrite_full(s->fd, p, n, off, "the staged bytes", err);
    if (st != GGUF_OK || n == 0)
        return st;
    if (s->n == STAGE_MAX_RANGES && (st = fill_gaps(ctx, s, err)) != GGUF_OK)
        return st;
    mark(s, off, off + n);
    return GGUF_OK;
}

enum gguf_status gguf_stage_read(gguf_ctx *ctx, gguf_stage *s, uint64_t off,
                                 void *p, size_t n, struct gguf_error *err) {
    if (off > s->len || n > s->len - off)
        return gguf_fail(err, GGUF_E_RANGE, "past the end of the tensor");
    enum gguf_status st = fill_gaps(ctx, s, err);
    if (st == GGUF_OK)
        st = gguf_pread_full(s->fd, p, n, off, "the staged bytes", err);
    return st;
}

/* FNV-1a 64 of the stage's len bytes (the journal's checksum). */
static enum gguf_status stage_hash(int fd, uint64_t len, uint64_t *h,
                                   struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    uint8_t *buf = malloc(STAGE_COPY);
    if (!buf)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    *h = GGUF_FNV_INIT;
    for (uint64_t o = 0; o < len && st == GGUF_OK;) {
        size_t n = len - o < STAGE_COPY ? (size_t)(len - o) : STAGE_COPY;
        st = gguf_pread_full(fd, buf, n, o, "the staged bytes", err);
        *h = gguf_fnv_more(*h, buf, n);
        o += n;
    }
    free(buf);
    return st;
}

/* Copies the stage's len bytes into fd at pos in two halves (fault points
 * 8, 9), then fsyncs fd (10). */
enum gguf_status gguf_stage_copy_in(int sfd, int fd, uint64_t pos, uint64_t len,
                                    struct gguf_faults *f,
                                    struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char *buf = malloc(STAGE_COPY);
    if (!buf)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    uint64_t half = len / 2;
    gguf_fault_point(f, "tensor write, first half");
    for (uint64_t o = 0; o < len && st == GGUF_OK;) {
        uint64_t stop = o < half ? half : len;
        size_t n = stop - o < STAGE_COPY ? (size_t)(stop - o) : STAGE_COPY;
        st = gguf_pread_full(sfd, buf, n, o, "the staged bytes", err);
        if (st == GGUF_OK)
            st = gguf_pwrite_full(fd, buf, n, pos + o, "tensor bytes", err);
        o += n;
        if (o == half && half < len)
            gguf_fault_point(f, "tensor write, second half");
    }
    free(buf);
    if (st == GGUF_OK) {
        gguf_fault_point(f, "fsync file");
        if (fsync(fd) < 0)
            st = gguf_sys_fail(err, errno, "cannot sync the file");
    }
    return st;
}

/* Steps 1-3: the stage durable under the name jpath + ".data" (sp, in
 * s->dfd). */
static enum gguf_status stage_link(gguf_stage *s, const struct gguf_at *sp,
                                   struct gguf_faults *f,
                                   struct gguf_error *err) {
    const char *spath = sp->shown;
    char proc[64];
    gguf_fault_point(f, "fsync stage");
    if (fsync(s->fd) < 0)
        return gguf_sys_fail(err, errno, "cannot sync the staged bytes");
    gguf_fault_point(f, "link stage");
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", s->fd);
    if (linkat(AT_FDCWD, proc, sp->dfd, sp->name, AT_SYMLINK_FOLLOW) < 0)
        return errno == EEXIST
                   ? gguf_fail(err, GGUF_E_BUSY,
                               "%s exists: an interrupted write must be "
                               "recovered first",
                               spath)
                   : gguf_sys_fail(err, errno, "cannot name %s", spath);
    gguf_fault_point(f, "fsync directory (stage)");
    return gguf_fsync_dirfd(sp->dfd, spath, err);
}

/* The journal's record of a stage: its length, its checksum. */
static void stage_record(uint8_t rec[16], uint64_t len, uint64_t h) {
    gguf_wr64(rec, len);
    gguf_wr64(rec + 8, h);
}

enum gguf_status gguf_stage_apply(gguf_ctx *ctx, gguf_stage *s,
                                  struct gguf_error *err) {
    struct gguf_faults f;
    struct stat sb;
    uint8_t rec[16];
    uint64_t h = 0;
    bool locked = false, linked = false, journaled = false;
    char *spath = NULL;
    gguf_faults_init(&f);
    enum gguf_status st = fill_gaps(ctx, s, err);
    if (st != GGUF_OK)
        goto out;
    if (!(spath = gguf_stage_path(s->jpath))) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    /* The journal and the stage, in s->dfd (their names share a start). */
    struct gguf_at jat = {s->dfd, s->jname, s->jpath};
    struct gguf_at sat = gguf_at_beside(&jat, spath);
    if ((st = gguf_commit_lock(ctx->fd, true, err)) != GGUF_OK)
        goto out;
    locked = true;
    if (fstat(ctx->fd, &sb) < 0) {
        st = gguf_sys_fail(err, errno, "cannot stat %s", ctx->path);
        goto out;
    }
    if ((st = stage_hash(s->fd, s->len, &h, err)) != GGUF_OK)
        goto out;
    if ((st = stage_link(s, &sat, &f, err)) != GGUF_OK)
        goto out;
    linked = true;
    stage_record(rec, s->len, h);
    struct gguf_jnl j = {.op = GGUF_JNL_PATCH,
                         .dev = (uint64_t)sb.st_dev,
                         .ino = (uint64_t)sb.st_ino,
                         .orig_size = (uint64_t)sb.st_size,
                         .orig_mtime_ns = ns_of(&sb.st_mtim),
                         .k = s->pos,
                         .new_hdr = rec,
                         .new_len = sizeof rec};
    if ((st = gguf_jnl_write(&jat, &j, &f, err)) != GGUF_OK)
        goto out;
    journaled = true;
    /* From here on a crash is finished forwards by recovery; a failure
     * leaves the journal for it (the file may hold part of the bytes). */
    st = gguf_stage_copy_in(s->fd, ctx->fd, s->pos, s->len, &f, err);
    if (st != GGUF_OK)
        goto out;
    if ((st = gguf_jnl_drop(&jat, &f, err)) != GGUF_OK)
        goto out;
    journaled = false;
    gguf_fault_point(&f, "unlink stage");
    if (unlinkat(s->dfd, sat.name, 0) < 0 && errno != ENOENT) {
        st = gguf_sys_fail(err, errno, "cannot remove %s", spath);
        goto out;
    }
    linked = false;
    gguf_data_adopt(ctx);
    /* Step 14: the removal durable (else a power cut may bring the stage
     * back, a stray file beside the model). */
    gguf_fault_point(&f, "fsync directory (stage removed)");
    st = gguf_fsync_dirfd(s->dfd, spath, err);
out:
    if (linked && !journaled && unlinkat(s->dfd, sat.name, 0) == 0)
        (void)gguf_fsync_dirfd(s->dfd, spath, NULL); /* never relied on */
    if (locked)
        (void)gguf_commit_lock(ctx->fd, false, NULL);
    free(spath);
    return st;
}

char *gguf_stage_path(const char *jpath) {
    size_t n = strlen(jpath);
    char *p = malloc(n + sizeof GGUF_STAGE_SUFFIX);
    if (p) {
        memcpy(p, jpath, n);
        memcpy(p + n, GGUF_STAGE_SUFFIX, sizeof GGUF_STAGE_SUFFIX);
    }
    return p;
}

uint64_t gguf_stage_checksum(int fd, uint64_t len, bool *ok) {
    uint64_t h = 0;
    *ok = stage_hash(fd, len, &h, NULL) == GGUF_OK;
    return h;
}
