/*
 * s3.c - s3://BUCKET/KEY as an object store's URL (issue 25), with the
 * settings s3conf.c finds as the AWS CLI finds them (rmt_s3_load:
 * environment first, then the profile's files; s3conf.c never calls this
 * file): the endpoint URL a request goes to, the request's signing (AWS
 * Signature V4 by libcurl's CURLOPT_AWS_SIGV4: no hand-written signing
 * here), and what S3 said when it refused (its XML error body, parsed
 * with libxml2).
 *
 * Endpoint.  AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else the
 * profile's endpoint_url, else AWS (https://s3.REGION.amazonaws.com).
 * Style: virtual-hosted (https://BUCKET.s3.REGION.amazonaws.com/KEY) for
 * AWS, path style (ENDPOINT/BUCKET/KEY) for a custom endpoint; -o
 * s3_path_style=yes|no forces one.  KEY is everything after "BUCKET/" up
 * to a '?' (the query is kept: listings use it), each '/'-separated
 * segment percent-encoded as SigV4's canonical URI wants it (RFC 3986's
 * unreserved characters kept), so the path curl signs is the path sent.
 *
 * Signing.  With an access key: libcurl signs each request
 * ("aws:amz:REGION:s3", the key and secret as user name and password),
 * and the headers x-amz-content-sha256 (the SHA-256 of the empty body:
 * every request here is a GET or HEAD; curl 7.88 does not add it, S3
 * requires it) and, with a session token, x-amz-security-token are among
 * the credentials' headers (sent, and signed, only to the URL's origin:
 * http.c).  Without one: unsigned requests (a public bucket).  The secret
 * and the token live in this struct only: never in a URL, an argument,
 * the log, a message or the cache's key.
 */
#include "internal.h"

#include <curl/curl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EMPTY_SHA256                                                           \
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define BUCKET_MAX RMT_S3_BUCKET_MAX

int rmt_is_s3(const char *s) {
    return s && strncmp(s, "s3://", 5) == 0;
}

/* A bucket's name: 1..63 of [a-zA-Z0-9._-], not all dots (S3's rules
 * are stricter, legacy buckets less strict; these keep the name one run
 * of DNS labels and one path segment). */
static int bucket_ok(const char *p, size_t len) {
    static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
    char b[BUCKET_MAX + 1];
    if (!len || len > BUCKET_MAX)
        return 0;
    memcpy(b, p, len);
    b[len] = '\0';
    return strspn(b, ok) == len && strspn(b, ".") < len;
}

int rmt_s3_copy(struct rmt_s3 *d, const struct rmt_s3 *s) {
    *d = *s;
    d->key = s->key ? strdup(s->key) : NULL;
    d->secret = s->secret ? strdup(s->secret) : NULL;
    d->token = s->token ? strdup(s->token) : NULL;
    d->endpoint = s->endpoint ? strdup(s->endpoint) : NULL;
    return (!s->key || d->key) && (!s->secret || d->secret) &&
                   (!s->token || d->token) && (!s->endpoint || d->endpoint)
               ? 0
               : -1;
}

/* free() of a secret: its bytes zeroed first (a core dump, a reused
 * allocation). */
static void free_secret(char *s) {
    if (s) {
        volatile char *p = s;
        while (*p)
            *p++ = 0;
    }
    free(s);
}

void rmt_s3_free(struct rmt_s3 *c) {
    free(c->key);
    free_secret(c->secret);
    free_secret(c->token);
    free(c->endpoint);
    *c = (struct rmt_s3){0};
}

int rmt_s3_headers(const struct rmt_s3 *c, struct curl_slist **l) {
    if (!c->key)
        return 0;
    struct curl_slist *t =
        curl_slist_append(*l, "x-amz-content-sha256: " EMPTY_SHA256);
    if (!t)
        return -1;
    *l = t;
    if (c->token) {
        char *line = NULL;
        if (asprintf(&line, "x-amz-security-token: %s", c->token) < 0)
            return -1;
        t = curl_slist_append(*l, line);
        free_secret(line);
        if (!t)
            return -1;
        *l = t;
    }
    return 0;
}

/* KEY's '/'-separated segments percent-encoded, appended to *out. */
static int append_key(char **out, const char *key, size_t len) {
    for (size_t i = 0; i <= len;) {
        size_t seg = strcspn(key + i, "/");
        if (i + seg > len)
            seg = len - i;
        /* (a length of 0 would make curl_easy_escape take strlen) */
        char *e = curl_easy_escape(NULL, seg ? key + i : "", (int)seg),
             *t = NULL;
        if (!e ||
            asprintf(&t, "%s%s%s", *out, e, i + seg < len ? "/" : "") < 0) {
            curl_free(e);
            return -1;
        }
        curl_free(e);
        free(*out);
        *out = t;
        i += seg + 1;
    }
    return 0;
}

int rmt_s3_split(const char *url, char *bucket, size_t bn, const char **key) {
    if (!rmt_is_s3(url))
        return -1;
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    if (!bucket_ok(b, blen) || blen >= bn)
        return -1;
    memcpy(bucket, b, blen);
    bucket[blen] = '\0';
    *key = slash ? slash + 1 : b + blen;
    return 0;
}

char *rmt_s3_url(const struct rmt_s3 *c, const char *url, char *msg, size_t n) {
    char bucket[BUCKET_MAX + 1], *out = NULL;
    const char *key;
    if (rmt_s3_split(url, bucket, sizeof bucket, &key) != 0) {
        snprintf(msg, n,
                 "an s3:// source is s3://BUCKET/KEY (BUCKET: 1..63 of "
                 "[a-z0-9.-])");
        return NULL;
    }
    const char *q = strchr(key, '?');
    size_t klen = q ? (size_t)(q - key) : strlen(key);
    int path = c->path_style == RMT_S3_AUTO ? c->endpoint != NULL
                                            : c->path_style == RMT_S3_PATH;
    const char *ep = c->endpoint;
    char aws[128];
    snprintf(aws, sizeof aws, "https://s3.%s.amazonaws.com", c->region);
    if (!ep)
        ep = aws;
    const char *host = strstr(ep, "://") + 3;
    int k =
        path ? asprintf(&out, "%s/%s/", ep, bucket)
             : asprintf(&out, "%.*s%s.%s/", (int)(host - ep), ep, bucket, host);
    char *t = NULL;
    if (k < 0)
        out = NULL;
    if (!out || append_key(&out, key, klen) != 0 ||
        asprintf(&t, "%s%s", out, q ? q : "") < 0) {
        free(out);
        snprintf(msg, n, "out of memory");
        return NULL;
    }
    free(out);
    return t;
}

xmlChar *rmt_xml_child(xmlNode *e, const char *name) {
    for (xmlNode *c = e ? e->children : NULL; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE && !strcmp((const char *)c->name, name))
            return xmlNodeGetContent(c);
    return NULL;
}

/* rmt_xml_child's text on one line in out, or "". */
static void child_text(xmlNode *root, const char *name, char *out, size_t n) {
    xmlChar *t = rmt_xml_child(root, name);
    snprintf(out, n, "%s", t ? (const char *)t : "");
    xmlFree(t);
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' '; /* one line */
}

xmlDoc *rmt_xml_read(const char *body, size_t len) {
    /* No network, no entity substitution, no DTD loading: a hostile
     * body is text, never a fetch or an expansion.  S3 sends no DTD: a
     * document with one is refused whole (its entities would be expanded
     * by every read of an element's text: xmlNodeGetContent). */
    xmlDoc *d =
        len > (size_t)1 << 30
            ? NULL
            : xmlReadMemory(body, (int)len, "s3.xml", NULL,
                            XML_PARSE_NONET | XML_PARSE_NOERROR |
                                XML_PARSE_NOWARNING | XML_PARSE_NOBLANKS);
    if (d && (d->intSubset || d->extSubset)) {
        xmlFreeDoc(d);
        d = NULL;
    }
    return d;
}

void rmt_s3_explain(const struct rmt_answer *a, const char *body, size_t len,
                    char *msg, size_t n) {
    char code[64], text[256], ep[256];
    xmlDoc *d = len ? rmt_xml_read(body, len) : NULL;
    xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
    if (!root || strcmp((const char *)root->name, "Error") != 0) {
        xmlFreeDoc(d);
        if (a->region[0] && (a->status == 301 || a->status == 400))
            snprintf(msg, n,
                     "HTTP %ld: the bucket is in region %s (set AWS_REGION)",
                     a->status, a->region);
        else if (a->status == 404 || a->status == 403)
            snprintf(msg, n, "HTTP %ld (%s)", a->status,
                     a->status == 404 ? "no such key or bucket"
                                      : "access denied");
        return; /* else msg says what the request got */
    }
    child_text(root, "Code", code, sizeof code);
    child_text(root, "Message", text, sizeof text);
    child_text(root, "Endpoint", ep, sizeof ep);
    xmlFreeDoc(d);
    int k = snprintf(msg, n, "S3 said %s: %s (HTTP %ld)", code[0] ? code : "?",
                     text[0] ? text : "no message", a->status);
    if (k > 0 && (size_t)k < n && (ep[0] || a->region[0]))
        snprintf(msg + k, n - (size_t)k, "; the bucket is at %s%s%s%s", ep,
                 ep[0] && a->region[0] ? ", " : "",
                 a->region[0] ? "region " : "", a->region);
}
