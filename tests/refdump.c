/*
 * refdump - the reference side of the mount tests.
 *
 *   refdump FILE
 *
 * Loads ggml's own GGUF reader (libggml-base.so, dlopened; this program does
 * NOT use ggufs' gguf/ library) and prints what ggml reads from FILE, with
 * every metadata value rendered in the ggufs meta-file text format by an
 * implementation of that format that is independent of gguf/text.c.
 *
 * Library: $GGUFS_GGML_LIB, else
 *   $GGUFS_SRCDIR/.deps/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so
 * Missing library: message on stderr, exit 77 (meson's "skip").
 * ggml refuses FILE: prints "rejected" on stdout, exit 1.
 * Other failures: exit 2.
 *
 * Output (one record per line, fields separated by one space, byte strings
 * as lower-case hex, "-" for an empty byte string):
 *
 *   refdump 1
 *   version V
 *   alignment A
 *   data_offset D
 *   n_kv N
 *   n_tensors M
 *   kv KEYHEX TYPE KIND CONTENTHEX BITS     (N times, in file order)
 *   tensor NAMEHEX GGMLTYPE NE0,NE1,NE2,NE3 OFFSET SIZE   (M times)
 *   end
 *
 * KEYHEX/NAMEHEX are the bytes ggml returns as C strings (ggml's C API cuts
 * a name at its first NUL byte; the Python side checks that against the
 * file).  TYPE is the user-visible type ("uint32", "string",
 * "array[string]").  KIND is "bytes" when CONTENTHEX must match the meta
 * file byte for byte, or "f32"/"f64" when the value is floating point: then
 * BITS lists the IEEE bit pattern of every element (comma-separated hex,
 * "-" if none) and the comparer checks each line numerically, bit for bit;
 * CONTENTHEX is then our own shortest rendering, used for the "shortest
 * decimal" check.  For KIND "bytes", BITS is "-".
 * NE are ggml's four dimensions (missing ones are 1); OFFSET is absolute
 * (gguf_get_data_offset + gguf_get_tensor_offset); SIZE is
 * gguf_get_tensor_size.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- ggml's ABI (from ggml/include/gguf.h and ggml.h) ---------------- */

enum ref_gguf_type {
    T_UINT8 = 0, T_INT8 = 1, T_UINT16 = 2, T_INT16 = 3, T_UINT32 = 4,
    T_INT32 = 5, T_FLOAT32 = 6, T_BOOL = 7, T_STRING = 8, T_ARRAY = 9,
    T_UINT64 = 10, T_INT64 = 11, T_FLOAT64 = 12, T_COUNT
};

struct ggml_context;
struct gguf_context;

/* Passed by value, exactly as ggml declares it. */
struct gguf_init_params {
    bool no_alloc;
    struct ggml_context **ctx;
};

typedef const struct gguf_context gc;

static struct {
    struct gguf_context *(*init_from_file)(const char *, struct gguf_init_params);
    void (*free_)(struct gguf_context *);
    uint32_t (*get_version)(gc *);
    size_t (*get_alignment)(gc *);
    size_t (*get_data_offset)(gc *);
    int64_t (*get_n_kv)(gc *);
    const char *(*get_key)(gc *, int64_t);
    enum ref_gguf_type (*get_kv_type)(gc *, int64_t);
    enum ref_gguf_type (*get_arr_type)(gc *, int64_t);
    uint8_t (*get_val_u8)(gc *, int64_t);
    int8_t (*get_val_i8)(gc *, int64_t);
    uint16_t (*get_val_u16)(gc *, int64_t);
    int16_t (*get_val_i16)(gc *, int64_t);
    uint32_t (*get_val_u32)(gc *, int64_t);
    int32_t (*get_val_i32)(gc *, int64_t);
    float (*get_val_f32)(gc *, int64_t);
    uint64_t (*get_val_u64)(gc *, int64_t);
    int64_t (*get_val_i64)(gc *, int64_t);
    double (*get_val_f64)(gc *, int64_t);
    bool (*get_val_bool)(gc *, int64_t);
    const char *(*get_val_str)(gc *, int64_t);
    const void *(*get_val_data)(gc *, int64_t);
    size_t (*get_arr_n)(gc *, int64_t);
    const void *(*get_arr_data)(gc *, int64_t);
    const char *(*get_arr_str)(gc *, int64_t, size_t);
    int64_t (*get_n_tensors)(gc *);
    const char *(*get_tensor_name)(gc *, int64_t);
    int (*get_tensor_type)(gc *, int64_t); /* enum ggml_type */
    size_t (*get_tensor_offset)(gc *, int64_t);
    size_t (*get_tensor_size)(gc *, int64_t);
    const int64_t *(*get_tensor_ne)(gc *, int64_t);
    const char *(*type_name)(int);   /* ggml_type_name */
    int64_t (*blck_size)(int);       /* ggml_blck_size */
    size_t (*type_size)(int);        /* ggml_type_size */
} G;

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "refdump: %s not found in ggml: %s\n", name, dlerror());
        exit(2);
    }
    return p;
}

#define LOAD(field, name) (*(void **)&G.field = sym(h, name))

static void load_ggml(void)
{
    const char *lib = getenv("GGUFS_GGML_LIB");
    char buf[4096];
    if (!lib || !*lib) {
        const char *src = getenv("GGUFS_SRCDIR");
        if (!src || !*src) {
            fprintf(stderr, "refdump: neither GGUFS_GGML_LIB nor GGUFS_SRCDIR "
                            "is set; cannot find libggml-base.so\n");
            exit(77);
        }
        snprintf(buf, sizeof buf,
                 "%s/.deps/node_modules/@node-llama-cpp/linux-x64/bins/"
                 "linux-x64/libggml-base.so", src);
        lib = buf;
    }
    FILE *probe = fopen(lib, "rb");
    if (!probe) {
        fprintf(stderr, "refdump: ggml library %s is missing (skipping): %m\n", lib);
        exit(77);
    }
    fclose(probe);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "refdump: cannot load %s (skipping): %s\n", lib, dlerror());
        exit(77);
    }
    LOAD(init_from_file, "gguf_init_from_file");
    LOAD(free_, "gguf_free");
    LOAD(get_version, "gguf_get_version");
    LOAD(get_alignment, "gguf_get_alignment");
    LOAD(get_data_offset, "gguf_get_data_offset");
    LOAD(get_n_kv, "gguf_get_n_kv");
    LOAD(get_key, "gguf_get_key");
    LOAD(get_kv_type, "gguf_get_kv_type");
    LOAD(get_arr_type, "gguf_get_arr_type");
    LOAD(get_val_u8, "gguf_get_val_u8");
    LOAD(get_val_i8, "gguf_get_val_i8");
    LOAD(get_val_u16, "gguf_get_val_u16");
    LOAD(get_val_i16, "gguf_get_val_i16");
    LOAD(get_val_u32, "gguf_get_val_u32");
    LOAD(get_val_i32, "gguf_get_val_i32");
    LOAD(get_val_f32, "gguf_get_val_f32");
    LOAD(get_val_u64, "gguf_get_val_u64");
    LOAD(get_val_i64, "gguf_get_val_i64");
    LOAD(get_val_f64, "gguf_get_val_f64");
    LOAD(get_val_bool, "gguf_get_val_bool");
    LOAD(get_val_str, "gguf_get_val_str");
    LOAD(get_val_data, "gguf_get_val_data");
    LOAD(get_arr_n, "gguf_get_arr_n");
    LOAD(get_arr_data, "gguf_get_arr_data");
    LOAD(get_arr_str, "gguf_get_arr_str");
    LOAD(get_n_tensors, "gguf_get_n_tensors");
    LOAD(get_tensor_name, "gguf_get_tensor_name");
    LOAD(get_tensor_type, "gguf_get_tensor_type");
    LOAD(get_tensor_offset, "gguf_get_tensor_offset");
    LOAD(get_tensor_size, "gguf_get_tensor_size");
    LOAD(get_tensor_ne, "gguf_get_tensor_ne");
    LOAD(type_name, "ggml_type_name");
    LOAD(blck_size, "ggml_blck_size");
    LOAD(type_size, "ggml_type_size");
}

/* ---- output buffer ----------------------------------------------------- */

struct sbuf {
    char *p;
    size_t len, cap;
};

static void sb_add(struct sbuf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p) {
            fprintf(stderr, "refdump: out of memory\n");
            exit(2);
        }
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void sb_str(struct sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_fmt(struct sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_fmt(struct sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        fprintf(stderr, "refdump: internal format overflow\n");
        exit(2);
    }
    sb_add(b, tmp, (size_t)n);
}

static void put_hex(const void *p, size_t n)
{
    static const char hx[] = "0123456789abcdef";
    const uint8_t *s = p;
    if (n == 0) {
        fputc('-', stdout);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        fputc(hx[s[i] >> 4], stdout);
        fputc(hx[s[i] & 15], stdout);
    }
}

/* ---- the text format, written from the contract in gguf/gguf.h -------- */

/* Length of the valid UTF-8 sequence starting at s[0] (RFC 3629: no
 * overlongs, no surrogates, nothing above U+10FFFF), or 0 if none. */
static size_t utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < len)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

/* One string array element as one line (no newline appended). */
static void escape_elem(struct sbuf *b, const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c == '\\') {
            sb_str(b, "\\\\");
            i++;
        } else if (c == '\n') {
            sb_str(b, "\\n");
            i++;
        } else if (c == '\r') {
            sb_str(b, "\\r");
            i++;
        } else if (c == '\t') {
            sb_str(b, "\\t");
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            sb_fmt(b, "\\x%02x", c);
            i++;
        } else {
            size_t l = utf8_seq(s + i, n - i);
            if (l == 0) {
                sb_fmt(b, "\\x%02x", c);
                i++;
            } else {
                sb_add(b, s + i, l);
                i += l;
            }
        }
    }
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* Shortest "%.Ng" that strtof reads back to the same bits. */
static void render_f32(struct sbuf *b, float f)
{
    uint32_t u = f32_bits(f);
    if (isnan(f)) {
        uint32_t m = u & 0x7fffffu;
        const char *sign = (u >> 31) ? "-" : "";
        if (m == 0x400000u)
            sb_fmt(b, "%snan", sign);
        else
            sb_fmt(b, "%snan(0x%" PRIx32 ")", sign, m);
        return;
    }
    if (isinf(f)) {
        sb_str(b, f < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[64];
    for (int p = 1; p <= 9; p++) {
        snprintf(tmp, sizeof tmp, "%.*g", p, (double)f);
        float back = strtof(tmp, NULL);
        if (f32_bits(back) == u)
            break;
    }
    sb_str(b, tmp);
}

static void render_f64(struct sbuf *b, double d)
{
    uint64_t u = f64_bits(d);
    if (isnan(d)) {
        uint64_t m = u & UINT64_C(0xfffffffffffff);
        const char *sign = (u >> 63) ? "-" : "";
        if (m == UINT64_C(0x8000000000000))
            sb_fmt(b, "%snan", sign);
        else
            sb_fmt(b, "%snan(0x%" PRIx64 ")", sign, m);
        return;
    }
    if (isinf(d)) {
        sb_str(b, d < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*g", p, d);
        double back = strtod(tmp, NULL);
        if (f64_bits(back) == u)
            break;
    }
    sb_str(b, tmp);
}

static const char *type_str(enum ref_gguf_type t)
{
    static const char *const names[] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool", "string", "array", "uint64", "int64", "float64",
    };
    if ((unsigned)t >= T_COUNT)
        return NULL;
    return names[t];
}

/* Renders element j of a scalar array (raw element bytes at p). */
static void render_scalar_raw(struct sbuf *b, struct sbuf *bits,
                              enum ref_gguf_type t, const uint8_t *p)
{
    switch (t) {
    case T_UINT8: { uint8_t v; memcpy(&v, p, 1); sb_fmt(b, "%" PRIu8, v); break; }
    case T_INT8: { int8_t v; memcpy(&v, p, 1); sb_fmt(b, "%" PRId8, v); break; }
    case T_UINT16: { uint16_t v; memcpy(&v, p, 2); sb_fmt(b, "%" PRIu16, v); break; }
    case T_INT16: { int16_t v; memcpy(&v, p, 2); sb_fmt(b, "%" PRId16, v); break; }
    case T_UINT32: { uint32_t v; memcpy(&v, p, 4); sb_fmt(b, "%" PRIu32, v); break; }
    case T_INT32: { int32_t v; memcpy(&v, p, 4); sb_fmt(b, "%" PRId32, v); break; }
    case T_UINT64: { uint64_t v; memcpy(&v, p, 8); sb_fmt(b, "%" PRIu64, v); break; }
    case T_INT64: { int64_t v; memcpy(&v, p, 8); sb_fmt(b, "%" PRId64, v); break; }
    case T_BOOL: {
        uint8_t v = p[0];
        if (v == 0)
            sb_str(b, "false");
        else if (v == 1)
            sb_str(b, "true");
        else /* ggml keeps the raw byte; no valid rendering exists */
            sb_fmt(b, "?bool-byte-%u?", v);
        break;
    }
    case T_FLOAT32: {
        float v;
        memcpy(&v, p, 4);
        render_f32(b, v);
        sb_fmt(bits, "%s%08" PRIx32, bits->len ? "," : "", f32_bits(v));
        break;
    }
    case T_FLOAT64: {
        double v;
        memcpy(&v, p, 8);
        render_f64(b, v);
        sb_fmt(bits, "%s%016" PRIx64, bits->len ? "," : "", f64_bits(v));
        break;
    }
    default:
        fprintf(stderr, "refdump: unexpected scalar type %d\n", (int)t);
        exit(2);
    }
    sb_str(b, "\n");
}

static size_t scalar_size(enum ref_gguf_type t)
{
    switch (t) {
    case T_UINT8: case T_INT8: case T_BOOL: return 1;
    case T_UINT16: case T_INT16: return 2;
    case T_UINT32: case T_INT32: case T_FLOAT32: return 4;
    case T_UINT64: case T_INT64: case T_FLOAT64: return 8;
    default: return 0;
    }
}

/* Scalars through ggml's typed getters (the raw-byte path above is only for
 * array elements, which ggml hands out as a raw array). */
static void render_scalar(struct sbuf *b, struct sbuf *bits,
                          const struct gguf_context *ctx, int64_t i,
                          enum ref_gguf_type t)
{
    uint8_t raw[8];
    switch (t) {
    case T_UINT8: { uint8_t v = G.get_val_u8(ctx, i); memcpy(raw, &v, 1); break; }
    case T_INT8: { int8_t v = G.get_val_i8(ctx, i); memcpy(raw, &v, 1); break; }
    case T_UINT16: { uint16_t v = G.get_val_u16(ctx, i); memcpy(raw, &v, 2); break; }
    case T_INT16: { int16_t v = G.get_val_i16(ctx, i); memcpy(raw, &v, 2); break; }
    case T_UINT32: { uint32_t v = G.get_val_u32(ctx, i); memcpy(raw, &v, 4); break; }
    case T_INT32: { int32_t v = G.get_val_i32(ctx, i); memcpy(raw, &v, 4); break; }
    case T_UINT64: { uint64_t v = G.get_val_u64(ctx, i); memcpy(raw, &v, 8); break; }
    case T_INT64: { int64_t v = G.get_val_i64(ctx, i); memcpy(raw, &v, 8); break; }
    case T_FLOAT32: { float v = G.get_val_f32(ctx, i); memcpy(raw, &v, 4); break; }
    case T_FLOAT64: { double v = G.get_val_f64(ctx, i); memcpy(raw, &v, 8); break; }
    case T_BOOL: {
        /* gguf_get_val_bool would convert a stray byte value through
         * C++ bool (undefined); take the stored byte instead. */
        const uint8_t *p = G.get_val_data(ctx, i);
        raw[0] = p[0];
        break;
    }
    default:
        fprintf(stderr, "refdump: unexpected scalar type %d\n", (int)t);
        exit(2);
    }
    render_scalar_raw(b, bits, t, raw);
}

static void dump_kv(const struct gguf_context *ctx, int64_t i)
{
    const char *key = G.get_key(ctx, i);
    enum ref_gguf_type t = G.get_kv_type(ctx, i);
    struct sbuf content = {0}, bits = {0};
    char tstr[48];
    const char *kind = "bytes";

    if (!type_str(t)) {
        fprintf(stderr, "refdump: key %s has unknown type %d\n", key, (int)t);
        exit(2);
    }
    if (t == T_STRING) {
        const char *s = G.get_val_str(ctx, i);
        sb_str(&content, s);
        sb_str(&content, "\n");
        snprintf(tstr, sizeof tstr, "string");
    } else if (t == T_ARRAY) {
        enum ref_gguf_type at = G.get_arr_type(ctx, i);
        size_t n = G.get_arr_n(ctx, i);
        if (!type_str(at)) {
            fprintf(stderr, "refdump: key %s: unknown array type %d\n", key, (int)at);
            exit(2);
        }
        snprintf(tstr, sizeof tstr, "array[%s]", type_str(at));
        if (at == T_STRING) {
            for (size_t j = 0; j < n; j++) {
                const char *s = G.get_arr_str(ctx, i, j);
                escape_elem(&content, (const uint8_t *)s, strlen(s));
                sb_str(&content, "\n");
            }
        } else if (at == T_ARRAY) {
            /* ggml refuses arrays of arrays; should not happen */
            fprintf(stderr, "refdump: key %s: ggml returned an array of arrays\n", key);
            exit(2);
        } else {
            const uint8_t *p = n ? G.get_arr_data(ctx, i) : NULL;
            size_t es = scalar_size(at);
            for (size_t j = 0; j < n; j++)
                render_scalar_raw(&content, &bits, at, p + j * es);
            if (at == T_FLOAT32)
                kind = "f32";
            else if (at == T_FLOAT64)
                kind = "f64";
        }
    } else {
        snprintf(tstr, sizeof tstr, "%s", type_str(t));
        render_scalar(&content, &bits, ctx, i, t);
        if (t == T_FLOAT32)
            kind = "f32";
        else if (t == T_FLOAT64)
            kind = "f64";
    }

    fputs("kv ", stdout);
    put_hex(key, strlen(key));
    printf(" %s %s ", tstr, kind);
    put_hex(content.p, content.len);
    printf(" %s\n", bits.len ? bits.p : "-");
    free(content.p);
    free(bits.p);
}

static void dump_tensor(const struct gguf_context *ctx, int64_t i, size_t data_off)
{
    const char *name = G.get_tensor_name(ctx, i);
    int type = G.get_tensor_type(ctx, i);
    const int64_t *ne = G.get_tensor_ne(ctx, i);
    size_t off = G.get_tensor_offset(ctx, i);
    size_t size = G.get_tensor_size(ctx, i);
    const char *tname = G.type_name(type);

    /* Guard against an ABI mismatch with this build of ggml: the size must
     * follow from the shape and the type's block geometry. */
    int64_t blck = G.blck_size(type);
    size_t tsz = G.type_size(type);
    if (blck <= 0 || ne[0] % blck != 0 ||
        (uint64_t)(ne[0] / blck) * tsz * (uint64_t)ne[1] * (uint64_t)ne[2] *
                (uint64_t)ne[3] != size) {
        fprintf(stderr, "refdump: tensor %s: ggml size %zu does not follow from "
                        "its shape [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
                        "] and type %d; ABI mismatch?\n",
                name, size, ne[0], ne[1], ne[2], ne[3], type);
        exit(2);
    }
    fputs("tensor ", stdout);
    put_hex(name, strlen(name));
    printf(" %s %" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 " %zu %zu\n",
           tname ? tname : "?", ne[0], ne[1], ne[2], ne[3], data_off + off, size);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: refdump FILE\n");
        return 2;
    }
    load_ggml();
    struct gguf_init_params params = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *ctx = G.init_from_file(argv[1], params);
    if (!ctx) {
        printf("rejected\n");
        fflush(stdout);
        return 1;
    }
    size_t data_off = G.get_data_offset(ctx);
    int64_t n_kv = G.get_n_kv(ctx), n_t = G.get_n_tensors(ctx);
    printf("refdump 1\n");
    printf("version %" PRIu32 "\n", G.get_version(ctx));
    printf("alignment %zu\n", G.get_alignment(ctx));
    printf("data_offset %zu\n", data_off);
    printf("n_kv %" PRId64 "\n", n_kv);
    printf("n_tensors %" PRId64 "\n", n_t);
    for (int64_t i = 0; i < n_kv; i++)
        dump_kv(ctx, i);
    for (int64_t i = 0; i < n_t; i++)
        dump_tensor(ctx, i, data_off);
    printf("end\n");
    G.free_(ctx);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("refdump: stdout");
        return 2;
    }
    return 0;
}
