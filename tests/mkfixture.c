/*
 * mkfixture - the project's fixture generator.  Builds contexts with the
 * library's editing API and writes them with its writer (gguf_write_file),
 * so every fixture is also a test of the writer; tests/refdump (ggml's own
 * reader) judges them.  Output is deterministic: fixed seeds, no clocks.
 *
 *   mkfixture all DIR          types, tensors, names, align64, v2, empty,
 *                              vocab (.gguf) into DIR
 *   mkfixture NAME OUT         one of the above into OUT
 *   mkfixture model OUT --tensor-mb N --n-tensors K [--vocab N] [--sparse]
 *                              an f16 model of K tensors, ~N MiB of data;
 *                              --sparse leaves the data as holes
 *   mkfixture dequant OUT      a tensor of every type, ids ggml has and
 *                              ggufs does not (40-42) included
 *   mkfixture quants OUT --mega N
 *                              q8_0, q4_K, q6_K, iq4_xs, f16, f32 tensors of N Mi
 *                              values each (bench/run, group views)
 *   mkfixture llama OUT [--vocab-from FILE.gguf]
 *                              a tiny llama model (random f32 weights),
 *                              loadable by llama.cpp, with a generated
 *                              32000-token SentencePiece vocabulary or
 *                              FILE's tokenizer
 *
 * A tool, not the library: it exits on the first error, with a message.
 */
#include "gguf.h"
#include "internal.h" /* gguf_set_alignment, gguf_wr32/64 */

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- plumbing --------------------------------------------------------- */

static const char *prog = "mkfixture";

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void check(enum gguf_status st, const struct gguf_error *err,
                  const char *what) {
    if (st != GGUF_OK)
        die("%s: %s: %s", what, gguf_status_name(st), err->msg);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory (%zu bytes)", n);
    return p;
}

/* splitmix64: tiny, good enough, and identical everywhere. */
struct rng {
    uint64_t s;
};
static uint64_t rnd(struct rng *r) {
    uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}
/* Uniform in [-1, 1). */
static float rndf(struct rng *r) {
    return (float)((double)(rnd(r) >> 11) / (double)(UINT64_C(1) << 52) - 1.0);
}

/* ---- payload builders ------------------------------------------------- */

/* A payload under construction; values are appended in on-disk form. */
struct pl {
    struct gguf_buf b;
};

static void pl_bytes(struct pl *p, const void *src, size_t n) {
    if (gguf_buf_add(&p->b, src, n) != GGUF_OK)
        die("out of memory");
}
static void pl_u8(struct pl *p, uint8_t v) { pl_bytes(p, &v, 1); }
static void pl_u16(struct pl *p, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    pl_bytes(p, b, 2);
}
static void pl_u32(struct pl *p, uint32_t v) {
    uint8_t b[4];
    gguf_wr32(b, v);
    pl_bytes(p, b, 4);
}
static void pl_u64(struct pl *p, uint64_t v) {
    uint8_t b[8];
    gguf_wr64(b, v);
    pl_bytes(p, b, 8);
}
static void pl_f32bits(struct pl *p, uint32_t bits) { pl_u32(p, bits); }
static void pl_f32(struct pl *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    pl_u32(p, u);
}
static void pl_f64(struct pl *p, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    pl_u64(p, u);
}
static void pl_strn(struct pl *p, const char *s, size_t n) {
    pl_u64(p, n);
    pl_bytes(p, s, n);
}
static void pl_str(struct pl *p, const char *s) { pl_strn(p, s, strlen(s)); }
static void pl_arr(struct pl *p, enum gguf_type t, uint64_t n) {
    pl_u32(p, (uint32_t)t);
    pl_u64(p, n);
}

/* Sets key (klen bytes) to the payload in p, then empties p. */
static void setn(gguf_ctx *ctx, const char *key, size_t klen,
                 enum gguf_type t, struct pl *p) {
    struct gguf_error err = {0};
    enum gguf_status st =
        gguf_set_payload(ctx, key, klen, t, p->b.p, p->b.len, &err);
    if (st != GGUF_OK)
        die("setting key '%.*s': %s: %s", (int)klen, key,
            gguf_status_name(st), err.msg);
    p->b.len = 0;
}
static void set(gguf_ctx *ctx, const char *key, enum gguf_type t,
                struct pl *p) {
    setn(ctx, key, strlen(key), t, p);
}

static void set_str(gguf_ctx *ctx, const char *key, const char *s) {
    struct pl p = {0};
    pl_str(&p, s);
    set(ctx, key, GGUF_TYPE_STRING, &p);
    gguf_buf_free(&p.b);
}
static void set_u32(gguf_ctx *ctx, const char *key, uint32_t v) {
    struct pl p = {0};
    pl_u32(&p, v);
    set(ctx, key, GGUF_TYPE_UINT32, &p);
    gguf_buf_free(&p.b);
}
static void set_f32(gguf_ctx *ctx, const char *key, float v) {
    struct pl p = {0};
    pl_f32(&p, v);
    set(ctx, key, GGUF_TYPE_FLOAT32, &p);
    gguf_buf_free(&p.b);
}
static void set_bool(gguf_ctx *ctx, const char *key, bool v) {
    struct pl p = {0};
    pl_u8(&p, v);
    set(ctx, key, GGUF_TYPE_BOOL, &p);
    gguf_buf_free(&p.b);
}

static void add_tensor(gguf_ctx *ctx, const char *name, size_t nlen,
                       uint32_t type, uint32_t n_dims, const int64_t *ne) {
    struct gguf_error err = {0};
    enum gguf_status st = gguf_add_tensor(ctx, name, nlen, type, n_dims, ne, &err);
    if (st != GGUF_OK)
        die("adding tensor '%.*s': %s: %s", (int)nlen, name,
            gguf_status_name(st), err.msg);
}

static gguf_ctx *new_ctx(uint32_t version) {
    gguf_ctx *ctx = gguf_new(version);
    if (!ctx)
        die("out of memory (gguf_new)");
    return ctx;
}

/* ---- tensor data ------------------------------------------------------ */

/* Data for every tensor, generated up front (fixtures are small). */
struct tdata {
    uint8_t **p;
    int64_t n;
};

static const void *tdata_get(void *u, int64_t i) {
    struct tdata *d = u;
    return i < d->n ? d->p[i] : NULL;
}

/* Deterministic pseudo-random bytes for every tensor of ctx.  Raw bytes are
 * fine for quantized types: no reader validates block contents. */
static struct tdata random_data(const gguf_ctx *ctx, uint64_t seed) {
    struct tdata d = {.n = gguf_n_tensors(ctx)};
    struct rng r = {seed};
    d.p = xmalloc((size_t)d.n * sizeof *d.p);
    for (int64_t i = 0; i < d.n; i++) {
        uint64_t sz = gguf_tensor_size(ctx, i);
        d.p[i] = xmalloc((size_t)sz);
        for (uint64_t j = 0; j < sz; j += 8) {
            uint64_t v = rnd(&r);
            memcpy(d.p[i] + j, &v, sz - j < 8 ? (size_t)(sz - j) : 8);
        }
    }
    return d;
}

static void tdata_free(struct tdata *d) {
    for (int64_t i = 0; i < d->n; i++)
        free(d->p[i]);
    free(d->p);
}

static void write_out(gguf_ctx *ctx, const char *path,
                      const void *(*data)(void *, int64_t), void *u) {
    struct gguf_error err = {0};
    enum gguf_status st = gguf_write_file(ctx, path, data, u, &err);
    if (st != GGUF_OK)
        die("writing %s: %s: %s", path, gguf_status_name(st), err.msg);
}

static void write_random(gguf_ctx *ctx, const char *path, uint64_t seed) {
    struct tdata d = random_data(ctx, seed);
    write_out(ctx, path, tdata_get, &d);
    tdata_free(&d);
}

/* ---- types.gguf ------------------------------------------------------- */

static void scalar_u8(gguf_ctx *c, const char *k, uint8_t v) {
    struct pl p = {0}; pl_u8(&p, v); set(c, k, GGUF_TYPE_UINT8, &p); gguf_buf_free(&p.b);
}
static void scalar_i8(gguf_ctx *c, const char *k, int8_t v) {
    struct pl p = {0}; pl_u8(&p, (uint8_t)v); set(c, k, GGUF_TYPE_INT8, &p); gguf_buf_free(&p.b);
}
static void scalar_u16(gguf_ctx *c, const char *k, uint16_t v) {
    struct pl p = {0}; pl_u16(&p, v); set(c, k, GGUF_TYPE_UINT16, &p); gguf_buf_free(&p.b);
}
static void scalar_i16(gguf_ctx *c, const char *k, int16_t v) {
    struct pl p = {0}; pl_u16(&p, (uint16_t)v); set(c, k, GGUF_TYPE_INT16, &p); gguf_buf_free(&p.b);
}
static void scalar_i32(gguf_ctx *c, const char *k, int32_t v) {
    struct pl p = {0}; pl_u32(&p, (uint32_t)v); set(c, k, GGUF_TYPE_INT32, &p); gguf_buf_free(&p.b);
}
static void scalar_u64(gguf_ctx *c, const char *k, uint64_t v) {
    struct pl p = {0}; pl_u64(&p, v); set(c, k, GGUF_TYPE_UINT64, &p); gguf_buf_free(&p.b);
}
static void scalar_i64(gguf_ctx *c, const char *k, int64_t v) {
    struct pl p = {0}; pl_u64(&p, (uint64_t)v); set(c, k, GGUF_TYPE_INT64, &p); gguf_buf_free(&p.b);
}
static void scalar_f32bits(gguf_ctx *c, const char *k, uint32_t bits) {
    struct pl p = {0}; pl_f32bits(&p, bits); set(c, k, GGUF_TYPE_FLOAT32, &p); gguf_buf_free(&p.b);
}
static void scalar_f64bits(gguf_ctx *c, const char *k, uint64_t bits) {
    struct pl p = {0}; pl_u64(&p, bits); set(c, k, GGUF_TYPE_FLOAT64, &p); gguf_buf_free(&p.b);
}

/* Edge-case float bit patterns (IEEE 754), shared by scalars and arrays. */
static const struct { const char *name; uint32_t bits; } f32_edges[] = {
    {"zero", 0x00000000}, {"neg_zero", 0x80000000}, {"one", 0x3f800000},
    {"neg_one_half", 0xbf000000}, {"pi", 0x40490fdb}, {"tenth", 0x3dcccccd},
    {"max", 0x7f7fffff}, {"neg_max", 0xff7fffff}, {"min_normal", 0x00800000},
    {"denorm_min", 0x00000001}, {"denorm_max", 0x007fffff},
    {"neg_denorm", 0x80000001}, {"inf", 0x7f800000}, {"neg_inf", 0xff800000},
    {"nan", 0x7fc00000}, {"neg_nan", 0xffc00000}, {"snan", 0x7f800001},
    {"nan_payload", 0x7fc12345}, {"neg_snan_payload", 0xffa5a5a5},
    {"int_exact", 0x4b7fffff}, /* 16777215 */
};
static const struct { const char *name; uint64_t bits; } f64_edges[] = {
    {"zero", 0}, {"neg_zero", UINT64_C(0x8000000000000000)},
    {"one", UINT64_C(0x3ff0000000000000)}, {"tenth", UINT64_C(0x3fb999999999999a)},
    {"pi", UINT64_C(0x400921fb54442d18)}, {"max", UINT64_C(0x7fefffffffffffff)},
    {"neg_max", UINT64_C(0xffefffffffffffff)},
    {"min_normal", UINT64_C(0x0010000000000000)}, {"denorm_min", 1},
    {"denorm_max", UINT64_C(0x000fffffffffffff)},
    {"neg_denorm", UINT64_C(0x8000000000000001)},
    {"inf", UINT64_C(0x7ff0000000000000)}, {"neg_inf", UINT64_C(0xfff0000000000000)},
    {"nan", UINT64_C(0x7ff8000000000000)}, {"neg_nan", UINT64_C(0xfff8000000000000)},
    {"snan", UINT64_C(0x7ff0000000000001)},
    {"nan_payload", UINT64_C(0x7ff8deadbeef0001)},
    {"int_exact", UINT64_C(0x433fffffffffffff)}, /* 2^53 - 1 */
};

/* Strings of every awkward kind except NUL (ggml's C API returns C strings,
 * so NUL bytes could not be compared against the reference). */
static const struct { const char *name; const char *s; } str_edges[] = {
    {"empty", ""},
    {"ascii", "hello, world"},
    {"newline", "line one\nline two"},
    {"trailing_newline", "ends with a newline\n"},
    {"only_newline", "\n"},
    {"crlf", "dos\r\nline\r\n"},
    {"tab", "a\tb\t"},
    {"control", "bell\a esc\x1b[0m del\x7f \x01\x02\x1f"},
    {"backslash", "back\\slash \\n not a newline"},
    {"quotes", "\"double\" and 'single'"},
    {"utf8", "h\xc3\xa9llo \xe2\x96\x81 \xf0\x9f\x99\x82 \xe4\xb8\xad\xe6\x96\x87"},
    {"invalid_utf8", "bad \xff\xfe bytes \xc0\xaf overlong \xed\xa0\x80 surrogate \xe2\x82"},
    {"spaces", "  leading and trailing  "},
    {"percent", "100% %2F %% %"},
};

static void fixture_types(const char *path) {
    gguf_ctx *c = new_ctx(3);
    struct pl p = {0};

    set_str(c, "general.architecture", "types");
    set_str(c, "general.name", "ggufs type fixture");

    scalar_u8(c, "types.uint8.zero", 0);
    scalar_u8(c, "types.uint8.max", UINT8_MAX);
    scalar_i8(c, "types.int8.min", INT8_MIN);
    scalar_i8(c, "types.int8.max", INT8_MAX);
    scalar_i8(c, "types.int8.minus_one", -1);
    scalar_u16(c, "types.uint16.zero", 0);
    scalar_u16(c, "types.uint16.max", UINT16_MAX);
    scalar_i16(c, "types.int16.min", INT16_MIN);
    scalar_i16(c, "types.int16.max", INT16_MAX);
    set_u32(c, "types.uint32.zero", 0);
    set_u32(c, "types.uint32.max", UINT32_MAX);
    scalar_i32(c, "types.int32.min", INT32_MIN);
    scalar_i32(c, "types.int32.max", INT32_MAX);
    scalar_i32(c, "types.int32.minus_one", -1);
    scalar_u64(c, "types.uint64.zero", 0);
    scalar_u64(c, "types.uint64.max", UINT64_MAX);
    scalar_u64(c, "types.uint64.above_int64", (uint64_t)INT64_MAX + 1);
    scalar_i64(c, "types.int64.min", INT64_MIN);
    scalar_i64(c, "types.int64.max", INT64_MAX);
    scalar_i64(c, "types.int64.minus_one", -1);
    for (size_t i = 0; i < sizeof f32_edges / sizeof *f32_edges; i++) {
        char k[96];
        snprintf(k, sizeof k, "types.float32.%s", f32_edges[i].name);
        scalar_f32bits(c, k, f32_edges[i].bits);
    }
    for (size_t i = 0; i < sizeof f64_edges / sizeof *f64_edges; i++) {
        char k[96];
        snprintf(k, sizeof k, "types.float64.%s", f64_edges[i].name);
        scalar_f64bits(c, k, f64_edges[i].bits);
    }
    set_bool(c, "types.bool.false", false);
    set_bool(c, "types.bool.true", true);
    for (size_t i = 0; i < sizeof str_edges / sizeof *str_edges; i++) {
        char k[96];
        snprintf(k, sizeof k, "types.string.%s", str_edges[i].name);
        set_str(c, k, str_edges[i].s);
    }
    {
        /* A long string (64 KiB + 1) of printable text with newlines. */
        size_t n = 65537;
        char *s = xmalloc(n + 1);
        for (size_t i = 0; i < n; i++)
            s[i] = (i % 61 == 60) ? '\n' : (char)('a' + i % 26);
        s[n] = '\0';
        set_str(c, "types.string.long", s);
        free(s);
    }

    /* Arrays of every element type, each with edge values, and empty. */
    pl_arr(&p, GGUF_TYPE_UINT8, 4);
    pl_u8(&p, 0); pl_u8(&p, 1); pl_u8(&p, 127); pl_u8(&p, 255);
    set(c, "types.array.uint8", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_INT8, 4);
    pl_u8(&p, (uint8_t)INT8_MIN); pl_u8(&p, (uint8_t)-1); pl_u8(&p, 0); pl_u8(&p, INT8_MAX);
    set(c, "types.array.int8", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_UINT16, 3);
    pl_u16(&p, 0); pl_u16(&p, 256); pl_u16(&p, UINT16_MAX);
    set(c, "types.array.uint16", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_INT16, 4);
    pl_u16(&p, (uint16_t)INT16_MIN); pl_u16(&p, (uint16_t)-1); pl_u16(&p, 0); pl_u16(&p, INT16_MAX);
    set(c, "types.array.int16", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_UINT32, 3);
    pl_u32(&p, 0); pl_u32(&p, 65536); pl_u32(&p, UINT32_MAX);
    set(c, "types.array.uint32", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_INT32, 4);
    pl_u32(&p, (uint32_t)INT32_MIN); pl_u32(&p, (uint32_t)-1); pl_u32(&p, 0); pl_u32(&p, INT32_MAX);
    set(c, "types.array.int32", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_UINT64, 3);
    pl_u64(&p, 0); pl_u64(&p, UINT64_C(1) << 53); pl_u64(&p, UINT64_MAX);
    set(c, "types.array.uint64", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_INT64, 4);
    pl_u64(&p, (uint64_t)INT64_MIN); pl_u64(&p, (uint64_t)-1); pl_u64(&p, 0); pl_u64(&p, INT64_MAX);
    set(c, "types.array.int64", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_FLOAT32, sizeof f32_edges / sizeof *f32_edges);
    for (size_t i = 0; i < sizeof f32_edges / sizeof *f32_edges; i++)
        pl_f32bits(&p, f32_edges[i].bits);
    set(c, "types.array.float32", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_FLOAT64, sizeof f64_edges / sizeof *f64_edges);
    for (size_t i = 0; i < sizeof f64_edges / sizeof *f64_edges; i++)
        pl_u64(&p, f64_edges[i].bits);
    set(c, "types.array.float64", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_BOOL, 3);
    pl_u8(&p, 1); pl_u8(&p, 0); pl_u8(&p, 1);
    set(c, "types.array.bool", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_STRING, sizeof str_edges / sizeof *str_edges);
    for (size_t i = 0; i < sizeof str_edges / sizeof *str_edges; i++)
        pl_str(&p, str_edges[i].s);
    set(c, "types.array.string", GGUF_TYPE_ARRAY, &p);
    /* A long-ish float array, so that rendering crosses buffer sizes. */
    {
        struct rng r = {42};
        pl_arr(&p, GGUF_TYPE_FLOAT32, 1000);
        for (int i = 0; i < 1000; i++)
            pl_f32(&p, rndf(&r) * 1000.0f);
        set(c, "types.array.float32_random", GGUF_TYPE_ARRAY, &p);
    }
    static const enum gguf_type all[] = {
        GGUF_TYPE_UINT8, GGUF_TYPE_INT8, GGUF_TYPE_UINT16, GGUF_TYPE_INT16,
        GGUF_TYPE_UINT32, GGUF_TYPE_INT32, GGUF_TYPE_FLOAT32, GGUF_TYPE_BOOL,
        GGUF_TYPE_STRING, GGUF_TYPE_UINT64, GGUF_TYPE_INT64, GGUF_TYPE_FLOAT64,
    };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        char k[96];
        snprintf(k, sizeof k, "types.array.empty.%s", gguf_type_name(all[i]));
        pl_arr(&p, all[i], 0);
        set(c, k, GGUF_TYPE_ARRAY, &p);
    }
    /* Two keys whose float values are not the bit patterns above, written
     * from C constants, to pin the decimal rendering of common values. */
    set_f32(c, "types.float32.flt_epsilon", FLT_EPSILON);
    pl_f64(&p, DBL_EPSILON);
    set(c, "types.float64.dbl_epsilon", GGUF_TYPE_FLOAT64, &p);

    /* One small tensor so the file is a model in every reader's eyes. */
    int64_t ne[2] = {4, 2};
    add_tensor(c, "types.tensor", 12, 0, 2, ne);
    write_random(c, path, 1);
    gguf_buf_free(&p.b);
    gguf_close(c);
}

/* ---- tensors.gguf ----------------------------------------------------- */

static void fixture_tensors(const char *path) {
    gguf_ctx *c = new_ctx(3);
    set_str(c, "general.architecture", "tensors");
    set_str(c, "general.name", "one tensor of every ggml type");
    int k = 0;
    for (uint32_t t = 0; t < 256; t++) {
        if (!gguf_ggml_type_known(t))
            continue;
        uint32_t blck = gguf_ggml_blck_size(t);
        uint32_t n_dims = 1 + (uint32_t)(k % 4);
        int64_t ne[4] = {(int64_t)blck * (1 + k % 3), 3, 2, 2};
        if (n_dims == 1)
            ne[0] *= 2;
        char name[64];
        int n = snprintf(name, sizeof name, "t.%s", gguf_ggml_type_name(t));
        add_tensor(c, name, (size_t)n, t, n_dims, ne);
        k++;
    }
    write_random(c, path, 2);
    gguf_close(c);
}

/* ---- names.gguf ------------------------------------------------------- */

struct lit {
    const char *s;
    size_t n;
};
#define LIT(x) {x, sizeof x - 1}

static void fixture_names(const char *path) {
    gguf_ctx *c = new_ctx(3);
    struct pl p = {0};
    static const struct lit keys[] = {
        LIT("general.architecture"),
        LIT("a/b"), LIT("/leading.slash"), LIT("trailing.slash/"),
        LIT("a/../b"), LIT("100%"), LIT("%2F"), LIT("%"), LIT("%%"),
        LIT("%~0123456789abcdef"), LIT("."), LIT(".."), LIT("..."),
        LIT(".hidden"), LIT("trailing.dot."), LIT("with space"),
        LIT("Mixed.Case"), LIT("ctl.\x01\x02\x1f\x7f"), LIT("new\nline"),
        LIT("tab\tkey"), LIT("bad.\xff\xfe"), LIT("truncated.\xe2\x82"),
        LIT("overlong.\xc0\xaf"), LIT("surrogate.\xed\xa0\x80"),
        LIT("utf8.h\xc3\xa9llo.\xe2\x96\x81"), LIT("-dash"), LIT("*?[glob]"),
        LIT("back\\slash"), LIT("colon:key"),
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        if (i == 0)
            pl_str(&p, "names");
        else
            pl_strn(&p, keys[i].s, keys[i].n);
        setn(c, keys[i].s, keys[i].n, GGUF_TYPE_STRING, &p);
    }
    /* Long keys: 300 plain bytes (hashed file name); 255 exactly (fits);
     * 100 '%' (300 bytes once escaped). */
    char k300[300], k255[255], kpct[100];
    memcpy(k300, "long.", 5);
    memset(k300 + 5, 'k', sizeof k300 - 5);
    memset(k255, 'x', sizeof k255);
    memset(kpct, '%', sizeof kpct);
    set_u32(c, "names.count", (uint32_t)(sizeof keys / sizeof *keys + 3));
    pl_u32(&p, 300);
    setn(c, k300, sizeof k300, GGUF_TYPE_UINT32, &p);
    pl_u32(&p, 255);
    setn(c, k255, sizeof k255, GGUF_TYPE_UINT32, &p);
    pl_u32(&p, 100);
    setn(c, kpct, sizeof kpct, GGUF_TYPE_UINT32, &p);

    static const struct lit tensors[] = {
        LIT("blk.0.attn_q.weight"), LIT("a/b"), LIT("%"), LIT("%41"),
        LIT("."), LIT(".."), LIT("ctl\x01\x7f"), LIT("bad\xff"),
        LIT("with space"), LIT("new\nline"),
    };
    int64_t ne[2] = {8, 2};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        add_tensor(c, tensors[i].s, tensors[i].n, 0, 2, ne);
    char t63[63];
    memcpy(t63, "max.", 4);
    memset(t63 + 4, 'n', sizeof t63 - 4);
    add_tensor(c, t63, sizeof t63, 1, 1, ne);
    write_random(c, path, 3);
    gguf_buf_free(&p.b);
    gguf_close(c);
}

/* ---- align64, v2, empty ------------------------------------------------ */

static void fixture_align64(const char *path) {
    gguf_ctx *c = new_ctx(3);
    struct gguf_error err = {0};
    set_str(c, "general.architecture", "align64");
    check(gguf_set_alignment(c, 64, &err), &err, "setting the alignment");
    set_str(c, "general.name", "alignment 64");
    /* Sizes that are not multiples of 64, so padding shows between them. */
    int64_t a[1] = {10}, b[2] = {3, 5}, q[1] = {32}, d[3] = {7, 1, 3};
    add_tensor(c, "a", 1, 0, 1, a);   /* f32: 40 bytes */
    add_tensor(c, "b", 1, 1, 2, b);   /* f16: 30 bytes */
    add_tensor(c, "q", 1, 8, 1, q);   /* q8_0: 34 bytes */
    add_tensor(c, "d", 1, 24, 3, d);  /* i8: 21 bytes */
    write_random(c, path, 4);
    gguf_close(c);
}

static void fixture_v2(const char *path) {
    gguf_ctx *c = new_ctx(2);
    set_str(c, "general.architecture", "v2");
    set_str(c, "general.name", "version 2 file");
    set_u32(c, "v2.answer", 42);
    int64_t ne[2] = {16, 4};
    add_tensor(c, "weight", 6, 0, 2, ne);
    add_tensor(c, "bias", 4, 0, 1, ne);
    write_random(c, path, 5);
    gguf_close(c);
}

static void fixture_empty(const char *path) {
    gguf_ctx *c = new_ctx(3);
    write_out(c, path, NULL, NULL);
    gguf_close(c);
}

/* ---- vocabularies ----------------------------------------------------- */

/* Adds a llama-style tokenizer of n tokens (n >= 259): <unk> <s> </s>,
 * 256 byte tokens, then distinct generated pieces; float scores, int32
 * token types and about n*2/3 BPE merges. */
static void add_vocab(gguf_ctx *c, uint32_t n, uint64_t seed) {
    struct pl p = {0};
    struct rng r = {seed};
    if (n < 259)
        die("a vocabulary needs at least 259 tokens");

    set_str(c, "tokenizer.ggml.model", "llama");
    set_str(c, "tokenizer.ggml.pre", "default");
    pl_arr(&p, GGUF_TYPE_STRING, n);
    pl_str(&p, "<unk>");
    pl_str(&p, "<s>");
    pl_str(&p, "</s>");
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        pl_str(&p, s);
    }
    for (uint32_t i = 259; i < n; i++) {
        /* Letters of i in base 26 make every piece distinct; a leading
         * U+2581 (SentencePiece's space) on some, as real vocabs have. */
        char s[32];
        size_t len = 0;
        if (rnd(&r) % 3 == 0) {
            memcpy(s, "\xe2\x96\x81", 3);
            len = 3;
        }
        for (uint32_t v = i; len < sizeof s - 1; v /= 26) {
            s[len++] = (char)('a' + v % 26);
            if (v < 26)
                break;
        }
        pl_strn(&p, s, len);
    }
    set(c, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY, &p);

    pl_arr(&p, GGUF_TYPE_FLOAT32, n);
    for (uint32_t i = 0; i < n; i++)
        pl_f32(&p, i < 259 ? 0.0f : -(float)(i - 259));
    set(c, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY, &p);

    pl_arr(&p, GGUF_TYPE_INT32, n);
    for (uint32_t i = 0; i < n; i++)
        pl_u32(&p, i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1);
    set(c, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY, &p);

    uint32_t n_merges = n / 3 * 2;
    pl_arr(&p, GGUF_TYPE_STRING, n_merges);
    for (uint32_t i = 0; i < n_merges; i++) {
        char s[40];
        int len = snprintf(s, sizeof s, "%c%c %c%c", 'a' + (int)(i % 26),
                           'a' + (int)(i / 26 % 26), 'a' + (int)(i / 676 % 26),
                           'a' + (int)(rnd(&r) % 26));
        pl_strn(&p, s, (size_t)len);
    }
    set(c, "tokenizer.ggml.merges", GGUF_TYPE_ARRAY, &p);

    set_u32(c, "tokenizer.ggml.bos_token_id", 1);
    set_u32(c, "tokenizer.ggml.eos_token_id", 2);
    set_u32(c, "tokenizer.ggml.unknown_token_id", 0);
    set_bool(c, "tokenizer.ggml.add_bos_token", true);
    gguf_buf_free(&p.b);
}

static void fixture_vocab(const char *path) {
    gguf_ctx *c = new_ctx(3);
    set_str(c, "general.architecture", "llama");
    set_str(c, "general.name", "vocab-150k");
    set_u32(c, "llama.vocab_size", 150000);
    add_vocab(c, 150000, 6);
    write_out(c, path, NULL, NULL);
    gguf_close(c);
}

/* A SentencePiece ("llama") vocabulary made here, so that `mkfixture llama`
 * needs no real model file.  32000 unique tokens, as llama's: <unk> <s>
 * </s>, the 256 byte tokens <0x00>..<0xFF> (type 6), then normal pieces:
 * the words of tests/mount_llama.py's PROMPT at llama's ids (so the prompt
 * reads "The quick brown fox jumps"), common English pieces from id 259,
 * the single characters U+2581 and printable ASCII from id 29871 (where
 * llama keeps its single characters), and distinct made-up pieces (base-26
 * letters, some with a leading U+2581) in every slot left.  Scores fall
 * with the id, as SentencePiece's do. */
#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's space */
enum { SPM_N = 32000, SPM_FIRST = 259, SPM_CHARS = 29871, SPM_LEN = 24 };

static const struct {
    uint32_t id;
    const char *piece;
} spm_placed[] = {
    {450, SP "The"}, {4996, SP "quick"}, {17354, SP "brown"}, {1701, SP "fo"},
    {29916, "x"},    {432, SP "j"},      {17204, "umps"},
};

static const char *const spm_common[] = {
    SP SP,    SP "t",    "er",      "in",      SP "a",    "en",      "on",
    SP "th",  "es",      SP "s",    SP "d",    "at",      "or",      "an",
    SP "c",   "is",      "re",      "it",      SP "the",  "ar",      "le",
    SP "w",   SP "p",    "ou",      "al",      SP "f",    SP "m",    "ed",
    SP "o",   SP "b",    "om",      "ion",     "ing",     "ic",      "as",
    "el",     "ent",     SP "in",   SP "h",    "nd",      "et",      SP "l",
    SP "n",   "st",      SP "to",   SP "of",   SP "and",  SP "is",   SP "that",
    SP "for", SP "it",   SP "with", SP "as",   SP "was",  SP "on",   SP "be",
    SP "at",  SP "by",   SP "this", SP "from", SP "or",   SP "an",   SP "are",
    SP "not", SP "have", SP "but",  SP "we",   SP "they", SP "you",  SP "he",
    SP "she", SP "over", SP "lazy", SP "dog",  SP "fox",  SP "jump", SP "A",
    SP "I",   SP "T",    SP "S",    SP "C",    SP "1",    SP "2",    SP "(",
    ".\n",    ",",       "ly",      "ment",    "tion",    "ness",
};

struct spm {
    char (*tok)[SPM_LEN];
    int32_t *slot; /* open addressing over tok, -1 empty */
    uint32_t mask;
};

static uint32_t spm_hash(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* Puts s at id if s is not in the vocabulary yet; false if it is. */
static bool spm_put(struct spm *v, uint32_t id, const char *s) {
    uint32_t h = spm_hash(s) & v->mask;
    for (; v->slot[h] >= 0; h = (h + 1) & v->mask)
        if (!strcmp(v->tok[v->slot[h]], s))
            return false;
    if (strlen(s) >= SPM_LEN)
        die("vocabulary piece '%s' too long", s);
    strcpy(v->tok[id], s);
    v->slot[h] = (int32_t)id;
    return true;
}

static void add_llama_vocab(gguf_ctx *c) {
    struct spm v = {.mask = 65535};
    v.tok = xmalloc(SPM_N * sizeof *v.tok);
    v.slot = xmalloc((v.mask + 1) * sizeof *v.slot);
    memset(v.tok, 0, SPM_N * sizeof *v.tok);
    memset(v.slot, 0xff, (v.mask + 1) * sizeof *v.slot);

    spm_put(&v, 0, "<unk>");
    spm_put(&v, 1, "<s>");
    spm_put(&v, 2, "</s>");
    for (uint32_t b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        spm_put(&v, 3 + b, s);
    }
    for (size_t i = 0; i < sizeof spm_placed / sizeof *spm_placed; i++)
        if (!spm_put(&v, spm_placed[i].id, spm_placed[i].piece))
            die("duplicate placed piece '%s'", spm_placed[i].piece);

    /* Single characters from SPM_CHARS, skipping taken ids and pieces. */
    uint32_t id = SPM_CHARS;
    for (int ch = -1; ch < 0x7f; ch++) {
        char s[4] = SP;
        if (ch >= 0) {
            if (ch < 0x21)
                continue;
            s[0] = (char)ch;
            s[1] = 0;
        }
        while (id < SPM_N && v.tok[id][0])
            id++;
        if (id < SPM_N && spm_put(&v, id, s))
            id++;
    }

    /* The common pieces, then made-up ones, into the free ids in order. */
    struct rng r = {11};
    size_t common = 0;
    uint32_t k = 0;
    for (id = SPM_FIRST; id < SPM_N; id++) {
        if (v.tok[id][0])
            continue;
        bool ok = false;
        while (!ok && common < sizeof spm_common / sizeof *spm_common)
            ok = spm_put(&v, id, spm_common[common++]);
        while (!ok) {
            /* k's base-26 digits as letters: distinct for distinct k. */
            char s[SPM_LEN];
            size_t len = 0;
            if (rnd(&r) % 2 == 0) {
                memcpy(s, SP, 3);
                len = 3;
            }
            for (uint32_t x = k++; len < sizeof s - 1; x /= 26) {
                s[len++] = (char)('a' + x % 26);
                if (x < 26)
                    break;
            }
            s[len] = 0;
            ok = spm_put(&v, id, s);
        }
    }

    struct pl p = {0};
    set_str(c, "tokenizer.ggml.model", "llama");
    set_str(c, "tokenizer.ggml.pre", "default");
    pl_arr(&p, GGUF_TYPE_STRING, SPM_N);
    for (id = 0; id < SPM_N; id++)
        pl_str(&p, v.tok[id]);
    set(c, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_FLOAT32, SPM_N);
    for (id = 0; id < SPM_N; id++)
        pl_f32(&p, id < SPM_FIRST ? 0.0f : (float)SPM_FIRST - (float)id);
    set(c, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY, &p);
    pl_arr(&p, GGUF_TYPE_INT32, SPM_N);
    for (id = 0; id < SPM_N; id++) /* 2 unknown, 3 control, 6 byte, 1 normal */
        pl_u32(&p, id == 0 ? 2 : id < 3 ? 3 : id < SPM_FIRST ? 6 : 1);
    set(c, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY, &p);
    set_u32(c, "tokenizer.ggml.bos_token_id", 1);
    set_u32(c, "tokenizer.ggml.eos_token_id", 2);
    set_u32(c, "tokenizer.ggml.unknown_token_id", 0);
    set_bool(c, "tokenizer.ggml.add_bos_token", true);
    set_bool(c, "tokenizer.ggml.add_eos_token", false);
    gguf_buf_free(&p.b);
    free(v.slot);
    free(v.tok);
}
#undef SP

/* ---- model (benchmarks) ------------------------------------------------ */

/* One reusable buffer: gguf_write_file asks for tensor i's data and writes
 * it before asking for the next, so the buffer is refilled per call. */
struct gen {
    uint8_t *buf;
    const gguf_ctx *ctx;
    uint64_t seed;
};

static const void *gen_f16(void *u, int64_t i) {
    struct gen *g = u;
    struct rng r = {g->seed + (uint64_t)i};
    uint64_t n = gguf_tensor_size(g->ctx, i) / 2;
    for (uint64_t j = 0; j < n; j++) {
        /* Finite halves in (-1, 1): exponent at most 14. */
        uint16_t h = (uint16_t)(rnd(&r) & 0xbbff);
        g->buf[2 * j] = (uint8_t)h;
        g->buf[2 * j + 1] = (uint8_t)(h >> 8);
    }
    return g->buf;
}

static uint64_t parse_num(const char *s, const char *opt) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        die("%s wants a non-negative number, not '%s'", opt, s);
    return v;
}

static int cmd_model(int argc, char **argv) {
    const char *out = NULL;
    uint64_t mb = 0, k = 0, vocab = 0;
    bool sparse = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--tensor-mb") && i + 1 < argc)
            mb = parse_num(argv[++i], "--tensor-mb");
        else if (!strcmp(argv[i], "--n-tensors") && i + 1 < argc)
            k = parse_num(argv[++i], "--n-tensors");
        else if (!strcmp(argv[i], "--vocab") && i + 1 < argc)
            vocab = parse_num(argv[++i], "--vocab");
        else if (!strcmp(argv[i], "--sparse"))
            sparse = true;
        else if (argv[i][0] != '-' && !out)
            out = argv[i];
        else
            die("model: unexpected argument '%s'", argv[i]);
    }
    if (!out || k == 0 || k > 1000000)
        die("usage: mkfixture model OUT --tensor-mb N --n-tensors K "
            "[--vocab N] [--sparse]");
    if (vocab > 0 && (vocab < 259 || vocab > 10000000))
        die("--vocab wants 259 to 10000000 tokens");

    gguf_ctx *c = new_ctx(3);
    set_str(c, "general.architecture", "llama");
    set_str(c, "general.name", "ggufs benchmark model");
    set_u32(c, "general.file_type", 1); /* mostly f16 */
    set_u32(c, "llama.block_count", (uint32_t)k);
    set_u32(c, "llama.context_length", 4096);
    set_u32(c, "llama.embedding_length", 4096);
    set_f32(c, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (vocab)
        add_vocab(c, (uint32_t)vocab, 7);

    /* Elements per tensor: total / K halves, as rows of 4096 when large. */
    uint64_t per = mb * (UINT64_C(1) << 20) / 2 / k;
    if (per == 0)
        per = 1;
    uint64_t max_size = 0;
    for (uint64_t i = 0; i < k; i++) {
        char name[64];
        int n = snprintf(name, sizeof name, "blk.%llu.weight", (unsigned long long)i);
        int64_t ne[2];
        uint32_t n_dims = 1;
        if (per >= 4096) {
            ne[0] = 4096;
            ne[1] = (int64_t)(per / 4096);
            n_dims = 2;
        } else {
            ne[0] = (int64_t)per;
        }
        add_tensor(c, name, (size_t)n, 1, n_dims, ne);
        uint64_t sz = gguf_tensor_size(c, gguf_n_tensors(c) - 1);
        if (sz > max_size)
            max_size = sz;
    }
    struct gen g = {.ctx = c, .seed = 8};
    if (!sparse) {
        if (max_size > SIZE_MAX)
            die("tensors too large for memory; use --sparse");
        g.buf = xmalloc((size_t)max_size);
    }
    write_out(c, out, sparse ? NULL : gen_f16, &g);
    free(g.buf);
    gguf_close(c);
    return 0;
}

/* ---- llama (a model llama.cpp loads) ----------------------------------- */

static int cmd_llama(int argc, char **argv) {
    const char *out = NULL, *from = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab-from") && i + 1 < argc)
            from = argv[++i];
        else if (argv[i][0] != '-' && !out)
            out = argv[i];
        else
            die("llama: unexpected argument '%s'", argv[i]);
    }
    if (!out)
        die("usage: mkfixture llama OUT [--vocab-from FILE.gguf]");

    /* --vocab-from: FILE's tokenizer.* keys, copied; else add_llama_vocab. */
    gguf_ctx *src = NULL;
    uint64_t n_vocab = SPM_N;
    if (from) {
        struct gguf_error err = {0};
        check(gguf_open(&src, from, 0, &err), &err, from);
        int64_t tok = gguf_find_key(src, "tokenizer.ggml.tokens", 21);
        if (tok < 0 || gguf_kv_type(src, tok) != GGUF_TYPE_ARRAY ||
            gguf_kv_arr_type(src, tok) != GGUF_TYPE_STRING)
            die("%s has no tokenizer.ggml.tokens string array", from);
        n_vocab = gguf_kv_arr_n(src, tok);
        if (n_vocab == 0 || n_vocab > 1000000)
            die("%s: %llu tokens; 1 to 1000000 supported", from,
                (unsigned long long)n_vocab);
    }

    /* Dimensions as small as llama.cpp accepts comfortably; GQA (2 KV
     * heads for 4) so that path is exercised too. */
    const uint32_t n_embd = 64, n_ff = 128, n_layer = 2, n_head = 4,
                   n_head_kv = 2, head_dim = 64 / 4;
    gguf_ctx *c = new_ctx(3);
    set_str(c, "general.architecture", "llama");
    set_str(c, "general.name", "ggufs tiny llama");
    set_u32(c, "llama.block_count", n_layer);
    set_u32(c, "llama.context_length", 256);
    set_u32(c, "llama.embedding_length", n_embd);
    set_u32(c, "llama.feed_forward_length", n_ff);
    set_u32(c, "llama.attention.head_count", n_head);
    set_u32(c, "llama.attention.head_count_kv", n_head_kv);
    set_u32(c, "llama.rope.dimension_count", head_dim);
    set_f32(c, "llama.rope.freq_base", 10000.0f);
    set_f32(c, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    set_u32(c, "general.file_type", 0); /* all f32 */
    set_u32(c, "llama.vocab_size", (uint32_t)n_vocab);
    if (!src)
        add_llama_vocab(c);
    for (int64_t i = 0; src && i < gguf_n_kv(src); i++) {
        size_t klen, plen;
        const char *k = gguf_kv_key(src, i, &klen);
        if (klen < 10 || memcmp(k, "tokenizer.", 10) != 0)
            continue;
        const uint8_t *pl = gguf_kv_payload(src, i, &plen);
        struct gguf_error e2 = {0};
        check(gguf_set_payload(c, k, klen, gguf_kv_type(src, i), pl, plen, &e2),
              &e2, "copying a tokenizer key");
    }

    int64_t emb[2] = {n_embd, (int64_t)n_vocab}, norm[1] = {n_embd},
            q[2] = {n_embd, n_embd}, kv[2] = {n_embd, head_dim * n_head_kv},
            up[2] = {n_embd, n_ff}, down[2] = {n_ff, n_embd};
    add_tensor(c, "token_embd.weight", 17, 0, 2, emb);
    for (uint32_t l = 0; l < n_layer; l++) {
        static const struct {
            const char *name;
            int shape; /* 0 norm, 1 q, 2 kv, 3 up, 4 down */
        } parts[] = {
            {"attn_norm", 0}, {"ffn_norm", 0}, {"attn_q", 1}, {"attn_k", 2},
            {"attn_v", 2}, {"attn_output", 1}, {"ffn_gate", 3}, {"ffn_up", 3},
            {"ffn_down", 4},
        };
        for (size_t j = 0; j < sizeof parts / sizeof *parts; j++) {
            const int64_t *shape[] = {norm, q, kv, up, down};
            char name[64];
            int n = snprintf(name, sizeof name, "blk.%u.%s.weight", l, parts[j].name);
            add_tensor(c, name, (size_t)n, 0, parts[j].shape ? 2 : 1,
                       shape[parts[j].shape]);
        }
    }
    add_tensor(c, "output_norm.weight", 18, 0, 1, norm);
    add_tensor(c, "output.weight", 13, 0, 2, emb);

    /* Weights: norms 1, matrices uniform in +-1/sqrt(fan_in) (keeps
     * activations finite), embeddings +-0.5. */
    struct tdata d = {.n = gguf_n_tensors(c)};
    struct rng r = {9};
    d.p = xmalloc((size_t)d.n * sizeof *d.p);
    for (int64_t i = 0; i < d.n; i++) {
        uint64_t nel = gguf_tensor_size(c, i) / 4;
        const int64_t *ne = gguf_tensor_ne(c, i);
        size_t nlen;
        const char *name = gguf_tensor_name(c, i, &nlen);
        float *w = xmalloc((size_t)nel * 4);
        bool is_norm = strstr(name, "norm") != NULL;
        float scale = !strcmp(name, "token_embd.weight") ? 0.5f
                                                         : 1.0f / sqrtf((float)ne[0]);
        for (uint64_t j = 0; j < nel; j++)
            w[j] = is_norm ? 1.0f : rndf(&r) * scale;
        d.p[i] = (uint8_t *)w;
    }
    write_out(c, out, tdata_get, &d);
    tdata_free(&d);
    gguf_close(c);
    if (src)
        gguf_close(src);
    return 0;
}

/* ---- dequant.gguf (issue 15) ------------------------------------------ */

/* Types ggml has and ggufs's table does not (ggml 0.5: nvfp4, q1_0, q2_0):
 * id, elements and bytes per block.  The writer refuses unknown ids, so
 * each is written as an i8 tensor of the same bytes and its info patched
 * afterwards (type id and ne[0]; the header keeps its length).  Two
 * rows of `row` bytes: q1_0's 108 bytes are padded to 128, so the size
 * ggufs reads from the next tensor's offset is not the blocks' own. */
static const struct {
    const char *name;
    uint32_t id, blck, size, row;
} newer_types[] = {{"nvfp4", 40, 64, 36, 288}, {"q1_0", 41, 128, 18, 54},
                   {"q2_0", 42, 64, 18, 288}};

static void patch_info(const char *path, const char *name, uint32_t type,
                       int64_t ne0) {
    FILE *f = fopen(path, "r+b");
    if (!f)
        die("cannot open %s: %s", path, strerror(errno));
    static uint8_t head[1 << 16];
    size_t n = fread(head, 1, sizeof head, f);
    size_t nl = strlen(name);
    for (size_t i = 8; i + nl + 4 + 16 + 4 <= n; i++) {
        uint64_t len;
        memcpy(&len, head + i - 8, 8);
        if (len != nl || memcmp(head + i, name, nl) != 0)
            continue;
        uint32_t nd;
        memcpy(&nd, head + i + nl, 4);
        size_t at = i + nl + 4;
        memcpy(head + at, &ne0, 8);
        memcpy(head + at + 8 * nd, &type, 4);
        if (fseek(f, 0, SEEK_SET) != 0 || fwrite(head, 1, n, f) != n ||
            fclose(f) != 0)
            die("cannot write %s", path);
        return;
    }
    die("%s: tensor %s not found to patch", path, name);
}

/* One tensor of every type ggml converts or ggufs knows, several blocks
 * per row and several rows (reads at each block boundary mean something),
 * 1 to 4 dimensions; then the newer types; an f32 tensor last. */
static void fixture_dequant(const char *path) {
    gguf_ctx *c = new_ctx(3);
    set_str(c, "general.architecture", "dequant");
    set_str(c, "general.name", "every tensor type, several blocks");
    int k = 0;
    for (uint32_t t = 0; t < 256; t++) {
        if (!gguf_ggml_type_known(t))
            continue;
        uint32_t blck = gguf_ggml_blck_size(t);
        uint32_t n_dims = 1 + (uint32_t)(k % 4);
        int64_t ne[4] = {(int64_t)blck * (blck == 1 ? 37 : 3 + k % 4), 3, 2, 2};
        char name[64];
        int n = snprintf(name, sizeof name, "d.%s", gguf_ggml_type_name(t));
        add_tensor(c, name, (size_t)n, t, n_dims, ne);
        k++;
    }
    for (size_t i = 0; i < sizeof newer_types / sizeof *newer_types; i++) {
        char name[64];
        int n = snprintf(name, sizeof name, "d.%s", newer_types[i].name);
        int64_t ne[2] = {newer_types[i].row, 2};
        add_tensor(c, name, (size_t)n, 24 /* i8 */, 2, ne);
    }
    /* Large enough that a read is split over the daemon's threads. */
    static const uint32_t big[] = {8 /* q8_0 */, 12 /* q4_K */, 1 /* f16 */};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++) {
        char name[64];
        int n = snprintf(name, sizeof name, "d.big.%s",
                         gguf_ggml_type_name(big[i]));
        int64_t ne[2] = {4096, 256};
        add_tensor(c, name, (size_t)n, big[i], 2, ne);
    }
    int64_t last[1] = {8};
    add_tensor(c, "d.last", 6, 0, 1, last);
    write_random(c, path, 15);
    gguf_close(c);
    for (size_t i = 0; i < sizeof newer_types / sizeof *newer_types; i++) {
        char name[64];
        snprintf(name, sizeof name, "d.%s", newer_types[i].name);
        patch_info(path, name, newer_types[i].id,
                   newer_types[i].row / newer_types[i].size *
                       newer_types[i].blck);
    }
}

/* The f32/ view benchmark's model (bench/run, group views): one tensor
 * of q8_0, q4_K, q6_K, iq4_xs, f16 and f32 (no conversion: what FUSE
 * alone costs), mega Mi elements each (rows of 4096), random bytes. */
static void fixture_quants(const char *path, uint64_t mega) {
    static const uint32_t types[] = {8, 12, 14, 23, 1, 0};
    gguf_ctx *c = new_ctx(3);
    set_str(c, "general.architecture", "quants");
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        char name[64];
        int n = snprintf(name, sizeof name, "w.%s",
                         gguf_ggml_type_name(types[i]));
        int64_t ne[2] = {4096, (int64_t)(mega * 256)};
        add_tensor(c, name, (size_t)n, types[i], 2, ne);
    }
    write_random(c, path, 16);
    gguf_close(c);
}

/* ---- main -------------------------------------------------------------- */

static const struct {
    const char *name;
    void (*make)(const char *path);
} fixtures[] = {
    {"types", fixture_types},     {"tensors", fixture_tensors},
    {"names", fixture_names},     {"align64", fixture_align64},
    {"v2", fixture_v2},           {"empty", fixture_empty},
    {"vocab", fixture_vocab},
};

static void usage(void) {
    fprintf(stderr,
            "usage: mkfixture all DIR\n"
            "       mkfixture {types|tensors|names|align64|v2|empty|vocab} OUT\n"
            "       mkfixture model OUT --tensor-mb N --n-tensors K [--vocab N] [--sparse]\n"
            "       mkfixture llama OUT [--vocab-from FILE.gguf]\n"
            "       mkfixture dequant OUT    every tensor type, newer ggml ids too\n"
            "       mkfixture quants OUT --mega N   6 tensors (q8_0 ... f32), N Mi values each\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 3)
        usage();
    if (!strcmp(argv[1], "model"))
        return cmd_model(argc - 2, argv + 2);
    if (!strcmp(argv[1], "llama"))
        return cmd_llama(argc - 2, argv + 2);
    if (!strcmp(argv[1], "quants") && argc == 5 &&
        !strcmp(argv[3], "--mega")) {
        fixture_quants(argv[2], parse_num(argv[4], "--mega"));
        return 0;
    }
    if (!strcmp(argv[1], "dequant") && argc == 3) {
        fixture_dequant(argv[2]);
        return 0;
    }
    if (!strcmp(argv[1], "all")) {
        if (argc != 3)
            usage();
        if (mkdir(argv[2], 0755) < 0 && errno != EEXIST)
            die("cannot create %s: %s", argv[2], strerror(errno));
        for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
            char *path;
            if (asprintf(&path, "%s/%s.gguf", argv[2], fixtures[i].name) < 0)
                die("out of memory");
            fixtures[i].make(path);
            free(path);
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
        if (!strcmp(argv[1], fixtures[i].name)) {
            if (argc != 3)
                usage();
            fixtures[i].make(argv[2]);
            return 0;
        }
    }
    usage();
}
