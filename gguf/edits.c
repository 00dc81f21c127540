/*
 * edits.c - the edits file, the one layout in which ggufs keeps a
 * context's edits outside the model (saved edits, saved.c; the pending
 * record, pending.c; an overlay, overlay.c): written here
 * (gguf_edits_serialize) and applied here (gguf_edits_apply_kv), so that
 * its rules have one home.
 *
 * The file is a tensor-less GGUF of ctx's keys (the filler left out)
 * plus, when keys of the file on disk are gone from ctx,
 * GGUF_REMOVED_KEY: an array of their names (a rename shows as the old
 * name removed and the new one present).  Its records are laid out by
 * write.c's gguf_put_* functions.
 *
 * Calls: edits.c calls the context (ctx.c), edit.c and write.c; saved.c,
 * pending.c and overlay.c call it, and it calls none of them.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define REMOVED_KEY GGUF_REMOVED_KEY
#define REMOVED_KEY_LEN (sizeof REMOVED_KEY - 1)

/* ---- writing -------------------------------------------------------- */

/* Whether key i of the file on disk is to be listed as removed: it is
 * gone from ctx, and it is not the filler (never an edit). */
static bool removed(const gguf_ctx *disk, const gguf_ctx *ctx, int64_t i,
                    const char **key, size_t *kl) {
    *key = gguf_kv_key(disk, i, kl);
    return !gguf_kv_is_padding(disk, i) && gguf_find_key(ctx, *key, *kl) < 0;
}

/* Left out of the saved keys: the filler, and, when a list of removals is
 * written, a REMOVED_KEY of ctx's own (ours anyway; two keys of one name
 * would make the file invalid). */
static bool left_out(const struct gguf_kv *kv, bool listing) {
    return gguf_kv_padding(kv) ||
           (listing && kv->key_len == REMOVED_KEY_LEN &&
            memcmp(kv->key, REMOVED_KEY, REMOVED_KEY_LEN) == 0);
}

/* Whether kv of ctx is the same key, type and value in disk: left out of
 * an edits file that holds the changes only.  disk must be the file ctx
 * was read from (or last committed to). */
static bool unchanged(const struct gguf_kv *kv, const gguf_ctx *disk) {
    int64_t j = disk ? gguf_find_key(disk, kv->key, (size_t)kv->key_len) : -1;
    if (j < 0)
        return false;
    /* A value never replaced is still the bytes read from the file (disk is
     * that file, parsed again): no need to compare megabytes of
     * vocabulary at every edit. */
    if (!(kv->flags & (GGUF_KV_OWN_VAL | GGUF_KV_OWN_KEY)))
        return true;
    size_t dl;
    const uint8_t *d = gguf_kv_payload(disk, j, &dl);
    return gguf_kv_type(disk, j) == (enum gguf_type)kv->type &&
           dl == kv->val_len && memcmp(d, kv->val, dl) == 0;
}

enum gguf_status gguf_edits_serialize(const gguf_ctx *ctx, const gguf_ctx *disk,
                                      bool changes_only, struct gguf_buf *b,
                                      struct gguf_error *err) {
    return gguf_edits_serialize_led(ctx, disk, changes_only, NULL, 0, 0, b,
                                    err);
}

/* The saved file's bytes, appended to b (empty).  disk: the file as it is
 * on disk now, or NULL (unreadable: no list of removals). */
enum gguf_status gguf_edits_serialize_led(const gguf_ctx *ctx,
                                          const gguf_ctx *disk,
                                          bool changes_only,
                                          const uint8_t *lead, size_t lead_len,
                                          uint64_t lead_n, struct gguf_buf *b,
                                          struct gguf_error *err) {
    uint64_t n_removed = 0, list_bytes = 4 + 8, n_kv = lead_n;
    uint64_t size = 4 + 4 + 8 + 8 + lead_len;
    const char *key;
    size_t kl;

    for (int64_t i = 0; disk && i < gguf_n_kv(disk); i++)
        if (removed(disk, ctx, i, &key, &kl)) {
            n_removed++;
            list_bytes += 8 + kl;
        }
    bool listing = n_removed > 0;
    for (int64_t i = 0; i < ctx->n_kv; i++)
        if (!left_out(&ctx->kv[i], listing) &&
            !(changes_only && unchanged(&ctx->kv[i], disk))) {
            n_kv++;
            size += gguf_kv_record_size(ctx->kv[i].key_len, ctx->kv[i].val_len);
        }
    if (listing)
        size += gguf_kv_record_size(REMOVED_KEY_LEN, list_bytes);
    uint64_t padded = gguf_align_up(size, gguf_ctx_alignment(ctx));
    enum gguf_status st =
        padded > SIZE_MAX ? GGUF_E_NOMEM : gguf_buf_reserve(b, (size_t)padded);
    if (st != GGUF_OK)
        return gguf_fail(err, st, "out of memory saving the edits");

    uint8_t *p = b->p + b->len;
    p = gguf_put_preamble(p, ctx->version == 2 ? 2 : 3, 0, n_kv + listing);
    if (lead_len) {
        memcpy(p, lead, lead_len);
        p += lead_len;
    }
    for (int64_t i = 0; i < ctx->n_kv; i++) {
        const struct gguf_kv *kv = &ctx->kv[i];
        if (!left_out(kv, listing) && !(changes_only && unchanged(kv, disk)))
            p = gguf_put_kv(p, kv->key, kv->key_len, kv->type, kv->val,
                            kv->val_len);
    }
    if (listing) {
        p = gguf_put_kv(p, REMOVED_KEY, REMOVED_KEY_LEN, GGUF_TYPE_ARRAY, NULL,
                        0);
        gguf_wr32(p, GGUF_TYPE_STRING);
        gguf_wr64(p + 4, n_removed);
        p += 12;
        for (int64_t i = 0; i < gguf_n_kv(disk); i++)
            if (removed(disk, ctx, i, &key, &kl))
                p = gguf_put_str(p, key, kl);
    }
    memset(p, 0, (size_t)(padded - size));
    b->len += (size_t)padded;
    return GGUF_OK;
}

/* ---- applying ------------------------------------------------------- */

bool gguf_edits_is_removal(const gguf_ctx *e, int64_t i) {
    size_t kl;
    const char *key = gguf_kv_key(e, i, &kl);
    return kl == sizeof GGUF_REMOVED_KEY - 1 &&
           memcmp(key, GGUF_REMOVED_KEY, kl) == 0;
}

const char *gguf_edits_next_name(const uint8_t *p, uint64_t *off, size_t *len) {
    *len = (size_t)gguf_rd64(p + *off);
    const char *name = (const char *)p + *off + 8;
    *off += 8 + *len;
    return name;
}

enum gguf_status gguf_edits_apply_kv(gguf_ctx *ctx, const gguf_ctx *e,
                                     int64_t i, struct gguf_error *err) {
    size_t kl, pl;
    const char *key = gguf_kv_key(e, i, &kl);
    const uint8_t *p = gguf_kv_payload(e, i, &pl);
    if (gguf_kv_is_padding(e, i))
        return GGUF_OK;
    if (gguf_edits_is_removal(e, i)) {
        uint64_t count = gguf_kv_arr_n(e, i), off = 12;
        if (gguf_kv_arr_type(e, i) != GGUF_TYPE_STRING)
            return gguf_fail(err, GGUF_E_FORMAT,
                             "pending edits: " GGUF_REMOVED_KEY
                             " is not an array of strings");
        for (uint64_t k = 0; k < count; k++) {
            size_t sl;
            const char *name = gguf_edits_next_name(p, &off, &sl);
            int64_t j = gguf_find_key(ctx, name, sl);
            if (j >= 0 && gguf_remove_key(ctx, j, err) != GGUF_OK)
                return err ? err->code : GGUF_E_INVAL;
        }
        return GGUF_OK;
    }
    if (gguf_kv_same(e, i, ctx, gguf_find_key(ctx, key, kl)))
        return GGUF_OK; /* unchanged (general.alignment among them) */
    return gguf_set_payload(ctx, key, kl, gguf_kv_type(e, i), p, pl, err);
}

void gguf_edits_list_name(struct gguf_buf *b, const char *k, size_t kl) {
    char q[GGUF_QUOTE_MAX];
    if (b->len > 400) {
        if (b->len < 405)
            (void)gguf_buf_add(b, ", ...", 5);
        return;
    }
    gguf_quote(q, sizeof q, k, kl);
    if (b->len)
        (void)gguf_buf_add(b, ", ", 2);
    (void)gguf_buf_add(b, q, strlen(q));
}

enum gguf_status gguf_edits_apply(gguf_ctx *ctx, const gguf_ctx *e,
                                  struct gguf_buf *names, int64_t *set,
                                  int64_t *removed, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    *set = *removed = 0;
    for (int64_t i = 0; st == GGUF_OK && i < gguf_n_kv(e); i++) {
        size_t kl;
        const char *k = gguf_kv_key(e, i, &kl);
        if (gguf_key_is_overlay(k, kl) || gguf_kv_is_padding(e, i))
            continue;
        if (gguf_edits_is_removal(e, i)) {
            int64_t before = gguf_n_kv(ctx);
            st = gguf_edits_apply_kv(ctx, e, i, err);
            *removed += before - gguf_n_kv(ctx);
            continue;
        }
        if (gguf_kv_same(e, i, ctx, gguf_find_key(ctx, k, kl)))
            continue;
        if (names)
            gguf_edits_list_name(names, k, kl);
        ++*set;
        st = gguf_edits_apply_kv(ctx, e, i, err);
    }
    return st;
}
