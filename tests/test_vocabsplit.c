/*
 * test_vocabsplit.c - hf/tokenizer.json of a SentencePiece vocabulary
 * large enough to be sorted, checked and written in two parts at once
 * (vocab/cuts.c, hfcheck.c, hfjson.c: VOC_SPLIT_MIN tokens and up), and
 * its merges ranked without a
 * whole sort where their tokens come in rank order (hfjson.c).  The
 * oracle is the test's own reading of the rules (vocab.h, hfcheck.c):
 * the reason names the FIRST token in id order that splits into a
 * character that is no token and a token, whichever half it is in; a
 * tie of two merged tokens' scores is refused; the merges are every
 * split of a token into two tokens, ranked by the token's score (highest
 * first), then its id, then the parts' ids, whatever order the scores
 * come in by id.
 */
#include "arr.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "craft.h"

#define N 6000 /* past VOC_SPLIT_MIN: two parts */

/* Token i: "<unk>", the 676 pairs, the 26 letters, then triples (the
 * pairs first: a triple's first split's left part has the greater id,
 * so that the walk's order of a token's merges is not their rank's). */
static void text(size_t i, char *s) {
    if (i == 0) {
        strcpy(s, "<unk>");
        return;
    }
    i -= 1;
    if (i < 676) {
        s[0] = (char)('a' + i / 26), s[1] = (char)('a' + i % 26), s[2] = 0;
        return;
    }
    i -= 676;
    if (i < 26) {
        s[0] = (char)('a' + i), s[1] = 0;
        return;
    }
    i -= 26;
    s[0] = (char)('a' + i / 676), s[1] = (char)('a' + i / 26 % 26);
    s[2] = (char)('a' + i % 26), s[3] = 0;
}

/* The vocabulary with token bad[k] (0: none; a pair or a triple) made
 * "Q" and its text but the first letter (Q is no token, the rest is: a
 * bad first cut), scores by score(i). */
static struct craft vocab(const size_t bad[2], float (*score)(size_t)) {
    struct craft c = {0};
    char s[16];
    craft_header(&c, 3, 0, 3);
    craft_kv_str(&c, "tokenizer.ggml.model", "llama");
    craft_kv_head(&c, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
    craft_u32(&c, GGUF_TYPE_STRING);
    craft_u64(&c, N);
    for (size_t i = 0; i < N; i++) {
        text(i, s + 1);
        bool q = i && (i == bad[0] || i == bad[1]);
        s[1] = q ? 'Q' : s[1];
        craft_str(&c, s + 1);
    }
    craft_kv_head(&c, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY);
    craft_u32(&c, GGUF_TYPE_FLOAT32);
    craft_u64(&c, N);
    for (size_t i = 0; i < N; i++)
        craft_f32(&c, score(i));
    craft_kv_head(&c, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY);
    craft_u32(&c, GGUF_TYPE_INT32);
    craft_u64(&c, N);
    for (size_t i = 0; i < N; i++)
        craft_u32(&c, i == 0 ? 2 : 1);
    return c;
}

static float falling(size_t i) {
    return -(float)i;
}
static float rising(size_t i) {
    return (float)i;
}
/* falling but for two blocks swapped (ranks not in id order) */
static float swapped(size_t i) {
    return i >= 1000 && i < 2000   ? -(float)(i + 3000)
           : i >= 4000 && i < 5000 ? -(float)(i - 3000)
                                   : -(float)i;
}
/* two triples that merges make share a score */
static float tied(size_t i) {
    return i == 5500 ? -5400.0f : -(float)i;
}

/* hf/README's reason for ctx of c, or NULL. */
static const char *reason(struct craft *c, char *why, size_t n) {
    gguf_ctx *ctx;
    struct gguf_error err = {0};
    ck_assert_int_eq(gguf_open_mem(&ctx, craft_data(c), craft_len(c), 0, &err),
                     GGUF_OK);
    const char *r = voc_hf_reason(ctx, why, n);
    if (r && r != why)
        snprintf(why, n, "%s", r);
    gguf_close(ctx);
    return r ? why : NULL;
}

START_TEST(first_bad_cut) {
    static const size_t cases[][3] = {
        /* bad tokens, the one named */
        {100, 5000, 100},
        {5000, 0, 5000},
        {5990, 0, 5990},
        {3, 5999, 3},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        struct craft c = vocab(cases[k], falling);
        char why[256], want[64];
        snprintf(want, sizeof want, "token %zu splits at byte 1 ", cases[k][2]);
        ck_assert_msg(reason(&c, why, sizeof why) && strstr(why, want),
                      "bad %zu and %zu: %s, want %s", cases[k][0], cases[k][1],
                      reason(&c, why, sizeof why) ? why : "(made)", want);
        craft_free(&c);
    }
    size_t none[2] = {0, 0};
    struct craft c = vocab(none, falling);
    char why[256];
    ck_assert_msg(!reason(&c, why, sizeof why), "refused: %s", why);
    craft_free(&c);
    c = vocab(none, tied);
    ck_assert_msg(reason(&c, why, sizeof why) && strstr(why, "score -5400"),
                  "a tie of token 5500's score: %s",
                  reason(&c, why, sizeof why) ? why : "(made)");
    craft_free(&c);
}
END_TEST

struct rank {
    float score;
    size_t id, l, r;
};

static int by_rank(const void *a, const void *b) {
    const struct rank *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->l != y->l ? (x->l < y->l ? -1 : 1)
                        : (x->r > y->r) - (x->r < y->r);
}

/* The id of text s in the vocabulary (text()), or -1. */
static long id_of(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 3 || strspn(s, "abcdefghijklmnopqrstuvwxyz") != n)
        return -1;
    long i = n == 1 ? 677 : n == 2 ? 1 : 703, v = 0;
    for (size_t k = 0; k < n; k++)
        v = v * 26 + (s[k] - 'a');
    i += v;
    return i < N ? i : -1;
}

/* tokenizer.json's merges of the vocabulary scored by score, against
 * every split into two tokens ranked by by_rank. */
static void merges_ranked(float (*score)(size_t)) {
    size_t none[2] = {0, 0};
    struct craft c = vocab(none, score);
    gguf_ctx *ctx;
    struct gguf_error err = {0};
    ck_assert_int_eq(
        gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err), GGUF_OK);
    struct gguf_buf b = {0};
    ck_assert_int_eq(
        voc_render_known(ctx, VOC_HF_TOKENIZER, 0, 1 << 24, &b, &err), GGUF_OK);
    ck_assert_int_eq(gguf_buf_add(&b, "", 1), GGUF_OK);
    struct rank *want = calloc(3 * N, sizeof *want);
    size_t n = 0;
    char s[16], l[16];
    for (size_t i = 1; i < N; i++) {
        text(i, s);
        for (size_t k = 1; k < strlen(s); k++) {
            memcpy(l, s, k), l[k] = 0;
            want[n++] = (struct rank){score(i), i, (size_t)id_of(l),
                                      (size_t)id_of(s + k)};
        }
    }
    qsort(want, n, sizeof *want, by_rank);
    const char *p = strstr((const char *)b.p, "\"merges\":[");
    ck_assert_ptr_nonnull(p);
    p += strlen("\"merges\":[");
    for (size_t k = 0; k < n; k++) {
        char line[64], a[16], z[16];
        text(want[k].l, a);
        text(want[k].r, z);
        snprintf(line, sizeof line, "\n[\"%s\",\"%s\"]", a, z);
        ck_assert_msg(strncmp(p, line, strlen(line)) == 0,
                      "merge %zu: want %s, have %.30s", k, line + 1, p + 1);
        p += strlen(line) + (k + 1 < n); /* the comma */
    }
    ck_assert_msg(strncmp(p, "\n]}}", 4) == 0, "after the merges: %.30s", p);
    free(want);
    gguf_buf_free(&b);
    gguf_close(ctx);
    craft_free(&c);
}

START_TEST(merges_in_rank_order) {
    merges_ranked(falling); /* in id order: each token's run sorted */
    merges_ranked(rising);  /* against it: the whole sort */
    merges_ranked(swapped);
}
END_TEST

int main(void) {
    Suite *s = suite_create("vocabsplit");
    TCase *tc = tcase_create("split");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, first_bad_cut);
    tcase_add_test(tc, merges_in_rank_order);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
