/*
 * test_dequant - ggufs's own float32 converters on hand-made blocks whose
 * values are worked out here from docs/format.md, Tensor block formats
 * (half edge cases: subnormals, infinities, NaNs made quiet), the
 * K-quants against their layouts there, value by value, the choice of
 * converter, the extent arithmetic, and the refusals of
 * gguf_ggml_load (a missing file, one writable by others, one that is not
 * a library); with ggml's library at hand ($GGUFS_GGML_LIB or .deps), that
 * it loads and converts the types ggufs leaves to it, and that ggufs's own
 * converters of every type (the K-quants too) equal its to_float bit for
 * bit on many random blocks, special scales (NaNs, infinities,
 * subnormals) included.  The vectorized
 * converters (dequant_simd.c) are judged against the portable ones.
 */
#include "dequant.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The converter ggufs uses (vectorized where the CPU can), checked
 * against the portable one on the same input. */
static void convert(uint32_t type, const void *src, float *dst, int64_t n) {
    struct gguf_dq dq;
    ck_assert(gguf_dq_find(NULL, type, &dq));
    ck_assert(!dq.ggml);
    dq.to_float(src, dst, n);
    float *ref = malloc((size_t)n * sizeof *ref);
    ck_assert(ref);
    gguf_dq_own(type, false)(src, ref, n);
    ck_assert(memcmp(dst, ref, (size_t)n * sizeof *ref) == 0);
    free(ref);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint8_t rnd8(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

/* The vectorized converters against the portable ones, bit for bit: every
 * half (f16), random blocks (any bits decode: NaN and infinite scales
 * too), block counts and lengths that leave tails past every vector
 * width, and nothing written past the last value. */
START_TEST(simd_vs_portable) {
    static const uint32_t types[] = {1, 30, 8, 2, 3, 12, 14};
    static const int64_t counts[] = {1,  2,  3,  5,  7,  8,   9,
                                     15, 16, 17, 31, 33, 100, 1001};
    if (!gguf_dq_simd(1)) {
        fprintf(stderr, "test_dequant: this CPU has no AVX2+F16C: the "
                        "vectorized converters are not used, not tested\n");
        return;
    }
    /* every half; the most values: 1001 blocks of 256 (K-quants) */
    enum { MAXV = 1 << 16, VALS = 1001 * 256 };
    uint8_t *src = malloc(VALS * 2 + 64);
    float *a = malloc((VALS + 16) * sizeof *a), *b = malloc(VALS * sizeof *b);
    ck_assert(src && a && b);
    for (uint32_t h = 0; h < MAXV; h++) {
        src[2 * h] = (uint8_t)h;
        src[2 * h + 1] = (uint8_t)(h >> 8);
    }
    gguf_dq_simd(1)(src, a, MAXV);
    gguf_dq_own(1, false)(src, b, MAXV);
    for (uint32_t h = 0; h < MAXV; h++)
        ck_assert_msg(bits(a[h]) == bits(b[h]), "half %04x: %08x, want %08x", h,
                      bits(a[h]), bits(b[h]));
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        uint32_t blck = gguf_ggml_blck_size(types[t]);
        uint32_t size = gguf_ggml_type_size(types[t]);
        ck_assert(gguf_dq_own(types[t], true) != gguf_dq_own(types[t], false));
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            int64_t nb = counts[c], n = nb * blck;
            for (int64_t k = 0; k < nb * size + 1; k++)
                src[k] = rnd8();
            for (int k = 0; k < 16; k++)
                a[n + k] = -1.0f;
            /* from an odd address too: nothing may assume alignment */
            const uint8_t *in = src + (c & 1);
            gguf_dq_own(types[t], true)(in, a, n);
            gguf_dq_own(types[t], false)(in, b, n);
            for (int64_t k = 0; k < n; k++)
                ck_assert_msg(bits(a[k]) == bits(b[k]),
                              "type %u, %lld blocks, value %lld: %08x, "
                              "want %08x",
                              types[t], (long long)nb, (long long)k, bits(a[k]),
                              bits(b[k]));
            for (int k = 0; k < 16; k++)
                ck_assert(a[n + k] == -1.0f);
        }
    }
    free(src);
    free(a);
    free(b);
}
END_TEST

START_TEST(halves) {
    /* half bits -> float bits, worked out by hand */
    static const uint16_t h[] = {0x0000, 0x8000, 0x0001, 0x03ff,
                                 0x0400, 0x3c00, 0x7bff, 0x7c00,
                                 0xfc00, 0x7e00, 0x7d00, 0xc000};
    static const uint32_t f[] = {
        0x00000000, 0x80000000, 0x33800000, 0x387fc000, 0x38800000, 0x3f800000,
        0x477fe000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7fe00000, 0xc0000000};
    uint8_t src[2 * 12];
    for (int i = 0; i < 12; i++) {
        src[2 * i] = (uint8_t)h[i];
        src[2 * i + 1] = (uint8_t)(h[i] >> 8);
    }
    float out[12];
    convert(1, src, out, 12);
    for (int i = 0; i < 12; i++)
        ck_assert_msg(bits(out[i]) == f[i], "half %04x: %08x, want %08x", h[i],
                      bits(out[i]), f[i]);
    /* bf16: the upper half of the float */
    uint8_t b[4] = {0x80, 0x3f, 0xc1, 0xff};
    convert(30, b, out, 2);
    ck_assert_uint_eq(bits(out[0]), 0x3f800000);
    ck_assert_uint_eq(bits(out[1]), 0xffc10000);
}
END_TEST

START_TEST(q8_0_q4) {
    uint8_t blk[34] = {0x00, 0x40}; /* d = 2 */
    for (int j = 0; j < 32; j++)
        blk[2 + j] = (uint8_t)(int8_t)(j - 16);
    float out[32];
    convert(8, blk, out, 32);
    for (int j = 0; j < 32; j++)
        ck_assert(out[j] == (float)((j - 16) * 2));
    /* q4_0: byte j = low nibble j, high nibble 15 - j */
    uint8_t q4[18] = {0x00, 0x38}; /* d = 0.5 */
    for (int j = 0; j < 16; j++)
        q4[2 + j] = (uint8_t)(j | (15 - j) << 4);
    convert(2, q4, out, 32);
    for (int j = 0; j < 16; j++) {
        ck_assert(out[j] == (float)(j - 8) * 0.5f);
        ck_assert(out[j + 16] == (float)(15 - j - 8) * 0.5f);
    }
    /* q4_1: d = 1, m = -3 */
    uint8_t q41[20] = {0x00, 0x3c, 0x00, 0xc2};
    for (int j = 0; j < 16; j++)
        q41[4 + j] = (uint8_t)(j | (15 - j) << 4);
    convert(3, q41, out, 32);
    for (int j = 0; j < 16; j++) {
        ck_assert(out[j] == (float)j - 3);
        ck_assert(out[j + 16] == (float)(15 - j) - 3);
    }
}
END_TEST

START_TEST(q5) {
    /* q5_0: d = 1, qh bit 0 (value 0) and bit 17 (value 17) set, nibbles
     * all 1: value 0 = 1 + 16 - 16 = 1, value 17 = 17 - 16 = 1, others
     * 1 - 16 = -15. */
    uint8_t b[22] = {0x00, 0x3c, 0x01, 0x00, 0x02, 0x00};
    for (int j = 0; j < 16; j++)
        b[6 + j] = 0x11;
    float out[32];
    convert(6, b, out, 32);
    for (int j = 0; j < 32; j++)
        ck_assert_msg(out[j] == (j == 0 || j == 17 ? 1.0f : -15.0f),
                      "q5_0 value %d: %g", j, out[j]);
    /* q5_1: d = 2, m = 0.5, qh bit 31 (value 31): 2 * (1 + 16) + 0.5 */
    uint8_t c[24] = {0x00, 0x40, 0x00, 0x38, 0x00, 0x00, 0x00, 0x80};
    for (int j = 0; j < 16; j++)
        c[8 + j] = 0x11;
    convert(7, c, out, 32);
    for (int j = 0; j < 32; j++)
        ck_assert(out[j] == (j == 31 ? 34.5f : 2.5f));
}
END_TEST

/* ---- the K-quants, value by value as docs/format.md words them -------- */

static float h2f(const uint8_t *p) {
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    float f;
    convert(1, &h, &f, 1); /* checked by halves against hand-made bits */
    return f;
}

/* Bits lo and lo + 1 of byte x. */
static int two(int x, int lo) {
    return (x >> lo) & 3;
}

/* Value k of the K-quant block b of type t, from the documented layout. */
static float kref(uint32_t t, const uint8_t *b, int k) {
    int h = k / 128, p = k % 128 / 32, l = k % 32, i = k / 16, n, sc, m;
    int g = k / 64, ti = k % 64 / 32, i32 = k / 32;
    switch (t) {
    case 10: /* q2_K */
        n = two(b[16 + 32 * h + l], 2 * p);
        return h2f(b + 80) * (float)(b[i] & 15) * (float)n -
               h2f(b + 82) * (float)(b[i] >> 4);
    case 11: /* q3_K */
        n = two(b[32 + 32 * h + l], 2 * p) -
            ((b[l] >> (4 * h + p)) & 1 ? 0 : 4);
        sc = (i < 8 ? b[96 + i] & 15 : b[96 + i - 8] >> 4) |
             two(b[96 + 8 + i % 4], 2 * (i / 4)) << 4;
        return h2f(b + 108) * (float)(sc - 32) * (float)n;
    case 12: /* q4_K */
    case 13: /* q5_K */
        n = ti ? b[(t == 12 ? 16 : 48) + 32 * g + l] >> 4
               : b[(t == 12 ? 16 : 48) + 32 * g + l] & 15;
        if (t == 13)
            n += 16 * ((b[16 + l] >> i32) & 1);
        if (i32 < 4) {
            sc = b[4 + i32] & 63;
            m = b[4 + i32 + 4] & 63;
        } else {
            sc = (b[4 + i32 + 4] & 15) | (b[4 + i32 - 4] >> 6) << 4;
            m = (b[4 + i32 + 4] >> 4) | (b[4 + i32] >> 6) << 4;
        }
        return h2f(b) * (float)sc * (float)n - h2f(b + 2) * (float)m;
    default: /* q6_K */
        n = (((b[64 * h + 32 * (p % 2) + l] >> (4 * (p / 2))) & 15) |
             two(b[128 + 32 * h + l], 2 * p) << 4) -
            32;
        return h2f(b + 208) * (float)(int8_t)b[192 + i] * (float)n;
    }
}

/* ggufs's K-quant converters (the vectorized and the portable: convert)
 * against kref on random blocks, whatever their scales. */
START_TEST(kquants) {
    enum { NB = 64 };
    uint8_t *src = malloc(NB * 210);
    float *out = malloc(NB * 256 * sizeof *out);
    ck_assert(src && out);
    for (uint32_t t = 10; t <= 14; t++) {
        uint32_t size = gguf_ggml_type_size(t);
        for (int k = 0; k < NB * (int)size; k++)
            src[k] = rnd8();
        convert(t, src, out, NB * 256);
        for (int k = 0; k < NB * 256; k++) {
            float want = kref(t, src + k / 256 * size, k % 256);
            if (bits(out[k]) != bits(want))
                ck_abort_msg("%s: value %d: %08x, want %08x",
                             gguf_ggml_type_name(t), k, bits(out[k]),
                             bits(want));
        }
    }
    free(src);
    free(out);
}
END_TEST

START_TEST(choice_and_extent) {
    struct gguf_dq dq;
    static const uint32_t own[] = {0, 1, 2, 3, 6, 7, 8, 30, 10, 11, 12, 13, 14};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        ck_assert(gguf_dq_find(NULL, own[i], &dq) && !dq.ggml);
    ck_assert(gguf_dq_find(NULL, 12, &dq) && !dq.ggml); /* q4_K: own */
    ck_assert(!gguf_dq_find(NULL, 23, &dq));            /* iq4_xs: ggml's */
    ck_assert(!gguf_dq_find(NULL, 15, &dq)); /* q8_K: ggml has none */
    ck_assert(!gguf_dq_find(NULL, 24, &dq)); /* i8: nobody's */
    ck_assert(!gguf_dq_find(NULL, 40, &dq));
    uint64_t e, b;
    int64_t ne[4] = {512, 3, 2, 1};
    ck_assert(gguf_dq_extent(NULL, 12, 4, ne, &e, &b));
    ck_assert_uint_eq(e, 3072);
    ck_assert_uint_eq(b, 12 * 144);
    ne[0] = 100; /* not a multiple of 256 */
    ck_assert(!gguf_dq_extent(NULL, 12, 4, ne, &e, &b));
    int64_t huge[4] = {INT64_C(1) << 40, INT64_C(1) << 30, 1, 1};
    ck_assert(!gguf_dq_extent(NULL, 0, 4, huge, &e, &b));
    ck_assert(!gguf_dq_extent(NULL, 40, 4, ne, &e, &b)); /* unknown */
}
END_TEST

START_TEST(load_refusals) {
    gguf_ggml *g = NULL;
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_ggml_load(&g, "/nonexistent/libggml-base.so", &err),
                     GGUF_E_IO);
    ck_assert(strstr(err.msg, "/nonexistent"));
    char dir[] = "/tmp/ggufs-dq-XXXXXX";
    ck_assert(mkdtemp(dir));
    chmod(dir, 0755);
    char path[64];
    snprintf(path, sizeof path, "%s/libggml-base.so", dir);
    FILE *f = fopen(path, "w");
    ck_assert(f);
    fputs("not a library\n", f);
    fclose(f);
    chmod(path, 0666); /* writable by others: never loaded */
    ck_assert_int_eq(gguf_ggml_load(&g, path, &err), GGUF_E_PERM);
    ck_assert(strstr(err.msg, "writable by nobody else"));
    chmod(path, 0644);
    chmod(dir, 0777); /* in a directory anyone may write: never loaded */
    ck_assert_int_eq(gguf_ggml_load(&g, path, &err), GGUF_E_PERM);
    chmod(dir, 0755); /* safe, but no library */
    ck_assert_int_eq(gguf_ggml_load(&g, path, &err), GGUF_E_UNSUPPORTED);
    ck_assert(strstr(err.msg, "not used"));
    ck_assert(g == NULL);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* A library that says q4_K has 128 values per block is not used. */
START_TEST(load_lying) {
    const char *fake = getenv("FAKE_GGML");
    ck_assert_msg(fake, "FAKE_GGML is not set (run through meson test)");
    gguf_ggml *g = NULL;
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_ggml_load(&g, fake, &err), GGUF_E_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "type 12 is not ggufs's q4_K"), "%s",
                  err.msg);
    ck_assert(g == NULL);
}
END_TEST

/* ggml's library ($GGUFS_GGML_LIB or .deps), loaded; NULL (said on
 * stderr) when there is none. */
static gguf_ggml *load_ggml_lib(const char *part) {
    const char *lib = getenv("GGUFS_GGML_LIB"), *src = getenv("GGUFS_SRCDIR");
    char path[4096];
    if (!lib || !*lib) {
        snprintf(path, sizeof path,
                 "%s/.deps/node_modules/@node-llama-cpp/linux-x64/bins/"
                 "linux-x64/libggml-base.so",
                 src ? src : ".");
        lib = path;
    }
    if (access(lib, R_OK) != 0) {
        fprintf(stderr, "test_dequant: no %s: %s skipped\n", lib, part);
        return NULL;
    }
    gguf_ggml *g = NULL;
    struct gguf_error err = {0};
    ck_assert_msg(gguf_ggml_load(&g, lib, &err) == GGUF_OK, "%s", err.msg);
    return g;
}

START_TEST(load_ggml) {
    gguf_ggml *g = load_ggml_lib("ggml's part");
    if (!g)
        return;
    struct gguf_dq dq;
    ck_assert(gguf_dq_find(g, 23, &dq) && dq.ggml && dq.blck == 256 &&
              dq.size == 136 && strcmp(dq.name, "iq4_xs") == 0);
    ck_assert(gguf_dq_find(g, 12, &dq) && !dq.ggml); /* q4_K: own first */
    ck_assert(!gguf_dq_find(g, 15, &dq)); /* q8_K: ggml has no to_float */
    ck_assert(gguf_dq_find(g, 8, &dq) && !dq.ggml); /* ggufs's own first */
    ck_assert(!gguf_dq_find(g, 24, &dq));           /* i8: nobody's */
    /* ggml's q4_0 and ggufs's agree on a block */
    uint8_t q4[18] = {0x00, 0x38};
    for (int j = 0; j < 16; j++)
        q4[2 + j] = (uint8_t)(j * 17);
    float a[32], b[32];
    ck_assert(gguf_ggml_dq(g, 2, &dq));
    dq.to_float(q4, a, 32);
    convert(2, q4, b, 32);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    gguf_ggml_unload(g);
}
END_TEST

/* Where each type's halves are in its block (the scales a random block
 * gets special values for), -1 ending; none for f16 and bf16, whose every
 * value is one. */
static const struct {
    uint32_t type;
    int half[3];
} scaled[] = {
    {1, {-1}},       {30, {-1}},       {8, {0, -1}},     {2, {0, -1}},
    {3, {0, 2, -1}}, {6, {0, -1}},     {7, {0, 2, -1}},  {10, {80, 82, -1}},
    {11, {108, -1}}, {12, {0, 2, -1}}, {13, {0, 2, -1}}, {14, {208, -1}},
};

/* Halves a scale is given in one block of four: NaNs (quiet, signalling,
 * negative), infinities, subnormals, zeros, the largest. */
static const uint16_t special[] = {0x7e00, 0x7d01, 0xfe00, 0x7c00,
                                   0xfc00, 0x0001, 0x03ff, 0x8001,
                                   0x0000, 0x8000, 0x7bff, 0x3c00};

/* Every type ggufs converts itself, ggml's to_float against ggufs's
 * portable and vectorized converters, bit for bit: many random blocks,
 * a quarter of them with special scales (every pair of the list above
 * for types with two halves), from an odd address. */
START_TEST(vs_ggml) {
    gguf_ggml *g = load_ggml_lib("the comparison with ggml");
    if (!g)
        return;
    enum { NB = 4096 };
    const int ns = (int)(sizeof special / sizeof *special);
    uint8_t *src = malloc((size_t)NB * 292 + 1);
    float *a = malloc((size_t)NB * 256 * sizeof *a);
    float *b = malloc((size_t)NB * 256 * sizeof *b);
    ck_assert(src && a && b);
    for (size_t t = 0; t < sizeof scaled / sizeof *scaled; t++) {
        uint32_t ty = scaled[t].type;
        struct gguf_dq gd;
        ck_assert_msg(gguf_dq_own(ty, false),
                      "type %u: no converter of ggufs's own", ty);
        ck_assert(gguf_ggml_dq(g, ty, &gd) && gd.ggml);
        int64_t nb = gd.blck == 1 ? NB * 64 : NB, n = nb * gd.blck;
        uint8_t *in = src + 1;
        for (int64_t k = 0; k < nb * gd.size; k++)
            in[k] = rnd8();
        for (int64_t k = 0; k < nb && scaled[t].half[0] >= 0; k += 4) {
            for (int h = 0; h < 3 && scaled[t].half[h] >= 0; h++) {
                uint16_t v = special[(k / 4 / (h ? ns : 1)) % ns];
                in[k * gd.size + scaled[t].half[h]] = (uint8_t)v;
                in[k * gd.size + scaled[t].half[h] + 1] = (uint8_t)(v >> 8);
            }
        }
        gd.to_float(in, b, n);
        for (int simd = 0; simd < 2; simd++) {
            gguf_dq_own(ty, simd)(in, a, n);
            for (int64_t k = 0; k < n; k++) /* ck_assert per value: slow */
                if (bits(a[k]) != bits(b[k]))
                    ck_abort_msg("%s (%s): value %lld of %lld: %08x, ggml's "
                                 "%08x",
                                 gd.name, simd ? "vectorized" : "portable",
                                 (long long)k, (long long)n, bits(a[k]),
                                 bits(b[k]));
        }
    }
    free(src);
    free(a);
    free(b);
    gguf_ggml_unload(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dequant");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, halves);
    tcase_add_test(tc, q8_0_q4);
    tcase_add_test(tc, q5);
    tcase_add_test(tc, kquants);
    tcase_add_test(tc, choice_and_extent);
    tcase_add_test(tc, simd_vs_portable);
    tcase_add_test(tc, load_refusals);
    tcase_add_test(tc, load_lying);
    tcase_add_test(tc, load_ggml);
    tcase_add_test(tc, vs_ggml);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
