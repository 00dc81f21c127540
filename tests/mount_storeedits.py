#!/usr/bin/env python3
"""mount_storeedits: the edits of models kept by ollama and the Hugging Face
cache (issue 32, items 1, 2, 6, 9), through real FUSE mounts, judged by
ggml's reader (tests/refdump) on the stores' own files.

Stores are laid out by tests/mkstore exactly as their tools do.  Checked:
  1. a content-addressed file mounted by itself (an ollama blob
     blobs/sha256-HEX; an HF cache file through its snapshot's symbolic
     link to blobs/HASH; a file in a folder's blobs/) is never written:
     an edit and `ggufs -u` leave its sha256 as it was, the edit goes to
     the blob's overlay (the note at mount and the report say so), a
     remount shows it (ggml reads it in the live view), and so does a
     store mount (one overlay per blob, whichever way it is mounted); a
     file not named by its hash is still committed in place;
  2. a read-only store mount (-o ro, as README's fstab line) shows the
     edits made through a read-write one: meta/ and the live view (ggml);
     a folder's model with an overlay (-o overlay) is shown as on disk and
     its status says so;
  3. the model is updated as `ollama pull` does (a new blob for the same
     tag, the manifest rewritten, the old blob removed): the store's mount
     says so; a read-only mount shows the edits, writing nothing; a
     read-write one carries them to the new blob's overlay (the upstream
     change of another key kept), the new blob never written; when upstream changed the edited key
     too, the edit is not carried and the log names the model, the key
     and the command (run as written, the next mount carries them); `ggufs --overlays` lists each overlay, its source, whether the
     source is still there and its keys;
  4. a tensor written through a store model's overlay: user.gguf.source
     and user.gguf.offset name the overlay's data file, whose bytes there
     are the tensor as the mount shows it; the blob is unchanged.
Exit 0 pass, 1 fail, 77 skip (no FUSE, no ggml).
"""

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_stores as S  # noqa: E402

Fail = J.Fail


def edit_unmount(src, mnt, rel, value, args=()):
    """Mounts src, sets meta/general.name of rel (a model's directory, ""
    for a single-file mount) to value, ggufs -u; the mount's stderr and
    the report."""
    with J.Watchdog(mnt, 120, "edit " + src):
        p = J.run_ggufs(list(args) + [src, mnt])
        if p.returncode != 0:
            raise Fail("ggufs %s %s: status %d: %s" % (src, mnt, p.returncode, p.stderr.decode(errors="replace")))
        try:
            with open(os.path.join(mnt, rel, "meta", "general.name"), "w") as f:
                f.write(value)
        except BaseException:
            J.unmount(mnt, [])
            raise
        u = J.run_ggufs(["-u", mnt])
    if u.returncode != 0 or J.mountinfo_entry(mnt) is not None:
        raise Fail("ggufs -u %s: status %d: %s" % (mnt, u.returncode, u.stderr.decode(errors="replace")))
    return p.stderr.decode(errors="replace"), (u.stdout + u.stderr).decode(errors="replace")


def shown_name(mnt, rel, tmp, live):
    """general.name as meta/ shows it and as ggml reads it in the live
    view (copied out)."""
    got = S.meta(mnt, rel, "general.name")
    out = os.path.join(tmp, "view.gguf")
    shutil.copyfile(os.path.join(mnt, rel, live), out)
    r = J.refdump(out)[1]
    if r is None:
        raise Fail("ggml rejects the live view %s" % os.path.join(rel, live))
    return got, S.kv_of(r, b"general.name")


# ---------------------------------------------------------------------------
# 1: a content-addressed file mounted by itself


def check_direct(tmp):
    mnt = os.path.join(tmp, "mnt")
    o = os.path.join(tmp, "d-ollama")
    h = os.path.join(tmp, "d-hf")
    om, hm = dict(S.mkstore("ollama", o)), dict(S.mkstore("hf", h))
    loose = os.path.join(tmp, "d-dir", "blobs", "model.gguf")
    os.makedirs(os.path.dirname(loose))
    shutil.copyfile(om["tiny-a:latest"], loose)
    snaps = os.path.join(h, "models--tiny--Tiny-GGUF", "snapshots")
    link = [os.path.join(snaps, r, "tiny-a.gguf") for r in os.listdir(snaps)
            if os.path.islink(os.path.join(snaps, r, "tiny-a.gguf"))][0]
    if os.path.realpath(link) != os.path.realpath(hm["tiny/Tiny-GGUF/tiny-a"]):
        raise Fail("mkstore's snapshot link %s does not lead to the blob" % link)
    cases = [("ollama blob", om["tiny-b:q4"], o, "tiny-b:q4"),
             ("HF snapshot link", link, h, "tiny/Tiny-GGUF/tiny-a"),
             ("file in blobs/", loose, None, None)]
    for label, src, store, name in cases:
        blob = os.path.realpath(src)
        before = S.sha(blob)
        value = "fixed through the %s\n" % label
        note, report = edit_unmount(src, mnt, "", value)
        if S.sha(blob) != before:
            raise Fail("%s: %s was written by a single-file mount (sha256 %s, was %s): a file named by its hash "
                       "must never be" % (label, blob, S.sha(blob)[:16], before[:16]))
        if "named by its hash" not in note or "overlay" not in note:
            raise Fail("%s: the mount did not say the edits go to an overlay: %r" % (label, note))
        if "overlay" not in report or "in place" in report:
            raise Fail("%s: ggufs -u reports %r, not the overlay" % (label, report))
        with J.Mounted(src, mnt):
            got = shown_name(mnt, "", tmp, os.path.basename(blob) if label == "file in blobs/"
                             else os.path.basename(os.path.realpath(src)))
        if got != (value, value.rstrip("\n")):
            raise Fail("%s: after remount meta/ and the live view show %r, not the edit" % (label, got))
        if store:
            with J.Mounted(store, mnt, args=["-o", "ro"]):
                got = shown_name(mnt, name, tmp, S.live_name(name))
            if got != (value, value.rstrip("\n")):
                raise Fail("%s: the store mount shows %r, not the edit made on the blob by itself" % (label, got))
    # Not named by its hash: a file is still committed in place.
    plain = os.path.join(tmp, "plain.gguf")
    shutil.copyfile(om["tiny-a:latest"], plain)
    edit_unmount(plain, mnt, "", "in place\n")
    if S.kv_of(J.refdump(plain)[1], b"general.name") != "in place":
        raise Fail("a file not named by its hash was not committed in place")
    J.log("ok   an ollama blob, an HF blob through its snapshot link and a file in blobs/: never written "
          "by a single-file mount, edits in the blob's overlay (note, report, remount, store); a plain file "
          "committed in place")


def check_commands(tmp):
    """1, the commands: none writes a blob.  --compact, --recover,
    --apply-pending and --overlay-apply of an ollama blob are refused in
    one line that says why and how (exit 1), its overlay kept; `ggufs set`
    of the blob puts the edit in its overlay, as a mount does."""
    mnt = os.path.join(tmp, "mnt")
    o = os.path.join(tmp, "c-ollama")
    blob = os.path.realpath(dict(S.mkstore("ollama", o))["tiny-b:q4"])
    edit_unmount(blob, mnt, "", "kept in the overlay\n")
    before = S.sha(blob)
    for args in (["--compact", blob], ["--recover", blob], ["--apply-pending", blob],
                 ["--overlay-apply", blob]):
        p = J.run_ggufs(args)
        err = p.stderr.decode(errors="replace")
        if p.returncode != 1 or "named by its hash" not in err:
            raise Fail("ggufs %s: exit %d, %r: not refused as a blob" % (args[0], p.returncode, err))
        if S.sha(blob) != before:
            raise Fail("ggufs %s wrote the blob %s" % (args[0], blob))
    p = J.run_ggufs(["set", blob, "general.name=set without a mount"])
    if p.returncode != 0 or S.sha(blob) != before:
        raise Fail("ggufs set of a blob: exit %d, blob %s: %r" % (
            p.returncode, "unchanged" if S.sha(blob) == before else "WRITTEN", p.stderr))
    with J.Mounted(blob, mnt):
        got = S.meta(mnt, "", "general.name")
    if got != "set without a mount\n":
        raise Fail("after ggufs set of a blob its overlay shows %r" % got)
    J.log("ok   --compact, --recover, --apply-pending, --overlay-apply of a blob refused (named by its hash); "
          "ggufs set of a blob goes to its overlay")


# ---------------------------------------------------------------------------
# 2: a read-only store shows the overlays' edits


def check_ro_store(tmp):
    mnt = os.path.join(tmp, "mnt")
    for kind, name in (("ollama", "tiny-b:q4"), ("hf", "tiny/Tiny-GGUF/tiny-a")):
        store = os.path.join(tmp, "ro-" + kind)
        made = dict(S.mkstore(kind, store))
        before = S.sha(os.path.realpath(made[name]))
        value = "chat template fixed (%s)\n" % kind
        edit_unmount(store, mnt, name, value)
        with J.Mounted(store, mnt, args=["-o", "ro"]):
            got = shown_name(mnt, name, tmp, S.live_name(name))
        if got != (value, value.rstrip("\n")):
            raise Fail("%s: a read-only store mount shows general.name %r (meta/, live view), not the edit "
                       "made through a read-write one" % (kind, got))
        if S.sha(os.path.realpath(made[name])) != before:
            raise Fail("%s: the blob changed" % kind)
    # A folder's model edited with -o overlay: shown as it is on disk, and
    # the model's status (the mount's log) says which overlay it lacks.
    store = os.path.join(tmp, "ro-dir")
    made = dict(S.mkstore("dir", store))
    edit_unmount(made["sub/tiny-b"], mnt, "", "kept aside\n", args=["-o", "overlay"])
    with S.Fg(store, mnt, args=["-o", "ro"]):
        got = S.meta(mnt, "sub/tiny-b", "general.name")
        status = os.getxattr(os.path.join(mnt, "sub/tiny-b"), "user.ggufs.status").decode(errors="replace")
    if got == "kept aside\n":
        raise Fail("a folder model's -o overlay edit shown by a plain read-only store mount")
    if "holds edits of this file" not in status or os.path.realpath(made["sub/tiny-b"]) not in status:
        raise Fail("a read-only store mount does not say that sub/tiny-b is shown without its overlay's "
                   "edits (user.ggufs.status): %r" % status)
    J.log("ok   a read-only store mount (ollama, HF cache) shows the edits in meta/ and the live view (ggml); "
          "a folder model's overlay not shown, and said in its status")


# ---------------------------------------------------------------------------
# 3: the model updated by its tool


def new_version(tmp, blob, key, value):
    """A new version of blob, as a pull would bring: key set to value
    (committed into a plain copy); its path."""
    out = os.path.join(tmp, "upstream.gguf")
    shutil.copyfile(blob, out)
    mnt = os.path.join(tmp, "mnt")
    with J.Watchdog(mnt, 60, "upstream"), J.Mounted(out, mnt):
        with open(os.path.join(mnt, "meta", key), "w") as f:
            f.write(value)
    return out


def pull(store, name, src):
    """What `ollama pull` does when a tag gets a new model: the new blob,
    the manifest's model layer rewritten, the old blob removed."""
    layer = S.put_blob(store, src)
    path, tag = name.rsplit(":", 1)
    man_path = os.path.join(store, "manifests", "registry.ollama.ai", "library", path, tag)
    with open(man_path) as f:
        man = json.load(f)
    old = None
    for lay in man["layers"]:
        if lay["mediaType"] == "application/vnd.ollama.image.model":
            old = lay["digest"]
            lay["digest"], lay["size"] = layer["digest"], layer["size"]
    tmpm = man_path + ".tmp"
    with open(tmpm, "w") as f:
        json.dump(man, f)
    os.rename(tmpm, man_path)
    os.unlink(os.path.join(store, "blobs", old.replace(":", "-")))
    return os.path.join(store, "blobs", layer["digest"].replace(":", "-"))


def overlays():
    p = J.run_ggufs(["--overlays"])
    if p.returncode != 0:
        raise Fail("ggufs --overlays: status %d: %s" % (p.returncode, p.stderr.decode(errors="replace")))
    lines = p.stdout.decode(errors="replace").splitlines()
    if not lines or lines[0].split("\t") != ["overlay", "source", "state", "set", "removed", "tensors"]:
        raise Fail("ggufs --overlays: no header line: %r" % lines[:1])
    return [ln.split("\t") for ln in lines[1:]]


def ollama_b(tmp, sub):
    """(mnt, store, name, blob): an ollama store made at tmp/sub, its model
    tiny-b:q4 and that model's blob."""
    store = os.path.join(tmp, sub)
    made = dict(S.mkstore("ollama", store))
    return os.path.join(tmp, "mnt"), store, "tiny-b:q4", made["tiny-b:q4"]


def check_carry(tmp):
    mnt, store, name, old_blob = ollama_b(tmp, "pull")
    value = "my fixed name\n"
    edit_unmount(store, mnt, name, value)
    # Upstream changes another key: the edit is carried, upstream's kept.
    up = new_version(tmp, old_blob, "general.description", "new upstream version")
    new_blob = pull(store, name, up)
    new_sha = S.sha(new_blob)
    # A read-only mount first: said at mount, shown, nothing written.
    with S.Fg(store, mnt, args=["-o", "ro"]) as fg:
        at_mount = fg.log()
        got = shown_name(mnt, name, tmp, S.live_name(name))
    if got != (value, value.rstrip("\n")):
        raise Fail("a read-only mount after the pull shows general.name %r, not the edit" % (got,))
    if name not in at_mount or "carried" not in at_mount:
        raise Fail("the store's mount did not say that %s's file changed and its edits are carried: %r"
                   % (name, at_mount))
    if any(r[1] == new_blob for r in overlays()):
        raise Fail("a read-only mount wrote an overlay for the new blob")
    with S.Fg(store, mnt) as fg:
        got = shown_name(mnt, name, tmp, S.live_name(name))
        desc = S.meta(mnt, name, "general.description")
        log = fg.log()
    if got != (value, value.rstrip("\n")):
        raise Fail("after a pull of a new blob for %s, the store shows general.name %r, not the edit made "
                   "before it (log: %s)" % (name, got, log.strip()))
    if desc != "new upstream version\n":
        raise Fail("after the carry, general.description reads %r, not the new blob's value" % desc)
    if name not in log or "carried" not in log:
        raise Fail("the log does not say %s's edits were carried: %r" % (name, log))
    if S.sha(new_blob) != new_sha:
        raise Fail("the new blob was written")
    rows = overlays()
    by_src = {r[1]: r for r in rows}
    old_real = os.path.join(os.path.realpath(store), "blobs", os.path.basename(old_blob))
    if old_real not in by_src or by_src[old_real][2] != "gone" or "general.name" not in by_src[old_real][3]:
        raise Fail("ggufs --overlays does not list the old blob's overlay as gone with general.name: %r" % rows)
    if new_blob not in by_src or by_src[new_blob][2] != "applies" or "general.name" not in by_src[new_blob][3]:
        raise Fail("ggufs --overlays does not list the new blob's overlay (applies, general.name): %r" % rows)
    # Upstream changes the edited key too: not carried, said by name.
    up2 = new_version(tmp, new_blob, "general.name", "upstream's own name\n")
    newer = pull(store, name, up2)
    with S.Fg(store, mnt) as fg:
        at_mount = fg.log()
        got = S.meta(mnt, name, "general.name")
        log = fg.log()
        status = os.getxattr(os.path.join(mnt, name), "user.ggufs.status").decode(errors="replace")
    if "no longer apply" not in status or "general.name" not in status:
        raise Fail("the model's status (user.ggufs.status) does not say its edits no longer apply: %r" % status)
    if "no longer apply" not in at_mount or "general.name" not in at_mount:
        raise Fail("the store's mount did not say that %s's edits no longer apply: %r" % (name, at_mount))
    if got != "upstream's own name\n":
        raise Fail("a conflicting edit was applied over upstream's new value: %r" % got)
    if "no longer apply" not in log or "general.name" not in log or name not in log:
        raise Fail("the log does not name %s and general.name as edits that no longer apply: %r" % (name, log))
    # The way out the line names, run as written: the next mount carries.
    line = [ln for ln in log.splitlines() if "no longer apply" in ln][0]
    cmd = line.split("('", 1)[1].split("' with", 1)[0].split()
    if cmd[:2] != ["ggufs", "--overlay-rebase"] or newer not in cmd:
        raise Fail("the line does not name --overlay-rebase of the new blob: %r" % line)
    p = J.run_ggufs(cmd[1:])
    if p.returncode != 0:
        raise Fail("%s: status %d: %s" % (" ".join(cmd), p.returncode, p.stderr.decode(errors="replace")))
    with S.Fg(store, mnt):
        got = shown_name(mnt, name, tmp, S.live_name(name))
    if got != (value, value.rstrip("\n")):
        raise Fail("after %s the store shows general.name %r, not the edit" % (" ".join(cmd), got))
    J.log("ok   ollama pull of a new blob: the edits carried by name (upstream's other change kept, the new "
          "blob unwritten), a conflicting key refused by name in the log; --overlays lists source, state, keys")


# ---------------------------------------------------------------------------
# 4: a tensor written through a store model's overlay


def check_tensor_source(tmp):
    mnt, store, name, blob = ollama_b(tmp, "tw")
    before = S.sha(blob)
    ref = J.refdump(blob)[1]
    t = ref.tensors[0]
    new = bytes((i * 7 + 3) & 0xFF for i in range(t.size))
    with J.Watchdog(mnt, 120, "tensor source"), J.Mounted(store, mnt):
        tp = os.path.join(mnt, name, "tensors", J.escape_name(t.name).decode())
        with open(tp, "r+b") as f:
            f.write(new)
        src = os.getxattr(tp, "user.gguf.source").decode()
        off = int(os.getxattr(tp, "user.gguf.offset").decode())
        path, at = src.rsplit("@", 1)
        if path == os.path.realpath(blob) or int(at) != off:
            raise Fail("user.gguf.source is %s, user.gguf.offset %d after the tensor was written through the "
                       "overlay: they point into the blob, which does not hold the bytes shown" % (src, off))
        with open(path, "rb") as f:
            f.seek(off)
            if f.read(t.size) != new:
                raise Fail("%s at %d does not hold the tensor's bytes as the mount shows them" % (path, off))
        with open(tp, "rb") as f:
            if f.read() != new:
                raise Fail("tensors/%s does not read back the bytes written" % t.name)
    if S.sha(blob) != before:
        raise Fail("the blob changed after a tensor write through the store")
    J.log("ok   a tensor written through a store model: user.gguf.source/offset name the overlay's data "
          "file, which holds its bytes there; the blob unchanged")


def run():
    J.require_fuse()
    with J.store_scratch("ggufs-storeedits-") as (tmp, mnt):
        J.run_watched(mnt, 300, J.chosen("STOREEDITS_ONLY", (check_direct, check_commands, check_ro_store,
                                                             check_carry, check_tensor_source)), tmp)


if __name__ == "__main__":
    J.main(run)
