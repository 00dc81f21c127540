/*
 * arr.h - the tokenizer's arrays as vocab/ reads them: a metadata array
 * of one element type, its elements reached through the payload the gguf
 * library validated (gguf_kv_payload: element type, count, elements),
 * bounds checked again here all the same.  Internal to vocab/.
 */
#ifndef GGUFS_VOCAB_ARR_H
#define GGUFS_VOCAB_ARR_H

#include "vocab.h"

struct voc_arr {
    enum gguf_type et;
    uint64_t n;
    const uint8_t *p, *end; /* the elements */
};

/* Key key of ctx as an array of element type et: true and *a, else false
 * (no such key, not an array, another element type, a short payload). */
bool voc_arr_of(const gguf_ctx *ctx, const char *key, enum gguf_type et,
                struct voc_arr *a);
/* The next string element at *pos (a position in a->p..end): true with
 * *s, *len and *pos moved past it; false at the end or on a bad length. */
bool voc_arr_next_str(const struct voc_arr *a, const uint8_t **pos,
                      const uint8_t **s, uint64_t *len);
/* String element i (a walk from the first: O(i)). */
bool voc_arr_str(const struct voc_arr *a, uint64_t i, const uint8_t **s,
                 uint64_t *len);
/* Element i of a 4-byte array (float32, int32, uint32), its raw bits. */
bool voc_arr_u32(const struct voc_arr *a, uint64_t i, uint32_t *v);
/* An integer key as int64 (any integer type that fits): true, else false
 * (absent or not an integer). */
bool voc_int(const gguf_ctx *ctx, const char *key, int64_t *v);

#endif
