/*
 * storeusers.c - what a store mount lets users other than its owner do
 * (issue 33).  The owner is root or the daemon's user; with -o
 * allow_other others come in, and the mount must not widen what they can
 * read on disk nor let them take the owner's room.
 *
 * Reading.  Everything inside a model's directory (its tree; the root's
 * attributes excepted, which a listing shows) is another user's only if
 * that user could read every file of the model on disk, the folders on
 * the way included.  The kernel says so: each file is asked with
 * faccessat2(AT_EACCESS) while this worker thread's filesystem ids and
 * groups are the request's (setfsuid, setfsgid and the raw setgroups
 * system call: Linux keeps credentials per thread, and glibc's setgroups
 * would set every thread's), so modes, ACLs and security modules count
 * as they do on disk.  The ids are restored before anything else runs on
 * the thread; a daemon that cannot take another user's ids (not root)
 * lets no other user in.  Names (directories of names, models' roots and
 * aliases) are listed to all, as the store's catalog; models.tsv's line
 * of a model the user may not read keeps its name only.  A remote
 * store's models (a Hub repo, an S3 prefix) are fetched with the
 * daemon's credentials: shown to every user the mount lets in.  A
 * verdict is kept per model for the last two users (their ids and
 * groups), RESCAN_EVERY_S.
 *
 * Holding.  A file held open pins its model (it cannot be closed to make
 * room).  Another user holds files open in at most max_open / 8 models
 * (at least one), all other users together in at most max_open / 2 (at
 * least one): past that, their opens fail with EMFILE and the owner keeps
 * room for its own.  A model with edits not yet committed is never closed
 * for another user's request (storefs.c, evictable).
 */
#include "storefs.h"
#include "../node/node.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_faccessat2
#define SYS_faccessat2 439 /* one number on every architecture */
#endif

#define GROUPS_MAX 65536 /* the kernel's NGROUPS_MAX */

int gfs_st_owner(uid_t uid) {
    return uid == 0 || uid == getuid();
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* The request's supplementary groups (malloc'd, *n of them); none when
 * they cannot be read (the process left): fewer rights, never more. */
static gid_t *req_groups(fuse_req_t req, int *n) {
    int cap = 64;
    gid_t *v = malloc((size_t)cap * sizeof *v);
    int got = v ? fuse_req_getgroups(req, cap, v) : -1;
    if (got > cap && got <= GROUPS_MAX) {
        gid_t *w = realloc(v, (size_t)got * sizeof *w);
        if (w)
            v = w, cap = got, got = fuse_req_getgroups(req, cap, v);
        else
            got = -1;
    }
    *n = got >= 0 && got <= cap ? got : 0;
    return v;
}

/* The daemon's own ids back on this thread; a thread that cannot get
 * them back would answer the next request with another user's rights:
 * the daemon stops. */
static void ids_restore(const gid_t *groups, int n) {
    setfsuid(geteuid());
    setfsgid(getegid());
    if (syscall(SYS_setgroups, (size_t)n, groups) != 0 ||
        (uid_t)setfsuid((uid_t)-1) != geteuid() ||
        (gid_t)setfsgid((gid_t)-1) != getegid()) {
        fprintf(stderr, "ggufs: cannot restore the daemon's ids: %s\n",
                strerror(errno));
        abort();
    }
}

/* Whether uid/gid with the request's groups could read every path (the
 * kernel's check, on this thread's ids); 0 when it cannot be asked. */
static int user_reads(uid_t uid, gid_t gid, const gid_t *groups, int ng,
                      char *const *paths, size_t n) {
    int ns = getgroups(0, NULL), ok = 0;
    gid_t *saved = ns >= 0 ? malloc(((size_t)ns + 1) * sizeof *saved) : NULL;
    if (!saved || getgroups(ns, saved) != ns) {
        free(saved);
        return 0;
    }
    if (syscall(SYS_setgroups, (size_t)ng, groups) == 0) {
        setfsgid(gid);
        setfsuid(uid);
        ok = (uid_t)setfsuid((uid_t)-1) == uid &&
             (gid_t)setfsgid((gid_t)-1) == gid;
        for (size_t i = 0; ok && i < n; i++)
            ok = syscall(SYS_faccessat2, AT_FDCWD, paths[i], R_OK,
                         AT_EACCESS) == 0;
        ids_restore(saved, ns);
    }
    free(saved);
    return ok;
}

/* FNV-1a of a list of groups: a verdict's key with the user's ids. */
static uint64_t groups_hash(const gid_t *g, int n) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)g[i]) * 1099511628211ULL;
    return h;
}

/* The absolute paths of a model's files and ollama layers (malloc'd);
 * NULL out of memory. */
static char **paths_of(const struct gfs_storefs *st, const struct cat_model *cm,
                       size_t *n) {
    size_t total = cm->n_files + cm->n_layers;
    char **v = calloc(total ? total : 1, sizeof *v);
    for (size_t i = 0; v && i < total; i++) {
        const struct cat_file *f =
            i < cm->n_files ? &cm->files[i] : &cm->layers[i - cm->n_files].file;
        if (asprintf(&v[i], "%s/%s", st->dir, f->path) < 0) {
            v[i] = NULL;
            for (size_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return NULL;
        }
    }
    *n = total;
    return v;
}

int gfs_st_may_read(struct gfs_storefs *st, fuse_req_t req, size_t k) {
    const struct fuse_ctx *c = fuse_req_ctx(req);
    struct node *nd = &st->nodes[k];
    if (gfs_st_remote(st) || gfs_st_owner(c->uid))
        return 0;
    if (!nd->cm) /* gone from the store: gone for other users */
        return ENOENT;
    double t = now_s();
    int ng;
    gid_t *groups = req_groups(req, &ng);
    uint64_t gh = groups_hash(groups, ng);
    for (int i = 0; i < 2; i++)
        if (nd->seen[i].t && nd->seen[i].uid == c->uid &&
            nd->seen[i].gid == c->gid && nd->seen[i].groups == gh &&
            t - nd->seen[i].t < RESCAN_EVERY_S) {
            free(groups);
            return nd->seen[i].ok ? 0 : EACCES;
        }
    size_t n = 0;
    char **paths = paths_of(st, nd->cm, &n);
    if (!paths) {
        free(groups);
        return ENOMEM;
    }
    uint32_t gen = nd->gen;
    pthread_mutex_unlock(&st->mu); /* stats of the store: not under mu */
    int ok = user_reads(c->uid, c->gid, groups, ng, paths, n);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    free(groups);
    pthread_mutex_lock(&st->mu);
    nd = &st->nodes[k]; /* nodes may have moved */
    if (!nd->freed && nd->gen == gen) {
        struct gfs_st_seen *s =
            nd->seen[0].t <= nd->seen[1].t ? &nd->seen[0] : &nd->seen[1];
        *s = (struct gfs_st_seen){c->uid, c->gid, gh, ok, t};
    }
    return ok ? 0 : EACCES;
}

/* Whether node j's model holds a handle of uid (*mine) or of a user
 * other than the owner (*other).  Takes its fh_lock. */
static void holders(const struct node *nd, uid_t uid, int *mine, int *other) {
    *mine = *other = 0;
    if (!nd->fs)
        return;
    pthread_mutex_lock(&nd->fs->fh_lock);
    for (const struct gfs_fh *fh = nd->fs->open_fhs; fh; fh = fh->next) {
        *mine |= fh->uid == uid;
        *other |= !gfs_st_owner(fh->uid);
    }
    pthread_mutex_unlock(&nd->fs->fh_lock);
}

int gfs_st_may_hold(struct gfs_storefs *st, uid_t uid, size_t k, char *why,
                    size_t why_size) {
    size_t mine = 0, others = 0;
    int k_mine = 0, k_other = 0;
    for (size_t j = 1; j < st->n_nodes; j++) {
        int m, o;
        holders(&st->nodes[j], uid, &m, &o);
        mine += (size_t)m, others += (size_t)o;
        if (j == k)
            k_mine = m, k_other = o;
    }
    size_t user_cap = st->max_open / 8 ? st->max_open / 8 : 1;
    size_t all_cap = st->max_open / 2 ? st->max_open / 2 : 1;
    if (k_mine || (mine < user_cap && (k_other || others < all_cap)))
        return 0;
    snprintf(why, why_size,
             "models: user %lu holds files open in %zu models, other users "
             "in %zu (at most %zu for one user, %zu for all)",
             (unsigned long)uid, mine, others, user_cap, all_cap);
    return EMFILE;
}

/* A line of models.tsv with the name only. */
static int add_name_only(struct gguf_buf *b, const char *name) {
    static const char dashes[] = "\t-\t-\t-\t-\t-\t-\t-\n";
    return gguf_buf_add(b, name, strlen(name)) != GGUF_OK ||
                   gguf_buf_add(b, dashes, sizeof dashes - 1) != GGUF_OK
               ? ENOMEM
               : 0;
}

int gfs_st_tsv_for(struct gfs_storefs *st, fuse_req_t req, const uint32_t *node,
                   size_t n, struct gguf_buf *b) {
    struct gguf_buf out = {0};
    int err = gguf_buf_add(&out, TSV_HEADER, strlen(TSV_HEADER)) != GGUF_OK
                  ? ENOMEM
                  : 0;
    for (size_t i = 0; !err && i < n; i++) {
        int may = gfs_st_may_read(st, req, node[i]) == 0;
        const struct node *nd = &st->nodes[node[i]];
        if (nd->freed)
            continue; /* gone while it was asked */
        if (may && nd->line)
            err = gguf_buf_add(&out, nd->line, strlen(nd->line)) != GGUF_OK
                      ? ENOMEM
                      : 0;
        else
            err = add_name_only(&out, nd->path);
    }
    gguf_buf_free(b);
    *b = out;
    return err;
}
