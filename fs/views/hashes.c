/*
 * hashes.c - what identifies tensors without reading them yourself:
 *   user.gguf.sha256, user.gguf.xxh64 on tensors/NAME: the SHA-256
 *       (OpenSSL's EVP) and XXH64 (libxxhash, seed 0: llama-gguf-hash's)
 *       of the file's bytes, lower-case hex (XXH64 in its canonical,
 *       big-endian form, as xxhsum and llama-gguf-hash print it);
 *   the same on tensors/ itself: every tensor's bytes, in order (the
 *       "weights digest"; llama-gguf-hash's model hash).  Metadata edits
 *       leave it as it is: it covers no header byte.
 *   user.gguf.hash_progress on the same: how far a hash being computed
 *       (or paused) has read, "D of T bytes (P%)", or "done"; ENODATA
 *       before the first request.  Asked by name, never listed.
 * Hashes are computed on first request and kept until the bytes change:
 * a write of a tensor (tensorw.c, through the f32/ row's tensor_changed
 * hook, views.c) forgets its hash and tensors/'s (gfs_hashes_forget; a
 * hash being computed then starts over).  Nothing
 * else changes them under a mount: a read-only mount fails once the file
 * changes; a read-write one holds it locked.  The first request on
 * tensors/ computes every tensor's hash in the same pass.
 *
 * A first request may read the whole model (minutes for 40 GB), so:
 * - it holds fs->lock (read) one HASH_CHUNK at a time (gfs_views_xattr is
 *   called without it), looking the tensor's place up again for each
 *   chunk: a commit (it holds the lock for writing) waits for one chunk,
 *   never for the hash, and may move the data section in between (a
 *   commit changes the header, never a tensor's bytes: each chunk is read
 *   whole from one place, so the hash is of the tensor's bytes).  The
 *   lock is glibc's default (readers preferred: a new reader does not
 *   queue behind a waiting writer), but the last reader out hands it to
 *   a waiting writer, so the next chunk waits for the commit;
 * - one request per slot reads (struct gfs_hash.running); others for the
 *   same hash wait for its result;
 * - a request that is interrupted (a killed getfattr waits for the reply),
 *   whose session ends (the last commit waits for every handler), or that
 *   runs when the daemon was told to yield (SIGUSR2, from ggufs -u: an
 *   unmount fails with EBUSY while a request is in flight) stops at the
 *   next chunk with EINTR; what it read is kept in its slot (struct
 *   gfs_hjob: the hash states and the place reached), and a waiting
 *   request, or the next one, goes on from there;
 * - on a remote mount, a hash not known yet is computed only for the
 *   mount's owner or root (may_compute): anyone else would make the daemon
 *   download the model in a request the owner cannot end.
 */
#include "../node/node.h" /* gfs_kind */
#include "views.h"
#include "../base/devio.h"
#include "../source/source.h"
#include "../base/mount.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define HASH_CHUNK (4u << 20)
/* How often a request waiting for another's hash looks whether it was
 * interrupted (ms). */
#define HASH_POLL_MS 100

static const char *const hash_attrs[] = {"user.gguf.sha256", "user.gguf.xxh64"};

struct hasher {
    EVP_MD_CTX *sha;
    XXH64_state_t *xxh;
};

/* Starts h (again: the states are allocated once).  0 or ENOMEM. */
static int hasher_init(struct hasher *h) {
    if (!h->sha)
        h->sha = EVP_MD_CTX_new();
    if (!h->xxh)
        h->xxh = XXH64_createState();
    if (!h->sha || !h->xxh ||
        EVP_DigestInit_ex(h->sha, EVP_sha256(), NULL) != 1 ||
        XXH64_reset(h->xxh, 0) != XXH_OK)
        return ENOMEM;
    return 0;
}

static void hasher_add(struct hasher *h, const void *p, size_t n) {
    EVP_DigestUpdate(h->sha, p, n);
    XXH64_update(h->xxh, p, n);
}

/* The hashes into out's sha256 and xxh64.  0 or EIO. */
static int hasher_end(struct hasher *h, struct gfs_hash *out) {
    unsigned len = 0;
    int ok = EVP_DigestFinal_ex(h->sha, out->sha256, &len) == 1 && len == 32;
    out->xxh64 = XXH64_digest(h->xxh);
    return ok ? 0 : EIO;
}

static void hasher_free(struct hasher *h) {
    EVP_MD_CTX_free(h->sha);
    XXH64_freeState(h->xxh);
}

/* A hash under way or paused, held by its slot (struct gfs_hash.job) until
 * it ends: an interrupted request loses none of the reading done, the next
 * one goes on from there. */
struct gfs_hjob {
    int64_t k;             /* the tensor being read */
    uint64_t done;         /* bytes of it hashed */
    struct hasher one;     /* tensor k's */
    struct hasher all;     /* tensors/: every tensor before k and done bytes of
                          k (unused for a tensor's slot) */
    _Atomic uint64_t read; /* bytes hashed so far (hash_progress) */
};

static void job_free(struct gfs_hjob *job) {
    if (!job)
        return;
    hasher_free(&job->one);
    hasher_free(&job->all);
    free(job);
}

/* A job for slot i (< 0: tensors/), or NULL (out of memory). */
static struct gfs_hjob *job_new(int64_t i) {
    struct gfs_hjob *job = calloc(1, sizeof *job);
    if (!job || hasher_init(&job->one) || (i < 0 && hasher_init(&job->all))) {
        job_free(job);
        return NULL;
    }
    job->k = i < 0 ? 0 : i;
    return job;
}

/* Whether the request for a hash should stop: it was interrupted (a
 * killed getfattr waits for the reply, so it must come soon), or the
 * mount is going away (the session waits for its handlers to end before
 * the last commit).  No lock. */
static int gave_up(struct gfs *fs, fuse_req_t req) {
    return fuse_req_interrupted(req) || gfs_devio_yielding(gfs_io(fs));
}

/* Who may start a hash of a remote mount (its bytes have no local
 * descriptor) that is not known yet: it reads the whole
 * tensor (or model) from the server, in one long request that keeps the
 * mount busy.  The mount's owner and root; others get EACCES until it is
 * known (then they get it as everyone does). */
static int may_compute(const struct gfs *fs, fuse_req_t req) {
    const struct fuse_ctx *c = fuse_req_ctx(req);
    return !fs->remote || c->uid == 0 || c->uid == fs->uid;
}

/* Reads the next chunk of job's tensor into buf; its length, or 0 and
 * *err.  Holds fs->lock (read) only for this chunk, and looks the
 * tensor's place up again under it: a commit in between may have moved
 * the data (never the bytes a tensor holds), and may not wait for more
 * than one chunk. */
static size_t read_chunk(struct gfs *fs, struct gfs_hjob *job, char *buf,
                         int *err) {
    int64_t j;
    int shard;
    uint64_t left = gfs_tensor_bytes(fs, job->k) - job->done;
    size_t n = left < HASH_CHUNK ? (size_t)left : HASH_CHUNK;
    pthread_rwlock_rdlock(&fs->lock);
    gguf_ctx *c = gfs_tensor_ctx(fs, job->k, &j, &shard);
    *err =
        gfs_data_read(fs, shard, gguf_tensor_offset(c, j) + job->done, buf, n);
    pthread_rwlock_unlock(&fs->lock);
    return *err ? 0 : n;
}

/* Tensor k's hash, found on the way by tensors/'s job: kept unless known,
 * and a paused job of k's own dropped. */
static void keep_tensor_hash(struct gfs_views *v, int64_t k,
                             const struct gfs_hash *h) {
    struct gfs_hash *slot = &v->h[k];
    pthread_mutex_lock(&v->mu);
    if (!slot->have && !v->all.stale) {
        memcpy(slot->sha256, h->sha256, sizeof slot->sha256);
        slot->xxh64 = h->xxh64;
        slot->have = 1;
        if (!slot->running) {
            job_free(slot->job);
            slot->job = NULL;
        }
    }
    pthread_mutex_unlock(&v->mu);
}

/* Runs the job of slot i (< 0: tensors/, every tensor in order) on from
 * where it stands: 0 and the hashes in out; EINTR when req gave up (the
 * job keeps its place); or an errno.  buf: HASH_CHUNK bytes. */
static int job_run(struct gfs *fs, fuse_req_t req, int64_t i,
                   struct gfs_hjob *job, char *buf, struct gfs_hash *out) {
    int64_t end = i < 0 ? fs->views->n : i + 1;
    int err = 0;
    for (; job->k < end; job->k++, job->done = 0) {
        while (job->done < gfs_tensor_bytes(fs, job->k)) {
            if (gave_up(fs, req))
                return EINTR;
            size_t n = read_chunk(fs, job, buf, &err);
            if (err)
                return err;
            hasher_add(&job->one, buf, n);
            if (i < 0)
                hasher_add(&job->all, buf, n);
            job->done += n;
            atomic_fetch_add(&job->read, n);
        }
        if (i >= 0)
            break;
        struct gfs_hash h;
        if ((err = hasher_end(&job->one, &h)) || (err = hasher_init(&job->one)))
            return err;
        keep_tensor_hash(fs->views, job->k, &h);
    }
    return hasher_end(i < 0 ? &job->all : &job->one, out);
}

/* Waits (v->mu held) until slot's runner ends or pauses, or
 * HASH_POLL_MS. */
static void wait_a_while(struct gfs_views *v) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += HASH_POLL_MS * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&v->hashed, &v->mu, &ts);
}

/* The hashes of tensor i (i < 0: tensors/) into out, computed unless
 * known: by one request at a time per slot, the others waiting for its
 * result (or taking its job over when it gives up).  0 or errno (EINTR:
 * req was interrupted).  Called without fs->lock. */
static int get_hash(struct gfs *fs, fuse_req_t req, int64_t i,
                    struct gfs_hash *out) {
    struct gfs_views *v = fs->views;
    struct gfs_hash *slot = i < 0 ? &v->all : &v->h[i];
    struct gfs_hjob *job;
    int err = 0;
    pthread_mutex_lock(&v->mu);
again:
    while (!slot->have && slot->running && !err) {
        wait_a_while(v);
        err = gave_up(fs, req) ? EINTR : 0;
    }
    if (err || slot->have)
        goto out;
    if (!may_compute(fs, req)) {
        err = EACCES;
        goto out;
    }
    if (!slot->job && !(slot->job = job_new(i))) {
        err = ENOMEM;
        goto out;
    }
    job = slot->job;
    slot->running = 1;
    pthread_mutex_unlock(&v->mu);

    char *buf = malloc(HASH_CHUNK);
    int ran = buf != NULL;
    err = ran ? job_run(fs, req, i, job, buf, out) : ENOMEM;
    free(buf);

    pthread_mutex_lock(&v->mu);
    slot->running = 0;
    if (slot->stale) { /* bytes were written meanwhile: start over */
        slot->stale = 0;
        job_free(slot->job);
        slot->job = NULL;
        pthread_cond_broadcast(&v->hashed);
        if (!err)
            goto again;
    }
    if (!err && !slot->have) {
        memcpy(slot->sha256, out->sha256, sizeof slot->sha256);
        slot->xxh64 = out->xxh64;
        slot->have = 1;
    }
    /* Paused (EINTR, or no buffer to start with) it waits for the next
     * request; failed (EIO) the next one starts over. */
    if (slot->have || (err && err != EINTR && ran)) {
        job_free(slot->job);
        slot->job = NULL;
    }
    pthread_cond_broadcast(&v->hashed);
out:
    if (!err)
        *out = *slot;
    pthread_mutex_unlock(&v->mu);
    return err;
}

/* Tensor i's bytes were written (tensorw.c): its hash and tensors/'s are
 * forgotten; a job reading them now starts over when it ends. */
static void forget(struct gfs_hash *slot) {
    slot->have = 0;
    if (slot->running) {
        slot->stale = 1;
    } else {
        job_free(slot->job);
        slot->job = NULL;
    }
}

void gfs_hashes_forget(struct gfs *fs, int64_t i) {
    struct gfs_views *v = fs->views;
    if (!v || !v->h || i < 0 || i >= v->n)
        return;
    pthread_mutex_lock(&v->mu);
    forget(&v->h[i]);
    forget(&v->all);
    pthread_mutex_unlock(&v->mu);
}

void gfs_hashes_init(struct gfs_views *v) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&v->hashed, &a);
    pthread_condattr_destroy(&a);
}

void gfs_hashes_free(struct gfs_views *v) {
    for (int64_t k = 0; v->h && k < v->n; k++)
        job_free(v->h[k].job);
    job_free(v->all.job);
    pthread_cond_destroy(&v->hashed);
}

#define PROGRESS_ATTR "user.gguf.hash_progress"

/* The progress of slot i's hash (i < 0: tensors/) into out: "done" once
 * known, "D of T bytes (P%)" while a job holds its reading (running or
 * paused), else ENODATA.  Reads nothing of the model. */
static int hash_progress(struct gfs *fs, int64_t i, struct gguf_buf *out) {
    struct gfs_views *v = fs->views;
    uint64_t total = 0, done = 0;
    char line[96];
    for (int64_t k = i < 0 ? 0 : i; k < (i < 0 ? v->n : i + 1); k++)
        total += gfs_tensor_bytes(fs, k);
    pthread_mutex_lock(&v->mu);
    const struct gfs_hash *slot = i < 0 ? &v->all : &v->h[i];
    int have = slot->have, job = slot->job != NULL;
    if (job)
        done = atomic_load(&slot->job->read);
    pthread_mutex_unlock(&v->mu);
    if (!have && !job)
        return ENODATA;
    if (have)
        snprintf(line, sizeof line, "done");
    else
        snprintf(line, sizeof line, "%" PRIu64 " of %" PRIu64 " bytes (%.0f%%)",
                 done, total, total ? 100.0 * (double)done / (double)total : 0);
    return gguf_buf_add(out, line, strlen(line)) == GGUF_OK ? 0 : ENOMEM;
}

static int is_hash_attr(const char *name) {
    return strcmp(name, hash_attrs[0]) == 0 || strcmp(name, hash_attrs[1]) == 0;
}

int gfs_views_xattr(fuse_req_t req, struct gfs *fs, fuse_ino_t ino,
                    const char *name, struct gguf_buf *out) {
    int64_t i = -1;
    int progress = strcmp(name, PROGRESS_ATTR) == 0;
    if (!is_hash_attr(name) && !progress)
        return GFS_XATTR_OTHER;
    if (!fs->views || (gfs_kind(fs, ino) != GFS_TENSOR &&
                       gfs_kind(fs, ino) != GFS_DIR_TENSORS))
        return ENODATA;
    if (gfs_kind(fs, ino) == GFS_TENSOR) {
        pthread_rwlock_rdlock(&fs->lock);
        i = gfs_tensor_index(fs, ino);
        pthread_rwlock_unlock(&fs->lock);
        if (i < 0)
            return ENOENT;
    }
    if (progress)
        return hash_progress(fs, i, out);
    struct gfs_hash h;
    int err = get_hash(fs, req, i, &h);
    if (err)
        return err;
    char hex[65];
    if (name[10] == 's') {
        for (int k = 0; k < 32; k++)
            snprintf(hex + 2 * k, 3, "%02x", h.sha256[k]);
    } else {
        XXH64_canonical_t cn;
        XXH64_canonicalFromHash(&cn, h.xxh64);
        for (int k = 0; k < 8; k++)
            snprintf(hex + 2 * k, 3, "%02x", cn.digest[k]);
    }
    return gguf_buf_add(out, hex, strlen(hex)) == GGUF_OK ? 0 : ENOMEM;
}

int gfs_views_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out) {
    enum gfs_kind k = gfs_kind(fs, ino);
    if (!fs->views || (k != GFS_TENSOR && k != GFS_DIR_TENSORS))
        return 0;
    for (size_t a = 0; a < 2; a++)
        if (gguf_buf_add(out, hash_attrs[a], strlen(hash_attrs[a]) + 1) !=
            GGUF_OK)
            return ENOMEM;
    return 0;
}
