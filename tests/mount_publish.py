#!/usr/bin/env python3
"""mount_publish: the commands of issue 21 that settle a model without a
mount, and the lock files and messages around them; every file written is
judged by ggml's reference reader (tests/refdump).

  1. ggufs --compact: a model committed in place by a mount carries the
     filler key ggufs.padding; --compact leaves every other key, every
     tensor byte and the alignment, no filler, and the smallest header
     (data starts at the end of the tensor infos rounded up to the
     alignment); a second run writes nothing; a mounted model is refused;
     killed in the middle of its copy (GGUFS_FAULT=3), the model is intact
     and --recover removes the partial copy.
  2. ggufs --apply-saved: edits saved aside by a failed commit (a file
     changed behind the mount) committed into the model: exactly the
     intended keys; a second run writes nothing; refused with one line and
     the model unchanged: a model with a key the edits do not know (saved
     from another version), an overlay, a model given as the edits.
  3. overlay lock files: none left after a mount's end, --overlay-apply,
     --overlay-drop, nor by --overlay-apply refusing a saved-edits file.
  4. messages: a model the user cannot write mounts read-only with a
     warning naming -o overlay; a user who cannot open /dev/fuse gets one
     line "ggufs: MNT: ..." with a hint (run as nobody with setpriv, where
     /dev/fuse is 0600).
  5. ggufs --overlay-rebase: a local source changed behind its overlay (a
     key edited on both sides, one only upstream, one set and one removed
     only in the overlay): the overlay records each edited key's base; the
     mount's refusal offers --overlay-rebase; the rebase refused naming
     only the key changed on both sides, nothing written; with
     --take-overlay the remount shows the merged metadata (ggml judges
     the live view); the source never written.  A URL whose file was
     replaced on the server (a new ETag, nginx): the refusal names
     --overlay-rebase, after it the URL mounts with the edit.

Environment (tests/meson.build): GGUFS, MKFIXTURE, REFDUMP.  Exit 0 pass,
1 fail, 77 skip (no FUSE, no ggml library).
"""

import glob
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_edit as E  # noqa: E402

Fail = J.Fail
log = J.log
FILLER = b"ggufs.padding"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def run(args, env=None):
    p = J.run_ggufs(args, env=env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def fixture(d, name="model.gguf"):
    path = os.path.join(d, name)
    p = subprocess.run([J.tool("MKFIXTURE"), "llama", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture llama: %s" % p.stderr.decode(errors="replace"))
    return path


def one_line_refusal(label, rc, out, err, must=(), status=1):
    lines = [x for x in err.split("\n") if x.strip()]
    if rc != status or out.strip() or len(lines) != 1 or not lines[0].startswith("ggufs: ") \
            or not all(m in lines[0] for m in must):
        raise Fail("%s: expected exit %d and one line naming %s, got exit %d: %r %r"
                   % (label, status, must, rc, out, err))
    log("ok   %s: %s" % (label, lines[0]))


def leftovers(d, base):
    return sorted(n for n in os.listdir(d) if n.startswith(base + ".ggufs-"))


def edited(d, mnt, name, cmds):
    """A fixture mounted, edited by shell cmds, committed: (path, before,
    model of the intended keys)."""
    path = fixture(d, name)
    before = E.snapshot(path)
    E.mount(path, mnt)
    rc, out, err = E.sh(cmds, mnt)
    if rc != 0:
        E.cleanup_mounts(d)
        raise Fail("edits %r failed: %s" % (cmds, err))
    E.ggufs_u(mnt, 0)
    return path, before


def section_compact(d, mnt):
    path, before = edited(d, mnt, "c.gguf", "echo 'short' > meta/general.name")
    mid = E.snapshot(path)
    if mid.n_filler != 1:
        raise Fail("the in-place commit left %d filler keys (expected one)" % mid.n_filler)
    model = E.Model(mid)
    # refused while mounted
    E.mount(path, mnt, ["-o", "ro"])
    try:
        rc, out, err = run(["--compact", path])
        one_line_refusal("--compact of a mounted model", rc, out, err, (path, "mounted"))
    finally:
        J.unmount(mnt, [])
    if E.snapshot(path).sha != mid.sha:
        raise Fail("--compact of a mounted model changed it")
    # killed in the middle of the copy: the model as it was
    env = dict(os.environ, GGUFS_FAULT="3")
    rc, out, err = run(["--compact", path], env=env)
    if rc == 0 or E.snapshot(path).sha != mid.sha:
        raise Fail("--compact killed at its copy: exit %d, the model %s" % (
            rc, "unchanged" if E.snapshot(path).sha == mid.sha else "CHANGED"))
    rc, out, err = run(["--recover", path])
    if rc != 0 or leftovers(d, "c.gguf"):
        raise Fail("--recover after a killed --compact: exit %d %r %r, left %s" % (rc, out, err, leftovers(d, "c.gguf")))
    log("ok   --compact killed while copying: the model unchanged, --recover removed the partial copy")
    rc, out, err = run(["--compact", path])
    if rc != 0 or "compacted" not in out:
        raise Fail("--compact: exit %d, %r %r" % (rc, out, err))
    after = E.judge_commit("--compact", path, mid, model)
    w = J.walk_gguf(path)
    a = after.alignment
    smallest = (w.header_end + a - 1) // a * a
    if after.n_filler or any(k[0] == FILLER for k in w.kvs):
        raise Fail("--compact left the filler key")
    if after.data_offset != smallest:
        raise Fail("--compact: data at %d, the smallest header ends at %d" % (after.data_offset, smallest))
    if after.size >= mid.size or after.mode != mid.mode:
        raise Fail("--compact: size %d -> %d, mode %o -> %o" % (mid.size, after.size, mid.mode, after.mode))
    log("ok   --compact: %s; %d -> %d bytes, data at %d (smallest), judged by ggml"
        % (out.strip(), mid.size, after.size, after.data_offset))
    rc, out, err = run(["--compact", path])
    if rc != 0 or "already compact" not in out or E.snapshot(path).sha != after.sha:
        raise Fail("a second --compact: exit %d, %r %r" % (rc, out, err))
    if leftovers(d, "c.gguf"):
        raise Fail("--compact left %s" % leftovers(d, "c.gguf"))
    # the compact file takes edits again (its header grows)
    E.mount(path, mnt)
    E.sh("echo 'a name longer than before, after compacting' > meta/general.name", mnt)
    E.ggufs_u(mnt, 0)
    model.value(b"general.name", E.sval(b"a name longer than before, after compacting"))
    E.judge_commit("an edit after --compact", path, after, model)
    log("ok   a second --compact writes nothing; the compact model takes edits again")


def failed_commit(d, mnt, name):
    """Edits whose commit fails (a tensor byte of the model changed behind
    the mount): (model path, saved edits path, model of the edits)."""
    path = fixture(d, name)
    before = E.snapshot(path)
    model = E.Model(before)
    E.mount(path, mnt)
    E.sh("echo 'saved aside' > meta/general.name && echo 'a note' > meta/mytool.note && "
         "rm meta/general.file_type", mnt)
    model.value(b"general.name", E.sval(b"saved aside"))
    model.set(b"mytool.note", "string", E.sval(b"a note"))
    model.delete(b"general.file_type")
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) - 8)
        f.write(b"\x55\x66\x77\x88")
    _, _, err = E.ggufs_u(mnt, 4)
    saved = glob.glob(path + ".ggufs-edits-*.gguf")
    if len(saved) != 1 or "saved in" not in err:
        raise Fail("a failed commit: %r, saved %s" % (err, saved))
    return path, saved[0], model


def section_apply_saved(d, mnt):
    path, saved, model = failed_commit(d, mnt, "s.gguf")
    before = E.snapshot(path)
    rc, out, err = run(["--apply-saved", saved, path])
    if rc != 0 or "committed" not in out or "general.name" not in out:
        raise Fail("--apply-saved: exit %d, %r %r" % (rc, out, err))
    after = E.judge_commit("--apply-saved", path, before, model)
    log("ok   --apply-saved: %s; judged by ggml" % out.strip())
    rc, out, err = run(["--apply-saved", saved, path])
    if rc != 0 or "already in the file" not in out or E.snapshot(path).sha != after.sha:
        raise Fail("a second --apply-saved: exit %d, %r %r" % (rc, out, err))
    # saved from another version: the model has a key the edits don't know
    path2, saved2, _ = failed_commit(d, mnt, "s2.gguf")
    E.mount(path2, mnt)
    E.sh("echo 7 > meta/newer.key", mnt)
    E.ggufs_u(mnt, 0)
    sha2 = E.snapshot(path2).sha
    rc, out, err = run(["--apply-saved", saved2, path2])
    one_line_refusal("--apply-saved against another version", rc, out, err, ("newer.key", "another version"))
    ov = os.path.join(d, "an.overlay.gguf")
    E.mount(path2, mnt, ["-o", "overlay=" + ov])
    E.sh("echo 'in an overlay' > meta/general.name", mnt)
    E.ggufs_u(mnt, 0)
    rc, out, err = run(["--apply-saved", ov, path2])
    one_line_refusal("--apply-saved of an overlay", rc, out, err, ("--overlay-apply",))
    rc, out, err = run(["--apply-saved", path, path2])
    one_line_refusal("--apply-saved of a model as the edits", rc, out, err, ("tensors",))
    if E.snapshot(path2).sha != sha2:
        raise Fail("a refused --apply-saved changed the model")
    locks = glob.glob(os.path.join(d, "*.ggufs-lock"))
    if locks:
        raise Fail("lock files left: %s" % locks)
    # the dead end: --overlay-apply of a saved file refuses, and
    # leaves no lock file
    rc, out, err = run(["--overlay-apply", path2, saved2])
    if rc != 1 or os.path.exists(saved2 + ".ggufs-lock"):
        raise Fail("--overlay-apply of saved edits: exit %d %r, lock file %s" % (
            rc, err, "left" if os.path.exists(saved2 + ".ggufs-lock") else "gone"))
    log("ok   --overlay-apply of saved edits refused without leaving a lock file")
    rc, out, err = run(["--overlay-apply", path2, ov])
    if rc != 0 or os.path.exists(ov + ".ggufs-lock") or os.path.exists(ov):
        raise Fail("--overlay-apply: exit %d %r %r; overlay %s, lock file %s" % (
            rc, out, err, os.path.exists(ov), os.path.exists(ov + ".ggufs-lock")))
    E.mount(path2, mnt, ["-o", "overlay=" + ov])
    E.sh("echo 'to drop' > meta/general.name", mnt)
    E.ggufs_u(mnt, 0)
    if os.path.exists(ov + ".ggufs-lock"):
        raise Fail("an overlay mount's end left its lock file")
    rc, out, err = run(["--overlay-drop", path2, ov])
    if rc != 0 or os.path.exists(ov + ".ggufs-lock") or os.path.exists(ov):
        raise Fail("--overlay-drop: exit %d %r; lock file %s" % (rc, err, os.path.exists(ov + ".ggufs-lock")))
    log("ok   no overlay lock file after a mount's end, --overlay-apply, --overlay-drop")


def section_messages(d, mnt):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        log("note: the non-root messages skipped (needs root and setpriv)")
        return
    sub = os.path.join(d, "nobody")
    os.mkdir(sub)
    path = fixture(sub, "n.gguf")
    m2 = os.path.join(sub, "mnt")
    os.mkdir(m2)
    os.chmod(d, 0o755)  # mkdtemp's 0700 would stop nobody at the door
    for p in (sub, m2):
        os.chmod(p, 0o777)
    os.chmod(path, 0o644)  # root's: nobody cannot write it
    env = dict(os.environ, HOME=sub, XDG_STATE_HOME=os.path.join(sub, "state"))
    p = subprocess.run(NOBODY + [J.tool("GGUFS"), path, m2], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, timeout=60)
    err = p.stderr.decode(errors="replace")
    if J.mountinfo_entry(m2) is not None:
        J.unmount(m2, [])
    if "not writable, mounting read-only" not in err or "-o overlay" not in err:
        raise Fail("a model nobody cannot write: no warning naming -o overlay: %r" % err)
    log("ok   a model the user cannot write: %s" % err.splitlines()[0])
    fuse_mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    if fuse_mode & 0o006:
        log("note: /dev/fuse is open to all (mode %o): the not-allowed message is not reachable" % fuse_mode)
        return
    lines = [x for x in err.splitlines() if "/dev/fuse" in x]
    if p.returncode != 3 or len(lines) != 1 or not lines[0].startswith("ggufs: %s: " % m2) \
            or "root" not in lines[0] or "fusermount3" not in lines[0]:
        raise Fail("nobody without /dev/fuse: exit %d, %r" % (p.returncode, err))
    log("ok   a user who may not open /dev/fuse: %s" % lines[0])


def rebase_refused(label, mnt, path, args, must):
    """An overlay mount of path refused with one line naming every string
    of must."""
    rc, out, err = run(list(args) + [path, mnt])
    if J.mountinfo_entry(mnt) is not None:
        J.unmount(mnt, [])
        raise Fail("%s: mounted anyway" % label)
    one_line_refusal(label, rc, out, err, must)


def read_meta(mnt, key):
    with open(os.path.join(mnt, "meta", key), "rb") as f:
        return f.read()


def section_rebase(d, mnt):
    """--overlay-rebase of a local source changed behind its overlay: a
    key edited in both (refused, named), one only upstream, one only in
    the overlay (set, and a removal)."""
    path = fixture(d, "r.gguf")
    ov = os.path.join(d, "r.overlay.gguf")
    args = ["-o", "overlay=" + ov]
    E.mount(path, mnt, args)
    E.sh("echo 'overlay name' > meta/general.name && echo 'overlay note' > meta/mytool.note && "
         "rm meta/general.file_type", mnt)
    E.ggufs_u(mnt, 0)
    base = overlay_base(ov)
    if sorted(base) != [b"general.file_type", b"general.name", b"mytool.note"] or base[b"mytool.note"] != b"none":
        raise Fail("the overlay records the bases %r" % base)
    E.mount(path, mnt)
    E.sh("echo 'upstream name' > meta/general.name && echo 'from upstream' > meta/upstream.only", mnt)
    E.ggufs_u(mnt, 0)
    up = E.snapshot(path)
    ov0 = J.file_sha256(ov)
    rebase_refused("an overlay mount of a changed file", mnt, path, args,
                   ("does not belong", "--overlay-rebase %s %s" % (path, ov), "--overlay-drop"))
    rc, out, err = run(["--overlay-rebase", path, ov])
    one_line_refusal("--overlay-rebase with a key changed on both sides", rc, out, err,
                     ("general.name", ov, "--take-overlay"))
    if "mytool.note" in err or "general.file_type" in err or J.file_sha256(ov) != ov0:
        raise Fail("the refused rebase names keys only the overlay changed, or wrote the overlay: %r" % err)
    rc, out, err = run(["--overlay-rebase", path, ov, "--take-overlay"])
    if rc != 0 or "rebased" not in out or "general.name" not in out or err.strip():
        raise Fail("--overlay-rebase --take-overlay: exit %d, %r %r" % (rc, out, err))
    if E.snapshot(path).sha != up.sha or leftovers(d, "r.overlay.gguf"):
        raise Fail("--overlay-rebase wrote the source, or left %s" % leftovers(d, "r.overlay.gguf"))
    log("ok   --overlay-rebase --take-overlay: %s" % out.strip())
    model = E.Model(up)
    model.value(b"general.name", E.sval(b"overlay name"))
    model.set(b"mytool.note", "string", E.sval(b"overlay note"))
    model.delete(b"general.file_type")
    E.mount(path, mnt, args)
    try:
        E.judge_commit("the live view of the rebased overlay", os.path.join(mnt, "r.gguf"), up, model)
        if read_meta(mnt, "upstream.only") != b"from upstream\n":
            raise Fail("the rebased overlay mount lost the upstream-only key")
    finally:
        J.unmount(mnt, [])
    rc, out, err = run(["--overlay-rebase", path, ov])
    if rc != 0 or "nothing to do" not in out:
        raise Fail("a second --overlay-rebase: exit %d, %r %r" % (rc, out, err))
    log("ok   the rebased overlay mounts: the overlay's edits on the new version, judged by ggml")
    rebase_remote(d, mnt)


def overlay_base(ov):
    """{key: base hash} the overlay records (ggufs.overlay.base), by ggml."""
    verdict, ref = J.refdump(ov)
    if ref is None:
        raise Fail("ggml's reader rejects the overlay %s: %s" % (ov, verdict))
    kv = {k.key: k.content for k in ref.kvs}.get(b"ggufs.overlay.base")
    if kv is None:
        raise Fail("the overlay %s records no bases" % ov)
    out = {}
    for line in kv.split(b"\n"):
        m = re.fullmatch(rb"(xxh3-128:[0-9a-f]{32}|none) (.+)", line)
        if m:
            out[m.group(2)] = m.group(1)
        elif line:
            raise Fail("the overlay's base entry %r is not HASH KEY" % line)
    return out


def rebase_remote(d, mnt):
    """A remote file replaced on the server (a new ETag): the overlay
    mount's refusal names --overlay-rebase; after it the URL mounts with
    the overlay's edit on the new version."""
    import webserver as W
    if not W.exe():
        log("SKIP (part) remote rebase: nginx is not installed")
        return
    os.chmod(d, 0o755)
    www = os.path.join(d, "www")
    os.mkdir(www)
    served = fixture(www, "m.gguf")
    os.chmod(served, 0o644)
    ngx = W.Nginx(os.path.join(d, "nginx"), www)
    try:
        url = ngx.url("m.gguf")
        ov = os.path.join(d, "remote.overlay.gguf")
        args = ["-o", "overlay=" + ov, "-o", "cache=" + os.path.join(d, "cache")]
        E.mount(url, mnt, args)
        E.sh("echo 'overlay note' > meta/mytool.note", mnt)
        E.ggufs_u(mnt, 0)
        new = fixture(d, "m-new.gguf")
        E.mount(new, mnt)
        E.sh("echo 'upstream name' > meta/general.name", mnt)
        E.ggufs_u(mnt, 0)
        up = E.snapshot(new)
        shutil.copyfile(new, served + ".tmp")
        os.chmod(served + ".tmp", 0o644)
        os.replace(served + ".tmp", served)
        st = os.stat(served)  # nginx's ETag is mtime (seconds) and size
        os.utime(served, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 10))
        rebase_refused("an overlay mount of a URL whose ETag changed", mnt, url, args,
                       ("server's version", "--overlay-rebase %s %s" % (url, ov)))
        os.mkdir(os.path.join(d, "xc"))  # not the user's cache
        rc, out, err = run(["--overlay-rebase", url, ov], env=dict(os.environ, XDG_CACHE_HOME=os.path.join(d, "xc")))
        if rc != 0 or "rebased" not in out:
            raise Fail("--overlay-rebase of a URL: exit %d, %r %r" % (rc, out, err))
        model = E.Model(up)
        model.set(b"mytool.note", "string", E.sval(b"overlay note"))
        E.mount(url, mnt, args)
        try:
            E.judge_commit("the live view of a rebased remote overlay", os.path.join(mnt, "m.gguf"), up, model)
        finally:
            J.unmount(mnt, [])
        log("ok   remote rebase: the refusal names --overlay-rebase; %s" % out.strip())
    finally:
        ngx.stop()


def main():
    J.require_fuse()
    J.refdump(fixture(tempfile.mkdtemp(prefix="ggufs-probe-")))  # Skip without ggml
    d = tempfile.mkdtemp(prefix="ggufs-publish-", dir="/tmp")
    mnt = os.path.join(d, "mnt")
    os.mkdir(mnt)
    os.environ["XDG_STATE_HOME"] = os.path.join(d, "state")
    os.environ.pop("GGUFS_FAULT", None)
    try:
        with J.Watchdog(mnt, 500, "mount_publish"):
            section_compact(d, mnt)
            section_apply_saved(d, mnt)
            section_messages(d, mnt)
            section_rebase(d, mnt)
    finally:
        E.cleanup_mounts(d)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    J.main(main)
