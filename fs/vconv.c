/*
 * vconv.c - converting a run of a tensor's blocks to float32, split over
 * the daemon's threads when it is large.
 *
 * A run is cut into chunks of about CHUNK_VALUES values; each chunk reads
 * its own blocks (gfs_data_read, into a buffer of its own) and converts
 * them straight into the caller's output.  The thread that serves the
 * read takes chunks too, so a run small enough for one chunk costs no
 * hand-over, and a large one is shared with the pool's helpers: one per
 * CPU beyond the first, at most MAX_HELPERS, started by the first large
 * run (never before the daemon detaches: threads do not survive its
 * fork).  Memory: per chunk, its input bytes; nothing else.
 *
 * Locks: pool.mu is a leaf, taken with fs->lock held (read) by the
 * serving thread.  The helpers work under that same read lock: the
 * serving thread holds it until every chunk of its run is done.
 */
#include "views.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK_VALUES (64 * 1024)
#define MAX_HELPERS 7

/* One run being converted; lives on the serving thread's stack. */
struct run {
    struct gfs *fs;
    const struct gfs_vt *vt;
    int shard;
    uint64_t pos;      /* file offset of block b0 */
    uint64_t n_blocks; /* in the run */
    uint64_t per;      /* blocks per chunk */
    float *dst;
    atomic_uint_fast64_t next; /* next chunk to take */
    uint64_t n_chunks;
    atomic_int err;
    int users;            /* helpers inside; pool.mu */
    struct run *next_run; /* in pool.runs; pool.mu */
};

struct gfs_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    struct run *runs; /* runs with chunks left */
    int stop;
    int n;
    pthread_t th[MAX_HELPERS];
};

/* Converts chunk c of r; the error is kept in r->err. */
static void do_chunk(struct run *r, uint64_t c) {
    const struct gguf_dq *dq = &r->vt->dq;
    uint64_t first = c * r->per;
    uint64_t n = r->n_blocks - first < r->per ? r->n_blocks - first : r->per;
    size_t in_n = (size_t)(n * dq->size);
    float *out = r->dst + first * dq->blck;
    int err;
    if (dq->type == 0) { /* f32: the bytes are the values */
        err = gfs_data_read(r->fs, r->shard, r->pos + first * dq->size, out,
                            in_n);
    } else {
        void *in = malloc(in_n ? in_n : 1);
        err = in ? gfs_data_read(r->fs, r->shard, r->pos + first * dq->size, in,
                                 in_n)
                 : ENOMEM;
        if (!err)
            dq->to_float(in, out, (int64_t)(n * dq->blck));
        free(in);
    }
    if (err)
        atomic_store(&r->err, err);
}

/* Takes chunks of r until none is left. */
static void drain(struct run *r) {
    uint64_t c;
    while ((c = atomic_fetch_add(&r->next, 1)) < r->n_chunks)
        if (!atomic_load(&r->err))
            do_chunk(r, c);
}

static void unlink_run(struct gfs_pool *p, struct run *r) {
    for (struct run **pp = &p->runs; *pp; pp = &(*pp)->next_run)
        if (*pp == r) {
            *pp = r->next_run;
            return;
        }
}

static void *helper(void *arg) {
    struct gfs_pool *p = arg;
    pthread_setname_np(pthread_self(), "ggufs-convert");
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && !p->runs)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->stop)
            break;
        struct run *r = p->runs;
        r->users++;
        pthread_mutex_unlock(&p->mu);
        drain(r);
        pthread_mutex_lock(&p->mu);
        unlink_run(p, r); /* no chunk left */
        if (--r->users == 0)
            pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The pool, started on first use; NULL if there is no second CPU or it
 * cannot start (then the serving thread does all). */
static struct gfs_pool *pool_get(struct gfs_views *v) {
    pthread_mutex_lock(&v->mu);
    if (!v->pool) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int n = cpus > 1 ? (int)(cpus - 1) : 0;
        struct gfs_pool *p = n ? calloc(1, sizeof *p) : NULL;
        if (p) {
            pthread_mutex_init(&p->mu, NULL);
            pthread_cond_init(&p->work, NULL);
            pthread_cond_init(&p->idle, NULL);
            for (int i = 0; i < n && i < MAX_HELPERS; i++)
                if (pthread_create(&p->th[p->n], NULL, helper, p) == 0)
                    p->n++;
            v->pool = p;
        }
    }
    struct gfs_pool *p = v->pool;
    pthread_mutex_unlock(&v->mu);
    return p && p->n ? p : NULL;
}

void gfs_pool_stop(struct gfs_views *v) {
    struct gfs_pool *p = v->pool;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n; i++)
        pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    free(p);
    v->pool = NULL;
}

int gfs_vconv(struct gfs *fs, int64_t i, uint64_t b0, uint64_t b1, float *dst) {
    const struct gfs_vt *vt = &fs->views->t[i];
    int64_t j;
    int shard;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, &shard);
    struct run r = {.fs = fs,
                    .vt = vt,
                    .shard = shard,
                    .pos = gguf_tensor_offset(c, j) + b0 * vt->dq.size,
                    .n_blocks = b1 - b0,
                    .dst = dst};
    r.per = CHUNK_VALUES / vt->dq.blck ? CHUNK_VALUES / vt->dq.blck : 1;
    r.n_chunks = (r.n_blocks + r.per - 1) / r.per;
    atomic_init(&r.next, 0);
    atomic_init(&r.err, 0);
    struct gfs_pool *p = r.n_chunks > 1 ? pool_get(fs->views) : NULL;
    if (p) {
        pthread_mutex_lock(&p->mu);
        r.next_run = p->runs;
        p->runs = &r;
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->mu);
    }
    drain(&r);
    if (p) {
        pthread_mutex_lock(&p->mu);
        unlink_run(p, &r);
        while (r.users > 0)
            pthread_cond_wait(&p->idle, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    return atomic_load(&r.err);
}
