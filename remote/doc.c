/*
 * doc.c - a small document over HTTP(S) (a page of a listing, such as the
 * Hub's tree API), with the credential and fault rules of a remote file
 * (remote.h; http.c's requests), and the URL of the next page from the
 * answer's Link header (RFC 8288).
 *
 * The next page stays on the origin of the page asked: a rel="next" link
 * to another origin is refused (rmt_get_doc fails), never followed with
 * or without credentials.  A listing is the origin's answer; a page from
 * elsewhere would be someone else's, and following a chain of such links
 * would send requests wherever a page says.  So a caller that follows
 * *next from the URL the user gave sends every request, and every
 * credential, to that origin only.
 */
#include "internal.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *ows(const char *p) {
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* RFC 9110's tchar. */
static int tchar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A param's value at p (token or quoted-string, backslash escapes taken)
 * into out (n bytes, cut: a rel list longer than that names no relation
 * we look for anyway).  The end, or NULL if malformed. */
static const char *param_value(const char *p, char *out, size_t n) {
    size_t k = 0;
    if (*p != '"') {
        for (; tchar(*p); p++)
            if (k + 1 < n)
                out[k++] = *p;
        out[k] = '\0';
        return k ? p : NULL;
    }
    for (p++; *p && *p != '"'; p++) {
        if (*p == '\\' && !*++p)
            return NULL;
        if (k + 1 < n)
            out[k++] = *p;
    }
    out[k] = '\0';
    return *p == '"' ? p + 1 : NULL;
}

/* True if rel (a space-separated list of relation types) has "next". */
static int rel_has_next(const char *rel) {
    for (const char *p = rel; *p;) {
        size_t len = strcspn(p, " \t");
        if (len == 4 && strncasecmp(p, "next", 4) == 0)
            return 1;
        p += len;
        p += strspn(p, " \t");
    }
    return 0;
}

/* The params of one link after its <...>, up to ',' or the end: *next
 * set if its first rel names next.  The end, or NULL if malformed. */
static const char *link_params(const char *p, int *next) {
    int seen_rel = 0;
    char name[32], val[256];
    *next = 0;
    for (p = ows(p); *p == ';'; p = ows(p)) {
        p = ows(p + 1);
        size_t k = 0;
        for (; tchar(*p); p++)
            if (k + 1 < sizeof name)
                name[k++] = *p;
        name[k] = '\0';
        if (!k)
            return NULL;
        p = ows(p);
        val[0] = '\0';
        if (*p == '=' && !(p = param_value(ows(p + 1), val, sizeof val)))
            return NULL;
        if (strcasecmp(name, "rel") == 0 && !seen_rel) {
            seen_rel = 1; /* later rel params are ignored (RFC 8288 3.3) */
            *next = rel_has_next(val);
        }
    }
    return *p == ',' || !*p ? p : NULL;
}

int rmt_link_next(const char *v, char **ref, char *msg, size_t n) {
    *ref = NULL;
    for (const char *p = v;;) {
        while (*p == ',' || *p == ' ' || *p == '\t')
            p++;
        if (!*p)
            return 0;
        const char *gt = *p == '<' ? strchr(p, '>') : NULL;
        int next = 0;
        const char *end = gt ? link_params(gt + 1, &next) : NULL;
        if (!end) {
            snprintf(msg, n, "a malformed Link header");
            goto fail;
        }
        size_t len = (size_t)(gt - p - 1);
        if (next && *ref && (strlen(*ref) != len || memcmp(*ref, p + 1, len))) {
            snprintf(msg, n, "a Link header with two different next links");
            goto fail;
        }
        if (next && !*ref && !(*ref = strndup(p + 1, len))) {
            snprintf(msg, n, "out of memory");
            return -1;
        }
        p = end;
    }
fail:
    free(*ref);
    *ref = NULL;
    return -1;
}

/* ref resolved against base (the page's URL after its redirects) into
 * *out (malloc'ed): an http(s) URL on origin, else -1 with msg. */
static int next_url(const char *base, const char *ref, const char *origin,
                    char **out, char *msg, size_t n) {
    CURLU *u = curl_url();
    char *abs = NULL, org[512] = "";
    int r = -1;
    if (!u || curl_url_set(u, CURLUPART_URL, base, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_URL, ref, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &abs, 0) != CURLUE_OK ||
        (strncmp(abs, "http://", 7) != 0 && strncmp(abs, "https://", 8) != 0))
        snprintf(msg, n, "the next page's link is not an http(s) URL");
    else if (rmt_origin(abs, org, sizeof org) != 0 || strcmp(org, origin) != 0)
        snprintf(msg, n,
                 "the next page's link leads to another origin (%.200s): "
                 "refused",
                 org);
    else if (!(*out = strdup(abs)))
        snprintf(msg, n, "out of memory");
    else
        r = 0;
    curl_free(abs);
    curl_url_cleanup(u);
    return r;
}

int rmt_get_doc(const char *url, const struct rmt_opts *o, size_t max,
                char **body, size_t *len, char **next, char *msg, size_t n) {
    struct rmt_http h = {0};
    struct rmt_doc d = {0};
    char why[512], *ref = NULL;
    int r = -1;
    *body = *next = NULL;
    *len = 0;
    if (rmt_http_init(&h, url, o, why, sizeof why) != 0 ||
        rmt_http_doc(&h, h.url, max, &d, why, sizeof why) != 0 ||
        rmt_link_next(d.a.link, &ref, why, sizeof why) != 0 ||
        (ref && next_url(d.final, ref, h.origin, next, why, sizeof why) != 0))
        goto out;
    *body = d.body;
    *len = d.len;
    d.body = NULL;
    r = 0;
out:
    if (r != 0) {
        char *shown = rmt_display_url(url);
        snprintf(msg, n, "%s: %s", shown ? shown : url, why);
        free(shown);
    }
    free(ref);
    free(d.body);
    free(d.final);
    rmt_http_close(&h);
    return r;
}
