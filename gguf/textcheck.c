/*
 * textcheck.c - validation of text that is still being written (a FUSE
 * write arrives in pieces), zero values, and key order.
 *
 * Why: `echo abc > meta/llama.block_count` must fail at write(), where the
 * shell sees the error, not at close(), which shells ignore.  Yet a 2 MB
 * token list arrives in many writes, so complete lines are checked as they
 * come and the remainder only once the file is closed.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Could text (no newline) still grow into a valid scalar of this type?
 * A final CR may be the start of a "\r\n" line end. */
static bool plausible_prefix(enum gguf_type type, const char *s, size_t n) {
    if (n && s[n - 1] == '\r')
        n--;
    switch (type) {
    case GGUF_TYPE_BOOL:
        return (n <= 4 && strncmp(s, "true", n) == 0) ||
               (n <= 5 && strncmp(s, "false", n) == 0) ||
               (n == 1 && (s[0] == '0' || s[0] == '1'));
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64:
        for (size_t i = 0; i < n; i++)
            if (!strchr("0123456789abcdefABCDEF+-.nityNITYxXpP()", s[i]) ||
                !s[i])
                return false;
        return true;
    default: /* integers; "-0" is a valid unsigned value, so '-' may lead */
        for (size_t i = 0; i < n; i++)
            if (!((s[i] >= '0' && s[i] <= '9') || (i == 0 && s[i] == '-')))
                return false;
        return true;
    }
}

enum gguf_status gguf_text_check_prefix(enum gguf_type type,
                                        enum gguf_type arr_type,
                                        const char *text, size_t len,
                                        size_t *checked,
                                        struct gguf_error *err) {
    struct gguf_buf scratch = {0};
    enum gguf_status st = GGUF_OK;

    if (type == GGUF_TYPE_STRING)
        return GGUF_OK; /* any bytes are a string */
    if (type == GGUF_TYPE_ARRAY) {
        if (*checked > len)
            *checked = 0;
        const char *end = text + len;
        const char *nl = NULL;
        for (const char *p = end; p > text + *checked; p--)
            if (p[-1] == '\n') {
                nl = p;
                break;
            }
        if (!nl)
            return GGUF_OK;
        const char *from = text + *checked;
        st = gguf_parse_text(type, arr_type, from, (size_t)(nl - from),
                             &scratch, err);
        if (st == GGUF_OK) {
            *checked = (size_t)(nl - text);
        } else if (*checked > 0 && st != GGUF_E_NOMEM) {
            /* Messages name lines of the whole text: count the lines
             * checked before (only now, on the way out, to keep checks
             * linear) and parse again from there for the message. */
            uint64_t first = 1;
            for (const char *q = text;
                 q < from && (q = memchr(q, '\n', (size_t)(from - q))); q++)
                first++;
            scratch.len = 0;
            st = gguf_parse_text_from(type, arr_type, from, (size_t)(nl - from),
                                      first, &scratch, err);
        }
        goto out;
    }
    const char *nl = memchr(text, '\n', len);
    if (nl) {
        st = gguf_parse_text(type, arr_type, text, len, &scratch, err);
        goto out;
    }
    if (!plausible_prefix(type, text, len))
        st = gguf_text_bad_value(err, GGUF_E_INVAL, 1, text, len, type);
out:
    gguf_buf_free(&scratch);
    return st;
}

enum gguf_status gguf_zero_payload(enum gguf_type type, enum gguf_type arr_type,
                                   struct gguf_buf *out) {
    uint8_t z[12] = {0};
    if (type == GGUF_TYPE_ARRAY) {
        gguf_wr32(z, (uint32_t)arr_type); /* count stays 0 */
        return gguf_buf_add(out, z, 12);
    }
    if (type == GGUF_TYPE_STRING)
        return gguf_buf_add(out, z, 8);
    size_t n = gguf_type_size(type);
    return n ? gguf_buf_add(out, z, n) : GGUF_E_INVAL;
}

enum gguf_status gguf_move_key(gguf_ctx *ctx, int64_t i, int64_t pos,
                               struct gguf_error *err) {
    if (i < 0 || i >= ctx->n_kv)
        return gguf_fail(err, GGUF_E_NOTFOUND, "no key at index %lld",
                         (long long)i);
    if (pos < 0)
        pos = 0;
    if (pos >= ctx->n_kv)
        pos = ctx->n_kv - 1;
    if (pos == i)
        return GGUF_OK;
    struct gguf_kv kv = ctx->kv[i];
    if (pos < i)
        memmove(&ctx->kv[pos + 1], &ctx->kv[pos],
                (size_t)(i - pos) * sizeof kv);
    else
        memmove(&ctx->kv[i], &ctx->kv[i + 1], (size_t)(pos - i) * sizeof kv);
    ctx->kv[pos] = kv;
    ctx->dirty = true;
    gguf_index_move(&ctx->kv_index, i, pos); /* positions only */
    return GGUF_OK;
}
