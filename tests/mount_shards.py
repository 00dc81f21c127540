#!/usr/bin/env python3
"""Shard sets through a real mount, judged by ggml's reference reader.

A fixture is split with tests/mksplit (the layout of llama.cpp's gguf-split)
into three shards; mounting the first shows every shard's tensors, the
first shard's metadata, and a live view that ggml reads as the merged file
(first shard's keys with split.count 0 moved last, all tensors with their
bytes); edits land in the first shard only; a missing or foreign shard is
refused with a message naming it.
"""
import hashlib
import os
import shutil
import subprocess
import tempfile

import judge as J


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tensor_bytes(path, t):
    with open(path, "rb") as f:
        f.seek(t.offset)
        return f.read(t.size)


def merged_name(first):
    """The live view of a set is named like the merged file: NAME.gguf."""
    b = os.path.basename(first)
    return b[:-len("-00001-of-00003.gguf")] + ".gguf"


def split(src, prefix, n):
    p = subprocess.run([J.tool("MKSPLIT"), src, prefix, str(n)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise J.Fail("mksplit failed: %s" % p.stderr.decode(errors="replace"))
    return ["%s-%05d-of-%05d.gguf" % (prefix, i + 1, n) for i in range(n)]


def check_set(shards, mnt, original):
    refs = [J.refdump(s)[1] for s in shards]
    for s, r in zip(shards, refs):
        if r is None:
            raise J.Fail("ggml rejects shard %s made by mksplit" % s)
    orig = J.refdump(original)[1]
    with J.Mounted(shards[0], mnt, args=["-o", "ro"]):
        names = sorted(os.listdir(os.path.join(mnt, "tensors").encode()))
        want = sorted(J.escape_name(t.name) for r in refs for t in r.tensors)
        if names != want:
            raise J.Fail("tensors/ of the set lists %s, expected %s" % (names[:5], want[:5]))
        for s, r in zip(shards, refs):
            for t in r.tensors:
                p = os.path.join(mnt.encode(), b"tensors", J.escape_name(t.name))
                with open(p, "rb") as f:
                    got = f.read()
                if got != tensor_bytes(s, t):
                    raise J.Fail("tensor %r differs from its bytes in %s" % (t.name, s))
                if J.xattr(p, "user.gguf.offset") != str(t.offset).encode():
                    raise J.Fail("tensor %r: user.gguf.offset %r, ggml says %d in %s"
                                 % (t.name, J.xattr(p, "user.gguf.offset"), t.offset, s))
                if J.xattr(p, "user.gguf.file") != os.path.realpath(s).encode():
                    raise J.Fail("tensor %r: user.gguf.file %r, expected %s"
                                 % (t.name, J.xattr(p, "user.gguf.file"), s))
        metas = sorted(os.listdir(os.path.join(mnt, "meta").encode()))
        want_meta = sorted(J.escape_name(kv.key) for kv in refs[0].kvs)
        if metas != want_meta:
            raise J.Fail("meta/ of the set is %s, expected the first shard's keys %s" % (metas, want_meta))
        live = os.path.join(mnt, merged_name(shards[0]))
        out = os.path.join(os.path.dirname(mnt), "merged.gguf")
        shutil.copyfile(live, out)
    verdict, m = J.refdump(out)
    if m is None:
        raise J.Fail("ggml rejects the merged live view of the set")
    # What gguf-split --merge writes: the first shard's keys, split.count
    # set to 0 (ggml's set moves it last), then every tensor.
    want_keys = [kv.key for kv in refs[0].kvs if kv.key != b"split.count"] + [b"split.count"]
    got_keys = [kv.key for kv in m.kvs]
    if got_keys != want_keys:
        raise J.Fail("merged view keys %s, expected %s" % (got_keys, want_keys))
    sc = [kv for kv in m.kvs if kv.key == b"split.count"][0]
    if sc.type != "uint16" or sc.content != b"0\n":
        raise J.Fail("merged view split.count is %s %r, expected uint16 0" % (sc.type, sc.content))
    for a, b in zip(refs[0].kvs, m.kvs):
        if a.key != b"split.count" and a.key == b.key and (a.type, a.content) != (b.type, b.content):
            raise J.Fail("merged view changed key %r" % a.key)
    if [t.name for t in m.tensors] != [t.name for t in orig.tensors]:
        raise J.Fail("merged view tensor order differs from the original")
    for t, o in zip(m.tensors, orig.tensors):
        if (t.ggml_type, t.ne, t.size) != (o.ggml_type, o.ne, o.size):
            raise J.Fail("merged view tensor %r info differs" % t.name)
        if tensor_bytes(out, t) != tensor_bytes(original, o):
            raise J.Fail("merged view tensor %r bytes differ from the original" % t.name)
    return len(m.tensors)


def check_edit(shards, mnt):
    before = [sha(s) for s in shards]
    with J.Mounted(shards[0], mnt):
        with open(os.path.join(mnt, "meta", "general.name"), "w") as f:
            f.write("sharded edit\n")
        live = os.path.join(mnt, merged_name(shards[0]))
        out = os.path.join(os.path.dirname(mnt), "merged-edited.gguf")
        shutil.copyfile(live, out)
        m = J.refdump(out)[1]
        names = [kv for kv in m.kvs if kv.key == b"general.name"]
        if not names or names[0].content != b"sharded edit\n":
            raise J.Fail("the merged live view does not show the uncommitted edit")
    r = J.refdump(shards[0])[1]
    names = [kv for kv in r.kvs if kv.key == b"general.name"]
    if not names or names[0].content != b"sharded edit\n":
        raise J.Fail("the edit did not land in the first shard")
    for s, h in zip(shards[1:], before[1:]):
        if sha(s) != h:
            raise J.Fail("committing an edit changed %s, which is not the first shard" % s)


def check_refusals(src, d, mnt):
    shards = split(src, os.path.join(d, "miss"), 3)
    os.unlink(shards[1])
    p = J.run_ggufs([shards[0], mnt])
    err = p.stderr.decode(errors="replace").strip()
    if p.returncode == 0 or len(err.splitlines()) != 1 or os.path.basename(shards[1]) not in err:
        if p.returncode == 0:
            J.unmount(mnt)
        raise J.Fail("missing shard: status %d, stderr %r (expected one line naming %s)"
                     % (p.returncode, err, shards[1]))
    # A foreign shard: the second file of a 2-way split put in place of the
    # second file of a 3-way split.
    three = split(src, os.path.join(d, "mix"), 3)
    two = split(src, os.path.join(d, "other"), 2)
    shutil.copyfile(two[1], three[1])
    p = J.run_ggufs([three[0], mnt])
    err = p.stderr.decode(errors="replace").strip()
    if p.returncode == 0 or len(err.splitlines()) != 1 or os.path.basename(three[1]) not in err:
        if p.returncode == 0:
            J.unmount(mnt)
        raise J.Fail("foreign shard: status %d, stderr %r (expected one line naming %s)"
                     % (p.returncode, err, three[1]))
    p = J.run_ggufs([three[2], mnt])
    err = p.stderr.decode(errors="replace").strip()
    if p.returncode == 0 or "first shard" not in err:
        if p.returncode == 0:
            J.unmount(mnt)
        raise J.Fail("mounting shard 3 of 3: status %d, stderr %r" % (p.returncode, err))


def run():
    J.require_fuse()
    d = tempfile.mkdtemp(prefix="ggufs-shards-")
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    try:
        fx = os.path.join(d, "fx")
        subprocess.run([J.tool("MKFIXTURE"), "all", fx], check=True, stdout=subprocess.DEVNULL)
        sources = [os.path.join(fx, "tensors.gguf")]
        sources += [m for m in J.shared_models() if "tiny-llama" in m]
        for src in sources:
            shards = split(src, os.path.join(d, os.path.basename(src)[:-5]), 3)
            n = check_set(shards, mnt, src)
            check_edit(shards, mnt)
            J.log("ok: %s split in 3: %d tensors, merged view accepted by ggml, edit lands in shard 1"
                  % (os.path.basename(src), n))
        check_refusals(sources[0], d, mnt)
        J.log("ok: missing, foreign and non-first shards refused with one line naming the shard")
    finally:
        J.cleanup(mnt, d)


if __name__ == "__main__":
    J.main(run)
