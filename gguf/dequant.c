/*
 * dequant.c - ggufs's own float32 converters (f32, f16, bf16, q4_0, q4_1,
 * q5_0, q5_1, q8_0) and the choice between them and ggml's.
 *
 * The block formats are written down in docs/format.md, Tensor block
 * formats.  These portable converters are the reference; where the CPU
 * runs them, vectorized ones that compute the same (dequant_simd.c) are
 * used instead.  Every converter computes exactly what ggml's does (the same
 * products and sums in float, in the same order, no fused multiply-add:
 * C11 mode compiles with contraction off), so the values are bit-identical
 * to ggml's; tests/mount_views.py checks that against ggml itself.
 * Multi-byte fields are little-endian and read byte by byte.
 */
#include "dequant.h"

#include <pthread.h>
#include <string.h>

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE half to float, exactly: normals rebias the exponent (15 -> 127),
 * subnormals are m * 2^-24 (exact in float), infinities keep their sign
 * and NaNs their payload with the quiet bit set (what ggml's conversion,
 * and x86's, give). */
static float half_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = h & 0x7c00, man = h & 0x03ff;
    if (exp == 0x7c00)
        return bits_f32(sign | 0x7f800000 | man << 13 | (man ? 0x00400000 : 0));
    if (exp)
        return bits_f32(sign | (((uint32_t)(h & 0x7fff) << 13) + (112u << 23)));
    float f = (float)man * 0x1p-24f;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return bits_f32(sign | u);
}

/* Every half's float, made once (256 KiB): a lookup is what makes f16
 * tensors (one conversion per value) as fast as the quantized ones. */
static float half_tab[1 << 16];
static pthread_once_t half_once = PTHREAD_ONCE_INIT;

static void half_tab_init(void) {
    for (uint32_t h = 0; h < (1u << 16); h++)
        half_tab[h] = half_f32((uint16_t)h);
}

static uint16_t le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void f32_row(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof *dst);
}

static void f16_row(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    pthread_once(&half_once, half_tab_init);
    for (int64_t i = 0; i < n; i++)
        dst[i] = half_tab[le16(p + 2 * i)];
}

/* bfloat16 is the top half of a float32. */
static void bf16_row(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = bits_f32((uint32_t)le16(p + 2 * i) << 16);
}

/* q8_0: d (half), 32 signed bytes; value = q * d. */
static void q8_0_row(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 32, b += 34, dst += 32) {
        float d = half_f32(le16(b));
        for (int j = 0; j < 32; j++)
            dst[j] = (float)(int8_t)b[2 + j] * d;
    }
}

/* q4_0: d (half), 16 bytes of nibbles; element j is the low nibble of
 * byte j, element j + 16 its high nibble; value = (q - 8) * d. */
static void q4_0_row(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 32, b += 18, dst += 32) {
        float d = half_f32(le16(b));
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)((b[2 + j] & 0x0f) - 8) * d;
            dst[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
        }
    }
}

/* q4_1: d, m (halves), nibbles as q4_0; value = q * d + m. */
static void q4_1_row(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 32, b += 20, dst += 32) {
        float d = half_f32(le16(b)), m = half_f32(le16(b + 2));
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(b[4 + j] & 0x0f) * d + m;
            dst[j + 16] = (float)(b[4 + j] >> 4) * d + m;
        }
    }
}

/* The fifth bits of q5_0/q5_1: bit j of the 32-bit field qh belongs to
 * element j, bit j + 16 to element j + 16. */
static int q5_low(const uint8_t *qs, uint32_t qh, int j) {
    return (qs[j] & 0x0f) | (int)(((qh >> j) << 4) & 0x10);
}

static int q5_high(const uint8_t *qs, uint32_t qh, int j) {
    return (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
}

/* q5_0: d (half), qh (32 bits), nibbles; value = (q - 16) * d. */
static void q5_0_row(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 32, b += 22, dst += 32) {
        float d = half_f32(le16(b));
        uint32_t qh = le32(b + 2);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(q5_low(b + 6, qh, j) - 16) * d;
            dst[j + 16] = (float)(q5_high(b + 6, qh, j) - 16) * d;
        }
    }
}

/* q5_1: d, m (halves), qh, nibbles; value = q * d + m. */
static void q5_1_row(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 32, b += 24, dst += 32) {
        float d = half_f32(le16(b)), m = half_f32(le16(b + 2));
        uint32_t qh = le32(b + 4);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)q5_low(b + 8, qh, j) * d + m;
            dst[j + 16] = (float)q5_high(b + 8, qh, j) * d + m;
        }
    }
}

static const struct {
    uint32_t type;
    gguf_to_float_fn fn;
} own[] = {
    {0, f32_row},  {1, f16_row},  {30, bf16_row}, {8, q8_0_row},
    {2, q4_0_row}, {3, q4_1_row}, {6, q5_0_row},  {7, q5_1_row},
};

bool gguf_dq_type(const gguf_ggml *g, uint32_t t, const char **name,
                  uint32_t *blck, uint32_t *size) {
    if (gguf_ggml_type_known(t)) {
        *name = gguf_ggml_type_name(t);
        *blck = gguf_ggml_blck_size(t);
        *size = gguf_ggml_type_size(t);
        return true;
    }
    struct gguf_dq dq;
    if (t < 40 || !g || !gguf_ggml_dq(g, t, &dq))
        return false;
    *name = dq.name;
    *blck = dq.blck;
    *size = dq.size;
    return true;
}

gguf_to_float_fn gguf_dq_own(uint32_t t, bool simd) {
    gguf_to_float_fn fast = simd ? gguf_dq_simd(t) : NULL;
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (own[i].type == t)
            return fast ? fast : own[i].fn;
    return NULL;
}

bool gguf_dq_find(const gguf_ggml *g, uint32_t t, struct gguf_dq *dq) {
    gguf_to_float_fn fn = gguf_dq_own(t, true);
    if (fn) {
        dq->type = t;
        dq->name = gguf_ggml_type_name(t);
        dq->blck = gguf_ggml_blck_size(t);
        dq->size = gguf_ggml_type_size(t);
        dq->to_float = fn;
        dq->ggml = false;
        return true;
    }
    return g && gguf_ggml_dq(g, t, dq);
}

bool gguf_dq_extent(const gguf_ggml *g, uint32_t t, uint32_t n_dims,
                    const int64_t *ne, uint64_t *elems, uint64_t *bytes) {
    const char *name;
    uint32_t blck, size;
    if (!gguf_dq_type(g, t, &name, &blck, &size) || n_dims > GGUF_MAX_DIMS)
        return false;
    uint64_t e = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0 || (ne[d] && e > (UINT64_C(1) << 61) / (uint64_t)ne[d]))
            return false;
        e *= (uint64_t)ne[d];
    }
    if (n_dims && (uint64_t)ne[0] % blck != 0)
        return false;
    if (!n_dims && blck != 1)
        return false;
    if (e / blck > UINT64_MAX / size)
        return false;
    *elems = e;
    *bytes = e / blck * size;
    return true;
}
