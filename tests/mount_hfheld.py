#!/usr/bin/env python3
"""Issue 36: what the daemon holds after hf/ of a 262k SentencePiece
vocabulary (Gemma 3's size, bench/vocab262k.py) was read and closed: no
more than before the render's speed-ups (vocab.h's second thread and its
buffers).  A daemon whose walk kept its buffers in malloc's blocks held
14 to 17 MB more once the 12 MB tokenizer.json was closed (malloc's mmap
threshold raised by a freed block: the file's later buffers came from
the FUSE thread's arena heap, whose free top malloc_trim keeps); the
daemon before those changes held about 0.4 MB more.  The bound: 4 MB
over the RSS before the first read (a third of the file; the rest is
the page cache's and the allocator's noise), after each file of hf/ is
read once.  Each is then read again, the same bytes (tokenizer.json made
again after its check: vocab.h's checked render), and its vocabulary
judged against the tokens the generator wrote.  Skipped under a sanitizer (its quarantine holds
freed memory by design)."""
import json
import os
import subprocess
import sys
import tempfile
import time

import judge as J
import mount_edit as E

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import vocab262k  # noqa: E402

Fail = J.Fail
BOUND = 4 << 20


def rss_of(mnt):
    """The daemon's anonymous resident memory (RssAnon): what it holds.
    Not VmRSS, whose file-backed part moves by a megabyte with the pages
    of the GGUF and of the libraries' code the render touched (mapped,
    the page cache's, not the daemon's to free)."""
    pid = int(os.getxattr(mnt, "user.ggufs.pid"))
    with open("/proc/%d/status" % pid) as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("RssAnon:"))


def sanitized():
    ldd = subprocess.run(["ldd", J.tool("GGUFS")], stdout=subprocess.PIPE).stdout
    return b"libasan" in ldd or b"libtsan" in ldd


def mount(path, mnt, fg):
    """ggufs -o ro path mnt, daemonized or (fg) in the foreground (-f:
    its requests are served by other threads than the daemon's: the
    arena that keeps a render's blocks differs); the -f process or None."""
    if not fg:
        E.mount(path, mnt, ["-o", "ro"])
        return None
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.Popen([J.tool("GGUFS"), "-f", "-o", "ro", path, mnt],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while J.mountinfo_entry(mnt) is None:
        if p.poll() is not None or time.time() > deadline:
            raise Fail("ggufs -f %s: nothing mounted (status %r)" % (path, p.poll()))
        time.sleep(0.05)
    return p


def held_after(path, mnt, toks, fg):
    """The RSS the daemon holds more after each file of hf/ is read once
    and closed; each read again, judged."""
    proc = mount(path, mnt, fg)
    try:
        hf = os.path.join(mnt, "hf")
        os.listdir(mnt)  # the mount in use (the first request's own blocks
        before = rss_of(mnt)  # held before; without it the bug hid)
        names = sorted(os.listdir(hf))
        if "tokenizer.json" not in names:
            raise Fail("hf/ lists %r, no tokenizer.json" % names)
        got = {}
        for name in names:
            with open(os.path.join(hf, name), "rb") as f:
                got[name] = f.read()
        # the release reaches the daemon after close(2) returns
        time.sleep(1)
        deadline = time.time() + 2
        held = rss_of(mnt) - before
        while held > BOUND and time.time() < deadline:
            time.sleep(0.1)
            held = rss_of(mnt) - before
        for name in names:  # made again: tokenizer.json after its check
            with open(os.path.join(hf, name), "rb") as f:
                if f.read() != got[name]:
                    raise Fail("hf/%s read again differs" % name)
        again = rss_of(mnt) - before
    finally:
        J.unmount(mnt, [])
        if proc is not None:
            proc.wait(timeout=60)
    vocab = json.loads(got["tokenizer.json"])["model"]["vocab"]
    if vocab != {t: i for i, t in enumerate(toks)}:
        raise Fail("tokenizer.json's vocabulary is not the 262k tokens written")
    label = "-f" if fg else "daemon"
    if held > BOUND:
        raise Fail("%s: the daemon holds %.1f MB more after hf/ (tokenizer.json %.1f MB) was read and "
                   "closed (at most %.1f MB)" % (label, held / 1e6, len(got["tokenizer.json"]) / 1e6,
                                                 BOUND / 1e6))
    J.log("ok   %s: hf/ of a 262k SentencePiece vocabulary read and closed: the daemon holds %.2f MB "
          "more (at most %.1f MB)" % (label, held / 1e6, BOUND / 1e6))
    # Not asserted: after a second read (glibc kept the second render's
    # blocks in an arena, about 13 MB for this file, until the daemon
    # fixed its mmap threshold: session/mount.c).
    J.log("note: %s: after a second read of each: %.2f MB more" % (label, again / 1e6))


def main():
    J.require_fuse()
    if sanitized():
        raise J.Skip("a sanitizer's build: its quarantine holds freed memory")
    root = tempfile.mkdtemp(prefix="ggufs-hfh-", dir="/var/tmp")
    mnt = os.path.join(root, "mnt")
    try:
        path = os.path.join(root, "v262k.gguf")
        vocab262k.make(path)
        toks = vocab262k.vocab(262144)[0]
        for fg in (False, True):
            held_after(path, mnt, toks, fg)
    finally:
        J.cleanup(mnt, root)


if __name__ == "__main__":
    J.main(main)
