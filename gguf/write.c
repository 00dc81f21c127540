/*
 * write.c - serializing a context: the header (for in-place commits and new
 * files) and whole files (fixtures).
 *
 * Layout is ggml's writer's: magic, version, counts, KVs in stored order,
 * tensor infos in stored order, zeros to the alignment.  A header read by
 * gguf_open and written back at its own data offset is byte-identical,
 * because values are kept as their on-disk payloads.
 *
 * The filler KV (GGUF_FILLER_KEY) is never serialized in place: it is
 * skipped wherever it is and, when the data section must start further
 * than the padded header, emitted last and sized to land exactly there.
 *
 * The byte layout of a header's parts (the preamble, a GGUF string, a KV
 * record) is written by the gguf_put_* functions here and nowhere else;
 * the saved-edits file (saved.c) uses them too.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Filler sizes: key (8 + 13) + type (4) + value. */
#define FILLER_KEY_LEN (sizeof GGUF_FILLER_KEY - 1)
#define FILLER_FIXED (8 + FILLER_KEY_LEN + 4)
#define FILLER_U8 (FILLER_FIXED + 1)      /* 26: a uint8 value */
#define FILLER_STR_MIN (FILLER_FIXED + 8) /* 33: an empty string */

static bool is_filler(const struct gguf_kv *kv) {
    return gguf_kv_padding(kv);
}

uint64_t gguf_kv_record_size(uint64_t klen, uint64_t vlen) {
    return 8 + klen + 4 + vlen;
}

static uint64_t kv_bytes(const struct gguf_kv *kv) {
    return gguf_kv_record_size(kv->key_len, kv->val_len);
}

static uint64_t tensor_info_bytes(const struct gguf_tensor *t) {
    return 8 + t->name_len + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
}

/* Contract detail: the filler KV is not counted, since the writer drops or
 * re-sizes it; this is the smallest header the current content needs. */
uint64_t gguf_header_size(const gguf_ctx *ctx) {
    uint64_t n = 4 + 4 + 8 + 8;
    for (int64_t i = 0; i < ctx->n_kv; i++)
        if (!is_filler(&ctx->kv[i]))
            n += kv_bytes(&ctx->kv[i]);
    for (int64_t i = 0; i < ctx->n_t; i++)
        n += tensor_info_bytes(&ctx->t[i]);
    return n;
}

static uint8_t *put(uint8_t *p, const void *src, size_t n) {
    if (n)
        memcpy(p, src, n);
    return p + n;
}

static uint8_t *put32(uint8_t *p, uint32_t v) {
    gguf_wr32(p, v);
    return p + 4;
}

static uint8_t *put64(uint8_t *p, uint64_t v) {
    gguf_wr64(p, v);
    return p + 8;
}

uint8_t *gguf_put_preamble(uint8_t *p, uint32_t version, uint64_t n_tensors,
                           uint64_t n_kv) {
    p = put(p, GGUF_MAGIC, 4);
    p = put32(p, version);
    p = put64(p, n_tensors);
    return put64(p, n_kv);
}

uint8_t *gguf_put_str(uint8_t *p, const void *s, uint64_t n) {
    p = put64(p, n);
    return put(p, s, (size_t)n);
}

uint8_t *gguf_put_kv(uint8_t *p, const char *key, uint64_t klen, uint32_t type,
                     const void *val, uint64_t vlen) {
    p = gguf_put_str(p, key, klen);
    p = put32(p, type);
    return put(p, val, (size_t)vlen);
}

enum filler_mode { FILL_NONE, FILL_VERBATIM, FILL_STRING, FILL_U8 };

/* Chooses how the header reaches target bytes.  In order:
 *  - target 0: the minimal header (no filler) padded to the alignment;
 *  - an existing filler re-emitted unchanged if that lands on target (keeps
 *    a file we wrote byte-identical, and any filler that is already last);
 *  - no filler when the padded header is exactly target;
 *  - a string filler of exactly the slack (>= 33 bytes), leaving no padding;
 *  - a uint8 filler (26 bytes) plus zero padding, when that pads to target;
 *  - otherwise GGUF_E_RANGE: the caller must move the data (grow the file).
 * The data start is always the padded end of the tensor infos, so target
 * must be a multiple of the alignment. */
/* The largest header ggufs makes (a real model's is tens of MiB). */
#define GGUF_MAX_HEADER_WRITE ((uint64_t)1 << 30)

static enum gguf_status plan(const gguf_ctx *ctx, uint64_t *target,
                             enum filler_mode *mode, int64_t *filler,
                             uint64_t *str_len, struct gguf_error *err) {
    uint32_t a = gguf_ctx_alignment(ctx);
    uint64_t h = gguf_header_size(ctx);
    uint64_t padded = gguf_align_up(h, a);

    *mode = FILL_NONE;
    *filler = -1;
    *str_len = 0;
    bool foreign = false; /* someone else's key of the filler's name */
    for (int64_t i = 0; i < ctx->n_kv; i++) {
        const struct gguf_kv *kv = &ctx->kv[i];
        if (is_filler(kv))
            *filler = i;
        else if (gguf_key_is_filler(kv->key, (size_t)kv->key_len))
            foreign = true;
    }

    if (*target == 0) {
        *target = padded;
        goto check;
    }
    if (*target % a != 0)
        return gguf_fail(
            err, GGUF_E_RANGE,
            "data offset %llu is not a multiple of the alignment %u",
            (unsigned long long)*target, a);
    if (*target < padded)
        return gguf_fail(err, GGUF_E_RANGE,
                         "header needs %llu bytes (%llu padded), more than the "
                         "%llu before the tensor data",
                         (unsigned long long)h, (unsigned long long)padded,
                         (unsigned long long)*target);
    if (*filler >= 0 &&
        gguf_align_up(h + kv_bytes(&ctx->kv[*filler]), a) == *target) {
        *mode = FILL_VERBATIM;
        goto check;
    }
    if (*target == padded)
        goto check;
    if (foreign)
        return gguf_fail(err, GGUF_E_PERM,
                         "the header needs padding, and ggufs pads with a key "
                         "named %s, which this file already has as a key of "
                         "its own: rename or remove that key first",
                         GGUF_FILLER_KEY);

    uint64_t slack = *target - h;
    if (slack >= FILLER_STR_MIN) {
        *str_len = slack - FILLER_STR_MIN;
        if (*str_len > GGUF_MAX_STRING)
            return gguf_fail(err, GGUF_E_RANGE,
                             "%llu bytes of header slack are too many for a "
                             "filler string",
                             (unsigned long long)slack);
        *mode = FILL_STRING;
    } else if (slack >= FILLER_U8 &&
               gguf_align_up(h + FILLER_U8, a) == *target) {
        *mode = FILL_U8;
    } else {
        return gguf_fail(err, GGUF_E_RANGE,
                         "header of %llu bytes cannot be filled to end exactly "
                         "at %llu (alignment %u): a filler needs %u to %u or "
                         "at least %u bytes",
                         (unsigned long long)h, (unsigned long long)*target, a,
                         (unsigned)FILLER_U8,
                         (unsigned)(FILLER_U8 + (a > 7 ? 6 : a - 1)),
                         (unsigned)FILLER_STR_MIN);
    }
check:
    /* The header is made in memory: a file may not drive that past
     * GGUF_MAX_HEADER_WRITE (a general.alignment of 2^31 pads even an empty
     * header to 2 GiB; found by fuzz_header). */
    if (*target > GGUF_MAX_HEADER_WRITE)
        return gguf_fail(err, GGUF_E_RANGE,
                         "a header of %llu bytes (alignment %u) is more than "
                         "ggufs writes (%llu)",
                         (unsigned long long)*target, a,
                         (unsigned long long)GGUF_MAX_HEADER_WRITE);
    if (*target > SIZE_MAX)
        return gguf_fail(err, GGUF_E_NOMEM,
                         "header of %llu bytes does not fit in memory",
                         (unsigned long long)*target);
    return GGUF_OK;
}

enum gguf_status gguf_write_header(const gguf_ctx *ctx, uint64_t target,
                                   struct gguf_buf *out,
                                   struct gguf_error *err) {
    enum gguf_status st;
    enum filler_mode mode;
    int64_t filler;
    uint64_t str_len;

    if (!ctx || !out)
        return gguf_fail(err, GGUF_E_INVAL,
                         "missing argument to gguf_write_header");
    st = plan(ctx, &target, &mode, &filler, &str_len, err);
    if (st != GGUF_OK)
        goto out;
    st = gguf_buf_reserve(out, (size_t)target);
    if (st != GGUF_OK) {
        st = gguf_fail(err, st, "out of memory for a header of %llu bytes",
                       (unsigned long long)target);
        goto out;
    }

    uint8_t *start = out->p + out->len, *p = start;
    uint64_t n_kv = (uint64_t)ctx->n_kv - (filler >= 0) + (mode != FILL_NONE);
    p = gguf_put_preamble(p, ctx->version, (uint64_t)ctx->n_t, n_kv);
    for (int64_t i = 0; i < ctx->n_kv; i++) {
        const struct gguf_kv *kv = &ctx->kv[i];
        if (i != filler)
            p = gguf_put_kv(p, kv->key, kv->key_len, kv->type, kv->val,
                            kv->val_len);
    }
    if (mode == FILL_VERBATIM) {
        const struct gguf_kv *kv = &ctx->kv[filler];
        p = gguf_put_kv(p, GGUF_FILLER_KEY, FILLER_KEY_LEN, kv->type, kv->val,
                        kv->val_len);
    } else if (mode == FILL_STRING) {
        /* Spaces, so that dumping tools print something harmless. */
        p = gguf_put_kv(p, GGUF_FILLER_KEY, FILLER_KEY_LEN, GGUF_TYPE_STRING,
                        NULL, 0);
        p = put64(p, str_len);
        memset(p, ' ', (size_t)str_len);
        p += str_len;
    } else if (mode == FILL_U8) {
        p = gguf_put_kv(p, GGUF_FILLER_KEY, FILLER_KEY_LEN, GGUF_TYPE_UINT8, "",
                        1);
    }
    for (int64_t i = 0; i < ctx->n_t; i++) {
        const struct gguf_tensor *t = &ctx->t[i];
        p = gguf_put_str(p, t->name, t->name_len);
        p = put32(p, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            p = put64(p, (uint64_t)t->ne[d]);
        p = put32(p, t->type);
        p = put64(p, t->offset);
    }
    /* plan() made h + filler <= target, so p never passes start + target. */
    memset(p, 0, (size_t)(target - (uint64_t)(p - start)));
    out->len += (size_t)target;
out:
    return st;
}

/* Errors of system calls, as gguf_sys_fail words them (durable.c). */
static enum gguf_status sys_fail(struct gguf_error *err, const char *what,
                                 const char *path) {
    return gguf_sys_fail(err, errno, "%s %s", what, path);
}

/* The file appears at path complete or not at all: it is written to a
 * temporary name in the same directory, synced, then renamed over path
 * (gguf_replace, durable.c).
 * The file is first extended to its full size, so tensors whose data(i)
 * is NULL, and the padding between tensors, are holes (zeros, no space). */
enum gguf_status gguf_write_file(const gguf_ctx *ctx, const char *path,
                                 const void *(*data)(void *u, int64_t i),
                                 void *u, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    struct gguf_buf hdr = {0};
    struct gguf_replace r = {.dfd = -1, .shown = path, .same_as = -1, .fd = -1};
    char *tmp = NULL;

    if (!ctx || !path) {
        st =
            gguf_fail(err, GGUF_E_INVAL, "missing argument to gguf_write_file");
        goto out;
    }
    st = gguf_write_header(ctx, 0, &hdr, err);
    if (st != GGUF_OK)
        goto out;

    uint32_t a = gguf_ctx_alignment(ctx);
    uint64_t data_start = hdr.len, end = data_start;
    for (int64_t i = 0; i < ctx->n_t; i++) {
        const struct gguf_tensor *t = &ctx->t[i];
        uint64_t e = data_start + t->offset + gguf_align_up(t->size, a);
        if (e < data_start + t->offset) {
            char q[GGUF_QUOTE_MAX];
            gguf_quote(q, sizeof q, t->name, (size_t)t->name_len);
            st = gguf_fail(err, GGUF_E_RANGE, "tensor '%s' ends past 2^64", q);
            goto out;
        }
        if (e > end)
            end = e;
    }
    if (end > (uint64_t)INT64_MAX) {
        st = gguf_fail(err, GGUF_E_RANGE, "file of %llu bytes is too large",
                       (unsigned long long)end);
        goto out;
    }

    /* The new file: NAME.tmp-RANDOM beside path, 0644. */
    if ((r.dfd = gguf_open_dir_of(path, &r.name, err)) < 0) {
        st = err && err->code ? err->code : GGUF_E_IO;
        goto out;
    }
    tmp = gguf_sidecar_path(r.name, ".tmp-XXXXXXXX");
    if (!tmp || strlen(tmp) >= sizeof r.tmp) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    memcpy(r.tmp, tmp, strlen(tmp) + 1);
    st = gguf_replace_open(&r, 0644, GGUF_REPLACE_RANDOM, err);
    if (st != GGUF_OK)
        goto out;
    st = gguf_pwrite_full(r.fd, hdr.p, hdr.len, 0, "the header", err);
    if (st != GGUF_OK)
        goto out;
    if (ftruncate(r.fd, (off_t)end) < 0) {
        st = sys_fail(err, "cannot extend", r.tmp);
        goto out;
    }
    for (int64_t i = 0; data && i < ctx->n_t; i++) {
        const struct gguf_tensor *t = &ctx->t[i];
        const void *p = data(u, i);
        if (!p)
            continue;
        st = gguf_pwrite_full(r.fd, p, t->size, data_start + t->offset, t->name,
                              err);
        if (st != GGUF_OK)
            goto out;
    }
    st = gguf_replace_commit(&r, err);
out:
    gguf_replace_end(&r);
    if (r.dfd >= 0)
        close(r.dfd);
    free(tmp);
    gguf_buf_free(&hdr);
    return st;
}
