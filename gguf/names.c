/*
 * names.c - key and tensor names <-> file names (man/ggufs.1, FILE NAMES).
 *
 * Escaping: '%' -> %25, '/' -> %2F, bytes below 0x20, 0x7f and bytes that
 * are not part of valid UTF-8 -> %HH (upper-case hex); the names "." and
 * ".." -> %2E and %2E%2E.  Everything else, valid multi-byte UTF-8
 * included, passes through.
 *
 * Long names: when the escaped form is longer than 255 bytes (NAME_MAX) it
 * is cut and "%~" plus 16 lower-case hex digits of the 64-bit FNV-1a hash of
 * the whole (unescaped) name are appended.  The cut keeps at most 237 bytes
 * so that the result is at most 237 + 2 + 16 = 255 bytes (gguf.h and the man
 * page say "238", which would give 256), and never falls inside a %HH or a
 * UTF-8 sequence.  "%~" cannot occur in an unhashed escaped name ('%' is
 * always followed by two hex digits there), so hashed and unhashed names
 * never collide.
 *
 * The empty name, which cannot be a file name, is given the same hashed
 * form with an empty prefix: "%~" and the hash of "".
 *
 * Unescaping accepts only canonical file names, i.e. exactly the outputs of
 * gguf_name_escape (upper-case hex, no needless escapes such as %41, no raw
 * bytes that should have been escaped), so that every name has one file
 * name and no two file names lead to the same key.
 */
#include "internal.h"

#include <string.h>

#define NAME_MAX_BYTES 255
#define HASH_SUFFIX 18                         /* "%~" + 16 hex digits */
#define CUT_MAX (NAME_MAX_BYTES - HASH_SUFFIX) /* 237 */

static const char HEXU[] = "0123456789ABCDEF";

static enum gguf_status add_pct(struct gguf_buf *out, uint8_t c) {
    char e[3] = {'%', HEXU[c >> 4], HEXU[c & 15]};
    return gguf_buf_add(out, e, 3);
}

enum gguf_status gguf_name_escape(const char *name, size_t len,
                                  struct gguf_buf *out) {
    const uint8_t *s = (const uint8_t *)name;
    size_t start = out->len;
    enum gguf_status st = GGUF_OK;

    if (len == 1 && s[0] == '.')
        return gguf_buf_add(out, "%2E", 3);
    if (len == 2 && s[0] == '.' && s[1] == '.')
        return gguf_buf_add(out, "%2E%2E", 6);
    if ((st = gguf_buf_reserve(out, len < 256 ? len + 1 : 256)) !=
        GGUF_OK) /* never NULL: out->p + start below */
        return st;

    /* Escape, but stop producing once past NAME_MAX: the rest would be cut
     * anyway (keeps a hostile 1 GB name from costing 3 GB). */
    size_t i = 0;
    while (i < len && out->len - start <= NAME_MAX_BYTES) {
        uint8_t c = s[i];
        size_t k = c < 0x20 || c == 0x7f || c == '%' || c == '/'
                       ? 0
                       : gguf_utf8_seq(s + i, len - i);
        if (k == 0) {
            st = add_pct(out, c);
            k = 1;
        } else {
            st = gguf_buf_add(out, s + i, k);
        }
        if (st != GGUF_OK)
            goto fail;
        i += k;
    }
    if (i == len && len > 0 && out->len - start <= NAME_MAX_BYTES)
        return GGUF_OK;

    /* Too long (or empty): keep whole tokens (a %HH or one UTF-8 sequence)
     * up to CUT_MAX bytes, then "%~" and the hash of the whole name. */
    const uint8_t *e = out->p + start;
    size_t avail = out->len - start, pos = 0;
    while (pos < avail) {
        size_t k = e[pos] == '%' ? 3 : gguf_utf8_seq(e + pos, avail - pos);
        if (k == 0)
            k = 1; /* cannot happen: the escaped form is valid UTF-8 */
        if (pos + k > CUT_MAX)
            break;
        pos += k;
    }
    out->len = start + pos;
    uint64_t h = gguf_hash(name, len);
    char suf[HASH_SUFFIX];
    suf[0] = '%';
    suf[1] = '~';
    for (int j = 0; j < 16; j++)
        suf[2 + j] = "0123456789abcdef"[(h >> (60 - 4 * j)) & 15];
    if ((st = gguf_buf_add(out, suf, sizeof suf)) != GGUF_OK)
        goto fail;
    return GGUF_OK;
fail:
    out->len = start;
    return st;
}

/* A printable copy of at most 64 bytes of s for messages. */
static const char *shown(const char *s, size_t n, char *o) {
    size_t k = 0;
    for (size_t i = 0; i < n && i < 64; i++)
        o[k++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (n > 64) {
        memcpy(o + k, "...", 3);
        k += 3;
    }
    o[k] = 0;
    return o;
}

enum gguf_status gguf_name_unescape(const char *fname, size_t len,
                                    struct gguf_buf *out,
                                    struct gguf_error *err) {
    size_t start = out->len;
    enum gguf_status st;
    struct gguf_buf canon = {0};
    char s1[72], s2[72];

    if (len == 0)
        return gguf_fail(err, GGUF_E_INVAL, "empty file name");
    if (len > NAME_MAX_BYTES)
        return gguf_fail(err, GGUF_E_INVAL,
                         "file name of %zu bytes is longer than %d", len,
                         NAME_MAX_BYTES);
    if ((st = gguf_buf_reserve(out, len)) != GGUF_OK)
        return gguf_fail(err, st, "out of memory");
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)fname[i];
        if (c != '%') {
            out->p[out->len++] = c;
            continue;
        }
        if (i + 1 < len && fname[i + 1] == '~') {
            out->len = start;
            return gguf_fail(err, GGUF_E_INVAL,
                             "file name '%s' is a hashed long name and "
                             "does not map back to a name",
                             shown(fname, len, s1));
        }
        int h = i + 1 < len ? gguf_hexval((unsigned char)fname[i + 1]) : -1;
        int l = i + 2 < len ? gguf_hexval((unsigned char)fname[i + 2]) : -1;
        if (h < 0 || l < 0) {
            out->len = start;
            return gguf_fail(err, GGUF_E_INVAL,
                             "malformed %%-escape at byte %zu of a file name "
                             "(expected %%HH)",
                             i);
        }
        out->p[out->len++] = (uint8_t)(h << 4 | l);
        i += 2;
    }

    /* Only the canonical spelling maps back: re-escape and compare. */
    st = gguf_name_escape((const char *)out->p + start, out->len - start,
                          &canon);
    if (st != GGUF_OK) {
        out->len = start;
        gguf_buf_free(&canon);
        return gguf_fail(err, st, "out of memory");
    }
    bool same = canon.len == len && memcmp(canon.p, fname, len) == 0;
    if (!same) {
        out->len = start;
        st = gguf_fail(err, GGUF_E_INVAL,
                       "file name '%s' is not in canonical form "
                       "(expected '%s')",
                       shown(fname, len, s1),
                       shown((const char *)canon.p, canon.len, s2));
        gguf_buf_free(&canon);
        return st;
    }
    gguf_buf_free(&canon);
    return GGUF_OK;
}
