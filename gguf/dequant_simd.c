/*
 * dequant_simd.c - vectorized versions of ggufs's own float32 converters
 * (f16, bf16, q8_0, q4_0, q4_1, q4_K, q6_K) for x86 CPUs with AVX2 and
 * F16C, chosen at run time (gguf_dq_simd); other CPUs keep the portable
 * ones of dequant.c.
 *
 * Each computes exactly what the portable converter computes, hence what
 * ggml computes: a half becomes a float exactly (F16C's conversion, which
 * makes NaNs quiet as half_f32 does), a quant becomes a float exactly, and
 * the products and sums are the same single float operations in the same
 * order (a multiply, then an add: never a fused multiply-add).
 * tests/test_dequant.c judges each against the portable one on random
 * blocks, every half and odd lengths, and against ggml's to_float;
 * tests/mount_views.py judges the views against ggml itself.
 */
#include "dequant.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#define SIMD __attribute__((target("avx2,f16c")))

SIMD static float half(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2); /* x86 is little-endian */
    return _cvtsh_ss(h);
}

SIMD static void f16_simd(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                      (const __m128i *)(p + 2 * i))));
    for (; i < n; i++)
        dst[i] = half(p + 2 * i);
}

SIMD static void bf16_simd(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(
            _mm_loadu_si128((const __m128i *)(p + 2 * i)));
        _mm256_storeu_ps(dst + i,
                         _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++) {
        uint32_t u = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
        memcpy(dst + i, &u, 4);
    }
}

/* 8 signed bytes at q as floats, times d. */
SIMD static __m256 i8x8_mul(__m128i q, __m256 d) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
}

SIMD static void q8_0_simd(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 32, b += 34, dst += 32) {
        __m256 d = _mm256_set1_ps(half(b));
        for (int j = 0; j < 32; j += 8)
            _mm256_storeu_ps(
                dst + j,
                i8x8_mul(_mm_loadl_epi64((const __m128i *)(b + 2 + j)), d));
    }
}

/* The 16 bytes of nibbles at qs as two vectors of 16 bytes: the low
 * nibbles (elements 0-15) and the high ones (16-31), minus sub. */
SIMD static void nibbles(const uint8_t *qs, int sub, __m128i *lo, __m128i *hi) {
    __m128i x = _mm_loadu_si128((const __m128i *)qs);
    __m128i m = _mm_set1_epi8(0x0f), s = _mm_set1_epi8((char)sub);
    *lo = _mm_sub_epi8(_mm_and_si128(x, m), s);
    *hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), m), s);
}

SIMD static void q4_0_simd(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 32, b += 18, dst += 32) {
        __m256 d = _mm256_set1_ps(half(b));
        __m128i lo, hi;
        nibbles(b + 2, 8, &lo, &hi);
        _mm256_storeu_ps(dst, i8x8_mul(lo, d));
        _mm256_storeu_ps(dst + 8, i8x8_mul(_mm_srli_si128(lo, 8), d));
        _mm256_storeu_ps(dst + 16, i8x8_mul(hi, d));
        _mm256_storeu_ps(dst + 24, i8x8_mul(_mm_srli_si128(hi, 8), d));
    }
}

SIMD static void q4_1_simd(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 32, b += 20, dst += 32) {
        __m256 d = _mm256_set1_ps(half(b)), m = _mm256_set1_ps(half(b + 2));
        __m128i lo, hi;
        nibbles(b + 4, 0, &lo, &hi);
        _mm256_storeu_ps(dst, _mm256_add_ps(i8x8_mul(lo, d), m));
        _mm256_storeu_ps(dst + 8,
                         _mm256_add_ps(i8x8_mul(_mm_srli_si128(lo, 8), d), m));
        _mm256_storeu_ps(dst + 16, _mm256_add_ps(i8x8_mul(hi, d), m));
        _mm256_storeu_ps(dst + 24,
                         _mm256_add_ps(i8x8_mul(_mm_srli_si128(hi, 8), d), m));
    }
}

/* 16 values from the 16 bytes q (small integers), times d, minus m. */
SIMD static void i8x16_mul_sub(float *dst, __m128i q, __m256 d, __m256 m) {
    _mm256_storeu_ps(dst, _mm256_sub_ps(i8x8_mul(q, d), m));
    _mm256_storeu_ps(dst + 8,
                     _mm256_sub_ps(i8x8_mul(_mm_srli_si128(q, 8), d), m));
}

/* q4_K: per 32 bytes of nibbles, the low ones are one sub-block, the
 * high ones the next; each value d x sc x n - dmin x m as dequant.c. */
SIMD static void q4_K_simd(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n; k += 256, b += 144) {
        float dl[8], ml[8];
        gguf_dq_k4_scales(b, dl, ml);
        for (int i = 0; i < 8; i += 2, dst += 64) {
            __m256 d0 = _mm256_set1_ps(dl[i]), m0 = _mm256_set1_ps(ml[i]);
            __m256 d1 = _mm256_set1_ps(dl[i + 1]);
            __m256 m1 = _mm256_set1_ps(ml[i + 1]);
            __m128i lo0, hi0, lo1, hi1;
            nibbles(b + 16 + 16 * i, 0, &lo0, &hi0);
            nibbles(b + 32 + 16 * i, 0, &lo1, &hi1);
            i8x16_mul_sub(dst, lo0, d0, m0);
            i8x16_mul_sub(dst + 16, lo1, d0, m0);
            i8x16_mul_sub(dst + 32, hi0, d1, m1);
            i8x16_mul_sub(dst + 48, hi1, d1, m1);
        }
    }
}

/* 16 signed bytes q as floats, times d. */
SIMD static void i8x16_mul(float *dst, __m128i q, __m256 d) {
    _mm256_storeu_ps(dst, i8x8_mul(q, d));
    _mm256_storeu_ps(dst + 8, i8x8_mul(_mm_srli_si128(q, 8), d));
}

/* q6_K: 32 values at a time (half h, pair p): the nibbles of 32 low
 * bytes, bits 2p, 2p + 1 of 32 high bytes above them, less 32; the first
 * 16 of one sub-block's scale, the next 16 of the next. */
SIMD static void q6_K_simd(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03);
    for (int64_t k = 0; k < n; k += 256, b += 210) {
        float d = half(b + 208);
        for (int i = 0; i < 16; i += 2, dst += 32) {
            int h = i / 8, p = i % 8 / 2;
            __m256i ql = _mm256_loadu_si256(
                (const __m256i *)(b + 64 * h + 32 * (p % 2)));
            __m256i qh =
                _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
            ql = _mm256_and_si256(
                _mm256_srl_epi16(ql, _mm_cvtsi32_si128(4 * (p / 2))), m4);
            qh = _mm256_and_si256(
                _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * p)), m2);
            __m256i q =
                _mm256_sub_epi8(_mm256_or_si256(ql, _mm256_slli_epi16(qh, 4)),
                                _mm256_set1_epi8(32));
            __m256 d0 = _mm256_set1_ps(d * (float)(int8_t)b[192 + i]);
            __m256 d1 = _mm256_set1_ps(d * (float)(int8_t)b[193 + i]);
            i8x16_mul(dst, _mm256_castsi256_si128(q), d0);
            i8x16_mul(dst + 16, _mm256_extracti128_si256(q, 1), d1);
        }
    }
}

/* AVX2 (with the OS saving its registers: __builtin_cpu_supports checks
 * that) and F16C (CPUID leaf 1, ECX: clang 14's __builtin_cpu_supports
 * does not know "f16c", the fuzzers' build uses it).  Asked once: a mount
 * asks per tensor, and CPUID in a VM is a trip to the hypervisor. */
static int simd_ok;
static pthread_once_t simd_once = PTHREAD_ONCE_INIT;

static void simd_probe(void) {
    unsigned a, b, c, d;
    __builtin_cpu_init();
    simd_ok = __builtin_cpu_supports("avx2") &&
              __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static int have_simd(void) {
    pthread_once(&simd_once, simd_probe);
    return simd_ok;
}

gguf_to_float_fn gguf_dq_simd(uint32_t t) {
    if (!have_simd())
        return NULL;
    switch (t) {
    case 1:
        return f16_simd;
    case 30:
        return bf16_simd;
    case 8:
        return q8_0_simd;
    case 2:
        return q4_0_simd;
    case 3:
        return q4_1_simd;
    case 12:
        return q4_K_simd;
    case 14:
        return q6_K_simd;
    default:
        return NULL;
    }
}

#else

gguf_to_float_fn gguf_dq_simd(uint32_t t) {
    (void)t;
    return NULL;
}

#endif
