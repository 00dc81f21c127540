/*
 * saved.c - saving a context's edits aside when they cannot be committed
 * (gguf_save_edits), so that a failed commit loses no edit.
 *
 * The saved file is an edits file (its layout, writer and applier:
 * edits.c).  It is written beside the GGUF as
 * PATH.ggufs-edits-STAMP[-N].gguf (shortened as gguf_sidecar_path says
 * when too long), or in $TMPDIR (else /tmp) under the GGUF's base name
 * when that directory is not writable.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REMOVED_KEY GGUF_REMOVED_KEY
#define REMOVED_KEY_LEN (sizeof REMOVED_KEY - 1)

/* Creates the edits file beside prefix (a path whose directory is open
 * as dfd: the file is made through it, never by path; the name gets a
 * timestamp and, on a clash, a counter, and is shortened by
 * gguf_sidecar_path like every name beside a GGUF) exclusively, writes
 * and syncs it and its directory (else it is removed: the edits are
 * saved only once durable).  The name is put in out only if it fits. */
static enum gguf_status write_edits_at(int dfd, const char *prefix,
                                       const struct gguf_buf *b, mode_t mode,
                                       char *out, size_t n,
                                       struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char stamp[48], suffix[80];
    char *name = NULL;
    const char *leaf = NULL; /* name's last component */
    time_t now = time(NULL);
    struct tm tm;
    int fd = -1;

    if (!localtime_r(&now, &tm) ||
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm) == 0)
        snprintf(stamp, sizeof stamp, "%lld", (long long)now);
    /* Unpredictable: in a shared directory ($TMPDIR) another user could
     * otherwise create the names first and make the save fail. */
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd)
        rnd = (uint32_t)getpid() ^ (uint32_t)now;
    size_t sl = strlen(stamp);
    snprintf(stamp + sl, sizeof stamp - sl, "-%08x", (unsigned)rnd);
    for (int i = 1; fd < 0; i++) {
        if (i == 1)
            snprintf(suffix, sizeof suffix, ".ggufs-edits-%s.gguf", stamp);
        else
            snprintf(suffix, sizeof suffix, ".ggufs-edits-%s-%d.gguf", stamp,
                     i);
        free(name);
        name = gguf_sidecar_path(prefix, suffix);
        if (!name) {
            st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
            goto out;
        }
        if (strlen(name) >= n) {
            st =
                gguf_fail(err, GGUF_E_RANGE, "the edits file name is too long");
            goto out;
        }
        const char *slash = strrchr(prefix, '/');
        leaf = name + (slash ? (size_t)(slash - prefix) + 1 : 0);
        fd = openat(dfd, leaf,
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && (errno != EEXIST || i >= 1000)) {
            st = gguf_sys_fail(err, errno, "cannot create %s", name);
            goto out;
        }
    }
    /* The model's mode at most: the edits of a 0600 model stay private. */
    if (fchmod(fd, mode & 0666) < 0)
        st = gguf_sys_fail(err, errno, "cannot set the mode of %s", name);
    if (st == GGUF_OK)
        st = gguf_pwrite_full(fd, b->p, b->len, 0, "the saved edits", err);
    if (st == GGUF_OK && fsync(fd) < 0)
        st = gguf_sys_fail(err, errno, "cannot sync %s", name);
    int closed = close(fd); /* always: no descriptor leaks on failure */
    if (st == GGUF_OK && closed < 0)
        st = gguf_sys_fail(err, errno, "cannot close %s", name);
    fd = -1;
    if (st == GGUF_OK)
        st = gguf_fsync_dirfd(dfd, name, err);
    if (st != GGUF_OK) {
        if (unlinkat(dfd, leaf, 0) == 0)
            (void)gguf_fsync_dirfd(dfd, name, NULL);
        goto out;
    }
    memcpy(out, name, strlen(name) + 1);
out:
    if (fd >= 0)
        close(fd);
    free(name);
    return st;
}

enum gguf_status gguf_save_edits(const gguf_ctx *ctx, char *out, size_t n,
                                 struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    struct gguf_error scratch;
    struct gguf_buf b = {0};
    gguf_ctx *disk = NULL;
    char *copy = NULL, *prefix = NULL;

    if (!err)
        err = &scratch; /* its errno chooses the fallback directory */
    if (!ctx || !out || n == 0) {
        st =
            gguf_fail(err, GGUF_E_INVAL, "missing argument to gguf_save_edits");
        goto out;
    }
    out[0] = '\0';
    struct stat msb;
    mode_t mode =
        ctx->fd >= 0 && fstat(ctx->fd, &msb) == 0 ? msb.st_mode : 0600;
    if (ctx->path) {
        struct gguf_error e2 = {0};
        if (gguf_reopen(ctx, &disk, &e2) != GGUF_OK)
            disk = NULL; /* unreadable now: no list of removals */
    }
    st = gguf_edits_serialize(ctx, disk, false, &b, err);
    if (disk)
        gguf_close(disk);
    if (st != GGUF_OK)
        goto out;
    if (ctx->path) {
        /* A writer's context holds its directory; a reader's (an overlay
         * mount's model) looks it up by path. */
        const char *leaf;
        int dfd =
            ctx->dfd >= 0 ? ctx->dfd : gguf_open_dir_of(ctx->path, &leaf, err);
        st = dfd < 0 ? GGUF_E_IO
                     : write_edits_at(dfd, ctx->path, &b, mode, out, n, err);
        if (dfd >= 0 && dfd != ctx->dfd)
            close(dfd);
        if (st == GGUF_OK || st == GGUF_E_RANGE)
            goto out;
        int e = err ? err->sys_errno : 0;
        if (e != EACCES && e != EPERM && e != EROFS && e != ENOSPC &&
            e != EDQUOT && e != ENOENT)
            goto out;
    }
    /* The GGUF's directory is not writable (or there is none): use the
     * temporary directory, keeping the file's base name. */
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    const char *base = "ggufs";
    if (ctx->path) {
        copy = strdup(ctx->path);
        if (!copy) {
            st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
            goto out;
        }
        base = basename(copy);
    }
    if (asprintf(&prefix, "%s/%s", tmp, base) < 0) {
        prefix = NULL;
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    if (err)
        memset(err, 0, sizeof *err);
    const char *leaf;
    int tdfd = gguf_open_dir_of(prefix, &leaf, err);
    if (tdfd < 0) {
        st = err->code ? err->code : GGUF_E_IO;
        goto out;
    }
    st = write_edits_at(tdfd, prefix, &b, mode, out, n, err);
    close(tdfd);
out:
    gguf_buf_free(&b);
    free(copy);
    free(prefix);
    return st;
}

/* ---- applying a saved file (ggufs --apply-saved) -------------------- */

/* Whether key (kl bytes) is in the removal list of the edits file e. */
static bool listed_removed(const gguf_ctx *e, const char *key, size_t kl) {
    int64_t r = gguf_find_key(e, REMOVED_KEY, REMOVED_KEY_LEN);
    size_t pl;
    if (r < 0 || gguf_kv_arr_type(e, r) != GGUF_TYPE_STRING)
        return false;
    const uint8_t *p = gguf_kv_payload(e, r, &pl);
    for (uint64_t off = 12; off < pl;) { /* validated by the parser */
        size_t sl;
        const char *name = gguf_edits_next_name(p, &off, &sl);
        if (sl == kl && memcmp(name, key, kl) == 0)
            return true;
    }
    return false;
}

/* Refuses what cannot be a file of saved edits (tensors, an overlay's
 * keys) and a model with keys the file neither holds nor removes. */
static enum gguf_status saved_check(const gguf_ctx *ctx, const gguf_ctx *e,
                                    struct gguf_buf *names,
                                    struct gguf_error *err) {
    if (gguf_n_tensors(e) > 0)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "it has tensors: not a file of saved edits (those "
                         "are tensor-less)");
    for (int64_t i = 0; i < gguf_n_kv(e); i++) {
        size_t kl;
        const char *k = gguf_kv_key(e, i, &kl);
        if (gguf_key_is_overlay(k, kl))
            return gguf_fail(err, GGUF_E_INVAL,
                             "it is an overlay, not saved edits: 'ggufs "
                             "--overlay-apply MODEL OVERLAY' commits it");
    }
    int64_t a =
        gguf_find_key(e, GGUF_ALIGNMENT_KEY, sizeof GGUF_ALIGNMENT_KEY - 1);
    uint64_t av = 0;
    if (a >= 0 && (!gguf_kv_get_u64(e, a, &av) || av != gguf_alignment(ctx)))
        return gguf_fail(err, GGUF_E_PERM,
                         "they hold another " GGUF_ALIGNMENT_KEY
                         " than the model's %u: not applied",
                         (unsigned)gguf_alignment(ctx));
    for (int64_t i = 0; i < gguf_n_kv(ctx); i++) {
        size_t kl;
        const char *k = gguf_kv_key(ctx, i, &kl);
        if (!gguf_kv_is_padding(ctx, i) && gguf_find_key(e, k, kl) < 0 &&
            !listed_removed(e, k, kl))
            gguf_edits_list_name(names, k, kl);
    }
    if (names->len)
        return gguf_fail(err, GGUF_E_CHANGED,
                         "the model has keys the saved edits neither hold nor "
                         "remove (%.*s): they were saved from another version "
                         "of the model; not applied",
                         (int)names->len, (const char *)names->p);
    return GGUF_OK;
}

enum gguf_status gguf_saved_apply(gguf_ctx *ctx, const gguf_ctx *e,
                                  struct gguf_buf *names, int64_t *set,
                                  int64_t *nremoved, struct gguf_error *err) {
    *set = *nremoved = 0;
    names->len = 0;
    enum gguf_status st = saved_check(ctx, e, names, err);
    if (st == GGUF_OK)
        st = gguf_edits_apply(ctx, e, names, set, nremoved, err);
    return st;
}
