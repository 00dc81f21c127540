#!/usr/bin/env python3
"""mount_amplify: headers that cost little to make and much to serve (issue
11, item 6), made by tests/mkhostile (craft.c) and mounted with -o
allow_other; the reading is done by nobody (setpriv --reuid=65534).

Sections:
  - bools: one array of N_BOOLS bools, its bytes a hole (a file of 100 MB
    that takes a few KB of disk; its text is 6 bytes a bool, 600 MB).  The
    daemon's peak RSS (VmHWM) after the mount is at most the header plus
    HWM_SLACK; `ls -l meta/` shows the exact size and adds less than
    HWM_SLACK; reading the whole text (checked byte for byte against
    "false\\n" * N) and a window in its middle add less than HWM_SLACK (the
    old code rendered the text at the first stat: 2.4 GB more for 400 M
    bools).  A read-write mount: an append through a writer (the draft made
    from windows) lands, and a reader opened before it reads the value it
    opened, whole (not ESTALE, never a mix of two values).
  - long names: N_KEYS keys of KEY_LEN bytes (every file name in meta/ a
    hashed long name): `ls -l meta/` lists and stats them all within
    LS_BOUND seconds (the old code escaped every key per lookup: more than
    15 minutes for 20 k keys); on a read-write mount, removing some of them
    and creating new keys keeps every other name reachable.

Environment (tests/meson.build): GGUFS, MKHOSTILE, GGUFS_SRCDIR.
Exit 0 pass, 1 fail, 77 skip.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402
import mount_bounds as MB  # noqa: E402
import mount_edit as ME  # noqa: E402

Fail = J.Fail
log = J.log

MiB = 1 << 20
N_BOOLS = 100_000_000
HWM_SLACK = 48 * MiB
N_KEYS = 20_000
KEY_LEN = 300
LS_BOUND = 60.0  # seconds; generous: the old code took > 15 minutes


def mkhostile(*args):
    p = subprocess.run([J.tool("MKHOSTILE")] + [str(a) for a in args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        raise Fail("mkhostile %s: %s" % (" ".join(map(str, args)), p.stderr.decode(errors="replace")))


def as_nobody(code, timeout=600):
    """Runs python code as nobody: (rc, stdout, stderr, seconds)."""
    t0 = time.time()
    p = subprocess.run(MB.NOBODY + [sys.executable, "-c", code], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    return (p.returncode, p.stdout.decode(errors="replace").strip(),
            p.stderr.decode(errors="replace").strip(), time.time() - t0)


def nobody_ok(code, what, timeout=600):
    rc, out, err, secs = as_nobody(code, timeout)
    if rc != 0:
        raise Fail("%s as nobody failed (%d): %s" % (what, rc, err[-500:]))
    return out, secs


READ_ALL = """
import hashlib, sys
h = hashlib.sha256(); n = 0
with open(%r, 'rb', buffering=0) as f:
    while True:
        b = f.read(1 << 20)
        if not b: break
        h.update(b); n += len(b)
print(n, h.hexdigest())
"""


def expected_text_digest(n):
    h = hashlib.sha256()
    chunk = b"false\n" * (1 << 16)
    for _ in range(n // (1 << 16)):
        h.update(chunk)
    h.update(b"false\n" * (n % (1 << 16)))
    return h.hexdigest()


def sec_bools(ctx):
    d = ctx.dir("bools")
    path = os.path.join(d, "bools.gguf")
    mkhostile("bools", path, N_BOOLS)
    st = os.stat(path)
    if st.st_blocks * 512 > 1 * MiB:
        raise Fail("the fixture is not sparse: %d bytes on disk" % (st.st_blocks * 512))
    mnt = os.path.join(d, "mnt")
    key = os.path.join(mnt, "meta", "x.bools")
    notes = []
    with ME.Watchdog(mnt, 600, "bools"):
        ME.mount(path, mnt, ["-o", "ro,allow_other"])
        try:
            pid = MB.daemon_pid(mnt)
            slack = MB.asan_slack(pid)
            header = N_BOOLS + 64
            hwm0 = MB.vm_hwm(pid)
            notes.append("mount %.0f MiB" % (hwm0 / MiB))
            probs = []
            if hwm0 > header + HWM_SLACK + slack:
                probs.append("VmHWM after the mount %.1f MiB: more than the header (%.1f MiB) + %d MiB"
                             % (hwm0 / MiB, header / MiB, (HWM_SLACK + slack) // MiB))
            out, _ = nobody_ok("import os; print(os.stat(%r).st_size)" % key, "stat")
            if int(out) != 6 * N_BOOLS:
                probs.append("meta/x.bools: st_size %s, want %d" % (out, 6 * N_BOOLS))
            out, _ = nobody_ok("import subprocess; print(subprocess.run(['ls', '-l', %r], check=True,"
                               " stdout=subprocess.PIPE).stdout.decode())" % os.path.join(mnt, "meta"),
                               "ls -l meta/")
            if str(6 * N_BOOLS) not in out:
                probs.append("ls -l meta/ does not show the size %d: %r" % (6 * N_BOOLS, out[:300]))
            hwm1 = MB.vm_hwm(pid)
            notes.append("ls -l %+.0f MiB" % ((hwm1 - hwm0) / MiB))
            if hwm1 - hwm0 > HWM_SLACK + slack:
                probs.append("ls -l meta/ raised VmHWM by %.1f MiB (bound %d MiB)"
                             % ((hwm1 - hwm0) / MiB, (HWM_SLACK + slack) // MiB))
            mid = 3 * N_BOOLS  # a window in the middle, not on a line start
            out, _ = nobody_ok("import os; fd = os.open(%r, os.O_RDONLY); "
                               "print(os.pread(fd, 20, %d))" % (key, mid + 2), "pread")
            if out != repr(b"lse\nfalse\nfalse\nfals"):
                probs.append("pread of 20 bytes at %d: %s" % (mid + 2, out))
            out, secs = nobody_ok(READ_ALL % key, "reading meta/x.bools")
            want = "%d %s" % (6 * N_BOOLS, expected_text_digest(N_BOOLS))
            if out != want:
                probs.append("the whole text: %s, want %s" % (out, want))
            hwm2 = MB.vm_hwm(pid)
            notes.append("read of %d MB in %.1f s %+.0f MiB" % (6 * N_BOOLS // 10**6, secs,
                                                                (hwm2 - hwm1) / MiB))
            if hwm2 - hwm1 > HWM_SLACK + slack:
                probs.append("reading the text raised VmHWM by %.1f MiB (bound %d MiB)"
                             % ((hwm2 - hwm1) / MiB, (HWM_SLACK + slack) // MiB))
            if probs:
                raise Fail("\n  - ".join(probs))
        finally:
            ME.cleanup_mounts(d)
    return "VmHWM: " + ", ".join(notes)


def sec_bools_rw(ctx):
    """A windowed value on a read-write mount: a writer's append lands; a
    reader opened before the change reads the value it opened."""
    d = ctx.dir("bools-rw")
    path = os.path.join(d, "b.gguf")
    n = 2_000_000  # 12 MB of text: windowed (more than 1 MiB)
    mkhostile("bools", path, n)
    mnt = os.path.join(d, "mnt")
    key = os.path.join(mnt, "meta", "x.bools")
    with ME.Watchdog(mnt, 300, "bools rw"):
        ME.mount(path, mnt)
        try:
            fd = os.open(key, os.O_RDONLY)
            try:
                if os.pread(fd, 12, 6 * n - 12) != b"false\nfalse\n":
                    raise Fail("the last line of a windowed text is not 'false'")
                with open(key, "a") as f:
                    f.write("true\n")
                if os.stat(key).st_size != 6 * n + 5:
                    raise Fail("after an append: size %d, want %d" % (os.stat(key).st_size, 6 * n + 5))
                # issue 21: a reader opened before the change reads the
                # value it opened, whole (it used to get ESTALE)
                try:
                    got = os.pread(fd, 12, 0) + os.pread(fd, 12, 6 * n - 12) + os.pread(fd, 12, 6 * n)
                except OSError as e:
                    raise Fail("a reader opened before the append: %s, want the value it opened" % e)
                if got != b"false\nfalse\n" * 2:
                    raise Fail("a reader opened before the append read %r, not the value it opened" % got)
            finally:
                os.close(fd)
            with open(key, "rb") as f:
                f.seek(6 * n - 6)
                if f.read() != b"false\ntrue\n":
                    raise Fail("the appended value does not end in 'false\\ntrue\\n'")
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        ME.ggufs_u(mnt, 0, "commit of the append")
    v = ME.kv_of(ME.snapshot(path), b"x.bools")
    if v is None or v[2].count(b"true") != 1 or len(v[2].split()) != n + 1:
        raise Fail("ggml's reader does not see %d bools ending in one true" % (n + 1))
    return "append committed (judged by ggml), a reader opened before it read the old value"


def long_names(mnt):
    """The names in meta/ and the time of `ls -l meta/`, as nobody."""
    code = ("import subprocess, time; t = time.time(); "
            "p = subprocess.run(['ls', '-l', %r], stdout=subprocess.PIPE, stderr=subprocess.PIPE); "
            "print(time.time() - t); print(p.returncode); print(p.stderr.decode()[:300]); "
            "print(len(p.stdout.decode().splitlines()) - 1)" % os.path.join(mnt, "meta"))
    try:
        out, _ = nobody_ok(code, "ls -l meta/", timeout=LS_BOUND + 30)
    except subprocess.TimeoutExpired:
        raise Fail("ls -l meta/ of long names took more than %.0f s" % (LS_BOUND + 30))
    secs, rc, err, n = out.split("\n", 3) if out.count("\n") >= 3 else (out, "?", "", "0")
    return float(secs), rc, err, int(n.strip().split("\n")[-1])


def sec_long_names(ctx):
    d = ctx.dir("long")
    path = os.path.join(d, "long.gguf")
    mkhostile("longkeys", path, N_KEYS, KEY_LEN)
    mnt = os.path.join(d, "mnt")
    notes = []
    with ME.Watchdog(mnt, 1800, "long names"):
        ME.mount(path, mnt, ["-o", "allow_other"])
        try:
            secs, rc, err, n = long_names(mnt)
            notes.append("ls -l meta/ of %d names: %.1f s" % (n, secs))
            if rc != "0" or n != N_KEYS:
                raise Fail("ls -l meta/: status %s, %d entries (want %d): %s" % (rc, n, N_KEYS, err))
            if secs > LS_BOUND:
                raise Fail("ls -l meta/ of %d long names took %.1f s (bound %.0f s)" % (n, secs, LS_BOUND))
            # remove every 400th key by its hashed name, create 20 new keys
            names = sorted(os.listdir(os.path.join(mnt, "meta")))
            gone = names[::400]
            for nm in gone:
                os.unlink(os.path.join(mnt, "meta", nm))
            made = ["new.k%03d.%s" % (k, "x" * 230) for k in range(20)]
            for nm in made:
                with open(os.path.join(mnt, "meta", nm), "w") as f:
                    f.write("v%d\n" % len(nm))
            secs, rc, err, n = long_names(mnt)
            notes.append("after %d removed, %d made: %.1f s" % (len(gone), len(made), secs))
            want = N_KEYS - len(gone) + len(made)
            if rc != "0" or n != want:
                raise Fail("ls -l meta/ after the edits: status %s, %d entries (want %d): %s"
                           % (rc, n, want, err))
            left = set(os.listdir(os.path.join(mnt, "meta")))
            if left != (set(names) - set(gone)) | set(made):
                raise Fail("after the edits meta/ lists other names than the ones left and made")
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        ME.ggufs_u(mnt, 0, "commit of the edits")
    return "; ".join(notes)


SECTIONS = [
    ("a sparse array of bools", sec_bools),
    ("a windowed value edited on a read-write mount", sec_bools_rw),
    ("20 k hashed long names", sec_long_names),
]


def main():
    J.require_fuse()
    if os.geteuid() != 0:
        raise J.Skip("needs root (setpriv, allow_other)")
    os.environ.pop("GGUFS_FAULT", None)
    ctx = MB.Ctx()
    ctx.tmp = tempfile.mkdtemp(prefix="ggufs-amplify-", dir="/tmp")
    os.chmod(ctx.tmp, 0o755)
    try:
        failures = MB.run_sections(ctx, SECTIONS, os.environ.get("MOUNT_AMPLIFY_ONLY", ""))
    finally:
        ME.cleanup_mounts(ctx.tmp)
        if not ME.mounts_under(ctx.tmp):
            shutil.rmtree(ctx.tmp, ignore_errors=True)
    if failures:
        raise Fail("failed: " + "; ".join(failures))


if __name__ == "__main__":
    J.main(main)
