/*
 * jsonstr.c - a JSON string written exactly as libjansson writes it
 * (arr.h: voc_json_str), without a json_t: hf/tokenizer.json's
 * vocabulary, merges and added tokens are most of its bytes, and
 * jansson's cost a call (a string value set, a dump through callbacks)
 * was most of a large vocabulary's writing.  jansson's dump_string with
 * the flags vocab/ uses (no JSON_ENSURE_ASCII, no JSON_ESCAPE_SLASH):
 * '"' and '\\' escaped, \b \f \n \r \t by their letters, the other bytes
 * below 0x20 as \u00XX in upper-case hex, every other character as it
 * is (DEL, U+2028 and U+2029 too); a text that is not UTF-8 is refused
 * as json_dumpb refuses it (its rule is gguf_utf8_valid's: no overlong
 * form, no surrogate, nothing past U+10FFFF).  tests/test_vocab.c holds
 * it to jansson's output byte for byte.
 */
#include "arr.h"

#include <string.h>

static const char letter[0x20] = {
    ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};

/* Bytes of byte c in a JSON string: itself, \" \\ and the letters 2,
 * \u00XX 6 (escape's lengths). */
static inline size_t esc_len(uint8_t c) {
    if (c >= 0x20 && c != '"' && c != '\\')
        return 1;
    return c == '"' || c == '\\' || letter[c] ? 2 : 6;
}

/* The escape of byte c (below 0x20, '"' or '\\') at o; its length. */
static size_t escape(uint8_t *o, uint8_t c) {
    static const char hex[] = "0123456789ABCDEF";
    o[0] = '\\';
    if (c == '"' || c == '\\') {
        o[1] = c;
        return 2;
    }
    if (letter[c]) {
        o[1] = (uint8_t)letter[c];
        return 2;
    }
    memcpy(o + 1, "u00", 3);
    o[4] = (uint8_t)hex[c >> 4];
    o[5] = (uint8_t)hex[c & 15];
    return 6;
}

/* The bytes before s's first 8 that need an escape, 8 at a time (of
 * most texts, all of them). */
static inline size_t plain8(const uint8_t *s, uint64_t n) {
    size_t i = 0;
    uint64_t w;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        if (voc_json_escapes8(w))
            break;
    }
    return i;
}

uint64_t voc_json_str_len(const uint8_t *s, uint64_t n) {
    uint64_t k = 2 + n, w;
    size_t i = plain8(s, n);
    if (n >= 8 && i + 8 > n) { /* the rest: in the last 8 bytes */
        memcpy(&w, s + n - 8, 8);
        if (!voc_json_escapes8(w))
            return k;
    }
    for (; i < n; i++)
        k += esc_len(s[i]) - 1;
    return k;
}

size_t voc_json_str_at(uint8_t *o, const uint8_t *s, uint64_t n) {
    uint8_t *start = o;
    size_t i = plain8(s, n);
    *o++ = '"';
    if (i) /* s may be NULL when n is 0 */
        memcpy(o, s, i);
    for (o += i; i < n; i++)
        if (esc_len(s[i]) == 1)
            *o++ = s[i];
        else
            o += escape(o, s[i]);
    *o++ = '"';
    return (size_t)(o - start);
}

/* voc_json_str; utf8: s is known to be UTF-8 (else checked first, by
 * the gguf library's rule, which is jansson's). */
static enum gguf_status json_str(struct gguf_buf *b, const uint8_t *s,
                                 uint64_t n, bool utf8) {
    if (n > (SIZE_MAX - 2) / 6)
        return GGUF_E_NOMEM;
    if (!utf8 && !gguf_utf8_valid(s, (size_t)n))
        return GGUF_E_INVAL; /* b as it was */
    /* \u00XX at most a byte, and the quotes */
    enum gguf_status st = gguf_buf_reserve(b, 6 * (size_t)n + 2);
    if (st != GGUF_OK)
        return st;
    b->len += voc_json_str_at(b->p + b->len, s, n);
    return GGUF_OK;
}

enum gguf_status voc_json_str(struct gguf_buf *b, const uint8_t *s,
                              uint64_t n) {
    return json_str(b, s, n, false);
}

enum gguf_status voc_json_str_utf8(struct gguf_buf *b, const uint8_t *s,
                                   uint64_t n) {
    return json_str(b, s, n, true);
}
