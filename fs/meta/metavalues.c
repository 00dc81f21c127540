/*
 * metavalues.c - the values of keys in meta/: a text parsed and set
 * (write, truncate), a type changed (user.gguf.type), the keys no change
 * may touch (gfs_meta_protected), and why the last edit of a key was
 * refused (user.gguf.error).  Every change goes through the library,
 * which validates it; a refused change leaves the key as it was and
 * records why (log, and user.gguf.error on the file).  The names of
 * meta/ (create, unlink, rename) are metaedit.c's.
 */
#include "../base/base.h"
#include "../ggufs.h"
#include "meta.h"
#include "metaedit.h"
#include "../node/node.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gfs_meta_set_error(struct gfs *fs, uint32_t id, const char *msg) {
    assert(gfs_edit_held(fs)); /* edits.h, invariant 1 */
    if (id >= fs->meta->n_errors) {
        if (!msg)
            return;
        size_t n = fs->meta->n_errors ? fs->meta->n_errors : 64;
        while (n <= id)
            n *= 2;
        char **ne = realloc(fs->meta->errors, n * sizeof *ne);
        if (!ne)
            return;
        memset(ne + fs->meta->n_errors, 0,
               (n - fs->meta->n_errors) * sizeof *ne);
        fs->meta->errors = ne;
        fs->meta->n_errors = n;
    }
    free(fs->meta->errors[id]);
    fs->meta->errors[id] = msg ? strdup(msg) : NULL;
}

const char *gfs_meta_get_error(struct gfs *fs, uint32_t id) {
    return id < fs->meta->n_errors ? fs->meta->errors[id] : NULL;
}

int gfs_meta_refuse(struct gfs *fs, int64_t i, const struct gguf_error *err) {
    size_t klen = 1;
    const char *key = i >= 0 ? gguf_kv_key(fs->ctx, i, &klen) : "?";
    char q[GGUF_QUOTE_MAX];
    gfs_log(fs, "%s: refused edit of '%s': %s", fs->path,
            gguf_quote(q, sizeof q, key, klen), err->msg);
    if (i >= 0)
        gfs_meta_set_error(fs, gguf_kv_id(fs->ctx, i), err->msg);
    return gfs_errno(err);
}

const char *gfs_meta_protected(const struct gfs *fs, int64_t i) {
    static const char *const split_keys[] = {"split.no", "split.count",
                                             "split.tensors.count"};
    size_t klen;
    const char *key = gguf_kv_key(fs->ctx, i, &klen);
    if (gguf_key_is_alignment(key, klen))
        return "general.alignment cannot be changed: the tensor data layout "
               "depends on it";
    if (fs->n_shards > 1)
        for (size_t k = 0; k < sizeof split_keys / sizeof *split_keys; k++)
            if (klen == strlen(split_keys[k]) &&
                memcmp(key, split_keys[k], klen) == 0)
                return "split.no, split.count and split.tensors.count "
                       "describe the shard set and cannot be changed while "
                       "it is mounted";
    return NULL;
}

const char *gfs_meta_unwritable(const struct gfs *fs, int64_t i) {
    const char *why = gfs_meta_protected(fs, i);
    if (why)
        return why;
    /* -o allow_nested mounts them, but the library writes no array of
     * arrays (ggml rejects them): a new value could only be refused when
     * applied, at close, where the shell does not look. */
    if (gguf_kv_type(fs->ctx, i) == GGUF_TYPE_ARRAY &&
        gguf_kv_arr_type(fs->ctx, i) == GGUF_TYPE_ARRAY)
        return "an array of arrays cannot be written (ggml rejects them); "
               "it can be removed or renamed";
    return NULL;
}

int gfs_meta_refuse_protected(struct gfs *fs, int64_t i, const char *what) {
    size_t klen;
    const char *key = gguf_kv_key(fs->ctx, i, &klen);
    const char *why = gfs_meta_unwritable(fs, i);
    char q[GGUF_QUOTE_MAX];
    gfs_log(fs, "%s: refused %s of '%s': %s", fs->path, what,
            gguf_quote(q, sizeof q, key, klen), why ? why : "protected");
    if (why)
        gfs_meta_set_error(fs, gguf_kv_id(fs->ctx, i), why);
    return EPERM;
}

void gfs_meta_edited(struct gfs *fs, int64_t i) {
    gfs_edit_changed(fs);
    if (i >= 0) {
        gfs_text_forget(fs, gguf_kv_id(fs->ctx, i));
        gfs_meta_set_error(fs, gguf_kv_id(fs->ctx, i), NULL);
    }
}

int gfs_meta_apply_text(struct gfs *fs, int64_t i, const char *text, size_t len,
                        int quiet) {
    assert(gfs_edit_held(fs)); /* edits.h, invariant 1 */
    struct gguf_buf payload = {0};
    struct gguf_error err = {0};
    size_t klen;
    const char *key = gguf_kv_key(fs->ctx, i, &klen);
    enum gguf_type type = gguf_kv_type(fs->ctx, i);
    int rc = 0;

    if (gguf_parse_text(type, gguf_kv_arr_type(fs->ctx, i), text, len, &payload,
                        &err) != GGUF_OK) {
        rc = quiet ? gfs_errno(&err) : gfs_meta_refuse(fs, i, &err);
        goto out;
    }
    size_t plen;
    const uint8_t *cur = gguf_kv_payload(fs->ctx, i, &plen);
    if (plen == payload.len && memcmp(cur, payload.p, plen) == 0)
        goto out; /* writing back what was read changes nothing */
    if (gfs_meta_protected(fs, i)) {
        rc = gfs_meta_refuse_protected(fs, i, "a change");
        goto out;
    }
    gfs_text_keep(fs, i);
    if (gguf_set_payload(fs->ctx, key, klen, type, payload.p, payload.len,
                         &err) != GGUF_OK) {
        rc = gfs_meta_refuse(fs, i, &err);
        goto out;
    }
    gfs_meta_edited(fs, gguf_find_key(fs->ctx, key, klen));
out:
    gguf_buf_free(&payload);
    return rc;
}

/* Parses a type name as shown in user.gguf.type ("uint32",
 * "array[string]"); false if unknown.  Arrays of arrays cannot be made. */
static int parse_type(const char *s, size_t n, enum gguf_type *t,
                      enum gguf_type *at) {
    if (n > 7 && memcmp(s, "array[", 6) == 0 && s[n - 1] == ']') {
        int e = gguf_type_from_name(s + 6, n - 7);
        if (e < 0)
            return 0;
        *t = GGUF_TYPE_ARRAY;
        *at = (enum gguf_type)e;
        return 1;
    }
    int b = gguf_type_from_name(s, n);
    if (b < 0)
        return 0;
    *t = (enum gguf_type)b;
    *at = GGUF_TYPE_COUNT;
    return 1;
}

int gfs_meta_set_type(struct gfs *fs, fuse_ino_t ino, const char *type,
                      size_t len) {
    assert(gfs_edit_held(fs)); /* edits.h, invariant 1 */
    enum gguf_type t, at;
    struct gguf_buf payload = {0}, back = {0};
    struct gguf_error err = {0};
    int64_t i = gfs_kv_index(fs, ino);
    int rc = 0, e = 0;
    struct gfs_text *cur = NULL;

    while (len && (type[len - 1] == '\n' || type[len - 1] == '\0'))
        len--;
    if (i < 0)
        return ENOENT;
    size_t klen;
    const char *key = gguf_kv_key(fs->ctx, i, &klen);
    if (!parse_type(type, len, &t, &at)) {
        gguf_fail(&err, GGUF_E_INVAL, "unknown type '%.*s'", (int)len, type);
        return gfs_meta_refuse(fs, i, &err);
    }
    if (t == gguf_kv_type(fs->ctx, i) &&
        (t != GGUF_TYPE_ARRAY || at == gguf_kv_arr_type(fs->ctx, i)))
        return 0;
    if (gfs_meta_protected(fs, i))
        return gfs_meta_refuse_protected(fs, i, "a type change");
    /* An empty string (a key just made by touch or create) becomes the
     * zero value of any type. */
    size_t plen;
    gguf_kv_payload(fs->ctx, i, &plen);
    if (gguf_kv_type(fs->ctx, i) == GGUF_TYPE_STRING && plen == 8) {
        if (gguf_zero_payload(t, at, &payload) != GGUF_OK)
            return EINVAL;
        goto set;
    }
    /* Convert through the text form: the value is representable in the new
     * type exactly when its text parses and renders back unchanged. */
    if (!(cur = gfs_text_get(fs, i, &e)))
        return e;
    if (gguf_parse_text(t, at, cur->data, cur->len, &payload, &err) !=
            GGUF_OK ||
        gguf_render(t, payload.p, payload.len, &back, &err) != GGUF_OK) {
        rc = gfs_meta_refuse(fs, i, &err);
        goto out;
    }
    if (back.len != cur->len || memcmp(back.p, cur->data, back.len) != 0) {
        gguf_fail(&err, GGUF_E_RANGE,
                  "value is not representable exactly "
                  "as %.*s",
                  (int)len, type);
        rc = gfs_meta_refuse(fs, i, &err);
        goto out;
    }
set:
    gfs_text_keep(fs, i);
    if (gguf_set_payload(fs->ctx, key, klen, t, payload.p, payload.len, &err) !=
        GGUF_OK) {
        rc = gfs_meta_refuse(fs, i, &err);
        goto out;
    }
    gfs_meta_edited(fs, gguf_find_key(fs->ctx, key, klen));
out:
    gfs_text_put(cur);
    gguf_buf_free(&payload);
    gguf_buf_free(&back);
    return rc;
}

int gfs_meta_truncate(struct gfs *fs, fuse_ino_t ino, off_t size) {
    assert(gfs_edit_held(fs)); /* edits.h, invariant 1 */
    struct gfs_scratch *s = gfs_meta_scratch_by_ino(fs, ino);
    if (s) {
        if ((size_t)size > fs->max_value)
            return EFBIG;
        int g = (size_t)size > s->data.len
                    ? gfs_mem_grant(fs, &s->granted, (size_t)size)
                    : 0;
        if (g)
            return g;
        if ((size_t)size > s->data.len &&
            gguf_buf_reserve(&s->data, (size_t)size - s->data.len) != GGUF_OK)
            return ENOMEM;
        if ((size_t)size > s->data.len)
            memset(s->data.p + s->data.len, 0, (size_t)size - s->data.len);
        s->data.len = (size_t)size;
        return 0;
    }
    int64_t i = gfs_kv_index(fs, ino);
    if (i < 0)
        return ENOENT;
    if ((size_t)size > fs->max_value)
        return EFBIG; /* before the value is copied or extended */
    if (gfs_meta_unwritable(fs, i))
        return gfs_meta_refuse_protected(fs, i, "truncate");
    int e = 0;
    struct gfs_text *t = gfs_text_get(fs, i, &e);
    if (!t)
        return e;
    struct gguf_buf b = {0};
    int rc = 0;
    if (gguf_buf_add(&b, t->data,
                     (size_t)size < t->len ? (size_t)size : t->len) !=
            GGUF_OK ||
        ((size_t)size > b.len &&
         gguf_buf_reserve(&b, (size_t)size - b.len) != GGUF_OK)) {
        rc = ENOMEM;
    } else {
        memset(b.p + b.len, 0, (size_t)size - b.len);
        b.len = (size_t)size;
        rc = gfs_meta_apply_text(fs, i, (char *)b.p, b.len, 0);
    }
    gfs_text_put(t);
    gguf_buf_free(&b);
    return rc;
}

void gfs_meta_errors_free(struct gfs *fs) {
    for (size_t i = 0; i < fs->meta->n_errors; i++)
        free(fs->meta->errors[i]);
    free(fs->meta->errors);
    fs->meta->errors = NULL;
    fs->meta->n_errors = 0;
}
