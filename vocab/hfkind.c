/*
 * hfkind.c - which tokenizer a model has (vocab.h: voc_hf_kind: its
 * model and, for BPE, its pre-tokenizer, hfpre.c) and the BOS and EOS as
 * llama.cpp reads them (voc_add_bos, voc_add_eos, voc_bos_id,
 * voc_eos_id; its defaults where the metadata says nothing).  Below
 * hfcheck.c and the makers of hf/'s files, which all ask it (no file
 * circle: dev/layers).
 */
#include "arr.h"

#include <string.h>

#define TOK "tokenizer.ggml."

static bool str_is(const gguf_ctx *ctx, const char *key, const char *want) {
    int64_t k = gguf_find_key(ctx, key, strlen(key));
    const char *s;
    size_t n;
    return k >= 0 && gguf_kv_get_str(ctx, k, &s, &n) && n == strlen(want) &&
           memcmp(s, want, n) == 0;
}

/* The tokenizer's kind, and *pre the pre-tokenizer of a BPE model
 * (gpt2, or gemma4), else NULL. */
static enum voc_hf kind_of(const gguf_ctx *ctx, const struct voc_pre **pre) {
    const char *why;
    *pre = NULL;
    if (str_is(ctx, TOK "model", "llama"))
        return VOC_HF_SPM;
    if (str_is(ctx, TOK "model", "bert"))
        return VOC_HF_WPM; /* hfmodels.c */
    if (str_is(ctx, TOK "model", "t5"))
        return VOC_HF_UGM; /* hfmodels.c */
    if (str_is(ctx, TOK "model", "rwkv"))
        return VOC_HF_RWKV; /* hfmodels.c */
    if ((str_is(ctx, TOK "model", "gpt2") ||
         str_is(ctx, TOK "model", "gemma4")) &&
        (*pre = voc_hf_pre(ctx, &why)) != NULL)
        return (*pre)->utf8 ? VOC_HF_UTF8_BPE : VOC_HF_BYTE_BPE;
    return VOC_HF_NONE;
}

enum voc_hf voc_hf_kind(const gguf_ctx *ctx) {
    const struct voc_pre *pre;
    return kind_of(ctx, &pre);
}

bool voc_add_bos(const gguf_ctx *ctx) {
    const struct voc_pre *pre;
    enum voc_hf kind = kind_of(ctx, &pre);
    if (pre && pre->force_bos)
        return true;
    return voc_flag(ctx, TOK "add_bos_token",
                    pre ? pre->add_bos
                        : kind == VOC_HF_SPM || kind == VOC_HF_WPM);
}

bool voc_add_eos(const gguf_ctx *ctx) {
    return voc_flag(ctx, TOK "add_eos_token", voc_hf_kind(ctx) == VOC_HF_UGM);
}

/* Key key's id, else llama.cpp's default dflt; -1 past the vocabulary. */
static int64_t id_or(const gguf_ctx *ctx, const char *key, int64_t dflt) {
    struct voc_arr toks;
    int64_t id;
    if (!voc_int(ctx, key, &id))
        id = dflt;
    if (!voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &toks) || id < 0 ||
        (uint64_t)id >= toks.n)
        return -1;
    return id;
}

/* llama.cpp's default BOS (eos false) or EOS id: SentencePiece 1 and 2,
 * the model gpt2 11 and 11 (chatglm's pre-tokenizer no BOS), gemma4
 * none. */
static int64_t default_id(const gguf_ctx *ctx, bool eos) {
    const struct voc_pre *pre;
    enum voc_hf kind = kind_of(ctx, &pre);
    if (kind == VOC_HF_SPM)
        return eos ? 2 : 1;
    if (kind == VOC_HF_WPM) /* [CLS]; no EOS */
        return eos ? -1 : 101;
    if (kind == VOC_HF_UGM) /* t5: no BOS */
        return eos ? 1 : -1;
    if (!pre || str_is(ctx, TOK "model", "gemma4"))
        return -1;
    return !eos && pre->no_bos ? -1 : 11;
}

int64_t voc_bos_id(const gguf_ctx *ctx) {
    return id_or(ctx, TOK "bos_token_id", default_id(ctx, false));
}

int64_t voc_eos_id(const gguf_ctx *ctx) {
    return id_or(ctx, TOK "eos_token_id", default_id(ctx, true));
}
