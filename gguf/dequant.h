/*
 * dequant.h - the float32 converters' parts shared inside the library
 * (dequant.c, dequant_simd.c, ggmlrt.c) and with their tests: what
 * converts a type, and its rules, is public (gguf.h, "tensor values as
 * float32").  Calls: dequant.c chooses between its converters and
 * dequant_simd.c's (gguf_dq_own calls gguf_dq_simd); both use the
 * primitives below, so dequant_simd.c calls nothing of dequant.c.
 */
#ifndef GGUF_DEQUANT_H
#define GGUF_DEQUANT_H

#include "gguf.h"

#include <string.h>

/* ggufs's own converter of type t, NULL if it has none: the vectorized
 * one this CPU runs when simd and there is one, else the portable one
 * (dequant.c).  Both compute the same bits; tests judge one by the other. */
gguf_to_float_fn gguf_dq_own(uint32_t t, bool simd);
/* dequant_simd.c: the vectorized converter of type t this CPU runs (AVX2
 * and F16C: f16, bf16, q8_0, q4_0, q4_1, q4_K, q6_K), else NULL. */
gguf_to_float_fn gguf_dq_simd(uint32_t t);

/* The usual places of libggml-base, in the order they are tried;
 * NULL-terminated. */
extern const char *const gguf_ggml_places[];

/* ---- what the portable and vectorized converters both compute ------ */

/* Static inline: each converter's file compiles them in, as dequant.c did
 * when they were its own, and dequant_simd.c calls nothing of dequant.c. */

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE half to float, exactly: normals rebias the exponent (15 -> 127),
 * subnormals are m * 2^-24 (exact in float), infinities keep their sign
 * and NaNs their payload with the quiet bit set (what ggml's conversion,
 * and x86's, give). */
static inline float half_f32(uint16_t h) {
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

static inline uint16_t le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

/* The 6-bit scale and min of sub-block i (0-7) of q4_K and q5_K, from
 * their 12 bytes s: for i < 4 the low 6 bits of s[i] and s[i + 4]; else
 * a nibble of s[i + 4] (low: scale, high: min) with the top 2 bits of
 * s[i - 4] (scale) and s[i] (min) above it. */
static inline void k4_scale_min(const uint8_t *s, int i, int *sc, int *m) {
    if (i < 4) {
        *sc = s[i] & 63;
        *m = s[i + 4] & 63;
    } else {
        *sc = (s[i + 4] & 15) | (s[i - 4] >> 6) << 4;
        *m = (s[i + 4] >> 4) | (s[i] >> 6) << 4;
    }
}

/* The 8 sub-block scales d x sc and mins dmin x m of the q4_K or q5_K
 * block b (its first 16 bytes: d, dmin, the packed 6-bit scales), as the
 * portable and vectorized converters both use them. */
static inline void gguf_dq_k4_scales(const uint8_t *b, float dl[8],
                                     float ml[8]) {
    float d = half_f32(le16(b)), dmin = half_f32(le16(b + 2));
    for (int i = 0; i < 8; i++) {
        int sc, m;
        k4_scale_min(b + 4, i, &sc, &m);
        dl[i] = d * (float)sc;
        ml[i] = dmin * (float)m;
    }
}

#endif
