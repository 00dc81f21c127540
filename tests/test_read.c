/*
 * test_read - the reading half of the library: every corrupt case of the
 * table (status and message), the getters on crafted and real files,
 * truncation at every byte of a header, random byte flips, hostile counts,
 * and the small pieces (errors, buffers, the name index, payload checks).
 *
 * Real files come from $GGUFS_SRCDIR/../shared/models; the tests that need
 * them say so and pass when the folder is absent.
 */
#include "craft.h"
#include "internal.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers -------------------------------------------------------------- */

static char *models_dir(void) {
    static char dir[4096];
    const char *src = getenv("GGUFS_SRCDIR");
    snprintf(dir, sizeof dir, "%s/../shared/models", src ? src : ".");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return NULL;
    return dir;
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

/* Writes bytes to a fresh temporary file; returns its path (static). */
static const char *tmp_file(const void *p, size_t n) {
    static char path[256];
    const char *t = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/ggufs-test-read-XXXXXX", t ? t : "/tmp");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
    close(fd);
    return path;
}

static bool has_warning(const gguf_ctx *ctx, const char *sub) {
    for (int i = 0; i < gguf_n_warnings(ctx); i++)
        if (strstr(gguf_warning(ctx, i), sub))
            return true;
    return false;
}

/* Checks the invariants of an opened context. */
static void check_sane(const gguf_ctx *ctx) {
    uint64_t F = gguf_file_size(ctx);
    uint32_t a = gguf_alignment(ctx);
    ck_assert(a && !(a & (a - 1)));
    ck_assert_uint_eq(gguf_data_offset(ctx) % a, 0);
    if (gguf_n_tensors(ctx) > 0)
        ck_assert_uint_le(gguf_data_offset(ctx), F);
    for (int64_t i = 0; i < gguf_n_tensors(ctx); i++) {
        size_t len;
        const char *name = gguf_tensor_name(ctx, i, &len);
        ck_assert_ptr_nonnull(name);
        ck_assert_uint_le(len, GGUF_MAX_TENSOR_NAME);
        ck_assert_uint_eq(gguf_tensor_offset(ctx, i),
                          gguf_data_offset(ctx) + gguf_tensor_rel_offset(ctx, i));
        ck_assert_uint_le(gguf_tensor_offset(ctx, i), F);
        ck_assert_uint_le(gguf_tensor_size(ctx, i), F - gguf_tensor_offset(ctx, i));
        ck_assert_uint_le(gguf_tensor_n_dims(ctx, i), GGUF_MAX_DIMS);
        int64_t j = gguf_find_tensor(ctx, name, len);
        ck_assert_int_ge(j, 0);
        ck_assert_str_eq(gguf_tensor_name(ctx, j, NULL), name);
    }
    for (int64_t i = 0; i < gguf_n_kv(ctx); i++) {
        size_t klen, plen;
        const char *key = gguf_kv_key(ctx, i, &klen);
        ck_assert_ptr_nonnull(key);
        ck_assert_uint_gt(klen, 0);
        ck_assert_int_eq(gguf_find_key(ctx, key, klen), i);
        ck_assert_int_eq(gguf_find_id(ctx, gguf_kv_id(ctx, i)), i);
        ck_assert_ptr_nonnull(gguf_kv_payload(ctx, i, &plen));
        ck_assert_uint_lt(gguf_kv_type(ctx, i), GGUF_TYPE_COUNT);
    }
}

/* ---- the corrupt-case table ------------------------------------------------ */

static void check_case(const struct corrupt_case *k, gguf_ctx *ctx,
                       enum gguf_status st, const struct gguf_error *err,
                       const char *how) {
    switch (corrupt_verdict(k)) {
    case CORRUPT_REJECT:
        ck_assert_msg(st == k->status, "%s (%s): status %s, expected %s; message: %s",
                      k->name, how, gguf_status_name(st), gguf_status_name(k->status),
                      st ? err->msg : "");
        ck_assert_ptr_null(ctx);
        ck_assert_int_eq(err->code, k->status);
        ck_assert_msg(strstr(err->msg, k->msg), "%s (%s): message \"%s\" lacks \"%s\"",
                      k->name, how, err->msg, k->msg);
        ck_assert_msg(!strchr(err->msg, '\n'), "%s: message has a newline", k->name);
        break;
    case CORRUPT_LOOSE:
        ck_assert_msg(st == GGUF_OK, "%s (%s): refused: %s", k->name, how, err->msg);
        ck_assert_msg(has_warning(ctx, k->msg), "%s (%s): no warning with \"%s\" (%d warnings%s%s)",
                      k->name, how, k->msg, gguf_n_warnings(ctx),
                      gguf_n_warnings(ctx) ? ", first: " : "",
                      gguf_n_warnings(ctx) ? gguf_warning(ctx, 0) : "");
        check_sane(ctx);
        break;
    case CORRUPT_ACCEPT:
        ck_assert_msg(st == GGUF_OK, "%s (%s): refused: %s", k->name, how, err->msg);
        ck_assert_msg(gguf_n_warnings(ctx) == 0, "%s (%s): unexpected warning: %s",
                      k->name, how, gguf_warning(ctx, 0));
        check_sane(ctx);
        break;
    }
}

START_TEST(corrupt_table) {
    ck_assert_uint_gt(n_corrupt_cases, 50);
    for (size_t i = 0; i < n_corrupt_cases; i++) {
        const struct corrupt_case *k = &corrupt_cases[i];
        struct craft c = {0};
        k->build(&c);
        ck_assert(!c.failed);
        /* names are file stems */
        ck_assert_uint_eq(strspn(k->name, "abcdefghijklmnopqrstuvwxyz0123456789_"), strlen(k->name));
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(corrupt_cases[j].name, k->name);
        ck_assert_msg(corrupt_verdict(k) == CORRUPT_ACCEPT || k->msg[0], "%s: no message", k->name);

        gguf_ctx *ctx = NULL;
        struct gguf_error err = {0};
        enum gguf_status st = gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err);
        check_case(k, ctx, st, &err, "memory");
        gguf_close(ctx);

        /* The same through a file (pread path). */
        const char *path = tmp_file(craft_data(&c), craft_len(&c));
        ctx = NULL;
        memset(&err, 0, sizeof err);
        st = gguf_open(&ctx, path, 0, &err);
        check_case(k, ctx, st, &err, "file");
        if (ctx) {
            ck_assert_int_ge(gguf_fd(ctx), 0);
            ck_assert_str_eq(gguf_path(ctx), path);
        }
        gguf_close(ctx);
        unlink(path);
        craft_free(&c);
    }
}
END_TEST

/* The table itself can fail: a case whose message is wrong is caught. */
START_TEST(messages_are_checked) {
    struct craft c = {0};
    craft_header(&c, 3, 0, 1);
    craft_kv_u32(&c, "general.alignment", 48);
    gguf_ctx *ctx = NULL;
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err), GGUF_E_FORMAT);
    ck_assert_ptr_null(strstr(err.msg, "found 47"));
    ck_assert_str_eq(err.msg, "key 'general.alignment' must be a uint32 power of two, found 48 (at offset 24)");
    craft_free(&c);
}
END_TEST

/* ---- getters on crafted files ---------------------------------------------- */

static gguf_ctx *open_case(const char *name, unsigned flags) {
    for (size_t i = 0; i < n_corrupt_cases; i++) {
        if (strcmp(corrupt_cases[i].name, name) != 0)
            continue;
        struct craft c = {0};
        corrupt_cases[i].build(&c);
        gguf_ctx *ctx = NULL;
        struct gguf_error err = {0};
        enum gguf_status st = gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), flags, &err);
        craft_free(&c);
        ck_assert_msg(st == GGUF_OK, "%s: %s", name, err.msg);
        return ctx;
    }
    ck_abort_msg("no case %s", name);
    return NULL;
}

static int64_t key(const gguf_ctx *ctx, const char *k) {
    int64_t i = gguf_find_key(ctx, k, strlen(k));
    ck_assert_msg(i >= 0, "key %s not found", k);
    return i;
}

START_TEST(kv_getters) {
    gguf_ctx *ctx = open_case("all_value_types", 0);
    char tb[32];
    uint64_t u;
    int64_t s;
    const char *str;
    size_t len;

    ck_assert_int_eq(gguf_n_kv(ctx), 25);
    ck_assert_uint_eq(gguf_version(ctx), 3);
    ck_assert_uint_eq(gguf_alignment(ctx), 32);
    ck_assert_int_eq(gguf_fd(ctx), -1);
    ck_assert_ptr_null(gguf_path(ctx));
    struct gguf_ident id;
    ck_assert(!gguf_ident(ctx, &id)); /* memory: no file to match */
    for (int64_t i = 0; i < gguf_n_kv(ctx); i++)
        ck_assert_uint_eq(gguf_kv_id(ctx, i), (uint32_t)i + 1);
    ck_assert_uint_eq(ctx->next_id, 26);

    ck_assert(gguf_kv_get_u64(ctx, key(ctx, "t.u8"), &u) && u == 255);
    ck_assert(gguf_kv_get_u64(ctx, key(ctx, "t.u16"), &u) && u == 65535);
    ck_assert(gguf_kv_get_u64(ctx, key(ctx, "t.u32"), &u) && u == UINT32_MAX);
    ck_assert(gguf_kv_get_u64(ctx, key(ctx, "t.u64"), &u) && u == UINT64_MAX);
    ck_assert(!gguf_kv_get_u64(ctx, key(ctx, "t.i8"), &u));
    ck_assert(!gguf_kv_get_u64(ctx, key(ctx, "t.str"), &u));
    ck_assert(gguf_kv_get_i64(ctx, key(ctx, "t.i8"), &s) && s == -128);
    ck_assert(gguf_kv_get_i64(ctx, key(ctx, "t.i16"), &s) && s == -32768);
    ck_assert(gguf_kv_get_i64(ctx, key(ctx, "t.i32"), &s) && s == INT32_MIN);
    ck_assert(gguf_kv_get_i64(ctx, key(ctx, "t.i64"), &s) && s == INT64_MIN);
    ck_assert(gguf_kv_get_i64(ctx, key(ctx, "t.u32"), &s) && s == UINT32_MAX);
    s = 7;
    ck_assert(!gguf_kv_get_i64(ctx, key(ctx, "t.u64"), &s)); /* does not fit */
    ck_assert_int_eq(s, 7);
    ck_assert(!gguf_kv_get_i64(ctx, key(ctx, "t.f32"), &s));
    ck_assert(gguf_kv_get_str(ctx, key(ctx, "t.str"), &str, &len));
    ck_assert_uint_eq(len, 5);
    ck_assert(memcmp(str, "hello", 5) == 0);
    ck_assert(gguf_kv_get_str(ctx, key(ctx, "t.str_empty"), &str, &len) && len == 0);
    ck_assert(!gguf_kv_get_str(ctx, key(ctx, "t.u8"), &str, &len));

    ck_assert_str_eq(gguf_kv_type_str(ctx, key(ctx, "t.f64"), tb, sizeof tb), "float64");
    ck_assert_str_eq(gguf_kv_type_str(ctx, key(ctx, "t.bool_true"), tb, sizeof tb), "bool");
    ck_assert_str_eq(gguf_kv_type_str(ctx, key(ctx, "t.arr_str"), tb, sizeof tb), "array[string]");
    ck_assert_str_eq(gguf_kv_type_str(ctx, key(ctx, "t.arr_u32"), tb, sizeof tb), "array[uint32]");
    ck_assert_str_eq(gguf_kv_type_str(ctx, -1, tb, sizeof tb), "?");

    int64_t a = key(ctx, "t.arr_str");
    ck_assert_int_eq(gguf_kv_type(ctx, a), GGUF_TYPE_ARRAY);
    ck_assert_int_eq(gguf_kv_arr_type(ctx, a), GGUF_TYPE_STRING);
    ck_assert_uint_eq(gguf_kv_arr_n(ctx, a), 4);
    ck_assert_int_eq(gguf_kv_arr_type(ctx, key(ctx, "t.u8")), GGUF_TYPE_COUNT);
    ck_assert_uint_eq(gguf_kv_arr_n(ctx, key(ctx, "t.u8")), 0);

    /* payloads are the on-disk bytes after the type field */
    const uint8_t *p = gguf_kv_payload(ctx, key(ctx, "t.arr_u32"), &len);
    ck_assert_uint_eq(len, 12 + 12);
    ck_assert_uint_eq(gguf_rd32(p), GGUF_TYPE_UINT32);
    ck_assert_uint_eq(gguf_rd64(p + 4), 3);
    ck_assert_uint_eq(gguf_rd32(p + 20), 3);
    p = gguf_kv_payload(ctx, key(ctx, "t.arr_str"), &len);
    ck_assert_uint_eq(len, 12 + 8 + 8 + 1 + 8 + 5 + 8 + 10);
    p = gguf_kv_payload(ctx, key(ctx, "t.u16"), &len);
    ck_assert_uint_eq(len, 2);
    ck_assert(p[0] == 0xff && p[1] == 0xff);

    size_t klen;
    ck_assert_str_eq(gguf_kv_key(ctx, 0, &klen), "t.u8");
    ck_assert_uint_eq(klen, 4);

    /* out of range */
    ck_assert_ptr_null(gguf_kv_key(ctx, 25, &klen));
    ck_assert_uint_eq(klen, 0);
    ck_assert_ptr_null(gguf_kv_payload(ctx, -1, &len));
    ck_assert_int_eq(gguf_kv_type(ctx, 99), GGUF_TYPE_COUNT);
    ck_assert_uint_eq(gguf_kv_id(ctx, 99), 0);
    ck_assert_int_eq(gguf_find_id(ctx, 0), -1);
    ck_assert_int_eq(gguf_find_id(ctx, 26), -1);
    ck_assert_int_eq(gguf_find_key(ctx, "t.u", 3), -1);
    ck_assert_int_eq(gguf_find_key(ctx, "t.u8x", 5), -1);
    ck_assert_int_eq(gguf_find_key(ctx, "t.u8x", 4), 0);
    gguf_close(ctx);
}
END_TEST

START_TEST(tensor_getters) {
    gguf_ctx *ctx = open_case("quant_types", 0);
    static const char *const names[] = {"q4_0", "q8_0", "q4_k", "bf16", "mxfp4"};
    static const uint64_t sizes[] = {36, 68, 144, 8, 17};
    static const uint64_t offs[] = {0, 64, 160, 320, 352};
    ck_assert_int_eq(gguf_n_tensors(ctx), 5);
    /* 5 infos: 24 + 8+4 + 4+16 + 4+4 + 4+4... computed: the data offset is
     * the end of the infos rounded up to 32 */
    ck_assert_uint_eq(gguf_data_offset(ctx) % 32, 0);
    ck_assert_uint_eq(gguf_file_size(ctx), gguf_data_offset(ctx) + 384);
    for (int64_t i = 0; i < 5; i++) {
        size_t len;
        ck_assert_str_eq(gguf_tensor_name(ctx, i, &len), names[i]);
        ck_assert_uint_eq(len, strlen(names[i]));
        ck_assert_int_eq(gguf_find_tensor(ctx, names[i], len), i);
        ck_assert_uint_eq(gguf_tensor_size(ctx, i), sizes[i]);
        ck_assert_uint_eq(gguf_tensor_rel_offset(ctx, i), offs[i]);
        ck_assert_uint_eq(gguf_tensor_offset(ctx, i), gguf_data_offset(ctx) + offs[i]);
    }
    ck_assert_uint_eq(gguf_tensor_type(ctx, 2), 12);
    ck_assert_uint_eq(gguf_tensor_n_dims(ctx, 0), 2);
    const int64_t *ne = gguf_tensor_ne(ctx, 0);
    ck_assert(ne[0] == 32 && ne[1] == 2 && ne[2] == 1 && ne[3] == 1);
    ne = gguf_tensor_ne(ctx, 1);
    ck_assert(ne[0] == 64 && ne[1] == 1 && ne[2] == 1 && ne[3] == 1);
    ck_assert_int_eq(gguf_find_tensor(ctx, "q4", 2), -1);
    ck_assert_ptr_null(gguf_tensor_name(ctx, 5, NULL));
    ck_assert_ptr_null(gguf_tensor_ne(ctx, -1));
    ck_assert_uint_eq(gguf_tensor_size(ctx, 5), 0);
    gguf_close(ctx);

    /* a scalar has n_dims 0 and ne all 1 */
    ctx = open_case("scalar_tensor", 0);
    ck_assert_uint_eq(gguf_tensor_n_dims(ctx, 0), 0);
    ne = gguf_tensor_ne(ctx, 0);
    ck_assert(ne[0] == 1 && ne[1] == 1 && ne[2] == 1 && ne[3] == 1);
    ck_assert_uint_eq(gguf_tensor_size(ctx, 0), 4);
    gguf_close(ctx);

    /* alignment 1: no padding at all */
    ctx = open_case("alignment_1", 0);
    ck_assert_uint_eq(gguf_alignment(ctx), 1);
    ck_assert_uint_eq(gguf_data_offset(ctx) + 35, gguf_file_size(ctx));
    gguf_close(ctx);

    /* zero tensors: the data offset may lie past a short file */
    ctx = open_case("zero_tensors_unpadded", 0);
    ck_assert_uint_eq(gguf_file_size(ctx), 43);
    ck_assert_uint_eq(gguf_data_offset(ctx), 64);
    gguf_close(ctx);
}
END_TEST

START_TEST(odd_names) {
    gguf_ctx *ctx = open_case("odd_names", 0);
    size_t len;
    ck_assert_int_eq(gguf_find_key(ctx, "a\0b", 3), 0);
    ck_assert_int_eq(gguf_find_key(ctx, "a", 1), -1);
    const char *k = gguf_kv_key(ctx, 0, &len);
    ck_assert_uint_eq(len, 3);
    ck_assert(memcmp(k, "a\0b", 4) == 0); /* NUL-terminated copy */
    ck_assert_int_eq(gguf_find_key(ctx, "bad\xff\xfe.utf8", 10), 1);
    ck_assert_int_eq(gguf_find_tensor(ctx, "a\0x", 3), 0);
    ck_assert_int_eq(gguf_find_tensor(ctx, "a", 1), -1);
    ck_assert_int_eq(gguf_find_tensor(ctx, "..", 2), 1);
    gguf_close(ctx);

    ctx = open_case("tensor_name_empty", 0);
    ck_assert_int_eq(gguf_find_tensor(ctx, "", 0), 0);
    ck_assert_str_eq(gguf_tensor_name(ctx, 0, &len), "");
    ck_assert_uint_eq(len, 0);
    gguf_close(ctx);
}
END_TEST

START_TEST(warnings_and_loose) {
    /* sizes of unknown types come from the next offset / end of file */
    gguf_ctx *ctx = open_case("unknown_type_50_sized_by_next", 0);
    ck_assert_uint_eq(gguf_tensor_size(ctx, 0), 64);
    ck_assert_uint_eq(gguf_tensor_type(ctx, 0), 50);
    ck_assert_uint_eq(gguf_tensor_size(ctx, 1), 32);
    ck_assert_int_eq(gguf_n_warnings(ctx), 1);
    ck_assert_ptr_null(gguf_warning(ctx, 1));
    ck_assert_ptr_null(gguf_warning(ctx, -1));
    gguf_close(ctx);
    ctx = open_case("gap_between_tensors", 0);
    ck_assert_int_eq(gguf_n_warnings(ctx), 1);
    ck_assert_uint_eq(gguf_tensor_offset(ctx, 1), gguf_data_offset(ctx) + 64);
    gguf_close(ctx);

    /* warnings are capped */
    ctx = gguf_new(3);
    for (int i = 0; i < 1000; i++)
        gguf_warn(ctx, "warning %d\nwith a newline", i);
    ck_assert_int_le(gguf_n_warnings(ctx), 64);
    ck_assert_str_eq(gguf_warning(ctx, 0), "warning 0 with a newline");
    ck_assert(has_warning(ctx, "omitted"));
    gguf_close(ctx);
}
END_TEST

START_TEST(nested_arrays) {
    /* refused by default, opened with GGUF_OPEN_ALLOW_NESTED */
    gguf_ctx *ctx = open_case("nested_array", GGUF_OPEN_ALLOW_NESTED);
    char tb[32];
    ck_assert_str_eq(gguf_kv_type_str(ctx, 0, tb, sizeof tb), "array[array]");
    ck_assert_int_eq(gguf_kv_arr_type(ctx, 0), GGUF_TYPE_ARRAY);
    gguf_close(ctx);

    for (int depth = 1; depth <= GGUF_MAX_NESTING + 2; depth++) {
        struct craft c = {0};
        craft_header(&c, 3, 0, 1);
        craft_kv_head(&c, "deep", GGUF_TYPE_ARRAY);
        for (int d = 1; d < depth; d++) {
            craft_u32(&c, GGUF_TYPE_ARRAY);
            craft_u64(&c, 1);
        }
        craft_u32(&c, GGUF_TYPE_UINT8);
        craft_u64(&c, 1);
        craft_u8(&c, 9);
        struct gguf_error err = {0};
        ctx = NULL;
        enum gguf_status st = gguf_open_mem(&ctx, craft_data(&c), craft_len(&c),
                                            GGUF_OPEN_ALLOW_NESTED, &err);
        if (depth <= GGUF_MAX_NESTING) {
            ck_assert_msg(st == GGUF_OK, "depth %d: %s", depth, err.msg);
        } else {
            ck_assert_int_eq(st, GGUF_E_FORMAT);
            ck_assert_ptr_nonnull(strstr(err.msg, "nested more than 8 levels deep"));
        }
        gguf_close(ctx);
        /* without the flag, any depth > 1 is refused */
        ctx = NULL;
        st = gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err);
        ck_assert_int_eq(st, depth == 1 ? GGUF_OK : GGUF_E_FORMAT);
        gguf_close(ctx);
        craft_free(&c);
    }

    /* many inner arrays claimed: each needs 12 bytes, refused at once */
    struct craft c = {0};
    craft_header(&c, 3, 0, 1);
    craft_kv_arr(&c, "many", GGUF_TYPE_ARRAY, 1000000);
    craft_zeros(&c, 1000);
    struct gguf_error err = {0};
    ctx = NULL;
    ck_assert_int_eq(gguf_open_mem(&ctx, craft_data(&c), craft_len(&c),
                                   GGUF_OPEN_ALLOW_NESTED, &err), GGUF_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "needs at least 12000000 bytes"));
    craft_free(&c);
}
END_TEST

/* ---- hostile input ---------------------------------------------------------- */

START_TEST(hostile_fast) {
    /* Claims that would take long to walk or much memory if believed. */
    struct craft c = {0};
    struct gguf_error err = {0};
    gguf_ctx *ctx = NULL;
    clock_t t0 = clock();

    /* 2^30 strings claimed, 10 MB present: refused before any loop */
    craft_header(&c, 3, 0, 1);
    craft_kv_arr(&c, "s", GGUF_TYPE_STRING, UINT64_C(1) << 30);
    craft_zeros(&c, 10 << 20);
    ck_assert_int_eq(gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err), GGUF_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "needs at least 8589934592 bytes"));
    craft_free(&c);

    /* a million empty strings really present: linear, accepted */
    craft_header(&c, 3, 0, 1);
    craft_kv_arr(&c, "s", GGUF_TYPE_STRING, 1000000);
    craft_zeros(&c, 8000000);
    ck_assert_int_eq(gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err), GGUF_OK);
    ck_assert_uint_eq(gguf_kv_arr_n(ctx, 0), 1000000);
    gguf_close(ctx);
    ctx = NULL;
    /* the same but one byte short */
    ck_assert_int_eq(gguf_open_mem(&ctx, craft_data(&c), craft_len(&c) - 1, 0, &err), GGUF_E_FORMAT);
    craft_free(&c);

    /* key count huge, and the most keys that can fit a small file */
    craft_header(&c, 3, UINT64_MAX / 2, UINT64_MAX / 2);
    craft_zeros(&c, 100);
    ck_assert_int_eq(gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err), GGUF_E_FORMAT);
    craft_free(&c);

    /* 200000 tiny keys: duplicates are found through the index, not by
     * comparing every pair */
    craft_header(&c, 3, 0, 200000);
    for (int i = 0; i < 200000; i++) {
        char k[32];
        snprintf(k, sizeof k, "k%d", i);
        craft_kv_u8(&c, k, 1);
    }
    ck_assert_int_eq(gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err), GGUF_OK);
    ck_assert_int_eq(gguf_n_kv(ctx), 200000);
    ck_assert_int_eq(gguf_find_key(ctx, "k199999", 7), 199999);
    check_sane(ctx);
    gguf_close(ctx);
    ctx = NULL;
    craft_kv_u8(&c, "k123456", 1);
    craft_put64(&c, 16, 200001);
    ck_assert_int_eq(gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err), GGUF_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "duplicate key 'k123456'"));
    craft_free(&c);

    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    ck_assert_msg(secs < 20, "hostile inputs took %.1f s", secs);
}
END_TEST

/* A header larger than the first 1 MiB read, through a file: the reader
 * grows its buffer in the middle of a value. */
START_TEST(big_header_file) {
    struct craft c = {0};
    size_t big = (3u << 20) + 12345;
    char *s = malloc(big + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, 'x', big);
    s[big] = '\0';
    craft_header(&c, 3, 1, 3);
    craft_kv_u32(&c, "a", 1);
    craft_kv_str(&c, "big", s);
    craft_kv_arr(&c, "arr", GGUF_TYPE_UINT32, 400000);
    for (uint32_t i = 0; i < 400000; i++)
        craft_u32(&c, i);
    craft_tensor(&c, "t0", 1, (const int64_t[]){8}, 0, 0);
    craft_pad(&c, 32);
    craft_zeros(&c, 32);
    free(s);

    const char *path = tmp_file(craft_data(&c), craft_len(&c));
    gguf_ctx *ctx = NULL;
    struct gguf_error err = {0};
    ck_assert_msg(gguf_open(&ctx, path, 0, &err) == GGUF_OK, "%s", err.msg);
    const char *v;
    size_t len;
    ck_assert(gguf_kv_get_str(ctx, 1, &v, &len));
    ck_assert_uint_eq(len, big);
    ck_assert(v[0] == 'x' && v[big - 1] == 'x');
    const uint8_t *p = gguf_kv_payload(ctx, 2, &len);
    ck_assert_uint_eq(len, 12 + 1600000);
    ck_assert_uint_eq(gguf_rd32(p + 12 + 4 * 399999), 399999);
    ck_assert_uint_eq(gguf_data_offset(ctx) + 32, craft_len(&c));
    ck_assert_uint_le(ctx->hdr_len, gguf_data_offset(ctx));
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert(ctx->dev == sb.st_dev && ctx->ino == sb.st_ino);
    ck_assert_int_eq(ctx->mtime_ns, (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec);
    /* the fd is open read-only, close-on-exec */
    int fl = fcntl(gguf_fd(ctx), F_GETFL);
    ck_assert_int_eq(fl & O_ACCMODE, O_RDONLY);
    ck_assert(!(fl & O_NONBLOCK));
    ck_assert(fcntl(gguf_fd(ctx), F_GETFD) & FD_CLOEXEC);
    /* released (a shard of a set): the header and the identity stay */
    int64_t nkv = gguf_n_kv(ctx);
    struct gguf_ident id;
    gguf_release_fd(ctx);
    ck_assert_int_eq(gguf_fd(ctx), -1);
    ck_assert(gguf_ident(ctx, &id));
    ck_assert(id.dev == sb.st_dev && id.ino == sb.st_ino);
    ck_assert_uint_eq(id.size, (uint64_t)sb.st_size);
    ck_assert_int_eq(id.mtime_ns, ctx->mtime_ns);
    ck_assert_int_eq(gguf_n_kv(ctx), nkv);
    ck_assert_ptr_nonnull(gguf_path(ctx));
    gguf_release_fd(ctx); /* twice: nothing more */
    gguf_close(ctx);

    /* truncated inside the big string, through the file path */
    ck_assert_int_eq(truncate(path, 2 << 20), 0);
    ctx = NULL;
    ck_assert_int_eq(gguf_open(&ctx, path, 0, &err), GGUF_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "key 'big': string length 3158073 at offset 56 runs past the end of the file (2097152)"));

    /* read-write open */
    ck_assert_int_eq(truncate(path, 0), 0);
    ctx = NULL;
    ck_assert_int_eq(gguf_open(&ctx, path, GGUF_OPEN_RDWR, &err), GGUF_E_FORMAT);
    unlink(path);
    craft_free(&c);
}
END_TEST

/* gguf_open_reader (issue 13): a source read through struct gguf_reader
 * (here memory, counting the reads) gets the reader's first chunk, then
 * growing ranges, never the tensor data; the same bytes parse as through a
 * file, and a reader's failure is the open's status. */
struct count_src {
    const uint8_t *p;
    size_t len;
    int reads;
    uint64_t first_n, max_end;
    int fail_at; /* read number that fails; 0: none */
};
static enum gguf_status count_read(void *u, uint64_t off, void *buf, size_t n,
                                   size_t *got, struct gguf_error *err) {
    struct count_src *c = u;
    if (++c->reads == c->fail_at)
        return gguf_fail(err, GGUF_E_IO, "network down at %llu",
                         (unsigned long long)off);
    if (c->reads == 1)
        c->first_n = n;
    size_t m = off < c->len ? (c->len - off < n ? c->len - off : n) : 0;
    memcpy(buf, c->p + off, m);
    if (off + m > c->max_end)
        c->max_end = off + m;
    *got = m;
    return GGUF_OK;
}

START_TEST(reader_source) {
    struct craft c = {0};
    size_t big = 300000;
    char *s = malloc(big + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, 'y', big);
    s[big] = '\0';
    craft_header(&c, 3, 1, 2);
    craft_kv_u32(&c, "a", 7);
    craft_kv_str(&c, "big", s);
    craft_tensor(&c, "t0", 1, (const int64_t[]){1 << 20}, 0, 0);
    craft_pad(&c, 32);
    size_t data_at = craft_len(&c);
    craft_zeros(&c, 4 << 20);
    free(s);

    struct count_src src = {.p = craft_data(&c), .len = craft_len(&c)};
    struct gguf_reader rd = {.read = count_read, .u = &src,
                             .size = craft_len(&c), .first_chunk = 32768};
    gguf_ctx *ctx = NULL;
    struct gguf_error err = {0};
    ck_assert_msg(gguf_open_reader(&ctx, &rd, "http://h/x.gguf", 0, &err) ==
                      GGUF_OK, "%s", err.msg);
    ck_assert_uint_eq(src.first_n, 32768);
    ck_assert_int_le(src.reads, 6);  /* 32K, then the string's need, ... */
    /* at most double the header (the doubling), never the whole file */
    ck_assert_uint_le(src.max_end, 2 * data_at);
    ck_assert_int_eq(gguf_fd(ctx), -1);
    ck_assert_str_eq(gguf_path(ctx), "http://h/x.gguf");
    ck_assert_uint_eq(gguf_data_offset(ctx), data_at);
    ck_assert_uint_eq(gguf_file_size(ctx), craft_len(&c));
    const char *v;
    size_t len;
    ck_assert(gguf_kv_get_str(ctx, 1, &v, &len));
    ck_assert_uint_eq(len, big);
    gguf_close(ctx);

    /* the reader fails on its second read: that status and message */
    src = (struct count_src){.p = craft_data(&c), .len = craft_len(&c),
                             .fail_at = 2};
    ctx = NULL;
    ck_assert_int_eq(gguf_open_reader(&ctx, &rd, "u", 0, &err), GGUF_E_IO);
    ck_assert_ptr_null(ctx);
    ck_assert_ptr_nonnull(strstr(err.msg, "network down at 32768"));
    /* a source that ends early: "shrank" */
    src = (struct count_src){.p = craft_data(&c), .len = 40000};
    ck_assert_int_eq(gguf_open_reader(&ctx, &rd, "u", 0, &err),
                     GGUF_E_CHANGED);
    /* never read-write */
    ck_assert_int_eq(gguf_open_reader(&ctx, &rd, "u", GGUF_OPEN_RDWR, &err),
                     GGUF_E_PERM);
    craft_free(&c);
}
END_TEST

START_TEST(open_errors) {
    gguf_ctx *ctx = (gguf_ctx *)1;
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_open(&ctx, "/nonexistent/x.gguf", 0, &err), GGUF_E_IO);
    ck_assert_ptr_null(ctx);
    ck_assert_int_eq(err.sys_errno, ENOENT);
    ck_assert_ptr_null(strstr(err.msg, "/nonexistent")); /* no file name prefix */
    ck_assert_int_eq(gguf_open(&ctx, "/", 0, &err), GGUF_E_INVAL);
    /* a FIFO is refused at once, not waited on */
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/ggufs-test-fifo-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(gguf_open(&ctx, fifo, 0, &err), GGUF_E_INVAL);
    ck_assert_str_eq(err.msg, "not a regular file");
    unlink(fifo);
    ck_assert_int_eq(gguf_open(NULL, "x", 0, &err), GGUF_E_INVAL);
    ck_assert_int_eq(gguf_open_mem(&ctx, NULL, 5, 0, &err), GGUF_E_INVAL);
    ck_assert_int_eq(gguf_open_mem(&ctx, NULL, 0, 0, NULL), GGUF_E_FORMAT);

    /* a read-write open of a good file keeps an O_RDWR fd */
    struct craft c = {0};
    craft_header(&c, 3, 0, 0);
    const char *path = tmp_file(craft_data(&c), craft_len(&c));
    ck_assert_int_eq(gguf_open(&ctx, path, GGUF_OPEN_RDWR, &err), GGUF_OK);
    ck_assert_int_eq(fcntl(gguf_fd(ctx), F_GETFL) & O_ACCMODE, O_RDWR);
    gguf_close(ctx);
    unlink(path);
    craft_free(&c);
}
END_TEST

START_TEST(new_ctx) {
    gguf_ctx *ctx = gguf_new(2);
    ck_assert_ptr_nonnull(ctx);
    ck_assert_uint_eq(gguf_version(ctx), 2);
    ck_assert_uint_eq(gguf_alignment(ctx), 32);
    ck_assert_int_eq(gguf_n_kv(ctx), 0);
    ck_assert_int_eq(gguf_n_tensors(ctx), 0);
    ck_assert_int_eq(gguf_fd(ctx), -1);
    ck_assert_int_eq(gguf_find_key(ctx, "a", 1), -1);
    ck_assert_int_eq(gguf_find_tensor(ctx, "a", 1), -1);
    ck_assert_int_eq(gguf_n_warnings(ctx), 0);
    ck_assert_uint_eq(ctx->next_id, 1);
    gguf_close(ctx);
    gguf_close(NULL);
    /* getters on NULL never crash */
    ck_assert_int_eq(gguf_n_kv(NULL), 0);
    ck_assert_ptr_null(gguf_kv_key(NULL, 0, NULL));
    ck_assert_int_eq(gguf_find_key(NULL, "a", 1), -1);
}
END_TEST

/* ---- real files ---------------------------------------------------------------- */

static const char *const MODELS[] = {
    "ggml-vocab-bert-bge.gguf", "ggml-vocab-gpt-2.gguf",
    "ggml-vocab-llama-spm.gguf", "tiny-llama-f32.gguf",
};

START_TEST(real_files) {
    const char *dir = models_dir();
    if (!dir) {
        fprintf(stderr, "test_read: no models folder ($GGUFS_SRCDIR/../shared/models), skipping real files\n");
        return;
    }
    for (size_t m = 0; m < 4; m++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, MODELS[m]);
        gguf_ctx *ctx = NULL;
        struct gguf_error err = {0};
        ck_assert_msg(gguf_open(&ctx, path, 0, &err) == GGUF_OK, "%s: %s", MODELS[m], err.msg);
        ck_assert_int_eq(gguf_n_warnings(ctx), 0);
        check_sane(ctx);
        struct stat sb;
        ck_assert_int_eq(stat(path, &sb), 0);
        ck_assert_uint_eq(gguf_file_size(ctx), (uint64_t)sb.st_size);
        ck_assert_uint_eq(gguf_version(ctx), 3);

        int64_t tok = key(ctx, "tokenizer.ggml.model");
        ck_assert_int_eq(gguf_kv_type(ctx, tok), GGUF_TYPE_STRING);
        char tb[32];
        int64_t arch = key(ctx, "general.architecture");
        const char *s;
        size_t len;
        ck_assert(gguf_kv_get_str(ctx, arch, &s, &len));
        ck_assert_uint_gt(len, 0);

        if (strcmp(MODELS[m], "tiny-llama-f32.gguf") == 0) {
            /* ggml's reader (tests/refdump) sees 21 tensors, data at 1792,
             * token_embd.weight first and output.weight last, ending the file */
            ck_assert_int_eq(gguf_n_tensors(ctx), 21);
            ck_assert_uint_eq(gguf_data_offset(ctx), 1792);
            ck_assert_int_eq(gguf_find_tensor(ctx, "token_embd.weight", 17), 0);
            ck_assert_uint_eq(gguf_tensor_offset(ctx, 0), 1792);
            ck_assert_uint_eq(gguf_tensor_size(ctx, 0), 65536);
            ck_assert_int_eq(gguf_find_tensor(ctx, "output.weight", 13), 20);
            ck_assert_uint_eq(gguf_tensor_offset(ctx, 20), 592896);
            ck_assert_uint_eq(gguf_tensor_size(ctx, 20), 65536);
            ck_assert_uint_eq(gguf_tensor_offset(ctx, 20) + 65536, gguf_file_size(ctx));
            ck_assert_int_eq(gguf_n_kv(ctx), 13);
            ck_assert(len == 5 && memcmp(s, "llama", 5) == 0);
            /* f32 tensors laid out contiguously; the last ends at the end */
            uint64_t end = 0;
            for (int64_t i = 0; i < 21; i++) {
                ck_assert_uint_eq(gguf_tensor_type(ctx, i), 0);
                const int64_t *ne = gguf_tensor_ne(ctx, i);
                ck_assert_uint_eq(gguf_tensor_size(ctx, i), 4 * (uint64_t)(ne[0] * ne[1] * ne[2] * ne[3]));
                uint64_t e = gguf_tensor_offset(ctx, i) + gguf_tensor_size(ctx, i);
                if (e > end)
                    end = e;
            }
            ck_assert_uint_le(end, gguf_file_size(ctx));
            ck_assert_int_ge(gguf_find_tensor(ctx, "token_embd.weight", 17), 0);
            ck_assert_int_ge(gguf_find_tensor(ctx, "blk.1.ffn_up.weight", 19), 0);
        } else {
            ck_assert_int_eq(gguf_n_tensors(ctx), 0);
            int64_t t = key(ctx, "tokenizer.ggml.tokens");
            ck_assert_str_eq(gguf_kv_type_str(ctx, t, tb, sizeof tb), "array[string]");
            uint64_t n = gguf_kv_arr_n(ctx, t);
            ck_assert_uint_ge(n, 30000);
            ck_assert_uint_le(n, 60000);
            int64_t tt = gguf_find_key(ctx, "tokenizer.ggml.token_type", 25);
            if (tt >= 0) {
                ck_assert_str_eq(gguf_kv_type_str(ctx, tt, tb, sizeof tb), "array[int32]");
                ck_assert_uint_eq(gguf_kv_arr_n(ctx, tt), n);
            }
            int64_t sc = gguf_find_key(ctx, "tokenizer.ggml.scores", 21);
            if (sc >= 0)
                ck_assert_uint_eq(gguf_kv_arr_n(ctx, sc), n);
        }
        /* the same bytes through memory give the same result */
        size_t flen;
        uint8_t *bytes = slurp(path, &flen);
        ck_assert_ptr_nonnull(bytes);
        gguf_ctx *mc = NULL;
        ck_assert_int_eq(gguf_open_mem(&mc, bytes, flen, 0, &err), GGUF_OK);
        ck_assert_int_eq(gguf_n_kv(mc), gguf_n_kv(ctx));
        ck_assert_uint_eq(gguf_data_offset(mc), gguf_data_offset(ctx));
        for (int64_t i = 0; i < gguf_n_kv(ctx); i++) {
            size_t a, b;
            const uint8_t *pa = gguf_kv_payload(ctx, i, &a), *pb = gguf_kv_payload(mc, i, &b);
            ck_assert_uint_eq(a, b);
            ck_assert(memcmp(pa, pb, a) == 0);
            /* and the payload is exactly the file's bytes */
            ck_assert(pa >= ctx->hdr && pa + a <= ctx->hdr + ctx->hdr_len);
            ck_assert(memcmp(pa, bytes + (pa - ctx->hdr), a) == 0);
        }
        gguf_close(mc);
        free(bytes);
        gguf_close(ctx);
    }
}
END_TEST

/* Every prefix shorter than the header (stepping by `step` after the first
 * `dense` bytes) is refused, and never crashes. */
static void truncations(const uint8_t *bytes, size_t n, size_t dense, size_t step) {
    gguf_ctx *ctx = NULL;
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_open_mem(&ctx, bytes, n, 0, &err), GGUF_OK);
    size_t hdr = ctx->hdr_len, data_end = 0;
    bool tensors = gguf_n_tensors(ctx) > 0;
    for (int64_t i = 0; i < gguf_n_tensors(ctx); i++) {
        uint64_t e = gguf_tensor_offset(ctx, i) + gguf_tensor_size(ctx, i);
        if (e > data_end)
            data_end = (size_t)e;
    }
    gguf_close(ctx);
    for (size_t cut = 0; cut < hdr; cut += cut < dense ? 1 : step) {
        ctx = NULL;
        enum gguf_status st = gguf_open_mem(&ctx, bytes, cut, 0, &err);
        ck_assert_msg(st == GGUF_E_FORMAT, "prefix %zu of %zu: %s", cut, hdr,
                      st ? gguf_status_name(st) : "accepted");
        ck_assert(strlen(err.msg) > 10);
        gguf_close(ctx);
    }
    if (tensors) /* cut in the data: refused as data past the end */
        for (size_t cut = hdr; cut < data_end; cut += (data_end - hdr) / 50 + 1) {
            ctx = NULL;
            ck_assert_int_eq(gguf_open_mem(&ctx, bytes, cut, 0, &err), GGUF_E_FORMAT);
        }
}

START_TEST(truncation_every_byte) {
    /* crafted: every byte */
    for (size_t i = 0; i < n_corrupt_cases; i++) {
        const struct corrupt_case *k = &corrupt_cases[i];
        if (corrupt_verdict(k) != CORRUPT_ACCEPT || strcmp(k->name, "minimal") == 0)
            continue;
        struct craft c = {0};
        k->build(&c);
        truncations(craft_data(&c), craft_len(&c), SIZE_MAX, 1);
        craft_free(&c);
    }
    const char *dir = models_dir();
    if (!dir) {
        fprintf(stderr, "test_read: no models folder, skipping truncation of real files\n");
        return;
    }
    for (size_t m = 0; m < 4; m++) {
        char path[4200];
        size_t n;
        snprintf(path, sizeof path, "%s/%s", dir, MODELS[m]);
        uint8_t *bytes = slurp(path, &n);
        ck_assert_ptr_nonnull(bytes);
        /* tiny-llama: every byte of the header; vocab files (up to 1.7 MB
         * of header): the first 16 KiB, then every 997th byte */
        if (strcmp(MODELS[m], "tiny-llama-f32.gguf") == 0)
            truncations(bytes, n, SIZE_MAX, 1);
        else
            truncations(bytes, n, 16384, 997);
        free(bytes);
    }
}
END_TEST

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static void flips(const uint8_t *orig, size_t n, int rounds, unsigned flags) {
    gguf_ctx *ctx = NULL;
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_open_mem(&ctx, orig, n, flags, &err), GGUF_OK);
    size_t hdr = ctx->hdr_len;
    gguf_close(ctx);
    uint8_t *b = malloc(n);
    ck_assert_ptr_nonnull(b);
    int opened = 0;
    for (int r = 0; r < rounds; r++) {
        memcpy(b, orig, n);
        int k = 1 + (int)(rnd() % 4);
        for (int j = 0; j < k; j++) {
            size_t at = (size_t)(rnd() % hdr);
            switch (rnd() % 3) {
            case 0: b[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 1: b[at] = (uint8_t)rnd(); break;
            default: b[at] = (rnd() & 1) ? 0xff : 0x00; break;
            }
        }
        ctx = NULL;
        enum gguf_status st = gguf_open_mem(&ctx, b, n, flags, &err);
        if (st == GGUF_OK) {
            opened++;
            check_sane(ctx);
        } else {
            ck_assert(st == GGUF_E_FORMAT || st == GGUF_E_UNSUPPORTED);
            ck_assert(err.msg[0] && !strchr(err.msg, '\n'));
        }
        gguf_close(ctx);
    }
    free(b);
    (void)opened;
}

START_TEST(random_flips) {
    rng_state = 0x9e3779b97f4a7c15u;
    static const char *const crafted[] = {"all_value_types", "quant_types", "odd_names", "alignment_64"};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < n_corrupt_cases; j++)
            if (strcmp(corrupt_cases[j].name, crafted[i]) == 0) {
                struct craft c = {0};
                corrupt_cases[j].build(&c);
                flips(craft_data(&c), craft_len(&c), 1500, 0);
                flips(craft_data(&c), craft_len(&c), 500, GGUF_OPEN_ALLOW_NESTED);
                craft_free(&c);
            }
    const char *dir = models_dir();
    if (!dir) {
        fprintf(stderr, "test_read: no models folder, skipping flips in real files\n");
        return;
    }
    char path[4200];
    size_t n;
    snprintf(path, sizeof path, "%s/tiny-llama-f32.gguf", dir);
    uint8_t *bytes = slurp(path, &n);
    ck_assert_ptr_nonnull(bytes);
    flips(bytes, n, 3000, 0);
    free(bytes);
}
END_TEST

/* ---- small pieces ------------------------------------------------------------ */

START_TEST(errors_and_bufs) {
    struct gguf_error err = {0};
    errno = EACCES;
    ck_assert_int_eq(gguf_fail(&err, GGUF_E_IO, "x %d", 5), GGUF_E_IO);
    ck_assert_int_eq(err.sys_errno, EACCES);
    ck_assert_str_eq(err.msg, "x 5");
    errno = EACCES;
    gguf_fail(&err, GGUF_E_FORMAT, "two\nlines");
    ck_assert_int_eq(err.sys_errno, 0);
    ck_assert_str_eq(err.msg, "two lines");
    ck_assert_int_eq(gguf_fail(NULL, GGUF_E_RANGE, "nothing"), GGUF_E_RANGE);
    char longer[2000];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    gguf_fail(&err, GGUF_E_FORMAT, "%s", longer);
    ck_assert_uint_eq(strlen(err.msg), sizeof err.msg - 1);
    for (int s = GGUF_OK; s <= GGUF_E_BUSY; s++)
        ck_assert_str_ne(gguf_status_name((enum gguf_status)s), "unknown status");
    ck_assert_str_eq(gguf_status_name((enum gguf_status)99), "unknown status");

    struct gguf_buf b = {0};
    ck_assert_int_eq(gguf_buf_add(&b, "abc", 3), GGUF_OK);
    ck_assert_int_eq(gguf_buf_add(&b, NULL, 0), GGUF_OK);
    for (int i = 0; i < 10000; i++)
        ck_assert_int_eq(gguf_buf_add(&b, "0123456789", 10), GGUF_OK);
    ck_assert_uint_eq(b.len, 100003);
    ck_assert(memcmp(b.p + 100003 - 10, "0123456789", 10) == 0);
    ck_assert_int_eq(gguf_buf_reserve(&b, SIZE_MAX), GGUF_E_NOMEM);
    ck_assert_int_eq(gguf_buf_reserve(&b, SIZE_MAX - b.len + 1), GGUF_E_NOMEM);
    ck_assert_uint_eq(b.len, 100003);
    gguf_buf_free(&b);
    ck_assert_ptr_null(b.p);
    ck_assert_uint_eq(b.cap, 0);

    char q[GGUF_QUOTE_MAX];
    ck_assert_str_eq(gguf_quote(q, sizeof q, "a.b", 3), "a.b");
    ck_assert_str_eq(gguf_quote(q, sizeof q, "a\0b\n'\\", 6), "a\\x00b\\x0a\\'\\\\");
    ck_assert_str_eq(gguf_quote(q, sizeof q, "\xc3\xa9\xff\xed\xa0\x80", 6), "\xc3\xa9\\xff\\xed\\xa0\\x80");
    char big[1000];
    memset(big, 'z', sizeof big);
    gguf_quote(q, sizeof q, big, sizeof big);
    ck_assert_uint_lt(strlen(q), sizeof q);
    ck_assert_str_eq(q + strlen(q) - 3, "...");
}
END_TEST

static char idx_names[5000][16];
static const char *idx_name(const void *base, int64_t i, size_t *len) {
    (void)base;
    *len = strlen(idx_names[i]);
    return idx_names[i];
}

START_TEST(index_basics) {
    ck_assert_uint_eq(gguf_hash("", 0), UINT64_C(0xcbf29ce484222325));
    ck_assert_uint_eq(gguf_hash("a", 1), UINT64_C(0xaf63dc4c8601ec8c));
    ck_assert_uint_eq(gguf_hash("foobar", 6), UINT64_C(0x85944171f73967e8));
    for (int i = 0; i < 5000; i++)
        snprintf(idx_names[i], sizeof idx_names[i], "name.%d", i);
    struct gguf_index a = {0}, b = {0};
    ck_assert_int_eq(gguf_index_build(&a, 5000, idx_name, NULL), GGUF_OK);
    int64_t dup;
    for (int64_t i = 0; i < 5000; i++) {
        ck_assert_int_eq(gguf_index_add(&b, i, idx_name, NULL, &dup), GGUF_OK);
        ck_assert_int_eq(dup, -1);
    }
    ck_assert_uint_ge(a.n_slots, 10000);
    ck_assert_uint_ge(b.n_slots, 10000);
    for (int64_t i = 0; i < 5000; i++) {
        ck_assert_int_eq(gguf_index_find(&a, idx_names[i], strlen(idx_names[i]), idx_name, NULL), i);
        ck_assert_int_eq(gguf_index_find(&b, idx_names[i], strlen(idx_names[i]), idx_name, NULL), i);
    }
    ck_assert_int_eq(gguf_index_find(&a, "name.5000", 9, idx_name, NULL), -1);
    /* a duplicate is reported, not added */
    strcpy(idx_names[4999], "name.17");
    gguf_index_free(&b);
    for (int64_t i = 0; i < 4999; i++)
        gguf_index_add(&b, i, idx_name, NULL, &dup);
    ck_assert_int_eq(gguf_index_add(&b, 4999, idx_name, NULL, &dup), GGUF_OK);
    ck_assert_int_eq(dup, 17);
    /* build keeps duplicates; find gives the first */
    ck_assert_int_eq(gguf_index_build(&a, 5000, idx_name, NULL), GGUF_OK);
    ck_assert_int_eq(gguf_index_find(&a, "name.17", 7, idx_name, NULL), 17);
    ck_assert_int_eq(gguf_index_build(&a, 0, idx_name, NULL), GGUF_OK);
    ck_assert_uint_eq(a.n_slots, 0);
    ck_assert_int_eq(gguf_index_find(&a, "name.1", 6, idx_name, NULL), -1);
    gguf_index_free(&a);
    gguf_index_free(&b);
}
END_TEST

START_TEST(payload_checks) {
    struct gguf_error err = {0};
    uint64_t used = 0;
    /* the editor's form is strict about bools */
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_BOOL, (const uint8_t *)"\1", 1, false, &used, "k", 0, &err), GGUF_OK);
    ck_assert_uint_eq(used, 1);
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_BOOL, (const uint8_t *)"\2", 1, false, &used, "k", 0, &err), GGUF_E_FORMAT);
    ck_assert_str_eq(err.msg, "key 'k': bool value at offset 0 is 2 (must be 0 or 1)");
    /* used reports the value's size inside longer input */
    uint8_t s[] = {3, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'z', 'z'};
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_STRING, s, sizeof s, false, &used, "k", 0, &err), GGUF_OK);
    ck_assert_uint_eq(used, 11);
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_STRING, s, 10, false, &used, "k", 100, &err), GGUF_E_FORMAT);
    ck_assert_str_eq(err.msg, "key 'k': string length 3 at offset 100 runs past the end of the file (110)");
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_UINT32, s, 3, false, &used, "k", 0, &err), GGUF_E_FORMAT);
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_COUNT, s, 3, false, &used, "k", 0, &err), GGUF_E_FORMAT);
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_FLOAT64, NULL, 0, false, &used, NULL, 0, &err), GGUF_E_FORMAT);
    /* arrays of arrays only when allowed */
    struct craft c = {0};
    craft_u32(&c, GGUF_TYPE_ARRAY);
    craft_u64(&c, 2);
    craft_u32(&c, GGUF_TYPE_UINT8);
    craft_u64(&c, 1);
    craft_u8(&c, 5);
    craft_u32(&c, GGUF_TYPE_STRING);
    craft_u64(&c, 1);
    craft_str(&c, "hi");
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_ARRAY, craft_data(&c), craft_len(&c), false, &used, "k", 0, &err), GGUF_E_FORMAT);
    ck_assert_int_eq(gguf_payload_check(GGUF_TYPE_ARRAY, craft_data(&c), craft_len(&c), true, &used, "k", 0, &err), GGUF_OK);
    ck_assert_uint_eq(used, craft_len(&c));
    /* the reader's form asks for more bytes instead of failing */
    struct gguf_pscan out;
    ck_assert_int_eq(gguf_payload_scan(GGUF_TYPE_ARRAY, craft_data(&c), 20, craft_len(&c),
                                       GGUF_PCHECK_NESTED, &out, "k", 0, &err), GGUF_OK);
    ck_assert_uint_gt(out.need, 20);
    ck_assert_uint_le(out.need, craft_len(&c));
    ck_assert_int_eq(gguf_payload_scan(GGUF_TYPE_ARRAY, craft_data(&c), craft_len(&c), craft_len(&c),
                                       GGUF_PCHECK_NESTED, &out, "k", 0, &err), GGUF_OK);
    ck_assert_uint_eq(out.need, 0);
    ck_assert_uint_eq(out.used, craft_len(&c));
    craft_free(&c);
}
END_TEST

int main(void) {
    Suite *s = suite_create("read");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, corrupt_table);
    tcase_add_test(tc, messages_are_checked);
    tcase_add_test(tc, kv_getters);
    tcase_add_test(tc, tensor_getters);
    tcase_add_test(tc, odd_names);
    tcase_add_test(tc, warnings_and_loose);
    tcase_add_test(tc, nested_arrays);
    tcase_add_test(tc, hostile_fast);
    tcase_add_test(tc, big_header_file);
    tcase_add_test(tc, open_errors);
    tcase_add_test(tc, reader_source);
    tcase_add_test(tc, new_ctx);
    tcase_add_test(tc, real_files);
    tcase_add_test(tc, truncation_every_byte);
    tcase_add_test(tc, random_flips);
    tcase_add_test(tc, errors_and_bufs);
    tcase_add_test(tc, index_basics);
    tcase_add_test(tc, payload_checks);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
