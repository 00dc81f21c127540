/*
 * buf.c - growable byte buffers.  Growth is overflow-checked: a request
 * that cannot be represented in size_t fails with GGUF_E_NOMEM instead of
 * wrapping around.
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum gguf_status gguf_buf_reserve(struct gguf_buf *b, size_t extra) {
    if (extra > SIZE_MAX - b->len)
        return GGUF_E_NOMEM;
    size_t need = b->len + extra;
    if (need <= b->cap)
        return GGUF_OK;
    /* Double (amortised O(1) appends), but never less than asked for. */
    size_t cap = b->cap < 64 ? 64 : b->cap;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return GGUF_E_NOMEM;
    b->p = p;
    b->cap = cap;
    return GGUF_OK;
}

enum gguf_status gguf_buf_add(struct gguf_buf *b, const void *p, size_t n) {
    enum gguf_status st = gguf_buf_reserve(b, n);
    if (st != GGUF_OK)
        return st;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    return GGUF_OK;
}

void gguf_buf_free(struct gguf_buf *b) {
    if (!b)
        return;
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
