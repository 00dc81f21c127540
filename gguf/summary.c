/*
 * summary.c - one-line summaries of metadata: the lines of a mount's
 * meta.tsv and the shortened values `ggufs --status` and `ggufs
 * --show-pending` print.  The one place the shortening rule lives
 * (man/ggufs.1, META.TSV, states it for users; tests/mount_status.py
 * reimplements it from ggml's reading of the file):
 *
 *   - a number or bool: its text as in meta/ (floats shortest);
 *   - a string: its first bytes, whole UTF-8 characters (or single bytes
 *     that are not part of one) adding up to at most GGUF_SHORT_MAX bytes,
 *     escaped to one line as array elements are in meta/ (\n, \t, \\,
 *     \xHH); cut short, it ends in "...(+N bytes)", N the bytes left out;
 *   - an array: "[" elements (each as above) joined by ", " "]"; an
 *     element is added while the text so far is shorter than
 *     GGUF_SHORT_MAX bytes (the first always); the rest are
 *     "...(+N more)" before the "]".  An array of arrays shows none of
 *     its elements ("[...(+N more)]").
 *
 * So a line costs at most a few hundred bytes whatever the value: the
 * whole summary of a model is small even with a 150k-token vocabulary,
 * and making it reads only the elements it shows.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Appends a string's shortened, escaped form. */
static enum gguf_status short_string(const uint8_t *s, uint64_t n,
                                     struct gguf_buf *out) {
    size_t shown = 0;
    while (shown < n) {
        size_t seq = s[shown] >= 0x80 ? gguf_utf8_seq(s + shown, n - shown) : 0;
        size_t adv = seq ? seq : 1;
        if (shown + adv > GGUF_SHORT_MAX)
            break;
        shown += adv;
    }
    enum gguf_status st = gguf_escape_line(s, shown, out);
    if (st == GGUF_OK && shown < n) {
        char tail[48];
        int w = snprintf(tail, sizeof tail, "...(+%" PRIu64 " bytes)",
                         n - (uint64_t)shown);
        st = gguf_buf_add(out, tail, (size_t)w);
    }
    return st;
}

/* Appends one scalar's text (no newline): the codec's rendering. */
static enum gguf_status short_scalar(enum gguf_type t, const uint8_t *p,
                                     size_t n, struct gguf_buf *out,
                                     struct gguf_error *err) {
    size_t mark = out->len;
    enum gguf_status st = gguf_render(t, p, n, out, err);
    if (st == GGUF_OK && out->len > mark && out->p[out->len - 1] == '\n')
        out->len--;
    return st;
}

/* The array whose payload is p (validated: element type, count, then the
 * elements). */
static enum gguf_status short_array(const uint8_t *p, size_t len,
                                    struct gguf_buf *out,
                                    struct gguf_error *err) {
    enum gguf_type et = (enum gguf_type)gguf_rd32(p);
    uint64_t count = gguf_rd64(p + 4), k = 0, off = 12;
    size_t start = out->len, esz = gguf_type_size(et);
    enum gguf_status st = gguf_buf_add(out, "[", 1);
    for (; st == GGUF_OK && k < count && et != GGUF_TYPE_ARRAY; k++) {
        if (k > 0 && out->len - start >= GGUF_SHORT_MAX)
            break;
        if (k > 0 && (st = gguf_buf_add(out, ", ", 2)) != GGUF_OK)
            break;
        if (et == GGUF_TYPE_STRING) {
            uint64_t sl = gguf_rd64(p + off);
            st = short_string(p + off + 8, sl, out);
            off += 8 + sl;
        } else {
            st = short_scalar(et, p + off, esz, out, err);
            off += esz;
        }
    }
    (void)len; /* validated when the value was read or set */
    if (st == GGUF_OK && k < count) {
        char tail[48];
        int w = snprintf(tail, sizeof tail, "%s...(+%" PRIu64 " more)",
                         k ? ", " : "", count - k);
        st = gguf_buf_add(out, tail, (size_t)w);
    }
    if (st == GGUF_OK)
        st = gguf_buf_add(out, "]", 1);
    return st;
}

enum gguf_status gguf_value_short(enum gguf_type type, const uint8_t *payload,
                                  size_t len, struct gguf_buf *out,
                                  struct gguf_error *err) {
    size_t mark = out->len;
    enum gguf_status st;
    if (type == GGUF_TYPE_STRING)
        st = len >= 8 ? short_string(payload + 8, gguf_rd64(payload), out)
                      : GGUF_E_FORMAT;
    else if (type == GGUF_TYPE_ARRAY)
        st = len >= 12 ? short_array(payload, len, out, err) : GGUF_E_FORMAT;
    else
        st = short_scalar(type, payload, len, out, err);
    if (st == GGUF_OK)
        return GGUF_OK;
    out->len = mark;
    return err && err->code ? err->code
                            : gguf_fail(err, st, "cannot summarize a value");
}

enum gguf_status gguf_kv_summary(const gguf_ctx *ctx, int64_t i,
                                 struct gguf_buf *out, struct gguf_error *err) {
    size_t klen, plen, mark = out->len;
    const char *key = gguf_kv_key(ctx, i, &klen);
    const uint8_t *p = gguf_kv_payload(ctx, i, &plen);
    enum gguf_type t = gguf_kv_type(ctx, i);
    char ty[64], count[32];
    gguf_kv_type_str(ctx, i, ty, sizeof ty);
    snprintf(count, sizeof count, "%" PRIu64,
             t == GGUF_TYPE_ARRAY ? gguf_kv_arr_n(ctx, i) : (uint64_t)1);
    enum gguf_status st = gguf_name_escape(key, klen, out);
    if (st == GGUF_OK)
        st = gguf_buf_add(out, "\t", 1);
    if (st == GGUF_OK)
        st = gguf_buf_add(out, ty, strlen(ty));
    if (st == GGUF_OK)
        st = gguf_buf_add(out, "\t", 1);
    if (st == GGUF_OK)
        st = gguf_buf_add(out, count, strlen(count));
    if (st == GGUF_OK)
        st = gguf_buf_add(out, "\t", 1);
    if (st == GGUF_OK)
        st = gguf_value_short(t, p, plen, out, err);
    if (st == GGUF_OK)
        st = gguf_buf_add(out, "\n", 1);
    if (st == GGUF_OK)
        return GGUF_OK;
    out->len = mark;
    return err && err->code ? err->code
                            : gguf_fail(err, st, "cannot summarize a key");
}

/* Appends value i of c shortened, or what (no value). */
static enum gguf_status diff_value(const gguf_ctx *c, int64_t i,
                                   const char *what, struct gguf_buf *out,
                                   struct gguf_error *err) {
    if (i < 0)
        return gguf_buf_add(out, what, strlen(what));
    size_t pl;
    const uint8_t *p = gguf_kv_payload(c, i, &pl);
    return gguf_value_short(gguf_kv_type(c, i), p, pl, out, err);
}

/* One line of a diff: key k of before (bi, or -1) and after (ai, or -1). */
static enum gguf_status diff_line(const gguf_ctx *before, int64_t bi,
                                  const gguf_ctx *after, int64_t ai,
                                  struct gguf_buf *out,
                                  struct gguf_error *err) {
    const gguf_ctx *c = ai >= 0 ? after : before;
    int64_t i = ai >= 0 ? ai : bi;
    size_t klen;
    const char *key = gguf_kv_key(c, i, &klen);
    char ty[64];
    gguf_kv_type_str(c, i, ty, sizeof ty);
    enum gguf_status st = gguf_name_escape(key, klen, out);
    if (st == GGUF_OK && (st = gguf_buf_add(out, "\t", 1)) == GGUF_OK &&
        (st = gguf_buf_add(out, ty, strlen(ty))) == GGUF_OK &&
        (st = gguf_buf_add(out, "\t", 1)) == GGUF_OK &&
        (st = diff_value(before, bi, "(new)", out, err)) == GGUF_OK &&
        (st = gguf_buf_add(out, "\t", 1)) == GGUF_OK &&
        (st = diff_value(after, ai, "(removed)", out, err)) == GGUF_OK)
        st = gguf_buf_add(out, "\n", 1);
    return st;
}

enum gguf_status gguf_diff_summary(const gguf_ctx *before,
                                   const gguf_ctx *after, size_t max_lines,
                                   struct gguf_buf *out, uint64_t *n_diff,
                                   struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    *n_diff = 0;
    for (int64_t i = 0; st == GGUF_OK && i < gguf_n_kv(after); i++) {
        size_t klen;
        const char *key = gguf_kv_key(after, i, &klen);
        int64_t j = before ? gguf_find_key(before, key, klen) : -1;
        if (gguf_kv_is_padding(after, i) || gguf_kv_same(before, j, after, i))
            continue;
        if ((*n_diff)++ < max_lines)
            st = diff_line(before, j, after, i, out, err);
    }
    for (int64_t j = 0; st == GGUF_OK && before && j < gguf_n_kv(before); j++) {
        size_t klen;
        const char *key = gguf_kv_key(before, j, &klen);
        if (gguf_kv_is_padding(before, j) ||
            gguf_find_key(after, key, klen) >= 0)
            continue;
        if ((*n_diff)++ < max_lines)
            st = diff_line(before, j, after, -1, out, err);
    }
    if (st == GGUF_OK)
        return GGUF_OK;
    return err && err->code ? err->code
                            : gguf_fail(err, st, "cannot summarize the edits");
}
