/*
 * fuzz_edits.h - what fuzz_overlay and fuzz_pending share: a small model
 * to apply hostile edits to, and the properties every applied set of edits
 * must keep (the header still serializes to a GGUF the library reads back,
 * holding the same keys).  Any violated property aborts with a message.
 */
#ifndef GGUFS_FUZZ_EDITS_H
#define GGUFS_FUZZ_EDITS_H

#include "craft.h"
#include "gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noreturn, format(printf, 2, 3))) static void fuzz_bug(
    const char *target, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: property violated: ", target);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

/* A refusal says why on one line, with the status it returned. */
static void fuzz_check_err(const char *target, enum gguf_status st,
                           const struct gguf_error *err, const char *what) {
    if (st == GGUF_OK)
        return;
    size_t n = strnlen(err->msg, sizeof err->msg);
    if (n == 0 || n == sizeof err->msg || memchr(err->msg, '\n', n))
        fuzz_bug(target, "%s: a refusal without a one-line message", what);
}

/* The model edits are applied to: a few keys of several types, a tensor. */
static gguf_ctx *fuzz_base(const char *target) {
    struct craft c = {0};
    craft_header(&c, 3, 1, 4);
    craft_kv_str(&c, "general.architecture", "llama");
    craft_kv_str(&c, "general.name", "base");
    craft_kv_u32(&c, "llama.context_length", 4096);
    craft_kv_u32(&c, "general.alignment", 32);
    craft_tensor(&c, "t0", 1, (int64_t[]){8}, 0, 0);
    craft_pad(&c, 32);
    craft_zeros(&c, 32);
    gguf_ctx *ctx = NULL;
    struct gguf_error err = {0};
    if (gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err) != GGUF_OK)
        fuzz_bug(target, "the base model does not open: %s", err.msg);
    craft_free(&c);
    return ctx;
}

/* After edits were applied to ctx: its header serializes, and reads back
 * as a GGUF holding every key of ctx (the filler aside). */
static void fuzz_check_applied(const char *target, const gguf_ctx *ctx) {
    struct gguf_buf b = {0};
    struct gguf_error err = {0};
    gguf_ctx *back = NULL;
    enum gguf_status st = gguf_write_header(ctx, 0, &b, &err);
    fuzz_check_err(target, st, &err, "gguf_write_header");
    if (st != GGUF_OK) {
        gguf_buf_free(&b);
        return;
    }
    /* The tensor's data after the header, as the file would have it. */
    uint8_t zeros[64] = {0};
    if (gguf_buf_add(&b, zeros, sizeof zeros) != GGUF_OK)
        fuzz_bug(target, "out of memory");
    st = gguf_open_mem(&back, b.p, b.len, GGUF_OPEN_ALLOW_NESTED, &err);
    if (st != GGUF_OK)
        fuzz_bug(target, "the edited header does not read back: %s", err.msg);
    for (int64_t i = 0; i < gguf_n_kv(ctx); i++) {
        size_t kl;
        const char *k = gguf_kv_key(ctx, i, &kl);
        if (!gguf_key_is_filler(k, kl) && gguf_find_key(back, k, kl) < 0)
            fuzz_bug(target, "key %lld is not read back", (long long)i);
    }
    gguf_close(back);
    gguf_buf_free(&b);
}

#endif
