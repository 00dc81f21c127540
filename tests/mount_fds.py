#!/usr/bin/env python3
"""A shard set of many files keeps a bounded number of descriptors (issue 24).

The test writes a set of 1155 one-tensor shards (the layout of llama.cpp's
gguf-split, GGUF v3 written here byte by byte; ggml's reader judges the
first shards and the merged live view), mounts it with the daemon's soft
RLIMIT_NOFILE at 256, reads every tensors/ file and the whole live view
back (the tensors by eight threads at once) and compares them with the
bytes written, while a sampler counts the
daemon's open descriptors (/proc/PID/fd): at most 64.  Then a shard is
swapped under the mount (another file renamed over it): its tensor and
the live view's part of it fail with EIO, never with the other file's
bytes.
"""
import errno
import os
import resource
import shutil
import struct
import subprocess
import tempfile
import threading
import time

import judge as J

N = 1155
ELEMS = 8  # f32 each: 32 bytes a tensor
MAX_FDS = 64
SOFT = 256
READERS = 8


def gstr(b):
    return struct.pack("<Q", len(b)) + b


def shard_bytes(k, n, fill):
    """Shard k (0-based) of n: split keys (the first also general.*) and
    one f32 tensor blk.K.w whose values are fill(k)."""
    kvs = [(b"split.no", 2, struct.pack("<H", k)), (b"split.count", 2, struct.pack("<H", n)),
           (b"split.tensors.count", 5, struct.pack("<i", n))]
    if k == 0:
        kvs = [(b"general.architecture", 8, gstr(b"llama")), (b"general.name", 8, gstr(b"fds"))] + kvs
    out = b"GGUF" + struct.pack("<Iqq", 3, 1, len(kvs))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t) + v
    out += gstr(b"blk.%d.w" % k) + struct.pack("<Iq", 1, ELEMS) + struct.pack("<IQ", 0, 0)
    out += b"\0" * (-len(out) % 32)
    return out + fill(k)


def data_of(k, salt=0):
    return struct.pack("<%df" % ELEMS, *[float(k * 16 + i + salt) for i in range(ELEMS)])


def make_set(d, prefix, n):
    paths = []
    for k in range(n):
        p = os.path.join(d, "%s-%05d-of-%05d.gguf" % (prefix, k + 1, n))
        with open(p, "wb") as f:
            f.write(shard_bytes(k, n, data_of))
        paths.append(p)
    return paths


def soft_limit():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, hard))


class FdSampler(threading.Thread):
    """Counts the daemon's descriptors until stopped; most seen in .most."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.most, self.stop = pid, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.most = max(self.most, len(os.listdir("/proc/%d/fd" % self.pid)))
            except OSError:
                pass
            time.sleep(0.002)


def mount(first, mnt):
    p = J.run_ggufs(["-o", "ro", first, mnt], timeout=300, preexec_fn=soft_limit)
    if p.returncode != 0:
        if J.mountinfo_entry(mnt) is not None:
            J.unmount(mnt, [])
        raise J.Fail("a %d-shard set does not mount with a soft limit of %d descriptors: %s"
                     % (N, SOFT, p.stderr.decode(errors="replace").strip()[-500:]))
    pids = J._procs_for(mnt)
    if len(pids) != 1:
        raise J.Fail("expected one ggufs daemon for %s, found %s" % (mnt, pids))
    return pids[0]


def read_all(mnt, shards, pid):
    sampler = FdSampler(pid)
    sampler.start()
    bad = []

    def reader(t):
        # READERS threads at once, each its own shards: the daemon's
        # workers open, pin and evict descriptors concurrently.
        for k in range(t, N, READERS):
            with open(os.path.join(mnt, "tensors", "blk.%d.w" % k), "rb") as f:
                got = f.read()
            if got != data_of(k):
                bad.append("tensors/blk.%d.w reads %r, expected the bytes of shard %d"
                           % (k, J.shorten(got), k + 1))
    try:
        threads = [threading.Thread(target=reader, args=(t,)) for t in range(READERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if bad:
            raise J.Fail("%d tensors read wrong, first: %s" % (len(bad), bad[0]))
        live = os.path.join(mnt, "big.gguf")
        out = os.path.join(os.path.dirname(mnt), "merged.gguf")
        shutil.copyfile(live, out)
    finally:
        sampler.stop.set()
        sampler.join()
    J.log("daemon descriptors while reading %d shards: at most %d" % (N, sampler.most))
    if sampler.most > MAX_FDS:
        raise J.Fail("the daemon held %d descriptors while reading the set (at most %d allowed)"
                     % (sampler.most, MAX_FDS))
    verdict, ref = J.refdump(out)
    if ref is None:
        raise J.Fail("ggml rejects the live view of the %d-shard set" % N)
    if len(ref.tensors) != N:
        raise J.Fail("ggml reads %d tensors in the live view, expected %d" % (len(ref.tensors), N))
    with open(out, "rb") as f:
        merged = f.read()
    for t in ref.tensors:
        k = int(t.name.split(b".")[1]) if isinstance(t.name, bytes) else int(t.name.split(".")[1])
        if merged[t.offset:t.offset + t.size] != data_of(k):
            raise J.Fail("the live view's %s differs from shard %d's bytes" % (t.name, k + 1))
    os.unlink(out)


def expect_eio(path, what):
    try:
        with open(path, "rb") as f:
            got = f.read()
    except OSError as e:
        if e.errno != errno.EIO:
            raise J.Fail("%s: %s, expected EIO" % (what, e))
        return
    raise J.Fail("%s reads %r, expected EIO" % (what, J.shorten(got)))


def swapped(d, mnt, shards):
    """Shard 1001 renamed over by another file (same layout, other
    values) before anything read it: EIO for its tensor and for the live
    view's bytes of it, one log line naming it; the other shards still
    read.  The daemon in the foreground: its log is its stderr."""
    k = 1000
    errf = tempfile.TemporaryFile()
    proc = subprocess.Popen([J.tool("GGUFS"), "-f", "-o", "ro", shards[0], mnt], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=errf, preexec_fn=soft_limit)
    try:
        deadline = time.time() + 60
        while J.mountinfo_entry(mnt) is None:
            if proc.poll() is not None or time.time() > deadline:
                errf.seek(0)
                raise J.Fail("ggufs -f did not mount the set: %s" % errf.read().decode(errors="replace"))
            time.sleep(0.05)
        swap_one(d, mnt, shards, k)
    finally:
        J.unmount(mnt)
        proc.wait(timeout=30)
    errf.seek(0)
    lines = [l for l in errf.read().decode(errors="replace").splitlines() if os.path.basename(shards[k]) in l]
    if len(lines) != 1 or "not the file validated at mount" not in lines[0]:
        raise J.Fail("expected one log line naming the swapped shard, got %r" % lines)


def swap_one(d, mnt, shards, k):
    other = os.path.join(d, "other.gguf")
    with open(other, "wb") as f:
        f.write(shard_bytes(k, N, lambda k: data_of(k, salt=0.5)))
    os.rename(other, shards[k])
    expect_eio(os.path.join(mnt, "tensors", "blk.%d.w" % k), "tensors/blk.%d.w of a swapped shard" % k)
    with open(os.path.join(mnt, "tensors", "blk.%d.w" % (k + 1)), "rb") as f:
        if f.read() != data_of(k + 1):
            raise J.Fail("the shard after a swapped one reads other bytes")
    expect_eio(os.path.join(mnt, "big.gguf"), "the live view over a swapped shard")


def main():
    J.require_fuse()
    tmp = tempfile.mkdtemp(prefix="ggufs-fds-")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    try:
        d = os.path.join(tmp, "set")
        os.mkdir(d)
        shards = make_set(d, "big", N)
        for s in (shards[0], shards[1], shards[-1]):
            if J.refdump(s)[1] is None:
                raise J.Fail("ggml rejects shard %s as written by the test" % s)
        t0 = time.monotonic()
        pid = mount(shards[0], mnt)
        J.log("mounted %d shards in %.2f s" % (N, time.monotonic() - t0))
        try:
            read_all(mnt, shards, pid)
            J.unmount(mnt)
            swapped(d, mnt, shards)
        finally:
            if J.mountinfo_entry(mnt) is not None:
                J.unmount(mnt)
    finally:
        J.cleanup(mnt, tmp)


if __name__ == "__main__":
    J.main(main)
