/*
 * http.c - requests for a remote file with libcurl: hf:// resolution, the
 * identity asked at open, conditional ranged GETs, redirects followed here
 * (so that credentials never leave the user's origin), timeouts and
 * retries; and the same for a small document (a listing: rmt_http_doc,
 * used by doc.c).  The rules are in remote.h; this file is their one
 * place.
 */
#include "internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_HOPS 10
#define HEADER_FILE_MAX 65536
#define DEFAULT_TIMEOUT 15.0
#define DEFAULT_RETRIES 3
#define EBODY_MAX 8192 /* bytes of an S3 error body kept */

/* Log lines a source may write at once, and then per second.  A client
 * that retries a failing read in a loop (a mapped page whose SIGBUS
 * handler returns re-faults it: Node.js does) makes a failed request, and
 * a line, per retry: thousands a second. */
#define LOG_BURST 20
#define LOG_PER_SEC 1.0

double rmt_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec / 1e9;
}

/* Whether a line may be written now (a token of the bucket taken), and
 * how many were left out before it.  Caller holds h->log_mu. */
static int log_allowed(struct rmt_http *h, uint64_t *dropped) {
    double t = rmt_now();
    h->log_tokens += (t - h->log_last) * LOG_PER_SEC;
    if (h->log_tokens > LOG_BURST)
        h->log_tokens = LOG_BURST;
    h->log_last = t;
    if (h->log_tokens < 1) {
        h->log_dropped++;
        return 0;
    }
    h->log_tokens -= 1;
    *dropped = h->log_dropped;
    h->log_dropped = 0;
    return 1;
}

void rmt_logf(struct rmt_http *h, const char *fmt, ...) {
    char line[1024];
    uint64_t dropped = 0;
    pthread_mutex_lock(&h->log_mu);
    int ok = log_allowed(h, &dropped);
    pthread_mutex_unlock(&h->log_mu);
    if (!ok || !h->log)
        return;
    int k = snprintf(line, sizeof line, "%s: ", h->shown ? h->shown : "?");
    va_list ap;
    va_start(ap, fmt);
    if (k > 0 && (size_t)k < sizeof line)
        k += vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
    va_end(ap);
    if (dropped && k > 0 && (size_t)k < sizeof line)
        snprintf(line + k, sizeof line - (size_t)k,
                 " (%llu lines like it left out before this one)",
                 (unsigned long long)dropped);
    h->log(h->log_u, line);
}

/* The header file: "Name: value" lines; blank lines and lines starting
 * with '#' skipped.  Read once, bounded, a regular file.  0 or -1. */
static int read_header_file(const char *path, char **text, char *msg,
                            size_t n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
        sb.st_size > HEADER_FILE_MAX) {
        snprintf(msg, n, "header file %s: %s", path,
                 fd < 0                ? strerror(errno)
                 : S_ISREG(sb.st_mode) ? "larger than 64 KiB"
                                       : "not a regular file");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char *b = calloc(1, (size_t)sb.st_size + 1);
    ssize_t r = b ? read(fd, b, (size_t)sb.st_size) : -1;
    close(fd);
    if (r < 0) {
        snprintf(msg, n, "header file %s: cannot read it", path);
        free(b);
        return -1;
    }
    b[r] = '\0';
    *text = b;
    return 0;
}

/* Credentials from the header file's text and, for hf://, HF_TOKEN. */
static int make_creds(struct rmt_http *h, int hf, char *msg, size_t n) {
    char *t = h->hdr_text ? strdup(h->hdr_text) : NULL, *save = NULL;
    int lineno = 0;
    for (char *l = t ? strtok_r(t, "\n", &save) : NULL; l;
         l = strtok_r(NULL, "\n", &save)) {
        lineno++;
        size_t len = strlen(l);
        if (len && l[len - 1] == '\r')
            l[--len] = '\0';
        if (!len || l[0] == '#')
            continue;
        char *colon = strchr(l, ':');
        if (!colon || colon == l || strpbrk(l, "\r")) {
            snprintf(msg, n, "header file line %d is not 'Name: value'",
                     lineno);
            free(t);
            return -1;
        }
        h->creds = curl_slist_append(h->creds, l);
    }
    free(t);
    const char *tok = getenv("HF_TOKEN");
    if (hf && tok && *tok && !strpbrk(tok, "\r\n")) {
        char *line = NULL;
        if (asprintf(&line, "Authorization: Bearer %s", tok) < 0)
            return -1;
        h->creds = curl_slist_append(h->creds, line);
        free(line);
    }
    if (h->s3 && rmt_s3_headers(h->s3, &h->creds) != 0) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    return 0;
}

/* ---- one request --------------------------------------------------------- */

struct resp {
    struct rmt_answer a; /* the headers (answer.c) */
    struct rmt_ask q;    /* what was asked, what the body brought */
    uint8_t *buf;        /* the body goes here (q.len bytes; a document's
                            grows up to q.len + 1: doc_cap) */
    size_t doc_cap;
    const char *start; /* a document's URL (else h->eff or h->url) */
    char *final;       /* a document's URL after its redirects */
    int nomem;         /* a document's buffer could not grow */
    char *ebody;       /* an S3 source's error body (EBODY_MAX), or NULL */
    size_t elen;
    int bad_body; /* the body was refused: the transfer aborted */
};

static size_t on_header(char *p, size_t sz, size_t nm, void *u) {
    rmt_answer_line(&((struct resp *)u)->a, p, sz * nm);
    return sz * nm;
}

/* A document's buffer made room for len more bytes and a NUL: grown as
 * the body comes, never past q.len + 1.  0, or -1 (out of memory). */
static int doc_room(struct resp *r, size_t len) {
    size_t need = (size_t)r->q.got + len + 1;
    if (need <= r->doc_cap)
        return 0;
    size_t cap = r->doc_cap ? r->doc_cap : 65536;
    while (cap < need)
        cap *= 2;
    if (cap > (size_t)r->q.len + 1)
        cap = (size_t)r->q.len + 1;
    uint8_t *b = realloc(r->buf, cap);
    if (!b)
        return -1;
    r->buf = b;
    r->doc_cap = cap;
    return 0;
}

/* The body, where it is what was asked: of a 206 (a document's: of a
 * 200), at most q.len bytes, not encoded.  Anything else aborts the
 * transfer (answer.c's rules 1 and 5 then say why). */
static size_t on_body(char *p, size_t sz, size_t nm, void *u) {
    struct resp *r = u;
    size_t len = sz * nm;
    if (r->a.status < 200 || r->a.status >= 300) {
        /* an error page or a redirect's body: ignored, but S3's says why */
        size_t k = r->ebody && len < EBODY_MAX - r->elen ? len : 0;
        if (k) /* no body kept (not S3): no copy, not even of 0 bytes */
            memcpy(r->ebody + r->elen, p, k);
        r->elen += k;
        return len;
    }
    if (r->a.status != (r->q.doc ? 200 : 206) ||
        !rmt_answer_identity_encoding(&r->a)) {
        r->bad_body = 1;
        return 0;
    }
    if (len > r->q.len - r->q.got) {
        r->q.overlong = 1;
        r->bad_body = 1;
        return 0;
    }
    if (r->q.doc && doc_room(r, len) != 0) {
        r->nomem = r->bad_body = 1;
        return 0;
    }
    memcpy(r->buf + r->q.got, p, len);
    r->q.got += len;
    if (r->q.doc)
        r->buf[r->q.got] = 0;
    return len;
}

static CURL *handle_get(struct rmt_http *h) {
    CURL *c = NULL;
    pthread_mutex_lock(&h->mu);
    if (h->n_idle)
        c = h->idle[--h->n_idle];
    pthread_mutex_unlock(&h->mu);
    return c ? c : curl_easy_init();
}

static void handle_put(struct rmt_http *h, CURL *c) {
    pthread_mutex_lock(&h->mu);
    if (h->n_idle < (int)(sizeof h->idle / sizeof *h->idle)) {
        h->idle[h->n_idle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&h->mu);
    if (c)
        curl_easy_cleanup(c);
}

/* libcurl's progress callback: nonzero aborts the transfer.  Unmounting
 * must not wait for readahead the timeouts would end only much later. */
static int on_progress(void *u, curl_off_t dt, curl_off_t dn, curl_off_t ut,
                       curl_off_t un) {
    (void)dt, (void)dn, (void)ut, (void)un;
    return atomic_load(&((struct rmt_http *)u)->closing);
}

/* Seconds left before deadline (a CLOCK_MONOTONIC time; 0: none, then
 * 1e9). */
static double left_s(double deadline) {
    return deadline > 0 ? deadline - rmt_now() : 1e9;
}

/* One request of url (no redirect followed): HEAD if r->q.head, else a
 * GET of [off, off + r->q.len).  creds: send the credentials.  The
 * request ends by deadline (rmt_http_get). */
static CURLcode perform(struct rmt_http *h, CURL *c, const char *url, int creds,
                        struct resp *r, double deadline, char *errbuf) {
    struct curl_slist *hd = NULL;
    char line[400], range[64];
    for (struct curl_slist *s = creds ? h->creds : NULL; s; s = s->next)
        hd = curl_slist_append(hd, s->data);
    /* Model bytes as they are on the server, never compressed. */
    hd = curl_slist_append(hd, "Accept-Encoding: identity");
    /* Not to S3 (its listings are XML): libcurl 7.88 signs every header
     * and sorts the names with their ':', so "accept-encoding" before
     * "accept", and S3 would find the signature wrong. */
    if (r->q.doc && !h->s3)
        hd = curl_slist_append(hd, "Accept: application/json");
    /* Conditional on the version recorded (none yet at the probe). */
    if (r->q.doc) {
        /* a document is not the file: no version, no range */
    } else if (!r->q.head && h->id.etag[0]) {
        snprintf(line, sizeof line, "If-Match: %s", h->id.etag);
        hd = curl_slist_append(hd, line);
    } else if (!r->q.head && h->id.lastmod[0]) {
        snprintf(line, sizeof line, "If-Unmodified-Since: %s", h->id.lastmod);
        hd = curl_slist_append(hd, line);
    }
    double bound = h->timeout * 8, left = left_s(deadline);
    if (left < bound)
        bound = left > 0.001 ? left : 0.001;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "ggufs/" GGUFS_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(h->timeout * 1000));
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
                     (long)(h->timeout < 1 ? 1 : h->timeout));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(bound * 1000));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L << 10);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, h);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    if (creds && h->s3 && h->s3->key) { /* signed by libcurl (s3.c) */
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, h->s3->sigv4);
        curl_easy_setopt(c, CURLOPT_USERNAME, h->s3->key);
        curl_easy_setopt(c, CURLOPT_PASSWORD, h->s3->secret);
    }
    if (r->q.doc) {
        /* the whole body */
    } else if (!r->q.head) {
        snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)r->q.off,
                 (unsigned long long)(r->q.off + r->q.len - 1));
        curl_easy_setopt(c, CURLOPT_RANGE, range);
        atomic_fetch_add(&h->n_ranged, 1);
    } else {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    }
    errbuf[0] = '\0';
    CURLcode rc = curl_easy_perform(c);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hd);
    return rc;
}

/* Errors of a TLS handshake: an https:// URL whose server speaks plain
 * HTTP, a certificate that does not verify.  Retrying changes nothing. */
static int tls_error(CURLcode rc) {
    return rc == CURLE_SSL_CONNECT_ERROR ||
           rc == CURLE_PEER_FAILED_VERIFICATION ||
           rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CACERT_BADFILE ||
           rc == CURLE_SSL_ISSUER_ERROR;
}

/* A request with its redirects followed (credentials only to h->origin),
 * judged (answer.c).  *redirected: the chain left the first URL. */
static enum rmt_verdict request_once(struct rmt_http *h, CURL *c,
                                     struct resp *r, double deadline,
                                     int *redirected, char *msg, size_t n) {
    char errbuf[CURL_ERROR_SIZE];
    pthread_mutex_lock(&h->mu);
    char *url = strdup(r->start ? r->start : h->eff ? h->eff : h->url);
    pthread_mutex_unlock(&h->mu);
    *redirected = 0;
    enum rmt_verdict o = RMT_FATAL;
    for (int hop = 0; url; hop++) {
        char org[512];
        int creds = rmt_origin(url, org, sizeof org) == 0 &&
                    strcmp(org, h->origin) == 0;
        r->q.got = 0;
        r->q.overlong = 0;
        if (r->buf && r->q.doc)
            r->buf[0] = 0;
        r->bad_body = 0;
        r->elen = 0;
        r->a = (struct rmt_answer){0};
        CURLcode rc = perform(h, c, url, creds, r, deadline, errbuf);
        char *next = NULL;
        if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && r->bad_body)) {
            int tls = tls_error(rc); /* retrying changes nothing */
            if (tls)
                snprintf(msg, n, "TLS failed (%s): is it an http:// server?",
                         curl_easy_strerror(rc));
            else
                snprintf(msg, n, "%s",
                         errbuf[0] ? errbuf : curl_easy_strerror(rc));
            o = tls ? RMT_FATAL : RMT_RETRY;
            break;
        }
        long st = r->a.status;
        if (st >= 300 && st < 400 && st != 304) {
            curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &next);
            if (!next || hop >= MAX_HOPS) {
                snprintf(msg, n, "HTTP %ld: %s", st,
                         next ? "too many redirects"
                              : "redirect without a location");
                o = RMT_FATAL;
                break;
            }
            free(url);
            url = strdup(next);
            *redirected = 1;
            continue;
        }
        if (r->nomem) {
            snprintf(msg, n, "out of memory");
            break;
        }
        o = rmt_answer_check(&r->a, &h->id, &r->q, msg, n);
        if (o == RMT_OK && r->start) {
            free(r->final);
            r->final = url;
            url = NULL;
        } else if (o == RMT_OK) {
            pthread_mutex_lock(&h->mu);
            if (!h->eff || strcmp(h->eff, url) != 0) {
                free(h->eff);
                h->eff = url;
                url = NULL;
            }
            pthread_mutex_unlock(&h->mu);
        }
        break;
    }
    free(url);
    return o;
}

/* Sleeps ms before a retry, in steps of 50 ms, ending early once the
 * mount is closing or at deadline. */
static void backoff(struct rmt_http *h, long ms, double deadline) {
    double left = left_s(deadline) * 1000;
    if (ms > left)
        ms = left > 0 ? (long)left : 0;
    for (; ms > 0 && !atomic_load(&h->closing); ms -= 50)
        nanosleep(&(struct timespec){0, (ms < 50 ? ms : 50) * 1000000L}, NULL);
}

static int request_tries(struct rmt_http *h, CURL *c, struct resp *r,
                         double deadline, char *msg, size_t n);

/* Sends the request (ranged or HEAD) with retries, all ended by deadline
 * (0: none).  0 or EIO (ENOMEM).  An S3 source's failure says what S3
 * said (its error body). */
static int request(struct rmt_http *h, struct resp *r, double deadline,
                   char *msg, size_t n) {
    char ebody[EBODY_MAX];
    CURL *c = handle_get(h);
    if (!c) {
        snprintf(msg, n, "out of memory");
        return ENOMEM;
    }
    r->ebody = h->s3 ? ebody : NULL;
    int err = request_tries(h, c, r, deadline, msg, n);
    if (err && h->s3 && r->a.status >= 300)
        rmt_s3_explain(&r->a, ebody, r->elen, msg, n);
    r->ebody = NULL;
    handle_put(h, c);
    return err;
}

static int request_tries(struct rmt_http *h, CURL *c, struct resp *r,
                         double deadline, char *msg, size_t n) {
    int reresolved = 0, err = EIO;
    for (int attempt = 0; attempt <= h->retries; attempt++) {
        int redirected = 0;
        if (atomic_load(&h->closing)) {
            snprintf(msg, n, "the mount is closing");
            break;
        }
        if (attempt && left_s(deadline) <= 0)
            break; /* msg says what the last try got */
        enum rmt_verdict o =
            request_once(h, c, r, deadline, &redirected, msg, n);
        if (o == RMT_OK) {
            err = 0;
            break;
        }
        if (o == RMT_CHANGED) {
            if (!atomic_exchange(&h->changed, 1))
                rmt_logf(h,
                         "%s; reads of bytes not cached fail with EIO "
                         "until it is mounted again",
                         msg);
            break;
        }
        long st = r->a.status;
        if (o == RMT_FATAL && (st == 403 || st == 410) && !reresolved) {
            /* An expired signed URL: resolve again from the original. */
            pthread_mutex_lock(&h->mu);
            int had = h->eff != NULL;
            free(h->eff);
            h->eff = NULL;
            pthread_mutex_unlock(&h->mu);
            if (had || redirected) {
                reresolved = 1;
                attempt--;
                continue;
            }
        }
        if (o == RMT_FATAL)
            break;
        if (attempt < h->retries)
            backoff(h, 500L << (attempt < 10 ? attempt : 10), deadline);
    }
    return err;
}

double rmt_http_bound(const struct rmt_http *h) {
    double backoffs = 0;
    for (int a = 0; a < h->retries; a++)
        backoffs += 0.5 * (double)(1L << (a < 10 ? a : 10));
    return h->timeout * 8 * (h->retries + 1) + backoffs;
}

int rmt_http_get(struct rmt_http *h, uint64_t off, size_t n, void *buf,
                 double deadline, char *msg, size_t msgn) {
    if (atomic_load(&h->changed)) {
        snprintf(msg, msgn, "the file changed on the server");
        return EIO;
    }
    struct resp r = {.buf = buf, .q = {.off = off, .len = n}};
    return request(h, &r, deadline, msg, msgn);
}

/* ---- opening ----------------------------------------------------------- */

static void global_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int setup(struct rmt_http *h, const char *url, double timeout,
                 int retries, const struct rmt_s3 *s3, char *msg, size_t n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, global_init);
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->log_mu, NULL);
    h->log_tokens = LOG_BURST;
    h->log_last = rmt_now();
    h->timeout = timeout > 0 ? timeout : DEFAULT_TIMEOUT;
    h->retries = retries >= 0 ? retries : DEFAULT_RETRIES;
    if (s3 && !(h->s3 = calloc(1, sizeof *h->s3))) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    if (s3 && rmt_s3_copy(h->s3, s3) != 0) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    /* An s3:// source is shown as the user named it (bucket and key). */
    if (!(h->url =
              s3 ? rmt_s3_url(s3, url, msg, n) : rmt_resolve(url, msg, n)) ||
        !(h->shown = rmt_display_url(s3 ? url : h->url))) {
        if (h->url)
            snprintf(msg, n, "out of memory");
        return -1;
    }
    if (rmt_origin(h->url, h->origin, sizeof h->origin) != 0) {
        snprintf(msg, n, "not a valid http(s) URL");
        return -1;
    }
    return 0;
}

/* The size and identity from the probe's answer r.  0. */
static int take_identity(struct rmt_http *h, const struct rmt_answer *r) {
    h->id.size = r->clen;
    if (r->etag[0] && strncmp(r->etag, "W/", 2) != 0)
        snprintf(h->id.etag, sizeof h->id.etag, "%s", r->etag);
    if (r->lastmod[0]) {
        snprintf(h->id.lastmod, sizeof h->id.lastmod, "%s", r->lastmod);
        h->id.mtime = (int64_t)curl_getdate(r->lastmod, NULL);
        if (h->id.mtime < 0)
            h->id.mtime = 0;
    }
    if (!h->id.etag[0] && !h->id.lastmod[0])
        rmt_logf(h, "warning: the server sends neither a strong ETag nor "
                    "Last-Modified: a change of the file on the server that "
                    "keeps its size cannot be detected");
    return 0;
}

/* The first byte by a ranged GET, for servers that refuse HEAD: 405 or
 * 501 (no HEAD at all), 403 (an object store's URL signed for GET only).
 * The size is Content-Range's total.  0, or -1 with msg. */
static int probe_get(struct rmt_http *h, struct resp *r, char *msg, size_t n) {
    uint8_t one;
    *r = (struct resp){.buf = &one, .q = {.probing = 1, .off = 0, .len = 1}};
    if (request(h, r, 0, msg, n) != 0)
        return -1;
    r->a.clen = r->a.cr_total;
    r->a.has_clen = 1;
    return 0;
}

/* HEAD (or a ranged GET where HEAD is refused): the size and identity.
 * 0 or -1 with msg. */
static int probe(struct rmt_http *h, char *msg, size_t n) {
    struct resp r = {.q = {.head = 1}};
    int err = request(h, &r, 0, msg, n);
    long st = r.a.status;
    /* S3 answers a HEAD without the error body that says why: a GET
     * brings it. */
    if (err && (h->s3 || st == 403 || st == 405 || st == 501)) {
        err = probe_get(h, &r, msg, n);
        st = r.a.status;
    }
    if (err) {
        if (!h->s3 && (st == 401 || st == 403 || st == 404))
            snprintf(msg, n, "HTTP %ld (%s)", st,
                     st == 404   ? "not found"
                     : st == 401 ? "authentication required"
                                 : "forbidden");
        return -1;
    }
    if (!r.a.has_clen || r.a.malformed) {
        snprintf(msg, n, "the server does not say the file's size");
        return -1;
    }
    if (strcasecmp(r.a.accept_ranges, "none") == 0) {
        snprintf(msg, n,
                 "the server does not support range requests "
                 "(Accept-Ranges: none)");
        return -1;
    }
    return take_identity(h, &r.a);
}

int rmt_http_init(struct rmt_http *h, const char *url, const struct rmt_opts *o,
                  char *msg, size_t n) {
    struct rmt_s3 s3 = {0};
    int r = -1;
    if (rmt_is_s3(url) && rmt_s3_load(&s3, o->s3_path_style, msg, n) != 0)
        goto out;
    if (setup(h, url, o->timeout, o->retries, rmt_is_s3(url) ? &s3 : NULL, msg,
              n) != 0 ||
        (o->header_file &&
         read_header_file(o->header_file, &h->hdr_text, msg, n)) ||
        make_creds(h, o->hf || strncmp(url, "hf://", 5) == 0, msg, n) != 0)
        goto out;
    r = 0;
out:
    rmt_s3_free(&s3);
    return r;
}

int rmt_http_open(struct rmt_http *h, const char *url, const struct rmt_opts *o,
                  char *msg, size_t n) {
    if (rmt_http_init(h, url, o, msg, n) != 0)
        return -1;
    return probe(h, msg, n);
}

int rmt_http_doc(struct rmt_http *h, const char *url, size_t max,
                 struct rmt_doc *d, char *msg, size_t n) {
    struct resp r = {.start = url, .q = {.doc = 1, .len = max}};
    int err = request(h, &r, 0, msg, n);
    if (!err && !r.buf) /* an empty body */
        r.buf = (uint8_t *)strdup("");
    if (!err && !r.buf) {
        snprintf(msg, n, "out of memory");
        err = ENOMEM;
    }
    if (err) {
        free(r.buf);
        free(r.final);
        return -1;
    }
    *d = (struct rmt_doc){
        .body = (char *)r.buf, .final = r.final, .len = r.q.got, .a = r.a};
    return 0;
}

int rmt_http_open_like(struct rmt_http *h, const struct rmt_http *first,
                       const char *url, char *msg, size_t n) {
    if (setup(h, url, first->timeout, first->retries, first->s3, msg, n) != 0)
        return -1;
    h->log = first->log;
    h->log_u = first->log_u;
    /* Same credentials, same origin rule (the first file's origin). */
    snprintf(h->origin, sizeof h->origin, "%s", first->origin);
    for (struct curl_slist *s = first->creds; s; s = s->next)
        h->creds = curl_slist_append(h->creds, s->data);
    return probe(h, msg, n);
}

void rmt_http_close(struct rmt_http *h) {
    for (int i = 0; i < h->n_idle; i++)
        curl_easy_cleanup(h->idle[i]);
    curl_slist_free_all(h->creds);
    free(h->hdr_text);
    free(h->url);
    free(h->shown);
    free(h->eff);
    if (h->s3)
        rmt_s3_free(h->s3);
    free(h->s3);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->log_mu);
}
