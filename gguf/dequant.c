/*
 * dequant.c - ggufs's own float32 converters (f32, f16, bf16, q4_0, q4_1,
 * q5_0, q5_1, q8_0 and the K-quants q2_K to q6_K) and the choice between
 * them and ggml's.  (q8_K has no converter: ggml has none either, it is
 * only an intermediate of ggml's dot products.)
 *
 * The block formats are written down in docs/format.md, Tensor block
 * formats.  These portable converters are the reference; where the CPU
 * runs them, vectorized ones that compute the same (dequant_simd.c) are
 * used instead.  Every converter computes exactly what ggml's does (the same
 * products and sums in float, in the same order, no fused multiply-add:
 * C11 mode compiles with contraction off), so the values are bit-identical
 * to ggml's; tests/test_dequant.c checks that against ggml's to_float on
 * random blocks, tests/mount_views.py through the views.
 * Multi-byte fields are little-endian and read byte by byte.
 */
#include "dequant.h"

#include <pthread.h>
#include <string.h>

/* Every half's float, made once (256 KiB): a lookup is what makes f16
 * tensors (one conversion per value) as fast as the quantized ones. */
static float half_tab[1 << 16];
static pthread_once_t half_once = PTHREAD_ONCE_INIT;

static void half_tab_init(void) {
    for (uint32_t h = 0; h < (1u << 16); h++)
        half_tab[h] = half_f32((uint16_t)h);
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

/* ---- K-quants: blocks of 256 values in sub-blocks of 16 or 32, each
 * sub-block with a small integer scale (and min) times the block's half
 * d (and dmin).  Each product and difference is rounded to float where
 * ggml rounds it: the sub-block's scale d x sc (and dmin x m) first, then
 * times the quant, then minus the min.  restrict (the values never
 * overlap the blocks: gguf.h) lets the compiler vectorize the inner
 * loops with the same operations (measured 2.5 to 4 times faster). */

/* q2_K: 16 bytes of scales, 64 of 2-bit quants, half d, half dmin.
 * Value 128h + 32p + l takes bits 2p, 2p + 1 of quant byte 32h + l; its
 * sub-block i (= value / 16) has the scale in the low nibble of scale
 * byte i, the min in the high one. */
static void q2_K_row(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 256, b += 84) {
        float d = half_f32(le16(b + 80)), dmin = half_f32(le16(b + 82));
        for (int i = 0; i < 16; i++, dst += 16) {
            const uint8_t *q = b + 16 + 32 * (i / 8) + 16 * (i % 2);
            int shift = 2 * (i % 8 / 2);
            float dl = d * (float)(b[i] & 15), ml = dmin * (float)(b[i] >> 4);
            for (int l = 0; l < 16; l++)
                dst[l] = dl * (float)((q[l] >> shift) & 3) - ml;
        }
    }
}

/* q3_K's 6-bit scale of sub-block i (16 values), from its 12 bytes s:
 * the low 4 bits in a nibble of s[i % 8] (low for i < 8), the high 2 in
 * bits 2 (i / 4) and 2 (i / 4) + 1 of s[8 + i % 4]; stored plus 32. */
static int q3_scale(const uint8_t *s, int i) {
    int lo = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
    return (lo | ((s[8 + i % 4] >> (2 * (i / 4))) & 3) << 4) - 32;
}

/* q3_K: 32 bytes hmask, 64 of 2-bit quants, 12 of scales, half d.  Value
 * 128h + 32p + l: the 2 bits as q2_K, less 4 unless bit 4h + p of hmask
 * byte l is set. */
static void q3_K_row(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 256, b += 110) {
        float d = half_f32(le16(b + 108));
        for (int i = 0; i < 16; i++, dst += 16) {
            int l0 = 16 * (i % 2), shift = 2 * (i % 8 / 2);
            const uint8_t *q = b + 32 + 32 * (i / 8) + l0, *hm = b + l0;
            int hbit = 1 << (i / 2);
            float dl = d * (float)q3_scale(b + 96, i);
            for (int l = 0; l < 16; l++)
                dst[l] = dl * (float)(((q[l] >> shift) & 3) -
                                      (hm[l] & hbit ? 0 : 4));
        }
    }
}

/* q4_K: half d, half dmin, 12 bytes of scales, 128 of nibbles.  Value
 * 64g + 32t + l is nibble t (0 low) of byte 32g + l, in sub-block
 * i = 2g + t.  q5_K (five): 32 bytes of high bits between the scales and
 * the nibbles, bit i of high byte l adding 16. */
static inline void k45_row(const uint8_t *restrict b, float *restrict dst,
                           int64_t n, bool five) {
    uint32_t size = five ? 176 : 144;
    for (int64_t k = 0; k < n; k += 256, b += size) {
        float dl[8], ml[8];
        gguf_dq_k4_scales(b, dl, ml);
        const uint8_t *qh = b + 16;
        for (int i = 0; i < 8; i++, dst += 32) {
            const uint8_t *q = b + (five ? 48 : 16) + 32 * (i / 2);
            int shift = 4 * (i % 2);
            for (int l = 0; l < 32; l++)
                dst[l] = dl[i] * (float)(((q[l] >> shift) & 15) |
                                         (five ? ((qh[l] >> i) & 1) << 4 : 0)) -
                         ml[i];
        }
    }
}

static void q4_K_row(const void *restrict src, float *restrict dst, int64_t n) {
    k45_row(src, dst, n, false);
}

static void q5_K_row(const void *restrict src, float *restrict dst, int64_t n) {
    k45_row(src, dst, n, true);
}

/* q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed
 * scales, half d.  Value 128h + 32p + l: nibble p / 2 of low byte
 * 64h + 32 (p % 2) + l, with bits 2p, 2p + 1 of high byte 32h + l above
 * it, less 32; its scale is that of sub-block value / 16. */
static void q6_K_row(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 256, b += 210) {
        float d = half_f32(le16(b + 208));
        for (int i = 0; i < 16; i++, dst += 16) {
            int h = i / 8, p = i % 8 / 2, l0 = 16 * (i % 2);
            const uint8_t *ql = b + 64 * h + 32 * (p % 2) + l0;
            const uint8_t *qh = b + 128 + 32 * h + l0;
            float ds = d * (float)(int8_t)b[192 + i];
            for (int l = 0; l < 16; l++)
                dst[l] = ds * (float)((((ql[l] >> (4 * (p / 2))) & 15) |
                                       ((qh[l] >> (2 * p)) & 3) << 4) -
                                      32);
        }
    }
}

static const struct {
    uint32_t type;
    gguf_to_float_fn fn;
} own[] = {
    {0, f32_row},   {1, f16_row},   {30, bf16_row}, {8, q8_0_row},
    {2, q4_0_row},  {3, q4_1_row},  {6, q5_0_row},  {7, q5_1_row},
    {10, q2_K_row}, {11, q3_K_row}, {12, q4_K_row}, {13, q5_K_row},
    {14, q6_K_row},
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
