/*
 * views.h - state of the converted views (f32/, npy/, index.tsv) and the
 * tensor hashes, shared by views.c (the tree and reads), vconv.c (block
 * conversion on the daemon's threads) and hashes.c (hashes, index.tsv).
 * The rest of fs/ calls only the gfs_views_ functions declared first.
 */
#ifndef GGUFS_VIEWS_H
#define GGUFS_VIEWS_H

#include "gguf.h" /* the float32 converters */
#include "../ggufs.h"

/* views.c, vconv.c, hashes.c: the converted views f32/NAME, npy/NAME.npy,
 * index.tsv and the hashes of tensors (user.gguf.sha256, user.gguf.xxh64).
 * gfs_views_init: at mount, before the daemon detaches; finds ggml's
 * library (ggml: -o ggml=PATH, "none", or NULL for $GGUFS_GGML_LIB, then
 * the usual places) when a tensor needs it, and prints one line on
 * stderr naming the tensors left without a view and why.  0, or -1 after
 * one line (an -o ggml=PATH that cannot be used).  The others: caller
 * holds fs->lock (read). */
int gfs_views_init(struct gfs *fs, const char *ggml, const char *file);
void gfs_views_free(struct gfs *fs);
/* Whether some tensor has a view (f32/ and npy/ are not empty).  No lock. */
int gfs_views_any(const struct gfs *fs);
/* Their node kinds: rows of kinds.h, defined in views.c. */
/* user.gguf.sha256 and user.gguf.xxh64 of tensors/NAME (its bytes) and of
 * tensors/ (every tensor's bytes in order), and user.gguf.hash_progress;
 * GFS_XATTR_OTHER for other names, ENODATA for other inodes, EINTR if req
 * is interrupted first.  Unlike the others, called
 * WITHOUT fs->lock: a first request reads the whole tensor or model,
 * holding the lock for reading one chunk at a time, so that commits and
 * edits never wait for more than a chunk (hashes.c). */
int gfs_views_xattr(fuse_req_t req, struct gfs *fs, fuse_ino_t ino,
                    const char *name, struct gguf_buf *out);
int gfs_views_xattr_list(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out);
/* index.tsv's text (a new reference), rendered on first use. */
struct gfs_text *gfs_views_index(struct gfs *fs, int *err);

/* One tensor's float32 view.  dq.to_float NULL: none. */
struct gfs_vt {
    struct gguf_dq dq;
    uint64_t elems; /* values */
    uint64_t bytes; /* bytes of data its blocks take (<= the tensor's) */
    uint32_t hdr;   /* bytes of its npy header (a multiple of 64) */
};

/* One slot of hashes: a tensor's, or tensors/'s (every tensor in order).
 * Guarded by gfs_views.mu. */
struct gfs_hash {
    int have; /* sha256 and xxh64 hold the result */
    uint8_t sha256[32];
    uint64_t xxh64;
    int running;          /* a request is reading for it (hashes.c): others
                             wait for it on gfs_views.hashed */
    struct gfs_hjob *job; /* the reading done so far, NULL when none */
    int stale;            /* bytes were written while a request ran: its
                             result is dropped (gfs_hashes_forget) */
};

struct gfs_pool; /* vconv.c */
struct gfs_hjob; /* hashes.c */

/* Set at mount (gfs_views_init), read-only after, but for mu's fields. */
struct gfs_views {
    gguf_ggml *ggml;  /* NULL: ggufs's own converters only */
    struct gfs_vt *t; /* by global tensor index */
    int64_t n;
    /* Guarded by mu, a leaf (nothing is taken under it; taken with or
     * without fs->lock): the hash slots and index.tsv.  A hash is
     * computed by one request per slot at a time, without mu (hashes.c);
     * the others wait on hashed. */
    pthread_mutex_t mu;
    pthread_cond_t hashed; /* a slot's request ended or paused */
    struct gfs_hash *h;    /* by tensor */
    struct gfs_hash all;   /* every tensor in order: tensors/ */
    struct gfs_text *index;
    struct gfs_pool *pool; /* vconv.c's, started by the first read */
};

/* The npy header of tensor i into buf (>= 256 bytes); its length. */
size_t gfs_npy_header(const struct gfs *fs, int64_t i, char *buf);

/* vconv.c.  Values of blocks [b0, b1) of tensor i's view for one reply:
 * p holds (b1 - b0) * blck floats until gfs_vconv_put.  Only those blocks
 * are read (gfs_data_read); large runs are split over the pool's
 * threads, and a reader that reads in order finds the next values
 * converted ahead.  0 or errno.  Caller holds fs->lock (read) from get
 * to put. */
struct gfs_vout {
    const float *p;
    void *slot; /* vconv.c's, held until put */
};
int gfs_vconv_get(struct gfs *fs, int64_t i, uint64_t b0, uint64_t b1,
                  struct gfs_vout *out);
void gfs_vconv_put(struct gfs *fs, struct gfs_vout *out);
void gfs_pool_stop(struct gfs_views *v);

/* hashes.c: the hash slots' condition (at init) and the jobs left paused
 * (at free: no request runs any more). */
void gfs_hashes_init(struct gfs_views *v);
void gfs_hashes_free(struct gfs_views *v);
/* Tensor i was written (views.c, the f32/ row's tensor_changed hook):
 * its hashes and tensors/'s are forgotten (v->mu taken; no other lock
 * needed). */
void gfs_hashes_forget(struct gfs *fs, int64_t i);

#endif
