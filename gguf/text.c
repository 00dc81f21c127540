/*
 * text.c - the text codec: a value's on-disk payload <-> the text shown in
 * meta/KEY (man/ggufs.1, TEXT FORMAT).  Rendering is lossless: parsing the
 * rendered text gives back the identical payload, bit for bit (NaN payloads,
 * -0, denormals, invalid UTF-8 included).
 *
 * Rendering (payload -> text):
 *   string    the bytes, then "\n"
 *   integers  decimal, then "\n"
 *   bool      "true" / "false", then "\n"
 *   floats    see fmt_float(): the shortest decimal that reads back to the
 *             same bits (fewest significant digits, computed exactly, of
 *             those the nearest; never longer than the first %.Pg that
 *             reads back); fixed notation for decimal exponents -4..16 (an
 *             integral value is printed exactly there: float 123456792 is
 *             "123456792", which is no longer than "123456790"), %g-style
 *             scientific otherwise ("1e-05", "1e+20"); "-0", "inf", "-inf";
 *             "nan"/"-nan" for the default quiet NaN, "nan(0xMANTISSA)"
 *             otherwise.
 *   arrays    one element per line, each ending in "\n"; string elements
 *             escaped by gguf_escape_line; arrays of arrays one inner array
 *             per line in the bracketed form TYPE[e1, e2] (strings quoted).
 *
 * Parsing (text -> payload) decisions, part of the user contract:
 *   - strings: the whole text minus one trailing "\n" if present.
 *   - integers: [-]DIGITS with at most one trailing "\n".  No spaces, no '+',
 *     no hex.  Leading zeros are accepted ("007" is 7).  A negative number for
 *     an unsigned type is out of range (GGUF_E_RANGE), except "-0" which is 0.
 *   - bool: true, false, 1, 0 (lower case), optional "\n".
 *   - floats: whatever strtod/strtof accepts for a finite value (decimal or
 *     hex, optional sign, exponent) but no leading white space or trailing
 *     junk; overflow of the type is GGUF_E_RANGE, underflow rounds (to a
 *     denormal or zero).  Non-finite values are parsed here, not by strtod:
 *     [+-]inf, [+-]infinity, [+-]nan (case-insensitive) and
 *     [+-]nan(0xHEX) with HEX the non-zero mantissa bits (either case).
 *   - arrays: the text is empty or ends in "\n"; each line is one element;
 *     an empty line is an empty string in a string array and an error
 *     otherwise.  Raw bytes in string lines (a tab, a CR, invalid UTF-8) are
 *     taken as they are; only '\' starts an escape.
 *   - bracketed inner arrays: the type name and '[' must be adjacent; any
 *     number of spaces is accepted after '[', around each element and before
 *     ']' (the renderer writes exactly ", " between elements and no other
 *     spaces).  Nothing may follow the final ']' on the line.
 *
 * Nesting levels (as gguf_payload_check counts them): a top-level array is
 * level 1, the arrays inside an array of arrays level 2, and so on; no array
 * may be deeper than GGUF_MAX_NESTING, so an array at that level cannot be
 * an array of arrays, not even an empty one.  Refused both when rendering
 * and when parsing.
 *
 * Formatting and parsing of floats run in the "C" locale (uselocale), so a
 * daemon that called setlocale() still reads and writes "0.5".
 */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- output helpers ------------------------------------------------ */

/* Ensures n free bytes in b, growing at least geometrically so that many
 * small appends stay linear whatever gguf_buf_reserve's own policy is. */
static enum gguf_status room(struct gguf_buf *b, size_t n)
{
    if (b->cap >= b->len && b->cap - b->len >= n)
        return GGUF_OK;
    size_t extra = n;
    if (extra < b->len)
        extra = b->len;
    if (extra < 64)
        extra = 64;
    if (extra != n && gguf_buf_reserve(b, extra) == GGUF_OK)
        return GGUF_OK;
    return gguf_buf_reserve(b, n);
}

static enum gguf_status put(struct gguf_buf *b, const void *p, size_t n)
{
    if (n == 0)
        return GGUF_OK;
    enum gguf_status st = room(b, n);
    if (st != GGUF_OK)
        return st;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return GGUF_OK;
}

static enum gguf_status put1(struct gguf_buf *b, uint8_t c)
{
    if (b->cap <= b->len) {
        enum gguf_status st = room(b, 1);
        if (st != GGUF_OK)
            return st;
    }
    b->p[b->len++] = c;
    return GGUF_OK;
}

static enum gguf_status put32(struct gguf_buf *b, uint32_t v)
{
    enum gguf_status st = room(b, 4);
    if (st != GGUF_OK)
        return st;
    gguf_wr32(b->p + b->len, v);
    b->len += 4;
    return GGUF_OK;
}

static enum gguf_status put64(struct gguf_buf *b, uint64_t v)
{
    enum gguf_status st = room(b, 8);
    if (st != GGUF_OK)
        return st;
    gguf_wr64(b->p + b->len, v);
    b->len += 8;
    return GGUF_OK;
}

static const char hexdig[] = "0123456789abcdef";

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static const char *tname(enum gguf_type t)
{
    const char *n = gguf_type_name(t);
    return n ? n : "?";
}

/* A short, printable rendition of s for messages: at most 40 bytes of it,
 * control bytes, quotes and non-ASCII as \xHH, "..." when cut. */
static const char *snippet(const char *s, size_t n, char *o, size_t osz)
{
    size_t k = 0, i;
    for (i = 0; i < n && i < 40 && k + 8 < osz; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
            if (c == '\n') {
                o[k++] = '\\';
                o[k++] = 'n';
            } else {
                o[k++] = '\\';
                o[k++] = 'x';
                o[k++] = hexdig[c >> 4];
                o[k++] = hexdig[c & 15];
            }
        } else {
            o[k++] = (char)c;
        }
    }
    if (i < n) {
        o[k++] = '.';
        o[k++] = '.';
        o[k++] = '.';
    }
    o[k] = 0;
    return o;
}

/* ---- locale -------------------------------------------------------- */

static _Atomic(locale_t) c_loc;

static locale_t enter_c_locale(void)
{
    locale_t l = atomic_load(&c_loc);
    if (!l) {
        locale_t n = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        if (!n)
            return (locale_t)0;
        locale_t expected = (locale_t)0;
        if (atomic_compare_exchange_strong(&c_loc, &expected, n)) {
            l = n;
        } else {
            freelocale(n);
            l = expected;
        }
    }
    return uselocale(l);
}

static void leave_c_locale(locale_t old)
{
    if (old)
        uselocale(old);
}

/* ---- UTF-8 --------------------------------------------------------- */

/* Length (1..4) of the valid UTF-8 sequence at s[0..n), 0 if none (no
 * overlongs, no surrogates, nothing above U+10FFFF).  Shared by names.c
 * and error.c. */
size_t gguf_utf8_seq(const uint8_t *s, size_t n)
{
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

bool gguf_utf8_valid(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = gguf_utf8_seq(s + i, len - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

/* ---- escaping ------------------------------------------------------ */

/* Escapes s so that it is one line; in quoted mode '"' is escaped too. */
static enum gguf_status escape(const uint8_t *s, size_t n, bool quoted,
                               struct gguf_buf *out)
{
    enum gguf_status st = room(out, n + 2);
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
        if ((st = put(out, s + start, i - start)) != GGUF_OK ||
            (st = room(out, 4)) != GGUF_OK)
            return st;
        uint8_t *o = out->p + out->len;
        size_t k = 2;
        o[0] = '\\';
        switch (c) {
        case '\\': o[1] = '\\'; break;
        case '"': o[1] = '"'; break;
        case '\n': o[1] = 'n'; break;
        case '\r': o[1] = 'r'; break;
        case '\t': o[1] = 't'; break;
        default:
            o[1] = 'x';
            o[2] = (uint8_t)hexdig[c >> 4];
            o[3] = (uint8_t)hexdig[c & 15];
            k = 4;
        }
        out->len += k;
        start = ++i;
    }
    return put(out, s + start, i - start);
}

enum gguf_status gguf_escape_line(const uint8_t *s, size_t len,
                                  struct gguf_buf *out)
{
    size_t mark = out->len;
    enum gguf_status st = escape(s, len, false, out);
    if (st != GGUF_OK)
        out->len = mark;
    return st;
}

/* "line N, column C: " / "column C: " prefix for messages. */
static void where(char *w, size_t n, uint64_t line, size_t col)
{
    if (line)
        snprintf(w, n, "line %" PRIu64 ", column %zu: ", line, col);
    else
        snprintf(w, n, "column %zu: ", col);
}

/* Decodes the escapes of s[0..n).  Quoted mode: stops at the first unescaped
 * '"' (*used = its index; an error if there is none) and accepts \".
 * Messages name line (0: none) and the column of s[i] as col0 + i. */
static enum gguf_status unescape(const char *s, size_t n, bool quoted,
                                 size_t *used, struct gguf_buf *out,
                                 struct gguf_error *err, uint64_t line,
                                 size_t col0)
{
    char w[64];
    enum gguf_status st = room(out, n);
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
        if ((st = put(out, s + i, j - i)) != GGUF_OK)
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
        case '\\': c = '\\'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        case '"':
            if (!quoted)
                goto unknown;
            c = '"';
            break;
        case 'x': {
            int h = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
            int l = i + 3 < n ? hexval((unsigned char)s[i + 3]) : -1;
            if (h < 0 || l < 0) {
                char sn[200];
                where(w, sizeof w, line, col0 + i);
                return gguf_fail(err, GGUF_E_INVAL,
                                 "%sincomplete escape '%s' (expected \\xHH)",
                                 w, snippet(s + i, n - i < 4 ? n - i : 4,
                                            sn, sizeof sn));
            }
            c = (uint8_t)(h << 4 | l);
            i += 2;
            break;
        }
        default:
        unknown: {
            char sn[64];
            where(w, sizeof w, line, col0 + i);
            return gguf_fail(err, GGUF_E_INVAL,
                             "%sunknown escape '%s'", w,
                             snippet(s + i, 2, sn, sizeof sn));
        }
        }
        if ((st = put1(out, c)) != GGUF_OK)
            return st;
        i += 2;
    }
}

enum gguf_status gguf_unescape_line(const char *s, size_t len,
                                    struct gguf_buf *out,
                                    struct gguf_error *err)
{
    size_t mark = out->len;
    enum gguf_status st = unescape(s, len, false, NULL, out, err, 0, 1);
    if (st != GGUF_OK) {
        out->len = mark;
        if (st == GGUF_E_NOMEM)
            gguf_fail(err, st, "out of memory");
    }
    return st;
}

/* ---- numbers: formatting ------------------------------------------- */

static size_t fmt_u64(uint64_t v, char *o)
{
    char t[24];
    size_t k = 0, n = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        o[k++] = t[--n];
    return k;
}

static size_t fmt_i64(int64_t v, char *o)
{
    if (v < 0) {
        o[0] = '-';
        return 1 + fmt_u64((uint64_t)0 - (uint64_t)v, o + 1);
    }
    return fmt_u64((uint64_t)v, o);
}

/* Does the decimal d0.d1d2...e<x10> (nd digits) read back to v? */
static bool reads_back(const char *dig, int nd, int x10, bool neg, double v,
                       bool f32)
{
    char s[48];
    size_t k = 0;
    if (neg)
        s[k++] = '-';
    s[k++] = dig[0];
    if (nd > 1) {
        s[k++] = '.';
        memcpy(s + k, dig + 1, (size_t)nd - 1);
        k += (size_t)nd - 1;
    }
    s[k++] = 'e';
    if (x10 < 0) {
        s[k++] = '-';
        x10 = -x10;
    }
    k += fmt_u64((uint64_t)x10, s + k);
    s[k] = 0;
    if (f32)
        return strtof(s, NULL) == (float)v;
    return strtod(s, NULL) == v;
}

/* The p significant digits of |v| correctly rounded (printf %e), into
 * dig (no point, no sign, NUL-terminated), with the decimal exponent of the
 * first digit in *x10. */
static void digits_at(double v, int p, char *dig, int *x10)
{
    char s[64];
    snprintf(s, sizeof s, "%.*e", p - 1, fabs(v));
    /* s is D[.DDD]e[+-]XX; the decimal point may be locale-specific */
    int n = 0;
    const char *q = s;
    while (*q && *q != 'e') {
        if (*q >= '0' && *q <= '9')
            dig[n++] = *q;
        q++;
    }
    dig[n] = 0;
    *x10 = *q == 'e' ? atoi(q + 1) : 0;
}

/* Shortest digits by search with printf and strtod: the slow fallback of
 * shortest() (never expected to be used, kept for safety). */
static int shortest_slow(double v, bool f32, char *dig, int *x10)
{
    int maxp = f32 ? 9 : 17;
    char d[32];
    int x;
    /* binary search for the smallest precision that reads back (maxp
     * always does), then step down while one fewer still does */
    int lo = 1, hi = maxp;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        digits_at(v, mid, d, &x);
        if (reads_back(d, mid, x, v < 0, v, f32))
            hi = mid;
        else
            lo = mid + 1;
    }
    while (hi > 1) {
        digits_at(v, hi - 1, d, &x);
        if (!reads_back(d, hi - 1, x, v < 0, v, f32))
            break;
        hi--;
    }
    digits_at(v, hi, dig, x10);
    int nd = hi;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    dig[nd] = 0;
    return nd;
}

/* Small fixed-size big integers for the exact digit generation below:
 * little-endian 32-bit words, n of them in use (no leading zero words).
 * 40 words hold the largest intermediates (about 2^1130 for a float64
 * denormal); every operation reports overflow instead of going past. */
#define BN_WORDS 40
struct bn {
    int n;
    uint32_t w[BN_WORDS];
};

static void bn_set(struct bn *a, uint64_t v)
{
    a->n = 0;
    while (v) {
        a->w[a->n++] = (uint32_t)v;
        v >>= 32;
    }
}

static bool bn_mul_small(struct bn *a, uint32_t m)
{
    uint64_t c = 0;
    for (int i = 0; i < a->n; i++) {
        c += (uint64_t)a->w[i] * m;
        a->w[i] = (uint32_t)c;
        c >>= 32;
    }
    if (c) {
        if (a->n == BN_WORDS)
            return false;
        a->w[a->n++] = (uint32_t)c;
    }
    return true;
}

static bool bn_shl(struct bn *a, int k)
{
    if (a->n == 0 || k == 0)
        return true;
    int ws = k / 32, bs = k % 32;
    if (a->n + ws + 1 > BN_WORDS)
        return false;
    uint32_t t[BN_WORDS + 1] = {0};
    for (int i = 0; i < a->n; i++) {
        uint64_t x = (uint64_t)a->w[i] << bs;
        t[i + ws] |= (uint32_t)x;
        t[i + ws + 1] |= (uint32_t)(x >> 32);
    }
    int n = a->n + ws + 1;
    while (n > 0 && t[n - 1] == 0)
        n--;
    memcpy(a->w, t, sizeof(uint32_t) * (size_t)n);
    a->n = n;
    return true;
}

static bool bn_mul_pow10(struct bn *a, int k)
{
    static const uint32_t p10[] = {1, 10, 100, 1000, 10000, 100000, 1000000,
                                   10000000, 100000000, 1000000000};
    for (; k >= 9; k -= 9)
        if (!bn_mul_small(a, p10[9]))
            return false;
    return bn_mul_small(a, p10[k]);
}

static int bn_cmp(const struct bn *a, const struct bn *b)
{
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    for (int i = a->n - 1; i >= 0; i--)
        if (a->w[i] != b->w[i])
            return a->w[i] < b->w[i] ? -1 : 1;
    return 0;
}

/* c = a + b */
static bool bn_add(struct bn *c, const struct bn *a, const struct bn *b)
{
    int n = a->n > b->n ? a->n : b->n;
    uint64_t carry = 0;
    for (int i = 0; i < n; i++) {
        carry += (uint64_t)(i < a->n ? a->w[i] : 0) +
                 (i < b->n ? b->w[i] : 0);
        c->w[i] = (uint32_t)carry;
        carry >>= 32;
    }
    if (carry) {
        if (n == BN_WORDS)
            return false;
        c->w[n++] = (uint32_t)carry;
    }
    c->n = n;
    return true;
}

/* a -= b, with a >= b */
static void bn_sub(struct bn *a, const struct bn *b)
{
    int64_t borrow = 0;
    for (int i = 0; i < a->n; i++) {
        int64_t x = (int64_t)a->w[i] - (i < b->n ? b->w[i] : 0) - borrow;
        borrow = x < 0;
        a->w[i] = (uint32_t)(x + (borrow ? (INT64_C(1) << 32) : 0));
    }
    while (a->n > 0 && a->w[a->n - 1] == 0)
        a->n--;
}

/* Shortest digits, exactly: the free-format algorithm of Steele & White as
 * given by Burger & Dybvig ("Printing floating-point numbers quickly and
 * accurately", 1996).  The value is f * 2^e; the digits produced are the
 * fewest that identify it under round-half-even reading (strtod's), and of
 * those the closest.  Returns the digit count, 0 if the numbers got too big
 * (cannot happen for float32/float64, but then the caller falls back). */
static int dragon(double v, uint64_t f, int e, int prec, int min_e,
                  char *dig, int *x10)
{
    struct bn r, s, mp, mm, t;
    bool even = (f & 1) == 0;
    bool asym = f == UINT64_C(1) << (prec - 1) && e > min_e;
    bool ok = true;
    bn_set(&r, f);
    if (e >= 0) {
        bn_set(&mp, 1);
        ok = ok && bn_shl(&mp, asym ? e + 1 : e);
        bn_set(&mm, 1);
        ok = ok && bn_shl(&mm, e);
        ok = ok && bn_shl(&r, asym ? e + 2 : e + 1);
        bn_set(&s, asym ? 4 : 2);
    } else {
        bn_set(&mp, asym ? 2 : 1);
        bn_set(&mm, 1);
        ok = ok && bn_shl(&r, asym ? 2 : 1);
        bn_set(&s, 1);
        ok = ok && bn_shl(&s, asym ? 2 - e : 1 - e);
    }
    int k = (int)ceil(log10(fabs(v)) - 1e-10);
    if (k >= 0) {
        ok = ok && bn_mul_pow10(&s, k);
    } else {
        ok = ok && bn_mul_pow10(&r, -k) && bn_mul_pow10(&mp, -k) &&
             bn_mul_pow10(&mm, -k);
    }
    if (!ok || !bn_add(&t, &r, &mp))
        return 0;
    int c = bn_cmp(&t, &s);
    if (even ? c >= 0 : c > 0)
        k++;
    else if (!bn_mul_small(&r, 10) || !bn_mul_small(&mp, 10) ||
             !bn_mul_small(&mm, 10))
        return 0;
    int n = 0;
    for (;;) {
        int d = 0;
        while (bn_cmp(&r, &s) >= 0) {
            bn_sub(&r, &s);
            d++;
        }
        c = bn_cmp(&r, &mm);
        bool low = even ? c <= 0 : c < 0;
        if (!bn_add(&t, &r, &mp))
            return 0;
        c = bn_cmp(&t, &s);
        bool high = even ? c >= 0 : c > 0;
        if (!low && !high) {
            if (d > 9 || n >= 17)
                return 0;
            dig[n++] = (char)('0' + d);
            if (!bn_mul_small(&r, 10) || !bn_mul_small(&mp, 10) ||
                !bn_mul_small(&mm, 10))
                return 0;
            continue;
        }
        if (low && high) { /* both ends reachable: the nearer one */
            t = r;
            if (!bn_shl(&t, 1))
                return 0;
            if (bn_cmp(&t, &s) >= 0)
                d++;
        } else if (high) {
            d++;
        }
        if (d > 9 || n >= 17)
            return 0;
        dig[n++] = (char)('0' + d);
        break;
    }
    dig[n] = 0;
    *x10 = k - 1;
    return n;
}

#ifdef __SIZEOF_INT128__
__extension__ typedef unsigned __int128 u128;

/* dragon() in native 128-bit integers, for the usual case where every
 * intermediate stays below 2^124 (most float32 and ordinary float64 values);
 * 0 if they would not, then the caller uses dragon(). */
static int dragon128(double v, uint64_t f, int e, int prec, int min_e,
                     char *dig, int *x10)
{
    const u128 lim = (u128)1 << 123; /* 10 * lim < 2^127 */
    bool even = (f & 1) == 0;
    bool asym = f == UINT64_C(1) << (prec - 1) && e > min_e;
    u128 r, s, mp, mm;
    if (e >= 0) {
        if (e > 60)
            return 0;
        r = (u128)f << (asym ? e + 2 : e + 1);
        s = asym ? 4 : 2;
        mp = (u128)1 << (asym ? e + 1 : e);
        mm = (u128)1 << e;
    } else {
        if (-e > 118)
            return 0;
        r = (u128)f << (asym ? 2 : 1);
        s = (u128)1 << (asym ? 2 - e : 1 - e);
        mp = asym ? 2 : 1;
        mm = 1;
    }
    int k = (int)ceil(log10(fabs(v)) - 1e-10);
    for (int j = 0; j < k; j++) {
        if (s >= lim / 10)
            return 0;
        s *= 10;
    }
    for (int j = 0; j < -k; j++) {
        if (r >= lim / 10 || mp >= lim / 10)
            return 0;
        r *= 10;
        mp *= 10;
        mm *= 10;
    }
    if (s >= lim / 10 || r + mp >= lim)
        return 0;
    if (even ? r + mp >= s : r + mp > s) {
        k++;
    } else {
        r *= 10;
        mp *= 10;
        mm *= 10;
    }
    /* r < 10 s at each digit: long division by 8s, 4s, 2s, s, without
     * branches (the digits are random, branches would mispredict) */
    const u128 s2 = s << 1, s4 = s << 2, s8 = s << 3;
    int n = 0;
    for (;;) {
        u128 mask;
        int d;
        mask = -(u128)(r >= s8);
        r -= s8 & mask;
        d = 8 & (int)mask;
        mask = -(u128)(r >= s4);
        r -= s4 & mask;
        d |= 4 & (int)mask;
        mask = -(u128)(r >= s2);
        r -= s2 & mask;
        d |= 2 & (int)mask;
        mask = -(u128)(r >= s);
        r -= s & mask;
        d |= 1 & (int)mask;
        bool low = even ? r <= mm : r < mm;
        bool high = even ? r + mp >= s : r + mp > s;
        if (!low && !high) {
            if (d > 9 || n >= 17)
                return 0;
            dig[n++] = (char)('0' + d);
            r *= 10; /* r, mp, mm < s < 2^123 here */
            mp *= 10;
            mm *= 10;
            continue;
        }
        if (low && high) {
            if (2 * r >= s)
                d++;
        } else if (high) {
            d++;
        }
        if (d > 9 || n >= 17)
            return 0;
        dig[n++] = (char)('0' + d);
        break;
    }
    dig[n] = 0;
    *x10 = k - 1;
    return n;
}
#endif

/* Test hook: how many floats needed shortest_slow() because the exact
 * algorithm failed or disagreed with strtod (tests expect none). */
static atomic_ulong float_fallbacks;
unsigned long gguf_text_float_fallbacks(void)
{
    return atomic_load(&float_fallbacks);
}

/* Shortest digits (no trailing zeros) of the finite, non-zero value given
 * by its bits, with the decimal exponent of the first digit; returns their
 * count.  The result is checked with strtod/strtof, so it always reads
 * back. */
static int shortest(uint64_t bits, bool f32, double v, char *dig, int *x10)
{
    int mbits = f32 ? 23 : 52;
    int bias = f32 ? 150 : 1075; /* exponent bias + mantissa bits */
    uint64_t m = bits & ((UINT64_C(1) << mbits) - 1);
    int be = (int)((bits >> mbits) & (f32 ? 0xff : 0x7ff));
    uint64_t f = be ? m | UINT64_C(1) << mbits : m;
    int e = (be ? be : 1) - bias;
    int nd = 0;
#ifdef __SIZEOF_INT128__
    nd = dragon128(v, f, e, mbits + 1, 1 - bias, dig, x10);
#endif
    if (nd == 0)
        nd = dragon(v, f, e, mbits + 1, 1 - bias, dig, x10);
    if (nd > 0) {
        while (nd > 1 && dig[nd - 1] == '0')
            nd--;
        dig[nd] = 0;
        if (reads_back(dig, nd, *x10, v < 0, v, f32))
            return nd;
    }
    atomic_fetch_add(&float_fallbacks, 1);
    return shortest_slow(v, f32, dig, x10);
}

/* Formats a float32 (f32) or float64 given by its bits; returns length.
 * o needs 40 bytes. */
static size_t fmt_float(uint64_t bits, bool f32, char *o)
{
    int mbits = f32 ? 23 : 52;
    uint64_t emax = f32 ? 0xff : 0x7ff;
    bool neg = (bits >> (f32 ? 31 : 63)) & 1;
    uint64_t mant = bits & ((UINT64_C(1) << mbits) - 1);
    uint64_t ex = (bits >> mbits) & emax;
    size_t k = 0;
    if (neg)
        o[k++] = '-';
    if (ex == emax) {
        if (mant == 0) {
            memcpy(o + k, "inf", 3);
            return k + 3;
        }
        if (mant == UINT64_C(1) << (mbits - 1)) {
            memcpy(o + k, "nan", 3);
            return k + 3;
        }
        memcpy(o + k, "nan(0x", 6);
        k += 6;
        char t[20];
        int n = 0;
        while (mant) {
            t[n++] = hexdig[mant & 15];
            mant >>= 4;
        }
        while (n)
            o[k++] = t[--n];
        o[k++] = ')';
        return k;
    }
    double v;
    if (f32) {
        uint32_t b = (uint32_t)bits;
        float f;
        memcpy(&f, &b, 4);
        v = f;
    } else {
        memcpy(&v, &bits, 8);
    }
    double a = fabs(v);
    if (a == 0) {
        o[k++] = '0';
        return k;
    }
    /* integral values below 1e16 are printed exactly (fast path) */
    if (a < 1e16 && a == floor(a))
        return k + fmt_u64((uint64_t)a, o + k);

    char dig[32];
    int x;
    int nd = shortest(bits, f32, v, dig, &x);
    if (x > -5 && x < 17) {
        if (a == floor(a)) /* integral, below 1e17 < 2^63: exact */
            return k + fmt_u64((uint64_t)a, o + k);
        if (x >= 0) {
            for (int i = 0; i <= x; i++)
                o[k++] = i < nd ? dig[i] : '0';
            if (nd > x + 1) {
                o[k++] = '.';
                for (int i = x + 1; i < nd; i++)
                    o[k++] = dig[i];
            }
        } else {
            o[k++] = '0';
            o[k++] = '.';
            for (int i = 0; i < -x - 1; i++)
                o[k++] = '0';
            for (int i = 0; i < nd; i++)
                o[k++] = dig[i];
        }
        return k;
    }
    o[k++] = dig[0];
    if (nd > 1) {
        o[k++] = '.';
        for (int i = 1; i < nd; i++)
            o[k++] = dig[i];
    }
    o[k++] = 'e';
    o[k++] = x < 0 ? '-' : '+';
    int ax = x < 0 ? -x : x;
    if (ax < 10)
        o[k++] = '0';
    k += fmt_u64((uint64_t)ax, o + k);
    return k;
}

/* Formats one fixed-size scalar at p; returns length (o: 48 bytes), or 0
 * for a bool byte that is neither 0 nor 1. */
static size_t fmt_scalar(enum gguf_type t, const uint8_t *p, char *o)
{
    switch (t) {
    case GGUF_TYPE_UINT8: return fmt_u64(p[0], o);
    case GGUF_TYPE_INT8: return fmt_i64((int8_t)p[0], o);
    case GGUF_TYPE_UINT16: return fmt_u64((uint16_t)(p[0] | p[1] << 8), o);
    case GGUF_TYPE_INT16:
        return fmt_i64((int16_t)(uint16_t)(p[0] | p[1] << 8), o);
    case GGUF_TYPE_UINT32: return fmt_u64(gguf_rd32(p), o);
    case GGUF_TYPE_INT32: return fmt_i64((int32_t)gguf_rd32(p), o);
    case GGUF_TYPE_UINT64: return fmt_u64(gguf_rd64(p), o);
    case GGUF_TYPE_INT64: return fmt_i64((int64_t)gguf_rd64(p), o);
    case GGUF_TYPE_FLOAT32: return fmt_float(gguf_rd32(p), true, o);
    case GGUF_TYPE_FLOAT64: return fmt_float(gguf_rd64(p), false, o);
    case GGUF_TYPE_BOOL:
        /* A byte other than 0 or 1 is outside the spec; ggml reads any
         * nonzero byte as true, and so do we (the one lossy case). */
        memcpy(o, p[0] ? "true" : "false", p[0] ? 4 : 5);
        return p[0] ? 4 : 5;
    default: return 0;
    }
}

static bool is_fixed(enum gguf_type t)
{
    return t < GGUF_TYPE_COUNT && t != GGUF_TYPE_STRING &&
           t != GGUF_TYPE_ARRAY;
}

/* ---- rendering ----------------------------------------------------- */

struct rd {
    const uint8_t *p;
    size_t n, i;
};

static bool rd_has(const struct rd *r, uint64_t k)
{
    return k <= r->n - r->i;
}

static enum gguf_status bad_payload(struct gguf_error *err, const char *what,
                                    size_t off)
{
    return gguf_fail(err, GGUF_E_FORMAT, "malformed value: %s at byte %zu",
                     what, off);
}

static enum gguf_status render_scalar_at(struct rd *r, enum gguf_type t,
                                         struct gguf_buf *out,
                                         struct gguf_error *err)
{
    size_t sz = gguf_type_size(t);
    if (!rd_has(r, sz))
        return bad_payload(err, "truncated element", r->i);
    enum gguf_status st = room(out, 48);
    if (st != GGUF_OK)
        return st;
    size_t k = fmt_scalar(t, r->p + r->i, (char *)out->p + out->len);
    if (!k)
        return bad_payload(err, "bool that is neither 0 nor 1", r->i);
    out->len += k;
    r->i += sz;
    return GGUF_OK;
}

/* An inner array at r in the bracketed one-line form. */
static enum gguf_status render_inline(struct rd *r, int level,
                                      struct gguf_buf *out,
                                      struct gguf_error *err)
{
    enum gguf_status st;
    if (level > GGUF_MAX_NESTING)
        return bad_payload(err, "arrays nested too deeply", r->i);
    if (!rd_has(r, 12))
        return bad_payload(err, "truncated array header", r->i);
    uint32_t et = gguf_rd32(r->p + r->i);
    uint64_t n = gguf_rd64(r->p + r->i + 4);
    if (et >= GGUF_TYPE_COUNT)
        return bad_payload(err, "unknown element type", r->i);
    if (et == GGUF_TYPE_ARRAY && level >= GGUF_MAX_NESTING)
        return bad_payload(err, "arrays nested too deeply", r->i);
    r->i += 12;
    const char *name = tname(et);
    if ((st = put(out, name, strlen(name))) != GGUF_OK ||
        (st = put1(out, '[')) != GGUF_OK)
        return st;
    if (is_fixed(et) && n > (r->n - r->i) / gguf_type_size(et))
        return bad_payload(err, "array longer than its value", r->i);
    for (uint64_t j = 0; j < n; j++) {
        if (j && (st = put(out, ", ", 2)) != GGUF_OK)
            return st;
        if (et == GGUF_TYPE_STRING) {
            if (!rd_has(r, 8))
                return bad_payload(err, "truncated string", r->i);
            uint64_t sl = gguf_rd64(r->p + r->i);
            r->i += 8;
            if (!rd_has(r, sl))
                return bad_payload(err, "truncated string", r->i);
            if ((st = put1(out, '"')) != GGUF_OK ||
                (st = escape(r->p + r->i, sl, true, out)) != GGUF_OK ||
                (st = put1(out, '"')) != GGUF_OK)
                return st;
            r->i += sl;
        } else if (et == GGUF_TYPE_ARRAY) {
            if ((st = render_inline(r, level + 1, out, err)) != GGUF_OK)
                return st;
        } else if ((st = render_scalar_at(r, et, out, err)) != GGUF_OK) {
            return st;
        }
    }
    return put1(out, ']');
}

static enum gguf_status render_array(struct rd *r, struct gguf_buf *out,
                                     struct gguf_error *err)
{
    enum gguf_status st;
    if (!rd_has(r, 12))
        return bad_payload(err, "truncated array header", r->i);
    uint32_t et = gguf_rd32(r->p);
    uint64_t n = gguf_rd64(r->p + 4);
    if (et >= GGUF_TYPE_COUNT)
        return bad_payload(err, "unknown element type", 0);
    r->i = 12;
    size_t rest = r->n - r->i;
    if (et == GGUF_TYPE_STRING) {
        if (n > rest / 8)
            return bad_payload(err, "array longer than its value", r->i);
        /* string bytes plus one newline each; escapes grow it as needed */
        if ((st = room(out, rest - n * 8 + n)) != GGUF_OK)
            return st;
        for (uint64_t j = 0; j < n; j++) {
            if (!rd_has(r, 8))
                return bad_payload(err, "truncated string", r->i);
            uint64_t sl = gguf_rd64(r->p + r->i);
            r->i += 8;
            if (!rd_has(r, sl))
                return bad_payload(err, "truncated string", r->i);
            if ((st = escape(r->p + r->i, sl, false, out)) != GGUF_OK ||
                (st = put1(out, '\n')) != GGUF_OK)
                return st;
            r->i += sl;
        }
    } else if (et == GGUF_TYPE_ARRAY) {
        for (uint64_t j = 0; j < n; j++) {
            if ((st = render_inline(r, 2, out, err)) != GGUF_OK ||
                (st = put1(out, '\n')) != GGUF_OK)
                return st;
        }
    } else {
        size_t sz = gguf_type_size(et);
        if (n > rest / sz)
            return bad_payload(err, "array longer than its value", r->i);
        size_t per = sz == 1 ? 5 : sz == 2 ? 7 : sz == 4 ? 12 : 21;
        if (n <= SIZE_MAX / per && (st = room(out, n * per)) != GGUF_OK)
            return st;
        for (uint64_t j = 0; j < n; j++) {
            if ((st = render_scalar_at(r, et, out, err)) != GGUF_OK ||
                (st = put1(out, '\n')) != GGUF_OK)
                return st;
        }
    }
    return GGUF_OK;
}

static enum gguf_status render(enum gguf_type type, const uint8_t *p,
                               size_t len, struct gguf_buf *out,
                               struct gguf_error *err)
{
    enum gguf_status st;
    struct rd r = {p, len, 0};
    if (type == GGUF_TYPE_STRING) {
        if (len < 8)
            return bad_payload(err, "truncated string", 0);
        uint64_t sl = gguf_rd64(p);
        if (sl != len - 8)
            return gguf_fail(err, GGUF_E_FORMAT,
                             "malformed value: string length %" PRIu64
                             " but %zu bytes follow", sl, len - 8);
        if ((st = room(out, len - 7)) != GGUF_OK)
            return st;
        memcpy(out->p + out->len, p + 8, len - 8);
        out->len += len - 8;
        return put1(out, '\n');
    }
    if (type == GGUF_TYPE_ARRAY) {
        if ((st = render_array(&r, out, err)) != GGUF_OK)
            return st;
    } else if (is_fixed(type)) {
        if ((st = render_scalar_at(&r, type, out, err)) != GGUF_OK ||
            (st = put1(out, '\n')) != GGUF_OK)
            return st;
    } else {
        return gguf_fail(err, GGUF_E_INVAL, "unknown value type %u",
                         (unsigned)type);
    }
    if (r.i != len)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "malformed value: %zu stray bytes after the %s",
                         len - r.i, tname(type));
    return GGUF_OK;
}

enum gguf_status gguf_render(enum gguf_type type, const uint8_t *payload,
                             size_t len, struct gguf_buf *out,
                             struct gguf_error *err)
{
    size_t mark = out->len;
    locale_t old = enter_c_locale();
    enum gguf_status st = render(type, payload, len, out, err);
    leave_c_locale(old);
    if (st != GGUF_OK) {
        out->len = mark;
        if (st == GGUF_E_NOMEM)
            gguf_fail(err, st, "out of memory rendering a %s", tname(type));
    }
    return st;
}

/* ---- numbers: parsing ---------------------------------------------- */

static bool ci_eq(const char *s, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    if (n != m)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != lit[i])
            return false;
    }
    return true;
}

/* Parses an integer of type t; GGUF_OK, GGUF_E_INVAL or GGUF_E_RANGE. */
static enum gguf_status parse_int(const char *s, size_t n, enum gguf_type t,
                                  uint64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (n && s[0] == '-') {
        neg = true;
        i = 1;
    }
    if (i == n)
        return GGUF_E_INVAL;
    uint64_t m = 0;
    bool over = false;
    for (; i < n; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9)
            return GGUF_E_INVAL;
        if (m > (UINT64_MAX - d) / 10)
            over = true;
        else
            m = m * 10 + d;
    }
    if (over)
        return GGUF_E_RANGE;
    bool sgn = t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 ||
               t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
    unsigned bits = (unsigned)gguf_type_size(t) * 8;
    if (sgn) {
        uint64_t lim = UINT64_C(1) << (bits - 1); /* |min| */
        if (neg ? m > lim : m >= lim)
            return GGUF_E_RANGE;
        *out = neg ? (uint64_t)0 - m : m;
    } else {
        uint64_t max = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
        if ((neg && m != 0) || m > max)
            return GGUF_E_RANGE;
        *out = m;
    }
    return GGUF_OK;
}

/* Parses a float of the given width into its bits. */
static enum gguf_status parse_float(const char *s, size_t n, bool f32,
                                    uint64_t *out)
{
    int mbits = f32 ? 23 : 52;
    uint64_t expall = f32 ? UINT64_C(0xff) << 23 : UINT64_C(0x7ff) << 52;
    uint64_t sign = UINT64_C(1) << (f32 ? 31 : 63);
    if (n == 0)
        return GGUF_E_INVAL;
    size_t i = 0;
    bool neg = false;
    if (s[0] == '-' || s[0] == '+') {
        neg = s[0] == '-';
        i = 1;
    }
    const char *r = s + i;
    size_t m = n - i;
    if (ci_eq(r, m, "inf") || ci_eq(r, m, "infinity")) {
        *out = (neg ? sign : 0) | expall;
        return GGUF_OK;
    }
    if (ci_eq(r, m, "nan")) {
        *out = (neg ? sign : 0) | expall | UINT64_C(1) << (mbits - 1);
        return GGUF_OK;
    }
    if (m >= 3 && ci_eq(r, 3, "nan")) {
        /* nan(0xHEX) */
        if (m < 8 || r[3] != '(' || r[4] != '0' ||
            (r[5] != 'x' && r[5] != 'X') || r[m - 1] != ')')
            return GGUF_E_INVAL;
        uint64_t mant = 0;
        bool big = false;
        for (size_t j = 6; j < m - 1; j++) {
            int h = hexval((unsigned char)r[j]);
            if (h < 0)
                return GGUF_E_INVAL;
            if (mant >> 60)
                big = true;
            mant = mant << 4 | (uint64_t)h;
        }
        if (big || mant >> mbits)
            return GGUF_E_RANGE;
        if (mant == 0) /* that would be an infinity */
            return GGUF_E_INVAL;
        *out = (neg ? sign : 0) | expall | mant;
        return GGUF_OK;
    }
    /* finite: let strtod judge, but only from a digit or a point */
    if (m == 0 || !((*r >= '0' && *r <= '9') || *r == '.'))
        return GGUF_E_INVAL;
    char small[128];
    char *b = n < sizeof small ? small : malloc(n + 1);
    if (!b)
        return GGUF_E_NOMEM;
    memcpy(b, s, n);
    b[n] = 0;
    char *end;
    errno = 0;
    enum gguf_status st = GGUF_OK;
    if (f32) {
        float f = strtof(b, &end);
        int e = errno;
        if (end != b + n || isnan(f))
            st = GGUF_E_INVAL;
        else if (isinf(f))
            st = e == ERANGE ? GGUF_E_RANGE : GGUF_E_INVAL;
        else {
            uint32_t u;
            memcpy(&u, &f, 4);
            *out = u;
        }
    } else {
        double d = strtod(b, &end);
        int e = errno;
        if (end != b + n || isnan(d))
            st = GGUF_E_INVAL;
        else if (isinf(d))
            st = e == ERANGE ? GGUF_E_RANGE : GGUF_E_INVAL;
        else
            memcpy(out, &d, 8);
    }
    if (b != small)
        free(b);
    return st;
}

/* Parses one scalar of fixed-size type t from s[0..n) and appends its
 * bytes.  Messages: "line L: 'x' is not a T" / "line L: x is out of range
 * for T". */
static enum gguf_status parse_scalar(enum gguf_type t, const char *s,
                                     size_t n, struct gguf_buf *out,
                                     struct gguf_error *err, uint64_t line)
{
    uint64_t v = 0;
    enum gguf_status st;
    switch (t) {
    case GGUF_TYPE_BOOL:
        if ((n == 4 && !memcmp(s, "true", 4)) || (n == 1 && s[0] == '1'))
            v = 1, st = GGUF_OK;
        else if ((n == 5 && !memcmp(s, "false", 5)) ||
                 (n == 1 && s[0] == '0'))
            v = 0, st = GGUF_OK;
        else
            st = GGUF_E_INVAL;
        break;
    case GGUF_TYPE_FLOAT32:
        st = parse_float(s, n, true, &v);
        break;
    case GGUF_TYPE_FLOAT64:
        st = parse_float(s, n, false, &v);
        break;
    default:
        st = parse_int(s, n, t, &v);
    }
    char sn[200];
    if (st == GGUF_E_INVAL)
        return gguf_fail(err, st, "line %" PRIu64 ": '%s' is not a%s %s",
                         line, snippet(s, n, sn, sizeof sn),
                         t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 ||
                         t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64
                             ? "n" : "",
                         tname(t));
    if (st == GGUF_E_RANGE)
        return gguf_fail(err, st, "line %" PRIu64 ": %s is out of range for %s",
                         line, snippet(s, n, sn, sizeof sn), tname(t));
    if (st != GGUF_OK)
        return st;
    size_t sz = gguf_type_size(t);
    if ((st = room(out, sz)) != GGUF_OK)
        return st;
    uint8_t *o = out->p + out->len;
    for (size_t k = 0; k < sz; k++)
        o[k] = (uint8_t)(v >> (8 * k));
    out->len += sz;
    return GGUF_OK;
}

/* ---- parsing ------------------------------------------------------- */

static enum gguf_status too_long(struct gguf_error *err, uint64_t line,
                                 uint64_t n)
{
    return gguf_fail(err, GGUF_E_RANGE,
                     "line %" PRIu64 ": string of %" PRIu64
                     " bytes is longer than %" PRIu64, line, n,
                     (uint64_t)GGUF_MAX_STRING);
}

/* One bracketed inner array TYPE[...] at s[*pos..n) of line `line`. */
static enum gguf_status parse_inline(const char *s, size_t n, size_t *pos,
                                     int level, uint64_t line,
                                     struct gguf_buf *out,
                                     struct gguf_error *err)
{
    enum gguf_status st;
    size_t i = *pos;
    size_t t0 = i;
    char sn[200];
    while (i < n && ((s[i] >= 'a' && s[i] <= 'z') ||
                     (s[i] >= '0' && s[i] <= '9')))
        i++;
    int et;
    if (i - t0 == 5 && !memcmp(s + t0, "array", 5))
        et = GGUF_TYPE_ARRAY;
    else
        et = gguf_type_from_name(s + t0, i - t0);
    if (et < 0 || et >= GGUF_TYPE_COUNT || i == n || s[i] != '[') {
        size_t e = t0;
        while (e < n && e - t0 < 40 && s[e] != '[' && s[e] != ',' &&
               s[e] != ']' && s[e] != ' ')
            e++;
        if (e == t0 && e < n)
            e++; /* show at least the offending character */
        return gguf_fail(err, GGUF_E_INVAL,
                         "line %" PRIu64 ", column %zu: expected a type and "
                         "'[' (like uint32[1, 2]), found '%s'",
                         line, t0 + 1, snippet(s + t0, e - t0, sn, sizeof sn));
    }
    if (level > GGUF_MAX_NESTING ||
        (et == GGUF_TYPE_ARRAY && level >= GGUF_MAX_NESTING))
        return gguf_fail(err, GGUF_E_INVAL,
                         "line %" PRIu64 ", column %zu: arrays nested more "
                         "than %d levels deep", line, t0 + 1,
                         GGUF_MAX_NESTING);
    i++; /* '[' */
    if ((st = put32(out, (uint32_t)et)) != GGUF_OK)
        return st;
    size_t cnt_at = out->len;
    if ((st = put64(out, 0)) != GGUF_OK)
        return st;
    uint64_t cnt = 0;
    while (i < n && s[i] == ' ')
        i++;
    if (i < n && s[i] == ']') {
        *pos = i + 1;
        return GGUF_OK;
    }
    for (;;) {
        while (i < n && s[i] == ' ')
            i++;
        if (i == n)
            break;
        if (et == GGUF_TYPE_STRING) {
            if (s[i] != '"')
                return gguf_fail(err, GGUF_E_INVAL,
                                 "line %" PRIu64 ", column %zu: expected '\"' "
                                 "to start a string", line, i + 1);
            size_t used = 0, at = out->len;
            if ((st = put64(out, 0)) != GGUF_OK ||
                (st = unescape(s + i + 1, n - i - 1, true, &used, out, err,
                               line, i + 2)) != GGUF_OK)
                return st;
            uint64_t sl = out->len - at - 8;
            if (sl > GGUF_MAX_STRING)
                return too_long(err, line, sl);
            gguf_wr64(out->p + at, sl);
            i += used + 2;
        } else if (et == GGUF_TYPE_ARRAY) {
            if ((st = parse_inline(s, n, &i, level + 1, line, out, err)) !=
                GGUF_OK)
                return st;
        } else {
            size_t e = i;
            while (e < n && s[e] != ',' && s[e] != ']' && s[e] != ' ')
                e++;
            if ((st = parse_scalar(et, s + i, e - i, out, err, line)) !=
                GGUF_OK)
                return st;
            i = e;
        }
        cnt++;
        while (i < n && s[i] == ' ')
            i++;
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        if (i < n && s[i] == ']') {
            if (cnt > GGUF_MAX_ARRAY)
                return gguf_fail(err, GGUF_E_RANGE,
                                 "line %" PRIu64 ": array of %" PRIu64
                                 " elements is longer than %" PRIu64,
                                 line, cnt, (uint64_t)GGUF_MAX_ARRAY);
            gguf_wr64(out->p + cnt_at, cnt);
            *pos = i + 1;
            return GGUF_OK;
        }
        if (i == n)
            break;
        return gguf_fail(err, GGUF_E_INVAL,
                         "line %" PRIu64 ", column %zu: expected ',' or ']', "
                         "found '%s'", line, i + 1,
                         snippet(s + i, 1, sn, sizeof sn));
    }
    return gguf_fail(err, GGUF_E_INVAL,
                     "line %" PRIu64 ", column %zu: missing ']'", line, n + 1);
}

static enum gguf_status parse_array(enum gguf_type et, const char *text,
                                    size_t len, struct gguf_buf *out,
                                    struct gguf_error *err)
{
    enum gguf_status st;
    if (et >= GGUF_TYPE_COUNT)
        return gguf_fail(err, GGUF_E_INVAL, "unknown array element type %u",
                         (unsigned)et);
    /* count the lines (one fast pass) */
    uint64_t lines = 0;
    for (const char *q = text, *e = text + len;
         q < e && (q = memchr(q, '\n', (size_t)(e - q))); q++)
        lines++;
    if (len && text[len - 1] != '\n')
        return gguf_fail(err, GGUF_E_INVAL,
                         "line %" PRIu64 ": last line is incomplete "
                         "(no trailing newline)", lines + 1);
    if (lines > GGUF_MAX_ARRAY)
        return gguf_fail(err, GGUF_E_RANGE,
                         "array of %" PRIu64 " elements is longer than %" PRIu64,
                         lines, (uint64_t)GGUF_MAX_ARRAY);
    size_t est = et == GGUF_TYPE_STRING ? len + (size_t)lines * 8
               : et == GGUF_TYPE_ARRAY ? len
                                       : (size_t)lines * gguf_type_size(et);
    if ((st = room(out, 12 + est)) != GGUF_OK ||
        (st = put32(out, et)) != GGUF_OK ||
        (st = put64(out, lines)) != GGUF_OK)
        return st;
    const char *q = text, *e = text + len;
    for (uint64_t ln = 1; ln <= lines; ln++) {
        const char *nl = memchr(q, '\n', (size_t)(e - q));
        size_t n = (size_t)(nl - q);
        if (et == GGUF_TYPE_STRING) {
            size_t at = out->len;
            if ((st = put64(out, 0)) != GGUF_OK ||
                (st = unescape(q, n, false, NULL, out, err, ln, 1)) !=
                    GGUF_OK)
                return st;
            uint64_t sl = out->len - at - 8;
            if (sl > GGUF_MAX_STRING)
                return too_long(err, ln, sl);
            gguf_wr64(out->p + at, sl);
        } else if (et == GGUF_TYPE_ARRAY) {
            size_t pos = 0;
            if ((st = parse_inline(q, n, &pos, 2, ln, out, err)) != GGUF_OK)
                return st;
            if (pos != n) {
                char sn[200];
                return gguf_fail(err, GGUF_E_INVAL,
                                 "line %" PRIu64 ", column %zu: unexpected "
                                 "'%s' after the array", ln, pos + 1,
                                 snippet(q + pos, n - pos, sn, sizeof sn));
            }
        } else if ((st = parse_scalar(et, q, n, out, err, ln)) != GGUF_OK) {
            return st;
        }
        q = nl + 1;
    }
    return GGUF_OK;
}

static enum gguf_status parse(enum gguf_type type, enum gguf_type arr_type,
                              const char *text, size_t len,
                              struct gguf_buf *out, struct gguf_error *err)
{
    enum gguf_status st;
    if (type == GGUF_TYPE_ARRAY)
        return parse_array(arr_type, text, len, out, err);
    if (len && text[len - 1] == '\n')
        len--;
    if (type == GGUF_TYPE_STRING) {
        if (len > GGUF_MAX_STRING)
            return too_long(err, 1, len);
        if ((st = room(out, 8 + len)) != GGUF_OK)
            return st;
        gguf_wr64(out->p + out->len, len);
        if (len)
            memcpy(out->p + out->len + 8, text, len);
        out->len += 8 + len;
        return GGUF_OK;
    }
    if (!is_fixed(type))
        return gguf_fail(err, GGUF_E_INVAL, "unknown value type %u",
                         (unsigned)type);
    return parse_scalar(type, text, len, out, err, 1);
}

enum gguf_status gguf_parse_text(enum gguf_type type, enum gguf_type arr_type,
                                 const char *text, size_t len,
                                 struct gguf_buf *out, struct gguf_error *err)
{
    size_t mark = out->len;
    if (!text) /* an empty gguf_buf: NULL + 0 is undefined in C (UBSan) */
        text = "";
    locale_t old = enter_c_locale();
    enum gguf_status st = parse(type, arr_type, text, len, out, err);
    leave_c_locale(old);
    if (st != GGUF_OK) {
        out->len = mark;
        if (st == GGUF_E_NOMEM)
            gguf_fail(err, st, "out of memory parsing a %s", tname(type));
    }
    return st;
}
