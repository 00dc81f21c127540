/*
 * shards.c - split models: NAME-00001-of-00003.gguf, ... (gguf-split).
 *
 * The keys split.no, split.count and split.tensors.count, the naming and
 * what gguf-split --merge writes: docs/format.md, Split sets.  Only the
 * first shard carries the full metadata; each shard holds its own tensors.
 * A set is opened whole and checked for consistency, so a missing or
 * foreign shard is named before anything is mounted.
 *
 * Descriptors.  A set may have a thousand shards: each shard but the
 * first has its descriptor released (gguf_release_fd) once its header is
 * parsed and checked, so that opening a set holds two descriptors at a
 * time, whatever its size.  The first shard keeps its own (the metadata,
 * the edits and the commit are its); whoever reads another shard's bytes
 * opens it again and checks it is the same file (gguf_ident; the daemon:
 * fs/source/fds.c).
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPLIT_NO "split.no"
#define SPLIT_COUNT "split.count"
#define SPLIT_TENSORS "split.tensors.count"

static bool get_int(const gguf_ctx *ctx, const char *key, int64_t *v) {
    int64_t i = gguf_find_key(ctx, key, strlen(key));
    return i >= 0 && gguf_kv_get_i64(ctx, i, v);
}

void gguf_close_set(gguf_ctx **v, int n) {
    if (!v)
        return;
    for (int i = 0; i < n; i++)
        gguf_close(v[i]);
    free(v);
}

/* Shard n of count, v[n - 1], just opened after v[0..n-2]: its split.no
 * and split.count keys agree with its place, and none of its tensors is in
 * an earlier shard. */
static enum gguf_status check_shard(gguf_ctx **v, int n, int count,
                                    struct gguf_error *err) {
    int64_t sn = -1, sc = -1;
    if (!get_int(v[n - 1], SPLIT_NO, &sn) || sn != n - 1 ||
        !get_int(v[n - 1], SPLIT_COUNT, &sc) || sc != count)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "split.no/split.count are "
                         "%lld/%lld, expected %d/%d",
                         (long long)sn, (long long)sc, n - 1, count);
    int64_t nt = gguf_n_tensors(v[n - 1]);
    for (int64_t i = 0; i < nt; i++) {
        size_t tl;
        const char *tn = gguf_tensor_name(v[n - 1], i, &tl);
        for (int p = 0; p < n - 1; p++)
            if (gguf_find_tensor(v[p], tn, tl) >= 0) {
                char q[GGUF_QUOTE_MAX];
                gguf_quote(q, sizeof q, tn, tl);
                return gguf_fail(err, GGUF_E_FORMAT,
                                 "tensor '%s' is also "
                                 "in shard %d",
                                 q, p + 1);
            }
    }
    return GGUF_OK;
}

/* gguf_open_set's opener: the first file from its descriptor when given,
 * the others by path. */
struct local_open {
    const char *path;
    const struct gguf_file *first;
};
static enum gguf_status open_local(void *u, const char *name, unsigned flags,
                                   gguf_ctx **out, struct gguf_error *err) {
    const struct local_open *lo = u;
    if (lo->first && name == lo->path)
        return gguf_open_file(out, lo->first, flags, err);
    return gguf_open(out, name, flags, err);
}

enum gguf_status gguf_open_set(const char *path, const struct gguf_file *first,
                               unsigned flags, gguf_ctx ***out, int *n_out,
                               char *bad, size_t bad_len,
                               struct gguf_error *err) {
    struct local_open lo = {.path = path, .first = first};
    return gguf_open_set_by(path, open_local, &lo, flags, out, n_out, bad,
                            bad_len, err);
}

enum gguf_status gguf_open_set_by(const char *path, gguf_opener open, void *u,
                                  unsigned flags, gguf_ctx ***out, int *n_out,
                                  char *bad, size_t bad_len,
                                  struct gguf_error *err) {
    gguf_ctx **v = NULL;
    enum gguf_status st;
    int no = 0, count = 0, n = 0;
    size_t cut = 0;
    int64_t k_count = 0, k_no = 0, k_tensors = 0;
    char *name = NULL;

    snprintf(bad, bad_len, "%s", path);
    v = calloc(1, sizeof *v);
    if (!v)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    if ((st = open(u, path, flags, &v[0], err)) != GGUF_OK)
        goto fail;
    n = 1;
    bool named = gguf_split_name(path, &no, &count, &cut);
    bool keyed = get_int(v[0], SPLIT_COUNT, &k_count) && k_count > 1;
    if (!keyed && !(named && count > 1))
        goto done; /* a single file (or a merged one: split.count = 0) */
    if (!keyed) {
        st = gguf_fail(err, GGUF_E_FORMAT,
                       "named as shard %d of %d but has "
                       "no split.count key",
                       no, count);
        goto fail;
    }
    if (!named) {
        st = gguf_fail(err, GGUF_E_FORMAT,
                       "split.count is %lld but the file "
                       "name does not end in -NNNNN-of-MMMMM.gguf",
                       (long long)k_count);
        goto fail;
    }
    if (no != 1 || (get_int(v[0], SPLIT_NO, &k_no) && k_no != 0)) {
        st = gguf_fail(err, GGUF_E_INVAL,
                       "this is shard %d of %d: mount the "
                       "first shard (-00001-of-%05d.gguf)",
                       no, count, count);
        goto fail;
    }
    if (k_count != count) {
        st = gguf_fail(err, GGUF_E_FORMAT,
                       "split.count is %lld but the name "
                       "says %d shards",
                       (long long)k_count, count);
        goto fail;
    }
    if (!get_int(v[0], SPLIT_TENSORS, &k_tensors) || k_tensors < 0) {
        st = gguf_fail(err, GGUF_E_FORMAT, "split.tensors.count is missing");
        goto fail;
    }
    gguf_ctx **nv = realloc(v, (size_t)count * sizeof *v);
    if (!nv || !(name = malloc(cut + 32))) {
        if (nv)
            v = nv;
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto fail;
    }
    v = nv;
    int64_t total = gguf_n_tensors(v[0]);
    for (int s = 2; s <= count; s++) {
        snprintf(name, cut + 32, "%.*s-%05d-of-%05d.gguf", (int)cut, path, s,
                 count);
        snprintf(bad, bad_len, "%s", name);
        st = open(u, name, flags & GGUF_OPEN_ALLOW_NESTED, &v[n], err);
        if (st != GGUF_OK)
            goto fail;
        n++;
        if ((st = check_shard(v, n, count, err)) != GGUF_OK)
            goto fail;
        gguf_release_fd(v[n - 1]);
        total += gguf_n_tensors(v[n - 1]);
    }
    snprintf(bad, bad_len, "%s", path);
    if (total != k_tensors) {
        st = gguf_fail(err, GGUF_E_FORMAT,
                       "the shards hold %lld tensors but "
                       "split.tensors.count is %lld",
                       (long long)total, (long long)k_tensors);
        goto fail;
    }
done:
    free(name);
    *out = v;
    *n_out = n;
    return GGUF_OK;
fail:
    free(name);
    gguf_close_set(v, n);
    return st;
}

/* A new context with first's version, alignment and keys in order; if
 * split (the file gguf-split --merge writes), split.count set to 0, which
 * ggml does by moving it last.  NULL and err on failure. */
static gguf_ctx *merge_keys(const gguf_ctx *first, bool split,
                            struct gguf_error *err) {
    gguf_ctx *m = gguf_new(gguf_version(first));
    uint8_t zero_u16[2] = {0, 0};
    if (!m) {
        gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        return NULL;
    }
    if (gguf_alignment(first) != GGUF_DEFAULT_ALIGNMENT &&
        gguf_set_alignment(m, gguf_alignment(first), err) != GGUF_OK)
        goto fail;
    for (int64_t i = 0; i < gguf_n_kv(first); i++) {
        size_t kl, pl;
        const char *k = gguf_kv_key(first, i, &kl);
        const uint8_t *p = gguf_kv_payload(first, i, &pl);
        if ((split && kl == strlen(SPLIT_COUNT) &&
             memcmp(k, SPLIT_COUNT, kl) == 0) ||
            gguf_kv_is_padding(first, i))
            continue;
        if (gguf_key_is_alignment(k, kl)) {
            if (gguf_find_key(m, k, kl) >= 0)
                continue; /* set above */
            if (gguf_set_alignment(m, gguf_alignment(first), err) != GGUF_OK)
                goto fail;
            continue;
        }
        if (gguf_set_payload(m, k, kl, gguf_kv_type(first, i), p, pl, err) !=
            GGUF_OK)
            goto fail;
    }
    if (split &&
        gguf_set_payload(m, SPLIT_COUNT, strlen(SPLIT_COUNT), GGUF_TYPE_UINT16,
                         zero_u16, 2, err) != GGUF_OK)
        goto fail;
    return m;
fail:
    gguf_close(m);
    return NULL;
}

/* Appends tensor i of c (name, type, shape) to m. */
static enum gguf_status add_like(gguf_ctx *m, const gguf_ctx *c, int64_t i,
                                 struct gguf_error *err) {
    size_t tl;
    const char *tn = gguf_tensor_name(c, i, &tl);
    return gguf_add_tensor(m, tn, tl, gguf_tensor_type(c, i),
                           gguf_tensor_n_dims(c, i), gguf_tensor_ne(c, i), err);
}

gguf_ctx *gguf_merge(gguf_ctx *const *v, int n, struct gguf_error *err) {
    /* Every shard's tensors, in order, as picks: a pick is smaller than
     * the tensor info each context holds already. */
    int64_t total = 0;
    for (int s = 0; s < n; s++)
        total += gguf_n_tensors(v[s]);
    struct gguf_pick *t = calloc(total ? (size_t)total : 1, sizeof *t);
    if (!t) {
        gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        return NULL;
    }
    int64_t g = 0;
    for (int s = 0; s < n; s++)
        for (int64_t i = 0; i < gguf_n_tensors(v[s]); i++)
            t[g++] = (struct gguf_pick){v[s], i};
    gguf_ctx *m = gguf_merge_picks(v[0], true, t, total, err);
    free(t);
    return m;
}

gguf_ctx *gguf_merge_picks(const gguf_ctx *first, bool split,
                           const struct gguf_pick *t, int64_t n,
                           struct gguf_error *err) {
    gguf_ctx *m = merge_keys(first, split, err);
    for (int64_t g = 0; m && g < n; g++)
        if (add_like(m, t[g].ctx, t[g].i, err) != GGUF_OK) {
            gguf_close(m);
            return NULL;
        }
    return m;
}
