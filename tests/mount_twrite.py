#!/usr/bin/env python3
"""mount_twrite: tensors written through tensors/ (issue 24), judged by
ggml's reader (refdump) after unmount.

  - numpy's memmap mode='r+' (a shared writable mapping) scales a tensor;
    dd conv=notrunc writes part of another in place; cp replaces a third
    whole: ggml reads exactly those bytes back after unmount, and every
    other byte of the file is the old one;
  - an open with O_TRUNC that writes only a part keeps the rest (O_TRUNC
    drops no byte); a write past the end is EFBIG, truncate to another size
    EINVAL; the hash (user.gguf.sha256) and the live view show the new
    bytes once the writer closed; `ggufs -u` names the written tensors;
  - another user cannot write a tensor of the owner's mount (-o
    allow_other, mode 0644);
  - an overlay mount refuses tensor writes (EROFS) and leaves the file as
    it was (it never opens it for writing);
  - kill -9 at every fault point of a whole-tensor replace (GGUFS_FAULT=N,
    gguf/tensorjnl.c's points): the file holds the old tensor or, once a
    read-write mount recovered, the new one: never a mix, and the rest is
    untouched.
Exit 0 pass, 1 fail, 77 skip.
"""

import errno
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_edit as E  # noqa: E402

Fail = J.Fail
PY = "/usr/bin/python3"  # Debian's, with python3-numpy
N_FAULTS = 6  # tensorjnl.c: trailer, journal fsync, copy, copy half, fsync, unlink


def tensors(path):
    verdict, ref = J.refdump(path)
    if verdict != "ggml-accepts":
        raise Fail("ggml rejects %s" % path)
    return {t.name.decode(): t for t in ref.tensors}


def region(path, t):
    with open(path, "rb") as f:
        f.seek(t.offset)
        return f.read(t.size)


def same_outside(ck, what, old, new, spans):
    """Every byte of new is old's outside the (offset, size) spans."""
    a, b = open(old, "rb").read(), open(new, "rb").read()
    if len(a) != len(b):
        ck.bad("%s: the file's size changed (%d -> %d)" % (what, len(a), len(b)))
        return
    at = 0
    for off, size in sorted(spans):
        if a[at:off] != b[at:off]:
            ck.bad("%s: bytes changed before offset %d, outside the written tensors" % (what, off))
        at = off + size
    if a[at:] != b[at:]:
        ck.bad("%s: bytes changed after the written tensors" % what)


def errno_of(fn):
    try:
        fn()
    except OSError as e:
        return e.errno
    return 0


def write_some(ck, d, model, mnt):
    """The writes of a read-write mount; returns {name: new bytes}."""
    ts = tensors(model)
    names = sorted(n for n, t in ts.items() if t.ggml_type in (0, "f32") and 4096 <= t.size < (1 << 20))
    mm, part, whole, keep = names[0], names[1], names[2], names[3]
    new = {}
    have_np = os.path.exists(PY) and subprocess.run([PY, "-c", "import numpy"],
                                                    stderr=subprocess.DEVNULL).returncode == 0
    with J.Mounted(model, mnt):
        td = os.path.join(mnt, "tensors")
        h0 = J.xattr(os.path.join(td, whole), "user.gguf.sha256")
        if have_np:
            old = region(model, ts[mm])  # before the write: the mount writes the file itself
            p = subprocess.run([PY, "-c", "import numpy as np, sys; w = np.memmap(sys.argv[1], "
                                "dtype='float32', mode='r+'); w *= 2; w.flush(); del w",
                                os.path.join(td, mm)], stderr=subprocess.PIPE)
            if p.returncode:
                raise Fail("numpy r+ memmap of tensors/%s: %s" % (mm, p.stderr.decode()))
            import struct
            vals = struct.unpack("<%df" % (len(old) // 4), old)
            new[mm] = struct.pack("<%df" % len(vals), *[v * 2 for v in vals])
        else:
            J.log("note: Debian's python3-numpy is missing: the memmap write is not tried")
        # in place, part of a tensor: dd conv=notrunc
        blob = os.urandom(1000)
        subprocess.run(["dd", "of=" + os.path.join(td, part), "bs=1000", "seek=1", "conv=notrunc",
                        "status=none"], input=blob, check=True)
        old = region(model, ts[part])
        new[part] = old[:1000] + blob + old[2000:]
        # whole, by cp
        src = os.path.join(d, "whole.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(ts[whole].size))
        shutil.copyfile(src, os.path.join(td, whole))
        new[whole] = open(src, "rb").read()
        ck.eq("tensors/%s read back after cp" % whole, new[whole], open(os.path.join(td, whole), "rb").read())
        want = hashlib.sha256(new[whole]).hexdigest().encode()
        got = J.xattr(os.path.join(td, whole), "user.gguf.sha256")
        if got != want or got == h0:
            ck.bad("user.gguf.sha256 after cp: %r, the new bytes hash to %r (before: %r)" % (got, want, h0))
        live = os.path.join(mnt, os.path.basename(model))
        with open(live, "rb") as f:
            f.seek(ts[whole].offset)
            ck.eq("the live view's bytes of %s after cp" % whole, new[whole], f.read(ts[whole].size))
        # O_TRUNC keeps what is not written; EFBIG; EINVAL
        fd = os.open(os.path.join(td, keep), os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"\x00" * 16)
        os.close(fd)
        old = region(model, ts[keep]) if keep not in new else new[keep]
        new[keep] = b"\x00" * 16 + region(model, ts[keep])[16:]
        ck.eq("EFBIG past a tensor's end", errno.EFBIG, errno_of(lambda: _write_at(os.path.join(td, keep),
                                                                           ts[keep].size, b"x" * 8)))
        ck.eq("truncate to another size", errno.EINVAL, errno_of(lambda: os.truncate(os.path.join(td, keep), 5)))
        ck.eq("truncate to its own size", 0, errno_of(lambda: os.truncate(os.path.join(td, keep),
                                                                           ts[keep].size)))
        u = J.run_ggufs(["-u", mnt])
        msg = u.stderr.decode(errors="replace") + u.stdout.decode(errors="replace")
        if u.returncode != 0 or not all(n in msg for n in new):
            ck.bad("ggufs -u: exit %d, %r does not name %s" % (u.returncode, msg.strip(), sorted(new)))
    return new, ts


def _write_at(path, off, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, off)
    finally:
        os.close(fd)


def judged(ck, what, before, after, ts, new):
    got = tensors(after)
    for n, b in new.items():
        if region(after, got[n]) != b:
            ck.bad("%s: ggml reads tensors/%s not as written" % (what, n))
    same_outside(ck, what, before, after, [(ts[n].offset, ts[n].size) for n in new])


def other_user(ck, model, mnt):
    with J.Mounted(model, mnt, args=["-o", "allow_other"]):
        t = os.path.join(mnt, "tensors", sorted(os.listdir(os.path.join(mnt, "tensors")))[0])
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                            "dd", "of=" + t, "bs=4", "count=1", "conv=notrunc", "status=none"],
                           input=b"abcd", stderr=subprocess.PIPE)
        if p.returncode == 0 or b"Permission denied" not in p.stderr:
            ck.bad("another user writing %s: exit %d, %r" % (t, p.returncode, p.stderr))


def overlay_refuses(ck, d, model, mnt):
    before = open(model, "rb").read()
    st = os.stat(model)
    with J.Mounted(model, mnt, args=["-o", "overlay=" + os.path.join(d, "ov.gguf")]):
        t = os.path.join(mnt, "tensors", sorted(os.listdir(os.path.join(mnt, "tensors")))[0])
        ck.eq("a tensor write on an overlay mount", errno.EROFS, errno_of(lambda: _write_at(t, 0, b"x")))
    if open(model, "rb").read() != before or os.stat(model).st_mtime_ns != st.st_mtime_ns:
        ck.bad("an overlay mount changed the model")


def killed(ck, d, model, mnt):
    """kill -9 at each fault point of a cp replacing a tensor."""
    ts = tensors(model)
    name = sorted(n for n, t in ts.items() if 4096 <= t.size < (1 << 20))[0]
    newb = os.urandom(ts[name].size)
    src = os.path.join(d, "new.bin")
    open(src, "wb").write(newb)
    oldb = region(model, ts[name])
    for n in range(1, N_FAULTS + 2):
        f = os.path.join(d, "k%d.gguf" % n)
        shutil.copyfile(model, f)
        env = dict(os.environ, GGUFS_FAULT=str(n))
        p = subprocess.Popen([J.tool("GGUFS"), "-f", f, mnt], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            E.wait_mounted(mnt, p)
            try:
                shutil.copyfile(src, os.path.join(mnt, "tensors", name))
            except OSError:
                pass  # the daemon died under cp
        finally:
            if p.poll() is None:  # not killed: the last run has no fault point left
                J.unmount(mnt, [])
            if p.poll() is None:
                p.kill()
            p.wait()
            E.cleanup_mounts(d)
        now = region(f, ts[name])
        journal = any(x.endswith(".ggufs-tensor") for x in os.listdir(d))
        if now not in (oldb, newb) and not journal:
            ck.bad("killed at tensor fault point %d: the tensor is a mix of old and new, "
                   "and no journal completes it" % n)
        if journal:  # a read-only mount does not recover: it refuses, naming --recover
            r = J.run_ggufs(["-o", "ro", f, mnt])
            if r.returncode == 0:
                J.unmount(mnt, [])
                ck.bad("killed at tensor fault point %d: a read-only mount over the interrupted "
                       "replace was not refused" % n)
            elif b"--recover" not in r.stderr:
                ck.bad("killed at point %d: the read-only mount's refusal %r names no --recover"
                       % (n, r.stderr))
        # a read-write mount recovers: old before the seal, new after
        with J.Mounted(f, mnt):
            pass
        after = region(f, ts[name])
        want = oldb if n <= 1 else newb  # from the trailer on, the journal is whole
        if after != want:
            ck.bad("killed at tensor fault point %d, then recovered: %s tensor, expected the %s"
                   % (n, "the old" if after == oldb else "the new" if after == newb else "a mixed",
                      "old" if n <= 1 else "new"))
        if any(x.endswith(".ggufs-tensor") for x in os.listdir(d)):
            ck.bad("killed at tensor fault point %d: the journal is still there after recovery" % n)
        same_outside(ck, "killed at point %d" % n, model, f, [(ts[name].offset, ts[name].size)])
        J.log("ok   killed at tensor fault point %d: %s, then the %s one after recovery"
              % (n, "old" if now == oldb else "new", "old" if after == oldb else "new"))


def main():
    J.require_fuse()
    tmp = tempfile.mkdtemp(prefix="ggufs-twrite-", dir="/tmp")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    ck = J.Checker("twrite")
    try:
        base = os.path.join(tmp, "base.gguf")
        p = subprocess.run([J.tool("MKFIXTURE"), "llama", base], capture_output=True)
        if p.returncode:
            raise Fail("mkfixture llama: %s" % p.stderr.decode())
        model = os.path.join(tmp, "model.gguf")
        shutil.copyfile(base, model)
        with J.Watchdog(mnt, 300, "twrite"):
            new, ts = write_some(ck, tmp, model, mnt)
            judged(ck, "after unmount", base, model, ts, new)
            J.log("ok   %d tensors written (memmap r+, dd in place, cp, O_TRUNC + 16 bytes): ggml reads "
                  "them back, every other byte unchanged" % len(new))
            other_user(ck, model, mnt)
            overlay_refuses(ck, tmp, model, mnt)
            killed(ck, tmp, base, mnt)
        ck.done()
    finally:
        J.cleanup(mnt, tmp)


if __name__ == "__main__":
    J.main(main)
