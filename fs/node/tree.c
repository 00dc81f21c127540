/*
 * tree.c - the directory tree of a mount: inode numbers, names, attributes
 * and the cache of rendered meta files.
 */
#include "../base/base.h"
#include "../ggufs.h"
#include "../kinds.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int64_t gfs_n_tensors(const struct gfs *fs) {
    return fs->t_first[fs->n_shards];
}

gguf_ctx *gfs_tensor_ctx(const struct gfs *fs, int64_t g, int64_t *i,
                         int *shard) {
    if (fs->picks) { /* a mix: where the recipe took it from */
        *i = fs->picks[g].i;
        if (shard)
            *shard = fs->picks[g].file;
        return fs->shards[fs->picks[g].file];
    }
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
    if (gfs_kind(fs, ino) != GFS_TENSOR)
        return -1;
    uint64_t i = ino - GFS_INO_TENSOR;
    return i < (uint64_t)gfs_n_tensors(fs) ? (int64_t)i : -1;
}

/* Current kv index of ino, or -1 if the key is gone (removed) or hidden. */
int64_t gfs_kv_index(const struct gfs *fs, fuse_ino_t ino) {
    if (gfs_kind(fs, ino) != GFS_KV)
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
    st->st_ino = gfs_ino_out(fs, ino);
    st->st_uid = fs->uid;
    st->st_gid = fs->gid;
    st->st_atim = fs->st.st_atim;
    st->st_mtim = fs->st.st_mtim;
    st->st_ctim = fs->st.st_ctim;
    st->st_blksize = 4096;
}

int gfs_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    fill_common(fs, st, ino);
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    return row ? row->stat(fs, ino, st) : ENOENT;
}

/* Files whose size follows the edits (meta/'s, changed when an edit is
 * applied and the text rendered anew): never let the kernel trust a
 * stale size on a writable mount, unless the kernel is told of each edit
 * (the row's told flag: meta.tsv). */
double gfs_attr_timeout(const struct gfs *fs, fuse_ino_t ino) {
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    /* But an inode that shows one version of the live view (passthrough.c,
     * a new inode per version) keeps its attributes: cached, a read(2)
     * of it through the page cache sends no GETATTR. */
    if (row && row->moves && fs->pt)
        return fs->timeout;
    if (!fs->readonly && row && row->changes && !row->told)
        return 0.0;
    return fs->timeout;
}

int gfs_fill_entry(struct gfs *fs, fuse_ino_t ino, struct fuse_entry_param *e) {
    memset(e, 0, sizeof *e);
    int err = gfs_stat(fs, ino, &e->attr);
    if (err)
        return err;
    e->ino = gfs_ino_out(fs, ino);
    e->generation = 1;
    e->attr_timeout = gfs_attr_timeout(fs, ino);
    /* A name that moves to a new inode (the view's with each version of
     * it, passthrough.c): never cached on a read-write mount. */
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    e->entry_timeout = row && row->moves && !fs->readonly ? 0.0 : fs->timeout;
    return 0;
}

/* ---- hashed long names ----------------------------------------------
 * A name whose escaped form is too long ends in "%~" and 16 hex digits of
 * the FNV-1a hash of the whole name (gguf/names.c).  The index maps that
 * hash to kv ids (tensor indexes), built at the first lookup of such a
 * name and caught up at each later one with the keys added since (ids only
 * grow), so creating a key costs one entry and nothing is rebuilt.  Keys
 * gone leave stale entries: every candidate is checked against its current
 * file name.  Guarded by text_lock (a leaf). */

/* The hash a hashed file name ends with; false if it has none. */
static bool name_hash(const char *name, size_t len, uint64_t *h) {
    if (len < 18 || name[len - 18] != '%' || name[len - 17] != '~')
        return false;
    uint64_t v = 0;
    for (size_t k = len - 16; k < len; k++) {
        char c = name[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *h = v;
    return true;
}

static int lnames_put(struct gfs_lnames *ix, uint64_t h, uint64_t v) {
    if (2 * (ix->n + 1) > ix->cap) {
        size_t cap = ix->cap ? ix->cap * 2 : 64;
        struct gfs_lname *s = calloc(cap, sizeof *s);
        if (!s)
            return ENOMEM;
        for (size_t k = 0; k < ix->cap; k++)
            if (ix->slot[k].v) {
                size_t m = (size_t)ix->slot[k].h & (cap - 1);
                while (s[m].v)
                    m = (m + 1) & (cap - 1);
                s[m] = ix->slot[k];
            }
        free(ix->slot);
        ix->slot = s;
        ix->cap = cap;
    }
    size_t m = (size_t)h & (ix->cap - 1);
    while (ix->slot[m].v)
        m = (m + 1) & (ix->cap - 1);
    ix->slot[m] = (struct gfs_lname){h, v + 1};
    ix->n++;
    return 0;
}

/* Adds name (key id or tensor index v) if its file name is hashed.  An
 * escape at most triples a name, so short ones are skipped unescaped (the
 * empty name is hashed too). */
static int lnames_add(struct gfs_lnames *ix, const char *raw, size_t len,
                      uint64_t v, struct gguf_buf *tmp) {
    if (len && len * 3 <= 255)
        return 0;
    tmp->len = 0;
    uint64_t h;
    if (gguf_name_escape(raw, len, tmp) != GGUF_OK)
        return ENOMEM;
    if (!name_hash((const char *)tmp->p, tmp->len, &h))
        return 0;
    return lnames_put(ix, h, v);
}

/* Brings the index up to date: keys with ids in [next, end), or every
 * tensor once.  Caller holds text_lock. */
static int lnames_catch_up(struct gfs *fs, int tensors) {
    struct gfs_lnames *ix = tensors ? &fs->ltensors : &fs->lkeys;
    uint64_t end =
        tensors ? (uint64_t)gfs_n_tensors(fs) : gguf_kv_id_end(fs->ctx);
    struct gguf_buf tmp = {0};
    int err = 0;
    for (; !err && ix->next < end; ix->next++) {
        size_t len;
        const char *raw;
        if (tensors) {
            int64_t j;
            gguf_ctx *c = gfs_tensor_ctx(fs, (int64_t)ix->next, &j, NULL);
            raw = gguf_tensor_name(c, j, &len);
        } else {
            int64_t i = gguf_find_id(fs->ctx, (uint32_t)ix->next);
            raw = i >= 0 ? gguf_kv_key(fs->ctx, i, &len) : NULL;
        }
        if (raw)
            err = lnames_add(ix, raw, len, ix->next, &tmp);
    }
    gguf_buf_free(&tmp);
    return err;
}

/* The key (tensor) index whose file name is the hashed name, or -1. */
static int64_t find_hashed(struct gfs *fs, const char *name, size_t nlen,
                           int tensors) {
    uint64_t h;
    int64_t found = -1;
    struct gguf_buf canon = {0};
    if (!name_hash(name, nlen, &h))
        return -1;
    pthread_mutex_lock(&fs->text_lock);
    struct gfs_lnames *ix = tensors ? &fs->ltensors : &fs->lkeys;
    if (lnames_catch_up(fs, tensors) || !ix->cap)
        goto out;
    for (size_t m = (size_t)h & (ix->cap - 1); ix->slot[m].v;
         m = (m + 1) & (ix->cap - 1)) {
        if (ix->slot[m].h != h)
            continue;
        uint64_t v = ix->slot[m].v - 1;
        int64_t i = tensors ? (int64_t)v : gguf_find_id(fs->ctx, (uint32_t)v);
        if (i < 0 || (tensors ? gfs_tensor_fname(fs, i, &canon)
                              : gfs_kv_fname(fs, i, &canon)))
            continue;
        if (canon.len == nlen + 1 && memcmp(canon.p, name, nlen) == 0) {
            found = i;
            break;
        }
    }
out:
    pthread_mutex_unlock(&fs->text_lock);
    gguf_buf_free(&canon);
    return found;
}

void gfs_lnames_free(struct gfs *fs) {
    free(fs->lkeys.slot);
    free(fs->ltensors.slot);
    memset(&fs->lkeys, 0, sizeof fs->lkeys);
    memset(&fs->ltensors, 0, sizeof fs->ltensors);
}

/* Maps a file name back to a key or tensor name.  Names are accepted only
 * in their canonical escaped form, so every key has exactly one path;
 * hashed long names through their index. */
int64_t gfs_find_by_fname(struct gfs *fs, const char *name, int tensors) {
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
    } else if (strstr(name, "%~")) {
        found = find_hashed(fs, name, nlen, tensors);
    }
    gguf_buf_free(&raw);
    gguf_buf_free(&canon);
    return found;
}

int gfs_lookup_name(struct gfs *fs, fuse_ino_t parent, const char *name,
                    fuse_ino_t *out) {
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, parent);
    if (!row)
        return ENOENT;
    return row->lookup ? row->lookup(fs, parent, name, out) : ENOTDIR;
}

struct gfs_text *gfs_text_of_gen(struct gfs *fs, struct gfs_text **slot,
                                 uint64_t *gen, gfs_text_make_arg make,
                                 void *arg, int counted, int *err) {
    struct gfs_text *t = NULL;
    struct gguf_buf b = {0};
    pthread_mutex_lock(&fs->text_lock);
    if (*slot && *gen == fs->generation) {
        t = *slot;
        atomic_fetch_add(&t->refs, 1);
    } else if (!(*err = make(fs, arg, &b)) && !(t = gfs_text_take(&b))) {
        *err = ENOMEM;
    } else if (t && counted && (*err = gfs_texts_grant(fs, t->len)) != 0) {
        gfs_text_put(t);
        t = NULL;
    } else if (t) {
        t->held = counted ? t->len : 0;
        atomic_store(&t->refs, 2); /* the cache's and the caller's */
        gfs_text_put(*slot);
        *slot = t;
        *gen = fs->generation;
    }
    pthread_mutex_unlock(&fs->text_lock);
    gguf_buf_free(&b);
    return t;
}

/* t (zeroed) a whole text of len bytes at data, with one reference. */
static struct gfs_text *text_init(struct gfs_text *t, size_t len, char *data) {
    atomic_init(&t->refs, 1);
    atomic_init(&t->stale, 0);
    t->len = t->cost = len;
    t->data = data;
    return t;
}

struct gfs_text *gfs_text_new(const struct gguf_buf *b) {
    struct gfs_text *t = calloc(1, sizeof *t + b->len); /* not windowed */
    if (!t)
        return NULL;
    if (b->len)
        memcpy(t->inline_data, b->p, b->len);
    return text_init(t, b->len, t->inline_data);
}

struct gfs_text *gfs_text_take(struct gguf_buf *b) {
    if (b->len < GFS_TEXT_TAKE)
        return gfs_text_new(b);
    struct gfs_text *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    /* the spare room back (a shrink that fails keeps the buffer) */
    uint8_t *p = b->len < b->cap ? realloc(b->p, b->len) : NULL;
    text_init(t, b->len, (char *)(p ? p : b->p));
    *b = (struct gguf_buf){0};
    return t;
}

void gfs_text_put(struct gfs_text *t) {
    if (t && atomic_fetch_sub(&t->refs, 1) == 1) {
        gfs_texts_release(t->held);
        gguf_text_map_free(&t->map);
        if (t->kept)
            (void)gfs_mem_grant(t->owner, &t->kept_granted, 0);
        free(t->kept);
        if (t->data != t->inline_data)
            free(t->data);
        free(t);
    }
}

/* Grows a by-id array of elem-sized slots (zeroed) to hold id.  0 or
 * ENOMEM.  Caller holds text_lock. */
static int grow_by_id(void **arr, size_t *n, uint32_t id, size_t elem) {
    if (id < *n)
        return 0;
    size_t m = *n ? *n : 64;
    while (m <= id)
        m *= 2;
    char *p = realloc(*arr, m * elem);
    if (!p)
        return ENOMEM;
    memset(p + *n * elem, 0, (m - *n) * elem);
    *arr = p;
    *n = m;
    return 0;
}

/* gfs_text_size's body; caller holds text_lock. */
static int text_size_locked(struct gfs *fs, int64_t i, uint64_t *size) {
    uint32_t id = gguf_kv_id(fs->ctx, i);
    struct gguf_error gerr = {0};
    if (id < fs->n_texts && fs->texts[id]) {
        *size = fs->texts[id]->len;
        return 0;
    }
    if (id < fs->n_sizes && fs->sizes[id]) {
        *size = fs->sizes[id] - 1;
        return 0;
    }
    size_t plen;
    const uint8_t *p = gguf_kv_payload(fs->ctx, i, &plen);
    if (gguf_render_size(gguf_kv_type(fs->ctx, i), p, plen, size, &gerr) !=
        GGUF_OK)
        return gfs_errno(&gerr);
    if (!grow_by_id((void **)&fs->sizes, &fs->n_sizes, id, sizeof *fs->sizes))
        fs->sizes[id] = *size + 1;
    return 0;
}

int gfs_text_size(struct gfs *fs, int64_t i, uint64_t *size) {
    pthread_mutex_lock(&fs->text_lock);
    int err = text_size_locked(fs, i, size);
    pthread_mutex_unlock(&fs->text_lock);
    return err;
}

struct gfs_text *gfs_text_get(struct gfs *fs, int64_t i, int *err) {
    uint32_t id = gguf_kv_id(fs->ctx, i);
    struct gfs_text *t = NULL;
    struct gguf_buf b = {0};
    struct gguf_error gerr = {0};
    uint64_t size = 0;

    pthread_mutex_lock(&fs->text_lock);
    if (id < fs->n_texts && fs->texts[id] && !fs->texts[id]->windowed) {
        t = fs->texts[id];
        atomic_fetch_add(&t->refs, 1);
        goto out;
    }
    /* Rendered lazily, never at mount: a mount costs the header only; and
     * only up to GFS_MAX_TEXT, measured first. */
    if ((*err = text_size_locked(fs, i, &size)))
        goto out;
    if (size > GFS_MAX_TEXT) {
        size_t klen;
        char q[GGUF_QUOTE_MAX];
        const char *key = gguf_kv_key(fs->ctx, i, &klen);
        gfs_log(fs,
                "%s: meta/%s: its text would be %llu bytes, more than ggufs "
                "makes (%llu): not opened (EFBIG)",
                fs->path, gguf_quote(q, sizeof q, key, klen),
                (unsigned long long)size, (unsigned long long)GFS_MAX_TEXT);
        *err = EFBIG;
        goto out;
    }
    size_t plen;
    const uint8_t *p = gguf_kv_payload(fs->ctx, i, &plen);
    if (gguf_render(gguf_kv_type(fs->ctx, i), p, plen, &b, &gerr) != GGUF_OK) {
        *err = gfs_errno(&gerr);
        goto out;
    }
    t = gfs_text_new(&b);
    if (!t) {
        *err = ENOMEM;
        goto out;
    }
    /* Kept for later opens while the kept texts stay small; otherwise the
     * openers' references are the only ones. */
    if (fs->texts_bytes + t->len <= GFS_TEXT_CACHE &&
        !grow_by_id((void **)&fs->texts, &fs->n_texts, id, sizeof *fs->texts) &&
        !fs->texts[id]) {
        fs->texts[id] = t;
        fs->texts_bytes += t->cost;
        atomic_fetch_add(&t->refs, 1);
    }
out:
    pthread_mutex_unlock(&fs->text_lock);
    gguf_buf_free(&b);
    return t;
}

struct gfs_text *gfs_text_open(struct gfs *fs, int64_t i, int *err) {
    uint32_t id = gguf_kv_id(fs->ctx, i);
    struct gfs_text *t = NULL;
    struct gguf_error gerr = {0};
    uint64_t size = 0;

    pthread_mutex_lock(&fs->text_lock);
    if (id < fs->n_texts && fs->texts[id]) { /* whole or windowed */
        t = fs->texts[id];
        atomic_fetch_add(&t->refs, 1);
        goto out;
    }
    if ((*err = text_size_locked(fs, i, &size)))
        goto out;
    if (size <= GFS_TEXT_WHOLE) {
        pthread_mutex_unlock(&fs->text_lock);
        return gfs_text_get(fs, i, err);
    }
    /* Windowed: the marks now, the bytes at each read.  It stays in
     * texts[id] while the value is unchanged, so that gfs_text_forget can
     * mark it stale; its cost is its marks. */
    if (!(t = calloc(1, sizeof *t)) ||
        grow_by_id((void **)&fs->texts, &fs->n_texts, id, sizeof *fs->texts)) {
        free(t);
        t = NULL;
        *err = ENOMEM;
        goto out;
    }
    atomic_init(&t->refs, 2); /* the opener's and texts[id]'s */
    atomic_init(&t->stale, 0);
    t->windowed = 1;
    t->id = id;
    size_t plen;
    const uint8_t *p = gguf_kv_payload(fs->ctx, i, &plen);
    if (gguf_render_map(gguf_kv_type(fs->ctx, i), p, plen, &t->map, &gerr) !=
        GGUF_OK) {
        free(t);
        t = NULL;
        *err = gfs_errno(&gerr);
        goto out;
    }
    t->len = t->map.size;
    t->cost = t->map.n * sizeof *t->map.marks;
    fs->texts[id] = t;
    fs->texts_bytes += t->cost;
out:
    pthread_mutex_unlock(&fs->text_lock);
    return t;
}

int gfs_text_read(struct gfs *fs, struct gfs_text *t, uint64_t off, size_t n,
                  struct gguf_buf *out) {
    if (!t->windowed) {
        size_t o = off < t->len ? (size_t)off : t->len;
        size_t k = t->len - o < n ? t->len - o : n;
        return gguf_buf_add(out, t->data + o, k) == GGUF_OK ? 0 : ENOMEM;
    }
    int err = 0;
    struct gguf_error gerr = {0};
    pthread_rwlock_rdlock(&fs->lock);
    int64_t i = gguf_find_id(fs->ctx, t->id);
    size_t plen = t->kept_len;
    const uint8_t *p = t->kept;
    enum gguf_type type = t->kept_type;
    if (!p && (atomic_load(&t->stale) || i < 0)) {
        err = ESTALE;
        goto out;
    }
    if (!p) {
        p = gguf_kv_payload(fs->ctx, i, &plen);
        type = gguf_kv_type(fs->ctx, i);
    }
    if (gguf_render_window(type, p, plen, &t->map, off, n, out, &gerr) !=
        GGUF_OK)
        err = gfs_errno(&gerr);
out:
    pthread_rwlock_unlock(&fs->lock);
    return err;
}

void gfs_text_keep(struct gfs *fs, int64_t i) {
    uint32_t id = gguf_kv_id(fs->ctx, i);
    pthread_mutex_lock(&fs->text_lock);
    struct gfs_text *t = id < fs->n_texts ? fs->texts[id] : NULL;
    /* Only a windowed text that an open file holds (the cache holds one
     * reference): whole texts are copies already.  No reader runs (lock is
     * held for writing) and no opener can take a new reference. */
    if (!t || !t->windowed || t->kept || atomic_load(&t->refs) < 2)
        goto out;
    size_t plen;
    const uint8_t *p = gguf_kv_payload(fs->ctx, i, &plen);
    size_t granted = 0;
    if (gfs_mem_grant(fs, &granted, plen ? plen : 1))
        goto out; /* past max_drafts: its readers get ESTALE */
    if (!(t->kept = malloc(plen ? plen : 1))) {
        (void)gfs_mem_grant(fs, &granted, 0);
        goto out;
    }
    memcpy(t->kept, p, plen);
    t->kept_len = plen;
    t->kept_granted = granted;
    t->kept_type = gguf_kv_type(fs->ctx, i);
    t->owner = fs;
out:
    pthread_mutex_unlock(&fs->text_lock);
}

void gfs_text_forget(struct gfs *fs, uint32_t id) {
    pthread_mutex_lock(&fs->text_lock);
    if (id < fs->n_texts && fs->texts[id]) {
        fs->texts_bytes -= fs->texts[id]->cost;
        atomic_store(&fs->texts[id]->stale, 1);
        gfs_text_put(fs->texts[id]);
        fs->texts[id] = NULL;
    }
    if (id < fs->n_sizes)
        fs->sizes[id] = 0;
    pthread_mutex_unlock(&fs->text_lock);
}

void gfs_texts_free(struct gfs *fs) {
    for (size_t i = 0; i < fs->n_texts; i++)
        gfs_text_put(fs->texts[i]);
    free(fs->texts);
    fs->texts = NULL;
    fs->n_texts = 0;
    fs->texts_bytes = 0;
    free(fs->sizes);
    fs->sizes = NULL;
    fs->n_sizes = 0;
}

/* meta/'s FILEs by name or inode (metaedit.c makes them; the rows and the
 * edit code look them up here, below both). */
struct gfs_scratch *gfs_meta_scratch_find(struct gfs *fs, const char *name) {
    for (struct gfs_scratch *s = fs->scratch; s; s = s->next)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

struct gfs_scratch *gfs_meta_scratch_by_ino(struct gfs *fs, fuse_ino_t ino) {
    for (struct gfs_scratch *s = fs->scratch; s; s = s->next)
        if (s->ino == ino)
            return s;
    return NULL;
}

/* Bytes of tensor i (ggufs.h): the library's size, or ggml's for a type
 * only ggml knows (fs->ggml: its library, loaded by views.c). */
uint64_t gfs_tensor_bytes(const struct gfs *fs, int64_t i) {
    int64_t j;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, NULL);
    uint64_t size = gguf_tensor_size(c, j), elems, bytes;
    uint32_t ty = gguf_tensor_type(c, j);
    if (!fs->ggml || gguf_ggml_type_known(ty) ||
        !gguf_dq_extent(fs->ggml, ty, GGUF_MAX_DIMS, gguf_tensor_ne(c, j),
                        &elems, &bytes) ||
        bytes > size)
        return size;
    return bytes;
}
