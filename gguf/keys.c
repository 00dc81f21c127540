/*
 * keys.c - facts about reserved keys and layout rules that several parts
 * of ggufs must agree on: each is decided here once.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static bool key_eq(const char *key, size_t len, const char *lit, size_t n) {
    return key && len == n && memcmp(key, lit, n) == 0;
}

bool gguf_key_is_filler(const char *key, size_t len) {
    return key_eq(key, len, GGUF_FILLER_KEY, sizeof GGUF_FILLER_KEY - 1);
}

bool gguf_key_is_alignment(const char *key, size_t len) {
    return key_eq(key, len, GGUF_ALIGNMENT_KEY, sizeof GGUF_ALIGNMENT_KEY - 1);
}

bool gguf_key_is_overlay(const char *key, size_t len) {
    size_t n = sizeof GGUF_OVERLAY_NS - 1;
    return key && len >= n && memcmp(key, GGUF_OVERLAY_NS, n) == 0;
}

/* Callers keep x far below 2^64 (offsets are bounded by file sizes < 2^63
 * and alignments by 2^31), so x + align - 1 cannot wrap. */
uint64_t gguf_align_up(uint64_t x, uint64_t align) {
    return (x + align - 1) / align * align;
}

uint32_t gguf_ctx_alignment(const gguf_ctx *ctx) {
    return ctx->alignment ? ctx->alignment : GGUF_DEFAULT_ALIGNMENT;
}

bool gguf_split_name(const char *path, int *no, int *count, size_t *cut) {
    size_t len = strlen(path);
    const char *suf = "-00000-of-00000.gguf";
    size_t sl = strlen(suf);
    if (len < sl)
        return false;
    const char *p = path + len - sl;
    int a, b;
    char tail[8];
    if (sscanf(p, "-%5d-of-%5d%7s", &a, &b, tail) != 3 ||
        strcmp(tail, ".gguf") != 0 || p[6] != '-' || p[9] != '-')
        return false;
    *no = a;
    *count = b;
    *cut = (size_t)(p - path);
    return true;
}
