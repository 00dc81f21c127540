/*
 * inflight.c - the writes in flight (source.h): byte ranges of the
 * model's files that a write was answered for and has not written yet
 * (tensors/'s pipelined writes in place, fs/tensors/tensorw.c,
 * Pipelining).  Every read of the model's bytes (data.c: gfs_data_read,
 * gfs_data_reply, gfs_data_reply_pieces) waits here first for the ranges
 * that overlap it, so that a read after write(2) returned sees the bytes;
 * no read path above source/ needs to know that writes are pipelined.
 *
 * Contract.  A writer enters its range (gfs_inflight_enter) before it
 * answers and leaves it (gfs_inflight_leave) after its pwrite; two
 * entries never overlap (an entry waits for the ones in its way: writes
 * of the same bytes land in the order they were answered); at most
 * INFLIGHT_MAX at once (a further writer waits for a free slot).  Entries
 * are tagged with their owner (the handle that wrote), which its release
 * waits for (gfs_inflight_wait_owner: the handle is freed after).
 *
 * Locks: q->mu is a leaf, never held while waiting for anything but its
 * own condition (q->cv: an entry left); a waiter may hold any lock of fs
 * (readers in data.c wait with fs->lock held for reading, which the
 * writes in flight hold too, from before their answer to the end of their
 * pwrite: a commit never runs between them).  A writer takes nothing
 * after its answer until it has left.
 */
#include "source.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define INFLIGHT_MAX 16 /* writes answered and not yet written, at most */

struct gfs_twq {
    pthread_mutex_t mu; /* a leaf: guards v */
    pthread_cond_t cv;  /* an entry left */
    atomic_int n;       /* entries in use (read without mu: none, no wait) */
    struct {
        const void *owner; /* NULL: a free slot */
        int shard;
        uint64_t lo, hi; /* bytes [lo, hi) of shard's file */
    } v[INFLIGHT_MAX];
};

int gfs_inflight_init(struct gfs *fs) {
    if (fs->twq)
        return 0;
    struct gfs_twq *q = calloc(1, sizeof *q);
    if (!q)
        return ENOMEM;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    fs->twq = q;
    return 0;
}

void gfs_inflight_free(struct gfs *fs) {
    struct gfs_twq *q = fs->twq;
    if (!q)
        return;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
    fs->twq = NULL;
}

/* Whether an entry is in the way: of owner (any range) when owner is
 * given, else overlapping [lo, hi) of shard.  Caller holds q->mu. */
static int busy(const struct gfs_twq *q, const void *owner, int shard,
                uint64_t lo, uint64_t hi) {
    for (int i = 0; i < INFLIGHT_MAX; i++) {
        if (!q->v[i].owner)
            continue;
        if (owner
                ? q->v[i].owner == owner
                : q->v[i].shard == shard && q->v[i].lo < hi && lo < q->v[i].hi)
            return 1;
    }
    return 0;
}

/* Waits until no entry is in the way (busy's owner, shard, lo, hi). */
static void wait_for(struct gfs *fs, const void *owner, int shard, uint64_t lo,
                     uint64_t hi) {
    struct gfs_twq *q = fs->twq;
    if (!q || !atomic_load(&q->n))
        return;
    pthread_mutex_lock(&q->mu);
    while (busy(q, owner, shard, lo, hi))
        pthread_cond_wait(&q->cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

void gfs_inflight_wait(struct gfs *fs, int shard, uint64_t pos, uint64_t n) {
    if (n)
        wait_for(fs, NULL, shard, pos, pos + n);
}

void gfs_inflight_wait_owner(struct gfs *fs, const void *owner) {
    wait_for(fs, owner, -1, 0, 0);
}

int gfs_inflight_enter(struct gfs *fs, const void *owner, int shard,
                       uint64_t lo, uint64_t hi) {
    struct gfs_twq *q = fs->twq;
    int slot = -1;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        slot = -1;
        for (int i = 0; i < INFLIGHT_MAX && slot < 0; i++)
            if (!q->v[i].owner)
                slot = i;
        if (slot >= 0 && !busy(q, NULL, shard, lo, hi))
            break;
        pthread_cond_wait(&q->cv, &q->mu);
    }
    q->v[slot].owner = owner;
    q->v[slot].shard = shard;
    q->v[slot].lo = lo;
    q->v[slot].hi = hi;
    atomic_fetch_add(&q->n, 1);
    pthread_mutex_unlock(&q->mu);
    return slot;
}

void gfs_inflight_leave(struct gfs *fs, int slot) {
    struct gfs_twq *q = fs->twq;
    pthread_mutex_lock(&q->mu);
    q->v[slot].owner = NULL;
    atomic_fetch_sub(&q->n, 1);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}
