/*
 * keys.c - facts about reserved keys and layout rules that several parts
 * of ggufs must agree on: each is decided here once.
 *
 * Calls: keys.c calls ctx.c (gguf_warn) only; edit.c, read.c and the
 * writers call it.  ctx.c calls neither keys.c nor edit.c.
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

bool gguf_kv_padding(const struct gguf_kv *kv) {
    return (kv->flags & GGUF_KV_PADDING) != 0;
}

bool gguf_kv_is_padding(const gguf_ctx *ctx, int64_t i) {
    return i >= 0 && i < ctx->n_kv && gguf_kv_padding(&ctx->kv[i]);
}

void gguf_mark_padding(gguf_ctx *ctx) {
    for (int64_t i = 0; i < ctx->n_kv; i++) {
        struct gguf_kv *kv = &ctx->kv[i];
        if (!gguf_key_is_filler(kv->key, (size_t)kv->key_len))
            continue;
        bool spaces = kv->type == GGUF_TYPE_STRING && kv->val_len >= 8;
        for (uint64_t b = 8; spaces && b < kv->val_len; b++)
            spaces = kv->val[b] == ' ';
        bool zero =
            kv->type == GGUF_TYPE_UINT8 && kv->val_len == 1 && kv->val[0] == 0;
        if (i == ctx->n_kv - 1 && (spaces || zero)) {
            kv->flags |= GGUF_KV_PADDING;
            continue;
        }
        gguf_warn(ctx,
                  "key %s (KV %lld) was not written by ggufs, which pads "
                  "headers with a key of that name: shown as a normal key; "
                  "commits that need padding are refused",
                  GGUF_FILLER_KEY, (long long)i);
    }
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
