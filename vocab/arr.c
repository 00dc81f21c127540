/*
 * arr.c - the tokenizer's arrays read from a value's payload (arr.h).
 * The payload is the gguf library's, validated at open and at each edit;
 * each length is checked against its end again, so that a wrong payload
 * is an absent element, never a read past it.
 */
#include "arr.h"

#include <string.h>

bool voc_arr_of(const gguf_ctx *ctx, const char *key, enum gguf_type et,
                struct voc_arr *a) {
    int64_t i = gguf_find_key(ctx, key, strlen(key));
    size_t len = 0;
    if (i < 0 || gguf_kv_type(ctx, i) != GGUF_TYPE_ARRAY ||
        gguf_kv_arr_type(ctx, i) != et)
        return false;
    const uint8_t *p = gguf_kv_payload(ctx, i, &len);
    if (!p || len < 12)
        return false;
    a->et = et;
    a->n = voc_le64(p + 4);
    a->p = p + 12;
    a->end = p + len;
    size_t esz = gguf_type_size(et);
    a->esz = esz; /* 0 for strings */
    if (et != GGUF_TYPE_STRING &&
        (!esz || a->n > (uint64_t)(a->end - a->p) / esz))
        return false;
    return true;
}

bool voc_arr_str(const struct voc_arr *a, uint64_t i, const uint8_t **s,
                 uint64_t *len) {
    if (a->et != GGUF_TYPE_STRING || i >= a->n)
        return false;
    const uint8_t *pos = a->p;
    for (uint64_t k = 0; k <= i; k++)
        if (!voc_arr_next_str(a, &pos, s, len))
            return false;
    return true;
}

bool voc_int(const gguf_ctx *ctx, const char *key, int64_t *v) {
    int64_t i = gguf_find_key(ctx, key, strlen(key));
    return i >= 0 && gguf_kv_get_i64(ctx, i, v);
}

bool voc_flag(const gguf_ctx *ctx, const char *key, bool dflt) {
    int64_t i = gguf_find_key(ctx, key, strlen(key));
    size_t len = 0;
    const uint8_t *p = i < 0 ? NULL : gguf_kv_payload(ctx, i, &len);
    if (!p || gguf_kv_type(ctx, i) != GGUF_TYPE_BOOL || len < 1)
        return dflt;
    return p[0] != 0;
}
