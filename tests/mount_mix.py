#!/usr/bin/env python3
"""mount_mix: models mixed from several files (-o mix=RECIPE, issue 24).

A base (mkfixture llama: f32 weights) and donors written by ggml's own
writer (tests/mixref.py: some tensors scaled and stored as q8_0 or f16; one
of them split into a 3-shard set by mksplit).  A recipe takes tensors from
them (a comment, a blank line, two rules matching one tensor: the last
wins).  Judged:
  - ggml's reader (refdump) accepts the live view; each tensor's type,
    shape and bytes are those of the file the recipe names (read from that
    file at ggml's offsets); the others are the base's;
  - the live view is byte for byte the file ggml's writer makes of the same
    mix (mixref.py mix: gguf_init_empty, gguf_set_kv, gguf_add_tensor,
    gguf_write_to_file), and llama.cpp (node-llama-cpp, when installed)
    gives the same tokens and probabilities on both, different from the
    base's;
  - tensors/ and f32/ show the sources' bytes; index.tsv's SOURCE column and
    user.gguf.source name each tensor's file and offset;
  - refusals, each one line naming what is wrong and nothing mounted: a
    source without a tensor a rule matches, one with another shape (both
    files and both shapes named), a bad regex (file:line), a missing
    source;
  - the base and the sources are only read (bytes and mtimes unchanged); a
    metadata edit of the mix goes to its overlay: shown by the next mount of
    the mix, not by the base mounted alone;
  - cp of the live view materialises the mix: ggml reads the copy as the
    view.
Exit 0 pass, 1 fail, 77 skip (no FUSE, no ggml library).
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402

Fail = J.Fail


def run(args, what, timeout=300):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if p.returncode == 77:
        raise J.Skip("%s: %s" % (what, p.stderr.decode(errors="replace").strip()))
    if p.returncode != 0:
        raise Fail("%s failed (%d): %s" % (what, p.returncode, p.stderr.decode(errors="replace")))
    return p


def mixref(*args):
    return run([sys.executable, os.path.join(HERE, "mixref.py")] + list(args), "mixref " + args[0])


def tensors_of(path):
    verdict, ref = J.refdump(path)
    if verdict != "ggml-accepts":
        raise Fail("ggml rejects %s" % path)
    return {t.name.decode(errors="surrogateescape"): t for t in ref.tensors}, ref


def tensor_bytes(path, t):
    with open(path, "rb") as f:
        f.seek(t.offset)
        return f.read(t.size)


def stamp(paths):
    return {p: (os.stat(p).st_mtime_ns, hashlib.sha256(open(p, "rb").read()).hexdigest()) for p in paths}


def check_mix(ck, live, base, picks):
    """picks: tensor name -> the file it must come from (else the base)."""
    got, _ = tensors_of(live)
    want_base, _ = tensors_of(base)
    if list(got) != list(want_base):
        ck.bad("the view's tensors %s are not the base's %s in order" % (list(got)[:5], list(want_base)[:5]))
    srcs = {}
    for name, t in got.items():
        src = picks.get(name, base)
        if src not in srcs:
            srcs[src] = tensors_of(src)[0]
        s = srcs[src][name]
        ck.eq("%s: type" % name, s.ggml_type, t.ggml_type)
        ck.eq("%s: shape" % name, s.ne, t.ne)
        if tensor_bytes(src, s) != tensor_bytes(live, t):
            ck.bad("%s: the view's bytes are not those of %s" % (name, src))
    return got, srcs


def refuse(ck, base, mnt, recipe_text, rdir, want, what):
    rp = os.path.join(rdir, "bad.recipe")
    with open(rp, "w") as f:
        f.write(recipe_text)
    p = J.run_ggufs(["-o", "mix=" + rp, base, mnt])
    err = p.stderr.decode(errors="replace").strip()
    if p.returncode == 0 or J.mountinfo_entry(mnt) is not None:
        J.unmount(mnt, [])
        ck.bad("%s: mounted (status %d)" % (what, p.returncode))
        return
    lines = [ln for ln in err.split("\n") if ln]
    if len(lines) != 1 or not all(w in lines[0] for w in want):
        ck.bad("%s: expected one line naming %s, got %r" % (what, want, err))
    else:
        J.log("ok   refused, %s: %s" % (what, lines[0]))


def written_tensor(ck, tmp, mnt, base, recipe, files):
    """A tensor of a mix taken from a source, written whole through tensors/
    (cp): kept in the mix's overlay (here -o overlay=PATH), shown by the
    next mount of the mix; the base and the sources unchanged."""
    before = stamp(files)
    ov = os.path.join(tmp, "mix-ov.gguf")
    name = "blk.1.ffn_up.weight"  # from donor-q8 by the recipe
    with J.Mounted(base, mnt, args=["-o", "mix=" + recipe, "-o", "overlay=" + ov]):
        t = os.path.join(mnt, "tensors", name)
        newb = os.urandom(os.path.getsize(t))
        with open(t, "wb") as f:
            f.write(newb)
        ck.eq("tensors/%s of a mix after cp" % name, newb, open(t, "rb").read())
    with J.Mounted(base, mnt, args=["-o", "mix=" + recipe + ",ro", "-o", "overlay=" + ov]):
        got, _ = tensors_of(os.path.join(mnt, "base.gguf"))
        ck.eq("the mix's live view after a remount: %s" % name, newb,
              region(os.path.join(mnt, "base.gguf"), got[name]))
    ck.eq("stamps of the base and sources after a tensor of the mix was written", before,
          stamp(files))
    J.log("ok   a tensor of a mix written by cp: kept in the mix's overlay, the files unchanged")


def region(path, t):
    with open(path, "rb") as f:
        f.seek(t.offset)
        return f.read(t.size)


def many_sources(ck, tmp, mnt):
    """A recipe over a set of mount_fds.N one-tensor shards, mounted with a
    soft limit of 256 descriptors: every tensor read back as the shard
    holds it, and at most 64 descriptors in the daemon meanwhile."""
    import mount_fds as F
    d = os.path.join(tmp, "many")
    os.mkdir(d)
    shards = F.make_set(d, "many", F.N)
    base = os.path.join(tmp, "many-base.gguf")
    with J.Mounted(shards[0], mnt, args=["-o", "ro"]):
        shutil.copyfile(os.path.join(mnt, "many.gguf"), base)
    rp = os.path.join(tmp, "many.recipe")
    with open(rp, "w") as f:
        f.write(".* many/many-00001-of-%05d.gguf\n" % F.N)
    p = J.run_ggufs(["-o", "mix=" + rp + ",ro", base, mnt], timeout=300, preexec_fn=F.soft_limit)
    if p.returncode != 0:
        raise Fail("a mix over %d shards does not mount with a soft limit of %d: %s"
                   % (F.N, F.SOFT, p.stderr.decode(errors="replace").strip()[-400:]))
    try:
        pid = J._procs_for(mnt)[0]
        sampler = F.FdSampler(pid)
        sampler.start()
        bad = 0
        try:
            for k in range(F.N):
                t = open(os.path.join(mnt, "tensors", "blk.%d.w" % k), "rb").read()
                bad += t != F.data_of(k)
        finally:
            sampler.stop.set()
            sampler.join()
        if bad:
            ck.bad("a mix over %d shards: %d tensors differ from their shards" % (F.N, bad))
        if sampler.most > 64:
            ck.bad("a mix over %d shards: the daemon held %d descriptors (at most 64)" % (F.N, sampler.most))
        J.log("ok   a mix over a %d-shard set under a soft limit of %d: every tensor read, at most %d "
              "descriptors in the daemon" % (F.N, F.SOFT, sampler.most))
    finally:
        J.unmount(mnt)


def remote_source(ck, tmp, mnt, base, donor):
    """A source by URL (nginx on 127.0.0.1): the mixed tensors are the
    donor's bytes, fetched through the block cache."""
    import webserver as W
    if not W.exe():
        J.log("note: nginx is not installed: the remote source is not tried (dev/setup --tests)")
        return
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    os.chmod(tmp, 0o755)
    shutil.copyfile(donor, os.path.join(www, "donor.gguf"))
    ngx = W.Nginx(os.path.join(tmp, "nginx"), www)
    try:
        url = ngx.url("donor.gguf")
        rp = os.path.join(tmp, "remote.recipe")
        with open(rp, "w") as f:
            f.write("blk\\.1\\.ffn_(gate|up|down)\\.weight %s\n" % url)
        picks = {n: donor for n in ("blk.1.ffn_gate.weight", "blk.1.ffn_up.weight", "blk.1.ffn_down.weight")}
        with J.Mounted(base, mnt, args=["-o", "mix=" + rp + ",ro", "-o", "cache=" + os.path.join(tmp, "cache")]):
            check_mix(ck, os.path.join(mnt, "base.gguf"), base, picks)
            dt = tensors_of(donor)[0]["blk.1.ffn_up.weight"]
            ck.eq("user.gguf.source of a tensor taken by URL", ("%s@%d" % (url, dt.offset)).encode(),
                  J.xattr(os.path.join(mnt, "tensors", "blk.1.ffn_up.weight"), "user.gguf.source"))
        J.log("ok   a source by URL (%s): the mixed view's tensors are the donor's" % url)
    finally:
        ngx.stop()


def main():
    J.require_fuse()
    tmp = tempfile.mkdtemp(prefix="ggufs-mix-", dir="/tmp")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    ck = J.Checker("mix")
    try:
        base = os.path.join(tmp, "base.gguf")
        run([J.tool("MKFIXTURE"), "llama", base], "mkfixture llama")
        d1 = os.path.join(tmp, "donor-q8.gguf")
        d2 = os.path.join(tmp, "donor-f16.gguf")
        mixref("donor", base, d1, "q8_0", r"blk\.1\.ffn_(gate|up|down)\.weight|blk\.0\.ffn_up\.weight")
        mixref("donor", base, d2, "f16", r"blk\.[0-9]+\.attn_[qk]\.weight|blk\.0\.ffn_down\.weight")
        os.mkdir(os.path.join(tmp, "set"))
        run([J.tool("MKSPLIT"), d2, os.path.join(tmp, "set", "d2"), "3"], "mksplit")
        d2set = os.path.join(tmp, "set", "d2-00001-of-00003.gguf")
        recipe = os.path.join(tmp, "recipe")
        with open(recipe, "w") as f:
            f.write("# the donor's feed-forward of layer 1, the attention's q and k of all\n\n"
                    "blk\\.1\\.ffn_up\\.weight donor-f16.gguf\n"  # d2 has it too, but ...
                    "blk\\.1\\.ffn_(gate|up|down)\\.weight   " + d1 + "\n"  # ... the last rule wins
                    "blk\\.[0-9]+\\.attn_[qk]\\.weight\tset/d2-00001-of-00003.gguf\n"
                    "blk\\.0\\.ffn_down\\.weight donor-f16.gguf\n")
        btensors, _ = tensors_of(base)
        picks = {}
        for n in btensors:
            if n in ("blk.1.ffn_gate.weight", "blk.1.ffn_up.weight", "blk.1.ffn_down.weight"):
                picks[n] = d1
            if n.startswith("blk.") and (n.endswith("attn_q.weight") or n.endswith("attn_k.weight")):
                picks[n] = d2  # the set's tensors: the same bytes as d2's
        picks["blk.0.ffn_down.weight"] = d2
        rules = [d2, r"blk\.1\.ffn_up\.weight", d1, r"blk\.1\.ffn_(gate|up|down)\.weight",
                 d2, r"blk\.[0-9]+\.attn_[qk]\.weight", d2, r"blk\.0\.ffn_down\.weight"]
        ref = os.path.join(tmp, "ref-mix.gguf")
        mixref("mix", base, ref, *rules)
        before = stamp([base, d1, d2, d2set])

        with J.Watchdog(mnt, 300, "mix"):
            with J.Mounted(base, mnt, args=["-o", "mix=" + recipe]):
                live = os.path.join(mnt, "base.gguf")
                got, srcs = check_mix(ck, live, base, picks)
                if open(live, "rb").read() != open(ref, "rb").read():
                    ck.bad("the live view differs from ggml's writer's file of the same mix")
                else:
                    J.log("ok   the live view is byte for byte ggml's writer's mix (%d bytes)" % os.path.getsize(ref))
                # tensors/, index.tsv, user.gguf.source
                for name, t in got.items():
                    src = picks.get(name, base)
                    st = srcs[src][name]
                    tb = open(os.path.join(mnt, "tensors", name), "rb").read()
                    if tb != tensor_bytes(src, st):
                        ck.bad("tensors/%s: not the bytes of %s" % (name, src))
                    want_src = "%s@%d" % (os.path.realpath(src), st.offset)
                    if name.startswith("blk.0.attn_q"):
                        # the set: its shard's own offset
                        gs = J.xattr(os.path.join(mnt, "tensors", name), "user.gguf.source").decode()
                        if "/set/d2-0000" not in gs:
                            ck.bad("tensors/%s: user.gguf.source %r names no shard of the set" % (name, gs))
                        continue
                    if src != d2:
                        ck.eq("tensors/%s user.gguf.source" % name, want_src.encode(),
                              J.xattr(os.path.join(mnt, "tensors", name), "user.gguf.source"))
                idx = open(os.path.join(mnt, "index.tsv")).read().splitlines()
                for line in idx:
                    f = line.split("\t")
                    src = picks.get(f[0], base)
                    if len(f) != 5 or (src != d2 and f[4] != os.path.realpath(src)):
                        ck.bad("index.tsv: %r: no SOURCE column naming %s" % (line, src), "index")
                # hashes: of the source's bytes
                for name in ("blk.1.ffn_up.weight", "blk.0.attn_q.weight", "token_embd.weight"):
                    src = picks.get(name, base)
                    want = hashlib.sha256(tensor_bytes(src, srcs[src][name])).hexdigest().encode()
                    ck.eq("tensors/%s user.gguf.sha256" % name, want,
                          J.xattr(os.path.join(mnt, "tensors", name), "user.gguf.sha256"))
                # f32/ of a q8_0 tensor: ggml's dequantisation of the donor's
                # (mount_views judges the donor's own f32/ against ggml)
                f32 = open(os.path.join(mnt, "f32", "blk.1.ffn_down.weight"), "rb").read()
                dmnt = os.path.join(tmp, "dmnt")
                os.mkdir(dmnt)
                with J.Mounted(d1, dmnt, args=["-o", "ro"]):
                    want = open(os.path.join(dmnt, "f32", "blk.1.ffn_down.weight"), "rb").read()
                t = got["blk.1.ffn_down.weight"]
                if f32 != want or len(want) != 4 * t.ne[0] * t.ne[1]:
                    ck.bad("f32/blk.1.ffn_down.weight: not the donor's values (%d bytes, %d)"
                           % (len(f32), len(want)))
                # a metadata edit goes to the mix's overlay
                with open(os.path.join(mnt, "meta", "general.name"), "w") as f:
                    f.write("mixed\n")
                # materialised by cp
                cp = os.path.join(tmp, "mixed.gguf")
                shutil.copyfile(live, cp)
            tensors_of(cp)
            check_mix(ck, cp, base, picks)
            ck.eq("stamps of the base and sources", before, stamp([base, d1, d2, d2set]))
            with J.Mounted(base, mnt, args=["-o", "mix=" + recipe + ",ro"]):
                ck.eq("the mix's general.name after remount", "mixed\n",
                      open(os.path.join(mnt, "meta", "general.name")).read())
            with J.Mounted(base, mnt, args=["-o", "ro"]):
                if open(os.path.join(mnt, "meta", "general.name")).read() == "mixed\n":
                    ck.bad("the base mounted alone shows the mix's edit")

            # llama.cpp: the live view and ggml's own mix give the same math
            mods = os.path.join(os.environ.get("GGUFS_SRCDIR", ""), ".deps", "node_modules")
            if os.path.isfile(os.path.join(mods, "node-llama-cpp", "package.json")) and shutil.which("node"):
                import mount_llama as L
                with J.Mounted(base, mnt, args=["-o", "mix=" + recipe + ",ro"]):
                    a = L.evaluate(mods, os.path.join(mnt, "base.gguf"), "mixed live view")
                b = L.evaluate(mods, ref, "ggml's mix")
                c = L.evaluate(mods, base, "the base")
                if not L.same_math(a, b):
                    ck.bad("llama.cpp: the live view gives %s, ggml's mix %s (or probabilities differ)"
                           % (a["tokens"], b["tokens"]))
                elif L.same_math(a, c):
                    ck.bad("llama.cpp: the mix computes exactly what the base does: the test cannot tell")
                else:
                    J.log("ok   llama.cpp: the mixed view and ggml's mix give the same tokens %s and "
                          "probabilities (the base: %s)" % (a["tokens"], c["tokens"]))
            else:
                J.log("note: node-llama-cpp is not installed: llama.cpp's comparison skipped")

            remote_source(ck, tmp, mnt, base, d1)
            many_sources(ck, tmp, mnt)

            # refusals
            other = os.path.join(tmp, "wide.gguf")
            run([J.tool("MKFIXTURE"), "llama", other, "--embd", "128"], "mkfixture llama --embd 128")
            shape = lambda t: "[%s]" % ",".join(str(x) for x in t.ne[:2])  # noqa: E731
            refuse(ck, base, mnt, "blk\\.0\\.attn_q\\.weight %s\n" % other, tmp,
                   ["blk.0.attn_q.weight", base, other, shape(btensors["blk.0.attn_q.weight"]),
                    shape(tensors_of(other)[0]["blk.0.attn_q.weight"])], "another shape")
            few = os.path.join(tmp, "few.gguf")
            run([J.tool("MKFIXTURE"), "tensors", few], "mkfixture tensors")
            refuse(ck, base, mnt, "nope\\.weight %s\nblk\\.0\\.ffn_up\\.weight %s\n" % (base, few), tmp,
                   ["blk.0.ffn_up.weight", few, "no such tensor"], "a tensor missing from the source")
            refuse(ck, base, mnt, "# x\nblk(\\.0 %s\n" % d1, tmp, ["bad.recipe:2"], "a bad regex")
            refuse(ck, base, mnt, "blk\\.0\\.ffn_up\\.weight missing.gguf\n", tmp,
                   ["bad.recipe:1", "missing.gguf"], "a missing source")
            refuse(ck, "http://127.0.0.1:9/base.gguf", mnt, "blk\\.0\\.ffn_up\\.weight %s\n" % d1, tmp,
                   ["http://127.0.0.1:9/base.gguf", "-o mix needs a local base"], "a remote base")
            written_tensor(ck, tmp, mnt, base, recipe, [base, d1, d2, d2set])
        ck.done()
    finally:
        J.cleanup(mnt, tmp)


if __name__ == "__main__":
    J.main(main)
