/*
 * pending.c - a mount's edits kept durably until they are committed, so
 * that a daemon killed (kill -9, the OOM killer, a crash) before its
 * commit loses none: the next ggufs command finds them, says so, and can
 * apply or drop them.
 *
 * The record lives in the per-user state directory (state.c) as the
 * model's "pending" file.  Its body: one line
 *   "DEV INO SIZE MTIME_NS CTIME_NS\n"
 * (the identity of the GGUF the edits were made against, as the context
 * last saw it), then an edits file as gguf_edits_serialize writes it: the
 * keys that differ from the file (or every key, if the file could not be
 * read) and the keys removed, so that an edit costs what it changes.  The
 * identity guards the apply: edits made against one version of a file are
 * never applied to another (the edits file stays for the user to apply by
 * hand with any GGUF tool).
 */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum gguf_status gguf_pending_save(const gguf_ctx *ctx, gguf_ctx **disk,
                                   struct gguf_error *err) {
    struct gguf_buf b = {0};
    gguf_ctx *own = NULL;
    char line[128];
    enum gguf_status st;

    if (!ctx || !ctx->path)
        return gguf_fail(err, GGUF_E_INVAL, "the context has no file");
    int w = snprintf(line, sizeof line,
                     "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64
                     "\n",
                     (uint64_t)ctx->dev, (uint64_t)ctx->ino, ctx->file_size,
                     ctx->mtime_ns, ctx->ctime_ns);
    if ((st = gguf_buf_add(&b, line, (size_t)w)) != GGUF_OK) {
        st = gguf_fail(err, st, "out of memory saving the pending edits");
        goto out;
    }
    gguf_ctx **d = disk ? disk : &own;
    struct gguf_error e2 = {0};
    if (!*d && gguf_reopen(ctx, d, &e2) != GGUF_OK)
        *d = NULL; /* unreadable now: every key, no list of removals */
    st = gguf_edits_serialize(ctx, *d, *d != NULL, &b, err);
    if (st == GGUF_OK)
        st = gguf_state_write(ctx->path, GGUF_STATE_PENDING, b.p, b.len, err);
out:
    gguf_close(own);
    gguf_buf_free(&b);
    return st;
}

/* The identity of the file the edits were made against (the record's
 * first line); ctime is -1 in a record of an older ggufs (not checked). */
struct ident {
    uint64_t dev, ino, size;
    int64_t mtime, ctime;
};

/* Whether the file (dev, ino, size, mtime, ctime now) is still the one
 * the record was made against: the one rule both the apply and the
 * report use.  ctime catches an in-place write whose mtime was put back. */
static bool same_file(const struct ident *id, uint64_t dev, uint64_t ino,
                      uint64_t size, int64_t mtime, int64_t ctime) {
    return id->dev == dev && id->ino == ino && id->size == size &&
           id->mtime == mtime && (id->ctime < 0 || id->ctime == ctime);
}

/* Splits a pending record into its identity and its edits file
 * (internal.h: gguf_pending_parse, which fuzz_pending drives). */
static enum gguf_status parse_record(const struct gguf_buf *b, struct ident *id,
                                     const uint8_t **edits, size_t *n,
                                     struct gguf_error *err) {
    const uint8_t *nl = memchr(b->p, '\n', b->len < 128 ? b->len : 128);
    char line[128];
    if (!nl)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "pending edits record has no identity line");
    memcpy(line, b->p, (size_t)(nl - b->p));
    line[nl - b->p] = '\0';
    id->ctime = -1;
    int got =
        sscanf(line, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNd64 " %" SCNd64,
               &id->dev, &id->ino, &id->size, &id->mtime, &id->ctime);
    if (got != 4 && got != 5)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "pending edits record has a bad identity line");
    *edits = nl + 1;
    *n = b->len - (size_t)(nl + 1 - b->p);
    return GGUF_OK;
}

enum gguf_status gguf_pending_apply(gguf_ctx *ctx, bool *found,
                                    struct gguf_error *err) {
    struct gguf_buf b = {0};
    gguf_ctx *e = NULL;
    const uint8_t *edits;
    size_t n;
    struct ident id;
    enum gguf_status st;

    *found = false;
    if (!ctx || !ctx->path)
        return gguf_fail(err, GGUF_E_INVAL, "the context has no file");
    st = gguf_state_read(ctx->path, GGUF_STATE_PENDING, &b, found, err);
    if (st != GGUF_OK || !*found)
        goto out;
    if ((st = parse_record(&b, &id, &edits, &n, err)) != GGUF_OK)
        goto out;
    if (!same_file(&id, (uint64_t)ctx->dev, (uint64_t)ctx->ino, ctx->file_size,
                   ctx->mtime_ns, ctx->ctime_ns)) {
        st = gguf_fail(err, GGUF_E_CHANGED,
                       "the file changed since the pending edits were made "
                       "(inode %llu, %llu bytes then; inode %llu, %llu bytes "
                       "now): not applied",
                       (unsigned long long)id.ino, (unsigned long long)id.size,
                       (unsigned long long)ctx->ino,
                       (unsigned long long)ctx->file_size);
        goto out;
    }
    st = gguf_open_mem(&e, edits, n, GGUF_OPEN_ALLOW_NESTED, err);
    if (st != GGUF_OK)
        goto out;
    int64_t set, removed;
    st = gguf_edits_apply(ctx, e, NULL, &set, &removed, err);
out:
    if (e)
        gguf_close(e);
    gguf_buf_free(&b);
    return st;
}

/* The pending record of path: its bytes into b (the caller frees them,
 * after *e), its identity, and its edits file opened as *e; *found false
 * (GGUF_OK) when there is none. */
static enum gguf_status load_record(const char *path, struct gguf_buf *b,
                                    struct ident *id, gguf_ctx **e, bool *found,
                                    struct gguf_error *err) {
    const uint8_t *edits;
    size_t len;
    enum gguf_status st =
        gguf_state_read(path, GGUF_STATE_PENDING, b, found, err);
    if (st != GGUF_OK || !*found)
        return st;
    if ((st = parse_record(b, id, &edits, &len, err)) != GGUF_OK)
        return st;
    return gguf_open_mem(e, edits, len, GGUF_OPEN_ALLOW_NESTED, err);
}

enum gguf_status gguf_pending_describe(const char *path, char *out, size_t n,
                                       bool *found, bool *in_file, bool *stale,
                                       struct gguf_error *err) {
    struct gguf_buf b = {0};
    gguf_ctx *e = NULL, *disk = NULL;
    struct ident id;
    enum gguf_status st = load_record(path, &b, &id, &e, found, err);
    if (st != GGUF_OK || !*found)
        goto out;
    /* Count the keys that differ from the file as it is now, and the
     * removed ones it still has. */
    int64_t changed = 0, removed = 0, still = 0;
    struct gguf_error e2 = {0};
    if (gguf_open(&disk, path, GGUF_OPEN_ALLOW_NESTED, &e2) != GGUF_OK)
        disk = NULL;
    for (int64_t i = 0; i < gguf_n_kv(e); i++) {
        size_t kl, pl, dl;
        const char *k = gguf_kv_key(e, i, &kl);
        const uint8_t *p = gguf_kv_payload(e, i, &pl);
        if (gguf_edits_is_removal(e, i) &&
            gguf_kv_arr_type(e, i) == GGUF_TYPE_STRING) {
            removed = (int64_t)gguf_kv_arr_n(e, i);
            uint64_t off = 12;
            for (int64_t r = 0; disk && r < removed; r++) {
                size_t sl;
                const char *name = gguf_edits_next_name(p, &off, &sl);
                still += gguf_find_key(disk, name, sl) >= 0;
            }
            continue;
        }
        int64_t j = disk ? gguf_find_key(disk, k, kl) : -1;
        const uint8_t *d = j >= 0 ? gguf_kv_payload(disk, j, &dl) : NULL;
        changed += !d || dl != pl || memcmp(d, p, pl) != 0 ||
                   gguf_kv_type(disk, j) != gguf_kv_type(e, i);
    }
    snprintf(out, n, "%lld key%s set, %lld removed", (long long)changed,
             changed == 1 ? "" : "s", (long long)removed);
    *in_file = disk && changed == 0 && still == 0;
    struct stat sb;
    *stale =
        stat(path, &sb) != 0 ||
        !same_file(
            &id, (uint64_t)sb.st_dev, (uint64_t)sb.st_ino, (uint64_t)sb.st_size,
            (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec,
            (int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec);
out:
    if (e)
        gguf_close(e);
    if (disk)
        gguf_close(disk);
    gguf_buf_free(&b);
    return st;
}

enum gguf_status gguf_pending_parse(const uint8_t *p, size_t n,
                                    gguf_ctx **edits, struct gguf_error *err) {
    const struct gguf_buf b = {.p = (uint8_t *)p, .len = n, .cap = n};
    struct ident id;
    const uint8_t *e;
    size_t en;
    *edits = NULL;
    enum gguf_status st = parse_record(&b, &id, &e, &en, err);
    return st != GGUF_OK
               ? st
               : gguf_open_mem(edits, e, en, GGUF_OPEN_ALLOW_NESTED, err);
}

enum gguf_status gguf_pending_show(const char *path, size_t max_lines,
                                   struct gguf_buf *out, uint64_t *n_diff,
                                   bool *found, struct gguf_error *err) {
    struct gguf_buf b = {0};
    gguf_ctx *e = NULL, *before = NULL, *after = NULL;
    struct ident id;
    *n_diff = 0;
    enum gguf_status st = load_record(path, &b, &id, &e, found, err);
    if (st != GGUF_OK || !*found)
        goto out;
    /* The edits applied, in memory only, to the file as it is now (a
     * file gone or unreadable: to no key at all). */
    struct gguf_error e2 = {0};
    if (gguf_open(&before, path, GGUF_OPEN_ALLOW_NESTED, &e2) != GGUF_OK ||
        gguf_open(&after, path, GGUF_OPEN_ALLOW_NESTED, &e2) != GGUF_OK) {
        gguf_close(before);
        before = NULL;
        after = gguf_new(3);
        if (!after) {
            st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
            goto out;
        }
    }
    int64_t set, removed;
    if (st == GGUF_OK)
        st = gguf_edits_apply(after, e, NULL, &set, &removed, err);
    if (st == GGUF_OK)
        st = gguf_diff_summary(before, after, max_lines, out, n_diff, err);
out:
    gguf_close(e);
    gguf_close(before);
    gguf_close(after);
    gguf_buf_free(&b);
    return st;
}
