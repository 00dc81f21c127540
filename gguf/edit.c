/*
 * edit.c - changes to a context's keys and tensor infos: set, remove and
 * rename keys; append tensor infos (fixture building).
 *
 * Every edit is all-or-nothing: allocations that can fail (copies, array
 * growth, the rebuilt name index) are made before the context is touched,
 * or the change is rolled back, so a failed edit leaves the context exactly
 * as it was.
 *
 * Ownership: a KV's key and value point either into ctx->hdr/ctx->names
 * (as read) or to malloc'ed copies, flagged GGUF_KV_OWN_KEY / _OWN_VAL.
 * The copies are freed by ctx.c (gguf_kv_release, gguf_tensor_release),
 * which owns the context's memory.
 *
 * Calls: edit.c uses ctx.c (getters, the release functions), keys.c (layout
 * rules) and index.c; neither ctx.c nor keys.c calls edit.c.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Rebuilds the KV (or tensor) index into a fresh struct and swaps it in
 * only on success, so a failure leaves the old (still usable for rollback)
 * index in place. */
static enum gguf_status rebuild_index(gguf_ctx *ctx, bool tensors) {
    struct gguf_index fresh = {0};
    enum gguf_status st;
    if (tensors)
        st = gguf_index_build(&fresh, ctx->n_t, gguf_ctx_tensor_name, ctx);
    else
        st = gguf_index_build(&fresh, ctx->n_kv, gguf_ctx_key_name, ctx);
    if (st != GGUF_OK) {
        gguf_index_free(&fresh);
        return st;
    }
    struct gguf_index *ix = tensors ? &ctx->t_index : &ctx->kv_index;
    gguf_index_free(ix);
    *ix = fresh;
    return GGUF_OK;
}

static char *dup_name(const char *s, size_t len) {
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

bool gguf_dirty(const gguf_ctx *ctx) {
    return ctx && ctx->dirty;
}

/* The specification's rule for keys (docs/format.md, Value types): ASCII
 * lower_snake_case segments joined by '.', at most 65535 bytes.  Empty segments ("a..b", ".a", "a.") are not segments. */
bool gguf_key_valid(const char *key, size_t len) {
    if (!key || len == 0 || len > 65535)
        return false;
    size_t seg = 0;
    for (size_t i = 0; i < len; i++) {
        char c = key[i];
        if (c == '.') {
            if (seg == 0)
                return false;
            seg = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                   c == '_') {
            seg++;
        } else {
            return false;
        }
    }
    return seg > 0;
}

static enum gguf_status grow_kv(gguf_ctx *ctx, struct gguf_error *err) {
    if (ctx->n_kv < ctx->cap_kv)
        return GGUF_OK;
    int64_t cap = ctx->cap_kv ? ctx->cap_kv * 2 : 16;
    struct gguf_kv *p = realloc(ctx->kv, (size_t)cap * sizeof *p);
    if (!p)
        return gguf_fail(err, GGUF_E_NOMEM,
                         "out of memory growing the key list");
    ctx->kv = p;
    ctx->cap_kv = cap;
    return GGUF_OK;
}

/* The worker behind gguf_set_payload and gguf_set_alignment: no policy
 * about which keys may change, only validation and bookkeeping. */
static enum gguf_status set_kv(gguf_ctx *ctx, const char *key, size_t klen,
                               enum gguf_type type, const uint8_t *payload,
                               size_t len, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char *kcopy = NULL;
    uint8_t *vcopy = NULL;
    uint64_t used = 0;
    char q[GGUF_QUOTE_MAX];

    gguf_quote(q, sizeof q, key, klen); /* names in messages stay one line */
    kcopy = dup_name(key, klen);
    vcopy = malloc(len ? len : 1);
    if (!kcopy || !vcopy) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory setting key '%s'", q);
        goto out;
    }
    if (len)
        memcpy(vcopy, payload, len);

    /* Arrays of arrays are refused: ggml's reader rejects them. */
    st = gguf_payload_check(type, vcopy, len, false, &used, kcopy, 0, err);
    if (st == GGUF_E_FORMAT)
        st = err ? (err->code = GGUF_E_INVAL) : GGUF_E_INVAL;
    if (st != GGUF_OK)
        goto out;
    if (used != len) {
        st =
            gguf_fail(err, GGUF_E_INVAL,
                      "value of key '%s' is %llu bytes long but %zu were given",
                      q, (unsigned long long)used, len);
        goto out;
    }

    uint32_t arr_type = GGUF_TYPE_COUNT;
    uint64_t arr_n = 0;
    if (type == GGUF_TYPE_ARRAY) {
        arr_type = gguf_rd32(vcopy);
        arr_n = gguf_rd64(vcopy + 4);
    }

    int64_t i = gguf_find_key(ctx, key, klen);
    if (i >= 0) {
        /* Replace in place: the position and id stay, the key bytes stay. */
        struct gguf_kv *kv = &ctx->kv[i];
        if (kv->flags & GGUF_KV_OWN_VAL)
            free((void *)kv->val);
        kv->val = vcopy;
        kv->val_len = len;
        kv->type = (uint32_t)type;
        kv->arr_type = arr_type;
        kv->arr_n = arr_n;
        kv->flags |= GGUF_KV_OWN_VAL;
        vcopy = NULL;
        ctx->dirty = true;
        goto out;
    }

    st = grow_kv(ctx, err);
    if (st != GGUF_OK)
        goto out;
    ctx->kv[ctx->n_kv] = (struct gguf_kv){
        .key = kcopy,
        .key_len = klen,
        .val = vcopy,
        .val_len = len,
        .type = (uint32_t)type,
        .arr_type = arr_type,
        .arr_n = arr_n,
        .id = ctx->next_id,
        .flags = GGUF_KV_OWN_KEY | GGUF_KV_OWN_VAL,
    };
    ctx->n_kv++;
    int64_t dup;
    st = gguf_index_add(&ctx->kv_index, ctx->n_kv - 1, gguf_ctx_key_name, ctx,
                        &dup);
    if (st != GGUF_OK) {
        ctx->n_kv--; /* kcopy/vcopy still ours: freed below */
        st = gguf_fail(err, st, "out of memory indexing key '%s'", q);
        goto out;
    }
    ctx->next_id++;
    kcopy = NULL;
    vcopy = NULL;
    ctx->dirty = true;
out:
    free(kcopy);
    free(vcopy);
    return st;
}

/* True if key i already holds exactly this type and payload. */
static bool same_value(const gguf_ctx *ctx, int64_t i, enum gguf_type type,
                       const uint8_t *payload, size_t len) {
    const struct gguf_kv *kv = &ctx->kv[i];
    return kv->type == (uint32_t)type && kv->val_len == len &&
           (len == 0 || memcmp(kv->val, payload, len) == 0);
}

enum gguf_status gguf_set_payload(gguf_ctx *ctx, const char *key, size_t klen,
                                  enum gguf_type type, const uint8_t *payload,
                                  size_t len, struct gguf_error *err) {
    if (!ctx || !key || (!payload && len))
        return gguf_fail(err, GGUF_E_INVAL,
                         "missing argument to gguf_set_payload");
    if (klen == 0)
        return gguf_fail(err, GGUF_E_INVAL, "empty key");
    if ((uint64_t)klen > GGUF_MAX_STRING)
        return gguf_fail(err, GGUF_E_RANGE,
                         "key of %zu bytes is longer than %llu", klen,
                         (unsigned long long)GGUF_MAX_STRING);
    if ((unsigned)type >= GGUF_TYPE_COUNT)
        return gguf_fail(err, GGUF_E_INVAL, "unknown value type %u",
                         (unsigned)type);

    /* Rewriting a value with the bytes it already has is a no-op (the
     * context is not marked dirty): editors that save unchanged files, even
     * general.alignment's, must not fail, and the output stays identical. */
    int64_t i = gguf_find_key(ctx, key, klen);
    if (i >= 0 && same_value(ctx, i, type, payload, len))
        return GGUF_OK;

    if (gguf_key_is_alignment(key, klen))
        return gguf_fail(err, GGUF_E_PERM,
                         "general.alignment cannot be changed: the layout of "
                         "the tensor data depends on it");
    if (gguf_key_is_filler(key, klen))
        return gguf_fail(err, GGUF_E_PERM,
                         "%s is reserved for ggufs's header padding",
                         GGUF_FILLER_KEY);
    return set_kv(ctx, key, klen, type, payload, len, err);
}

enum gguf_status gguf_set_alignment(gguf_ctx *ctx, uint32_t alignment,
                                    struct gguf_error *err) {
    if (!ctx)
        return gguf_fail(err, GGUF_E_INVAL, "missing context");
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return gguf_fail(err, GGUF_E_INVAL,
                         "alignment %u is not a power of two", alignment);
    if (ctx->n_t > 0)
        return gguf_fail(err, GGUF_E_PERM,
                         "general.alignment cannot be changed once tensors "
                         "are laid out");
    uint8_t p[4];
    gguf_wr32(p, alignment);
    int64_t i =
        gguf_find_key(ctx, GGUF_ALIGNMENT_KEY, strlen(GGUF_ALIGNMENT_KEY));
    if (i >= 0 && same_value(ctx, i, GGUF_TYPE_UINT32, p, sizeof p))
        return GGUF_OK;
    enum gguf_status st =
        set_kv(ctx, GGUF_ALIGNMENT_KEY, strlen(GGUF_ALIGNMENT_KEY),
               GGUF_TYPE_UINT32, p, sizeof p, err);
    if (st == GGUF_OK)
        ctx->alignment = alignment;
    return st;
}

enum gguf_status gguf_remove_key(gguf_ctx *ctx, int64_t i,
                                 struct gguf_error *err) {
    if (!ctx)
        return gguf_fail(err, GGUF_E_INVAL, "missing context");
    if (i < 0 || i >= ctx->n_kv)
        return gguf_fail(err, GGUF_E_NOTFOUND, "no key with index %lld",
                         (long long)i);
    struct gguf_kv *kv = &ctx->kv[i];
    if (gguf_key_is_alignment(kv->key, (size_t)kv->key_len))
        return gguf_fail(err, GGUF_E_PERM,
                         "general.alignment cannot be removed: the layout of "
                         "the tensor data depends on it");

    struct gguf_kv gone = *kv;
    size_t tail = (size_t)(ctx->n_kv - i - 1) * sizeof *kv;
    memmove(kv, kv + 1, tail);
    ctx->n_kv--;
    gguf_index_remove(&ctx->kv_index, i, gone.key, (size_t)gone.key_len,
                      gguf_ctx_key_name, ctx); /* cannot fail */
    gguf_kv_release(&gone);
    ctx->dirty = true;
    return GGUF_OK;
}

/* The new name's spelling is the caller's business (existing files hold
 * keys of any bytes); only emptiness, clashes and the two keys whose
 * meaning is the file's layout are refused here. */
enum gguf_status gguf_rename_key(gguf_ctx *ctx, int64_t i, const char *key,
                                 size_t klen, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char *kcopy = NULL;
    char q[GGUF_QUOTE_MAX];

    if (!ctx || !key) {
        st =
            gguf_fail(err, GGUF_E_INVAL, "missing argument to gguf_rename_key");
        goto out;
    }
    if (i < 0 || i >= ctx->n_kv) {
        st = gguf_fail(err, GGUF_E_NOTFOUND, "no key with index %lld",
                       (long long)i);
        goto out;
    }
    if (klen == 0) {
        st = gguf_fail(err, GGUF_E_INVAL, "empty key");
        goto out;
    }
    if ((uint64_t)klen > GGUF_MAX_STRING) {
        st =
            gguf_fail(err, GGUF_E_RANGE, "key of %zu bytes is longer than %llu",
                      klen, (unsigned long long)GGUF_MAX_STRING);
        goto out;
    }
    struct gguf_kv *kv = &ctx->kv[i];
    if (kv->key_len == klen && memcmp(kv->key, key, klen) == 0)
        goto out; /* same name: nothing to do */
    if (gguf_key_is_alignment(kv->key, (size_t)kv->key_len) ||
        gguf_key_is_alignment(key, klen)) {
        st = gguf_fail(err, GGUF_E_PERM,
                       "general.alignment cannot be renamed: the layout of "
                       "the tensor data depends on it");
        goto out;
    }
    if (gguf_key_is_filler(key, klen)) {
        st = gguf_fail(err, GGUF_E_PERM,
                       "%s is reserved for ggufs's header padding",
                       GGUF_FILLER_KEY);
        goto out;
    }
    gguf_quote(q, sizeof q, key, klen);
    kcopy = dup_name(key, klen);
    if (!kcopy) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory renaming a key");
        goto out;
    }
    if (gguf_find_key(ctx, key, klen) >= 0) {
        st = gguf_fail(err, GGUF_E_EXISTS, "key '%s' already exists", q);
        goto out;
    }

    struct gguf_kv old = *kv;
    kv->key = kcopy;
    kv->key_len = klen;
    kv->flags |= GGUF_KV_OWN_KEY;
    gguf_index_rename(&ctx->kv_index, i, old.key, (size_t)old.key_len,
                      gguf_ctx_key_name, ctx); /* cannot fail */
    kcopy = NULL;
    if (old.flags & GGUF_KV_OWN_KEY)
        free((void *)old.key);
    ctx->dirty = true;
out:
    free(kcopy);
    return st;
}

/* The checks of gguf_add_tensor on a name not yet taken, a type and a shape,
 * in its order (the first failing one names the tensor); fills full (ne with
 * the unused dimensions 1) and the data's size in bytes. */
static enum gguf_status check_new_tensor(
    const gguf_ctx *ctx, const char *name, size_t nlen, const char *q,
    uint32_t ggml_type, uint32_t n_dims, const int64_t *ne,
    int64_t full[GGUF_MAX_DIMS], uint64_t *size, struct gguf_error *err) {
    if (nlen == 0 || nlen > GGUF_MAX_TENSOR_NAME)
        return gguf_fail(err, GGUF_E_INVAL,
                         "tensor name '%s' is %zu bytes long; 1 to %d allowed",
                         q, nlen, GGUF_MAX_TENSOR_NAME);
    if (gguf_find_tensor(ctx, name, nlen) >= 0)
        return gguf_fail(err, GGUF_E_EXISTS, "tensor '%s' already exists", q);
    if (n_dims > GGUF_MAX_DIMS)
        return gguf_fail(err, GGUF_E_INVAL,
                         "tensor '%s' has %u dimensions; at most %d", q, n_dims,
                         GGUF_MAX_DIMS);
    if (!gguf_ggml_type_known(ggml_type))
        return gguf_fail(err, GGUF_E_INVAL,
                         "tensor '%s' has unknown ggml type %u", q, ggml_type);
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        full[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0)
            return gguf_fail(err, GGUF_E_INVAL,
                             "tensor '%s' has negative dimension %u (%lld)", q,
                             d, (long long)ne[d]);
        full[d] = ne[d];
    }
    if (!gguf_ggml_nbytes(ggml_type, n_dims, full, size))
        return gguf_fail(
            err, GGUF_E_INVAL,
            "tensor '%s': shape does not fit type %s (first dimension "
            "must be a multiple of %u, size must fit 64 bits)",
            q, gguf_ggml_type_name(ggml_type), gguf_ggml_blck_size(ggml_type));
    return GGUF_OK;
}

/* Where a tensor appended to ctx's list starts: after the last one, aligned. */
static enum gguf_status next_tensor_offset(const gguf_ctx *ctx, const char *q,
                                           uint64_t *offset,
                                           struct gguf_error *err) {
    uint32_t a = gguf_ctx_alignment(ctx);
    *offset = 0;
    if (ctx->n_t == 0)
        return GGUF_OK;
    const struct gguf_tensor *prev = &ctx->t[ctx->n_t - 1];
    if (prev->size > UINT64_MAX - a ||
        prev->offset > UINT64_MAX - a - gguf_align_up(prev->size, a))
        return gguf_fail(err, GGUF_E_RANGE, "tensor '%s': offset overflows", q);
    *offset = prev->offset + gguf_align_up(prev->size, a);
    return GGUF_OK;
}

enum gguf_status gguf_add_tensor(gguf_ctx *ctx, const char *name, size_t nlen,
                                 uint32_t ggml_type, uint32_t n_dims,
                                 const int64_t *ne, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char *ncopy = NULL;
    char q[GGUF_QUOTE_MAX];

    if (!ctx || !name || (!ne && n_dims)) {
        st =
            gguf_fail(err, GGUF_E_INVAL, "missing argument to gguf_add_tensor");
        goto out;
    }
    gguf_quote(q, sizeof q, name, nlen);
    ncopy = dup_name(name, nlen);
    if (!ncopy) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory adding a tensor");
        goto out;
    }
    int64_t full[GGUF_MAX_DIMS];
    uint64_t size = 0, offset = 0;
    st = check_new_tensor(ctx, name, nlen, q, ggml_type, n_dims, ne, full,
                          &size, err);
    if (st == GGUF_OK)
        st = next_tensor_offset(ctx, q, &offset, err);
    if (st != GGUF_OK)
        goto out;

    if (ctx->n_t == ctx->cap_t) {
        int64_t cap = ctx->cap_t ? ctx->cap_t * 2 : 16;
        struct gguf_tensor *p = realloc(ctx->t, (size_t)cap * sizeof *p);
        if (!p) {
            st = gguf_fail(err, GGUF_E_NOMEM,
                           "out of memory adding tensor '%s'", q);
            goto out;
        }
        ctx->t = p;
        ctx->cap_t = cap;
    }
    struct gguf_tensor *t = &ctx->t[ctx->n_t];
    *t = (struct gguf_tensor){
        .name = ncopy,
        .name_len = nlen,
        .n_dims = n_dims,
        .type = ggml_type,
        .offset = offset,
        .size = size,
        .own_name = true,
    };
    memcpy(t->ne, full, sizeof full);
    ctx->n_t++;
    st = rebuild_index(ctx, true);
    if (st != GGUF_OK) {
        ctx->n_t--;
        st = gguf_fail(err, st, "out of memory indexing tensor '%s'", q);
        goto out;
    }
    ncopy = NULL;
out:
    free(ncopy);
    return st;
}
