/*
 * internal.h - the remote library's parts: http.c (requests, identity,
 * redirects, credentials, retries), cache.c (the durable block store),
 * source.c (blocks' states, the read path, readahead workers).
 */
#ifndef GGUFS_REMOTE_INTERNAL_H
#define GGUFS_REMOTE_INTERNAL_H

#include "remote.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* ---- http.c ------------------------------------------------------------ */

/* What a server said about a file: the identity every later request is
 * conditional on. */
struct rmt_ident {
    uint64_t size;
    char etag[256];   /* strong ETag with its quotes, or "" */
    char lastmod[64]; /* Last-Modified as sent, or "" */
    int64_t mtime;    /* Last-Modified parsed, or 0 */
};

/* ---- url.c ------------------------------------------------------------- */

/* scheme://host:port of url (host in lower case) into out; 0 or -1. */
int rmt_origin(const char *url, char *out, size_t n);

/* ---- s3.c, s3conf.c --------------------------------------------------- */

/* An s3:// source's settings (s3.c's top comment: where each comes
 * from).  key NULL: requests are not signed. */
struct rmt_s3 {
    char *key, *secret, *token; /* the credentials, or NULL */
    char *endpoint;             /* http(s)://HOST[:PORT], or NULL: AWS */
    char region[64];
    char sigv4[96];               /* CURLOPT_AWS_SIGV4's "aws:amz:REGION:s3" */
    enum rmt_s3_style path_style; /* as rmt_opts' s3_path_style */
};
struct curl_slist;
/* True if s is an s3:// URL. */
int rmt_is_s3(const char *s);
/* s3conf.c: settings from the environment, then the profile, into c.
 * 0 or -1 with msg (naming the variable or file at fault); rmt_s3_free
 * in both cases. */
int rmt_s3_load(struct rmt_s3 *c, enum rmt_s3_style path_style, char *msg,
                size_t n);
int rmt_s3_copy(struct rmt_s3 *d, const struct rmt_s3 *s);
void rmt_s3_free(struct rmt_s3 *c);
/* The signing headers (x-amz-content-sha256, x-amz-security-token)
 * appended to *l when c signs.  0 or -1. */
int rmt_s3_headers(const struct rmt_s3 *c, struct curl_slist **l);
/* The endpoint URL of s3://BUCKET/KEY[?QUERY], malloc'ed; NULL with
 * msg. */
char *rmt_s3_url(const struct rmt_s3 *c, const char *url, char *msg, size_t n);

/* ---- answer.c ---------------------------------------------------------- */

/* The longest Link header kept (all its lines, joined by ", "). */
#define RMT_LINK_MAX 4096

/* What one answer said, as its header lines arrived (rmt_answer_line). */
struct rmt_answer {
    long status;
    char etag[256], lastmod[64], accept_ranges[32], encoding[64];
    char link[RMT_LINK_MAX]; /* Link, or "" */
    int link_long;           /* Link was longer than RMT_LINK_MAX - 1 */
    uint64_t cr_first, cr_last, cr_total; /* Content-Range */
    uint64_t clen;                        /* Content-Length */
    char region[64];                      /* x-amz-bucket-region (S3), or "" */
    int has_cr, bad_cr, has_clen;
    int malformed; /* a header sent twice with two values, a bad number */
};
/* What was asked, and what the body brought. */
struct rmt_ask {
    int head;    /* a HEAD: no range */
    int probing; /* a ranged GET of byte 0 for the size: no identity yet */
    int doc;     /* a whole document (rmt_http_doc): len is its bound */
    uint64_t off, len;
    uint64_t got; /* body bytes received (at most len) */
    int overlong; /* the body went on past len */
};
enum rmt_verdict { RMT_OK, RMT_RETRY, RMT_FATAL, RMT_CHANGED };
/* Takes one header line as libcurl gives it (with its CRLF); a status
 * line starts a new answer. */
void rmt_answer_line(struct rmt_answer *a, const char *p, size_t len);
/* The verdict on answer a to request q for the version id (answer.c's
 * rules); msg says why when not RMT_OK (no URL in it). */
enum rmt_verdict rmt_answer_check(const struct rmt_answer *a,
                                  const struct rmt_ident *id,
                                  const struct rmt_ask *q, char *msg, size_t n);
/* True if a carries no Content-Encoding but identity. */
int rmt_answer_identity_encoding(const struct rmt_answer *a);

/* One file on one server: URLs, credentials, idle connections. */
struct rmt_http {
    char *url;        /* http(s) URL as resolved from what the user gave */
    char *shown;      /* url without user info and query: for the log */
    char origin[512]; /* scheme://host:port of the user's URL: credentials
                         go there only */
    char *hdr_text;   /* the header lines credentials are made of (copied
                         to siblings) */
    struct curl_slist *creds; /* header file's lines + HF_TOKEN */
    double timeout;
    int retries;
    struct rmt_ident id;
    struct rmt_s3 *s3; /* an s3:// source's settings, or NULL */
    void (*log)(void *u, const char *line);
    void *log_u;
    atomic_int changed;     /* the file changed on the server: said once */
    atomic_int closing;     /* set by rmt_close: requests in flight stop, and
                           none is retried or started */
    atomic_ullong n_ranged; /* ranged requests sent */
    pthread_mutex_t mu;     /* guards eff and the idle handles */
    char *eff;              /* the URL the last redirect chain ended at */
    void *idle[16];         /* CURL handles, kept for keep-alive */
    int n_idle;
    /* rmt_logf's rate limit (a leaf lock, taken under anything). */
    pthread_mutex_t log_mu;
    double log_tokens, log_last; /* the bucket, when last filled */
    uint64_t log_dropped;
};

/* Sets h up for url (http/https/hf/s3) with o's header file, hf,
 * timeout, retries and s3_path_style: resolves hf:// and s3://, reads
 * the header file and makes the credentials (hf: HF_TOKEN is one too;
 * s3: the settings of s3.c), asks nothing.  0 or -1 with msg;
 * rmt_http_close in both cases. */
int rmt_http_init(struct rmt_http *h, const char *url, const struct rmt_opts *o,
                  char *msg, size_t n);
/* rmt_http_init, then asks the server (HEAD; s3: a GET of byte 0) for
 * the identity.  0 or -1 with msg. */
int rmt_http_open(struct rmt_http *h, const char *url, const struct rmt_opts *o,
                  char *msg, size_t n);
/* What S3 said of a refused request (its XML error body, len bytes, and
 * the answer's headers a) as one line into msg; msg kept when the body
 * says nothing (s3.c). */
void rmt_s3_explain(const struct rmt_answer *a, const char *body, size_t len,
                    char *msg, size_t n);
/* The same credentials and settings as first, for another URL. */
int rmt_http_open_like(struct rmt_http *h, const struct rmt_http *first,
                       const char *url, char *msg, size_t n);
void rmt_http_close(struct rmt_http *h);
/* Fetches bytes [off, off + n) of the file's version h->id into buf,
 * retrying as remote.h says (a retry writes buf again from its start),
 * every try and backoff ended by deadline (rmt_now() seconds; 0: none).
 * 0, or EIO with msg (no URL in it). */
int rmt_http_get(struct rmt_http *h, uint64_t off, size_t n, void *buf,
                 double deadline, char *msg, size_t msgn);
/* A document: GET url whole (no Range, no condition), redirects and
 * retries as for the file (credentials only to h->origin).  Status 200,
 * identity encoding and at most max bytes, else -1 with msg (no URL in
 * it; "HTTP 404 (not found)", "larger than MAX bytes").  On success
 * d->body (max + 1 bytes at most, NUL-terminated), d->len, d->final (the
 * URL the redirects ended at: relative links resolve against it) and
 * d->a (the answer's headers: Link); free d->body and d->final. */
struct rmt_doc {
    char *body, *final;
    size_t len;
    struct rmt_answer a;
};
int rmt_http_doc(struct rmt_http *h, const char *url, size_t max,
                 struct rmt_doc *d, char *msg, size_t n);
/* The rel="next" target of a Link header value (RFC 8288: links separated
 * by commas, "<URI-Reference>" then ";"-separated params, token or quoted
 * values; the first rel param of a link counts, its value a
 * space-separated list of relation types, case-insensitive).  *ref: the
 * URI-reference (malloc'ed, not resolved) or NULL when no link is next.
 * -1 with msg when the value is malformed or names two different next
 * links (a listing would be cut or forked without saying so). */
int rmt_link_next(const char *v, char **ref, char *msg, size_t n);
/* The longest a request and its retries take (remote.h, Faults): every
 * try's bound (8 x timeout) and every backoff. */
double rmt_http_bound(const struct rmt_http *h);
/* CLOCK_MONOTONIC in seconds. */
double rmt_now(void);
/* A line to the log, "URL: what": 20 at once at most, then one a
 * second; the next line written says how many were left out. */
void rmt_logf(struct rmt_http *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- cache.c ----------------------------------------------------------- */

#define RMT_BLOCK ((uint64_t)64 << 10) /* bytes per cache block */

/* A cache entry: one file version's blocks, durable on disk. */
struct rmt_cache;
/* Opens (creating) the entry for key (url, identity, size) under dir.
 * present[b] is set to 1 and hash[b] to the recorded hash for each block
 * the entry holds (nb blocks).  0 or -1 with msg. */
int rmt_cache_open(const char *dir, const char *key, uint64_t size,
                   uint64_t max, uint8_t *present, uint64_t *hash,
                   struct rmt_cache **out, char *msg, size_t n);
void rmt_cache_close(struct rmt_cache *c);
/* Alignment of buffers and offsets that direct I/O needs (the largest
 * logical block size in use; RMT_BLOCK is a multiple). */
#define RMT_DIO_ALIGN 4096
/* Writes n bytes at off into the entry's data (not yet counted).  With p
 * and off RMT_DIO_ALIGN-aligned, the aligned part goes by direct I/O where
 * the filesystem allows it, past the page cache.  0 or an errno. */
int rmt_cache_put(struct rmt_cache *c, uint64_t off, const void *p, size_t n);
/* Blocks [b0, b0 + k), written whole, with their hashes: recorded once
 * durable (batched: cache.c, Rules; rmt_cache_close flushes).  0 or an
 * errno. */
int rmt_cache_commit(struct rmt_cache *c, uint64_t b0, uint64_t k,
                     const uint64_t *hash);
/* Reads n bytes at off from the entry's data.  0 or an errno. */
int rmt_cache_pread(struct rmt_cache *c, uint64_t off, void *buf, size_t n);
/* The hash of a block's bytes (len <= RMT_BLOCK). */
uint64_t rmt_block_hash(const void *p, size_t len);
/* Bytes the cache directory holds (all entries), as counted at open and
 * kept up to date by this mount's stores. */
uint64_t rmt_cache_bytes(const struct rmt_cache *c);
/* Frees room until the cache holds at most its bound: other entries
 * least recently used first (whole), then this entry's blocks listed in
 * victims (k of them, least recently used first): each is punched out
 * and recorded absent.  Returns how many of victims were evicted. */
uint64_t rmt_cache_evict(struct rmt_cache *c, const uint64_t *victims,
                         uint64_t k);

#endif
