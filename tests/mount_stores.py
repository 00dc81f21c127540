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
import re
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


# ollama's layers (ollama/server/images.go's media types) as the files
# of MODEL/ollama/: the text layers by kind, GGUF layers as .gguf files.
LAYER_FILES = {"template": "template", "system": "system", "params": "params",
               "license": "license", "messages": "messages",
               "projector": "projector.gguf", "adapter": "adapter.gguf"}


def manifest_of(store, name):
    """The manifest of an ollama model name (MODEL:TAG, NS/MODEL:TAG,
    HOST/NS/MODEL:TAG), parsed."""
    path, tag = name.rsplit(":", 1)
    parts = path.split("/")
    if len(parts) == 1:
        parts = ["registry.ollama.ai", "library"] + parts
    elif len(parts) == 2:
        parts = ["registry.ollama.ai"] + parts
    with open(os.path.join(store, "manifests", *parts, tag)) as f:
        return json.load(f)


def check_layers(store, mnt, name, label):
    """MODEL/ollama/ holds exactly the manifest's other layers, each the
    blob's bytes; False when the model has none (no ollama/)."""
    want = {}
    for layer in manifest_of(store, name)["layers"]:
        kind = layer["mediaType"].rsplit(".", 1)[-1]
        if kind in LAYER_FILES:
            blob = os.path.join(store, "blobs", layer["digest"].replace(":", "-"))
            with open(blob, "rb") as f:
                want[LAYER_FILES[kind]] = f.read()
    d = os.path.join(mnt, name, "ollama")
    if not want:
        if os.path.exists(d):
            raise Fail("%s: %s: ollama/ shown for a model without other layers" % (label, name))
        return False
    got = sorted(os.listdir(d))
    if got != sorted(want):
        raise Fail("%s: %s/ollama lists %r, the manifest's layers are %r" % (label, name, got, sorted(want)))
    for fname, data in want.items():
        with open(os.path.join(d, fname), "rb") as f:
            if f.read() != data:
                raise Fail("%s: %s/ollama/%s is not the layer's blob" % (label, name, fname))
        if os.stat(os.path.join(d, fname)).st_size != len(data):
            raise Fail("%s: %s/ollama/%s: size is not the blob's" % (label, name, fname))
    return True


def check_alias(mnt, name, first, label):
    """A second name of one file is a symbolic link to the first's
    directory, through which the model reads as the first."""
    p = os.path.join(mnt, name)
    if not os.path.islink(p):
        raise Fail("%s: %s (the file of %s) is not a symbolic link" % (label, name, first))
    if os.path.realpath(p) != os.path.realpath(os.path.join(mnt, first)):
        raise Fail("%s: %s links to %r, not to %s" % (label, name, os.readlink(p), first))
    if meta(mnt, name, "general.architecture") != meta(mnt, first, "general.architecture"):
        raise Fail("%s: %s reads other metadata than %s" % (label, name, first))


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
            if files[0] in blobs:  # a second name of one blob: a link to the first
                check_alias(mnt, name, blobs[files[0]], label)
                continue
            blobs[files[0]] = name
            # Its aliases' live views are in its root too (issue 32: each
            # name's directory holds its own NAME.gguf).
            extra = {live_name(n).encode() for n, fs, _ in models
                     if fs[0] == files[0] and live_name(n) != live_name(name)}
            if kind == "ollama" and check_layers(store, mnt, name, label):
                extra |= {b"ollama"}
            if len(files) > 1:
                check_set(mnt, name, files, refs, tmp, label)
            else:
                J.compare_mount(files[0], mnt, refs[0], J.walk_gguf(files[0]), "%s: %s" % (label, name),
                                os.stat(files[0]), True, root=os.path.join(mnt, name), live_name=live_name(name),
                                extra_root=extra)
            n += 1
    J.log("ok   %s: %d names listed as mkstore made them, models.tsv agrees with ggml, %d models judged"
          % (kind, len(names), n))
    return store, made


# ---------------------------------------------------------------------------
# 2: llama.cpp through the mount


def put_blob(store, src):
    """src copied into an ollama store as blobs/sha256-HEX; its layer."""
    h = sha(src)
    os.makedirs(os.path.join(store, "blobs"), exist_ok=True)
    shutil.copyfile(src, os.path.join(store, "blobs", "sha256-" + h))
    return {"digest": "sha256:" + h, "size": os.path.getsize(src)}


def lay_out(kind, store, src, name):
    """src laid out in a store of kind as its tool would; the model's name
    in the mount."""
    if kind == "ollama":
        cfg = os.path.join(store, "cfg.json")
        os.makedirs(store, exist_ok=True)
        with open(cfg, "w") as f:
            f.write('{"model_format":"gguf","model_family":"llama"}')
        c = put_blob(store, cfg)
        os.unlink(cfg)
        c["mediaType"] = "application/vnd.docker.container.image.v1+json"
        m = put_blob(store, src)
        m["mediaType"] = "application/vnd.ollama.image.model"
        man = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
               "config": c, "layers": [m]}
        d = os.path.join(store, "manifests", "registry.ollama.ai", "library", name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "latest"), "w") as f:
            json.dump(man, f)
        return name + ":latest"
    if kind == "hf":
        repo = os.path.join(store, "models--o--%s-GGUF" % name)
        rev = "a" * 40
        h = sha(src)
        os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
        os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
        os.makedirs(os.path.join(repo, "snapshots", rev), exist_ok=True)
        shutil.copyfile(src, os.path.join(repo, "blobs", h))
        os.symlink("../../blobs/" + h, os.path.join(repo, "snapshots", rev, name + ".gguf"))
        with open(os.path.join(repo, "refs", "main"), "w") as f:
            f.write(rev)
        return "o/%s-GGUF/%s" % (name, name)
    rel = "o/%s-GGUF/%s" % (name, name) if kind == "lmstudio" else name
    os.makedirs(os.path.dirname(os.path.join(store, rel)), exist_ok=True)
    shutil.copyfile(src, os.path.join(store, rel + ".gguf"))
    return rel


def check_llama(tmp):
    import mount_llama as L
    try:
        mods = L.node_modules()
    except J.Skip as e:
        J.log("note: %s; llama.cpp through stores skipped" % e)
        return
    model = os.path.join(tmp, "tl.gguf")
    L.make_model(model)
    base = L.evaluate(mods, model, "the model itself")
    mnt = os.path.join(tmp, "mnt")
    for kind in KINDS:
        store = os.path.join(tmp, "llama-" + kind)
        name = lay_out(kind, store, model, "tl")
        with J.Watchdog(mnt, 300, "llama " + kind), J.Mounted(store, mnt, args=["-o", "ro"]):
            r = L.evaluate(mods, os.path.join(mnt, name, live_name(name)), "%s store" % kind)
        if not L.same_math(base, r):
            raise Fail("%s store: llama.cpp through the mount gives %s, from the file %s"
                       % (kind, r["tokens"], base["tokens"]))
    J.log("ok   llama.cpp runs the model of each store kind by its live view: the same tokens as from the file")


# ---------------------------------------------------------------------------
# 3: edits


def meta(mnt, name, key):
    with open(os.path.join(mnt, name, "meta", key)) as f:
        return f.read()


def set_meta(mnt, name, key, value):
    with open(os.path.join(mnt, name, "meta", key), "w") as f:
        f.write(value)


def live_kv(mnt, name, key, tmp):
    out = os.path.join(tmp, "live.gguf")
    shutil.copyfile(os.path.join(mnt, name, live_name(name)), out)
    r = J.refdump(out)[1]
    if r is None:
        raise Fail("ggml rejects %s's live view" % name)
    return kv_of(r, key)


def commit_unmount(mnt, names=None):
    """ggufs -u: exit 0, unmounted; its report names each model edited
    (names: their names in the store, a line each, issue 32) and says how
    the edits were kept."""
    p = J.run_ggufs(["-u", mnt])
    if p.returncode != 0 or J.mountinfo_entry(mnt) is not None:
        raise Fail("ggufs -u %s: status %d: %s" % (mnt, p.returncode, p.stderr.decode(errors="replace")))
    out = p.stdout.decode(errors="replace")
    for f in names or ():
        if not re.search(r"^ggufs: %s: .*(overlay|committed)" % re.escape(f), out, re.M):
            raise Fail("ggufs -u %s reports %r: it does not name %s and how its edits were kept" % (mnt, out, f))


def check_edits(tmp):
    mnt = os.path.join(tmp, "mnt")
    for kind, name in (("ollama", "tiny-b:q4"), ("hf", "tiny/Tiny-GGUF/tiny-a"), ("dir", "sub/tiny-b")):
        store = os.path.join(tmp, "edit-" + kind)
        made = dict(mkstore(kind, store))
        blob = made[name]
        before = sha(blob)
        value = "edited in a %s store\n" % kind
        with J.Watchdog(mnt, 120, "edit " + kind):
            J.Mounted(store, mnt).__enter__()
            try:
                set_meta(mnt, name, "general.name", value)
                if meta(mnt, name, "general.name") != value:
                    raise Fail("%s: meta/general.name reads %r after the edit" % (kind, meta(mnt, name, "general.name")))
                if live_kv(mnt, name, b"general.name", tmp) != value.rstrip("\n"):
                    raise Fail("%s: the live view does not show the edit before unmount" % kind)
            except BaseException:
                J.unmount(mnt, [])
                raise
            commit_unmount(mnt, [name])
        after = J.refdump(blob)[1]
        if kind == "dir":
            if kv_of(after, b"general.name") != value.rstrip("\n"):
                raise Fail("dir: ggml reads general.name %r in %s after the commit, expected the edit"
                           % (kv_of(after, b"general.name"), blob))
        elif sha(blob) != before:
            raise Fail("%s: the blob %s changed (sha256 %s, was %s): edits must go to an overlay"
                       % (kind, blob, sha(blob)[:16], before[:16]))
        with J.Mounted(store, mnt):
            got = meta(mnt, name, "general.name")
            live = live_kv(mnt, name, b"general.name", tmp)
        if got != value or live != value.rstrip("\n"):
            raise Fail("%s: after remount meta/general.name is %r, the live view's %r; expected the edit %r"
                       % (kind, got, live, value))
    J.log("ok   edits: ollama and HF cache blobs unchanged (overlay), shown live and after remount; "
          "a folder model edited in place")


# ---------------------------------------------------------------------------
# 4: the store changes while mounted


def wait_for(pred, what, limit=1.5):
    t0 = time.time()
    while not pred():
        if time.time() - t0 > limit + 3:
            raise Fail("%s: not seen after %.1f s" % (what, time.time() - t0))
        time.sleep(0.05)
    dt = time.time() - t0
    if dt > limit:
        raise Fail("%s: took %.2f s, more than %.1f s" % (what, dt, limit))
    return dt


def listed(mnt, d=""):
    return set(os.listdir(os.path.join(mnt, d)))


def check_changes(tmp):
    mnt = os.path.join(tmp, "mnt")
    store = os.path.join(tmp, "live-dir")
    made = dict(mkstore("dir", store))
    times = []
    with J.Watchdog(mnt, 120, "store changes"), J.Mounted(store, mnt, args=["-o", "ro"]):
        if "tiny-c" in listed(mnt):
            raise Fail("tiny-c listed before it exists")
        part = os.path.join(tmp, "tiny-c.gguf")
        shutil.copyfile(made["tiny-a"], part)
        os.rename(part, os.path.join(store, "tiny-c.gguf"))
        times.append(wait_for(lambda: "tiny-c" in listed(mnt), "a model copied into the folder"))
        if not os.path.isfile(os.path.join(mnt, "tiny-c", "meta", "general.architecture")):
            raise Fail("the new model tiny-c has no meta/general.architecture")
        os.unlink(os.path.join(store, "tiny-c.gguf"))
        times.append(wait_for(lambda: "tiny-c" not in listed(mnt), "a model removed from the folder"))
        # An open tensor of a model whose file goes away keeps serving.
        ref = J.refdump(made["sub/tiny-b"])[1]
        t = ref.tensors[0]
        with open(made["sub/tiny-b"], "rb") as f:
            f.seek(t.offset)
            want = f.read(t.size)
        fd = os.open(os.path.join(mnt, "sub", "tiny-b", "tensors", t.name.decode()), os.O_RDONLY)
        try:
            os.unlink(made["sub/tiny-b"])
            times.append(wait_for(lambda: "sub" not in listed(mnt), "a model removed (open)"))
            got = os.pread(fd, t.size + 10, 0)
        finally:
            os.close(fd)
        if got != want:
            raise Fail("an open tensor of a removed model read %d bytes that are not its own" % len(got))
    ostore = os.path.join(tmp, "live-ollama")
    mkstore("ollama", ostore)
    mdir = os.path.join(ostore, "manifests", "registry.ollama.ai", "library")
    with J.Watchdog(mnt, 120, "ollama changes"), J.Mounted(ostore, mnt, args=["-o", "ro"]):
        listed(mnt)
        os.makedirs(os.path.join(mdir, "tiny-c"))
        tmpm = os.path.join(tmp, "manifest")
        shutil.copyfile(os.path.join(mdir, "tiny-b", "q4"), tmpm)
        os.rename(tmpm, os.path.join(mdir, "tiny-c", "latest"))
        times.append(wait_for(lambda: "tiny-c:latest" in listed(mnt), "an ollama manifest added"))
        os.unlink(os.path.join(mdir, "tiny-c", "latest"))
        times.append(wait_for(lambda: "tiny-c:latest" not in listed(mnt), "an ollama manifest removed"))
    J.log("ok   store changes seen in %s s; an open tensor of a removed model keeps serving"
          % ", ".join("%.2f" % t for t in times))


# ---------------------------------------------------------------------------
# 5: hostile stores


def check_hostile(tmp):
    mnt = os.path.join(tmp, "mnt")
    store = os.path.join(tmp, "bad-ollama")
    names = [n for n, _ in mkstore("ollama", store)]
    bad = os.path.join(store, "manifests", "registry.ollama.ai", "library", "broken")
    os.makedirs(bad)
    with open(os.path.join(bad, "latest"), "w") as f:
        f.write('{"schemaVersion": 2, "layers": [')
    with J.Watchdog(mnt, 120, "hostile ollama"), Fg(store, mnt, ["-o", "ro"]) as m:
        got = listed(mnt)
        for n in names:
            if not os.path.isdir(os.path.join(mnt, n)):
                raise Fail("a bad manifest beside: %s is not listed" % n)
        if any(x.startswith("broken") for x in got):
            raise Fail("a manifest that is not JSON is listed: %s" % sorted(got))
        log_ = m.log()
    if "broken/latest" not in log_:
        raise Fail("the log does not name the manifest that is not JSON: %r" % log_[-1000:])
    store = os.path.join(tmp, "bad-hf")
    names = [n for n, _ in mkstore("hf", store)]
    outside = os.path.join(tmp, "outside.gguf")
    shutil.copyfile(os.path.join(tmp, "ollama", "blobs", os.listdir(os.path.join(tmp, "ollama", "blobs"))[0]),
                    outside)
    snap = os.path.join(store, "models--tiny--Tiny-GGUF", "snapshots")
    rev = open(os.path.join(store, "models--tiny--Tiny-GGUF", "refs", "main")).read().strip()
    os.symlink(outside, os.path.join(snap, rev, "evil.gguf"))
    os.symlink("../../../../../outside.gguf", os.path.join(snap, rev, "evil2.gguf"))
    with J.Watchdog(mnt, 120, "hostile hf"), Fg(store, mnt, ["-o", "ro"]) as m:
        for n in names:
            if not os.path.isdir(os.path.join(mnt, n)):
                raise Fail("an HF symlink out of the store beside: %s is not listed" % n)
        got = listed(mnt, "tiny/Tiny-GGUF")
        if "evil" in got or "evil2" in got:
            raise Fail("an HF symlink pointing outside the store is listed: %s" % sorted(got))
        log_ = m.log()
    if "evil.gguf" not in log_ or "evil2.gguf" not in log_:
        raise Fail("the log does not name the symlinks out of the store: %r" % log_[-1000:])
    J.log("ok   a manifest that is not JSON and HF symlinks out of the store: not listed, named in the log")


# ---------------------------------------------------------------------------
# 6 and 8: bounds


def four_models(tmp, label):
    store = os.path.join(tmp, label)
    made = dict(mkstore("dir", store))
    shutil.copyfile(made["tiny-a"], os.path.join(store, "tiny-c.gguf"))
    return store, ["tiny-a", "sub/tiny-b", "tiny-split", "tiny-c"]


def read_all(mnt, names, rounds=3):
    for _ in range(rounds):
        for n in names:
            a = meta(mnt, n, "general.architecture")
            if a not in ("llama\n", "qwen3\n"):
                raise Fail("%s/meta/general.architecture reads %r" % (n, a))
            yield n


def check_bounds(tmp):
    mnt = os.path.join(tmp, "mnt")
    store, names = four_models(tmp, "bounds")
    with J.Watchdog(mnt, 120, "bounds"), Fg(store, mnt, ["-o", "ro,max_models=2"]) as m:
        base = fd_count(m.pid)
        subprocess.run(["ls", "-l", mnt] + [os.path.join(mnt, n) for n in ("sub", "")],
                       stdout=subprocess.DEVNULL, check=True)
        for n in names:
            os.stat(os.path.join(mnt, n))
        if fd_count(m.pid) != base:
            raise Fail("ls -l of the root opened descriptors (%d, before %d): it opened models"
                       % (fd_count(m.pid), base))
        J.log("ok   ls -l of the root opens no model (%d descriptors)" % base)
        meta(mnt, names[0], "general.architecture")
        one = fd_count(m.pid) - base
        most = 0
        for _ in read_all(mnt, names):
            most = max(most, fd_count(m.pid) - base)
        if one < 1 or most > 2 * one + 1:
            raise Fail("-o max_models=2: one model holds %d descriptors, reading 4 in turn held up to %d"
                       % (one, most))
    J.log("ok   -o max_models=2, 4 models read 3 times in turn: at most %d descriptors (one model: %d)"
          % (most, one))

    def low():
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))

    with J.Watchdog(mnt, 120, "rlimit"), Fg(store, mnt, ["-o", "ro"], preexec=low) as m:
        n = sum(1 for _ in read_all(mnt, names))
        fds = fd_count(m.pid)
    if fds > 48:
        raise Fail("RLIMIT_NOFILE 48: the daemon holds %d descriptors" % fds)
    J.log("ok   RLIMIT_NOFILE 48: %d reads of 4 models work, %d descriptors held" % (n, fds))


# ---------------------------------------------------------------------------
# 7: a Hub repo


HUB_LOCATIONS = """
    location /api/models/ {{
      if ($arg_recursive != "true") {{ return 400; }}
      default_type application/json;
      try_files /pages$uri/c$arg_cursor.json =404;
    }}
    location /o/r/resolve/ {{
      rewrite ^/o/r/resolve/main/(.*)$ /files/$1 break;
      return 404;
    }}
"""


def check_hub(tmp):
    if not W.exe():
        J.log("note: nginx is not installed; the Hub repo check skipped")
        return
    www = os.path.join(tmp, "www")
    files = {"a-Q4.gguf": None, "sub/b-Q8.gguf": None}
    for rel in files:
        path = os.path.join(www, "files", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        p = subprocess.run([J.tool("MKFIXTURE"), "model", path, "--tensor-mb", "8", "--n-tensors", "2"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise Fail("mkfixture model failed: %s" % p.stderr.decode(errors="replace"))
        files[rel] = J.refdump(path)[1]
    page = os.path.join(www, "pages", "api", "models", "o", "r", "tree", "main", "c.json")
    os.makedirs(os.path.dirname(page))
    entries = [{"type": "directory", "oid": "4" * 40, "size": 0, "path": "sub"},
               {"type": "file", "oid": "5" * 40, "size": 20, "path": "README.md"}]
    entries += [{"type": "file", "oid": "3" * 40, "size": os.path.getsize(os.path.join(www, "files", rel)),
                 "path": rel} for rel in files]
    with open(page, "w") as f:
        json.dump(entries, f)
    nd = os.path.join(tmp, "nginx")
    bytes_log = os.path.join(nd, "bytes.log")
    http = "  log_format b '$uri $body_bytes_sent';\n  access_log %s b;\n" % bytes_log
    ngx = W.Nginx(nd, www, HUB_LOCATIONS, as_root=True, http=http)
    mnt = os.path.join(tmp, "mnt")
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:%d" % ngx.port)
    env.pop("HF_TOKEN", None)
    try:
        with J.Watchdog(mnt, 120, "hub"), Fg("hf://o/r", mnt, ["-o", "ro,cache=" + os.path.join(tmp, "cache")], env=env):
            got = listed(mnt)
            if got != {"a-Q4", "sub", "models.tsv"} or listed(mnt, "sub") != {"b-Q8"}:
                raise Fail("hf://o/r lists %s and sub/ %s, expected a-Q4, sub/b-Q8, models.tsv"
                           % (sorted(got), sorted(listed(mnt, "sub"))))
            time.sleep(0.2)
            with open(bytes_log) as f:
                early = [ln for ln in f if ln.startswith("/files/")]
            if early:
                raise Fail("listing the Hub repo's mount downloaded files: %s" % early)
            for rel, ref in files.items():
                name = rel[:-5]
                want = kv_of(ref, b"general.architecture") + "\n"
                if meta(mnt, name, "general.architecture") != want:
                    raise Fail("hf://o/r: %s/meta/general.architecture reads %r, ggml says %r"
                               % (name, meta(mnt, name, "general.architecture"), want))
    finally:
        ngx.stop()
    sent = {}
    with open(bytes_log) as f:
        for ln in f:
            uri, n = ln.split()
            sent[uri] = sent.get(uri, 0) + int(n)
    for rel, ref in files.items():
        got, size = sent.get("/files/" + rel, 0), os.path.getsize(os.path.join(www, "files", rel))
        if not ref.data_offset <= got <= size // 8:
            raise Fail("hf://o/r: reading %s's metadata downloaded %d of its %d bytes (header %d): more than the "
                       "header" % (rel, got, size, ref.data_offset))
    J.log("ok   hf://o/r listed by the tree API, meta read; downloaded %s of files of %d bytes"
          % (", ".join("%d" % v for k, v in sorted(sent.items()) if k.startswith("/files/")),
             os.path.getsize(os.path.join(www, "files", "a-Q4.gguf"))))


def run():
    J.require_fuse()
    with J.store_scratch("ggufs-stores-") as (tmp, mnt):
        for kind in KINDS:
            check_kind(kind, tmp)
        J.run_watched(mnt, 580, J.chosen("STORES_ONLY", (check_edits, check_changes, check_hostile, check_bounds,
                                                         check_llama, check_hub)), tmp)


if __name__ == "__main__":
    J.main(run)
