/*
 * tsv.c - tokenizer/tokens.tsv, tokenizer/special, tokenizer/merges.txt
 * (vocab.h), plain text for grep and diff made from the metadata as it is
 * now.  Token texts are escaped as meta/ shows the elements of a string
 * array (gguf_escape_line: \\ \n \r \t and \xHH for a byte that is not
 * UTF-8), so that each is one field of one line.  The formats:
 *
 *   tokens.tsv  "id\ttype\tscore\ttext" then one line a token: its id,
 *               the name of tokenizer.ggml.token_type's value (normal,
 *               unknown, control, user_defined, unused, byte, undefined;
 *               the number for another value), the score of
 *               tokenizer.ggml.scores as meta/ prints a float32, the
 *               text.  "-" for a type or score the metadata does not
 *               hold (no such array, another element type, fewer
 *               elements): what llama.cpp assumes then is its own rule,
 *               not the model's.
 *   special     "model\tNAME" and "pre\tNAME" (tokenizer.ggml.model and
 *               .pre); then for each special token id the metadata names
 *               (voc_special_keys, below, in that order) "NAME\tID\tTEXT", or
 *               "NAME\tID" alone when ID is no token of the vocabulary;
 *               then the flags (flags[]) "NAME\ttrue" or "NAME\tfalse".
 *               A key of the wrong type: "NAME\tnot an integer (TYPE)" or
 *               "NAME\tnot a bool (TYPE)".
 *   merges.txt  "#version: 0.2" (the first line of Hugging Face's
 *               merges.txt), then tokenizer.ggml.merges, one a line.
 */
#include "arr.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define TOK "tokenizer.ggml."

const struct voc_special_key voc_special_keys[] = {
    {"bos", "bos_token", TOK "bos_token_id"},
    {"eos", "eos_token", TOK "eos_token_id"},
    {"eot", NULL, TOK "eot_token_id"},
    {"eom", NULL, TOK "eom_token_id"},
    {"unk", "unk_token", TOK "unknown_token_id"},
    {"sep", "sep_token", TOK "seperator_token_id"},
    {"pad", "pad_token", TOK "padding_token_id"},
    {"cls", "cls_token", TOK "cls_token_id"},
    {"mask", "mask_token", TOK "mask_token_id"},
    {"fim_pre", NULL, TOK "fim_pre_token_id"},
    {"fim_suf", NULL, TOK "fim_suf_token_id"},
    {"fim_mid", NULL, TOK "fim_mid_token_id"},
    {"fim_pad", NULL, TOK "fim_pad_token_id"},
    {"fim_rep", NULL, TOK "fim_rep_token_id"},
    {"fim_sep", NULL, TOK "fim_sep_token_id"},
    {"prefix", NULL, TOK "prefix_token_id"},
    {"suffix", NULL, TOK "suffix_token_id"},
    {"middle", NULL, TOK "middle_token_id"},
};
const size_t voc_n_special_keys =
    sizeof voc_special_keys / sizeof *voc_special_keys;

static const struct {
    const char *name, *key;
} flags[] = {
    {"add_bos", TOK "add_bos_token"},
    {"add_eos", TOK "add_eos_token"},
    {"add_sep", TOK "add_sep_token"},
    {"add_space_prefix", TOK "add_space_prefix"},
    {"remove_extra_whitespaces", TOK "remove_extra_whitespaces"},
};

/* llama.cpp's enum llama_token_type, by value. */
static const char *const type_names[] = {"undefined", "normal",       "unknown",
                                         "control",   "user_defined", "unused",
                                         "byte"};

static enum gguf_status add(struct gguf_buf *b, const char *s) {
    return gguf_buf_add(b, s, strlen(s));
}

/* One tokens.tsv line of token i (text s, len bytes). */
static enum gguf_status token_line(uint64_t i, const uint8_t *s, uint64_t len,
                                   const struct voc_arr *types,
                                   const struct voc_arr *scores,
                                   struct gguf_buf *b, struct gguf_error *err) {
    char num[64];
    uint32_t v;
    enum gguf_status st;
    snprintf(num, sizeof num, "%" PRIu64 "\t", i);
    if ((st = add(b, num)) != GGUF_OK)
        return st;
    if (types && voc_arr_u32(types, i, &v)) {
        if ((int32_t)v >= 0 && (int32_t)v < 7)
            st = add(b, type_names[v]);
        else
            snprintf(num, sizeof num, "%" PRId32, (int32_t)v), st = add(b, num);
    } else {
        st = add(b, "-");
    }
    if (st == GGUF_OK && (st = add(b, "\t")) == GGUF_OK) {
        if (scores && voc_arr_u32(scores, i, &v)) {
            uint8_t raw[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                              (uint8_t)(v >> 24)};
            if ((st = gguf_render(GGUF_TYPE_FLOAT32, raw, 4, b, err)) ==
                GGUF_OK)
                b->p[b->len - 1] = '\t'; /* its "\n" */
        } else {
            st = add(b, "-\t");
        }
    }
    if (st == GGUF_OK)
        st = gguf_escape_line(s, len, b);
    return st == GGUF_OK ? gguf_buf_add(b, "\n", 1) : st;
}

static enum gguf_status too_big(const char *file, uint64_t max,
                                struct gguf_error *err) {
    return gguf_fail(err, GGUF_E_RANGE,
                     "tokenizer/%s would pass %" PRIu64 " bytes", file, max);
}

/* The types and scores a tokens.tsv line shows (NULL: absent). */
struct cols {
    const struct voc_arr *types, *scores;
};

static enum gguf_status tsv_line(uint64_t i, const uint8_t *s, uint64_t len,
                                 const void *u, struct gguf_buf *b,
                                 struct gguf_error *err) {
    const struct cols *c = u;
    return token_line(i, s, len, c->types, c->scores, b, err);
}

static enum gguf_status merge_line(uint64_t i, const uint8_t *s, uint64_t len,
                                   const void *u, struct gguf_buf *b,
                                   struct gguf_error *err) {
    (void)i, (void)u, (void)err;
    enum gguf_status st = gguf_escape_line(s, len, b);
    return st == GGUF_OK ? gguf_buf_add(b, "\n", 1) : st;
}

/* Appends head, then line's text of each string element of key's array,
 * within max bytes of the file from mark. */
static enum gguf_status each_line(
    const gguf_ctx *ctx, const char *key, const char *file, const char *head,
    enum gguf_status (*line)(uint64_t, const uint8_t *, uint64_t, const void *,
                             struct gguf_buf *, struct gguf_error *),
    const void *u, uint64_t max, struct gguf_buf *b, size_t mark,
    struct gguf_error *err) {
    struct voc_arr a;
    if (!voc_arr_of(ctx, key, GGUF_TYPE_STRING, &a))
        return gguf_fail(err, GGUF_E_NOTFOUND, "no %s", key);
    enum gguf_status st = add(b, head);
    const uint8_t *pos = a.p, *s;
    uint64_t len;
    for (uint64_t i = 0; st == GGUF_OK && i < a.n; i++) {
        if (!voc_arr_next_str(&a, &pos, &s, &len))
            return gguf_fail(err, GGUF_E_FORMAT,
                             "%s: element %" PRIu64 " passes the value's end",
                             key, i);
        st = line(i, s, len, u, b, err);
        if (b->len - mark > max)
            return too_big(file, max, err);
    }
    return st;
}

static enum gguf_status tokens_tsv(const gguf_ctx *ctx, uint64_t max,
                                   struct gguf_buf *b, size_t mark,
                                   struct gguf_error *err) {
    struct voc_arr types, scores;
    struct cols c = {NULL, NULL};
    if (voc_arr_of(ctx, TOK "token_type", GGUF_TYPE_INT32, &types))
        c.types = &types;
    if (voc_arr_of(ctx, TOK "scores", GGUF_TYPE_FLOAT32, &scores))
        c.scores = &scores;
    return each_line(ctx, TOK "tokens", "tokens.tsv", "id\ttype\tscore\ttext\n",
                     tsv_line, &c, max, b, mark, err);
}

/* "NAME\tID[\tTEXT]\n" of one special id key, if present. */
static enum gguf_status special_id(const gguf_ctx *ctx, const char *name,
                                   const char *key, const struct voc_arr *toks,
                                   struct gguf_buf *b) {
    int64_t k = gguf_find_key(ctx, key, strlen(key)), id;
    char line[128], tb[32];
    const uint8_t *s;
    uint64_t len;
    enum gguf_status st;
    if (k < 0)
        return GGUF_OK;
    if (!gguf_kv_get_i64(ctx, k, &id)) {
        snprintf(line, sizeof line, "%s\tnot an integer (%s)\n", name,
                 gguf_kv_type_str(ctx, k, tb, sizeof tb));
        return add(b, line);
    }
    snprintf(line, sizeof line, "%s\t%" PRId64, name, id);
    if ((st = add(b, line)) != GGUF_OK)
        return st;
    if (id >= 0 && voc_arr_str(toks, (uint64_t)id, &s, &len) &&
        ((st = add(b, "\t")) != GGUF_OK ||
         (st = gguf_escape_line(s, len, b)) != GGUF_OK))
        return st;
    return add(b, "\n");
}

/* "NAME\tVALUE\n" of a string or bool key, if present. */
static enum gguf_status special_value(const gguf_ctx *ctx, const char *name,
                                      const char *key, enum gguf_type want,
                                      struct gguf_buf *b) {
    int64_t k = gguf_find_key(ctx, key, strlen(key));
    char tb[32];
    size_t len;
    enum gguf_status st;
    if (k < 0)
        return GGUF_OK;
    if ((st = add(b, name)) != GGUF_OK || (st = add(b, "\t")) != GGUF_OK)
        return st;
    const uint8_t *p = gguf_kv_payload(ctx, k, &len);
    if (gguf_kv_type(ctx, k) != want || !p) {
        if ((st = add(b, want == GGUF_TYPE_BOOL ? "not a bool ("
                                                : "not a string (")) !=
                GGUF_OK ||
            (st = add(b, gguf_kv_type_str(ctx, k, tb, sizeof tb))) != GGUF_OK)
            return st;
        return add(b, ")\n");
    }
    if (want == GGUF_TYPE_BOOL)
        return add(b, len && p[0] ? "true\n" : "false\n");
    const char *s;
    size_t sl;
    if (!gguf_kv_get_str(ctx, k, &s, &sl))
        return GGUF_E_FORMAT;
    if ((st = gguf_escape_line((const uint8_t *)s, sl, b)) != GGUF_OK)
        return st;
    return add(b, "\n");
}

static enum gguf_status special(const gguf_ctx *ctx, struct gguf_buf *b,
                                struct gguf_error *err) {
    struct voc_arr toks;
    if (!voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &toks))
        return gguf_fail(err, GGUF_E_NOTFOUND, "no " TOK "tokens");
    enum gguf_status st =
        special_value(ctx, "model", TOK "model", GGUF_TYPE_STRING, b);
    if (st == GGUF_OK)
        st = special_value(ctx, "pre", TOK "pre", GGUF_TYPE_STRING, b);
    for (size_t k = 0; st == GGUF_OK && k < voc_n_special_keys; k++)
        st = special_id(ctx, voc_special_keys[k].name, voc_special_keys[k].key,
                        &toks, b);
    for (size_t k = 0; st == GGUF_OK && k < sizeof flags / sizeof *flags; k++)
        st = special_value(ctx, flags[k].name, flags[k].key, GGUF_TYPE_BOOL, b);
    return st;
}

static enum gguf_status merges(const gguf_ctx *ctx, uint64_t max,
                               struct gguf_buf *b, size_t mark,
                               struct gguf_error *err) {
    struct voc_arr a; /* merges.txt needs tokens too */
    if (!voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &a))
        return gguf_fail(err, GGUF_E_NOTFOUND, "no " TOK "tokens");
    return each_line(ctx, TOK "merges", "merges.txt", "#version: 0.2\n",
                     merge_line, NULL, max, b, mark, err);
}

enum gguf_status voc_tokens_tsv(const gguf_ctx *ctx, uint64_t max,
                                struct gguf_buf *b, struct gguf_error *err) {
    return tokens_tsv(ctx, max, b, b->len, err);
}

enum gguf_status voc_special(const gguf_ctx *ctx, struct gguf_buf *b,
                             struct gguf_error *err) {
    return special(ctx, b, err);
}

enum gguf_status voc_merges_txt(const gguf_ctx *ctx, uint64_t max,
                                struct gguf_buf *b, struct gguf_error *err) {
    return merges(ctx, max, b, b->len, err);
}
