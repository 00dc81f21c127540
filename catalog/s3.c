/*
 * s3.c - a bucket prefix's GGUF files (catalog.h: cat_s3_is_store,
 * cat_s3_list): s3://BUCKET/PREFIX/ (PREFIX may be empty: s3://BUCKET/)
 * is listed by ListObjectsV2, GET s3://BUCKET/?list-type=2&prefix=PREFIX,
 * then with &continuation-token=T (the last page's
 * NextContinuationToken) while the page says IsTruncated.  Each page goes
 * through remote/'s rmt_get_doc as an s3:// URL, so it is signed and sent
 * as the objects are (remote/s3.c: the same credentials, endpoint, style
 * and region), and a refusal says what S3 said; its XML is parsed with
 * libxml2 (rmt_xml_read: no network, no entity expanded).  The query's
 * parameters are sent sorted by name and percent-encoded as SigV4's
 * canonical query wants them (libcurl 7.88 signs the query as given).
 *
 * Every Contents entry whose Key ends in .gguf becomes a candidate named
 * by the key below the prefix; shard sets are grouped, names made and
 * the list finished by list.c, as for a Hub repo or a local folder (one
 * rule for all stores).  Each file is the s3:// URL "s3://BUCKET/KEY"
 * (KEY as listed: s3.c encodes it per request), its size the listing's
 * <Size>, read-only at the source: edits go to overlays.
 *
 * Bounds and hostile answers.  A page over S3_PAGE_MAX bytes or with more
 * than S3_PAGE_TAGS tags, more than S3_MAX_PAGES pages or S3_MAX_KEYS keys
 * in all, a page that is not a ListBucketResult, a truncated page without
 * a next token (or with the token it was asked with, one an earlier page
 * gave, or one longer than S3_TOKEN_MAX), a page with a DTD
 * (rmt_xml_read): the listing fails with one line naming
 * s3://BUCKET/PREFIX/, the page and the bound or fault.  A key outside
 * the prefix, one that cat_path_fault refuses below it, one with a
 * control character, '?' or '#' (an s3:// URL could not name it), or a
 * GGUF without a non-negative integer Size: skipped with one log line
 * (S3_LOG_MAX of them, then one line counting the rest).
 */
#include "gguf.h"
#include "internal.h"
#include "remote.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <libxml/tree.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define S3_PAGE_MAX ((size_t)16 << 20) /* bytes of one page */
#define S3_PAGE_TAGS (1 << 18)         /* '<' of one page: its tree's size */
#define S3_MAX_PAGES 10000
#define S3_MAX_KEYS 1000000 /* keys under the prefix, GGUFs or not */
#define S3_TOKEN_MAX 4096   /* bytes of a continuation token */
#define S3_LOG_MAX 20       /* skipped keys logged one by one */

/* One listing. */
struct s3ls {
    struct cat_scan s;
    struct cat_cands c;
    char bucket[RMT_S3_BUCKET_MAX + 1];
    char *prefix;   /* as given, ends in '/' or is "" */
    char *shown;    /* s3://BUCKET/PREFIX */
    char *token;    /* the next page's continuation token, or NULL */
    uint64_t *seen; /* hashes of the tokens given so far, by page: a
                       server's cycle of tokens is refused at its first
                       repeat, not after S3_MAX_PAGES requests */
    int page;       /* 1-based */
    size_t keys, skipped, files;
};

/* s3://BUCKET/ followed by a prefix ending in '/' (or nothing), no query,
 * or s3://BUCKET alone (the whole bucket: no object has an empty key):
 * the prefix into *prefix (into url).  0 or -1. */
static int parse_store(const char *url, char *bucket, size_t bn,
                       const char **prefix) {
    const char *key;
    size_t len = url ? strlen(url) : 0;
    if (rmt_s3_split(url, bucket, bn, &key) != 0 || strpbrk(url, "?#") ||
        (url[len - 1] != '/' && *key))
        return -1;
    *prefix = key;
    return 0;
}

int cat_s3_is_store(const char *url) {
    char b[RMT_S3_BUCKET_MAX + 1];
    const char *p;
    return parse_store(url, b, sizeof b, &p) == 0;
}

/* One line about a key of the page, skipped (S3_LOG_MAX at most). */
static void skip(struct s3ls *l, const char *key, const char *fmt, ...) {
    char why[300];
    va_list ap;
    if (l->skipped++ >= S3_LOG_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    cat_logf(&l->s, "%s: page %d, key %.300s: %s; skipped", l->shown, l->page,
             key, why);
}

/* A key's fault as an s3:// URL's KEY, or NULL. */
static const char *key_fault(const char *k) {
    for (const char *p = k; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return "holds a control character";
    return strpbrk(k, "?#") ? "holds '?' or '#' (an s3:// URL cannot name it)"
                            : NULL;
}

/* A Contents entry: a candidate if its key is a GGUF below the prefix. */
static void take_key(struct s3ls *l, xmlNode *e) {
    xmlChar *xk = rmt_xml_child(e, "Key"), *xs = rmt_xml_child(e, "Size");
    const char *k = xk ? (const char *)xk : "", *why, *rel;
    size_t plen = strlen(l->prefix);
    char *end = NULL;
    struct cat_file f = {0};
    if (!cat_ends_gguf(k))
        goto out; /* other objects: left out quietly */
    if (strncmp(k, l->prefix, plen) != 0) {
        skip(l, k, "not below the prefix");
        goto out;
    }
    rel = k + plen;
    if ((why = cat_path_fault(rel, strlen(rel))) || (why = key_fault(k))) {
        skip(l, k, "the key %s", why);
        goto out;
    }
    f.size = xs ? strtoull((const char *)xs, &end, 10) : 0;
    if (!xs || !*xs || *end || *xs == '-') {
        skip(l, k, "no Size (a non-negative integer)");
        goto out;
    }
    if (l->files++ == CAT_MAX_MODELS)
        cat_logf(&l->s, "%s: more than %d GGUF files: the rest left out",
                 l->shown, CAT_MAX_MODELS);
    if (l->files > CAT_MAX_MODELS)
        goto out;
    if (asprintf(&f.path, "s3://%s/%s", l->bucket, k) < 0)
        l->s.oom = 1;
    else
        cat_cand_add(&l->s, &l->c, rel, NULL, &f); /* takes f */
out:
    xmlFree(xk);
    xmlFree(xs);
}

/* Whether page l->page's next token t was given by an earlier page
 * (msg says which; also on out of memory); else records it. */
static int token_seen(struct s3ls *l, const char *t, char *msg, size_t n) {
    uint64_t h = XXH3_64bits(t, strlen(t));
    if (!l->seen && !(l->seen = calloc(S3_MAX_PAGES + 1, sizeof *l->seen))) {
        snprintf(msg, n, "%s: out of memory", l->shown);
        return 1;
    }
    for (int p = 1; p < l->page && p <= S3_MAX_PAGES; p++)
        if (l->seen[p] == h) {
            snprintf(msg, n,
                     "%s: page %d's next continuation token was given before "
                     "(by page %d): the listing goes round",
                     l->shown, l->page, p);
            return 1;
        }
    if (l->page <= S3_MAX_PAGES)
        l->seen[l->page] = h;
    return 0;
}

/* The page's IsTruncated and NextContinuationToken into l->token (NULL at
 * the last page).  0, or -1 with msg. */
static int take_next(struct s3ls *l, xmlNode *root, char *msg, size_t n) {
    xmlChar *tr = rmt_xml_child(root, "IsTruncated"),
            *tok = rmt_xml_child(root, "NextContinuationToken");
    int more = tr && !strcmp((const char *)tr, "true"), r = -1;
    const char *t = tok ? (const char *)tok : "";
    if (!more) {
        free(l->token);
        l->token = NULL;
        r = 0;
    } else if (!*t || strlen(t) > S3_TOKEN_MAX) {
        snprintf(msg, n,
                 "%s: page %d is truncated without a next continuation "
                 "token (of 1..%d bytes)",
                 l->shown, l->page, S3_TOKEN_MAX);
    } else if (l->token && !strcmp(l->token, t)) {
        snprintf(msg, n, "%s: page %d's next continuation token is its own",
                 l->shown, l->page);
    } else if (token_seen(l, t, msg, n)) {
        /* msg says which page gave it */
    } else {
        free(l->token);
        l->token = strdup(t);
        r = l->token ? 0 : -1;
        if (r)
            snprintf(msg, n, "%s: out of memory", l->shown);
    }
    xmlFree(tr);
    xmlFree(tok);
    return r;
}

/* One page's body: a ListBucketResult.  0, or -1 with msg. */
static int take_page(struct s3ls *l, const char *body, size_t len, char *msg,
                     size_t n) {
    size_t tags = 0;
    for (size_t i = 0; i < len; i++)
        tags += body[i] == '<';
    if (tags > S3_PAGE_TAGS) {
        snprintf(msg, n, "%s: page %d has more than %d XML tags", l->shown,
                 l->page, S3_PAGE_TAGS);
        return -1;
    }
    xmlDoc *d = rmt_xml_read(body, len);
    xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
    int r = -1;
    if (!root || strcmp((const char *)root->name, "ListBucketResult") != 0) {
        snprintf(msg, n, "%s: page %d is not a ListBucketResult (XML)",
                 l->shown, l->page);
        goto out;
    }
    for (xmlNode *e = root->children; e && !l->s.oom; e = e->next) {
        if (e->type != XML_ELEMENT_NODE ||
            strcmp((const char *)e->name, "Contents") != 0)
            continue;
        if (++l->keys > S3_MAX_KEYS) {
            snprintf(msg, n, "%s: more than %d keys under the prefix: refused",
                     l->shown, S3_MAX_KEYS);
            goto out;
        }
        take_key(l, e);
    }
    r = take_next(l, root, msg, n);
out:
    xmlFreeDoc(d);
    return r;
}

/* The s3:// URL of the next page (parameters sorted, encoded). */
static char *page_url(const struct s3ls *l) {
    char *p = curl_easy_escape(NULL, l->prefix, 0), *t = NULL, *out = NULL;
    if (p && l->token && !(t = curl_easy_escape(NULL, l->token, 0)))
        goto out;
    if (p && asprintf(&out, "s3://%s/?%s%s%slist-type=2&prefix=%s", l->bucket,
                      t ? "continuation-token=" : "", t ? t : "", t ? "&" : "",
                      p) < 0)
        out = NULL;
out:
    curl_free(p);
    curl_free(t);
    return out;
}

/* rmt_get_doc's one line without the URL it starts with (the page's
 * URL shown is s3://BUCKET/: ours names the prefix too). */
static const char *doc_why(const char *url, const char *m) {
    char *shown = rmt_display_url(url);
    size_t k = shown ? strlen(shown) : 0;
    if (shown && !strncmp(m, shown, k) && !strncmp(m + k, ": ", 2))
        m += k + 2;
    free(shown);
    return m;
}

/* Every page.  0, or -1 with msg. */
static int take_pages(struct s3ls *l, const struct rmt_opts *o, char *msg,
                      size_t n) {
    int r = 0;
    char why[640];
    for (l->page = 1; !r && !l->s.oom && (l->page == 1 || l->token);
         l->page++) {
        char *url = page_url(l), *body = NULL, *next = NULL;
        size_t len;
        if (!url) {
            snprintf(msg, n, "%s: out of memory", l->shown);
            r = -1;
        } else if (l->page > S3_MAX_PAGES) {
            snprintf(msg, n, "%s: more than %d listing pages: refused",
                     l->shown, S3_MAX_PAGES);
            r = -1;
        } else if (rmt_get_doc(url, o, S3_PAGE_MAX, &body, &len, &next, why,
                               sizeof why) != 0) {
            snprintf(msg, n, "%s: listing page %d: %s", l->shown, l->page,
                     doc_why(url, why));
            r = -1;
        } else {
            r = take_page(l, body, len, msg, n);
        }
        free(next); /* S3 pages by token, never by Link */
        free(body);
        free(url);
    }
    return r;
}

int cat_s3_list(const char *url, const struct rmt_opts *opts,
                struct cat_list *out, char *msg, size_t n) {
    struct s3ls l = {.s = {.dirfd = -1, .out = out}};
    struct rmt_opts o = opts ? *opts : (struct rmt_opts){.retries = -1};
    const char *prefix;
    memset(out, 0, sizeof *out);
    out->kind = CAT_S3;
    o.hf = 0;
    l.s.log = o.log;
    l.s.log_u = o.log_u;
    if (!url || parse_store(url, l.bucket, sizeof l.bucket, &prefix) != 0) {
        snprintf(msg, n, "%.300s: not s3://BUCKET/ or s3://BUCKET/PREFIX/",
                 url ? url : "(null)");
        return -1;
    }
    if (!(l.prefix = strdup(prefix)) ||
        asprintf(&l.shown, "s3://%s/%s", l.bucket, prefix) < 0) {
        l.shown = NULL;
        snprintf(msg, n, "out of memory");
        free(l.prefix);
        return -1;
    }
    int r = take_pages(&l, &o, msg, n);
    r = cat_remote_done(&l.s, &l.c, r, l.shown, l.skipped, S3_LOG_MAX, "keys",
                        msg, n);
    free(l.token);
    free(l.seen);
    free(l.prefix);
    free(l.shown);
    return r;
}
