/*
 * list.c - the model list a scan builds (internal.h): adding models and
 * files under the bounds, names made valid file names, shard sets grouped
 * (the library's rule, gguf_split_name), the list sorted, the NAME@model
 * rule, duplicates, freeing.  Called by the scans (ollama.c, hfcache.c,
 * folder.c, hub.c); calls none of them (cat_scan, scan.c, runs them).
 */
#include "gguf.h"
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cat_ends_gguf(const char *name) {
    size_t n = strlen(name);
    return n > 5 && strcmp(name + n - 5, ".gguf") == 0;
}

/* ---- names ------------------------------------------------------------ */

static bool component_ok(const char *c, size_t len) {
    return len > 0 && len <= 255 && !(len == 1 && c[0] == '.') &&
           !(len == 2 && c[0] == '.' && c[1] == '.');
}

char *cat_name_fix(const char *name) {
    struct gguf_buf b = {0};
    for (const char *p = name;;) {
        size_t len = strcspn(p, "/");
        enum gguf_status st = component_ok(p, len)
                                  ? gguf_buf_add(&b, p, len)
                                  : gguf_name_escape(p, len, &b);
        if (st == GGUF_OK && len == 0)
            st = gguf_buf_add(&b, "%", 1); /* an empty component */
        if (st != GGUF_OK)
            goto fail;
        if (!p[len])
            break;
        if (gguf_buf_add(&b, "/", 1) != GGUF_OK)
            goto fail;
        p += len + 1;
    }
    if (gguf_buf_add(&b, "", 1) != GGUF_OK)
        goto fail;
    return (char *)b.p;
fail:
    gguf_buf_free(&b);
    return NULL;
}

/* ---- models ----------------------------------------------------------- */

struct cat_model *cat_model_add(struct cat_scan *s, char *name) {
    struct cat_list *l = s->out;
    if (!name) {
        s->oom = 1;
        return NULL;
    }
    if (l->n >= CAT_MAX_MODELS) {
        if (!s->full)
            cat_logf(s, "more than %d models: the rest left out (%s, ...)",
                     CAT_MAX_MODELS, name);
        s->full = 1;
        free(name);
        return NULL;
    }
    if (l->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        struct cat_model *v = realloc(l->models, cap * sizeof *v);
        if (!v) {
            s->oom = 1;
            free(name);
            return NULL;
        }
        l->models = v;
        s->cap = cap;
    }
    struct cat_model *m = &l->models[l->n++];
    memset(m, 0, sizeof *m);
    m->name = name;
    return m;
}

int cat_model_file(struct cat_scan *s, struct cat_model *m,
                   const struct cat_file *f) {
    if (m->n_files >= CAT_MAX_FILES)
        return -1;
    struct cat_file *v = realloc(m->files, (m->n_files + 1) * sizeof *v);
    if (!v) {
        s->oom = 1;
        return -1;
    }
    m->files = v;
    m->files[m->n_files++] = *f;
    m->size += f->size;
    return 0;
}

void cat_file_free(struct cat_file *f) {
    free(f->path);
    free(f->name);
    f->path = f->name = NULL;
}

static void model_free(struct cat_model *m) {
    for (size_t i = 0; i < m->n_files; i++)
        cat_file_free(&m->files[i]);
    for (size_t i = 0; i < m->n_layers; i++) {
        free(m->layers[i].name);
        cat_file_free(&m->layers[i].file);
    }
    free(m->files);
    free(m->layers);
    free(m->name);
}

void cat_model_drop(struct cat_scan *s) {
    model_free(&s->out->models[--s->out->n]);
}

void cat_list_free(struct cat_list *l) {
    for (size_t i = 0; i < l->n; i++)
        model_free(&l->models[i]);
    free(l->models);
    l->models = NULL;
    l->n = 0;
}

/* ---- shard sets ------------------------------------------------------- */

/* What a file at rel costs a listing (CAT_MAX_LIST_BYTES): its paths,
 * and the name's every directory level as the daemon holds it (one node
 * per level, each with its whole path: a name of many short levels costs
 * the sum of its prefixes). */
static size_t list_cost(const char *rel, const struct cat_file *f,
                        const char *suffix) {
    size_t cost = strlen(rel) + (f->path ? strlen(f->path) : 0) +
                  (suffix ? strlen(suffix) : 0);
    for (const char *p = rel; (p = strchr(p, '/')); p++)
        cost += (size_t)(p - rel) + 64; /* + a node's own size */
    return cost;
}

int cat_cand_add(struct cat_scan *s, struct cat_cands *c, const char *rel,
                 const char *suffix, struct cat_file *f) {
    struct cat_cand k = {.file = *f};
    size_t len = strlen(rel) - 5, /* without .gguf */
        cost = list_cost(rel, f, suffix);
    if (s->bytes > CAT_MAX_LIST_BYTES || cost > CAT_MAX_LIST_BYTES - s->bytes) {
        if (s->bytes <= CAT_MAX_LIST_BYTES)
            cat_logf(s,
                     "the paths listed pass %u bytes: the rest left out "
                     "(%.200s, ...)",
                     CAT_MAX_LIST_BYTES, rel);
        s->bytes = CAT_MAX_LIST_BYTES + 1;
        cat_file_free(f);
        return 0;
    }
    s->bytes += cost;
    const char *slash = strrchr(rel, '/');
    size_t dir = slash ? (size_t)(slash - rel) + 1 : 0;
    char *base = NULL;
    if (len == dir) /* ".gguf" alone: the name keeps its suffix */
        len += 5;
    if (gguf_split_name(rel, &k.no, &k.count, &k.cut) && k.cut > dir)
        len = k.cut;
    else
        k.no = k.count = 0;
    if (asprintf(&base, "%.*s%s", (int)len, rel, suffix ? suffix : "") < 0)
        base = NULL;
    k.base = base ? cat_name_fix(base) : NULL;
    free(base);
    k.file.name = k.base ? strdup(rel + dir) : NULL;
    if (k.file.name && c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        struct cat_cand *v = realloc(c->v, cap * sizeof *v);
        if (v)
            c->v = v, c->cap = cap;
    }
    if (!k.file.name || c->n == c->cap) {
        free(k.base);
        cat_file_free(&k.file);
        s->oom = 1;
        return -1;
    }
    c->v[c->n++] = k;
    return 0;
}

static int cand_cmp(const void *a, const void *b) {
    const struct cat_cand *x = a, *y = b;
    int d = strcmp(x->base, y->base);
    if (d)
        return d;
    if (x->count != y->count)
        return x->count < y->count ? -1 : 1;
    return x->no < y->no ? -1 : x->no > y->no;
}

/* The candidates [i, j) as one model, files in order, taken from c. */
static void cands_model(struct cat_scan *s, struct cat_cands *c, size_t i,
                        size_t j, int content_addressed) {
    struct cat_model *m = cat_model_add(s, strdup(c->v[i].base));
    for (size_t k = i; m && k < j; k++) {
        if (cat_model_file(s, m, &c->v[k].file) != 0) {
            if (!s->oom)
                cat_logf(s, "%s: more than %d files in model %s, left out",
                         c->v[i].file.path, CAT_MAX_FILES, m->name);
            cat_model_drop(s);
            return;
        }
        c->v[k].file.path = c->v[k].file.name = NULL; /* now m's */
    }
    if (m)
        m->content_addressed = content_addressed;
}

void cat_cands_group(struct cat_scan *s, struct cat_cands *c,
                     int content_addressed) {
    if (c->n > 1) /* qsort's base may not be NULL, even for none */
        qsort(c->v, c->n, sizeof *c->v, cand_cmp);
    for (size_t i = 0, j; i < c->n; i = j) {
        struct cat_cand *a = &c->v[i];
        for (j = i + 1; a->count && j < c->n &&
                        strcmp(c->v[j].base, a->base) == 0 && c->v[j].count;
             j++)
            ;
        int ok = 1;
        for (size_t k = i; a->count && k < j; k++)
            ok &= c->v[k].count == a->count && c->v[k].no == (int)(k - i) + 1;
        ok &= !a->count || (int)(j - i) == a->count;
        if (!ok)
            cat_logf(s,
                     "%s: shard set incomplete or inconsistent (%zu of %d "
                     "files, first %s at %s), left out",
                     a->base, j - i, a->count, a->file.name, a->file.path);
        else if (!s->oom)
            cands_model(s, c, i, j, content_addressed);
    }
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].base);
        cat_file_free(&c->v[i].file);
    }
    free(c->v);
    c->v = NULL;
    c->n = c->cap = 0;
}

/* ---- the finished list ------------------------------------------------ */

/* By name; two of one name by their first file's path (then the number
 * of files), so that which one a duplicate check keeps does not depend on
 * the order readdir gave. */
static int model_cmp(const void *a, const void *b) {
    const struct cat_model *x = a, *y = b;
    int d = strcmp(x->name, y->name);
    if (d || !x->n_files || !y->n_files)
        return d ? d : (x->n_files > y->n_files) - (x->n_files < y->n_files);
    d = strcmp(x->files[0].path, y->files[0].path);
    return d ? d : (x->n_files > y->n_files) - (x->n_files < y->n_files);
}

/* True if some model's name starts with the directory name/ (l sorted). */
static bool is_directory(const struct cat_list *l, const char *name) {
    size_t len = strlen(name), lo = 0, hi = l->n;
    char dir[CAT_MAX_PATH + 2];
    if (len + 1 >= sizeof dir)
        return false;
    memcpy(dir, name, len);
    memcpy(dir + len, "/", 2);
    while (lo < hi) { /* the first name >= "name/" */
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(l->models[mid].name, dir) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < l->n && strncmp(l->models[lo].name, dir, len + 1) == 0;
}

/* The NAME@model rule: a model whose name is a directory of others'
 * names is NAME@model.  One pass; true if a name changed. */
static bool rename_directories(struct cat_scan *s) {
    struct cat_list *l = s->out;
    bool changed = false;
    for (size_t i = 0; i < l->n; i++) {
        char *at = NULL;
        if (!is_directory(l, l->models[i].name))
            continue;
        if (asprintf(&at, "%s@model", l->models[i].name) < 0)
            at = NULL;
        char *fixed = at ? cat_name_fix(at) : NULL;
        free(at);
        if (!fixed) {
            s->oom = 1;
            return false;
        }
        free(l->models[i].name);
        l->models[i].name = fixed;
        changed = true;
    }
    if (changed)
        qsort(l->models, l->n, sizeof *l->models, model_cmp);
    return changed;
}

void cat_list_finish(struct cat_scan *s) {
    struct cat_list *l = s->out;
    if (l->n > 1)
        qsort(l->models, l->n, sizeof *l->models, model_cmp);
    for (size_t pass = 0; pass < l->n && rename_directories(s); pass++)
        ;
    size_t o = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (o && strcmp(l->models[o - 1].name, l->models[i].name) == 0) {
            cat_logf(s, "%s: a second model named %s, left out",
                     l->models[i].n_files ? l->models[i].files[0].path : "?",
                     l->models[i].name);
            model_free(&l->models[i]);
            continue;
        }
        l->models[o++] = l->models[i];
    }
    l->n = o;
}

int cat_remote_done(struct cat_scan *s, struct cat_cands *c, int r,
                    const char *shown, size_t skipped, size_t logged,
                    const char *what, char *msg, size_t n) {
    if (r != 0)
        s->log = NULL; /* the listing failed: nothing more to say */
    cat_cands_group(s, c, 0);
    if (skipped > logged)
        cat_logf(s, "%s: %zu more %s skipped", shown, skipped - logged, what);
    if (r == 0 && !s->oom)
        cat_list_finish(s);
    if (r == 0 && s->oom) {
        snprintf(msg, n, "%s: out of memory while listing", shown);
        r = -1;
    }
    if (r != 0)
        cat_list_free(s->out);
    return r;
}

const char *cat_path_fault(const char *p, size_t len) {
    if (len != strlen(p))
        return "holds a NUL byte";
    if (!len || len > CAT_MAX_PATH)
        return len ? "is too long" : "is empty";
    if (p[0] == '/')
        return "is absolute";
    for (const char *c = p; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return "holds a control character";
    for (const char *c = p;;) {
        size_t k = strcspn(c, "/");
        if (!k || (k == 1 && c[0] == '.') ||
            (k == 2 && c[0] == '.' && c[1] == '.'))
            return "has an empty, '.' or '..' component";
        if (!c[k])
            return NULL;
        c += k + 1;
    }
}
