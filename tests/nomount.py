#!/usr/bin/env python3
"""Issue 37: `ggufs get|set|ls|tensors FILE` with no mount, judged by
ggml's reader (tests/refdump), never by ggufs's own output:

- ls is meta.tsv as ggml reads the file (judge.expected_meta_tsv), get of
  every key its text (judge.expected_tree's), tensors is index.tsv (name,
  ggml's type name, shape, bytes of every tensor ggml reads);
- set: several keys in one commit (numbers, strings, a new key with a
  type, a value from @FILE and from @- (stdin), a removal): ggml reads the
  new values and the same tensor bytes, exit 0;
- refusals as meta/ refuses them, nothing written (the file's bytes
  unchanged): text that is not the key's type (1), a protected key (1), a
  name that is not a key (1), a missing @FILE (1); usage errors (2); a
  model locked by a mount (1);
- -o overlay: the edits go to the overlay, the model's bytes unchanged,
  `get -o overlay` shows them;
- all of it with /dev/fuse unavailable to the process (a private mount
  namespace with /dev/null bound over /dev/fuse), as in a container.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import judge as J

Fail = J.Fail
INNER = "--inner"


def run(args, stdin=None):
    p = subprocess.run([J.tool("GGUFS")] + args, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def expect(what, got, want):
    if got != want:
        raise Fail("%s: got %r, expected %r" % (what, J.shorten(got), J.shorten(want)))


def check_show(path):
    verdict, ref = J.refdump(path)
    if verdict != "ggml-accepts":
        raise Fail("ggml rejects the fixture %s" % path)
    walk = J.walk_gguf(path)
    rc, out, err = run(["ls", path])
    expect("ggufs ls exit status (%s)" % err.strip(), rc, 0)
    want = J.expected_meta_tsv(ref, walk, out)
    got = out.splitlines(keepends=True)
    expect("ggufs ls line count", len(got), len(want))
    for w, g in zip(want, got):
        if w is not None:
            expect("ggufs ls line", g, w)
    meta, tensors = J.expected_tree(ref, walk, path)
    n = 0
    for name, (wkey, kv, content) in meta.items():
        if kv.bits or b"%" in name:
            continue  # floats: compared through meta.tsv above
        rc, out, err = run(["get", path, name.decode()])
        expect("ggufs get %s exit (%s)" % (name, err.strip()), rc, 0)
        expect("ggufs get %s" % name, out, content)
        n += 1
    rc, out, err = run(["tensors", path])
    expect("ggufs tensors exit (%s)" % err.strip(), rc, 0)
    want = b"".join(b"%s\t%s\t%s\t%d\n" % (name, t.ggml_type.encode(), shape, t.size)
                    for name, (wname, t, shape) in tensors.items())
    body = b"".join(ln for ln in out.splitlines(keepends=True)
                    if not ln.startswith(b"name\t"))
    expect("ggufs tensors", body, want)
    J.log("ls, get of %d keys, tensors: as ggml reads the file" % n)


def value(path, key):
    _, ref = J.refdump(path)
    for kv in ref.kvs:
        if kv.key == key:
            return kv.content
    return None


def check_set(work, model):
    path = os.path.join(work, "set.gguf")
    shutil.copy(model, path)
    _, before = J.refdump(path)
    tpl = os.path.join(work, "tpl.jinja")
    with open(tpl, "wb") as f:
        f.write(b"{% for m in messages %}{{ m.content }}\n{% endfor %}")
    rc, out, err = run(["set", path, "llama.context_length=8192", "general.name=edited",
                        "tokenizer.chat_template=@" + tpl, "mytool.count:uint32=7",
                        "mytool.note=@-", "--remove", "general.architecture"],
                       stdin=b"from stdin\n")
    expect("ggufs set exit (%s)" % err.strip(), rc, 0)
    verdict, after = J.refdump(path)
    expect("ggml's verdict after set", verdict, "ggml-accepts")
    expect("llama.context_length", value(path, b"llama.context_length"), b"8192\n")
    expect("general.name", value(path, b"general.name"), b"edited\n")
    expect("tokenizer.chat_template", value(path, b"tokenizer.chat_template"),
           b"{% for m in messages %}{{ m.content }}\n{% endfor %}\n")
    expect("mytool.note", value(path, b"mytool.note"), b"from stdin\n")
    kinds = {kv.key: kv.type for kv in after.kvs}
    expect("mytool.count's type", kinds.get(b"mytool.count"), "uint32")
    expect("mytool.count", value(path, b"mytool.count"), b"7\n")
    expect("general.architecture removed", b"general.architecture" in kinds, False)
    with open(model, "rb") as a, open(path, "rb") as b:
        a.seek(before.data_offset)
        b.seek(after.data_offset)
        if a.read() != b.read():
            raise Fail("ggufs set changed the tensor data")
    J.log("set: 6 edits in one commit (%s), tensor data unchanged: ok" % err.strip())

    # Refusals: one line naming the file and the key, nothing written.
    good = sha(path)
    for args, status, words in (
            (["llama.context_length=abc"], 1, "llama.context_length"),
            (["llama.context_length=99", "llama.block_count=x"], 1, "llama.block_count"),
            (["general.alignment=64"], 1, "general.alignment"),
            (["My.Key=1"], 1, "My.Key"),
            (["general.name=@" + os.path.join(work, "missing")], 1, "missing"),
            (["general.name"], 2, "general.name"),
            (["--remove"], 2, "--remove")):
        rc, out, err = run(["set", path] + args)
        expect("ggufs set %s exit (%s)" % (args, err.strip()), rc, status)
        if words not in err:
            raise Fail("ggufs set %s: the message %r does not name %s" % (args, err, words))
        expect("the file after a refused set %s" % args, sha(path), good)
    rc, out, err = run(["get", path, "no.such.key"])
    expect("get of a missing key (%s)" % err.strip(), rc, 1)
    rc, out, err = run(["ls", path, "extra"])
    expect("ls with an extra argument", rc, 2)
    J.log("refusals: nothing written, statuses 1 and 2: ok")

    # -o overlay: the model's bytes untouched, the overlay shows the edit.
    state = tempfile.mkdtemp(dir=work)
    ov = os.path.join(state, "m.overlay.gguf")
    rc, out, err = run(["set", "-o", "overlay=" + ov, path, "general.name=overlaid"])
    expect("set -o overlay exit (%s)" % err.strip(), rc, 0)
    expect("the model after set -o overlay", sha(path), good)
    rc, out, err = run(["get", "-o", "overlay=" + ov, path, "general.name"])
    expect("get -o overlay", (rc, out), (0, b"overlaid\n"))
    rc, out, err = run(["get", path, "general.name"])
    expect("get without the overlay", (rc, out), (0, b"edited\n"))
    J.log("set -o overlay: the model untouched, get -o overlay shows it: ok")


def check_locked(work, model):
    """A model mounted read-write is refused by set, naming the mount."""
    J.require_fuse()
    path = os.path.join(work, "locked.gguf")
    shutil.copy(model, path)
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    p = J.run_ggufs([path, mnt])
    if p.returncode != 0:
        raise Fail("mount failed: %s" % p.stderr)
    try:
        rc, out, err = run(["set", path, "general.name=x"])
        expect("set of a mounted model (%s)" % err.strip(), rc, 1)
        if mnt not in err:
            raise Fail("set of a mounted model: %r does not name the mount %s" % (err, mnt))
    finally:
        J.unmount(mnt)
    J.log("set of a mounted model: refused naming the mount: ok")


def inner(work, model):
    # /dev/fuse is /dev/null here: any FUSE use would fail.
    try:
        with open("/dev/fuse", "rb") as f:
            f.read(1)
    except OSError:
        pass
    if os.major(os.stat("/dev/fuse").st_rdev) != 1:
        raise Fail("/dev/fuse is still the FUSE device in the namespace")
    check_show(model)
    check_set(work, model)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == INNER:
        inner(sys.argv[2], sys.argv[3])
        return
    work = tempfile.mkdtemp(prefix="ggufs-nomount-")
    try:
        model = os.path.join(work, "m.gguf")
        p = subprocess.run([J.tool("MKFIXTURE"), "llama", model], capture_output=True)
        if p.returncode != 0:
            raise Fail("mkfixture llama failed: %s" % p.stderr)
        J.refdump(model)  # skips the test without ggml's reader
        if shutil.which("unshare") and os.geteuid() == 0 and os.path.exists("/dev/fuse"):
            cmd = ("mount --bind /dev/null /dev/fuse && exec %s %s %s %s %s"
                   % (sys.executable, os.path.abspath(__file__), INNER, work, model))
            p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd],
                               timeout=600)
            if p.returncode != 0:
                raise Fail("the checks without /dev/fuse failed (status %d)" % p.returncode)
            J.log("without /dev/fuse (bound to /dev/null in a private mount namespace)")
        else:
            check_show(model)
            check_set(work, model)
        check_locked(work, model)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    J.main(main)
