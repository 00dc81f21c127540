/*
 * textfloat.c - floats in the text codec: the shortest decimal that reads
 * back to the same bits, and the parser for what the user writes.  The
 * user-visible rules (notation, "nan(0xMANTISSA)", what is accepted) are
 * stated once, in text.c's header comment; this file holds the algorithms.
 *
 * Printing.  The digits come from the free-format algorithm of Steele &
 * White / Burger & Dybvig, run in native 128-bit integers when the
 * intermediates fit (dragon128) and in small big integers otherwise
 * (dragon).  Every result is checked by reading it back with strtod/strtof;
 * should a result ever fail that check, a slow printf search
 * (shortest_slow) takes over and gguf_text_float_fallbacks counts it (the
 * tests expect zero).
 *
 * Both directions use strtod/strtof and printf, so callers run them in the
 * "C" locale (gguf_render and gguf_parse_text do).
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- integers and reading back --------------------------------------- */

size_t gguf_fmt_u64(uint64_t v, char *o) {
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

/* Does the decimal d0.d1d2...e<x10> (nd digits) read back to v? */
static bool reads_back(const char *dig, int nd, int x10, bool neg, double v,
                       bool f32) {
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
    k += gguf_fmt_u64((uint64_t)x10, s + k);
    s[k] = 0;
    if (f32)
        return strtof(s, NULL) == (float)v;
    return strtod(s, NULL) == v;
}

/* ---- shortest digits ------------------------------------------------- */

/* The p significant digits of |v| correctly rounded (printf %e), into
 * dig (no point, no sign, NUL-terminated), with the decimal exponent of the
 * first digit in *x10. */
static void digits_at(double v, int p, char *dig, int *x10) {
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
static int shortest_slow(double v, bool f32, char *dig, int *x10) {
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

static void bn_set(struct bn *a, uint64_t v) {
    a->n = 0;
    while (v) {
        a->w[a->n++] = (uint32_t)v;
        v >>= 32;
    }
}

static bool bn_mul_small(struct bn *a, uint32_t m) {
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

static bool bn_shl(struct bn *a, int k) {
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

static bool bn_mul_pow10(struct bn *a, int k) {
    static const uint32_t p10[] = {1,         10,        100,     1000,
                                   10000,     100000,    1000000, 10000000,
                                   100000000, 1000000000};
    for (; k >= 9; k -= 9)
        if (!bn_mul_small(a, p10[9]))
            return false;
    return bn_mul_small(a, p10[k]);
}

static int bn_cmp(const struct bn *a, const struct bn *b) {
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    for (int i = a->n - 1; i >= 0; i--)
        if (a->w[i] != b->w[i])
            return a->w[i] < b->w[i] ? -1 : 1;
    return 0;
}

/* c = a + b */
static bool bn_add(struct bn *c, const struct bn *a, const struct bn *b) {
    int n = a->n > b->n ? a->n : b->n;
    uint64_t carry = 0;
    for (int i = 0; i < n; i++) {
        carry += (uint64_t)(i < a->n ? a->w[i] : 0) + (i < b->n ? b->w[i] : 0);
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
static void bn_sub(struct bn *a, const struct bn *b) {
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
static int dragon(double v, uint64_t f, int e, int prec, int min_e, char *dig,
                  int *x10) {
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
                     char *dig, int *x10) {
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
unsigned long gguf_text_float_fallbacks(void) {
    return atomic_load(&float_fallbacks);
}

/* Shortest digits (no trailing zeros) of the finite, non-zero value given
 * by its bits, with the decimal exponent of the first digit; returns their
 * count.  The result is checked with strtod/strtof, so it always reads
 * back. */
static int shortest(uint64_t bits, bool f32, double v, char *dig, int *x10) {
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

/* ---- printing -------------------------------------------------------- */

/* The non-finite value with mantissa mant (inf, or a NaN) after the sign
 * already at o[0, k); returns the length. */
static size_t fmt_nonfinite(uint64_t mant, int mbits, char *o, size_t k) {
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
        t[n++] = gguf_hexdigit(mant & 15);
        mant >>= 4;
    }
    while (n)
        o[k++] = t[--n];
    o[k++] = ')';
    return k;
}

/* The nd digits dig (first digit's decimal exponent x) at o[k, ...):
 * fixed notation for x in -4..16, else scientific; returns the length. */
static size_t place_digits(const char *dig, int nd, int x, char *o, size_t k) {
    if (x > -5 && x < 17) {
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
    k += gguf_fmt_u64((uint64_t)ax, o + k);
    return k;
}

size_t gguf_fmt_float(uint64_t bits, bool f32, char *o) {
    int mbits = f32 ? 23 : 52;
    uint64_t emax = f32 ? 0xff : 0x7ff;
    bool neg = (bits >> (f32 ? 31 : 63)) & 1;
    uint64_t mant = bits & ((UINT64_C(1) << mbits) - 1);
    uint64_t ex = (bits >> mbits) & emax;
    size_t k = 0;
    if (neg)
        o[k++] = '-';
    if (ex == emax)
        return fmt_nonfinite(mant, mbits, o, k);
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
        return k + gguf_fmt_u64((uint64_t)a, o + k);

    char dig[32];
    int x;
    int nd = shortest(bits, f32, v, dig, &x);
    /* integral in fixed notation, below 1e17 < 2^63: exact */
    if (x > -5 && x < 17 && a == floor(a))
        return k + gguf_fmt_u64((uint64_t)a, o + k);
    return place_digits(dig, nd, x, o, k);
}

/* ---- parsing ----------------------------------------------------------- */

static bool ci_eq(const char *s, size_t n, const char *lit) {
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

/* The mantissa bits of "nan(0xHEX)" in r[0, m), which starts with "nan"
 * in any case: non-zero and fitting in mbits. */
static enum gguf_status parse_nan_payload(const char *r, size_t m, int mbits,
                                          uint64_t *mant) {
    if (m < 8 || r[3] != '(' || r[4] != '0' || (r[5] != 'x' && r[5] != 'X') ||
        r[m - 1] != ')')
        return GGUF_E_INVAL;
    uint64_t v = 0;
    bool big = false;
    for (size_t j = 6; j < m - 1; j++) {
        int h = gguf_hexval((unsigned char)r[j]);
        if (h < 0)
            return GGUF_E_INVAL;
        if (v >> 60)
            big = true;
        v = v << 4 | (uint64_t)h;
    }
    if (big || v >> mbits)
        return GGUF_E_RANGE;
    if (v == 0) /* that would be an infinity */
        return GGUF_E_INVAL;
    *mant = v;
    return GGUF_OK;
}

/* A finite value in s[0, n) as strtod/strtof read it, whole. */
static enum gguf_status parse_finite(const char *s, size_t n, bool f32,
                                     uint64_t *out) {
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

enum gguf_status gguf_parse_float(const char *s, size_t n, bool f32,
                                  uint64_t *out) {
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
        uint64_t mant;
        enum gguf_status st = parse_nan_payload(r, m, mbits, &mant);
        if (st == GGUF_OK)
            *out = (neg ? sign : 0) | expall | mant;
        return st;
    }
    /* finite: let strtod judge, but only from a digit or a point */
    if (m == 0 || !((*r >= '0' && *r <= '9') || *r == '.'))
        return GGUF_E_INVAL;
    return parse_finite(s, n, f32, out);
}
