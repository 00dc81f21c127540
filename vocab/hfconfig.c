/*
 * hfconfig.c - hf/config.json (vocab.h): the model's hyperparameters as
 * Hugging Face's transformers names them, for the architectures whose
 * mapping is known (archs[]); absent otherwise, the reason in hf/README.
 * Mistral's models are converted to GGUF as "llama" and come out as
 * LlamaForCausalLM, which is how transformers loads them too.
 *
 * The mapping, ARCH the value of general.architecture:
 *   hidden_size              ARCH.embedding_length
 *   num_hidden_layers        ARCH.block_count
 *   num_attention_heads      ARCH.attention.head_count
 *   num_key_value_heads      ARCH.attention.head_count_kv (else the heads)
 *   intermediate_size        ARCH.feed_forward_length
 *   max_position_embeddings  ARCH.context_length
 *   head_dim                 ARCH.attention.key_length
 *   rms_norm_eps             ARCH.attention.layer_norm_rms_epsilon
 *   rope_theta               ARCH.rope.freq_base (else 10000)
 *   rope_scaling             ARCH.rope.scaling.type (linear, yarn), .factor,
 *                            .original_context_length
 *   sliding_window           ARCH.attention.sliding_window
 *   vocab_size               ARCH.vocab_size, else the number of tokens
 *   bos_token_id, eos_token_id  tokenizer.ggml.*
 *   tie_word_embeddings      no output.weight tensor
 * A key the metadata lacks is left out, but the four that make the
 * shape (hidden size, layers, heads, context length): without one the
 * file is absent.  Floats are written as the shortest decimal of their
 * float32 (JSON_REAL_PRECISION(9)).
 */
#include "arr.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *arch, *cls, *type, *act;
} archs[] = {
    {"llama", "LlamaForCausalLM", "llama", "silu"},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", "silu"},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", "silu"},
    {"gemma", "GemmaForCausalLM", "gemma", "gelu_pytorch_tanh"},
    {"phi3", "Phi3ForCausalLM", "phi3", "silu"},
};

/* The integers: transformers' name, the key after "ARCH."; the first
 * four are needed (without one, no config.json). */
static const struct {
    const char *hf, *suffix;
} ints[] = {
    {"hidden_size", "embedding_length"},
    {"num_hidden_layers", "block_count"},
    {"num_attention_heads", "attention.head_count"},
    {"max_position_embeddings", "context_length"},
    {"num_key_value_heads", "attention.head_count_kv"},
    {"intermediate_size", "feed_forward_length"},
    {"head_dim", "attention.key_length"},
    {"sliding_window", "attention.sliding_window"},
};
#define N_NEEDED 4

/* The row of ctx's architecture (its name in *name), or -1. */
static int arch_of(const gguf_ctx *ctx, const char **name, size_t *len) {
    int64_t k = gguf_find_key(ctx, "general.architecture",
                              strlen("general.architecture"));
    if (k < 0 || !gguf_kv_get_str(ctx, k, name, len))
        return -1;
    for (int r = 0; r < (int)(sizeof archs / sizeof *archs); r++)
        if (strlen(archs[r].arch) == *len &&
            !memcmp(archs[r].arch, *name, *len))
            return r;
    return -1;
}

/* "ARCH.suffix" into key (n bytes). */
static const char *akey(char *key, size_t n, const char *arch,
                        const char *suffix) {
    snprintf(key, n, "%s.%s", arch, suffix);
    return key;
}

static void set_int(json_t *o, const gguf_ctx *ctx, const char *key,
                    const char *name) {
    int64_t v;
    if (voc_int(ctx, key, &v))
        json_object_set_new(o, name, json_integer((json_int_t)v));
}

/* A float32 (or float64) key as its shortest decimal, into o. */
static bool set_float(json_t *o, const gguf_ctx *ctx, const char *key,
                      const char *name) {
    int64_t k = gguf_find_key(ctx, key, strlen(key));
    size_t len;
    const uint8_t *p = k < 0 ? NULL : gguf_kv_payload(ctx, k, &len);
    enum gguf_type t = k < 0 ? GGUF_TYPE_COUNT : gguf_kv_type(ctx, k);
    struct gguf_buf b = {0};
    double d;
    if (!p || (t != GGUF_TYPE_FLOAT32 && t != GGUF_TYPE_FLOAT64) ||
        gguf_render(t, p, len, &b, NULL) != GGUF_OK ||
        gguf_buf_add(&b, "", 1) != GGUF_OK ||
        sscanf((const char *)b.p, "%lf", &d) != 1) {
        gguf_buf_free(&b);
        return false;
    }
    gguf_buf_free(&b);
    json_object_set_new(o, name, json_real(d));
    return true;
}

const char *voc_hf_config_reason(const gguf_ctx *ctx, char *buf, size_t n) {
    const char *name = "";
    size_t len = 0;
    char key[160];
    int64_t v;
    int r = arch_of(ctx, &name, &len);
    if (r < 0) {
        snprintf(buf, n,
                 "the architecture '%.*s' is not mapped (llama, qwen2, "
                 "qwen3, gemma, phi3 are)",
                 (int)(len > 64 ? 64 : len), name);
        return buf;
    }
    for (size_t i = 0; i < N_NEEDED; i++)
        if (!voc_int(ctx, akey(key, sizeof key, archs[r].arch, ints[i].suffix),
                     &v)) {
            snprintf(buf, n, "no integer %s", key);
            return buf;
        }
    return NULL;
}

/* rope_scaling, when the metadata names one. */
static void rope_scaling(json_t *o, const gguf_ctx *ctx, const char *arch) {
    char key[160];
    int64_t k = gguf_find_key(
        ctx, akey(key, sizeof key, arch, "rope.scaling.type"), strlen(key));
    const char *s;
    size_t len;
    if (k < 0 || !gguf_kv_get_str(ctx, k, &s, &len) ||
        (len == 4 && !memcmp(s, "none", 4)))
        return;
    json_t *rs = json_object();
    json_object_set_new(rs, "rope_type", json_stringn(s, len));
    json_object_set_new(rs, "type", json_stringn(s, len));
    set_float(rs, ctx, akey(key, sizeof key, arch, "rope.scaling.factor"),
              "factor");
    set_int(rs, ctx,
            akey(key, sizeof key, arch, "rope.scaling.original_context_length"),
            "original_max_position_embeddings");
    json_object_set_new(o, "rope_scaling", rs);
}

enum gguf_status voc_hf_model_config(const gguf_ctx *ctx, struct gguf_buf *b) {
    const char *name;
    size_t len;
    char key[160];
    int r = arch_of(ctx, &name, &len);
    if (r < 0)
        return GGUF_E_NOTFOUND;
    const char *a = archs[r].arch;
    json_t *o = json_object();
    json_object_set_new(o, "architectures", json_pack("[s]", archs[r].cls));
    json_object_set_new(o, "model_type", json_string(archs[r].type));
    json_object_set_new(o, "hidden_act", json_string(archs[r].act));
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        set_int(o, ctx, akey(key, sizeof key, a, ints[i].suffix), ints[i].hf);
    if (!json_object_get(o, "num_key_value_heads"))
        json_object_set(o, "num_key_value_heads",
                        json_object_get(o, "num_attention_heads"));
    set_float(o, ctx,
              akey(key, sizeof key, a, "attention.layer_norm_rms_epsilon"),
              "rms_norm_eps");
    if (!set_float(o, ctx, akey(key, sizeof key, a, "rope.freq_base"),
                   "rope_theta"))
        json_object_set_new(o, "rope_theta", json_real(10000.0));
    rope_scaling(o, ctx, a);
    struct voc_arr toks;
    set_int(o, ctx, akey(key, sizeof key, a, "vocab_size"), "vocab_size");
    if (!json_object_get(o, "vocab_size") &&
        voc_arr_of(ctx, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks))
        json_object_set_new(o, "vocab_size", json_integer((json_int_t)toks.n));
    set_int(o, ctx, "tokenizer.ggml.bos_token_id", "bos_token_id");
    set_int(o, ctx, "tokenizer.ggml.eos_token_id", "eos_token_id");
    json_object_set_new(
        o, "tie_word_embeddings",
        json_boolean(gguf_find_tensor(ctx, "output.weight",
                                      strlen("output.weight")) < 0));
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                                JSON_REAL_PRECISION(9));
    json_decref(o);
    enum gguf_status st = s ? gguf_buf_add(b, s, strlen(s)) : GGUF_E_NOMEM;
    free(s);
    return st == GGUF_OK ? gguf_buf_add(b, "\n", 1) : st;
}
