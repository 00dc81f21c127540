/*
 * remote.c - a model that lives on a web server or the Hugging Face Hub
 * (issue 13), as the FUSE layer sees it: the shards' remote sources
 * (remote/include/remote.h), their headers parsed through struct gguf_reader, and
 * the one read function gfs_data_read calls for them.  Remote mounts are
 * read-only unless they have an overlay (edits go there, never to the
 * server; the overlay's identity includes gfs_remote_identity); everything
 * else of the tree is the same as for a local file.
 */
#include "../base/base.h"
#include "source.h"
#include "catalog.h"
#include "remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct gfs_remote {
    struct rmt_opts opts;
    struct rmt_src **src; /* per shard, in opening order */
    int n;
    uint64_t **ends; /* per shard: tensor data ends (absolute), sorted */
    int64_t *n_ends;
    const char *query;   /* the URL's query ("?..."), put back on each shard's
                          name, or "" */
    uint64_t max_header; /* bytes of each shard's header at most */
};

/* Which files (indexes of fs->shards) are remote, and whose source they
 * are: the model's (fs->remote), or a mix's remote sources (more).  Behind
 * fs->rfiles: made by the first remote file's open, at mount (NULL: every
 * file is local), read-only after it, freed by gfs_remote_close. */
struct gfs_rfiles {
    struct gfs_rfile {
        struct gfs_remote *r;
        int k;
    } * v;
    int n;
    struct gfs_remote **more;
    int n_more;
};

/* Log lines of the sources: stderr until the mount is set up, then the
 * daemon's log. */
static void remote_log(void *u, const char *line) {
    struct gfs *fs = u; /* NULL: a source opened alone (a command) */
    if (!fs || !fs->mnt)
        fprintf(stderr, "ggufs: %s\n", line);
    else
        gfs_log(fs, "%s", line);
}

static enum gguf_status src_read(void *u, uint64_t off, void *buf, size_t n,
                                 size_t *got, struct gguf_error *err) {
    struct rmt_src *s = u;
    uint64_t size = rmt_size(s);
    if (off >= size) {
        *got = 0;
        return GGUF_OK;
    }
    if (n > size - off)
        n = (size_t)(size - off);
    int e = rmt_read(s, off, buf, n, 0);
    if (e)
        return gguf_fail(err, GGUF_E_IO, "%s",
                         rmt_error()[0] ? rmt_error() : strerror(e));
    *got = n;
    return GGUF_OK;
}

/* gguf_open_set_by's opener: the first URL with rmt_open, siblings like
 * it; each file's header through its source. */
static enum gguf_status open_one(void *u, const char *name, unsigned flags,
                                 gguf_ctx **out, struct gguf_error *err) {
    struct gfs_remote *r = u;
    struct rmt_src *s = NULL, **v;
    char msg[512], *url = NULL;
    if (asprintf(&url, "%s%s", name, r->query) < 0)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    int rc = r->n ? rmt_open_sibling(r->src[0], url, &s, msg, sizeof msg)
                  : rmt_open(url, &r->opts, &s, msg, sizeof msg);
    free(url);
    if (rc != 0)
        return gguf_fail(err, GGUF_E_IO, "%s", msg);
    if (!(v = realloc(r->src, (size_t)(r->n + 1) * sizeof *v))) {
        rmt_close(s);
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    }
    r->src = v;
    r->src[r->n++] = s;
    /* The server's size is only a claim: the header read is bounded. */
    struct gguf_reader rd = {.read = src_read,
                             .u = s,
                             .size = rmt_size(s),
                             .first_chunk = 65536,
                             .max_header = r->max_header};
    return gguf_open_reader(out, &rd, rmt_url(s), flags, err);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The sorted ends of each shard's tensors (v, n of them), for readahead
 * hints. */
static int tensor_ends(struct gfs_remote *r, gguf_ctx **v, int n) {
    if (!(r->ends = calloc((size_t)n, sizeof *r->ends)) ||
        !(r->n_ends = calloc((size_t)n, sizeof *r->n_ends)))
        return -1;
    for (int sh = 0; sh < n; sh++) {
        gguf_ctx *c = v[sh];
        int64_t nt = gguf_n_tensors(c);
        if (!(r->ends[sh] = malloc((size_t)(nt + 1) * sizeof **r->ends)))
            return -1;
        for (int64_t i = 0; i < nt; i++)
            r->ends[sh][i] = gguf_tensor_offset(c, i) + gguf_tensor_size(c, i);
        qsort(r->ends[sh], (size_t)nt, sizeof **r->ends, cmp_u64);
        r->n_ends[sh] = nt;
    }
    return 0;
}

/* remote/'s options from the command line's (hf: HF_TOKEN may be sent). */
static struct rmt_opts rmt_opts_of(const struct gfs_remote_opts *o, int hf,
                                   void (*log)(void *u, const char *line),
                                   void *log_u) {
    return (struct rmt_opts){.cache_dir = o->cache_dir,
                             .cache_max = o->cache_max,
                             .header_file = o->header_file,
                             .hf = hf,
                             .timeout = o->net_timeout,
                             .retries = o->retries,
                             .s3_path_style = o->s3_path_style,
                             .log = log,
                             .log_u = log_u};
}

static void remote_free(struct gfs_remote *r) {
    if (!r)
        return;
    for (int i = 0; i < r->n; i++) {
        rmt_close(r->src[i]);
        if (r->ends)
            free(r->ends[i]);
    }
    free(r->ends);
    free(r->n_ends);
    free(r->src);
    free(r);
}

/* Opens url and its sibling shards: *v, *n the contexts, the result their
 * sources (NULL with err and bad on failure). */
static struct gfs_remote *open_set(struct gfs *fs, const char *url,
                                   const struct gfs_remote_opts *o, int hf,
                                   unsigned flags, gguf_ctx ***v, int *n,
                                   char *bad, size_t bad_len,
                                   struct gguf_error *err) {
    struct gfs_remote *r = calloc(1, sizeof *r);
    if (!r)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory"), NULL;
    r->opts = rmt_opts_of(o, hf, remote_log, fs);
    r->max_header = o->max_header ? o->max_header : GFS_MAX_HEADER;
    /* Shards are found by the name their path ends in; a query string
     * (a download link's "?download=true") is the same for every shard.
     * URLs signed one by one cannot be found from the first. */
    const char *q = strchr(url, '?');
    char *base = strndup(url, q ? (size_t)(q - url) : strlen(url));
    r->query = q ? q : "";
    if (!base) {
        gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto fail;
    }
    enum gguf_status st =
        gguf_open_set_by(base, open_one, r, flags, v, n, bad, bad_len, err);
    free(base);
    r->query = "";
    if (st != GGUF_OK)
        goto fail;
    if (tensor_ends(r, *v, *n) != 0) {
        gguf_close_set(*v, *n);
        *v = NULL;
        gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto fail;
    }
    return r;
fail:
    remote_free(r);
    return NULL;
}

/* fs->rfiles, made at the first remote file; NULL if out of memory. */
static struct gfs_rfiles *rfiles_of(struct gfs *fs) {
    if (!fs->rfiles)
        fs->rfiles = calloc(1, sizeof *fs->rfiles);
    return fs->rfiles;
}

/* Records that files [first, first + n) of fs are r's sources 0.. n-1. */
static int map_files(struct gfs *fs, struct gfs_remote *r, int first, int n) {
    struct gfs_rfiles *rf = rfiles_of(fs);
    struct gfs_rfile *m =
        rf ? realloc(rf->v, (size_t)(first + n) * sizeof *rf->v) : NULL;
    if (!m)
        return -1;
    for (int f = rf->n; f < first; f++)
        m[f] = (struct gfs_rfile){NULL, 0}; /* local files */
    for (int k = 0; k < n; k++)
        m[first + k] = (struct gfs_rfile){r, k};
    rf->v = m;
    rf->n = first + n;
    return 0;
}

int gfs_remote_open(struct gfs *fs, const char *url,
                    const struct gfs_remote_opts *o, unsigned flags, char *bad,
                    size_t bad_len, struct gguf_error *err) {
    struct gfs_remote *r = open_set(fs, url, o, o->hf, flags, &fs->shards,
                                    &fs->n_shards, bad, bad_len, err);
    if (!r)
        return -1;
    fs->remote = r;
    if (map_files(fs, r, 0, fs->n_shards) != 0)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory"), -1;
    return 0;
}

int gfs_remote_open_more(struct gfs *fs, const char *source,
                         const struct gfs_remote_opts *o, unsigned flags,
                         gguf_ctx ***v, int *n, char *bad, size_t bad_len,
                         struct gguf_error *err) {
    char msg[512];
    char *url = gfs_remote_resolve(source, msg, sizeof msg);
    if (!url) {
        snprintf(bad, bad_len, "%s", source);
        return gguf_fail(err, GGUF_E_INVAL, "%s", msg), -1;
    }
    struct gfs_remote *r =
        open_set(fs, url, o, strncmp(source, "hf://", 5) == 0, flags, v, n, bad,
                 bad_len, err);
    free(url);
    struct gfs_rfiles *rf = r ? rfiles_of(fs) : NULL;
    struct gfs_remote **more =
        rf ? realloc(rf->more, (size_t)(rf->n_more + 1) * sizeof *more) : NULL;
    if (!more || map_files(fs, r, fs->n_files, *n) != 0) {
        if (more)
            rf->more = more;
        if (r) {
            gguf_close_set(*v, *n);
            *v = NULL;
            remote_free(r);
            gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        }
        return -1;
    }
    rf->more = more;
    rf->more[rf->n_more++] = r;
    return 0;
}

int gfs_remote_file(const struct gfs *fs, int file) {
    const struct gfs_rfiles *rf = fs->rfiles;
    return rf && file >= 0 && file < rf->n && rf->v[file].r;
}

void gfs_remote_close(struct gfs *fs) {
    remote_free(fs->remote);
    fs->remote = NULL;
    struct gfs_rfiles *rf = fs->rfiles;
    for (int i = 0; rf && i < rf->n_more; i++)
        remote_free(rf->more[i]);
    if (rf) {
        free(rf->more);
        free(rf->v);
    }
    free(rf);
    fs->rfiles = NULL;
}

int gfs_remote_list(const char *url, const struct gfs_remote_opts *o,
                    void (*log)(void *u, const char *line), void *log_u,
                    struct cat_list *out, char *msg, size_t n) {
    int s3 = cat_s3_is_store(url);
    struct rmt_opts ro = rmt_opts_of(o, !s3, log, log_u);
    return s3 ? cat_s3_list(url, &ro, out, msg, n)
              : cat_hub_list(url, &ro, out, msg, n);
}

int gfs_remote_is(const char *source) {
    return rmt_is_url(source);
}

char *gfs_remote_resolve(const char *source, char *msg, size_t n) {
    return rmt_resolve(source, msg, n);
}

char *gfs_remote_shown(const char *url, char *msg, size_t n) {
    char what[80];
    char *shown = rmt_display_url(url);
    msg[0] = '\0';
    if (!shown)
        snprintf(msg, n, "out of memory");
    else if (rmt_url_secret(url, what, sizeof what))
        snprintf(msg, n,
                 "the URL carries what looks like a credential (%s): every "
                 "user sees it in ps(1); put secrets in -o header=FILE or "
                 "the environment (HF_TOKEN)",
                 what);
    return shown;
}

/* Readahead: the end of the tensor after the one holding pos (a reader of
 * tensor N will want N+1), or of the one holding it if it is the last. */
static uint64_t ahead_of(const struct gfs_remote *r, int shard, uint64_t pos) {
    const uint64_t *e = r->ends[shard];
    int64_t lo = 0, hi = r->n_ends[shard];
    while (lo < hi) { /* the first end > pos */
        int64_t mid = lo + (hi - lo) / 2;
        if (e[mid] > pos)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo + 1 < r->n_ends[shard])
        return e[lo + 1];
    return lo < r->n_ends[shard] ? e[lo] : 0;
}

int gfs_remote_read(struct gfs *fs, int shard, uint64_t pos, void *buf,
                    size_t n) {
    if (!gfs_remote_file(fs, shard))
        return EIO;
    struct gfs_remote *r = fs->rfiles->v[shard].r;
    int k = fs->rfiles->v[shard].k;
    uint64_t ahead = ahead_of(r, k, pos);
    return rmt_read(r->src[k], pos, buf, n, ahead ? ahead : 1);
}

int gfs_remote_view(struct gfs *fs, int shard, uint64_t pos, size_t n,
                    void *spill, struct rmt_view *v) {
    if (!gfs_remote_file(fs, shard))
        return EIO;
    struct gfs_remote *r = fs->rfiles->v[shard].r;
    int k = fs->rfiles->v[shard].k;
    uint64_t ahead = ahead_of(r, k, pos);
    return rmt_read_view(r->src[k], pos, n, ahead ? ahead : 1, spill, v);
}

void gfs_remote_stat(const struct gfs *fs, struct stat *st) {
    struct rmt_src *s = fs->remote->src[0];
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = (off_t)rmt_size(s);
    st->st_mtim.tv_sec = (time_t)rmt_mtime(s);
    st->st_atim = st->st_ctim = st->st_mtim;
}

struct gfs_remote *gfs_remote_open_alone(const char *url,
                                         const struct gfs_remote_opts *o,
                                         gguf_ctx ***v, int *n, char *bad,
                                         size_t bad_len,
                                         struct gguf_error *err) {
    return open_set(NULL, url, o, o->hf, 0, v, n, bad, bad_len, err);
}

void gfs_remote_free(struct gfs_remote *r) {
    remote_free(r);
}

int gfs_remote_identity(const struct gfs *fs, char *out, size_t n) {
    return gfs_remote_identity_of(fs->remote, out, n);
}

int gfs_remote_identity_of(const struct gfs_remote *r, char *out, size_t n) {
    size_t used = 0;
    int fits = 1;
    if (!r || !n)
        return -1;
    out[0] = '\0';
    for (int i = 0; fits && i < r->n; i++) {
        int w = snprintf(out + used, n - used, "%s%s", i ? "; " : "",
                         rmt_identity(r->src[i]));
        fits = w >= 0 && (size_t)w < n - used;
        used += fits ? (size_t)w : 0;
    }
    if (fits)
        return 0;
    /* Too long to keep whole (a big set): its hash stands for it. */
    XXH3_state_t *h = XXH3_createState();
    if (!h)
        return -1;
    XXH3_128bits_reset(h);
    for (int i = 0; i < r->n; i++)
        XXH3_128bits_update(h, rmt_identity(r->src[i]),
                            strlen(rmt_identity(r->src[i])) + 1);
    XXH128_hash_t x = XXH3_128bits_digest(h);
    XXH3_freeState(h);
    snprintf(out, n, "%d files, xxh3-128:%016llx%016llx", r->n,
             (unsigned long long)x.high64, (unsigned long long)x.low64);
    return 0;
}

static const char *const remote_attrs[] = {
    "user.ggufs.url", "user.ggufs.identity", "user.ggufs.requests"};

int gfs_remote_xattr_list(const struct gfs *fs, struct gguf_buf *out) {
    for (size_t k = 0; fs->remote && k < 3; k++)
        if (gguf_buf_add(out, remote_attrs[k], strlen(remote_attrs[k]) + 1) !=
            GGUF_OK)
            return ENOMEM;
    return 0;
}

int gfs_remote_xattr(const struct gfs *fs, const char *name,
                     struct gguf_buf *out) {
    const struct gfs_remote *r = fs->remote;
    char tmp[64];
    const char *v = NULL;
    if (!r)
        return ENODATA;
    if (strcmp(name, remote_attrs[0]) == 0)
        v = fs->path; /* as shown to all: no user info, no query */
    else if (strcmp(name, remote_attrs[1]) == 0)
        v = rmt_identity(r->src[0]);
    else if (strcmp(name, remote_attrs[2]) == 0) {
        uint64_t sum = 0;
        for (int i = 0; i < r->n; i++)
            sum += rmt_requests(r->src[i]);
        snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)sum);
        v = tmp;
    }
    if (!v)
        return ENODATA;
    return gguf_buf_add(out, v, strlen(v)) == GGUF_OK ? 0 : ENOMEM;
}
