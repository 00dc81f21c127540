/*
 * hfconfig.c - hf/config.json (vocab.h): the model's hyperparameters as
 * Hugging Face's transformers names them, for the architectures whose
 * mapping is known (archs[], one row each: convert_hf_to_gguf.py's
 * mapping read backwards); absent otherwise, the reason in hf/README.
 * Mistral's models are converted to GGUF as "llama" and come out as
 * LlamaForCausalLM, which is how transformers loads them too.
 *
 * The mapping common to the rows, ARCH the value of general.architecture:
 *   hidden_size              ARCH.embedding_length
 *   num_hidden_layers        ARCH.block_count
 *   num_attention_heads      ARCH.attention.head_count
 *   num_key_value_heads      ARCH.attention.head_count_kv (else the heads)
 *   intermediate_size        the row's key (ARCH.feed_forward_length)
 *   max_position_embeddings  ARCH.context_length
 *   head_dim                 ARCH.attention.key_length
 *   rms_norm_eps             ARCH.attention.layer_norm_rms_epsilon (or
 *                            the row's name for layer_norm_epsilon)
 *   rope_theta               ARCH.rope.freq_base (else 10000)
 *   rope_scaling             ARCH.rope.scaling.type (linear, yarn), .factor,
 *                            .original_context_length
 *   sliding_window           ARCH.attention.sliding_window
 *   vocab_size               ARCH.vocab_size, else the number of tokens
 *   bos_token_id, eos_token_id  tokenizer.ggml.*
 *   tie_word_embeddings      no output.weight tensor
 * then the row's own fields (experts, MLA, soft-capping: its extra).  A
 * key the metadata lacks is left out, but the four that make the shape
 * (hidden size, layers, heads, context length): without one the file is
 * absent.  Floats are written as the shortest decimal of their float32
 * (JSON_REAL_PRECISION(9)).
 */
#include "arr.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct row;
/* An architecture's own fields, after the common ones (a row's extra). */
typedef void extra_fn(json_t *o, const gguf_ctx *ctx, const char *arch);
static extra_fn moe_qwen, moe_gptoss, gemma2, gemma3, deepseek2, falcon;

/* One row an architecture: general.architecture, transformers' class and
 * model_type, the activation (and the field naming it: Gemma's configs
 * name it hidden_activation), the epsilon's field and whether it is
 * ARCH.attention.layer_norm_epsilon (LayerNorm) rather than
 * layer_norm_rms_epsilon, the intermediate size's key, the extra fields. */
static const struct row {
    const char *arch, *cls, *type, *act, *act_name, *eps_name;
    bool ln;
    const char *ffn;
    extra_fn *extra;
} archs[] = {
    {"llama", "LlamaForCausalLM", "llama", "silu", "hidden_act", "rms_norm_eps",
     false, "feed_forward_length", NULL},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", "silu", "hidden_act", "rms_norm_eps",
     false, "feed_forward_length", NULL},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", "silu", "hidden_act", "rms_norm_eps",
     false, "feed_forward_length", NULL},
    {"qwen2moe", "Qwen2MoeForCausalLM", "qwen2_moe", "silu", "hidden_act",
     "rms_norm_eps", false, "feed_forward_length", moe_qwen},
    {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe", "silu", "hidden_act",
     "rms_norm_eps", false, "feed_forward_length", moe_qwen},
    {"gemma", "GemmaForCausalLM", "gemma", "gelu_pytorch_tanh", "hidden_act",
     "rms_norm_eps", false, "feed_forward_length", NULL},
    {"gemma2", "Gemma2ForCausalLM", "gemma2", "gelu_pytorch_tanh",
     "hidden_activation", "rms_norm_eps", false, "feed_forward_length", gemma2},
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text", "gelu_pytorch_tanh",
     "hidden_activation", "rms_norm_eps", false, "feed_forward_length", gemma3},
    {"phi3", "Phi3ForCausalLM", "phi3", "silu", "hidden_act", "rms_norm_eps",
     false, "feed_forward_length", NULL},
    {"deepseek2", "DeepseekV2ForCausalLM", "deepseek_v2", "silu", "hidden_act",
     "rms_norm_eps", false, "feed_forward_length", deepseek2},
    {"gpt-oss", "GptOssForCausalLM", "gpt_oss", "silu", "hidden_act",
     "rms_norm_eps", false, "expert_feed_forward_length", moe_gptoss},
    {"falcon", "FalconForCausalLM", "falcon", "gelu", "activation",
     "layer_norm_epsilon", true, NULL, falcon},
    {"starcoder2", "Starcoder2ForCausalLM", "starcoder2", "gelu_pytorch_tanh",
     "hidden_act", "norm_epsilon", true, "feed_forward_length", NULL},
};
#define N_ARCHS (sizeof archs / sizeof *archs)

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
    {"head_dim", "attention.key_length"},
    {"sliding_window", "attention.sliding_window"},
};
#define N_NEEDED 4

/* The row of ctx's architecture (its name in *name), or NULL. */
static const struct row *arch_of(const gguf_ctx *ctx, const char **name,
                                 size_t *len) {
    int64_t k = gguf_find_key(ctx, "general.architecture",
                              strlen("general.architecture"));
    if (k < 0 || !gguf_kv_get_str(ctx, k, name, len))
        return NULL;
    for (size_t r = 0; r < N_ARCHS; r++)
        if (strlen(archs[r].arch) == *len &&
            !memcmp(archs[r].arch, *name, *len))
            return &archs[r];
    return NULL;
}

/* "ARCH.suffix" into key (n bytes). */
static const char *akey(char *key, size_t n, const char *arch,
                        const char *suffix) {
    snprintf(key, n, "%s.%s", arch, suffix);
    return key;
}

/* ARCH.suffix as an integer into o's name: true when there. */
static bool aint(json_t *o, const gguf_ctx *ctx, const char *arch,
                 const char *suffix, const char *name) {
    char key[160];
    int64_t v;
    if (!voc_int(ctx, akey(key, sizeof key, arch, suffix), &v))
        return false;
    json_object_set_new(o, name, json_integer((json_int_t)v));
    return true;
}

/* A float32 (or float64) key's value as the shortest decimal of it. */
static bool get_float(const gguf_ctx *ctx, const char *key, double *d) {
    int64_t k = gguf_find_key(ctx, key, strlen(key));
    size_t len;
    const uint8_t *p = k < 0 ? NULL : gguf_kv_payload(ctx, k, &len);
    enum gguf_type t = k < 0 ? GGUF_TYPE_COUNT : gguf_kv_type(ctx, k);
    struct gguf_buf b = {0};
    bool ok = p && (t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64) &&
              gguf_render(t, p, len, &b, NULL) == GGUF_OK &&
              gguf_buf_add(&b, "", 1) == GGUF_OK &&
              sscanf((const char *)b.p, "%lf", d) == 1;
    gguf_buf_free(&b);
    return ok;
}

/* ARCH.suffix as a float into o's name: true when there. */
static bool afloat(json_t *o, const gguf_ctx *ctx, const char *arch,
                   const char *suffix, const char *name) {
    char key[160];
    double d;
    if (!get_float(ctx, akey(key, sizeof key, arch, suffix), &d))
        return false;
    json_object_set_new(o, name, json_real(d));
    return true;
}

/* Phi-3's long-context models scale RoPE by factors that the GGUF holds
 * as tensors (rope_factors_long.weight): rope_scaling would need their
 * values, and vocab/ reads metadata only. */
static bool phi3_longrope(const gguf_ctx *ctx, const struct row *r) {
    return !strcmp(r->arch, "phi3") &&
           gguf_find_tensor(ctx, "rope_factors_long.weight",
                            strlen("rope_factors_long.weight")) >= 0;
}

const char *voc_hf_config_reason(const gguf_ctx *ctx, char *buf, size_t n) {
    const char *name = "";
    size_t len = 0;
    char key[160];
    int64_t v;
    const struct row *r = arch_of(ctx, &name, &len);
    if (!r) {
        snprintf(buf, n,
                 "the architecture '%.*s' is not mapped (llama, qwen2, "
                 "qwen3, qwen2moe, qwen3moe, gemma, gemma2, gemma3, phi3, "
                 "deepseek2, gpt-oss, falcon, starcoder2 are)",
                 (int)(len > 64 ? 64 : len), name);
        return buf;
    }
    for (size_t i = 0; i < N_NEEDED; i++)
        if (!voc_int(ctx, akey(key, sizeof key, r->arch, ints[i].suffix), &v)) {
            snprintf(buf, n, "no integer %s", key);
            return buf;
        }
    if (phi3_longrope(ctx, r))
        return "phi3 with LongRoPE: transformers' rope_scaling lists the "
               "factors, which this GGUF holds as tensor data "
               "(rope_factors_long.weight), not metadata";
    return NULL;
}

/* rope_scaling, when the metadata names one (yarn's mscale_all_dim: the
 * converter writes 0.1 times it as rope.scaling.yarn_log_multiplier). */
static void rope_scaling(json_t *o, const gguf_ctx *ctx, const char *arch) {
    char key[160];
    akey(key, sizeof key, arch, "rope.scaling.type");
    /* (key made first: an argument's order of evaluation is unspecified) */
    int64_t k = gguf_find_key(ctx, key, strlen(key));
    const char *s;
    size_t len;
    double d;
    if (k < 0 || !gguf_kv_get_str(ctx, k, &s, &len) ||
        (len == 4 && !memcmp(s, "none", 4)))
        return;
    json_t *rs = json_object();
    json_object_set_new(rs, "rope_type", json_stringn(s, len));
    json_object_set_new(rs, "type", json_stringn(s, len));
    afloat(rs, ctx, arch, "rope.scaling.factor", "factor");
    aint(rs, ctx, arch, "rope.scaling.original_context_length",
         "original_max_position_embeddings");
    if (get_float(
            ctx,
            akey(key, sizeof key, arch, "rope.scaling.yarn_log_multiplier"),
            &d))
        json_object_set_new(rs, "mscale_all_dim",
                            json_real((double)(float)(d / 0.1)));
    json_object_set_new(o, "rope_scaling", rs);
}

/* Qwen's MoE models. */
static void moe_qwen(json_t *o, const gguf_ctx *ctx, const char *a) {
    aint(o, ctx, a, "expert_count", "num_experts");
    aint(o, ctx, a, "expert_used_count", "num_experts_per_tok");
    aint(o, ctx, a, "expert_feed_forward_length", "moe_intermediate_size");
    aint(o, ctx, a, "expert_shared_feed_forward_length",
         "shared_expert_intermediate_size");
}

/* gpt-oss: every layer an MoE (its intermediate_size the experts'). */
static void moe_gptoss(json_t *o, const gguf_ctx *ctx, const char *a) {
    aint(o, ctx, a, "expert_count", "num_local_experts");
    aint(o, ctx, a, "expert_used_count", "num_experts_per_tok");
}

/* The query's scale as llama.cpp applies it to Gemma 2 and 3: 1/sqrt of
 * the head size, but 1/sqrt(hidden/heads) for the 27B models (llama.cpp
 * knows them by their layers: 46 for Gemma 2, 62 for Gemma 3). */
static void query_scalar(json_t *o, int64_t layers_27b) {
    json_t *l = json_object_get(o, "num_hidden_layers");
    json_t *h = json_object_get(o, "hidden_size");
    json_t *n = json_object_get(o, "num_attention_heads");
    json_t *d = json_object_get(o, "head_dim");
    if (l && json_integer_value(l) == layers_27b && h && n &&
        json_integer_value(n) > 0)
        json_object_set_new(
            o, "query_pre_attn_scalar",
            json_integer(json_integer_value(h) / json_integer_value(n)));
    else if (d)
        json_object_set(o, "query_pre_attn_scalar", d);
}

static void gemma2(json_t *o, const gguf_ctx *ctx, const char *a) {
    afloat(o, ctx, a, "attn_logit_softcapping", "attn_logit_softcapping");
    afloat(o, ctx, a, "final_logit_softcapping", "final_logit_softcapping");
    query_scalar(o, 46);
}

/* Gemma 3: llama.cpp's fixed local RoPE base and pattern of sliding
 * layers (five in six). */
static void gemma3(json_t *o, const gguf_ctx *ctx, const char *a) {
    (void)ctx, (void)a;
    json_object_set_new(o, "rope_local_base_freq", json_real(10000.0));
    json_object_set_new(o, "sliding_window_pattern", json_integer(6));
    query_scalar(o, 62);
}

/* DeepSeek V2 and V3 (one architecture in llama.cpp; V3 has the sigmoid
 * gating, expert_gating_func 2): multi-head latent attention.  The head
 * sizes before the converter absorbed MLA are key_length_mla and
 * value_length_mla when present, else key_length and value_length. */
static void deepseek2(json_t *o, const gguf_ctx *ctx, const char *a) {
    char key[160];
    int64_t gate = 0, k, rope = 0, v;
    json_object_del(o, "head_dim");
    if (voc_int(ctx, akey(key, sizeof key, a, "expert_gating_func"), &gate) &&
        gate == 2) {
        json_object_set_new(o, "architectures",
                            json_pack("[s]", "DeepseekV3ForCausalLM"));
        json_object_set_new(o, "model_type", json_string("deepseek_v3"));
    }
    if (gate)
        json_object_set_new(o, "scoring_func",
                            json_string(gate == 2 ? "sigmoid" : "softmax"));
    aint(o, ctx, a, "attention.q_lora_rank", "q_lora_rank");
    aint(o, ctx, a, "attention.kv_lora_rank", "kv_lora_rank");
    if (aint(o, ctx, a, "rope.dimension_count", "qk_rope_head_dim"))
        rope = json_integer_value(json_object_get(o, "qk_rope_head_dim"));
    if (voc_int(ctx, akey(key, sizeof key, a, "attention.key_length_mla"),
                &k) ||
        voc_int(ctx, akey(key, sizeof key, a, "attention.key_length"), &k))
        json_object_set_new(o, "qk_nope_head_dim", json_integer(k - rope));
    if (voc_int(ctx, akey(key, sizeof key, a, "attention.value_length_mla"),
                &v) ||
        voc_int(ctx, akey(key, sizeof key, a, "attention.value_length"), &v))
        json_object_set_new(o, "v_head_dim", json_integer(v));
    aint(o, ctx, a, "expert_count", "n_routed_experts");
    aint(o, ctx, a, "expert_used_count", "num_experts_per_tok");
    aint(o, ctx, a, "expert_shared_count", "n_shared_experts");
    aint(o, ctx, a, "expert_feed_forward_length", "moe_intermediate_size");
    aint(o, ctx, a, "leading_dense_block_count", "first_k_dense_replace");
    aint(o, ctx, a, "expert_group_count", "n_group");
    aint(o, ctx, a, "expert_group_used_count", "topk_group");
    afloat(o, ctx, a, "expert_weights_scale", "routed_scaling_factor");
    json_object_set_new(
        o, "norm_topk_prob",
        json_boolean(voc_flag(
            ctx, akey(key, sizeof key, a, "expert_weights_norm"), false)));
}

/* Falcon: one K/V head is the 7B's multi-query attention; more, the
 * 40B's and 180B's new decoder architecture (the converter reads either
 * as num_kv_heads / n_head_kv). */
static void falcon(json_t *o, const gguf_ctx *ctx, const char *a) {
    (void)ctx, (void)a;
    json_int_t kv =
        json_integer_value(json_object_get(o, "num_key_value_heads"));
    json_object_del(o, "num_key_value_heads");
    json_object_set_new(o, "num_kv_heads", json_integer(kv));
    json_object_set_new(o, "multi_query", json_boolean(kv == 1));
    json_object_set_new(o, "new_decoder_architecture", json_boolean(kv > 1));
    json_object_set_new(o, "parallel_attn", json_true());
    json_object_set_new(o, "bias", json_false());
    json_object_set_new(o, "alibi", json_false());
}

/* The fields every row has: the shape, the epsilon, RoPE, the vocabulary,
 * the special ids, the tied embeddings. */
static void common(json_t *o, const gguf_ctx *ctx, const struct row *r) {
    const char *a = r->arch;
    struct voc_arr toks;
    int64_t v;
    json_object_set_new(o, "architectures", json_pack("[s]", r->cls));
    json_object_set_new(o, "model_type", json_string(r->type));
    json_object_set_new(o, r->act_name, json_string(r->act));
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        aint(o, ctx, a, ints[i].suffix, ints[i].hf);
    if (!json_object_get(o, "num_key_value_heads"))
        json_object_set(o, "num_key_value_heads",
                        json_object_get(o, "num_attention_heads"));
    if (r->ffn)
        aint(o, ctx, a, r->ffn, "intermediate_size");
    afloat(o, ctx, a,
           r->ln ? "attention.layer_norm_epsilon"
                 : "attention.layer_norm_rms_epsilon",
           r->eps_name);
    if (!afloat(o, ctx, a, "rope.freq_base", "rope_theta"))
        json_object_set_new(o, "rope_theta", json_real(10000.0));
    rope_scaling(o, ctx, a);
    if (!aint(o, ctx, a, "vocab_size", "vocab_size") &&
        voc_arr_of(ctx, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks))
        json_object_set_new(o, "vocab_size", json_integer((json_int_t)toks.n));
    if (voc_int(ctx, "tokenizer.ggml.bos_token_id", &v))
        json_object_set_new(o, "bos_token_id", json_integer((json_int_t)v));
    if (voc_int(ctx, "tokenizer.ggml.eos_token_id", &v))
        json_object_set_new(o, "eos_token_id", json_integer((json_int_t)v));
    json_object_set_new(
        o, "tie_word_embeddings",
        json_boolean(gguf_find_tensor(ctx, "output.weight",
                                      strlen("output.weight")) < 0));
}

enum gguf_status voc_hf_model_config(const gguf_ctx *ctx, struct gguf_buf *b) {
    const char *name;
    size_t len;
    char why[256];
    const struct row *r = arch_of(ctx, &name, &len);
    if (!r || voc_hf_config_reason(ctx, why, sizeof why))
        return GGUF_E_NOTFOUND;
    json_t *o = json_object();
    if (!o)
        return GGUF_E_NOMEM;
    common(o, ctx, r);
    if (r->extra)
        r->extra(o, ctx, r->arch);
    return voc_json_put(
        b, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9),
        UINT64_MAX, "\n");
}
