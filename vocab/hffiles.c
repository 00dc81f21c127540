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
 * vocab.h voc_bos_id, voc_eos_id); eos_token_id a list when the metadata names an
 * end-of-turn or end-of-message token (eot_token_id, eom_token_id) other
 * than the EOS: llama.cpp ends a generation on each (its EOG tokens), and
 * a tool reading only the EOS would not (vLLM with Gemma 3, PR #30434).
 */
#include "arr.h"

#include <jansson.h>
#include <stdio.h>
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

/* The ids, in this order, that end a generation as llama.cpp reads them
 * (the EOS: its key, else llama.cpp's default for the tokenizer,
 * voc_eos_id; eot, eom: their keys; those that are no token left out),
 * each once; the number into ids (at most 3). */
static size_t eog_ids(const gguf_ctx *ctx, int64_t ids[3]) {
    static const char *const keys[] = {TOK "eot_token_id", TOK "eom_token_id"};
    struct voc_arr toks;
    size_t n = 0;
    if (!voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &toks))
        return 0;
    for (size_t k = 0; k < 3; k++) {
        int64_t id = -1;
        size_t j = 0;
        if (k == 0)
            id = voc_eos_id(ctx);
        else if (!voc_int(ctx, keys[k - 1], &id))
            continue;
        if (id < 0 || (uint64_t)id >= toks.n)
            continue;
        while (j < n && ids[j] != id)
            j++;
        if (j == n)
            ids[n++] = id;
    }
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
    int bad = 0;
    int64_t ids[3], bos;
    if (f == VOC_HF_GENCONFIG)
        return eog_ids(ctx, ids) > 0 || bos_id(ctx, &bos);
    json_t *ct = f == VOC_HF_TEMPLATE ? chat_template(ctx, &bad) : NULL;
    json_decref(ct);
    return ct != NULL;
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
    int64_t ids[3], bos;
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
                      ? "bos_token_id, and eos_token_id: the EOS, a list "
                        "with the end-of-turn and end-of-message tokens "
                        "(eot_token_id, eom_token_id) when the metadata "
                        "names them"
                      : "absent: neither the metadata nor llama.cpp's "
                        "defaults name a BOS, EOS, EOT or EOM token of the "
                        "vocabulary");
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
