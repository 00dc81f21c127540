/*
 * mkseeds OUT [FILE.gguf...] - the seed corpus of the fuzz targets, made by
 * the project's own code.
 *
 *   OUT/header/  (fuzz_header) every case of the corrupt-file table
 *                (tests/corrupt_cases.c), a few handcrafted files the table
 *                lacks (arrays of arrays, a filler KV in the middle, non-zero
 *                padding, unknown tensor types), and every FILE given (the
 *                fixtures of `mkfixture all` and real models): as it is when
 *                it is at most 64 KiB, else shrunk with the library (long
 *                arrays cut to 8 elements through the text codec, strings to
 *                256 bytes, tensors to one block) so that libFuzzer runs fast;
 *   OUT/text/    (fuzz_text) byte 0 = type + 13 * element type, then text:
 *                the rendering of every value of every FILE (arrays cut to
 *                16 lines, at most 2 KiB), and handwritten samples of every
 *                type, escapes, bracketed arrays and names.
 *
 * File names are the FNV-1a hash of the content, so equal seeds collapse.
 * Exit 0, or 1 with a message.
 */
#include "craft.h"
#include "gguf.h"
#include "internal.h" /* gguf_set_alignment */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SHRINK_ABOVE 65536
#define TEXT_MAX 2048

static const char *out_dir;
static unsigned long n_header, n_text;

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "mkseeds: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void put(const char *sub, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%016llx", out_dir, sub,
             (unsigned long long)gguf_hash(p, n));
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0)
        die("cannot write %s: %s", path, strerror(errno));
    if (!strcmp(sub, "header"))
        n_header++;
    else
        n_text++;
}

static void put_text(enum gguf_type t, enum gguf_type at, const char *s, size_t n)
{
    uint8_t *b = malloc(n + 1);
    if (!b)
        die("out of memory");
    b[0] = (uint8_t)((unsigned)t + GGUF_TYPE_COUNT * (unsigned)at);
    if (n)
        memcpy(b + 1, s, n);
    put("text", b, n + 1);
    free(b);
}

/* ---- text seeds from a file's values ------------------------------------ */

static void text_from(const gguf_ctx *ctx)
{
    for (int64_t i = 0; i < gguf_n_kv(ctx); i++) {
        enum gguf_type t = gguf_kv_type(ctx, i);
        enum gguf_type at = t == GGUF_TYPE_ARRAY ? gguf_kv_arr_type(ctx, i) : 0;
        size_t plen;
        const uint8_t *p = gguf_kv_payload(ctx, i, &plen);
        struct gguf_buf txt = {0};
        struct gguf_error err = {0};
        if (gguf_render(t, p, plen, &txt, &err) != GGUF_OK)
            die("a value of an accepted file does not render: %s", err.msg);
        size_t n = txt.len, lines = 0;
        if (t == GGUF_TYPE_ARRAY) {
            for (size_t j = 0; j < txt.len; j++)
                if (txt.p[j] == '\n' && ++lines == 16) {
                    n = j + 1;
                    break;
                }
        }
        if (n > TEXT_MAX) {
            n = TEXT_MAX;
            if (t == GGUF_TYPE_ARRAY) { /* keep whole lines */
                while (n > 0 && txt.p[n - 1] != '\n')
                    n--;
            }
        }
        put_text(t, at, (const char *)txt.p, n);
        gguf_buf_free(&txt);
    }
    for (int64_t i = 0; i < gguf_n_tensors(ctx) && i < 64; i++) {
        size_t n;
        const char *s = gguf_tensor_name(ctx, i, &n);
        put_text(GGUF_TYPE_STRING, 0, s, n); /* names go through escaping */
    }
}

/* ---- shrinking a large file --------------------------------------------- */

static void shrink(const gguf_ctx *src, const char *path)
{
    gguf_ctx *c = gguf_new(gguf_version(src));
    if (!c)
        die("out of memory");
    struct gguf_error err = {0};
    if (gguf_alignment(src) != GGUF_DEFAULT_ALIGNMENT &&
        gguf_set_alignment(c, gguf_alignment(src), &err) != GGUF_OK)
        die("%s: alignment: %s", path, err.msg);
    for (int64_t i = 0; i < gguf_n_kv(src); i++) {
        size_t klen, plen;
        const char *k = gguf_kv_key(src, i, &klen);
        enum gguf_type t = gguf_kv_type(src, i);
        const uint8_t *p = gguf_kv_payload(src, i, &plen);
        if (klen == 17 && !memcmp(k, "general.alignment", 17))
            continue;
        struct gguf_buf cut = {0};
        if (plen > 1024 && t == GGUF_TYPE_STRING) {
            uint8_t hdr[8];
            gguf_wr64(hdr, 256);
            gguf_buf_add(&cut, hdr, 8);
            gguf_buf_add(&cut, p + 8, 256);
        } else if (plen > 1024 && t == GGUF_TYPE_ARRAY) {
            struct gguf_buf txt = {0};
            if (gguf_render(t, p, plen, &txt, &err) != GGUF_OK)
                die("%s: render: %s", path, err.msg);
            size_t n = 0, lines = 0;
            while (n < txt.len && lines < 8)
                if (txt.p[n++] == '\n')
                    lines++;
            if (gguf_parse_text(t, gguf_kv_arr_type(src, i), (const char *)txt.p,
                                n, &cut, &err) != GGUF_OK)
                die("%s: parse of a cut rendering: %s", path, err.msg);
            gguf_buf_free(&txt);
        } else {
            gguf_buf_add(&cut, p, plen);
        }
        /* set_payload refuses arrays of arrays; those files are small. */
        if (gguf_set_payload(c, k, klen, t, cut.p, cut.len, &err) != GGUF_OK)
            fprintf(stderr, "mkseeds: %s: key %lld left out: %s\n", path,
                    (long long)i, err.msg);
        gguf_buf_free(&cut);
    }
    for (int64_t i = 0; i < gguf_n_tensors(src); i++) {
        size_t nlen;
        const char *n = gguf_tensor_name(src, i, &nlen);
        uint32_t ty = gguf_tensor_type(src, i);
        uint32_t nd = gguf_tensor_n_dims(src, i);
        int64_t ne[GGUF_MAX_DIMS] = {1, 1, 1, 1};
        ne[0] = gguf_ggml_blck_size(ty) ? gguf_ggml_blck_size(ty) : 1;
        if (nd > 1)
            ne[1] = 2;
        if (gguf_add_tensor(c, n, nlen, ty, nd ? nd : 1, ne, &err) != GGUF_OK)
            fprintf(stderr, "mkseeds: %s: tensor %lld left out: %s\n", path,
                    (long long)i, err.msg);
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/header/.shrunk.tmp", out_dir);
    if (gguf_write_file(c, tmp, NULL, NULL, &err) != GGUF_OK)
        die("%s: writing the shrunk copy: %s", path, err.msg);
    gguf_close(c);
    FILE *f = fopen(tmp, "rb");
    if (!f)
        die("%s: %s", tmp, strerror(errno));
    struct gguf_buf b = {0};
    uint8_t chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        gguf_buf_add(&b, chunk, got);
    fclose(f);
    remove(tmp);
    if (b.len > 4 * SHRINK_ABOVE)
        fprintf(stderr, "mkseeds: note: %s shrinks only to %zu bytes\n", path, b.len);
    put("header", b.p, b.len);
    gguf_buf_free(&b);
}

static void from_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("%s: %s", path, strerror(errno));
    struct gguf_buf b = {0};
    uint8_t chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (gguf_buf_add(&b, chunk, got) != GGUF_OK)
            die("out of memory");
    fclose(f);
    gguf_ctx *ctx = NULL;
    struct gguf_error err = {0};
    if (gguf_open_mem(&ctx, b.p, b.len, GGUF_OPEN_ALLOW_NESTED, &err) != GGUF_OK) {
        /* Not ours to judge: keep the first 64 KiB as a header seed. */
        put("header", b.p, b.len < SHRINK_ABOVE ? b.len : SHRINK_ABOVE);
        gguf_buf_free(&b);
        return;
    }
    if (b.len <= SHRINK_ABOVE)
        put("header", b.p, b.len);
    else
        shrink(ctx, path);
    text_from(ctx);
    gguf_close(ctx);
    gguf_buf_free(&b);
}

/* ---- handcrafted header seeds ------------------------------------------- */

static const int64_t NE8[] = {8};

static void emit(struct craft *c)
{
    if (c->failed)
        die("out of memory");
    put("header", craft_data(c), craft_len(c));
    craft_free(c);
}

static void crafted(void)
{
    struct craft c = {0};

    /* Arrays of arrays (mounted only with -o allow_nested). */
    craft_header(&c, 3, 1, 2);
    craft_kv_arr(&c, "nest.a", GGUF_TYPE_ARRAY, 2);
    craft_u32(&c, GGUF_TYPE_UINT8), craft_u64(&c, 2), craft_u8(&c, 1), craft_u8(&c, 2);
    craft_u32(&c, GGUF_TYPE_STRING), craft_u64(&c, 1), craft_str(&c, "x\"y\n");
    craft_kv_arr(&c, "nest.b", GGUF_TYPE_ARRAY, 1);
    craft_u32(&c, GGUF_TYPE_ARRAY), craft_u64(&c, 1);
    craft_u32(&c, GGUF_TYPE_FLOAT32), craft_u64(&c, 1), craft_f32(&c, 0.5f);
    craft_tensor(&c, "t0", 1, NE8, 0, 0);
    craft_pad(&c, 32);
    craft_zeros(&c, 32);
    emit(&c);

    /* The filler KV in the middle, then last; non-zero padding. */
    for (int where = 0; where < 3; where++) {
        craft_header(&c, 3, 1, 3);
        if (where == 0)
            craft_kv_str(&c, GGUF_FILLER_KEY, "     ");
        craft_kv_u32(&c, "general.alignment", 64);
        craft_kv_str(&c, "general.name", "filler");
        if (where == 1)
            craft_kv_u8(&c, GGUF_FILLER_KEY, 0);
        if (where == 2)
            craft_kv_f32(&c, "x.f", 1e-5f);
        craft_tensor(&c, "t0", 1, NE8, 0, 0);
        while (craft_len(&c) % 64)
            craft_u8(&c, where == 2 ? 0xab : 0);
        craft_zeros(&c, 64);
        emit(&c);
    }

    /* Unknown tensor type between two known ones; a v2 file with every
     * scalar type. */
    craft_header(&c, 3, 3, 0);
    craft_tensor(&c, "a", 1, NE8, 0, 0);
    craft_tensor(&c, "b", 1, NE8, 200, 32);
    craft_tensor(&c, "c", 2, (int64_t[]){32, 2}, 8, 96);
    craft_pad(&c, 32);
    craft_zeros(&c, 96 + 68);
    emit(&c);

    craft_header(&c, 2, 0, 13);
    craft_kv_u8(&c, "s.u8", 200);
    craft_kv_i8(&c, "s.i8", -3);
    craft_kv_u16(&c, "s.u16", 65535);
    craft_kv_i16(&c, "s.i16", -300);
    craft_kv_u32(&c, "s.u32", 7);
    craft_kv_i32(&c, "s.i32", -7);
    craft_kv_f32(&c, "s.f32", -0.0f);
    craft_kv_bool(&c, "s.b", 1);
    craft_kv_str(&c, "s.s", "\xff\\n\t");
    craft_kv_u64(&c, "s.u64", UINT64_MAX);
    craft_kv_i64(&c, "s.i64", INT64_MIN);
    craft_kv_f64(&c, "s.f64", 1e300);
    craft_kv_arr_str(&c, "s.arr", (const char *const[]){"", "a\nb", "%2F"}, 3);
    craft_pad(&c, 32);
    emit(&c);
}

/* ---- handwritten text seeds --------------------------------------------- */

static void texts(void)
{
    static const struct {
        enum gguf_type t, at;
        const char *s;
    } samples[] = {
        {GGUF_TYPE_UINT8, 0, "255\n"},
        {GGUF_TYPE_INT8, 0, "-128"},
        {GGUF_TYPE_UINT16, 0, "007\n"},
        {GGUF_TYPE_INT16, 0, "-0\n"},
        {GGUF_TYPE_UINT32, 0, "4294967295\n"},
        {GGUF_TYPE_INT32, 0, "-2147483648\n"},
        {GGUF_TYPE_UINT64, 0, "18446744073709551615\n"},
        {GGUF_TYPE_INT64, 0, "-9223372036854775808\n"},
        {GGUF_TYPE_BOOL, 0, "true\n"},
        {GGUF_TYPE_BOOL, 0, "0"},
        {GGUF_TYPE_FLOAT32, 0, "1e-05\n"},
        {GGUF_TYPE_FLOAT32, 0, "-nan(0x7fcd)\n"},
        {GGUF_TYPE_FLOAT32, 0, "0x1.8p-3\n"},
        {GGUF_TYPE_FLOAT32, 0, "3.4028235e38"},
        {GGUF_TYPE_FLOAT32, 0, "1.4e-45\n"},
        {GGUF_TYPE_FLOAT64, 0, "-Infinity\n"},
        {GGUF_TYPE_FLOAT64, 0, "2.2250738585072014e-308\n"},
        {GGUF_TYPE_FLOAT64, 0, "nan(0x8000000000001)\n"},
        {GGUF_TYPE_STRING, 0, "h\xc3\xa9llo\n\n"},
        {GGUF_TYPE_STRING, 0, "a/b/../../etc/passwd"},
        {GGUF_TYPE_STRING, 0, ".."},
        {GGUF_TYPE_STRING, 0, "%25%2F%2E%~0123456789abcdef"},
        {GGUF_TYPE_ARRAY, GGUF_TYPE_STRING, "a\\nb\n\\x00\\xff\\t\\\\\n\n\xed\xa0\x80\n"},
        {GGUF_TYPE_ARRAY, GGUF_TYPE_UINT8, "1\n2\n255\n"},
        {GGUF_TYPE_ARRAY, GGUF_TYPE_FLOAT32, "0.5\n-0\ninf\nnan\n1e+20\n"},
        {GGUF_TYPE_ARRAY, GGUF_TYPE_BOOL, "true\nfalse\n1\n"},
        {GGUF_TYPE_ARRAY, GGUF_TYPE_INT64, "-1\n"},
        {GGUF_TYPE_ARRAY, GGUF_TYPE_UINT32, ""},
        {GGUF_TYPE_ARRAY, GGUF_TYPE_ARRAY,
         "uint32[1, 2, 3]\nstring[\"a\", \"b\\n\\\"\"]\nfloat32[]\n"
         "array[uint8[1], string[]]\narray[array[array[bool[true]]]]\n"},
        {GGUF_TYPE_ARRAY, GGUF_TYPE_ARRAY, "int8[ -1 ,  2 ]\n"},
    };
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++)
        put_text(samples[i].t, samples[i].at, samples[i].s, strlen(samples[i].s));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mkseeds OUT [FILE.gguf...]\n");
        return 2;
    }
    out_dir = argv[1];
    const char *subs[] = {"", "/header", "/text"};
    for (int i = 0; i < 3; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s%s", out_dir, subs[i]);
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            die("cannot create %s: %s", p, strerror(errno));
    }
    for (size_t i = 0; i < n_corrupt_cases; i++) {
        struct craft c = {0};
        corrupt_cases[i].build(&c);
        emit(&c);
    }
    crafted();
    texts();
    for (int i = 2; i < argc; i++)
        from_file(argv[i]);
    printf("mkseeds: %lu header seeds, %lu text seeds in %s\n", n_header, n_text,
           out_dir);
    return 0;
}
