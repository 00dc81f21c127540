/*
 * fakeggml - a stand-in libggml-base for test_dequant: ggml's ABI (the
 * functions ggmlrt.c calls) with one lie, q4_K (id 12) reported as 128
 * values per block where ggml has 256.  ggufs must refuse to use it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct traits {
    const char *type_name;
    int64_t blck_size, blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    void (*to_float)(const void *, float *, int64_t);
    void *from_float_ref;
};

static void nothing(const void *x, float *y, int64_t k) {
    (void)x;
    memset(y, 0, (size_t)k * sizeof *y);
}

/* ggml's names and sizes for ids 0-39 (docs/format.md), q4_K's block
 * size excepted. */
static struct traits t[40] = {
    [0] = {"f32", 1, 0, 4, false, NULL, NULL},
    [1] = {"f16", 1, 0, 2, false, nothing, NULL},
    [2] = {"q4_0", 32, 0, 18, true, nothing, NULL},
    [3] = {"q4_1", 32, 0, 20, true, nothing, NULL},
    [6] = {"q5_0", 32, 0, 22, true, nothing, NULL},
    [7] = {"q5_1", 32, 0, 24, true, nothing, NULL},
    [8] = {"q8_0", 32, 0, 34, true, nothing, NULL},
    [9] = {"q8_1", 32, 0, 36, true, NULL, NULL},
    [10] = {"q2_K", 256, 0, 84, true, nothing, NULL},
    [11] = {"q3_K", 256, 0, 110, true, nothing, NULL},
    [12] = {"q4_K", 128, 0, 144, true, nothing, NULL}, /* the lie */
    [13] = {"q5_K", 256, 0, 176, true, nothing, NULL},
    [14] = {"q6_K", 256, 0, 210, true, nothing, NULL},
    [15] = {"q8_K", 256, 0, 292, true, NULL, NULL},
    [16] = {"iq2_xxs", 256, 0, 66, true, nothing, NULL},
    [17] = {"iq2_xs", 256, 0, 74, true, nothing, NULL},
    [18] = {"iq3_xxs", 256, 0, 98, true, nothing, NULL},
    [19] = {"iq1_s", 256, 0, 50, true, nothing, NULL},
    [20] = {"iq4_nl", 32, 0, 18, true, nothing, NULL},
    [21] = {"iq3_s", 256, 0, 110, true, nothing, NULL},
    [22] = {"iq2_s", 256, 0, 82, true, nothing, NULL},
    [23] = {"iq4_xs", 256, 0, 136, true, nothing, NULL},
    [24] = {"i8", 1, 0, 1, false, NULL, NULL},
    [25] = {"i16", 1, 0, 2, false, NULL, NULL},
    [26] = {"i32", 1, 0, 4, false, NULL, NULL},
    [27] = {"i64", 1, 0, 8, false, NULL, NULL},
    [28] = {"f64", 1, 0, 8, false, NULL, NULL},
    [29] = {"iq1_m", 256, 0, 56, true, nothing, NULL},
    [30] = {"bf16", 1, 0, 2, false, nothing, NULL},
    [34] = {"tq1_0", 256, 0, 54, true, nothing, NULL},
    [35] = {"tq2_0", 256, 0, 66, true, nothing, NULL},
    [39] = {"mxfp4", 32, 0, 17, true, nothing, NULL},
};

const struct traits *ggml_get_type_traits(int type) {
    return &t[type];
}
int64_t ggml_blck_size(int type) {
    return t[type].blck_size;
}
size_t ggml_type_size(int type) {
    return t[type].type_size;
}
struct gguf_init_params {
    bool no_alloc;
    void **ctx;
};
void *gguf_init_from_file(const char *path, struct gguf_init_params p) {
    (void)path;
    (void)p;
    return NULL; /* knows no id from 40 up */
}
void gguf_free(void *ctx) {
    (void)ctx;
}
