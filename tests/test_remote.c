/*
 * test_remote.c - remote/'s answer checks (answer.c) and URL handling
 * (url.c), without a network: each rule of answer.c's top comment as a
 * case, and the URL forms /proc/mounts and the log may show.
 */
#include "internal.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct rmt_ident ID = {
    .size = 1000, .etag = "\"v1\"", .lastmod = "Tue, 14 Nov 2023 22:13:20 GMT"};

/* The verdict on lines (a NULL-terminated list) as the answer to bytes
 * [off, off + len) of which got came. */
static enum rmt_verdict judge(const struct rmt_ident *id, uint64_t off,
                              uint64_t len, uint64_t got, int overlong,
                              const char *const *lines, char *msg) {
    struct rmt_answer a = {0};
    for (; *lines; lines++) {
        char l[512];
        snprintf(l, sizeof l, "%s\r\n", *lines);
        rmt_answer_line(&a, l, strlen(l));
    }
    struct rmt_ask q = {
        .off = off, .len = len, .got = got, .overlong = overlong};
    return rmt_answer_check(&a, id, &q, msg, 300);
}

#define OK206 "HTTP/1.1 206 Partial Content"
#define ETAG "ETag: \"v1\""
#define LM "Last-Modified: Tue, 14 Nov 2023 22:13:20 GMT"

START_TEST(exact_range) {
    char msg[300];
    const char *good[] = {OK206,
                          "Content-Range: bytes 100-199/1000",
                          "Content-Length: 100",
                          ETAG,
                          LM,
                          NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 0, good, msg), RMT_OK);
    const char *shifted[] = {OK206, "Content-Range: bytes 0-99/1000", ETAG,
                             NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 0, shifted, msg), RMT_RETRY);
    ck_assert_ptr_nonnull(
        strstr(msg, "asked for bytes 100-199, got bytes 0-99/1000"));
    const char *longer[] = {OK206, "Content-Range: bytes 100-299/1000", ETAG,
                            NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 0, longer, msg), RMT_RETRY);
    const char *none[] = {OK206, ETAG, NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 0, none, msg), RMT_RETRY);
    const char *bad[] = {OK206, "Content-Range: bytes 100-199/*", ETAG, NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 0, bad, msg), RMT_RETRY);
    const char *twice[] = {OK206, "Content-Range: bytes 100-199/1000",
                           "Content-Range: bytes 0-99/1000", ETAG, NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 0, twice, msg), RMT_RETRY);
    const char *plus[] = {OK206, "Content-Range: bytes +100-199/1000", ETAG,
                          NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 0, plus, msg), RMT_RETRY);
}
END_TEST

START_TEST(body_and_length) {
    char msg[300];
    const char *l[] = {OK206, "Content-Range: bytes 100-199/1000", ETAG, NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 99, 0, l, msg), RMT_RETRY);
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 1, l, msg), RMT_RETRY);
    ck_assert_ptr_nonnull(strstr(msg, "more than"));
    const char *cl[] = {OK206, "Content-Range: bytes 100-199/1000",
                        "Content-Length: 101", ETAG, NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 0, cl, msg), RMT_RETRY);
    const char *gz[] = {OK206, "Content-Range: bytes 100-199/1000", ETAG,
                        "Content-Encoding: gzip", NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 0, gz, msg), RMT_RETRY);
    ck_assert_ptr_nonnull(strstr(msg, "gzip"));
    const char *id[] = {OK206, "Content-Range: bytes 100-199/1000", ETAG,
                        "Content-Encoding: identity", NULL};
    ck_assert_int_eq(judge(&ID, 100, 100, 100, 0, id, msg), RMT_OK);
}
END_TEST

START_TEST(version) {
    char msg[300];
    const char *noetag[] = {OK206, "Content-Range: bytes 0-9/1000", LM, NULL};
    ck_assert_int_eq(judge(&ID, 0, 10, 10, 0, noetag, msg), RMT_CHANGED);
    ck_assert_ptr_nonnull(strstr(msg, "no ETag"));
    const char *other[] = {OK206, "Content-Range: bytes 0-9/1000",
                           "ETag: \"v2\"", NULL};
    ck_assert_int_eq(judge(&ID, 0, 10, 10, 0, other, msg), RMT_CHANGED);
    const char *size[] = {OK206, "Content-Range: bytes 0-9/1001", ETAG, NULL};
    ck_assert_int_eq(judge(&ID, 0, 10, 10, 0, size, msg), RMT_CHANGED);
    const char *pre[] = {"HTTP/1.1 412 Precondition Failed", NULL};
    ck_assert_int_eq(judge(&ID, 0, 10, 0, 0, pre, msg), RMT_CHANGED);
    struct rmt_ident lm = {.size = 1000,
                           .lastmod = "Tue, 14 Nov 2023 22:13:20 GMT"};
    const char *nolm[] = {OK206, "Content-Range: bytes 0-9/1000", NULL};
    ck_assert_int_eq(judge(&lm, 0, 10, 10, 0, nolm, msg), RMT_CHANGED);
    ck_assert_ptr_nonnull(strstr(msg, "no Last-Modified"));
    const char *withlm[] = {OK206, "Content-Range: bytes 0-9/1000", LM, NULL};
    ck_assert_int_eq(judge(&lm, 0, 10, 10, 0, withlm, msg), RMT_OK);
    struct rmt_ident bare = {.size = 1000};
    ck_assert_int_eq(judge(&bare, 0, 10, 10, 0, nolm, msg), RMT_OK);
}
END_TEST

START_TEST(statuses) {
    char msg[300];
    const char *s503[] = {"HTTP/1.1 503 Busy", NULL};
    ck_assert_int_eq(judge(&ID, 0, 10, 0, 0, s503, msg), RMT_RETRY);
    const char *s429[] = {"HTTP/2 429", NULL};
    ck_assert_int_eq(judge(&ID, 0, 10, 0, 0, s429, msg), RMT_RETRY);
    const char *s200[] = {"HTTP/1.1 200 OK", NULL};
    ck_assert_int_eq(judge(&ID, 0, 10, 0, 0, s200, msg), RMT_FATAL);
    ck_assert_ptr_nonnull(strstr(msg, "ignores Range"));
    const char *s404[] = {"HTTP/1.1 404 Not Found", NULL};
    ck_assert_int_eq(judge(&ID, 0, 10, 0, 0, s404, msg), RMT_FATAL);
    /* A redirect's headers are forgotten at the next status line. */
    const char *redir[] = {"HTTP/1.1 302 Found",
                           "Content-Range: bytes 0-0/5",
                           OK206,
                           "Content-Range: bytes 0-9/1000",
                           ETAG,
                           NULL};
    ck_assert_int_eq(judge(&ID, 0, 10, 10, 0, redir, msg), RMT_OK);
}
END_TEST

START_TEST(urls) {
    char *s = rmt_display_url(
        "https://alice:pw@host.example:8443/a/b.gguf?X-Amz-Signature=ab#f");
    ck_assert_str_eq(s, "https://host.example:8443/a/b.gguf");
    free(s);
    s = rmt_display_url("http://127.0.0.1:80/m.gguf?download=true");
    ck_assert_ptr_null(strchr(s, '?'));
    free(s);
    char what[80];
    ck_assert(
        rmt_url_secret("https://h/x?X-Amz-Signature=1&a=b", what, sizeof what));
    ck_assert_str_eq(what, "X-Amz-Signature");
    ck_assert(rmt_url_secret("https://u:p@h/x", what, sizeof what));
    ck_assert_str_eq(what, "user info");
    ck_assert(
        rmt_url_secret("https://h/x?download=true&token=3", what, sizeof what));
    ck_assert_str_eq(what, "token");
    ck_assert(!rmt_url_secret("https://h/x?download=true", what, sizeof what));
    char org[512];
    ck_assert_int_eq(rmt_origin("HTTPS://Host.Example/x", org, sizeof org), 0);
    ck_assert_str_eq(org, "https://host.example:443");
    char msg[200];
    setenv("HF_ENDPOINT", "http://hub.local/", 1);
    s = rmt_resolve("hf://o/r/dir/m.gguf@refs/pr/1", msg, sizeof msg);
    ck_assert_str_eq(s,
                     "http://hub.local/o/r/resolve/refs%2Fpr%2F1/dir/m.gguf");
    free(s);
    ck_assert_ptr_null(rmt_resolve("hf://o/m.gguf", msg, sizeof msg));
    ck_assert(rmt_is_url("hf://o/r/p") && !rmt_is_url("/models/x.gguf"));
}
END_TEST

/* rmt_link_next on v: its return, and the next link or NULL in *out. */
static int next_of(const char *v, char **out) {
    char msg[200];
    return rmt_link_next(v, out, msg, sizeof msg);
}

/* RFC 8288's Link: several links, params in any order, quoted values
 * holding ',' and ';', the first rel only, relation lists, any case. */
START_TEST(link_next) {
    char *r = NULL;
    ck_assert_int_eq(next_of("", &r), 0);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(
        next_of("<https://h/t?recursive=true&cursor=Zm9v>; rel=\"next\"", &r),
        0);
    ck_assert_str_eq(r, "https://h/t?recursive=true&cursor=Zm9v");
    free(r);
    ck_assert_int_eq(next_of("<https://h/p>; rel=\"prev\", <https://h/n>; "
                             "rel=next",
                             &r),
                     0);
    ck_assert_str_eq(r, "https://h/n");
    free(r);
    ck_assert_int_eq(
        next_of("<https://h/x>; title=\"a, <b>; rel=next\"; rel=\"prev\","
                "<https://h/n> ;REL=\"first NEXT\"",
                &r),
        0);
    ck_assert_str_eq(r, "https://h/n");
    free(r);
    /* a second rel param is ignored; no next at all */
    ck_assert_int_eq(next_of("<https://h/x>; rel=prev; rel=next", &r), 0);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(next_of("<https://h/x>; rel=nextpage", &r), 0);
    ck_assert_ptr_null(r);
    /* the same next twice is one; two different ones, or malformed: -1 */
    ck_assert_int_eq(next_of("<n>; rel=next, <n>; rel=next", &r), 0);
    ck_assert_str_eq(r, "n");
    free(r);
    const char *bad[] = {"<a>; rel=next, <b>; rel=next",
                         "https://h/n; rel=next",
                         "<https://h/n>; rel=\"next",
                         "<https://h/n> rel=next",
                         "<https://h/n; rel=next",
                         "<https://h/n>; =next",
                         "<https://h/n>; rel=next; title=\"x\\"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = (char *)"untouched";
        ck_assert_msg(next_of(bad[i], &r) == -1 && r == NULL, "%s", bad[i]);
    }
}
END_TEST

/* Link lines are joined; one too long to keep fails a document (never a
 * listing cut short without a word). */
START_TEST(doc_answers) {
    char msg[300], big[RMT_LINK_MAX + 100];
    struct rmt_answer a = {0};
    struct rmt_ident id = {0};
    struct rmt_ask q = {.doc = 1, .len = 100, .got = 10};
    const char *lines[] = {"HTTP/1.1 200 OK\r\n", "Link: <a>; rel=prev\r\n",
                           "link:  <b>; rel=next \r\n"};
    for (int i = 0; i < 3; i++)
        rmt_answer_line(&a, lines[i], strlen(lines[i]));
    ck_assert_str_eq(a.link, "<a>; rel=prev, <b>; rel=next");
    ck_assert_int_eq(rmt_answer_check(&a, &id, &q, msg, sizeof msg), RMT_OK);
    snprintf(big, sizeof big, "Link: <%0*d>; rel=next\r\n", RMT_LINK_MAX, 0);
    rmt_answer_line(&a, big, strlen(big));
    ck_assert_int_eq(rmt_answer_check(&a, &id, &q, msg, sizeof msg), RMT_FATAL);
    ck_assert_msg(strstr(msg, "Link header longer"), "%s", msg);
    const char *nf = "HTTP/1.1 404 Not Found\r\n";
    rmt_answer_line(&a, nf, strlen(nf));
    ck_assert_int_eq(rmt_answer_check(&a, &id, &q, msg, sizeof msg), RMT_FATAL);
    ck_assert_str_eq(msg, "HTTP 404 (not found)");
    const char *busy = "HTTP/1.1 503 Busy\r\n";
    rmt_answer_line(&a, busy, strlen(busy));
    ck_assert_int_eq(rmt_answer_check(&a, &id, &q, msg, sizeof msg), RMT_RETRY);
    rmt_answer_line(&a, lines[0], strlen(lines[0]));
    q.overlong = 1;
    ck_assert_int_eq(rmt_answer_check(&a, &id, &q, msg, sizeof msg), RMT_FATAL);
    ck_assert_str_eq(msg, "larger than 100 bytes");
}
END_TEST

int main(void) {
    Suite *s = suite_create("remote");
    TCase *tc = tcase_create("answers");
    tcase_add_test(tc, exact_range);
    tcase_add_test(tc, body_and_length);
    tcase_add_test(tc, version);
    tcase_add_test(tc, statuses);
    tcase_add_test(tc, urls);
    tcase_add_test(tc, link_next);
    tcase_add_test(tc, doc_answers);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
