/*
 * textesc.c - UTF-8 validation and the escapes of the text codec: how a
 * string becomes one line (gguf_escape_line, and the quoted form inside
 * bracketed inner arrays) and back.  The escape set (\\ \n \r \t \xHH, and
 * \" in quoted strings) is part of the user contract in text.c's header
 * comment; names.c uses gguf_utf8_seq for its own escapes.  Also the
 * quotation of an untrusted name in a message (gguf_quote, gguf.h).
 */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- messages ------------------------------------------------------ */

const char *gguf_quote(char *buf, size_t n, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    if (n < 8) {
        if (n)
            buf[0] = '\0';
        return buf;
    }
    /* Leave room for "..." and the NUL whatever the last piece is. */
    size_t room = n - 4;
    for (size_t i = 0; i < len;) {
        char piece[8];
        size_t plen, adv = 1;
        size_t ulen = u[i] >= 0x80 ? gguf_utf8_seq(u + i, len - i) : 0;
        if (u[i] == '\\' || u[i] == '\'') {
            piece[0] = '\\';
            piece[1] = (char)u[i];
            plen = 2;
        } else if (u[i] >= 0x20 && u[i] < 0x7f) {
            piece[0] = (char)u[i];
            plen = 1;
        } else if (ulen) {
            memcpy(piece, u + i, ulen);
            plen = adv = ulen;
        } else {
            snprintf(piece, sizeof piece, "\\x%02x", u[i]);
            plen = 4;
        }
        if (o + plen > room) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(buf + o, piece, plen);
        o += plen;
        i += adv;
    }
    buf[o] = '\0';
    return buf;
}

const char *gguf_text_snippet(const char *s, size_t n, char *o, size_t osz) {
    const uint8_t *u = (const uint8_t *)s;
    size_t k = 0, i = 0;
    while (i < n && osz >= 8 && k + 8 < osz) {
        uint8_t c = u[i];
        size_t seq = c >= 0x80 ? gguf_utf8_seq(u + i, n - i) : 0;
        size_t adv = seq ? seq : 1;
        if (i + adv > 40)
            break;
        if (seq) { /* valid UTF-8: as typed */
            memcpy(o + k, u + i, seq);
            k += seq;
        } else if (c >= 0x20 && c < 0x7f) { /* printable ASCII, '\' too */
            o[k++] = (char)c;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            o[k++] = '\\';
            o[k++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else { /* other control bytes, invalid UTF-8 */
            o[k++] = '\\';
            o[k++] = 'x';
            o[k++] = gguf_hexdigit(c >> 4);
            o[k++] = gguf_hexdigit(c & 15);
        }
        i += adv;
    }
    if (i < n && osz >= 8) {
        o[k++] = '.';
        o[k++] = '.';
        o[k++] = '.';
    }
    if (osz)
        o[k] = 0;
    return o;
}

/* ---- UTF-8 --------------------------------------------------------- */

/* gguf_utf8_seq, inlined into the check of a whole text. */
static inline size_t seq(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    if (c < 0x80)
        return 1;
    uint8_t lo = 0x80, hi = 0xbf;
    size_t k;
    if (c >= 0xc2 && c <= 0xdf) {
        k = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* > U+10FFFF */
    } else {
        return 0;
    }
    if (n < k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < k; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return k;
}

size_t gguf_utf8_seq(const uint8_t *s, size_t n) {
    return seq(s, n);
}

bool gguf_utf8_valid(const uint8_t *s, size_t len) {
    size_t i = 0, k;
    uint64_t w;
    while (i < len) {
        if (len - i >= 8) { /* 8 ASCII bytes at once */
            memcpy(&w, s + i, 8);
            if (!(w & UINT64_C(0x8080808080808080))) {
                i += 8;
                continue;
            }
        }
        if (!(k = seq(s + i, len - i)))
            return false;
        i += k;
    }
    return true;
}

/* ---- escaping ------------------------------------------------------ */

enum gguf_status gguf_text_escape(const uint8_t *s, size_t n, bool quoted,
                                  struct gguf_buf *out) {
    enum gguf_status st = gguf_text_room(out, n + 2);
    if (st != GGUF_OK)
        return st;
    size_t i = 0, start = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c >= 0x20 && c < 0x7f) {
            if (c != '\\' && !(quoted && c == '"')) {
                i++;
                continue;
            }
        } else if (c >= 0x80) {
            size_t k = gguf_utf8_seq(s + i, n - i);
            if (k) {
                i += k;
                continue;
            }
        }
        if ((st = gguf_text_put(out, s + start, i - start)) != GGUF_OK ||
            (st = gguf_text_room(out, 4)) != GGUF_OK)
            return st;
        uint8_t *o = out->p + out->len;
        size_t k = 2;
        o[0] = '\\';
        switch (c) {
        case '\\':
            o[1] = '\\';
            break;
        case '"':
            o[1] = '"';
            break;
        case '\n':
            o[1] = 'n';
            break;
        case '\r':
            o[1] = 'r';
            break;
        case '\t':
            o[1] = 't';
            break;
        default:
            o[1] = 'x';
            o[2] = (uint8_t)gguf_hexdigit(c >> 4);
            o[3] = (uint8_t)gguf_hexdigit(c & 15);
            k = 4;
        }
        out->len += k;
        start = ++i;
    }
    return gguf_text_put(out, s + start, i - start);
}

enum gguf_status gguf_escape_line(const uint8_t *s, size_t len,
                                  struct gguf_buf *out) {
    size_t mark = out->len;
    enum gguf_status st = gguf_text_escape(s, len, false, out);
    if (st != GGUF_OK)
        out->len = mark;
    return st;
}

/* "line N, column C: " / "column C: " prefix for messages. */
static void where(char *w, size_t n, uint64_t line, size_t col) {
    if (line)
        snprintf(w, n, "line %" PRIu64 ", column %zu: ", line, col);
    else
        snprintf(w, n, "column %zu: ", col);
}

enum gguf_status gguf_text_unescape(const char *s, size_t n, bool quoted,
                                    size_t *used, struct gguf_buf *out,
                                    struct gguf_error *err, uint64_t line,
                                    size_t col0) {
    char w[64];
    enum gguf_status st = gguf_text_room(out, n);
    if (st != GGUF_OK)
        return st;
    size_t i = 0;
    for (;;) {
        /* copy the run up to the next '\\' (or '"' when quoted) */
        size_t j = i;
        if (quoted) {
            while (j < n && s[j] != '\\' && s[j] != '"')
                j++;
        } else {
            const char *bs = memchr(s + i, '\\', n - i);
            j = bs ? (size_t)(bs - s) : n;
        }
        if ((st = gguf_text_put(out, s + i, j - i)) != GGUF_OK)
            return st;
        i = j;
        if (i == n) {
            if (quoted) {
                where(w, sizeof w, line, col0 + n);
                return gguf_fail(err, GGUF_E_INVAL,
                                 "%sstring has no closing quote", w);
            }
            return GGUF_OK;
        }
        if (s[i] == '"') { /* quoted mode only */
            *used = i;
            return GGUF_OK;
        }
        /* s[i] == '\\' */
        if (i + 1 == n) {
            where(w, sizeof w, line, col0 + i);
            return gguf_fail(err, GGUF_E_INVAL,
                             "%sbackslash at the end of the text", w);
        }
        uint8_t c;
        switch (s[i + 1]) {
        case '\\':
            c = '\\';
            break;
        case 'n':
            c = '\n';
            break;
        case 'r':
            c = '\r';
            break;
        case 't':
            c = '\t';
            break;
        case '"':
            if (!quoted)
                goto unknown;
            c = '"';
            break;
        case 'x': {
            int h = i + 2 < n ? gguf_hexval((unsigned char)s[i + 2]) : -1;
            int l = i + 3 < n ? gguf_hexval((unsigned char)s[i + 3]) : -1;
            if (h < 0 || l < 0) {
                char sn[200];
                where(w, sizeof w, line, col0 + i);
                return gguf_fail(err, GGUF_E_INVAL,
                                 "%sincomplete escape '%s' (expected \\xHH)", w,
                                 gguf_text_snippet(s + i, n - i < 4 ? n - i : 4,
                                                   sn, sizeof sn));
            }
            c = (uint8_t)(h << 4 | l);
            i += 2;
            break;
        }
        default:
        unknown : {
            char sn[64];
            where(w, sizeof w, line, col0 + i);
            return gguf_fail(
                err, GGUF_E_INVAL, "%sunknown escape '%s'", w,
                gguf_text_snippet(
                    s + i,
                    1 + gguf_utf8_seq((const uint8_t *)s + i + 1, n - i - 1),
                    sn, sizeof sn));
        }
        }
        if ((st = gguf_text_put1(out, c)) != GGUF_OK)
            return st;
        i += 2;
    }
}

enum gguf_status gguf_unescape_line(const char *s, size_t len,
                                    struct gguf_buf *out,
                                    struct gguf_error *err) {
    size_t mark = out->len;
    enum gguf_status st =
        gguf_text_unescape(s, len, false, NULL, out, err, 0, 1);
    if (st != GGUF_OK) {
        out->len = mark;
        if (st == GGUF_E_NOMEM)
            gguf_fail(err, st, "out of memory");
    }
    return st;
}
