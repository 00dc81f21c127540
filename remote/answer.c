/*
 * answer.c - what a server's answer to one request says, and whether it is
 * exactly what was asked.  No I/O and no libcurl: http.c feeds the status
 * line and the header lines as they arrive, counts the body's bytes, and
 * asks rmt_answer_check for a verdict; tests/fuzz/fuzz_answer.c feeds it
 * anything.
 *
 * Rules (the server, a proxy and a repository's owner are hostile input,
 * as a local file is):
 *   1. A ranged answer is used only if it is exactly the range asked for:
 *      status 206; one Content-Range "bytes FIRST-LAST/TOTAL" with FIRST
 *      and LAST the ones asked and TOTAL the size recorded at mount;
 *      Content-Length, when sent, the count asked; no Content-Encoding but
 *      identity (every request asks for identity); and exactly that many
 *      body bytes.  Anything else fails the request (RMT_RETRY: retried,
 *      then EIO) and none of its bytes is used.
 *   2. The version: the validator recorded at mount (the strong ETag, else
 *      Last-Modified) must be in every ranged answer and equal; a missing
 *      one counts as a change (a proxy that ignores If-Match and drops the
 *      ETag must not get two versions mixed).  412, another total size or
 *      another validator: RMT_CHANGED.
 *   3. Status: 5xx, 429 and 408 are worth a retry; 2xx other than 206 to a
 *      ranged request means the server ignores Range (RMT_FATAL); other
 *      statuses are RMT_FATAL (the caller decides about 403/410 from a
 *      redirect).  Redirects never reach here.
 *   4. Header values are bounded copies; numbers are decimal digits only,
 *      without overflow; a header sent twice with two values is malformed.
 *      Link's lines are joined (a value too long for the buffer is
 *      marked, never cut).
 *   5. A document (rmt_http_doc: a listing, not the file) is used only
 *      from a 200, not encoded, within its bound, all its Content-Length
 *      and no Link too long to keep; 5xx, 429 and 408 are retried as in
 *      rule 3; anything else is RMT_FATAL (a bigger page will not shrink
 *      on a second try).
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A decimal number of at most 19 digits, the whole of [p, p + n).  0 or -1. */
static int parse_u64(const char *p, size_t n, uint64_t *out) {
    uint64_t v = 0;
    if (n == 0 || n > 19)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = v;
    return 0;
}

/* "bytes FIRST-LAST/TOTAL" (TOTAL may not be '*').  0 or -1. */
static int parse_range(const char *v, uint64_t *first, uint64_t *last,
                       uint64_t *total) {
    if (strncasecmp(v, "bytes ", 6) != 0)
        return -1;
    const char *a = v + 6, *dash = strchr(a, '-');
    const char *slash = dash ? strchr(dash, '/') : NULL;
    if (!dash || !slash || parse_u64(a, (size_t)(dash - a), first) != 0 ||
        parse_u64(dash + 1, (size_t)(slash - dash - 1), last) != 0 ||
        parse_u64(slash + 1, strlen(slash + 1), total) != 0)
        return -1;
    return *first <= *last && *last < *total ? 0 : -1;
}

/* The value of a header line, trimmed, into dst (n bytes, cut). */
static void copy_value(char *dst, size_t n, const char *v, size_t len) {
    while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' ||
                   v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    while (len && (*v == ' ' || *v == '\t'))
        v++, len--;
    if (len >= n)
        len = n - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
}

/* Keeps a text header's first value; a second, different one marks the
 * answer malformed. */
static void keep_text(struct rmt_answer *a, char *dst, size_t n,
                      const char *v) {
    if (dst[0] && strcmp(dst, v) != 0)
        a->malformed = 1;
    snprintf(dst, n, "%s", v);
}

/* Link: each line's value appended, joined by ", " (one header field
 * sent as several lines means the same: RFC 9110, 5.3); longer than the
 * buffer: link_long, never a cut value. */
static void keep_link(struct rmt_answer *a, const char *v, size_t len) {
    char t[RMT_LINK_MAX];
    size_t have = strlen(a->link);
    if (len >= sizeof t) {
        a->link_long = 1;
        return;
    }
    copy_value(t, sizeof t, v, len);
    if (!t[0])
        return;
    if (have + 2 * (have > 0) + strlen(t) >= sizeof a->link) {
        a->link_long = 1;
        return;
    }
    if (have)
        strcat(a->link, ", ");
    strcat(a->link, t);
}

void rmt_answer_line(struct rmt_answer *a, const char *p, size_t len) {
    char v[256];
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        /* A new answer (after a 100 Continue or a redirect's). */
        const char *sp = memchr(p, ' ', len);
        *a = (struct rmt_answer){0};
        uint64_t st = 0;
        if (sp && (size_t)(sp - p) + 4 <= len && parse_u64(sp + 1, 3, &st) == 0)
            a->status = (long)st;
        return;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return;
    size_t kl = (size_t)(colon - p);
#define IS(k) (kl == sizeof k - 1 && strncasecmp(p, k, kl) == 0)
    if (IS("link")) {
        keep_link(a, colon + 1, len - kl - 1);
        return;
    }
    copy_value(v, sizeof v, colon + 1, len - kl - 1);
    if (IS("etag")) {
        keep_text(a, a->etag, sizeof a->etag, v);
    } else if (IS("last-modified")) {
        keep_text(a, a->lastmod, sizeof a->lastmod, v);
    } else if (IS("x-amz-bucket-region")) {
        snprintf(a->region, sizeof a->region, "%s", v);
    } else if (IS("accept-ranges")) {
        snprintf(a->accept_ranges, sizeof a->accept_ranges, "%s", v);
    } else if (IS("content-encoding")) {
        keep_text(a, a->encoding, sizeof a->encoding, v);
    } else if (IS("content-length")) {
        uint64_t x = 0;
        if (parse_u64(v, strlen(v), &x) != 0 || (a->has_clen && x != a->clen))
            a->malformed = 1;
        a->clen = x;
        a->has_clen = 1;
    } else if (IS("content-range")) {
        uint64_t f = 0, l = 0, t = 0;
        if (parse_range(v, &f, &l, &t) != 0 ||
            (a->has_cr &&
             (f != a->cr_first || l != a->cr_last || t != a->cr_total)))
            a->bad_cr = 1;
        a->cr_first = f, a->cr_last = l, a->cr_total = t;
        a->has_cr = 1;
    }
#undef IS
}

int rmt_answer_identity_encoding(const struct rmt_answer *a) {
    return !a->encoding[0] || strcasecmp(a->encoding, "identity") == 0;
}

/* The version rule (2).  RMT_OK or RMT_CHANGED with msg. */
static enum rmt_verdict check_version(const struct rmt_answer *a,
                                      const struct rmt_ident *id, char *msg,
                                      size_t n) {
    const char *what = NULL, *got = NULL, *was = NULL;
    if (a->cr_total != id->size) {
        snprintf(msg, n,
                 "the file changed on the server since it was mounted "
                 "(size %llu, was %llu)",
                 (unsigned long long)a->cr_total, (unsigned long long)id->size);
        return RMT_CHANGED;
    }
    if (id->etag[0] && strcmp(a->etag, id->etag) != 0)
        what = "ETag", got = a->etag, was = id->etag;
    else if (id->lastmod[0] && (a->lastmod[0] || !id->etag[0]) &&
             strcmp(a->lastmod, id->lastmod) != 0)
        what = "Last-Modified", got = a->lastmod, was = id->lastmod;
    if (!what)
        return RMT_OK;
    if (got[0])
        snprintf(msg, n,
                 "the file changed on the server since it was mounted "
                 "(%s %s, was %s)",
                 what, got, was);
    else
        snprintf(msg, n,
                 "the file changed on the server since it was mounted "
                 "(the answer has no %s; it was %s)",
                 what, was);
    return RMT_CHANGED;
}

/* The verdict on the answer to a whole-document GET (q->doc). */
static enum rmt_verdict check_doc(const struct rmt_answer *a,
                                  const struct rmt_ask *q, char *msg,
                                  size_t n) {
    long st = a->status;
    if (st != 200)
        snprintf(msg, n, "HTTP %ld%s", st,
                 st == 404   ? " (not found)"
                 : st == 401 ? " (authentication required)"
                 : st == 403 ? " (forbidden)"
                             : "");
    else if (!rmt_answer_identity_encoding(a))
        snprintf(msg, n,
                 "the server sends it encoded (Content-Encoding: %.64s)",
                 a->encoding);
    else if (q->overlong)
        snprintf(msg, n, "larger than %llu bytes", (unsigned long long)q->len);
    else if (a->link_long)
        snprintf(msg, n, "a Link header longer than %d bytes",
                 RMT_LINK_MAX - 1);
    else if (a->has_clen && a->clen != q->got)
        snprintf(msg, n, "%llu body bytes, Content-Length %llu",
                 (unsigned long long)q->got, (unsigned long long)a->clen);
    else
        return RMT_OK;
    return RMT_FATAL;
}

/* The verdict on the answer to a HEAD (q->head). */
static enum rmt_verdict check_head(const struct rmt_answer *a, char *msg,
                                   size_t n) {
    long st = a->status;
    if (st != 200) {
        snprintf(msg, n, "HTTP %ld", st);
        return RMT_FATAL;
    }
    if (!rmt_answer_identity_encoding(a)) {
        snprintf(msg, n,
                 "the server sends the file encoded "
                 "(Content-Encoding: %.64s)",
                 a->encoding);
        return RMT_FATAL;
    }
    return RMT_OK;
}

enum rmt_verdict rmt_answer_check(const struct rmt_answer *a,
                                  const struct rmt_ident *id,
                                  const struct rmt_ask *q, char *msg,
                                  size_t n) {
    long st = a->status;
    if (st >= 500 || st == 429 || st == 408) {
        snprintf(msg, n, "HTTP %ld", st);
        return RMT_RETRY;
    }
    if (q->doc)
        return check_doc(a, q, msg, n);
    if (q->head)
        return check_head(a, msg, n);
    if (st == 412 && !q->probing) {
        snprintf(msg, n,
                 "the file changed on the server since it was "
                 "mounted (precondition failed)");
        return RMT_CHANGED;
    }
    if (st >= 200 && st < 300 && st != 206) {
        snprintf(msg, n, "the server ignores Range requests (HTTP %ld)", st);
        return RMT_FATAL;
    }
    if (st != 206) {
        snprintf(msg, n, "HTTP %ld", st);
        return RMT_FATAL;
    }
    uint64_t last = q->off + q->len - 1;
    if (!a->has_cr || a->bad_cr || a->malformed) {
        snprintf(msg, n, "a malformed answer (%s)",
                 !a->has_cr  ? "no Content-Range"
                 : a->bad_cr ? "Content-Range not 'bytes FIRST-LAST/TOTAL'"
                             : "a header sent twice with two values");
        return RMT_RETRY;
    }
    if (!q->probing) {
        enum rmt_verdict v = check_version(a, id, msg, n);
        if (v != RMT_OK)
            return v;
    }
    if (a->cr_first != q->off || a->cr_last != last) {
        snprintf(msg, n, "asked for bytes %llu-%llu, got bytes %llu-%llu/%llu",
                 (unsigned long long)q->off, (unsigned long long)last,
                 (unsigned long long)a->cr_first,
                 (unsigned long long)a->cr_last,
                 (unsigned long long)a->cr_total);
        return RMT_RETRY;
    }
    if (!rmt_answer_identity_encoding(a)) {
        snprintf(msg, n,
                 "asked for bytes %llu-%llu, got them encoded "
                 "(Content-Encoding: %.64s)",
                 (unsigned long long)q->off, (unsigned long long)last,
                 a->encoding);
        return RMT_RETRY;
    }
    if ((a->has_clen && a->clen != q->len) || q->overlong || q->got != q->len) {
        snprintf(
            msg, n, "asked for bytes %llu-%llu (%llu), got %s%llu body bytes%s",
            (unsigned long long)q->off, (unsigned long long)last,
            (unsigned long long)q->len, q->overlong ? "more than " : "",
            (unsigned long long)(q->overlong ? q->len : q->got),
            a->has_clen && a->clen != q->len ? " (Content-Length wrong)" : "");
        return RMT_RETRY;
    }
    return RMT_OK;
}
