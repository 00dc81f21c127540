/*
 * test_write.c - the writer (gguf_header_size, gguf_write_header,
 * gguf_write_file) and the editor (gguf_set_payload, gguf_remove_key,
 * gguf_rename_key, gguf_add_tensor, gguf_key_valid).
 *
 * Expected bytes never come from the code under test: the golden header is
 * assembled by hand below, round trips compare against the payloads the
 * test built itself, and identity checks compare against real files
 * written by llama.cpp's tools (../shared/models beside the source tree,
 * GGUFS_SRCDIR/../shared/models; skipped with a message when absent).
 */
#include "gguf.h"
#include "internal.h" /* gguf_set_alignment */

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILLER GGUF_FILLER_KEY
#define FILLER_LEN (sizeof GGUF_FILLER_KEY - 1)

/* ---- an independent byte builder (the oracle's own serializer) ------- */

struct bytes {
    uint8_t *p;
    size_t len, cap;
};

static void b_add(struct bytes *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        ck_assert_ptr_nonnull(b->p);
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}
static void b_u8(struct bytes *b, uint8_t v) { b_add(b, &v, 1); }
static void b_u32(struct bytes *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                    (uint8_t)(v >> 24)};
    b_add(b, x, 4);
}
static void b_u64(struct bytes *b, uint64_t v) {
    b_u32(b, (uint32_t)v);
    b_u32(b, (uint32_t)(v >> 32));
}
static void b_strn(struct bytes *b, const char *s, size_t n) {
    b_u64(b, n);
    b_add(b, s, n);
}
static void b_str(struct bytes *b, const char *s) { b_strn(b, s, strlen(s)); }
static void b_zeros(struct bytes *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        b_u8(b, 0);
}
static void b_free(struct bytes *b) {
    free(b->p);
    *b = (struct bytes){0};
}

/* Index of the first byte of p[0, n) that is not zero, or n.  (Byte loops
 * use plain comparisons: every passing ck_assert costs a system call.) */
static size_t first_nonzero(const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n && p[i] == 0)
        i++;
    return i;
}
static size_t first_diff(const uint8_t *a, const uint8_t *b, size_t n) {
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* ---- a sample context: every value type, a few tensors ---------------- */

struct sample_kv {
    const char *key;
    enum gguf_type type;
    struct bytes payload;
};

#define MAX_SAMPLE 32
struct sample {
    struct sample_kv kv[MAX_SAMPLE];
    int n;
};

static void sample_add(struct sample *s, const char *key, enum gguf_type t,
                       struct bytes payload) {
    ck_assert_int_lt(s->n, MAX_SAMPLE);
    s->kv[s->n++] = (struct sample_kv){key, t, payload};
}

static struct sample make_sample(void) {
    struct sample s = {0};
    struct bytes b = {0};
    b_str(&b, "llama");
    sample_add(&s, "general.architecture", GGUF_TYPE_STRING, b);
    b = (struct bytes){0}; b_u8(&b, 0xff);
    sample_add(&s, "t.u8", GGUF_TYPE_UINT8, b);
    b = (struct bytes){0}; b_u8(&b, 0x80);
    sample_add(&s, "t.i8", GGUF_TYPE_INT8, b);
    b = (struct bytes){0}; b_u32(&b, 0xffff); b.len = 2;
    sample_add(&s, "t.u16", GGUF_TYPE_UINT16, b);
    b = (struct bytes){0}; b_u32(&b, 0x8000); b.len = 2;
    sample_add(&s, "t.i16", GGUF_TYPE_INT16, b);
    b = (struct bytes){0}; b_u32(&b, 0xdeadbeef);
    sample_add(&s, "t.u32", GGUF_TYPE_UINT32, b);
    b = (struct bytes){0}; b_u32(&b, 0x80000000);
    sample_add(&s, "t.i32", GGUF_TYPE_INT32, b);
    b = (struct bytes){0}; b_u32(&b, 0x7fc12345); /* NaN with a payload */
    sample_add(&s, "t.f32", GGUF_TYPE_FLOAT32, b);
    b = (struct bytes){0}; b_u8(&b, 1);
    sample_add(&s, "t.bool", GGUF_TYPE_BOOL, b);
    b = (struct bytes){0}; b_strn(&b, "a\nb\0c\xff", 6);
    sample_add(&s, "t.str", GGUF_TYPE_STRING, b);
    b = (struct bytes){0}; b_str(&b, "");
    sample_add(&s, "t.empty_str", GGUF_TYPE_STRING, b);
    b = (struct bytes){0}; b_u64(&b, UINT64_MAX);
    sample_add(&s, "t.u64", GGUF_TYPE_UINT64, b);
    b = (struct bytes){0}; b_u64(&b, UINT64_C(1) << 63);
    sample_add(&s, "t.i64", GGUF_TYPE_INT64, b);
    b = (struct bytes){0}; b_u64(&b, UINT64_C(0x8000000000000000)); /* -0.0 */
    sample_add(&s, "t.f64", GGUF_TYPE_FLOAT64, b);
    b = (struct bytes){0};
    b_u32(&b, GGUF_TYPE_STRING); b_u64(&b, 3);
    b_str(&b, "x"); b_str(&b, ""); b_str(&b, "tab\there");
    sample_add(&s, "t.arr_str", GGUF_TYPE_ARRAY, b);
    b = (struct bytes){0};
    b_u32(&b, GGUF_TYPE_INT32); b_u64(&b, 2); b_u32(&b, 1); b_u32(&b, 0xffffffff);
    sample_add(&s, "t.arr_i32", GGUF_TYPE_ARRAY, b);
    b = (struct bytes){0};
    b_u32(&b, GGUF_TYPE_FLOAT64); b_u64(&b, 0);
    sample_add(&s, "t.arr_empty", GGUF_TYPE_ARRAY, b);
    return s;
}

static void sample_free(struct sample *s) {
    for (int i = 0; i < s->n; i++)
        b_free(&s->kv[i].payload);
}

static struct gguf_error err;

static void set_sample(gguf_ctx *ctx, const struct sample *s) {
    for (int i = 0; i < s->n; i++) {
        enum gguf_status st = gguf_set_payload(
            ctx, s->kv[i].key, strlen(s->kv[i].key), s->kv[i].type,
            s->kv[i].payload.p, s->kv[i].payload.len, &err);
        ck_assert_msg(st == GGUF_OK, "set %s: %s", s->kv[i].key, err.msg);
    }
}

struct sample_tensor {
    const char *name;
    uint32_t type, n_dims;
    int64_t ne[4];
    uint64_t size; /* by hand from docs/format.md, ggml tensor types */
};

static const struct sample_tensor tensors[] = {
    {"tok.weight", 0, 2, {3, 5, 1, 1}, 60},       /* f32 */
    {"blk.0.q", 2, 2, {64, 2, 1, 1}, 72},         /* q4_0: 2 blocks x 18 x 2 */
    {"blk.0.k", 12, 1, {256, 1, 1, 1}, 144},      /* q4_K */
    {"b", 1, 4, {2, 3, 1, 2, }, 24},              /* f16 */
    {"i8", 24, 3, {5, 1, 1, 1}, 5},               /* i8 */
};
#define N_TENSORS (int)(sizeof tensors / sizeof *tensors)

static void add_sample_tensors(gguf_ctx *ctx) {
    for (int i = 0; i < N_TENSORS; i++) {
        const struct sample_tensor *t = &tensors[i];
        enum gguf_status st = gguf_add_tensor(ctx, t->name, strlen(t->name),
                                              t->type, t->n_dims, t->ne, &err);
        ck_assert_msg(st == GGUF_OK, "add %s: %s", t->name, err.msg);
    }
}

static uint64_t up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Checks ctx holds exactly the sample's keys in order (ignoring a filler
 * anywhere, and general.alignment unless it is 32) and the sample tensors
 * at aligned offsets. */
static void check_matches_sample(const gguf_ctx *ctx, const struct sample *s,
                                 uint32_t align) {
    int64_t j = 0;
    for (int64_t i = 0; i < gguf_n_kv(ctx); i++) {
        size_t klen, plen;
        const char *k = gguf_kv_key(ctx, i, &klen);
        if (klen == FILLER_LEN && !memcmp(k, FILLER, klen))
            continue;
        /* set by build_sample after the sample's keys when not 32 */
        if (align != 32 && !strcmp(k, "general.alignment"))
            continue;
        ck_assert_int_lt(j, s->n);
        ck_assert_uint_eq(klen, strlen(s->kv[j].key));
        ck_assert_msg(!memcmp(k, s->kv[j].key, klen), "key %lld is %s, want %s",
                      (long long)i, k, s->kv[j].key);
        ck_assert_int_eq(gguf_kv_type(ctx, i), s->kv[j].type);
        const uint8_t *p = gguf_kv_payload(ctx, i, &plen);
        ck_assert_uint_eq(plen, s->kv[j].payload.len);
        ck_assert_msg(plen == 0 || !memcmp(p, s->kv[j].payload.p, plen),
                      "payload of %s differs", k);
        if (s->kv[j].type == GGUF_TYPE_ARRAY) {
            const uint8_t *q = s->kv[j].payload.p;
            uint32_t at = (uint32_t)q[0] | (uint32_t)q[1] << 8;
            uint64_t n = 0;
            for (int b = 7; b >= 0; b--)
                n = n << 8 | q[4 + b];
            ck_assert_int_eq(gguf_kv_arr_type(ctx, i), at);
            ck_assert_uint_eq(gguf_kv_arr_n(ctx, i), n);
        }
        ck_assert_int_eq(gguf_find_key(ctx, s->kv[j].key, klen), i);
        j++;
    }
    ck_assert_int_eq(j, s->n);

    ck_assert_int_eq(gguf_n_tensors(ctx), N_TENSORS);
    uint64_t off = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        size_t nlen;
        const char *n = gguf_tensor_name(ctx, i, &nlen);
        ck_assert_uint_eq(nlen, strlen(tensors[i].name));
        ck_assert(!memcmp(n, tensors[i].name, nlen));
        ck_assert_uint_eq(gguf_tensor_type(ctx, i), tensors[i].type);
        ck_assert_uint_eq(gguf_tensor_n_dims(ctx, i), tensors[i].n_dims);
        const int64_t *ne = gguf_tensor_ne(ctx, i);
        for (int d = 0; d < 4; d++)
            ck_assert_int_eq(ne[d], tensors[i].ne[d]);
        ck_assert_uint_eq(gguf_tensor_size(ctx, i), tensors[i].size);
        ck_assert_uint_eq(gguf_tensor_rel_offset(ctx, i), off);
        ck_assert_int_eq(gguf_find_tensor(ctx, tensors[i].name, nlen), i);
        off += up(tensors[i].size, align);
    }
}

/* The sample's header size, computed by the test from the layout. */
static uint64_t sample_header_size(const struct sample *s) {
    uint64_t n = 24;
    for (int i = 0; i < s->n; i++)
        n += 8 + strlen(s->kv[i].key) + 4 + s->kv[i].payload.len;
    for (int i = 0; i < N_TENSORS; i++)
        n += 8 + strlen(tensors[i].name) + 4 + 8 * tensors[i].n_dims + 4 + 8;
    return n;
}

static gguf_ctx *build_sample(const struct sample *s, uint32_t version,
                              uint32_t align) {
    gguf_ctx *ctx = gguf_new(version);
    ck_assert_ptr_nonnull(ctx);
    set_sample(ctx, s);
    if (align != GGUF_DEFAULT_ALIGNMENT)
        ck_assert(gguf_set_alignment(ctx, align, &err) == GGUF_OK);
    add_sample_tensors(ctx);
    return ctx;
}

static gguf_ctx *reopen(const struct gguf_buf *b) {
    gguf_ctx *ctx = NULL;
    enum gguf_status st = gguf_open_mem(&ctx, b->p, b->len, 0, &err);
    ck_assert_msg(st == GGUF_OK, "reopen: %s: %s", gguf_status_name(st), err.msg);
    return ctx;
}

/* ---- golden bytes ------------------------------------------------------ */

START_TEST(golden_header) {
    /* One key and one tensor, laid out by hand per docs/format.md, Byte
     * layout. */
    struct bytes want = {0};
    b_add(&want, "GGUF", 4);
    b_u32(&want, 3);
    b_u64(&want, 1); /* tensors */
    b_u64(&want, 2); /* kvs */
    b_str(&want, "a");
    b_u32(&want, GGUF_TYPE_UINT32);
    b_u32(&want, 7);
    b_str(&want, "s");
    b_u32(&want, GGUF_TYPE_STRING);
    b_str(&want, "hi");
    b_str(&want, "t");
    b_u32(&want, 2);
    b_u64(&want, 4);
    b_u64(&want, 3);
    b_u32(&want, 0);
    b_u64(&want, 0);
    uint64_t h = want.len;
    b_zeros(&want, 32 - want.len % 32);
    ck_assert_uint_eq(want.len % 32, 0);

    gguf_ctx *ctx = gguf_new(3);
    uint8_t seven[4] = {7, 0, 0, 0};
    uint8_t hi[10] = {2, 0, 0, 0, 0, 0, 0, 0, 'h', 'i'};
    ck_assert(gguf_set_payload(ctx, "a", 1, GGUF_TYPE_UINT32, seven, 4, &err) == GGUF_OK);
    ck_assert(gguf_set_payload(ctx, "s", 1, GGUF_TYPE_STRING, hi, 10, &err) == GGUF_OK);
    int64_t ne[2] = {4, 3};
    ck_assert(gguf_add_tensor(ctx, "t", 1, 0, 2, ne, &err) == GGUF_OK);
    ck_assert_uint_eq(gguf_header_size(ctx), h);

    struct gguf_buf out = {0};
    ck_assert(gguf_write_header(ctx, 0, &out, &err) == GGUF_OK);
    ck_assert_uint_eq(out.len, want.len);
    ck_assert(!memcmp(out.p, want.p, want.len));

    /* target == the padded size: the same bytes. */
    out.len = 0;
    ck_assert(gguf_write_header(ctx, want.len, &out, &err) == GGUF_OK);
    ck_assert_uint_eq(out.len, want.len);
    ck_assert(!memcmp(out.p, want.p, want.len));

    /* version 2 differs only in the version field */
    gguf_ctx *v2 = gguf_new(2);
    ck_assert(gguf_set_payload(v2, "a", 1, GGUF_TYPE_UINT32, seven, 4, &err) == GGUF_OK);
    ck_assert(gguf_set_payload(v2, "s", 1, GGUF_TYPE_STRING, hi, 10, &err) == GGUF_OK);
    ck_assert(gguf_add_tensor(v2, "t", 1, 0, 2, ne, &err) == GGUF_OK);
    out.len = 0;
    ck_assert(gguf_write_header(v2, 0, &out, &err) == GGUF_OK);
    want.p[4] = 2;
    ck_assert_uint_eq(out.len, want.len);
    ck_assert(!memcmp(out.p, want.p, want.len));

    gguf_buf_free(&out);
    b_free(&want);
    gguf_close(ctx);
    gguf_close(v2);
}
END_TEST

START_TEST(empty_header) {
    gguf_ctx *ctx = gguf_new(3);
    struct gguf_buf out = {0};
    ck_assert_uint_eq(gguf_header_size(ctx), 24);
    ck_assert(gguf_write_header(ctx, 0, &out, &err) == GGUF_OK);
    static const uint8_t want[32] = {'G', 'G', 'U', 'F', 3};
    ck_assert_uint_eq(out.len, 32);
    ck_assert(!memcmp(out.p, want, 32));
    gguf_ctx *back = reopen(&out);
    ck_assert_int_eq(gguf_n_kv(back), 0);
    ck_assert_int_eq(gguf_n_tensors(back), 0);
    gguf_close(back);
    gguf_buf_free(&out);
    gguf_close(ctx);
}
END_TEST

/* ---- round trips ------------------------------------------------------- */

START_TEST(roundtrip_header) {
    static const uint32_t aligns[] = {1, 8, 32, 64, 4096};
    uint32_t align = aligns[_i];
    struct sample s = make_sample();
    gguf_ctx *ctx = build_sample(&s, 3, align);
    ck_assert_uint_eq(gguf_alignment(ctx), align);
    check_matches_sample(ctx, &s, align);
    uint64_t h = sample_header_size(&s) +
                 (align != 32 ? 8 + 17 + 4 + 4 : 0); /* general.alignment */
    ck_assert_uint_eq(gguf_header_size(ctx), h);

    struct gguf_buf out = {0};
    ck_assert(gguf_write_header(ctx, 0, &out, &err) == GGUF_OK);
    ck_assert_uint_eq(out.len, up(h, align));
    ck_assert_uint_eq(first_nonzero(out.p + h, out.len - h), out.len - h);

    /* The reader wants the data too (it checks bounds): append it. */
    uint64_t data = 0;
    for (int i = 0; i < N_TENSORS; i++)
        data += up(tensors[i].size, align);
    ck_assert(gguf_buf_reserve(&out, data) == GGUF_OK);
    memset(out.p + out.len, 0xab, data);
    out.len += data;

    gguf_ctx *back = reopen(&out);
    ck_assert_uint_eq(gguf_version(back), 3);
    ck_assert_uint_eq(gguf_alignment(back), align);
    ck_assert_uint_eq(gguf_data_offset(back), up(h, align));
    check_matches_sample(back, &s, align);
    if (align != 32) {
        /* general.alignment went last among the keys (set after them) */
        ck_assert_int_eq(gguf_n_kv(back), s.n + 1);
        size_t kl;
        ck_assert_str_eq(gguf_kv_key(back, s.n, &kl), "general.alignment");
        uint64_t a;
        ck_assert(gguf_kv_get_u64(back, s.n, &a));
        ck_assert_uint_eq(a, align);
    }
    /* and written again, byte for byte */
    struct gguf_buf again = {0};
    ck_assert(gguf_write_header(back, gguf_data_offset(back), &again, &err) == GGUF_OK);
    ck_assert_uint_eq(again.len, up(h, align));
    ck_assert(!memcmp(again.p, out.p, again.len));

    gguf_buf_free(&again);
    gguf_buf_free(&out);
    gguf_close(back);
    gguf_close(ctx);
    sample_free(&s);
}
END_TEST

static const void *pattern_data(void *u, int64_t i) {
    uint8_t **bufs = u;
    return i == 2 ? NULL : bufs[i]; /* tensor 2 left as zeros */
}

static char *tmpdir_make(void) {
    char *d = strdup("/tmp/ggufs-test-write.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

static void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n ? (size_t)n : 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return p;
}

START_TEST(write_file_whole) {
    uint32_t align = _i == 0 ? 32 : 64;
    struct sample s = make_sample();
    gguf_ctx *ctx = build_sample(&s, _i == 2 ? 2 : 3, align);
    uint8_t *bufs[N_TENSORS];
    for (int i = 0; i < N_TENSORS; i++) {
        bufs[i] = malloc(tensors[i].size);
        for (uint64_t j = 0; j < tensors[i].size; j++)
            bufs[i][j] = (uint8_t)(i * 37 + j * 11 + 1);
    }
    char *dir = tmpdir_make();
    char path[4200];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    ck_assert_msg(gguf_write_file(ctx, path, pattern_data, bufs, &err) == GGUF_OK,
                  "%s", err.msg);

    size_t len;
    uint8_t *file = slurp(path, &len);
    ck_assert_ptr_nonnull(file);
    uint64_t h = gguf_header_size(ctx), d0 = up(h, align), end = d0;
    for (int i = 0; i < N_TENSORS; i++)
        end += up(tensors[i].size, align);
    ck_assert_uint_eq(len, end);

    gguf_ctx *back = NULL;
    ck_assert_msg(gguf_open(&back, path, 0, &err) == GGUF_OK, "%s", err.msg);
    ck_assert_uint_eq(gguf_version(back), _i == 2 ? 2 : 3);
    ck_assert_uint_eq(gguf_data_offset(back), d0);
    ck_assert_uint_eq(gguf_file_size(back), len);
    /* every byte after the header: tensor data where it belongs, else 0 */
    uint64_t off = d0;
    for (int i = 0; i < N_TENSORS; i++) {
        ck_assert_uint_eq(gguf_tensor_offset(back, i), off);
        uint64_t sz = tensors[i].size, padded = up(sz, align);
        if (i == 2)
            ck_assert_uint_eq(first_nonzero(file + off, padded), padded);
        else
            ck_assert_uint_eq(first_diff(file + off, bufs[i], sz), sz);
        ck_assert_uint_eq(first_nonzero(file + off + sz, padded - sz), padded - sz);
        off += up(tensors[i].size, align);
    }
    ck_assert_uint_eq(first_nonzero(file + h, d0 - h), d0 - h);

    /* nothing else (no temp file) left beside it */
    DIR *dd = opendir(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dd)))
        n += e->d_name[0] != '.';
    closedir(dd);
    ck_assert_int_eq(n, 1);

    /* overwriting an existing file works and replaces it */
    ck_assert(gguf_write_file(ctx, path, NULL, NULL, &err) == GGUF_OK);
    free(file);
    file = slurp(path, &len);
    ck_assert_uint_eq(len, end);
    ck_assert_uint_eq(first_nonzero(file + d0, end - d0), end - d0);

    /* a path in a missing directory: GGUF_E_IO with errno */
    char bad[4300];
    snprintf(bad, sizeof bad, "%s/no/such/dir.gguf", dir);
    ck_assert_int_eq(gguf_write_file(ctx, bad, NULL, NULL, &err), GGUF_E_IO);
    ck_assert_int_eq(err.sys_errno, ENOENT);

    free(file);
    for (int i = 0; i < N_TENSORS; i++)
        free(bufs[i]);
    gguf_close(back);
    gguf_close(ctx);
    rm_tree(dir);
    free(dir);
    sample_free(&s);
}
END_TEST

/* ---- real files: byte-identical rewrite -------------------------------- */

static char *models_dir(void) {
    const char *src = getenv("GGUFS_SRCDIR");
    char *d = NULL;
    if (asprintf(&d, "%s/../shared/models", src ? src : "..") < 0)
        return NULL;
    struct stat st;
    if (stat(d, &st) < 0 || !S_ISDIR(st.st_mode)) {
        free(d);
        return NULL;
    }
    return d;
}

/* Calls f on every *.gguf in the models directory; returns how many. */
static int each_model(void (*f)(const char *path, const uint8_t *file,
                                size_t len)) {
    char *dir = models_dir();
    if (!dir) {
        fprintf(stderr, "test_write: skipped: no ../shared/models beside "
                        "GGUFS_SRCDIR (%s)\n", getenv("GGUFS_SRCDIR") ?
                        getenv("GGUFS_SRCDIR") : "unset");
        return 0;
    }
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".gguf"))
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        uint8_t *file = slurp(path, &len);
        ck_assert_ptr_nonnull(file);
        f(path, file, len);
        free(file);
        n++;
    }
    closedir(d);
    free(dir);
    return n;
}

/* The rewritten header equals the file's bytes up to the data offset;
 * where the file is shorter (tensor-less files without final padding),
 * the rest is zeros. */
static void assert_same_header(const char *path, const uint8_t *file,
                               size_t len, const struct gguf_buf *out,
                               uint64_t data_off) {
    ck_assert_uint_eq(out->len, data_off);
    size_t n = len < out->len ? len : out->len;
    size_t i = first_diff(out->p, file, n);
    ck_assert_msg(i == n, "%s: byte %zu differs", path, i);
    ck_assert_uint_eq(first_nonzero(out->p + n, out->len - n), out->len - n);
}

static void identity_one(const char *path, const uint8_t *file, size_t len) {
    gguf_ctx *ctx = NULL;
    ck_assert_msg(gguf_open_mem(&ctx, file, len, 0, &err) == GGUF_OK, "%s: %s",
                  path, err.msg);
    uint64_t d = gguf_data_offset(ctx);
    struct gguf_buf out = {0};
    ck_assert_msg(gguf_write_header(ctx, d, &out, &err) == GGUF_OK, "%s: %s",
                  path, err.msg);
    assert_same_header(path, file, len, &out, d);
    /* target 0 is the same for files without a filler */
    out.len = 0;
    ck_assert(gguf_write_header(ctx, 0, &out, &err) == GGUF_OK);
    assert_same_header(path, file, len, &out, d);

    /* setting every key to its own value changes nothing */
    for (int64_t i = 0; i < gguf_n_kv(ctx); i++) {
        size_t kl, pl;
        const char *k = gguf_kv_key(ctx, i, &kl);
        const uint8_t *p = gguf_kv_payload(ctx, i, &pl);
        uint8_t *copy = malloc(pl ? pl : 1);
        memcpy(copy, p, pl);
        ck_assert_msg(gguf_set_payload(ctx, k, kl, gguf_kv_type(ctx, i), copy,
                                       pl, &err) == GGUF_OK, "%s: %s", k, err.msg);
        free(copy);
    }
    ck_assert(!gguf_dirty(ctx));
    out.len = 0;
    ck_assert(gguf_write_header(ctx, d, &out, &err) == GGUF_OK);
    assert_same_header(path, file, len, &out, d);

    gguf_buf_free(&out);
    gguf_close(ctx);
}

START_TEST(identity_models) {
    int n = each_model(identity_one);
    if (n > 0)
        ck_assert_int_ge(n, 4);
}
END_TEST

/* Edits on a real file, written back at its own data offset when it fits
 * and at a larger one otherwise; the result reopens with the edits. */
static void edit_one(const char *path, const uint8_t *file, size_t len) {
    gguf_ctx *ctx = NULL;
    ck_assert(gguf_open_mem(&ctx, file, len, 0, &err) == GGUF_OK);
    int64_t n_kv = gguf_n_kv(ctx);
    uint64_t d = gguf_data_offset(ctx);
    /* shrink: drop the name; the filler absorbs it */
    int64_t name = gguf_find_key(ctx, "general.name", 12);
    ck_assert_int_ge(name, 0);
    ck_assert(gguf_remove_key(ctx, name, &err) == GGUF_OK);
    ck_assert(gguf_dirty(ctx));
    struct gguf_buf out = {0};
    ck_assert_msg(gguf_write_header(ctx, d, &out, &err) == GGUF_OK, "%s: %s",
                  path, err.msg);
    ck_assert_uint_eq(out.len, d);
    /* the header bytes before the removed key are unchanged */
    ck_assert_uint_eq(out.p[16], (uint8_t)n_kv); /* -1 key, +1 filler */
    /* splice the old data section in so the reader can check bounds */
    struct gguf_buf whole = {0};
    ck_assert(gguf_buf_add(&whole, out.p, out.len) == GGUF_OK);
    if (len > d)
        ck_assert(gguf_buf_add(&whole, file + d, len - d) == GGUF_OK);
    gguf_ctx *back = reopen(&whole);
    ck_assert_uint_eq(gguf_data_offset(back), d);
    ck_assert_int_eq(gguf_n_kv(back), n_kv);
    ck_assert_int_lt(gguf_find_key(back, "general.name", 12), 0);
    size_t kl;
    ck_assert_str_eq(gguf_kv_key(back, n_kv - 1, &kl), FILLER);
    for (int64_t i = 0; i < gguf_n_tensors(back); i++)
        ck_assert_uint_eq(gguf_tensor_offset(back, i), gguf_tensor_offset(ctx, i));
    /* and that file, written back, is byte-identical (filler last) */
    struct gguf_buf again = {0};
    ck_assert(gguf_write_header(back, d, &again, &err) == GGUF_OK);
    ck_assert(again.len == out.len && !memcmp(again.p, out.p, out.len));

    /* grow past the data offset: refused, then fits at a larger target */
    uint8_t big[8 + 5000];
    memset(big, 'x', sizeof big);
    big[0] = 0x88; big[1] = 0x13; memset(big + 2, 0, 6); /* 5000 */
    ck_assert(gguf_set_payload(back, "general.description", 19,
                               GGUF_TYPE_STRING, big, sizeof big, &err) == GGUF_OK);
    again.len = 0;
    ck_assert_int_eq(gguf_write_header(back, d, &again, &err), GGUF_E_RANGE);
    ck_assert_uint_eq(again.len, 0);
    uint64_t t2 = up(d + 5100, gguf_alignment(back));
    ck_assert(gguf_write_header(back, t2, &again, &err) == GGUF_OK);
    ck_assert_uint_eq(again.len, t2);

    gguf_buf_free(&again);
    gguf_buf_free(&whole);
    gguf_buf_free(&out);
    gguf_close(back);
    gguf_close(ctx);
}

START_TEST(edit_models) { each_model(edit_one); }
END_TEST

/* ---- the filler -------------------------------------------------------- */

/* Whether a header of h bytes can be made to end at target (alignment a)
 * by the documented rule: exact padding, a string filler of >= 33 bytes,
 * or a 26-byte uint8 filler plus less than a of padding. */
static bool fits(uint64_t h, uint64_t target, uint32_t a) {
    if (target % a || target < up(h, a))
        return false;
    if (target == up(h, a))
        return true;
    uint64_t slack = target - h;
    return slack >= 33 || (slack >= 26 && h + 26 > target - a);
}

static void filler_sweep(uint32_t align, int extra) {
    struct sample s = make_sample();
    if (extra) { /* vary the header length modulo the alignment */
        struct bytes b = {0};
        b_strn(&b, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", (size_t)extra);
        sample_add(&s, "pad.me", GGUF_TYPE_STRING, b);
    }
    gguf_ctx *ctx = build_sample(&s, 3, align);
    uint64_t h = gguf_header_size(ctx);
    uint64_t data = 0;
    for (int i = 0; i < N_TENSORS; i++)
        data += up(tensors[i].size, align);
    int ok = 0, refused = 0;
    for (uint64_t target = h; target <= h + 200; target++) {
        struct gguf_buf out = {0};
        enum gguf_status st = gguf_write_header(ctx, target, &out, &err);
        bool want = fits(h, target, align);
        ck_assert_msg((st == GGUF_OK) == want,
                      "align %u h %llu target %llu: %s (%s)", align,
                      (unsigned long long)h, (unsigned long long)target,
                      gguf_status_name(st), err.msg);
        if (st != GGUF_OK) {
            ck_assert_int_eq(st, GGUF_E_RANGE);
            ck_assert_uint_eq(out.len, 0);
            refused++;
            continue;
        }
        ok++;
        ck_assert_uint_eq(out.len, target);
        ck_assert(gguf_buf_reserve(&out, data) == GGUF_OK);
        memset(out.p + out.len, 0x5a, data);
        out.len += data;
        gguf_ctx *back = reopen(&out);
        ck_assert_uint_eq(gguf_data_offset(back), target);
        bool filler = target != up(h, align);
        ck_assert_int_eq(gguf_n_kv(back), s.n + (align != 32) + filler);
        if (filler) {
            size_t kl;
            const char *k = gguf_kv_key(back, gguf_n_kv(back) - 1, &kl);
            ck_assert_uint_eq(kl, FILLER_LEN);
            ck_assert(!memcmp(k, FILLER, kl));
        }
        check_matches_sample(back, &s, align);
        /* the tensor data is where the header says */
        ck_assert_uint_eq(gguf_tensor_offset(back, 0), target);
        /* rewriting it at the same target is byte-identical */
        struct gguf_buf again = {0};
        ck_assert(gguf_write_header(back, target, &again, &err) == GGUF_OK);
        ck_assert(!memcmp(again.p, out.p, (size_t)target));
        gguf_buf_free(&again);
        gguf_close(back);
        gguf_buf_free(&out);
    }
    /* every aligned target from 33 bytes of slack on fits */
    ck_assert_int_ge(ok, (int)(200 - 33) / (int)align);
    if (align == 1)
        ck_assert_int_gt(refused, 0);
    gguf_close(ctx);
    sample_free(&s);
}

START_TEST(filler_targets) {
    static const uint32_t aligns[] = {1, 2, 4, 8, 16, 32, 64};
    for (int extra = 0; extra < 9; extra++)
        filler_sweep(aligns[_i], extra * 3);
}
END_TEST

START_TEST(filler_bad_targets) {
    struct sample s = make_sample();
    gguf_ctx *ctx = build_sample(&s, 3, 32);
    uint64_t p = up(gguf_header_size(ctx), 32);
    struct gguf_buf out = {0};
    ck_assert_int_eq(gguf_write_header(ctx, p - 32, &out, &err), GGUF_E_RANGE);
    ck_assert_int_eq(gguf_write_header(ctx, p + 33, &out, &err), GGUF_E_RANGE);
    ck_assert_int_eq(gguf_write_header(ctx, 32, &out, &err), GGUF_E_RANGE);
    ck_assert_uint_eq(out.len, 0);
    ck_assert(strlen(err.msg) > 0);
    /* a big one: 1 MiB of slack */
    ck_assert(gguf_write_header(ctx, p + (1 << 20), &out, &err) == GGUF_OK);
    ck_assert_uint_eq(out.len, p + (1 << 20));
    gguf_buf_free(&out);
    gguf_close(ctx);
    sample_free(&s);
}
END_TEST

/* Keys named like ggufs's filler (hand-built files).  Only one with the
 * shape ggufs writes (the last key; spaces or a uint8 0) is ggufs's
 * padding; any other is someone else's key: counted, kept in its place,
 * written back byte-identical, with a warning (issue 11, item 12). */
START_TEST(filler_only_ours) {
    struct bytes f = {0};
    b_add(&f, "GGUF", 4);
    b_u32(&f, 3);
    b_u64(&f, 0);
    b_u64(&f, 3);
    b_str(&f, "first");
    b_u32(&f, GGUF_TYPE_UINT8);
    b_u8(&f, 1);
    b_str(&f, FILLER);
    b_u32(&f, GGUF_TYPE_STRING);
    b_str(&f, "0123456789012345678901234567890123456789");
    b_str(&f, "last");
    b_u32(&f, GGUF_TYPE_UINT8);
    b_u8(&f, 2);
    b_zeros(&f, up(f.len, 32) - f.len);
    uint64_t d = f.len;

    gguf_ctx *ctx = NULL;
    ck_assert_msg(gguf_open_mem(&ctx, f.p, f.len, 0, &err) == GGUF_OK, "%s", err.msg);
    ck_assert_uint_eq(gguf_data_offset(ctx), d);
    ck_assert(!gguf_kv_is_padding(ctx, 1));
    ck_assert_int_eq(gguf_n_warnings(ctx), 1);
    ck_assert_ptr_nonnull(strstr(gguf_warning(ctx, 0), FILLER));
    /* someone else's key is counted: the whole header */
    ck_assert_uint_eq(gguf_header_size(ctx), 24 + 18 + 73 + 17);
    struct gguf_buf out = {0};
    ck_assert(gguf_write_header(ctx, d, &out, &err) == GGUF_OK);
    ck_assert(out.len == f.len && !memcmp(out.p, f.p, f.len));
    /* growing would need a filler of the same name: refused, saying so */
    struct gguf_buf big = {0};
    ck_assert_int_eq(gguf_write_header(ctx, d + 64, &big, &err), GGUF_E_PERM);
    ck_assert_ptr_nonnull(strstr(err.msg, FILLER));

    /* ggufs's own filler, last, spaces: padding, dropped at target 0 */
    b_free(&f);
    b_add(&f, "GGUF", 4);
    b_u32(&f, 3);
    b_u64(&f, 0);
    b_u64(&f, 2);
    b_str(&f, "k");
    b_u32(&f, GGUF_TYPE_UINT8);
    b_u8(&f, 1);
    b_str(&f, FILLER);
    b_u32(&f, GGUF_TYPE_STRING);
    b_str(&f, "                                        ");
    b_zeros(&f, up(f.len, 32) - f.len);
    gguf_ctx *v = NULL;
    ck_assert(gguf_open_mem(&v, f.p, f.len, 0, &err) == GGUF_OK);
    ck_assert(gguf_kv_is_padding(v, 1));
    ck_assert_int_eq(gguf_n_warnings(v), 0);
    struct gguf_buf vb = {0};
    ck_assert(gguf_write_header(v, gguf_data_offset(v), &vb, &err) == GGUF_OK);
    ck_assert(vb.len == f.len && !memcmp(vb.p, f.p, f.len));
    struct gguf_buf min = {0};
    ck_assert(gguf_write_header(v, 0, &min, &err) == GGUF_OK);
    ck_assert_uint_eq(min.len, 64);
    gguf_ctx *m = reopen(&min);
    ck_assert_int_eq(gguf_n_kv(m), 1);

    gguf_close(m);
    gguf_buf_free(&min);
    gguf_buf_free(&vb);
    gguf_close(v);
    gguf_buf_free(&big);
    gguf_buf_free(&out);
    gguf_close(ctx);
    b_free(&f);
}
END_TEST

/* ---- edits ------------------------------------------------------------- */

static const char *key_at(const gguf_ctx *ctx, int64_t i) {
    size_t l;
    return gguf_kv_key(ctx, i, &l);
}

static void set_u32(gguf_ctx *ctx, const char *k, uint32_t v) {
    uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                    (uint8_t)(v >> 24)};
    ck_assert_msg(gguf_set_payload(ctx, k, strlen(k), GGUF_TYPE_UINT32, p, 4,
                                   &err) == GGUF_OK, "%s", err.msg);
}

/* An opened (not built) context: a,b,c and general.alignment = 32. */
static gguf_ctx *abc(void) {
    struct bytes f = {0};
    b_add(&f, "GGUF", 4);
    b_u32(&f, 3);
    b_u64(&f, 0);
    b_u64(&f, 4);
    b_str(&f, "a"); b_u32(&f, GGUF_TYPE_UINT32); b_u32(&f, 1);
    b_str(&f, "general.alignment"); b_u32(&f, GGUF_TYPE_UINT32); b_u32(&f, 32);
    b_str(&f, "b"); b_u32(&f, GGUF_TYPE_UINT32); b_u32(&f, 2);
    b_str(&f, "c"); b_u32(&f, GGUF_TYPE_UINT32); b_u32(&f, 3);
    gguf_ctx *ctx = NULL;
    ck_assert(gguf_open_mem(&ctx, f.p, f.len, 0, &err) == GGUF_OK);
    b_free(&f);
    ck_assert(!gguf_dirty(ctx));
    return ctx;
}

START_TEST(edit_set) {
    gguf_ctx *ctx = abc();
    /* existing key: keeps position and id, may change type */
    uint32_t id_b = gguf_kv_id(ctx, 2);
    uint8_t s[11] = {3, 0, 0, 0, 0, 0, 0, 0, 'x', 'y', 'z'};
    ck_assert(gguf_set_payload(ctx, "b", 1, GGUF_TYPE_STRING, s, 11, &err) == GGUF_OK);
    ck_assert(gguf_dirty(ctx));
    ck_assert_int_eq(gguf_n_kv(ctx), 4);
    ck_assert_str_eq(key_at(ctx, 2), "b");
    ck_assert_int_eq(gguf_kv_type(ctx, 2), GGUF_TYPE_STRING);
    ck_assert_uint_eq(gguf_kv_id(ctx, 2), id_b);
    const char *str;
    size_t sl;
    ck_assert(gguf_kv_get_str(ctx, 2, &str, &sl));
    ck_assert_uint_eq(sl, 3);
    ck_assert(!memcmp(str, "xyz", 3));
    /* a second set of the same key (owned value replaced, no leak) */
    set_u32(ctx, "b", 22);
    uint64_t v;
    ck_assert(gguf_kv_get_u64(ctx, 2, &v));
    ck_assert_uint_eq(v, 22);
    /* new key: last, with a fresh id */
    set_u32(ctx, "d.new", 4);
    ck_assert_int_eq(gguf_n_kv(ctx), 5);
    ck_assert_str_eq(key_at(ctx, 4), "d.new");
    ck_assert_int_eq(gguf_find_key(ctx, "d.new", 5), 4);
    for (int64_t i = 0; i < 4; i++)
        ck_assert_uint_ne(gguf_kv_id(ctx, i), gguf_kv_id(ctx, 4));
    ck_assert_int_eq(gguf_find_id(ctx, gguf_kv_id(ctx, 4)), 4);
    /* arrays: element type and count follow the payload */
    uint8_t arr[4 + 8 + 3] = {GGUF_TYPE_INT8, 0, 0, 0, 3};
    ck_assert(gguf_set_payload(ctx, "e", 1, GGUF_TYPE_ARRAY, arr, sizeof arr, &err) == GGUF_OK);
    ck_assert_int_eq(gguf_kv_arr_type(ctx, 5), GGUF_TYPE_INT8);
    ck_assert_uint_eq(gguf_kv_arr_n(ctx, 5), 3);

    /* written out, the order is a, general.alignment, b, c, d.new, e */
    struct gguf_buf out = {0};
    ck_assert(gguf_write_header(ctx, 0, &out, &err) == GGUF_OK);
    gguf_ctx *back = reopen(&out);
    static const char *order[] = {"a", "general.alignment", "b", "c", "d.new", "e"};
    ck_assert_int_eq(gguf_n_kv(back), 6);
    for (int i = 0; i < 6; i++)
        ck_assert_str_eq(key_at(back, i), order[i]);
    ck_assert(gguf_kv_get_u64(back, 2, &v));
    ck_assert_uint_eq(v, 22);
    gguf_close(back);
    gguf_buf_free(&out);
    gguf_close(ctx);
}
END_TEST

START_TEST(edit_set_refused) {
    gguf_ctx *ctx = abc();
    uint8_t p64[4] = {64, 0, 0, 0}, p32[4] = {32, 0, 0, 0};
    /* general.alignment: the data layout depends on it */
    ck_assert_int_eq(gguf_set_payload(ctx, "general.alignment", 17,
                                      GGUF_TYPE_UINT32, p64, 4, &err), GGUF_E_PERM);
    ck_assert_int_eq(err.code, GGUF_E_PERM);
    ck_assert_ptr_nonnull(strstr(err.msg, "layout"));
    /* ... unless it is a no-op */
    ck_assert(gguf_set_payload(ctx, "general.alignment", 17, GGUF_TYPE_UINT32,
                               p32, 4, &err) == GGUF_OK);
    ck_assert_int_eq(gguf_remove_key(ctx, 1, &err), GGUF_E_PERM);
    ck_assert_int_eq(gguf_rename_key(ctx, 1, "x", 1, &err), GGUF_E_PERM);
    ck_assert_int_eq(gguf_rename_key(ctx, 0, "general.alignment", 17, &err),
                     GGUF_E_PERM);
    /* the filler key is reserved */
    ck_assert_int_eq(gguf_set_payload(ctx, FILLER, FILLER_LEN, GGUF_TYPE_UINT8,
                                      p64, 1, &err), GGUF_E_PERM);
    ck_assert_int_eq(gguf_rename_key(ctx, 0, FILLER, FILLER_LEN, &err), GGUF_E_PERM);
    /* invalid payloads */
    uint8_t two = 2;
    ck_assert_int_ne(gguf_set_payload(ctx, "a", 1, GGUF_TYPE_BOOL, &two, 1, &err), GGUF_OK);
    ck_assert_int_ne(gguf_set_payload(ctx, "a", 1, GGUF_TYPE_UINT32, p64, 3, &err), GGUF_OK);
    uint8_t p5[5] = {0};
    ck_assert_int_ne(gguf_set_payload(ctx, "a", 1, GGUF_TYPE_UINT32, p5, 5, &err), GGUF_OK);
    uint8_t shortstr[9] = {5, 0, 0, 0, 0, 0, 0, 0, 'x'};
    ck_assert_int_ne(gguf_set_payload(ctx, "a", 1, GGUF_TYPE_STRING, shortstr, 9, &err), GGUF_OK);
    /* an array holding one empty uint8 array: ggml refuses nesting */
    uint8_t nested[24] = {GGUF_TYPE_ARRAY, 0, 0, 0, 1};
    ck_assert_int_ne(gguf_set_payload(ctx, "a", 1, GGUF_TYPE_ARRAY, nested, 24, &err), GGUF_OK);
    ck_assert_int_ne(gguf_set_payload(ctx, "a", 1, (enum gguf_type)13, p64, 4, &err), GGUF_OK);
    ck_assert_int_eq(gguf_set_payload(ctx, "", 0, GGUF_TYPE_UINT32, p64, 4, &err), GGUF_E_INVAL);
    /* none of that changed anything */
    ck_assert(!gguf_dirty(ctx));
    ck_assert_int_eq(gguf_n_kv(ctx), 4);
    uint64_t v;
    ck_assert(gguf_kv_get_u64(ctx, 0, &v));
    ck_assert_uint_eq(v, 1);
    gguf_close(ctx);
}
END_TEST

START_TEST(edit_remove) {
    gguf_ctx *ctx = abc();
    uint32_t id_c = gguf_kv_id(ctx, 3);
    ck_assert(gguf_remove_key(ctx, 2, &err) == GGUF_OK); /* b */
    ck_assert(gguf_dirty(ctx));
    ck_assert_int_eq(gguf_n_kv(ctx), 3);
    ck_assert_int_lt(gguf_find_key(ctx, "b", 1), 0);
    ck_assert_int_eq(gguf_find_key(ctx, "c", 1), 2);
    ck_assert_int_eq(gguf_find_key(ctx, "a", 1), 0);
    ck_assert_uint_eq(gguf_kv_id(ctx, 2), id_c);
    ck_assert_int_eq(gguf_find_id(ctx, id_c), 2);
    ck_assert_int_eq(gguf_remove_key(ctx, 3, &err), GGUF_E_NOTFOUND);
    ck_assert_int_eq(gguf_remove_key(ctx, -1, &err), GGUF_E_NOTFOUND);
    /* remove a key that was added (owned copies freed) and the last one */
    set_u32(ctx, "z", 9);
    ck_assert(gguf_remove_key(ctx, 3, &err) == GGUF_OK);
    ck_assert(gguf_remove_key(ctx, 0, &err) == GGUF_OK);
    ck_assert_int_eq(gguf_n_kv(ctx), 2);
    ck_assert_str_eq(key_at(ctx, 0), "general.alignment");
    ck_assert_str_eq(key_at(ctx, 1), "c");
    /* a removed key can come back (last) */
    set_u32(ctx, "a", 10);
    ck_assert_int_eq(gguf_find_key(ctx, "a", 1), 2);
    gguf_close(ctx);
}
END_TEST

START_TEST(edit_rename) {
    gguf_ctx *ctx = abc();
    uint32_t id = gguf_kv_id(ctx, 2);
    ck_assert_int_eq(gguf_rename_key(ctx, 2, "c", 1, &err), GGUF_E_EXISTS);
    ck_assert_int_eq(gguf_rename_key(ctx, 2, "", 0, &err), GGUF_E_INVAL);
    ck_assert_int_eq(gguf_rename_key(ctx, 9, "q", 1, &err), GGUF_E_NOTFOUND);
    ck_assert(!gguf_dirty(ctx));
    /* same name: fine, nothing happens */
    ck_assert(gguf_rename_key(ctx, 2, "b", 1, &err) == GGUF_OK);
    ck_assert(!gguf_dirty(ctx));
    ck_assert(gguf_rename_key(ctx, 2, "b.renamed", 9, &err) == GGUF_OK);
    ck_assert(gguf_dirty(ctx));
    ck_assert_str_eq(key_at(ctx, 2), "b.renamed");
    ck_assert_uint_eq(gguf_kv_id(ctx, 2), id);
    ck_assert_int_lt(gguf_find_key(ctx, "b", 1), 0);
    ck_assert_int_eq(gguf_find_key(ctx, "b.renamed", 9), 2);
    /* any bytes are accepted (validity is the caller's choice) */
    ck_assert(gguf_rename_key(ctx, 2, "Not Valid/\x01\xff", 13, &err) == GGUF_OK);
    ck_assert_int_eq(gguf_find_key(ctx, "Not Valid/\x01\xff", 13), 2);
    /* messages quote names on one line */
    set_u32(ctx, "new\nline", 7);
    ck_assert_int_eq(gguf_rename_key(ctx, 0, "new\nline", 8, &err), GGUF_E_EXISTS);
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    ck_assert(gguf_remove_key(ctx, gguf_find_key(ctx, "new\nline", 8), &err) == GGUF_OK);
    /* the old name is free again */
    set_u32(ctx, "b", 5);
    ck_assert_int_eq(gguf_find_key(ctx, "b", 1), 4);
    /* rename twice (owned key replaced) and write out */
    ck_assert(gguf_rename_key(ctx, 4, "b2", 2, &err) == GGUF_OK);
    ck_assert(gguf_rename_key(ctx, 4, "b3", 2, &err) == GGUF_OK);
    struct gguf_buf out = {0};
    ck_assert(gguf_write_header(ctx, 0, &out, &err) == GGUF_OK);
    gguf_ctx *back = reopen(&out);
    ck_assert_int_eq(gguf_find_key(back, "Not Valid/\x01\xff", 13), 2);
    ck_assert_int_eq(gguf_find_key(back, "b3", 2), 4);
    uint64_t v;
    ck_assert(gguf_kv_get_u64(back, 2, &v));
    ck_assert_uint_eq(v, 2);
    gguf_close(back);
    gguf_buf_free(&out);
    gguf_close(ctx);
}
END_TEST

START_TEST(edit_many) {
    /* Enough keys to make the index grow and rehash; all findable. */
    gguf_ctx *ctx = gguf_new(3);
    char k[32];
    for (int i = 0; i < 2000; i++) {
        snprintf(k, sizeof k, "k.%d", i);
        set_u32(ctx, k, (uint32_t)i);
    }
    for (int i = 0; i < 2000; i += 2) {
        snprintf(k, sizeof k, "k.%d", i);
        int64_t j = gguf_find_key(ctx, k, strlen(k));
        ck_assert_int_ge(j, 0);
        ck_assert(gguf_remove_key(ctx, j, &err) == GGUF_OK);
    }
    ck_assert_int_eq(gguf_n_kv(ctx), 1000);
    for (int i = 0; i < 2000; i++) {
        snprintf(k, sizeof k, "k.%d", i);
        int64_t j = gguf_find_key(ctx, k, strlen(k));
        if (i % 2 == 0) {
            ck_assert_int_lt(j, 0);
        } else {
            ck_assert_int_eq(j, i / 2);
            uint64_t v;
            ck_assert(gguf_kv_get_u64(ctx, j, &v));
            ck_assert_uint_eq(v, (uint64_t)i);
        }
    }
    gguf_close(ctx);
}
END_TEST

/* The name index is kept through edits, not rebuilt (index.c): after each
 * of 3000 random sets, removes, renames and moves, every key is found at
 * its position and every name gone is not found.  The model of the list is
 * the test's own array of names. */
START_TEST(edit_index_kept) {
    enum { MAXK = 400 };
    static char names[MAXK][24];
    int n = 0, made = 0;
    gguf_ctx *ctx = gguf_new(3);
    srand(7);
    for (int step = 0; step < 3000; step++) {
        int op = n < 20 ? 0 : rand() % 4;
        if (op == 0 && n < MAXK) { /* append */
            snprintf(names[n], sizeof names[n], "k.%d", made++);
            set_u32(ctx, names[n], 1);
            n++;
        } else if (op == 1) { /* remove */
            int i = rand() % n;
            ck_assert(gguf_remove_key(ctx, i, &err) == GGUF_OK);
            memmove(names[i], names[i + 1], (size_t)(n - i - 1) * sizeof names[0]);
            n--;
        } else if (op == 2) { /* rename */
            int i = rand() % n;
            snprintf(names[i], sizeof names[i], "r.%d", made++);
            ck_assert(gguf_rename_key(ctx, i, names[i], strlen(names[i]), &err) ==
                      GGUF_OK);
        } else { /* move */
            int i = rand() % n, to = rand() % n;
            ck_assert(gguf_move_key(ctx, i, to, &err) == GGUF_OK);
            char t[24];
            memcpy(t, names[i], sizeof t);
            if (i < to)
                memmove(names[i], names[i + 1], (size_t)(to - i) * sizeof t);
            else
                memmove(names[to + 1], names[to], (size_t)(i - to) * sizeof t);
            memcpy(names[to], t, sizeof t);
        }
        ck_assert_int_eq(gguf_n_kv(ctx), n);
        for (int i = 0; i < n; i++) {
            size_t kl;
            ck_assert_str_eq(gguf_kv_key(ctx, i, &kl), names[i]);
            ck_assert_int_eq(gguf_find_key(ctx, names[i], strlen(names[i])), i);
        }
        char gone[24];
        snprintf(gone, sizeof gone, "k.%d", rand() % (made + 1));
        int64_t f = gguf_find_key(ctx, gone, strlen(gone));
        bool present = false;
        for (int i = 0; i < n; i++)
            present |= strcmp(names[i], gone) == 0;
        ck_assert_int_eq(f >= 0, present);
    }
    gguf_close(ctx);
}
END_TEST

START_TEST(edit_tensors) {
    gguf_ctx *ctx = gguf_new(3);
    int64_t ne[4] = {3, 1, 1, 1};
    ck_assert(gguf_add_tensor(ctx, "a", 1, 0, 1, ne, &err) == GGUF_OK);
    ck_assert_uint_eq(gguf_tensor_size(ctx, 0), 12);
    ck_assert_uint_eq(gguf_tensor_rel_offset(ctx, 0), 0);
    ck_assert_int_eq(gguf_add_tensor(ctx, "a", 1, 0, 1, ne, &err), GGUF_E_EXISTS);
    int64_t q[1] = {31};
    ck_assert_int_ne(gguf_add_tensor(ctx, "q", 1, 2, 1, q, &err), GGUF_OK);
    q[0] = 64;
    ck_assert(gguf_add_tensor(ctx, "q", 1, 2, 1, q, &err) == GGUF_OK);
    ck_assert_uint_eq(gguf_tensor_rel_offset(ctx, 1), 32);
    ck_assert_uint_eq(gguf_tensor_size(ctx, 1), 36);
    char n64[64];
    memset(n64, 'n', 64);
    ck_assert_int_ne(gguf_add_tensor(ctx, n64, 64, 0, 1, ne, &err), GGUF_OK);
    ck_assert(gguf_add_tensor(ctx, n64, 63, 0, 1, ne, &err) == GGUF_OK);
    ck_assert_uint_eq(gguf_tensor_rel_offset(ctx, 2), 96);
    ck_assert_int_ne(gguf_add_tensor(ctx, "u", 1, 4, 1, ne, &err), GGUF_OK); /* removed */
    ck_assert_int_ne(gguf_add_tensor(ctx, "u", 1, 0, 5, ne, &err), GGUF_OK);
    int64_t neg[2] = {4, -1};
    ck_assert_int_ne(gguf_add_tensor(ctx, "u", 1, 0, 2, neg, &err), GGUF_OK);
    ck_assert_int_eq(gguf_n_tensors(ctx), 3);
    ck_assert_int_eq(gguf_find_tensor(ctx, n64, 63), 2);
    ck_assert(!gguf_dirty(ctx));
    /* alignment can only be chosen before tensors exist */
    ck_assert_int_eq(gguf_set_alignment(ctx, 64, &err), GGUF_E_PERM);
    gguf_close(ctx);
    ctx = gguf_new(3);
    ck_assert_int_eq(gguf_set_alignment(ctx, 48, &err), GGUF_E_INVAL);
    ck_assert(gguf_set_alignment(ctx, 128, &err) == GGUF_OK);
    ck_assert(gguf_add_tensor(ctx, "a", 1, 0, 1, ne, &err) == GGUF_OK);
    ck_assert(gguf_add_tensor(ctx, "b", 1, 0, 1, ne, &err) == GGUF_OK);
    ck_assert_uint_eq(gguf_tensor_rel_offset(ctx, 1), 128);
    gguf_close(ctx);
}
END_TEST

START_TEST(key_valid) {
    static const struct { const char *k; bool ok; } cases[] = {
        {"general.name", true}, {"a", true}, {"a_1.b2.c_", true},
        {"llama.attention.head_count", true}, {"0.9", true},
        {"", false}, {"A.b", false}, {"a..b", false}, {".a", false},
        {"a.", false}, {"a-b", false}, {"a b", false}, {"a/b", false},
        {"caf\xc3\xa9", false}, {".", false}, {"..", false}, {"a\n", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        ck_assert_msg(gguf_key_valid(cases[i].k, strlen(cases[i].k)) == cases[i].ok,
                      "'%s'", cases[i].k);
    ck_assert(!gguf_key_valid("a\0b", 3));
    char *big = malloc(65536);
    memset(big, 'a', 65536);
    ck_assert(gguf_key_valid(big, 65535));
    ck_assert(!gguf_key_valid(big, 65536));
    free(big);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("write");
    TCase *t = tcase_create("write");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, golden_header);
    tcase_add_test(t, empty_header);
    tcase_add_loop_test(t, roundtrip_header, 0, 5);
    tcase_add_loop_test(t, write_file_whole, 0, 3);
    tcase_add_test(t, identity_models);
    tcase_add_test(t, edit_models);
    tcase_add_loop_test(t, filler_targets, 0, 7);
    tcase_add_test(t, filler_bad_targets);
    tcase_add_test(t, filler_only_ours);
    suite_add_tcase(s, t);
    TCase *e = tcase_create("edit");
    tcase_add_test(e, edit_set);
    tcase_add_test(e, edit_set_refused);
    tcase_add_test(e, edit_remove);
    tcase_add_test(e, edit_rename);
    tcase_add_test(e, edit_many);
    tcase_add_test(e, edit_index_kept);
    tcase_add_test(e, edit_tensors);
    tcase_add_test(e, key_valid);
    suite_add_tcase(s, e);
    return s;
}

int main(void) {
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
