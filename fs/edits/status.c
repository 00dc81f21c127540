/*
 * status.c - what a mount tells about itself, and what the commands that
 * wait on it show:
 *
 *   - user.ggufs.status on the root: the mount's source, its pending edits
 *     by key (old and new values shortened: gguf_diff_summary), the last
 *     commit's outcome and the last lines of the log, which name every
 *     refusal with its reason (and line, where the text had one);
 *     `ggufs --status MNT` prints it (cli/mounted.c);
 *   - user.ggufs.progress on the root: "DONE TOTAL" bytes of the commit
 *     running now (a rewrite's copy; the library's progress callback,
 *     gguf_set_progress), ENODATA when none; `ggufs -u` polls it while its
 *     commit runs and draws it on a terminal (gfs_meter).
 *
 * Both attributes are answered without fs->lock for the progress (a
 * commit holds it for writing) and only to the mount's owner or root
 * (gfs_may_commit): with -o allow_other, other users may read the model,
 * not what its owner is editing.
 */
#include "../base/base.h"
#include "../ggufs.h"
#include "edits.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* Pending edits the status lists (the rest are counted; meta.tsv shows
 * every key): its whole text stays far below an attribute's 64 KiB. */
#define STATUS_EDITS 40
#define STATUS_MAX 60000

/* ---- the status -------------------------------------------------------- */

static int addf(struct gguf_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int addf(struct gguf_buf *b, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return EINVAL;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    return gguf_buf_add(b, line, len) == GGUF_OK ? 0 : ENOMEM;
}

/* The keys as they were before the edits: the file on disk (local,
 * read-write), else the header read at mount (an overlay's source,
 * never written; a remote file).  NULL if it cannot be read. */
static gguf_ctx *before_edits(struct gfs *fs) {
    gguf_ctx *c = NULL;
    struct gguf_error err = {0};
    if (!gfs_overlay_where(fs) &&
        gguf_fd(fs->ctx) >= 0) /* a remote one has none */
        return gguf_reopen(fs->ctx, &c, &err) == GGUF_OK ? c : NULL;
    return gguf_open_original(&c, fs->ctx, GGUF_OPEN_ALLOW_NESTED, &err) ==
                   GGUF_OK
               ? c
               : NULL;
}

/* The pending edits: lines of gguf_diff_summary; how many keys in *np
 * (0 if unknown).  Caller holds lock. */
static int status_edits(struct gfs *fs, struct gguf_buf *b, uint64_t *np) {
    struct gguf_error err = {0};
    uint64_t n = 0;
    *np = 0;
    struct gguf_buf d = {0};
    gguf_ctx *before = before_edits(fs);
    if (!before)
        return addf(b, "pending edits: unknown (the file cannot be read)\n");
    int e = 0;
    if (gguf_diff_summary(before, fs->ctx, STATUS_EDITS, &d, &n, &err) !=
        GGUF_OK)
        e = addf(b, "pending edits: unknown (%s)\n", err.msg);
    else if (!(e = addf(b, "pending edits: %" PRIu64 " key%s%s\n", n,
                        n == 1 ? "" : "s",
                        !n ? ""
                        : gfs_overlay_where(fs)
                            ? " (kept in the overlay, against the "
                              "source)"
                            : " (not committed yet)")) &&
             n) {
        e = gguf_buf_add(b, GGUF_DIFF_HEADER, strlen(GGUF_DIFF_HEADER)) ||
                    gguf_buf_add(b, d.p, d.len)
                ? ENOMEM
                : 0;
        if (!e && n > STATUS_EDITS)
            e = addf(b, "... and %" PRIu64 " more (meta.tsv shows every key)\n",
                     n - STATUS_EDITS);
    }
    gguf_buf_free(&d);
    gguf_close(before);
    *np = n;
    return e;
}

int gfs_status_model_edits(struct gfs *fs, const char *name,
                           struct gguf_buf *b) {
    struct gguf_buf m = {0};
    uint64_t n = 0;
    pthread_rwlock_rdlock(&fs->lock);
    int e = status_edits(fs, &m, &n);
    pthread_rwlock_unlock(&fs->lock);
    size_t from = b->len;
    if (!e && n)
        e = addf(b, "model %s: ", name) ||
                    gguf_buf_add(b, m.p, m.len) != GGUF_OK
                ? ENOMEM
                : 0;
    gguf_buf_free(&m);
    /* A store's names are the store's files' (hostile): no control byte
     * reaches a terminal, a name's newline breaks no line. */
    size_t name_end = from + 6 + strlen(name);
    for (size_t i = from; !e && i < b->len; i++)
        if ((b->p[i] < 0x20 &&
             ((b->p[i] != '\n' && b->p[i] != '\t') || i < name_end)) ||
            b->p[i] == 0x7f)
            b->p[i] = '?';
    return e;
}

/* The log's last lines, oldest first. */
static int status_log(struct gfs *fs, struct gguf_buf *b) {
    int e = 0;
    pthread_mutex_lock(&fs->log->lock);
    unsigned n = fs->log->n, first = n > GFS_LOG_RING ? n - GFS_LOG_RING : 0;
    e = addf(b, "log: %s%s\n", fs->log->foreground ? "stderr" : fs->log->where,
             n ? "; its last lines:" : " (nothing logged)");
    for (unsigned k = first; !e && k < n; k++)
        e = addf(b, "  %s\n", fs->log->ring[k % GFS_LOG_RING]);
    pthread_mutex_unlock(&fs->log->lock);
    return e;
}

/* The status text.  Caller holds lock (read). */
static int status_text(struct gfs *fs, struct gguf_buf *b) {
    const char *ov = gfs_overlay_where(fs);
    int e = addf(b, "source: %s\nmount: %s (%s%s%s)\n", fs->path, fs->mnt,
                 fs->readonly ? "read-only" : "read-write",
                 ov ? ", overlay " : "", ov ? ov : "");
    uint64_t n;
    if (!e)
        e = status_edits(fs, b, &n);
    if (!e)
        e = addf(b, "last commit: %s\n",
                 fs->edits.commit_msg[0] ? fs->edits.commit_msg
                                         : "none since the mount");
    if (!e)
        e = status_log(fs, b);
    if (!e && b->len > STATUS_MAX)
        b->len = STATUS_MAX; /* not reached: the parts are bounded */
    /* Control bytes of names and messages never reach a terminal. */
    for (size_t i = 0; i < b->len; i++)
        if ((b->p[i] < 0x20 && b->p[i] != '\n' && b->p[i] != '\t') ||
            b->p[i] == 0x7f)
            b->p[i] = '?';
    return e;
}

void gfs_progress_cb(void *user, uint64_t done, uint64_t total) {
    struct gfs *fs = user;
    atomic_store(&fs->prog_total, total);
    atomic_store(&fs->prog_done, done);
}

int gfs_status_xattr(fuse_req_t req, struct gfs *fs, fuse_ino_t ino,
                     const char *name, struct gguf_buf *out) {
    int progress = strcmp(name, "user.ggufs.progress") == 0;
    if (!progress && strcmp(name, "user.ggufs.status") != 0)
        return GFS_XATTR_OTHER;
    if (ino != GFS_INO_ROOT)
        return ENODATA;
    if (!gfs_may_commit(fs, req))
        return EACCES;
    if (progress) {
        uint64_t total = atomic_load(&fs->prog_total);
        uint64_t done = atomic_load(&fs->prog_done);
        return total ? addf(out, "%" PRIu64 " %" PRIu64, done, total) : ENODATA;
    }
    pthread_rwlock_rdlock(&fs->lock);
    int e = status_text(fs, out);
    pthread_rwlock_unlock(&fs->lock);
    return e;
}

/* ---- the commands' meter --------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void meter_init(struct gfs_meter *m) {
    memset(m, 0, sizeof *m);
    m->tty = isatty(STDERR_FILENO);
    m->start = now_s();
}

/* Bytes for people: "1.23 GB". */
static void human(double v, char *o, size_t n) {
    const char *u[] = {"B", "kB", "MB", "GB", "TB"};
    int k = 0;
    while (v >= 1000 && k < 4) {
        v /= 1000;
        k++;
    }
    snprintf(o, n, k ? "%.2f %s" : "%.0f %s", v, u[k]);
}

/* Bytes done of total drawn (total 0: over, the line is cleared); a
 * gguf_progress_fn. */
static void meter_show(void *meter, uint64_t done, uint64_t total) {
    struct gfs_meter *m = meter;
    double t = now_s() - m->start;
    if (!m->tty)
        return;
    if (!total) {
        if (m->shown)
            fputs("\r\033[K", stderr);
        m->shown = 0;
        return;
    }
    if (t < 1.0)
        return; /* short work is not worth a line */
    char d[32], a[32], r[32];
    human((double)done, d, sizeof d);
    human((double)total, a, sizeof a);
    human((double)done / t, r, sizeof r);
    fprintf(stderr, "\r\033[Kggufs: committing: %s / %s (%.0f%%), %s/s", d, a,
            100.0 * (double)done / (double)total, r);
    m->shown = 1;
}

static void *watch(void *arg) {
    struct gfs_meter *m = arg;
    char v[64];
    while (!atomic_load(&m->stop)) {
        ssize_t n = getxattr(m->mnt, "user.ggufs.progress", v, sizeof v - 1);
        unsigned long long done = 0, total = 0;
        if (n > 0) {
            v[n] = '\0';
            if (sscanf(v, "%llu %llu", &done, &total) != 2)
                total = 0;
        }
        meter_show(m, done, total);
        usleep(200000);
    }
    return NULL;
}

void gfs_meter_watch(struct gfs_meter *m, const char *mnt) {
    meter_init(m);
    m->mnt = mnt;
    if (m->tty && pthread_create(&m->thread, NULL, watch, m) == 0)
        m->running = 1;
}

void gfs_meter_stop(struct gfs_meter *m) {
    if (m->running) {
        atomic_store(&m->stop, 1);
        pthread_join(m->thread, NULL);
    }
    m->running = 0;
    meter_show(m, 0, 0);
}

enum gguf_status gfs_commit_metered(gguf_ctx *ctx, unsigned flags,
                                    struct gguf_commit_info *info,
                                    struct gguf_error *err) {
    struct gfs_meter meter; /* a rewrite's progress, on a terminal */
    meter_init(&meter);
    gguf_set_progress(ctx, meter_show, &meter);
    enum gguf_status st = gguf_commit(ctx, flags, info, err);
    gguf_set_progress(ctx, NULL, NULL);
    meter_show(&meter, 0, 0); /* the line cleared */
    return st;
}

const char *gfs_commit_how(const struct gguf_commit_info *info) {
    static const char *const how[] = {"nothing to do", "in place",
                                      "grown by inserting blocks",
                                      "grown by rewriting the file"};
    return how[info->how <= GGUF_COMMIT_REWRITE ? info->how : 0];
}
