/*
 * test_types - value type names/sizes, the ggml type table (checked against
 * a table written out here by hand from docs/format.md, ggml tensor types)
 * and gguf_ggml_nbytes, including its overflow cases.
 */
#include "gguf.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct want { uint32_t id; const char *name; uint32_t blck, size; };

/* Transcribed from the table in docs/format.md, ggml tensor types. */
static const struct want TABLE[] = {
    {0, "f32", 1, 4},          {1, "f16", 1, 2},
    {2, "q4_0", 32, 18},       {3, "q4_1", 32, 20},
    {6, "q5_0", 32, 22},       {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},       {9, "q8_1", 32, 36},
    {10, "q2_K", 256, 84},     {11, "q3_K", 256, 110},
    {12, "q4_K", 256, 144},    {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},    {15, "q8_K", 256, 292},
    {16, "iq2_xxs", 256, 66},  {17, "iq2_xs", 256, 74},
    {18, "iq3_xxs", 256, 98},  {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},    {21, "iq3_s", 256, 110},
    {22, "iq2_s", 256, 82},    {23, "iq4_xs", 256, 136},
    {24, "i8", 1, 1},          {25, "i16", 1, 2},
    {26, "i32", 1, 4},         {27, "i64", 1, 8},
    {28, "f64", 1, 8},         {29, "iq1_m", 256, 56},
    {30, "bf16", 1, 2},        {34, "tq1_0", 256, 54},
    {35, "tq2_0", 256, 66},    {39, "mxfp4", 32, 17},
};
#define N_TABLE (sizeof TABLE / sizeof TABLE[0])

START_TEST(value_types) {
    static const char *const names[GGUF_TYPE_COUNT] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool", "string", "array", "uint64", "int64", "float64"};
    static const size_t sizes[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    for (int t = 0; t < GGUF_TYPE_COUNT; t++) {
        ck_assert_str_eq(gguf_type_name((enum gguf_type)t), names[t]);
        ck_assert_uint_eq(gguf_type_size((enum gguf_type)t), sizes[t]);
        int back = gguf_type_from_name(names[t], strlen(names[t]));
        if (t == GGUF_TYPE_ARRAY)
            ck_assert_int_eq(back, -1);
        else
            ck_assert_int_eq(back, t);
    }
    ck_assert_ptr_null(gguf_type_name(GGUF_TYPE_COUNT));
    ck_assert_ptr_null(gguf_type_name((enum gguf_type)1000));
    ck_assert_uint_eq(gguf_type_size(GGUF_TYPE_COUNT), 0);
    ck_assert_int_eq(gguf_type_from_name("uint", 4), -1);
    ck_assert_int_eq(gguf_type_from_name("uint32x", 7), -1);
    ck_assert_int_eq(gguf_type_from_name("uint32x", 6), GGUF_TYPE_UINT32);
    ck_assert_int_eq(gguf_type_from_name(NULL, 0), -1);
}
END_TEST

START_TEST(ggml_table) {
    bool listed[64] = {0};
    for (size_t k = 0; k < N_TABLE; k++) {
        const struct want *w = &TABLE[k];
        listed[w->id] = true;
        ck_assert_msg(gguf_ggml_type_known(w->id), "type %u unknown", w->id);
        ck_assert_str_eq(gguf_ggml_type_name(w->id), w->name);
        ck_assert_uint_eq(gguf_ggml_blck_size(w->id), w->blck);
        ck_assert_uint_eq(gguf_ggml_type_size(w->id), w->size);
        ck_assert_int_eq(gguf_ggml_type_from_name(w->name), (int)w->id);
    }
    /* Removed ids and everything not in the table is unknown. */
    for (uint32_t id = 0; id < 64; id++) {
        if (listed[id])
            continue;
        ck_assert_msg(!gguf_ggml_type_known(id), "type %u should be unknown", id);
        ck_assert_ptr_null(gguf_ggml_type_name(id));
        ck_assert_uint_eq(gguf_ggml_blck_size(id), 0);
        ck_assert_uint_eq(gguf_ggml_type_size(id), 0);
    }
    static const uint32_t removed[] = {4, 5, 31, 32, 33, 36, 37, 38};
    for (size_t k = 0; k < sizeof removed / sizeof removed[0]; k++)
        ck_assert(!gguf_ggml_type_known(removed[k]));
    ck_assert(!gguf_ggml_type_known(UINT32_MAX));
    ck_assert_int_eq(gguf_ggml_type_from_name("Q4_K"), 12);
    ck_assert_int_eq(gguf_ggml_type_from_name("BF16"), 30);
    ck_assert_int_eq(gguf_ggml_type_from_name("q4_2"), -1);
    ck_assert_int_eq(gguf_ggml_type_from_name(""), -1);
    ck_assert_int_eq(gguf_ggml_type_from_name(NULL), -1);
}
END_TEST

START_TEST(nbytes_every_type) {
    for (size_t k = 0; k < N_TABLE; k++) {
        const struct want *w = &TABLE[k];
        int64_t ne[4] = {(int64_t)w->blck * 3, 5, 2, 7};
        uint64_t n = 0;
        ck_assert(gguf_ggml_nbytes(w->id, 4, ne, &n));
        ck_assert_uint_eq(n, (uint64_t)3 * w->size * 5 * 2 * 7);
        ck_assert(gguf_ggml_nbytes(w->id, 1, ne, &n));
        ck_assert_uint_eq(n, (uint64_t)3 * w->size);
        if (w->blck > 1) {
            ne[0] = w->blck + 1;
            ck_assert_msg(!gguf_ggml_nbytes(w->id, 1, ne, &n), "%s: partial block", w->name);
        }
    }
}
END_TEST

START_TEST(nbytes_edges) {
    uint64_t n = 12345;
    /* scalars and missing dimensions count as 1 */
    ck_assert(gguf_ggml_nbytes(0, 0, NULL, &n));
    ck_assert_uint_eq(n, 4);
    /* zero elements */
    ck_assert(gguf_ggml_nbytes(0, 2, (const int64_t[]){0, INT64_MAX}, &n));
    ck_assert_uint_eq(n, 0);
    /* negative dimension, too many dims, unknown and removed types */
    ck_assert(!gguf_ggml_nbytes(0, 2, (const int64_t[]){4, -1}, &n));
    ck_assert(!gguf_ggml_nbytes(0, 5, (const int64_t[]){1, 1, 1, 1, 1}, &n));
    ck_assert(!gguf_ggml_nbytes(4, 1, (const int64_t[]){32}, &n));
    ck_assert(!gguf_ggml_nbytes(40, 1, (const int64_t[]){32}, &n));
    /* overflow in every step */
    ck_assert(!gguf_ggml_nbytes(0, 1, (const int64_t[]){INT64_MAX}, &n));  /* *4 */
    ck_assert(gguf_ggml_nbytes(24, 1, (const int64_t[]){INT64_MAX}, &n));  /* i8: fits */
    ck_assert_uint_eq(n, (uint64_t)INT64_MAX);
    ck_assert(!gguf_ggml_nbytes(24, 2, (const int64_t[]){INT64_MAX, 3}, &n));
    ck_assert(!gguf_ggml_nbytes(0, 3, (const int64_t[]){1 << 20, 1 << 20, INT64_C(1) << 23}, &n));
    ck_assert(gguf_ggml_nbytes(0, 3, (const int64_t[]){1 << 20, 1 << 20, INT64_C(1) << 21}, &n));
    ck_assert_uint_eq(n, UINT64_C(1) << 63);
    ck_assert(!gguf_ggml_nbytes(0, 4, (const int64_t[]){1 << 16, 1 << 16, 1 << 16, 1 << 16}, &n));
    ck_assert(!gguf_ggml_nbytes(15, 2, (const int64_t[]){INT64_C(1) << 62, 4}, &n)); /* q8_K: 2^54 * 292 * 4 */
    ck_assert(gguf_ggml_nbytes(15, 1, (const int64_t[]){INT64_C(1) << 62}, &n));
    ck_assert_uint_eq(n, (UINT64_C(1) << 54) * 292);
    /* exactly UINT64_MAX is representable: 3 * 5 * 17 * 257 * 641 * 65537 * 6700417 */
    ck_assert(gguf_ggml_nbytes(24, 4, (const int64_t[]){15, 17 * 257, 641 * 65537, 6700417}, &n));
    ck_assert_uint_eq(n, UINT64_MAX);
    /* n left alone on failure is not promised, but out may be NULL */
    ck_assert(gguf_ggml_nbytes(0, 1, (const int64_t[]){8}, NULL));
}
END_TEST

int main(void) {
    Suite *s = suite_create("types");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, value_types);
    tcase_add_test(tc, ggml_table);
    tcase_add_test(tc, nbytes_every_type);
    tcase_add_test(tc, nbytes_edges);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
