#!/usr/bin/env python3
"""Edits that outlive their daemon, and commits whose outcome is told.

Real mounts of fixtures made by mkfixture, every committed file judged by
ggml's reader (refdump, through mount_edit's snapshots and models):

1. kill -9 of a daemon holding uncommitted edits: `ggufs -u MNT` unmounts
   the dead mount, exits 4 and names the pending edits; a read-write mount
   is refused over them (one line, how to apply or drop), a read-only one
   is allowed; `ggufs --apply-pending FILE` commits them: the values are
   in the file.  Then again with `--drop-pending`: the file is unchanged.
2. `fusermount3 -u` returns before the commit: a mount started at once
   waits for it and reads the committed value (a commit made slow by a
   rewrite of a 256 MiB file).
3. A commit that fails after `fusermount3 -u` (the file replaced behind the
   mount) is reported by the next ggufs command on the model, once.
4. The model moved away while mounted (rewrite path): the commit never
   creates a file at the old path; it fails, saves the edits, and the next
   command says so.
5. The state directory is hostile-proof: a pending record that is a
   symlink or belongs to another user is refused, not followed.
"""
import os
import struct
import subprocess
import time

import judge as J
import mount_edit as E

Fail = J.Fail


def run(args, timeout=120):
    return J.run_ggufs(args, timeout=timeout)


def fixture(d, name="model.gguf", mb=1):
    path = os.path.join(d, name)
    p = subprocess.run([J.tool("MKFIXTURE"), "model", path, "--tensor-mb", str(mb),
                        "--n-tensors", "2", "--vocab", "300"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        raise Fail("mkfixture failed: %s" % p.stderr.decode(errors="replace"))
    return path


def daemon_pid(mnt):
    return int(J.xattr(mnt, "user.ggufs.pid").decode())


def err_of(p):
    return p.stderr.decode(errors="replace").strip()


def sec_killed(d):
    """kill -9 with pending edits; -u, refused rw mount, ro mount, apply."""
    out = []
    for action in ("--apply-pending", "--drop-pending"):
        sub = os.path.join(d, action.strip("-"))
        os.makedirs(sub)
        path = fixture(sub)
        mnt = os.path.join(sub, "mnt")
        before = E.snapshot(path)
        E.mount(path, mnt)
        pid = daemon_pid(mnt)
        E.write_file(os.path.join(mnt, "meta", "general.name"), b"kept after kill\n")
        E.write_file(os.path.join(mnt, "meta", "mytool.note"), b"new key\n",
                     os.O_WRONLY | os.O_CREAT)
        os.kill(pid, 9)
        for _ in range(200):
            if not os.path.exists("/proc/%d" % pid):
                break
            time.sleep(0.01)
        u = run(["-u", mnt])
        e = err_of(u)
        if u.returncode != 4 or "pending edits" not in e or "--apply-pending" not in e:
            raise Fail("ggufs -u of a dead mount with pending edits: exit %d, %r"
                       % (u.returncode, e))
        if J.mountinfo_entry(mnt) is not None:
            raise Fail("ggufs -u left the dead mount mounted")
        if E.snapshot(path).sha != before.sha:
            raise Fail("the file changed although the daemon died before any commit")
        m = run([path, mnt])
        if m.returncode != 1 or "--apply-pending" not in err_of(m) or \
                len(err_of(m).splitlines()) != 2:
            raise Fail("a read-write mount over pending edits: exit %d, %r (want 1 and "
                       "two lines: the pending edits and the refusal)" % (m.returncode, err_of(m)))
        if J.mountinfo_entry(mnt) is not None:
            J.unmount(mnt, [])
            raise Fail("a refused mount left something mounted")
        E.mount(path, mnt, ["-o", "ro"])  # allowed: it changes nothing
        got = E.read(os.path.join(mnt, "meta", "general.name"))
        J.unmount(mnt, [])
        if got == b"kept after kill\n":
            raise Fail("a read-only mount shows the pending edits as if committed")
        a = run([action, path])
        if a.returncode != 0:
            raise Fail("ggufs %s exited %d: %s" % (action, a.returncode, err_of(a)))
        model = E.Model(before)
        if action == "--apply-pending":
            model.value(b"general.name", E.sval(b"kept after kill"))
            model.set(b"mytool.note", "string", E.sval(b"new key"))
            E.judge_commit("edits of a killed daemon, applied", path, before, model)
        elif E.snapshot(path).sha != before.sha:
            raise Fail("--drop-pending changed the file")
        again = run([action, path])
        if again.returncode != 1 or "no pending edits" not in err_of(again):
            raise Fail("a second %s: exit %d, %r" % (action, again.returncode, err_of(again)))
        E.mount(path, mnt)
        E.ggufs_u(mnt, 0, "mount after " + action)
        out.append(action)
    return ", ".join(out)


def sec_wait(d):
    """fusermount3 -u returns first; a new mount waits for the commit."""
    path = fixture(d, mb=128)
    mnt = os.path.join(d, "mnt")
    before = E.snapshot(path)
    E.mount(path, mnt, ["-o", "no_insert_range"])
    E.write_file(os.path.join(mnt, "meta", "mytool.big"), b"x" * 200000 + b"\n",
                 os.O_WRONLY | os.O_CREAT)
    t0 = time.time()
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    t_unmount = time.time() - t0
    p = run([path, mnt, "-o", "ro"])
    t_mount = time.time() - t0
    if p.returncode != 0:
        raise Fail("mount right after fusermount3 -u: exit %d, %r" % (p.returncode, err_of(p)))
    try:
        got = E.read(os.path.join(mnt, "meta", "mytool.big"))
    finally:
        J.unmount(mnt, [])
    if got != b"x" * 200000 + b"\n":
        raise Fail("the mount right after fusermount3 -u does not read the committed value")
    model = E.Model(before)
    model.set(b"mytool.big", "string", E.sval(b"x" * 200000))
    E.judge_commit("commit after fusermount3 -u", path, before, model, "grow")
    said = "waiting for the commit" in err_of(p)
    return "unmount returned in %.2f s, the next mount in %.2f s%s" % (
        t_unmount, t_mount, " (said it waited)" if said else " (commit was already done)")


def sec_failed_reported(d):
    """A commit failing after fusermount3 -u is told by the next command."""
    path = fixture(d)
    mnt = os.path.join(d, "mnt")
    E.mount(path, mnt)
    E.write_file(os.path.join(mnt, "meta", "general.name"), b"lost?\n")
    # Another program replaces the file while it is mounted.
    other = fixture(d, "other.gguf")
    os.rename(other, path)
    replaced = E.snapshot(path)
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    for _ in range(500):
        if not E.mounts_under(d):
            break
        time.sleep(0.01)
    time.sleep(0.5)
    r = run(["--recover", path])
    e = err_of(r)
    if "last commit" not in e or "commit failed" not in e or "saved in" not in e:
        raise Fail("the next command after a failed background commit says %r" % e)
    r2 = run(["--recover", path])
    if "last commit" in err_of(r2):
        raise Fail("the failed commit is reported twice: %r" % err_of(r2))
    if E.snapshot(path).sha != replaced.sha:
        raise Fail("the replacing file was changed by the failed commit")
    saved = [f for f in os.listdir(d) if ".ggufs-edits-" in f]
    if not saved:
        raise Fail("no saved edits beside the model after a failed commit")
    return "reported once: %r" % e.splitlines()[0][:120]


def sec_moved(d):
    """The model moved away while mounted: no new file at the old path."""
    path = fixture(d)
    mnt = os.path.join(d, "mnt")
    away = os.path.join(d, "elsewhere")
    os.makedirs(away)
    os.chmod(path, 0o600)  # a private model: its saved edits stay private
    E.mount(path, mnt, ["-o", "no_insert_range"])
    before = E.snapshot(path)
    E.write_file(os.path.join(mnt, "meta", "mytool.big"), b"y" * 100000 + b"\n",
                 os.O_WRONLY | os.O_CREAT)
    moved = os.path.join(away, "model.gguf")
    os.rename(path, moved)
    u = run(["-u", mnt])
    if u.returncode != 4:
        raise Fail("ggufs -u after the model moved away: exit %d, %r" % (u.returncode, err_of(u)))
    if os.path.exists(path):
        raise Fail("the commit created a new file at the old path %s" % path)
    if E.snapshot(moved).sha != before.sha:
        raise Fail("the moved file changed")
    if "saved in" not in err_of(u):
        raise Fail("ggufs -u does not say where the edits were saved: %r" % err_of(u))
    saved = err_of(u).split("saved in ", 1)[1].split()[0].rstrip(";,")
    mode = os.stat(saved).st_mode & 0o777
    if mode & 0o077:
        raise Fail("the saved edits of a 0600 model are mode %o" % mode)
    return "refused: %r" % err_of(u)[:140]


def sec_killed_in_commit(d):
    """The daemon killed inside its commit (after the header's first half):
    ggufs -u and a read-only mount name --recover; --recover completes the
    commit, and the pending record, now in the file, is gone."""
    path = fixture(d)
    mnt = os.path.join(d, "mnt")
    before = E.snapshot(path)
    os.makedirs(mnt)
    env = dict(os.environ, GGUFS_FAULT="6")  # in place: header, second half
    p = subprocess.Popen([J.tool("GGUFS"), "-f", path, mnt], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        E.wait_mounted(mnt, p)
        E.write_file(os.path.join(mnt, "meta", "general.name"), b"killed mid-commit\n")
        u = run(["-u", mnt])
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    if u.returncode != 4 or "--recover" not in err_of(u):
        raise Fail("ggufs -u of a daemon killed in its commit: exit %d, %r" % (u.returncode, err_of(u)))
    if "Software caused connection abort" in err_of(u):
        raise Fail("ggufs -u still says only 'Software caused connection abort'")
    r = run(["-o", "ro", path, mnt])
    if r.returncode != 1 or "--recover" not in err_of(r):
        E.cleanup_mounts(d)
        raise Fail("a read-only mount of the half-written file: exit %d, %r" % (r.returncode, err_of(r)))
    rc = run(["--recover", path])
    if rc.returncode != 0 or "pending" in err_of(rc):
        raise Fail("--recover after a kill in the commit: exit %d, %r" % (rc.returncode, err_of(rc)))
    model = E.Model(before)
    model.value(b"general.name", E.sval(b"killed mid-commit"))
    E.judge_commit("commit completed by --recover", path, before, model)
    if E.pending_record(path) is not None:
        raise Fail("the pending record survived the recovered commit that holds it")
    return "-u and ro mount name --recover; recovered, record gone"


def sec_hostile_state(d, state):
    """A pending record planted as a symlink or owned by another user is
    refused with a message, never followed or applied."""
    path = fixture(d)
    real = os.path.realpath(path)
    sdir = os.path.join(state, "ggufs")
    os.makedirs(sdir, mode=0o700, exist_ok=True)
    name = os.path.join(sdir, "%016x.pending" % J.fnv1a64(real.encode()))
    before = E.snapshot(real)
    target = os.path.join(d, "target")
    with open(target, "wb") as fh:
        fh.write(b"ggufs-state 1\n" + real.encode() + b"\n0 0 0 0\n")
    os.symlink(target, name)
    try:
        r = run(["--apply-pending", path])
    finally:
        os.unlink(name)
    if r.returncode == 0 or E.snapshot(real).sha != before.sha or \
            "Too many levels of symbolic links" not in err_of(r):
        raise Fail("a symlinked pending record: exit %d, %r (want a refusal)"
                   % (r.returncode, err_of(r)))
    with open(name, "wb") as fh:
        fh.write(b"ggufs-state 1\n" + real.encode() + b"\n0 0 0 0\n")
    os.chown(name, 65534, 65534)
    try:
        r = run([path, os.path.join(d, "mnt")])
    finally:
        os.unlink(name)
        E.cleanup_mounts(d)
    if r.returncode != 1 or "not used" not in err_of(r):
        raise Fail("a pending record of another user: mount exit %d, %r (want a refusal)"
                   % (r.returncode, err_of(r)))
    return "symlink and foreign owner refused: %r" % err_of(r)[:120]


def sec_ctime(d):
    """kill -9 with pending edits; then another program rewrites the header
    in place and puts the mtime back.  --apply-pending sees the ctime and
    refuses: edits made against one version never land on another."""
    path = fixture(d)
    mnt = os.path.join(d, "mnt")
    E.mount(path, mnt)
    pid = daemon_pid(mnt)
    E.write_file(os.path.join(mnt, "meta", "general.name"), b"made against v1\n")
    os.kill(pid, 9)
    for _ in range(200):
        if not os.path.exists("/proc/%d" % pid):
            break
        time.sleep(0.01)
    run(["-u", mnt])
    st = os.stat(path)
    with open(path, "r+b") as f:
        hdr = f.read(4096)
        i = hdr.find(b"general.name")
        if i < 0:
            raise Fail("fixture without general.name")
        n = struct.unpack_from("<Q", hdr, i + 16)[0]
        f.seek(i + 24)
        f.write(b"Z" * n)  # another program's in-place edit, same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after_other = E.snapshot(path).sha
    a = run(["--apply-pending", path])
    if a.returncode == 0 or "changed" not in err_of(a):
        raise Fail("--apply-pending after an in-place write with the mtime put back: "
                   "exit %d, %r" % (a.returncode, err_of(a)))
    if E.snapshot(path).sha != after_other:
        raise Fail("the other program's bytes were overwritten")
    run(["--drop-pending", path])
    return "refused: %r" % err_of(a)[:120]


def main():
    J.require_fuse()
    state = os.environ.get("XDG_STATE_HOME")
    if not state:
        raise Fail("XDG_STATE_HOME must be set (run through meson test)")
    E.run_sections("ggufs-durable-", (
        ("killed daemon", sec_killed, ()),
        ("fusermount3 -u, then mount at once", sec_wait, ()),
        ("failed background commit", sec_failed_reported, ()),
        ("model moved while mounted", sec_moved, ()),
        ("killed inside its commit", sec_killed_in_commit, ()),
        ("pending edits, then mtime put back", sec_ctime, ()),
        ("hostile state files", sec_hostile_state, (state,))))


if __name__ == "__main__":
    J.main(main)
