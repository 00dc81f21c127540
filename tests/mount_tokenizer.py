#!/usr/bin/env python3
"""Issue 26: MNT/tokenizer/ (tokens.tsv, special, merges.txt) on real
mounts, judged by ggml's reading of the metadata (tests/refdump): every
fixture of `mkfixture all`, a fixture with a vocabulary and merges, and the
real vocabularies of ../shared/models (or $GGUFS_SHARED_MODELS) when
present.  The expected texts are made here from ggml's reading (ids, token
texts as refdump renders string elements, type names from llama.cpp's enum
llama_token_type, scores by their bits), never by ggufs's code.

Then the edits: meta/tokenizer.ggml.eos_token_id changed, add_bos unset, the
merges removed: tokenizer/ shows them while pending (judged against ggml's
reading of the live view) and after the commit (of the file).

hf/: for each model whose hf/tokenizer.json exists, llama.cpp
(node-llama-cpp, the GGUF) and transformers.js (AutoTokenizer on a copy of
hf/) tokenize a corpus (ASCII, accents, CJK, emoji, code, whitespace runs,
special tokens' texts, bytes that are not UTF-8) to the same ids, with and
without the BOS/EOS each adds; a model without one has the reason in
hf/README; special_tokens_map.json names the special tokens ggml reads."""
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time

import re

import judge as J
import mount_edit as E

Fail = J.Fail
HERE = os.path.dirname(os.path.abspath(__file__))
TOK = b"tokenizer.ggml."
TYPES = ["undefined", "normal", "unknown", "control", "user_defined", "unused", "byte"]
IDS = [("bos", "bos_token_id"), ("eos", "eos_token_id"), ("eot", "eot_token_id"), ("eom", "eom_token_id"),
       ("unk", "unknown_token_id"), ("sep", "seperator_token_id"), ("pad", "padding_token_id"),
       ("cls", "cls_token_id"), ("mask", "mask_token_id"), ("fim_pre", "fim_pre_token_id"),
       ("fim_suf", "fim_suf_token_id"), ("fim_mid", "fim_mid_token_id"), ("fim_pad", "fim_pad_token_id"),
       ("fim_rep", "fim_rep_token_id"), ("fim_sep", "fim_sep_token_id"), ("prefix", "prefix_token_id"),
       ("suffix", "suffix_token_id"), ("middle", "middle_token_id")]
FLAGS = [("add_bos", "add_bos_token"), ("add_eos", "add_eos_token"), ("add_sep", "add_sep_token"),
         ("add_space_prefix", "add_space_prefix"), ("remove_extra_whitespaces", "remove_extra_whitespaces")]
INTS = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64")


def lines_of(kv):
    return kv.content.split(b"\n")[:-1]


def expected(ref):
    """{file name: bytes or None (absent)} of tokenizer/ from ggml's reading."""
    kvs = {kv.key: kv for kv in ref.kvs}
    toks = kvs.get(TOK + b"tokens")
    if toks is None or toks.type != "array[string]":
        return {"tokens.tsv": None, "special": None, "merges.txt": None}
    texts = lines_of(toks)
    tt, sc = kvs.get(TOK + b"token_type"), kvs.get(TOK + b"scores")
    types = [int(x) for x in lines_of(tt)] if tt is not None and tt.type == "array[int32]" else []
    scores = sc.bits if sc is not None and sc.type == "array[float32]" else []
    score_txt = lines_of(sc) if scores else []
    out = [b"id\ttype\tscore\ttext\n"]
    for i, t in enumerate(texts):
        ty = "-" if i >= len(types) else (TYPES[types[i]] if 0 <= types[i] < 7 else str(types[i]))
        s = "-" if i >= len(scores) else J.canonical_float("f32", scores[i], score_txt[i].decode())
        out.append(b"%d\t%s\t%s\t%s\n" % (i, ty.encode(), s.encode(), t))
    sp = []
    for name, key in (("model", b"model"), ("pre", b"pre")):
        kv = kvs.get(TOK + key)
        if kv is not None:
            sp.append(name.encode() + b"\t" + (kv.content if kv.type == "string" else
                                                b"not a string (%s)\n" % kv.type.encode()))
    for name, key in IDS:
        kv = kvs.get(TOK + key.encode())
        if kv is None:
            continue
        if kv.type not in INTS:
            sp.append(b"%s\tnot an integer (%s)\n" % (name.encode(), kv.type.encode()))
            continue
        i = int(kv.content)
        sp.append(b"%s\t%d" % (name.encode(), i) + (b"\t" + texts[i] if 0 <= i < len(texts) else b"") + b"\n")
    for name, key in FLAGS:
        kv = kvs.get(TOK + key.encode())
        if kv is not None:
            sp.append(name.encode() + b"\t" + (kv.content if kv.type == "bool" else
                                                b"not a bool (%s)\n" % kv.type.encode()))
    mg = kvs.get(TOK + b"merges")
    merges = (b"#version: 0.2\n" + mg.content) if mg is not None and mg.type == "array[string]" else None
    return {"tokens.tsv": b"".join(out), "special": b"".join(sp), "merges.txt": merges}


def check(label, mnt, gguf):
    """tokenizer/ of the mount at mnt against ggml's reading of gguf."""
    verdict, ref = J.refdump(gguf)
    if verdict != "ggml-accepts":
        raise Fail("%s: ggml rejects %s" % (label, gguf))
    want = expected(ref)
    d = os.path.join(mnt, "tokenizer")
    listed = set(os.listdir(d))
    for name, w in sorted(want.items()):
        p = os.path.join(d, name)
        if w is None:
            if name in listed or os.path.exists(p):
                raise Fail("%s: tokenizer/%s exists, but ggml reads no such data" % (label, name))
            continue
        if name not in listed:
            raise Fail("%s: tokenizer/ lists %r, not %s" % (label, sorted(listed), name))
        with open(p, "rb") as f:
            got = f.read()
        if os.stat(p).st_size != len(got):
            raise Fail("%s: tokenizer/%s: size %d, read %d bytes" % (label, name, os.stat(p).st_size, len(got)))
        if got != w:
            raise Fail(J.first_diff("%s: tokenizer/%s (ggml's reading)" % (label, name), w, got))
    return sum(w is not None for w in want.values())


CORPUS = [b"Hello world", b"  leading spaces and   runs\t\ttabs\n\nnewlines  ",
          "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m".encode(),
          "\u4f60\u597d\uff0c\u4e16\u754c\u3002\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8".encode(),
          "emoji \U0001f600\U0001f44d\U0001f3fd \U0001f1eb\U0001f1f7".encode(),
          b"def f(x):\n    return x**2 + 1  # comment\n\tif a != b: pass\r\n",
          b"<s> special </s> <unk> <|endoftext|>text<|endoftext|> [CLS]",
          b"bad \xff\xfe bytes \xed\xa0\x80 and \xc3", b"", b" ", b"1234567890 3.14159 -42",
          "\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd \u043f\u0440\u0438\u0432\u0435\u0442".encode()] + \
    [b"a" + b" " * n + b"b" for n in range(1, 41)]  # runs of spaces: SentencePiece's tied scores


def node_modules():
    return J.node_modules("node-llama-cpp", "@huggingface/transformers")


def check_added(label, r, cfg_path):
    """tok_judge's answer r: transformers.js loaded hf/, and the hf/
    tokenizer_config.json at cfg_path adds BOS and EOS as llama.cpp does."""
    if r["hfError"]:
        raise Fail("%s: transformers.js cannot load hf/: %s" % (label, r["hfError"]))
    with open(cfg_path, "rb") as f:
        cfg = json.load(f)
    if cfg.get("add_bos_token") != r["addBos"] or cfg.get("add_eos_token") != r["addEos"]:
        raise Fail("%s: tokenizer_config.json adds bos %r eos %r, llama.cpp %r %r"
                   % (label, cfg.get("add_bos_token"), cfg.get("add_eos_token"), r["addBos"], r["addEos"]))


def judge_hf(label, mnt, gguf, mods, d):
    """hf/ of the mount at mnt against llama.cpp's tokenization of gguf."""
    hf = os.path.join(mnt, "hf")
    names = set(os.listdir(hf))
    with open(os.path.join(hf, "README"), "rb") as f:
        readme = f.read()
    if "tokenizer.json" not in names:
        if not re.search(rb"^tokenizer\.json: absent: \S", readme, re.M):
            raise Fail("%s: no hf/tokenizer.json and no reason in hf/README: %r" % (label, readme))
        return False
    copy = os.path.join(d, "hfcopy")  # a directory of its own: transformers.js's cache keys by path
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(hf, copy)
    p = subprocess.run(["node", os.path.join(HERE, "tok_judge.mjs"), mods, gguf, copy,
                        json.dumps([t.hex() for t in CORPUS])],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode == 3:
        raise J.Skip("a judge cannot be loaded: " + p.stderr.decode(errors="replace")[-500:])
    if p.returncode != 0:
        raise Fail("%s: tok_judge exited %d: %s" % (label, p.returncode, p.stderr.decode(errors="replace")[-2000:]))
    r = json.loads(p.stdout)
    check_added(label, r, os.path.join(hf, "tokenizer_config.json"))
    kvs = {kv.key: kv for kv in J.refdump(gguf)[1].kvs}
    ids = {k: int(kvs[TOK + k.encode() + b"_token_id"].content) for k in ("bos", "eos")
           if TOK + k.encode() + b"_token_id" in kvs}
    for t, a, b, c in zip(CORPUS, r["llama"], r["hf"], r["hfAdded"]):
        if a != b:
            raise Fail("%s: %r: llama.cpp %s, transformers.js on hf/ %s" % (label, t, a, b))
        want = ([ids.get("bos", r["bos"])] if r["addBos"] else []) + a + \
            ([ids.get("eos", r["eos"])] if r["addEos"] else [])
        if kvs.get(TOK + b"model") is not None and kvs[TOK + b"model"].content == b"bert\n":
            want = [r["bos"]] + a + [r["sep"]]  # llama.cpp's WPM: [BOS] text [SEP], always
        if c != want:
            raise Fail("%s: %r with special tokens: transformers.js %s, llama.cpp adds to %s" % (label, t, c, want))
    return True


def check_maps(label, mnt, gguf):
    """special_tokens_map.json: the special tokens' texts ggml reads."""
    kvs = {kv.key: kv for kv in J.refdump(gguf)[1].kvs}
    toks = kvs.get(TOK + b"tokens")
    p = os.path.join(mnt, "hf", "special_tokens_map.json")
    if toks is None:
        if os.path.exists(p):
            raise Fail("%s: hf/special_tokens_map.json without a vocabulary" % label)
        return
    with open(p, "rb") as f:
        got = json.load(f)
    for hfname, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
                        ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id")):
        kv = kvs.get(TOK + key.encode())
        if kv is None or kv.type not in INTS:
            if hfname in got:
                raise Fail("%s: special_tokens_map.json has %s, the metadata no %s" % (label, hfname, key))
            continue
        i = int(kv.content)
        want = lines_of(toks)[i] if 0 <= i < len(lines_of(toks)) else None
        if want is not None and b"\\" not in want and got.get(hfname, "").encode() != want:
            raise Fail("%s: special_tokens_map.json %s %r, ggml's token %d is %r" % (label, hfname, got.get(hfname), i, want))


ARCHS = {b"llama": "LlamaForCausalLM", b"qwen2": "Qwen2ForCausalLM", b"qwen3": "Qwen3ForCausalLM",
         b"gemma": "GemmaForCausalLM", b"phi3": "Phi3ForCausalLM"}
CONFIG_INTS = [("hidden_size", "embedding_length"), ("num_hidden_layers", "block_count"),
               ("num_attention_heads", "attention.head_count"),
               ("num_key_value_heads", "attention.head_count_kv"),
               ("intermediate_size", "feed_forward_length"), ("max_position_embeddings", "context_length"),
               ("head_dim", "attention.key_length"), ("sliding_window", "attention.sliding_window")]
NEEDED = ("embedding_length", "block_count", "attention.head_count", "context_length")


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def check_config(label, mnt, gguf):
    """hf/config.json against ggml's reading: each hyperparameter the
    mapping names (vocab/hfconfig.c; transformers' names), or absent with
    its reason for an architecture or a model it does not cover."""
    verdict, ref = J.refdump(gguf)
    kvs = {kv.key: kv for kv in ref.kvs}
    arch_kv = kvs.get(b"general.architecture")
    arch = arch_kv.content[:-1] if arch_kv is not None and arch_kv.type == "string" else None
    p = os.path.join(mnt, "hf", "config.json")

    def ival(suffix):
        kv = kvs.get(arch + b"." + suffix.encode()) if arch else None
        return int(kv.content) if kv is not None and kv.type in INTS else None
    if arch not in ARCHS or any(ival(k) is None for k in NEEDED):
        with open(os.path.join(mnt, "hf", "README"), "rb") as f:
            readme = f.read()
        if os.path.exists(p) or not re.search(rb"^config\.json: absent: \S", readme, re.M):
            raise Fail("%s: architecture %r: hf/config.json exists or hf/README gives no reason: %r"
                       % (label, arch, readme))
        return False
    with open(p, "rb") as f:
        cfg = json.load(f)
    want = {"architectures": [ARCHS[arch]], "model_type": arch.decode()}
    for name, suffix in CONFIG_INTS:
        if ival(suffix) is not None:
            want[name] = ival(suffix)
    want.setdefault("num_key_value_heads", want["num_attention_heads"])
    voc = ival("vocab_size")
    toks = kvs.get(TOK + b"tokens")
    want["vocab_size"] = voc if voc is not None else len(lines_of(toks)) if toks is not None else None
    if want["vocab_size"] is None:
        del want["vocab_size"]
    want["tie_word_embeddings"] = not any(t.name == b"output.weight" for t in ref.tensors)
    for k, v in want.items():
        if cfg.get(k) != v:
            raise Fail("%s: config.json %s is %r, ggml reads %r" % (label, k, cfg.get(k), v))
    for name, suffix, dflt in (("rms_norm_eps", "attention.layer_norm_rms_epsilon", None),
                               ("rope_theta", "rope.freq_base", 10000.0)):
        kv = kvs.get(arch + b"." + suffix.encode())
        if kv is not None and kv.type == "float32":
            if name not in cfg or f32_bits(cfg[name]) != kv.bits[0]:
                raise Fail("%s: config.json %s %r is not ggml's float32 %#x" % (label, name, cfg.get(name), kv.bits[0]))
        elif dflt is not None and cfg.get(name) != dflt:
            raise Fail("%s: config.json %s %r, the default is %r" % (label, name, cfg.get(name), dflt))
    return True


def fixtures(d):
    fx = os.path.join(d, "fixtures")
    os.makedirs(fx)
    p = subprocess.run([J.tool("MKFIXTURE"), "all", fx], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture all: %s" % p.stderr.decode(errors="replace"))
    voc = os.path.join(fx, "vocab300.gguf")
    p = subprocess.run([J.tool("MKFIXTURE"), "model", voc, "--tensor-mb", "1", "--n-tensors", "2",
                        "--vocab", "300"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture model: %s" % p.stderr.decode(errors="replace"))
    return [os.path.join(fx, f) for f in sorted(os.listdir(fx))], voc


def shared():
    env = os.environ.get("GGUFS_SHARED_MODELS")
    if env and os.path.isdir(env):
        return sorted(os.path.join(env, f) for f in os.listdir(env) if f.endswith(".gguf"))
    return J.shared_models()


def sec_read(d, files, mods):
    mnt = os.path.join(d, "mnt")
    n = nfiles = 0
    judged, configs = [], []
    for src in files:
        if J.refdump(src)[0] != "ggml-accepts":
            continue
        E.mount(src, mnt, ["-o", "ro"])
        try:
            nfiles += check(os.path.basename(src), mnt, src)
            check_maps(os.path.basename(src), mnt, src)
            if check_config(os.path.basename(src), mnt, src):
                configs.append(os.path.basename(src))
            if mods and judge_hf(os.path.basename(src), mnt, src, mods, d):
                judged.append(os.path.basename(src))
        finally:
            J.unmount(mnt, [])
        n += 1
    J.log("ok   tokenizer/ of %d models (%d files) against ggml's reading" % (n, nfiles))
    J.log("ok   hf/config.json of %s against ggml's reading; the others absent with their reason"
          % (", ".join(configs) or "no model"))
    if mods:
        J.log("ok   hf/tokenizer.json of %s: llama.cpp and transformers.js agree on %d texts; the others "
              "absent with their reason" % (", ".join(judged) or "no model", len(CORPUS)))


def sec_edit(d, voc):
    path = shutil.copy(voc, os.path.join(d, "edited.gguf"))
    mnt = os.path.join(d, "mnt")
    E.mount(path, mnt)
    try:
        m = os.path.join(mnt, "meta")
        before = open(os.path.join(mnt, "tokenizer", "special"), "rb").read()
        E.write_file(os.path.join(m, "tokenizer.ggml.eos_token_id"), b"7\n")
        E.write_file(os.path.join(m, "tokenizer.ggml.add_bos_token"), b"false\n")
        os.unlink(os.path.join(m, "tokenizer.ggml.merges"))
        after = open(os.path.join(mnt, "tokenizer", "special"), "rb").read()
        if b"\neos\t7\t" not in after or after == before:
            raise Fail("tokenizer/special after the edit of eos: %r" % after)
        check("after edits (pending)", mnt, os.path.join(mnt, "edited.gguf"))
        check_maps("after edits (pending)", mnt, os.path.join(mnt, "edited.gguf"))
        with open(os.path.join(mnt, "hf", "tokenizer_config.json"), "rb") as f:
            if json.load(f).get("add_bos_token") is not False:
                raise Fail("hf/tokenizer_config.json does not follow add_bos_token")
    finally:
        J.unmount(mnt, [])
    E.mount(path, mnt, ["-o", "ro"])
    try:
        check("after edits (committed)", mnt, path)
        check_maps("after edits (committed)", mnt, path)
    finally:
        J.unmount(mnt, [])
    J.log("ok   tokenizer/ follows the edits of meta/, pending and committed")


def rss_of(mnt):
    pid = int(os.getxattr(mnt, "user.ggufs.pid"))
    with open("/proc/%d/status" % pid) as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))


def sec_big(d):
    """A text past 1 MB (tokens.tsv of 60k tokens) is held while open,
    not after: two opens at once read the same bytes though the first's
    release drops it, and a later open makes the same bytes again (the RSS
    it gives back is logged: too nondeterministic to assert)."""
    voc = os.path.join(d, "vocab60k.gguf")
    p = subprocess.run([J.tool("MKFIXTURE"), "model", voc, "--tensor-mb", "1", "--n-tensors", "2",
                        "--vocab", "60000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture model: %s" % p.stderr.decode(errors="replace"))
    mnt = os.path.join(d, "mnt")
    for opts in (["-o", "ro"], []):
        E.mount(voc, mnt, opts)
        try:
            path = os.path.join(mnt, "tokenizer", "tokens.tsv")
            with open(path, "rb") as a, open(path, "rb") as b:
                first = a.read()
                a.close()
                second = b.read()
                held = rss_of(mnt)
            if len(first) <= 1 << 20 or first != second:
                raise Fail("tokens.tsv of 60k tokens: %d bytes, two opens %s" % (
                    len(first), "agree" if first == second else "differ"))
            # How much RSS the close gives back is reported, not asserted:
            # close(2) returns before the kernel's RELEASE reaches the
            # daemon, and what glibc returns to the system varies (CI saw
            # 0.45 and 0.5 MB of a 1.5 MB text); bench/run's tokenizer
            # rows measure the daemon's RSS after a read.
            deadline = time.time() + 1
            dropped = held - rss_of(mnt)
            while dropped < len(first) // 2 and time.time() < deadline:
                time.sleep(0.05)
                dropped = held - rss_of(mnt)
            J.log("note: %s: the daemon's RSS fell by %d bytes once tokens.tsv (%d bytes) was closed"
                  % (" ".join(opts) or "rw", dropped, len(first)))
            with open(path, "rb") as c:
                if c.read() != first:
                    raise Fail("tokens.tsv made again differs")
            check("60k tokens, made again", mnt, voc)
        finally:
            J.unmount(mnt, [])
    J.log("ok   a text past 1 MB read by two opens at once, the same bytes made again after")


CHATML = (b"{# a comment: \"quotes\" \\ backslash \t tab caf\xc3\xa9 \xf0\x9f\x98\x80 #}"
          b"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          b"message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
          b"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def libllama(mods):
    d = os.path.join(mods, "@node-llama-cpp", "linux-x64", "bins", "linux-x64")
    libs = sorted(f for f in os.listdir(d) if re.match(r"libllama(\.v[0-9.]+)?\.so$", f)) \
        if os.path.isdir(d) else []
    if not libs:
        raise J.Skip("no libllama in %s" % d)
    return os.path.join(d, libs[0])


def llama_renders(lib, tfile):
    """llama.cpp's rendering (tests/chatdump, libllama lib) of the template in
    tfile; Skip when chatdump cannot load lib."""
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(lib))
    p = subprocess.run([J.tool("CHATDUMP"), lib, tfile], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, timeout=60)
    if p.returncode == 77:
        raise J.Skip("chatdump: " + p.stderr.decode(errors="replace"))
    if p.returncode != 0 or not p.stdout:
        raise Fail("llama.cpp's rendering failed (%d): %s" % (p.returncode, p.stderr.decode(errors="replace")))
    return p.stdout


def chat_inputs(mnt, d, tmpl, name):
    """(tfile, cfg): the template tmpl written to d/name (llama.cpp's input)
    and a copy of the mount's hf/tokenizer_config.json (@huggingface/jinja's)."""
    tfile = os.path.join(d, name)
    with open(tfile, "wb") as f:
        f.write(tmpl)
    cfg = os.path.join(d, "tokenizer_config.json")
    shutil.copy(os.path.join(mnt, "hf", "tokenizer_config.json"), cfg)
    return tfile, cfg


def jinja_renders(mods, what, cfg, *tfile):
    """@huggingface/jinja's rendering (tests/chat_render.mjs) of cfg's chat
    template, or of tfile's with cfg's tokens; what names it in a Fail."""
    q = subprocess.run(["node", os.path.join(HERE, "chat_render.mjs"), mods, cfg, *tfile],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if q.returncode != 0:
        raise Fail("@huggingface/jinja on %s failed (%d): %s"
                   % (what, q.returncode, q.stderr.decode(errors="replace")[-1000:]))
    return q.stdout


def sec_chat(d, voc, mods):
    """The chat template of hf/tokenizer_config.json rendered by
    @huggingface/jinja against llama.cpp's own rendering of the GGUF's
    (as ggml reads it from the live view), for a ChatML template that
    llama.cpp recognizes, with a comment holding quotes, a backslash, a
    tab and non-ASCII text that the JSON must carry."""
    path = shutil.copy(voc, os.path.join(d, "chat.gguf"))
    mnt = os.path.join(d, "mnt")
    lib = libllama(mods)
    E.mount(path, mnt)
    try:
        E.write_file(os.path.join(mnt, "meta", "tokenizer.chat_template"), CHATML + b"\n",
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        kvs = {kv.key: kv for kv in J.refdump(os.path.join(mnt, "chat.gguf"))[1].kvs}
        tmpl = kvs[b"tokenizer.chat_template"].content[:-1]
        if tmpl != CHATML:
            raise Fail("ggml reads the chat template as %r" % tmpl)
        tfile, cfg = chat_inputs(mnt, d, tmpl, "template.jinja")
    finally:
        J.unmount(mnt, [])
    ref = llama_renders(lib, tfile)
    got = jinja_renders(mods, "tokenizer_config.json", cfg)
    if got != ref or not ref:
        raise Fail("chat template: @huggingface/jinja renders %r, llama.cpp %r" % (got, ref))
    J.log("ok   hf/tokenizer_config.json's chat template renders as llama.cpp renders the GGUF's")


def scratch_root(prefix):
    """A scratch directory /var/tmp/prefix... of a test that meson runs
    (FUSE there, Skip if not; XDG_STATE_HOME set, Fail if not)."""
    J.require_fuse()
    if not os.environ.get("XDG_STATE_HOME"):
        raise Fail("XDG_STATE_HOME must be set (run through meson test)")
    return tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")


def main():
    root = scratch_root("ggufs-tok-")
    try:
        files, voc = fixtures(root)
        real = shared()
        if not any("vocab" in os.path.basename(f) for f in real):
            J.log("note: no real vocabulary (ggml-vocab-*.gguf) present; their checks skipped")
        try:
            mods = node_modules()
        except J.Skip as e:
            J.log("note: hf/ not judged: %s" % e)
            mods = None
        sec_read(root, files + real, mods)
        sec_edit(root, voc)
        sec_big(root)
        if mods:
            sec_chat(root, voc, mods)
    finally:
        J.cleanup(os.path.join(root, "mnt"), root)


if __name__ == "__main__":
    J.main(main)
