/*
 * dequant.h - tensor values as float32 (no FUSE): ggufs's own converters
 * for the simple types, and ggml's own code found at run time for the
 * rest.
 *
 * A tensor's data is a run of blocks, rows one after the other with no
 * gap: element k (ggml order, ne[0] fastest) lies in block k / blck, which
 * starts at byte (k / blck) * size.  So any byte range of the float32
 * values maps to whole blocks of the data, converted alone: a converter
 * takes whole blocks and writes blck floats per block.
 *
 * ggufs's own code covers f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0
 * and q2_K, q3_K, q4_K, q5_K, q6_K (docs/format.md, Tensor block
 * formats).  Every other type is converted by ggml's libggml-base,
 * dlopen'ed (RTLD_LOCAL) from a list of usual places or a path, and
 * trusted only once the name, block size and block bytes it reports for
 * every type ggufs knows (ids 0-39) agree with ggufs's table; ids from
 * 40 up, which ggufs does not know, take their name and sizes from ggml,
 * once ggml's own GGUF reader accepts the id.
 */
#ifndef GGUF_DEQUANT_H
#define GGUF_DEQUANT_H

#include "gguf.h"

/* Converts n elements (a multiple of the block size) at src to float32;
 * src and dst never overlap (some converters are compiled on that
 * promise: restrict). */
typedef void (*gguf_to_float_fn)(const void *src, float *dst, int64_t n);

/* How one tensor type becomes float32. */
struct gguf_dq {
    uint32_t type;
    const char *name; /* "q4_K" */
    uint32_t blck;    /* elements per block */
    uint32_t size;    /* bytes per block */
    gguf_to_float_fn to_float;
    bool ggml; /* ggml's code (else ggufs's own) */
};

typedef struct gguf_ggml gguf_ggml; /* ggml's library, loaded (ggmlrt.c) */

/* The converter of ggml type t into dq: ggufs's own for the types it
 * covers (the vectorized one when the CPU has one), else ggml's (g may be
 * NULL) if ggml has one.  false if none. */
bool gguf_dq_find(const gguf_ggml *g, uint32_t t, struct gguf_dq *dq);
/* Name and sizes of type t: ggufs's table, else ggml's for the ids ggufs
 * does not know (g may be NULL).  false if neither knows t. */
bool gguf_dq_type(const gguf_ggml *g, uint32_t t, const char **name,
                  uint32_t *blck, uint32_t *size);
/* Elements of a tensor of that shape and the bytes its blocks take with
 * that type; false on overflow (elements past 2^61) or a first dimension
 * that is not a multiple of the block size. */
bool gguf_dq_extent(const gguf_ggml *g, uint32_t t, uint32_t n_dims,
                    const int64_t *ne, uint64_t *elems, uint64_t *bytes);

/* ggufs's own converter of type t, NULL if it has none: the vectorized
 * one this CPU runs when simd and there is one, else the portable one
 * (dequant.c).  Both compute the same bits; tests judge one by the other. */
gguf_to_float_fn gguf_dq_own(uint32_t t, bool simd);
/* The 8 sub-block scales d x sc and mins dmin x m of the q4_K or q5_K
 * block b (its first 16 bytes: d, dmin, the packed 6-bit scales), as the
 * portable and vectorized converters both use them. */
void gguf_dq_k4_scales(const uint8_t *b, float dl[8], float ml[8]);
/* dequant_simd.c: the vectorized converter of type t this CPU runs (AVX2
 * and F16C: f16, bf16, q8_0, q4_0, q4_1, q4_K, q6_K), else NULL. */
gguf_to_float_fn gguf_dq_simd(uint32_t t);

/* ---- ggml's library (ggmlrt.c) ------------------------------------- */

/* The usual places of libggml-base, in the order they are tried;
 * NULL-terminated. */
extern const char *const gguf_ggml_places[];
/* Loads ggml's library from path, or (path NULL) from the first usual
 * place that has one.  The file must be a regular file owned by root or
 * the effective user and writable by nobody else, in a directory of the
 * same kind (ggufs runs as root: a library is code).  Refused, with a
 * message naming the file, when it lacks the functions ggufs calls or
 * disagrees with ggufs's table.  GGUF_E_NOTFOUND when path is NULL and
 * no usual place has one. */
enum gguf_status gguf_ggml_load(gguf_ggml **out, const char *path,
                                struct gguf_error *err);
void gguf_ggml_unload(gguf_ggml *g);
const char *gguf_ggml_path(const gguf_ggml *g);
/* ggml's converter and sizes for type t; false if it has none. */
bool gguf_ggml_dq(const gguf_ggml *g, uint32_t t, struct gguf_dq *dq);

#endif
