#!/usr/bin/env python3
"""mount_tensorw: tensors/NAME written through a read-write mount (issue 24,
ggufs(1) WRITING TENSORS), every file judged by ggml's reader (refdump):

1. In place and whole: a shared writable mmap edit of one tensor (numpy's
   np.memmap mode='r+' when numpy is installed, else Python's mmap, the
   same MAP_SHARED mapping), pwrite into it, and a cp of a whole tensor;
   the tensor files, the live view (served cached: -o passthrough=off, its
   pages read before the writes), f32/ and the hashes show the new bytes; ggufs
   -u names the written tensors; after unmount ggml reads exactly the new
   bytes and every other byte of the file is unchanged.
2. Sizes: a write past the end is EFBIG, truncate to another size EINVAL,
   to its own size nothing; an O_TRUNC open closed without writing keeps
   every byte.
3. kill -9 at every step of a whole-tensor replace (GGUFS_FAULT=N in the
   daemon, gguf/tensorw.c's fault points), then a plain remount: the
   tensor is the old one before the journal is complete (steps 1-5), the
   new one from then on, never a mix; the rest of the file unchanged,
   nothing left beside the model.
4. Who may write: another user (uid 65534, -o allow_other) reads the
   tensor but cannot open it for writing; -o ro refuses with EROFS.
5. A shard set: the first file's tensors take writes (ggml reads it back),
   the later files' (opened read-only) are 0444 and EROFS.
6. An overlay mount (-o overlay=PATH) of a 0444 model: the mmap edit and
   the cp go to the overlay; the daemon holds the model O_RDONLY only, its
   bytes and times never change; the live view, f32/ and the hash show the
   new bytes; a remount with the overlay shows them, one without does not;
   --overlay-apply writes them into the file (judged as in 1) and removes
   the overlay and its data file.
7. kill -9 at every step of the overlay write that records a whole
   replace on an overlay mount: old or new after a remount, never mixed.

Environment (tests/meson.build): GGUFS, MKFIXTURE, REFDUMP.
Exit 0 pass, 1 fail, 77 skip.
"""
import errno
import mmap
import os
import shutil
import struct
import subprocess
import time

import judge as J
import mount_edit as E

Fail = J.Fail
STEPS = 14  # gguf/tensorw.c: fault points of an apply
JOURNALED = 6  # from this step on the journal is complete: the new tensor


def fixture(d, name="model.gguf"):
    return J.mkfixture_model(os.path.join(d, name), 1, 2)


def layout(path):
    """ggml's tensors of path: {name: (offset, size)}."""
    verdict, ref = J.refdump(path)
    if ref is None:
        raise Fail("ggml's reader rejects %s" % path)
    return {os.fsdecode(t.name): (t.offset, t.size) for t in ref.tensors}


def read_at(path, off, n):
    with open(path, "rb") as f:
        f.seek(off)
        return f.read(n)


def expect_file(path, before, changes, label):
    """path must be before with changes {offset: bytes} applied, and ggml
    must read it with the same layout."""
    want = bytearray(before)
    for off, b in changes.items():
        want[off:off + len(b)] = b
    with open(path, "rb") as f:
        got = f.read()
    if got != bytes(want):
        i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
        raise Fail("%s: %s differs from the expected bytes at offset %d (size %d, expected %d)"
                   % (label, path, i, len(got), len(want)))
    layout(path)


def halves(size):
    """size bytes of finite float16 values, and their float32 bytes (what
    f32/ must show: every such value is exact in float32)."""
    n = size // 2
    vals = [((i * 7919) % 4001 - 2000) / 64.0 for i in range(n)]
    return struct.pack("<%de" % n, *vals), struct.pack("<%df" % n, *vals)


def check_f32(mnt, name, want, what):
    """f32/NAME (when the mount has f32/) reads want."""
    if "f32" not in os.listdir(mnt):
        return
    with open(os.path.join(mnt, "f32", name), "rb") as f:
        if f.read() != want:
            raise Fail("%s: f32/%s does not show the new values" % (what, name))


def mmap_edit(p, size):
    """A shared writable mapping of p, every 4-byte word at 0, 4096*k + 8
    and the last changed, flushed: numpy's r+ memmap when there is numpy."""
    try:
        import numpy as np
        w = np.memmap(p, dtype="uint8", mode="r+")
        w[0:4] = np.frombuffer(b"MMAP", dtype="uint8")
        for k in range(size // 4096):
            w[4096 * k + 8:4096 * k + 12] = np.frombuffer(b"page", dtype="uint8")
        w[size - 4:size] = np.frombuffer(b"LAST", dtype="uint8")
        w.flush()
        del w
        return "numpy memmap r+"
    except ImportError:
        pass
    # Debian's python3 (python3-numpy), when this one has no numpy
    deb = "/usr/bin/python3"
    if os.path.exists(deb) and subprocess.run([deb, "-c", "import numpy"],
                                              stderr=subprocess.DEVNULL).returncode == 0:
        code = ("import numpy as np, sys\n"
                "p, size = sys.argv[1], int(sys.argv[2])\n"
                "w = np.memmap(p, dtype='uint8', mode='r+')\n"
                "w[0:4] = np.frombuffer(b'MMAP', dtype='uint8')\n"
                "for k in range(size // 4096):\n"
                "    w[4096 * k + 8:4096 * k + 12] = np.frombuffer(b'page', dtype='uint8')\n"
                "w[size - 4:size] = np.frombuffer(b'LAST', dtype='uint8')\n"
                "w.flush()\n")
        r = subprocess.run([deb, "-c", code, p, str(size)], stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise Fail("numpy memmap r+ of %s: %s" % (p, r.stderr.decode(errors="replace")))
        return "numpy memmap r+ (Debian's python3)"
    fd = os.open(p, os.O_RDWR)
    try:
        m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m[0:4] = b"MMAP"
        for k in range(size // 4096):
            m[4096 * k + 8:4096 * k + 12] = b"page"
        m[size - 4:size] = b"LAST"
        m.flush()
        m.close()
    finally:
        os.close(fd)
    return "mmap MAP_SHARED (no numpy)"


def mmap_expected(old, size):
    b = bytearray(old)
    b[0:4] = b"MMAP"
    for k in range(size // 4096):
        b[4096 * k + 8:4096 * k + 12] = b"page"
    b[size - 4:size] = b"LAST"
    return bytes(b)


def sec_write(d):
    path = fixture(d)
    lay = layout(path)
    (a, (aoff, asz)), (b, (boff, bsz)) = sorted(lay.items())
    with open(path, "rb") as f:
        before = f.read()
    mnt = os.path.join(d, "mnt")
    E.mount(path, mnt, ["-o", "passthrough=off"])
    ta, tb = os.path.join(mnt, "tensors", a), os.path.join(mnt, "tensors", b)
    live = os.path.join(mnt, os.path.basename(path))
    for v in [live] + ([os.path.join(mnt, "f32", b)] if "f32" in os.listdir(mnt) else []):
        with open(v, "rb") as f:
            f.read()  # their pages cached: they must not be served stale
    sha_before = J.xattr(tb, "user.gguf.sha256")
    # A reader open before the writes, with a read-only mapping: its pages
    # must not stay stale after writes through other opens.
    rfd = os.open(ta, os.O_RDONLY)
    rmap = mmap.mmap(rfd, asz, prot=mmap.PROT_READ)
    old_head = os.pread(rfd, 4096, 0) + rmap[asz - 4096:]
    how = mmap_edit(ta, asz)
    fd = os.open(ta, os.O_WRONLY)
    os.pwrite(fd, b"pwrite!", 100)
    os.close(fd)
    new_a = bytearray(mmap_expected(before[aoff:aoff + asz], asz))
    new_a[100:107] = b"pwrite!"
    new_b, new_b32 = halves(bsz)
    src = os.path.join(d, "new.bin")
    with open(src, "wb") as f:
        f.write(new_b)
    subprocess.run(["cp", src, tb], check=True)
    check_f32(mnt, b, new_b32, "after the cp")
    seen = os.pread(rfd, 4096, 0) + rmap[asz - 4096:]
    rmap.close()
    os.close(rfd)
    if seen != bytes(new_a[:4096] + new_a[asz - 4096:]) or seen == old_head:
        raise Fail("an open made before the writes reads stale bytes (read or its mapping)")
    for t, want in ((ta, bytes(new_a)), (tb, new_b)):
        with open(t, "rb") as f:
            if f.read() != want:
                raise Fail("%s does not read back the bytes written" % t)
    with open(live, "rb") as f:
        lv = f.read()
    if lv[aoff:aoff + asz] != bytes(new_a) or lv[boff:boff + bsz] != new_b:
        raise Fail("the live view (cached, read before the writes) serves old bytes")
    import hashlib
    sha = J.xattr(tb, "user.gguf.sha256").decode()
    if sha == sha_before.decode() or sha != hashlib.sha256(new_b).hexdigest():
        raise Fail("user.gguf.sha256 of %s after the cp: %s (before %s, bytes %s)"
                   % (b, sha, sha_before.decode(), hashlib.sha256(new_b).hexdigest()))
    _, out, err = E.ggufs_u(mnt, 0, "tensors written")
    if "tensors written: " not in out or a not in out or b not in out:
        raise Fail("ggufs -u does not name the written tensors: %r %r" % (out, err))
    expect_file(path, before, {aoff: bytes(new_a), boff: new_b}, "after unmount")
    return "%s, pwrite and cp read back by ggml; live view and hash follow; -u says %r" % (
        how, out.strip().split(": ", 2)[-1])


def sec_pipeline(d):
    """Writes in place are answered before their pwrite (tensorw.c,
    Pipelining): a read right after each write, through another open of
    the tensor and through the live view (both served by the daemon),
    returns the new bytes; a pwrite that fails after its answer (ENOSPC: a
    hole of the tensor on a full tmpfs) is returned by a later write or
    close(2), never dropped."""
    import random
    path = fixture(d)
    lay = layout(path)
    (a, (aoff, asz)), _ = sorted(lay.items())
    mnt = os.path.join(d, "mnt")
    # each pwrite 20 ms after its answer (a test knob of tensorw.c): a
    # read that did not wait for it would get the old bytes
    os.environ["GGUFS_TEST_TW_DELAY_US"] = "20000"
    try:
        E.mount(path, mnt, ["-o", "passthrough=off"])
    finally:
        del os.environ["GGUFS_TEST_TW_DELAY_US"]
    ta, live = os.path.join(mnt, "tensors", a), os.path.join(mnt, os.path.basename(path))
    rng = random.Random(7)
    wfd, rfd, lfd = os.open(ta, os.O_WRONLY), os.open(ta, os.O_RDONLY), os.open(live, os.O_RDONLY)
    try:
        for i in range(150):
            n = rng.choice((4096, 65536, asz // 2))
            off = rng.randrange(0, asz - n + 1) // 4096 * 4096
            data = rng.randbytes(n)
            if os.pwrite(wfd, data, off) != n:
                raise Fail("a short write")
            got = os.pread(rfd, n, off) if i % 2 == 0 else os.pread(lfd, n, aoff + off)
            if got != data:
                raise Fail("write %d (%d bytes at %d): the read right after it (%s) has other bytes"
                           % (i, n, off, "tensor" if i % 2 == 0 else "live view"))
    finally:
        for fd in (wfd, rfd, lfd):
            os.close(fd)
    J.unmount(mnt)
    # ENOSPC after the answer: the model on a small tmpfs, tensor a's
    # bytes a hole, the tmpfs filled once mounted.
    tm = os.path.join(d, "tm")
    os.makedirs(tm)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", tm], check=True)
    try:
        small = fixture(tm, "hole.gguf")
        (a, (aoff, asz)), _ = sorted(layout(small).items())
        subprocess.run(["fallocate", "--punch-hole", "--offset", str(aoff), "--length", str(asz), small],
                       check=True)
        E.mount(small, mnt, ["-o", "passthrough=off"])
        with open(os.path.join(tm, "fill"), "wb") as f:  # bounded by the tmpfs's size
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
        fd, seen, wrote = os.open(os.path.join(mnt, "tensors", a), os.O_WRONLY), None, 0
        try:
            for off in range(0, asz, 65536):
                os.pwrite(fd, b"\x5a" * 65536, off)
                wrote += 1
        except OSError as e:
            seen = "write %d: %s" % (wrote + 1, e.strerror)
            if e.errno != errno.ENOSPC:
                raise Fail("a write into a full tmpfs: %s, expected ENOSPC" % e)
        try:
            os.close(fd)
        except OSError as e:
            seen = seen or "close: %s" % e.strerror
            if e.errno != errno.ENOSPC:
                raise Fail("close after a failed write: %s, expected ENOSPC" % e)
        if seen is None:
            raise Fail("%d writes into a hole of a full tmpfs and the close all succeeded" % wrote)
        os.unlink(os.path.join(tm, "fill"))
        J.unmount(mnt)
    finally:
        if J.mountinfo_entry(mnt):
            J.unmount(mnt, [])
        subprocess.run(["umount", tm])
    return "150 writes (each pwrite 20 ms after its answer) each read back at once (tensor, live view); ENOSPC after the answer returned by %s" % seen


def sec_sizes(d):
    path = fixture(d)
    lay = layout(path)
    name, (off, size) = sorted(lay.items())[0]
    with open(path, "rb") as f:
        before = f.read()
    mnt = os.path.join(d, "mnt")
    E.mount(path, mnt)
    t = os.path.join(mnt, "tensors", name)
    fd = os.open(t, os.O_WRONLY)
    try:
        # Crossing the end: the part that fits and a short count (the
        # kernel splits it at the page), or EFBIG, as at a file size
        # limit; the byte that fits is the old one, so the file stays.
        last = before[off + size - 1:off + size]
        try:
            n = os.pwrite(fd, last + b"y", size - 1)
            if n != 1:
                raise Fail("a write across the end wrote %d bytes" % n)
        except OSError as e:
            if e.errno != errno.EFBIG:
                raise Fail("a write across the end: %s, expected EFBIG or a short count" % e)
        for what, fn, want in (("a write past the end", lambda: os.pwrite(fd, b"x" * 8192, size - 4096),
                                errno.EFBIG),
                               ("a write at the end", lambda: os.pwrite(fd, b"x", size), errno.EFBIG),
                               ("truncate to 0", lambda: os.ftruncate(fd, 0), errno.EINVAL),
                               ("truncate past the end", lambda: os.ftruncate(fd, size + 1), errno.EINVAL)):
            try:
                fn()
                raise Fail("%s succeeded" % what)
            except OSError as e:
                if e.errno != want:
                    raise Fail("%s: %s, expected %s" % (what, e, errno.errorcode[want]))
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
    os.close(os.open(t, os.O_WRONLY | os.O_TRUNC))
    if os.path.getsize(t) != size:
        raise Fail("the size after an O_TRUNC open is %d, not %d" % (os.path.getsize(t), size))
    E.ggufs_u(mnt, 0, "sizes")
    expect_file(path, before, {}, "sizes")
    return "EFBIG past the end, EINVAL to another size, O_TRUNC keeps the bytes"


def wait_gone(p, timeout=20):
    t0 = time.time()
    while p.poll() is None and time.time() - t0 < timeout:
        time.sleep(0.02)
    return p.poll() is not None


def replace_setup(d):
    """A fixture orig.gguf, its last tensor (name, offset, size), the file's
    bytes and new bytes for the tensor in new.bin."""
    base = fixture(d, "orig.gguf")
    name, (off, size) = sorted(layout(base).items())[-1]
    with open(base, "rb") as f:
        before = f.read()
    new = os.urandom(size)
    src = os.path.join(d, "new.bin")
    with open(src, "wb") as f:
        f.write(new)
    return base, name, off, size, before, new, src


def killed_replace(path, mnt, args, n, src, name, wait):
    """Mounts path with GGUFS_FAULT=n in the daemon, cp's src over tensor
    name; True if the daemon died within wait seconds (else unmounted).
    The mount is gone on return."""
    p = subprocess.Popen([J.tool("GGUFS"), "-f"] + args + [path, mnt],
                         env=dict(os.environ, GGUFS_FAULT=str(n)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        E.wait_mounted(mnt, p)
        subprocess.run(["cp", src, os.path.join(mnt, "tensors", name)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        killed = wait_gone(p, wait)
    finally:
        if p.poll() is None:
            E.ggufs_u(mnt, None, "fault %d" % n)
            p.wait()
        subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
    return killed


def sec_kill(d):
    base, name, off, size, before, new, src = replace_setup(d)
    seen = []
    for n in range(1, STEPS + 2):
        sub = os.path.join(d, "f%d" % n)
        os.makedirs(sub)
        path = os.path.join(sub, "model.gguf")
        shutil.copyfile(base, path)
        mnt = os.path.join(sub, "mnt")
        os.makedirs(mnt)
        killed = killed_replace(path, mnt, [], n, src, name, 5 if n <= STEPS else 0.5)
        if (n <= STEPS) != killed:
            raise Fail("GGUFS_FAULT=%d: the daemon was %skilled (an apply has %d steps)"
                       % (n, "" if killed else "not ", STEPS))
        E.mount(path, mnt)  # recovery
        E.ggufs_u(mnt, 0, "after fault %d" % n)
        got = read_at(path, off, size)
        want_new = n >= JOURNALED
        if got != (new if want_new else before[off:off + size]):
            state = "new" if got == new else "old" if got == before[off:off + size] else "MIXED"
            raise Fail("killed at step %d of the replace: after the remount the tensor is %s, expected %s"
                       % (n, state, "new" if want_new else "old"))
        expect_file(path, before, {off: got}, "fault %d" % n)
        left = sorted(f for f in os.listdir(sub) if f.startswith("model.gguf."))
        if left:
            raise Fail("after fault %d and recovery, left beside the model: %s" % (n, left))
        seen.append("new" if want_new else "old")
    return "steps 1-%d: old, %d-%d: new, never mixed; nothing left" % (JOURNALED - 1, JOURNALED, STEPS)


def sec_who(d):
    path = fixture(d)
    os.chmod(d, 0o755)
    os.chmod(path, 0o644)
    name = sorted(layout(path))[0]
    with open(path, "rb") as f:
        before = f.read()
    mnt = os.path.join(d, "mnt")
    E.mount(path, mnt, ["-o", "allow_other"])
    t = os.path.join(mnt, "tensors", name)
    code = ("import os,sys\nos.read(os.open(sys.argv[1], os.O_RDONLY), 16)\n"
            "try:\n    os.open(sys.argv[1], os.O_WRONLY)\n    print('opened')\n"
            "except OSError as e:\n    print(e.errno)\n")
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                        "python3", "-c", code, t], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    got = p.stdout.decode().strip()
    if p.returncode != 0 or got not in (str(errno.EACCES), str(errno.EPERM)):
        raise Fail("another user opening a tensor for writing: %r (status %d, %s)"
                   % (got, p.returncode, p.stderr.decode(errors="replace").strip()))
    E.ggufs_u(mnt, 0, "other user")
    E.mount(path, mnt, ["-o", "ro"])
    try:
        os.open(t, os.O_WRONLY)
        raise Fail("a tensor of a read-only mount opened for writing")
    except OSError as e:
        if e.errno != errno.EROFS:
            raise Fail("a tensor of a read-only mount opened for writing: %s, expected EROFS" % e)
    finally:
        J.unmount(mnt, [])
    expect_file(path, before, {}, "other user")
    return "uid 65534 reads but gets %s opening for writing; -o ro: EROFS" % errno.errorcode[int(got)]


def model_fds(mnt, path):
    """The open flags of every descriptor of the mount's daemon on path."""
    pid = int(J.xattr(mnt, "user.ggufs.pid").decode())
    flags = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.path.realpath("/proc/%d/fd/%s" % (pid, fd)) != os.path.realpath(path):
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                flags.append(int(next(l for l in f if l.startswith("flags:")).split()[1], 8))
        except (OSError, StopIteration):
            pass
    return flags


def sec_overlay(d):
    path = fixture(d)
    os.chmod(path, 0o444)
    lay = layout(path)
    (a, (aoff, asz)), (b, (boff, bsz)) = sorted(lay.items())
    with open(path, "rb") as f:
        before = f.read()
    st0 = os.stat(path)
    ov = os.path.join(d, "ov.gguf")
    mnt = os.path.join(d, "mnt")
    E.mount(path, mnt, ["-o", "overlay=" + ov])
    ta, tb = os.path.join(mnt, "tensors", a), os.path.join(mnt, "tensors", b)
    how = mmap_edit(ta, asz)
    new_a = mmap_expected(before[aoff:aoff + asz], asz)
    new_b, new_b32 = halves(bsz)
    src = os.path.join(d, "new.bin")
    with open(src, "wb") as f:
        f.write(new_b)
    subprocess.run(["cp", src, tb], check=True)
    check_f32(mnt, b, new_b32, "overlay")
    flags = model_fds(mnt, path)
    if not flags or any(fl & os.O_ACCMODE != os.O_RDONLY for fl in flags):
        raise Fail("the overlay mount's daemon holds the model open with flags %s"
                   % ["%o" % fl for fl in flags])
    import hashlib
    with open(os.path.join(mnt, os.path.basename(path)), "rb") as f:
        lv = f.read()
    if lv[aoff:aoff + asz] != new_a or lv[boff:boff + bsz] != new_b:
        raise Fail("the overlay mount's live view does not show the tensors written")
    if J.xattr(tb, "user.gguf.sha256").decode() != hashlib.sha256(new_b).hexdigest():
        raise Fail("user.gguf.sha256 on the overlay mount is not the new bytes'")
    _, out, err = E.ggufs_u(mnt, 0, "overlay")
    if a not in out or b not in out or "overlay" not in out:
        raise Fail("ggufs -u of the overlay mount: %r %r" % (out, err))
    st1 = os.stat(path)
    with open(path, "rb") as f:
        if f.read() != before or st1.st_mtime_ns != st0.st_mtime_ns or st1.st_ctime_ns != st0.st_ctime_ns:
            raise Fail("the overlay mount changed the model file")
    for args, want, what in ((["-o", "ro,overlay=" + ov], (new_a, new_b), "remounted with the overlay"),
                             (["-o", "ro"], (before[aoff:aoff + asz], before[boff:boff + bsz]), "without it")):
        E.mount(path, mnt, args)
        try:
            for t, w in ((ta, want[0]), (tb, want[1])):
                with open(t, "rb") as f:
                    if f.read() != w:
                        raise Fail("%s: %s does not show the expected bytes" % (what, t))
        finally:
            J.unmount(mnt, [])
    os.chmod(path, 0o644)
    p = J.run_ggufs(["--overlay-apply", path, ov])
    if p.returncode != 0 or b"2 tensors written in" not in p.stdout:
        raise Fail("--overlay-apply: exit %d, %r %r" % (p.returncode, p.stdout, p.stderr))
    expect_file(path, before, {aoff: new_a, boff: new_b}, "after --overlay-apply")
    left = [f for f in os.listdir(d) if f.startswith("ov.gguf")]
    if left:
        raise Fail("after --overlay-apply, left: %s" % left)
    return ("%s and cp kept in the overlay (model opened O_RDONLY, bytes and times unchanged); "
            "shown after a remount, not without it; --overlay-apply wrote them in" % how)


def sec_overlay_kill(d):
    """kill -9 at every step of the overlay's write that records a whole
    replace (gguf/overlay.c's fault points): a remount with the overlay
    shows the old tensor or the new one, never a mix; the model untouched."""
    base, name, off, size, before, new, src = replace_setup(d)
    seen = []
    for n in range(1, 8):
        sub = os.path.join(d, "f%d" % n)
        os.makedirs(sub)
        path, ov = os.path.join(sub, "model.gguf"), os.path.join(sub, "ov.gguf")
        shutil.copyfile(base, path)
        mnt = os.path.join(sub, "mnt")
        os.makedirs(mnt)
        killed = killed_replace(path, mnt, ["-o", "overlay=" + ov], n, src, name, 2)
        E.mount(path, mnt, ["-o", "ro,overlay=" + ov])
        try:
            with open(os.path.join(mnt, "tensors", name), "rb") as f:
                got = f.read()
        finally:
            J.unmount(mnt, [])
        state = "new" if got == new else "old" if got == before[off:off + size] else "MIXED"
        if state == "MIXED" or (not killed and state != "new"):
            raise Fail("overlay, GGUFS_FAULT=%d (daemon %s): the tensor is %s after a remount"
                       % (n, "killed" if killed else "alive", state))
        with open(path, "rb") as f:
            if f.read() != before:
                raise Fail("overlay, GGUFS_FAULT=%d: the model file changed" % n)
        seen.append("%d:%s%s" % (n, state, "" if killed else "(alive)"))
    if not seen[-1].endswith("(alive)") or "old" not in " ".join(seen):
        raise Fail("the faults never hit the overlay's write: %s" % " ".join(seen))
    return " ".join(seen)


def sec_shards(d):
    """A shard set: the first file's tensors take writes, the later files'
    (opened read-only) are 0444 and EROFS; ggml reads the first file back."""
    whole = fixture(d, "whole.gguf")
    subprocess.run([J.tool("MKSPLIT"), whole, os.path.join(d, "s"), "2"], check=True,
                   stdout=subprocess.DEVNULL)
    first, second = (os.path.join(d, "s-0000%d-of-00002.gguf" % k) for k in (1, 2))
    lay = layout(first)
    name, (off, size) = sorted(lay.items())[0]
    with open(first, "rb") as f:
        before = f.read()
    with open(second, "rb") as f:
        before2 = f.read()
    mnt = os.path.join(d, "mnt")
    E.mount(first, mnt)
    later = [n for n in os.listdir(os.path.join(mnt, "tensors")) if n not in lay]
    if not later:
        raise Fail("the set's second file has no tensor")
    t2 = os.path.join(mnt, "tensors", later[0])
    mode = os.stat(t2).st_mode & 0o777
    try:
        os.open(t2, os.O_WRONLY)
        raise Fail("a tensor of the set's second file opened for writing")
    except OSError as e:
        if e.errno != errno.EROFS or mode != 0o444:
            raise Fail("a tensor of the second file: mode %o, open for writing %s" % (mode, e))
    new, _ = halves(size)
    E.write_file(os.path.join(mnt, "tensors", name), new, os.O_WRONLY | os.O_TRUNC)
    E.ggufs_u(mnt, 0, "shards")
    expect_file(first, before, {off: new}, "shard set, first file")
    with open(second, "rb") as f:
        if f.read() != before2:
            raise Fail("the set's second file changed")
    return "first file's tensor replaced (ggml reads it), the second's 0444 and EROFS"


def main():
    J.require_fuse()
    E.run_sections("ggufs-tensorw-", (
        ("writes in place and whole", sec_write, ()), ("pipelined writes", sec_pipeline, ()),
        ("sizes", sec_sizes, ()), ("shard set", sec_shards, ()),
        ("kill -9 at every step of a replace", sec_kill, ()), ("who may write", sec_who, ()),
        ("overlay mount", sec_overlay, ()), ("overlay kill -9 at every step", sec_overlay_kill, ())),
        errors=(Fail, OSError, subprocess.CalledProcessError))


if __name__ == "__main__":
    J.main(main)
