#!/usr/bin/env python3
"""Issue 26: MNT/tokenizer/ (tokens.tsv, special, merges.txt) on real
mounts, judged by ggml's reading of the metadata (tests/refdump): every
fixture of `mkfixture all`, a fixture with a vocabulary and merges, and the
real vocabularies of ../shared/models (or $GGUFS_SHARED_MODELS) when
present.  The expected texts are made here from ggml's reading (ids, token
texts as refdump renders string elements, type names from llama.cpp's enum
llama_token_type, scores by their bits), never by ggufs's code.

Then the edits: meta/tokenizer.ggml.eos_token_id changed, add_eos set, the
merges removed: tokenizer/ shows them while pending (judged against ggml's
reading of the live view) and after the commit (of the file)."""
import os
import shutil
import subprocess
import tempfile

import judge as J
import mount_edit as E

Fail = J.Fail
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


def sec_read(d, files):
    mnt = os.path.join(d, "mnt")
    n = nfiles = 0
    for src in files:
        if J.refdump(src)[0] != "ggml-accepts":
            continue
        E.mount(src, mnt, ["-o", "ro"])
        try:
            nfiles += check(os.path.basename(src), mnt, src)
        finally:
            J.unmount(mnt, [])
        n += 1
    J.log("ok   tokenizer/ of %d models (%d files) against ggml's reading" % (n, nfiles))


def sec_edit(d, voc):
    path = shutil.copy(voc, os.path.join(d, "edited.gguf"))
    mnt = os.path.join(d, "mnt")
    E.mount(path, mnt)
    try:
        m = os.path.join(mnt, "meta")
        before = open(os.path.join(mnt, "tokenizer", "special"), "rb").read()
        E.write_file(os.path.join(m, "tokenizer.ggml.eos_token_id"), b"7\n")
        E.write_file(os.path.join(m, "tokenizer.ggml.add_eos_token"), b"true\n",
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.unlink(os.path.join(m, "tokenizer.ggml.merges"))
        after = open(os.path.join(mnt, "tokenizer", "special"), "rb").read()
        if b"\neos\t7\t" not in after or after == before:
            raise Fail("tokenizer/special after the edit of eos: %r" % after)
        check("after edits (pending)", mnt, os.path.join(mnt, "edited.gguf"))
    finally:
        J.unmount(mnt, [])
    E.mount(path, mnt, ["-o", "ro"])
    try:
        check("after edits (committed)", mnt, path)
    finally:
        J.unmount(mnt, [])
    J.log("ok   tokenizer/ follows the edits of meta/, pending and committed")


def main():
    J.require_fuse()
    if not os.environ.get("XDG_STATE_HOME"):
        raise Fail("XDG_STATE_HOME must be set (run through meson test)")
    root = tempfile.mkdtemp(prefix="ggufs-tok-", dir="/var/tmp")
    try:
        files, voc = fixtures(root)
        real = shared()
        if not any("vocab" in os.path.basename(f) for f in real):
            J.log("note: no real vocabulary (ggml-vocab-*.gguf) present; their checks skipped")
        sec_read(root, files + real)
        sec_edit(root, voc)
    finally:
        J.cleanup(os.path.join(root, "mnt"), root)


if __name__ == "__main__":
    J.main(main)
