/*
 * metaedit.c - changes made through meta/: values, new keys, removals, renames,
 * type changes, editors' temporary files, and the commit that writes them
 * back into the GGUF.  Every change goes through the library, which
 * validates it; a refused change leaves the key as it was and records why
 * (log, and user.gguf.error on the file).
 */
#include "ggufs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

fuse_ino_t gfs_meta_resolve(const struct gfs *fs, fuse_ino_t ino) {
    for (int hops = 0; hops < 8; hops++) {
        size_t k = fs->n_aliases;
        while (k > 0 && fs->aliases[k - 1][0] != ino)
            k--;
        if (k == 0)
            break;
        ino = fs->aliases[k - 1][1];
    }
    return ino;
}

static void add_alias(struct gfs *fs, fuse_ino_t from, fuse_ino_t to) {
    if (from == to)
        return;
    fuse_ino_t(*na)[2] = realloc(fs->aliases, (fs->n_aliases + 1) * sizeof *na);
    if (!na)
        return;
    na[fs->n_aliases][0] = from;
    na[fs->n_aliases][1] = to;
    fs->aliases = na;
    fs->n_aliases++;
}

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

static void scratch_free(struct gfs_scratch *s) {
    if (!s)
        return;
    free(s->name);
    gguf_buf_free(&s->data);
    free(s);
}

static void scratch_remove(struct gfs *fs, struct gfs_scratch *s) {
    for (struct gfs_scratch **pp = &fs->scratch; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            scratch_free(s);
            return;
        }
}

static struct gfs_scratch *scratch_new(struct gfs *fs, const char *name) {
    struct gfs_scratch *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(name))) {
        free(s);
        return NULL;
    }
    s->ino = GFS_INO_SCRATCH + ++fs->next_scratch;
    clock_gettime(CLOCK_REALTIME, &s->mtime);
    s->next = fs->scratch;
    fs->scratch = s;
    return s;
}

void gfs_meta_set_error(struct gfs *fs, uint32_t id, const char *msg) {
    if (id >= fs->n_errors) {
        if (!msg)
            return;
        size_t n = fs->n_errors ? fs->n_errors : 64;
        while (n <= id)
            n *= 2;
        char **ne = realloc(fs->errors, n * sizeof *ne);
        if (!ne)
            return;
        memset(ne + fs->n_errors, 0, (n - fs->n_errors) * sizeof *ne);
        fs->errors = ne;
        fs->n_errors = n;
    }
    free(fs->errors[id]);
    fs->errors[id] = msg ? strdup(msg) : NULL;
}

const char *gfs_meta_get_error(struct gfs *fs, uint32_t id) {
    return id < fs->n_errors ? fs->errors[id] : NULL;
}

static int refuse(struct gfs *fs, int64_t i, const struct gguf_error *err) {
    size_t klen;
    const char *key = i >= 0 ? gguf_kv_key(fs->ctx, i, &klen) : "?";
    gfs_log(fs, "%s: refused edit of '%s': %s", fs->path, key, err->msg);
    if (i >= 0)
        gfs_meta_set_error(fs, gguf_kv_id(fs->ctx, i), err->msg);
    return gfs_errno(err);
}

/* True, with the key in *key, if a file name in meta/ is the canonical
 * escape of a valid key. */
static int name_to_key(const char *name, struct gguf_buf *key) {
    struct gguf_buf canon = {0};
    int ok = gguf_name_unescape(name, strlen(name), key, NULL) == GGUF_OK &&
             gguf_key_valid((char *)key->p, key->len) &&
             gguf_name_escape((char *)key->p, key->len, &canon) == GGUF_OK &&
             canon.len == strlen(name) && memcmp(canon.p, name, canon.len) == 0;
    gguf_buf_free(&canon);
    return ok;
}

static void edited(struct gfs *fs, int64_t i) {
    fs->generation++;
    if (i >= 0) {
        gfs_text_forget(fs, gguf_kv_id(fs->ctx, i));
        gfs_meta_set_error(fs, gguf_kv_id(fs->ctx, i), NULL);
    }
}

int gfs_meta_apply_text(struct gfs *fs, int64_t i, const char *text, size_t len,
                        int quiet) {
    struct gguf_buf payload = {0};
    struct gguf_error err = {0};
    size_t klen;
    const char *key = gguf_kv_key(fs->ctx, i, &klen);
    enum gguf_type type = gguf_kv_type(fs->ctx, i);
    int rc = 0;

    if (gguf_parse_text(type, gguf_kv_arr_type(fs->ctx, i), text, len, &payload,
                        &err) != GGUF_OK) {
        rc = quiet ? gfs_errno(&err) : refuse(fs, i, &err);
        goto out;
    }
    size_t plen;
    const uint8_t *cur = gguf_kv_payload(fs->ctx, i, &plen);
    if (plen == payload.len && memcmp(cur, payload.p, plen) == 0)
        goto out; /* writing back what was read changes nothing */
    if (gguf_set_payload(fs->ctx, key, klen, type, payload.p, payload.len,
                         &err) != GGUF_OK) {
        rc = refuse(fs, i, &err);
        goto out;
    }
    edited(fs, gguf_find_key(fs->ctx, key, klen));
out:
    gguf_buf_free(&payload);
    return rc;
}

static struct gfs_ghost *ghost_find(struct gfs *fs, const char *k, size_t n) {
    for (struct gfs_ghost *g = fs->ghosts; g; g = g->next)
        if (g->klen == n && memcmp(g->key, k, n) == 0)
            return g;
    return NULL;
}

/* Removes kv i, remembering its type and place under its name. */
static int remove_key(struct gfs *fs, int64_t i) {
    struct gguf_error err = {0};
    size_t klen;
    const char *key = gguf_kv_key(fs->ctx, i, &klen);
    if (gguf_key_is_alignment(key, klen)) {
        gfs_log(fs,
                "%s: general.alignment cannot be removed: the tensor "
                "data layout depends on it",
                fs->path);
        return EPERM;
    }
    struct gfs_ghost *g = ghost_find(fs, key, klen);
    if (!g) {
        g = calloc(1, sizeof *g);
        if (!g || !(g->key = malloc(klen + 1))) {
            free(g);
            return ENOMEM;
        }
        memcpy(g->key, key, klen + 1);
        g->klen = klen;
        g->next = fs->ghosts;
        fs->ghosts = g;
    }
    g->type = gguf_kv_type(fs->ctx, i);
    g->arr_type = gguf_kv_arr_type(fs->ctx, i);
    g->pos = i;
    uint32_t id = gguf_kv_id(fs->ctx, i);
    if (gguf_remove_key(fs->ctx, i, &err) != GGUF_OK)
        return refuse(fs, i, &err);
    gfs_text_forget(fs, id);
    gfs_meta_set_error(fs, id, NULL);
    fs->generation++;
    return 0;
}

/* Adds key with the zero value of its type: a ghost's type and place if
 * the key existed before, else an empty string at the end. */
static int add_key(struct gfs *fs, const char *key, size_t klen, int64_t *out) {
    struct gguf_buf payload = {0};
    struct gguf_error err = {0};
    struct gfs_ghost *g = ghost_find(fs, key, klen);
    enum gguf_type type = g ? g->type : GGUF_TYPE_STRING;
    enum gguf_type at = g ? g->arr_type : GGUF_TYPE_COUNT;
    int rc = 0;

    if (gguf_zero_payload(type, at, &payload) != GGUF_OK) {
        rc = ENOMEM;
        goto out;
    }
    if (gguf_set_payload(fs->ctx, key, klen, type, payload.p, payload.len,
                         &err) != GGUF_OK) {
        gfs_log(fs, "%s: cannot create key '%.*s': %s", fs->path, (int)klen,
                key, err.msg);
        rc = gfs_errno(&err);
        goto out;
    }
    int64_t i = gguf_find_key(fs->ctx, key, klen);
    if (g && gguf_move_key(fs->ctx, i, g->pos, &err) == GGUF_OK)
        i = gguf_find_key(fs->ctx, key, klen);
    edited(fs, i);
    *out = i;
out:
    gguf_buf_free(&payload);
    return rc;
}

/* Names editors and tools give their temporary files: hidden (.x.swp,
 * .#x), #x#, x~, all digits (vim's 4913), sedXXXXXX, and x.tmp/.bak/.new/
 * .orig/.swp/.swx/.save.  Only these may exist in meta/ without being
 * keys. */
static int temp_like(const char *name) {
    size_t n = strlen(name);
    static const char *const suffixes[] = {".tmp", ".bak", ".new", ".orig",
                                           ".swp", ".swx", ".save"};
    if (n == 0)
        return 0;
    if (name[0] == '.' || name[0] == '#' || name[n - 1] == '~')
        return 1;
    if (strspn(name, "0123456789") == n)
        return 1;
    if (n == 9 && strncmp(name, "sed", 3) == 0)
        return 1;
    for (size_t k = 0; k < sizeof suffixes / sizeof *suffixes; k++) {
        size_t l = strlen(suffixes[k]);
        if (n > l && strcmp(name + n - l, suffixes[k]) == 0)
            return 1;
    }
    return 0;
}

int gfs_meta_create(struct gfs *fs, const char *name, fuse_ino_t *ino) {
    struct gguf_buf key = {0};
    int rc = 0;
    if (name_to_key(name, &key)) {
        int64_t i = gguf_find_key(fs->ctx, (char *)key.p, key.len);
        if (i >= 0) {
            rc = EEXIST;
            goto out;
        }
        if (gguf_key_is_filler((const char *)key.p, key.len)) {
            gfs_log(fs, "%s: the key %s is reserved for ggufs", fs->path,
                    GGUF_FILLER_KEY);
            rc = EPERM;
            goto out;
        }
        rc = add_key(fs, (char *)key.p, key.len, &i);
        if (!rc)
            *ino = GFS_INO_KV + gguf_kv_id(fs->ctx, i);
        goto out;
    }
    /* Not a key: an editor's temporary file, or a mistake.  A mistake is
     * refused, so no edit is silently dropped; editors' names are kept in
     * memory. */
    if (!temp_like(name)) {
        gfs_log(fs,
                "%s: '%s' is not a valid key name (ASCII lower_snake_case "
                "segments joined by '.')",
                fs->path, name);
        rc = EINVAL;
        goto out;
    }
    if (gfs_meta_scratch_find(fs, name)) {
        rc = EEXIST;
        goto out;
    }
    struct gfs_scratch *s = scratch_new(fs, name);
    if (!s) {
        rc = ENOMEM;
        goto out;
    }
    *ino = s->ino;
out:
    gguf_buf_free(&key);
    return rc;
}

int gfs_meta_unlink(struct gfs *fs, const char *name) {
    struct gfs_scratch *s = gfs_meta_scratch_find(fs, name);
    if (s) {
        scratch_remove(fs, s);
        return 0;
    }
    fuse_ino_t ino;
    int rc = gfs_lookup_name(fs, GFS_INO_META, name, &ino);
    if (rc)
        return rc;
    int64_t i = gfs_kv_index(fs, ino);
    return i < 0 ? ENOENT : remove_key(fs, i);
}

/* The text of a scratch file becomes the value of key (existing: its type
 * and place; ghost: likewise; new: a string at the end). */
static int scratch_to_key(struct gfs *fs, struct gfs_scratch *s,
                          const char *key, size_t klen) {
    int64_t i = gguf_find_key(fs->ctx, key, klen);
    int created = 0, rc;
    if (i < 0) {
        if ((rc = add_key(fs, key, klen, &i)))
            return rc;
        created = 1;
    }
    rc = gfs_meta_apply_text(fs, i, (char *)s->data.p, s->data.len, 0);
    if (rc && created)
        remove_key(fs, i);
    if (!rc) {
        i = gguf_find_key(fs->ctx, key, klen);
        add_alias(fs, s->ino, GFS_INO_KV + gguf_kv_id(fs->ctx, i));
        scratch_remove(fs, s);
    }
    return rc;
}

/* rename(2) in meta/, one helper per case.  s: the source scratch file;
 * ts: a scratch file already named `to` (replaced), or NULL. */

/* scratch -> scratch: an editor renames its own files. */
static int scratch_rename(struct gfs *fs, struct gfs_scratch *s,
                          struct gfs_scratch *ts, const char *to) {
    if (ts)
        scratch_remove(fs, ts);
    char *nn = strdup(to);
    if (!nn)
        return ENOMEM;
    free(s->name);
    s->name = nn;
    return 0;
}

/* key -> scratch: vim's backup; the key leaves meta/, its text goes with
 * the name. */
static int key_to_scratch(struct gfs *fs, int64_t i, fuse_ino_t ino,
                          struct gfs_scratch *ts, const char *to) {
    int e = 0, rc;
    struct gfs_text *t = gfs_text_get(fs, i, &e);
    if (!t)
        return e;
    if (ts)
        scratch_remove(fs, ts);
    struct gfs_scratch *s = scratch_new(fs, to);
    if (!s || gguf_buf_add(&s->data, t->data, t->len) != GGUF_OK) {
        if (s)
            scratch_remove(fs, s);
        gfs_text_put(t);
        return ENOMEM;
    }
    gfs_text_put(t);
    rc = remove_key(fs, i);
    if (rc)
        scratch_remove(fs, s);
    else
        add_alias(fs, ino, s->ino);
    return rc;
}

/* key -> existing key: as with a temporary file, the target keeps its
 * type and place and takes the source's text (sed -i's temporary name may
 * itself be a valid key); the source goes. */
static int key_onto_key(struct gfs *fs, int64_t fi, int64_t ti,
                        const struct gguf_buf *tkey) {
    int e = 0, rc;
    size_t klen;
    const char *fkey = gguf_kv_key(fs->ctx, fi, &klen);
    struct gfs_text *t = gfs_text_get(fs, fi, &e);
    if (!t)
        return e;
    rc = gfs_meta_apply_text(fs, ti, t->data, t->len, 0);
    gfs_text_put(t);
    if (rc)
        return rc;
    fi = gguf_find_key(fs->ctx, fkey, klen);
    fuse_ino_t src_ino = GFS_INO_KV + gguf_kv_id(fs->ctx, fi);
    if ((rc = remove_key(fs, fi)))
        return rc;
    ti = gguf_find_key(fs->ctx, (char *)tkey->p, tkey->len);
    add_alias(fs, src_ino, GFS_INO_KV + gguf_kv_id(fs->ctx, ti));
    return 0;
}

/* key -> new key name: the key is renamed in place (same id, same inode). */
static int key_rename(struct gfs *fs, int64_t i, const struct gguf_buf *tkey) {
    struct gguf_error err = {0};
    uint32_t id = gguf_kv_id(fs->ctx, i);
    if (gguf_rename_key(fs->ctx, i, (char *)tkey->p, tkey->len, &err) !=
        GGUF_OK)
        return refuse(fs, i, &err);
    gfs_text_forget(fs, id);
    fs->generation++;
    return 0;
}

/* The layout of tensor data depends on general.alignment: it may not be
 * renamed, nor replaced by a rename onto it. */
static int alignment_renamed(struct gfs *fs, int64_t fi, int to_is_key,
                             const struct gguf_buf *tkey) {
    size_t klen;
    const char *fkey = gguf_kv_key(fs->ctx, fi, &klen);
    if (!gguf_key_is_alignment(fkey, klen) &&
        !(to_is_key && gguf_key_is_alignment((char *)tkey->p, tkey->len)))
        return 0;
    gfs_log(fs,
            "%s: general.alignment cannot be renamed or replaced: "
            "the tensor data layout depends on it",
            fs->path);
    return 1;
}

int gfs_meta_rename(struct gfs *fs, const char *from, const char *to,
                    unsigned flags) {
    struct gguf_buf tkey = {0};
    int rc = 0;
    fuse_ino_t fino = 0, tino = 0;
    int to_is_key = name_to_key(to, &tkey);
    struct gfs_scratch *fs_s = gfs_meta_scratch_find(fs, from);
    struct gfs_scratch *ts_s = gfs_meta_scratch_find(fs, to);
    int64_t fi = -1, ti = -1;

    if (flags & ~(unsigned)RENAME_NOREPLACE) {
        rc = EINVAL;
        goto out;
    }
    if (!fs_s) {
        if ((rc = gfs_lookup_name(fs, GFS_INO_META, from, &fino)))
            goto out;
        fi = gfs_kv_index(fs, fino);
    }
    if (!gfs_lookup_name(fs, GFS_INO_META, to, &tino))
        ti = gfs_kv_index(fs, tino);
    if ((flags & RENAME_NOREPLACE) && (ti >= 0 || ts_s)) {
        rc = EEXIST;
        goto out;
    }
    if (strcmp(from, to) == 0)
        goto out;

    if (fs_s && !to_is_key) {
        rc = scratch_rename(fs, fs_s, ts_s, to);
    } else if (fs_s) { /* scratch -> key: the editor's save lands */
        rc = scratch_to_key(fs, fs_s, (char *)tkey.p, tkey.len);
    } else if (alignment_renamed(fs, fi, to_is_key, &tkey)) {
        rc = EPERM;
    } else if (!to_is_key) {
        rc = key_to_scratch(fs, fi, fino, ts_s, to);
    } else {
        if (ts_s)
            scratch_remove(fs, ts_s);
        rc = ti >= 0 ? key_onto_key(fs, fi, ti, &tkey)
                     : key_rename(fs, fi, &tkey);
    }
out:
    gguf_buf_free(&tkey);
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
        return refuse(fs, i, &err);
    }
    if (t == gguf_kv_type(fs->ctx, i) &&
        (t != GGUF_TYPE_ARRAY || at == gguf_kv_arr_type(fs->ctx, i)))
        return 0;
    if (gguf_key_is_alignment(key, klen)) {
        gfs_log(fs, "%s: general.alignment must stay a uint32", fs->path);
        return EPERM;
    }
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
        rc = refuse(fs, i, &err);
        goto out;
    }
    if (back.len != cur->len || memcmp(back.p, cur->data, back.len) != 0) {
        gguf_fail(&err, GGUF_E_RANGE,
                  "value is not representable exactly "
                  "as %.*s",
                  (int)len, type);
        rc = refuse(fs, i, &err);
        goto out;
    }
set:
    if (gguf_set_payload(fs->ctx, key, klen, t, payload.p, payload.len, &err) !=
        GGUF_OK) {
        rc = refuse(fs, i, &err);
        goto out;
    }
    edited(fs, gguf_find_key(fs->ctx, key, klen));
out:
    gfs_text_put(cur);
    gguf_buf_free(&payload);
    gguf_buf_free(&back);
    return rc;
}

int gfs_meta_truncate(struct gfs *fs, fuse_ino_t ino, off_t size) {
    struct gfs_scratch *s = gfs_meta_scratch_by_ino(fs, ino);
    if (s) {
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

int gfs_meta_commit(struct gfs *fs) {
    struct gguf_commit_info info = {0};
    struct gguf_error err = {0};
    struct timespec t0, t1;

    if (!gguf_dirty(fs->ctx))
        return 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (gguf_commit(fs->ctx, fs->commit_flags, &info, &err) != GGUF_OK) {
        char saved[4096] = "";
        struct gguf_error serr = {0};
        fs->commit_failed = 1;
        if (fs->saved_generation != fs->generation &&
            gguf_save_edits(fs->ctx, saved, sizeof saved, &serr) == GGUF_OK)
            fs->saved_generation = fs->generation;
        snprintf(fs->commit_msg, sizeof fs->commit_msg,
                 "%s: commit failed: %s%s%s", fs->path, err.msg,
                 saved[0] ? "; edits saved in " : "", saved);
        gfs_log(fs, "%s", fs->commit_msg);
        return gfs_errno(&err);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fstat(gguf_fd(fs->ctx), &fs->st);
    fs->commit_failed = 0;
    static const char *const how[] = {"nothing to do", "in place",
                                      "grown by inserting blocks",
                                      "grown by rewriting the file"};
    snprintf(fs->commit_msg, sizeof fs->commit_msg,
             "%s: committed (%s), data at %llu, %.1f ms", fs->path,
             how[info.how <= GGUF_COMMIT_REWRITE ? info.how : 0],
             (unsigned long long)info.new_data_offset,
             (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                 (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    gfs_log(fs, "%s", fs->commit_msg);
    return 0;
}

void gfs_meta_free(struct gfs *fs) {
    while (fs->scratch) {
        struct gfs_scratch *s = fs->scratch;
        fs->scratch = s->next;
        scratch_free(s);
    }
    while (fs->ghosts) {
        struct gfs_ghost *g = fs->ghosts;
        fs->ghosts = g->next;
        free(g->key);
        free(g);
    }
    free(fs->aliases);
    fs->aliases = NULL;
    fs->n_aliases = 0;
    for (size_t i = 0; i < fs->n_errors; i++)
        free(fs->errors[i]);
    free(fs->errors);
    fs->errors = NULL;
    fs->n_errors = 0;
}
