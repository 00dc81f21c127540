/*
 * hub.c - a Hub repo's GGUF files (catalog.h: cat_hub_is_repo,
 * cat_hub_list): hf://OWNER/REPO[@REV] is listed by
 * $HF_ENDPOINT/api/models/OWNER/REPO/tree/REV?recursive=true (REV: main
 * when not given), page after page by the Link header's rel="next"
 * (remote/'s rmt_get_doc: hf://'s credential and fault rules, every page
 * on the origin of the first), each page a JSON array parsed with
 * libjansson.  Every "file" entry whose path ends in .gguf becomes a
 * candidate; shard sets are grouped, names made and the list finished by
 * list.c, as for a local folder (one rule for all stores).
 *
 * Each file is the hf:// URL "hf://OWNER/REPO/PATH@REV" (PATH's segments
 * percent-encoded, so that any name the Hub holds is one URL path and
 * nothing else: rmt_resolve puts PATH into the resolve URL as it is, and
 * the usual names, [A-Za-z0-9._-], are unchanged), its size the listing's
 * (lfs.size for an LFS file), read-only at the source: edits go to
 * overlays as for any hf:// file.
 *
 * Hostile answers.  A page that is not JSON or not an array, a status but
 * 200, a page over HUB_PAGE_MAX bytes or HUB_PAGE_VALUES values, more
 * than HUB_MAX_PAGES pages, a next page that is the page itself or on
 * another origin: the listing fails with one line naming the URL (the
 * page's number when not the first).  An entry that is not an object, lacks a string type or path,
 * has a path that is absolute, empty, holds a control character, an
 * empty, "." or ".." component or is longer than CAT_MAX_PATH, or a GGUF
 * without a
 * non-negative integer size: skipped with one log line (HUB_LOG_MAX of
 * them, then one line counting the rest).
 */
#include "gguf.h"
#include "internal.h"
#include "remote.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HUB_PAGE_MAX ((size_t)16 << 20) /* bytes of one page */
#define HUB_MAX_PAGES 1000              /* ends a cycle of next links */
/* Values parsed of one page: the parsed tree costs about 100 bytes a
 * value, and a page of tiny values ("[0,0,...]") would make 16 MiB of
 * text a gigabyte of tree.  The Hub's pages have about 10 a file. */
#define HUB_PAGE_VALUES (1 << 18)
#define HUB_LOG_MAX 20  /* skipped entries logged one by one */
#define HUB_NAME_MAX 96 /* the Hub's longest OWNER or REPO */
#define HUB_REV_MAX 255

/* One listing. */
struct hub {
    struct cat_scan s;
    struct cat_cands c;
    char owner[HUB_NAME_MAX + 1], repo[HUB_NAME_MAX + 1];
    char rev[HUB_REV_MAX + 1];
    char *shown; /* the API URL as it may be shown (no query) */
    int page;    /* 1-based */
    size_t skipped, files;
};

/* OWNER or REPO: 1..HUB_NAME_MAX of [A-Za-z0-9._-], not "." or "..". */
static int name_ok(const char *p, size_t len) {
    if (!len || len > HUB_NAME_MAX || strspn(p, ".") >= len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
              (p[i] >= '0' && p[i] <= '9') || strchr("._-", p[i])))
            return 0;
    return 1;
}

/* hf://OWNER/REPO[@REV] into h's owner, repo and rev (REV: 1..255 bytes,
 * no control character, no '@': the hf:// file form ends at its last
 * '@').  0 or -1. */
static int parse_repo(const char *url, struct hub *h) {
    if (!url || strncmp(url, "hf://", 5) != 0)
        return -1;
    const char *o = url + 5, *slash = strchr(o, '/');
    if (!slash)
        return -1;
    const char *r = slash + 1, *at = strchr(r, '@');
    size_t olen = (size_t)(slash - o), rlen = at ? (size_t)(at - r) : strlen(r);
    const char *rev = at ? at + 1 : "main";
    size_t vlen = strlen(rev);
    if (!name_ok(o, olen) || !name_ok(r, rlen) || !vlen || vlen > HUB_REV_MAX ||
        strchr(rev, '@'))
        return -1;
    for (const char *p = rev; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return -1;
    memcpy(h->owner, o, olen);
    h->owner[olen] = '\0';
    memcpy(h->repo, r, rlen);
    h->repo[rlen] = '\0';
    memcpy(h->rev, rev, vlen + 1);
    return 0;
}

int cat_hub_is_repo(const char *url) {
    struct hub h;
    return parse_repo(url, &h) == 0;
}

/* One line about entry i of the page, skipped (HUB_LOG_MAX at most). */
static void skip(struct hub *h, size_t i, const char *fmt, ...) {
    char why[600];
    va_list ap;
    if (h->skipped++ >= HUB_LOG_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    cat_logf(&h->s, "%s: page %d, entry %zu: %s; skipped", h->shown, h->page, i,
             why);
}

/* "hf://OWNER/REPO/PATH@REV", PATH's segments percent-encoded; NULL on
 * out of memory. */
static char *file_url(const struct hub *h, const char *path) {
    struct gguf_buf b = {0};
    char *head = NULL;
    int ok = asprintf(&head, "hf://%s/%s/", h->owner, h->repo) >= 0 &&
             gguf_buf_add(&b, head, strlen(head)) == GGUF_OK;
    for (const char *p = path; ok;) {
        size_t k = strcspn(p, "/");
        char *e = curl_easy_escape(NULL, p, (int)k);
        ok = e && gguf_buf_add(&b, e, strlen(e)) == GGUF_OK;
        curl_free(e);
        if (!p[k])
            break;
        ok = ok && gguf_buf_add(&b, "/", 1) == GGUF_OK;
        p += k + 1;
    }
    ok = ok && gguf_buf_add(&b, "@", 1) == GGUF_OK &&
         gguf_buf_add(&b, h->rev, strlen(h->rev) + 1) == GGUF_OK;
    free(head);
    if (!ok)
        gguf_buf_free(&b);
    return ok ? (char *)b.p : NULL;
}

/* The size of a file entry e: lfs.size for an LFS file, else size.  0, or
 * -1 if it is not a non-negative integer. */
static int entry_size(json_t *e, uint64_t *size) {
    json_t *lfs = json_object_get(e, "lfs");
    if (lfs && !json_is_null(lfs) && !json_is_object(lfs))
        return -1;
    json_t *sz = json_object_get(json_is_object(lfs) ? lfs : e, "size");
    if (!json_is_integer(sz) || json_integer_value(sz) < 0)
        return -1;
    *size = (uint64_t)json_integer_value(sz);
    return 0;
}

/* Entry i of a page: a candidate if it is a GGUF file, else left out
 * (quietly when it is well-formed: directories, other files). */
static void take_entry(struct hub *h, size_t i, json_t *e) {
    json_t *type = json_object_get(e, "type"),
           *path = json_object_get(e, "path");
    if (!json_is_object(e) || !json_is_string(type) || !json_is_string(path)) {
        skip(h, i, "not an object with a string type and path");
        return;
    }
    const char *p = json_string_value(path), *why;
    if (strcmp(json_string_value(type), "file") != 0 || !cat_ends_gguf(p))
        return;
    struct cat_file f = {0};
    if ((why = cat_path_fault(p, json_string_length(path)))) {
        skip(h, i, "the path %.200s %s", p, why);
        return;
    }
    if (entry_size(e, &f.size) != 0) {
        skip(h, i, "%.200s has no size (a non-negative integer)", p);
        return;
    }
    if (h->files++ == CAT_MAX_MODELS) {
        cat_logf(&h->s, "%s: more than %d GGUF files: the rest left out",
                 h->shown, CAT_MAX_MODELS);
        return;
    }
    if (h->files > CAT_MAX_MODELS)
        return;
    if (!(f.path = file_url(h, p)))
        h->s.oom = 1;
    else
        cat_cand_add(&h->s, &h->c, p, NULL, &f); /* takes f */
}

/* At least the number of JSON values in body, less one: every value but
 * the first follows a ',', '[' or '{' (counted in strings too: more, never
 * fewer). */
static size_t json_values(const char *body, size_t len) {
    size_t k = 0;
    for (size_t i = 0; i < len; i++)
        k += body[i] == ',' || body[i] == '[' || body[i] == '{';
    return k;
}

/* One page's body: a JSON array of entries.  0, or -1 with msg. */
static int take_page(struct hub *h, const char *body, size_t len, char *msg,
                     size_t n) {
    json_error_t err;
    if (json_values(body, len) > HUB_PAGE_VALUES) {
        snprintf(msg, n, "%s: page %d has more than %d JSON values", h->shown,
                 h->page, HUB_PAGE_VALUES);
        return -1;
    }
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
    if (!root || !json_is_array(root)) {
        if (root)
            snprintf(msg, n, "%s: page %d is not a JSON array", h->shown,
                     h->page);
        else
            snprintf(msg, n, "%s: page %d is not JSON (line %d: %.100s)",
                     h->shown, h->page, err.line, err.text);
        json_decref(root);
        return -1;
    }
    size_t i;
    json_t *e;
    json_array_foreach(root, i, e) {
        if (h->s.oom)
            break;
        take_entry(h, i, e);
    }
    json_decref(root);
    return 0;
}

/* The tree API's URL of the first page (REV one path segment). */
static char *api_url(const struct hub *h) {
    size_t elen;
    const char *ep = rmt_hf_endpoint(&elen);
    char *erev = curl_easy_escape(NULL, h->rev, 0), *out = NULL;
    if (erev && asprintf(&out, "%.*s/api/models/%s/%s/tree/%s?recursive=true",
                         (int)elen, ep, h->owner, h->repo, erev) < 0)
        out = NULL;
    curl_free(erev);
    return out;
}

/* Every page from url on.  0, or -1 with msg. */
static int take_pages(struct hub *h, char *url, const struct rmt_opts *o,
                      char *msg, size_t n) {
    int r = 0;
    char *body = NULL, *next = NULL;
    size_t len;
    for (h->page = 1; url && !r && !h->s.oom; h->page++) {
        if (h->page > HUB_MAX_PAGES) {
            snprintf(msg, n, "%s: more than %d pages: refused", h->shown,
                     HUB_MAX_PAGES);
            r = -1;
        } else if (rmt_get_doc(url, o, HUB_PAGE_MAX, &body, &len, &next, msg,
                               n) != 0) {
            r = -1;
        } else if (next && strcmp(next, url) == 0) {
            snprintf(msg, n, "%s: page %d's next page is itself", h->shown,
                     h->page);
            r = -1;
        } else {
            r = take_page(h, body, len, msg, n);
        }
        free(body);
        free(url);
        body = NULL;
        url = next;
        next = NULL;
    }
    free(url);
    return r;
}

int cat_hub_list(const char *url, const struct rmt_opts *opts,
                 struct cat_list *out, char *msg, size_t n) {
    struct hub h = {.s = {.dirfd = -1, .out = out}};
    struct rmt_opts o = opts ? *opts : (struct rmt_opts){.retries = -1};
    memset(out, 0, sizeof *out);
    out->kind = CAT_HUB;
    o.hf = 1; /* HF_TOKEN goes to the endpoint's origin */
    h.s.log = o.log;
    h.s.log_u = o.log_u;
    if (parse_repo(url, &h) != 0) {
        snprintf(msg, n, "%.300s: not hf://OWNER/REPO[@REVISION]",
                 url ? url : "(null)");
        return -1;
    }
    char *api = api_url(&h);
    h.shown = api ? rmt_display_url(api) : NULL;
    if (!h.shown) {
        free(api);
        snprintf(msg, n, "out of memory");
        return -1;
    }
    int r = take_pages(&h, api, &o, msg, n); /* takes api */
    r = cat_remote_done(&h.s, &h.c, r, h.shown, h.skipped, HUB_LOG_MAX,
                        "entries", msg, n);
    free(h.shown);
    return r;
}
