/*
 * hffiles.c - hf/tokenizer_config.json, hf/special_tokens_map.json and
 * hf/README (vocab.h), JSON through libjansson.  Both JSON files name the
 * special tokens the metadata names (bos, eos, unk, sep, pad, cls, mask:
 * Hugging Face's names for them) by their text; tokenizer_config.json
 * adds add_bos_token and add_eos_token (the metadata's, else llama.cpp's
 * default: BOS for SentencePiece, none for the others, no EOS) and the
 * chat template (tokenizer.chat_template).  A text that is not valid
 * UTF-8 cannot be a JSON string: it is left out, and README says so.
 * README says, one line a file, what each file of hf/ is made from, or
 * why it is absent.
 *
 * chat_template.jinja (transformers' own file for the template since
 * 2025, tokenizer_config.json keeps its copy): tokenizer.chat_template's
 * bytes as they are, when they are UTF-8 (transformers reads the file as
 * UTF-8).  generation_config.json: bos_token_id and eos_token_id as
 * llama.cpp reads them (the keys, else its defaults for the tokenizer:
 * vocab.h voc_bos_id, voc_eos_id); eos_token_id every token llama.cpp ends
 * a generation on (its special_eog_ids: the EOS, EOT, EOM, FIM pad, rep,
 * sep, the tokens of its EOG text list, less its exceptions), the EOS
 * first: a tool reading only the EOS would not stop at the end of a turn
 * (vLLM with Gemma 3, PR #30434: its <end_of_turn> is EOG by its text).
 */
#include "arr.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK "tokenizer.ggml."

/* The special tokens into o by their Hugging Face names; the number left
 * out (not UTF-8). */
static int add_specials(const gguf_ctx *ctx, json_t *o) {
    struct voc_arr toks;
    int bad = 0;
    if (!voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &toks))
        return 0;
    for (size_t k = 0; k < voc_n_special_keys; k++) {
        const struct voc_special_key *sk = &voc_special_keys[k];
        int64_t id;
        const uint8_t *s;
        uint64_t n;
        if (!sk->hf || !voc_int(ctx, sk->key, &id) || id < 0 ||
            !voc_arr_str(&toks, (uint64_t)id, &s, &n))
            continue;
        json_t *v = json_stringn((const char *)s, (size_t)n);
        if (!v)
            bad++;
        else
            json_object_set_new(o, sk->hf, v);
    }
    return bad;
}

/* The chat template's bytes (not NUL-terminated): true and *s, *n; false
 * when the GGUF has none or not as a string. */
static bool template_bytes(const gguf_ctx *ctx, const char **s, size_t *n) {
    int64_t k = gguf_find_key(ctx, "tokenizer.chat_template",
                              strlen("tokenizer.chat_template"));
    return k >= 0 && gguf_kv_get_str(ctx, k, s, n);
}

/* The chat template as a JSON string, NULL if none; *bad when it is not
 * UTF-8. */
static json_t *chat_template(const gguf_ctx *ctx, int *bad) {
    const char *s;
    size_t n;
    if (!template_bytes(ctx, &s, &n))
        return NULL;
    json_t *v = json_stringn(s, n);
    *bad += !v;
    return v;
}

static enum gguf_status finish(json_t *o, struct gguf_buf *b) {
    return voc_json_put(b, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER, UINT64_MAX,
                        "\n");
}

enum gguf_status voc_hf_config(const gguf_ctx *ctx, bool map,
                               struct gguf_buf *b) {
    json_t *o = json_object();
    int bad = 0;
    if (!o)
        return GGUF_E_NOMEM;
    if (!map) {
        json_object_set_new(o, "tokenizer_class",
                            json_string("PreTrainedTokenizerFast"));
        json_object_set_new(o, "add_bos_token", json_boolean(voc_add_bos(ctx)));
        json_object_set_new(o, "add_eos_token", json_boolean(voc_add_eos(ctx)));
        json_object_set_new(o, "clean_up_tokenization_spaces", json_false());
    }
    bad += add_specials(ctx, o);
    json_t *ct = map ? NULL : chat_template(ctx, &bad);
    if (ct)
        json_object_set_new(o, "chat_template", ct);
    return finish(o, b);
}

/* The tokens llama.cpp ends a generation on (its special_eog_ids,
 * llama-vocab.cpp load): each with its text, whether it came by its text
 * (the EOG text list: llama.cpp's token_to_id keeps the last id of a
 * text), at most one a text of the list plus the keys' 6. */
#define EOG_MAX 48
struct eog_set {
    size_t n;
    struct {
        int64_t id;
        const uint8_t *s;
        uint64_t len;
        bool by_text;
    } e[EOG_MAX];
};

static void eog_add(struct eog_set *e, int64_t id, const uint8_t *s,
                    uint64_t len, bool by_text) {
    size_t j = 0;
    while (by_text && j < e->n &&
           !(e->e[j].by_text && e->e[j].len == len &&
             memcmp(e->e[j].s, s, len) == 0))
        j++;
    if (!by_text || j == e->n) {
        if (e->n == EOG_MAX) /* not reached: the lists are shorter */
            return;
        j = e->n++;
    }
    e->e[j].id = id, e->e[j].s = s, e->e[j].len = len;
    e->e[j].by_text = by_text;
}

/* Whether a token of e has text t: true and *last the largest such id. */
static bool eog_has(const struct eog_set *e, const char *t, int64_t *last) {
    bool has = false;
    for (size_t j = 0; j < e->n; j++)
        if (e->e[j].len == strlen(t) && memcmp(e->e[j].s, t, e->e[j].len) == 0)
            has = true, *last = *last > e->e[j].id ? *last : e->e[j].id;
    return has;
}

static void eog_drop(struct eog_set *e, int64_t id) {
    size_t k = 0;
    for (size_t j = 0; j < e->n; j++)
        if (e->e[j].id != id)
            e->e[k++] = e->e[j];
    e->n = k;
}

/* llama.cpp's two exceptions: <|end|> is no EOG beside <|return|> and
 * <|call|> (gpt-oss) or <|call(s)|> and <|flush|> (solar-open); </s> is
 * none beside <|tool_response> (Gemma 4). */
static void eog_except(struct eog_set *e) {
    int64_t end = -1, s = -1, x = -1;
    bool call = eog_has(e, "<|call|>", &x) || eog_has(e, "<|calls|>", &x);
    if (eog_has(e, "<|end|>", &end) && call &&
        (eog_has(e, "<|return|>", &x) || eog_has(e, "<|flush|>", &x)))
        eog_drop(e, end);
    if (eog_has(e, "<|tool_response>", &x) && eog_has(e, "</s>", &s))
        eog_drop(e, s);
}

/* Into e llama.cpp's EOG tokens: the EOS (voc_eos_id), the EOT and EOM
 * keys, the fill-in-the-middle pad, rep and sep tokens (their keys, else
 * the first token by id among their texts: llama.cpp takes the first its
 * hash map yields), every token of the EOG text list; then its
 * exceptions.  A key naming no token counts as absent, as in llama.cpp. */
static bool eog_set_of(const gguf_ctx *ctx, struct eog_set *e) {
    static const char *const keys[] = {NULL,
                                       TOK "eot_token_id",
                                       TOK "eom_token_id",
                                       TOK "fim_pad_token_id",
                                       TOK "fim_rep_token_id",
                                       TOK "fim_sep_token_id"};
    int64_t kid[6];
    struct voc_arr toks;
    const uint8_t *pos, *s;
    uint64_t len;
    e->n = 0;
    if (!voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &toks))
        return false;
    for (size_t k = 0; k < 6; k++) {
        if (k == 0)
            kid[k] = voc_eos_id(ctx);
        else if (!voc_int(ctx, keys[k], &kid[k]))
            kid[k] = -1;
        if (kid[k] < 0 || (uint64_t)kid[k] >= toks.n)
            kid[k] = -1;
    }
    const uint64_t *lens = voc_text_lens();
    int64_t last = -1; /* the largest of kid */
    for (size_t k = 0; k < 6; k++)
        last = kid[k] > last ? kid[k] : last;
    pos = toks.p;
    for (int64_t i = 0; voc_arr_next_str(&toks, &pos, &s, &len); i++) {
        const char *key;
        for (size_t j = 0; i <= last && j < 6; j++)
            if (kid[j] == i)
                eog_add(e, i, s, len, false);
        if (!voc_text_listed(lens, s, len)) /* the usual token: one test */
            continue;
        int k = voc_text_fim(s, len, &key);
        if (voc_text_eog(s, len))
            eog_add(e, i, s, len, true);
        else if (k >= 3 && kid[k] < 0)
            kid[k] = i, eog_add(e, i, s, len, false);
    }
    eog_except(e);
    return true;
}

static int cmp_id(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The ids llama.cpp ends a generation on (eog_set_of), each once: the
 * EOS first when it is one, the others by id; the number into ids. */
static size_t eog_ids(const gguf_ctx *ctx, int64_t ids[EOG_MAX]) {
    struct eog_set e;
    int64_t eos = voc_eos_id(ctx), all[EOG_MAX];
    size_t n = 0;
    if (!eog_set_of(ctx, &e))
        return 0;
    for (size_t j = 0; j < e.n; j++)
        all[j] = e.e[j].id, n += e.e[j].id == eos && n == 0;
    if (n)
        ids[0] = eos;
    qsort(all, e.n, sizeof *all, cmp_id);
    for (size_t j = 0; j < e.n; j++)
        if (all[j] != eos && (j == 0 || all[j - 1] != all[j]))
            ids[n++] = all[j];
    return n;
}

/* The BOS id as llama.cpp reads it (voc_bos_id): true and *id. */
static bool bos_id(const gguf_ctx *ctx, int64_t *id) {
    struct voc_arr toks;
    *id = voc_bos_id(ctx);
    return voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &toks) && *id >= 0 &&
           (uint64_t)*id < toks.n;
}

bool voc_hf_extra_has(const gguf_ctx *ctx, enum voc_file f) {
    int64_t ids[EOG_MAX], bos;
    const char *s;
    size_t n;
    if (f == VOC_HF_GENCONFIG)
        return bos_id(ctx, &bos) || eog_ids(ctx, ids) > 0; /* cheap first */
    return f == VOC_HF_TEMPLATE && template_bytes(ctx, &s, &n) &&
           gguf_utf8_valid((const uint8_t *)s, n);
}

enum gguf_status voc_hf_extra(const gguf_ctx *ctx, enum voc_file f,
                              struct gguf_buf *b) {
    if (!voc_hf_extra_has(ctx, f))
        return GGUF_E_NOTFOUND;
    if (f == VOC_HF_TEMPLATE) {
        const char *s;
        size_t n;
        if (!template_bytes(ctx, &s, &n))
            return GGUF_E_NOTFOUND;
        return gguf_buf_add(b, s, n);
    }
    json_t *o = json_object();
    int64_t ids[EOG_MAX], bos;
    size_t n = eog_ids(ctx, ids);
    if (!o)
        return GGUF_E_NOMEM;
    if (bos_id(ctx, &bos))
        json_object_set_new(o, "bos_token_id", json_integer(bos));
    if (n == 1)
        json_object_set_new(o, "eos_token_id", json_integer(ids[0]));
    if (n > 1) {
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(a, json_integer(ids[i]));
        json_object_set_new(o, "eos_token_id", a);
    }
    return finish(o, b);
}

/* "NAME: WHAT\n". */
static enum gguf_status line(struct gguf_buf *b, const char *name,
                             const char *what) {
    enum gguf_status st = gguf_buf_add(b, name, strlen(name));
    if (st == GGUF_OK)
        st = gguf_buf_add(b, ": ", 2);
    if (st == GGUF_OK)
        st = gguf_buf_add(b, what, strlen(what));
    return st == GGUF_OK ? gguf_buf_add(b, "\n", 1) : st;
}

/* The lines of chat_template.jinja and generation_config.json. */
static enum gguf_status extra_readme(const gguf_ctx *ctx, struct gguf_buf *b) {
    int64_t k = gguf_find_key(ctx, "tokenizer.chat_template",
                              strlen("tokenizer.chat_template"));
    enum gguf_status st =
        line(b, "chat_template.jinja",
             voc_hf_extra_has(ctx, VOC_HF_TEMPLATE)
                 ? "tokenizer.chat_template as it is"
             : k < 0 ? "absent: the model has no tokenizer.chat_template"
                     : "absent: tokenizer.chat_template is not a string of "
                       "valid UTF-8");
    if (st == GGUF_OK)
        st = line(b, "generation_config.json",
                  voc_hf_extra_has(ctx, VOC_HF_GENCONFIG)
                      ? "bos_token_id, and eos_token_id: every token "
                        "llama.cpp ends a generation on (the EOS first; "
                        "eot, eom, fim pad/rep/sep, the end texts it knows)"
                      : "absent: llama.cpp names no BOS and ends a "
                        "generation on no token of the vocabulary");
    return st;
}

enum gguf_status voc_hf_readme(const gguf_ctx *ctx, bool has_tok,
                               struct gguf_buf *b) {
    char why[256], text[320];
    const char *no = has_tok ? NULL : voc_hf_reason(ctx, why, sizeof why);
    enum voc_hf kind = voc_hf_kind(ctx);
    struct voc_arr a;
    bool toks = voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &a);
    int bad = 0;
    json_t *probe = json_object();
    if (probe) {
        bad = add_specials(ctx, probe);
        json_t *ct = chat_template(ctx, &bad);
        json_decref(ct);
        json_decref(probe);
    }
    if (no)
        snprintf(text, sizeof text, "absent: %s", no);
    else
        snprintf(text, sizeof text, "%s",
                 kind == VOC_HF_SPM
                     ? "SentencePiece (llama) as BPE with byte fallback, "
                       "merges made from tokenizer.ggml.scores"
                 : kind == VOC_HF_WPM
                     ? "WordPiece (bert) with llama.cpp's normalization, "
                       "the pieces' ## prefixes back"
                 : kind == VOC_HF_RWKV
                     ? "RWKV's longest match over the unescaped token "
                       "bytes as WordPiece over ByteLevel characters "
                       "(no split, no prefix, no length limit; exact ids, "
                       "but time cubic in a text's length)"
                 : kind == VOC_HF_UGM
                     ? "Unigram (t5) over the pieces and scores, "
                       "tokenizer.ggml.precompiled_charsmap as its "
                       "normalizer"
                 : kind == VOC_HF_UTF8_BPE
                     ? "BPE over the UTF-8 text with spaces as U+2581 and "
                       "byte fallback, llama.cpp's pre-tokenizer as Split, "
                       "tokenizer.ggml.merges as they are"
                     : "byte-level BPE (gpt2), llama.cpp's pre-tokenizer "
                       "of tokenizer.ggml.pre as Split expressions, "
                       "tokenizer.ggml.merges as they are");
    enum gguf_status st = line(b, "tokenizer.json", text);
    const char *cfg = !toks ? "absent: the model has no tokenizer.ggml.tokens"
                      : bad ? "the special tokens and chat template, but "
                              "those not valid UTF-8 (left out)"
                            : "the special tokens, add_bos/add_eos and the "
                              "chat template of the metadata";
    if (st == GGUF_OK)
        st = line(b, "tokenizer_config.json", cfg);
    if (st == GGUF_OK)
        st = line(b, "special_tokens_map.json",
                  toks ? "the special tokens of the metadata"
                       : "absent: the model has no tokenizer.ggml.tokens");
    const char *cno = voc_hf_config_reason(ctx, why, sizeof why);
    if (cno)
        snprintf(text, sizeof text, "absent: %s", cno);
    if (st == GGUF_OK)
        st = line(b, "config.json",
                  cno ? text
                      : "the hyperparameters of general.architecture, "
                        "named as transformers names them");
    return st == GGUF_OK ? extra_readme(ctx, b) : st;
}
