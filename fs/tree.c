/*
 * tree.c - the directory tree of a mount: inode numbers, names, attributes
 * and the cache of rendered meta files.
 */
#include "ggufs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum gfs_kind gfs_kind(fuse_ino_t ino) {
    switch (ino) {
    case GFS_INO_ROOT:
        return GFS_ROOT;
    case GFS_INO_META:
        return GFS_DIR_META;
    case GFS_INO_TENSORS:
        return GFS_DIR_TENSORS;
    case GFS_INO_LIVE:
        return GFS_LIVE;
    default:
        break;
    }
    if (ino >= GFS_INO_SCRATCH)
        return GFS_SCRATCH;
    if (ino >= GFS_INO_KV)
        return GFS_KV;
    if (ino >= GFS_INO_TENSOR && ino < GFS_INO_KV)
        return GFS_TENSOR;
    return GFS_NONE;
}

int64_t gfs_n_tensors(const struct gfs *fs) {
    return fs->t_first[fs->n_shards];
}

gguf_ctx *gfs_tensor_ctx(const struct gfs *fs, int64_t g, int64_t *i,
                         int *shard) {
    int s = 0;
    while (s + 1 < fs->n_shards && g >= fs->t_first[s + 1])
        s++;
    *i = g - fs->t_first[s];
    if (shard)
        *shard = s;
    return fs->shards[s];
}

static int64_t find_tensor(const struct gfs *fs, const char *name, size_t len) {
    for (int s = 0; s < fs->n_shards; s++) {
        int64_t i = gguf_find_tensor(fs->shards[s], name, len);
        if (i >= 0)
            return fs->t_first[s] + i;
    }
    return -1;
}

/* Tensor index of ino, or -1 if ino is not a tensor of this file. */
int64_t gfs_tensor_index(const struct gfs *fs, fuse_ino_t ino) {
    if (gfs_kind(ino) != GFS_TENSOR)
        return -1;
    uint64_t i = ino - GFS_INO_TENSOR;
    return i < (uint64_t)gfs_n_tensors(fs) ? (int64_t)i : -1;
}

/* Current kv index of ino, or -1 if the key is gone (removed) or hidden. */
int64_t gfs_kv_index(const struct gfs *fs, fuse_ino_t ino) {
    if (gfs_kind(ino) != GFS_KV)
        return -1;
    int64_t i = gguf_find_id(fs->ctx, (uint32_t)(ino - GFS_INO_KV));
    if (i < 0 || gfs_kv_hidden(fs, i))
        return -1;
    return i;
}

int gfs_kv_hidden(const struct gfs *fs, int64_t i) {
    return gguf_kv_is_padding(fs->ctx, i);
}

int gfs_kv_fname(const struct gfs *fs, int64_t i, struct gguf_buf *out) {
    size_t len;
    const char *k = gguf_kv_key(fs->ctx, i, &len);
    out->len = 0;
    if (gguf_name_escape(k, len, out) != GGUF_OK ||
        gguf_buf_add(out, "", 1) != GGUF_OK)
        return ENOMEM;
    return 0;
}

int gfs_tensor_fname(const struct gfs *fs, int64_t i, struct gguf_buf *out) {
    size_t len;
    int64_t j;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, NULL);
    const char *n = gguf_tensor_name(c, j, &len);
    out->len = 0;
    if (gguf_name_escape(n, len, out) != GGUF_OK ||
        gguf_buf_add(out, "", 1) != GGUF_OK)
        return ENOMEM;
    return 0;
}

static void fill_common(const struct gfs *fs, struct stat *st, fuse_ino_t ino) {
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_uid = fs->uid;
    st->st_gid = fs->gid;
    st->st_atim = fs->st.st_atim;
    st->st_mtim = fs->st.st_mtim;
    st->st_ctim = fs->st.st_ctim;
    st->st_blksize = 4096;
}

int gfs_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    fill_common(fs, st, ino);
    switch (gfs_kind(ino)) {
    case GFS_ROOT:
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 4;
        return 0;
    case GFS_LIVE: {
        uint64_t size;
        int err = gfs_view_size(fs, &size);
        if (err)
            return err;
        st->st_mode = S_IFREG | 0444;
        st->st_nlink = 1;
        st->st_size = (off_t)size;
        st->st_blocks = (st->st_size + 511) / 512;
        return 0;
    }
    case GFS_DIR_META:
        st->st_mode = S_IFDIR | (fs->readonly ? 0555 : 0755);
        st->st_nlink = 2;
        return 0;
    case GFS_DIR_TENSORS:
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 2;
        return 0;
    case GFS_TENSOR: {
        int64_t i = gfs_tensor_index(fs, ino);
        if (i < 0)
            return ENOENT;
        st->st_mode = S_IFREG | 0444;
        st->st_nlink = 1;
        int64_t j;
        gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, NULL);
        st->st_size = (off_t)gguf_tensor_size(c, j);
        st->st_blocks = (st->st_size + 511) / 512;
        return 0;
    }
    case GFS_KV: {
        int64_t i = gfs_kv_index(fs, ino);
        if (i < 0)
            return ENOENT;
        int err = 0;
        struct gfs_text *t = gfs_text_get(fs, i, &err);
        if (!t)
            return err;
        st->st_mode = S_IFREG | (fs->readonly ? 0444 : 0644);
        st->st_nlink = 1;
        st->st_size = (off_t)t->len;
        st->st_blocks = (st->st_size + 511) / 512;
        gfs_text_put(t);
        return 0;
    }
    case GFS_SCRATCH: {
        struct gfs_scratch *sc = gfs_meta_scratch_by_ino(fs, ino);
        if (!sc)
            return ENOENT;
        st->st_mode = S_IFREG | 0644;
        st->st_nlink = 1;
        st->st_size = (off_t)sc->data.len;
        st->st_mtim = st->st_ctim = sc->mtime;
        return 0;
    }
    case GFS_NONE:
        break;
    }
    return ENOENT;
}

/* Meta files of a writable mount change size when an edit is applied (the
 * text is rendered anew): never let the kernel trust a stale size. */
double gfs_attr_timeout(const struct gfs *fs, fuse_ino_t ino) {
    enum gfs_kind k = gfs_kind(ino);
    if (!fs->readonly &&
        (k == GFS_KV || k == GFS_SCRATCH || k == GFS_DIR_META || k == GFS_LIVE))
        return 0.0;
    return fs->timeout;
}

int gfs_fill_entry(struct gfs *fs, fuse_ino_t ino, struct fuse_entry_param *e) {
    memset(e, 0, sizeof *e);
    int err = gfs_stat(fs, ino, &e->attr);
    if (err)
        return err;
    e->ino = ino;
    e->generation = 1;
    e->attr_timeout = gfs_attr_timeout(fs, ino);
    e->entry_timeout = fs->timeout;
    return 0;
}

/* Maps a file name back to a key or tensor name.  Names are accepted only
 * in their canonical escaped form, so every key has exactly one path;
 * hashed long names are resolved by scanning. */
static int64_t find_by_fname(struct gfs *fs, const char *name, int tensors) {
    size_t nlen = strlen(name);
    struct gguf_buf raw = {0}, canon = {0};
    int64_t found = -1;

    if (gguf_name_unescape(name, nlen, &raw, NULL) == GGUF_OK) {
        found = tensors ? find_tensor(fs, (char *)raw.p, raw.len)
                        : gguf_find_key(fs->ctx, (char *)raw.p, raw.len);
        if (found >= 0) {
            if (gguf_name_escape((char *)raw.p, raw.len, &canon) != GGUF_OK ||
                canon.len != nlen || memcmp(canon.p, name, nlen) != 0)
                found = -1;
        }
        goto out;
    }
    if (!strstr(name, "%~"))
        goto out;
    int64_t n = tensors ? gfs_n_tensors(fs) : gguf_n_kv(fs->ctx);
    for (int64_t i = 0; i < n; i++) {
        if (tensors ? gfs_tensor_fname(fs, i, &canon)
                    : gfs_kv_fname(fs, i, &canon))
            break;
        if (canon.len == nlen + 1 && memcmp(canon.p, name, nlen) == 0) {
            found = i;
            break;
        }
    }
out:
    gguf_buf_free(&raw);
    gguf_buf_free(&canon);
    return found;
}

int gfs_lookup_name(struct gfs *fs, fuse_ino_t parent, const char *name,
                    fuse_ino_t *out) {
    int64_t i;
    switch (gfs_kind(parent)) {
    case GFS_ROOT:
        if (strcmp(name, "meta") == 0) {
            *out = GFS_INO_META;
            return 0;
        }
        if (strcmp(name, "tensors") == 0) {
            *out = GFS_INO_TENSORS;
            return 0;
        }
        if (fs->live_name && strcmp(name, fs->live_name) == 0) {
            *out = GFS_INO_LIVE;
            return 0;
        }
        return ENOENT;
    case GFS_DIR_META: {
        struct gfs_scratch *sc = gfs_meta_scratch_find(fs, name);
        if (sc) {
            *out = sc->ino;
            return 0;
        }
        i = find_by_fname(fs, name, 0);
        if (i < 0 || gfs_kv_hidden(fs, i))
            return ENOENT;
        *out = GFS_INO_KV + gguf_kv_id(fs->ctx, i);
        return 0;
    }
    case GFS_DIR_TENSORS:
        i = find_by_fname(fs, name, 1);
        if (i < 0)
            return ENOENT;
        *out = GFS_INO_TENSOR + (fuse_ino_t)i;
        return 0;
    case GFS_TENSOR:
    case GFS_KV:
    case GFS_SCRATCH:
    case GFS_LIVE:
        return ENOTDIR;
    case GFS_NONE:
        break;
    }
    return ENOENT;
}

static struct gfs_text *text_new(const struct gguf_buf *b) {
    struct gfs_text *t = malloc(sizeof *t + b->len);
    if (!t)
        return NULL;
    atomic_init(&t->refs, 1);
    t->len = b->len;
    if (b->len)
        memcpy(t->data, b->p, b->len);
    return t;
}

void gfs_text_put(struct gfs_text *t) {
    if (t && atomic_fetch_sub(&t->refs, 1) == 1)
        free(t);
}

struct gfs_text *gfs_text_get(struct gfs *fs, int64_t i, int *err) {
    uint32_t id = gguf_kv_id(fs->ctx, i);
    struct gfs_text *t = NULL;
    struct gguf_buf b = {0};
    struct gguf_error gerr = {0};

    pthread_mutex_lock(&fs->text_lock);
    if (id < fs->n_texts && fs->texts[id]) {
        t = fs->texts[id];
        atomic_fetch_add(&t->refs, 1);
        goto out;
    }
    /* Rendered lazily, never at mount: a mount costs the header only. */
    size_t plen;
    const uint8_t *p = gguf_kv_payload(fs->ctx, i, &plen);
    if (gguf_render(gguf_kv_type(fs->ctx, i), p, plen, &b, &gerr) != GGUF_OK) {
        *err = gfs_errno(&gerr);
        goto out;
    }
    t = text_new(&b);
    if (!t) {
        *err = ENOMEM;
        goto out;
    }
    if (id >= fs->n_texts) {
        size_t n = fs->n_texts ? fs->n_texts : 64;
        while (n <= id)
            n *= 2;
        struct gfs_text **nt = realloc(fs->texts, n * sizeof *nt);
        if (!nt)
            goto out; /* serve uncached */
        memset(nt + fs->n_texts, 0, (n - fs->n_texts) * sizeof *nt);
        fs->texts = nt;
        fs->n_texts = n;
    }
    fs->texts[id] = t;
    atomic_fetch_add(&t->refs, 1);
out:
    pthread_mutex_unlock(&fs->text_lock);
    gguf_buf_free(&b);
    return t;
}

void gfs_text_forget(struct gfs *fs, uint32_t id) {
    pthread_mutex_lock(&fs->text_lock);
    if (id < fs->n_texts) {
        gfs_text_put(fs->texts[id]);
        fs->texts[id] = NULL;
    }
    pthread_mutex_unlock(&fs->text_lock);
}

void gfs_texts_free(struct gfs *fs) {
    for (size_t i = 0; i < fs->n_texts; i++)
        gfs_text_put(fs->texts[i]);
    free(fs->texts);
    fs->texts = NULL;
    fs->n_texts = 0;
}
