/*
 * metaedit.c - the names of meta/: new keys, removals, renames, editors'
 * temporary files (FILEs, and the note that names them in a commit's
 * report: gfs_meta_files_note, which the commit's callers hand to
 * gfs_edits_commit).  The values (texts, types, refusals) are
 * metavalues.c's; where the edits go and when they become durable is the
 * edit store's (edits/edits.h), which the handlers call and which never
 * calls back.  Every change goes through the
 * library, which validates it; a refused change leaves the key as it was
 * and records why (log, and user.gguf.error on the file).
 *
 * Names in meta/.  Tools save a file in many ways (write in place, truncate
 * and write, write a temporary file and rename it onto the name, rename
 * the file away as a backup and create it again); each must land on the
 * key it targets, keeping the key's type and position, and no backup or
 * temporary file may become a key.  So a name is in one of three states:
 *
 *   KEY    an existing key, under its file name exactly as listed (odd
 *          and hashed names included: resolved by gfs_lookup_name, never
 *          by gguf_key_valid).
 *   GHOST  a key that was unlinked or renamed away: not listed; remembers
 *          its key, file name, type and position (struct gfs_ghost).
 *   FILE   any other file (struct gfs_scratch): in memory, listed, never
 *          committed (the commit names it); one made by renaming a key
 *          away remembers that key's type.
 *
 * A name is looked up as FILE, then KEY, then GHOST; a FILE and a KEY never
 * share a name (a FILE may hide a GHOST).  The transitions:
 *
 *   create N          KEY or FILE: EEXIST.  GHOST: the key comes back with
 *                     its type and position (zero value until written).
 *                     Free and a valid new key name: a new string key,
 *                     last.  An editor's scratch name (metanames.c): a
 *                     FILE.  Any other name: EINVAL (it can be neither).
 *   unlink N          KEY: GHOST.  FILE: gone.
 *   rename S -> D     S KEY, D KEY or GHOST: D's key (a GHOST comes back)
 *                     takes S's value in its position: a string S's text
 *                     parsed as D's type (an editor's temporary file),
 *                     else S's value and type; S becomes a GHOST.
 *                     S KEY, D free and a valid new key name that is no
 *                     backup name (metanames.c): the key is renamed, its
 *                     value, type and position kept; S becomes a GHOST.
 *                     S KEY, D a FILE or a free scratch name: S becomes a
 *                     GHOST, D a FILE holding S's text (a backup; never a
 *                     key; the commit reports S removed unless it came
 *                     back).
 *                     S FILE, D KEY or GHOST: D's key takes the text, with
 *                     its own type and position (a GHOST comes back).
 *                     S FILE, D free and a valid new key name: a new key,
 *                     last: of the type of the key S is a backup of, else
 *                     a string.
 *                     S FILE, D a FILE or a free scratch name: the FILE
 *                     is renamed.
 *                     D free and neither: EINVAL.
 *                     RENAME_NOREPLACE: EEXIST if D is a KEY or a FILE;
 *                     RENAME_EXCHANGE: EINVAL.
 *
 * A refused name is logged and kept as user.gguf.error of meta/ (struct
 * gfs, name_error).  Protected keys (gfs_meta_protected) refuse every
 * change with EPERM where the caller sees it: open for writing, truncate,
 * unlink, rename from or onto, setxattr.
 */
#include "../base/base.h"
#include "../ggufs.h"
#include "meta.h"
#include "metaedit.h"
#include "../edits/edits.h"
#include "../node/node.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

fuse_ino_t gfs_meta_resolve(const struct gfs *fs, fuse_ino_t ino) {
    for (int hops = 0; hops < 8; hops++) {
        size_t k = fs->meta->n_aliases;
        while (k > 0 && fs->meta->aliases[k - 1][0] != ino)
            k--;
        if (k == 0)
            break;
        ino = fs->meta->aliases[k - 1][1];
    }
    return ino;
}

/* Records that the kernel's inode number `from` now names `to`.  A number
 * aliased again is updated in place; past GFS_MAX_ALIASES the oldest alias
 * is forgotten (its name has long been looked up anew). */
static void add_alias(struct gfs *fs, fuse_ino_t from, fuse_ino_t to) {
    if (from == to)
        return;
    for (size_t k = 0; k < fs->meta->n_aliases; k++)
        if (fs->meta->aliases[k][0] == from) {
            fs->meta->aliases[k][1] = to;
            return;
        }
    if (fs->meta->n_aliases >= GFS_MAX_ALIASES) {
        memmove(fs->meta->aliases, fs->meta->aliases + 1,
                (fs->meta->n_aliases - 1) * sizeof *fs->meta->aliases);
        fs->meta->n_aliases--;
    }
    fuse_ino_t(*na)[2] =
        realloc(fs->meta->aliases, (fs->meta->n_aliases + 1) * sizeof *na);
    if (!na)
        return;
    na[fs->meta->n_aliases][0] = from;
    na[fs->meta->n_aliases][1] = to;
    fs->meta->aliases = na;
    fs->meta->n_aliases++;
}

static void scratch_free(struct gfs *fs, struct gfs_scratch *s) {
    if (!s)
        return;
    (void)gfs_mem_grant(fs, &s->granted, 0);
    free(s->name);
    free(s->from);
    gguf_buf_free(&s->data);
    free(s);
}

static void scratch_remove(struct gfs *fs, struct gfs_scratch *s) {
    for (struct gfs_scratch **pp = &fs->scratch; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            scratch_free(fs, s);
            fs->n_scratch--;
            return;
        }
}

/* A new, empty FILE; NULL and *rc on failure (ENOSPC past GFS_MAX_FILES). */
static struct gfs_scratch *scratch_new(struct gfs *fs, const char *name,
                                       int *rc) {
    if (fs->n_scratch >= GFS_MAX_FILES) {
        gfs_log(fs, "%s: too many files in meta/ that are not keys (%d)",
                fs->path, GFS_MAX_FILES);
        *rc = ENOSPC;
        return NULL;
    }
    struct gfs_scratch *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(name))) {
        free(s);
        *rc = ENOMEM;
        return NULL;
    }
    s->ino = GFS_INO_SCRATCH + ++fs->next_scratch;
    clock_gettime(CLOCK_REALTIME, &s->mtime);
    s->next = fs->scratch;
    fs->scratch = s;
    fs->n_scratch++;
    return s;
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

/* Refuses a name in meta/ that can be neither a key nor a FILE: logs why
 * and keeps it as user.gguf.error of meta/; EINVAL. */
static int refuse_name(struct gfs *fs, const char *what, const char *name) {
    char q[GGUF_QUOTE_MAX];
    snprintf(fs->meta->name_error, sizeof fs->meta->name_error,
             "%s meta/%s: not a key name (lower-case a-z, 0-9, _ in "
             "segments joined by '.') nor an editor's scratch name (see "
             "ggufs(1), NAMES IN META/)",
             what, gguf_quote(q, sizeof q, name, strlen(name)));
    gfs_log(fs, "%s: refused %s", fs->path, fs->meta->name_error);
    return EINVAL;
}

static void ghost_free(struct gfs_ghost *g) {
    if (g) {
        free(g->key);
        free(g->fname);
        free(g);
    }
}

static void ghost_remove(struct gfs *fs, struct gfs_ghost *g) {
    for (struct gfs_ghost **pp = &fs->meta->ghosts; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            ghost_free(g);
            fs->meta->n_ghosts--;
            return;
        }
}

static struct gfs_ghost *ghost_find(struct gfs *fs, const char *k, size_t n) {
    for (struct gfs_ghost *g = fs->meta->ghosts; g; g = g->next)
        if (g->klen == n && memcmp(g->key, k, n) == 0)
            return g;
    return NULL;
}

static struct gfs_ghost *ghost_by_fname(struct gfs *fs, const char *name) {
    for (struct gfs_ghost *g = fs->meta->ghosts; g; g = g->next)
        if (strcmp(g->fname, name) == 0)
            return g;
    return NULL;
}

/* Key order.  A key's place in the KV order is its ordinal: its id (ids
 * grow in file order at open, and each new key, which goes last, gets the
 * next one), or, for a GHOST brought back, the ordinal the key had
 * (fs->meta->ords).  The KV list stays sorted by ordinal, so a GHOST goes back
 * before the first key with a greater ordinal, in whatever order GHOSTs
 * come back (a position alone would shift as other keys leave and
 * return). */
static uint64_t key_ord(const struct gfs *fs, uint32_t id) {
    for (size_t k = 0; k < fs->meta->n_ords; k++)
        if (fs->meta->ords[k].id == id)
            return fs->meta->ords[k].ord;
    return id;
}

/* Puts key i, a GHOST's key back, at the place its ordinal gives. */
static void restore_place(struct gfs *fs, int64_t i, uint64_t ord) {
    struct gguf_error err = {0};
    if (fs->meta->n_ords < GFS_MAX_GHOSTS) {
        struct gfs_ord *o = realloc(fs->meta->ords, (fs->meta->n_ords + 1) *
                                                        sizeof *fs->meta->ords);
        if (o) {
            fs->meta->ords = o;
            fs->meta->ords[fs->meta->n_ords++] =
                (struct gfs_ord){gguf_kv_id(fs->ctx, i), ord};
        }
    }
    int64_t pos = 0;
    for (int64_t j = 0; j < gguf_n_kv(fs->ctx); j++)
        if (j != i && key_ord(fs, gguf_kv_id(fs->ctx, j)) < ord)
            pos++;
    (void)gguf_move_key(fs->ctx, i, pos, &err); /* order only: best effort */
}

/* Removes kv i, leaving a GHOST that remembers its name, type and place.
 * Past GFS_MAX_GHOSTS the oldest ghost is forgotten (the list is newest
 * first). */
static int remove_key(struct gfs *fs, int64_t i) {
    struct gguf_error err = {0};
    struct gguf_buf fname = {0};
    size_t klen;
    const char *key = gguf_kv_key(fs->ctx, i, &klen);
    if (gfs_meta_protected(fs, i))
        return gfs_meta_refuse_protected(fs, i, "removal");
    if (gfs_kv_fname(fs, i, &fname))
        return ENOMEM;
    struct gfs_ghost *g = ghost_find(fs, key, klen);
    if (g) {
        free(g->fname);
        g->fname = (char *)fname.p;
    } else {
        g = calloc(1, sizeof *g);
        if (!g || !(g->key = malloc(klen + 1))) {
            free(g);
            gguf_buf_free(&fname);
            return ENOMEM;
        }
        memcpy(g->key, key, klen);
        g->key[klen] = '\0';
        g->klen = klen;
        g->fname = (char *)fname.p;
        g->next = fs->meta->ghosts;
        fs->meta->ghosts = g;
        if (++fs->meta->n_ghosts > GFS_MAX_GHOSTS) {
            struct gfs_ghost *last = fs->meta->ghosts;
            while (last->next)
                last = last->next;
            ghost_remove(fs, last);
        }
    }
    g->type = gguf_kv_type(fs->ctx, i);
    g->arr_type = gguf_kv_arr_type(fs->ctx, i);
    uint32_t id = gguf_kv_id(fs->ctx, i);
    g->ord = key_ord(fs, id);
    gfs_text_keep(fs, i);
    if (gguf_remove_key(fs->ctx, i, &err) != GGUF_OK)
        return gfs_meta_refuse(fs, i, &err);
    gfs_text_forget(fs, id);
    gfs_meta_set_error(fs, id, NULL);
    gfs_edit_changed(fs);
    return 0;
}

/* Adds key with the zero value of its type.  A GHOST of the key comes back
 * with its type and place (and is forgotten); otherwise the key is new, of
 * type/at, last. */
static int add_key(struct gfs *fs, const char *key, size_t klen,
                   enum gguf_type type, enum gguf_type at, int64_t *out) {
    struct gguf_buf payload = {0};
    struct gguf_error err = {0};
    struct gfs_ghost *g = ghost_find(fs, key, klen);
    int rc = 0;

    if (g) {
        type = g->type;
        at = g->arr_type;
    }
    if (gguf_key_is_filler(key, klen)) {
        gfs_log(fs, "%s: the key %s is reserved for ggufs", fs->path,
                GGUF_FILLER_KEY);
        return EPERM;
    }
    if (gguf_zero_payload(type, at, &payload) != GGUF_OK) {
        rc = ENOMEM;
        goto out;
    }
    if (gguf_set_payload(fs->ctx, key, klen, type, payload.p, payload.len,
                         &err) != GGUF_OK) {
        char q[GGUF_QUOTE_MAX];
        gfs_log(fs, "%s: cannot create key '%s': %s", fs->path,
                gguf_quote(q, sizeof q, key, klen), err.msg);
        rc = gfs_errno(&err);
        goto out;
    }
    int64_t i = gguf_find_key(fs->ctx, key, klen);
    if (g) {
        restore_place(fs, i, g->ord);
        i = gguf_find_key(fs->ctx, key, klen);
        ghost_remove(fs, g);
    }
    gfs_meta_edited(fs, i);
    *out = i;
out:
    gguf_buf_free(&payload);
    return rc;
}

/* What a name in meta/ is now (see the rule at the top). */
enum name_state { NAME_FREE, NAME_FILE, NAME_KEY, NAME_GHOST };

struct name_info {
    enum name_state state;
    struct gfs_scratch *file; /* NAME_FILE */
    int64_t i;                /* NAME_KEY: kv index */
    fuse_ino_t ino;           /* NAME_KEY, NAME_FILE */
    struct gfs_ghost *ghost;  /* NAME_GHOST */
};

static void name_state(struct gfs *fs, const char *name, struct name_info *ni) {
    fuse_ino_t ino;
    memset(ni, 0, sizeof *ni);
    ni->i = -1;
    if ((ni->file = gfs_meta_scratch_find(fs, name))) {
        ni->state = NAME_FILE;
        ni->ino = ni->file->ino;
    } else if (gfs_lookup_name(fs, GFS_INO_META, name, &ino) == 0 &&
               (ni->i = gfs_kv_index(fs, ino)) >= 0) {
        ni->state = NAME_KEY;
        ni->ino = ino;
    } else if ((ni->ghost = ghost_by_fname(fs, name))) {
        ni->state = NAME_GHOST;
    }
}

/* A GHOST comes back: its key, with its type and place. */
static int ghost_restore(struct gfs *fs, struct gfs_ghost *g, int64_t *i) {
    return add_key(fs, g->key, g->klen, g->type, g->arr_type, i);
}

int gfs_meta_create(struct gfs *fs, const char *name, fuse_ino_t *ino) {
    assert(gfs_edit_held(fs)); /* edits.h, invariant 1 */
    struct gguf_buf key = {0};
    struct name_info ni;
    int64_t i = -1;
    int rc = 0;

    name_state(fs, name, &ni);
    switch (ni.state) {
    case NAME_KEY:
    case NAME_FILE:
        rc = EEXIST;
        goto out;
    case NAME_GHOST:
        if (!(rc = ghost_restore(fs, ni.ghost, &i)))
            *ino = GFS_INO_KV + gguf_kv_id(fs->ctx, i);
        goto out;
    case NAME_FREE:
        break;
    }
    if (name_to_key(name, &key)) {
        rc = add_key(fs, (char *)key.p, key.len, GGUF_TYPE_STRING,
                     GGUF_TYPE_COUNT, &i);
        if (!rc)
            *ino = GFS_INO_KV + gguf_kv_id(fs->ctx, i);
        goto out;
    }
    if (!gfs_meta_scratch_name(name)) {
        rc = refuse_name(fs, "creating", name);
        goto out;
    }
    struct gfs_scratch *s = scratch_new(fs, name, &rc);
    if (s)
        *ino = s->ino;
out:
    gguf_buf_free(&key);
    return rc;
}

int gfs_meta_unlink(struct gfs *fs, const char *name) {
    assert(gfs_edit_held(fs)); /* edits.h, invariant 1 */
    struct name_info ni;
    name_state(fs, name, &ni);
    switch (ni.state) {
    case NAME_FILE:
        scratch_remove(fs, ni.file);
        return 0;
    case NAME_KEY:
        return remove_key(fs, ni.i);
    default:
        return ENOENT;
    }
}

void gfs_meta_drop_new(struct gfs *fs, fuse_ino_t ino) {
    assert(gfs_edit_held(fs)); /* edits.h, invariant 1 */
    struct gguf_buf zero = {0};
    int64_t i = gfs_kv_index(fs, ino);
    if (i < 0 ||
        gguf_zero_payload(gguf_kv_type(fs->ctx, i),
                          gguf_kv_arr_type(fs->ctx, i), &zero) != GGUF_OK)
        goto out;
    size_t plen, klen;
    const uint8_t *p = gguf_kv_payload(fs->ctx, i, &plen);
    const char *key = gguf_kv_key(fs->ctx, i, &klen);
    char q[GGUF_QUOTE_MAX];
    if (plen != zero.len || memcmp(p, zero.p, plen) != 0)
        goto out; /* another writer gave it a value since */
    gfs_log(fs, "%s: meta/%s: its first write failed: the key is not made",
            fs->path, gguf_quote(q, sizeof q, key, klen));
    (void)remove_key(fs, i);
out:
    gguf_buf_free(&zero);
}

/* rename(2) in meta/, one helper per transition (see the rule at the top).
 * They leave an alias from the source's inode number to the object that
 * now holds the target name: the kernel keeps the number. */

/* S FILE, D KEY or GHOST (g) or a free new key name (key): the FILE's text
 * becomes the key's value; the FILE goes.  A key made or brought back here
 * goes again if the text does not parse. */
static int file_to_key(struct gfs *fs, struct gfs_scratch *s, int64_t i,
                       struct gfs_ghost *g, const struct gguf_buf *key) {
    int created = 0, rc;
    if (i < 0) {
        rc = g ? ghost_restore(fs, g, &i)
               : add_key(fs, (char *)key->p, key->len,
                         s->backup ? s->type : GGUF_TYPE_STRING,
                         s->backup ? s->arr_type : GGUF_TYPE_COUNT, &i);
        if (rc)
            return rc;
        created = 1;
    }
    uint32_t id = gguf_kv_id(fs->ctx, i);
    rc = gfs_meta_apply_text(fs, i, (char *)s->data.p, s->data.len, 0);
    i = gguf_find_id(fs->ctx, id);
    if (rc) {
        if (created && i >= 0)
            remove_key(fs, i);
        return rc;
    }
    add_alias(fs, s->ino, GFS_INO_KV + id);
    scratch_remove(fs, s);
    return 0;
}

/* S FILE, D a FILE (ts, replaced) or a free name that is no key. */
static int file_rename(struct gfs *fs, struct gfs_scratch *s,
                       struct gfs_scratch *ts, const char *to) {
    char *nn = strdup(to);
    if (!nn)
        return ENOMEM;
    if (ts)
        scratch_remove(fs, ts);
    free(s->name);
    s->name = nn;
    return 0;
}

/* S KEY (kv i, inode ino), D not a key (ts: a FILE of that name, replaced):
 * a backup.  The key becomes a GHOST; its text goes to a new FILE that
 * remembers the key's type and name. */
static int key_to_file(struct gfs *fs, int64_t i, fuse_ino_t ino,
                       struct gfs_scratch *ts, const char *to) {
    int e = 0, rc = 0;
    struct gguf_buf fname = {0};
    struct gfs_scratch *s = NULL;
    struct gfs_text *t = gfs_text_get(fs, i, &e);
    if (!t)
        return e;
    if (ts)
        scratch_remove(fs, ts);
    if (!(s = scratch_new(fs, to, &rc)))
        goto out;
    if ((rc = gfs_mem_grant(fs, &s->granted, t->len)))
        goto out;
    if (gguf_buf_add(&s->data, t->data, t->len) != GGUF_OK ||
        gfs_kv_fname(fs, i, &fname)) {
        rc = ENOMEM;
        goto out;
    }
    s->backup = 1;
    s->type = gguf_kv_type(fs->ctx, i);
    s->arr_type = gguf_kv_arr_type(fs->ctx, i);
    s->from = (char *)fname.p;
    fname.p = NULL;
    if ((rc = remove_key(fs, i)))
        goto out;
    add_alias(fs, ino, s->ino);
    s = NULL;
out:
    if (s)
        scratch_remove(fs, s);
    gguf_buf_free(&fname);
    gfs_text_put(t);
    return rc;
}

/* Sets key (klen bytes) to the type and value of key i, copied first
 * (setting may move what key i points at); a refusal is key at's
 * (refuse).  0 or an errno. */
static int set_like(struct gfs *fs, int64_t i, const char *key, size_t klen,
                    int64_t at) {
    struct gguf_buf payload = {0};
    struct gguf_error err = {0};
    size_t plen;
    const uint8_t *p = gguf_kv_payload(fs->ctx, i, &plen);
    int rc = 0;
    if (gguf_buf_add(&payload, p, plen) != GGUF_OK)
        return ENOMEM;
    if (gguf_set_payload(fs->ctx, key, klen, gguf_kv_type(fs->ctx, i),
                         payload.p, payload.len, &err) != GGUF_OK)
        rc = gfs_meta_refuse(fs, at, &err);
    gguf_buf_free(&payload);
    return rc;
}

/* S KEY (kv i, inode ino), D free and a valid new key name (key): the
 * key is renamed, keeping its value, type and place; S becomes a GHOST. */
static int key_rename(struct gfs *fs, int64_t i, fuse_ino_t ino,
                      const struct gguf_buf *key) {
    uint64_t ord = key_ord(fs, gguf_kv_id(fs->ctx, i));
    uint32_t fid = gguf_kv_id(fs->ctx, i);
    struct gguf_error err = {0};
    int rc = set_like(fs, i, (const char *)key->p, key->len, i);
    if (rc)
        return rc;
    int64_t ni = gguf_find_key(fs->ctx, (char *)key->p, key->len);
    uint32_t nid = gguf_kv_id(fs->ctx, ni);
    if ((rc = remove_key(fs, gguf_find_id(fs->ctx, fid)))) {
        (void)gguf_remove_key(fs->ctx, gguf_find_id(fs->ctx, nid), &err);
        return rc;
    }
    restore_place(fs, gguf_find_id(fs->ctx, nid), ord);
    gfs_meta_edited(fs, gguf_find_id(fs->ctx, nid));
    add_alias(fs, ino, GFS_INO_KV + nid);
    return 0;
}

/* Key ti takes the value of key fi, with its type (mv of a typed key onto
 * a key of another type: the target is replaced, as mv replaces a file),
 * in ti's place. */
static int take_value(struct gfs *fs, int64_t fi, int64_t ti) {
    size_t klen;
    const char *key = gguf_kv_key(fs->ctx, ti, &klen);
    gfs_text_keep(fs, ti);
    int rc = set_like(fs, fi, key, klen, ti);
    if (!rc)
        gfs_meta_edited(fs, gguf_find_key(fs->ctx, key, klen));
    return rc;
}

/* S KEY (fi), D KEY (ti): the source becomes a GHOST, the target keeps its
 * place and takes the source's value: a string source (an editor's
 * temporary file whose name is a valid key: sed's sedXXXXXX, python's
 * tmpXXXXXXXX) as text parsed as the target's type, any other source with
 * its own type (take_value). */
static int key_onto_key(struct gfs *fs, int64_t fi, int64_t ti) {
    int e = 0, rc;
    uint32_t fid = gguf_kv_id(fs->ctx, fi), tid = gguf_kv_id(fs->ctx, ti);
    struct gfs_text *t = NULL;
    if (gguf_kv_type(fs->ctx, fi) != GGUF_TYPE_STRING) {
        rc = take_value(fs, fi, ti);
    } else if (!(t = gfs_text_get(fs, fi, &e))) {
        return e;
    } else {
        rc = gfs_meta_apply_text(fs, ti, t->data, t->len, 0);
        gfs_text_put(t);
    }
    if (rc)
        return rc;
    if ((rc = remove_key(fs, gguf_find_id(fs->ctx, fid))))
        return rc;
    add_alias(fs, GFS_INO_KV + fid, GFS_INO_KV + tid);
    return 0;
}

/* S KEY (fi), D GHOST: the ghost's key comes back and takes the text, as
 * onto a KEY (sed -i.bak renames the key away, then its temporary file,
 * whose name may be a valid key, onto the key's name).  If the text does
 * not fit, the key goes again. */
static int key_onto_ghost(struct gfs *fs, int64_t fi, struct gfs_ghost *g) {
    uint32_t fid = gguf_kv_id(fs->ctx, fi);
    int64_t ti;
    int rc = ghost_restore(fs, g, &ti);
    if (rc)
        return rc;
    uint32_t tid = gguf_kv_id(fs->ctx, ti);
    rc = key_onto_key(fs, gguf_find_id(fs->ctx, fid), ti);
    if (rc && (ti = gguf_find_id(fs->ctx, tid)) >= 0)
        remove_key(fs, ti);
    return rc;
}

int gfs_meta_rename(struct gfs *fs, const char *from, const char *to,
                    unsigned flags) {
    assert(gfs_edit_held(fs)); /* edits.h, invariant 1 */
    struct gguf_buf tkey = {0};
    struct name_info src, dst;
    int rc = 0;

    if (flags & ~(unsigned)RENAME_NOREPLACE)
        return EINVAL;
    name_state(fs, from, &src);
    name_state(fs, to, &dst);
    if (src.state != NAME_KEY && src.state != NAME_FILE)
        return ENOENT;
    if ((flags & RENAME_NOREPLACE) &&
        (dst.state == NAME_KEY || dst.state == NAME_FILE))
        return EEXIST;
    if (strcmp(from, to) == 0)
        return 0;
    if (src.state == NAME_KEY && gfs_meta_protected(fs, src.i))
        return gfs_meta_refuse_protected(fs, src.i, "renaming");
    if (dst.state == NAME_KEY && gfs_meta_protected(fs, dst.i))
        return gfs_meta_refuse_protected(fs, dst.i, "a rename onto");
    int to_key = dst.state == NAME_FREE && name_to_key(to, &tkey);
    if (to_key && gguf_key_is_filler((char *)tkey.p, tkey.len)) {
        gfs_log(fs, "%s: the key %s is reserved for ggufs", fs->path,
                GGUF_FILLER_KEY);
        rc = EPERM;
        goto out;
    }

    if (src.state == NAME_KEY && dst.state == NAME_KEY) {
        rc = key_onto_key(fs, src.i, dst.i);
    } else if (src.state == NAME_KEY && dst.state == NAME_GHOST) {
        rc = key_onto_ghost(fs, src.i, dst.ghost);
    } else if (src.state == NAME_KEY && to_key && !gfs_meta_backup_name(to)) {
        rc = key_rename(fs, src.i, src.ino, &tkey);
    } else if (dst.state == NAME_FREE && !to_key &&
               !gfs_meta_scratch_name(to)) {
        rc = refuse_name(fs, "renaming to", to);
    } else if (src.state == NAME_KEY) {
        rc = key_to_file(fs, src.i, src.ino, dst.file, to);
    } else if (dst.state == NAME_KEY || dst.state == NAME_GHOST) {
        rc = file_to_key(fs, src.file, dst.i, dst.ghost, NULL);
    } else if (to_key) {
        rc = file_to_key(fs, src.file, -1, NULL, &tkey);
    } else {
        rc = file_rename(fs, src.file, dst.file, to);
    }
out:
    gguf_buf_free(&tkey);
    return rc;
}

/* A file name for a message, in full (the report must name every FILE so
 * that it can be found): control bytes become \xHH, so that a name cannot
 * end a log line or drive a terminal; everything else is kept as it is.
 * buf holds 4 * GFS_NAME_MAX + 1 bytes; longer names are cut. */
#define GFS_NAME_MAX 1024 /* FUSE_NAME_MAX */
static const char *name_for_msg(char *buf, const char *s) {
    size_t o = 0;
    for (size_t i = 0; s[i] && i < GFS_NAME_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(buf + o, 5, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = '\0';
    return buf;
}

size_t gfs_meta_files_note(struct gfs *fs, char *msg, size_t size, int log) {
    size_t n = 0, more = 0;
    for (struct gfs_scratch *s = fs->scratch; s; s = s->next, n++) {
        char q[4 * GFS_NAME_MAX + 1], qf[4 * GFS_NAME_MAX + 1];
        char line[2 * sizeof q + 80];
        fuse_ino_t fino;
        /* A key renamed to a backup name and not made again: removed. */
        int removed = s->from && !(gfs_lookup_name(fs, GFS_INO_META, s->from,
                                                   &fino) == 0 &&
                                   gfs_kv_index(fs, fino) >= 0);
        int len = snprintf(
            line, sizeof line,
            "meta/%s: not a key, not committed (%zu bytes)%s%s%s",
            name_for_msg(q, s->name), s->data.len, removed ? "; meta/" : "",
            removed ? name_for_msg(qf, s->from) : "",
            removed ? ": removed" : "");
        if (log)
            gfs_log(fs, "%s: %s%s%s", fs->path, line,
                    s->from && !removed ? ", a copy of meta/" : "",
                    s->from && !removed ? name_for_msg(qf, s->from) : "");
        /* The report names as many as fit, keeping room to count the rest
         * (the log has them all). */
        size_t used = msg ? strlen(msg) : 0;
        if (msg && !more && used + (size_t)len + 2 + 80 < size)
            snprintf(msg + used, size - used, "; %s", line);
        else if (msg)
            more++;
    }
    if (more) {
        size_t used = strlen(msg);
        snprintf(msg + used, size - used,
                 "; %zu more files in meta/ not keys, not committed (named "
                 "in the log)",
                 more);
    }
    return n;
}

void gfs_meta_free(struct gfs *fs) {
    while (fs->scratch) {
        struct gfs_scratch *s = fs->scratch;
        fs->scratch = s->next;
        scratch_free(fs, s);
    }
    fs->n_scratch = 0;
    if (!fs->meta)
        return;
    while (fs->meta->ghosts) {
        struct gfs_ghost *g = fs->meta->ghosts;
        fs->meta->ghosts = g->next;
        ghost_free(g);
    }
    free(fs->meta->aliases);
    free(fs->meta->ords);
    gfs_meta_errors_free(fs);
    free(fs->meta);
    fs->meta = NULL;
}

int gfs_meta_init(struct gfs *fs) {
    fs->meta = calloc(1, sizeof *fs->meta);
    return fs->meta ? 0 : ENOMEM;
}
