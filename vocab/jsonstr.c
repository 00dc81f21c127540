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

/* Bytes of the UTF-8 character at s (n bytes left), or 0 when it is
 * none: its length from its first byte, its validity gguf_utf8_valid's
 * (a call a character from 0x80, not a pass over every text). */
static size_t char_len(const uint8_t *s, size_t n) {
    size_t k = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    return k && k <= n && gguf_utf8_valid(s, k) ? k : 0;
}

/* The escape of byte c (below 0x20, '"' or '\\') at o; its length. */
static size_t escape(uint8_t *o, uint8_t c) {
    static const char hex[] = "0123456789ABCDEF";
    static const char letter[0x20] = {
        ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
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

/* voc_json_str; utf8: s is known to be UTF-8 (its bytes from 0x80 are
 * copied as they are, no call a character). */
static enum gguf_status json_str(struct gguf_buf *b, const uint8_t *s,
                                 uint64_t n, bool utf8) {
    if (n > (SIZE_MAX - 2) / 6)
        return GGUF_E_NOMEM;
    /* \u00XX at most a byte, and the quotes */
    enum gguf_status st = gguf_buf_reserve(b, 6 * (size_t)n + 2);
    if (st != GGUF_OK)
        return st;
    uint8_t *o = b->p + b->len, *start = o;
    *o++ = '"';
    for (size_t i = 0, k; i < n;)
        if (s[i] >= 0x80 && !utf8) { /* a character of UTF-8, as it is */
            if (!(k = char_len(s + i, (size_t)n - i)))
                return GGUF_E_INVAL; /* b as it was */
            memcpy(o, s + i, k);
            o += k;
            i += k;
        } else if (s[i] >= 0x20 && s[i] != '"' && s[i] != '\\')
            *o++ = s[i++];
        else
            o += escape(o, s[i++]);
    *o++ = '"';
    b->len += (size_t)(o - start);
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
