/*
 * corrupt_cases.c - the table of handcrafted GGUF files: one case per rule
 * of ggml's reference reader (docs/format.md, What ggml's reader refuses),
 * the looser cases ggufs opens with a warning, truncations inside every
 * region of the header, and some valid edge files.
 *
 * Messages are hand-written substrings of what ggufs must say; offsets in
 * them were worked out from the layouts below (header 24 bytes; a KV
 * "a.b" first in the file has its key length at 24, type at 35, value at
 * 39).  ggml_rejects was checked against libggml-base.so (the build shipped
 * with node-llama-cpp, loaded metadata-only as tests/refdump.c does).
 */
#include "craft.h"

#include <string.h>

#define T_F32 0
#define T_Q4_0 2
#define T_Q8_0 8
#define T_Q4_K 12
#define T_BF16 30
#define T_MXFP4 39

static const int64_t NE8[] = {8};

/* One f32[8] tensor "t0" at offset 0 with its 32 bytes of data. */
static void one_tensor(struct craft *c, uint32_t version) {
    craft_header(c, version, 1, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}

/* The filler KV "pad.s" (a 40-byte string) occupies 24..89, so that a
 * second KV can be cut anywhere without tripping the count bound. */
static void filler(struct craft *c) {
    craft_kv_str(c, "pad.s", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
}

/* ---- header ------------------------------------------------------------ */

static void b_empty_file(struct craft *c) { (void)c; }
static void b_trunc_magic(struct craft *c) { craft_bytes(c, "GG", 2); }
static void b_bad_magic(struct craft *c) {
    one_tensor(c, 3);
    memcpy(c->b.p, "GGML", 4);
}
static void b_trunc_version(struct craft *c) { craft_bytes(c, "GGUF\x03\x00", 6); }
static void b_version_0(struct craft *c) { one_tensor(c, 0); }
static void b_version_1(struct craft *c) { one_tensor(c, 1); }
static void b_version_4(struct craft *c) { one_tensor(c, 4); }
static void b_big_endian_v3(struct craft *c) {
    /* What a big-endian writer produces: every integer byte-swapped. */
    craft_bytes(c, "GGUF", 4);
    craft_bytes(c, "\0\0\0\3", 4);
    craft_bytes(c, "\0\0\0\0\0\0\0\0", 8);
    craft_bytes(c, "\0\0\0\0\0\0\0\1", 8);
    craft_bytes(c, "\0\0\0\0\0\0\0\3a.b", 11);
    craft_bytes(c, "\0\0\0\4\0\0\0\1", 8);
}
static void b_trunc_counts(struct craft *c) {
    craft_header(c, 3, 0, 0);
    c->b.len = 20;
}
static void b_huge_kv_count(struct craft *c) {
    craft_header(c, 3, 0, UINT64_C(1) << 63);
    craft_kv_u32(c, "a.b", 1);
}
static void b_huge_tensor_count(struct craft *c) {
    craft_header(c, 3, UINT64_MAX, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, 0);
}
static void b_kv_count_too_big(struct craft *c) {
    craft_header(c, 3, 0, 1000);
    craft_kv_u32(c, "a.b", 1);
}

/* ---- keys and values ----------------------------------------------------- */

static void b_key_past_eof(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_u64(c, 1000);
    craft_zeros(c, 16);
}
static void b_key_over_max(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_u64(c, UINT64_C(1) << 31);
    craft_zeros(c, 16);
}
static void b_string_past_eof(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_head(c, "a.b", GGUF_TYPE_STRING);
    craft_u64(c, 99999);
    craft_bytes(c, "abc", 3);
}
static void b_string_over_max(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_head(c, "a.b", GGUF_TYPE_STRING);
    craft_u64(c, (UINT64_C(1) << 30) + 1);
    craft_bytes(c, "abc", 3);
}
static void b_array_over_max(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_arr(c, "a.b", GGUF_TYPE_UINT8, (UINT64_C(1) << 30) + 1);
    craft_zeros(c, 49);
}
static void b_array_2p30_small_file(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_arr(c, "a.b", GGUF_TYPE_UINT8, UINT64_C(1) << 30);
    craft_zeros(c, 49); /* a 100-byte file */
}
static void b_array_strings_past_eof(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_arr(c, "a.b", GGUF_TYPE_STRING, 1000);
    craft_str(c, "x");
    craft_str(c, "x");
    craft_str(c, "x");
}
static void b_array_elems_past_eof(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_arr(c, "a.b", GGUF_TYPE_UINT32, 4);
    craft_u32(c, 1);
    craft_u32(c, 2);
    craft_u32(c, 3);
}
static void b_nested_array(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_arr(c, "a.b", GGUF_TYPE_ARRAY, 1);
    craft_u32(c, GGUF_TYPE_UINT8);
    craft_u64(c, 2);
    craft_u8(c, 1);
    craft_u8(c, 2);
}
static void b_nested_empty_array(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_arr(c, "a.b", GGUF_TYPE_ARRAY, 0);
}
static void b_duplicate_key(struct craft *c) {
    craft_header(c, 3, 0, 2);
    craft_kv_u32(c, "a.b", 1);
    craft_kv_u32(c, "a.b", 2);
}
static void b_empty_key(struct craft *c) {
    craft_header(c, 3, 0, 2);
    craft_kv_u32(c, "a.b", 1);
    craft_kv_u32(c, "", 2);
}
static void b_unknown_value_type(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_head(c, "a.b", 13);
    craft_u32(c, 0);
}
static void b_unknown_elem_type(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_arr(c, "a.b", 13, 1);
    craft_u32(c, 0);
}
static void b_bool_2(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_bool(c, "a.b", 2);
}
static void b_bool_array_odd(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_arr(c, "a.b", GGUF_TYPE_BOOL, 4);
    craft_bytes(c, "\1\5\0\7", 4);
}
static void b_alignment_u64(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_u64(c, "general.alignment", 32);
}
static void b_alignment_0(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_u32(c, "general.alignment", 0);
}
static void b_alignment_48(struct craft *c) {
    craft_header(c, 3, 0, 1);
    craft_kv_u32(c, "general.alignment", 48);
}
static void b_alignment_key_with_nul(struct craft *c) {
    /* ggml looks the key up as a C string: "general.alignment\0x" is it. */
    craft_header(c, 3, 0, 1);
    craft_strn(c, "general.alignment\0x", 19);
    craft_u32(c, GGUF_TYPE_UINT64);
    craft_u64(c, 32);
}

/* Truncations inside the second KV (the filler is the first). */
static void b_trunc_key_len(struct craft *c) {
    craft_header(c, 3, 0, 2);
    filler(c);
    craft_bytes(c, "\3\0\0\0", 4);
}
static void b_trunc_key_bytes(struct craft *c) {
    craft_header(c, 3, 0, 2);
    filler(c);
    craft_u64(c, 10);
    craft_bytes(c, "a.b.c", 5);
}
static void b_trunc_value_type(struct craft *c) {
    craft_header(c, 3, 0, 2);
    filler(c);
    craft_str(c, "a.b");
    craft_bytes(c, "\4\0", 2);
}
static void b_trunc_scalar(struct craft *c) {
    craft_header(c, 3, 0, 2);
    filler(c);
    craft_kv_head(c, "a.b", GGUF_TYPE_UINT64);
    craft_bytes(c, "\1\2\3", 3);
}
static void b_trunc_array_header(struct craft *c) {
    craft_header(c, 3, 0, 2);
    filler(c);
    craft_kv_head(c, "a.b", GGUF_TYPE_ARRAY);
    craft_bytes(c, "\4\0\0\0\2\0", 6);
}
static void b_trunc_string_value(struct craft *c) {
    craft_header(c, 3, 0, 2);
    filler(c);
    craft_kv_head(c, "a.b", GGUF_TYPE_STRING);
    craft_u64(c, 20);
    craft_bytes(c, "hello", 5);
}
static void b_trunc_string_array(struct craft *c) {
    craft_header(c, 3, 0, 2);
    filler(c);
    craft_kv_arr(c, "a.b", GGUF_TYPE_STRING, 2);
    craft_str(c, "hello");
    craft_u64(c, 5);
    craft_bytes(c, "he", 2);
}

/* ---- tensor infos ------------------------------------------------------- */

static void b_tensor_name_64(struct craft *c) {
    char name[65];
    memset(name, 'n', 64);
    name[64] = '\0';
    craft_header(c, 3, 1, 0);
    craft_tensor(c, name, 1, NE8, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_duplicate_tensor(struct craft *c) {
    craft_header(c, 3, 2, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, 32);
    craft_pad(c, 32);
    craft_zeros(c, 64);
}
static void b_duplicate_tensor_c_string(struct craft *c) {
    /* Distinct bytes, but ggml keeps names as C strings: both are "t0". */
    craft_header(c, 3, 2, 0);
    craft_tensor_n(c, "t0\0a", 4, 1, NE8, T_F32, 0);
    craft_tensor_n(c, "t0\0b", 4, 1, NE8, T_F32, 32);
    craft_pad(c, 32);
    craft_zeros(c, 64);
}
static void b_five_dims(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 5, (const int64_t[]){8, 1, 1, 1, 1}, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_negative_dim(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 2, (const int64_t[]){8, -5}, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_element_overflow(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 2, (const int64_t[]){5, INT64_C(1) << 62}, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_removed_type_4(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 1, NE8, 4, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_removed_type_33(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 1, (const int64_t[]){256}, 33, 0);
    craft_pad(c, 32);
    craft_zeros(c, 256);
}
static void b_type_negative(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 1, NE8, UINT32_MAX, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_block_not_multiple(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 1, NE8, T_Q4_0, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_unknown_type_40(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 1, NE8, 40, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_unknown_type_40_ne64(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 1, (const int64_t[]){64}, 40, 0);
    craft_pad(c, 32);
    craft_zeros(c, 64);
}
static void b_unknown_type_50_sized_by_next(struct craft *c) {
    craft_header(c, 3, 2, 0);
    craft_tensor(c, "t0", 1, (const int64_t[]){256}, 50, 0);
    craft_tensor(c, "t1", 1, NE8, T_F32, 64);
    craft_pad(c, 32);
    craft_zeros(c, 96);
}
static void b_unknown_type_unsizable(struct craft *c) {
    craft_header(c, 3, 2, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, 0);
    craft_tensor(c, "t1", 1, NE8, 50, 32);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}

/* Truncations inside one tensor info (name "blk.0.attn_q.weight", 19 bytes;
 * name length at 24, n_dims at 51, dims at 55, type at 71, offset at 75,
 * infos end at 83, data at 96). */
#define TNAME "blk.0.attn_q.weight"
static void full_info(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, TNAME, 2, (const int64_t[]){8, 2}, T_F32, 0);
}
static void cut(struct craft *c, size_t len) {
    if (c->b.len > len)
        c->b.len = len;
}
static void b_trunc_tensor_name(struct craft *c) { full_info(c); cut(c, 48); }
static void b_trunc_tensor_ndims(struct craft *c) { full_info(c); cut(c, 53); }
static void b_trunc_tensor_dims(struct craft *c) { full_info(c); cut(c, 67); }
static void b_trunc_tensor_type(struct craft *c) { full_info(c); cut(c, 73); }
static void b_trunc_tensor_offset(struct craft *c) { full_info(c); cut(c, 80); }
static void b_trunc_before_data(struct craft *c) { full_info(c); }
static void b_data_past_eof(struct craft *c) {
    full_info(c);
    craft_pad(c, 32);
    craft_zeros(c, 40); /* of 64 */
}

/* ---- tensor data layout ------------------------------------------------ */

static void b_first_tensor_at_32(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, 32);
    craft_pad(c, 32);
    craft_zeros(c, 64);
}
static void b_gap_between_tensors(struct craft *c) {
    craft_header(c, 3, 2, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, 0);
    craft_tensor(c, "t1", 1, NE8, T_F32, 64);
    craft_pad(c, 32);
    craft_zeros(c, 96);
}
static void b_reversed_order(struct craft *c) {
    craft_header(c, 3, 2, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, 32);
    craft_tensor(c, "t1", 1, NE8, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 64);
}
static void b_misaligned_offset(struct craft *c) {
    craft_header(c, 3, 2, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, 0);
    craft_tensor(c, "t1", 1, NE8, T_F32, 40);
    craft_pad(c, 32);
    craft_zeros(c, 96);
}
static void b_overlap(struct craft *c) {
    /* infos end at 92, data at 96: t0 96..160, t1 starts at 128 */
    craft_header(c, 3, 2, 0);
    craft_tensor(c, "t0", 1, (const int64_t[]){16}, T_F32, 0);
    craft_tensor(c, "t1", 1, NE8, T_F32, 32);
    craft_pad(c, 32);
    craft_zeros(c, 64);
}
static void b_offset_past_eof(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, UINT64_C(1) << 40);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}

/* ---- valid edge files --------------------------------------------------- */

static void b_minimal(struct craft *c) { craft_header(c, 3, 0, 0); }
static void b_version_2(struct craft *c) {
    craft_header(c, 2, 1, 1);
    craft_kv_str(c, "general.name", "v2");
    craft_tensor(c, "t0", 1, NE8, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_zero_tensors_unpadded(struct craft *c) {
    /* No tensors: ggml never seeks to the (padded) data start. */
    craft_header(c, 3, 0, 1);
    craft_kv_u32(c, "a.b", 1);
}
static void b_all_value_types(struct craft *c) {
    static const char *const strs[] = {"", "a", "\xc3\xa9t\xc3\xa9", "line\nbreak"};
    craft_header(c, 3, 0, 25);
    craft_kv_u8(c, "t.u8", 255);
    craft_kv_i8(c, "t.i8", -128);
    craft_kv_u16(c, "t.u16", 65535);
    craft_kv_i16(c, "t.i16", -32768);
    craft_kv_u32(c, "t.u32", UINT32_MAX);
    craft_kv_i32(c, "t.i32", INT32_MIN);
    craft_kv_f32(c, "t.f32", 0.1f);
    craft_kv_bool(c, "t.bool_true", 1);
    craft_kv_bool(c, "t.bool_false", 0);
    craft_kv_str(c, "t.str", "hello");
    craft_kv_str(c, "t.str_empty", "");
    craft_kv_u64(c, "t.u64", UINT64_MAX);
    craft_kv_i64(c, "t.i64", INT64_MIN);
    craft_kv_f64(c, "t.f64", -2.5e-300);
    craft_kv_arr_u32(c, "t.arr_u32", (const uint32_t[]){1, 2, 3}, 3);
    craft_kv_arr_str(c, "t.arr_str", strs, 4);
    craft_kv_arr(c, "t.arr_empty_str", GGUF_TYPE_STRING, 0);
    craft_kv_arr(c, "t.arr_empty_u8", GGUF_TYPE_UINT8, 0);
    craft_kv_arr(c, "t.arr_bool", GGUF_TYPE_BOOL, 2);
    craft_bytes(c, "\1\0", 2);
    craft_kv_arr(c, "t.arr_i8", GGUF_TYPE_INT8, 2);
    craft_bytes(c, "\x80\x7f", 2);
    craft_kv_arr(c, "t.arr_i16", GGUF_TYPE_INT16, 1);
    craft_u16(c, 0x8000);
    craft_kv_arr(c, "t.arr_f32", GGUF_TYPE_FLOAT32, 2);
    craft_f32(c, 1.5f);
    craft_f32(c, -0.0f);
    craft_kv_arr(c, "t.arr_u64", GGUF_TYPE_UINT64, 1);
    craft_u64(c, 1);
    craft_kv_arr(c, "t.arr_i64", GGUF_TYPE_INT64, 1);
    craft_u64(c, UINT64_MAX);
    craft_kv_arr(c, "t.arr_f64", GGUF_TYPE_FLOAT64, 1);
    craft_f64(c, 1e300);
}
static void b_alignment_64(struct craft *c) {
    craft_header(c, 3, 2, 1);
    craft_kv_u32(c, "general.alignment", 64);
    craft_tensor(c, "t0", 1, NE8, T_F32, 0);
    craft_tensor(c, "t1", 1, NE8, T_F32, 64);
    craft_pad(c, 64);
    craft_zeros(c, 128);
}
static void b_alignment_1(struct craft *c) {
    craft_header(c, 3, 2, 1);
    craft_kv_u32(c, "general.alignment", 1);
    craft_tensor(c, "t0", 1, (const int64_t[]){3}, 24 /* i8 */, 0);
    craft_tensor(c, "t1", 1, NE8, T_F32, 3);
    craft_zeros(c, 35);
}
static void b_zero_size_tensor(struct craft *c) {
    craft_header(c, 3, 2, 0);
    craft_tensor(c, "empty", 2, (const int64_t[]){0, 4}, T_F32, 0);
    craft_tensor(c, "t1", 1, NE8, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_scalar_tensor(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "scalar", 0, NULL, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32); /* 4 bytes and the padding ggml reads with them */
}
static void b_tensor_name_63(struct craft *c) {
    char name[64];
    memset(name, 'n', 63);
    name[63] = '\0';
    craft_header(c, 3, 1, 0);
    craft_tensor(c, name, 1, NE8, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_tensor_name_empty(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "", 1, NE8, T_F32, 0);
    craft_pad(c, 32);
    craft_zeros(c, 32);
}
static void b_odd_names(struct craft *c) {
    /* Keys and tensor names ggml takes as they are: a NUL, bytes that are
     * not UTF-8, a slash, dots. */
    craft_header(c, 3, 2, 3);
    craft_strn(c, "a\0b", 3);
    craft_u32(c, GGUF_TYPE_UINT8);
    craft_u8(c, 1);
    craft_kv_u8(c, "bad\xff\xfe.utf8", 2);
    craft_kv_u8(c, "x/y/..", 3);
    craft_tensor_n(c, "a\0x", 3, 1, NE8, T_F32, 0);
    craft_tensor(c, "..", 1, NE8, T_F32, 32);
    craft_pad(c, 32);
    craft_zeros(c, 64);
}
static void b_nonzero_padding(struct craft *c) {
    craft_header(c, 3, 1, 0);
    craft_tensor(c, "t0", 1, NE8, T_F32, 0);
    while (c->b.len % 32)
        craft_u8(c, 0xee);
    craft_zeros(c, 32);
}
static void b_quant_types(struct craft *c) {
    /* sizes: q4_0 [32,2] 36 -> 64; q8_0 [64] 68 -> 96; q4_K [256] 144 -> 160;
     * bf16 [4] 8 -> 32; mxfp4 [32] 17 -> 32 */
    craft_header(c, 3, 5, 0);
    craft_tensor(c, "q4_0", 2, (const int64_t[]){32, 2}, T_Q4_0, 0);
    craft_tensor(c, "q8_0", 1, (const int64_t[]){64}, T_Q8_0, 64);
    craft_tensor(c, "q4_k", 1, (const int64_t[]){256}, T_Q4_K, 160);
    craft_tensor(c, "bf16", 1, (const int64_t[]){4}, T_BF16, 320);
    craft_tensor(c, "mxfp4", 1, (const int64_t[]){32}, T_MXFP4, 352);
    craft_pad(c, 32);
    craft_zeros(c, 384);
}
static void b_trailing_bytes(struct craft *c) {
    one_tensor(c, 3);
    craft_zeros(c, 100);
}

/* ---- the table ----------------------------------------------------------- */

#define REJECT(n, st, m, g) {#n, b_##n, GGUF_E_##st, m, g, false}
#define LOOSE(n, m, g) {#n, b_##n, GGUF_OK, m, g, true}
#define ACCEPT(n) {#n, b_##n, GGUF_OK, "", false, false}

const struct corrupt_case corrupt_cases[] = {
    /* header */
    REJECT(empty_file, FORMAT, "file is 0 bytes long, too short for the GGUF magic", true),
    REJECT(trunc_magic, FORMAT, "file is 2 bytes long, too short for the GGUF magic", true),
    REJECT(bad_magic, FORMAT, "bad magic 'GGML' at offset 0", true),
    REJECT(trunc_version, FORMAT, "version at offset 4 runs past the end of the file (6)", true),
    REJECT(version_0, FORMAT, "bad GGUF version 0", true),
    REJECT(version_1, UNSUPPORTED, "GGUF version 1 is not supported", true),
    REJECT(version_4, FORMAT, "GGUF version 4 at offset 4 is not known", true),
    REJECT(big_endian_v3, UNSUPPORTED, "reads 0x03000000: a big-endian GGUF file?", true),
    REJECT(trunc_counts, FORMAT, "tensor and key counts at offset 8 run past the end of the file (20)", true),
    REJECT(huge_kv_count, FORMAT, "key count 9223372036854775808 at offset 16 cannot fit in the file", true),
    REJECT(huge_tensor_count, FORMAT, "tensor count 18446744073709551615 at offset 8 cannot fit in the file", true),
    REJECT(kv_count_too_big, FORMAT, "key count 1000 at offset 16 cannot fit in the file", true),
    /* keys and values */
    REJECT(key_past_eof, FORMAT, "key 0: string length 1000 at offset 24 runs past the end of the file (48)", true),
    REJECT(key_over_max, FORMAT, "key 0: string length 2147483648 at offset 24 exceeds the maximum (1073741824)", true),
    REJECT(string_past_eof, FORMAT, "key 'a.b': string length 99999 at offset 39 runs past the end of the file (50)", true),
    REJECT(string_over_max, FORMAT, "key 'a.b': string length 1073741825 at offset 39 exceeds the maximum (1073741824)", true),
    REJECT(array_over_max, FORMAT, "key 'a.b': array of 1073741825 elements at offset 39 exceeds the maximum (1073741824)", true),
    REJECT(array_2p30_small_file, FORMAT, "key 'a.b': array of 1073741824 uint8 elements at offset 39 needs at least 1073741824 bytes, past the end of the file (100)", true),
    REJECT(array_strings_past_eof, FORMAT, "key 'a.b': array of 1000 string elements at offset 39 needs at least 8000 bytes, past the end of the file (78)", true),
    REJECT(array_elems_past_eof, FORMAT, "key 'a.b': array of 4 uint32 elements at offset 39 needs at least 16 bytes, past the end of the file (63)", true),
    REJECT(nested_array, FORMAT, "key 'a.b' is an array of arrays, which ggml rejects", true),
    REJECT(nested_empty_array, FORMAT, "key 'a.b' is an array of arrays, which ggml rejects", true),
    REJECT(duplicate_key, FORMAT, "duplicate key 'a.b' at offset 43 (first at offset 24)", true),
    REJECT(empty_key, FORMAT, "key 1 at offset 43 is empty", true),
    REJECT(unknown_value_type, FORMAT, "key 'a.b' at offset 35 has unknown value type 13", true),
    REJECT(unknown_elem_type, FORMAT, "key 'a.b': array at offset 39 has unknown element type 13", true),
    LOOSE(bool_2, "key 'a.b' has bool byte 2 at offset 39", false),
    LOOSE(bool_array_odd, "key 'a.b' has 2 bool bytes other than 0 and 1, the first (5) at offset 52", false),
    REJECT(alignment_u64, FORMAT, "key 'general.alignment' must be a uint32 power of two, found uint64", true),
    REJECT(alignment_0, FORMAT, "key 'general.alignment' must be a uint32 power of two, found 0", true),
    REJECT(alignment_48, FORMAT, "key 'general.alignment' must be a uint32 power of two, found 48", true),
    REJECT(alignment_key_with_nul, FORMAT, "must be a uint32 power of two, found uint64", true),
    REJECT(trunc_key_len, FORMAT, "key 1: name length at offset 89 runs past the end of the file (93)", true),
    REJECT(trunc_key_bytes, FORMAT, "key 1: string length 10 at offset 89 runs past the end of the file (102)", true),
    REJECT(trunc_value_type, FORMAT, "key 'a.b': value type at offset 100 runs past the end of the file (102)", true),
    REJECT(trunc_scalar, FORMAT, "key 'a.b': uint64 value at offset 104 runs past the end of the file (107)", true),
    REJECT(trunc_array_header, FORMAT, "key 'a.b': array header at offset 104 runs past the end of the file (110)", true),
    REJECT(trunc_string_value, FORMAT, "key 'a.b': string length 20 at offset 104 runs past the end of the file (117)", true),
    REJECT(trunc_string_array, FORMAT, "key 'a.b': string length 5 at offset 129 runs past the end of the file (139)", true),
    /* tensor infos */
    REJECT(tensor_name_64, FORMAT, "is 64 bytes long (at most 63)", true),
    REJECT(duplicate_tensor, FORMAT, "duplicate tensor 't0' at offset 58 (first at offset 24)", true),
    REJECT(duplicate_tensor_c_string, FORMAT, "duplicate tensor 't0\\x00b' at offset 60 (first at offset 24)", true),
    REJECT(five_dims, FORMAT, "tensor 't0' has 5 dimensions (at most 4)", true),
    REJECT(negative_dim, FORMAT, "tensor 't0' dimension 1 is negative (-5)", true),
    REJECT(element_overflow, FORMAT, "tensor 't0' has too many elements: shape (5, 4611686018427387904, 1, 1) overflows int64", true),
    REJECT(removed_type_4, FORMAT, "tensor 't0' has ggml type 4, which was removed from ggml", true),
    REJECT(removed_type_33, FORMAT, "tensor 't0' has ggml type 33, which was removed from ggml", true),
    REJECT(type_negative, FORMAT, "tensor 't0' has ggml type 4294967295, not a valid type id", true),
    REJECT(block_not_multiple, FORMAT, "tensor 't0' of type q4_0 has 8 elements per row, not a multiple of the block size (32)", true),
    LOOSE(unknown_type_40, "tensor 't0' has unknown ggml type 40; its size (32 bytes) is taken from the end of the file", true),
    LOOSE(unknown_type_40_ne64, "tensor 't0' has unknown ggml type 40; its size (64 bytes) is taken from the end of the file", false),
    LOOSE(unknown_type_50_sized_by_next, "tensor 't0' has unknown ggml type 50; its size (64 bytes) is taken from the next tensor's offset", true),
    REJECT(unknown_type_unsizable, FORMAT, "tensor 't1' has unknown ggml type 50 and no bytes before the end of the file", true),
    REJECT(trunc_tensor_name, FORMAT, "tensor 0: string length 19 at offset 24 runs past the end of the file (48)", true),
    REJECT(trunc_tensor_ndims, FORMAT, "tensor 'blk.0.attn_q.weight': dimension count at offset 51 runs past the end of the file (53)", true),
    REJECT(trunc_tensor_dims, FORMAT, "tensor 'blk.0.attn_q.weight': dimensions at offset 55 run past the end of the file (67)", true),
    REJECT(trunc_tensor_type, FORMAT, "tensor 'blk.0.attn_q.weight': type at offset 71 runs past the end of the file (73)", true),
    REJECT(trunc_tensor_offset, FORMAT, "tensor 'blk.0.attn_q.weight': data offset at offset 75 runs past the end of the file (80)", true),
    REJECT(trunc_before_data, FORMAT, "data section starts at 96 (tensor infos end at 83, padded to 32), past the end of the file (83)", true),
    /* ggml's metadata-only reader never looks at the data; llama.cpp's
     * loader and ggml with no_alloc = false refuse this file. */
    REJECT(data_past_eof, FORMAT, "tensor 'blk.0.attn_q.weight' data ends at 160, past the end of the file (136)", false),
    /* data layout */
    LOOSE(first_tensor_at_32, "tensor data is not contiguous: tensor 't0' has offset 32, expected 0", true),
    LOOSE(gap_between_tensors, "tensor data is not contiguous: tensor 't1' has offset 64, expected 32", true),
    LOOSE(reversed_order, "tensor data is not contiguous: tensor 't0' has offset 32, expected 0", true),
    REJECT(misaligned_offset, FORMAT, "tensor 't1' has offset 40, not a multiple of the alignment (32)", true),
    REJECT(overlap, FORMAT, "tensor 't1' data at 128 overlaps tensor 't0' (96 to 160)", true),
    REJECT(offset_past_eof, FORMAT, "tensor 't0' has offset 1099511627776 (data section at 64), past the end of the file (96)", true),
    /* valid edge files */
    ACCEPT(minimal),
    ACCEPT(version_2),
    ACCEPT(zero_tensors_unpadded),
    ACCEPT(all_value_types),
    ACCEPT(alignment_64),
    ACCEPT(alignment_1),
    ACCEPT(zero_size_tensor),
    ACCEPT(scalar_tensor),
    ACCEPT(tensor_name_63),
    ACCEPT(tensor_name_empty),
    ACCEPT(odd_names),
    ACCEPT(nonzero_padding),
    ACCEPT(quant_types),
    ACCEPT(trailing_bytes),
};

const size_t n_corrupt_cases = sizeof corrupt_cases / sizeof corrupt_cases[0];
