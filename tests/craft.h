/*
 * craft.h - a small builder for handcrafted GGUF bytes, for tests and the
 * corrupt-file generator.  Nothing here validates: the point is to be able
 * to write anything, including every kind of broken file.
 *
 *   struct craft c = {0};
 *   craft_header(&c, 3, 1, 1);             // magic, version, counts
 *   craft_kv_u32(&c, "general.alignment", 32);
 *   craft_tensor(&c, "t0", 1, (int64_t[]){8}, 0, 0);
 *   craft_pad(&c, 32);                     // data section starts here
 *   craft_zeros(&c, 32);                   // tensor data
 *   craft_write(&c, "x.gguf");
 *   craft_free(&c);
 *
 * An allocation failure sets c->failed and later calls do nothing;
 * craft_write and users check it.
 */
#ifndef GGUFS_CRAFT_H
#define GGUFS_CRAFT_H

#include "gguf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct craft {
    struct gguf_buf b;
    bool failed;
};

void craft_free(struct craft *c);
static inline const uint8_t *craft_data(const struct craft *c) { return c->b.p; }
static inline size_t craft_len(const struct craft *c) { return c->b.len; }

/* Raw little-endian pieces. */
void craft_bytes(struct craft *c, const void *p, size_t n);
void craft_zeros(struct craft *c, size_t n);
void craft_u8(struct craft *c, uint8_t v);
void craft_u16(struct craft *c, uint16_t v);
void craft_u32(struct craft *c, uint32_t v);
void craft_u64(struct craft *c, uint64_t v);
void craft_f32(struct craft *c, float v);
void craft_f64(struct craft *c, double v);
/* A GGUF string: uint64 length + bytes (craft_str uses strlen). */
void craft_str(struct craft *c, const char *s);
void craft_strn(struct craft *c, const void *s, uint64_t len);
/* Zero bytes up to the next multiple of align (from the start). */
void craft_pad(struct craft *c, uint64_t align);
/* Overwrites 4 or 8 bytes at off (off must be inside). */
void craft_put32(struct craft *c, size_t off, uint32_t v);
void craft_put64(struct craft *c, size_t off, uint64_t v);

/* "GGUF", uint32 version, uint64 n_tensors, uint64 n_kv. */
void craft_header(struct craft *c, uint32_t version, uint64_t n_tensors,
                  uint64_t n_kv);

/* Key/value pairs: key string, uint32 type, value. */
void craft_kv_u8(struct craft *c, const char *key, uint8_t v);
void craft_kv_i8(struct craft *c, const char *key, int8_t v);
void craft_kv_u16(struct craft *c, const char *key, uint16_t v);
void craft_kv_i16(struct craft *c, const char *key, int16_t v);
void craft_kv_u32(struct craft *c, const char *key, uint32_t v);
void craft_kv_i32(struct craft *c, const char *key, int32_t v);
void craft_kv_f32(struct craft *c, const char *key, float v);
void craft_kv_bool(struct craft *c, const char *key, uint8_t byte);
void craft_kv_str(struct craft *c, const char *key, const char *v);
void craft_kv_u64(struct craft *c, const char *key, uint64_t v);
void craft_kv_i64(struct craft *c, const char *key, int64_t v);
void craft_kv_f64(struct craft *c, const char *key, double v);
/* Key and type only (the caller appends the value). */
void craft_kv_head(struct craft *c, const char *key, uint32_t type);
/* Key, type array, element type and count (the caller appends elements). */
void craft_kv_arr(struct craft *c, const char *key, uint32_t elem_type,
                  uint64_t n);
void craft_kv_arr_u32(struct craft *c, const char *key, const uint32_t *v,
                      uint64_t n);
void craft_kv_arr_str(struct craft *c, const char *key, const char *const *v,
                      uint64_t n);

/* A tensor info: name, n_dims, ne[0..n_dims), ggml type, relative offset. */
void craft_tensor(struct craft *c, const char *name, uint32_t n_dims,
                  const int64_t *ne, uint32_t ggml_type, uint64_t offset);
void craft_tensor_n(struct craft *c, const void *name, uint64_t name_len,
                    uint32_t n_dims, const int64_t *ne, uint32_t ggml_type,
                    uint64_t offset);

/* Writes the bytes to path (created or truncated); false on failure. */
bool craft_write(const struct craft *c, const char *path);

/* ---- the corrupt-file table (corrupt_cases.c) ------------------------ */

/* What ggufs does with a case. */
enum corrupt_verdict {
    CORRUPT_REJECT, /* refused: status and message as given */
    CORRUPT_LOOSE,  /* opens, with a warning containing msg */
    CORRUPT_ACCEPT, /* opens without a warning */
};

struct corrupt_case {
    const char *name;               /* file stem: [a-z0-9_]+ */
    void (*build)(struct craft *c);
    enum gguf_status status;        /* GGUF_OK unless rejected */
    const char *msg;                /* substring of the error (reject) or of
                                       a warning (loose); "" for accept */
    /* What ggml's reference reader says: gguf_init_from_file with
     * no_alloc = true and ctx = NULL (metadata only, as tests/refdump.c
     * loads it), verified against libggml-base.so. */
    bool ggml_rejects;
    bool loose; /* opens with a warning (msg is the warning's substring) */
};

extern const struct corrupt_case corrupt_cases[];
extern const size_t n_corrupt_cases;

static inline enum corrupt_verdict corrupt_verdict(const struct corrupt_case *k) {
    if (k->status != GGUF_OK)
        return CORRUPT_REJECT;
    return k->loose ? CORRUPT_LOOSE : CORRUPT_ACCEPT;
}

#endif
