/*
 * ctx.c - the context's lifetime (allocation, gguf_new, gguf_close, and the
 * release of what a KV or tensor info owns), its warnings, and the const
 * getters over it.  read.c fills a context from a file, edit.c changes it;
 * both go through the representation in internal.h, the getters here are
 * what everything else uses.
 *
 * Calls: ctx.c is below edit.c and keys.c: they call it (getters,
 * gguf_warn, the release functions), and it calls neither.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_WARNINGS 64

/* ---- lifetime --------------------------------------------------------------- */

gguf_ctx *gguf_ctx_alloc(void) {
    gguf_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->fd = -1;
    ctx->dfd = -1;
    ctx->version = 3;
    ctx->alignment = GGUF_DEFAULT_ALIGNMENT;
    ctx->next_id = 1;
    return ctx;
}

gguf_ctx *gguf_new(uint32_t version) {
    gguf_ctx *ctx = gguf_ctx_alloc();
    if (ctx)
        ctx->version = version;
    return ctx;
}

void gguf_kv_release(struct gguf_kv *kv) {
    if (!kv)
        return;
    if (kv->flags & GGUF_KV_OWN_KEY)
        free((void *)kv->key);
    if (kv->flags & GGUF_KV_OWN_VAL)
        free((void *)kv->val);
    kv->key = NULL;
    kv->val = NULL;
    kv->flags &= ~(uint32_t)(GGUF_KV_OWN_KEY | GGUF_KV_OWN_VAL);
}

void gguf_tensor_release(struct gguf_tensor *t) {
    if (!t)
        return;
    if (t->own_name)
        free((void *)t->name);
    t->name = NULL;
    t->own_name = false;
}

void gguf_close(gguf_ctx *ctx) {
    if (!ctx)
        return;
    for (int64_t i = 0; i < ctx->n_kv; i++)
        gguf_kv_release(&ctx->kv[i]);
    for (int64_t i = 0; i < ctx->n_t; i++)
        gguf_tensor_release(&ctx->t[i]);
    free(ctx->kv);
    free(ctx->t);
    gguf_index_free(&ctx->kv_index);
    gguf_index_free(&ctx->t_index);
    for (int i = 0; i < ctx->n_warnings; i++)
        free(ctx->warnings[i]);
    free(ctx->warnings);
    free(ctx->hdr);
    free(ctx->names);
    free(ctx->path);
    if (ctx->fd >= 0)
        close(ctx->fd);
    if (ctx->dfd >= 0)
        close(ctx->dfd);
    free(ctx);
}

/* ---- name callbacks ------------------------------------------------------- */

const char *gguf_ctx_key_name(const void *base, int64_t i, size_t *len) {
    const gguf_ctx *ctx = base;
    *len = (size_t)ctx->kv[i].key_len;
    return ctx->kv[i].key;
}

const char *gguf_ctx_tensor_name(const void *base, int64_t i, size_t *len) {
    const gguf_ctx *ctx = base;
    *len = (size_t)ctx->t[i].name_len;
    return ctx->t[i].name;
}

/* ---- warnings ------------------------------------------------------------- */

/* Records a one-line warning.  At most MAX_WARNINGS are kept, the last of
 * them saying that more were dropped; a failed allocation drops silently
 * (warnings are advisory). */
void gguf_warn(gguf_ctx *ctx, const char *fmt, ...) {
    if (!ctx || ctx->n_warnings >= MAX_WARNINGS)
        return;
    char *msg = NULL;
    if (ctx->n_warnings == MAX_WARNINGS - 1) {
        msg = strdup("further warnings were omitted");
    } else {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
            msg = NULL;
        va_end(ap);
    }
    if (!msg)
        return;
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    char **w =
        realloc(ctx->warnings, (size_t)(ctx->n_warnings + 1) * sizeof *w);
    if (!w) {
        free(msg);
        return;
    }
    ctx->warnings = w;
    ctx->warnings[ctx->n_warnings++] = msg;
}

int gguf_n_warnings(const gguf_ctx *ctx) {
    return ctx ? ctx->n_warnings : 0;
}

const char *gguf_warning(const gguf_ctx *ctx, int i) {
    if (!ctx || i < 0 || i >= ctx->n_warnings)
        return NULL;
    return ctx->warnings[i];
}

/* ---- file-level getters ------------------------------------------------- */

uint32_t gguf_version(const gguf_ctx *ctx) {
    return ctx ? ctx->version : 0;
}
uint32_t gguf_alignment(const gguf_ctx *ctx) {
    return ctx ? ctx->alignment : 0;
}
uint64_t gguf_data_offset(const gguf_ctx *ctx) {
    return ctx ? ctx->data_offset : 0;
}
uint64_t gguf_file_size(const gguf_ctx *ctx) {
    return ctx ? ctx->file_size : 0;
}
int gguf_fd(const gguf_ctx *ctx) {
    return ctx ? ctx->fd : -1;
}
bool gguf_ident(const gguf_ctx *ctx, struct gguf_ident *out) {
    if (!ctx || !ctx->path || ctx->rd.read)
        return false;
    *out = (struct gguf_ident){.dev = ctx->dev,
                               .ino = ctx->ino,
                               .size = ctx->file_size,
                               .mtime_ns = ctx->mtime_ns};
    return true;
}
void gguf_release_fd(gguf_ctx *ctx) {
    if (ctx && ctx->fd >= 0) {
        close(ctx->fd);
        ctx->fd = -1;
    }
    if (ctx && ctx->dfd >= 0) { /* a set's shards: a bounded count held */
        close(ctx->dfd);
        ctx->dfd = -1;
    }
}
const char *gguf_path(const gguf_ctx *ctx) {
    return ctx ? ctx->path : NULL;
}

/* ---- key/value pairs ------------------------------------------------------ */

static const struct gguf_kv *kv_at(const gguf_ctx *ctx, int64_t i) {
    if (!ctx || i < 0 || i >= ctx->n_kv)
        return NULL;
    return &ctx->kv[i];
}

int64_t gguf_n_kv(const gguf_ctx *ctx) {
    return ctx ? ctx->n_kv : 0;
}

int64_t gguf_find_key(const gguf_ctx *ctx, const char *key, size_t len) {
    if (!ctx || (!key && len))
        return -1;
    return gguf_index_find(&ctx->kv_index, key, len, gguf_ctx_key_name, ctx);
}

const char *gguf_kv_key(const gguf_ctx *ctx, int64_t i, size_t *len) {
    const struct gguf_kv *kv = kv_at(ctx, i);
    if (len)
        *len = kv ? (size_t)kv->key_len : 0;
    return kv ? kv->key : NULL;
}

uint32_t gguf_kv_id(const gguf_ctx *ctx, int64_t i) {
    const struct gguf_kv *kv = kv_at(ctx, i);
    return kv ? kv->id : 0;
}

uint32_t gguf_kv_id_end(const gguf_ctx *ctx) {
    return ctx ? ctx->next_id : 0;
}

/* Ids increase with the index as read, and edits keep that order (a new
 * key goes last with the next id; renames keep their id): binary search,
 * with a linear scan as the fallback should the order ever be broken. */
int64_t gguf_find_id(const gguf_ctx *ctx, uint32_t id) {
    if (!ctx || id == 0)
        return -1;
    int64_t lo = 0, hi = ctx->n_kv;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ctx->kv[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < ctx->n_kv && ctx->kv[lo].id == id)
        return lo;
    for (int64_t i = 0; i < ctx->n_kv; i++)
        if (ctx->kv[i].id == id)
            return i;
    return -1;
}

enum gguf_type gguf_kv_type(const gguf_ctx *ctx, int64_t i) {
    const struct gguf_kv *kv = kv_at(ctx, i);
    return kv ? (enum gguf_type)kv->type : GGUF_TYPE_COUNT;
}

enum gguf_type gguf_kv_arr_type(const gguf_ctx *ctx, int64_t i) {
    const struct gguf_kv *kv = kv_at(ctx, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? (enum gguf_type)kv->arr_type
                                             : GGUF_TYPE_COUNT;
}

uint64_t gguf_kv_arr_n(const gguf_ctx *ctx, int64_t i) {
    const struct gguf_kv *kv = kv_at(ctx, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? kv->arr_n : 0;
}

const uint8_t *gguf_kv_payload(const gguf_ctx *ctx, int64_t i, size_t *len) {
    const struct gguf_kv *kv = kv_at(ctx, i);
    if (len)
        *len = kv ? (size_t)kv->val_len : 0;
    return kv ? kv->val : NULL;
}

bool gguf_kv_same(const gguf_ctx *a, int64_t i, const gguf_ctx *b, int64_t j) {
    const struct gguf_kv *x = kv_at(a, i), *y = kv_at(b, j);
    return x && y && x->type == y->type && x->val_len == y->val_len &&
           (x->val_len == 0 || memcmp(x->val, y->val, x->val_len) == 0);
}

const char *gguf_kv_type_str(const gguf_ctx *ctx, int64_t i, char *buf,
                             size_t n) {
    const struct gguf_kv *kv = kv_at(ctx, i);
    if (!buf || n == 0)
        return buf;
    const char *t = kv ? gguf_type_name((enum gguf_type)kv->type) : NULL;
    if (!t)
        snprintf(buf, n, "?");
    else if (kv->type == GGUF_TYPE_ARRAY) {
        const char *e = gguf_type_name((enum gguf_type)kv->arr_type);
        snprintf(buf, n, "array[%s]", e ? e : "?");
    } else
        snprintf(buf, n, "%s", t);
    return buf;
}

bool gguf_kv_get_u64(const gguf_ctx *ctx, int64_t i, uint64_t *out) {
    const struct gguf_kv *kv = kv_at(ctx, i);
    if (!kv || !out)
        return false;
    size_t sz = gguf_type_size((enum gguf_type)kv->type);
    if (!sz || kv->val_len < sz)
        return false;
    const uint8_t *p = kv->val;
    switch (kv->type) {
    case GGUF_TYPE_UINT8:
        *out = p[0];
        return true;
    case GGUF_TYPE_UINT16:
        *out = (uint64_t)p[0] | (uint64_t)p[1] << 8;
        return true;
    case GGUF_TYPE_UINT32:
        *out = gguf_rd32(p);
        return true;
    case GGUF_TYPE_UINT64:
        *out = gguf_rd64(p);
        return true;
    default:
        return false;
    }
}

bool gguf_kv_get_i64(const gguf_ctx *ctx, int64_t i, int64_t *out) {
    const struct gguf_kv *kv = kv_at(ctx, i);
    if (!kv || !out)
        return false;
    size_t sz = gguf_type_size((enum gguf_type)kv->type);
    if (!sz || kv->val_len < sz)
        return false;
    const uint8_t *p = kv->val;
    uint64_t u;
    switch (kv->type) {
    case GGUF_TYPE_INT8:
        *out = (int8_t)p[0];
        return true;
    case GGUF_TYPE_INT16:
        *out = (int16_t)(uint16_t)(p[0] | p[1] << 8);
        return true;
    case GGUF_TYPE_INT32:
        *out = (int32_t)gguf_rd32(p);
        return true;
    case GGUF_TYPE_INT64:
        *out = (int64_t)gguf_rd64(p);
        return true;
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_UINT64:
        if (!gguf_kv_get_u64(ctx, i, &u) || u > INT64_MAX)
            return false;
        *out = (int64_t)u;
        return true;
    default:
        return false;
    }
}

/* The string's bytes (not NUL-terminated: they point into the payload). */
bool gguf_kv_get_str(const gguf_ctx *ctx, int64_t i, const char **s,
                     size_t *len) {
    const struct gguf_kv *kv = kv_at(ctx, i);
    if (!kv || kv->type != GGUF_TYPE_STRING || kv->val_len < 8)
        return false;
    uint64_t n = gguf_rd64(kv->val);
    if (n > kv->val_len - 8)
        return false;
    if (s)
        *s = (const char *)kv->val + 8;
    if (len)
        *len = (size_t)n;
    return true;
}

/* ---- tensors ------------------------------------------------------------ */

static const struct gguf_tensor *t_at(const gguf_ctx *ctx, int64_t i) {
    if (!ctx || i < 0 || i >= ctx->n_t)
        return NULL;
    return &ctx->t[i];
}

int64_t gguf_n_tensors(const gguf_ctx *ctx) {
    return ctx ? ctx->n_t : 0;
}

int64_t gguf_find_tensor(const gguf_ctx *ctx, const char *name, size_t len) {
    if (!ctx || (!name && len))
        return -1;
    return gguf_index_find(&ctx->t_index, name, len, gguf_ctx_tensor_name, ctx);
}

const char *gguf_tensor_name(const gguf_ctx *ctx, int64_t i, size_t *len) {
    const struct gguf_tensor *t = t_at(ctx, i);
    if (len)
        *len = t ? (size_t)t->name_len : 0;
    return t ? t->name : NULL;
}

uint32_t gguf_tensor_type(const gguf_ctx *ctx, int64_t i) {
    const struct gguf_tensor *t = t_at(ctx, i);
    return t ? t->type : UINT32_MAX;
}

uint32_t gguf_tensor_n_dims(const gguf_ctx *ctx, int64_t i) {
    const struct gguf_tensor *t = t_at(ctx, i);
    return t ? t->n_dims : 0;
}

const int64_t *gguf_tensor_ne(const gguf_ctx *ctx, int64_t i) {
    const struct gguf_tensor *t = t_at(ctx, i);
    return t ? t->ne : NULL;
}

uint64_t gguf_tensor_rel_offset(const gguf_ctx *ctx, int64_t i) {
    const struct gguf_tensor *t = t_at(ctx, i);
    return t ? t->offset : 0;
}

uint64_t gguf_tensor_offset(const gguf_ctx *ctx, int64_t i) {
    const struct gguf_tensor *t = t_at(ctx, i);
    return t ? ctx->data_offset + t->offset : 0;
}

uint64_t gguf_tensor_size(const gguf_ctx *ctx, int64_t i) {
    const struct gguf_tensor *t = t_at(ctx, i);
    return t ? t->size : 0;
}
