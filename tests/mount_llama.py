#!/usr/bin/env python3
"""mount_llama: a real client.  A small llama model is generated
($MKFIXTURE llama: random weights, and the vocabulary of the shared
ggml-vocab-llama-spm.gguf when ../shared/models is beside the source tree,
else mkfixture's own generated 32000-token SentencePiece vocabulary; which
one is logged) and evaluated by llama.cpp itself (node-llama-cpp,
tests/llama_eval.mjs): a fixed token sequence, greedy, 8 tokens, with each
token's probability.  The weights are the same either way, so the tokens
generated are too; only their text differs.

Then, through a read-write ggufs mount, metadata that does not change the
math is edited (general.name, a new key mytool.note, the chat template),
`ggufs -u` commits, and llama.cpp loads the committed file: the same tokens
with bit-identical probabilities, and the new metadata visible to it;
refdump judges the file (only the intended KVs changed, tensors byte for
byte).  While mounted, llama.cpp also loads the live view MNT/NAME.gguf.
Finally a math-changing edit (RMS-norm epsilon) is committed the same way:
refdump shows it and llama.cpp's probabilities change, so the comparison
above can fail.

Environment (tests/meson.build): GGUFS, MKFIXTURE, REFDUMP, GGUFS_SRCDIR;
GGUFS_NO_SHARED_MODELS=1 uses the generated vocabulary even when the
shared one is present (as on a fresh clone).
Exit 0 pass, 1 fail, 77 skip (no FUSE, no node-llama-cpp, no ggml library).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_edit as E  # noqa: E402  (snapshots, the edit model, mounts)

Fail = J.Fail
PROMPT = [1, 450, 4996, 17354, 1701, 29916, 432, 17204]  # <s> The quick brown fox jumps over ...
N_GEN = 8
TEMPLATE = ("{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
            "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def node_modules():
    src = os.environ.get("GGUFS_SRCDIR", "")
    d = os.path.join(src, ".deps", "node_modules")
    if not src or not os.path.isfile(os.path.join(d, "node-llama-cpp", "package.json")):
        raise J.Skip("node-llama-cpp is not installed in %s (run dev/setup)" % d)
    if not shutil.which("node"):
        raise J.Skip("node is not installed")
    return d


def evaluate(mods, model, what):
    t0 = time.time()
    try:
        p = subprocess.run(["node", os.path.join(HERE, "llama_eval.mjs"), mods, model, json.dumps(PROMPT),
                            str(N_GEN)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           timeout=120)
    except subprocess.TimeoutExpired:
        raise Fail("%s: llama.cpp did not finish within 120 s" % what)
    err = p.stderr.decode(errors="replace").strip()
    if p.returncode == 3:
        raise J.Skip("node-llama-cpp cannot be loaded: " + err[-500:])
    if p.returncode != 0:
        raise Fail("%s: llama.cpp failed to load or run %s (status %d): %s" % (what, model, p.returncode, err[-1500:]))
    try:
        r = json.loads(p.stdout.decode())
    except ValueError:
        raise Fail("%s: llama_eval printed no JSON: %r" % (what, p.stdout[:500]))
    if len(r["tokens"]) != N_GEN or len(r["confidences"]) != N_GEN:
        raise Fail("%s: llama.cpp generated %d tokens, expected %d" % (what, len(r["tokens"]), N_GEN))
    J.log("     %s: %s %r (%.1fs)" % (what, r["tokens"], r["text"], time.time() - t0))
    return r


def make_model(model):
    """mkfixture's tiny llama at model, with the shared llama-spm
    vocabulary when there is one (else mkfixture's generated one)."""
    vocab = [s for s in J.shared_models() if os.path.basename(s) == "ggml-vocab-llama-spm.gguf"]
    p = subprocess.run([J.tool("MKFIXTURE"), "llama", model] + (["--vocab-from", vocab[0]] if vocab else []),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        raise Fail("mkfixture llama failed: %s" % p.stderr.decode(errors="replace"))


def same_math(a, b):
    return a["tokens"] == b["tokens"] and a["confidences"] == b["confidences"]


def main():
    J.require_fuse()
    mods = node_modules()
    src = os.environ.get("GGUFS_SRCDIR", "")
    vocab = os.path.normpath(os.path.join(src, "..", "shared", "models", "ggml-vocab-llama-spm.gguf"))
    vocab_args = []
    if os.environ.get("GGUFS_NO_SHARED_MODELS", "") not in ("", "0"):
        J.log("note: GGUFS_NO_SHARED_MODELS is set; vocabulary: mkfixture's generated one")
    elif src and os.path.isfile(vocab):
        vocab_args = ["--vocab-from", os.path.realpath(vocab)]
        J.log("note: vocabulary: the shared %s" % vocab)
    else:
        J.log("note: no shared vocabulary %s; vocabulary: mkfixture's generated one" % vocab)
    os.environ.pop("GGUFS_FAULT", None)
    tmp = tempfile.mkdtemp(prefix="ggufs-llama-", dir="/tmp")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    t_all = time.time()
    try:
        model = os.path.join(tmp, "tiny-llama.gguf")
        p = subprocess.run([J.tool("MKFIXTURE"), "llama", model] + vocab_args,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        if p.returncode != 0:
            raise Fail("mkfixture llama failed (%d): %s" % (p.returncode, p.stderr.decode(errors="replace")))
        before = E.snapshot(model)
        name0 = E.kv_of(before, b"general.name")
        if name0 is None:
            raise Fail("the generated model has no general.name")

        base = evaluate(mods, model, "original")
        if len(set(base["tokens"])) == 1:
            raise Fail("llama.cpp generates the same token %d %d times: too degenerate for the comparisons below"
                       % (base["tokens"][0], N_GEN))
        if base["name"] != name0[2][:-1].decode():
            raise Fail("llama.cpp reads general.name %r, ggml's reader %r" % (base["name"], name0[2]))

        # a shard set: llama.cpp runs the merged live view of a 3-way split
        shards_dir = os.path.join(tmp, "shards")
        os.mkdir(shards_dir)
        prefix = os.path.join(shards_dir, "tiny-llama")
        p = subprocess.run([J.tool("MKSPLIT"), model, prefix, "3"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        if p.returncode != 0:
            raise Fail("mksplit failed: %s" % p.stderr.decode(errors="replace"))
        first = prefix + "-00001-of-00003.gguf"
        with J.Watchdog(mnt, 300, "llama shard set"):
            with J.Mounted(first, mnt, args=["-o", "ro"]):
                merged = evaluate(mods, os.path.join(mnt, "tiny-llama.gguf"), "merged shard set")
        if not same_math(merged, base):
            raise Fail("llama.cpp on the merged live view of a 3-way split generates %s, originally %s "
                       "(or probabilities differ)" % (merged["tokens"], base["tokens"]))
        J.log("ok   llama.cpp on the merged live view of a 3-shard set: same greedy tokens and probabilities")

        # metadata edits that leave the math alone
        m = E.Model(before)
        with J.Watchdog(mnt, 300, "llama edits"):
            E.mount(model, mnt)
            try:
                meta = os.path.join(mnt, "meta")
                rc, out, err = E.sh("echo 'renamed through ggufs' > meta/general.name"
                                    " && echo 'edited by mount_llama' > meta/mytool.note", mnt)
                if rc != 0:
                    raise Fail("shell edits failed: %s" % err)
                m.value(b"general.name", E.sval(b"renamed through ggufs"))
                m.set(b"mytool.note", "string", E.sval(b"edited by mount_llama"))
                tpl = E.kv_of(before, b"tokenizer.chat_template")
                new_tpl = TEMPLATE.encode()
                if tpl is not None:
                    new_tpl = tpl[2][:-1].replace(b"message", b"msg")
                with open(os.path.join(meta, "tokenizer.chat_template"), "wb") as f:
                    f.write(new_tpl + b"\n")
                m.set(b"tokenizer.chat_template", "string", E.sval(new_tpl))
                live = os.path.join(mnt, os.path.basename(model))
                if os.path.exists(os.path.join(mnt, "meta")) and os.path.basename(model) in os.listdir(mnt):
                    lv = evaluate(mods, live, "live view while mounted")
                    if not same_math(lv, base):
                        raise Fail("llama.cpp on the live view %s: tokens %s, originally %s (or probabilities differ)"
                                   % (live, lv["tokens"], base["tokens"]))
                    if lv["name"] != "renamed through ggufs" or lv["note"] != "edited by mount_llama":
                        raise Fail("llama.cpp on the live view reads name %r, note %r" % (lv["name"], lv["note"]))
            except BaseException:
                E.cleanup_mounts(tmp)
                raise
            how = E.expect_commit("metadata edits", mnt, model, None)
        E.judge_commit("metadata edits of the llama model", model, before, m, msg_how=how)
        after = evaluate(mods, model, "after the commit (%s)" % how)
        if not same_math(after, base):
            again = evaluate(mods, model, "after the commit, again")
            raise Fail("after a metadata-only commit (%s) llama.cpp generates %s with probabilities %s; "
                       "originally %s with %s%s" % (how, after["tokens"], after["confidences"], base["tokens"],
                                                    base["confidences"],
                                                    "" if same_math(again, after) else
                                                    " (and a second run differs again: not deterministic?)"))
        for field, want in (("name", "renamed through ggufs"), ("note", "edited by mount_llama"),
                            ("chatTemplate", new_tpl.decode())):
            if after[field] != want:
                raise Fail("llama.cpp reads %s = %r from the committed file, expected %r" % (field, after[field], want))

        # a math-changing edit must be visible to both readers
        committed = E.snapshot(model)
        m2 = E.Model(committed)
        key = b"llama.attention.layer_norm_rms_epsilon"
        if E.kv_of(committed, key) is None:
            raise Fail("the generated model has no %s" % key.decode())
        with J.Watchdog(mnt, 300, "llama math edit"):
            E.mount(model, mnt)
            try:
                rc, out, err = E.sh("echo 1000 > meta/%s" % key.decode(), mnt)
                if rc != 0:
                    raise Fail("echo 1000 > meta/%s failed: %s" % (key.decode(), err))
            except BaseException:
                E.cleanup_mounts(tmp)
                raise
            how2 = E.expect_commit("epsilon edit", mnt, model, "inplace")
        m2.value(key, b"1000\n", (E.f32bits(1000.0),))
        E.judge_commit("epsilon edit of the llama model", model, committed, m2, "inplace", how2)
        changed = evaluate(mods, model, "after the epsilon edit")
        if same_math(changed, base):
            raise Fail("llama.cpp's output did not change after %s was set to 1000 (tokens %s): the comparison "
                       "above cannot tell edited math from unedited" % (key.decode(), changed["tokens"]))
        J.log("ok   metadata edits keep llama.cpp's greedy tokens and probabilities; the epsilon edit changes them "
              "(%.1fs)" % (time.time() - t_all))
    finally:
        E.cleanup_mounts(tmp)
        if not E.mounts_under(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    J.main(main)
