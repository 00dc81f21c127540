/*
 * hashes.c - what identifies tensors without reading them yourself:
 *   user.gguf.sha256, user.gguf.xxh64 on tensors/NAME: the SHA-256
 *       (OpenSSL's EVP) and XXH64 (libxxhash, seed 0: llama-gguf-hash's)
 *       of the file's bytes, lower-case hex (XXH64 in its canonical,
 *       big-endian form, as xxhsum and llama-gguf-hash print it);
 *   the same on tensors/ itself: every tensor's bytes, in order (the
 *       "weights digest"; llama-gguf-hash's model hash).  Metadata edits
 *       leave it as it is: it covers no header byte.
 *   index.tsv: one line per tensor in file order,
 *       NAME<TAB>TYPE<TAB>SHAPE<TAB>BYTES, NAME as in tensors/, SHAPE as
 *       user.gguf.shape (ne, comma-separated): no offsets, so it changes
 *       only when tensors do and diff(1) of two quantizations of a model
 *       lists what differs.
 * Hashes are computed on first request, reading the bytes through
 * gfs_data_read HASH_CHUNK at a time, and kept for the mount's life (the
 * bytes cannot change under a mount: a read-only mount fails once the
 * file changes; a read-write one holds it locked).  The first request on
 * tensors/ computes every tensor's hash in the same pass.
 */
#include "views.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define HASH_CHUNK (4u << 20)

static const char *const hash_attrs[] = {"user.gguf.sha256", "user.gguf.xxh64"};

struct hasher {
    EVP_MD_CTX *sha;
    XXH64_state_t *xxh;
};

static int hasher_init(struct hasher *h) {
    h->sha = EVP_MD_CTX_new();
    h->xxh = XXH64_createState();
    if (!h->sha || !h->xxh ||
        EVP_DigestInit_ex(h->sha, EVP_sha256(), NULL) != 1 ||
        XXH64_reset(h->xxh, 0) != XXH_OK)
        return ENOMEM;
    return 0;
}

static void hasher_add(struct hasher *h, const void *p, size_t n) {
    EVP_DigestUpdate(h->sha, p, n);
    XXH64_update(h->xxh, p, n);
}

static int hasher_end(struct hasher *h, struct gfs_hash *out) {
    unsigned len = 0;
    int ok = EVP_DigestFinal_ex(h->sha, out->sha256, &len) == 1 && len == 32;
    out->xxh64 = XXH64_digest(h->xxh);
    out->have = ok;
    return ok ? 0 : EIO;
}

static void hasher_free(struct hasher *h) {
    EVP_MD_CTX_free(h->sha);
    XXH64_freeState(h->xxh);
}

/* Hashes tensor i into one (may be NULL), and adds its bytes to all (may
 * be NULL).  buf: HASH_CHUNK bytes.  0 or errno. */
static int hash_tensor(struct gfs *fs, int64_t i, char *buf,
                       struct gfs_hash *one, struct hasher *all) {
    int64_t j;
    int shard;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, &shard);
    uint64_t pos = gguf_tensor_offset(c, j), left = gfs_tensor_bytes(fs, i);
    struct hasher h = {0};
    int err = one ? hasher_init(&h) : 0;
    while (!err && left) {
        size_t n = left < HASH_CHUNK ? (size_t)left : HASH_CHUNK;
        if ((err = gfs_data_read(fs, shard, pos, buf, n)))
            break;
        if (one)
            hasher_add(&h, buf, n);
        if (all)
            hasher_add(all, buf, n);
        pos += n;
        left -= n;
    }
    if (!err && one)
        err = hasher_end(&h, one);
    hasher_free(&h);
    return err;
}

/* The hashes of tensor i (i < 0: tensors/) into out, computed unless
 * known.  0 or errno. */
static int get_hash(struct gfs *fs, int64_t i, struct gfs_hash *out) {
    struct gfs_views *v = fs->views;
    struct gfs_hash *slot = i < 0 ? &v->all : &v->h[i];
    pthread_mutex_lock(&v->mu);
    *out = *slot;
    pthread_mutex_unlock(&v->mu);
    if (out->have)
        return 0;
    char *buf = malloc(HASH_CHUNK);
    if (!buf)
        return ENOMEM;
    int err = 0;
    if (i >= 0) {
        err = hash_tensor(fs, i, buf, out, NULL);
    } else {
        struct hasher all = {0};
        struct gfs_hash *each = calloc((size_t)v->n + 1, sizeof *each);
        err = each ? hasher_init(&all) : ENOMEM;
        for (int64_t k = 0; !err && k < v->n; k++)
            err = hash_tensor(fs, k, buf, &each[k], &all);
        if (!err)
            err = hasher_end(&all, out);
        hasher_free(&all);
        pthread_mutex_lock(&v->mu);
        for (int64_t k = 0; !err && k < v->n; k++)
            v->h[k] = each[k];
        pthread_mutex_unlock(&v->mu);
        free(each);
    }
    free(buf);
    if (!err) {
        pthread_mutex_lock(&v->mu);
        *slot = *out;
        pthread_mutex_unlock(&v->mu);
    }
    return err;
}

static int is_hash_attr(const char *name) {
    return strcmp(name, hash_attrs[0]) == 0 || strcmp(name, hash_attrs[1]) == 0;
}

int gfs_views_xattr(struct gfs *fs, fuse_ino_t ino, const char *name,
                    struct gguf_buf *out) {
    int64_t i = -1;
    if (!is_hash_attr(name) || !fs->views)
        return ENODATA;
    if (gfs_kind(ino) == GFS_TENSOR && (i = gfs_tensor_index(fs, ino)) < 0)
        return ENOENT;
    if (gfs_kind(ino) != GFS_TENSOR && gfs_kind(ino) != GFS_DIR_TENSORS)
        return ENODATA;
    struct gfs_hash h;
    int err = get_hash(fs, i, &h);
    if (err)
        return err;
    char hex[65];
    if (name[10] == 's') {
        for (int k = 0; k < 32; k++)
            snprintf(hex + 2 * k, 3, "%02x", h.sha256[k]);
    } else {
        XXH64_canonical_t cn;
        XXH64_canonicalFromHash(&cn, h.xxh64);
        for (int k = 0; k < 8; k++)
            snprintf(hex + 2 * k, 3, "%02x", cn.digest[k]);
    }
    return gguf_buf_add(out, hex, strlen(hex)) == GGUF_OK ? 0 : ENOMEM;
}

int gfs_views_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out) {
    enum gfs_kind k = gfs_kind(ino);
    if (!fs->views || (k != GFS_TENSOR && k != GFS_DIR_TENSORS))
        return 0;
    for (size_t a = 0; a < 2; a++)
        if (gguf_buf_add(out, hash_attrs[a], strlen(hash_attrs[a]) + 1) !=
            GGUF_OK)
            return ENOMEM;
    return 0;
}

/* ---- index.tsv ------------------------------------------------------- */

static int index_line(struct gfs *fs, int64_t i, struct gguf_buf *out,
                      struct gguf_buf *name) {
    int64_t j;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, NULL);
    uint32_t ty = gguf_tensor_type(c, j), nd = gguf_tensor_n_dims(c, j);
    const int64_t *ne = gguf_tensor_ne(c, j);
    const char *tn;
    uint32_t blck, size;
    uint64_t bytes = gfs_tensor_bytes(fs, i);
    char tmp[64];
    if (!gguf_dq_type(fs->views->ggml, ty, &tn, &blck, &size)) {
        snprintf(tmp, sizeof tmp, "type%" PRIu32, ty);
        tn = tmp;
    }
    if (gfs_tensor_fname(fs, i, name))
        return ENOMEM;
    int ok = gguf_buf_add(out, name->p, name->len - 1) == GGUF_OK &&
             gguf_buf_add(out, "\t", 1) == GGUF_OK &&
             gguf_buf_add(out, tn, strlen(tn)) == GGUF_OK;
    for (uint32_t d = 0; ok && d < nd; d++) {
        int n = snprintf(tmp, sizeof tmp, "%s%" PRId64, d ? "," : "\t", ne[d]);
        ok = gguf_buf_add(out, tmp, (size_t)n) == GGUF_OK;
    }
    int n =
        snprintf(tmp, sizeof tmp, "%s\t%" PRIu64 "\n", nd ? "" : "\t", bytes);
    return ok && gguf_buf_add(out, tmp, (size_t)n) == GGUF_OK ? 0 : ENOMEM;
}

struct gfs_text *gfs_views_index(struct gfs *fs, int *err) {
    struct gfs_views *v = fs->views;
    struct gfs_text *t = NULL;
    struct gguf_buf b = {0}, name = {0};
    pthread_mutex_lock(&v->mu);
    if ((t = v->index)) {
        atomic_fetch_add(&t->refs, 1);
        goto out;
    }
    for (int64_t i = 0; i < v->n; i++)
        if ((*err = index_line(fs, i, &b, &name)))
            goto out;
    if (!(t = gfs_text_new(&b))) {
        *err = ENOMEM;
        goto out;
    }
    atomic_fetch_add(&t->refs, 1); /* the cache's and the caller's */
    v->index = t;
out:
    pthread_mutex_unlock(&v->mu);
    gguf_buf_free(&b);
    gguf_buf_free(&name);
    return t;
}
