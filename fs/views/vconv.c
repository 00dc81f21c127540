/*
 * vconv.c - a tensor's blocks as float32 for the views: converted on the
 * daemon's threads, and converted ahead of a reader that reads in order.
 *
 * A run of blocks is cut into chunks of about CHUNK_VALUES values; each
 * chunk reads its own blocks (gfs_data_read) and converts them straight
 * into the run's output.  Whoever needs a run done takes its chunks too
 * (finish), so a run of one chunk costs no hand-over, and a large one is
 * shared with the pool's helpers: one per CPU beyond the first, at most
 * MAX_HELPERS, started by the first read (never before the daemon
 * detaches: threads do not survive its fork).
 *
 * Reading ahead.  A read that starts where the last read of the same
 * tensor ended (or that the ahead buffers served) is taken as sequential:
 * the next AHEAD_BYTES of values are queued for the helpers into one of
 * N_SLOTS slots, behind any run someone waits for.  The next read finds
 * them converted (or finishes them itself) while the reply of this one is
 * being copied to the reader: conversion and copy run on two cores.  A
 * slot serves a read it covers whole; it is what its blocks convert to,
 * which never changes while mounted, so a slot stays valid until reused.
 *
 * Memory: per thread that serves reads, one output buffer (the largest
 * request it served, at most the kernel's request size plus two blocks)
 * and one input buffer (a chunk's blocks), kept for reuse (fresh memory
 * costs a page fault and zeroing per page, every read), freed when the
 * thread ends; N_SLOTS ahead buffers of AHEAD_BYTES.  Nothing grows with
 * the tensor.
 *
 * Locks.  pool.mu is a leaf, taken with or without fs->lock (read).  A
 * run someone waits for is converted under that waiter's read lock: it
 * holds fs->lock until every chunk is done.  A run ahead has nobody
 * waiting: each of its chunks takes fs->lock (read) itself, with trylock,
 * since a writer may be queued behind a reader that waits for this very
 * chunk; a chunk that cannot take it fails (EAGAIN) and its slot is not
 * used.  The block's position is looked up under the lock, so a commit
 * that moved the data since the run was queued is harmless.
 */
#include "views.h"
#include "../source/source.h"
#include "../node/node.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK_VALUES (64 * 1024)
#define MAX_HELPERS 7
#define AHEAD_BYTES (1 << 20)
#define N_SLOTS 4
#define N_SEQ 64 /* tensors whose last read end is remembered */

/* One run of blocks being converted. */
struct run {
    struct gfs *fs;
    int64_t tensor;
    uint64_t b0;       /* its first block */
    uint64_t n_blocks; /* in the run */
    uint64_t per;      /* blocks per chunk */
    float *dst;
    int locked; /* a waiter holds fs->lock (read) until the run is done */
    atomic_uint_fast64_t next; /* next chunk to take */
    uint64_t n_chunks;
    atomic_int err;
    int users;            /* threads taking its chunks; pool.mu */
    int queued;           /* in pool.runs; pool.mu */
    struct run *next_run; /* in pool.runs; pool.mu */
};

/* Values converted ahead: blocks [b0, b1) of tensor (-1: none). */
struct slot {
    int64_t tensor;
    uint64_t b0, b1;
    int refs;      /* replies being sent from buf; pool.mu */
    uint64_t used; /* pool.tick at its last use: the oldest is reused */
    float *buf;
    size_t cap; /* floats */
    struct run run;
};

struct gfs_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    struct run *runs; /* with chunks left: waited-for first */
    int stop;
    int n;
    pthread_t th[MAX_HELPERS];
    struct slot slot[N_SLOTS];
    uint64_t tick;
    struct {
        int64_t tensor;
        uint64_t end;
    } seq[N_SEQ]; /* where the last read of a tensor ended */
};

/* ---- runs ------------------------------------------------------------ */

/* Reads and converts chunk c of r; the error is kept in r->err. */
static void do_chunk(struct run *r, uint64_t c) {
    struct gfs *fs = r->fs;
    const struct gguf_dq *dq = &fs->views->t[r->tensor].dq;
    uint64_t first = c * r->per;
    uint64_t n = r->n_blocks - first < r->per ? r->n_blocks - first : r->per;
    size_t in_n = (size_t)(n * dq->size);
    float *out = r->dst + first * dq->blck;
    int64_t j;
    int shard, err;
    if (!r->locked && pthread_rwlock_tryrdlock(&fs->lock) != 0) {
        atomic_store(&r->err, EAGAIN);
        return;
    }
    gguf_ctx *cx = gfs_tensor_ctx(fs, r->tensor, &j, &shard);
    uint64_t pos = gguf_tensor_offset(cx, j) + (r->b0 + first) * dq->size;
    if (dq->type == 0) { /* f32: the bytes are the values */
        err = gfs_data_read(fs, shard, pos, out, in_n);
    } else {
        void *in = gfs_tbuf(GFS_TBUF_BLOCKS, in_n ? in_n : 1);
        err = in ? gfs_data_read(fs, shard, pos, in, in_n) : ENOMEM;
        if (!err)
            dq->to_float(in, out, (int64_t)(n * dq->blck));
    }
    if (!r->locked)
        pthread_rwlock_unlock(&fs->lock);
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

static void unqueue(struct gfs_pool *p, struct run *r) {
    if (!r->queued)
        return;
    for (struct run **pp = &p->runs; *pp; pp = &(*pp)->next_run)
        if (*pp == r) {
            *pp = r->next_run;
            break;
        }
    r->queued = 0;
}

/* Caller holds p->mu.  Waited-for runs go first, runs ahead last. */
static void enqueue(struct gfs_pool *p, struct run *r, int front) {
    struct run **pp = &p->runs;
    while (!front && *pp)
        pp = &(*pp)->next_run;
    r->next_run = *pp;
    *pp = r;
    r->queued = 1;
    pthread_cond_broadcast(&p->work);
}

/* Every chunk of r taken and done.  Caller holds p->mu. */
static int run_done(const struct run *r) {
    return r->users == 0 && atomic_load(&r->next) >= r->n_chunks;
}

/* Returns once every chunk of r is done, taking chunks itself.  p NULL:
 * no pool, r is the caller's alone. */
static void finish(struct gfs_pool *p, struct run *r) {
    if (!p) {
        drain(r);
        return;
    }
    pthread_mutex_lock(&p->mu);
    unqueue(p, r);
    r->users++;
    pthread_mutex_unlock(&p->mu);
    drain(r);
    pthread_mutex_lock(&p->mu);
    if (--r->users == 0)
        pthread_cond_broadcast(&p->idle);
    while (r->users > 0)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
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
        unqueue(p, r); /* no chunk left */
        if (--r->users == 0)
            pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The pool, started on first use; NULL if there is no second CPU or it
 * cannot start (then the serving thread does all, and nothing is read
 * ahead). */
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
            for (int i = 0; i < N_SLOTS; i++)
                p->slot[i].tensor = -1;
            for (int i = 0; i < N_SEQ; i++)
                p->seq[i].tensor = -1;
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
    for (int i = 0; i < N_SLOTS; i++)
        free(p->slot[i].buf);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    free(p);
    v->pool = NULL;
}

/* Sets r up to convert blocks [b0, b0 + n) of tensor i into dst. */
static void run_init(struct run *r, struct gfs *fs, int64_t i, uint64_t b0,
                     uint64_t n, float *dst, int locked) {
    uint32_t blck = fs->views->t[i].dq.blck;
    r->fs = fs;
    r->tensor = i;
    r->b0 = b0;
    r->n_blocks = n;
    r->per = CHUNK_VALUES / blck ? CHUNK_VALUES / blck : 1;
    r->n_chunks = (n + r->per - 1) / r->per;
    r->dst = dst;
    r->locked = locked;
    r->users = 0;
    r->queued = 0;
    atomic_init(&r->next, 0);
    atomic_init(&r->err, 0);
}

/* ---- reading ahead (caller holds p->mu) ------------------------------ */

/* The slot holding blocks [b0, b1) of tensor i whole, or NULL. */
static struct slot *slot_find(struct gfs_pool *p, int64_t i, uint64_t b0,
                              uint64_t b1) {
    for (int k = 0; k < N_SLOTS; k++) {
        struct slot *s = &p->slot[k];
        if (s->tensor == i && s->b0 <= b0 && b1 <= s->b1)
            return s;
    }
    return NULL;
}

/* Records that a read of tensor i ended at block end; whether the read
 * that started at b0 followed the last one. */
static int seq_note(struct gfs_pool *p, int64_t i, uint64_t b0, uint64_t end) {
    int k = (int)((uint64_t)i % N_SEQ);
    int follows = p->seq[k].tensor == i && p->seq[k].end == b0;
    p->seq[k].tensor = i;
    p->seq[k].end = end;
    return follows;
}

/* Queues the values after block end of tensor i for conversion, unless a
 * window of them is converted or queued already, or no slot is free. */
static void ahead(struct gfs_pool *p, struct gfs *fs, int64_t i, uint64_t end) {
    const struct gfs_vt *vt = &fs->views->t[i];
    uint64_t total = vt->elems / vt->dq.blck;
    uint64_t per = AHEAD_BYTES / ((uint64_t)vt->dq.blck * 4);
    if (per == 0)
        per = 1;
    uint64_t from = end;
    for (int hops = 0; hops < N_SLOTS; hops++) {
        struct slot *s = slot_find(p, i, from, from + 1);
        if (!s)
            break;
        from = s->b1;
    }
    if (from >= total || from - end >= per)
        return;
    struct slot *s = NULL;
    for (int k = 0; k < N_SLOTS; k++) {
        struct slot *c = &p->slot[k];
        if (c->refs || (c->tensor >= 0 && !run_done(&c->run)))
            continue;
        if (!s || c->used < s->used)
            s = c;
    }
    if (!s)
        return;
    uint64_t n = total - from < per ? total - from : per;
    size_t need = (size_t)(n * vt->dq.blck);
    if (need > s->cap) {
        float *b = malloc(need * sizeof *b);
        if (!b)
            return;
        free(s->buf);
        s->buf = b;
        s->cap = need;
    }
    s->tensor = i;
    s->b0 = from;
    s->b1 = from + n;
    s->used = ++p->tick;
    run_init(&s->run, fs, i, from, n, s->buf, 0);
    enqueue(p, &s->run, 0);
}

/* ---- the interface --------------------------------------------------- */

/* Converts blocks [b0, b1) of tensor i into dst now; 0 or errno. */
static int convert(struct gfs_pool *p, struct gfs *fs, int64_t i, uint64_t b0,
                   uint64_t b1, float *dst) {
    struct run r;
    run_init(&r, fs, i, b0, b1 - b0, dst, 1);
    if (p && r.n_chunks > 1) {
        pthread_mutex_lock(&p->mu);
        enqueue(p, &r, 1);
        pthread_mutex_unlock(&p->mu);
    }
    finish(r.n_chunks > 1 ? p : NULL, &r);
    return atomic_load(&r.err);
}

/* The slot that holds [b0, b1) of tensor i, finished, with a reference
 * for the caller; NULL if none does (or its conversion failed). */
static struct slot *slot_take(struct gfs_pool *p, int64_t i, uint64_t b0,
                              uint64_t b1) {
    pthread_mutex_lock(&p->mu);
    struct slot *s = slot_find(p, i, b0, b1);
    if (s) {
        s->refs++;
        s->used = ++p->tick;
    }
    pthread_mutex_unlock(&p->mu);
    if (!s)
        return NULL;
    finish(p, &s->run);
    if (!atomic_load(&s->run.err))
        return s;
    pthread_mutex_lock(&p->mu);
    s->refs--;
    if (s->tensor == i && run_done(&s->run))
        s->tensor = -1; /* failed: never serve it */
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int gfs_vconv_get(struct gfs *fs, int64_t i, uint64_t b0, uint64_t b1,
                  struct gfs_vout *out) {
    const struct gfs_vt *vt = &fs->views->t[i];
    struct gfs_pool *p = pool_get(fs->views);
    struct slot *s = p ? slot_take(p, i, b0, b1) : NULL;
    memset(out, 0, sizeof *out);
    if (s) {
        out->p = s->buf + (b0 - s->b0) * vt->dq.blck;
        out->slot = s;
    } else {
        float *buf =
            gfs_tbuf(GFS_TBUF_VALUES, (size_t)((b1 - b0) * vt->dq.blck * 4));
        int err = buf ? convert(p, fs, i, b0, b1, buf) : ENOMEM;
        if (err)
            return err;
        out->p = buf;
    }
    if (p) {
        pthread_mutex_lock(&p->mu);
        if (seq_note(p, i, b0, b1) || s)
            ahead(p, fs, i, b1);
        pthread_mutex_unlock(&p->mu);
    }
    return 0;
}

void gfs_vconv_put(struct gfs *fs, struct gfs_vout *out) {
    struct slot *s = out->slot;
    if (!s)
        return;
    struct gfs_pool *p = fs->views->pool;
    pthread_mutex_lock(&p->mu);
    s->refs--;
    pthread_mutex_unlock(&p->mu);
    out->slot = NULL;
}
