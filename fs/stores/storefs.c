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
 * slot, session/mounts.h).  A node not in the last scan is not listed
 * nor looked up, and a model still open keeps serving what it has open,
 * as a deleted file does.
 *
 * Forgetting.  Names that leave the store are told to the kernel
 * (fuse_lowlevel_notify_inval_entry, by inval_thread: never in a
 * request's path, where a lookup holds its directory's lock), which
 * drops their dentries and sends FORGET; a node gone from the store,
 * closed, with no live child and no lookup the kernel holds, is freed and
 * its index used again (a new generation), so memory follows what the
 * store lists, however often its names change.  A name that comes back
 * while the kernel still holds it gets its old numbers.
 *
 * Freshness.  A lookup or a listing of a store directory asks the
 * catalog for the store's stamp (cat_stamp: a few stats) at most once a
 * second, and scans again when it changed: new models appear, removed
 * ones go, within a second.  A Hub repo is listed once, at mount.
 *
 * Bounds.  At most max_open models are open at once (-o max_models, and
 * a quarter of RLIMIT_NOFILE at five descriptors a model): opening one
 * more closes the least recently used model that nothing holds (no
 * request in flight, no open file, no FILE in meta/, and for a request
 * of a user other than the mount's owner no edit not yet committed: the
 * owner's request commits them first); when none can go, the open fails
 * with EMFILE and one log line.  Other users hold files open in a share
 * of the models only (storeusers.c).
 *
 * Locks.  st->mu guards the nodes, the list and the counts; it is taken
 * before any model's locks (eviction asks a model whether it holds
 * edits) and never while a model's handler runs.  A model being opened
 * is marked so (opening) and opened without st->mu; others wanting it
 * wait on st->cv.
 */
#include "../base/base.h"
#include "../edits/edits.h"
#include "../views/views.h"
#include "storefs.h"
#include "../model.h"
#include "../source/source.h"

#include "../../status.h"
#include "../ops.h"

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

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

struct gfs_storefs *gfs_st_of(fuse_req_t req) {
    return ((struct gfs_mount *)fuse_req_userdata(req))->store;
}

/* ---- the tree of names ---------------------------------------------- */

/* The child of dir named base (len bytes), or -1: a binary search of its
 * sorted children.  *at: where it is or would go. */
int64_t gfs_st_kid_find(const struct gfs_storefs *st, const struct node *dir,
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
    size_t k = st->n_free ? st->free[st->n_free - 1] : st->n_nodes;
    if (!st->n_free && st->n_nodes == st->cap_nodes) {
        size_t cap = st->cap_nodes ? st->cap_nodes * 2 : 64;
        if (cap > ((size_t)1 << (64 - GFS_INO_SLOT_SHIFT)) - 1)
            return -1;
        struct node *v = realloc(st->nodes, cap * sizeof *v);
        if (!v)
            return -1;
        st->nodes = v, st->cap_nodes = cap;
    }
    struct node *n = &st->nodes[k];
    char *p = strndup(path, len);
    if (!p)
        return -1;
    memset(n, 0, sizeof *n);
    n->path = p;
    const char *slash = strrchr(n->path, '/');
    n->base = slash ? slash + 1 : n->path;
    n->parent = parent;
    n->model = model;
    n->alias = -1;
    n->gen = ++st->gen;
    if (k != parent) /* the root is its own parent */
        st->nodes[parent].n_live++;
    if (st->n_free)
        st->n_free--;
    else
        st->n_nodes++;
    return (int64_t)k;
}

/* ---- forgetting --------------------------------------------------------- */

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
        int64_t k = gfs_st_kid_find(st, &st->nodes[dir], p, len, &at);
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

/* The store's lines (the catalog's, storeops.c's) name the store's files,
 * whose names anyone who can write in it chooses: a control byte is
 * written \xHH, so that no name forges a line or drives a terminal. */
void gfs_st_log(void *u, const char *line) {
    struct gfs_storefs *st = u;
    char out[4 * 1024 + 1];
    size_t o = 0;
    for (const char *p = line; *p && o + 5 <= sizeof out; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x",
                                  (unsigned char)*p);
        else
            out[o++] = *p;
    out[o] = 0;
    gfs_log_line(&st->mount->log, out);
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

/* Gives open model k the live views' names of its aliases present now
 * (struct gfs, alias_names): BASE GFS_ST_LIVE_EXT of each alias whose last
 * component is not the model's own, once each.  Caller holds st->mu. */
static void aliases_give(struct gfs_storefs *st, size_t k) {
    struct gguf_buf b = {0};
    size_t n = 0;
    struct node *nd = &st->nodes[k];
    for (size_t j = 1; nd->fs && j < st->n_nodes; j++) {
        const struct node *a = &st->nodes[j];
        if (!a->present || a->alias != (int64_t)k ||
            !strcmp(a->base, nd->base) || strlen(a->base) > 250)
            continue;
        char nm[256];
        snprintf(nm, sizeof nm, "%s" GFS_ST_LIVE_EXT, a->base);
        int seen = 0; /* two aliases of one last component: one name */
        for (size_t i = 0, at = 0; !seen && i < n;
             i++, at += strlen((char *)b.p + at) + 1)
            seen = !strcmp((char *)b.p + at, nm);
        if (seen)
            continue;
        if (gguf_buf_add(&b, nm, strlen(nm) + 1) != GGUF_OK)
            break; /* out of memory: the names made so far */
        n++;
    }
    if (nd->fs)
        gfs_model_set_aliases(nd->fs, n ? (char *)b.p : NULL, n);
    if (!n || !nd->fs)
        gguf_buf_free(&b);
}

/* The store's list read anew into l: its files (manifests, refs) or its
 * server's pages.  No lock needed, none held: a store's file is read
 * without st->mu (a slow or hostile one holds this request only).  0, or
 * -1 with msg. */
static int list_read(struct gfs_storefs *st, struct cat_list *l, char *msg,
                     size_t n) {
    memset(l, 0, sizeof *l);
    if (gfs_st_remote(st))
        return gfs_remote_list(st->dir, &st->o.remote, gfs_st_log, st, l, msg,
                               n);
    return cat_scan(st->dirfd, st->kind, l, gfs_st_log, st, msg, n);
}

/* Marks what list l (taken) holds as the store's.  Caller holds st->mu.
 * 0, or -1 with msg (the old list is kept). */
static int list_install(struct gfs_storefs *st, struct cat_list l, char *msg,
                        size_t n) {
    size_t n_was = st->n_nodes;
    unsigned char *was = calloc(n_was ? n_was : 1, 1);
    for (size_t k = 0; k < st->n_nodes; k++) {
        if (was)
            was[k] = (unsigned char)st->nodes[k].present;
        st->nodes[k].present = 0;
        st->nodes[k].fresh = 0; /* a name or a file may have changed */
        st->nodes[k].cm = NULL;
        st->nodes[k].alias = -1; /* the present ones' marked again */
    }
    st->nodes[0].present = 1;
    uint32_t *node_of = calloc(l.n ? l.n : 1, sizeof *node_of);
    for (size_t i = 0; i < l.n; i++) {
        /* The root's models.tsv keeps its name: a model of that name is
         * NAME@model, as a name that is also a directory is. */
        const char *name = l.models[i].name;
        int64_t k = -1;
        if (node_of && strcmp(name, "models.tsv") == 0)
            k = node_put(st, "models.tsv@model", 1);
        else if (node_of)
            k = node_put(st, name, 1);
        if (k < 0) {
            snprintf(msg, n, "%s: out of memory", st->dir);
            cat_list_free(&l);
            free(node_of);
            free(was);
            return -1;
        }
        node_of[i] = (uint32_t)k;
        struct node *nd = &st->nodes[k];
        nd->cm = &l.models[i];
        const struct cat_file *f0 = &nd->cm->files[0];
        if (nd->line && (f0->dev != nd->line_dev || f0->ino != nd->line_ino ||
                         nd->cm->size != nd->line_size)) {
            free(nd->line); /* another file now: made again */
            nd->line = NULL;
        }
    }
    mark_aliases(st, &l, node_of);
    for (size_t k = 1; k < st->n_nodes; k++)
        aliases_give(st, k);
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
    if (was)
        gfs_st_queue_gone(st, was, n_was);
    free(was);
    for (size_t k = st->n_nodes; k-- > 1;)
        gfs_st_maybe_free(st, k);
    return 0;
}

/* Reads the store and marks what it holds (at mount: no lock).  0, or -1
 * with msg. */
static int rescan(struct gfs_storefs *st, char *msg, size_t n) {
    struct cat_list l;
    return list_read(st, &l, msg, n) ? -1 : list_install(st, l, msg, n);
}

/* At most once a second: scan again if the store's stamp moved.  Caller
 * holds st->mu, which is let go while the store is read (the stamp's
 * stats, the scan): one request scans at a time (scanning), the others
 * answer from the list they have meanwhile. */
void gfs_st_refresh(struct gfs_storefs *st) {
    double t = now_s();
    if (gfs_st_remote(st) || st->scanning || t - st->checked < RESCAN_EVERY_S)
        return;
    st->checked = t;
    st->scanning = 1;
    uint64_t old = st->stamp;
    pthread_mutex_unlock(&st->mu);
    uint64_t stamp = cat_stamp(st->dirfd, st->kind);
    struct cat_list l;
    char msg[512];
    int r = stamp && stamp == old ? 1 : list_read(st, &l, msg, sizeof msg);
    pthread_mutex_lock(&st->mu);
    if (r == 0)
        r = list_install(st, l, msg, sizeof msg);
    if (r < 0)
        gfs_st_log(st, msg);
    else if (r == 0)
        st->stamp = stamp;
    st->scanning = 0;
}

/* ---- models ----------------------------------------------------------- */

/* Whether an open model may be closed: nothing holds it (no request in
 * flight, no open file, no FILE in meta/, no failed commit).  Edits not
 * yet committed are committed at the close when the mount's owner asks
 * (owner); another user's reads never commit them.  Caller holds st->mu;
 * takes the model's lock (read). */
static int evictable(struct node *nd, int owner) {
    struct gfs *fs = nd->fs;
    if (!fs || nd->refs || nd->opening)
        return 0;
    pthread_rwlock_rdlock(&fs->lock);
    int clean = !fs->scratch && !fs->edits.commit_failed &&
                (owner || !gfs_edits_uncommitted(fs));
    pthread_rwlock_unlock(&fs->lock);
    pthread_mutex_lock(&fs->fh_lock);
    int idle = !fs->open_fhs;
    pthread_mutex_unlock(&fs->fh_lock);
    return clean && idle;
}

/* Whether open model nd's GGUF is another file than the scan saw (a
 * commit under a passthrough reader wrote a new one and renamed it over,
 * gfs_pt_commit_flags).  Caller holds st->mu. */
static int file_renewed(const struct node *nd) {
    const struct cat_file *f = nd->cm ? &nd->cm->files[0] : NULL;
    return f && (f->dev || f->ino) &&
           (nd->fs->st.st_dev != f->dev || nd->fs->st.st_ino != f->ino);
}

/* Whether closing nd's model leaves the kernel's view of its root what
 * a fresh open would give (nd->fresh; its live view's entry kept).
 * Caller holds st->mu; the model is not in use. */
static void keep_fresh(struct node *nd) {
    const char *name = NULL;
    /* named as the store's LOOKUP asks (gfs_st_is_live) */
    nd->fresh = !nd->renewed &&
                gfs_model_fresh_view(nd->fs, &nd->live_e, &name) &&
                gfs_st_is_live(nd, name);
    nd->file_st = nd->fs->st; /* a commit refreshed it */
}

/* Room for one more open model: the least recently used one that nothing
 * holds is closed when max_open are open, its edits committed first as an
 * unmount commits them (a model whose commit fails stays open, its edits
 * saved aside as the commit says, and is not chosen again).  When every
 * open model is held, it waits up to HOLD_WAIT_MS for one to be let go
 * (st->mu dropped meanwhile), then fails: EMFILE (logged).  Caller holds
 * st->mu (a commit holds it meanwhile). */
int gfs_st_make_room(struct gfs_storefs *st, int owner) {
    int waited = 0; /* ms */
    while (st->n_open >= st->max_open) {
        struct node *lru = NULL;
        for (size_t k = 1; k < st->n_nodes; k++) {
            struct node *nd = &st->nodes[k];
            if (nd->fs && (!lru || nd->used < lru->used) &&
                evictable(nd, owner))
                lru = nd;
        }
        if (!lru && waited < HOLD_WAIT_MS) {
            /* A file just closed is released a moment later, a request
             * ends soon: wait for one to let go (gfs_store_leave). */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 50 * 1000000L;
            if (until.tv_nsec >= 1000000000L)
                until.tv_sec++, until.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&st->cv, &st->mu, &until);
            waited += 50;
            continue;
        }
        if (!lru) {
            gfs_st_log(st, "models: every open model is in use (-o "
                           "max_models=N opens more at once)");
            return EMFILE;
        }
        gfs_model_destroy(lru->fs);
        if (lru->fs->edits.commit_failed)
            continue; /* stays open: not evictable any more */
        lru->renewed = file_renewed(lru);
        lru->listed = atomic_load(&lru->fs->root_listed);
        keep_fresh(lru);
        gfs_model_close(lru->fs);
        lru->fs = NULL;
        st->n_open--;
        gfs_st_maybe_free(st, (size_t)(lru - st->nodes));
    }
    return 0;
}

/* What opening a model needs, copied under st->mu (the list may be
 * replaced while it opens). */
struct open_job {
    struct gfs_model_args a;
    struct gfs_model_file *files;
    char *live, *first, *name_key;
};

static void job_free(struct open_job *j) {
    for (int i = 0; j->files && i < j->a.n_files; i++) {
        free((char *)j->files[i].path);
        free((char *)j->files[i].name);
        if (j->files[i].dfd >= 0)
            close(j->files[i].dfd);
    }
    free(j->files);
    free(j->live);
    free(j->first);
    free(j->name_key);
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

int gfs_st_is_live(const struct node *nd, const char *name) {
    size_t n = strlen(nd->base);
    return strncmp(name, nd->base, n) == 0 &&
           strcmp(name + n, GFS_ST_LIVE_EXT) == 0;
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
    for (size_t i = 0; i < cm->n_files; i++)
        j->files[i].dfd = -1; /* job_dirs' */
    for (size_t i = 0; i < cm->n_files; i++) {
        const struct cat_file *f = &cm->files[i];
        char *p = NULL;
        if (gfs_st_remote(st) ? !(p = strdup(f->path))
                              : asprintf(&p, "%s/%s", st->dir, f->path) < 0)
            return ENOMEM;
        j->files[i].path = p;
        if (!(j->files[i].name = strdup(f->name)))
            return ENOMEM;
        j->files[i].dev = f->dev;
        j->files[i].ino = f->ino;
    }
    if (asprintf(&j->live, "%s" GFS_ST_LIVE_EXT, nd->base) < 0 ||
        !(j->first = strdup(j->files[0].path)))
        return ENOMEM;
    j->a.file = j->first;
    j->a.o = st->o;
    /* Named by its hash: never written; edits go to its blob's overlay,
     * which a read-only mount shows too (as -o ro,overlay), and follow
     * its name to a new blob (edits/carry.c). */
    if (cm->content_addressed) {
        j->a.o.overlay = 1;
        if (!gfs_st_remote(st) &&
            asprintf(&j->name_key, "%s\n%s", st->dir, cm->name) < 0) {
            j->name_key = NULL;
            return ENOMEM;
        }
        j->a.name_key = j->name_key;
    }
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

/* The directories of a local store's model's files, opened beneath the
 * store (struct gfs_model_file's dfd), without st->mu held: 0, or an
 * errno logged with the file's name (a component is now a symlink: the
 * store changed since its scan). */
static int job_dirs(struct gfs_storefs *st, struct open_job *j) {
    size_t top = strlen(st->dir) + 1; /* path: st->dir "/" rel */
    for (int i = 0; !gfs_st_remote(st) && i < j->a.n_files; i++) {
        const char *rel = j->files[i].path + top;
        if ((j->files[i].dfd = cat_open_dir_of(st->dirfd, rel)) < 0) {
            int e = errno;
            char line[600];
            snprintf(line, sizeof line, "%s: %s", j->files[i].path,
                     e == ELOOP || e == EXDEV || e == ENOTDIR
                         ? "a directory on its way is now a symbolic link "
                           "(the store changed since it was read)"
                         : strerror(e));
            gfs_st_log(st, line);
            return e;
        }
    }
    return 0;
}

/* Opens node nd's model without st->mu held (dropped and taken again);
 * 0 or an errno.  Caller holds st->mu and has set nd->opening. */
int gfs_st_open_model(struct gfs_storefs *st, size_t k) {
    struct open_job j;
    int err = job_make(st, &st->nodes[k], &j), status;
    uint64_t listed = st->nodes[k].listed;
    struct gfs *fs = NULL;
    pthread_mutex_unlock(&st->mu);
    if (!err)
        err = job_dirs(st, &j);
    if (err)
        gfs_extras_free(j.a.extras);
    if (!err && (fs = gfs_model_open(&j.a, &status)) &&
        gfs_views_init(fs, st->o.ggml, j.a.file) != 0) {
        gfs_model_close(fs);
        fs = NULL;
    }
    if (!err && !fs)
        err = EIO;
    if (fs) /* before any request sees it */
        atomic_store(&fs->root_listed, listed);
    job_free(&j);
    pthread_mutex_lock(&st->mu);
    struct node *nd = &st->nodes[k]; /* nodes may have moved */
    nd->fs = fs;
    nd->fresh = 0; /* the model answers for itself */
    if (fs) {
        st->n_open++;
        aliases_give(st, k);
    } else
        nd->failed = now_s();
    return err;
}

int gfs_st_ensure_open(struct gfs_storefs *st, size_t k) {
    return gfs_st_ensure_open_as(st, k, 0);
}

int gfs_st_ensure_open_as(struct gfs_storefs *st, size_t k, int owner) {
    for (;;) {
        while (st->nodes[k].opening)
            pthread_cond_wait(&st->cv, &st->mu);
        struct node *nd = &st->nodes[k];
        if (nd->fs)
            return 0;
        if (!nd->cm) /* gone from the store, and closed */
            return ENOENT;
        if (nd->failed && now_s() - nd->failed < FAIL_RETRY_S)
            return EIO;
        if (nd->renewed) { /* else its open refuses the new file */
            char msg[512];
            nd->renewed = 0;
            if (rescan(st, msg, sizeof msg) != 0)
                gfs_st_log(st, msg);
            continue; /* nodes may have moved */
        }
        int err = gfs_st_make_room(st, owner);
        if (err)
            return err;
        if (st->nodes[k].fs || st->nodes[k].opening)
            continue; /* another request opened it while room was made */
        st->nodes[k].opening = 1;
        err = gfs_st_open_model(st, k);
        st->nodes[k].opening = 0;
        pthread_cond_broadcast(&st->cv);
        return err;
    }
}

/* A request to a store's model: the user's checks first (storeusers.c:
 * read on disk, the files another user holds open), before the model is
 * opened, so that a user who may not read it opens nothing. */
enum gfs_route gfs_store_route(struct gfs_storefs *st, fuse_req_t req,
                               fuse_ino_t *ino, struct gfs **out,
                               enum gfs_enter how) {
    size_t k = (size_t)(*ino >> GFS_INO_SLOT_SHIFT);
    uid_t uid = fuse_req_ctx(req)->uid;
    int owner = gfs_st_owner(uid), err = 0;
    char why[200] = ""; /* gfs_st_may_hold's refusal, logged unlocked */
    if (k == 0)
        return GFS_TO_STORE;
    pthread_mutex_lock(&st->mu);
    if (k >= st->n_nodes || !st->nodes[k].model || st->nodes[k].freed) {
        err = ENOENT;
        goto out;
    }
    uint32_t gen = st->nodes[k].gen;
    if (!owner && how != GFS_ON_HANDLE)
        err = gfs_st_may_read(st, req, k);
    if (!err && (st->nodes[k].freed || st->nodes[k].gen != gen))
        err = ENOENT; /* another model's now (st->mu was let go) */
    if (!err)
        err = gfs_st_ensure_open_as(st, k, owner);
    if (!err && !owner && how == GFS_TO_OPEN)
        err = gfs_st_may_hold(st, uid, k, why, sizeof why);
    struct node *nd = &st->nodes[k];
    if (!err) {
        nd->refs++;
        nd->used = ++st->tick;
        *out = nd->fs;
        *ino &= GFS_INO_MODEL_SPAN - 1;
    }
out:
    pthread_mutex_unlock(&st->mu);
    if (*why)
        gfs_st_log(st, why);
    if (err) {
        fuse_reply_err(req, err);
        return GFS_REPLIED;
    }
    return GFS_TO_MODEL;
}

void gfs_store_leave(struct gfs_storefs *st, struct gfs *fs) {
    size_t k = (size_t)(fs->ino_base >> GFS_INO_SLOT_SHIFT);
    pthread_mutex_lock(&st->mu);
    if (--st->nodes[k].refs == 0)
        pthread_cond_broadcast(&st->cv); /* make_room may wait for it */
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

/* ---- the store's life -------------------------------------------------- */

int gfs_store_is(const char *source) {
    struct stat sb;
    if (cat_hub_is_repo(source) || cat_s3_is_store(source))
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

/* A store that lists no model is mounted (models may come), with one
 * line saying so and, for a folder, where the tools keep theirs. */
static void empty_note(const struct gfs_storefs *st) {
    int folder = st->kind == CAT_DIR || st->kind == CAT_LMSTUDIO;
    fprintf(stderr, "ggufs: %s: no models found (an empty %s store)%s\n",
            st->dir, cat_kind_name(st->kind),
            folder ? "; ollama's store is the directory with manifests/ and "
                     "blobs/ (~/.ollama/models), the Hugging Face cache the "
                     "one with models--*/ (~/.cache/huggingface/hub)"
                   : "");
}

/* The kind of the store st->dirfd, detected; a tool's home directory
 * (~/.ollama, ~/.cache/huggingface: what their docs name) is no store but
 * holds one: that one is mounted, and the command says so (one line); a
 * folder without one is the folder.  0, or -1 after one line. */
static int descend_home(struct gfs_storefs *st) {
    const char *sub = NULL;
    st->kind = cat_detect(st->dirfd);
    enum cat_kind k = cat_detect_below(st->dirfd, &sub);
    if (k == CAT_NONE)
        return 0;
    char *dir = NULL;
    int fd = -1;
    if (asprintf(&dir, "%s/%s", st->dir, sub) < 0) {
        fprintf(stderr, "ggufs: %s: out of memory\n", st->o.file);
        return -1;
    }
    if ((fd = openat(st->dirfd, sub,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        fstat(fd, &st->st) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        free(dir);
        return -1;
    }
    fprintf(stderr,
            "ggufs: %s holds the %s store %s: mounting that one (-o "
            "store=dir mounts the folder itself)\n",
            st->o.file, cat_kind_name(k), dir);
    close(st->dirfd);
    free(st->dir);
    st->dirfd = fd, st->dir = dir, st->kind = k;
    return 0;
}

/* The file a model name of the store leads to now, resolved (gfs_carry_
 * notes); NULL when the store has no such name. */
/* gfs_carry_notes' now_of: the path the store's name leads to now (the
 * store's resolved path and the scan's, no link on the way: not looked
 * up again), its directory opened beneath the store into *dfd; NULL when
 * the store has no such name or the directory cannot be opened so. */
static const char *name_now(void *u, const char *name, char *buf, size_t n,
                            int *dfd) {
    const struct gfs_storefs *st = u;
    for (size_t i = 0; i < st->list.n; i++) {
        const struct cat_model *cm = &st->list.models[i];
        if (strcmp(cm->name, name) != 0 || !cm->content_addressed)
            continue;
        int k = snprintf(buf, n, "%s/%s", st->dir, cm->files[0].path);
        if (k < 0 || (size_t)k >= n ||
            (*dfd = cat_open_dir_of(st->dirfd, cm->files[0].path)) < 0)
            return NULL;
        return buf;
    }
    return NULL;
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
    /* Absolute, as a single-file mount's: the daemon's directory is /. */
    if ((st->mnt_abs = realpath(mnt, NULL)))
        st->mnt = st->mnt_abs;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    pthread_cond_init(&st->inval_cv, NULL);
    st->max_open = open_bound(o);
    st->kind = o->store ? cat_kind_named(o->store) : CAT_NONE;
    if (o->store && (st->kind == CAT_NONE || st->kind >= CAT_HUB)) {
        fprintf(stderr,
                "ggufs: -o store=%s: expected ollama, hf, lmstudio or dir\n",
                o->store);
        *status = EXIT_USAGE;
        goto fail;
    }
    if (cat_hub_is_repo(o->file) || cat_s3_is_store(o->file)) {
        st->kind = cat_hub_is_repo(o->file) ? CAT_HUB : CAT_S3;
        st->dir = strdup(o->file);
    } else if (!(st->dir = realpath(o->file, NULL)) ||
               (st->dirfd = open(st->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                              O_CLOEXEC)) < 0 ||
               fstat(st->dirfd, &st->st) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", o->file, strerror(errno));
        goto fail;
    }
    if (gfs_st_remote(st)) {
        clock_gettime(CLOCK_REALTIME, &st->st.st_mtim);
        st->st.st_atim = st->st.st_ctim = st->st.st_mtim;
    }
    if (st->kind == CAT_NONE && descend_home(st) != 0)
        goto fail;
    if (!st->dir || node_new(st, 0, "", 0, 0) != 0) {
        fprintf(stderr, "ggufs: %s: out of memory\n", o->file);
        goto fail;
    }
    st->nodes[0].present = 1;
    st->stamp = gfs_st_remote(st) ? 0 : cat_stamp(st->dirfd, st->kind);
    st->checked = now_s();
    if (rescan(st, msg, sizeof msg) != 0) {
        fprintf(stderr, "ggufs: %s\n", msg);
        goto fail;
    }
    if (!st->list.n)
        empty_note(st);
    /* Models whose names lead to new files: said while stderr is the
     * user's (their edits are carried when first opened). */
    if (!gfs_st_remote(st))
        gfs_carry_notes(st->dir, name_now, st);
    mount->store = st;
    return st;
fail:
    gfs_store_close(st);
    return NULL;
}

const char *gfs_store_dir(const struct gfs_storefs *st) {
    return st->dir;
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
    gfs_store_stop(st);
    for (size_t k = 0; k < st->n_nodes; k++) {
        struct node *nd = &st->nodes[k];
        gfs_model_close(nd->fs);
        free(nd->path);
        free(nd->kids);
        free(nd->line);
    }
    free(st->nodes);
    free(st->free);
    free(st->node_of);
    cat_list_free(&st->list);
    if (st->dirfd >= 0)
        close(st->dirfd);
    free(st->dir);
    free(st->mnt_abs);
    if (st->inval_stuck)
        return; /* its thread may still take st->mu (gfs_store_stop) */
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
    pthread_cond_destroy(&st->inval_cv);
    free(st);
}
