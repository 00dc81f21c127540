#!/usr/bin/env python3
"""Issue 36: hf/tokenizer.json of an RWKV vocabulary (tokenizer.ggml.model
"rwkv"), on real mounts.

llama.cpp's RWKV tokenizer is a greedy longest match over a trie of the
unescaped token bytes; hf/tokenizer.json says it as ByteLevel without a
split and WordPiece with no prefix over the ByteLevel texts.  No RWKV
vocabulary ships with llama.cpp (its models/ggml-vocab-*.gguf), so the
test makes one as convert_hf_to_gguf.py's _set_vocab_rwkv_world writes
it: "<s>" (control) first, then each token's bytes as Python's repr of
them without b'' (\\xNN, \\t, \\n, \\r, \\\\, \\'), here all 256 single
bytes and multi-byte tokens (words, runs of spaces and newlines, CJK,
Arabic, Devanagari, Thai, emoji ZWJ parts, halves of UTF-8 sequences,
quotes and backslashes).  Judged as every vocabulary
(tests/mount_hfvocab.py judge: llama.cpp via node-llama-cpp on the GGUF,
transformers.js on the mounted hf/, the issue's stress corpus and the
special token's text, plain and framed), once with llama.cpp's defaults
(no BOS, no EOS) and once with add_bos_token.  A vocabulary without a
token for byte 0x00, or with a \\x escape that is not two digits 0-9a-f,
has no file and hf/README says which.
"""
import os
import re
import tempfile

import judge as J
import mount_edit as E
import mount_hffiles as H
import mount_hfvocab as V

Fail = J.Fail
STR, U32, F32, ARR, I32, BOOL = H.STR, H.U32, H.F32, H.ARR, H.I32, H.BOOL

WORDS = ["the", " the", "Hello", " world", "wor", "world", "\n\n", "  ", "    ", "\n\n\n", "123", "12", "1234",
         "'s", "'S", "I'M", " I", "YOU'RE", "漢字", "漢", "字", "こんにちは", "カタカナ", "مرحبا", "ا", "नमस्ते",
         "สวัสดี", "\r\n", "\t\t", "a'b\"c", "👨\u200d👩", "\u200d", "<s>x", "s>", " <", "ab", "abc", "abcd"]
HALVES = [b"\xe6\xbc", b"\xf0\x9f", b"\xf0\x9f\x91", b"\x80\x80", b"\xff\xfe"]


def rwkv_kvs(drop=None, add_bos=None, raw=()):
    """The vocabulary as the converter writes it (drop: a byte with no
    token of its own; raw: texts appended as they are)."""
    byts = [b"<s>"] + [bytes([i]) for i in range(256) if i != drop]
    for m in [w.encode() for w in WORDS] + HALVES:
        if m not in byts:
            byts.append(m)
    toks = ["<s>"] + [repr(t)[2:-1] for t in byts[1:]] + list(raw)
    kvs = H.llama_kvs("rwkv") + [
           ("tokenizer.ggml.tokens", ARR, (STR, toks)),
           ("tokenizer.ggml.token_type", ARR, (I32, [3] + [1] * (len(toks) - 1))),
           ("tokenizer.ggml.bos_token_id", U32, 0), ("tokenizer.ggml.eos_token_id", U32, 0)]
    if add_bos is not None:
        kvs.append(("tokenizer.ggml.add_bos_token", BOOL, add_bos))
    return kvs


CORPUS = V.CORPUS + [" <s> ", "<s>x<s>", "a'b\"c\\d \\x41 \\n", "\u00ff\u00fe", "abcabcdab", "漢字漢 字字",
                     "  \n\n\n\n   world"]


def main():
    J.require_fuse()
    if not os.environ.get("XDG_STATE_HOME"):
        raise Fail("XDG_STATE_HOME must be set (run through meson test)")
    mods, _ = V.node_ok()
    root = tempfile.mkdtemp(prefix="ggufs-hfrwkv-", dir="/var/tmp")
    try:
        for label, kvs in (("rwkv", rwkv_kvs()), ("rwkv add_bos", rwkv_kvs(add_bos=1))):
            path = os.path.join(root, label.replace(" ", "-") + ".gguf")
            H.write(path, kvs)
            if not V.judge(mods, label, path, CORPUS, root):
                raise Fail("%s: no hf/tokenizer.json" % label)
        for label, kvs, why in (("no byte 0x00", rwkv_kvs(drop=0), rb"byte 0x00 is no token"),
                                ("\\xZ1", rwkv_kvs(raw=["a\\xZ1"]), rb"token \d+ has a \\x escape")):
            path = os.path.join(root, "rwkv-absent.gguf")
            H.write(path, kvs)
            mnt = os.path.join(root, "mnt")
            E.mount(path, mnt, ["-o", "ro"])
            try:
                _, names, readme = V.hf_of(mnt)
                if "tokenizer.json" in names or not re.search(
                        rb"^tokenizer\.json: absent: RWKV: .*" + why, readme, re.M):
                    raise Fail("rwkv with %s: hf/ %r, README %r" % (label, names, readme))
            finally:
                J.unmount(mnt, [])
        J.log("ok   RWKV: hf/tokenizer.json gives llama.cpp's ids on %d lines, plain and framed (defaults and "
              "add_bos); absent with the reason for a byte with no token, a bad \\x escape" % len(CORPUS))
    finally:
        J.cleanup(os.path.join(root, "mnt"), root)


if __name__ == "__main__":
    J.main(main)
