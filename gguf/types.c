/*
 * types.c - the metadata value types and the ggml tensor type table.
 *
 * The ggml table is exactly the one in docs/format.md, ggml tensor types
 * (ids 0-39).
 * Ids 4, 5, 31-33 and 36-38 were removed from ggml and are unknown here, as
 * is everything from 40 up (forks and newer builds disagree about those).
 */
#include "internal.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

static const char *const value_names[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = "uint8",     [GGUF_TYPE_INT8] = "int8",
    [GGUF_TYPE_UINT16] = "uint16",   [GGUF_TYPE_INT16] = "int16",
    [GGUF_TYPE_UINT32] = "uint32",   [GGUF_TYPE_INT32] = "int32",
    [GGUF_TYPE_FLOAT32] = "float32", [GGUF_TYPE_BOOL] = "bool",
    [GGUF_TYPE_STRING] = "string",   [GGUF_TYPE_ARRAY] = "array",
    [GGUF_TYPE_UINT64] = "uint64",   [GGUF_TYPE_INT64] = "int64",
    [GGUF_TYPE_FLOAT64] = "float64",
};

static const uint8_t value_sizes[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = 1,   [GGUF_TYPE_INT8] = 1,   [GGUF_TYPE_UINT16] = 2,
    [GGUF_TYPE_INT16] = 2,   [GGUF_TYPE_UINT32] = 4, [GGUF_TYPE_INT32] = 4,
    [GGUF_TYPE_FLOAT32] = 4, [GGUF_TYPE_BOOL] = 1,   [GGUF_TYPE_STRING] = 0,
    [GGUF_TYPE_ARRAY] = 0,   [GGUF_TYPE_UINT64] = 8, [GGUF_TYPE_INT64] = 8,
    [GGUF_TYPE_FLOAT64] = 8,
};

const char *gguf_type_name(enum gguf_type t) {
    if ((unsigned)t >= GGUF_TYPE_COUNT)
        return NULL;
    return value_names[t];
}

int gguf_type_from_name(const char *name, size_t len) {
    if (!name)
        return -1;
    for (int t = 0; t < GGUF_TYPE_COUNT; t++) {
        if (t == GGUF_TYPE_ARRAY)
            continue; /* only scalars and "string" */
        if (strlen(value_names[t]) == len &&
            memcmp(value_names[t], name, len) == 0)
            return t;
    }
    return -1;
}

size_t gguf_type_size(enum gguf_type t) {
    if ((unsigned)t >= GGUF_TYPE_COUNT)
        return 0;
    return value_sizes[t];
}

/* ---- ggml tensor types --------------------------------------------- */

struct ggml_type_info {
    const char *name; /* NULL: unknown or removed */
    uint32_t blck;    /* elements per block */
    uint32_t size;    /* bytes per block */
};

#define GGML_N_TYPES 40
static const struct ggml_type_info ggml_types[GGML_N_TYPES] = {
    [0] = {"f32", 1, 4},
    [1] = {"f16", 1, 2},
    [2] = {"q4_0", 32, 18},
    [3] = {"q4_1", 32, 20},
    /* 4, 5: q4_2, q4_3, removed */
    [6] = {"q5_0", 32, 22},
    [7] = {"q5_1", 32, 24},
    [8] = {"q8_0", 32, 34},
    [9] = {"q8_1", 32, 36},
    [10] = {"q2_K", 256, 84},
    [11] = {"q3_K", 256, 110},
    [12] = {"q4_K", 256, 144},
    [13] = {"q5_K", 256, 176},
    [14] = {"q6_K", 256, 210},
    [15] = {"q8_K", 256, 292},
    [16] = {"iq2_xxs", 256, 66},
    [17] = {"iq2_xs", 256, 74},
    [18] = {"iq3_xxs", 256, 98},
    [19] = {"iq1_s", 256, 50},
    [20] = {"iq4_nl", 32, 18},
    [21] = {"iq3_s", 256, 110},
    [22] = {"iq2_s", 256, 82},
    [23] = {"iq4_xs", 256, 136},
    [24] = {"i8", 1, 1},
    [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},
    [27] = {"i64", 1, 8},
    [28] = {"f64", 1, 8},
    [29] = {"iq1_m", 256, 56},
    [30] = {"bf16", 1, 2},
    /* 31-33: q4_0_4_4, q4_0_4_8, q4_0_8_8, removed */
    [34] = {"tq1_0", 256, 54},
    [35] = {"tq2_0", 256, 66},
    /* 36-38: iq4_nl_4_4, iq4_nl_4_8, iq4_nl_8_8, removed */
    [39] = {"mxfp4", 32, 17},
};

static const struct ggml_type_info *ggml_info(uint32_t t) {
    if (t >= GGML_N_TYPES || !ggml_types[t].name)
        return NULL;
    return &ggml_types[t];
}

bool gguf_ggml_type_known(uint32_t ggml_type) {
    return ggml_info(ggml_type) != NULL;
}

const char *gguf_ggml_type_name(uint32_t ggml_type) {
    const struct ggml_type_info *ti = ggml_info(ggml_type);
    return ti ? ti->name : NULL;
}

/* Exact match first, then case-insensitive ("Q4_K", "F32" are how users
 * and llama.cpp's logs often spell them). */
int gguf_ggml_type_from_name(const char *name) {
    if (!name)
        return -1;
    for (int t = 0; t < GGML_N_TYPES; t++)
        if (ggml_types[t].name && strcmp(ggml_types[t].name, name) == 0)
            return t;
    for (int t = 0; t < GGML_N_TYPES; t++)
        if (ggml_types[t].name && strcasecmp(ggml_types[t].name, name) == 0)
            return t;
    return -1;
}

uint32_t gguf_ggml_blck_size(uint32_t ggml_type) {
    const struct ggml_type_info *ti = ggml_info(ggml_type);
    return ti ? ti->blck : 0;
}

uint32_t gguf_ggml_type_size(uint32_t ggml_type) {
    const struct ggml_type_info *ti = ggml_info(ggml_type);
    return ti ? ti->size : 0;
}

/* size = ne0 / block * bytes_per_block * ne1 * ne2 * ne3, every step checked
 * (a * b overflows iff b != 0 && a > UINT64_MAX / b).  Negative dimensions,
 * n_dims > GGUF_MAX_DIMS, unknown types and a ne0 that is not a multiple of
 * the block size give false. */
bool gguf_ggml_nbytes(uint32_t ggml_type, uint32_t n_dims, const int64_t *ne,
                      uint64_t *out) {
    const struct ggml_type_info *ti = ggml_info(ggml_type);
    if (!ti || n_dims > GGUF_MAX_DIMS || (n_dims && !ne))
        return false;
    uint64_t d[GGUF_MAX_DIMS] = {1, 1, 1, 1};
    for (uint32_t i = 0; i < n_dims; i++) {
        if (ne[i] < 0)
            return false;
        d[i] = (uint64_t)ne[i];
    }
    if (d[0] % ti->blck != 0)
        return false;
    uint64_t bytes = d[0] / ti->blck;
    if (bytes > UINT64_MAX / ti->size)
        return false;
    bytes *= ti->size;
    for (int i = 1; i < GGUF_MAX_DIMS; i++) {
        if (d[i] != 0 && bytes > UINT64_MAX / d[i])
            return false;
        bytes *= d[i];
    }
    if (out)
        *out = bytes;
    return true;
}

/* llama.cpp's llama_ftype (include/llama.h): the values general.file_type
 * holds.  Gaps are ids llama.cpp removed. */
static const char *const file_types[] = {
    [0] = "F32",       [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",
    [7] = "Q8_0",      [8] = "Q5_0",    [9] = "Q5_1",    [10] = "Q2_K",
    [11] = "Q3_K_S",   [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S",
    [15] = "Q4_K_M",   [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K",
    [19] = "IQ2_XXS",  [20] = "IQ2_XS", [21] = "Q2_K_S", [22] = "IQ3_XS",
    [23] = "IQ3_XXS",  [24] = "IQ1_S",  [25] = "IQ4_NL", [26] = "IQ3_S",
    [27] = "IQ3_M",    [28] = "IQ2_S",  [29] = "IQ2_M",  [30] = "IQ4_XS",
    [31] = "IQ1_M",    [32] = "BF16",   [36] = "TQ1_0",  [37] = "TQ2_0",
    [38] = "MXFP4_MOE"};

const char *gguf_file_type_name(uint64_t file_type) {
    return file_type < sizeof file_types / sizeof *file_types
               ? file_types[file_type]
               : NULL;
}
