#!/usr/bin/env python3
"""mount_overlay: -o overlay[=PATH], edits kept beside a model that must not
change (issue 14), judged by ggml's reference reader (tests/refdump) and by
llama.cpp (node-llama-cpp, tests/llama_eval.mjs) where installed.

A small llama model ($MKFIXTURE llama) is made read-only: mode 0444 in a
0555 directory (root ignores those bits, so what is checked is that the
daemon never opens it for writing: /proc/PID/fdinfo, and its sha256), and
in a second part immutable (chattr +i, where the filesystem supports it:
there even root cannot write it).

  1. overlay mount: edits (a value, a new key, the chat template, a
     removal); the live view judged by ggml (exactly the intended keys,
     every tensor byte the source's) and run by llama.cpp (the edited
     metadata, the same greedy tokens and probabilities); xattrs of the
     edited keys; ggufs -u: the source byte-identical, nothing new beside
     it, the overlay a GGUF ggml reads, in the state directory.
  2. remount: the overlay applied (meta/, the live view, llama.cpp), its
     own keys hidden from meta/, and nothing rewritten without edits.
  3. a source changed behind the overlay (its header, its size): the
     overlay refused with one line that says how it differs and where the
     overlay is; nothing mounted.
  4. chattr +i.
  5. ggufs --overlay-apply gives the very file a normal mount's commit of
     the same edits gives (sha256), header fitting and header growing.
  6. kill -9 at every fault point of an overlay write (GGUFS_FAULT=1..5):
     ggml reads the old overlay or the new one, never a mix; point 6 does
     not exist (the write completes); no temporary file stays.
  7. hostile overlays (symlink, another owner, writable by others, a FIFO,
     not a GGUF, a GGUF that is no overlay; at -o overlay=PATH and at the
     default place): refused with one line naming the file, nothing
     mounted, nothing removed by --overlay-drop.
  8. a shard set in a read-only directory: the overlay belongs to the set.
  9. --overlay-drop says what it did; the model is as it was.
 10. issue 15's views (f32/, npy/, index.tsv, the hashes on tensors/) on an
     overlay mount with edits: a plain mount's.
 11. one writer per overlay: two files mounted with the same -o
     overlay=PATH, the second refused with one line (so is --overlay-drop
     while the first runs); a mount whose holder was unmounted but is still
     running waits for it; no lock file stays once its holders end; a
     symlinked lock file refused.
 12. ggufs -u of an overlay mount whose daemon was killed says where the
     edits are; the next mount shows them.
 13. a remote source (nginx) with an overlay: edits through the mount, the
     live view judged by ggml and run by llama.cpp, the views; the served
     file byte-identical; the overlay keyed by URL and ETag; a second mount
     of the URL refused; --overlay-apply (and --recover, --apply-pending)
     of a URL refused with one line; remount; kill -9 then ggufs -u; the
     file changed on the server (a new ETag): the overlay refused;
     --overlay-drop of a URL; a remote shard set (every shard's version);
     an overlay that cannot be written: ggufs -u exits 4, the edits saved
     once.

Environment (tests/meson.build): GGUFS, MKFIXTURE, MKSPLIT, REFDUMP,
GGUFS_SRCDIR.  Exit 0 pass, 1 fail, 77 skip (no FUSE, no ggml library).
"""

import glob
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_edit as E  # noqa: E402
import mount_llama as L  # noqa: E402

Fail = J.Fail
log = J.log
NEW_NAME = b"renamed in an overlay"
NOTE = b"kept beside the model"
REMOVED = b"general.file_type"


class T:
    """What the sections share."""


def sha(path):
    return J.file_sha256(path, limit=1 << 40)


def run(args, env=None):
    p = J.run_ggufs(args, env=env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def mount(t, path, args, env=None):
    rc, out, err = run(list(args) + [path, t.mnt], env=env)
    if rc != 0:
        E.cleanup_mounts(t.tmp)
        raise Fail("ggufs %s %s exited %d: %s" % (" ".join(args), path, rc, err.strip()))
    if J.mountinfo_entry(t.mnt) is None:
        raise Fail("ggufs %s %s exited 0 but nothing is mounted" % (" ".join(args), path))
    return err


def unmount(t, want="overlay"):
    rc, out, err = run(["-u", t.mnt])
    if rc != 0:
        raise Fail("ggufs -u %s exited %d: %s %s" % (t.mnt, rc, out.strip(), err.strip()))
    if want and want not in out:
        raise Fail("ggufs -u: the report %r does not mention %r" % (out.strip(), want))
    return out


def refused(t, args, path, mnt, label, must=()):
    """ggufs ARGS PATH MNT (None: t.mnt) must fail with exit 1 and exactly
    one line that contains every string of must; nothing may be mounted."""
    mnt = mnt or t.mnt
    rc, out, err = run(list(args) + [path, mnt])
    if J.mountinfo_entry(mnt) is not None:
        J.unmount(mnt, [])
        raise Fail("%s: mounted anyway (exit %d)" % (label, rc))
    lines = [x for x in err.split("\n") if x.strip()]
    if rc != 1 or len(lines) != 1 or not all(m in lines[0] for m in must):
        raise Fail("%s: expected exit 1 and one line naming %s, got exit %d: %r" % (label, must, rc, err))
    log("ok   %s: %s" % (label, lines[0]))


def readonly_fds(t, src):
    """Every descriptor of the daemon on src is read-only."""
    pids = J._procs_for(t.mnt)
    if not pids:
        raise Fail("no ggufs daemon found for %s" % t.mnt)
    real, seen = os.path.realpath(src), 0
    for pid in pids:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target != real:
                continue
            seen += 1
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                flags = int(f.read().split("flags:")[1].split()[0], 8)
            if flags & 3:
                raise Fail("the daemon holds %s open for writing (fd %s, flags %o)" % (src, fd, flags))
    if not seen:
        raise Fail("the daemon holds no descriptor of %s" % src)


def overlay_keys(path):
    """{key: content} of a file, by ggml's reader."""
    verdict, ref = J.refdump(path)
    if ref is None:
        raise Fail("ggml's reader rejects the overlay %s: %s" % (path, verdict))
    return {kv.key: kv.content for kv in ref.kvs}


def edits(mnt, model, tpl):
    """The edits of sections 1, 5: through the shell and a file write."""
    rc, out, err = E.sh("echo '%s' > meta/general.name && echo '%s' > meta/mytool.note && rm meta/%s"
                        % (NEW_NAME.decode(), NOTE.decode(), REMOVED.decode()), mnt)
    if rc != 0:
        raise Fail("edits through the mount failed: %s" % err)
    with open(os.path.join(mnt, "meta", "tokenizer.chat_template"), "wb") as f:
        f.write(tpl + b"\n")
    model.value(b"general.name", E.sval(NEW_NAME))
    model.set(b"mytool.note", "string", E.sval(NOTE))
    model.set(b"tokenizer.chat_template", "string", E.sval(tpl))
    model.delete(REMOVED)


def llama_check(t, live, label):
    if not t.mods:
        return
    r = L.evaluate(t.mods, live, label)
    if not L.same_math(r, t.base):
        raise Fail("%s: llama.cpp generates %s, the source %s (or probabilities differ)"
                   % (label, r["tokens"], t.base["tokens"]))
    got = (r["name"], r["note"], r["chatTemplate"])
    want = (NEW_NAME.decode(), NOTE.decode(), L.TEMPLATE)
    if got != want:
        raise Fail("%s: llama.cpp reads name, note, chat template %r, expected %r" % (label, got, want))
    log("ok   %s: llama.cpp runs it with the edited metadata, same tokens and probabilities" % label)


def state_overlays(t):
    return sorted(glob.glob(os.path.join(t.state, "ggufs", "*.overlay.gguf")))


def section_mount(t):
    model = E.Model(t.before)
    mount(t, t.src, ["-o", "overlay"])
    try:
        readonly_fds(t, t.src)
        edits(t.mnt, model, L.TEMPLATE.encode())
        live = os.path.join(t.mnt, os.path.basename(t.src))
        E.judge_commit("live view of the overlay mount", live, t.before, model)
        t.model = model
        where = os.getxattr(t.mnt, "user.ggufs.overlay").decode()
        if [where] != state_overlays(t) or "user.ggufs.overlay" not in os.listxattr(t.mnt):
            raise Fail("user.ggufs.overlay of the mount reads %r" % where)
        ty = os.getxattr(os.path.join(t.mnt, "meta", "mytool.note"), "user.gguf.type")
        if ty != b"string":
            raise Fail("user.gguf.type of the new key reads %r" % ty)
        if os.path.exists(os.path.join(t.mnt, "meta", REMOVED.decode())):
            raise Fail("meta/%s is still there after rm" % REMOVED.decode())
        llama_check(t, live, "live view of the overlay mount")
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    unmount(t)
    if sha(t.src) != t.sha0:
        raise Fail("the read-only source changed (sha256) under an overlay mount")
    if os.listdir(t.srcdir) != [os.path.basename(t.src)]:
        raise Fail("files appeared beside the source: %s" % os.listdir(t.srcdir))
    ovs = state_overlays(t)
    if len(ovs) != 1:
        raise Fail("expected one overlay in the state directory, found %s" % ovs)
    t.overlay = ovs[0]
    st = os.stat(t.overlay)
    if stat.S_IMODE(st.st_mode) != 0o600:
        raise Fail("the overlay's mode is %o, not 0600" % stat.S_IMODE(st.st_mode))
    kv = overlay_keys(t.overlay)
    want = {b"general.name": E.sval(NEW_NAME), b"mytool.note": E.sval(NOTE),
            b"ggufs.overlay.source_size": b"%d\n" % os.path.getsize(t.src),
            b"ggufs.overlay.source_shards": b"1\n", b"ggufs.removed_keys": REMOVED + b"\n"}
    for k, v in want.items():
        if kv.get(k) != v:
            raise Fail("the overlay's %s reads %r, expected %r" % (k.decode(), kv.get(k), v))
    if b"tokenizer.ggml.tokens" in kv:
        raise Fail("the overlay holds the unchanged vocabulary: it should hold only the edits")
    log("ok   overlay mount of a 0444 file in a 0555 directory: edits in meta/, the live view judged by ggml, "
        "xattrs; the source byte-identical, opened read-only; the overlay (%d bytes) read by ggml"
        % st.st_size)


def section_remount(t):
    err = mount(t, t.src, ["-o", "overlay"])
    try:
        if "applied (3 keys set, 1 removed)" not in err or t.overlay not in err:
            raise Fail("remount: stderr %r does not say the overlay %s was applied (3 set, 1 removed)"
                       % (err, t.overlay))
        names = os.listdir(os.path.join(t.mnt, "meta"))
        hidden = [n for n in names if n.startswith("ggufs.")]
        if hidden:
            raise Fail("meta/ shows ggufs's own keys: %s" % hidden)
        with open(os.path.join(t.mnt, "meta", "general.name"), "rb") as f:
            if f.read() != E.sval(NEW_NAME):
                raise Fail("remount: general.name is not the edited one")
        live = os.path.join(t.mnt, os.path.basename(t.src))
        E.judge_commit("live view after remount", live, t.before, t.model)
        llama_check(t, live, "live view after a remount")
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    before = sha(t.overlay), os.stat(t.overlay).st_mtime_ns
    unmount(t, "holds every edit")
    if (sha(t.overlay), os.stat(t.overlay).st_mtime_ns) != before or sha(t.src) != t.sha0:
        raise Fail("a remount without edits rewrote the overlay or the source")
    err = mount(t, t.src, ["-o", "ro"])
    try:
        os.getxattr(t.mnt, "user.ggufs.overlay")
        raise Fail("a mount without -o overlay has user.ggufs.overlay")
    except OSError:
        pass
    unmount(t, None)
    if "note: the overlay %s holds edits of this file" % t.overlay not in err:
        raise Fail("a mount without -o overlay does not say the file has an overlay: %r" % err)
    log("ok   remount: the overlay applied (meta/, live view by ggml, llama.cpp), its keys hidden; "
        "nothing rewritten without edits; a mount without -o overlay notes the overlay")


def copy_model(t, name, d=None):
    p = os.path.join(d or t.tmp, name)
    shutil.copyfile(t.model_path, p)
    return p


def section_stale(t):
    c = copy_model(t, "c.gguf")
    ov = os.path.join(t.tmp, "c.overlay.gguf")
    mount(t, c, ["-o", "overlay=" + ov])
    E.sh("echo 'overlay name' > meta/general.name", t.mnt)
    unmount(t)
    # the header changes: a normal mount's commit
    mount(t, c, [])
    E.sh("echo 'changed in the file' > meta/general.name", t.mnt)
    unmount(t, "committed")
    refused(t, ["-o", "overlay=" + ov], c, None, "a source whose header changed",
            ("does not belong", ov, "header", "--overlay-drop"))
    # the size changes, the header does not
    d = copy_model(t, "d.gguf")
    ovd = os.path.join(t.tmp, "d.overlay.gguf")
    mount(t, d, ["-o", "overlay=" + ovd])
    E.sh("echo 'overlay name' > meta/general.name", t.mnt)
    unmount(t)
    size = os.path.getsize(d)
    with open(d, "ab") as f:
        f.write(b"\0" * 64)
    refused(t, ["-o", "overlay=" + ovd], d, None, "a source whose size changed",
            ("does not belong", ovd, "made for %d bytes, the source has %d" % (size, size + 64)))


def section_immutable(t):
    d = os.path.join(t.tmp, "immutable")
    os.mkdir(d)
    imm = copy_model(t, "imm.gguf", d)
    p = subprocess.run(["chattr", "+i", imm], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        log("SKIP (part) chattr +i: not supported here (%s)" % p.stderr.decode(errors="replace").strip())
        return
    t.immutable.append(imm)
    try:
        open(imm, "r+b").close()
        raise Fail("chattr +i did not make %s unwritable for root" % imm)
    except PermissionError:
        pass
    s0 = sha(imm)
    ov = os.path.join(t.tmp, "imm.overlay.gguf")
    model = E.Model(t.before)
    mount(t, imm, ["-o", "overlay=" + ov])
    try:
        readonly_fds(t, imm)
        edits(t.mnt, model, L.TEMPLATE.encode())
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    unmount(t)
    mount(t, imm, ["-o", "overlay=" + ov])
    try:
        E.judge_commit("live view of an immutable file's overlay", os.path.join(t.mnt, "imm.gguf"), t.before, model)
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    unmount(t)
    if sha(imm) != s0:
        raise Fail("the immutable file changed")
    subprocess.run(["chattr", "-i", imm])
    t.immutable.remove(imm)
    log("ok   chattr +i: edits through an overlay mount, kept across a remount; the file byte-identical")


def section_apply(t):
    for kind in ("fits", "grows"):
        a = copy_model(t, "a-%s.gguf" % kind)
        b = copy_model(t, "b-%s.gguf" % kind)
        ov = os.path.join(t.tmp, "b-%s.overlay.gguf" % kind)
        model = E.Model(t.before)

        def do(mnt):
            if kind == "fits":
                rc, out, err = E.sh("echo 'short' > meta/general.name && rm meta/%s" % REMOVED.decode(), mnt)
                model.value(b"general.name", E.sval(b"short"))
                model.delete(REMOVED)
            else:
                big = b"x" * (300 << 10)
                with open(os.path.join(mnt, "meta", "mytool.big"), "wb") as f:
                    f.write(big + b"\n")
                rc, out, err = E.sh("echo 'grown' > meta/general.name", mnt)
                model.value(b"general.name", E.sval(b"grown"))
                model.set(b"mytool.big", "string", E.sval(big))
            if rc != 0:
                raise Fail("edits failed: %s" % err)
        mount(t, a, [])
        do(t.mnt)
        unmount(t, "committed")
        model = E.Model(t.before)
        mount(t, b, ["-o", "overlay=" + ov])
        do(t.mnt)
        unmount(t)
        if sha(b) != t.sha0:
            raise Fail("%s: the overlay mount changed the source" % kind)
        rc, out, err = run(["--overlay-apply", b, ov])
        if rc != 0 or "committed into the file" not in out or os.path.exists(ov):
            raise Fail("--overlay-apply (%s): exit %d, %r %r, overlay %s" % (kind, rc, out, err,
                       "still there" if os.path.exists(ov) else "removed"))
        if sha(a) != sha(b):
            raise Fail("--overlay-apply (%s) wrote another file than a normal commit of the same edits" % kind)
        E.judge_commit("--overlay-apply (%s)" % kind, b, t.before, model)
        log("ok   --overlay-apply, header %s: the same bytes as a normal commit (sha256), judged by ggml: %s"
            % (kind, out.strip()))
    rc, out, err = run(["--overlay-apply", b, ov])
    if rc != 1 or "no overlay" not in err:
        raise Fail("--overlay-apply without an overlay: exit %d, %r" % (rc, err))


def section_faults(t):
    k = os.path.join(t.srcdir_w, "k.gguf")
    ov = os.path.join(t.tmp, "k.overlay.gguf")
    s0 = sha(k)
    name = os.path.join(t.mnt, "meta", "general.name")
    mount(t, k, ["-o", "overlay=" + ov])
    with open(name, "wb") as f:
        f.write(b"v0\n")
    unmount(t)
    old = b"v0\n"
    for n in range(1, 7):
        env = dict(os.environ, GGUFS_FAULT=str(n))
        mount(t, k, ["-o", "overlay=" + ov], env=env)
        pids = J._procs_for(t.mnt)
        new = b"v%d\n" % n
        try:
            with open(name, "wb") as f:
                f.write(new)
            wrote = True
        except OSError:
            wrote = False
        deadline = time.time() + 10
        while n <= 5 and time.time() < deadline and any(
                os.path.exists("/proc/%d" % p) and not J._zombie(p) for p in pids):
            time.sleep(0.05)
        alive = [p for p in pids if os.path.exists("/proc/%d" % p) and not J._zombie(p)]
        if n == 6:
            if not alive or not wrote:
                raise Fail("GGUFS_FAULT=6: an overlay write has only 5 fault points, yet the daemon died")
            unmount(t)
        else:
            if alive:
                E.cleanup_mounts(t.tmp)
                raise Fail("GGUFS_FAULT=%d: the daemon did not die at the fault point" % n)
            subprocess.run(["fusermount3", "-u", "-z", t.mnt], stderr=subprocess.DEVNULL)
        got = overlay_keys(ov).get(b"general.name")
        want = old if n <= 4 else new
        if got != want:
            raise Fail("kill at fault point %d of an overlay write: general.name %r in the overlay, expected %r "
                       "(old %r, new %r)" % (n, got, want, old, new))
        old = got
        log("ok   kill -9 at overlay write step %d: ggml reads the %s overlay whole" % (n, "old" if n <= 4 else "new"))
    left = [x for x in os.listdir(t.tmp) if ".ggufs-tmp-" in x]
    if left:
        raise Fail("temporary overlay files left after a later write: %s" % left)
    if sha(k) != s0:
        raise Fail("the source changed during the fault runs")
    log("ok   no temporary file left, the source untouched")


def section_hostile(t):
    good = t.overlay
    hd = os.path.join(t.tmp, "hostile")
    os.mkdir(hd)
    h = os.path.join(hd, "h.overlay.gguf")
    args = ["-o", "overlay=" + h]

    def fresh():
        if os.path.lexists(h):
            os.unlink(h)
    fresh()
    os.symlink(good, h)
    refused(t, args, t.src, None, "a symlink as overlay", (h, "symbolic link"))
    fresh()
    shutil.copyfile(good, h)
    os.chmod(h, 0o600)
    os.chown(h, 65534, 65534)
    refused(t, args, t.src, None, "an overlay of another user", (h, "owned by uid 65534"))
    rc, out, err = run(["--overlay-drop", t.src, h])
    if rc != 1 or not os.path.exists(h) or "owned by uid 65534" not in err:
        raise Fail("--overlay-drop of another user's file: exit %d, %r, %s" % (rc, err, os.path.exists(h)))
    rc, out, err = run(["--overlay-apply", t.src, h])
    if rc != 1 or sha(t.src) != t.sha0:
        raise Fail("--overlay-apply of another user's overlay: exit %d, %r" % (rc, err))
    os.chown(h, 0, 0)
    os.chmod(h, 0o666)
    refused(t, args, t.src, None, "an overlay writable by others", (h, "writable by others"))
    fresh()
    os.mkfifo(h, 0o600)
    refused(t, args, t.src, None, "a FIFO as overlay", (h, "not a regular file"))
    fresh()
    with open(h, "wb") as f:
        f.write(b"GGUF\x03\0\0\0" + b"\xff" * 40)
    os.chmod(h, 0o600)
    refused(t, args, t.src, None, "an overlay that is not a valid GGUF", (h, "not a valid GGUF"))
    fresh()
    p = subprocess.run([J.tool("MKFIXTURE"), "types", h], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture types failed")
    os.chmod(h, 0o600)
    refused(t, args, t.src, None, "a GGUF that is no overlay", (h, "not a ggufs overlay"))
    # the default place
    moved = good + ".moved"
    os.rename(good, moved)
    try:
        os.symlink(moved, good)
        refused(t, ["-o", "overlay"], t.src, None, "a symlink at the default overlay place", (good, "symbolic link"))
        os.unlink(good)
    finally:
        os.rename(moved, good)
    if sha(t.src) != t.sha0:
        raise Fail("the source changed")


def split3(t, d):
    """The test model split in 3 shards into new directory d (gguf-split's
    layout, tests/mksplit); their names, in order."""
    os.mkdir(d)
    p = subprocess.run([J.tool("MKSPLIT"), t.model_path, os.path.join(d, "tiny"), "3"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0:
        raise Fail("mksplit failed: %s" % p.stderr.decode(errors="replace"))
    return sorted(os.listdir(d))


def section_shards(t):
    d = os.path.join(t.tmp, "shards")
    files = split3(t, d)
    for f in files:
        os.chmod(os.path.join(d, f), 0o444)
    os.chmod(d, 0o555)
    shas = [sha(os.path.join(d, f)) for f in files]
    first = os.path.join(d, files[0])
    ov = os.path.join(t.tmp, "shards.overlay.gguf")
    mount(t, first, ["-o", "overlay=" + ov])
    try:
        E.sh("echo '%s' > meta/general.name" % NEW_NAME.decode(), t.mnt)
        kv = overlay_keys(os.path.join(t.mnt, "tiny.gguf"))
        if kv.get(b"general.name") != E.sval(NEW_NAME):
            raise Fail("the merged live view of the set does not show the edit")
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    unmount(t)
    if [sha(os.path.join(d, f)) for f in files] != shas:
        raise Fail("a shard changed under an overlay mount")
    kv = overlay_keys(ov)
    if kv.get(b"ggufs.overlay.source_shards") != b"3\n":
        raise Fail("the set's overlay records %r shards" % kv.get(b"ggufs.overlay.source_shards"))
    err = mount(t, first, ["-o", "overlay=" + ov])
    with open(os.path.join(t.mnt, "meta", "general.name"), "rb") as f:
        got = f.read()
    unmount(t)
    if got != E.sval(NEW_NAME) or "applied" not in err:
        raise Fail("remount of the set: general.name %r, stderr %r" % (got, err))
    # --overlay-apply into a set: the bytes a normal mount's commit gives
    sets = []
    for tag in ("normal", "overlay"):
        sd = os.path.join(t.tmp, "set-" + tag)
        os.mkdir(sd)
        for f in files:
            shutil.copyfile(os.path.join(d, f), os.path.join(sd, f))
        sets.append(sd)
    ovs = os.path.join(t.tmp, "set.overlay.gguf")
    for sd, args in ((sets[0], []), (sets[1], ["-o", "overlay=" + ovs])):
        mount(t, os.path.join(sd, files[0]), args)
        E.sh("echo 'set edit' > meta/general.name && echo 1 > meta/mytool.flag", t.mnt)
        unmount(t, "committed" if not args else "overlay")
    rc, out, err = run(["--overlay-apply", os.path.join(sets[1], files[0]), ovs])
    if rc != 0:
        raise Fail("--overlay-apply into a shard set: exit %d, %r" % (rc, err))
    for f in files:
        if sha(os.path.join(sets[0], f)) != sha(os.path.join(sets[1], f)):
            raise Fail("--overlay-apply into a set: shard %s differs from a normal commit's" % f)
    # another set of the same first shard's name does not take it
    os.chmod(d, 0o755)
    os.chmod(os.path.join(d, files[2]), 0o644)
    with open(os.path.join(d, files[2]), "ab") as f:
        f.write(b"\0" * 32)
    refused(t, ["-o", "overlay=" + ov], first, None, "a set whose third shard changed",
            ("does not belong", "bytes"))
    log("ok   shard set (0444 files, 0555 directory): the overlay belongs to the set (its size and every "
        "shard's header); the merged live view shows the edit; the shards byte-identical; --overlay-apply "
        "gives every shard a normal commit gives")


def section_drop(t):
    rc, out, err = run(["--overlay-drop", t.src])
    if rc != 0 or "dropped" not in out or t.overlay not in out or os.path.exists(t.overlay):
        raise Fail("--overlay-drop: exit %d, %r %r" % (rc, out, err))
    mount(t, t.src, ["-o", "overlay"])
    with open(os.path.join(t.mnt, "meta", "general.name"), "rb") as f:
        got = f.read()
    unmount(t, None)
    if got != E.kv_of(t.before, b"general.name")[2]:
        raise Fail("after --overlay-drop the mount shows general.name %r" % got)
    said = out.strip()
    rc, out, err = run(["--overlay-drop", t.src])
    if rc != 1 or "no overlay" not in err:
        raise Fail("a second --overlay-drop: exit %d, %r" % (rc, err))
    log("ok   --overlay-drop: %s; the mount shows the model as it is" % said)


def kill_daemon(t):
    """kill -9 of the mount's daemon; returns once it is gone."""
    pids = J._procs_for(t.mnt)
    if not pids:
        raise Fail("no ggufs daemon found for %s" % t.mnt)
    for p in pids:
        os.kill(p, 9)
    deadline = time.time() + 10
    while time.time() < deadline and any(os.path.exists("/proc/%d" % p) and not J._zombie(p) for p in pids):
        time.sleep(0.05)


def dead_unmount(t, where):
    """ggufs -u of a mount whose daemon was killed: exit 4 and a line that
    says the edits are in the overlay where (not that none were pending)."""
    rc, out, err = run(["-u", t.mnt])
    said = out + err
    if rc != 4 or "the edits of this mount are in the overlay %s" % where not in said \
            or "no edits were pending" in said:
        raise Fail("ggufs -u after kill -9 of an overlay mount: exit %d, %r" % (rc, said))
    return [x for x in said.split("\n") if where in x][0]


def views_of(mnt):
    """Issue 15's views of a mount: f32/, npy/ and index.tsv (sha256 of each
    file) and the hashes on tensors/ and each tensor."""
    out = {}
    for d in ("f32", "npy"):
        for n in sorted(os.listdir(os.path.join(mnt, d))):
            out[d + "/" + n] = sha(os.path.join(mnt, d, n))
    out["index.tsv"] = sha(os.path.join(mnt, "index.tsv"))
    td = os.path.join(mnt, "tensors")
    for p in [td] + [os.path.join(td, n) for n in sorted(os.listdir(td))]:
        for a in ("user.gguf.sha256", "user.gguf.xxh64"):
            out[os.path.relpath(p, mnt) + " " + a] = os.getxattr(p, a)
    return out


def same_views(t, got, label):
    if not t.views or not any(k.startswith("f32/") for k in t.views) or "tensors user.gguf.sha256" not in t.views:
        raise Fail("the plain mount has no f32/ files or no weights digest: %s" % sorted(t.views)[:5])
    if got != t.views:
        diff = sorted(k for k in set(got) | set(t.views) if got.get(k) != t.views.get(k))
        raise Fail("%s: f32/, npy/, index.tsv or the hashes differ from a plain mount's: %s" % (label, diff[:8]))


def section_views(t):
    """Issue 15's views on an overlay mount with edits are a plain mount's:
    the weights digest on tensors/ is unchanged by overlay edits."""
    mount(t, t.src, ["-o", "ro"])
    try:
        t.views = views_of(t.mnt)
    finally:
        unmount(t, None)
    ov = os.path.join(t.tmp, "views.overlay.gguf")
    mount(t, t.src, ["-o", "overlay=" + ov])
    try:
        edits(t.mnt, E.Model(t.before), L.TEMPLATE.encode())
        same_views(t, views_of(t.mnt), "overlay mount with edits")
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    unmount(t)
    log("ok   f32/, npy/, index.tsv, user.gguf.sha256/xxh64 (%d entries) on an overlay mount with edits: "
        "a plain mount's" % len(t.views))


def section_lock(t):
    """One writer per overlay: two mounts of two files given the same -o
    overlay=PATH; the second is refused with one line, and so is
    --overlay-drop while the first runs; a lock file not to be trusted is
    refused."""
    a, b = copy_model(t, "la.gguf"), copy_model(t, "lb.gguf")
    ov = os.path.join(t.tmp, "shared.overlay.gguf")
    mnt2 = os.path.join(t.tmp, "mnt2")
    os.makedirs(mnt2, exist_ok=True)
    mount(t, a, ["-o", "overlay=" + ov])
    try:
        E.sh("echo 'first' > meta/general.name", t.mnt)
        refused(t, ["-o", "overlay=" + ov], b, mnt2, "a second mount with the same -o overlay=PATH",
                (ov, "in use by the mount of %s at %s" % (a, t.mnt)))
        rc, out, err = run(["--overlay-drop", b, ov])
        if rc != 1 or "in use" not in err or not os.path.exists(ov):
            raise Fail("--overlay-drop of an overlay in use: exit %d, %r" % (rc, err))
        # read-only mounts read the overlay once and take no lock
        mount_ro = run(["-o", "ro,overlay=" + ov, b, mnt2])
        if mount_ro[0] != 0:
            raise Fail("a read-only overlay mount beside a writer: %r" % (mount_ro,))
        J.unmount(mnt2, [])
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    unmount(t)
    # a holder whose mount is gone (its daemon still finishing) is waited for
    mount(t, a, ["-o", "overlay=" + ov])
    pids = J._procs_for(t.mnt)
    try:
        E.sh("echo 'last write' > meta/general.name", t.mnt)
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        subprocess.run(["fusermount3", "-u", "-z", t.mnt], stderr=subprocess.DEVNULL)
        second = subprocess.Popen([J.tool("GGUFS"), "-o", "overlay=" + ov, b, mnt2],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        time.sleep(1.5)
        waited = second.poll() is None
        for p in pids:
            os.kill(p, signal.SIGCONT)
        out, err = second.communicate(timeout=60)
        err = err.decode(errors="replace")
        if not waited or second.returncode != 0 or "waiting for an earlier mount to finish writing the overlay" \
                not in err:
            raise Fail("a mount whose overlay's holder was unmounted but still running: waited %s, exit %s, %r"
                       % (waited, second.returncode, err))
        with open(os.path.join(mnt2, "meta", "general.name"), "rb") as f:
            got = f.read()
        J.unmount(mnt2, [])
        if got != b"last write\n":
            raise Fail("after waiting for the earlier mount, general.name reads %r" % got)
    except BaseException:
        for p in pids:
            try:
                os.kill(p, signal.SIGCONT)
            except OSError:
                pass
        E.cleanup_mounts(t.tmp)
        raise
    lock = ov + ".ggufs-lock"
    if os.path.lexists(lock):
        raise Fail("the lock file %s stayed after its holders ended (issue 21)" % lock)
    os.symlink(t.src, lock)
    refused(t, ["-o", "overlay=" + ov], a, None, "a symlink as the overlay's lock", (lock, "symbolic link"))
    os.unlink(lock)
    log("ok   the same -o overlay=PATH for two files: the second mount and --overlay-drop refused while "
        "the first runs; a symlinked lock refused")


def section_dead(t):
    """ggufs -u of an overlay mount whose daemon died says where the edits
    are; they are there at the next mount."""
    c = copy_model(t, "dead.gguf")
    ov = os.path.join(t.tmp, "dead.overlay.gguf")
    mount(t, c, ["-o", "overlay=" + ov])
    try:
        E.sh("echo 'before the kill' > meta/general.name", t.mnt)
        kill_daemon(t)
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    line = dead_unmount(t, ov)
    if "-o overlay=%s" % ov not in line:
        raise Fail("ggufs -u after kill -9 does not say how to mount the overlay again: %r" % line)
    mount(t, c, ["-o", "overlay=" + ov])
    with open(os.path.join(t.mnt, "meta", "general.name"), "rb") as f:
        got = f.read()
    unmount(t, None)
    if got != b"before the kill\n":
        raise Fail("after kill -9 and a remount the overlay shows general.name %r" % got)
    log("ok   ggufs -u of a killed overlay mount: %s" % line.strip())


def section_remote(t):
    """A remote source (nginx) with an overlay: edits through the mount,
    ggml and llama.cpp on the live view, the served file unchanged, the
    overlay keyed by URL + ETag, remount, kill -9, a second mount refused,
    --overlay-apply refused, a changed file's overlay refused,
    --overlay-drop."""
    import webserver as W
    if not W.exe():
        log("SKIP (part) remote source: nginx is not installed")
        return
    www = os.path.join(t.tmp, "www")
    os.mkdir(www)
    os.chmod(t.tmp, 0o755)
    served = os.path.join(www, "m.gguf")
    shutil.copyfile(t.model_path, served)
    s0 = sha(served)
    ngx = W.Nginx(os.path.join(t.tmp, "nginx"), www)
    try:
        cache = ["-o", "cache=" + os.path.join(t.tmp, "cache")]
        remote_parts(t, ngx.url("m.gguf"), served, s0, cache)
        remote_set(t, ngx, www, cache)
        remote_commit_fails(t, ngx.url("m.gguf"), cache)
    finally:
        ngx.stop()


def remote_commit_fails(t, url, cache):
    """The overlay cannot be written (its directory removed under the
    mount): ggufs -u exits 4 and names the one file the edits were saved
    to (in $TMPDIR: a URL has no directory beside it); it holds them."""
    d = os.path.join(t.tmp, "gone")
    os.mkdir(d)
    mount(t, url, ["-o", "overlay=" + os.path.join(d, "x.overlay.gguf")] + cache,
          env=dict(os.environ, TMPDIR=t.tmp))
    try:
        E.sh("echo 'first' > meta/general.name", t.mnt)
        shutil.rmtree(d)
        E.sh("echo 'not in any overlay' > meta/general.name", t.mnt)
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    rc, out, err = run(["-u", t.mnt])
    saved = glob.glob(os.path.join(t.tmp, "m.gguf.ggufs-edits-*.gguf"))
    said = out + err
    if rc != 4 or "commit to the overlay failed" not in said or len(saved) != 1 \
            or "edits saved in %s" % saved[0] not in said:
        raise Fail("a remote overlay that cannot be written: ggufs -u exit %d, %r, saved %s" % (rc, said, saved))
    got = overlay_keys(saved[0]).get(b"general.name")
    if got != E.sval(b"not in any overlay"):
        raise Fail("the edits saved after a failed overlay write hold general.name %r" % got)
    log("ok   remote overlay not writable: ggufs -u exits 4, the edits saved once: %s" % said.strip())


def remote_set(t, ngx, www, cache):
    """A remote shard set: the overlay belongs to the set (every shard's
    version); one shard changed on the server makes it stale."""
    d = os.path.join(www, "set")
    files = split3(t, d)
    url = ngx.url("set/" + files[0])
    ov = os.path.join(t.tmp, "remote-set.overlay.gguf")
    args = ["-o", "overlay=" + ov] + cache
    mount(t, url, args)
    try:
        E.sh("echo '%s' > meta/general.name" % NEW_NAME.decode(), t.mnt)
        if overlay_keys(os.path.join(t.mnt, "tiny.gguf")).get(b"general.name") != E.sval(NEW_NAME):
            raise Fail("the merged live view of a remote set does not show the edit")
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    unmount(t)
    etags = overlay_keys(ov).get(b"ggufs.overlay.source_etag", b"")
    if etags.count(b'etag "') != 3 or etags.count(b"; ") != 2:
        raise Fail("a remote set's overlay records the versions %r, not the three shards'" % etags)
    mount(t, url, args)
    with open(os.path.join(t.mnt, "meta", "general.name"), "rb") as f:
        got = f.read()
    unmount(t)
    if got != E.sval(NEW_NAME):
        raise Fail("remount of a remote set: general.name %r" % got)
    third = os.path.join(d, files[2])
    st = os.stat(third)
    os.utime(third, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 10))
    refused(t, args, url, None, "the overlay of a remote set whose third shard changed",
            ("does not belong", ov, "server's version"))
    log("ok   remote shard set: the overlay holds every shard's version; the merged live view shows the edit; "
        "a shard changed on the server makes it stale")


def remote_parts(t, url, served, s0, cache):
    args = ["-o", "overlay"] + cache
    model = E.Model(t.before)
    mnt2 = os.path.join(t.tmp, "mnt2")
    os.makedirs(mnt2, exist_ok=True)
    live = os.path.join(t.mnt, "m.gguf")
    mount(t, url, args)
    try:
        edits(t.mnt, model, L.TEMPLATE.encode())
        E.judge_commit("live view of a remote overlay mount", live, t.before, model)
        rov = os.getxattr(t.mnt, "user.ggufs.overlay").decode()
        if os.getxattr(t.mnt, "user.ggufs.url").decode() != url or not rov.startswith(t.state):
            raise Fail("remote overlay mount: user.ggufs.url / user.ggufs.overlay read %r" % rov)
        ty = os.getxattr(os.path.join(t.mnt, "meta", "mytool.note"), "user.gguf.type")
        if ty != b"string":
            raise Fail("remote overlay mount: user.gguf.type of the new key reads %r" % ty)
        same_views(t, views_of(t.mnt), "remote overlay mount with edits")
        llama_check(t, live, "live view of a remote overlay mount")
        refused(t, args, url, mnt2, "a second overlay mount of the same URL", (rov, "in use by the mount of"))
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    unmount(t)
    if sha(served) != s0 or os.listdir(os.path.dirname(served)) != ["m.gguf"]:
        raise Fail("the served file changed, or files appeared beside it")
    kv = overlay_keys(rov)
    if kv.get(b"ggufs.overlay.source") != E.sval(url.encode()) \
            or not kv.get(b"ggufs.overlay.source_etag", b"").startswith(b'etag "'):
        raise Fail("the remote overlay's identity: source %r, etag %r"
                   % (kv.get(b"ggufs.overlay.source"), kv.get(b"ggufs.overlay.source_etag")))
    log("ok   remote overlay mount: edits in meta/, the live view judged by ggml, xattrs, views; "
        "the served file byte-identical; the overlay keyed by URL and ETag")
    for cmd, want in (("--overlay-apply", "cannot commit into a remote file"), ("--recover", "for local files"),
                      ("--apply-pending", "for local files")):
        rc, out, err = run([cmd, url])
        lines = [x for x in err.split("\n") if x.strip()]
        if rc != 1 or len(lines) != 1 or want not in lines[0] or url not in lines[0] or out:
            raise Fail("%s of a URL: exit %d, %r %r" % (cmd, rc, out, err))
        log("ok   %s of a URL refused: %s" % (cmd, lines[0]))
    # remount: the edits are there; then kill -9 after one more edit
    err = mount(t, url, args)
    try:
        if "applied (3 keys set, 1 removed)" not in err:
            raise Fail("remote remount: %r does not say the overlay was applied" % err)
        E.judge_commit("live view of a remote overlay remount", live, t.before, model)
        with open(os.path.join(t.mnt, "meta", "mytool.after"), "wb") as f:
            f.write(b"before the kill\n")
        kill_daemon(t)
    except BaseException:
        E.cleanup_mounts(t.tmp)
        raise
    line = dead_unmount(t, rov)
    mount(t, url, args)
    with open(os.path.join(t.mnt, "meta", "mytool.after"), "rb") as f:
        got = f.read()
    unmount(t)
    if got != b"before the kill\n":
        raise Fail("remote: the edit made before kill -9 reads %r after a remount" % got)
    log("ok   remote remount shows the edits; kill -9: %s" % line.strip())
    err = mount(t, url, cache)
    unmount(t, None)
    if "note: the overlay %s holds edits of this file" % rov not in err or "a commit here" in err:
        raise Fail("a remote mount without -o overlay does not note the URL's overlay: %r" % err)
    # the file changes on the server: a new ETag
    st = os.stat(served)
    os.utime(served, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 10))
    refused(t, args, url, None, "the overlay of a file changed on the server",
            ("does not belong", rov, "server's version", "--overlay-drop"))
    rc, out, err = run(["--overlay-drop", url])
    if rc != 0 or "dropped" not in out or rov not in out or os.path.exists(rov):
        raise Fail("--overlay-drop of a URL: exit %d, %r %r" % (rc, out, err))
    mount(t, url, args)
    with open(os.path.join(t.mnt, "meta", "general.name"), "rb") as f:
        got = f.read()
    unmount(t, None)
    if got != E.kv_of(t.before, b"general.name")[2] or sha(served) != s0:
        raise Fail("after --overlay-drop of a URL the mount shows general.name %r" % got)
    log("ok   remote: a changed file's overlay refused; --overlay-drop of a URL: %s" % out.strip())


def main():
    J.require_fuse()
    t = T()
    t.tmp = tempfile.mkdtemp(prefix="ggufs-overlay-", dir="/tmp")
    t.state = os.path.join(t.tmp, "state")
    os.environ["XDG_STATE_HOME"] = t.state
    os.environ.pop("GGUFS_FAULT", None)
    t.mnt = os.path.join(t.tmp, "mnt")
    os.mkdir(t.mnt)
    t.immutable = []
    try:
        t.mods = None
        try:
            t.mods = L.node_modules()
        except J.Skip as e:
            log("note: llama.cpp checks skipped: %s" % e)
        t.model_path = os.path.join(t.tmp, "tiny-llama.gguf")
        vocab = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "models", "ggml-vocab-llama-spm.gguf"))
        extra = ["--vocab-from", vocab] if os.path.isfile(vocab) else []
        p = subprocess.run([J.tool("MKFIXTURE"), "llama", t.model_path] + extra,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        if p.returncode != 0:
            raise Fail("mkfixture llama failed: %s" % p.stderr.decode(errors="replace"))
        t.srcdir = os.path.join(t.tmp, "ro")
        os.mkdir(t.srcdir)
        t.src = copy_model(t, "model.gguf", t.srcdir)
        t.srcdir_w = os.path.join(t.tmp, "ro2")
        os.mkdir(t.srcdir_w)
        copy_model(t, "k.gguf", t.srcdir_w)
        for f, d in ((t.src, t.srcdir), (os.path.join(t.srcdir_w, "k.gguf"), t.srcdir_w)):
            os.chmod(f, 0o444)
            os.chmod(d, 0o555)
        t.sha0 = sha(t.src)
        t.before = E.snapshot(t.src)
        if t.mods:
            t.base = L.evaluate(t.mods, t.src, "the source")
        with E.Watchdog(t.mnt, 550, "mount_overlay"):
            section_mount(t)
            section_remount(t)
            section_stale(t)
            section_immutable(t)
            section_apply(t)
            section_faults(t)
            section_hostile(t)
            section_shards(t)
            section_drop(t)
            section_views(t)
            section_lock(t)
            section_dead(t)
            section_remote(t)
        if sha(t.src) != t.sha0:
            raise Fail("the read-only source changed")
    finally:
        E.cleanup_mounts(t.tmp)
        for f in t.immutable:
            subprocess.run(["chattr", "-i", f])
        for d in (t.srcdir if hasattr(t, "srcdir") else None, getattr(t, "srcdir_w", None),
                  os.path.join(t.tmp, "shards")):
            if d and os.path.isdir(d):
                os.chmod(d, 0o755)
        shutil.rmtree(t.tmp, ignore_errors=True)


if __name__ == "__main__":
    J.main(main)
