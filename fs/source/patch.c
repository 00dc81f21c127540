/*
 * patch.c - bytes of the model replaced by its overlay's tensors (issue
 * 24): on an overlay mount, a tensor written is copied whole into the
 * overlay's data file (gguf/ovtensors.c: the format, the trust rule) and
 * from then on read from there, never from the model, which is never
 * opened for writing.  Every read of model bytes goes through data.c
 * (gfs_data_read, gfs_data_reply), which asks here: tensors/, the live
 * view, f32/ and npy/, the hashes all see the overlay's bytes.  While any
 * tensor is patched the live view is not served by passthrough (it would
 * read the model itself: passthrough.c asks gfs_patch_any).
 *
 * A record maps tensor g (shard, absolute offset, size in the model) to
 * its region in the data file; records are kept sorted by (shard, pos).
 * A region is only ever appended (at end, 4 KiB aligned): the first
 * write of a tensor copies its bytes to a new region (gfs_patch_region)
 * and records it; a whole replace writes a new region and swaps the
 * record once complete (gfs_patch_set).  A record reaches the disk with
 * the overlay's next write (the store's keep, crash-safe by rename), after
 * its region was synced: a crash leaves the old record or the new.
 *
 * Locks: records change under fs->lock (write), are read under it (read).
 */
#include "source.h"
#include "../node/node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATCH_ALIGN 4096
#define PATCH_COPY ((size_t)1 << 20)

struct gfs_patch {
    int fd;               /* the data file, or -1 until the first write */
    char *opath, *source; /* the overlay's (opath NULL: the default one) */
    char shown[4096];
    uint64_t end; /* the next region's offset */
    struct gfs_patch_rec {
        int shard;
        uint64_t pos, size, doff;
        int64_t g;
    } * v;
    size_t n, cap;
};

/* Index of the first record at or after (shard, pos). */
static size_t lower(const struct gfs_patch *p, int shard, uint64_t pos) {
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct gfs_patch_rec *r = &p->v[mid];
        if (r->shard < shard || (r->shard == shard && r->pos < pos))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Sets tensor g's region to doff, adding its record if needed; 0 or
 * ENOMEM. */
static int put(struct gfs *fs, int64_t g, uint64_t doff) {
    struct gfs_patch *p = fs->patch;
    int64_t j;
    int shard;
    gguf_ctx *c = gfs_tensor_ctx(fs, g, &j, &shard);
    uint64_t pos = gguf_tensor_offset(c, j);
    size_t k = lower(p, shard, pos);
    if (k < p->n && p->v[k].shard == shard && p->v[k].pos == pos) {
        p->v[k].doff = doff;
        return 0;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        void *v = realloc(p->v, cap * sizeof *p->v);
        if (!v)
            return ENOMEM;
        p->v = v;
        p->cap = cap;
    }
    memmove(&p->v[k + 1], &p->v[k], (p->n - k) * sizeof *p->v);
    p->v[k] =
        (struct gfs_patch_rec){shard, pos, gfs_tensor_bytes(fs, g), doff, g};
    p->n++;
    return 0;
}

/* The global index of the tensor named name of size bytes, or -1. */
static int64_t tensor_named(struct gfs *fs, const char *name, uint64_t size) {
    int64_t base = 0;
    for (int s = 0; s < fs->n_shards; s++) {
        int64_t j = gguf_find_tensor(fs->shards[s], name, strlen(name));
        if (j >= 0)
            return gfs_tensor_bytes(fs, base + j) == size ? base + j : -1;
        base += gguf_n_tensors(fs->shards[s]);
    }
    return -1;
}

static int open_data(struct gfs_patch *p, int create, char *msg, size_t mn) {
    struct gguf_error err = {0};
    struct stat sb;
    if (p->fd >= 0)
        return 0;
    p->fd = gguf_overlay_data_open(p->opath, p->source, create, p->shown,
                                   sizeof p->shown, &err);
    if (p->fd < 0) {
        snprintf(msg, mn, "%s", err.msg);
        return EIO;
    }
    if (fstat(p->fd, &sb) == 0)
        p->end = ((uint64_t)sb.st_size + PATCH_ALIGN - 1) / PATCH_ALIGN *
                 PATCH_ALIGN;
    return 0;
}

int gfs_patch_init(struct gfs *fs, const char *opath, const char *source,
                   const struct gguf_overlay_tensor *t, size_t nt, char *msg,
                   size_t mn) {
    struct gfs_patch *p = calloc(1, sizeof *p);
    if (!p || !(p->source = strdup(source)) ||
        (opath && !(p->opath = strdup(opath)))) {
        snprintf(msg, mn, "out of memory");
        goto fail;
    }
    p->fd = -1;
    fs->patch = p;
    if (nt && open_data(p, 0, msg, mn))
        return -1;
    for (size_t i = 0; i < nt; i++) {
        int64_t g = tensor_named(fs, t[i].name, t[i].size);
        if (g < 0 || t[i].off + t[i].size > p->end) {
            snprintf(msg, mn,
                     "the overlay holds tensor %s (%llu bytes at %llu of "
                     "%s), which %s",
                     t[i].name, (unsigned long long)t[i].size,
                     (unsigned long long)t[i].off, p->shown,
                     g < 0 ? "the model has not (or of another size)"
                           : "lies past the data file's end");
            return -1;
        }
        if (put(fs, g, t[i].off)) {
            snprintf(msg, mn, "out of memory");
            return -1;
        }
    }
    return 0;
fail:
    if (p)
        free(p->source);
    free(p);
    return -1;
}

void gfs_patch_free(struct gfs *fs) {
    struct gfs_patch *p = fs->patch;
    if (!p)
        return;
    if (p->fd >= 0)
        close(p->fd);
    free(p->v);
    free(p->opath);
    free(p->source);
    free(p);
    fs->patch = NULL;
}

int gfs_patch_any(const struct gfs *fs) {
    return fs->patch && fs->patch->n > 0;
}

int gfs_patch_fd(const struct gfs *fs) {
    return fs->patch ? fs->patch->fd : -1;
}

const char *gfs_patch_where(const struct gfs *fs) {
    return fs->patch && fs->patch->fd >= 0 ? fs->patch->shown : NULL;
}

int gfs_patch_find(const struct gfs *fs, int64_t g, uint64_t *doff) {
    const struct gfs_patch *p = fs->patch;
    int64_t j;
    int shard;
    if (!p || !p->n)
        return 0;
    gguf_ctx *c = gfs_tensor_ctx(fs, g, &j, &shard);
    size_t k = lower(p, shard, gguf_tensor_offset(c, j));
    if (k == p->n || p->v[k].g != g)
        return 0;
    *doff = p->v[k].doff;
    return 1;
}

/* The first record that may overlap [pos, ...) of shard: records never
 * overlap each other, so only the one before pos may reach into it. */
static size_t first_overlap(const struct gfs_patch *p, int shard,
                            uint64_t pos) {
    size_t k = lower(p, shard, pos);
    if (k > 0 && p->v[k - 1].shard == shard &&
        p->v[k - 1].pos + p->v[k - 1].size > pos)
        k--;
    return k;
}

static int overlaps(const struct gfs_patch_rec *r, int shard, uint64_t pos,
                    uint64_t n) {
    return r->shard == shard && r->pos < pos + n && r->pos + r->size > pos;
}

int gfs_patch_overlaps(const struct gfs *fs, int shard, uint64_t pos,
                       uint64_t n) {
    const struct gfs_patch *p = fs->patch;
    if (!p || !p->n || !n)
        return 0;
    size_t k = first_overlap(p, shard, pos);
    return k < p->n && overlaps(&p->v[k], shard, pos, n);
}

int gfs_patch_read(struct gfs *fs, int shard, uint64_t pos, void *buf,
                   size_t n) {
    const struct gfs_patch *p = fs->patch;
    if (!p || !p->n)
        return 0;
    for (size_t k = first_overlap(p, shard, pos);
         k < p->n && overlaps(&p->v[k], shard, pos, n); k++) {
        const struct gfs_patch_rec *r = &p->v[k];
        uint64_t lo = r->pos > pos ? r->pos : pos;
        uint64_t hi = r->pos + r->size < pos + n ? r->pos + r->size : pos + n;
        for (uint64_t o = lo; o < hi;) {
            ssize_t got = pread(p->fd, (char *)buf + (o - pos), hi - o,
                                (off_t)(r->doff + (o - r->pos)));
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                return got < 0 ? errno : EIO;
            o += (uint64_t)got;
        }
    }
    return 0;
}

int gfs_patch_region(struct gfs *fs, int64_t g, uint64_t *doff, char *msg,
                     size_t mn, gfs_patch_read_fn read) {
    struct gfs_patch *p = fs->patch;
    int64_t j;
    int shard, err = open_data(p, 1, msg, mn);
    if (err)
        return err;
    gguf_ctx *c = gfs_tensor_ctx(fs, g, &j, &shard);
    uint64_t pos = gguf_tensor_offset(c, j), size = gfs_tensor_bytes(fs, g);
    char *buf = malloc(PATCH_COPY);
    if (!buf)
        return ENOMEM;
    /* The tensor's bytes as they are now (an earlier region's, if any). */
    for (uint64_t o = 0; o < size && !err;) {
        size_t k = size - o < PATCH_COPY ? (size_t)(size - o) : PATCH_COPY;
        err = read(fs, shard, pos + o, buf, k);
        if (!err && pwrite(p->fd, buf, k, (off_t)(p->end + o)) != (ssize_t)k)
            err = errno ? errno : EIO;
        o += k;
    }
    free(buf);
    if (!err && fdatasync(p->fd) < 0)
        err = errno;
    if (err) {
        snprintf(msg, mn, "cannot copy the tensor into %s: %s", p->shown,
                 strerror(err));
        return err;
    }
    *doff = p->end;
    p->end = (p->end + size + PATCH_ALIGN - 1) / PATCH_ALIGN * PATCH_ALIGN;
    return 0;
}

int gfs_patch_set(struct gfs *fs, int64_t g, uint64_t doff) {
    return put(fs, g, doff);
}

int gfs_patch_records(struct gfs *fs, struct gguf_overlay_tensor **t,
                      size_t *nt) {
    struct gfs_patch *p = fs->patch;
    *t = NULL;
    *nt = 0;
    if (!p || !p->n)
        return 0;
    if (!(*t = calloc(p->n, sizeof **t)))
        return ENOMEM;
    for (size_t k = 0; k < p->n; k++, ++*nt) {
        size_t len;
        int64_t j;
        gguf_ctx *c = gfs_tensor_ctx(fs, p->v[k].g, &j, NULL);
        const char *nm = gguf_tensor_name(c, j, &len);
        if (!((*t)[k].name = strndup(nm, len)))
            return ENOMEM; /* the caller frees what was made */
        (*t)[k].off = p->v[k].doff;
        (*t)[k].size = p->v[k].size;
    }
    return 0;
}
