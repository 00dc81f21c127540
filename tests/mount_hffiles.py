#!/usr/bin/env python3
"""Issue 36: the files of MNT/hf/ beside tokenizer.json, on real mounts.

- hf/chat_template.jinja: the GGUF's tokenizer.chat_template byte for byte
  (as ggml reads it), and rendered by @huggingface/jinja (as transformers.js
  renders the file) to the text llama.cpp's llama_chat_apply_template makes
  of the same messages (tests/chatdump.c, tests/chat_render.mjs), for a
  ChatML and a Gemma template; absent, with the reason in hf/README, when
  the template is not UTF-8 or there is none.
- hf/generation_config.json: bos_token_id as llama.cpp reads it and, as
  eos_token_id, exactly the ids llama.cpp ends a generation on
  (llama_vocab_is_eog through node-llama-cpp, tests/eog_judge.mjs), the EOS
  first: a Gemma-3-like vocabulary without eot_token_id (<end_of_turn> is
  EOG by its text), EOT/EOM keys, an EOM key on a normal piece, gpt-oss's
  <|end|> exception, Gemma 4's </s> exception, FIM pad/sep by their texts.
- hf/config.json of each architecture of vocab/hfconfig.c's table (llama,
  qwen2, qwen3, qwen2moe, qwen3moe, gemma, gemma2, gemma3, phi3, deepseek2
  as V2 and V3, gpt-oss, falcon, starcoder2): each field against ggml's
  reading of the GGUF the test writes, named as transformers' config
  classes name them (the test's own table, from convert_hf_to_gguf.py's
  mapping read backwards); Phi-3 with LongRoPE factors and an unmapped
  architecture absent with the reason.

The GGUFs are written here (gguf_bytes), read by ggml (refdump) before any
check."""
import json
import os
import re
import shutil
import struct
import subprocess

import judge as J
import mount_edit as E

Fail = J.Fail
HERE = os.path.dirname(os.path.abspath(__file__))

# GGUF value types.
U32, I32, F32, BOOL, STR, ARR, U64 = 4, 5, 6, 7, 8, 9, 10


def _str(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def _val(t, v):
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(_val(et, x) for x in items)
    return {U32: lambda: struct.pack("<I", v), I32: lambda: struct.pack("<i", v),
            F32: lambda: struct.pack("<f", v), BOOL: lambda: struct.pack("<B", v),
            STR: lambda: _str(v), U64: lambda: struct.pack("<Q", v)}[t]()


def gguf_bytes(kvs, tensors=()):
    """A GGUF v3: kvs [(key, type, value)], tensors [name] of 4 f32 each."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += _str(k) + struct.pack("<I", t) + _val(t, v)
    for i, name in enumerate(tensors):
        out += _str(name) + struct.pack("<IQIQ", 1, 4, 0, 32 * i)
    out += b"\0" * (-len(out) % 32)
    for _ in tensors:
        out += struct.pack("<4f", 0, 0, 0, 0) + b"\0" * 16
    return out


def write(path, kvs, tensors=()):
    with open(path, "wb") as f:
        f.write(gguf_bytes(kvs, tensors))
    verdict, ref = J.refdump(path)
    if verdict != "ggml-accepts":
        raise Fail("ggml rejects the test's own GGUF %s" % path)
    return {kv.key: kv for kv in ref.kvs}


SPECIALS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>"]
PIECES = ["\u2581Hello", "\u2581world", "\u2581", "H", "e", "l", "o"]


def llama_kvs(model):
    """The hyperparameters llama.cpp needs to load a llama model, and the
    tokenizer.ggml.model of its vocabulary."""
    return [("general.architecture", STR, "llama"),
            ("llama.context_length", U32, 4096), ("llama.embedding_length", U32, 64),
            ("llama.block_count", U32, 2), ("llama.feed_forward_length", U32, 128),
            ("llama.attention.head_count", U32, 4), ("llama.attention.head_count_kv", U32, 2),
            ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5), ("llama.rope.dimension_count", U32, 16),
            ("tokenizer.ggml.model", STR, model)]


def vocab_kvs(eot=None, eom=None, template=None, extra=()):
    """A SentencePiece (llama) vocabulary llama.cpp loads: its specials,
    the 256 byte tokens, a few pieces, the control tokens extra; the
    hyperparameters llama.cpp needs to load a llama vocabulary."""
    toks = SPECIALS + ["<0x%02X>" % b for b in range(256)] + PIECES + list(extra)
    types = [2] + [3] * (len(SPECIALS) - 1) + [6] * 256 + [1] * len(PIECES) + [3] * len(extra)
    kvs = llama_kvs("llama") + [
           ("tokenizer.ggml.tokens", ARR, (STR, toks)),
           ("tokenizer.ggml.scores", ARR, (F32, [0.0] * len(toks))),
           ("tokenizer.ggml.token_type", ARR, (I32, types)),
           ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
           ("tokenizer.ggml.unknown_token_id", U32, 0), ("tokenizer.ggml.add_bos_token", BOOL, 1)]
    if eot is not None:
        kvs.append(("tokenizer.ggml.eot_token_id", U32, eot))
    if eom is not None:
        kvs.append(("tokenizer.ggml.eom_token_id", U32, eom))
    if template is not None:
        kvs.append(("tokenizer.chat_template", STR, template))
    return kvs


def readme_line(mnt, name):
    with open(os.path.join(mnt, "hf", "README"), "rb") as f:
        m = re.search(rb"^" + re.escape(name.encode()) + rb": (.*)$", f.read(), re.M)
    return m.group(1).decode() if m else None


def need(mnt, name):
    p = os.path.join(mnt, "hf", name)
    if name not in os.listdir(os.path.join(mnt, "hf")) or not os.path.isfile(p):
        raise Fail("hf/%s is absent (hf/README: %r)" % (name, readme_line(mnt, name)))
    with open(p, "rb") as f:
        return f.read()


def absent(mnt, name, why):
    """hf/NAME absent, README's line for it saying why (the regex why)."""
    if os.path.exists(os.path.join(mnt, "hf", name)) or name in os.listdir(os.path.join(mnt, "hf")):
        raise Fail("hf/%s exists, expected absent" % name)
    line = readme_line(mnt, name)
    if line is None or not re.match("absent: " + why, line):
        raise Fail("hf/README on %s: %r, expected 'absent: %s'" % (name, line, why))


# A Gemma template (llama.cpp knows it by <start_of_turn>): the system
# message, trimmed, opens the first user turn; "assistant" is "model".
GEMMA = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
         "{% set first = (messages[0]['content'] | trim) + '\\n\\n' %}{% set loop_messages = messages[1:] %}"
         "{% else %}{% set first = '' %}{% set loop_messages = messages %}{% endif %}"
         "{% for message in loop_messages %}{% if message['role'] == 'assistant' %}{% set role = 'model' %}"
         "{% else %}{% set role = message['role'] %}{% endif %}"
         "{{ '<start_of_turn>' + role + '\\n' + (first if loop.first else '') + (message['content'] | trim)"
         " + '<end_of_turn>\\n' }}{% endfor %}"
         "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}").encode()


def sec_chat(d, mods):
    """chat_template.jinja is the GGUF's template as ggml reads it, and
    renders as llama.cpp renders it.  llama.cpp's built-in Gemma format
    has no BOS (llama.cpp adds it when it tokenizes: add_bos_token is
    true here), the template writes {{ bos_token }}: the one difference
    allowed, and only for that template."""
    import mount_tokenizer as T
    lib = T.libllama(mods)
    mnt = os.path.join(d, "mnt")
    for label, tmpl, bos_in_text in (("chatml", T.CHATML, False), ("gemma", GEMMA, True)):
        path = os.path.join(d, "chat-%s.gguf" % label)
        kvs = write(path, vocab_kvs(template=tmpl))
        want = kvs[b"tokenizer.chat_template"].content[:-1]
        if want != tmpl:
            raise Fail("ggml reads the test's template as %r" % want)
        E.mount(path, mnt, ["-o", "ro"])
        try:
            got = need(mnt, "chat_template.jinja")
            tfile, cfg = T.chat_inputs(mnt, d, got, "chat_template.jinja")
        finally:
            J.unmount(mnt, [])
        if got != want:
            raise Fail("%s: hf/chat_template.jinja %r, ggml reads %r" % (label, J.shorten(got), J.shorten(want)))
        ref = T.llama_renders(lib, tfile)
        out = T.jinja_renders(mods, "hf/chat_template.jinja", cfg, tfile)
        text = out[len(b"<s>"):] if bos_in_text and out.startswith(b"<s>") else out
        if text != ref:
            raise Fail("%s: @huggingface/jinja renders hf/chat_template.jinja as %r, llama.cpp %r"
                       % (label, out, ref))
    # A template without a vocabulary (the file needs none; README agrees).
    path = os.path.join(d, "chat-novocab.gguf")
    write(path, [("general.architecture", STR, "llama"), ("tokenizer.chat_template", STR, T.CHATML)])
    E.mount(path, mnt, ["-o", "ro"])
    try:
        if need(mnt, "chat_template.jinja") != T.CHATML or \
                readme_line(mnt, "chat_template.jinja") != "tokenizer.chat_template as it is":
            raise Fail("chat template without tokens: hf/chat_template.jinja or its README line is wrong")
    finally:
        J.unmount(mnt, [])
    # Not UTF-8, and none: absent with the reason.
    for label, extra, why in (("not UTF-8", b"{{ 'caf\xe9' }}", "tokenizer.chat_template is not a string of valid UTF-8"),
                              ("none", None, "the model has no tokenizer.chat_template")):
        path = os.path.join(d, "chat-bad.gguf")
        write(path, vocab_kvs(template=extra))
        E.mount(path, mnt, ["-o", "ro"])
        try:
            absent(mnt, "chat_template.jinja", re.escape(why))
        finally:
            J.unmount(mnt, [])
    J.log("ok   hf/chat_template.jinja is the GGUF's template and renders as llama.cpp renders it "
          "(ChatML, Gemma); absent with the reason when not UTF-8 or none")


def eog_judge(mods, path):
    p = subprocess.run(["node", os.path.join(HERE, "eog_judge.mjs"), mods, path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode == 3:
        raise J.Skip("eog_judge: " + p.stderr.decode(errors="replace"))
    if p.returncode != 0:
        raise Fail("eog_judge %s failed (%d): %s" % (path, p.returncode, p.stderr.decode(errors="replace")[-1000:]))
    return json.loads(p.stdout)


def expected_gen(kvs, ll):
    """generation_config.json: the BOS as llama.cpp reads it and, as
    eos_token_id, every id llama.cpp ends a generation on (ll:
    tests/eog_judge.mjs), its EOS first when it is one, the others by id
    (None without llama.cpp: its EOG rules are not known here)."""
    if ll is None:
        return None
    want = {} if ll["bos"] is None else {"bos_token_id": ll["bos"]}
    eos = [ll["eos"]] if ll["eos"] in ll["eog"] else []
    eos += sorted(set(ll["eog"]) - set(eos))
    if eos:
        want["eos_token_id"] = eos[0] if len(eos) == 1 else eos
    return want


def sec_gen(d, mods, shared):
    mnt = os.path.join(d, "mnt")
    n = len(SPECIALS) + 256 + len(PIECES)
    cases = [("gemma-3-like: no eot key", vocab_kvs(), None), ("eos+eot", vocab_kvs(eot=6), None),
             ("eos+eot+eom", vocab_kvs(eot=6, eom=4), None), ("eot is the eos", vocab_kvs(eot=2), None),
             ("eom a normal piece", vocab_kvs(eom=n - 1), None),
             ("gpt-oss-like: <|end|> beside <|return|>, <|call|>",
              vocab_kvs(extra=["<|end|>", "<|return|>", "<|call|>"]), None),
             ("gemma-4-like: </s> beside <|tool_response>", vocab_kvs(extra=["<|tool_response>", "<eos>"]), None),
             ("fim pad by its text", vocab_kvs(extra=["<|fim_pad|>", "<|file_sep|>"]), None)]
    cases += [(os.path.basename(p), None, p) for p in shared]
    for label, kvl, src in cases:
        path = src or os.path.join(d, "gen.gguf")
        if src is None:
            kvs = write(path, kvl)
        else:
            verdict, ref = J.refdump(src)
            if verdict != "ggml-accepts":
                continue
            kvs = {kv.key: kv for kv in ref.kvs}
            if b"tokenizer.ggml.tokens" not in kvs:
                continue
        ll = eog_judge(mods, path) if mods else None
        want = expected_gen(kvs, ll)
        if want is None:
            continue
        E.mount(path, mnt, ["-o", "ro"])
        try:
            got = json.loads(need(mnt, "generation_config.json"))
        finally:
            J.unmount(mnt, [])
        if got != want:
            raise Fail("%s: hf/generation_config.json %r; llama.cpp's BOS and EOG ids: %r"
                       % (label, got, want))
        eos = want.get("eos_token_id")
        listed = eos if isinstance(eos, list) else [eos] if eos is not None else []
        if sorted(listed) != sorted(ll["eog"]) or len(listed) != len(ll["eog"]):
            raise Fail("%s: generation_config.json ends on %r, llama.cpp on %r" % (label, listed, ll["eog"]))
    J.log("ok   hf/generation_config.json names the BOS and every end of generation as llama.cpp, "
          "the EOS first (%d vocabularies)" % len(cases) if mods else
          "skip hf/generation_config.json: llama.cpp (node-llama-cpp) not installed")


# transformers' class, model_type and the name of its activation field,
# the epsilon's field and GGUF key, the intermediate size's key, by
# general.architecture (transformers' config classes; convert_hf_to_gguf.py
# writes the GGUF keys from them).
RMS, LN = "attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon"
ARCHS = {
    "llama": ("LlamaForCausalLM", "llama", "hidden_act", "silu", "rms_norm_eps", RMS, "feed_forward_length"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2", "hidden_act", "silu", "rms_norm_eps", RMS, "feed_forward_length"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3", "hidden_act", "silu", "rms_norm_eps", RMS, "feed_forward_length"),
    "qwen2moe": ("Qwen2MoeForCausalLM", "qwen2_moe", "hidden_act", "silu", "rms_norm_eps", RMS, "feed_forward_length"),
    "qwen3moe": ("Qwen3MoeForCausalLM", "qwen3_moe", "hidden_act", "silu", "rms_norm_eps", RMS, "feed_forward_length"),
    "gemma": ("GemmaForCausalLM", "gemma", "hidden_act", "gelu_pytorch_tanh", "rms_norm_eps", RMS,
              "feed_forward_length"),
    "gemma2": ("Gemma2ForCausalLM", "gemma2", "hidden_activation", "gelu_pytorch_tanh", "rms_norm_eps", RMS,
               "feed_forward_length"),
    "gemma3": ("Gemma3ForCausalLM", "gemma3_text", "hidden_activation", "gelu_pytorch_tanh", "rms_norm_eps", RMS,
               "feed_forward_length"),
    "phi3": ("Phi3ForCausalLM", "phi3", "hidden_act", "silu", "rms_norm_eps", RMS, "feed_forward_length"),
    "deepseek2": ("DeepseekV2ForCausalLM", "deepseek_v2", "hidden_act", "silu", "rms_norm_eps", RMS,
                  "feed_forward_length"),
    "gpt-oss": ("GptOssForCausalLM", "gpt_oss", "hidden_act", "silu", "rms_norm_eps", RMS,
                "expert_feed_forward_length"),
    "falcon": ("FalconForCausalLM", "falcon", "activation", "gelu", "layer_norm_epsilon", LN, None),
    "starcoder2": ("Starcoder2ForCausalLM", "starcoder2", "hidden_act", "gelu_pytorch_tanh", "norm_epsilon", LN,
                   "feed_forward_length"),
}
# Each architecture's own fields: transformers' name, the GGUF key after
# "ARCH.", its type.
OWN = {
    "qwen2moe": [("num_experts", "expert_count", U32), ("num_experts_per_tok", "expert_used_count", U32),
                 ("moe_intermediate_size", "expert_feed_forward_length", U32),
                 ("shared_expert_intermediate_size", "expert_shared_feed_forward_length", U32)],
    "qwen3moe": [("num_experts", "expert_count", U32), ("num_experts_per_tok", "expert_used_count", U32),
                 ("moe_intermediate_size", "expert_feed_forward_length", U32)],
    "gpt-oss": [("num_local_experts", "expert_count", U32), ("num_experts_per_tok", "expert_used_count", U32),
                ("sliding_window", "attention.sliding_window", U32)],
    "gemma2": [("attn_logit_softcapping", "attn_logit_softcapping", F32),
               ("final_logit_softcapping", "final_logit_softcapping", F32),
               ("sliding_window", "attention.sliding_window", U32)],
    "gemma3": [("sliding_window", "attention.sliding_window", U32)],
    "deepseek2": [("q_lora_rank", "attention.q_lora_rank", U32), ("kv_lora_rank", "attention.kv_lora_rank", U32),
                  ("qk_rope_head_dim", "rope.dimension_count", U32), ("v_head_dim", "attention.value_length", U32),
                  ("n_routed_experts", "expert_count", U32), ("num_experts_per_tok", "expert_used_count", U32),
                  ("n_shared_experts", "expert_shared_count", U32),
                  ("moe_intermediate_size", "expert_feed_forward_length", U32),
                  ("first_k_dense_replace", "leading_dense_block_count", U32),
                  ("routed_scaling_factor", "expert_weights_scale", F32),
                  ("norm_topk_prob", "expert_weights_norm", BOOL)],
}


def arch_kvs(arch, extra=()):
    a = arch + "."
    kvs = [("general.architecture", STR, arch), (a + "context_length", U32, 8192),
           (a + "embedding_length", U32, 2304), (a + "block_count", U32, 26),
           (a + "attention.head_count", U32, 8), (a + "attention.head_count_kv", U32, 4),
           (a + "attention.key_length", U32, 256), (a + "attention.value_length", U32, 256),
           (a + "rope.freq_base", F32, 1000000.0), ("tokenizer.ggml.bos_token_id", U32, 2),
           ("tokenizer.ggml.eos_token_id", U32, 1)]
    fl = ARCHS[arch][6]
    if fl:
        kvs.append((a + fl, U32, 9216))
    kvs.append((a + ARCHS[arch][5], F32, 1e-6))
    for i, (_, key, t) in enumerate(OWN.get(arch, [])):
        if key not in ("attention.value_length",):
            kvs.append((a + key, t, {U32: 64 + i, F32: 2.5 + i, BOOL: 1}[t]))
    return kvs + list(extra)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected_config(arch, kvs, tensors):
    """config.json from ggml's reading of the metadata (kvs: refdump's)."""
    cls, mtype, act_name, act, eps_name, eps_key, ffn = ARCHS[arch]
    a = arch.encode() + b"."

    def v(suffix):
        kv = kvs.get(a + suffix.encode())
        if kv is None:
            return None
        if kv.type == "float32":
            return f32(struct.unpack("<f", struct.pack("<I", kv.bits[0]))[0])
        if kv.type == "bool":
            return kv.content.strip() == b"true"
        return int(kv.content)
    want = {"architectures": [cls], "model_type": mtype, act_name: act,
            "hidden_size": v("embedding_length"), "num_hidden_layers": v("block_count"),
            "num_attention_heads": v("attention.head_count"), "max_position_embeddings": v("context_length"),
            eps_name: v(eps_key), "rope_theta": v("rope.freq_base"), "vocab_size": None,
            "bos_token_id": 2, "eos_token_id": 1, "tie_word_embeddings": "output.weight" not in tensors}
    if arch == "falcon":
        kvh = v("attention.head_count_kv")
        want.update(num_kv_heads=kvh, multi_query=kvh == 1, new_decoder_architecture=kvh > 1)
    else:
        want["num_key_value_heads"] = v("attention.head_count_kv")
    if ffn:
        want["intermediate_size"] = v(ffn)
    if arch != "deepseek2":
        want["head_dim"] = v("attention.key_length")
    for name, key, _ in OWN.get(arch, []):
        want[name] = v(key)
    if arch in ("gemma2", "gemma3"):
        want["query_pre_attn_scalar"] = v("attention.key_length")
    if arch == "deepseek2":
        want["qk_nope_head_dim"] = v("attention.key_length") - v("rope.dimension_count")
        gate = v("expert_gating_func")
        if gate == 2:
            want.update(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", scoring_func="sigmoid")
    if kvs.get(a + b"rope.scaling.type") is not None:
        rs = {"type": kvs[a + b"rope.scaling.type"].content[:-1].decode(), "factor": v("rope.scaling.factor"),
              "original_max_position_embeddings": v("rope.scaling.original_context_length")}
        want["rope_scaling"] = {k: x for k, x in rs.items() if x is not None}
    del want["vocab_size"]
    return want


def compare_config(label, got, want):
    for k, w in want.items():
        g = got.get(k)
        if isinstance(w, float) and isinstance(g, (int, float)):
            ok = f32(g) == w
        elif isinstance(w, dict) and isinstance(g, dict):
            ok = all((f32(g.get(x)) == y if isinstance(y, float) else g.get(x) == y) for x, y in w.items())
        else:
            ok = g == w and type(g) is type(w)
        if not ok:
            raise Fail("%s: config.json %s is %r, expected %r from ggml's reading" % (label, k, g, w))


def sec_config(d):
    mnt = os.path.join(d, "mnt")
    yarn = [("deepseek2.rope.scaling.type", STR, "yarn"), ("deepseek2.rope.scaling.factor", F32, 40.0),
            ("deepseek2.rope.scaling.original_context_length", U32, 4096),
            ("deepseek2.expert_gating_func", U32, 2)]
    linear = [("llama.rope.scaling.type", STR, "linear"), ("llama.rope.scaling.factor", F32, 8.0)]
    cases = [("llama (linear RoPE scaling)", arch_kvs("llama", linear), [])]
    cases += [(arch, arch_kvs(arch), ["output.weight"]) for arch in ARCHS]
    cases += [("deepseek2 (V3: sigmoid gating, yarn)", arch_kvs("deepseek2", yarn), []),
              ("falcon (7B: one K/V head)",
               [kv for kv in arch_kvs("falcon") if kv[0] != "falcon.attention.head_count_kv"]
               + [("falcon.attention.head_count_kv", U32, 1)], [])]
    for label, kvl, tensors in cases:
        arch = label.split()[0]
        path = os.path.join(d, "cfg.gguf")
        kvs = write(path, kvl, tensors)
        want = expected_config(arch, kvs, tensors)
        E.mount(path, mnt, ["-o", "ro"])
        try:
            got = json.loads(need(mnt, "config.json"))
        finally:
            J.unmount(mnt, [])
        compare_config(label, got, want)
    for label, kvl, tensors, why in (
            ("phi3 with LongRoPE", arch_kvs("phi3"), ["rope_factors_long.weight", "rope_factors_short.weight"],
             r"phi3 with LongRoPE: .*rope_factors_long\.weight"),
            ("mamba", [("general.architecture", STR, "mamba"), ("mamba.context_length", U32, 1)], [],
             r"the architecture 'mamba' is not mapped \(llama, .*starcoder2 are\)")):
        path = os.path.join(d, "cfg.gguf")
        write(path, kvl, tensors)
        E.mount(path, mnt, ["-o", "ro"])
        try:
            absent(mnt, "config.json", why)
        finally:
            J.unmount(mnt, [])
    J.log("ok   hf/config.json of %s against ggml's reading; Phi-3 with LongRoPE and an unmapped "
          "architecture absent with the reason" % ", ".join(ARCHS))


WPM_EXTRA = ["x\x0by\x0cz\x85w \u2028 v", "\u00c0\u00c9\u00ce\u00f5\u00fc \u01c4 \ufb01 \u0130stanbul \u03a3\u0391\u03a3",
             "a\u200db\ufeffc\u00add \u0000 \ufffd \x07bell", "a" * 150 + " " + "\u00e9" * 120,
             "[CLS] [SEP][MASK]x [UNK] [PAD]", "\ud55c\uad6d\uc5b4 \u1100\u1161 \u0915\u093f"]


def bundled_vocab(d, name):
    """llama.cpp's models/ggml-vocab-NAME.gguf from node-llama-cpp's
    source bundle, or None."""
    b = os.path.join(os.environ.get("GGUFS_SRCDIR", ""), ".deps", "node_modules", "node-llama-cpp", "llama",
                     "gitRelease.bundle")
    if not os.path.isfile(b) or not shutil.which("git"):
        return None
    g = os.path.join(d, "lcpp.git")
    if not os.path.isdir(g):
        subprocess.run(["git", "init", "-q", "--bare", g], check=True)
        subprocess.run(["git", "-C", g, "fetch", "-q", b, "HEAD:refs/heads/b"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    p = os.path.join(d, "ggml-vocab-%s.gguf" % name)
    with open(p, "wb") as f:
        ok = subprocess.run(["git", "-C", g, "show", "b:models/ggml-vocab-%s.gguf" % name], stdout=f,
                            stderr=subprocess.DEVNULL).returncode == 0
    return p if ok else None


def judge_wpm(mods, label, gguf, hfdir, d):
    """llama.cpp on gguf and transformers.js on hfdir, plain and framed as
    llama.cpp's WPM frames: the BOS, the text, the SEP (always)."""
    import mount_hfvocab as V
    corpus = V.CORPUS + V.specials_of(gguf) + WPM_EXTRA
    r = V.tok_judge(mods, gguf, hfdir, corpus, d)
    if r["hfError"]:
        raise Fail("%s: transformers.js cannot load hf/: %s" % (label, r["hfError"]))
    with open(os.path.join(hfdir, "tokenizer_config.json"), "rb") as f:
        if json.load(f).get("add_bos_token") != r["addBos"]:
            raise Fail("%s: tokenizer_config.json add_bos_token is not llama.cpp's %r" % (label, r["addBos"]))
    bad = 0
    for t, a, b, c in zip(corpus, r["llama"], r["hf"], r["hfAdded"]):
        if a != b or c != [r["bos"]] + a + [r["sep"]]:
            J.log("FAIL %s: %r: llama.cpp %s (framed with %r, %r), transformers.js on hf/ %s, framed %s"
                  % (label, t[:60], a[:30], r["bos"], r["sep"], b[:30], c[:3] + ["..."] + c[-3:]))
            bad += 1
    if bad:
        raise Fail("%s: hf/tokenizer.json differs from llama.cpp on %d of %d lines" % (label, bad, len(corpus)))
    return len(corpus)


UGM_EXTRA = ["\uff21\uff22\uff23 \ufb01 \u2460 \uff5e x\u3000y \u00a0z", "  lead and trail  ", "a\u200bb\u00adc",
             "x" * 300, "<s> x </s> <mask> <pad> y", "\u1100\u1161 \ud55c \u0915\u093f \u0e01\u0e34"]


def sec_ugm(d, mods):
    """Unigram (t5, llama.cpp's UGM): llama.cpp's XLM-R vocabulary
    (ggml-vocab-nomic-bert-moe from node-llama-cpp's llama.cpp source:
    precompiled_charsmap, remove_extra_whitespaces), plain and framed as
    its add_bos and add_eos say.  transformers.js's Precompiled normalizer
    is NFKC with a few replacements, not the charsmap: where the two
    differ this judges transformers.js, not the file."""
    import mount_hfvocab as V
    src = bundled_vocab(d, "nomic-bert-moe")
    if not src:
        J.log("note: no Unigram vocabulary at hand; not judged")
        return
    mnt = os.path.join(d, "mnt")
    E.mount(src, mnt, ["-o", "ro"])
    try:
        need(mnt, "tokenizer.json")
        hfdir = os.path.join(d, "hf-ugm")
        shutil.rmtree(hfdir, ignore_errors=True)
        shutil.copytree(os.path.join(mnt, "hf"), hfdir)
    finally:
        J.unmount(mnt, [])
    corpus = V.CORPUS + V.specials_of(src) + UGM_EXTRA
    r = V.tok_judge(mods, src, hfdir, corpus, d)
    if r["hfError"]:
        raise Fail("nomic-bert-moe: transformers.js cannot load hf/: %s" % r["hfError"])
    bad = 0
    for t, a, b, c in zip(corpus, r["llama"], r["hf"], r["hfAdded"]):
        f = ([r["bos"]] if r["addBos"] else []) + a + ([r["eos"]] if r["addEos"] else [])
        if a != b or c != f:
            J.log("FAIL nomic-bert-moe: %r: llama.cpp %s, transformers.js on hf/ %s, framed %s vs %s"
                  % (t[:60], a[:30], b[:30], c[:3], f[:3]))
            bad += 1
    if bad:
        raise Fail("nomic-bert-moe: hf/tokenizer.json differs from llama.cpp on %d of %d lines" % (bad, len(corpus)))
    path = shutil.copy(src, os.path.join(d, "ugm-spaces.gguf"))
    E.mount(path, mnt)
    try:
        E.write_file(os.path.join(mnt, "meta", "tokenizer.ggml.remove_extra_whitespaces"), b"false\n")
        absent(mnt, "tokenizer.json", "Unigram without remove_extra_whitespaces: ")
    finally:
        J.unmount(mnt, [])
    J.log("ok   Unigram (t5): hf/tokenizer.json of ggml-vocab-nomic-bert-moe gives llama.cpp's ids on %d lines, "
          "plain and framed (add_bos %s, add_eos %s); absent with the reason without remove_extra_whitespaces"
          % (len(corpus), r["addBos"], r["addEos"]))


def sec_wpm(d, mods):
    """WordPiece: llama.cpp's BGE vocabulary (ggml-vocab-bert-bge, from
    $GGUFS_SHARED_MODELS or node-llama-cpp's llama.cpp source), as it is
    and with tokenizer.ggml.normalizer.lowercase false (written through
    meta/, judged on the live view: no lowercasing, no accents stripped)."""
    srcs = [p for p in shared() if os.path.basename(p) == "ggml-vocab-bert-bge.gguf"]
    b = bundled_vocab(d, "bert-bge")
    srcs += [b] if b else []
    if not srcs:
        J.log("note: no BERT vocabulary (ggml-vocab-bert-bge.gguf) at hand; WordPiece not judged")
        return
    mnt = os.path.join(d, "mnt")
    n = 0
    for i, src in enumerate(srcs):
        for lower in (True, False):
            label = "%s%s" % (os.path.basename(src), "" if lower else " (lowercase false)")
            path = shutil.copy(src, os.path.join(d, "wpm%d.gguf" % i))
            E.mount(path, mnt, [] if not lower else ["-o", "ro"])
            try:
                if not lower:  # a new key of type bool (ggufs(1) EDITING)
                    key = os.path.join(mnt, "meta", "tokenizer.ggml.normalizer.lowercase")
                    open(key, "wb").close()
                    os.setxattr(key, "user.gguf.type", b"bool")
                    E.write_file(key, b"false\n", os.O_WRONLY | os.O_TRUNC)
                need(mnt, "tokenizer.json")
                hfdir = os.path.join(d, "hf-wpm")
                shutil.rmtree(hfdir, ignore_errors=True)
                shutil.copytree(os.path.join(mnt, "hf"), hfdir)
                live = os.path.join(mnt, os.path.basename(path))
                if not lower:
                    n += judge_wpm(mods, label, live, hfdir, d)
            finally:
                J.unmount(mnt, [])
            if lower:
                n += judge_wpm(mods, label, path, hfdir, d)
    path = shutil.copy(srcs[0], os.path.join(d, "wpm-nounk.gguf"))
    E.mount(path, mnt)
    try:  # an unknown token past the vocabulary: no WordPiece
        E.write_file(os.path.join(mnt, "meta", "tokenizer.ggml.unknown_token_id"), b"999999\n")
        absent(mnt, "tokenizer.json", r"the unknown token \(tokenizer\.ggml\.unknown_token_id")
    finally:
        J.unmount(mnt, [])
    J.log("ok   WordPiece (bert): hf/tokenizer.json gives llama.cpp's ids on %d lines of %d vocabularies, "
          "plain and framed ([CLS] text [SEP]); absent with the reason without an unknown token"
          % (n, 2 * len(srcs)))


def shared():
    env = os.environ.get("GGUFS_SHARED_MODELS")
    if env and os.path.isdir(env):
        return sorted(os.path.join(env, f) for f in os.listdir(env) if f.endswith(".gguf"))
    return J.shared_models()


def main():
    import mount_tokenizer as T
    root = T.scratch_root("ggufs-hff-")
    try:
        try:
            mods = J.node_modules("node-llama-cpp", "@huggingface/jinja")
        except J.Skip as e:
            J.log("note: llama.cpp and @huggingface/jinja not asked: %s" % e)
            mods = None
        sec_config(root)
        sec_gen(root, mods, [p for p in shared() if "vocab" in os.path.basename(p)])
        if mods:
            sec_chat(root, mods)
            sec_wpm(root, mods)
            sec_ugm(root, mods)
    finally:
        J.cleanup(os.path.join(root, "mnt"), root)


if __name__ == "__main__":
    J.main(main)
