#!/usr/bin/env python3
"""Issue 15: computing a hash of the whole model (user.gguf.sha256 on
tensors/, the weights digest) holds nothing up, judged on a model big
enough that the hash takes seconds (a sparse mkfixture model: holes read
fast; a marker naming its own place every MiB of each tensor, so bytes
read from a wrong place change the hash).

1. A commit that moves the data (a value grown past the header's room: the
   data start moves) made while the hash runs finishes long before the
   hash does; the hash equals hashlib's over the tensor bytes in file
   order, read here from the committed file; ggml's reader (refdump)
   accepts that file.
2. SIGTERM to the daemon while the hash runs (an unmount) ends it long
   before the hash would end (the daemon stops hashing when the session
   ends: the last commit waits for every handler).
3. Two first requests at once read the model once, not twice (the
   daemon's read bytes, /proc/PID/io), and both get the hash.
4. A getfattr interrupted (SIGINT) mid-hash ends at once, the daemon stops
   reading, and the next request resumes where it stopped (the model is
   read about once in all) and gets the right hash.
5. The same with a second request waiting for the first's result: the
   first ends at once, the second takes the reading over from there.

Each part can be run alone: mount_hashes.py PART...
"""

import hashlib
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402

MODEL_MB = 4000
SHA = "user.gguf.sha256"


def make_model(path):
    subprocess.run([J.tool("MKFIXTURE"), "model", path, "--tensor-mb", str(MODEL_MB),
                    "--n-tensors", "7", "--sparse"], check=True)
    verdict, ref = J.refdump(path)
    if verdict != "ggml-accepts":
        raise J.Fail("refdump rejects the fixture %s" % path)
    with open(path, "r+b") as f:
        for k, t in enumerate(ref.tensors):
            start = t.offset  # absolute (refdump)
            for at in range(0, t.size - 16, 1 << 20):
                f.seek(start + at)
                f.write(struct.pack("<QQ", k + 1, at + 1))
        f.flush()
        os.fsync(f.fileno())  # else the commit's insert-range writes them back
    return sum(t.size for t in ref.tensors)


def weights_sha256(path):
    """The test's own weights digest: hashlib over every tensor's bytes in
    file order, the places read from the file's header by ggml."""
    verdict, ref = J.refdump(path)
    if verdict != "ggml-accepts":
        raise J.Fail("ggml's reader rejects %s" % path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for t in ref.tensors:
            f.seek(t.offset)  # absolute (refdump)
            left = t.size
            while left:
                b = f.read(min(left, 8 << 20))
                if not b:
                    raise J.Fail("%s ends inside tensor %r" % (path, t.name))
                h.update(b)
                left -= len(b)
    return h.hexdigest(), ref.data_offset


def daemon_pid(mnt):
    return int(os.getxattr(mnt, "user.ggufs.pid"))


def read_bytes(pid):
    with open("/proc/%d/io" % pid) as f:
        for ln in f:
            if ln.startswith("rchar:"):
                return int(ln.split()[1])
    raise J.Fail("/proc/%d/io has no rchar" % pid)


def start_hash(mnt):
    return subprocess.Popen(["getfattr", "--only-values", "-n", SHA, os.path.join(mnt, "tensors")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_under_way(p, pid, base, total, what, part=0.1):
    """Waits until the daemon has read that part of the model for p's
    hash."""
    deadline = time.time() + 60
    while read_bytes(pid) - base < total * part:
        if p.poll() is not None:
            raise J.Fail("%s: the hash ended before %d%% of the model was read (%r)"
                         % (what, part * 100, p.stderr.read()))
        if time.time() > deadline:
            raise J.Fail("%s: the daemon read %d bytes in 60 s" % (what, read_bytes(pid) - base))
        time.sleep(0.02)


def finish(p, what):
    out, err = p.communicate(timeout=300)
    if p.returncode != 0:
        raise J.Fail("%s: getfattr exit %d: %s" % (what, p.returncode, err.decode(errors="replace")))
    return out.decode()


def commit_during_hash(gguf, mnt, total):
    """1: the seconds the edit and commit took, hashlib's digest of the
    committed file, its data offset, the commit's report."""
    with J.Mounted(gguf, mnt):
        pid = daemon_pid(mnt)
        t0 = time.time()
        p = start_hash(mnt)
        wait_under_way(p, pid, read_bytes(pid), total, "commit during the hash")
        t1 = time.time()
        with open(os.path.join(mnt, "meta", "general.name"), "w") as f:
            f.write("x" * (256 << 10))  # past the room before the data start
        fd = os.open(os.path.join(mnt, "meta"), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)  # the commit
        finally:
            os.close(fd)
        t2 = time.time()
        running = p.poll() is None
        got = finish(p, "commit during the hash")
        t3 = time.time()
        msg = os.getxattr(mnt, "user.ggufs.commit").decode()
    if not running:
        raise J.Fail("the edit and its commit took %.2f s and ended after the hash (%.2f s from its "
                     "start): the commit waited for the hash" % (t2 - t1, t3 - t0))
    want, data_at = weights_sha256(gguf)
    if got != want:
        raise J.Fail("weights digest during a commit that moved the data: %s, hashlib over the "
                     "tensors of the committed file says %s" % (got, want))
    return t2 - t1, want, data_at, msg


def sigterm_during_hash(gguf, mnt, total, hash_s):
    """2: the seconds the daemon took to end after SIGTERM (an unmount:
    the session ends, then the last commit runs once every handler has
    returned).  fusermount3 -u and ggufs -u cannot unmount while a
    getxattr is in flight (EBUSY); SIGTERM can."""
    m = J.run_ggufs([gguf, mnt])
    if m.returncode != 0:
        raise J.Fail("mount: %s" % m.stderr.decode())
    try:
        pid = daemon_pid(mnt)
        p = start_hash(mnt)
        wait_under_way(p, pid, read_bytes(pid), total, "SIGTERM during the hash")
        t0 = time.time()
        os.kill(pid, signal.SIGTERM)
        while os.path.exists("/proc/%d" % pid) and not J._zombie(pid) and time.time() < t0 + 300:
            time.sleep(0.01)
        took = time.time() - t0
        p.communicate(timeout=300)
    finally:
        if J.mountinfo_entry(mnt) is not None:
            J.unmount(mnt, [])
    if took > hash_s / 3:
        raise J.Fail("the daemon took %.2f s to end after SIGTERM during the hash (the whole hash "
                     "takes %.2f s): it waited for the hash" % (took, hash_s))
    return took


def two_at_once(gguf, mnt, total, want):
    with J.Mounted(gguf, mnt, ["-o", "ro"]):
        pid = daemon_pid(mnt)
        base = read_bytes(pid)
        ps = [start_hash(mnt), start_hash(mnt)]
        got = [finish(p, "two first requests at once") for p in ps]
        read = read_bytes(pid) - base
    if got != [want, want]:
        raise J.Fail("two first requests at once: %r, want %s twice" % (got, want))
    if read > total * 1.25:
        raise J.Fail("two first requests at once made the daemon read %d bytes for a model of "
                     "%d: it read the model %.2f times" % (read, total, read / total))
    return read / total


def interrupted(gguf, mnt, total, want, hash_s):
    with J.Mounted(gguf, mnt, ["-o", "ro"]):
        pid = daemon_pid(mnt)
        base = read_bytes(pid)
        p = start_hash(mnt)
        # late enough that starting over would read the model 1.4 times
        wait_under_way(p, pid, base, total, "an interrupted getfattr", 0.4)
        t0 = time.time()
        p.send_signal(signal.SIGINT)
        try:
            p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            raise J.Fail("getfattr still runs 300 s after SIGINT")
        took = time.time() - t0
        if took > hash_s / 3:
            raise J.Fail("getfattr took %.2f s to end after SIGINT (the whole hash takes %.2f s)"
                         % (took, hash_s))
        time.sleep(0.3)
        r1 = read_bytes(pid)
        time.sleep(0.5)
        r2 = read_bytes(pid)
        if r2 != r1:
            raise J.Fail("the daemon read %d bytes in 0.5 s after the only request for the hash "
                         "was interrupted" % (r2 - r1))
        done = r1 - base
        got = finish(start_hash(mnt), "the request after an interrupted one")
        read = read_bytes(pid) - base
    if got != want:
        raise J.Fail("after an interrupted request: %s, hashlib says %s" % (got, want))
    if read > total * 1.25:
        raise J.Fail("an interrupted request and the next read the model %.2f times: the next did "
                     "not resume" % (read / total))
    return took, done / total, read / total


def handover(gguf, mnt, total, want, hash_s):
    """5: the first request interrupted while a second waits for its
    result: the second goes on from where the first stopped."""
    with J.Mounted(gguf, mnt, ["-o", "ro"]):
        pid = daemon_pid(mnt)
        base = read_bytes(pid)
        first = start_hash(mnt)
        wait_under_way(first, pid, base, total, "a request waited for", 0.1)
        second = start_hash(mnt)
        wait_under_way(first, pid, base, total, "a request waited for", 0.4)
        t0 = time.time()
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=300)
        took = time.time() - t0
        if second.poll() is not None:
            raise J.Fail("the waiting request ended with the interrupted one: %r"
                         % second.communicate())
        got = finish(second, "the request that waited")
        read = read_bytes(pid) - base
    if took > hash_s / 3:
        raise J.Fail("an interrupted request with another waiting took %.2f s to end (the hash "
                     "takes %.2f s)" % (took, hash_s))
    if got != want:
        raise J.Fail("the request that took over: %s, hashlib says %s" % (got, want))
    if read > total * 1.25:
        raise J.Fail("the request that took over read the model again (%.2f times in all)"
                     % (read / total))
    return took, read / total


def baseline(gguf, mnt, want):
    """The seconds a whole hash takes, nothing else running."""
    with J.Mounted(gguf, mnt, ["-o", "ro"]):
        t0 = time.time()
        got = finish(start_hash(mnt), "a hash alone")
        took = time.time() - t0
    if got != want:
        raise J.Fail("weights digest %s, hashlib says %s" % (got, want))
    return took


def run():
    """Arguments, for showing one part fail alone: a subset of commit,
    sigterm, two, interrupt, handover (all by default)."""
    J.require_fuse()
    if not shutil.which("getfattr"):
        raise J.Skip("getfattr (Debian's attr) is not installed")
    parts = sys.argv[1:] or ["commit", "sigterm", "two", "interrupt", "handover"]
    tmp = tempfile.mkdtemp(prefix="ggufs-hashes-")
    mnt = os.path.join(tmp, "m")
    try:
        gguf = os.path.join(tmp, "big.gguf")
        os.mkdir(mnt)
        total = make_model(gguf)
        want, data0 = weights_sha256(gguf)
        hash_s = baseline(gguf, mnt, want)
        J.log("weights digest of %d MiB alone: %.2f s, equal to hashlib's" % (total >> 20, hash_s))
        if "commit" in parts:
            took, got, data_at, msg = commit_during_hash(gguf, mnt, total)
            if data_at <= data0:
                raise J.Fail("the commit did not move the data (data offset %d, was %d): %s"
                             % (data_at, data0, msg))
            if got != want:
                raise J.Fail("the tensor bytes differ after the commit: %s, before %s" % (got, want))
            J.log("an edit and a commit that moved the data from %d to %d took %.2f s while the "
                  "hash ran; the digest equals hashlib's over the committed file; ggml accepts it"
                  % (data0, data_at, took))
        if "sigterm" in parts:
            J.log("SIGTERM during the hash: the daemon ended in %.2f s"
                  % sigterm_during_hash(gguf, mnt, total, hash_s))
        if "two" in parts:
            J.log("two first requests at once: the model read %.2f times"
                  % two_at_once(gguf, mnt, total, want))
        if "interrupt" in parts:
            took, part, read = interrupted(gguf, mnt, total, want, hash_s)
            J.log("getfattr interrupted after %.0f%% of the model: ended in %.2f s, the daemon "
                  "stopped reading; the next request resumed (the model read %.2f times in all)"
                  % (part * 100, took, read))
        if "handover" in parts:
            J.log("the first request interrupted (in %.2f s) while a second waited: the second went "
                  "on from there (the model read %.2f times in all)"
                  % handover(gguf, mnt, total, want, hash_s))
    finally:
        J.cleanup(mnt, tmp)


if __name__ == "__main__":
    J.main(run)
