/*
 * source.c - a remote file as fs/ reads it: each cache block is ABSENT,
 * FETCHING (one request in flight has it), RECORDED (in the cache from an
 * earlier mount, not yet hashed again) or PRESENT (safe to serve).
 *
 * A read waits for the FETCHING blocks it needs (bounded: the longest a
 * request and its retries can take), fetches the ABSENT ones itself (runs
 * of up to SEG_BLOCKS in one request), hashes RECORDED ones against their
 * record (a mismatch is fetched again), then preads the cache.  With a
 * readahead hint, runs after the read up to the hint (at most RA_WINDOW
 * bytes ahead) are queued for N_WORKERS threads: a reader of tensor N
 * finds tensor N+1 on its way, and requests run in parallel.
 *
 * Hot runs.  A fetch receives its run into a buffer of its own, writes it
 * to the cache by direct I/O (cache.c: past the page cache) and keeps the
 * buffer as a hot run: reads are served from hot runs by a copy in
 * memory, from the cache file only once a run has left (the oldest leaves
 * when the hot runs pass HOT_MAX).  So a first read costs no page cache
 * for the cache file (the kernel's FUSE cache holds what readers read),
 * no writes through it and no read back.  The hot runs of all sources
 * (the shards of a set) share one bound: memory is HOT_MAX, FREE_MAX
 * spare buffers and one buffer per fetch in flight, whatever the number
 * of shards.
 *
 * Failures.  After a fetch failed (its retries spent), for FAILED_FOR
 * seconds every read that needs bytes not held fails at once with the
 * same error instead of waiting for the network again: the kernel asks
 * again page by page after a failed read, and a reader that got an error
 * reads on (llama.cpp reads the next tensor) or retries.  Without it, one
 * read(2) of a server that trickles waited the bound (remote.h, Faults)
 * three times, and node-llama-cpp's load of a model whose server went
 * away failed only after three rounds of backoffs.
 *
 * Locks: mu guards a source's states, ticks, failures and queue (cv: a block left
 * FETCHING; work: a job was queued).  evict (rwlock) is taken before mu:
 * readers hold it for reading from the state check to the end of their
 * copy, eviction for writing (trywrlock: a fetcher never waits for
 * readers).  pool.mu guards the hot runs and spare buffers of every
 * source; a leaf, taken with or without a source's mu.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define SEG_BLOCKS 64                  /* 4 MiB per request at most */
#define RA_WINDOW ((uint64_t)32 << 20) /* readahead past a read */
#define MIN_DEMAND_BLOCKS 16           /* 1 MiB: small reads fetch more */
#define N_WORKERS 4
#define QUEUE_MAX 64
#define RUN_BYTES (SEG_BLOCKS * RMT_BLOCK) /* one run's buffer */
#define HOT_MAX (2 * RA_WINDOW)            /* bytes of hot runs kept */
#define FREE_MAX 4                         /* spare buffers kept */
#define HUGE_ALIGN ((size_t)2 << 20)       /* x86-64's huge page */
#define FAILED_FOR 1.0                     /* seconds a failure stands */

enum { ABSENT, FETCHING, RECORDED, PRESENT };

struct job {
    uint64_t b0, k;
};

/* A run fetched in this mount, kept in memory (see Hot runs). */
struct hot {
    const struct rmt_src *src;
    uint64_t b0, k;   /* its blocks */
    uint8_t *buf;     /* RUN_BYTES, RMT_DIO_ALIGN-aligned */
    int refs;         /* readers copying from it */
    int gone;         /* left the list: freed by the last reader */
    struct hot *next; /* newest first */
};

struct rmt_src {
    struct rmt_http h;
    struct rmt_opts opts; /* as given to rmt_open (pointers: the caller's,
                             alive while the source is) */
    struct rmt_cache *cache;
    char *key;
    char ident[400];
    uint64_t size, nb, max;
    uint8_t *state;
    uint64_t *hash;
    uint32_t *tick; /* last read, for eviction */
    uint32_t clock;
    pthread_rwlock_t evict;
    pthread_mutex_t mu;
    pthread_cond_t cv, work;
    struct job queue[QUEUE_MAX];
    int q_head, q_len;
    pthread_t workers[N_WORKERS];
    int n_workers, stop;
    double down_until; /* rmt_now() seconds: see Failures */
    char down_msg[200];
};

/* Hot runs and spare buffers of all sources (Locks: pool.mu). */
static struct {
    pthread_mutex_t mu;
    struct hot *hot; /* newest first */
    uint64_t n_hot;
    uint8_t *spare[FREE_MAX];
    int n_spare;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

const char *rmt_url(const struct rmt_src *s) {
    return s->h.url;
}
uint64_t rmt_size(const struct rmt_src *s) {
    return s->size;
}
int64_t rmt_mtime(const struct rmt_src *s) {
    return s->h.id.mtime;
}
const char *rmt_identity(const struct rmt_src *s) {
    return s->ident;
}
uint64_t rmt_requests(const struct rmt_src *s) {
    return atomic_load(&s->h.n_ranged);
}

static __thread char last_error[600];
const char *rmt_error(void) {
    return last_error;
}

/* A run buffer: a spare one, else a new one.  NULL if out of memory. */
static uint8_t *buf_get(void) {
    uint8_t *b = NULL;
    pthread_mutex_lock(&pool.mu);
    if (pool.n_spare)
        b = pool.spare[--pool.n_spare];
    pthread_mutex_unlock(&pool.mu);
    if (!b && posix_memalign((void **)&b, HUGE_ALIGN, RUN_BYTES) != 0)
        b = NULL;
    /* Huge pages where the system gives them: direct I/O pins two pages
     * per run instead of a thousand, and the copies miss the TLB less. */
    if (b)
        madvise(b, RUN_BYTES, MADV_HUGEPAGE);
    return b;
}

/* Gives a buffer back (kept as a spare or freed).  Caller holds
 * pool.mu. */
static void buf_put(uint8_t *b) {
    if (pool.n_spare < FREE_MAX)
        pool.spare[pool.n_spare++] = b;
    else
        free(b);
}

/* Drops a reference to h; frees it once it left the list and no reader
 * copies from it.  Caller holds pool.mu. */
static void hot_unref(struct hot *h) {
    if (--h->refs > 0 || !h->gone)
        return;
    buf_put(h->buf);
    free(h);
}

/* Takes *pp (a run of the list) out of the list.  Caller holds pool.mu. */
static void hot_leave(struct hot **pp) {
    struct hot *h = *pp;
    *pp = h->next;
    pool.n_hot--;
    h->gone = 1;
    hot_unref(h);
}

/* Adds the run of s just fetched (buf: its bytes) to the hot runs, the
 * oldest of any source leaving past HOT_MAX; takes buf. */
static void hot_add(const struct rmt_src *s, uint64_t b0, uint64_t k,
                    uint8_t *buf) {
    struct hot *h = malloc(sizeof *h);
    pthread_mutex_lock(&pool.mu);
    if (!h) {
        buf_put(buf);
    } else {
        *h = (struct hot){.src = s,
                          .b0 = b0,
                          .k = k,
                          .buf = buf,
                          .refs = 1,
                          .next = pool.hot};
        pool.hot = h;
        if (++pool.n_hot * RUN_BYTES > HOT_MAX) {
            struct hot **pp = &pool.hot;
            while ((*pp)->next)
                pp = &(*pp)->next;
            hot_leave(pp);
        }
    }
    pthread_mutex_unlock(&pool.mu);
}

/* The hot run of s holding block b, or NULL.  Caller holds pool.mu. */
static struct hot *hot_find(const struct rmt_src *s, uint64_t b) {
    for (struct hot *h = pool.hot; h; h = h->next)
        if (h->src == s && b >= h->b0 && b < h->b0 + h->k)
            return h;
    return NULL;
}

/* Fetches blocks [b0, b0 + k) (marked FETCHING by the caller) into the
 * cache, by deadline (rmt_now() seconds; 0: a request's own bounds);
 * marks them PRESENT or ABSENT and wakes waiters.  0 or EIO. */
static int fetch(struct rmt_src *s, uint64_t b0, uint64_t k, int quiet,
                 double deadline) {
    uint64_t off = b0 * RMT_BLOCK, len = k * RMT_BLOCK;
    if (len > s->size - off)
        len = s->size - off;
    char msg[600] = "";
    uint64_t hashes[SEG_BLOCKS];
    uint8_t *buf = buf_get();
    int err =
        buf ? rmt_http_get(&s->h, off, len, buf, deadline, msg, sizeof msg)
            : ENOMEM;
    if (err == ENOMEM)
        snprintf(msg, sizeof msg, "out of memory");
    if (!err) {
        for (uint64_t i = 0; i < k; i++) {
            uint64_t at = i * RMT_BLOCK;
            hashes[i] = rmt_block_hash(buf + at, len - at < RMT_BLOCK
                                                     ? (size_t)(len - at)
                                                     : RMT_BLOCK);
        }
        if ((err = rmt_cache_put(s->cache, off, buf, len)) ||
            (err = rmt_cache_commit(s->cache, b0, k, hashes)))
            snprintf(msg, sizeof msg, "cannot write the cache: %s",
                     strerror(err));
    }
    if (err)
        snprintf(last_error, sizeof last_error, "reading bytes %llu-%llu: %s",
                 (unsigned long long)off, (unsigned long long)(off + len - 1),
                 msg);
    if (err && !quiet && !atomic_load(&s->h.changed))
        rmt_logf(&s->h, "reading bytes %llu-%llu: %s", (unsigned long long)off,
                 (unsigned long long)(off + len - 1), msg);
    pthread_mutex_lock(&s->mu);
    if (err && !atomic_load(&s->h.closing)) {
        s->down_until = rmt_now() + FAILED_FOR;
        snprintf(s->down_msg, sizeof s->down_msg, "%s", msg);
    }
    for (uint64_t i = 0; i < k; i++) {
        s->state[b0 + i] = err ? ABSENT : PRESENT;
        if (!err) {
            s->hash[b0 + i] = hashes[i];
            s->tick[b0 + i] = ++s->clock;
        }
    }
    if (!err) {
        hot_add(s, b0, k, buf);
    } else if (buf) {
        pthread_mutex_lock(&pool.mu);
        buf_put(buf);
        pthread_mutex_unlock(&pool.mu);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return err ? EIO : 0;
}

/* Keeps the cache within its bound: this entry's least recently read
 * PRESENT blocks are the victims.  Never waits for readers. */
static void maybe_evict(struct rmt_src *s) {
    if (pthread_rwlock_trywrlock(&s->evict) != 0)
        return;
    enum { MAXV = 256 };
    uint64_t v[MAXV];
    uint64_t nv = 0;
    pthread_mutex_lock(&s->mu);
    /* The MAXV oldest present blocks, by a simple selection. */
    for (uint64_t b = 0; b < s->nb; b++) {
        if (s->state[b] != PRESENT && s->state[b] != RECORDED)
            continue;
        if (nv < MAXV) {
            v[nv++] = b;
        } else {
            uint64_t worst = 0;
            for (uint64_t i = 1; i < nv; i++)
                if (s->tick[v[i]] > s->tick[v[worst]])
                    worst = i;
            if (s->tick[b] < s->tick[v[worst]])
                v[worst] = b;
        }
    }
    for (uint64_t i = 1; i < nv; i++) /* oldest first */
        for (uint64_t j = i; j > 0 && s->tick[v[j]] < s->tick[v[j - 1]]; j--) {
            uint64_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    pthread_mutex_unlock(&s->mu);
    uint64_t done = rmt_cache_evict(s->cache, v, nv);
    pthread_mutex_lock(&s->mu);
    for (uint64_t i = 0; i < done; i++)
        s->state[v[i]] = ABSENT;
    pthread_mutex_unlock(&s->mu);
    pthread_rwlock_unlock(&s->evict);
}

static void *worker(void *arg) {
    struct rmt_src *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->q_len && !s->stop)
            pthread_cond_wait(&s->work, &s->mu);
        if (s->stop)
            break;
        struct job j = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % QUEUE_MAX;
        s->q_len--;
        pthread_mutex_unlock(&s->mu);
        if (fetch(s, j.b0, j.k, 0, 0) == 0 && s->max)
            maybe_evict(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Claims the run of ABSENT blocks from b (at most max, not past end):
 * marks them FETCHING, returns how many.  Caller holds mu. */
static uint64_t claim(struct rmt_src *s, uint64_t b, uint64_t end,
                      uint64_t max) {
    uint64_t k = 0;
    while (b + k < end && k < max && s->state[b + k] == ABSENT)
        s->state[b + k++] = FETCHING;
    return k;
}

/* Queues the ABSENT runs in [b, end) for the workers, starting them on
 * first use.  Caller holds mu. */
static void read_ahead(struct rmt_src *s, uint64_t b, uint64_t end) {
    if (atomic_load(&s->h.changed))
        return;
    while (s->n_workers < N_WORKERS && !s->stop &&
           pthread_create(&s->workers[s->n_workers], NULL, worker, s) == 0)
        s->n_workers++;
    if (!s->n_workers)
        return;
    for (; b < end && s->q_len < QUEUE_MAX; b++) {
        uint64_t k = claim(s, b, end, SEG_BLOCKS);
        if (!k)
            continue;
        s->queue[(s->q_head + s->q_len++) % QUEUE_MAX] = (struct job){b, k};
        pthread_cond_signal(&s->work);
        b += k - 1;
    }
}

/* The block where readahead for a read ending at end, with the hint
 * ahead, stops: at most RA_WINDOW past it (a quarter of cache_max at
 * most: never evict what is ahead), at most the hint, and, short of the
 * hint, on a SEG_BLOCKS boundary: as the window slides with each read, it
 * grows by whole requests, not by each read's size. */
static uint64_t ahead_end(const struct rmt_src *s, uint64_t end,
                          uint64_t ahead) {
    uint64_t a = ahead < s->size ? ahead : s->size;
    uint64_t win = RA_WINDOW;
    if (s->max && win > s->max / 4)
        win = s->max / 4;
    uint64_t hint = (a + RMT_BLOCK - 1) / RMT_BLOCK;
    if (a <= end + win)
        return hint;
    uint64_t eb = (end + win) / RMT_BLOCK;
    return eb / SEG_BLOCKS * SEG_BLOCKS;
}

static int timed_wait(struct rmt_src *s, const struct timespec *deadline) {
    return pthread_cond_timedwait(&s->cv, &s->mu, deadline);
}

/* Hashes RECORDED block b against its record: PRESENT if equal, ABSENT
 * (fetched again) if not.  Caller holds evict (read) and mu; mu is
 * dropped meanwhile. */
static void verify(struct rmt_src *s, uint64_t b) {
    uint64_t off = b * RMT_BLOCK, len = RMT_BLOCK;
    if (len > s->size - off)
        len = s->size - off;
    uint8_t *blk = malloc(RMT_BLOCK); /* once per block and mount */
    if (!blk)
        return;
    uint64_t want = s->hash[b];
    pthread_mutex_unlock(&s->mu);
    int ok = rmt_cache_pread(s->cache, off, blk, len) == 0 &&
             rmt_block_hash(blk, len) == want;
    free(blk);
    pthread_mutex_lock(&s->mu);
    if (s->state[b] == RECORDED)
        s->state[b] = ok ? PRESENT : ABSENT;
}

/* Adds [p, p + len) to v, after its last piece if they touch.  pin: the
 * hot run it holds (a reference the caller took), or NULL (spill). */
static void view_add(struct rmt_view *v, uint8_t *p, size_t len, void *pin) {
    struct iovec *last = v->n ? &v->iov[v->n - 1] : NULL;
    if (last && !pin && !v->pin[v->n - 1] &&
        (uint8_t *)last->iov_base + last->iov_len == p) {
        last->iov_len += len;
        return;
    }
    v->iov[v->n] = (struct iovec){p, len};
    v->pin[v->n++] = pin;
}

/* Copies [off, off + n), every block of it PRESENT, into buf: pieces in
 * hot runs from memory, the rest from the cache file.  With v, pieces in
 * hot runs are not copied but held in v (while it has room for them and
 * for a last spill piece); buf gets the rest.  Caller holds evict (read)
 * and mu; mu is dropped during each copy. */
static int copy_out(struct rmt_src *s, uint64_t off, uint8_t *buf, size_t n,
                    struct rmt_view *v) {
    uint64_t at = off, end = off + n;
    int err = 0;
    while (!err && at < end) {
        uint64_t b = at / RMT_BLOCK, to;
        pthread_mutex_lock(&pool.mu);
        struct hot *h = hot_find(s, b);
        if (h) {
            to = (h->b0 + h->k) * RMT_BLOCK;
            h->refs++;
        } else {
            while (++b * RMT_BLOCK < end && !hot_find(s, b))
                ;
            to = b * RMT_BLOCK;
        }
        pthread_mutex_unlock(&pool.mu);
        if (to > end)
            to = end;
        uint8_t *dst = buf + (at - off),
                *src = h ? h->buf + (at - h->b0 * RMT_BLOCK) : NULL;
        if (v && h && v->n < RMT_VIEW_MAX - 2) { /* held, not copied */
            view_add(v, src, (size_t)(to - at), h);
            at = to;
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        if (h)
            memcpy(dst, src, (size_t)(to - at));
        else
            err = rmt_cache_pread(s->cache, at, dst, (size_t)(to - at));
        pthread_mutex_lock(&s->mu);
        if (h) {
            pthread_mutex_lock(&pool.mu);
            hot_unref(h);
            pthread_mutex_unlock(&pool.mu);
        }
        if (v)
            view_add(v, dst, (size_t)(to - at), NULL);
        at = to;
    }
    return err;
}

void rmt_view_release(struct rmt_view *v) {
    pthread_mutex_lock(&pool.mu);
    for (int i = 0; i < v->n; i++)
        if (v->pin[i])
            hot_unref(v->pin[i]);
    pthread_mutex_unlock(&pool.mu);
    v->n = 0;
}

/* EIO if a fetch of s failed within FAILED_FOR seconds (last_error says
 * what it got), else 0.  Caller holds mu. */
static int failed_lately(struct rmt_src *s) {
    double now = rmt_now();
    if (now >= s->down_until)
        return 0;
    snprintf(last_error, sizeof last_error,
             "a request failed %.1f s ago (%s): not asked again yet",
             now - (s->down_until - FAILED_FOR), s->down_msg);
    return EIO;
}

/* rmt_read and rmt_read_view: v NULL, or the view to fill (buf its
 * spill). */
static int read_common(struct rmt_src *s, uint64_t off, void *buf, size_t n,
                       uint64_t ahead, struct rmt_view *v) {
    if (n == 0)
        return 0;
    if (off > s->size || n > s->size - off)
        return EIO;
    uint64_t b0 = off / RMT_BLOCK, b1 = (off + n - 1) / RMT_BLOCK + 1;
    uint64_t dem_end = b1;
    if (ahead > off + n) {
        uint64_t a = ahead < s->size ? ahead : s->size;
        uint64_t ab = (a + RMT_BLOCK - 1) / RMT_BLOCK;
        dem_end = b0 + MIN_DEMAND_BLOCKS > ab ? ab : b0 + MIN_DEMAND_BLOCKS;
        if (dem_end < b1)
            dem_end = b1;
    }
    /* The read's bound (remote.h, Faults): its own requests and its waits
     * for others' (readahead's) end by the same deadline. */
    double bud = rmt_http_bound(&s->h), end_s = rmt_now() + bud;
    struct timespec deadline = {
        .tv_sec = (time_t)end_s,
        .tv_nsec = (long)((end_s - (double)(time_t)end_s) * 1e9)};
    int err = 0;

    pthread_rwlock_rdlock(&s->evict);
    pthread_mutex_lock(&s->mu);
    /* Readahead first, from the end of what this read fetches itself:
     * queued after the read's own fetch, it would start too late, and the
     * reads that follow would each fetch their own small runs. */
    if (ahead > off + n)
        read_ahead(s, dem_end, ahead_end(s, off + n, ahead));
    for (uint64_t b = b0; b < b1 && !err;) {
        switch (s->state[b]) {
        case PRESENT:
            s->tick[b] = ++s->clock;
            b++;
            break;
        case RECORDED:
            verify(s, b);
            break;
        case FETCHING:
            if (timed_wait(s, &deadline) != 0 && s->state[b] == FETCHING) {
                snprintf(last_error, sizeof last_error,
                         "no answer within %.0f s", bud);
                rmt_logf(&s->h, "no answer for byte %llu within %.0f s",
                         (unsigned long long)(b * RMT_BLOCK), bud);
                err = EIO;
            }
            break;
        default: {
            if (atomic_load(&s->h.changed)) {
                snprintf(last_error, sizeof last_error,
                         "the file changed on the server");
                err = EIO;
                break;
            }
            if ((err = failed_lately(s)))
                break;
            /* Fetching needs no evict lock: give it up meanwhile, so an
             * eviction after another fetch is not held off. */
            uint64_t k = claim(s, b, dem_end > b1 ? dem_end : b1, SEG_BLOCKS);
            pthread_mutex_unlock(&s->mu);
            pthread_rwlock_unlock(&s->evict);
            err = fetch(s, b, k, ahead == 0, end_s);
            pthread_rwlock_rdlock(&s->evict);
            pthread_mutex_lock(&s->mu);
            b = b0; /* evicted meanwhile? look again */
        }
        }
    }
    if (!err)
        err = copy_out(s, off, buf, n, v);
    pthread_mutex_unlock(&s->mu);
    pthread_rwlock_unlock(&s->evict);
    if (err && v)
        rmt_view_release(v);
    if (!err && s->max)
        maybe_evict(s); /* after the pread: never the blocks just read */
    return err;
}

int rmt_read(struct rmt_src *s, uint64_t off, void *buf, size_t n,
             uint64_t ahead) {
    return read_common(s, off, buf, n, ahead, NULL);
}

int rmt_read_view(struct rmt_src *s, uint64_t off, size_t n, uint64_t ahead,
                  void *spill, struct rmt_view *v) {
    v->n = 0;
    return read_common(s, off, spill, n, ahead, v);
}

static void log_stderr(void *u, const char *line) {
    (void)u;
    fprintf(stderr, "ggufs: %s\n", line);
}

/* After the http part is open: states, cache entry.  0 or -1. */
static int finish_open(struct rmt_src *s, const struct rmt_opts *o, char *msg,
                       size_t n) {
    const struct rmt_ident *id = &s->h.id;
    s->size = id->size;
    s->max = o->cache_max;
    s->nb = (s->size + RMT_BLOCK - 1) / RMT_BLOCK;
    if (id->etag[0])
        snprintf(s->ident, sizeof s->ident, "etag %s", id->etag);
    else if (id->lastmod[0])
        snprintf(s->ident, sizeof s->ident, "last-modified %s", id->lastmod);
    else
        snprintf(s->ident, sizeof s->ident, "size");
    pthread_rwlock_init(&s->evict, NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca; /* rmt_read's deadline is CLOCK_MONOTONIC's */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&s->work, NULL);
    if (!(s->state = calloc(s->nb + 1, 1)) ||
        !(s->hash = calloc(s->nb + 1, sizeof *s->hash)) ||
        !(s->tick = calloc(s->nb + 1, sizeof *s->tick)) ||
        asprintf(&s->key, "%s\n%s\n%llu\n", s->h.url, s->ident,
                 (unsigned long long)s->size) < 0) {
        s->key = NULL;
        snprintf(msg, n, "out of memory");
        return -1;
    }
    if (rmt_cache_open(o->cache_dir, s->key, s->size, o->cache_max, s->state,
                       s->hash, &s->cache, msg, n) != 0)
        return -1;
    for (uint64_t b = 0; b < s->nb; b++)
        s->state[b] = s->state[b] ? RECORDED : ABSENT;
    return 0;
}

int rmt_open(const char *url, const struct rmt_opts *o, struct rmt_src **out,
             char *msg, size_t n) {
    struct rmt_src *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    s->h.log = o->log ? o->log : log_stderr;
    s->h.log_u = o->log_u;
    s->opts = *o; /* siblings are opened with the first's */
    if (rmt_http_open(&s->h, url, o, msg, n) != 0 ||
        finish_open(s, o, msg, n) != 0) {
        rmt_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

int rmt_open_sibling(const struct rmt_src *first, const char *url,
                     struct rmt_src **out, char *msg, size_t n) {
    struct rmt_src *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    if (rmt_http_open_like(&s->h, &first->h, url, msg, n) != 0 ||
        finish_open(s, &first->opts, msg, n) != 0) {
        rmt_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

void rmt_close(struct rmt_src *s) {
    if (!s)
        return;
    if (s->state) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_broadcast(&s->work);
        pthread_mutex_unlock(&s->mu);
        atomic_store(&s->h.closing, 1); /* readahead in flight ends now */
        for (int i = 0; i < s->n_workers; i++)
            pthread_join(s->workers[i], NULL);
    }
    pthread_mutex_lock(&pool.mu); /* no reader is left to hold a run */
    for (struct hot **pp = &pool.hot; *pp;)
        if ((*pp)->src == s)
            hot_leave(pp);
        else
            pp = &(*pp)->next;
    pthread_mutex_unlock(&pool.mu);
    rmt_cache_close(s->cache);
    rmt_http_close(&s->h);
    free(s->state);
    free(s->hash);
    free(s->tick);
    free(s->key);
    free(s);
}
