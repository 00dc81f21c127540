/*
 * read.c - the header parser (gguf_parse): reading and validating a GGUF
 * header into a context.  Where the bytes come from (a path, a file,
 * memory, a reader) is open.c's; the context's lifetime, warnings and
 * getters are ctx.c's.
 *
 * Reading.  The header is read through a struct gguf_reader (gguf.h): a
 * local file's reader preads its descriptor, a remote source's fetches
 * ranges; both are asked for growing chunks (the reader's first chunk,
 * 1 MiB for a file, then at least doubling, or what a count says is
 * needed; never past the size), so a model of many GiB costs only its
 * header.  While parsing, the buffer may move, so keys, values and
 * tensor names are recorded as offsets and turned into pointers at the end.
 * Keys and tensor names are copied, NUL-terminated, into one pool
 * (ctx->names); values stay in the header buffer (ctx->hdr) as their
 * on-disk payload bytes.  Arrays grow as entries are actually parsed, after
 * the counts were bounded by the bytes in the file, so memory stays
 * proportional to the header bytes present, whatever the counts claim.
 *
 * Validation mirrors ggml's reference reader (docs/format.md, What ggml's
 * reader refuses): what ggml accepts opens, what it rejects is refused with
 * one line naming the problem and where.  The deliberate differences (data
 * past the end of the file refused; non-contiguous data, type ids from 40
 * up and odd bool bytes opened with a warning; type ids >= 2^31 refused)
 * are stated in docs/format.md, Where ggufs differs from ggml.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U(x) ((unsigned long long)(x))
#define I(x) ((long long)(x))

#define FIRST_CHUNK (UINT64_C(1) << 20)
#define HEADER_BYTES 24     /* magic, version, two counts */
#define MIN_KV_BYTES 14     /* key length 8 + key >= 1 + type 4 + value >= 1 */
#define MIN_TENSOR_BYTES 24 /* name length 8 + n_dims 4 + type 4 + offset 8 */

/* ---- the parser's state -------------------------------------------- */

struct kv_off {
    uint64_t start, name, val;
}; /* file, pool, file offsets */
struct t_off {
    uint64_t start, name;
};

struct parse {
    gguf_ctx *ctx;
    const struct gguf_reader *rd; /* source: rd, else mem */
    const uint8_t *mem;
    uint64_t size;  /* bytes readable from fd or mem */
    uint64_t fsize; /* the file size the tensor data is checked against:
                       size, except for gguf_check_header */
    uint8_t *buf;   /* bytes [0, have) of the file */
    uint64_t have;
    uint64_t pos;
    unsigned flags;
    struct gguf_buf names;
    struct kv_off *koff; /* in step with ctx->kv and ctx->t */
    struct t_off *toff;
    int64_t cap_koff, cap_toff;
    bool t_name_nul; /* some tensor name contains a NUL byte */
    struct gguf_error *err;
};

/* Formats a message and fails with code (gguf_fail has no va_list form). */
static enum gguf_status __attribute__((format(printf, 3, 4)))
fail(struct parse *pr, enum gguf_status code, const char *fmt, ...) {
    char msg[sizeof pr->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gguf_fail(pr->err, code, "%s", msg);
}

/* Makes bytes [0, end) available (end <= pr->size, checked by callers).
 * Reads at least double what is there, to keep the number of reads
 * logarithmic in the header size. */
static enum gguf_status fill(struct parse *pr, uint64_t end) {
    if (end <= pr->have)
        return GGUF_OK;
    if (end > pr->size)
        return fail(pr, GGUF_E_FORMAT, "internal: read past the end requested");
    uint64_t limit = pr->size;
    if (pr->rd && pr->rd->max_header && pr->rd->max_header < limit)
        limit = pr->rd->max_header;
    if (end > limit)
        return fail(pr, GGUF_E_FORMAT,
                    "the header needs more than %llu bytes (at least %llu), "
                    "past the bound max_header",
                    U(limit), U(end));
    uint64_t first =
        pr->rd && pr->rd->first_chunk ? pr->rd->first_chunk : FIRST_CHUNK;
    uint64_t target = pr->have ? pr->have * 2 : first;
    if (target < end)
        target = end;
    if (target > limit)
        target = limit;
    if (target > SIZE_MAX)
        return fail(pr, GGUF_E_NOMEM,
                    "header of %llu bytes does not fit in memory", U(target));
    uint8_t *b = realloc(pr->buf, (size_t)target);
    if (!b)
        return fail(pr, GGUF_E_NOMEM, "out of memory reading %llu header bytes",
                    U(target));
    pr->buf = b;
    if (!pr->rd) {
        memcpy(b + pr->have, pr->mem + pr->have, (size_t)(target - pr->have));
        pr->have = target;
        return GGUF_OK;
    }
    while (pr->have < target) {
        uint64_t want = target - pr->have;
        if (want > (UINT64_C(1) << 30))
            want = UINT64_C(1) << 30;
        size_t got = 0;
        enum gguf_status st = pr->rd->read(pr->rd->u, pr->have, b + pr->have,
                                           (size_t)want, &got, pr->err);
        if (st != GGUF_OK)
            return st;
        if (got == 0)
            return fail(
                pr, GGUF_E_CHANGED,
                "the file shrank while its header was read (end at %llu, expected %llu)",
                U(pr->have), U(pr->size));
        pr->have += got;
    }
    return GGUF_OK;
}

/* Grows *p (elements of size elem, capacity *cap) to hold n + 1. */
static bool grow(void **p, int64_t *cap, int64_t n, size_t elem) {
    if (n < *cap)
        return true;
    int64_t c = *cap ? *cap * 2 : 16;
    if ((uint64_t)c > SIZE_MAX / elem)
        return false;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* Name callbacks while parsing: names live in the pool at recorded offsets
 * (the pool may still move).  Tensors compare as C strings, as ggml does:
 * its tensor names are char arrays, so "a\0x" and "a\0y" are the same. */
static const char *parse_key(const void *base, int64_t i, size_t *len) {
    const struct parse *pr = base;
    *len = (size_t)pr->ctx->kv[i].key_len;
    return (const char *)pr->names.p + pr->koff[i].name;
}
static const char *parse_tname_c(const void *base, int64_t i, size_t *len) {
    const struct parse *pr = base;
    const char *s = (const char *)pr->names.p + pr->toff[i].name;
    *len = strlen(s);
    return s;
}

/* Appends name bytes [at, at+len) of the file to the pool, NUL-terminated;
 * *off is where they start in the pool. */
static enum gguf_status pool_add(struct parse *pr, uint64_t at, uint64_t len,
                                 uint64_t *off) {
    *off = pr->names.len;
    if (gguf_buf_reserve(&pr->names, (size_t)len + 1) != GGUF_OK)
        return fail(pr, GGUF_E_NOMEM, "out of memory copying names");
    gguf_buf_add(&pr->names, pr->buf + at, (size_t)len);
    gguf_buf_add(&pr->names, "", 1);
    return GGUF_OK;
}

static const char *pool_str(const struct parse *pr, uint64_t off) {
    return (const char *)pr->names.p + off;
}

/* ---- header, keys ---------------------------------------------------- */

static enum gguf_status parse_header(struct parse *pr, uint64_t *n_t,
                                     uint64_t *n_kv) {
    gguf_ctx *ctx = pr->ctx;
    uint64_t F = pr->size;
    enum gguf_status st = fill(pr, F < HEADER_BYTES ? F : HEADER_BYTES);
    if (st != GGUF_OK)
        return st;
    if (F < 4)
        return fail(pr, GGUF_E_FORMAT,
                    "file is %llu bytes long, too short for the GGUF magic",
                    U(F));
    if (memcmp(pr->buf, GGUF_MAGIC, 4) != 0) {
        char q[GGUF_QUOTE_MAX];
        return fail(pr, GGUF_E_FORMAT,
                    "bad magic '%s' at offset 0 (expected 'GGUF')",
                    gguf_quote(q, sizeof q, (const char *)pr->buf, 4));
    }
    if (F < 8)
        return fail(pr, GGUF_E_FORMAT,
                    "version at offset 4 runs past the end of the file (%llu)",
                    U(F));
    uint32_t v = gguf_rd32(pr->buf + 4);
    if (v == 0)
        return fail(pr, GGUF_E_FORMAT, "bad GGUF version 0 at offset 4");
    if ((v & 0xffff) == 0)
        return fail(
            pr, GGUF_E_UNSUPPORTED,
            "version field at offset 4 reads 0x%08x: a big-endian GGUF file? "
            "only little-endian files are supported",
            v);
    if (v == 1)
        return fail(
            pr, GGUF_E_UNSUPPORTED,
            "GGUF version 1 is not supported (ggml dropped it; versions 2 and 3 are)");
    if (v > 3)
        return fail(
            pr, GGUF_E_FORMAT,
            "GGUF version %u at offset 4 is not known (versions 2 and 3 are)",
            v);
    ctx->version = v;
    if (F < HEADER_BYTES)
        return fail(
            pr, GGUF_E_FORMAT,
            "tensor and key counts at offset 8 run past the end of the file (%llu)",
            U(F));
    *n_t = gguf_rd64(pr->buf + 8);
    *n_kv = gguf_rd64(pr->buf + 16);
    /* Bound the counts by the bytes present before anything is sized by
     * them (this also refuses what ggml reads as negative int64). */
    uint64_t rem = F - HEADER_BYTES;
    if (*n_kv > rem / MIN_KV_BYTES)
        return fail(
            pr, GGUF_E_FORMAT,
            "key count %llu at offset 16 cannot fit in the file: %llu bytes follow "
            "the header and each key/value pair needs at least %d",
            U(*n_kv), U(rem), MIN_KV_BYTES);
    rem -= *n_kv * MIN_KV_BYTES;
    if (*n_t > rem / MIN_TENSOR_BYTES)
        return fail(
            pr, GGUF_E_FORMAT,
            "tensor count %llu at offset 8 cannot fit in the file: %llu bytes are "
            "left after the header and %llu keys, and each tensor info needs at least %d",
            U(*n_t), U(rem), U(*n_kv), MIN_TENSOR_BYTES);
    pr->pos = HEADER_BYTES;
    return GGUF_OK;
}

/* Reads a string header at pr->pos for a key (what = "key") or a tensor
 * name: checks the length against ggml's maximum and the file, and makes
 * the bytes available.  *len is the length. */
static enum gguf_status name_at(struct parse *pr, const char *what, int64_t i,
                                uint64_t *len) {
    uint64_t F = pr->size, at = pr->pos;
    if (F - at < 8)
        return fail(
            pr, GGUF_E_FORMAT,
            "%s %lld: name length at offset %llu runs past the end of the file (%llu)",
            what, I(i), U(at), U(F));
    enum gguf_status st = fill(pr, at + 8);
    if (st != GGUF_OK)
        return st;
    uint64_t n = gguf_rd64(pr->buf + at);
    if (n > GGUF_MAX_STRING)
        return fail(
            pr, GGUF_E_FORMAT,
            "%s %lld: string length %llu at offset %llu exceeds the maximum (%llu)",
            what, I(i), U(n), U(at), U(GGUF_MAX_STRING));
    if (n > F - at - 8)
        return fail(
            pr, GGUF_E_FORMAT,
            "%s %lld: string length %llu at offset %llu runs past the end of the file (%llu)",
            what, I(i), U(n), U(at), U(F));
    *len = n;
    return GGUF_OK;
}

static enum gguf_status parse_kv(struct parse *pr, int64_t i) {
    gguf_ctx *ctx = pr->ctx;
    uint64_t F = pr->size, start = pr->pos, klen, off;
    char q[GGUF_QUOTE_MAX];
    enum gguf_status st = name_at(pr, "key", i, &klen);
    if (st != GGUF_OK)
        return st;
    if (klen == 0)
        return fail(pr, GGUF_E_FORMAT, "key %lld at offset %llu is empty", I(i),
                    U(start));
    if ((st = fill(pr, start + 8 + klen)) != GGUF_OK ||
        (st = pool_add(pr, start + 8, klen, &off)) != GGUF_OK)
        return st;
    if (!grow((void **)&ctx->kv, &ctx->cap_kv, i, sizeof *ctx->kv) ||
        !grow((void **)&pr->koff, &pr->cap_koff, i, sizeof *pr->koff))
        return fail(pr, GGUF_E_NOMEM, "out of memory for %lld keys", I(i + 1));
    struct gguf_kv *kv = &ctx->kv[i];
    *kv = (struct gguf_kv){.key_len = klen,
                           .type = GGUF_TYPE_COUNT,
                           .arr_type = GGUF_TYPE_COUNT,
                           .id = (uint32_t)(i + 1)};
    pr->koff[i] = (struct kv_off){.start = start, .name = off};
    gguf_quote(q, sizeof q, pool_str(pr, off), klen);

    int64_t dup;
    if (gguf_index_add(&ctx->kv_index, i, parse_key, pr, &dup) != GGUF_OK)
        return fail(pr, GGUF_E_NOMEM, "out of memory indexing keys");
    if (dup >= 0)
        return fail(pr, GGUF_E_FORMAT,
                    "duplicate key '%s' at offset %llu (first at offset %llu)",
                    q, U(start), U(pr->koff[dup].start));
    pr->pos = start + 8 + klen;

    if (F - pr->pos < 4)
        return fail(
            pr, GGUF_E_FORMAT,
            "key '%s': value type at offset %llu runs past the end of the file (%llu)",
            q, U(pr->pos), U(F));
    if ((st = fill(pr, pr->pos + 4)) != GGUF_OK)
        return st;
    uint32_t type = gguf_rd32(pr->buf + pr->pos);
    if (type >= GGUF_TYPE_COUNT)
        return fail(pr, GGUF_E_FORMAT,
                    "key '%s' at offset %llu has unknown value type %u", q,
                    U(pr->pos), type);
    pr->pos += 4;

    /* The value: scan what is in memory, read more when asked, repeat. */
    unsigned fl =
        GGUF_PCHECK_ANY_BOOL |
        ((pr->flags & GGUF_OPEN_ALLOW_NESTED) ? GGUF_PCHECK_NESTED : 0);
    struct gguf_pscan out;
    for (;;) {
        st = gguf_payload_scan((enum gguf_type)type, pr->buf + pr->pos,
                               pr->have - pr->pos, F - pr->pos, fl, &out,
                               pool_str(pr, off), pr->pos, pr->err);
        if (st != GGUF_OK)
            return st;
        if (!out.need)
            break;
        if ((st = fill(pr, pr->pos + out.need)) != GGUF_OK)
            return st;
    }
    kv->type = type;
    kv->val_len = out.used;
    pr->koff[i].val = pr->pos;
    if (type == GGUF_TYPE_ARRAY) {
        kv->arr_type = gguf_rd32(pr->buf + pr->pos);
        kv->arr_n = gguf_rd64(pr->buf + pr->pos + 4);
    }
    if (out.odd_bools == 1)
        gguf_warn(
            ctx,
            "key '%s' has bool byte %u at offset %llu (ggml reads any nonzero byte as true)",
            q, out.odd_val, U(out.odd_off));
    else if (out.odd_bools > 1)
        gguf_warn(
            ctx,
            "key '%s' has %llu bool bytes other than 0 and 1, the first (%u) at "
            "offset %llu (ggml reads any nonzero byte as true)",
            q, U(out.odd_bools), out.odd_val, U(out.odd_off));
    pr->pos += out.used;
    ctx->n_kv = i + 1;
    return GGUF_OK;
}

/* general.alignment as ggml finds it: the first key whose name, read as a C
 * string, is "general.alignment"; it must be a uint32 power of two. */
static enum gguf_status parse_alignment(struct parse *pr) {
    gguf_ctx *ctx = pr->ctx;
    ctx->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (int64_t i = 0; i < ctx->n_kv; i++) {
        if (strcmp(pool_str(pr, pr->koff[i].name), GGUF_ALIGNMENT_KEY) != 0)
            continue;
        const struct gguf_kv *kv = &ctx->kv[i];
        if (kv->type != GGUF_TYPE_UINT32) {
            char t[48];
            if (kv->type == GGUF_TYPE_ARRAY)
                snprintf(t, sizeof t, "array[%s]",
                         gguf_type_name(kv->arr_type));
            else
                snprintf(t, sizeof t, "%s", gguf_type_name(kv->type));
            return fail(pr, GGUF_E_FORMAT,
                        "key '" GGUF_ALIGNMENT_KEY
                        "' must be a uint32 power of two, found %s "
                        "(at offset %llu)",
                        t, U(pr->koff[i].start));
        }
        uint32_t a = gguf_rd32(pr->buf + pr->koff[i].val);
        if (a == 0 || (a & (a - 1)) != 0)
            return fail(pr, GGUF_E_FORMAT,
                        "key '" GGUF_ALIGNMENT_KEY
                        "' must be a uint32 power of two, found %u "
                        "(at offset %llu)",
                        a, U(pr->koff[i].start));
        ctx->alignment = a;
        break;
    }
    return GGUF_OK;
}

/* ---- tensor infos ----------------------------------------------------- */

/* Tensor info i's name at pr->pos: length within ggml's limit, copied to
 * the pool, not a duplicate (as a C string).  Appends the info to ctx->t
 * with its name and default shape; q gets the quoted name for messages. */
static enum gguf_status tensor_name(struct parse *pr, int64_t i, char *q) {
    gguf_ctx *ctx = pr->ctx;
    uint64_t start = pr->pos, nlen, off;
    enum gguf_status st = name_at(pr, "tensor", i, &nlen);
    if (st != GGUF_OK)
        return st;
    if (nlen > GGUF_MAX_TENSOR_NAME) {
        /* Quote only the beginning: the name may be huge. */
        if ((st = fill(pr, start + 8 + 48)) != GGUF_OK)
            return st;
        gguf_quote(q, 80, (const char *)pr->buf + start + 8, 48);
        return fail(
            pr, GGUF_E_FORMAT,
            "tensor %lld at offset %llu: name '%s' is %llu bytes long (at most %d)",
            I(i), U(start), q, U(nlen), GGUF_MAX_TENSOR_NAME);
    }
    if ((st = fill(pr, start + 8 + nlen)) != GGUF_OK ||
        (st = pool_add(pr, start + 8, nlen, &off)) != GGUF_OK)
        return st;
    if (!grow((void **)&ctx->t, &ctx->cap_t, i, sizeof *ctx->t) ||
        !grow((void **)&pr->toff, &pr->cap_toff, i, sizeof *pr->toff))
        return fail(pr, GGUF_E_NOMEM, "out of memory for %lld tensors",
                    I(i + 1));
    ctx->t[i] = (struct gguf_tensor){.name_len = nlen, .ne = {1, 1, 1, 1}};
    pr->toff[i] = (struct t_off){.start = start, .name = off};
    if (strlen(pool_str(pr, off)) != nlen)
        pr->t_name_nul = true;
    gguf_quote(q, GGUF_QUOTE_MAX, pool_str(pr, off), nlen);

    int64_t dup;
    if (gguf_index_add(&ctx->t_index, i, parse_tname_c, pr, &dup) != GGUF_OK)
        return fail(pr, GGUF_E_NOMEM, "out of memory indexing tensors");
    if (dup >= 0)
        return fail(
            pr, GGUF_E_FORMAT,
            "duplicate tensor '%s' at offset %llu (first at offset %llu)", q,
            U(start), U(pr->toff[dup].start));
    pr->pos = start + 8 + nlen;
    return GGUF_OK;
}

/* The dimension count and dimensions at pr->pos into t (named q): at most
 * GGUF_MAX_DIMS, none negative, element count within int64 as ggml checks
 * it. */
static enum gguf_status tensor_shape(struct parse *pr, struct gguf_tensor *t,
                                     const char *q) {
    uint64_t F = pr->size;
    enum gguf_status st;
    if (F - pr->pos < 4)
        return fail(
            pr, GGUF_E_FORMAT,
            "tensor '%s': dimension count at offset %llu runs past the end of the file (%llu)",
            q, U(pr->pos), U(F));
    if ((st = fill(pr, pr->pos + 4)) != GGUF_OK)
        return st;
    uint32_t n_dims = gguf_rd32(pr->buf + pr->pos);
    if (n_dims > GGUF_MAX_DIMS)
        return fail(
            pr, GGUF_E_FORMAT,
            "tensor '%s' has %u dimensions (at most %d), at offset %llu", q,
            n_dims, GGUF_MAX_DIMS, U(pr->pos));
    pr->pos += 4;
    if (F - pr->pos < 8 * (uint64_t)n_dims)
        return fail(
            pr, GGUF_E_FORMAT,
            "tensor '%s': dimensions at offset %llu run past the end of the file (%llu)",
            q, U(pr->pos), U(F));
    if ((st = fill(pr, pr->pos + 8 * (uint64_t)n_dims)) != GGUF_OK)
        return st;
    t->n_dims = n_dims;
    for (uint32_t j = 0; j < n_dims; j++) {
        t->ne[j] = (int64_t)gguf_rd64(pr->buf + pr->pos + 8 * j);
        if (t->ne[j] < 0)
            return fail(pr, GGUF_E_FORMAT,
                        "tensor '%s' dimension %u is negative (%lld)", q, j,
                        I(t->ne[j]));
    }
    pr->pos += 8 * (uint64_t)n_dims;
    /* ggml's test, on exact values: INT64_MAX / ne[k] <= ne[0]*...*ne[k-1]
     * for some k refuses the shape (skipped when an ne is 0). */
    const int64_t *ne = t->ne;
    if (ne[0] && ne[1] && ne[2] && ne[3]) {
        int64_t prod = ne[0];
        for (int k = 1; k < GGUF_MAX_DIMS; k++) {
            if (INT64_MAX / ne[k] <= prod)
                return fail(
                    pr, GGUF_E_FORMAT,
                    "tensor '%s' has too many elements: shape (%lld, %lld, %lld, %lld) "
                    "overflows int64",
                    q, I(ne[0]), I(ne[1]), I(ne[2]), I(ne[3]));
            prod *= ne[k];
        }
    }
    return GGUF_OK;
}

/* The ggml type at pr->pos into t (named q) and, for a known type, the
 * size in bytes.  Unknown ids from 40 up are left for check_data() to
 * size; the removed ids below 40 and the ids ggml reads as negative are
 * refused. */
static enum gguf_status tensor_type(struct parse *pr, struct gguf_tensor *t,
                                    const char *q) {
    uint64_t F = pr->size;
    enum gguf_status st;
    const int64_t *ne = t->ne;
    if (F - pr->pos < 4)
        return fail(
            pr, GGUF_E_FORMAT,
            "tensor '%s': type at offset %llu runs past the end of the file (%llu)",
            q, U(pr->pos), U(F));
    if ((st = fill(pr, pr->pos + 4)) != GGUF_OK)
        return st;
    uint32_t type = gguf_rd32(pr->buf + pr->pos);
    t->type = type;
    if (gguf_ggml_type_known(type)) {
        uint32_t blck = gguf_ggml_blck_size(type);
        if (ne[0] % blck != 0)
            return fail(
                pr, GGUF_E_FORMAT,
                "tensor '%s' of type %s has %lld elements per row, not a multiple "
                "of the block size (%u)",
                q, gguf_ggml_type_name(type), I(ne[0]), blck);
        if (!gguf_ggml_nbytes(type, GGUF_MAX_DIMS, ne, &t->size))
            return fail(
                pr, GGUF_E_FORMAT,
                "tensor '%s' of type %s and shape (%lld, %lld, %lld, %lld) has a size "
                "in bytes that overflows 64 bits",
                q, gguf_ggml_type_name(type), I(ne[0]), I(ne[1]), I(ne[2]),
                I(ne[3]));
    } else if (type < 40) {
        return fail(
            pr, GGUF_E_FORMAT,
            "tensor '%s' has ggml type %u, which was removed from ggml (at offset %llu)",
            q, type, U(pr->pos));
    } else if (type > INT32_MAX) {
        return fail(
            pr, GGUF_E_FORMAT,
            "tensor '%s' has ggml type %u, not a valid type id (at offset %llu)",
            q, type, U(pr->pos));
    }
    pr->pos += 4;
    return GGUF_OK;
}

/* Tensor info i at pr->pos: name, shape, type, data offset. */
static enum gguf_status parse_tensor(struct parse *pr, int64_t i) {
    gguf_ctx *ctx = pr->ctx;
    uint64_t F = pr->size;
    char q[GGUF_QUOTE_MAX];
    enum gguf_status st;
    if ((st = tensor_name(pr, i, q)) != GGUF_OK ||
        (st = tensor_shape(pr, &ctx->t[i], q)) != GGUF_OK ||
        (st = tensor_type(pr, &ctx->t[i], q)) != GGUF_OK)
        return st;
    struct gguf_tensor *t = &ctx->t[i];
    if (F - pr->pos < 8)
        return fail(
            pr, GGUF_E_FORMAT,
            "tensor '%s': data offset at offset %llu runs past the end of the file (%llu)",
            q, U(pr->pos), U(F));
    if ((st = fill(pr, pr->pos + 8)) != GGUF_OK)
        return st;
    t->offset = gguf_rd64(pr->buf + pr->pos);
    pr->pos += 8;
    ctx->n_t = i + 1;
    return GGUF_OK;
}

/* ---- tensor data layout -------------------------------------------------- */

static int by_offset(const void *a, const void *b, void *arg) {
    const gguf_ctx *ctx = arg;
    const struct gguf_tensor *x = &ctx->t[*(const int64_t *)a];
    const struct gguf_tensor *y = &ctx->t[*(const int64_t *)b];
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    return (i > j) - (i < j);
}

static const char *tq(const struct parse *pr, int64_t i, char *q) {
    return gguf_quote(q, GGUF_QUOTE_MAX, pool_str(pr, pr->toff[i].name),
                      pr->ctx->t[i].name_len);
}

/* Every offset a multiple of the alignment A and within the data section
 * present (room bytes). */
static enum gguf_status check_offsets(struct parse *pr, uint64_t room) {
    const gguf_ctx *ctx = pr->ctx;
    uint64_t F = pr->fsize, D = ctx->data_offset, A = ctx->alignment;
    char q[GGUF_QUOTE_MAX];
    for (int64_t i = 0; i < ctx->n_t; i++) {
        const struct gguf_tensor *t = &ctx->t[i];
        if (t->offset % A != 0)
            return fail(
                pr, GGUF_E_FORMAT,
                "tensor '%s' has offset %llu, not a multiple of the alignment (%llu)",
                tq(pr, i, q), U(t->offset), U(A));
        if (t->offset > room)
            return fail(
                pr, GGUF_E_FORMAT,
                "tensor '%s' has offset %llu (data section at %llu), past the end of "
                "the file (%llu)",
                tq(pr, i, q), U(t->offset), U(D), U(F));
    }
    return GGUF_OK;
}

/* Sizes the tensors of unknown types (ord: all tensors in offset order):
 * the bytes up to the next greater offset, or to the end of the file for
 * the last; with a warning each. */
static enum gguf_status size_unknown(struct parse *pr, const int64_t *ord,
                                     uint64_t room) {
    gguf_ctx *ctx = pr->ctx;
    int64_t n = ctx->n_t;
    char q[GGUF_QUOTE_MAX];
    for (int64_t k = 0; k < n; k++) {
        struct gguf_tensor *t = &ctx->t[ord[k]];
        if (gguf_ggml_type_known(t->type))
            continue;
        uint64_t limit = room;
        const char *from = "the end of the file";
        for (int64_t m = k + 1; m < n; m++)
            if (ctx->t[ord[m]].offset > t->offset) {
                limit = ctx->t[ord[m]].offset;
                from = "the next tensor's offset";
                break;
            }
        t->size = limit - t->offset;
        bool empty = !t->ne[0] || !t->ne[1] || !t->ne[2] || !t->ne[3];
        if (t->size == 0 && !empty)
            return fail(
                pr, GGUF_E_FORMAT,
                "tensor '%s' has unknown ggml type %u and no bytes before %s, so its "
                "size cannot be known",
                tq(pr, ord[k], q), t->type, from);
        gguf_warn(
            ctx,
            "tensor '%s' has unknown ggml type %u; its size (%llu bytes) is taken "
            "from %s",
            tq(pr, ord[k], q), t->type, U(t->size), from);
    }
    return GGUF_OK;
}

/* Each tensor's data within the file, then no overlap between tensors in
 * offset order (ord); empty tensors overlap nothing. */
static enum gguf_status check_extents(struct parse *pr, const int64_t *ord,
                                      uint64_t room) {
    const gguf_ctx *ctx = pr->ctx;
    uint64_t F = pr->fsize, D = ctx->data_offset;
    int64_t n = ctx->n_t;
    char q[GGUF_QUOTE_MAX], q2[GGUF_QUOTE_MAX];
    for (int64_t i = 0; i < n; i++) {
        const struct gguf_tensor *t = &ctx->t[i];
        if (t->size > room - t->offset) {
            uint64_t start = D + t->offset; /* <= F */
            if (t->size <= UINT64_MAX - start)
                return fail(
                    pr, GGUF_E_FORMAT,
                    "tensor '%s' data ends at %llu, past the end of the file (%llu)",
                    tq(pr, i, q), U(start + t->size), U(F));
            return fail(
                pr, GGUF_E_FORMAT,
                "tensor '%s' data (%llu bytes at %llu) runs past the end of the file (%llu)",
                tq(pr, i, q), U(t->size), U(start), U(F));
        }
    }
    int64_t prev = -1;
    uint64_t prev_end = 0;
    for (int64_t k = 0; k < n; k++) {
        const struct gguf_tensor *t = &ctx->t[ord[k]];
        if (t->size == 0)
            continue;
        if (prev >= 0 && t->offset < prev_end) {
            const struct gguf_tensor *p = &ctx->t[prev];
            return fail(
                pr, GGUF_E_FORMAT,
                "tensor '%s' data at %llu overlaps tensor '%s' (%llu to %llu)",
                tq(pr, ord[k], q), U(D + t->offset), tq(pr, prev, q2),
                U(D + p->offset), U(D + prev_end));
        }
        if (t->offset + t->size > prev_end) { /* <= room: no overflow */
            prev_end = t->offset + t->size;
            prev = ord[k];
        }
    }
    return GGUF_OK;
}

/* Warns unless the layout is ggml's: tensor i at the sum of the padded
 * sizes before it. */
static void check_contiguous(struct parse *pr) {
    gguf_ctx *ctx = pr->ctx;
    uint64_t A = ctx->alignment, expect = 0;
    char q[GGUF_QUOTE_MAX];
    for (int64_t i = 0; i < ctx->n_t; i++) {
        const struct gguf_tensor *t = &ctx->t[i];
        if (t->offset != expect) {
            gguf_warn(
                ctx,
                "tensor data is not contiguous: tensor '%s' has offset %llu, "
                "expected %llu (ggml rejects this layout)",
                tq(pr, i, q), U(t->offset), U(expect));
            return;
        }
        /* size <= room < 2^63, A <= 2^31: no overflow */
        expect += gguf_align_up(t->size, A);
    }
}

/* Offsets aligned, data within the file, no overlap; unknown types sized;
 * a layout that is not ggml's exact contiguous one only warns. */
static enum gguf_status check_data(struct parse *pr) {
    gguf_ctx *ctx = pr->ctx;
    uint64_t F = pr->fsize, D = ctx->data_offset, A = ctx->alignment;
    int64_t n = ctx->n_t, *ord = NULL;
    enum gguf_status st = GGUF_OK;

    if (n == 0)
        return GGUF_OK;
    if (D > F)
        return fail(
            pr, GGUF_E_FORMAT,
            "data section starts at %llu (tensor infos end at %llu, padded to %llu), "
            "past the end of the file (%llu)",
            U(D), U(pr->pos), U(A), U(F));
    uint64_t room = F - D; /* bytes of the data section present */
    if ((st = check_offsets(pr, room)) != GGUF_OK)
        goto out;
    if ((uint64_t)n > SIZE_MAX / sizeof *ord ||
        !(ord = malloc((size_t)n * sizeof *ord))) {
        st = fail(pr, GGUF_E_NOMEM, "out of memory sorting %lld tensors", I(n));
        goto out;
    }
    for (int64_t i = 0; i < n; i++)
        ord[i] = i;
    qsort_r(ord, (size_t)n, sizeof *ord, by_offset, ctx);
    if ((st = size_unknown(pr, ord, room)) != GGUF_OK ||
        (st = check_extents(pr, ord, room)) != GGUF_OK)
        goto out;
    check_contiguous(pr);
out:
    free(ord);
    return st;
}

/* ---- the whole parse ----------------------------------------------------- */

static enum gguf_status parse_file(struct parse *pr) {
    gguf_ctx *ctx = pr->ctx;
    uint64_t n_t = 0, n_kv = 0;
    enum gguf_status st = parse_header(pr, &n_t, &n_kv);
    for (uint64_t i = 0; st == GGUF_OK && i < n_kv; i++)
        st = parse_kv(pr, (int64_t)i);
    if (st == GGUF_OK)
        st = parse_alignment(pr);
    for (uint64_t i = 0; st == GGUF_OK && i < n_t; i++)
        st = parse_tensor(pr, (int64_t)i);
    if (st != GGUF_OK)
        return st;
    /* pos <= F < 2^63 and alignment <= 2^31: no overflow */
    ctx->data_offset = gguf_align_up(pr->pos, ctx->alignment);
    ctx->file_size = pr->fsize;
    if ((st = check_data(pr)) != GGUF_OK)
        return st;

    /* Keep exactly the header (to the end of the tensor infos); offsets
     * become pointers. */
    ctx->hdr_len = (size_t)pr->pos;
    uint8_t *h = realloc(pr->buf, ctx->hdr_len);
    ctx->hdr = h ? h : pr->buf;
    pr->buf = NULL;
    ctx->names = (char *)pr->names.p;
    pr->names = (struct gguf_buf){0};
    for (int64_t i = 0; i < ctx->n_kv; i++) {
        ctx->kv[i].key = ctx->names + pr->koff[i].name;
        ctx->kv[i].val = ctx->hdr + pr->koff[i].val;
    }
    for (int64_t i = 0; i < ctx->n_t; i++)
        ctx->t[i].name = ctx->names + pr->toff[i].name;
    ctx->next_id = (uint32_t)ctx->n_kv + 1;
    /* The tensor index was keyed on C-string names for ggml's duplicate
     * rule; lookups use whole names. */
    if (pr->t_name_nul &&
        gguf_index_build(&ctx->t_index, ctx->n_t, gguf_ctx_tensor_name, ctx) !=
            GGUF_OK)
        return fail(pr, GGUF_E_NOMEM, "out of memory indexing tensors");
    return GGUF_OK;
}

enum gguf_status gguf_parse(gguf_ctx *ctx, const struct gguf_reader *rd,
                            const uint8_t *mem, uint64_t size, uint64_t fsize,
                            unsigned flags, struct gguf_error *err) {
    struct parse pr = {.ctx = ctx,
                       .rd = rd,
                       .mem = mem,
                       .size = size,
                       .fsize = fsize,
                       .flags = flags,
                       .err = err};
    enum gguf_status st = parse_file(&pr);
    free(pr.buf);
    gguf_buf_free(&pr.names);
    free(pr.koff);
    free(pr.toff);
    if (st != GGUF_OK) {
        /* Entries point nowhere yet; don't let gguf_close look at them. */
        ctx->n_kv = ctx->n_t = 0;
    } else {
        gguf_mark_padding(ctx);
    }
    return st;
}
