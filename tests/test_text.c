/*
 * test_text.c - the text codec (gguf/text.c): hand-written renderings,
 * rejection of bad texts with their messages, lossless round trips of every
 * type and edge value, randomized round trips with a fixed seed, and the
 * linear-time cases (big token and merges arrays).
 *
 * Expected texts are written by hand (or computed by an independent oracle:
 * the linear %.Pg search below), never produced by the code under test.
 */
#include "internal.h" /* gguf_payload_check, to agree with it */

#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void) /* splitmix64, fixed seed */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* little-endian payload builders */
static void b_add(struct gguf_buf *b, const void *p, size_t n)
{
    ck_assert_int_eq(gguf_buf_add(b, p, n), GGUF_OK);
}
static void b_le(struct gguf_buf *b, uint64_t v, int n)
{
    uint8_t t[8];
    for (int i = 0; i < n; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    b_add(b, t, (size_t)n);
}
static void b_u32(struct gguf_buf *b, uint32_t v) { b_le(b, v, 4); }
static void b_u64(struct gguf_buf *b, uint64_t v) { b_le(b, v, 8); }
static void b_str(struct gguf_buf *b, const void *s, size_t n)
{
    b_u64(b, n);
    b_add(b, s, n);
}
static void b_arr(struct gguf_buf *b, enum gguf_type et, uint64_t n)
{
    b_u32(b, et);
    b_u64(b, n);
}

static size_t tsize(enum gguf_type t)
{
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32:
        return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64:
        return 8;
    default: return 0;
    }
}

static char hexbuf[4096];
static const char *hex(const void *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < sizeof hexbuf; i++)
        k += (size_t)snprintf(hexbuf + k, sizeof hexbuf - k, "%02x",
                              ((const uint8_t *)p)[i]);
    hexbuf[k] = 0;
    return hexbuf;
}

/* The size pass (gguf_render_size, gguf_render_map) must give len, the
 * length of text (rendered, or written by hand), and every window
 * (gguf_render_window) the bytes of text there. */
static void check_window(enum gguf_type t, const void *p, size_t n,
                         const struct gguf_text_map *m, const char *text,
                         size_t len, uint64_t off, size_t want)
{
    struct gguf_error err = {0};
    struct gguf_buf w = {0};
    ck_assert_msg(gguf_render_window(t, p, n, m, off, want, &w, &err) ==
                      GGUF_OK,
                  "window %llu+%zu of %s: %s", (unsigned long long)off, want,
                  hex(p, n > 64 ? 64 : n), err.msg);
    size_t o = off < len ? (size_t)off : len;
    size_t k = len - o < want ? len - o : want;
    ck_assert_msg(w.len == k && (k == 0 || memcmp(w.p, text + o, k) == 0),
                  "window %llu+%zu of %s: %zu bytes '%.*s', want %zu '%.*s'",
                  (unsigned long long)off, want, hex(p, n > 64 ? 64 : n),
                  w.len, (int)(w.len > 80 ? 80 : w.len), (const char *)w.p, k,
                  (int)(k > 80 ? 80 : k), text + o);
    gguf_buf_free(&w);
}

static void check_size_text(enum gguf_type t, const void *p, size_t n,
                            const char *text, size_t len)
{
    struct gguf_error err = {0};
    uint64_t size = 0;
    ck_assert_msg(gguf_render_size(t, p, n, &size, &err) == GGUF_OK,
                  "render_size %s: %s", hex(p, n), err.msg);
    ck_assert_msg(size == len, "render_size of %s: %llu, text has %zu",
                  hex(p, n), (unsigned long long)size, len);
    /* scalars are one line made by the same code as array elements: their
     * windows are checked on every 16th (roundtrip_random_floats makes
     * 200 000 of them) */
    static unsigned calls;
    if (t != GGUF_TYPE_ARRAY && t != GGUF_TYPE_STRING && calls++ % 16)
        return;
    struct gguf_text_map m = {0};
    ck_assert_msg(gguf_render_map(t, p, n, &m, &err) == GGUF_OK,
                  "render_map %s: %s", hex(p, n), err.msg);
    ck_assert_msg(m.size == len, "render_map of %s: %llu, text has %zu",
                  hex(p, n), (unsigned long long)m.size, len);
    /* a middle part running past the end, and one without marks (the
     * whole text and past its end: windows_of_big_values) */
    check_window(t, p, n, &m, text, len, len / 2, len);
    check_window(t, p, n, NULL, text, len, len / 3, 2);
    gguf_text_map_free(&m);
}

/* Renders and checks the text is exactly `exp` (explen bytes). */
static void expect_render(enum gguf_type t, const void *p, size_t n,
                          const char *exp, size_t explen)
{
    struct gguf_buf out = {0};
    struct gguf_error err = {0};
    enum gguf_status st = gguf_render(t, p, n, &out, &err);
    ck_assert_msg(st == GGUF_OK, "render %s: %s", hex(p, n), err.msg);
    ck_assert_msg(out.len == explen &&
                      (explen == 0 || memcmp(out.p, exp, explen) == 0),
                  "render of %s: got '%.*s' expected '%.*s'", hex(p, n),
                  (int)out.len, (const char *)out.p, (int)explen, exp);
    check_size_text(t, p, n, exp, explen);
    gguf_buf_free(&out);
}

/* Parses and checks the payload is exactly `exp`. */
static void expect_parse(enum gguf_type t, enum gguf_type at, const char *text,
                         size_t tlen, const void *exp, size_t explen)
{
    struct gguf_buf out = {0};
    struct gguf_error err = {0};
    enum gguf_status st = gguf_parse_text(t, at, text, tlen, &out, &err);
    ck_assert_msg(st == GGUF_OK, "parse '%.*s': %s", (int)tlen, text,
                  err.msg);
    ck_assert_msg(out.len == explen &&
                      (explen == 0 || memcmp(out.p, exp, explen) == 0),
                  "parse of '%.*s' gave %s", (int)tlen, text,
                  hex(out.p, out.len));
    gguf_buf_free(&out);
}

/* Parsing must fail with `code` and a message containing `needle` (if not
 * NULL); the output buffer must be left as it was. */
static void expect_reject(enum gguf_type t, enum gguf_type at,
                          const char *text, size_t tlen,
                          enum gguf_status code, const char *needle)
{
    struct gguf_buf out = {0};
    struct gguf_error err = {0};
    b_add(&out, "KEEP", 4);
    enum gguf_status st = gguf_parse_text(t, at, text, tlen, &out, &err);
    ck_assert_msg(st == code, "parse '%.*s' as %d/%d: status %d, expected %d "
                  "(%s)", (int)tlen, text, t, at, st, code, err.msg);
    ck_assert_int_eq(err.code, code);
    if (needle)
        ck_assert_msg(strstr(err.msg, needle), "message '%s' lacks '%s'",
                      err.msg, needle);
    ck_assert_msg(out.len == 4 && memcmp(out.p, "KEEP", 4) == 0,
                  "output touched on failure");
    gguf_buf_free(&out);
}
#define REJECT(t, text, code, needle)                                          \
    expect_reject(t, GGUF_TYPE_COUNT, text, strlen(text), code, needle)
#define REJECT_ARR(at, text, code, needle)                                     \
    expect_reject(GGUF_TYPE_ARRAY, at, text, strlen(text), code, needle)

/* render -> parse gives the identical payload; returns the text (caller
 * frees) if want_text. */
static char *roundtrip(enum gguf_type t, const void *p, size_t n,
                       size_t *tlen_out)
{
    struct gguf_buf text = {0}, back = {0};
    struct gguf_error err = {0};
    enum gguf_status st = gguf_render(t, p, n, &text, &err);
    ck_assert_msg(st == GGUF_OK, "render %s: %s", hex(p, n), err.msg);
    check_size_text(t, p, n, (const char *)text.p, text.len);
    enum gguf_type at = GGUF_TYPE_COUNT;
    if (t == GGUF_TYPE_ARRAY)
        at = (enum gguf_type)(((const uint8_t *)p)[0] |
                              ((const uint8_t *)p)[1] << 8);
    st = gguf_parse_text(t, at, (const char *)text.p, text.len, &back, &err);
    ck_assert_msg(st == GGUF_OK, "parse back '%.*s': %s",
                  (int)(text.len > 200 ? 200 : text.len),
                  (const char *)text.p, err.msg);
    ck_assert_msg(back.len == n && (n == 0 || memcmp(back.p, p, n) == 0),
                  "round trip of %s gave %s via '%.*s'", hex(p, n > 64 ? 64 : n),
                  hex(back.p, back.len > 64 ? 64 : back.len),
                  (int)(text.len > 200 ? 200 : text.len),
                  (const char *)text.p);
    gguf_buf_free(&back);
    if (tlen_out) {
        b_add(&text, "", 1);
        *tlen_out = text.len - 1;
        return (char *)text.p;
    }
    gguf_buf_free(&text);
    return NULL;
}

static void rt_f32_bits(uint32_t u)
{
    uint8_t p[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16),
                    (uint8_t)(u >> 24)};
    roundtrip(GGUF_TYPE_FLOAT32, p, 4, NULL);
}
static void rt_f64_bits(uint64_t u)
{
    uint8_t p[8];
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
    roundtrip(GGUF_TYPE_FLOAT64, p, 8, NULL);
}
static uint32_t f32u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static uint64_t f64u(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }

static void render_f32(float f, const char *exp)
{
    uint8_t p[4];
    uint32_t u = f32u(f);
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(u >> (8 * i));
    char e[64];
    snprintf(e, sizeof e, "%s\n", exp);
    expect_render(GGUF_TYPE_FLOAT32, p, 4, e, strlen(e));
}
static void render_f32_bits(uint32_t u, const char *exp)
{
    float f;
    memcpy(&f, &u, 4);
    render_f32(f, exp);
}
static void render_f64_bits(uint64_t u, const char *exp)
{
    uint8_t p[8];
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
    char e[64];
    snprintf(e, sizeof e, "%s\n", exp);
    expect_render(GGUF_TYPE_FLOAT64, p, 8, e, strlen(e));
}
static void render_f64(double d, const char *exp) { render_f64_bits(f64u(d), exp); }

static void render_int(enum gguf_type t, uint64_t v, const char *exp)
{
    uint8_t p[8];
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    char e[64];
    snprintf(e, sizeof e, "%s\n", exp);
    expect_render(t, p, tsize(t), e, strlen(e));
}

static void parse_int(enum gguf_type t, const char *text, uint64_t v)
{
    uint8_t p[8];
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    expect_parse(t, GGUF_TYPE_COUNT, text, strlen(text), p, tsize(t));
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- hand-written renderings ---------------------------------------- */

START_TEST(render_integers)
{
    render_int(GGUF_TYPE_UINT8, 0, "0");
    render_int(GGUF_TYPE_UINT8, 255, "255");
    render_int(GGUF_TYPE_INT8, 0x80, "-128");
    render_int(GGUF_TYPE_INT8, 0x7f, "127");
    render_int(GGUF_TYPE_INT8, 0xff, "-1");
    render_int(GGUF_TYPE_UINT16, 65535, "65535");
    render_int(GGUF_TYPE_INT16, 0x8000, "-32768");
    render_int(GGUF_TYPE_UINT32, 4294967295u, "4294967295");
    render_int(GGUF_TYPE_UINT32, 32, "32");
    render_int(GGUF_TYPE_INT32, 0x80000000u, "-2147483648");
    render_int(GGUF_TYPE_INT32, 0x7fffffffu, "2147483647");
    render_int(GGUF_TYPE_UINT64, UINT64_MAX, "18446744073709551615");
    render_int(GGUF_TYPE_UINT64, 0, "0");
    render_int(GGUF_TYPE_INT64, (uint64_t)INT64_MIN, "-9223372036854775808");
    render_int(GGUF_TYPE_INT64, (uint64_t)INT64_MAX, "9223372036854775807");
    render_int(GGUF_TYPE_INT64, (uint64_t)-42, "-42");
    render_int(GGUF_TYPE_BOOL, 1, "true");
    render_int(GGUF_TYPE_BOOL, 0, "false");
}
END_TEST

START_TEST(render_floats)
{
    render_f64(1e-5, "1e-05");
    render_f64(0.5, "0.5");
    render_f64(10000, "10000");
    render_f64(-0.0, "-0");
    render_f64(0.0, "0");
    render_f64(1e20, "1e+20");
    render_f64(-2.5e-310, "-2.5e-310");
    render_f64(0.1, "0.1");
    render_f64(0.0001, "0.0001");
    render_f64(0.00012, "0.00012");
    render_f64(123.456, "123.456");
    render_f64(-1.5, "-1.5");
    render_f64(1e16, "10000000000000000");
    render_f64(1.5e16, "15000000000000000");
    render_f64(1e17, "1e+17");
    render_f64(1.2345e17, "1.2345e+17");
    render_f64(1e100, "1e+100");
    render_f64(DBL_MIN, "2.2250738585072014e-308");
    render_f64(DBL_MAX, "1.7976931348623157e+308");
    render_f64(5e-324, "5e-324");
    render_f64(1.0 / 3, "0.3333333333333333");
    render_f64(4503599627370495.5, "4503599627370495.5");
    render_f64(INFINITY, "inf");
    render_f64(-INFINITY, "-inf");
    render_f64_bits(0x7ff8000000000000u, "nan");
    render_f64_bits(0xfff8000000000000u, "-nan");
    render_f64_bits(0x7ff0000000000001u, "nan(0x1)");
    render_f64_bits(0xfff8000000000001u, "-nan(0x8000000000001)");
    render_f64_bits(0x7fffffffffffffffu, "nan(0xfffffffffffff)");

    render_f32(123456792.0f, "123456792");
    render_f32(0.1f, "0.1");
    render_f32(1e-5f, "1e-05");
    render_f32(0.5f, "0.5");
    render_f32(-0.0f, "-0");
    render_f32(16777216.0f, "16777216");
    render_f32(1e10f, "10000000000");
    render_f32(3e10f, "30000001024");  /* exact integer value */
    render_f32(1e16f, "10000000272564224");
    render_f32(1e17f, "1e+17");       /* 99999998430674944, exponent 17 */
    render_f32(FLT_MAX, "3.4028235e+38");
    render_f32(FLT_MIN, "1.1754944e-38");
    render_f32_bits(0x00000001u, "1e-45");        /* smallest denormal */
    render_f32_bits(0x007fffffu, "1.1754942e-38"); /* largest denormal */
    render_f32_bits(0x80000001u, "-1e-45");
    render_f32(3.14159274f, "3.1415927");
    render_f32(INFINITY, "inf");
    render_f32(-INFINITY, "-inf");
    render_f32_bits(0x7fc00000u, "nan");
    render_f32_bits(0xffc00000u, "-nan");
    render_f32_bits(0x7f800001u, "nan(0x1)");
    render_f32_bits(0x7fc00001u, "nan(0x400001)");
    render_f32_bits(0xffbfffffu, "-nan(0x3fffff)");
    render_f32_bits(0x7fffffffu, "nan(0x7fffff)");
}
END_TEST

START_TEST(render_strings)
{
    struct gguf_buf p = {0};
    b_str(&p, "abc", 3);
    expect_render(GGUF_TYPE_STRING, p.p, p.len, "abc\n", 4);
    p.len = 0;
    b_str(&p, "", 0);
    expect_render(GGUF_TYPE_STRING, p.p, p.len, "\n", 1);
    p.len = 0;
    b_str(&p, "abc\n", 4);
    expect_render(GGUF_TYPE_STRING, p.p, p.len, "abc\n\n", 5);
    p.len = 0;
    /* no escaping in a scalar string */
    b_str(&p, "a\\b\0\xff\r", 6);
    expect_render(GGUF_TYPE_STRING, p.p, p.len, "a\\b\0\xff\r\n", 7);
    gguf_buf_free(&p);
}
END_TEST

START_TEST(render_arrays)
{
    struct gguf_buf p = {0};
    uint8_t u8[3] = {1, 2, 255};
    b_arr(&p, GGUF_TYPE_UINT8, 3);
    b_add(&p, u8, 3);
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, "1\n2\n255\n", 8);

    p.len = 0;
    b_arr(&p, GGUF_TYPE_INT32, 0);
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, "", 0);

    p.len = 0;
    b_arr(&p, GGUF_TYPE_STRING, 0);
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, "", 0);

    p.len = 0;
    b_arr(&p, GGUF_TYPE_BOOL, 2);
    b_add(&p, "\1\0", 2);
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, "true\nfalse\n", 11);

    p.len = 0;
    b_arr(&p, GGUF_TYPE_FLOAT32, 3);
    b_u32(&p, f32u(-0.0f));
    b_u32(&p, f32u(0.25f));
    b_u32(&p, 0xffc00000u);
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, "-0\n0.25\n-nan\n", 13);

    p.len = 0;
    b_arr(&p, GGUF_TYPE_INT64, 2);
    b_u64(&p, (uint64_t)INT64_MIN);
    b_u64(&p, 7);
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, "-9223372036854775808\n7\n",
                  23);

    /* string elements: one line each, escaped */
    static const struct {
        const char *s;
        size_t n;
        const char *line;
    } el[] = {
        {"a", 1, "a"},
        {"", 0, ""},
        {"b\nc", 3, "b\\nc"},
        {"\\", 1, "\\\\"},
        {"\t\r", 2, "\\t\\r"},
        {"\x01\x1f", 2, "\\x01\\x1f"},
        {"\0", 1, "\\x00"},
        {"\x7f", 1, "\\x7f"},
        {"\"q\"", 3, "\"q\""},
        {"\xc3\xa9", 2, "\xc3\xa9"},                 /* é */
        {"\xe2\x82\xac", 3, "\xe2\x82\xac"},         /* € */
        {"\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80"}, /* emoji */
        {"\xff", 1, "\\xff"},
        {"\xc3", 1, "\\xc3"},             /* truncated */
        {"\xe2\x82", 2, "\\xe2\\x82"},    /* truncated */
        {"\xc0\xaf", 2, "\\xc0\\xaf"},    /* overlong */
        {"\xe0\x80\xaf", 3, "\\xe0\\x80\\xaf"}, /* overlong */
        {"\xed\xa0\x80", 3, "\\xed\\xa0\\x80"}, /* surrogate */
        {"\xf4\x90\x80\x80", 4, "\\xf4\\x90\\x80\\x80"}, /* > U+10FFFF */
        {"\x80x", 2, "\\x80x"},
        {"\xc3\xa9\xa9", 3, "\xc3\xa9\\xa9"},
        {"\xe2\x82\xac\xe2", 4, "\xe2\x82\xac\\xe2"},
        {"\xef\xbf\xbf", 3, "\xef\xbf\xbf"},         /* U+FFFF is valid */
        {"\xf4\x8f\xbf\xbf", 4, "\xf4\x8f\xbf\xbf"}, /* U+10FFFF */
        {"\xed\x9f\xbf", 3, "\xed\x9f\xbf"},         /* U+D7FF */
        {"ab c  ", 6, "ab c  "},
    };
    size_t n = sizeof el / sizeof el[0];
    char exp[1024];
    size_t k = 0;
    p.len = 0;
    b_arr(&p, GGUF_TYPE_STRING, n);
    for (size_t i = 0; i < n; i++) {
        b_str(&p, el[i].s, el[i].n);
        size_t l = strlen(el[i].line);
        memcpy(exp + k, el[i].line, l);
        k += l;
        exp[k++] = '\n';

        /* each one alone, through the public line escaper */
        struct gguf_buf o = {0};
        ck_assert_int_eq(gguf_escape_line((const uint8_t *)el[i].s, el[i].n,
                                          &o), GGUF_OK);
        ck_assert_msg(o.len == l && memcmp(o.p, el[i].line, l) == 0,
                      "escape_line #%zu gave '%.*s'", i, (int)o.len,
                      (const char *)o.p);
        o.len = 0;
        struct gguf_error err = {0};
        ck_assert_int_eq(gguf_unescape_line(el[i].line, l, &o, &err), GGUF_OK);
        ck_assert_msg(o.len == el[i].n && memcmp(o.p, el[i].s, el[i].n) == 0,
                      "unescape_line #%zu", i);
        gguf_buf_free(&o);
    }
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, exp, k);
    roundtrip(GGUF_TYPE_ARRAY, p.p, p.len, NULL);
    gguf_buf_free(&p);
}
END_TEST

/* the bracketed form of arrays of arrays */
START_TEST(render_nested)
{
    struct gguf_buf p = {0};
    b_arr(&p, GGUF_TYPE_ARRAY, 5);
    b_arr(&p, GGUF_TYPE_UINT32, 3);
    b_u32(&p, 1);
    b_u32(&p, 2);
    b_u32(&p, 3);
    b_arr(&p, GGUF_TYPE_STRING, 3);
    b_str(&p, "a", 1);
    b_str(&p, "b\n", 2);
    b_str(&p, "\"\\\xff", 3);
    b_arr(&p, GGUF_TYPE_FLOAT32, 0);
    b_arr(&p, GGUF_TYPE_ARRAY, 2);
    b_arr(&p, GGUF_TYPE_UINT8, 1);
    b_add(&p, "\1", 1);
    b_arr(&p, GGUF_TYPE_STRING, 0);
    b_arr(&p, GGUF_TYPE_BOOL, 2);
    b_add(&p, "\0\1", 2);
    const char *exp = "uint32[1, 2, 3]\n"
                      "string[\"a\", \"b\\n\", \"\\\"\\\\\\xff\"]\n"
                      "float32[]\n"
                      "array[uint8[1], string[]]\n"
                      "bool[false, true]\n";
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, exp, strlen(exp));
    roundtrip(GGUF_TYPE_ARRAY, p.p, p.len, NULL);
    expect_parse(GGUF_TYPE_ARRAY, GGUF_TYPE_ARRAY, exp, strlen(exp), p.p,
                 p.len);
    /* lenient spacing: none or several spaces around elements */
    const char *loose = "uint32[ 1,2 ,   3 ]\n"
                        "string[\"a\",\"b\\n\" , \"\\\"\\\\\\xFF\"]\n"
                        "float32[ ]\n"
                        "array[uint8[1],string[]]\n"
                        "bool[false,true]\n";
    expect_parse(GGUF_TYPE_ARRAY, GGUF_TYPE_ARRAY, loose, strlen(loose), p.p,
                 p.len);

    /* an empty array of arrays, and an array holding an empty array of
     * arrays */
    p.len = 0;
    b_arr(&p, GGUF_TYPE_ARRAY, 0);
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, "", 0);
    p.len = 0;
    b_arr(&p, GGUF_TYPE_ARRAY, 1);
    b_arr(&p, GGUF_TYPE_ARRAY, 0);
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, "array[]\n", 8);
    roundtrip(GGUF_TYPE_ARRAY, p.p, p.len, NULL);
    gguf_buf_free(&p);
}
END_TEST

/* nesting: top level 1, lines level 2, deepest GGUF_MAX_NESTING */
START_TEST(nesting_limit)
{
    struct gguf_buf p = {0};
    char text[512];
    size_t k = 0;
    b_arr(&p, GGUF_TYPE_ARRAY, 1); /* level 1 */
    for (int lv = 2; lv < GGUF_MAX_NESTING; lv++) {
        b_arr(&p, GGUF_TYPE_ARRAY, 1);
        k += (size_t)sprintf(text + k, "array[");
    }
    b_arr(&p, GGUF_TYPE_UINT8, 1); /* level GGUF_MAX_NESTING */
    b_add(&p, "\7", 1);
    k += (size_t)sprintf(text + k, "uint8[7]");
    for (int lv = 2; lv < GGUF_MAX_NESTING; lv++)
        text[k++] = ']';
    text[k++] = '\n';
    text[k] = 0;
    expect_render(GGUF_TYPE_ARRAY, p.p, p.len, text, k);
    expect_parse(GGUF_TYPE_ARRAY, GGUF_TYPE_ARRAY, text, k, p.p, p.len);
    uint64_t used0;
    struct gguf_error err0 = {0};
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_ARRAY, p.p, p.len, true,
                                        &used0, "k", 0, &err0), GGUF_OK);

    /* one level more is refused both ways */
    char deeper[600];
    snprintf(deeper, sizeof deeper, "array[%.*s]\n", (int)(k - 1), text);
    REJECT_ARR(GGUF_TYPE_ARRAY, deeper, GGUF_E_INVAL, "nested");
    struct gguf_buf q = {0}, out = {0};
    b_arr(&q, GGUF_TYPE_ARRAY, 1);
    b_add(&q, p.p, p.len);
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_render(GGUF_TYPE_ARRAY, q.p, q.len, &out, &err),
                     GGUF_E_FORMAT);
    ck_assert_uint_eq(out.len, 0);

    /* at the deepest level not even an empty array of arrays */
    p.len = 0;
    k = 0;
    b_arr(&p, GGUF_TYPE_ARRAY, 1); /* level 1 */
    for (int lv = 2; lv < GGUF_MAX_NESTING; lv++) {
        b_arr(&p, GGUF_TYPE_ARRAY, 1);
        k += (size_t)sprintf(text + k, "array[");
    }
    b_arr(&p, GGUF_TYPE_ARRAY, 0); /* level GGUF_MAX_NESTING */
    k += (size_t)sprintf(text + k, "array[]");
    for (int lv = 2; lv < GGUF_MAX_NESTING; lv++)
        text[k++] = ']';
    text[k++] = '\n';
    text[k] = 0;
    REJECT_ARR(GGUF_TYPE_ARRAY, text, GGUF_E_INVAL, "nested");
    ck_assert_int_eq(gguf_render(GGUF_TYPE_ARRAY, p.p, p.len, &out, &err),
                     GGUF_E_FORMAT);
    /* one level up it is fine */
    memmove(text, text + 6, k - 6); /* one "array[" less ... */
    text[k - 8] = '\n';             /* ... and one ']' less */
    text[k - 7] = 0;
    struct gguf_buf up = {0};
    b_arr(&up, GGUF_TYPE_ARRAY, 1);
    b_add(&up, p.p + 24, p.len - 24);
    expect_render(GGUF_TYPE_ARRAY, up.p, up.len, text, k - 7);
    roundtrip(GGUF_TYPE_ARRAY, up.p, up.len, NULL);
    /* the same limits as the payload validator's */
    uint64_t used;
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_ARRAY, up.p, up.len, true,
                                        &used, "k", 0, &err), GGUF_OK);
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_ARRAY, p.p, p.len, true,
                                        &used, "k", 0, &err), GGUF_E_FORMAT);
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_ARRAY, q.p, q.len, true,
                                        &used, "k", 0, &err), GGUF_E_FORMAT);
    gguf_buf_free(&up);
    gguf_buf_free(&p);
    gguf_buf_free(&q);
    gguf_buf_free(&out);
}
END_TEST

/* ---- parsing -------------------------------------------------------- */

START_TEST(parse_scalars)
{
    parse_int(GGUF_TYPE_UINT8, "0", 0);
    parse_int(GGUF_TYPE_UINT8, "255\n", 255);
    parse_int(GGUF_TYPE_UINT8, "007", 7); /* leading zeros accepted */
    parse_int(GGUF_TYPE_UINT8, "-0", 0);
    parse_int(GGUF_TYPE_INT8, "-128", 0x80);
    parse_int(GGUF_TYPE_INT8, "127", 0x7f);
    parse_int(GGUF_TYPE_INT8, "-0", 0);
    parse_int(GGUF_TYPE_UINT16, "65535", 0xffff);
    parse_int(GGUF_TYPE_INT16, "-32768", 0x8000);
    parse_int(GGUF_TYPE_UINT32, "4294967295\n", 0xffffffffu);
    parse_int(GGUF_TYPE_INT32, "-2147483648", 0x80000000u);
    parse_int(GGUF_TYPE_UINT64, "18446744073709551615", UINT64_MAX);
    parse_int(GGUF_TYPE_UINT64, "000000000000000000000000000001", 1);
    parse_int(GGUF_TYPE_INT64, "-9223372036854775808", (uint64_t)INT64_MIN);
    parse_int(GGUF_TYPE_INT64, "9223372036854775807\n", (uint64_t)INT64_MAX);
    parse_int(GGUF_TYPE_BOOL, "true", 1);
    parse_int(GGUF_TYPE_BOOL, "true\n", 1);
    parse_int(GGUF_TYPE_BOOL, "false", 0);
    parse_int(GGUF_TYPE_BOOL, "1", 1);
    parse_int(GGUF_TYPE_BOOL, "0\n", 0);

    /* floats, by bits */
    parse_int(GGUF_TYPE_FLOAT32, "0.5", f32u(0.5f));
    parse_int(GGUF_TYPE_FLOAT32, "-0", 0x80000000u);
    parse_int(GGUF_TYPE_FLOAT32, "1e-45", 1);
    parse_int(GGUF_TYPE_FLOAT32, "1e-50", 0); /* underflow rounds */
    parse_int(GGUF_TYPE_FLOAT32, "3.4028235e38\n", f32u(FLT_MAX));
    parse_int(GGUF_TYPE_FLOAT32, "0x1p-149", 1); /* strtod's hex form */
    parse_int(GGUF_TYPE_FLOAT32, "+2", f32u(2.0f));
    parse_int(GGUF_TYPE_FLOAT32, ".5", f32u(0.5f));
    parse_int(GGUF_TYPE_FLOAT32, "inf", 0x7f800000u);
    parse_int(GGUF_TYPE_FLOAT32, "-inf\n", 0xff800000u);
    parse_int(GGUF_TYPE_FLOAT32, "Infinity", 0x7f800000u);
    parse_int(GGUF_TYPE_FLOAT32, "nan", 0x7fc00000u);
    parse_int(GGUF_TYPE_FLOAT32, "-nan", 0xffc00000u);
    parse_int(GGUF_TYPE_FLOAT32, "NaN", 0x7fc00000u);
    parse_int(GGUF_TYPE_FLOAT32, "nan(0x1)", 0x7f800001u);
    parse_int(GGUF_TYPE_FLOAT32, "-nan(0x7FFFFF)\n", 0xffffffffu);
    parse_int(GGUF_TYPE_FLOAT32, "nan(0x400000)", 0x7fc00000u);
    parse_int(GGUF_TYPE_FLOAT64, "1e-05", f64u(1e-5));
    parse_int(GGUF_TYPE_FLOAT64, "-2.5e-310", f64u(-2.5e-310));
    parse_int(GGUF_TYPE_FLOAT64, "nan", 0x7ff8000000000000u);
    parse_int(GGUF_TYPE_FLOAT64, "-nan(0x8000000000001)", 0xfff8000000000001u);
    parse_int(GGUF_TYPE_FLOAT64, "nan(0xfffffffffffff)", 0x7fffffffffffffffu);
    parse_int(GGUF_TYPE_FLOAT64, "-inf", 0xfff0000000000000u);
    parse_int(GGUF_TYPE_FLOAT64, "1e-400", 0);

    /* strings: the whole text minus one newline */
    struct gguf_buf p = {0};
    static const struct { const char *text; size_t tn; const char *v; size_t vn; }
    st[] = {
        {"abc", 3, "abc", 3},
        {"abc\n", 4, "abc", 3},
        {"abc\n\n", 5, "abc\n", 4},
        {"", 0, "", 0},
        {"\n", 1, "", 0},
        {"\n\n", 2, "\n", 1},
        {"a\\n\0\xff", 5, "a\\n\0\xff", 5}, /* no unescaping */
    };
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        p.len = 0;
        b_str(&p, st[i].v, st[i].vn);
        expect_parse(GGUF_TYPE_STRING, GGUF_TYPE_COUNT, st[i].text, st[i].tn,
                     p.p, p.len);
    }
    gguf_buf_free(&p);
}
END_TEST

START_TEST(parse_appends)
{
    struct gguf_buf out = {0};
    struct gguf_error err = {0};
    b_add(&out, "xy", 2);
    ck_assert_int_eq(gguf_parse_text(GGUF_TYPE_UINT16, GGUF_TYPE_COUNT, "258",
                                     3, &out, &err), GGUF_OK);
    ck_assert_uint_eq(out.len, 4);
    ck_assert(memcmp(out.p, "xy\2\1", 4) == 0);
    uint8_t one[1] = {1};
    ck_assert_int_eq(gguf_render(GGUF_TYPE_UINT8, one, 1, &out, &err),
                     GGUF_OK);
    ck_assert_uint_eq(out.len, 6);
    ck_assert(memcmp(out.p, "xy\2\0011\n", 6) == 0);
    gguf_buf_free(&out);
}
END_TEST

START_TEST(reject_bad_texts)
{
    REJECT(GGUF_TYPE_UINT32, "12x", GGUF_E_INVAL,
           "line 1: '12x' is not a uint32");
    REJECT(GGUF_TYPE_UINT8, "300", GGUF_E_RANGE,
           "line 1: 300 is out of range for uint8");
    REJECT(GGUF_TYPE_UINT8, "256\n", GGUF_E_RANGE, "out of range");
    REJECT(GGUF_TYPE_UINT8, "-1", GGUF_E_RANGE, "out of range");
    REJECT(GGUF_TYPE_UINT64, "-5", GGUF_E_RANGE, "out of range");
    REJECT(GGUF_TYPE_INT8, "128", GGUF_E_RANGE, "out of range for int8");
    REJECT(GGUF_TYPE_INT8, "-129", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_UINT16, "65536", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_INT16, "-32769", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_UINT32, "4294967296", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_INT32, "2147483648", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_UINT64, "18446744073709551616", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_UINT64, "99999999999999999999999999", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_INT64, "9223372036854775808", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_INT64, "-9223372036854775809", GGUF_E_RANGE, NULL);
    static const char *junk[] = {
        "", "\n", "\r\n", "1\r\r", " 1", "1 ", "+1", "0x10", "1.0", "1e3",
        "-", "--1", "1-", "one", "1\r", "\r1", "1\r\r\n", " 1\r\n",
    };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        REJECT(GGUF_TYPE_UINT32, junk[i], GGUF_E_INVAL, "is not a uint32");
        REJECT(GGUF_TYPE_INT64, junk[i], GGUF_E_INVAL, "is not an int64");
    }
    expect_reject(GGUF_TYPE_UINT8, GGUF_TYPE_COUNT, "1\0", 2, GGUF_E_INVAL,
                  NULL);

    static const char *badbool[] = {"yes", "no", "TRUE", "True", "2", "",
                                    "true\r", " true", "t", "01", "-1",
                                    "true ", "\n"};
    for (size_t i = 0; i < sizeof badbool / sizeof badbool[0]; i++)
        REJECT(GGUF_TYPE_BOOL, badbool[i], GGUF_E_INVAL, "is not a bool");

    REJECT(GGUF_TYPE_FLOAT32, "1e39", GGUF_E_RANGE,
           "1e39 is out of range for float32");
    REJECT(GGUF_TYPE_FLOAT32, "-1e39\n", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_FLOAT32, "3.5e38", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_FLOAT64, "1e309", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_FLOAT32, "nan(0x800000)", GGUF_E_RANGE, NULL);
    REJECT(GGUF_TYPE_FLOAT64, "nan(0x10000000000000)", GGUF_E_RANGE, NULL);
    static const char *badf[] = {
        "", "\n", " 1", "1 ", "1.5x", "1e", "e5", ".", "-", "0x", "1..2",
        "nan(0x0)", "nan()", "nan(0x)", "nan(1)", "nan(0xg)", "nan(0x1",
        "nanx", "infx", "in", "--1", "1,5", "1\r", "nan(0x1) ", "- 1",
        "\t1", "0x1p", "inf\r\r\n",
    };
    for (size_t i = 0; i < sizeof badf / sizeof badf[0]; i++) {
        REJECT(GGUF_TYPE_FLOAT32, badf[i], GGUF_E_INVAL, "is not a float32");
        REJECT(GGUF_TYPE_FLOAT64, badf[i], GGUF_E_INVAL, "is not a float64");
    }

    /* a number or bool is one line; the message says so and names the
     * first extra line (was: "line 1: '12\n3' is not a uint32") */
    REJECT(GGUF_TYPE_UINT32, "12\n3", GGUF_E_INVAL,
           "line 2: a uint32 value is one line; the text has 2 lines");
    REJECT(GGUF_TYPE_UINT32, "2\n7\n", GGUF_E_INVAL,
           "line 2: a uint32 value is one line; the text has 2 lines");
    REJECT(GGUF_TYPE_INT64, "1\n\n", GGUF_E_INVAL,
           "line 2: an int64 value is one line; the text has 2 lines");
    REJECT(GGUF_TYPE_UINT8, "\n\n\n", GGUF_E_INVAL,
           "line 2: a uint8 value is one line; the text has 3 lines");
    REJECT(GGUF_TYPE_BOOL, "true\r\nfalse\r\n", GGUF_E_INVAL,
           "line 2: a bool value is one line; the text has 2 lines");
    REJECT(GGUF_TYPE_FLOAT32, "inf\n\n", GGUF_E_INVAL,
           "line 2: a float32 value is one line");
    REJECT(GGUF_TYPE_FLOAT64, "1\n\n", GGUF_E_INVAL,
           "line 2: a float64 value is one line");

    /* bytes are shown as typed: printable ASCII (the backslash and the
     * quote too) and UTF-8 as they are, control bytes and invalid UTF-8
     * escaped (was: '1\x5c' and '\xc3\xa9') */
    REJECT(GGUF_TYPE_UINT32, "1\\", GGUF_E_INVAL,
           "line 1: '1\\' is not a uint32");
    REJECT(GGUF_TYPE_UINT32, "it's", GGUF_E_INVAL,
           "line 1: 'it's' is not a uint32");
    REJECT(GGUF_TYPE_INT8, "\xc3\xa9", GGUF_E_INVAL,
           "line 1: '\xc3\xa9' is not an int8");
    REJECT(GGUF_TYPE_INT8, "\x01\t\r\xff", GGUF_E_INVAL,
           "line 1: '\\x01\\t\\r\\xff' is not an int8");
    REJECT_ARR(GGUF_TYPE_STRING, "ok\na\\qb\n", GGUF_E_INVAL,
               "line 2, column 2: unknown escape '\\q'");
    REJECT_ARR(GGUF_TYPE_STRING, "\\\xc3\xa9\n", GGUF_E_INVAL,
               "line 1, column 1: unknown escape '\\\xc3\xa9'");

    /* arrays */
    REJECT_ARR(GGUF_TYPE_UINT32, "1\n2", GGUF_E_INVAL,
               "line 2: last line is incomplete (no trailing newline)");
    REJECT_ARR(GGUF_TYPE_STRING, "a", GGUF_E_INVAL,
               "line 1: last line is incomplete");
    REJECT_ARR(GGUF_TYPE_UINT32, "1\n2\n12x\n", GGUF_E_INVAL,
               "line 3: '12x' is not a uint32");
    REJECT_ARR(GGUF_TYPE_UINT8, "1\n300\n", GGUF_E_RANGE,
               "line 2: 300 is out of range for uint8");
    REJECT_ARR(GGUF_TYPE_UINT32, "1\n\n2\n", GGUF_E_INVAL, "line 2:");
    REJECT_ARR(GGUF_TYPE_UINT32, "\n", GGUF_E_INVAL, "line 1:");
    REJECT_ARR(GGUF_TYPE_BOOL, "true\nyes\n", GGUF_E_INVAL,
               "line 2: 'yes' is not a bool");
    REJECT_ARR(GGUF_TYPE_FLOAT32, "1\n1e39\n", GGUF_E_RANGE, "line 2:");
    REJECT_ARR(GGUF_TYPE_STRING, "ok\na\\qb\n", GGUF_E_INVAL,
               "line 2, column 2: unknown escape");
    REJECT_ARR(GGUF_TYPE_STRING, "a\\x4\n", GGUF_E_INVAL, "line 1");
    REJECT_ARR(GGUF_TYPE_STRING, "a\\x\n", GGUF_E_INVAL, NULL);
    REJECT_ARR(GGUF_TYPE_STRING, "a\\xzz\n", GGUF_E_INVAL, NULL);
    REJECT_ARR(GGUF_TYPE_STRING, "a\\\n", GGUF_E_INVAL, NULL);
    REJECT_ARR(GGUF_TYPE_STRING, "\\\"\n", GGUF_E_INVAL, "unknown escape");
    REJECT_ARR(GGUF_TYPE_STRING, "\\N\n", GGUF_E_INVAL, NULL);
    REJECT_ARR(GGUF_TYPE_STRING, "\\0\n", GGUF_E_INVAL, NULL);
    REJECT_ARR(GGUF_TYPE_COUNT, "", GGUF_E_INVAL, NULL);
    REJECT(GGUF_TYPE_COUNT, "1", GGUF_E_INVAL, NULL);

    /* arrays of arrays */
    static const char *badn[] = {
        "\n", "uint32\n", "uint32 [1]\n", " uint32[1]\n", "uint32[1]x\n",
        "uint32[1] \n", "uint32[1\n", "uint32[1,]\n", "uint32[,1]\n",
        "uint32[1 2]\n", "foo[1]\n", "UINT32[1]\n", "string[a]\n",
        "string[\"a]\n", "string[\"a\" \"b\"]\n", "string[\"\\q\"]\n",
        "uint8[x]\n", "array[1]\n", "array[uint8[1]\n", "uint32[]]\n",
        "[1]\n", "uint32[1][2]\n", "bool[yes]\n", "float32[1e]\n",
        "uint32[1]\nuint32[\n",
    };
    for (size_t i = 0; i < sizeof badn / sizeof badn[0]; i++)
        REJECT_ARR(GGUF_TYPE_ARRAY, badn[i], GGUF_E_INVAL, "line");
    REJECT_ARR(GGUF_TYPE_ARRAY, "uint8[1]\nuint8[256]\n", GGUF_E_RANGE,
               "line 2: 256 is out of range for uint8");
    REJECT_ARR(GGUF_TYPE_ARRAY, "uint8[1]", GGUF_E_INVAL, "incomplete");
}
END_TEST

/* "\r\n" ends a line of a number, a bool, or any array's element; a
 * string keeps its CR (rendering writes it raw: "a\r" renders "a\r\n"). */
START_TEST(crlf_line_ends)
{
    static const enum gguf_type num[] = {
        GGUF_TYPE_UINT8, GGUF_TYPE_INT8, GGUF_TYPE_UINT16, GGUF_TYPE_INT16,
        GGUF_TYPE_UINT32, GGUF_TYPE_INT32, GGUF_TYPE_UINT64, GGUF_TYPE_INT64,
        GGUF_TYPE_FLOAT32, GGUF_TYPE_FLOAT64, GGUF_TYPE_BOOL};
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++) {
        enum gguf_type t = num[i];
        size_t sz = tsize(t);
        struct gguf_buf lf = {0}, crlf = {0}, arr = {0};
        struct gguf_error err = {0};
        ck_assert_int_eq(gguf_parse_text(t, GGUF_TYPE_COUNT, "1\n", 2, &lf,
                                         &err), GGUF_OK);
        ck_assert_msg(gguf_parse_text(t, GGUF_TYPE_COUNT, "1\r\n", 3, &crlf,
                                      &err) == GGUF_OK,
                      "%s: '1\\r\\n' refused: %s", gguf_type_name(t), err.msg);
        ck_assert(lf.len == sz && crlf.len == sz &&
                  memcmp(lf.p, crlf.p, sz) == 0);
        /* array elements, mixed line ends */
        ck_assert_msg(gguf_parse_text(GGUF_TYPE_ARRAY, t, "1\r\n0\n1\r\n", 8,
                                      &arr, &err) == GGUF_OK,
                      "array[%s] with CRLF refused: %s", gguf_type_name(t),
                      err.msg);
        ck_assert_uint_eq(arr.len, 12 + 3 * sz);
        ck_assert_uint_eq(gguf_rd64(arr.p + 4), 3);
        ck_assert(memcmp(arr.p + 12, lf.p, sz) == 0);
        /* the prefix check accepts the CR while the LF is still to come */
        size_t checked = 0;
        ck_assert_int_eq(gguf_text_check_prefix(t, GGUF_TYPE_COUNT, "1\r", 2,
                                                &checked, &err), GGUF_OK);
        ck_assert_int_eq(gguf_text_check_prefix(t, GGUF_TYPE_COUNT, "1\r\n",
                                                3, &checked, &err), GGUF_OK);
        gguf_buf_free(&lf);
        gguf_buf_free(&crlf);
        gguf_buf_free(&arr);
    }
    /* a lone CR is not a line end */
    REJECT(GGUF_TYPE_UINT32, "7\r", GGUF_E_INVAL, "'7\\r' is not a uint32");
    REJECT_ARR(GGUF_TYPE_UINT32, "1\r2\n", GGUF_E_INVAL, "line 1:");

    /* strings keep the CR: "a\r\n" is the 2-byte string "a\r", and it
     * renders back to the same text (lossless) */
    uint8_t a_cr[] = {2, 0, 0, 0, 0, 0, 0, 0, 'a', '\r'};
    expect_parse(GGUF_TYPE_STRING, GGUF_TYPE_COUNT, "a\r\n", 3, a_cr,
                 sizeof a_cr);
    expect_render(GGUF_TYPE_STRING, a_cr, sizeof a_cr, "a\r\n", 3);
    /* string array lines: the CR before the newline is part of the line
     * end (the renderer writes a CR element byte as "\r", never raw) */
    struct gguf_buf sa = {0};
    b_arr(&sa, GGUF_TYPE_STRING, 3);
    b_str(&sa, "a", 1);
    b_str(&sa, "", 0);
    b_str(&sa, "b\rc\r", 4);
    expect_parse(GGUF_TYPE_ARRAY, GGUF_TYPE_STRING, "a\r\n\r\nb\rc\\r\r\n",
                 12, sa.p, sa.len);
    expect_render(GGUF_TYPE_ARRAY, sa.p, sa.len, "a\n\nb\\rc\\r\n", 10);
    gguf_buf_free(&sa);
    /* arrays of arrays */
    struct gguf_buf na = {0};
    b_arr(&na, GGUF_TYPE_ARRAY, 1);
    b_arr(&na, GGUF_TYPE_UINT8, 1);
    b_le(&na, 5, 1);
    expect_parse(GGUF_TYPE_ARRAY, GGUF_TYPE_ARRAY, "uint8[5]\r\n", 10, na.p,
                 na.len);
    gguf_buf_free(&na);
}
END_TEST

/* Messages of gguf_text_check_prefix name lines of the whole text, however
 * it arrived (was: the line within the last piece checked). */
START_TEST(check_prefix_lines)
{
    enum { N = 40000 };
    char *text = malloc((size_t)N * 8);
    size_t len = 0;
    for (int i = 1; i <= N; i++)
        len += (size_t)sprintf(text + len, "%d\n", i == 32000 ? -1 : i);
    struct gguf_error err = {0};
    size_t checked = 0, at = 0;
    enum gguf_status st = GGUF_OK;
    /* pieces of 4096 bytes, as write(2) calls deliver them */
    while (at < len && st == GGUF_OK) {
        at = at + 4096 < len ? at + 4096 : len;
        st = gguf_text_check_prefix(GGUF_TYPE_ARRAY, GGUF_TYPE_UINT32, text,
                                    at, &checked, &err);
    }
    ck_assert_int_eq(st, GGUF_E_RANGE);
    ck_assert_str_eq(err.msg, "line 32000: -1 is out of range for uint32");
    /* the same text in one piece, and from scratch: the same message */
    checked = 0;
    ck_assert_int_eq(gguf_text_check_prefix(GGUF_TYPE_ARRAY, GGUF_TYPE_UINT32,
                                            text, len, &checked, &err),
                     GGUF_E_RANGE);
    ck_assert_str_eq(err.msg, "line 32000: -1 is out of range for uint32");
    /* an incomplete scalar prefix: the same wording as the parser's */
    checked = 0;
    ck_assert_int_eq(gguf_text_check_prefix(GGUF_TYPE_INT32, GGUF_TYPE_COUNT,
                                            "12a", 3, &checked, &err),
                     GGUF_E_INVAL);
    ck_assert_str_eq(err.msg, "line 1: '12a' is not an int32");
    /* the scalar case of issue 10: `echo 7 >> file` holding "2\n" */
    ck_assert_int_eq(gguf_text_check_prefix(GGUF_TYPE_UINT32, GGUF_TYPE_COUNT,
                                            "2\n7\n", 4, &checked, &err),
                     GGUF_E_INVAL);
    ck_assert_str_eq(err.msg,
                     "line 2: a uint32 value is one line; the text has 2 lines");
    free(text);
}
END_TEST

START_TEST(unescape_line_api)
{
    struct gguf_buf o = {0};
    struct gguf_error err = {0};
    const char *good = "a\\\\b\\nc\\rd\\te\\x41\\x4a\\xff";
    ck_assert_int_eq(gguf_unescape_line(good, strlen(good), &o, &err),
                     GGUF_OK);
    ck_assert_uint_eq(o.len, 12);
    ck_assert(memcmp(o.p, "a\\b\nc\rd\teAJ\xff", 12) == 0);
    static const char *bad[] = {"\\", "a\\", "\\q", "\\x", "\\x4", "\\xg0",
                                "\\\"", "\\X41", "ok\\u0041"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.len = 0;
        ck_assert_msg(gguf_unescape_line(bad[i], strlen(bad[i]), &o, &err) ==
                          GGUF_E_INVAL, "accepted '%s'", bad[i]);
        ck_assert_uint_eq(o.len, 0);
    }
    gguf_buf_free(&o);
}
END_TEST

START_TEST(utf8_validity)
{
    static const struct { const char *s; size_t n; bool ok; } t[] = {
        {"", 0, true},
        {"abc", 3, true},
        {"\0", 1, true},
        {"\x7f", 1, true},
        {"\xc2\x80", 2, true},
        {"\xdf\xbf", 2, true},
        {"\xe0\xa0\x80", 3, true},
        {"\xed\x9f\xbf", 3, true},
        {"\xee\x80\x80", 3, true},
        {"\xf0\x90\x80\x80", 4, true},
        {"\xf4\x8f\xbf\xbf", 4, true},
        {"\x80", 1, false},
        {"\xbf", 1, false},
        {"\xc0\x80", 2, false},          /* overlong NUL */
        {"\xc1\xbf", 2, false},          /* overlong */
        {"\xe0\x9f\xbf", 3, false},      /* overlong */
        {"\xf0\x8f\xbf\xbf", 4, false},  /* overlong */
        {"\xed\xa0\x80", 3, false},      /* U+D800 */
        {"\xed\xbf\xbf", 3, false},      /* U+DFFF */
        {"\xf4\x90\x80\x80", 4, false},  /* U+110000 */
        {"\xf5\x80\x80\x80", 4, false},
        {"\xff", 1, false},
        {"\xfe", 1, false},
        {"\xc3", 1, false},
        {"\xe2\x82", 2, false},
        {"\xf0\x9f\x98", 3, false},
        {"\xc3\x28", 2, false},
        {"\xe2\x28\xa1", 3, false},
        {"a\xc3\xa9z", 4, true},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ck_assert_msg(gguf_utf8_valid((const uint8_t *)t[i].s, t[i].n) ==
                          t[i].ok, "utf8 case %zu", i);
}
END_TEST

START_TEST(render_rejects_bad_payloads)
{
    struct gguf_buf out = {0};
    struct gguf_error err = {0};
    b_add(&out, "KEEP", 4);
    uint8_t two = 2;
    /* ggml reads a bool byte of 2 as true; so do we. */
    ck_assert_int_eq(gguf_render(GGUF_TYPE_BOOL, &two, 1, &out, &err),
                     GGUF_OK);
    ck_assert_msg(out.len == 9 && memcmp(out.p, "KEEPtrue\n", 9) == 0,
                  "bool byte 2 rendered as '%.*s'", (int)out.len, out.p);
    uint8_t u32[5] = {0};
    ck_assert_int_eq(gguf_render(GGUF_TYPE_UINT32, u32, 3, &out, &err),
                     GGUF_E_FORMAT);
    ck_assert_int_eq(gguf_render(GGUF_TYPE_UINT32, u32, 5, &out, &err),
                     GGUF_E_FORMAT);
    struct gguf_buf p = {0};
    b_u64(&p, 5);
    b_add(&p, "abcd", 4);
    ck_assert_int_eq(gguf_render(GGUF_TYPE_STRING, p.p, p.len, &out, &err),
                     GGUF_E_FORMAT);
    p.len = 0;
    b_arr(&p, GGUF_TYPE_UINT32, UINT64_MAX / 2);
    b_u32(&p, 1);
    ck_assert_int_eq(gguf_render(GGUF_TYPE_ARRAY, p.p, p.len, &out, &err),
                     GGUF_E_FORMAT);
    p.len = 0;
    b_arr(&p, GGUF_TYPE_STRING, 2);
    b_str(&p, "a", 1);
    b_u64(&p, 100);
    b_add(&p, "b", 1);
    ck_assert_int_eq(gguf_render(GGUF_TYPE_ARRAY, p.p, p.len, &out, &err),
                     GGUF_E_FORMAT);
    p.len = 0;
    b_arr(&p, GGUF_TYPE_UINT8, 1);
    b_add(&p, "\1\2", 2); /* a stray byte */
    ck_assert_int_eq(gguf_render(GGUF_TYPE_ARRAY, p.p, p.len, &out, &err),
                     GGUF_E_FORMAT);
    p.len = 0;
    b_arr(&p, (enum gguf_type)13, 0);
    ck_assert_int_eq(gguf_render(GGUF_TYPE_ARRAY, p.p, p.len, &out, &err),
                     GGUF_E_FORMAT);
    ck_assert_int_eq(gguf_render(GGUF_TYPE_COUNT, u32, 4, &out, &err),
                     GGUF_E_INVAL);
    ck_assert_uint_eq(out.len, 9); /* nothing appended on failure */
    gguf_buf_free(&p);
    gguf_buf_free(&out);
}
END_TEST

/* ---- round trips ---------------------------------------------------- */

START_TEST(roundtrip_edges)
{
    static const uint64_t ints[] = {
        0, 1, 2, 9, 10, 99, 100, 127, 128, 255, 256, 32767, 32768, 65535,
        65536, 0x7fffffff, 0x80000000u, 0xffffffffu, 0x100000000u,
        (uint64_t)INT64_MAX, (uint64_t)INT64_MIN, UINT64_MAX, UINT64_MAX - 1,
        10000000000000000000u, 9999999999999999999u,
    };
    static const enum gguf_type it[] = {
        GGUF_TYPE_UINT8, GGUF_TYPE_INT8, GGUF_TYPE_UINT16, GGUF_TYPE_INT16,
        GGUF_TYPE_UINT32, GGUF_TYPE_INT32, GGUF_TYPE_UINT64, GGUF_TYPE_INT64,
    };
    for (size_t t = 0; t < sizeof it / sizeof it[0]; t++)
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
            uint8_t p[8];
            for (int j = 0; j < 8; j++)
                p[j] = (uint8_t)(ints[i] >> (8 * j));
            roundtrip(it[t], p, tsize(it[t]), NULL);
        }
    for (uint8_t b = 0; b <= 1; b++)
        roundtrip(GGUF_TYPE_BOOL, &b, 1, NULL);

    static const uint32_t f32[] = {
        0, 0x80000000u, 1, 0x80000001u, 0x007fffffu, 0x807fffffu,
        0x00800000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
        0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fc00001u,
        0x7fbfffffu, 0x7fffffffu, 0xffffffffu, 0x3f800000u, 0x3f800001u,
        0x3f7fffffu, 0x4b000000u, 0x4b7fffffu, 0x4cbebc20u, 0x5a0e1bcau,
    };
    for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++)
        rt_f32_bits(f32[i]);
    rt_f32_bits(f32u(FLT_MAX));
    rt_f32_bits(f32u(FLT_MIN));
    rt_f32_bits(f32u(FLT_EPSILON));
    rt_f32_bits(f32u(123456792.0f));

    static const uint64_t f64[] = {
        0, 0x8000000000000000u, 1, 0x8000000000000001u,
        0x000fffffffffffffu, 0x800fffffffffffffu, 0x0010000000000000u,
        0x7fefffffffffffffu, 0xffefffffffffffffu, 0x7ff0000000000000u,
        0xfff0000000000000u, 0x7ff8000000000000u, 0xfff8000000000000u,
        0x7ff0000000000001u, 0xfff0000000000001u, 0x7ff8000000000001u,
        0x7ff7ffffffffffffu, 0x7fffffffffffffffu, 0xffffffffffffffffu,
        0x3ff0000000000000u, 0x3ff0000000000001u, 0x3fefffffffffffffu,
        0x4340000000000000u, 0x433fffffffffffffu, 0x4350000000000000u,
    };
    for (size_t i = 0; i < sizeof f64 / sizeof f64[0]; i++)
        rt_f64_bits(f64[i]);
    rt_f64_bits(f64u(DBL_MIN));
    rt_f64_bits(f64u(DBL_MAX));
    rt_f64_bits(f64u(DBL_EPSILON));
    rt_f64_bits(f64u(0.1));
    rt_f64_bits(f64u(1e23));
    rt_f64_bits(f64u(9007199254740993.0));
}
END_TEST

/* A brute-force oracle: smallest P whose %.Pg reads back. */
static int oracle_digits(double v, bool f32)
{
    char s[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(s, sizeof s, "%.*g", p, v);
        if (f32 ? strtof(s, NULL) == (float)v : strtod(s, NULL) == v)
            return p;
    }
    return 17;
}

/* Significant digits of our text (no trailing zeros), -1 if it is not an
 * ordinary number. */
static int text_digits(const char *t, size_t n)
{
    int d = 0, z = 0;
    bool lead = true;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (c == 'e' || c == '\n')
            break;
        if (c == '-' || c == '.')
            continue;
        if (c < '0' || c > '9')
            return -1;
        if (lead && c == '0')
            continue;
        lead = false;
        if (c == '0')
            z++;
        else {
            d += z + 1;
            z = 0;
        }
    }
    return d;
}

static int shorter_than_oracle;

static void check_shortest(const char *t, size_t n, double v, bool f32)
{
    if (isnan(v) || isinf(v) || v == 0 || v == floor(v))
        return; /* integral values are printed exactly */
    /* never longer than the first %.Pg that reads back; shorter only where
     * that one is not the nearest P-digit decimal in reach (the rounding
     * interval is lopsided at powers of two) */
    int ours = text_digits(t, n), best = oracle_digits(v, f32);
    ck_assert_msg(ours <= best, "'%.*s' has %d digits, %%.%dg reads back",
                  (int)n, t, ours, best);
    if (ours < best)
        shorter_than_oracle++;
    /* and the notation: fixed for exponents -4..16 */
    int x = (int)floor(log10(fabs(v)));
    bool sci = memchr(t, 'e', n) != NULL;
    if (x > -4 && x < 16) /* clear of the rounding boundaries */
        ck_assert_msg(!sci, "'%.*s' should be fixed", (int)n, t);
    if (x < -6 || x > 17)
        ck_assert_msg(sci, "'%.*s' should be scientific", (int)n, t);
}

/* every power of two and its neighbours, in both widths: round trip and
 * shortest digits (the rounding interval is lopsided there) */
START_TEST(roundtrip_powers_of_two)
{
    shorter_than_oracle = 0;
    for (uint32_t e = 0; e < 255; e++)
        for (int d = -1; d <= 1; d++) {
            uint32_t u = (e << 23) + (uint32_t)d;
            for (int neg = 0; neg < 2; neg++, u |= 0x80000000u) {
                uint8_t p[4] = {(uint8_t)u, (uint8_t)(u >> 8),
                                (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
                size_t n;
                char *t = roundtrip(GGUF_TYPE_FLOAT32, p, 4, &n);
                float f;
                memcpy(&f, &u, 4);
                check_shortest(t, n, f, true);
                free(t);
            }
        }
    for (uint64_t e = 0; e < 2047; e++)
        for (int d = -1; d <= 1; d++) {
            uint64_t u = (e << 52) + (uint64_t)(int64_t)d;
            uint8_t p[8];
            for (int j = 0; j < 8; j++)
                p[j] = (uint8_t)(u >> (8 * j));
            size_t n;
            char *t = roundtrip(GGUF_TYPE_FLOAT64, p, 8, &n);
            double v;
            memcpy(&v, &u, 8);
            check_shortest(t, n, v, false);
            free(t);
        }
    /* the lopsided cases are rare: a handful, not hundreds */
    ck_assert_int_lt(shorter_than_oracle, 50);
    ck_assert_uint_eq(gguf_text_float_fallbacks(), 0);
}
END_TEST

START_TEST(roundtrip_random_floats)
{
    rng_state = 12345;
    for (int i = 0; i < 100000; i++) {
        uint32_t u = (uint32_t)rnd();
        uint8_t p[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16),
                        (uint8_t)(u >> 24)};
        size_t n;
        char *t = roundtrip(GGUF_TYPE_FLOAT32, p, 4, &n);
        float f;
        memcpy(&f, &u, 4);
        check_shortest(t, n, f, true);
        free(t);
    }
    for (int i = 0; i < 100000; i++) {
        uint64_t u = rnd();
        uint8_t p[8];
        for (int j = 0; j < 8; j++)
            p[j] = (uint8_t)(u >> (8 * j));
        size_t n;
        char *t = roundtrip(GGUF_TYPE_FLOAT64, p, 8, &n);
        double d;
        memcpy(&d, &u, 8);
        check_shortest(t, n, d, false);
        free(t);
    }
    /* values of ordinary size, where fixed notation is used */
    for (int i = 0; i < 20000; i++) {
        double d = ldexp((double)(rnd() >> 11), (int)(rnd() % 100) - 90);
        if (rnd() & 1)
            d = -d;
        float f = (float)d;
        size_t n;
        char *t;
        uint64_t u = f64u(d);
        uint8_t p[8];
        for (int j = 0; j < 8; j++)
            p[j] = (uint8_t)(u >> (8 * j));
        t = roundtrip(GGUF_TYPE_FLOAT64, p, 8, &n);
        check_shortest(t, n, d, false);
        free(t);
        uint32_t v = f32u(f);
        uint8_t q[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                        (uint8_t)(v >> 24)};
        t = roundtrip(GGUF_TYPE_FLOAT32, q, 4, &n);
        check_shortest(t, n, f, true);
        free(t);
    }
    ck_assert_uint_eq(gguf_text_float_fallbacks(), 0);
}
END_TEST

START_TEST(roundtrip_strings)
{
    struct gguf_buf p = {0}, all = {0};
    uint8_t bytes[256];
    for (int i = 0; i < 256; i++)
        bytes[i] = (uint8_t)i;
    /* scalar: every byte, every byte alone, ending in newlines */
    b_str(&p, bytes, 256);
    roundtrip(GGUF_TYPE_STRING, p.p, p.len, NULL);
    for (int i = 0; i < 256; i++) {
        p.len = 0;
        b_str(&p, bytes + i, 1);
        roundtrip(GGUF_TYPE_STRING, p.p, p.len, NULL);
    }
    static const char *ends[] = {"", "\n", "\n\n", "a\n", "\r\n", "\\"};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        p.len = 0;
        b_str(&p, ends[i], strlen(ends[i]));
        roundtrip(GGUF_TYPE_STRING, p.p, p.len, NULL);
    }
    /* array: every byte as its own element, plus all together */
    b_arr(&all, GGUF_TYPE_STRING, 256 + 3);
    for (int i = 0; i < 256; i++)
        b_str(&all, bytes + i, 1);
    b_str(&all, bytes, 256);
    b_str(&all, "", 0);
    b_str(&all, "tail\n", 5);
    size_t n;
    char *t = roundtrip(GGUF_TYPE_ARRAY, all.p, all.len, &n);
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += t[i] == '\n';
    ck_assert_uint_eq(lines, 259);
    ck_assert(t[n - 1] == '\n');
    free(t);

    /* random strings: random bytes, and UTF-8-heavy mixes */
    rng_state = 777;
    static const char *pieces[] = {"a", "\xc3\xa9", "\xe2\x82\xac",
                                   "\xf0\x9f\x98\x80", "\\", "\n", "\"",
                                   "\xff", "\xed\xa0\x80", " ", "x\\n"};
    for (int round = 0; round < 200; round++) {
        all.len = 0;
        int cnt = (int)(rnd() % 50);
        b_arr(&all, GGUF_TYPE_STRING, (uint64_t)cnt);
        struct gguf_buf nest = {0};
        b_arr(&nest, GGUF_TYPE_ARRAY, 1);
        b_arr(&nest, GGUF_TYPE_STRING, (uint64_t)cnt);
        for (int e = 0; e < cnt; e++) {
            uint8_t s[64];
            size_t len = 0;
            if (rnd() & 1) {
                len = rnd() % 40;
                for (size_t j = 0; j < len; j++)
                    s[j] = (uint8_t)rnd();
            } else {
                int k = (int)(rnd() % 12);
                for (int j = 0; j < k; j++) {
                    const char *pc = pieces[rnd() % (sizeof pieces /
                                                     sizeof pieces[0])];
                    memcpy(s + len, pc, strlen(pc));
                    len += strlen(pc);
                }
            }
            b_str(&all, s, len);
            b_str(&nest, s, len);
            struct gguf_buf sc = {0};
            b_str(&sc, s, len);
            roundtrip(GGUF_TYPE_STRING, sc.p, sc.len, NULL);
            gguf_buf_free(&sc);
        }
        roundtrip(GGUF_TYPE_ARRAY, all.p, all.len, NULL);
        roundtrip(GGUF_TYPE_ARRAY, nest.p, nest.len, NULL);
        gguf_buf_free(&nest);
    }
    gguf_buf_free(&p);
    gguf_buf_free(&all);
}
END_TEST

START_TEST(roundtrip_arrays_of_every_type)
{
    rng_state = 4242;
    for (int t = 0; t < GGUF_TYPE_COUNT; t++) {
        if (t == GGUF_TYPE_STRING || t == GGUF_TYPE_ARRAY)
            continue;
        for (int n = 0; n < 40; n += 13) {
            struct gguf_buf p = {0}, nest = {0};
            b_arr(&p, (enum gguf_type)t, (uint64_t)n);
            for (int i = 0; i < n; i++) {
                uint64_t v = rnd();
                if (t == GGUF_TYPE_BOOL)
                    v &= 1;
                b_le(&p, v, (int)tsize((enum gguf_type)t));
            }
            size_t tl;
            char *text = roundtrip(GGUF_TYPE_ARRAY, p.p, p.len, &tl);
            size_t lines = 0;
            for (size_t i = 0; i < tl; i++)
                lines += text[i] == '\n';
            ck_assert_uint_eq(lines, (size_t)n);
            free(text);
            /* the same as an inner array, twice */
            b_arr(&nest, GGUF_TYPE_ARRAY, 2);
            b_add(&nest, p.p, p.len);
            b_add(&nest, p.p, p.len);
            roundtrip(GGUF_TYPE_ARRAY, nest.p, nest.len, NULL);
            gguf_buf_free(&p);
            gguf_buf_free(&nest);
        }
    }
}
END_TEST

/* random trees of arrays of arrays */
static void random_inner(struct gguf_buf *b, int level)
{
    int t = (int)(rnd() % GGUF_TYPE_COUNT);
    if (t == GGUF_TYPE_ARRAY && level >= GGUF_MAX_NESTING)
        t = GGUF_TYPE_INT16;
    uint64_t n = rnd() % 5;
    b_arr(b, (enum gguf_type)t, n);
    for (uint64_t i = 0; i < n; i++) {
        if (t == GGUF_TYPE_ARRAY)
            random_inner(b, level + 1);
        else if (t == GGUF_TYPE_STRING) {
            uint8_t s[8];
            size_t len = rnd() % 8;
            for (size_t j = 0; j < len; j++)
                s[j] = (uint8_t)rnd();
            b_str(b, s, len);
        } else {
            uint64_t v = rnd();
            if (t == GGUF_TYPE_BOOL)
                v &= 1;
            b_le(b, v, (int)tsize((enum gguf_type)t));
        }
    }
}

START_TEST(roundtrip_random_nested)
{
    rng_state = 99;
    for (int round = 0; round < 2000; round++) {
        struct gguf_buf b = {0};
        uint64_t n = rnd() % 4;
        b_arr(&b, GGUF_TYPE_ARRAY, n);
        for (uint64_t i = 0; i < n; i++)
            random_inner(&b, 2);
        roundtrip(GGUF_TYPE_ARRAY, b.p, b.len, NULL);
        gguf_buf_free(&b);
    }
}
END_TEST

/* garbage in: never a crash (run under ASan/UBSan too); what parses
 * renders back to text that parses to the same payload; random payload
 * bytes render or are refused as GGUF_E_FORMAT, and what renders round
 * trips */
START_TEST(garbage)
{
    static const char *tok[] = {
        "0", "1", "9", "-", "+", ".", "e", "E", "\n", "[", "]", ",", " ",
        "\"", "\\", "\\x", "\\n", "nan", "inf", "(0x", ")", "a", "f",
        "uint8", "int64", "string", "array", "float32", "bool", "true",
        "false", "\xff", "\xc3\xa9", "\0", "\t", "255", "300",
    };
    rng_state = 31337;
    size_t ntok = sizeof tok / sizeof tok[0];
    for (int round = 0; round < 30000; round++) {
        char text[256];
        size_t n = 0;
        int k = (int)(rnd() % 12);
        for (int j = 0; j < k; j++) {
            const char *t = tok[rnd() % ntok];
            size_t l = t[0] ? strlen(t) : 1;
            memcpy(text + n, t, l);
            n += l;
        }
        enum gguf_type t = (enum gguf_type)(rnd() % GGUF_TYPE_COUNT);
        enum gguf_type at = (enum gguf_type)(rnd() % GGUF_TYPE_COUNT);
        struct gguf_buf out = {0}, txt = {0}, again = {0};
        struct gguf_error err = {0};
        enum gguf_status st = gguf_parse_text(t, at, text, n, &out, &err);
        if (st != GGUF_OK) {
            if (st != GGUF_E_INVAL && st != GGUF_E_RANGE)
                ck_abort_msg("status %d for '%.*s'", st, (int)n, text);
            if (!err.msg[0] || out.len != 0)
                ck_abort_msg("no message or output left for '%.*s'", (int)n,
                             text);
            gguf_buf_free(&out);
            continue;
        }
        if (gguf_render(t, out.p, out.len, &txt, &err) != GGUF_OK)
            ck_abort_msg("'%.*s' parsed but does not render: %s", (int)n,
                         text, err.msg);
        if (gguf_parse_text(t, at, (char *)txt.p, txt.len, &again, &err) !=
                GGUF_OK ||
            again.len != out.len ||
            (out.len && memcmp(again.p, out.p, out.len) != 0))
            ck_abort_msg("'%.*s' -> '%.*s' does not parse back", (int)n, text,
                         (int)txt.len, (char *)txt.p);
        gguf_buf_free(&out);
        gguf_buf_free(&txt);
        gguf_buf_free(&again);
    }
    for (int round = 0; round < 30000; round++) {
        uint8_t p[64];
        size_t n = rnd() % sizeof p;
        for (size_t j = 0; j < n; j++)
            p[j] = (uint8_t)(rnd() % 4 ? rnd() % 3 : rnd());
        if (n >= 4 && rnd() % 2)
            p[0] = (uint8_t)(rnd() % GGUF_TYPE_COUNT);
        enum gguf_type t = rnd() % 2 ? GGUF_TYPE_ARRAY
                                     : (enum gguf_type)(rnd() % GGUF_TYPE_COUNT);
        struct gguf_buf txt = {0};
        struct gguf_error err = {0};
        enum gguf_status st = gguf_render(t, p, n, &txt, &err);
        uint64_t used;
        /* Round trips are promised for valid payloads; bool bytes other
         * than 0 and 1 render as ggml reads them (true), lossily. */
        if (st == GGUF_OK) {
            gguf_buf_free(&txt);
            if (gguf_payload_check(t, p, n, true, &used, "x", 0, NULL) ==
                GGUF_OK)
                roundtrip(t, p, n, NULL);
        } else if (st != GGUF_E_FORMAT || txt.len != 0) {
            ck_abort_msg("render status %d", st);
        }
        gguf_buf_free(&txt);
    }
}
END_TEST

/* ---- performance ---------------------------------------------------- */

/* b_add and b_le without a check assertion each (check records every
 * assertion's place with a write: millions of them were most of the time). */
static void r_add(struct gguf_buf *b, const void *p, size_t n)
{
    if (gguf_buf_add(b, p, n) != GGUF_OK)
        abort();
}

static void r_le(struct gguf_buf *b, uint64_t v, int n)
{
    uint8_t t[8];
    for (int i = 0; i < n; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    r_add(b, t, (size_t)n);
}

START_TEST(windows_of_big_values)
{
    /* values whose text is megabytes: the size pass, the marks and windows
     * anywhere (random, and read through in 128 KiB steps) agree with the
     * whole rendering, for every kind of line */
    rng_state = 7;
    for (int kind = 0; kind < 6; kind++) {
        struct gguf_buf p = {0}, text = {0};
        struct gguf_error err = {0};
        enum gguf_type t = GGUF_TYPE_ARRAY;
        uint64_t n = kind == 4 ? 3 : 100000;
        switch (kind) {
        case 0: /* bools, bytes other than 0 and 1 among them */
            b_arr(&p, GGUF_TYPE_BOOL, n);
            for (uint64_t i = 0; i < n; i++) {
                uint8_t v = (uint8_t)(rnd() % 3);
                r_le(&p, v, 1);
            }
            break;
        case 1: /* float32 of any bits: NaN payloads, denormals */
            b_arr(&p, GGUF_TYPE_FLOAT32, n);
            for (uint64_t i = 0; i < n; i++)
                r_le(&p, rnd(), 4);
            break;
        case 2: /* strings that need escapes, empty ones */
            b_arr(&p, GGUF_TYPE_STRING, n);
            for (uint64_t i = 0; i < n; i++) {
                char s[16];
                size_t k = rnd() % 12;
                for (size_t j = 0; j < k; j++)
                    s[j] = (char)(rnd() % 5 == 0 ? rnd() : 'a' + rnd() % 26);
                r_le(&p, k, 8);
                r_add(&p, s, k);
            }
            break;
        case 3: /* int64 extremes */
            b_arr(&p, GGUF_TYPE_INT64, n);
            for (uint64_t i = 0; i < n; i++)
                r_le(&p, i % 3 == 0 ? (uint64_t)INT64_MIN : rnd(), 8);
            break;
        case 4: /* inner arrays: lines far longer than a mark step */
            b_arr(&p, GGUF_TYPE_ARRAY, n);
            for (uint64_t i = 0; i < n; i++) {
                b_arr(&p, GGUF_TYPE_UINT16, 40000);
                for (int j = 0; j < 40000; j++)
                    r_le(&p, rnd(), 2);
            }
            break;
        default: /* a string of 2 MB */
            t = GGUF_TYPE_STRING;
            b_u64(&p, 2u << 20);
            for (uint64_t i = 0; i < 2u << 20; i++) {
                uint8_t v = (uint8_t)rnd();
                r_le(&p, v, 1);
            }
            break;
        }
        ck_assert_int_eq(gguf_render(t, p.p, p.len, &text, &err), GGUF_OK);
        struct gguf_text_map m = {0};
        ck_assert_int_eq(gguf_render_map(t, p.p, p.len, &m, &err), GGUF_OK);
        ck_assert_uint_eq(m.size, text.len);
        if (t == GGUF_TYPE_ARRAY && kind != 4)
            ck_assert_msg(m.n > text.len / GGUF_TEXT_STEP / 2,
                          "kind %d: %zu marks for %zu bytes", kind, m.n,
                          text.len);
        check_window(t, p.p, p.len, &m, (char *)text.p, text.len, 0,
                     text.len + 1);
        check_window(t, p.p, p.len, &m, (char *)text.p, text.len,
                     text.len + 1, 3);
        for (int k = 0; k < 100; k++)
            check_window(t, p.p, p.len, &m, (char *)text.p, text.len,
                         rnd() % (text.len + 10), 1 + rnd() % 100000);
        struct gguf_buf all = {0};
        for (uint64_t off = 0; off < text.len; off += 128 << 10)
            ck_assert_int_eq(gguf_render_window(t, p.p, p.len, &m, off,
                                                128 << 10, &all, &err),
                             GGUF_OK);
        ck_assert(all.len == text.len && memcmp(all.p, text.p, text.len) == 0);
        gguf_text_map_free(&m);
        gguf_buf_free(&all);
        gguf_buf_free(&text);
        gguf_buf_free(&p);
    }
}
END_TEST

START_TEST(big_arrays_are_linear)
{
    /* 150000 tokens, some needing escapes */
    rng_state = 1;
    struct gguf_buf p = {0}, text = {0}, back = {0};
    struct gguf_error err = {0};
    const uint64_t n = 150000;
    b_arr(&p, GGUF_TYPE_STRING, n);
    for (uint64_t i = 0; i < n; i++) {
        char s[32];
        int len = snprintf(s, sizeof s, "\xe2\x96\x81tok%" PRIu64, i);
        if (i % 17 == 0)
            s[len++] = '\n';
        if (i % 29 == 0)
            s[len++] = (char)0xff;
        b_str(&p, s, (size_t)len);
    }
    double t0 = now();
    ck_assert_int_eq(gguf_render(GGUF_TYPE_ARRAY, p.p, p.len, &text, &err),
                     GGUF_OK);
    double t1 = now();
    ck_assert_int_eq(gguf_parse_text(GGUF_TYPE_ARRAY, GGUF_TYPE_STRING,
                                     (char *)text.p, text.len, &back, &err),
                     GGUF_OK);
    double t2 = now();
    ck_assert(back.len == p.len && memcmp(back.p, p.p, p.len) == 0);
    ck_assert_msg(t1 - t0 < 1.0, "rendering 150000 tokens took %.3f s",
                  t1 - t0);
    ck_assert_msg(t2 - t1 < 1.0, "parsing 150000 tokens took %.3f s", t2 - t1);

    /* a 2 MB merges list */
    p.len = text.len = back.len = 0;
    uint64_t m = 0;
    struct gguf_buf body = {0};
    while (body.len < 2u << 20) {
        char s[32];
        int len = snprintf(s, sizeof s, "\xc4\xa0t%" PRIu64 " h%" PRIu64,
                           m % 977, m % 313);
        b_str(&body, s, (size_t)len);
        m++;
    }
    b_arr(&p, GGUF_TYPE_STRING, m);
    b_add(&p, body.p, body.len);
    t0 = now();
    ck_assert_int_eq(gguf_render(GGUF_TYPE_ARRAY, p.p, p.len, &text, &err),
                     GGUF_OK);
    t1 = now();
    ck_assert_int_eq(gguf_parse_text(GGUF_TYPE_ARRAY, GGUF_TYPE_STRING,
                                     (char *)text.p, text.len, &back, &err),
                     GGUF_OK);
    t2 = now();
    ck_assert(back.len == p.len && memcmp(back.p, p.p, p.len) == 0);
    ck_assert_msg(t1 - t0 < 1.0, "rendering 2 MB of merges took %.3f s",
                  t1 - t0);
    ck_assert_msg(t2 - t1 < 1.0, "parsing 2 MB of merges took %.3f s",
                  t2 - t1);

    /* 150000 float32 scores */
    p.len = text.len = back.len = 0;
    b_arr(&p, GGUF_TYPE_FLOAT32, n);
    for (uint64_t i = 0; i < n; i++)
        b_u32(&p, f32u(-(float)i / 7.0f));
    t0 = now();
    ck_assert_int_eq(gguf_render(GGUF_TYPE_ARRAY, p.p, p.len, &text, &err),
                     GGUF_OK);
    t1 = now();
    ck_assert_int_eq(gguf_parse_text(GGUF_TYPE_ARRAY, GGUF_TYPE_FLOAT32,
                                     (char *)text.p, text.len, &back, &err),
                     GGUF_OK);
    t2 = now();
    ck_assert(back.len == p.len && memcmp(back.p, p.p, p.len) == 0);
    ck_assert_msg(t1 - t0 < 3.0, "rendering 150000 floats took %.3f s",
                  t1 - t0);
    ck_assert_msg(t2 - t1 < 3.0, "parsing 150000 floats took %.3f s",
                  t2 - t1);
    gguf_buf_free(&body);
    gguf_buf_free(&p);
    gguf_buf_free(&text);
    gguf_buf_free(&back);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("text");
    TCase *tc = tcase_create("render");
    tcase_add_test(tc, render_integers);
    tcase_add_test(tc, render_floats);
    tcase_add_test(tc, render_strings);
    tcase_add_test(tc, render_arrays);
    tcase_add_test(tc, render_nested);
    tcase_add_test(tc, nesting_limit);
    tcase_add_test(tc, render_rejects_bad_payloads);
    suite_add_tcase(s, tc);
    tc = tcase_create("parse");
    tcase_add_test(tc, parse_scalars);
    tcase_add_test(tc, parse_appends);
    tcase_add_test(tc, reject_bad_texts);
    tcase_add_test(tc, unescape_line_api);
    tcase_add_test(tc, crlf_line_ends);
    tcase_add_test(tc, check_prefix_lines);
    tcase_add_test(tc, utf8_validity);
    suite_add_tcase(s, tc);
    tc = tcase_create("roundtrip");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, roundtrip_edges);
    tcase_add_test(tc, roundtrip_powers_of_two);
    tcase_add_test(tc, roundtrip_random_floats);
    tcase_add_test(tc, roundtrip_strings);
    tcase_add_test(tc, roundtrip_arrays_of_every_type);
    tcase_add_test(tc, roundtrip_random_nested);
    tcase_add_test(tc, garbage);
    tcase_add_test(tc, big_arrays_are_linear);
    tcase_add_test(tc, windows_of_big_values);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
