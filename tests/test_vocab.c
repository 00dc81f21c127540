/*
 * test_vocab.c - vocab/'s JSON bytes against libjansson's (issue 36):
 * hf/tokenizer.json writes its vocabulary, merges and added tokens with
 * its own string writer (vocab/jsonstr.c) where it once had jansson dump
 * each one; the file must stay the same bytes.  The oracle is jansson
 * itself (json_dumpb of the same text, JSON_COMPACT), never the code
 * under test: every escape class (quote, backslash, \b \f \n \r \t, the
 * other control bytes, NUL, DEL, U+2028, U+2029, 4-byte characters),
 * every byte alone, texts that are not UTF-8 (refused by both: overlong
 * forms, surrogates, past U+10FFFF, stray and missing continuation
 * bytes), random texts of those bytes, and a whole SentencePiece
 * tokenizer.json whose tokens hold them.
 */
#include "arr.h" /* vocab/'s internal voc_json_str */

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "craft.h"

/* jansson's JSON of text s (n bytes) into out (NUL-ended), as hfjson.c
 * dumped it: its length, 0 when jansson refuses it. */
static size_t jansson_of(const uint8_t *s, size_t n, char *out, size_t cap) {
    json_t *v = json_stringn_nocheck((const char *)s, n);
    ck_assert_ptr_nonnull(v);
    size_t k = json_dumpb(v, out, cap, JSON_ENCODE_ANY | JSON_COMPACT);
    json_decref(v);
    ck_assert_uint_lt(k, cap);
    out[k] = 0;
    return k;
}

/* voc_json_str and jansson agree on s: the same bytes, or both refuse
 * (and the buffer is left as it was). */
static void agree(const uint8_t *s, size_t n) {
    char want[1024];
    size_t k = jansson_of(s, n, want, sizeof want);
    struct gguf_buf b = {0};
    ck_assert_int_eq(gguf_buf_add(&b, "x", 1), GGUF_OK);
    enum gguf_status st = voc_json_str(&b, s, n);
    char hex[128] = {0};
    for (size_t i = 0; i < n && i < 40; i++)
        snprintf(hex + 3 * i, 4, "%02x ", s[i]);
    if (!k) {
        ck_assert_msg(st == GGUF_E_INVAL,
                      "jansson refuses [%s], vocab writes it", hex);
        ck_assert_uint_eq(b.len, 1);
    } else {
        ck_assert_msg(st == GGUF_OK, "jansson writes [%s], vocab refuses it",
                      hex);
        ck_assert_msg(b.len - 1 == k && memcmp(b.p + 1, want, k) == 0,
                      "[%s]: jansson %s, vocab %.*s", hex, want,
                      (int)(b.len - 1), (const char *)b.p + 1);
        /* a text jansson takes is UTF-8: the unchecked writer's too */
        b.len = 1;
        ck_assert_int_eq(voc_json_str_utf8(&b, s, n), GGUF_OK);
        ck_assert_msg(b.len - 1 == k && memcmp(b.p + 1, want, k) == 0,
                      "[%s]: jansson %s, vocab (utf8) %.*s", hex, want,
                      (int)(b.len - 1), (const char *)b.p + 1);
        /* and its length, known before it is written (hfjson.c's parts) */
        ck_assert_msg(voc_json_str_len(s, n) == k,
                      "[%s]: jansson %zu bytes, voc_json_str_len %llu", hex, k,
                      (unsigned long long)voc_json_str_len(s, n));
    }
    gguf_buf_free(&b);
}

START_TEST(every_byte) {
    for (unsigned c = 0; c < 256; c++) {
        uint8_t s[3] = {'a', (uint8_t)c, 'b'};
        agree(s + 1, 1);
        agree(s, 3);
    }
}
END_TEST

/* Every ASCII byte and a character of 2, 3 and 4 bytes at every place
 * of texts of 1 to 26 bytes: the writers read 8 bytes at a time while
 * none needs an escape, so each place of a word and past it counts. */
START_TEST(escapes_everywhere) {
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x96\x81",
                                        "\xf0\x9f\x98\x80"};
    uint8_t s[40];
    for (size_t n = 1; n <= 26; n++)
        for (size_t at = 0; at < n; at++) {
            for (unsigned c = 0; c < 0x80 + 3; c++) {
                memset(s, 'x', n);
                size_t k = 1;
                if (c < 0x80)
                    s[at] = (uint8_t)c;
                else if (at + (k = strlen(chars[c - 0x80])) <= n)
                    memcpy(s + at, chars[c - 0x80], k);
                else
                    continue;
                agree(s, n);
            }
        }
}
END_TEST

START_TEST(escape_classes) {
    static const char *const texts[] = {
        "",
        "plain ascii / slash",
        "\"quoted\" \\back\\slash",
        "\b\f\n\r\t",
        "\x01\x02\x1b\x1f \x7f",
        "\xe2\x80\xa8 U+2028 \xe2\x80\xa9 U+2029",
        "\xe2\x96\x81hello \xc3\xa9 \xe4\xb8\x80 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf",
        "\xef\xbb\xbf BOM \xef\xbf\xbd FFFD \xef\xbf\xbf",
        "\xc0\x80",         /* overlong NUL */
        "\xc1\xbf",         /* overlong */
        "\xe0\x80\x80",     /* overlong */
        "\xe0\x9f\xbf",     /* overlong */
        "\xf0\x80\x80\x80", /* overlong */
        "\xf0\x8f\xbf\xbf", /* overlong */
        "\xed\xa0\x80",     /* a surrogate */
        "\xed\xbf\xbf",     /* a surrogate */
        "\xf4\x90\x80\x80", /* past U+10FFFF */
        "\xf5\x80\x80\x80",
        "\xff",
        "\xe2\x82",  /* cut short */
        "a\xe2\x82", /* cut short at the end */
        "\x80",      /* a stray continuation byte */
        "\xc3\xa9\x80",
        "\xe2\x28\xa1", /* a continuation byte missing */
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        agree((const uint8_t *)texts[i], strlen(texts[i]));
    agree((const uint8_t *)"a\0b", 3); /* NUL inside */
}
END_TEST

START_TEST(random_texts) {
    static const uint8_t pick[] = {
        0x00, 0x01, 0x08, 0x09, 0x0a, 0x0c, 0x0d, 0x1f, 0x20, '"',  '\\', '/',
        'a',  'Z',  0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xa8, 0xbf, 0xc0, 0xc1,
        0xc2, 0xdf, 0xe0, 0xe2, 0xed, 0xee, 0xef, 0xf0, 0xf3, 0xf4, 0xf5, 0xff};
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int t = 0; t < 200000; t++) {
        uint8_t s[12];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift, fixed seed */
        size_t n = x % 13;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            s[i] = pick[x % sizeof pick];
        }
        agree(s, n);
    }
}
END_TEST

/* A SentencePiece vocabulary whose tokens hold the escape classes: its
 * hf/tokenizer.json's added tokens, vocabulary and merges are the lines
 * jansson writes for them. */
static const char *const toks[] = {"<unk>",
                                   "<s>",
                                   "</s>",
                                   "<c\"\\\x1b>", /* a control token */
                                   "\"",
                                   "\\",
                                   "\n",
                                   "\x01",
                                   "\x7f",
                                   "\xe2\x80\xa8",
                                   "\xf0\x9f\x98\x80",
                                   "\"\\",
                                   "\n\x01",
                                   "\xe2\x80\xa8\xf0\x9f\x98\x80"};
#define NT (sizeof toks / sizeof *toks)

static struct craft gguf_of_toks(void) {
    struct craft c = {0};
    craft_header(&c, 3, 0, 4);
    craft_kv_str(&c, "tokenizer.ggml.model", "llama");
    craft_kv_head(&c, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
    craft_u32(&c, GGUF_TYPE_STRING);
    craft_u64(&c, NT);
    for (size_t i = 0; i < NT; i++)
        craft_str(&c, toks[i]);
    craft_kv_head(&c, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY);
    craft_u32(&c, GGUF_TYPE_FLOAT32);
    craft_u64(&c, NT);
    for (size_t i = 0; i < NT; i++)
        craft_f32(&c, -(float)i);
    craft_kv_head(&c, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY);
    craft_u32(&c, GGUF_TYPE_INT32);
    craft_u64(&c, NT);
    for (size_t i = 0; i < NT; i++)
        craft_u32(&c, i == 0 ? 2 : i < 4 ? 3 : 1);
    return c;
}

/* line must be in doc: its bytes between two line breaks. */
static void has_line(const char *doc, const char *line) {
    size_t n = strlen(line);
    for (const char *p = doc; (p = strstr(p, line)) != NULL; p++)
        if ((p == doc || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0))
            return;
    ck_abort_msg("tokenizer.json has no line %s", line);
}

/* The file made after its check (present: voc_present's bits), or
 * without (0: its check's walk makes the merges too, voc_hf_check). */
static void tokenizer_json(bool checked) {
    struct craft c = gguf_of_toks();
    gguf_ctx *ctx;
    struct gguf_error err = {0};
    ck_assert_int_eq(
        gguf_open_mem(&ctx, craft_data(&c), craft_len(&c), 0, &err), GGUF_OK);
    uint32_t m = voc_present(ctx);
    char why[256];
    const char *no = voc_hf_reason(ctx, why, sizeof why);
    ck_assert_msg(m >> VOC_HF_TOKENIZER & 1, "no tokenizer.json: %s",
                  no ? no : "?");
    struct gguf_buf b = {0};
    ck_assert_int_eq(voc_render_known(ctx, VOC_HF_TOKENIZER, checked ? m : 0,
                                      1 << 20, &b, &err),
                     GGUF_OK);
    ck_assert_int_eq(gguf_buf_add(&b, "", 1), GGUF_OK);
    const char *doc = (const char *)b.p;
    char s[256], t[256], line[600];
    for (size_t i = 0; i < NT; i++) { /* "text":id, a line each */
        jansson_of((const uint8_t *)toks[i], strlen(toks[i]), s, sizeof s);
        snprintf(line, sizeof line, "%s:%zu%s", s, i, i + 1 < NT ? "," : "},");
        has_line(doc, line);
    }
    /* the control token, as jansson dumps the object */
    json_t *o = json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", 3, "content",
                          toks[3], "single_word", 0, "lstrip", 0, "rstrip", 0,
                          "normalized", 0, "special", 1);
    char *d = json_dumps(o, JSON_COMPACT);
    snprintf(line, sizeof line, "%s],", d); /* the last added token */
    has_line(doc, line);
    free(d);
    json_decref(o);
    /* the merges: each two-character token of its two (by score) */
    static const int pairs[3][2] = {{4, 5}, {6, 7}, {9, 10}};
    for (int k = 0; k < 3; k++) {
        const char *l = toks[pairs[k][0]], *r = toks[pairs[k][1]];
        jansson_of((const uint8_t *)l, strlen(l), s, sizeof s);
        jansson_of((const uint8_t *)r, strlen(r), t, sizeof t);
        snprintf(line, sizeof line, "[%s,%s]%s", s, t, k < 2 ? "," : "");
        has_line(doc, line);
    }
    gguf_buf_free(&b);
    gguf_close(ctx);
    craft_free(&c);
}

START_TEST(tokenizer_json_checked) {
    tokenizer_json(true);
}
END_TEST

START_TEST(tokenizer_json_unchecked) {
    tokenizer_json(false);
}
END_TEST

int main(void) {
    Suite *s = suite_create("vocab");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, every_byte);
    tcase_add_test(tc, escapes_everywhere);
    tcase_add_test(tc, escape_classes);
    tcase_add_test(tc, random_texts);
    tcase_add_test(tc, tokenizer_json_checked);
    tcase_add_test(tc, tokenizer_json_unchecked);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
