/*
 * url.c - URLs as remote/ handles them: which sources are remote, hf://
 * resolved to the Hub's URL, a URL's origin (where credentials may go),
 * and the form of a URL that may be shown to everyone (no user info, no
 * query string: /proc/mounts, the log).  libcurl's URL parser (CURLU)
 * does the parsing; nothing here parses by hand but hf://'s own form.
 */
#include "internal.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int rmt_is_url(const char *s) {
    return s &&
           (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0 ||
            strncmp(s, "hf://", 5) == 0 || strncmp(s, "s3://", 5) == 0);
}

int rmt_origin(const char *url, char *out, size_t n) {
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

const char *rmt_hf_endpoint(size_t *len) {
    const char *ep = getenv("HF_ENDPOINT");
    if (!ep || !*ep)
        ep = "https://huggingface.co";
    *len = strlen(ep);
    while (*len && ep[*len - 1] == '/')
        (*len)--;
    return ep;
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
    size_t elen;
    const char *ep = rmt_hf_endpoint(&elen);
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

char *rmt_display_url(const char *url) {
    CURLU *u = curl_url();
    char *shown = NULL, *out = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_USER, NULL, 0) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_PASSWORD, NULL, 0) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_OPTIONS, NULL, 0) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_QUERY, NULL, 0) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_URL, &shown, 0) == CURLUE_OK)
        out = strdup(shown);
    else /* not a URL libcurl takes (refused at open): its error names it */
        out = strndup(url, strcspn(url, "?#"));
    curl_free(shown);
    curl_url_cleanup(u);
    return out;
}

/* Names of query parameters that carry a credential: signed URLs of S3
 * (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token), Google
 * Cloud Storage (X-Goog-Signature), Azure (sig), and the usual token,
 * key, password and secret parameters. */
static int secret_name(const char *p, size_t n) {
    static const char *const parts[] = {"sig",  "token", "secret", "pass",
                                        "cred", "auth",  "key"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        size_t k = strlen(parts[i]);
        for (size_t j = 0; j + k <= n; j++)
            if (strncasecmp(p + j, parts[i], k) == 0)
                return 1;
    }
    return 0;
}

int rmt_url_secret(const char *url, char *what, size_t n) {
    CURLU *u = curl_url();
    char *user = NULL, *pass = NULL, *query = NULL;
    int found = 0;
    if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
        curl_url_cleanup(u);
        return 0;
    }
    curl_url_get(u, CURLUPART_USER, &user, 0);
    curl_url_get(u, CURLUPART_PASSWORD, &pass, 0);
    curl_url_get(u, CURLUPART_QUERY, &query, 0);
    if (user || pass) {
        snprintf(what, n, "user info");
        found = 1;
    }
    for (const char *p = query; !found && p && *p;) {
        size_t len = strcspn(p, "&;"), name = strcspn(p, "=");
        if (name > len)
            name = len;
        if (secret_name(p, name)) {
            snprintf(what, n, "%.*s", (int)(name < 64 ? name : 64), p);
            found = 1;
        }
        p += len + (p[len] != '\0');
    }
    curl_free(user);
    curl_free(pass);
    curl_free(query);
    curl_url_cleanup(u);
    return found;
}
