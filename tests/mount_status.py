#!/usr/bin/env python3
"""Issue 21, what a user cannot see: real mounts of mkfixture's models and
of the shared real models (when present), judged by ggml's reader:

1. MNT/meta.tsv against ggml's reading (refdump) of the file, and after
   edits (a value changed, a key added, one removed) against ggml's reading
   of the live view MNT/NAME.gguf, which is the pending state; read-only.
2. `ggufs --status MNT`: the source, the pending edits by key with old and
   new values, the refusals with their reasons and line numbers, the last
   commit; another user (-o allow_other) is refused the status.
3. `ggufs --show-pending FILE` after kill -9: the keys and their values,
   nothing applied (the file and the pending record unchanged).
4. The log of a detached mount: in the state directory's ggufs.log (0600,
   the refusal's line), rotated past 1 MiB, a planted symlink not followed.
5. A mount over a mount is refused with one line naming the mountpoint
   (exit 3); -o over mounts.
6. The commit's progress on a terminal (a pseudo-terminal), in `ggufs -u`
   of a rewrite of a 1.5 GB model, and nothing of it into a pipe.
"""
import os
import pty
import re
import select
import shutil
import subprocess
import tempfile
import time

import judge as J
import mount_edit as E

Fail = J.Fail
MOUNT = 3


def run(args, timeout=120, **kw):
    return J.run_ggufs(args, timeout=timeout, **kw)


def out_of(p):
    return p.stdout.decode(errors="replace")


def err_of(p):
    return p.stderr.decode(errors="replace").strip()


def fixture(d, name="model.gguf", mb=1, sparse=False):
    path = os.path.join(d, name)
    args = [J.tool("MKFIXTURE"), "model", path, "--tensor-mb", str(mb), "--n-tensors", "3",
            "--vocab", "300"] + (["--sparse"] if sparse else [])
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if p.returncode != 0:
        raise Fail("mkfixture failed: %s" % p.stderr.decode(errors="replace"))
    return path


def judge_tsv(label, tsv, gguf):
    """meta.tsv at tsv against ggml's reading of gguf (a file or a live
    view)."""
    verdict, ref = J.refdump(gguf)
    if verdict != "ggml-accepts":
        raise Fail("%s: ggml rejects %s" % (label, gguf))
    ck = J.Checker(label)
    J.check_meta_tsv(ck, tsv, ref, J.walk_gguf(gguf))
    ck.done()


def sec_tsv(d):
    """meta.tsv of fixtures and real models, unedited and after edits."""
    fx = os.path.join(d, "fixtures")
    os.makedirs(fx)
    p = subprocess.run([J.tool("MKFIXTURE"), "all", fx], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture all: %s" % p.stderr.decode(errors="replace"))
    files = [os.path.join(fx, f) for f in sorted(os.listdir(fx))] + J.shared_models()
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt, exist_ok=True)
    n = 0
    for src in files:
        verdict, _ = J.refdump(src)
        if verdict != "ggml-accepts":
            continue
        E.mount(src, mnt, ["-o", "ro"])
        try:
            judge_tsv("meta.tsv of %s (ro)" % os.path.basename(src), os.path.join(mnt, "meta.tsv"), src)
        finally:
            J.unmount(mnt, [])
        n += 1
    # after edits: the pending state, as the live view serves it
    path = shutil.copy(fixture(d), os.path.join(d, "edited.gguf"))
    E.mount(path, mnt)
    try:
        m = os.path.join(mnt, "meta")
        E.write_file(os.path.join(m, "general.name"), b"a new name\twith a tab\n")
        E.write_file(os.path.join(m, "mytool.note"), ("\u00e9" * 60 + "\n").encode(),
                     os.O_WRONLY | os.O_CREAT)
        os.unlink(os.path.join(m, "general.architecture"))
        live = os.path.join(mnt, "edited.gguf")
        judge_tsv("meta.tsv after edits", os.path.join(mnt, "meta.tsv"), live)
        with open(os.path.join(mnt, "meta.tsv"), "rb") as f:
            t = f.read()
        for want in (b"general.name\tstring\t1\ta new name\\twith a tab\n",
                     b"mytool.note\tstring\t1\t" + ("\u00e9" * 40).encode() + b"...(+40 bytes)\n"):
            if want not in t:
                raise Fail("meta.tsv after edits lacks %r:\n%s" % (want, t.decode(errors="replace")[:2000]))
        if b"\ngeneral.architecture\t" in t:
            raise Fail("meta.tsv still lists a removed key")
        try:
            os.open(os.path.join(mnt, "meta.tsv"), os.O_WRONLY)
            raise Fail("meta.tsv opened for writing")
        except PermissionError:
            pass
    finally:
        J.unmount(mnt, [])
    judge_tsv("meta.tsv's edits, committed", _remount_tsv(path, mnt), path)
    J.log("ok   meta.tsv of %d files against ggml's reading, and after edits against the live view" % n)


def _remount_tsv(path, mnt):
    """The committed file's meta.tsv, copied out of a read-only mount."""
    E.mount(path, mnt, ["-o", "ro"])
    try:
        dst = path + ".tsv"
        shutil.copy(os.path.join(mnt, "meta.tsv"), dst)
        return dst
    finally:
        J.unmount(mnt, [])


def sec_status(d):
    """--status: source, pending edits, refusals with line numbers, last
    commit; refused to another user."""
    path = fixture(d, "status.gguf")
    mnt = os.path.join(d, "smnt")
    E.mount(path, mnt, ["-o", "allow_other"])
    try:
        m = os.path.join(mnt, "meta")
        s = run(["--status", mnt])
        if s.returncode != 0 or "source: %s" % path not in out_of(s) or "pending edits: 0 keys" not in out_of(s) \
                or "last commit: none since the mount" not in out_of(s):
            raise Fail("--status of a fresh mount: exit %d, %r" % (s.returncode, out_of(s) + err_of(s)))
        E.write_file(os.path.join(m, "general.name"), b"status name\n")
        E.write_file(os.path.join(m, "mytool.k"), b"42\n", os.O_WRONLY | os.O_CREAT)
        for bad in ((b"abc\n", "general.file_type"), (b"1\n2\nx\n", "tokenizer.ggml.token_type")):
            try:
                E.write_file(os.path.join(m, bad[1]), bad[0])
                raise Fail("a bad value of %s was accepted" % bad[1])
            except OSError:
                pass
        o = out_of(run(["--status", mnt]))
        want = [r"pending edits: 2 keys", r"\ngeneral\.name\tstring\t[^\t\n]*\tstatus name\n",
                r"\nmytool\.k\tstring\t\(new\)\t42\n",
                r"refused write to 'general\.file_type': line 1: 'abc' is not a uint32",
                r"refused write to 'tokenizer\.ggml\.token_type': line 3: 'x' is not an int32"]
        for w in want:
            if not re.search(w, o):
                raise Fail("--status after edits and refusals does not match %r:\n%s" % (w, o))
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                            J.tool("GGUFS"), "--status", mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode == 0 or "status name" in out_of(p) or "Permission denied" not in err_of(p):
            raise Fail("--status by another user: exit %d, %r" % (p.returncode, out_of(p) + err_of(p)))
        fd = os.open(mnt, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        o = out_of(run(["--status", mnt]))
        if not re.search(r"last commit: %s: committed \(" % re.escape(path), o) or "pending edits: 0 keys" not in o:
            raise Fail("--status after a commit:\n%s" % o)
    finally:
        J.unmount(mnt, [])
    J.log("ok   --status: source, pending edits by key, refusals with their lines, last commit; "
          "refused to another user")


def sec_show_pending(d):
    """--show-pending after kill -9: keys and values, nothing applied."""
    path = fixture(d, "pending.gguf")
    mnt = os.path.join(d, "pmnt")
    before = E.snapshot(path)
    E.mount(path, mnt)
    pid = int(J.xattr(mnt, "user.ggufs.pid").decode())
    m = os.path.join(mnt, "meta")
    E.write_file(os.path.join(m, "general.name"), b"kept after kill\n")
    E.write_file(os.path.join(m, "mytool.list"), b"x\n", os.O_WRONLY | os.O_CREAT)
    os.unlink(os.path.join(m, "general.architecture"))
    os.kill(pid, 9)
    for _ in range(300):
        if not os.path.exists("/proc/%d" % pid):
            break
        time.sleep(0.01)
    subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
    rec = E.pending_record(path)
    s = run(["--show-pending", path])
    o = out_of(s)
    for w in (r"pending edits \(2 keys set, 1 removed\), not applied", r"\ngeneral\.name\tstring\t[^\t]+\tkept after kill\n",
              r"\nmytool\.list\tstring\t\(new\)\tx\n", r"\ngeneral\.architecture\tstring\tllama\t\(removed\)\n"):
        if not re.search(w, o):
            raise Fail("--show-pending (exit %d) does not match %r:\n%s%s" % (s.returncode, w, o, err_of(s)))
    if s.returncode != 0 or E.snapshot(path).sha != before.sha:
        raise Fail("--show-pending: exit %d, or the file changed" % s.returncode)
    if E.pending_record(path) != rec:
        raise Fail("--show-pending changed the pending record")
    a = run(["--apply-pending", path])
    if a.returncode != 0:
        raise Fail("--apply-pending after --show-pending: exit %d, %s" % (a.returncode, err_of(a)))
    s = run(["--show-pending", path])
    if s.returncode != 1 or "no pending edits" not in err_of(s) or out_of(s):
        raise Fail("--show-pending with none: exit %d, %r" % (s.returncode, out_of(s) + err_of(s)))
    J.log("ok   --show-pending after kill -9: keys and values named, nothing applied")


def sec_log(d):
    """The detached daemon's log file: where, mode, content, rotation,
    a planted symlink."""
    state = os.path.join(os.environ["XDG_STATE_HOME"], "ggufs")
    os.makedirs(state, mode=0o700, exist_ok=True)
    log, old = os.path.join(state, "ggufs.log"), os.path.join(state, "ggufs.log.1")
    for f in (log, old):
        if os.path.lexists(f):
            os.unlink(f)
    with open(log, "wb") as f:  # full: the next line rotates it
        f.write(b"x" * (1 << 20) + b"\n")
    os.chmod(log, 0o600)
    path = fixture(d, "log.gguf")
    mnt = os.path.join(d, "lmnt")
    E.mount(path, mnt)
    try:
        try:
            E.write_file(os.path.join(mnt, "meta", "general.file_type"), b"nope\n")
        except OSError:
            pass
        s = out_of(run(["--status", mnt]))
    finally:
        J.unmount(mnt, [])
    with open(log, "rb") as f:
        text = f.read()
    st = os.stat(log)
    if b"refused write to 'general.file_type'" not in text or len(text) > 64 << 10:
        raise Fail("the log file %s (%d bytes) lacks the refusal or was not rotated" % (log, len(text)))
    if os.path.getsize(old) < 1 << 20 or (st.st_mode & 0o777) != 0o600:
        raise Fail("the full log was not kept as %s, or the log is mode %o" % (old, st.st_mode & 0o777))
    if "log: %s and syslog" % log not in s:
        raise Fail("--status does not say where the log is:\n%s" % s)
    # a symlink planted as the log: not followed, said at mount
    os.unlink(log)
    victim = os.path.join(d, "victim")
    open(victim, "wb").close()
    os.symlink(victim, log)
    p = run([path, mnt])
    try:
        if p.returncode != 0 or "no log file" not in err_of(p):
            raise Fail("a symlinked log: mount exit %d, %r" % (p.returncode, err_of(p)))
    finally:
        J.unmount(mnt, [])
    if os.path.getsize(victim) != 0:
        raise Fail("the log was written through a planted symlink")
    os.unlink(log)
    J.log("ok   log file %s: the refusal logged, rotated at 1 MiB, 0600, a symlink not followed" % log)


def sec_over(d):
    """Mounting over a mount."""
    a, b = fixture(d, "over-a.gguf"), fixture(d, "over-b.gguf")
    mnt = os.path.join(d, "omnt")
    E.mount(a, mnt)
    try:
        p = run([b, mnt])
        lines = err_of(p).splitlines()
        if p.returncode != MOUNT or len(lines) != 1 or mnt not in lines[0] or "-o over" not in lines[0]:
            raise Fail("a mount over a ggufs mount: exit %d, %r" % (p.returncode, err_of(p)))
        if J.mountinfo_entry(mnt)[1] != a:
            raise Fail("the refused mount hid the first one")
        p = run(["-o", "over", b, mnt])
        if p.returncode != 0 or J.mountinfo_entry(mnt)[1] != b:
            raise Fail("-o over did not mount: exit %d, %r" % (p.returncode, err_of(p)))
        J.unmount(mnt, [])
    finally:
        J.unmount(mnt, [])
    J.log("ok   a mount over a mount refused in one line; -o over mounts")


def on_pty(args):
    """Runs ggufs ARGS with stdin/stdout/stderr on a pseudo-terminal;
    (exit status, what it wrote, seconds)."""
    t = time.time()
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(J.tool("GGUFS"), ["ggufs"] + args)
    out = b""
    while True:
        try:
            r, _, _ = select.select([fd], [], [], 120)
            if not r:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            out += chunk
        except OSError:  # EIO: the child closed the terminal
            break
    _, ws = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(ws), out.decode(errors="replace"), time.time() - t


def big_commit(d, mnt, path, n):
    """Mounts path, grows its header (a rewrite: -o no_insert_range), and
    evicts the model from the page cache, so that the commit takes
    seconds."""
    E.mount(path, mnt, ["-o", "no_insert_range"])
    E.write_file(os.path.join(mnt, "meta", "mytool.grow%d" % n), b"g" * (300000 * n) + b"\n",
                 os.O_WRONLY | os.O_CREAT)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def sec_progress(d):
    """ggufs -u's progress: drawn on a terminal, absent into a pipe."""
    if shutil.disk_usage(d).free < 8 << 30:
        J.log("note: less than 8 GiB free in %s: the progress check is skipped" % d)
        return
    path = fixture(d, "big.gguf", mb=2500)
    mnt = os.path.join(d, "bmnt")
    try:
        # (This check failed now and then until the cause was found: a poll
        # of user.ggufs.progress that came before the copy began fell
        # through to the attributes read under fs->lock and waited for the
        # whole commit; GFS_XATTR_OTHER in fs/ggufs.h.)
        big_commit(d, mnt, path, 1)
        rc, out, secs = on_pty(["-u", mnt])
        drawn = re.findall(r"\r\x1b\[Kggufs: committing: [0-9.]+ [kMG]?B / 2\.62 GB \([0-9]+%\), "
                           r"[0-9.]+ [kMG]?B/s", out)
        took = re.search(r"grown by rewriting the file\), data at [0-9]+, ([0-9.]+) ms", out)
        if rc != 0 or not took:
            raise Fail("ggufs -u of a rewrite on a terminal: exit %d, %r" % (rc, out[-500:]))
        secs = float(took.group(1)) / 1000
        if secs > 1.5 and not drawn:
            raise Fail("the commit took %.1f s on a terminal and showed no progress: %r" % (secs, out[-500:]))
        if not drawn:
            J.log("note: the commit took only %.1f s: no progress expected" % secs)
        big_commit(d, mnt, path, 3)
        t = time.time()
        p = run(["-u", mnt])
        secs2 = time.time() - t
        if p.returncode != 0 or "committing" in err_of(p) + out_of(p) or "\r" in err_of(p):
            raise Fail("ggufs -u into a pipe: exit %d, %r" % (p.returncode, err_of(p)))
    finally:
        J.unmount(mnt, [])
    J.log("ok   commit progress on a terminal (%.1f s, %d updates; %s), none into a pipe (%.1f s)"
          % (secs, len(drawn), drawn[-1].strip() if drawn else "-", secs2))


def main():
    J.require_fuse()
    if not os.environ.get("XDG_STATE_HOME"):
        raise Fail("XDG_STATE_HOME must be set (run through meson test)")
    root = tempfile.mkdtemp(prefix="ggufs-status-", dir="/var/tmp")
    failed = []
    try:
        for name, fn in (("meta.tsv", sec_tsv), ("--status", sec_status), ("--show-pending", sec_show_pending),
                         ("log file", sec_log), ("mount over a mount", sec_over), ("progress", sec_progress)):
            d = os.path.join(root, name.strip("-").replace(" ", "_").replace(".", "_"))
            os.makedirs(d)
            try:
                fn(d)
            except Fail as e:
                J.log("FAIL %s: %s" % (name, e))
                failed.append(name)
    finally:
        for dp, dn, _ in os.walk(root):
            for x in dn:
                p = os.path.join(dp, x)
                if J.mountinfo_entry(p) is not None:
                    J.unmount(p, [])
        shutil.rmtree(root, ignore_errors=True)
    if failed:
        raise Fail("failed sections: %s" % ", ".join(failed))


if __name__ == "__main__":
    J.main(main)
