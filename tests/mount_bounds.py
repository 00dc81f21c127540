#!/usr/bin/env python3
"""mount_bounds: what one user, one syscall or one signal can make a mount
do (issue 11), on copies of the tiny model under a temporary directory.

Sections:
  - other users: with -o allow_other, nobody (setpriv --reuid=65534) fsyncs
    a read-only fd of a meta file, meta/ and the root, and runs ggufs -u:
    each fails and the GGUF stays byte-identical; the owner's ggufs -u then
    commits the edit.
  - caps: truncate -s 5G meta/x.tmp and truncate of a key to 5G are EFBIG,
    the daemon survives and its peak RSS (VmHWM) grows by less than
    HWM_SMALL; writes and truncates past -o max_value are EFBIG; a 100 MB
    value (dd, -o max_value=128M) peaks at less than HWM_BIG_FACTOR times
    its size above the mount's baseline; -o max_value= bad values are
    usage errors.
  - torn drafts: a foreground daemon gets SIGTERM while a value is half
    written through an open fd: the committed file (judged by ggml's
    reader) holds the edits that were closed, not the torn value.
  - short file: the GGUF truncated under a read-only mount: a tensor read
    and a live-view read past the new end fail with EIO (not a short
    read), and stat keeps the tensor's size; a live view served by
    passthrough (root) reads the file itself: end of file, as natively.

Environment (tests/meson.build): GGUFS, MKFIXTURE, REFDUMP, GGUFS_SRCDIR.
Exit 0 pass, 1 fail, 77 skip.
"""

import errno
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402
import mount_edit as ME  # noqa: E402

Fail = J.Fail
log = J.log

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
MiB = 1 << 20
HWM_SMALL = 16 * MiB  # growth allowed for a refused 5G truncate
HWM_BIG_FACTOR = 4    # peak above baseline per byte of a 100 MB value


def vm_hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise Fail("no VmHWM in /proc/%d/status" % pid)


def asan_slack(pid):
    """Extra peak RSS allowed when the daemon runs under AddressSanitizer:
    its allocator keeps freed blocks in a quarantine (256 MiB by default)
    and adds redzones, so a big value's copies stay resident longer."""
    with open("/proc/%d/maps" % pid) as f:
        return 320 * MiB if "libasan" in f.read() else 0


def daemon_pid(mnt):
    return int(os.getxattr(mnt, "user.ggufs.pid"))


def as_nobody(code):
    """Runs python code as nobody; returns (rc, stdout+stderr)."""
    p = subprocess.run(NOBODY + [sys.executable, "-c", code], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace").strip()


def expect_errno(probs, want, tries, what_fmt="%s"):
    """Runs each (what, fn) of tries; a success or another errno than want
    is appended to probs."""
    for what, fn in tries:
        what = what_fmt % what
        try:
            fn()
            probs.append("%s succeeded" % what)
        except OSError as e:
            if e.errno != want:
                probs.append("%s: %s (want %s)" % (what, e, errno.errorcode[want]))


def value_of(path, key):
    """The refdump content of key in path (a string: its bytes + newline)."""
    kv = ME.kv_of(ME.snapshot(path), key)
    return kv[2] if kv else None


def sec_other_users(ctx):
    d = ctx.dir("others")
    mnt = os.path.join(d, "mnt")
    path = ME.copy_of(ctx, ctx.tiny, "model.gguf", where=d)
    before = J.file_sha256(path)
    out = []
    with ME.Watchdog(mnt, 120, "other users"):
        ME.mount(path, mnt, ["-o", "allow_other"])
        try:
            ME.write_file(os.path.join(mnt, "meta", "general.name"), b"owner's pending edit\n")
            key = os.path.join(mnt, "meta", "general.name")
            tries = [
                ("fsync of a read-only fd of meta/general.name",
                 "import os; fd = os.open(%r, os.O_RDONLY); os.fsync(fd)" % key),
                ("fsync of meta/",
                 "import os; fd = os.open(%r, os.O_RDONLY | os.O_DIRECTORY); os.fsync(fd)"
                 % os.path.join(mnt, "meta")),
                ("fsync of the root",
                 "import os; fd = os.open(%r, os.O_RDONLY | os.O_DIRECTORY); os.fsync(fd)" % mnt),
                ("ggufs -u",
                 "import subprocess, sys; sys.exit(subprocess.run([%r, '-u', %r]).returncode)"
                 % (ME.ggufs_exe(), mnt)),
            ]
            probs = []
            for what, code in tries:
                rc, msg = as_nobody(code)
                if rc == 0:
                    probs.append("nobody's %s succeeded" % what)
                if J.file_sha256(path) != before:
                    probs.append("nobody's %s changed the GGUF (committed the owner's edit)" % what)
                    before = J.file_sha256(path)
                if J.mountinfo_entry(mnt) is None:
                    raise Fail("nobody's %s unmounted the owner's mount" % what)
                out.append(what)
            if probs:
                raise Fail("\n  - ".join(probs))
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        how, o, e = ME.ggufs_u(mnt, 0, "the owner's ggufs -u")
    if J.file_sha256(path) == before:
        raise Fail("the owner's ggufs -u committed nothing")
    if value_of(path, b"general.name") != ME.sval(b"owner's pending edit"):
        raise Fail("the owner's ggufs -u did not commit the edit")
    return "refused to nobody: " + ", ".join(out)


def sec_caps(ctx):
    d = ctx.dir("caps")
    mnt = os.path.join(d, "mnt")
    path = ME.copy_of(ctx, ctx.tiny, "model.gguf", where=d)
    before = J.file_sha256(path)
    notes = []
    probs = []
    with ME.Watchdog(mnt, 300, "caps"):
        ME.mount(path, mnt)
        try:
            pid = daemon_pid(mnt)
            # warm up: list and read meta/ once
            for n in os.listdir(os.path.join(mnt, "meta")):
                ME.read(os.path.join(mnt, "meta", n))
            base = vm_hwm(pid)
            r = subprocess.run(["truncate", "-s", "5G", os.path.join(mnt, "meta", "x.tmp")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if r.returncode == 0 or b"too large" not in r.stdout:
                probs.append("truncate -s 5G meta/x.tmp: exit %d %r (want EFBIG)" % (r.returncode, r.stdout))
            expect_errno(probs, errno.EFBIG, [("truncate of a key to 5G",
                              lambda: os.truncate(os.path.join(mnt, "meta", "general.name"), 5 << 30)),
                             ("ftruncate of a writable key fd to 5G",
                              lambda: ftrunc(os.path.join(mnt, "meta", "general.name"), 5 << 30)),
                             ("pwrite at 1 TiB into a key",
                              lambda: pwrite_at(os.path.join(mnt, "meta", "general.name"), 1 << 40)),
                             ("pwrite at 64 MiB (the default cap) into a FILE",
                              lambda: pwrite_at(os.path.join(mnt, "meta", "y.tmp"), 64 * MiB))])
            if not os.path.exists("/proc/%d" % pid) or J.mountinfo_entry(mnt) is None:
                raise Fail("the daemon died of truncate -s 5G")
            hwm = vm_hwm(pid)
            notes.append("5G truncates: VmHWM %.1f MiB (baseline %.1f)" % (hwm / MiB, base / MiB))
            if hwm - base > HWM_SMALL:
                probs.append("refused 5G truncates raised VmHWM by %.1f MiB (bound %d MiB)"
                             % ((hwm - base) / MiB, HWM_SMALL // MiB))
            # the default cap refuses a 100 MB value
            r = subprocess.run(["dd", "if=/dev/zero", "of=" + os.path.join(mnt, "meta", "mytool.big"),
                                "bs=1M", "count=100"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if r.returncode == 0 or b"too large" not in r.stdout:
                probs.append("dd of 100 MB into meta/ with the default cap: exit %d %r (want EFBIG)"
                             % (r.returncode, r.stdout[-200:]))
            for n in ("x.tmp", "y.tmp", "mytool.big"):
                try:
                    os.unlink(os.path.join(mnt, "meta", n))
                except FileNotFoundError:
                    pass
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        ME.ggufs_u(mnt, 0, "caps")
    if J.file_sha256(path) != before:
        probs.append("the refused writes changed the GGUF")

    # -o max_value=1M: past it is EFBIG, up to it works
    with ME.Watchdog(mnt, 120, "max_value=1M"):
        ME.mount(path, mnt, ["-o", "max_value=1M"])
        try:
            k = os.path.join(mnt, "meta", "general.name")
            expect_errno(probs, errno.EFBIG, [("write of 1M+1 bytes", lambda: write_all(k, b"a" * (MiB + 1))),
                             ("truncate to 1M+1", lambda: os.truncate(k, MiB + 1)),
                             ("FILE write of 1M+1 bytes",
                              lambda: write_all(os.path.join(mnt, "meta", "z.tmp"), b"a" * (MiB + 1),
                                                os.O_WRONLY | os.O_CREAT))], "-o max_value=1M: %s")
            ME.write_file(k, b"b" * (MiB - 1) + b"\n")
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        ME.ggufs_u(mnt, 0, "max_value=1M")
    if value_of(path, b"general.name") != ME.sval(b"b" * (MiB - 1)):
        probs.append("-o max_value=1M: a value of 1M - 1 bytes plus newline was not committed")

    # a 100 MB value under -o max_value=128M: peak RSS bounded
    with ME.Watchdog(mnt, 300, "100 MB value"):
        ME.mount(path, mnt, ["-o", "max_value=128M"])
        try:
            pid = daemon_pid(mnt)
            base = vm_hwm(pid)
            big = os.path.join(d, "big.txt")
            with open(big, "wb") as f:
                f.write(b"x" * (100 * 1000 * 1000) + b"\n")
            r = subprocess.run(["dd", "if=" + big, "of=" + os.path.join(mnt, "meta", "mytool.big"), "bs=1M"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            os.unlink(big)
            if r.returncode != 0:
                raise Fail("dd of a 100 MB value with -o max_value=128M: %r" % r.stdout[-300:])
            hwm = vm_hwm(pid)
            notes.append("100 MB value: VmHWM %.1f MiB (baseline %.1f)" % (hwm / MiB, base / MiB))
            slack = asan_slack(pid)
            if hwm - base > HWM_BIG_FACTOR * 100 * 1000 * 1000 + slack:
                probs.append("a 100 MB value raised VmHWM by %.1f MiB (bound %d x 100 MB%s)"
                             % ((hwm - base) / MiB, HWM_BIG_FACTOR,
                                " + %d MiB for ASan" % (slack // MiB) if slack else ""))
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        ME.ggufs_u(mnt, 0, "100 MB value")
    # bad -o max_value: one ggufs: line, status 2
    for bad in ("0", "-5", "2G", "1T", "12X", "", "1.5M", "99999999999999999999"):
        p = J.run_ggufs(["-o", "max_value=" + bad, path, mnt])
        err = p.stderr.decode(errors="replace")
        if p.returncode != 2 or not err.startswith("ggufs: ") or err.count("\n") != 1:
            probs.append("-o max_value=%s: exit %d, stderr %r (want one 'ggufs: ' line, 2)"
                         % (bad, p.returncode, err))
        if J.mountinfo_entry(mnt) is not None:
            J.unmount(mnt, [])
    if probs:
        raise Fail("\n  - ".join(probs))
    return "; ".join(notes)


def write_all(p, data, flags=os.O_WRONLY | os.O_TRUNC):
    """Writes data through one fd, chunk after chunk as the kernel splits
    it; the first failing write raises."""
    fd = os.open(p, flags)
    try:
        done = 0
        while done < len(data):
            done += os.write(fd, data[done:])
    finally:
        os.close(fd)


def ftrunc(p, n):
    fd = os.open(p, os.O_WRONLY)
    try:
        os.ftruncate(fd, n)
    finally:
        os.close(fd)


def pwrite_at(p, off):
    fd = os.open(p, os.O_WRONLY | os.O_CREAT)
    try:
        os.pwrite(fd, b"x", off)
    finally:
        os.close(fd)


def sec_torn(ctx):
    d = ctx.dir("torn")
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt, exist_ok=True)
    path = ME.copy_of(ctx, ctx.tiny, "model.gguf", where=d)
    sha0 = J.file_sha256(path)
    torn_run(path, mnt, os.path.join(d, "alone.err"), None)
    if J.file_sha256(path) != sha0:
        raise Fail("SIGTERM with only a half-written draft open changed the GGUF")
    return torn_run(path, mnt, os.path.join(d, "daemon.err"), b"closed edit")


def torn_run(path, mnt, errp, closed):
    """Mounts in the foreground, closes an edit of mytool.note (closed, if
    not None), leaves general.name half written through an open fd, sends
    SIGTERM and judges the file."""
    before = ME.snapshot(path)
    m = ME.Model(before)
    errf = open(errp, "wb")
    p = subprocess.Popen([ME.ggufs_exe(), "-f", path, mnt], stdin=subprocess.DEVNULL, stdout=errf, stderr=errf)
    fd = None
    try:
        ME.wait_mounted(mnt, p)
        if closed is not None:
            ME.write_file(os.path.join(mnt, "meta", "mytool.note"), closed + b"\n", os.O_WRONLY | os.O_CREAT)
            m.set(b"mytool.note", "string", ME.sval(closed))
        # general.name is being rewritten when the signal comes: it keeps
        # its old value
        fd = os.open(os.path.join(mnt, "meta", "general.name"), os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"{% if user %}half of a chat templ")
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
    finally:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        if p.poll() is None:
            p.kill()
            p.wait()
        errf.close()
        if J.mountinfo_entry(mnt):
            subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
    err = ME.read(errp).decode(errors="replace")
    if rc != 0:
        raise Fail("ggufs -f exited %d after SIGTERM: %s" % (rc, err.strip()[-300:]))
    after = ME.snapshot(path)
    got = ME.kv_of(after, b"general.name")
    if got is not None and b"half" in got[2]:
        raise Fail("SIGTERM committed the value still being written: %r" % (got,))
    ME.judge_commit("SIGTERM with a half-written draft", path, before, m)
    if "general.name" not in err or "still being written" not in err:
        raise Fail("the daemon did not say it dropped the half-written draft: %r" % err[-400:])
    return "dropped and said so: " + next(l for l in err.splitlines() if "still being written" in l)


def sec_short_file(ctx):
    d = ctx.dir("short")
    mnt = os.path.join(d, "mnt")
    path = ME.copy_of(ctx, ctx.tiny, "model.gguf", where=d)
    snap = ME.snapshot(path)
    # the tensor whose data ends last
    last = max(snap.ref.tensors, key=lambda t: t.offset + t.size)
    probs = []
    with ME.Watchdog(mnt, 120, "short file"):
        ME.mount(path, mnt, ["-o", "ro"])
        try:
            tp = os.path.join(mnt, "tensors", last.name.decode() if isinstance(last.name, bytes) else last.name)
            tfd = os.open(tp, os.O_RDONLY)
            vname = [n for n in os.listdir(mnt) if n.endswith(".gguf")]
            vfd = os.open(os.path.join(mnt, vname[0]), os.O_RDONLY) if vname else None
            size = os.fstat(tfd).st_size
            os.truncate(path, last.offset + last.size // 2)
            try:
                b = os.pread(tfd, 4096, size - 4096)
                probs.append("a tensor read past the file's new end returned %d bytes, not EIO" % len(b))
            except OSError as e:
                if e.errno != errno.EIO:
                    probs.append("a tensor read past the file's new end: %s (want EIO)" % e)
            if vfd is not None:
                try:
                    b = os.pread(vfd, 4096, os.fstat(vfd).st_size - 4096)
                    # By passthrough (issue 12: root, not -o passthrough=off)
                    # the kernel reads the GGUF itself: end of file, as a
                    # native read of the truncated file gives.
                    pt = os.geteuid() == 0 and os.environ.get("GGUFS_PASSTHROUGH") != "off"
                    if not (pt and b == b""):
                        probs.append("a live-view read past the file's new end returned %d bytes, not EIO" % len(b))
                except OSError as e:
                    if e.errno != errno.EIO:
                        probs.append("a live-view read past the file's new end: %s (want EIO)" % e)
            if os.fstat(tfd).st_size != size:
                probs.append("after the failed read, stat says %d bytes, the header %d"
                             % (os.fstat(tfd).st_size, size))
            os.close(tfd)
            if vfd is not None:
                os.close(vfd)
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        J.unmount(mnt)
    if probs:
        raise Fail("\n  - ".join(probs))
    return "EIO past the end, size kept"


def nested_gguf(path):
    """A GGUF v3 without tensors: test.nested = [[1, 2], [3]] (uint32), and
    general.name.  ggml rejects it; ggufs mounts it with -o allow_nested."""
    def s(b):
        return struct.pack("<Q", len(b)) + b
    kv = s(b"test.nested") + struct.pack("<IIQ", 9, 9, 2)
    for vals in ([1, 2], [3]):
        kv += struct.pack("<IQ", 4, len(vals)) + b"".join(struct.pack("<I", v) for v in vals)
    kv += s(b"general.name") + struct.pack("<I", 8) + s(b"nest")
    h = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv
    with open(path, "wb") as f:
        f.write(h + b"\0" * (-len(h) % 32))


def sec_nested(ctx):
    d = ctx.dir("nested")
    mnt = os.path.join(d, "mnt")
    path = os.path.join(d, "nested.gguf")
    nested_gguf(path)
    before = J.file_sha256(path)
    probs = []
    with ME.Watchdog(mnt, 60, "nested"):
        ME.mount(path, mnt, ["-o", "allow_nested"])
        try:
            k = os.path.join(mnt, "meta", "test.nested")
            r = subprocess.run(["sh", "-c", "printf 'uint32[1, 2, 5]\\nuint32[3]\\n' > '%s'" % k],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if r.returncode == 0:
                probs.append("the shell's redirection into an array of arrays succeeded (the edit "
                             "cannot be applied)")
            expect_errno(probs, errno.EPERM, [("open for writing", lambda: os.close(os.open(k, os.O_WRONLY))),
                                              ("truncate", lambda: os.truncate(k, 0))], "%s of an array of arrays")
            why = J.xattr(k, "user.gguf.error")
            if not isinstance(why, bytes) or b"array of arrays" not in why:
                probs.append("user.gguf.error of the nested key is %r" % (why,))
            ME.write_file(os.path.join(mnt, "meta", "general.name"), b"still editable\n")
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        ME.ggufs_u(mnt, 0, "nested")
    if J.file_sha256(path) == before:
        probs.append("the edit of general.name beside the nested key was not committed")
    if probs:
        raise Fail("\n  - ".join(probs))
    return "refused at open, where the shell sees it"


def sec_quoting(ctx):
    """Names with control bytes reach the log and the report escaped."""
    d = ctx.dir("quoting")
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    path = ME.copy_of(ctx, ctx.tiny, "model.gguf", where=d)
    errp = os.path.join(d, "daemon.err")
    hostile = "x\x1b[31mred\nfake: committed\x07.tmp"
    with open(errp, "wb") as errf:
        p = subprocess.Popen([ME.ggufs_exe(), "-f", path, mnt], stdin=subprocess.DEVNULL, stdout=errf,
                             stderr=errf)
        try:
            ME.wait_mounted(mnt, p)
            ME.write_file(os.path.join(mnt, "meta", hostile), b"scratch\n", os.O_WRONLY | os.O_CREAT)
            how, out, err = ME.ggufs_u(mnt, 5, "quoting")  # the FILE is left: exit 5
            p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            if J.mountinfo_entry(mnt):
                subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
    probs = []
    for what, text in (("the daemon's stderr", ME.read(errp).decode(errors="replace")),
                       ("ggufs -u's output", out + err)):
        if "\x1b" in text or "\x07" in text or "\nfake: committed" in text:
            probs.append("%s holds the name's raw control bytes: %r" % (what, text[-400:]))
        elif "not a key" not in text:
            probs.append("%s does not name the FILE: %r" % (what, text[-400:]))
    if probs:
        raise Fail("\n  - ".join(probs))
    return "escaped"


def sec_save_fails(ctx):
    """Item 11: a commit fails (no space) and saving the edits fails too:
    the message says they were NOT saved and where they still are (the
    mount, the pending record); freeing space and committing again loses
    nothing."""
    d = ctx.dir("nosave")
    fs_dir = os.path.join(d, "fs")
    os.mkdir(fs_dir)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "none", fs_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise J.Skip("mount -t tmpfs failed: %s" % r.stderr.decode(errors="replace").strip())
    ctx.tmpfs = fs_dir
    mnt = os.path.join(d, "mnt")
    old_tmp = os.environ.get("TMPDIR")
    try:
        path = os.path.join(fs_dir, "model.gguf")
        p = subprocess.run([J.tool("MKFIXTURE"), "model", path, "--tensor-mb", "1",
                            "--n-tensors", "2", "--vocab", "300"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        if p.returncode != 0:
            raise Fail("mkfixture failed: %s" % p.stderr.decode(errors="replace"))
        os.environ["TMPDIR"] = fs_dir  # the saved-edits fallback: full too
        with ME.Watchdog(mnt, 120, "failed save"):
            ME.mount(path, mnt)
            ME.write_file(os.path.join(mnt, "meta", "general.name"), b"x" * 3000 + b"\n")
            filler = os.path.join(fs_dir, "filler")
            subprocess.run(["dd", "if=/dev/zero", "of=" + filler, "bs=64k"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            fd = os.open(os.path.join(mnt, "meta"), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
                raise Fail("fsync of meta/ (a commit) succeeded on a full filesystem")
            except OSError:
                pass
            finally:
                os.close(fd)
            msg = os.getxattr(mnt, "user.ggufs.commit").decode(errors="replace")
            for want in ("NOT saved", mnt, "kept durably", "--apply-pending"):
                if want not in msg:
                    raise Fail("failed-save report lacks %r: %r" % (want, msg))
            if any(".ggufs-edits-" in n for n in os.listdir(fs_dir)):
                raise Fail("a saved-edits file was reported missing but exists: %r"
                           % os.listdir(fs_dir))
            os.unlink(filler)
            ME.ggufs_u(mnt, 0, "commit after space was freed")
        if value_of(path, b"general.name") != ME.sval(b"x" * 3000):
            raise Fail("the edit was lost after the failed save")
        return "report: %s" % msg[msg.index("commit failed"):][:160]
    finally:
        if old_tmp is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_tmp
        ME.cleanup_mounts(d)
        subprocess.run(["umount", fs_dir], stderr=subprocess.DEVNULL)
        ctx.tmpfs = None


def foreign_padding_gguf(path):
    """A GGUF v3 without tensors whose FIRST key is ggufs.padding = "someone
    else's data" (not ggufs's filler: not last, not spaces), then
    general.name = "p"."""
    def s(b):
        return struct.pack("<Q", len(b)) + b
    kv = s(b"ggufs.padding") + struct.pack("<I", 8) + s(b"someone else's data")
    kv += s(b"general.name") + struct.pack("<I", 8) + s(b"p")
    h = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv
    with open(path, "wb") as f:
        f.write(h + b"\0" * (-len(h) % 32))


def sec_foreign_padding(ctx):
    """Item 12: a key named ggufs.padding that ggufs did not write is a
    normal key: listed, its value kept; a commit that needs padding is
    refused (a second key of that name would make the file invalid) and
    says why; once the user removes it, the commit goes through."""
    d = ctx.dir("padding")
    mnt = os.path.join(d, "mnt")
    path = os.path.join(d, "p.gguf")
    foreign_padding_gguf(path)
    if J.refdump(path)[0] != "ggml-accepts":
        raise Fail("ggml rejects the fixture")
    before = J.file_sha256(path)
    with ME.Watchdog(mnt, 60, "foreign padding"):
        ME.mount(path, mnt)
        try:
            k = os.path.join(mnt, "meta", "ggufs.padding")
            if "ggufs.padding" not in os.listdir(os.path.join(mnt, "meta")):
                raise Fail("someone else's ggufs.padding key is hidden")
            if ME.read(k) != b"someone else's data\n":
                raise Fail("its value reads %r" % ME.read(k))
            ME.write_file(os.path.join(mnt, "meta", "general.name"), b"a much longer name that no longer fits in the header\n")
            fd = os.open(os.path.join(mnt, "meta"), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
                refused = False
            except OSError:
                refused = True
            finally:
                os.close(fd)
            msg = os.getxattr(mnt, "user.ggufs.commit").decode(errors="replace")
            if not refused or "ggufs.padding" not in msg:
                raise Fail("commit beside a foreign ggufs.padding: refused=%s, report %r"
                           % (refused, msg))
            if J.file_sha256(path) != before:
                raise Fail("the refused commit changed the file")
            os.unlink(k)
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        ME.ggufs_u(mnt, 0, "after removing the foreign key")
    verdict, ref = J.refdump(path)
    if verdict != "ggml-accepts":
        raise Fail("ggml rejects the committed file")
    names = [kv.key for kv in ref.kvs]
    if b"general.name" not in names or names.count(b"ggufs.padding") > 1:
        raise Fail("keys after the commit: %r" % names)
    if value_of(path, b"general.name") != ME.sval(b"a much longer name that no longer fits in the header"):
        raise Fail("general.name was not committed")
    return "listed, refused with %r, committed once removed" % msg[msg.index("commit failed"):][:90]


def sec_total_cap(ctx):
    """Item 5: all files in meta/ being written together are bounded
    (-o max_drafts), not only each one (-o max_value): past it, ENOSPC
    before anything is allocated; removing one frees its share."""
    d = ctx.dir("total")
    mnt = os.path.join(d, "mnt")
    path = ME.copy_of(ctx, ctx.tiny, "model.gguf", where=d)
    before = J.file_sha256(path)
    with ME.Watchdog(mnt, 120, "total cap"):
        ME.mount(path, mnt, ["-o", "max_value=1M,max_drafts=3M"])
        try:
            chunk = b"a" * (900 * 1024)
            made, refused = [], None
            for n in range(5):
                f = os.path.join(mnt, "meta", "X%d.swp" % n)  # not a key name: a FILE
                try:
                    ME.write_file(f, chunk, os.O_WRONLY | os.O_CREAT)
                    made.append(f)
                except OSError as e:
                    refused = e.errno
                    break
            if len(made) != 3 or refused != errno.ENOSPC:
                raise Fail("900 KiB FILEs under max_drafts=3M: %d made, then %s (want 3, ENOSPC)"
                           % (len(made), refused and errno.errorcode[refused]))
            # a key's draft counts too
            k = os.path.join(mnt, "meta", "general.name")
            try:
                ME.write_file(k, b"b" * (400 * 1024) + b"\n")
                raise Fail("a 400 KiB draft past the total cap succeeded")
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise Fail("a draft past the total cap: %s (want ENOSPC)" % e)
            os.unlink(made[0])
            ME.write_file(os.path.join(mnt, "meta", "Y.swp"), chunk, os.O_WRONLY | os.O_CREAT)
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        J.unmount(mnt)
    if J.file_sha256(path) != before:
        raise Fail("FILEs and a refused draft changed the GGUF")
    return "3 x 900 KiB, then ENOSPC; freed by rm"


def sec_memlimit(ctx):
    """Item 5, "the memory caps hold under a memory limit": the daemon runs
    with its address space limited (RLIMIT_AS, 640 MiB; no cgroups here)
    and is driven at every cap at once: truncate -s 5G, a 100 MB dd, 300
    FILEs of 1 MiB.  It stays up, serves, and the GGUF is unchanged.
    AddressSanitizer reserves terabytes of address space: skipped there."""
    import resource
    ldd = subprocess.run(["ldd", ME.ggufs_exe()], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if b"libasan" in ldd.stdout:
        return "skipped under AddressSanitizer (it reserves terabytes of address space)"
    d = ctx.dir("memlimit")
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    path = ME.copy_of(ctx, ctx.tiny, "model.gguf", where=d)
    before = J.file_sha256(path)
    limit = 640 * MiB

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with ME.Watchdog(mnt, 300, "memory limit"):
        # glibc reserves 64 MiB of address space per thread arena: two
        # arenas keep RLIMIT_AS about memory actually used
        env = dict(os.environ, MALLOC_ARENA_MAX="2")
        p = J.run_ggufs([path, mnt], preexec_fn=limited, env=env)
        if p.returncode != 0:
            raise Fail("ggufs under RLIMIT_AS=640M: exit %d %r" % (p.returncode, p.stderr))
        try:
            pid = daemon_pid(mnt)
            subprocess.run(["truncate", "-s", "5G", os.path.join(mnt, "meta", "x.tmp")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run(["dd", "if=/dev/zero", "of=" + os.path.join(mnt, "meta", "mytool.big"),
                            "bs=1M", "count=100"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            refused = 0
            for n in range(300):
                try:
                    ME.write_file(os.path.join(mnt, "meta", "F%d.swp" % n), b"z" * MiB,
                                  os.O_WRONLY | os.O_CREAT)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise Fail("FILE %d under the memory limit: %s (want ENOSPC past max_drafts)"
                                   % (n, e))
                    refused += 1
            if not os.path.exists("/proc/%d" % pid) or J.mountinfo_entry(mnt) is None:
                raise Fail("the daemon died under RLIMIT_AS=640M")
            if ME.read(os.path.join(mnt, "meta", "general.architecture")) == b"":
                raise Fail("the daemon no longer serves")
            hwm = vm_hwm(pid)
            os.unlink(os.path.join(mnt, "meta", "x.tmp"))  # created (empty) by truncate
            if os.path.lexists(os.path.join(mnt, "meta", "mytool.big")):  # issue 21
                raise Fail("meta/mytool.big exists after its first write failed (dd, EFBIG)")
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        J.unmount(mnt)
    if J.file_sha256(path) != before:
        raise Fail("the refused writes changed the GGUF")
    if refused < 40:
        raise Fail("only %d of 300 1-MiB FILEs were refused (max_drafts is 256M)" % refused)
    return "alive; %d FILEs refused (ENOSPC); VmHWM %.1f MiB" % (refused, hwm / MiB)


def amplify_bools(path, n):
    """A sparse GGUF: general.name, then test.bools = n bools (all false,
    the file's holes): a few KB on disk, n bytes of header."""
    def s(b):
        return struct.pack("<Q", len(b)) + b
    kv = s(b"general.name") + struct.pack("<I", 8) + s(b"amp")
    kv += s(b"test.bools") + struct.pack("<IIQ", 9, 7, n)
    h = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv
    with open(path, "wb") as f:
        f.write(h)
        end = len(h) + n
        f.truncate(end + (-end % 32))


def amplify_names(path, n):
    """n keys with 300-byte names (hashed file names in meta/)."""
    def s(b):
        return struct.pack("<Q", len(b)) + b
    kv = b"".join(s(("x" * 280 + ".%08d" % i + "y" * 11).encode()) + struct.pack("<II", 4, i)
                  for i in range(n))
    h = b"GGUF" + struct.pack("<IQQ", 3, 0, n) + kv
    with open(path, "wb") as f:
        f.write(h + b"\0" * (-len(h) % 32))


def sec_amplify(ctx):
    """Item 6: hostile headers do not amplify.  100 M bools in a sparse file
    (the issue's case had 400 M): the mount costs the header, `ls -l meta/`
    measures the text (600 MB) without making it, and a read in its middle
    makes only a window of it;
    20 000 keys with 300-byte names: `ls -l meta/` as nobody in seconds (it
    took 7.5 minutes), every hashed name found."""
    d = ctx.dir("amplify")
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    n = 100_000_000
    bools = os.path.join(d, "bools.gguf")
    amplify_bools(bools, n)
    notes = []
    with ME.Watchdog(mnt, 300, "100 M bools"):
        ME.mount(bools, mnt, ["-o", "ro,allow_other"])
        try:
            pid = daemon_pid(mnt)
            at_mount = vm_hwm(pid)
            slack = asan_slack(pid)
            t0 = time.time()
            r = subprocess.run(NOBODY + ["ls", "-l", os.path.join(mnt, "meta")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=240)
            took = time.time() - t0
            if r.returncode != 0:
                raise Fail("ls -l meta/ as nobody: %r" % r.stderr)
            size = os.stat(os.path.join(mnt, "meta", "test.bools")).st_size
            if size != 6 * n:  # "false\n" each
                raise Fail("meta/test.bools has size %d, its text is %d bytes" % (size, 6 * n))
            # served in windows (mount_amplify reads all of it)
            with open(os.path.join(mnt, "meta", "test.bools"), "rb") as f:
                f.seek(3 * n + 2)
                got = f.read(20)
            if got != b"lse\nfalse\nfalse\nfals":
                raise Fail("20 bytes in the middle of the 600 MB text: %r" % got)
            after = vm_hwm(pid)
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        J.unmount(mnt)
    if at_mount > n + 64 * MiB + slack:
        raise Fail("mounting %d MB of header peaked at %.0f MiB" % (n // 10**6, at_mount / MiB))
    if after - at_mount > 32 * MiB + slack:
        raise Fail("ls -l and a read of a window raised VmHWM by %.0f MiB" % ((after - at_mount) / MiB))
    notes.append("100 M bools: VmHWM %.0f MiB at mount, +%.1f MiB after ls -l (%.1f s) and a read"
                 % (at_mount / MiB, (after - at_mount) / MiB, took))

    names = os.path.join(d, "names.gguf")
    amplify_names(names, 20000)
    with ME.Watchdog(mnt, 300, "20k long names"):
        ME.mount(names, mnt, ["-o", "ro,allow_other"])
        try:
            t0 = time.time()
            r = subprocess.run(NOBODY + ["ls", "-l", os.path.join(mnt, "meta")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=240)
            took = time.time() - t0
            lines = [x for x in r.stdout.decode().splitlines() if "%~" in x]
            if r.returncode != 0 or len(lines) != 20000:
                raise Fail("ls -l of 20 000 hashed names as nobody: exit %d, %d listed, %r"
                           % (r.returncode, len(lines), r.stderr[-300:]))
            if took > 60:
                raise Fail("ls -l of 20 000 hashed names took %.0f s" % took)
        except BaseException:
            ME.cleanup_mounts(d)
            raise
        J.unmount(mnt)
    notes.append("20 000 hashed names: ls -l as nobody %.1f s" % took)
    return "; ".join(notes)


SECTIONS = [
    ("other users cannot commit", sec_other_users),
    ("caps on meta files", sec_caps),
    ("torn drafts at SIGTERM", sec_torn),
    ("GGUF truncated under the mount", sec_short_file),
    ("arrays of arrays refused where the shell sees it", sec_nested),
    ("names with control bytes escaped in messages", sec_quoting),
    ("a commit and the save of its edits both fail", sec_save_fails),
    ("someone else's ggufs.padding key", sec_foreign_padding),
    ("a bound on all drafts together", sec_total_cap),
    ("the caps under a memory limit", sec_memlimit),
    ("hostile headers do not amplify", sec_amplify),
]


class Ctx:
    def dir(self, name):
        p = os.path.join(self.tmp, name)
        os.mkdir(p)
        os.chmod(p, 0o755)
        return p


def run_sections(ctx, sections, only):
    """Runs each (name, fn) of sections whose name contains only (all when
    only is empty), logging ok/FAIL; unmounts what each left under ctx.tmp.
    Returns the names that failed."""
    failures = []
    for name, fn in sections:
        if only and only not in name:
            continue
        t0 = time.time()
        del ME.LATE[:]
        try:
            summary = fn(ctx)
            if ME.LATE:
                raise Fail("\n  - ".join(ME.LATE))
            log("ok   %s (%.1fs) %s" % (name, time.time() - t0, summary or ""))
        except Fail as e:
            failures.append(name)
            log("FAIL %s (%.1fs): %s" % (name, time.time() - t0, e))
        ME.cleanup_mounts(ctx.tmp)
    return failures


def main():
    J.require_fuse()
    if os.geteuid() != 0:
        raise J.Skip("needs root (setpriv, allow_other)")
    os.environ.pop("GGUFS_FAULT", None)
    ctx = Ctx()
    ctx.tmp = tempfile.mkdtemp(prefix="ggufs-bounds-", dir="/tmp")
    os.chmod(ctx.tmp, 0o755)
    ctx.tmpfs = None
    failures = []
    try:
        models = J.shared_models()
        ctx.tiny = next((f for f in models if os.path.basename(f) == "tiny-llama-f32.gguf"), None)
        if ctx.tiny is None:
            ctx.tiny = os.path.join(ctx.tmp, "model-small.gguf")
            p = subprocess.run([J.tool("MKFIXTURE"), "model", ctx.tiny, "--tensor-mb", "1", "--n-tensors", "8"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
            if p.returncode != 0:
                raise Fail("mkfixture model failed: %s" % p.stderr.decode(errors="replace"))
        J.refdump(ctx.tiny)  # raises Skip without ggml
        failures = run_sections(ctx, SECTIONS, os.environ.get("MOUNT_BOUNDS_ONLY", ""))
    finally:
        ME.cleanup_mounts(ctx.tmp)
        if not ME.mounts_under(ctx.tmp):
            shutil.rmtree(ctx.tmp, ignore_errors=True)
    if failures:
        raise Fail("failed: " + "; ".join(failures))


if __name__ == "__main__":
    J.main(main)
