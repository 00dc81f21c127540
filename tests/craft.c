/*
 * craft.c - the GGUF byte builder (see craft.h).
 */
#include "craft.h"

#include "internal.h" /* gguf_wr32/gguf_wr64 */

#include <stdio.h>
#include <string.h>

void craft_free(struct craft *c) {
    gguf_buf_free(&c->b);
    c->failed = false;
}

void craft_bytes(struct craft *c, const void *p, size_t n) {
    if (c->failed)
        return;
    if (gguf_buf_add(&c->b, p, n) != GGUF_OK)
        c->failed = true;
}

void craft_zeros(struct craft *c, size_t n) {
    if (c->failed)
        return;
    if (gguf_buf_reserve(&c->b, n) != GGUF_OK) {
        c->failed = true;
        return;
    }
    memset(c->b.p + c->b.len, 0, n);
    c->b.len += n;
}

void craft_u8(struct craft *c, uint8_t v) { craft_bytes(c, &v, 1); }

void craft_u16(struct craft *c, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    craft_bytes(c, b, 2);
}

void craft_u32(struct craft *c, uint32_t v) {
    uint8_t b[4];
    gguf_wr32(b, v);
    craft_bytes(c, b, 4);
}

void craft_u64(struct craft *c, uint64_t v) {
    uint8_t b[8];
    gguf_wr64(b, v);
    craft_bytes(c, b, 8);
}

void craft_f32(struct craft *c, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    craft_u32(c, u);
}

void craft_f64(struct craft *c, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    craft_u64(c, u);
}

void craft_strn(struct craft *c, const void *s, uint64_t len) {
    craft_u64(c, len);
    craft_bytes(c, s, (size_t)len);
}

void craft_str(struct craft *c, const char *s) { craft_strn(c, s, strlen(s)); }

void craft_pad(struct craft *c, uint64_t align) {
    if (align == 0)
        return;
    size_t r = (size_t)(c->b.len % align);
    if (r)
        craft_zeros(c, (size_t)(align - r));
}

void craft_put32(struct craft *c, size_t off, uint32_t v) {
    if (!c->failed && off <= c->b.len && c->b.len - off >= 4)
        gguf_wr32(c->b.p + off, v);
}

void craft_put64(struct craft *c, size_t off, uint64_t v) {
    if (!c->failed && off <= c->b.len && c->b.len - off >= 8)
        gguf_wr64(c->b.p + off, v);
}

void craft_header(struct craft *c, uint32_t version, uint64_t n_tensors,
                  uint64_t n_kv) {
    craft_bytes(c, GGUF_MAGIC, 4);
    craft_u32(c, version);
    craft_u64(c, n_tensors);
    craft_u64(c, n_kv);
}

void craft_kv_head(struct craft *c, const char *key, uint32_t type) {
    craft_str(c, key);
    craft_u32(c, type);
}

void craft_kv_u8(struct craft *c, const char *k, uint8_t v) {
    craft_kv_head(c, k, GGUF_TYPE_UINT8);
    craft_u8(c, v);
}
void craft_kv_i8(struct craft *c, const char *k, int8_t v) {
    craft_kv_head(c, k, GGUF_TYPE_INT8);
    craft_u8(c, (uint8_t)v);
}
void craft_kv_u16(struct craft *c, const char *k, uint16_t v) {
    craft_kv_head(c, k, GGUF_TYPE_UINT16);
    craft_u16(c, v);
}
void craft_kv_i16(struct craft *c, const char *k, int16_t v) {
    craft_kv_head(c, k, GGUF_TYPE_INT16);
    craft_u16(c, (uint16_t)v);
}
void craft_kv_u32(struct craft *c, const char *k, uint32_t v) {
    craft_kv_head(c, k, GGUF_TYPE_UINT32);
    craft_u32(c, v);
}
void craft_kv_i32(struct craft *c, const char *k, int32_t v) {
    craft_kv_head(c, k, GGUF_TYPE_INT32);
    craft_u32(c, (uint32_t)v);
}
void craft_kv_f32(struct craft *c, const char *k, float v) {
    craft_kv_head(c, k, GGUF_TYPE_FLOAT32);
    craft_f32(c, v);
}
void craft_kv_bool(struct craft *c, const char *k, uint8_t byte) {
    craft_kv_head(c, k, GGUF_TYPE_BOOL);
    craft_u8(c, byte);
}
void craft_kv_str(struct craft *c, const char *k, const char *v) {
    craft_kv_head(c, k, GGUF_TYPE_STRING);
    craft_str(c, v);
}
void craft_kv_u64(struct craft *c, const char *k, uint64_t v) {
    craft_kv_head(c, k, GGUF_TYPE_UINT64);
    craft_u64(c, v);
}
void craft_kv_i64(struct craft *c, const char *k, int64_t v) {
    craft_kv_head(c, k, GGUF_TYPE_INT64);
    craft_u64(c, (uint64_t)v);
}
void craft_kv_f64(struct craft *c, const char *k, double v) {
    craft_kv_head(c, k, GGUF_TYPE_FLOAT64);
    craft_f64(c, v);
}

void craft_kv_arr(struct craft *c, const char *key, uint32_t elem_type,
                  uint64_t n) {
    craft_kv_head(c, key, GGUF_TYPE_ARRAY);
    craft_u32(c, elem_type);
    craft_u64(c, n);
}

void craft_kv_arr_u32(struct craft *c, const char *key, const uint32_t *v,
                      uint64_t n) {
    craft_kv_arr(c, key, GGUF_TYPE_UINT32, n);
    for (uint64_t i = 0; i < n; i++)
        craft_u32(c, v[i]);
}

void craft_kv_arr_str(struct craft *c, const char *key, const char *const *v,
                      uint64_t n) {
    craft_kv_arr(c, key, GGUF_TYPE_STRING, n);
    for (uint64_t i = 0; i < n; i++)
        craft_str(c, v[i]);
}

void craft_tensor_n(struct craft *c, const void *name, uint64_t name_len,
                    uint32_t n_dims, const int64_t *ne, uint32_t ggml_type,
                    uint64_t offset) {
    craft_strn(c, name, name_len);
    craft_u32(c, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        craft_u64(c, (uint64_t)ne[i]);
    craft_u32(c, ggml_type);
    craft_u64(c, offset);
}

void craft_tensor(struct craft *c, const char *name, uint32_t n_dims,
                  const int64_t *ne, uint32_t ggml_type, uint64_t offset) {
    craft_tensor_n(c, name, strlen(name), n_dims, ne, ggml_type, offset);
}

bool craft_write(const struct craft *c, const char *path) {
    if (c->failed)
        return false;
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = c->b.len == 0 || fwrite(c->b.p, 1, c->b.len, f) == c->b.len;
    if (fclose(f) != 0)
        ok = false;
    return ok;
}
