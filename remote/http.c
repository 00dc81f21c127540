/*
 * http.c - requests for a remote file with libcurl: hf:// resolution, the
 * identity asked at open, conditional ranged GETs, redirects followed here
 * (so that credentials never leave the user's origin), timeouts and
 * retries.  The rules are in remote.h; this file is their one place.
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

/* Log lines a source may write at once, and then per second.  A client
 * that retries a failing read in a loop (a mapped page whose SIGBUS
 * handler returns re-faults it: Node.js does) makes a failed request, and
 * a line, per retry: thousands a second. */
#define LOG_BURST 20
#define LOG_PER_SEC 1.0

static double now_s(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec / 1e9;
}

/* Whether a line may be written now (a token of the bucket taken), and
 * how many were left out before it.  Caller holds h->log_mu. */
static int log_allowed(struct rmt_http *h, uint64_t *dropped) {
    double t = now_s();
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
    int k = snprintf(line, sizeof line, "%s: ", h->url ? h->url : "?");
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

int rmt_is_url(const char *s) {
    return s && (strncmp(s, "http://", 7) == 0 ||
                 strncmp(s, "https://", 8) == 0 || strncmp(s, "hf://", 5) == 0);
}

/* scheme://host:port of url into out; 0 or -1. */
static int origin_of(const char *url, char *out, size_t n) {
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL;
    int r = -1;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) ==
            CURLUE_OK) {
        for (char *p = host; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
        int k = snprintf(out, n, "%s://%s:%s", scheme, host, port);
        r = k > 0 && (size_t)k < n ? 0 : -1;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return r;
}

/* hf://OWNER/REPO/PATH[@REVISION] as the Hub's resolve URL; a copy of url
 * for http(s).  NULL with msg. */
char *rmt_resolve(const char *url, char *msg, size_t n) {
    char *out = NULL;
    if (strncmp(url, "hf://", 5) != 0)
        return strdup(url);
    const char *p = url + 5, *s1 = strchr(p, '/');
    const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    if (!s1 || !s2 || s1 == p || s2 == s1 + 1 || !s2[1]) {
        snprintf(msg, n, "an hf:// source is hf://OWNER/REPO/PATH[@REVISION]");
        return NULL;
    }
    const char *path = s2 + 1, *at = strrchr(path, '@');
    size_t plen = at ? (size_t)(at - path) : strlen(path);
    const char *rev = at ? at + 1 : "main";
    if (!plen || !*rev) {
        snprintf(msg, n, "empty path or revision in the hf:// source");
        return NULL;
    }
    const char *ep = getenv("HF_ENDPOINT");
    if (!ep || !*ep)
        ep = "https://huggingface.co";
    size_t elen = strlen(ep);
    while (elen && ep[elen - 1] == '/')
        elen--;
    /* A revision such as refs/pr/1 is one path segment. */
    char *erev = curl_easy_escape(NULL, rev, 0);
    if (erev && asprintf(&out, "%.*s/%.*s/resolve/%s/%.*s", (int)elen, ep,
                         (int)(s2 - p), p, erev, (int)plen, path) < 0)
        out = NULL;
    curl_free(erev);
    if (!out)
        snprintf(msg, n, "out of memory");
    return out;
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
    return 0;
}

/* ---- one request --------------------------------------------------------- */

struct resp {
    long status;
    char etag[256], lastmod[64], accept_ranges[32];
    uint64_t cr_total, clen;
    int has_cr, has_clen;
    uint8_t *buf; /* the body goes here */
    size_t want, got;
    int ranged, bad_body; /* body not what was asked: abort */
    int probing; /* a ranged GET instead of HEAD: no identity to check yet */
};

static void copy_value(char *dst, size_t n, const char *v, size_t len) {
    while (len &&
           (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
        len--;
    while (len && *v == ' ')
        v++, len--;
    if (len >= n)
        len = n - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
}

static size_t on_header(char *p, size_t sz, size_t nm, void *u) {
    struct resp *r = u;
    size_t len = sz * nm;
    char v[256];
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        const char *sp = memchr(p, ' ', len);
        r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        r->etag[0] = r->lastmod[0] = r->accept_ranges[0] = '\0';
        r->has_cr = r->has_clen = 0;
        return len;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return len;
    size_t kl = (size_t)(colon - p);
    const char *val = colon + 1;
    size_t vl = len - kl - 1;
#define IS(k) (kl == strlen(k) && strncasecmp(p, k, kl) == 0)
    if (IS("etag"))
        copy_value(r->etag, sizeof r->etag, val, vl);
    else if (IS("last-modified"))
        copy_value(r->lastmod, sizeof r->lastmod, val, vl);
    else if (IS("accept-ranges"))
        copy_value(r->accept_ranges, sizeof r->accept_ranges, val, vl);
    else if (IS("content-length")) {
        copy_value(v, sizeof v, val, vl);
        r->clen = strtoull(v, NULL, 10);
        r->has_clen = 1;
    } else if (IS("content-range")) {
        copy_value(v, sizeof v, val, vl);
        const char *slash = strchr(v, '/');
        if (strncmp(v, "bytes ", 6) == 0 && slash && slash[1] != '*') {
            r->cr_total = strtoull(slash + 1, NULL, 10);
            r->has_cr = 1;
        }
    }
#undef IS
    return len;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *u) {
    struct resp *r = u;
    size_t len = sz * nm;
    if (r->status < 200 || r->status >= 300)
        return len; /* an error page or a redirect's body: ignored */
    if (r->ranged && r->status != 206) {
        r->bad_body = 1; /* the whole file: not what we want */
        return 0;
    }
    if (len > r->want - r->got) {
        r->bad_body = 1;
        return 0;
    }
    memcpy(r->buf + r->got, p, len);
    r->got += len;
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

/* One request of url (no redirect followed): HEAD if !r->ranged, else a
 * GET of [off, off + r->want).  creds: send the credentials. */
static CURLcode perform(struct rmt_http *h, CURL *c, const char *url, int creds,
                        uint64_t off, struct resp *r, char *errbuf) {
    struct curl_slist *hd = NULL;
    char line[400], range[64];
    for (struct curl_slist *s = creds ? h->creds : NULL; s; s = s->next)
        hd = curl_slist_append(hd, s->data);
    if (r->ranged && h->id.etag[0]) {
        snprintf(line, sizeof line, "If-Match: %s", h->id.etag);
        hd = curl_slist_append(hd, line);
    } else if (r->ranged && h->id.lastmod[0]) {
        snprintf(line, sizeof line, "If-Unmodified-Since: %s", h->id.lastmod);
        hd = curl_slist_append(hd, line);
    }
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
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(h->timeout * 8000));
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
    if (r->ranged) {
        snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)off,
                 (unsigned long long)(off + r->want - 1));
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

enum outcome { OK, TRANSIENT, FATAL, CHANGED };

/* Checks a ranged answer against the identity. */
static enum outcome check_ranged(struct rmt_http *h, const struct resp *r,
                                 char *msg, size_t n) {
    if (r->probing && r->status == 206 && !r->has_cr) {
        snprintf(msg, n, "a ranged answer without Content-Range");
        return FATAL;
    }
    if (r->probing && r->status == 206)
        return r->got == r->want ? OK : TRANSIENT;
    if (r->status == 412 ||
        (r->status == 206 && r->has_cr && r->cr_total != h->id.size)) {
        snprintf(msg, n,
                 "the file changed on the server since it was "
                 "mounted (%s)",
                 r->status == 412 ? "precondition failed" : "another size");
        return CHANGED;
    }
    if (r->status == 206 &&
        ((h->id.etag[0] && r->etag[0] && strcmp(r->etag, h->id.etag) != 0) ||
         (h->id.lastmod[0] && r->lastmod[0] &&
          strcmp(r->lastmod, h->id.lastmod) != 0))) {
        snprintf(msg, n,
                 "the file changed on the server since it was "
                 "mounted (ETag %s, was %s)",
                 r->etag[0] ? r->etag : r->lastmod,
                 h->id.etag[0] ? h->id.etag : h->id.lastmod);
        return CHANGED;
    }
    if (r->status >= 200 && r->status < 300 && r->status != 206) {
        snprintf(msg, n, "the server ignores Range requests (HTTP %ld)",
                 r->status);
        return FATAL;
    }
    if (r->status == 206 && (!r->has_cr || r->got != r->want)) {
        snprintf(msg, n, "short or malformed ranged answer (%zu of %zu bytes)",
                 r->got, r->want);
        return TRANSIENT;
    }
    return r->status == 206 ? OK : FATAL;
}

/* A request with its redirects followed (credentials only to h->origin),
 * classified.  *redirected: the chain left the first URL. */
static enum outcome request_once(struct rmt_http *h, CURL *c, uint64_t off,
                                 struct resp *r, int *redirected, char *msg,
                                 size_t n) {
    char errbuf[CURL_ERROR_SIZE];
    pthread_mutex_lock(&h->mu);
    char *url = strdup(h->eff ? h->eff : h->url);
    pthread_mutex_unlock(&h->mu);
    *redirected = 0;
    enum outcome o = FATAL;
    for (int hop = 0; url; hop++) {
        char org[512];
        int creds =
            origin_of(url, org, sizeof org) == 0 && strcmp(org, h->origin) == 0;
        r->got = 0;
        r->bad_body = 0;
        r->status = 0;
        CURLcode rc = perform(h, c, url, creds, off, r, errbuf);
        char *next = NULL;
        if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && r->bad_body)) {
            snprintf(msg, n, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
            o = TRANSIENT;
            break;
        }
        if (r->status >= 300 && r->status < 400 && r->status != 304) {
            curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &next);
            if (!next || hop >= MAX_HOPS) {
                snprintf(msg, n, "HTTP %ld: %s", r->status,
                         next ? "too many redirects"
                              : "redirect without "
                                "a location");
                o = FATAL;
                break;
            }
            free(url);
            url = strdup(next);
            *redirected = 1;
            continue;
        }
        if (!r->ranged)
            o = r->status == 200 ? OK : FATAL;
        else
            o = check_ranged(h, r, msg, n);
        if (o == FATAL && (r->status < 200 || r->status >= 300))
            snprintf(msg, n, "HTTP %ld", r->status);
        if (r->status >= 500 || r->status == 429 || r->status == 408)
            o = TRANSIENT;
        if (o == OK) {
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
 * mount is closing. */
static void backoff(struct rmt_http *h, long ms) {
    for (; ms > 0 && !atomic_load(&h->closing); ms -= 50)
        nanosleep(&(struct timespec){0, (ms < 50 ? ms : 50) * 1000000L}, NULL);
}

/* Sends the request (ranged or HEAD) with retries.  0 or EIO. */
static int request(struct rmt_http *h, uint64_t off, struct resp *r, char *msg,
                   size_t n) {
    CURL *c = handle_get(h);
    int reresolved = 0, err = EIO;
    if (!c) {
        snprintf(msg, n, "out of memory");
        return ENOMEM;
    }
    for (int attempt = 0; attempt <= h->retries; attempt++) {
        int redirected = 0;
        if (atomic_load(&h->closing)) {
            snprintf(msg, n, "the mount is closing");
            break;
        }
        enum outcome o = request_once(h, c, off, r, &redirected, msg, n);
        if (o == OK) {
            err = 0;
            break;
        }
        if (o == CHANGED) {
            if (!atomic_exchange(&h->changed, 1))
                rmt_logf(h,
                         "%s; reads of bytes not cached fail with EIO "
                         "until it is mounted again",
                         msg);
            break;
        }
        if (o == FATAL && (r->status == 403 || r->status == 410) &&
            !reresolved) {
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
        if (o == FATAL)
            break;
        if (attempt < h->retries)
            backoff(h, 500L << (attempt < 10 ? attempt : 10));
    }
    handle_put(h, c);
    return err;
}

int rmt_http_get(struct rmt_http *h, uint64_t off, size_t n, void *buf,
                 char *msg, size_t msgn) {
    if (atomic_load(&h->changed)) {
        snprintf(msg, msgn, "the file changed on the server");
        return EIO;
    }
    struct resp r = {.buf = buf, .want = n, .ranged = 1};
    return request(h, off, &r, msg, msgn);
}

/* ---- opening ----------------------------------------------------------- */

static void global_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int setup(struct rmt_http *h, const char *url, double timeout,
                 int retries, char *msg, size_t n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, global_init);
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->log_mu, NULL);
    h->log_tokens = LOG_BURST;
    h->log_last = now_s();
    h->timeout = timeout > 0 ? timeout : DEFAULT_TIMEOUT;
    h->retries = retries >= 0 ? retries : DEFAULT_RETRIES;
    if (!(h->url = rmt_resolve(url, msg, n)))
        return -1;
    if (origin_of(h->url, h->origin, sizeof h->origin) != 0) {
        snprintf(msg, n, "not a valid http(s) URL");
        return -1;
    }
    return 0;
}

/* The size and identity from the probe's answer r.  0. */
static int take_identity(struct rmt_http *h, const struct resp *r) {
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
    *r = (struct resp){.buf = &one, .want = 1, .ranged = 1, .probing = 1};
    if (request(h, 0, r, msg, n) != 0)
        return -1;
    r->clen = r->cr_total;
    r->has_clen = 1;
    return 0;
}

/* HEAD (or a ranged GET where HEAD is refused): the size and identity.
 * 0 or -1 with msg. */
static int probe(struct rmt_http *h, char *msg, size_t n) {
    struct resp r = {0};
    int err = request(h, 0, &r, msg, n);
    if (err && (r.status == 403 || r.status == 405 || r.status == 501))
        err = probe_get(h, &r, msg, n);
    if (err) {
        if (r.status == 401 || r.status == 403 || r.status == 404)
            snprintf(msg, n, "HTTP %ld (%s)", r.status,
                     r.status == 404   ? "not found"
                     : r.status == 401 ? "authentication required"
                                       : "forbidden");
        return -1;
    }
    if (!r.has_clen) {
        snprintf(msg, n, "the server does not say the file's size");
        return -1;
    }
    if (strcasecmp(r.accept_ranges, "none") == 0) {
        snprintf(msg, n,
                 "the server does not support range requests "
                 "(Accept-Ranges: none)");
        return -1;
    }
    return take_identity(h, &r);
}

int rmt_http_open(struct rmt_http *h, const char *url, const char *header_file,
                  int hf, double timeout, int retries, char *msg, size_t n) {
    if (setup(h, url, timeout, retries, msg, n) != 0)
        return -1;
    if (header_file && read_header_file(header_file, &h->hdr_text, msg, n))
        return -1;
    if (make_creds(h, hf || strncmp(url, "hf://", 5) == 0, msg, n) != 0)
        return -1;
    return probe(h, msg, n);
}

int rmt_http_open_like(struct rmt_http *h, const struct rmt_http *first,
                       const char *url, char *msg, size_t n) {
    if (setup(h, url, first->timeout, first->retries, msg, n) != 0)
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
    free(h->eff);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->log_mu);
}
