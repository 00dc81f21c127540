/*
 * remote.h - a GGUF served over HTTP(S) or from the Hugging Face Hub, read
 * through a local block cache (issue 13).  No FUSE and no GGUF here: fs/
 * reads bytes with rmt_read, gguf/ parses the header through a struct
 * gguf_reader that calls it.
 *
 * Sources.  http:// and https:// URLs; hf://OWNER/REPO/PATH[@REVISION] is
 * $HF_ENDPOINT/OWNER/REPO/resolve/REVISION/PATH (HF_ENDPOINT defaults to
 * https://huggingface.co, REVISION to main).  s3://BUCKET/KEY is an
 * object in an S3 bucket (issue 25; s3.c: the endpoint, the settings and
 * where they come from, SigV4 signing by libcurl); it is the same file
 * as an https:// one in every other respect.
 *
 * One version.  rmt_open asks the server (HEAD, redirects followed) for
 * the file's size and identity: a strong ETag, else Last-Modified (else
 * the size alone, with a warning).  Every ranged request after that is
 * conditional (If-Match on the ETag, else If-Unmodified-Since) and its
 * answer is used only if it is exactly what was asked, of that version
 * (answer.c's rules: the range, the size, no encoding, the recorded
 * validator present and equal): a file changed on the server makes reads
 * of bytes not cached fail with EIO and one log line; bytes of two
 * versions are never served.  The cache is keyed by URL + identity +
 * size, so versions never mix there either.
 *
 * Credentials.  Extra headers (-o header=FILE) and HF_TOKEN (hf:// only,
 * as "Authorization: Bearer") are sent only to the origin (scheme, host,
 * port) of the URL the user gave: redirects are followed here, not by
 * libcurl, and a request to any other origin carries none of them.
 *
 * Faults.  Connect and low-speed timeouts (timeout seconds each), a bound
 * on each request (8 x timeout), retries with backoff (0.5 s, 1 s, 2 s)
 * on network errors, 5xx, 429 and answers not as asked, then EIO; one
 * rmt_read waits at most the sum of those (its own requests and the
 * readahead it waits for end by one deadline), and for a second after a
 * failure reads of bytes not cached fail at once (source.c, Failures);
 * a TLS handshake failure is not retried; a 403/410 from a redirected
 * URL (an expired signed URL) is resolved again from the original.  A
 * 401/403/404, or a server that ignores Range, at open: one line naming
 * the URL and the status, rmt_open fails.
 *
 * The cache (cache.c): see its top comment.  Threads: rmt_read may be
 * called from many threads; readahead runs on worker threads started by
 * the first rmt_read with a readahead hint (never before: the FUSE daemon
 * forks after the header was read).
 */
#ifndef GGUFS_REMOTE_H
#define GGUFS_REMOTE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* An s3:// source's URL style: path style for a custom endpoint and
 * virtual-hosted for AWS (AUTO), or as -o s3_path_style=yes|no says. */
enum rmt_s3_style { RMT_S3_AUTO, RMT_S3_VHOST, RMT_S3_PATH };

struct rmt_opts {
    const char *cache_dir;   /* NULL: $XDG_CACHE_HOME/ggufs, ~/.cache/ggufs */
    uint64_t cache_max;      /* bytes; 0: no bound */
    const char *header_file; /* extra request headers, or NULL */
    int hf;                  /* the source was hf://: HF_TOKEN may be sent */
    double timeout;          /* seconds: connect, low speed; 0: 15 */
    int retries;             /* after the first try; < 0: 3 */
    enum rmt_s3_style s3_path_style;
    /* One line (no newline) for the daemon's log; may be NULL. */
    void (*log)(void *u, const char *line);
    void *log_u;
};

struct rmt_src;

/* True if s names a remote source (http://, https://, hf://, s3://). */
int rmt_is_url(const char *s);
/* The http(s) URL of a source (hf:// resolved as above; http(s) and
 * s3:// copied: an s3:// URL is resolved by rmt_open, with the settings
 * it finds), malloc'ed; NULL with msg. */
char *rmt_resolve(const char *url, char *msg, size_t n);
/* url as it may be shown to everyone (/proc/mounts, logs): without user
 * info, query string and fragment.  malloc'ed; NULL if out of memory. */
char *rmt_display_url(const char *url);
/* True if url carries what looks like a credential: user info, or a
 * query parameter named like a signature, token, key, password or secret
 * (what: its name, or "user info").  ps(1) shows a daemon's arguments to
 * every user. */
int rmt_url_secret(const char *url, char *what, size_t n);
/* Opens url (http(s); resolve hf:// first, and set o->hf): reads the header file, probes the server,
 * opens the cache entry.  0, or -1 with msg (one line, no newline,
 * naming the URL and what is wrong). */
int rmt_open(const char *url, const struct rmt_opts *o, struct rmt_src **out,
             char *msg, size_t n);
/* Another file of the same origin and options (a shard named like the
 * first): url is an http(s) URL as rmt_url gives. */
int rmt_open_sibling(const struct rmt_src *first, const char *url,
                     struct rmt_src **out, char *msg, size_t n);
void rmt_close(struct rmt_src *s);

/* The http(s) URL read (hf:// resolved); the size; Last-Modified in
 * seconds since the epoch (0 if none); the identity as text ("etag
 * \"...\"", "last-modified ...", "size"). */
const char *rmt_url(const struct rmt_src *s);
uint64_t rmt_size(const struct rmt_src *s);
int64_t rmt_mtime(const struct rmt_src *s);
const char *rmt_identity(const struct rmt_src *s);

/* Reads n bytes at off (off + n <= size) into buf: from the cache where
 * it has them, else from the server.  ahead > off + n: the reader will
 * probably read up to ahead next (the end of the tensor after the one
 * read): blocks up to there (at most a window) are fetched in the
 * background.  0, or an errno (EIO: the network failed after retries, the
 * file changed on the server; the log says which).  ahead == 0: quiet,
 * no log line for a failure: the caller reports rmt_error(). */
int rmt_read(struct rmt_src *s, uint64_t off, void *buf, size_t n,
             uint64_t ahead);

/* A read served where the bytes are (rmt_read_view): up to RMT_VIEW_MAX
 * pieces, each in a run fetched in this mount (held in memory until
 * rmt_view_release) or in the caller's spill buffer.  Saves the copy of
 * every byte of a first read that rmt_read makes (a reply can be written
 * to the FUSE device straight from the pieces). */
#define RMT_VIEW_MAX 24
struct rmt_view {
    int n;
    struct iovec iov[RMT_VIEW_MAX];
    void *pin[RMT_VIEW_MAX]; /* what each piece holds, NULL for spill */
};

/* As rmt_read, but the bytes are left where they are: v's pieces, in
 * order, make [off, off + n); bytes read from the cache file go into
 * spill (n bytes, at their offset from off).  On success the caller calls
 * rmt_view_release(v) once it is done with the pieces (soon: a piece
 * holds a run's memory).  On failure v holds nothing. */
int rmt_read_view(struct rmt_src *s, uint64_t off, size_t n, uint64_t ahead,
                  void *spill, struct rmt_view *v);
void rmt_view_release(struct rmt_view *v);

/* Why the calling thread's last failed rmt_read failed (one line). */
const char *rmt_error(void);

/* Counters (tests, bench): ranged requests sent, bytes received. */
uint64_t rmt_requests(const struct rmt_src *s);

/* A small document (a page of a listing: doc.c) by GET, with the
 * credentials and faults of a file (above: o->header_file, HF_TOKEN if
 * o->hf, to url's origin only; redirects followed here; timeouts and
 * retries; o->cache_dir unused): its status must be 200, its body at most
 * max bytes.  *body (NUL-terminated, *len bytes) and *next: the absolute
 * URL of the Link header's rel="next" (RFC 8288), or NULL at the last
 * page.  A next link on another origin than url's is refused (so a
 * caller that follows *next talks to the first URL's origin only).  0, or
 * -1 with msg (one line naming the URL and what is wrong: the status, a
 * body too large, a malformed Link header, a next link elsewhere). */
int rmt_get_doc(const char *url, const struct rmt_opts *o, size_t max,
                char **body, size_t *len, char **next, char *msg, size_t n);
/* s3://BUCKET/KEY[?QUERY] into BUCKET (bn bytes: RMT_S3_BUCKET_MAX + 1
 * hold every valid name) and *key (into url).  0, or -1 if url is not
 * s3:// or BUCKET is not a bucket's name (s3.c). */
#define RMT_S3_BUCKET_MAX 63
int rmt_s3_split(const char *url, char *bucket, size_t bn, const char **key);
/* An S3 answer's XML (an error, a listing's page) parsed safely with
 * libxml2: no network, no entity expanded, no DTD loaded; NULL if it is
 * not XML or over 1 GiB.  xmlFreeDoc it. */
struct _xmlDoc;
struct _xmlDoc *rmt_xml_read(const char *body, size_t len);
/* The text of e's first child element named name (xmlFree it), or NULL
 * when e is NULL or has none: an element of such a document. */
struct _xmlNode;
unsigned char *rmt_xml_child(struct _xmlNode *e, const char *name);
/* $HF_ENDPOINT without its trailing '/'s (https://huggingface.co when
 * unset or empty): *len bytes of the returned string. */
const char *rmt_hf_endpoint(size_t *len);

#endif
