/*
 * test_names.c - key/tensor name <-> file name escaping (gguf/names.c).
 * Expected file names are written by hand; the hash of long names is
 * checked against an independent FNV-1a (with the published test vectors).
 * Also the names of files made beside a GGUF (gguf_sidecar_path).
 */
#include "internal.h" /* gguf_sidecar_path */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 2024;
static uint64_t rnd(void) /* splitmix64, fixed seed */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3u;
    }
    return h;
}

/* escape -> must equal exp; then unescape -> must give the name back */
static void expect_name(const char *name, size_t n, const char *exp)
{
    struct gguf_buf out = {0}, back = {0};
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_name_escape(name, n, &out), GGUF_OK);
    size_t el = strlen(exp);
    ck_assert_msg(out.len == el && memcmp(out.p, exp, el) == 0,
                  "escape gave '%.*s', expected '%s'", (int)out.len,
                  (const char *)out.p, exp);
    ck_assert_int_eq(gguf_name_unescape((const char *)out.p, out.len, &back,
                                        &err), GGUF_OK);
    ck_assert_msg(back.len == n && memcmp(back.p, name, n) == 0,
                  "unescape of '%s' did not give the name back", exp);
    gguf_buf_free(&out);
    gguf_buf_free(&back);
}
#define NAME(lit, exp) expect_name(lit, sizeof(lit) - 1, exp)

/* checks the general properties of a file name (plain ifs: check's
 * assertions are slow in loops) */
static void check_fname(const uint8_t *f, size_t n)
{
    if (n < 1 || n > 255)
        ck_abort_msg("file name of %zu bytes", n);
    if ((n == 1 && f[0] == '.') || (n == 2 && f[0] == '.' && f[1] == '.'))
        ck_abort_msg("file name is . or ..");
    for (size_t i = 0; i < n; i++) {
        if (f[i] == '/' || f[i] < 0x20 || f[i] == 0x7f)
            ck_abort_msg("byte 0x%02x at %zu of '%.*s'", f[i], i, (int)n,
                         (const char *)f);
        if (f[i] != '%')
            continue;
        /* %HH (upper-case), or the final %~ and 16 hex digits */
        if (i + 3 > n)
            ck_abort_msg("split %%HH at the end of '%.*s'", (int)n,
                         (const char *)f);
        if (f[i + 1] == '~') {
            if (i + 18 != n)
                ck_abort_msg("%%~ not 18 bytes from the end");
            for (size_t j = i + 2; j < n; j++)
                if (!strchr("0123456789abcdef", f[j]) || !f[j])
                    ck_abort_msg("bad hash digit");
            return;
        }
        if (!f[i + 1] || !f[i + 2] || !strchr("0123456789ABCDEF", f[i + 1]) ||
            !strchr("0123456789ABCDEF", f[i + 2]))
            ck_abort_msg("bad %%HH at %zu of '%.*s'", i, (int)n,
                         (const char *)f);
        i += 2;
    }
}

static int cmp_fname(const void *a, const void *b)
{
    return memcmp(a, b, 257);
}

/* n file names stored as 257-byte records (length byte + 256 bytes,
 * zero-padded) are pairwise distinct */
static void check_distinct(unsigned char (*res)[257], size_t n)
{
    qsort(res, n, 257, cmp_fname);
    for (size_t i = 1; i < n; i++)
        if (memcmp(res[i - 1], res[i], 257) == 0)
            ck_abort_msg("two names give the file name '%.*s'", res[i][0],
                         (const char *)res[i] + 1);
}

START_TEST(escape_table)
{
    NAME("general.architecture", "general.architecture");
    NAME("blk.0.attn_q.weight", "blk.0.attn_q.weight");
    NAME("a/b", "a%2Fb");
    NAME("/", "%2F");
    NAME("//", "%2F%2F");
    NAME("%", "%25");
    NAME("100%/x", "100%25%2Fx");
    NAME("%2F", "%252F");
    NAME("%~0123456789abcdef", "%25~0123456789abcdef");
    NAME(".", "%2E");
    NAME("..", "%2E%2E");
    NAME("...", "...");
    NAME(".hidden", ".hidden");
    NAME("a.", "a.");
    NAME("./", ".%2F");
    NAME("a\0b", "a%00b");
    NAME("\x01\x1f", "%01%1F");
    NAME("tab\there", "tab%09here");
    NAME("nl\n", "nl%0A");
    NAME("\x7f", "%7F");
    NAME(" ", " ");
    NAME("~", "~");
    NAME("a\\b", "a\\b");
    NAME("caf\xc3\xa9", "caf\xc3\xa9");
    NAME("\xe2\x82\xac\xf0\x9f\x98\x80", "\xe2\x82\xac\xf0\x9f\x98\x80");
    NAME("\xff", "%FF");
    NAME("\xc3", "%C3");
    NAME("x\xc3(", "x%C3(");
    NAME("\xc0\xaf", "%C0%AF");             /* overlong '/' */
    NAME("\xed\xa0\x80", "%ED%A0%80");      /* surrogate */
    NAME("\xf4\x90\x80\x80", "%F4%90%80%80"); /* > U+10FFFF */
    NAME("\xe2\x82", "%E2%82");
}
END_TEST

START_TEST(empty_name)
{
    /* "" cannot be a file name: hashed form with an empty prefix; the
     * FNV-1a hash of "" is the offset basis */
    struct gguf_buf out = {0};
    ck_assert_int_eq(gguf_name_escape("", 0, &out), GGUF_OK);
    ck_assert_uint_eq(out.len, 18);
    ck_assert(memcmp(out.p, "%~cbf29ce484222325", 18) == 0);
    gguf_buf_free(&out);
}
END_TEST

START_TEST(fnv_vectors)
{
    /* the published FNV-1a 64 test vectors, to trust the oracle */
    ck_assert(fnv1a("", 0) == 0xcbf29ce484222325u);
    ck_assert(fnv1a("a", 1) == 0xaf63dc4c8601ec8cu);
    ck_assert(fnv1a("foobar", 6) == 0x85944171f73967e8u);
}
END_TEST

START_TEST(appends)
{
    struct gguf_buf out = {0};
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_buf_add(&out, "pre", 3), GGUF_OK);
    ck_assert_int_eq(gguf_name_escape("a/b", 3, &out), GGUF_OK);
    ck_assert_uint_eq(out.len, 8);
    ck_assert(memcmp(out.p, "prea%2Fb", 8) == 0);
    ck_assert_int_eq(gguf_name_unescape("x%25", 4, &out, &err), GGUF_OK);
    ck_assert_uint_eq(out.len, 10);
    ck_assert(memcmp(out.p, "prea%2Fbx%", 10) == 0);
    /* a failed unescape leaves out alone */
    ck_assert_int_eq(gguf_name_unescape("x%2", 3, &out, &err), GGUF_E_INVAL);
    ck_assert_uint_eq(out.len, 10);
    gguf_buf_free(&out);
}
END_TEST

START_TEST(every_byte)
{
    for (int c = 0; c < 256; c++) {
        char name[3] = {'k', (char)c, 'k'};
        struct gguf_buf out = {0}, back = {0};
        struct gguf_error err = {0};
        ck_assert_int_eq(gguf_name_escape(name, 3, &out), GGUF_OK);
        check_fname(out.p, out.len);
        bool raw = c >= 0x20 && c < 0x7f && c != '%' && c != '/';
        ck_assert_uint_eq(out.len, raw ? 3 : 5);
        if (!raw) {
            char exp[6];
            snprintf(exp, sizeof exp, "k%%%02Xk", c);
            ck_assert(memcmp(out.p, exp, 5) == 0);
        }
        ck_assert_int_eq(gguf_name_unescape((char *)out.p, out.len, &back,
                                            &err), GGUF_OK);
        ck_assert(back.len == 3 && memcmp(back.p, name, 3) == 0);
        gguf_buf_free(&out);
        gguf_buf_free(&back);
    }
}
END_TEST

START_TEST(unescape_rejects)
{
    static const struct { const char *f; size_t n; } bad[] = {
        {"%", 1}, {"%2", 2}, {"a%", 2}, {"%zz", 3}, {"%G0", 3},
        {"%2f", 3},       /* lower-case: not canonical */
        {"%41", 3},       /* needless escape of 'A' */
        {"%2E.", 4},      /* "..": must be %2E%2E */
        {"%2Efoo", 6},    /* ".foo" is not escaped */
        {".", 1}, {"..", 2},
        {"a/b", 3},
        {"a\x01", 2},     /* raw control byte */
        {"\x7f", 1},
        {"\xff", 1},      /* raw invalid UTF-8 */
        {"\xc3", 1},
        {"a\0b", 3},
        {"%~cbf29ce484222325", 18},  /* hashed: no way back */
        {"abc%~0000000000000000", 21},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gguf_buf out = {0};
        struct gguf_error err = {0};
        ck_assert_msg(gguf_name_unescape(bad[i].f, bad[i].n, &out, &err) ==
                          GGUF_E_INVAL, "accepted bad file name #%zu", i);
        ck_assert_int_eq(err.code, GGUF_E_INVAL);
        ck_assert(err.msg[0] != 0);
        ck_assert_uint_eq(out.len, 0);
        gguf_buf_free(&out);
    }
    /* 256 bytes is never a file name we make */
    char big[256];
    memset(big, 'a', sizeof big);
    struct gguf_buf out = {0};
    ck_assert_int_eq(gguf_name_unescape(big, 256, &out, NULL), GGUF_E_INVAL);
    ck_assert_int_eq(gguf_name_unescape(big, 255, &out, NULL), GGUF_OK);
    ck_assert_uint_eq(out.len, 255);
    gguf_buf_free(&out);
}
END_TEST

/* escapes name and checks the hashed form: prefix of exactly plen bytes of
 * the escaped name, then %~ and the hash */
static void expect_hashed(const char *name, size_t n, const char *esc,
                          size_t plen)
{
    struct gguf_buf out = {0};
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_name_escape(name, n, &out), GGUF_OK);
    check_fname(out.p, out.len);
    ck_assert_uint_eq(out.len, plen + 18);
    ck_assert(memcmp(out.p, esc, plen) == 0);
    char suf[19];
    snprintf(suf, sizeof suf, "%%~%016llx",
             (unsigned long long)fnv1a(name, n));
    ck_assert_msg(memcmp(out.p + plen, suf, 18) == 0, "suffix %.18s vs %s",
                  (const char *)out.p + plen, suf);
    struct gguf_buf back = {0};
    ck_assert_int_eq(gguf_name_unescape((char *)out.p, out.len, &back, &err),
                     GGUF_E_INVAL);
    gguf_buf_free(&back);
    gguf_buf_free(&out);
}

START_TEST(long_names)
{
    char name[1200], esc[4000];

    /* 255 plain bytes fit, 256 do not */
    memset(name, 'a', 256);
    struct gguf_buf out = {0};
    ck_assert_int_eq(gguf_name_escape(name, 255, &out), GGUF_OK);
    ck_assert_uint_eq(out.len, 255);
    gguf_buf_free(&out);
    expect_hashed(name, 256, name, 237);
    memset(name, 'a', 300);
    expect_hashed(name, 300, name, 237);

    /* escapes: "x" + 100 x "%" -> "x%25%25...", cut after 1 + 78*3 = 235 */
    name[0] = 'x';
    memset(name + 1, '%', 100);
    size_t k = 0;
    esc[k++] = 'x';
    for (int i = 0; i < 100; i++)
        k += (size_t)sprintf(esc + k, "%%25");
    expect_hashed(name, 101, esc, 235);
    /* 85 x "/" escapes to exactly 255: not hashed */
    memset(name, '/', 85);
    ck_assert_int_eq(gguf_name_escape(name, 85, &out), GGUF_OK);
    ck_assert_uint_eq(out.len, 255);
    gguf_buf_free(&out);
    memset(name, '/', 86);
    for (int i = 0; i < 86; i++)
        memcpy(esc + 3 * i, "%2F", 3);
    expect_hashed(name, 86, esc, 237); /* 79 * 3 = 237 */
    /* shift by one and by two */
    name[0] = 'a';
    esc[0] = 'a';
    for (int i = 1; i < 100; i++) {
        name[i] = '/';
        memcpy(esc + 1 + 3 * (i - 1), "%2F", 3);
    }
    expect_hashed(name, 100, esc, 235); /* 1 + 78 * 3 */
    name[1] = 'b';
    esc[1] = 'b';
    for (int i = 2; i < 100; i++) {
        name[i] = '/';
        memcpy(esc + 2 + 3 * (i - 2), "%2F", 3);
    }
    expect_hashed(name, 100, esc, 236); /* 2 + 78 * 3 */

    /* UTF-8 is not cut inside a character: 150 x "é" (300 bytes) keeps
     * 118 of them (236 bytes); 100 x "€" keeps 79 (237 bytes); 80 x
     * emoji keeps 59 (236 bytes) */
    for (int i = 0; i < 150; i++)
        memcpy(name + 2 * i, "\xc3\xa9", 2);
    expect_hashed(name, 300, name, 236);
    for (int i = 0; i < 100; i++)
        memcpy(name + 3 * i, "\xe2\x82\xac", 3);
    expect_hashed(name, 300, name, 237);
    for (int i = 0; i < 80; i++)
        memcpy(name + 4 * i, "\xf0\x9f\x98\x80", 4);
    expect_hashed(name, 320, name, 236);

    /* a hostile 1 MB name is fine too */
    size_t bign = 1u << 20;
    char *big = malloc(bign);
    ck_assert_ptr_nonnull(big);
    memset(big, 0xff, bign);
    out = (struct gguf_buf){0};
    ck_assert_int_eq(gguf_name_escape(big, bign, &out), GGUF_OK);
    check_fname(out.p, out.len);
    ck_assert_uint_eq(out.len, 237 + 18); /* 79 x %FF */
    gguf_buf_free(&out);
    free(big);
}
END_TEST

START_TEST(long_names_distinct)
{
    /* 2000 names sharing a 300-byte prefix, differing after it: all
     * results distinct, none longer than 255, no split %HH */
    enum { N = 2000 };
    unsigned char (*res)[257] = calloc(N, 257);
    char name[340];
    memset(name, 'q', 300);
    name[7] = '/';
    name[100] = '%';
    for (int i = 0; i < N; i++) {
        int n = snprintf(name + 300, 40, "#%d", i);
        struct gguf_buf out = {0};
        ck_assert_int_eq(gguf_name_escape(name, 300 + (size_t)n, &out),
                         GGUF_OK);
        check_fname(out.p, out.len);
        res[i][0] = (unsigned char)out.len;
        memcpy(res[i] + 1, out.p, out.len);
        gguf_buf_free(&out);
    }
    check_distinct(res, N);
    /* and long names never equal short ones: "%~" only in hashed names */
    free(res);
}
END_TEST

START_TEST(random_roundtrip)
{
    /* random short names round-trip; random names of any length give
     * valid file names; distinct names give distinct file names */
    enum { N = 3000 };
    unsigned char (*res)[257] = calloc(N, 257);
    static const char *pieces[] = {"a", ".", "/", "%", "\xc3\xa9", "\xff",
                                   "\x01", "~", "%~", "\xe2\x82", "_"};
    for (int i = 0; i < N; i++) {
        char name[600];
        size_t n = 0;
        size_t want = rnd() % (i % 3 == 0 ? 400 : 60);
        while (n < want) {
            if (rnd() & 1) {
                name[n++] = (char)rnd();
            } else {
                const char *p = pieces[rnd() % (sizeof pieces /
                                                 sizeof pieces[0])];
                memcpy(name + n, p, strlen(p));
                n += strlen(p);
            }
        }
        /* make the names distinct by a unique tail */
        n += (size_t)sprintf(name + n, "|%d", i);
        struct gguf_buf out = {0}, back = {0};
        struct gguf_error err = {0};
        ck_assert_int_eq(gguf_name_escape(name, n, &out), GGUF_OK);
        check_fname(out.p, out.len);
        bool hashed = out.len >= 18 && out.p[out.len - 18] == '%' &&
                      out.p[out.len - 17] == '~';
        enum gguf_status st = gguf_name_unescape((char *)out.p, out.len,
                                                 &back, &err);
        if (hashed) {
            ck_assert_int_eq(st, GGUF_E_INVAL);
        } else {
            ck_assert_msg(st == GGUF_OK, "%s", err.msg);
            ck_assert(back.len == n && memcmp(back.p, name, n) == 0);
        }
        res[i][0] = (unsigned char)out.len;
        memcpy(res[i] + 1, out.p, out.len);
        gguf_buf_free(&out);
        gguf_buf_free(&back);
    }
    check_distinct(res, N);
    free(res);
}
END_TEST

/* ---- names beside a GGUF (gguf_sidecar_path) ------------------------ */

/* The base name of a sidecar path (after the last '/'). */
static const char *base_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Expected name for a base that does not fit: its first `keep` bytes,
 * "~", the hash of the whole base, the suffix.  Written by hand. */
static void expect_sidecar_hashed(const char *got, const char *base, size_t keep,
                          const char *suffix)
{
    char want[600];
    snprintf(want, sizeof want, "%.*s~%016llx%s", (int)keep, base,
             (unsigned long long)fnv1a(base, strlen(base)), suffix);
    ck_assert_str_eq(base_of(got), want);
}

START_TEST(sidecar_short)
{
    char *p = gguf_sidecar_path("/d/m.gguf", ".ggufs-journal");
    ck_assert_str_eq(p, "/d/m.gguf.ggufs-journal");
    free(p);
    p = gguf_sidecar_path("m.gguf", ".ggufs-new");
    ck_assert_str_eq(p, "m.gguf.ggufs-new");
    free(p);
    p = gguf_sidecar_path("/a.b/c", ".x");
    ck_assert_str_eq(p, "/a.b/c.x");
    free(p);
}
END_TEST

START_TEST(sidecar_limit)
{
    static const char *suffixes[] = {".ggufs-journal", ".ggufs-new",
                                     ".ggufs-edits-20260101-120000.gguf",
                                     ".ggufs-edits-20260101-120000-1000.gguf"};
    char path[600], base[300];
    for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
        const char *suf = suffixes[k];
        size_t sl = strlen(suf);
        for (size_t bl = 200; bl <= 255; bl++) {
            memset(base, 'm', bl);
            base[bl] = 0;
            snprintf(path, sizeof path, "/some/dir/%s", base);
            char *p = gguf_sidecar_path(path, suf);
            ck_assert_ptr_nonnull(p);
            ck_assert(strncmp(p, "/some/dir/", 10) == 0);
            ck_assert_uint_le(strlen(base_of(p)), 255);
            if (bl + sl <= 255) /* fits: unchanged */
                ck_assert_str_eq(base_of(p) + bl, suf);
            else /* exactly 255: the cut, the hash, the suffix */
                expect_sidecar_hashed(p, base, 255 - sl - 17, suf);
            free(p);
        }
    }
    /* a suffix that cannot fit with a hash is a caller's error */
    char longsuf[260];
    memset(longsuf, 's', 240);
    longsuf[240] = 0;
    ck_assert_ptr_null(gguf_sidecar_path("/d/m", longsuf));
}
END_TEST

START_TEST(sidecar_utf8)
{
    /* 2-byte and 3-byte characters: the cut never splits one */
    static const char *chars[] = {"\xc3\xa9", "\xe2\x82\xac", "a\xe2\x82\xac",
                                  "\xf0\x9f\x98\x80"};
    for (size_t c = 0; c < sizeof chars / sizeof chars[0]; c++) {
        char base[300] = "", path[320];
        while (strlen(base) + strlen(chars[c]) < 250)
            strcat(base, chars[c]);
        snprintf(path, sizeof path, "/d/%s", base);
        char *p = gguf_sidecar_path(path, ".ggufs-journal");
        const char *b = base_of(p);
        size_t n = strlen(b);
        ck_assert_uint_le(n, 255);
        ck_assert_uint_ge(n, 255 - 3);
        ck_assert_msg(gguf_utf8_valid((const uint8_t *)b, n),
                      "sidecar name of %s-base is not valid UTF-8", chars[c]);
        size_t keep = n - 17 - strlen(".ggufs-journal");
        ck_assert(memcmp(b, base, keep) == 0);
        expect_sidecar_hashed(p, base, keep, ".ggufs-journal");
        free(p);
    }
    /* invalid UTF-8 bytes are cut like single bytes */
    char base[300], path[320];
    memset(base, 0xff, 250);
    base[250] = 0;
    snprintf(path, sizeof path, "/d/%s", base);
    char *p = gguf_sidecar_path(path, ".ggufs-new");
    expect_sidecar_hashed(p, base, 255 - 17 - 10, ".ggufs-new");
    free(p);
}
END_TEST

/* Content-addressed names (issue 32): a hash as the name, with or
 * without ollama's prefix, or a file in a blobs/ directory. */
START_TEST(hash_named) {
    const char *h64 =
        "48e55b5ee98178fb736a752095efa244e6f51994f5de4f992c67a8b04e573091";
    char p[512];
    snprintf(p, sizeof p, "/o/blobs/sha256-%s", h64);
    ck_assert(gguf_name_is_hash(p));
    snprintf(p, sizeof p, "/x/sha256:%s", h64);
    ck_assert(gguf_name_is_hash(p));
    snprintf(p, sizeof p, "/hub/models--a--b/blobs/%s", h64);
    ck_assert(gguf_name_is_hash(p));
    snprintf(p, sizeof p, "/anywhere/%s", h64);
    ck_assert(gguf_name_is_hash(p));
    ck_assert(gguf_name_is_hash("/x/0123456789abcdef0123456789abcdef01234567"));
    ck_assert(gguf_name_is_hash("/store/blobs/model.gguf"));
    ck_assert(gguf_name_is_hash("blobs/m"));
    ck_assert(!gguf_name_is_hash("/models/qwen3-8b.gguf"));
    ck_assert(!gguf_name_is_hash("/x/myblobs/m.gguf"));
    ck_assert(!gguf_name_is_hash("/x/blobs"));
    snprintf(p, sizeof p, "/x/sha256-%.63s", h64); /* one digit short */
    ck_assert(!gguf_name_is_hash(p));
    snprintf(p, sizeof p, "/x/%.63sg", h64); /* not hex */
    ck_assert(!gguf_name_is_hash(p));
    snprintf(p, sizeof p, "/x/%s.gguf", h64);
    ck_assert(!gguf_name_is_hash(p));
}
END_TEST

START_TEST(sidecar_distinct)
{
    /* long names that differ only after the cut get different names;
     * the same name always gets the same one (recovery finds it) */
    char a[300], b[300];
    memset(a, 'x', 250);
    a[250] = 0;
    memcpy(b, a, 251);
    b[249] = 'y';
    char *pa = gguf_sidecar_path(a, ".ggufs-journal");
    char *pb = gguf_sidecar_path(b, ".ggufs-journal");
    char *pa2 = gguf_sidecar_path(a, ".ggufs-journal");
    ck_assert_str_ne(pa, pb);
    ck_assert_str_eq(pa, pa2);
    free(pa);
    free(pb);
    free(pa2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("names");
    TCase *tc = tcase_create("names");
    tcase_add_test(tc, escape_table);
    tcase_add_test(tc, empty_name);
    tcase_add_test(tc, fnv_vectors);
    tcase_add_test(tc, appends);
    tcase_add_test(tc, every_byte);
    tcase_add_test(tc, unescape_rejects);
    tcase_add_test(tc, long_names);
    tcase_add_test(tc, long_names_distinct);
    tcase_add_test(tc, random_roundtrip);
    tcase_add_test(tc, sidecar_short);
    tcase_add_test(tc, sidecar_limit);
    tcase_add_test(tc, sidecar_utf8);
    tcase_add_test(tc, sidecar_distinct);
    tcase_add_test(tc, hash_named);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
