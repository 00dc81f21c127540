/*
 * storefs.c - a store mounted (issue 23): one directory per model, named
 * as the store's own tool names it, each the whole tree of a single-file
 * mount; models.tsv at the root.  What the store holds comes from the
 * catalog (catalog/include/catalog.h: the layouts of ollama, the HF cache, LM
 * Studio, folders, a Hub repo's listing); this file maps it onto inodes
 * and opens each model (model.c) when first looked into.
 *
 * Nodes.  Every name of the store's tree is a node: a directory of names
 * (slot-0 inode GFS_STORE_DIR0 + its index), or a model (its root is
 * (index << GFS_INO_SLOT_SHIFT) + GFS_INO_ROOT: the index is the model's
 * slot, mounts.h).  Nodes are never forgotten while mounted (a name that
 * comes back gets its old numbers); a node not in the last scan is not
 * listed nor looked up, and a model still open keeps serving what it has
 * open, as a deleted file does.
 *
 * Freshness.  A lookup or a listing of a store directory asks the
 * catalog for the store's stamp (cat_stamp: a few stats) at most once a
 * second, and scans again when it changed: new models appear, removed
 * ones go, within a second.  A Hub repo is listed once, at mount.
 *
 * Bounds.  At most max_open models are open at once (-o max_models, and
 * a quarter of RLIMIT_NOFILE at four descriptors a model): opening one
 * more closes the least recently used model that nothing holds (no
 * request in flight, no open file, no edit not yet committed, no FILE in
 * meta/); when none can go, the open fails with EMFILE and one log line.
 *
 * Locks.  st->mu guards the nodes, the list and the counts; it is taken
 * before any model's locks (eviction asks a model whether it holds
 * edits) and never while a model's handler runs.  A model being opened
 * is marked so (opening) and opened without st->mu; others wanting it
 * wait on st->cv.
 */
#include "model.h"
#include "mounts.h"
#include "source/source.h"

#include "../status.h"
#include "catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define GFS_STORE_TSV 2    /* models.tsv */
#define GFS_STORE_DIR0 16  /* directory node k: GFS_STORE_DIR0 + k */
#define FD_PER_MODEL 4     /* a model's descriptors, for the bound */
#define FAIL_RETRY_S 1.0   /* a model that failed to open: tried again after */
#define RESCAN_EVERY_S 1.0 /* the store's stamp: asked at most this often */
#define TSV_HEADER                                                             \
    "name\tarchitecture\tparameters\tfile_type\tsize\tcontext_length\t"        \
    "tensors\tsource\n"

struct node {
    char *path;       /* the whole name ("" for the root) */
    const char *base; /* its last component (in path) */
    uint32_t parent;  /* its directory's index */
    int model;        /* a model's directory, else a directory of names */
    int present;      /* in the last scan */
    /* Directories: their present children, sorted by base. */
    uint32_t *kids;
    size_t n_kids, cap_kids;
    /* Models (guarded by st->mu). */
    const struct cat_model *cm; /* in st->list while present */
    struct gfs *fs;             /* open, or NULL */
    int refs, opening;
    uint64_t used; /* st->tick at the last request: least recently used */
    double failed; /* when the last open failed (0: never) */
    char *line;    /* its models.tsv line, once made */
    /* Another name of a model listed before it (the same first file: an
     * ollama model copied under a second name, one blob in two HF
     * snapshots, a hard link): a symbolic link to that model's directory
     * (alias: its index), never opened twice; -1 for none. */
    int64_t alias;
};

struct gfs_storefs {
    struct gfs_mount *mount;
    struct gfs_opts o; /* the mount's */
    const char *mnt;
    int dirfd; /* the store's directory (local stores) */
    char *dir; /* its absolute path, or the hf:// URL of a Hub repo */
    enum cat_kind kind;
    struct stat st; /* of the store's directory at mount: times of its nodes */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct cat_list list;
    uint32_t *node_of; /* list.models[i]'s node */
    struct node *nodes;
    size_t n_nodes, cap_nodes;
    uint64_t stamp, tick;
    double checked;
    size_t n_open, max_open;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static struct gfs_storefs *store_of(fuse_req_t req) {
    return ((struct gfs_mount *)fuse_req_userdata(req))->store;
}

/* ---- the tree of names ---------------------------------------------- */

/* The child of dir named base (len bytes), or -1: a binary search of its
 * sorted children.  *at: where it is or would go. */
static int64_t kid_find(const struct gfs_storefs *st, const struct node *dir,
                        const char *base, size_t len, size_t *at) {
    size_t lo = 0, hi = dir->n_kids;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *b = st->nodes[dir->kids[mid]].base;
        int c = strncmp(b, base, len);
        if (c == 0)
            c = b[len] ? 1 : 0;
        if (c == 0) {
            *at = mid;
            return dir->kids[mid];
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    return -1;
}

static int kid_insert(struct node *dir, size_t at, uint32_t k) {
    if (dir->n_kids == dir->cap_kids) {
        size_t cap = dir->cap_kids ? dir->cap_kids * 2 : 8;
        uint32_t *v = realloc(dir->kids, cap * sizeof *v);
        if (!v)
            return -1;
        dir->kids = v, dir->cap_kids = cap;
    }
    memmove(dir->kids + at + 1, dir->kids + at,
            (dir->n_kids - at) * sizeof *dir->kids);
    dir->kids[at] = k;
    dir->n_kids++;
    return 0;
}

/* A new node path[0, len) in directory parent; its index or -1. */
static int64_t node_new(struct gfs_storefs *st, uint32_t parent,
                        const char *path, size_t len, int model) {
    if (st->n_nodes == st->cap_nodes) {
        size_t cap = st->cap_nodes ? st->cap_nodes * 2 : 64;
        if (cap > ((size_t)1 << (64 - GFS_INO_SLOT_SHIFT)) - 1)
            return -1;
        struct node *v = realloc(st->nodes, cap * sizeof *v);
        if (!v)
            return -1;
        st->nodes = v, st->cap_nodes = cap;
    }
    struct node *n = &st->nodes[st->n_nodes];
    memset(n, 0, sizeof *n);
    if (!(n->path = strndup(path, len)))
        return -1;
    const char *slash = strrchr(n->path, '/');
    n->base = slash ? slash + 1 : n->path;
    n->parent = parent;
    n->model = model;
    n->alias = -1;
    return (int64_t)st->n_nodes++;
}

/* The node of name (a model's when model), made with its directories
 * where missing, all marked present; a node whose role changed (a
 * directory that is now a model) is replaced.  Its index or -1. */
static int64_t node_put(struct gfs_storefs *st, const char *name, int model) {
    uint32_t dir = 0;
    for (const char *p = name;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        int is_model = model && !slash;
        size_t at;
        int64_t k = kid_find(st, &st->nodes[dir], p, len, &at);
        if (k >= 0 && st->nodes[k].model != is_model) {
            st->nodes[dir].n_kids--; /* detached: its numbers stay its own */
            memmove(st->nodes[dir].kids + at, st->nodes[dir].kids + at + 1,
                    (st->nodes[dir].n_kids - at) * sizeof(uint32_t));
            st->nodes[k].present = 0;
            k = -1;
        }
        if (k < 0) {
            k = node_new(st, dir, name, (size_t)(p - name) + len, is_model);
            if (k < 0 || kid_insert(&st->nodes[dir], at, (uint32_t)k) != 0)
                return -1;
        }
        st->nodes[k].present = 1;
        if (!slash)
            return k;
        dir = (uint32_t)k;
        p = slash + 1;
    }
}

static void store_log(void *u, const char *line) {
    struct gfs_storefs *st = u;
    gfs_log_line(&st->mount->log, line);
}

/* Marks each model whose first file is another's as an alias of it (a
 * symbolic link to it): of the names of one file, the one with the
 * fewest levels (ollama's library/ names before others), then the first
 * by name, is the model.  Caller holds st->mu. */
struct first_file {
    dev_t dev;
    ino_t ino;
    uint32_t node;
    uint64_t order; /* the name with fewest levels first, then by name */
};
static int first_cmp(const void *a, const void *b) {
    const struct first_file *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}
static void mark_aliases(struct gfs_storefs *st, const struct cat_list *l,
                         const uint32_t *node_of) {
    struct first_file *v = calloc(l->n ? l->n : 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++) {
        st->nodes[node_of[i]].alias = -1;
        const struct cat_file *f = &l->models[i].files[0];
        uint64_t levels = 0;
        for (const char *p = l->models[i].name; *p; p++)
            levels += *p == '/';
        if (v && (f->dev || f->ino))
            v[n++] = (struct first_file){f->dev, f->ino, node_of[i],
                                         levels << 32 | i};
    }
    if (v)
        qsort(v, n, sizeof *v, first_cmp);
    for (size_t i = 1; v && i < n; i++)
        if (v[i].dev == v[i - 1].dev && v[i].ino == v[i - 1].ino)
            st->nodes[v[i].node].alias = st->nodes[v[i - 1].node].alias >= 0
                                             ? st->nodes[v[i - 1].node].alias
                                             : (int64_t)v[i - 1].node;
    free(v);
}

/* Scans the store again and marks what it holds.  Caller holds st->mu.
 * 0, or -1 with msg (the old list is kept). */
static int rescan(struct gfs_storefs *st, char *msg, size_t n) {
    struct cat_list l = {0};
    if (st->kind == CAT_HUB) {
        if (gfs_remote_list(st->dir, &st->o.remote, store_log, st, &l, msg,
                            n) != 0)
            return -1;
    } else if (cat_scan(st->dirfd, st->kind, &l, store_log, st, msg, n) != 0) {
        return -1;
    }
    for (size_t k = 0; k < st->n_nodes; k++) {
        st->nodes[k].present = 0;
        st->nodes[k].cm = NULL;
    }
    st->nodes[0].present = 1;
    uint32_t *node_of = calloc(l.n ? l.n : 1, sizeof *node_of);
    for (size_t i = 0; i < l.n; i++) {
        int64_t k = node_of ? node_put(st, l.models[i].name, 1) : -1;
        if (k < 0) {
            snprintf(msg, n, "%s: out of memory", st->dir);
            cat_list_free(&l);
            free(node_of);
            return -1;
        }
        node_of[i] = (uint32_t)k;
        struct node *nd = &st->nodes[k];
        nd->cm = &l.models[i];
        free(nd->line); /* the model may have changed: made again */
        nd->line = NULL;
    }
    mark_aliases(st, &l, node_of);
    /* Children no longer present leave their directory's listing. */
    for (size_t k = 0; k < st->n_nodes; k++) {
        struct node *d = &st->nodes[k];
        size_t w = 0;
        for (size_t i = 0; i < d->n_kids; i++)
            if (st->nodes[d->kids[i]].present)
                d->kids[w++] = d->kids[i];
        d->n_kids = w;
    }
    cat_list_free(&st->list);
    st->list = l;
    free(st->node_of);
    st->node_of = node_of;
    return 0;
}

/* At most once a second: scan again if the store's stamp moved.  Caller
 * holds st->mu. */
static void refresh(struct gfs_storefs *st) {
    double t = now_s();
    if (st->kind == CAT_HUB || t - st->checked < RESCAN_EVERY_S)
        return;
    st->checked = t;
    uint64_t stamp = cat_stamp(st->dirfd, st->kind);
    if (stamp && stamp == st->stamp)
        return;
    char msg[512];
    if (rescan(st, msg, sizeof msg) != 0)
        store_log(st, msg);
    else
        st->stamp = stamp;
}

/* ---- models ----------------------------------------------------------- */

/* Whether an open model may be closed: nothing holds it (no request in
 * flight, no open file, no FILE in meta/, no failed commit: edits not
 * yet committed are committed at the close).  Caller holds st->mu; takes
 * the model's lock (read). */
static int evictable(struct node *nd) {
    struct gfs *fs = nd->fs;
    if (!fs || nd->refs || nd->opening)
        return 0;
    pthread_rwlock_rdlock(&fs->lock);
    int clean = !fs->scratch && !fs->store.commit_failed;
    pthread_rwlock_unlock(&fs->lock);
    pthread_mutex_lock(&fs->fh_lock);
    int idle = !fs->open_fhs;
    pthread_mutex_unlock(&fs->fh_lock);
    return clean && idle;
}

/* Room for one more open model: the least recently used one that nothing
 * holds is closed when max_open are open, its edits committed first as an
 * unmount commits them (a model whose commit fails stays open, its edits
 * saved aside as the commit says, and is not chosen again).  0, or EMFILE
 * (logged).  Caller holds st->mu (a commit holds it meanwhile). */
static int make_room(struct gfs_storefs *st) {
    while (st->n_open >= st->max_open) {
        struct node *lru = NULL;
        for (size_t k = 1; k < st->n_nodes; k++) {
            struct node *nd = &st->nodes[k];
            if (nd->fs && (!lru || nd->used < lru->used) && evictable(nd))
                lru = nd;
        }
        if (!lru) {
            store_log(st, "models: every open model is in use (-o "
                          "max_models=N opens more at once)");
            return EMFILE;
        }
        gfs_model_destroy(lru->fs);
        if (lru->fs->store.commit_failed)
            continue; /* stays open: not evictable any more */
        gfs_model_close(lru->fs);
        lru->fs = NULL;
        st->n_open--;
    }
    return 0;
}

/* What opening a model needs, copied under st->mu (the list may be
 * replaced while it opens). */
struct open_job {
    struct gfs_model_args a;
    struct gfs_model_file *files;
    char *live, *first;
};

static void job_free(struct open_job *j) {
    for (int i = 0; j->files && i < j->a.n_files; i++) {
        free((char *)j->files[i].path);
        free((char *)j->files[i].name);
    }
    free(j->files);
    free(j->live);
    free(j->first);
}

/* A copy of an ollama model's other layers, for the model (extras.c);
 * NULL when it has none or out of memory (then it shows none). */
static struct gfs_extras *extras_copy(const struct gfs_storefs *st,
                                      const struct cat_model *cm) {
    struct gfs_extras *x = cm->n_layers ? calloc(1, sizeof *x) : NULL;
    if (!x || !(x->v = calloc(cm->n_layers, sizeof *x->v))) {
        free(x);
        return NULL;
    }
    x->dirfd = st->dirfd;
    for (size_t i = 0; i < cm->n_layers; i++, x->n++) {
        const struct cat_layer *l = &cm->layers[i];
        struct gfs_extra *e = &x->v[i];
        e->file = l->file;
        e->name = strdup(l->name);
        e->file.path = strdup(l->file.path);
        e->file.name = strdup(l->file.name ? l->file.name : "");
        if (!e->name || !e->file.path || !e->file.name) {
            x->n++;
            gfs_extras_free(x);
            return NULL;
        }
    }
    return x;
}

/* The model's files: absolute paths beneath the store (or hf:// URLs), the
 * names the set knows them by, the dev/ino the scan saw. */
static int job_make(struct gfs_storefs *st, const struct node *nd,
                    struct open_job *j) {
    const struct cat_model *cm = nd->cm;
    memset(j, 0, sizeof *j);
    if (!(j->files = calloc(cm->n_files, sizeof *j->files)))
        return ENOMEM;
    j->a.n_files = (int)cm->n_files;
    for (size_t i = 0; i < cm->n_files; i++) {
        const struct cat_file *f = &cm->files[i];
        char *p = NULL;
        if (st->kind == CAT_HUB ? !(p = strdup(f->path))
                                : asprintf(&p, "%s/%s", st->dir, f->path) < 0)
            return ENOMEM;
        j->files[i].path = p;
        if (!(j->files[i].name = strdup(f->name)))
            return ENOMEM;
        j->files[i].dev = f->dev;
        j->files[i].ino = f->ino;
    }
    if (asprintf(&j->live, "%s.gguf", nd->base) < 0 ||
        !(j->first = strdup(j->files[0].path)))
        return ENOMEM;
    j->a.file = j->first;
    j->a.o = st->o;
    /* Named by its hash: never written; edits go to an overlay. */
    if (cm->content_addressed && !st->o.readonly)
        j->a.o.overlay = 1;
    j->a.mnt = st->mnt;
    j->a.mount = st->mount;
    j->a.ino_base = (fuse_ino_t)(nd - st->nodes) << GFS_INO_SLOT_SHIFT;
    j->a.parent = nd->parent ? GFS_STORE_DIR0 + nd->parent : FUSE_ROOT_ID;
    j->a.store = 1;
    j->a.live_name = j->live;
    j->a.files = j->files;
    j->a.extras = extras_copy(st, cm);
    return 0;
}

/* Opens node nd's model without st->mu held (dropped and taken again);
 * 0 or an errno.  Caller holds st->mu and has set nd->opening. */
static int open_model(struct gfs_storefs *st, size_t k) {
    struct open_job j;
    int err = job_make(st, &st->nodes[k], &j), status;
    struct gfs *fs = NULL;
    pthread_mutex_unlock(&st->mu);
    if (err)
        gfs_extras_free(j.a.extras);
    if (!err && (fs = gfs_model_open(&j.a, &status)) &&
        gfs_views_init(fs, st->o.ggml, j.a.file) != 0) {
        gfs_model_close(fs);
        fs = NULL;
    }
    if (!err && !fs)
        err = EIO;
    job_free(&j);
    pthread_mutex_lock(&st->mu);
    struct node *nd = &st->nodes[k]; /* nodes may have moved */
    nd->fs = fs;
    if (fs)
        st->n_open++;
    else
        nd->failed = now_s();
    return err;
}

enum gfs_route gfs_store_route(struct gfs_storefs *st, fuse_req_t req,
                               fuse_ino_t *ino, struct gfs **out) {
    size_t k = (size_t)(*ino >> GFS_INO_SLOT_SHIFT);
    int err = 0;
    if (k == 0)
        return GFS_TO_STORE;
    pthread_mutex_lock(&st->mu);
    if (k >= st->n_nodes || !st->nodes[k].model) {
        err = ENOENT;
        goto out;
    }
    while (st->nodes[k].opening)
        pthread_cond_wait(&st->cv, &st->mu);
    struct node *nd = &st->nodes[k];
    if (!nd->fs) {
        if (!nd->cm) /* gone from the store, and closed */
            err = ENOENT;
        else if (nd->failed && now_s() - nd->failed < FAIL_RETRY_S)
            err = EIO;
        else if (!(err = make_room(st))) {
            nd->opening = 1;
            err = open_model(st, k);
            st->nodes[k].opening = 0;
            pthread_cond_broadcast(&st->cv);
        }
        nd = &st->nodes[k];
    }
    if (!err) {
        nd->refs++;
        nd->used = ++st->tick;
        *out = nd->fs;
        *ino &= GFS_INO_MODEL_SPAN - 1;
    }
out:
    pthread_mutex_unlock(&st->mu);
    if (err) {
        fuse_reply_err(req, err);
        return GFS_REPLIED;
    }
    return GFS_TO_MODEL;
}

void gfs_store_leave(struct gfs_storefs *st, struct gfs *fs) {
    size_t k = (size_t)(fs->ino_base >> GFS_INO_SLOT_SHIFT);
    pthread_mutex_lock(&st->mu);
    st->nodes[k].refs--;
    pthread_mutex_unlock(&st->mu);
}

void gfs_store_each(struct gfs_storefs *st, void (*f)(struct gfs *fs, void *u),
                    void *u) {
    pthread_mutex_lock(&st->mu);
    for (size_t k = 1; k < st->n_nodes; k++)
        if (st->nodes[k].fs)
            f(st->nodes[k].fs, u);
    pthread_mutex_unlock(&st->mu);
}

/* ---- models.tsv --------------------------------------------------------- */

/* Value of key (a string, or a number printed) of ctx into out, or "-". */
static void kv_text(const gguf_ctx *ctx, const char *key, char *out, size_t n) {
    int64_t i = gguf_find_key(ctx, key, strlen(key));
    const char *s;
    size_t len;
    uint64_t u;
    int64_t v;
    snprintf(out, n, "-");
    if (i < 0)
        return;
    if (gguf_kv_get_str(ctx, i, &s, &len))
        snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), s);
    else if (gguf_kv_get_u64(ctx, i, &u))
        snprintf(out, n, "%" PRIu64, u);
    else if (gguf_kv_get_i64(ctx, i, &v))
        snprintf(out, n, "%" PRId64, v);
    /* Tabs and newlines would break the line: one space each. */
    for (char *p = out; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == '\r')
            *p = ' ';
}

/* The models.tsv line of a model from its (first) header. */
static char *tsv_line(const struct node *nd, const gguf_ctx *ctx,
                      int64_t n_tensors, const char *source) {
    char arch[128], params[64], ft[64], ctxlen[64], key[200];
    kv_text(ctx, "general.architecture", arch, sizeof arch);
    kv_text(ctx, "general.size_label", params, sizeof params);
    kv_text(ctx, "general.file_type", ft, sizeof ft);
    const char *ftn = gguf_file_type_name(strtoull(ft, NULL, 10));
    if (ftn && ft[0] != '-')
        snprintf(ft, sizeof ft, "%s", ftn);
    snprintf(key, sizeof key, "%s.context_length", arch);
    kv_text(ctx, key, ctxlen, sizeof ctxlen);
    char *line = NULL;
    if (asprintf(&line, "%s\t%s\t%s\t%s\t%" PRIu64 "\t%s\t%" PRId64 "\t%s\n",
                 nd->path, arch, params, ft, nd->cm ? nd->cm->size : 0, ctxlen,
                 n_tensors, source) < 0)
        return NULL;
    return line;
}

/* A model's line: from its header as its file holds it (edits not yet
 * committed and overlays are meta/'s to show), read once: a local file's
 * header is parsed alone, read-only; a Hub model is opened as a request
 * would open it. */
static char *model_line(struct gfs_storefs *st, size_t k) {
    struct node *nd = &st->nodes[k];
    if (nd->line || !nd->cm)
        return nd->line;
    char *src = NULL;
    const struct cat_file *f0 = &nd->cm->files[0];
    if (st->kind == CAT_HUB ? !(src = strdup(f0->path))
                            : asprintf(&src, "%s/%s", st->dir, f0->path) < 0)
        return NULL;
    if (st->kind != CAT_HUB) {
        gguf_ctx *ctx = NULL;
        struct gguf_error err = {0};
        if (gguf_open(&ctx, src, 0, &err) == GGUF_OK) {
            int64_t nt = gguf_n_tensors(ctx);
            int64_t i = gguf_find_key(ctx, "split.tensors.count", 19);
            int64_t total; /* llama.cpp's gguf-split writes an int32 */
            if (nd->cm->n_files > 1 && i >= 0 &&
                gguf_kv_get_i64(ctx, i, &total) && total >= 0)
                nt = total;
            nd->line = tsv_line(nd, ctx, nt, src);
            gguf_close(ctx);
        } else {
            store_log(st, err.msg);
        }
        free(src);
        return nd->line;
    }
    /* Open (a Hub model) as a request would; it stays open (least
     * recently used first to go). */
    int err = 0;
    if (!nd->fs && !nd->opening && !(err = make_room(st))) {
        nd->opening = 1;
        err = open_model(st, k);
        st->nodes[k].opening = 0;
        pthread_cond_broadcast(&st->cv);
    }
    nd = &st->nodes[k];
    if (!err && nd->fs) {
        pthread_rwlock_rdlock(&nd->fs->lock);
        nd->line = tsv_line(nd, nd->fs->ctx, gfs_n_tensors(nd->fs), src);
        pthread_rwlock_unlock(&nd->fs->lock);
    }
    free(src);
    return nd->line;
}

/* models.tsv now: every present model in name order.  Caller holds
 * st->mu. */
static int tsv_make(struct gfs_storefs *st, struct gguf_buf *b) {
    if (gguf_buf_add(b, TSV_HEADER, strlen(TSV_HEADER)) != GGUF_OK)
        return ENOMEM;
    for (size_t i = 0; i < st->list.n; i++) {
        const char *name = st->list.models[i].name;
        size_t k = st->node_of[i];
        const char *line = model_line(st, k);
        if (!line) {
            char miss[600];
            int n =
                snprintf(miss, sizeof miss, "%s\t-\t-\t-\t-\t-\t-\t-\n", name);
            if (gguf_buf_add(b, miss, (size_t)n) != GGUF_OK)
                return ENOMEM;
        } else if (gguf_buf_add(b, line, strlen(line)) != GGUF_OK) {
            return ENOMEM;
        }
    }
    return 0;
}

/* ---- the store's own nodes ------------------------------------------------ */

/* The directory node of a slot-0 inode, or -1 (models.tsv, or none). */
static int64_t dir_of(const struct gfs_storefs *st, fuse_ino_t ino) {
    if (ino == FUSE_ROOT_ID)
        return 0;
    if (ino < GFS_STORE_DIR0 || ino - GFS_STORE_DIR0 >= st->n_nodes ||
        st->nodes[ino - GFS_STORE_DIR0].model)
        return -1;
    return (int64_t)(ino - GFS_STORE_DIR0);
}

static fuse_ino_t node_ino(const struct gfs_storefs *st, size_t k) {
    if (k == 0)
        return FUSE_ROOT_ID;
    if (st->nodes[k].model && st->nodes[k].alias < 0)
        return ((fuse_ino_t)k << GFS_INO_SLOT_SHIFT) + GFS_INO_ROOT;
    return GFS_STORE_DIR0 + k;
}

/* The alias node of a slot-0 inode, or -1. */
static int64_t alias_of(const struct gfs_storefs *st, fuse_ino_t ino) {
    if (ino < GFS_STORE_DIR0 || ino - GFS_STORE_DIR0 >= st->n_nodes)
        return -1;
    const struct node *nd = &st->nodes[ino - GFS_STORE_DIR0];
    return nd->model && nd->alias >= 0 ? (int64_t)(ino - GFS_STORE_DIR0) : -1;
}

/* An alias's link: the way from its directory to its model's
 * ("../NAME" for each level it is below the root). */
static char *link_target(const struct gfs_storefs *st, size_t k) {
    const struct node *nd = &st->nodes[k];
    const char *to = st->nodes[nd->alias].path;
    size_t up = 0;
    for (const char *p = nd->path; *p; p++)
        up += *p == '/';
    char *t = malloc(3 * up + strlen(to) + 1);
    if (!t)
        return NULL;
    for (size_t i = 0; i < up; i++)
        memcpy(t + 3 * i, "../", 3);
    strcpy(t + 3 * up, to);
    return t;
}

/* Attributes of a store node or of a model's root not opened yet (a
 * directory; the model's own once it is open), of models.tsv, or of an
 * alias (a link).  Caller holds st->mu. */
static void node_attr(const struct gfs_storefs *st, fuse_ino_t ino, int dir,
                      struct stat *sb) {
    memset(sb, 0, sizeof *sb);
    sb->st_ino = ino;
    sb->st_mode = dir ? S_IFDIR | 0555 : S_IFREG | 0444;
    int64_t a = dir ? -1 : alias_of(st, ino);
    char *t = a >= 0 ? link_target(st, (size_t)a) : NULL;
    if (t) {
        sb->st_mode = S_IFLNK | 0777;
        sb->st_size = (off_t)strlen(t);
        free(t);
    }
    if (dir && (ino >> GFS_INO_SLOT_SHIFT) && !st->o.readonly)
        sb->st_mode = S_IFDIR | 0755; /* a model's root, as it shows open */
    sb->st_nlink = dir ? 2 : 1;
    sb->st_uid = getuid();
    sb->st_gid = getgid();
    sb->st_atim = st->st.st_atim;
    sb->st_mtim = st->st.st_mtim;
    sb->st_ctim = st->st.st_ctim;
    sb->st_blksize = 4096;
}

static void store_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    struct gfs_storefs *st = store_of(req);
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    int err = ENOENT;
    pthread_mutex_lock(&st->mu);
    refresh(st);
    int64_t d = dir_of(st, parent);
    size_t at;
    if (d == 0 && strcmp(name, "models.tsv") == 0) {
        node_attr(st, GFS_STORE_TSV, 0, &e.attr);
        e.ino = GFS_STORE_TSV;
        err = 0;
    } else if (d >= 0) {
        int64_t k = kid_find(st, &st->nodes[d], name, strlen(name), &at);
        if (k >= 0 && st->nodes[k].present) {
            e.ino = node_ino(st, (size_t)k);
            node_attr(st, e.ino, st->nodes[k].alias < 0, &e.attr);
            err = 0;
        }
    }
    pthread_mutex_unlock(&st->mu);
    /* Names come and go with the store: trusted for a second. */
    e.attr_timeout = e.entry_timeout = RESCAN_EVERY_S;
    if (err)
        e.ino = 0; /* a negative entry, for as long */
    fuse_reply_entry(req, &e);
}

static void store_getattr(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi) {
    (void)fi;
    struct gfs_storefs *st = store_of(req);
    struct stat sb;
    pthread_mutex_lock(&st->mu);
    int64_t d = dir_of(st, ino);
    int ok = d >= 0 || ino == GFS_STORE_TSV || alias_of(st, ino) >= 0;
    if (ok)
        node_attr(st, ino, d >= 0, &sb);
    pthread_mutex_unlock(&st->mu);
    if (ok)
        fuse_reply_attr(req, &sb, RESCAN_EVERY_S);
    else
        fuse_reply_err(req, ENOENT);
}

int gfs_store_root_attr(struct gfs_storefs *st, fuse_req_t req,
                        fuse_ino_t ino) {
    size_t k = (size_t)(ino >> GFS_INO_SLOT_SHIFT);
    struct stat sb;
    if (!k || (ino & (GFS_INO_MODEL_SPAN - 1)) != GFS_INO_ROOT)
        return 0;
    pthread_mutex_lock(&st->mu);
    int unopened = k < st->n_nodes && st->nodes[k].model && !st->nodes[k].fs &&
                   !st->nodes[k].opening;
    if (unopened)
        node_attr(st, ino, 1, &sb);
    pthread_mutex_unlock(&st->mu);
    if (unopened)
        fuse_reply_attr(req, &sb, RESCAN_EVERY_S);
    return unopened;
}

static void store_opendir(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi) {
    struct gfs_storefs *st = store_of(req);
    pthread_mutex_lock(&st->mu);
    int64_t d = dir_of(st, ino);
    if (d >= 0)
        refresh(st);
    pthread_mutex_unlock(&st->mu);
    if (d < 0)
        fuse_reply_err(req, ino == GFS_STORE_TSV ? ENOTDIR : ENOENT);
    else
        fuse_reply_open(req, fi);
}

static void store_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
                          off_t off, struct fuse_file_info *fi) {
    (void)fi;
    struct gfs_storefs *st = store_of(req);
    struct gguf_buf out = {0};
    pthread_mutex_lock(&st->mu);
    int64_t d = dir_of(st, ino);
    if (d < 0) {
        pthread_mutex_unlock(&st->mu);
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    const struct node *dn = &st->nodes[d];
    int64_t extra = d == 0 ? 1 : 0; /* models.tsv */
    for (int64_t k = off; k < 2 + extra + (int64_t)dn->n_kids; k++) {
        const char *nm;
        fuse_ino_t child;
        if (k < 2) {
            nm = k ? ".." : ".";
            child = k ? node_ino(st, dn->parent) : ino;
        } else if (k < 2 + extra) {
            nm = "models.tsv", child = GFS_STORE_TSV;
        } else {
            size_t kid = dn->kids[k - 2 - extra];
            nm = st->nodes[kid].base, child = node_ino(st, kid);
        }
        mode_t mode = child == GFS_STORE_TSV     ? S_IFREG
                      : alias_of(st, child) >= 0 ? S_IFLNK
                                                 : S_IFDIR;
        if (!gfs_add_dirent(req, &out, size, nm, child, mode, k + 1))
            break;
    }
    pthread_mutex_unlock(&st->mu);
    fuse_reply_buf(req, (char *)out.p, out.len);
    gguf_buf_free(&out);
}

/* models.tsv: made at open (every header read once, then cached by
 * model), served from the open's text; direct I/O (its size is known only
 * once made: 0 before). */
static void store_open(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi) {
    struct gfs_storefs *st = store_of(req);
    struct gguf_buf b = {0};
    if (ino != GFS_STORE_TSV) {
        fuse_reply_err(req, dir_of(st, ino) >= 0 ? EISDIR : ENOENT);
        return;
    }
    if ((fi->flags & O_ACCMODE) != O_RDONLY) {
        fuse_reply_err(req, st->o.readonly ? EROFS : EACCES);
        return;
    }
    pthread_mutex_lock(&st->mu);
    refresh(st);
    int err = tsv_make(st, &b);
    pthread_mutex_unlock(&st->mu);
    struct gfs_text *t = err ? NULL : gfs_text_new(&b);
    gguf_buf_free(&b);
    if (!t) {
        fuse_reply_err(req, err ? err : ENOMEM);
        return;
    }
    fi->fh = (uintptr_t)t;
    fi->direct_io = 1;
    if (fuse_reply_open(req, fi) == -ENOENT)
        gfs_text_put(t);
}

static void store_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi) {
    (void)ino;
    const struct gfs_text *t = (const struct gfs_text *)(uintptr_t)fi->fh;
    if (off < 0 || (uint64_t)off >= t->len)
        size = 0;
    else if (size > t->len - (uint64_t)off)
        size = t->len - (size_t)off;
    fuse_reply_buf(req, size ? t->data + off : NULL, size);
}

static void store_release(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi) {
    (void)ino;
    gfs_text_put((struct gfs_text *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

/* fsync of the store's root: every open model's edits committed (ggufs
 * -u); only the mount's owner or root.  The first failure is the answer. */
struct commit_all {
    int err;
};
static void commit_one(struct gfs *fs, void *u) {
    struct commit_all *c = u;
    int err = fs->readonly ? 0 : gfs_model_commit(fs);
    if (err && !c->err)
        c->err = err;
}

static void store_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
                           struct fuse_file_info *fi) {
    (void)datasync;
    (void)fi;
    struct gfs_storefs *st = store_of(req);
    struct commit_all c = {0};
    uid_t uid = fuse_req_ctx(req)->uid;
    if (ino == FUSE_ROOT_ID && uid != 0 && uid != getuid())
        c.err = EACCES;
    else if (ino == FUSE_ROOT_ID)
        gfs_store_each(st, commit_one, &c);
    fuse_reply_err(req, c.err);
}

static void store_readlink(fuse_req_t req, fuse_ino_t ino) {
    struct gfs_storefs *st = store_of(req);
    pthread_mutex_lock(&st->mu);
    int64_t a = alias_of(st, ino);
    char *t = a >= 0 ? link_target(st, (size_t)a) : NULL;
    pthread_mutex_unlock(&st->mu);
    if (t)
        fuse_reply_readlink(req, t);
    else
        fuse_reply_err(req, a >= 0 ? ENOMEM : EINVAL);
    free(t);
}

static void store_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    (void)ino;
    if (size == 0)
        fuse_reply_xattr(req, 0);
    else
        fuse_reply_buf(req, NULL, 0);
}

static void store_statfs(fuse_req_t req, fuse_ino_t ino) {
    (void)ino;
    struct gfs_storefs *st = store_of(req);
    struct statvfs sv;
    memset(&sv, 0, sizeof sv);
    sv.f_bsize = sv.f_frsize = 4096;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < st->list.n; i++)
        sv.f_blocks += (st->list.models[i].size + 4095) / 4096;
    sv.f_files = st->n_nodes + 1;
    pthread_mutex_unlock(&st->mu);
    sv.f_namemax = 255;
    if (st->o.readonly)
        sv.f_flag = ST_RDONLY;
    fuse_reply_statfs(req, &sv);
}

/* What the store's nodes answer; the rest: dispatch.c's defaults (a
 * read-only directory's errors). */
const struct fuse_lowlevel_ops gfs_store_ops = {
    .lookup = store_lookup,
    .getattr = store_getattr,
    .opendir = store_opendir,
    .readdir = store_readdir,
    .open = store_open,
    .read = store_read,
    .release = store_release,
    .fsyncdir = store_fsyncdir,
    .listxattr = store_listxattr,
    .statfs = store_statfs,
    .readlink = store_readlink,
};

/* ---- the store's life -------------------------------------------------- */

int gfs_store_is(const char *source) {
    struct stat sb;
    if (cat_hub_is_repo(source))
        return 1;
    return !gfs_remote_is(source) && stat(source, &sb) == 0 &&
           S_ISDIR(sb.st_mode);
}

/* The most models open at once: -o max_models, and what a quarter of the
 * descriptors allows. */
static size_t open_bound(const struct gfs_opts *o) {
    size_t max =
        o->max_models > 0 ? (size_t)o->max_models : GFS_MAX_MODELS_DEFAULT;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        size_t fds = (size_t)rl.rlim_cur / 4 / FD_PER_MODEL;
        if (fds < max)
            max = fds ? fds : 1;
    }
    return max;
}

struct gfs_storefs *gfs_store_open(struct gfs_mount *mount,
                                   const struct gfs_opts *o, const char *mnt,
                                   int *status) {
    struct gfs_storefs *st = calloc(1, sizeof *st);
    char msg[768];
    *status = EXIT_BADFILE;
    if (!st) {
        fprintf(stderr, "ggufs: %s: out of memory\n", o->file);
        return NULL;
    }
    st->mount = mount, st->o = *o, st->mnt = mnt, st->dirfd = -1;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    st->max_open = open_bound(o);
    st->kind = o->store ? cat_kind_named(o->store) : CAT_NONE;
    if (o->store && (st->kind == CAT_NONE || st->kind == CAT_HUB)) {
        fprintf(stderr,
                "ggufs: -o store=%s: expected ollama, hf, lmstudio or dir\n",
                o->store);
        *status = EXIT_USAGE;
        goto fail;
    }
    if (cat_hub_is_repo(o->file)) {
        st->kind = CAT_HUB;
        st->dir = strdup(o->file);
    } else if (!(st->dir = realpath(o->file, NULL)) ||
               (st->dirfd = open(st->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                              O_CLOEXEC)) < 0 ||
               fstat(st->dirfd, &st->st) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", o->file, strerror(errno));
        goto fail;
    }
    if (st->kind == CAT_HUB)
        clock_gettime(CLOCK_REALTIME, &st->st.st_mtim);
    if (st->kind == CAT_HUB)
        st->st.st_atim = st->st.st_ctim = st->st.st_mtim;
    if (st->kind == CAT_NONE)
        st->kind = cat_detect(st->dirfd);
    if (!st->dir || node_new(st, 0, "", 0, 0) != 0) {
        fprintf(stderr, "ggufs: %s: out of memory\n", o->file);
        goto fail;
    }
    st->nodes[0].present = 1;
    st->stamp = st->kind == CAT_HUB ? 0 : cat_stamp(st->dirfd, st->kind);
    st->checked = now_s();
    if (rescan(st, msg, sizeof msg) != 0) {
        fprintf(stderr, "ggufs: %s\n", msg);
        goto fail;
    }
    mount->store = st;
    return st;
fail:
    gfs_store_close(st);
    return NULL;
}

const char *gfs_store_kind(const struct gfs_storefs *st) {
    return cat_kind_name(st->kind);
}

size_t gfs_store_n_models(const struct gfs_storefs *st) {
    return st->list.n;
}

void gfs_store_close(struct gfs_storefs *st) {
    if (!st)
        return;
    for (size_t k = 0; k < st->n_nodes; k++) {
        struct node *nd = &st->nodes[k];
        gfs_model_close(nd->fs);
        free(nd->path);
        free(nd->kids);
        free(nd->line);
    }
    free(st->nodes);
    free(st->node_of);
    cat_list_free(&st->list);
    if (st->dirfd >= 0)
        close(st->dirfd);
    free(st->dir);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
    free(st);
}
