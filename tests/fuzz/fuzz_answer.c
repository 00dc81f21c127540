/*
 * fuzz_answer.c - libFuzzer target: any answer a server may send to one
 * ranged request, through remote/answer.c (rmt_answer_line,
 * rmt_answer_check), the checks every byte from the network passes.
 *
 * Input: a first line "OFF LEN GOT FLAGS" (decimal; missing or bad fields
 * are 0) says what was asked (bytes OFF..OFF+LEN-1 of a file of SIZE
 * bytes), how many body bytes came (GOT) and FLAGS: 1 a HEAD, 2 the size
 * probe, 4 the body went on past LEN, 8 no ETag recorded, 16 no
 * Last-Modified recorded.  Every further line is a header line (status
 * lines included) as libcurl hands them over.
 *
 * Properties, checked on the raw lines (not on what answer.c parsed):
 *   a refusal says why (one line, NUL-terminated, not empty);
 *   an accepted ranged answer had status 206, a Content-Range line whose
 *   value is exactly "bytes OFF-LAST/SIZE" (the probe: any SIZE), no
 *   Content-Range line with another value, no Content-Encoding but
 *   identity (an empty one names no coding), no Content-Length but LEN, the recorded ETag (else
 *   Last-Modified) line, GOT == LEN and nothing past it.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SIZE 1000000ULL
#define ETAG "\"v1\""
#define LASTMOD "Tue, 14 Nov 2023 22:13:20 GMT"

__attribute__((noreturn)) static void bug(const char *what) {
    fprintf(stderr, "fuzz_answer: property violated: %s\n", what);
    abort();
}

/* The trimmed value of header line l if its name is name, else NULL. */
static const char *value_of(const char *l, const char *name, char *v,
                            size_t n) {
    size_t k = strlen(name);
    if (strncasecmp(l, name, k) != 0 || l[k] != ':')
        return NULL;
    const char *p = l + k + 1;
    while (*p == ' ' || *p == '\t')
        p++;
    snprintf(v, n, "%s", p);
    size_t len = strlen(v);
    while (len &&
           (v[len - 1] == ' ' || v[len - 1] == '\t' || v[len - 1] == '\r'))
        v[--len] = '\0';
    return v;
}

/* What the raw lines must hold for an accepted ranged answer. */
static void check_lines(char **lines, int nl, unsigned long long off,
                        unsigned long long len, unsigned flags) {
    char v[512];
    int range_ok = 0, status206 = 0, has_tag = 0;
    int start = 0; /* a status line starts a new answer: the last counts */
    for (int i = 0; i < nl; i++)
        if (strncmp(lines[i], "HTTP/", 5) == 0)
            start = i;
    for (int i = start; i < nl; i++) {
        const char *l = lines[i];
        if (strncmp(l, "HTTP/", 5) == 0) {
            const char *sp = strchr(l, ' ');
            status206 = sp && strncmp(sp + 1, "206", 3) == 0;
        } else if (value_of(l, "content-range", v, sizeof v)) {
            /* "bytes FIRST-LAST/TOTAL": the unit case-insensitive (RFC
             * 9110, 14.1), the numbers decimal (leading zeros allowed by
             * the grammar), compared as numbers. */
            unsigned long long f, l2, t;
            char tail;
            int same =
                strncasecmp(v, "bytes ", 6) == 0 &&
                strspn(v + 6, "0123456789-/") == strlen(v + 6) &&
                sscanf(v + 6, "%llu-%llu/%llu%c", &f, &l2, &t, &tail) == 3 &&
                f == off && l2 == off + len - 1 && ((flags & 2) || t == SIZE);
            if (!same)
                bug("accepted with another Content-Range");
            range_ok = 1;
        } else if (value_of(l, "content-encoding", v, sizeof v) && v[0] &&
                   strcasecmp(v, "identity") != 0) { /* empty: none */
            bug("accepted an encoded body");
        } else if (value_of(l, "content-length", v, sizeof v) &&
                   strtoull(v, NULL, 10) != len) {
            bug("accepted with another Content-Length");
        } else if (!(flags & 8) && value_of(l, "etag", v, sizeof v)) {
            has_tag |= strcmp(v, ETAG) == 0;
        } else if ((flags & 8) && !(flags & 16) &&
                   value_of(l, "last-modified", v, sizeof v)) {
            has_tag |= strcmp(v, LASTMOD) == 0;
        }
    }
    if (!status206 || !range_ok)
        bug("accepted without 206 and Content-Range");
    if (!(flags & 2) && !has_tag && (flags & 24) != 24)
        bug("accepted without the recorded validator");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1), *save = NULL;
    char **lines = calloc(size / 2 + 2, sizeof *lines);
    if (!text || !lines)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    unsigned long long off = 0, len = 0, got = 0;
    unsigned flags = 0;
    int nl = 0;
    char *first = strtok_r(text, "\n", &save);
    if (first)
        sscanf(first, "%llu %llu %llu %u", &off, &len, &got, &flags);
    for (char *l = strtok_r(NULL, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save))
        lines[nl++] = l;
    if (len == 0 || len > SIZE || off > SIZE - len)
        len = 1, off = 0;
    struct rmt_ident id = {.size = SIZE};
    if (!(flags & 8))
        snprintf(id.etag, sizeof id.etag, "%s", ETAG);
    if (!(flags & 16))
        snprintf(id.lastmod, sizeof id.lastmod, "%s", LASTMOD);
    struct rmt_ask q = {.head = flags & 1,
                        .probing = (flags & 2) != 0,
                        .off = off,
                        .len = len,
                        .got = got > len ? len : got,
                        .overlong = (flags & 4) != 0};
    struct rmt_answer a = {0};
    for (int i = 0; i < nl; i++) {
        /* Whole, as libcurl hands a header line over: the properties
         * are checked on the same bytes. */
        size_t len = strlen(lines[i]);
        char *line = malloc(len + 3);
        if (!line) { /* not all lines fed: nothing to judge */
            free(lines);
            free(text);
            return 0;
        }
        memcpy(line, lines[i], len);
        memcpy(line + len, "\r\n", 3);
        rmt_answer_line(&a, line, len + 2);
        free(line);
    }
    char msg[300] = "";
    enum rmt_verdict v = rmt_answer_check(&a, &id, &q, msg, sizeof msg);
    if (v != RMT_OK &&
        (!msg[0] || !memchr(msg, '\0', sizeof msg) || strchr(msg, '\n')))
        bug("a refusal without a one-line reason");
    if (v == RMT_OK && !q.head) {
        if (q.got != len || q.overlong)
            bug("accepted a body of another length");
        check_lines(lines, nl, off, len, flags);
    }
    free(lines);
    free(text);
    return 0;
}
