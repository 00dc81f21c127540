#!/usr/bin/env python3
"""Programs we did not write, reading through the mount.

- @huggingface/gguf (an independent JavaScript parser) parses the live view
  after an uncommitted edit and must report the same metadata and tensor
  infos as ggml's reader (refdump) does for the same bytes.
- numpy (Debian's python3-numpy) memmaps a tensor file and must get the same
  array as a memmap of the GGUF at the offset ggml reports.
(llama.cpp itself is the client of tests/mount_llama.py.)
"""
import json
import os
import shutil
import struct
import subprocess
import tempfile

import judge as J

NODE_MODULES = os.path.join(os.environ.get("GGUFS_SRCDIR", "."), ".deps", "node_modules")


def hf_dump(path):
    if not shutil.which("node") or not os.path.isdir(os.path.join(NODE_MODULES, "@huggingface", "gguf")):
        raise J.Skip("node or @huggingface/gguf is missing (run dev/setup)")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_dump.mjs")
    # ESM resolves packages from the script's location: run a copy in .deps.
    copy = os.path.join(os.path.dirname(NODE_MODULES), "hf_dump.mjs")
    shutil.copyfile(script, copy)
    p = subprocess.run(["node", copy, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0:
        raise J.Fail("@huggingface/gguf failed on %s: %s" % (path, p.stderr.decode(errors="replace")[-1000:]))
    return json.loads(p.stdout)


def compare_hf(path, label):
    ref = J.refdump(path)[1]
    hf = hf_dump(path)
    hkeys = [k for k, _ in hf["kv"]]
    rkeys = [kv.key.decode() for kv in ref.kvs]
    if hkeys != rkeys:
        raise J.Fail("%s: @huggingface/gguf keys %s, ggml keys %s" % (label, hkeys, rkeys))
    for (k, v), kv in zip(hf["kv"], ref.kvs):
        text = kv.content.decode("utf-8", "replace")
        if kv.type.startswith("array["):
            n = text.count("\n")
            if v != {"n": n}:
                raise J.Fail("%s: %s has %s elements for @huggingface/gguf, %d for ggml" % (label, k, v, n))
        elif kv.type in ("float32", "float64") and "nan" in text:
            if v != "NaN":  # JavaScript has one NaN: payloads are not comparable
                raise J.Fail("%s: %s = %s for @huggingface/gguf, %s for ggml" % (label, k, v, text.strip()))
        elif kv.type in ("float32", "float64"):
            f = "<f" if kv.type == "float32" else "<d"
            if struct.pack(f, float(v)) != struct.pack(f, float(text.strip())):
                raise J.Fail("%s: %s = %s for @huggingface/gguf, %s for ggml" % (label, k, v, text.strip()))
        elif kv.type == "bool":
            if v != text.strip():
                raise J.Fail("%s: %s = %s vs %s" % (label, k, v, text.strip()))
        elif v != text[:-1]:
            raise J.Fail("%s: %s = %r for @huggingface/gguf, %r for ggml" % (label, k, v, text[:-1]))
    if len(hf["tensors"]) != len(ref.tensors):
        raise J.Fail("%s: tensor counts differ" % label)
    d = int(hf["data_offset"])
    for (name, shape, off), t in zip(hf["tensors"], ref.tensors):
        if name.encode() != t.name or d + int(off) != t.offset:
            raise J.Fail("%s: tensor %s at %d for @huggingface/gguf, %r at %d for ggml"
                         % (label, name, d + int(off), t.name, t.offset))
        ne = [int(x) for x in shape] + [1] * (4 - len(shape))
        if ne != list(t.ne)[:4]:
            raise J.Fail("%s: tensor %s shape %s vs ggml %s" % (label, name, shape, t.ne))
    return len(ref.kvs), len(ref.tensors)


NUMPY = r"""
import sys, numpy as np
mnt_file, gguf, off, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
a = np.memmap(mnt_file, dtype=np.float32, mode="r")
b = np.memmap(gguf, dtype=np.float32, mode="r", offset=off, shape=(n,))
assert a.shape == b.shape, (a.shape, b.shape)
assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), "arrays differ"
print(a.shape[0], float(a[:16].sum()))
"""


def check_numpy(mnt, gguf, ref):
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", "import numpy"], stderr=subprocess.DEVNULL).returncode != 0:
        J.log("note: Debian's python3-numpy is missing; numpy check skipped")
        return 0
    n = 0
    for t in ref.tensors:
        if t.ggml_type != "f32":
            continue
        p = os.path.join(mnt, "tensors", J.escape_name(t.name).decode())
        r = subprocess.run([py, "-c", NUMPY, p, gguf, str(t.offset), str(t.size // 4)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise J.Fail("numpy.memmap of %s: %s" % (p, r.stderr.decode(errors="replace")[-800:]))
        n += 1
    return n


def run():
    J.require_fuse()
    d = tempfile.mkdtemp(prefix="ggufs-clients-")
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    try:
        fx = os.path.join(d, "fx")
        subprocess.run([J.tool("MKFIXTURE"), "all", fx], check=True, stdout=subprocess.DEVNULL)
        sources = [os.path.join(fx, "tensors.gguf"), os.path.join(fx, "types.gguf")]
        sources += [m for m in J.shared_models() if "tiny-llama" in m]
        for src in sources:
            g = os.path.join(d, os.path.basename(src))
            shutil.copyfile(src, g)
            ref = J.refdump(g)[1]
            with J.Mounted(g, mnt):
                nk, nt = compare_hf(os.path.join(mnt, os.path.basename(g)), "live view of " + g)
                with open(os.path.join(mnt, "meta", "general.name"), "w") as f:
                    f.write("edited, not committed\n")
                live = os.path.join(mnt, os.path.basename(g))
                compare_hf(live, "edited live view of " + g)
                if b"edited, not committed\n" not in [kv.content for kv in J.refdump(live)[1].kvs]:
                    raise J.Fail("ggml does not see the edit in the live view of %s" % g)
                nn = check_numpy(mnt, g, ref)
            J.log("ok: %s: @huggingface/gguf agrees with ggml on %d keys and %d tensors (before and after an "
                  "edit); numpy.memmap matches on %d f32 tensors" % (os.path.basename(g), nk, nt, nn))
    finally:
        J.cleanup(mnt, d)


if __name__ == "__main__":
    J.main(run)
