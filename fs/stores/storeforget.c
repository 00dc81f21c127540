/*
 * storeforget.c - how a store mount forgets (storefs.c, Forgetting): the
 * kernel's FORGETs counted off each node, a node gone from the store and
 * held by nothing freed (its index reused), and the names that left the
 * store told to the kernel by the inval thread, never from a request (a
 * lookup holds its directory's lock, which the kernel's invalidation
 * takes).  Locks: st->mu, as storefs.c says; the inval thread takes it
 * only to take its queue, never while it calls the kernel.
 */
#include "storefs.h"
#include "../ops.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Whether node k may be freed: gone from the store, closed, nothing in
 * it the kernel or a request holds. */
static int node_unused(const struct gfs_storefs *st, size_t k) {
    const struct node *nd = &st->nodes[k];
    return k > 0 && !nd->freed && !nd->present && !nd->nlookup && !nd->n_live &&
           !nd->fs && !nd->opening && !nd->refs;
}

void gfs_st_maybe_free(struct gfs_storefs *st, size_t k) {
    while (k < st->n_nodes && node_unused(st, k)) {
        if (st->n_free == st->cap_free) {
            size_t cap = st->cap_free ? st->cap_free * 2 : 64;
            uint32_t *v = realloc(st->free, cap * sizeof *v);
            if (!v)
                return; /* kept: freed at a later forget */
            st->free = v, st->cap_free = cap;
        }
        struct node *nd = &st->nodes[k];
        free(nd->path);
        free(nd->kids);
        free(nd->line);
        nd->path = NULL, nd->kids = NULL, nd->line = NULL;
        nd->fresh = 0;
        nd->n_kids = nd->cap_kids = 0;
        nd->listed = GFS_LISTED_NONE;
        nd->freed = 1;
        st->free[st->n_free++] = (uint32_t)k;
        k = nd->parent; /* the directory may go with it */
        st->nodes[k].n_live--;
    }
}

void gfs_store_forget(struct gfs_storefs *st, fuse_ino_t ino, uint64_t n) {
    size_t k = (size_t)(ino >> GFS_INO_SLOT_SHIFT);
    if (k == 0 && ino >= GFS_STORE_DIR0)
        k = (size_t)(ino - GFS_STORE_DIR0);
    else if (k == 0 || (ino & (GFS_INO_MODEL_SPAN - 1)) != GFS_INO_ROOT)
        return; /* the root, models.tsv, a model's own inode */
    pthread_mutex_lock(&st->mu);
    if (k < st->n_nodes && !st->nodes[k].freed) {
        struct node *nd = &st->nodes[k];
        nd->nlookup = nd->nlookup > n ? nd->nlookup - n : 0;
        gfs_st_maybe_free(st, k);
    }
    pthread_mutex_unlock(&st->mu);
}

/* Tells the kernel the names that left the store (st->inval), outside
 * every request: it drops their dentries, then forgets their inodes. */
static void *inval_main(void *u) {
    struct gfs_storefs *st = u;
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (!st->n_inval && !st->inval_quit)
            pthread_cond_wait(&st->inval_cv, &st->mu);
        if (st->inval_quit)
            break;
        struct gfs_st_inval *v = st->inval;
        size_t n = st->n_inval;
        st->inval = NULL, st->n_inval = 0;
        pthread_mutex_unlock(&st->mu);
        for (size_t i = 0; i < n; i++) {
            /* Read without st->mu: once set, the session may be gone. */
            if (!__atomic_load_n(&st->inval_quit, __ATOMIC_ACQUIRE) &&
                st->mount->se)
                fuse_lowlevel_notify_inval_entry(st->mount->se, v[i].parent,
                                                 v[i].name, strlen(v[i].name));
            free(v[i].name);
        }
        free(v);
        pthread_mutex_lock(&st->mu);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* Whether node k left the store in the last scan (was: the present flags
 * before it) while the kernel holds it, below a directory still there:
 * the kernel drops the dentries below a name it is told of, so the
 * topmost name that left is enough. */
static int left(const struct gfs_storefs *st, const unsigned char *was,
                size_t k) {
    const struct node *nd = &st->nodes[k];
    return was[k] && !nd->present && nd->nlookup &&
           st->nodes[nd->parent].present;
}

/* The names that left queued for inval_main; at most GFS_ST_INVAL_MAX
 * wait (the kernel drops the others' dentries under memory pressure).
 * Caller holds st->mu. */
#define GFS_ST_INVAL_MAX 65536
void gfs_st_queue_gone(struct gfs_storefs *st, const unsigned char *was,
                       size_t n) {
    size_t add = 0;
    for (size_t k = 1; k < n; k++)
        add += (size_t)left(st, was, k);
    if (add > GFS_ST_INVAL_MAX - st->n_inval)
        add = GFS_ST_INVAL_MAX - st->n_inval;
    if (!add || st->inval_quit)
        return;
    /* Started at the first need: the daemon has forked by then. */
    if (!st->inval_run)
        st->inval_run =
            pthread_create(&st->inval_thread, NULL, inval_main, st) == 0;
    struct gfs_st_inval *v =
        st->inval_run ? realloc(st->inval, (st->n_inval + add) * sizeof *v)
                      : NULL;
    if (!v)
        return;
    st->inval = v;
    for (size_t k = 1; k < n && add; k++) {
        const struct node *nd = &st->nodes[k];
        if (!left(st, was, k) || !(v[st->n_inval].name = strdup(nd->base)))
            continue;
        v[st->n_inval++].parent =
            nd->parent ? GFS_STORE_DIR0 + nd->parent : FUSE_ROOT_ID;
        add--;
    }
    pthread_cond_signal(&st->inval_cv);
}

/* The inval thread stopped.  It may be stuck in the kernel: a lookup
 * left unanswered when the session ended holds the directory's lock its
 * invalidation waits for, until the session's descriptor closes, after
 * this.  Then it is left to the process's exit, with the store it uses
 * (inval_stuck: gfs_store_close keeps st), never waited for. */
void gfs_store_stop(struct gfs_storefs *st) {
    pthread_mutex_lock(&st->mu);
    int run = st->inval_run;
    __atomic_store_n(&st->inval_quit, 1, __ATOMIC_RELEASE);
    st->inval_run = 0;
    pthread_cond_signal(&st->inval_cv);
    pthread_mutex_unlock(&st->mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    if (run && pthread_timedjoin_np(st->inval_thread, NULL, &until) != 0) {
        pthread_detach(st->inval_thread);
        st->inval_stuck = 1;
    }
    for (size_t i = 0; i < st->n_inval; i++)
        free(st->inval[i].name);
    free(st->inval);
    st->inval = NULL, st->n_inval = 0;
}
