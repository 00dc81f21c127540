/*
 * payload.c - validation of one metadata value's on-disk bytes (everything
 * after the uint32 type field), shared by the reader and the editor.
 *
 * Rules (docs/format.md, Limits and What ggml's reader refuses): strings
 * at most GGUF_MAX_STRING bytes, arrays at most GGUF_MAX_ARRAY elements, no
 * arrays of arrays unless the caller allows them (then at most
 * GGUF_MAX_NESTING levels), element types among the 13 known ones, bools
 * one byte.  ggml reads any nonzero bool byte
 * as true; the editor insists on 0/1, the reader may accept and count them.
 *
 * Hostile input: every length and count is compared with the bytes left
 * (by subtraction, never by an addition that could wrap) before it is used,
 * and an array's count is checked against the smallest possible size of its
 * elements before any loop, so a huge count in a small file fails at once
 * and the work done is linear in the bytes actually present.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

enum { SCAN_OK = 0, SCAN_MORE = 1, SCAN_ERR = -1 };

struct scan {
    const uint8_t *p;
    uint64_t avail, len;
    unsigned flags;
    const char *where;
    uint64_t file_off;
    struct gguf_error *err;
    struct gguf_pscan *out;
    char wq[GGUF_QUOTE_MAX];
};

#define U(x) ((unsigned long long)(x))

/* End of the file as an absolute offset, for messages. */
static uint64_t file_end(const struct scan *s) {
    return s->file_off + s->len;
}

/* k bytes at pos: SCAN_OK if they are in memory, SCAN_MORE if they are in
 * the file but not yet read, SCAN_ERR (with a message about `what`) if the
 * file ends first. */
static int have(struct scan *s, uint64_t pos, uint64_t k, const char *what) {
    if (pos > s->len || k > s->len - pos) {
        gguf_fail(
            s->err, GGUF_E_FORMAT,
            "key '%s': %s at offset %llu runs past the end of the file (%llu)",
            s->wq, what, U(s->file_off + pos), U(file_end(s)));
        return SCAN_ERR;
    }
    if (k > s->avail - pos) {
        s->out->need = pos + k;
        return SCAN_MORE;
    }
    return SCAN_OK;
}

/* Minimal on-disk size of one element of type t (an array is at least its
 * 12-byte header, a string its 8-byte length). */
static uint64_t min_size(uint32_t t) {
    if (t == GGUF_TYPE_STRING)
        return 8;
    if (t == GGUF_TYPE_ARRAY)
        return 12;
    return gguf_type_size((enum gguf_type)t);
}

static int bool_byte(struct scan *s, uint64_t pos) {
    uint8_t b = s->p[pos];
    if (b <= 1)
        return SCAN_OK;
    if (!(s->flags & GGUF_PCHECK_ANY_BOOL)) {
        gguf_fail(s->err, GGUF_E_FORMAT,
                  "key '%s': bool value at offset %llu is %u (must be 0 or 1)",
                  s->wq, U(s->file_off + pos), b);
        return SCAN_ERR;
    }
    if (s->out->odd_bools++ == 0) {
        s->out->odd_off = s->file_off + pos;
        s->out->odd_val = b;
    }
    return SCAN_OK;
}

static int string_at(struct scan *s, uint64_t *pos) {
    int r = have(s, *pos, 8, "string length");
    if (r != SCAN_OK)
        return r;
    uint64_t n = gguf_rd64(s->p + *pos);
    if (n > GGUF_MAX_STRING) {
        gguf_fail(
            s->err, GGUF_E_FORMAT,
            "key '%s': string length %llu at offset %llu exceeds the maximum (%llu)",
            s->wq, U(n), U(s->file_off + *pos), U(GGUF_MAX_STRING));
        return SCAN_ERR;
    }
    if (n > s->len - *pos - 8) {
        gguf_fail(
            s->err, GGUF_E_FORMAT,
            "key '%s': string length %llu at offset %llu runs past the end of the file (%llu)",
            s->wq, U(n), U(s->file_off + *pos), U(file_end(s)));
        return SCAN_ERR;
    }
    if (n > s->avail - *pos - 8) {
        s->out->need = *pos + 8 + n;
        return SCAN_MORE;
    }
    *pos += 8 + n;
    return SCAN_OK;
}

static int value_at(struct scan *s, uint32_t type, uint64_t *pos, int depth);

static int array_at(struct scan *s, uint64_t *pos, int depth) {
    uint64_t start = *pos;
    int r = have(s, start, 12, "array header");
    if (r != SCAN_OK)
        return r;
    uint32_t et = gguf_rd32(s->p + start);
    uint64_t n = gguf_rd64(s->p + start + 4);
    uint64_t at = s->file_off + start;
    if (et >= GGUF_TYPE_COUNT) {
        gguf_fail(s->err, GGUF_E_FORMAT,
                  "key '%s': array at offset %llu has unknown element type %u",
                  s->wq, U(at), et);
        return SCAN_ERR;
    }
    if (et == GGUF_TYPE_ARRAY) {
        if (!(s->flags & GGUF_PCHECK_NESTED)) {
            gguf_fail(s->err, GGUF_E_FORMAT,
                      "key '%s' is an array of arrays, which ggml rejects",
                      s->wq);
            return SCAN_ERR;
        }
        /* This array is at level depth+1; its elements would be deeper. */
        if (depth + 1 >= GGUF_MAX_NESTING) {
            gguf_fail(
                s->err, GGUF_E_FORMAT,
                "key '%s': arrays nested more than %d levels deep at offset %llu",
                s->wq, GGUF_MAX_NESTING, U(at));
            return SCAN_ERR;
        }
    }
    if (n > GGUF_MAX_ARRAY) {
        gguf_fail(
            s->err, GGUF_E_FORMAT,
            "key '%s': array of %llu elements at offset %llu exceeds the maximum (%llu)",
            s->wq, U(n), U(at), U(GGUF_MAX_ARRAY));
        return SCAN_ERR;
    }
    /* n <= 2^30 and min_size <= 12: the product cannot overflow. */
    uint64_t least = n * min_size(et), left = s->len - start - 12;
    if (least > left) {
        gguf_fail(
            s->err, GGUF_E_FORMAT,
            "key '%s': array of %llu %s elements at offset %llu needs at least "
            "%llu bytes, past the end of the file (%llu)",
            s->wq, U(n), gguf_type_name((enum gguf_type)et), U(at), U(least),
            U(file_end(s)));
        return SCAN_ERR;
    }
    uint64_t p = start + 12;
    if (et != GGUF_TYPE_STRING && et != GGUF_TYPE_ARRAY) {
        /* Fixed-size elements: the size is known; bools must be looked at. */
        if (least > s->avail - p) {
            s->out->need = p + least;
            return SCAN_MORE;
        }
        if (et == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (bool_byte(s, p + i) != SCAN_OK)
                    return SCAN_ERR;
        *pos = p + least;
        return SCAN_OK;
    }
    for (uint64_t i = 0; i < n; i++) {
        r = value_at(s, et, &p, depth + 1);
        if (r != SCAN_OK)
            return r;
    }
    *pos = p;
    return SCAN_OK;
}

/* depth: number of arrays enclosing this value. */
static int value_at(struct scan *s, uint32_t type, uint64_t *pos, int depth) {
    int r;
    switch (type) {
    case GGUF_TYPE_STRING:
        return string_at(s, pos);
    case GGUF_TYPE_ARRAY:
        return array_at(s, pos, depth);
    case GGUF_TYPE_BOOL:
        r = have(s, *pos, 1, "bool value");
        if (r == SCAN_OK && (r = bool_byte(s, *pos)) == SCAN_OK)
            *pos += 1;
        return r;
    default:
        if (type >= GGUF_TYPE_COUNT) {
            gguf_fail(s->err, GGUF_E_FORMAT,
                      "key '%s' at offset %llu has unknown value type %u",
                      s->wq, U(s->file_off + *pos), type);
            return SCAN_ERR;
        }
        {
            char what[32];
            snprintf(what, sizeof what, "%s value",
                     gguf_type_name((enum gguf_type)type));
            uint64_t k = gguf_type_size((enum gguf_type)type);
            r = have(s, *pos, k, what);
            if (r == SCAN_OK)
                *pos += k;
            return r;
        }
    }
}

enum gguf_status gguf_payload_scan(enum gguf_type type, const uint8_t *p,
                                   uint64_t avail, uint64_t len, unsigned flags,
                                   struct gguf_pscan *out, const char *where,
                                   uint64_t file_off, struct gguf_error *err) {
    struct scan s = {
        .p = p,
        .avail = avail < len ? avail : len,
        .len = len,
        .flags = flags,
        .where = where ? where : "?",
        .file_off = file_off,
        .err = err,
        .out = out,
    };
    *out = (struct gguf_pscan){0};
    if (!p && s.avail) /* NULL with bytes claimed present: refuse, never read */
        return gguf_fail(err, GGUF_E_INVAL, "no payload bytes given");
    gguf_quote(s.wq, sizeof s.wq, s.where, strlen(s.where));
    uint64_t pos = 0;
    int r = value_at(&s, (uint32_t)type, &pos, 0);
    if (r == SCAN_ERR)
        return err ? err->code : GGUF_E_FORMAT;
    if (r == SCAN_OK)
        out->used = pos;
    return GGUF_OK;
}

enum gguf_status gguf_payload_check(enum gguf_type type, const uint8_t *p,
                                    uint64_t len, bool allow_nested,
                                    uint64_t *used, const char *where,
                                    uint64_t file_off, struct gguf_error *err) {
    struct gguf_pscan out;
    /* With everything in memory (avail == len) the scan never asks for
     * more; the check below only guards that contract. */
    enum gguf_status st = gguf_payload_scan(
        type, p, len, len, allow_nested ? GGUF_PCHECK_NESTED : 0, &out, where,
        file_off, err);
    if (st != GGUF_OK)
        return st;
    if (out.need)
        return gguf_fail(err, GGUF_E_FORMAT, "key '%s': value incomplete",
                         where ? where : "?");
    if (used)
        *used = out.used;
    return GGUF_OK;
}
