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

/* The chat template as a JSON string, NULL if none; *bad when it is not
 * UTF-8. */
static json_t *chat_template(const gguf_ctx *ctx, int *bad) {
    int64_t k = gguf_find_key(ctx, "tokenizer.chat_template",
                              strlen("tokenizer.chat_template"));
    const char *s;
    size_t n;
    if (k < 0 || !gguf_kv_get_str(ctx, k, &s, &n))
        return NULL;
    json_t *v = json_stringn(s, n);
    *bad += !v;
    return v;
}

static enum gguf_status finish(json_t *o, struct gguf_buf *b) {
    size_t mark = b->len;
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s)
        return GGUF_E_NOMEM;
    enum gguf_status st = gguf_buf_add(b, s, strlen(s));
    free(s);
    if (st == GGUF_OK)
        st = gguf_buf_add(b, "\n", 1);
    if (st != GGUF_OK)
        b->len = mark;
    return st;
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

enum gguf_status voc_hf_readme(const gguf_ctx *ctx, struct gguf_buf *b) {
    char why[256], text[320];
    const char *no = voc_hf_reason(ctx, why, sizeof why);
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
    return st;
}
