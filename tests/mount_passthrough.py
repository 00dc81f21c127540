#!/usr/bin/env python3
"""mount_passthrough: the live view served by FUSE passthrough (issue 12).

  - passthrough proof: an unedited live view opened and mapped, then the
    daemon stopped (SIGSTOP): reading and touching every page still
    completes with the GGUF's bytes (the kernel reads the file itself).  As
    root with passthrough possible this must succeed; with
    GGUFS_PASSTHROUGH=off in the environment (the suite's second run) the
    same reads must wait for the daemon (proof that the other path ran).
  - versions: four reader processes open the live view again and again,
    read it whole (read(2) and mmap), and keep some opens across edits and
    commits, while this process edits meta/general.name (short and long
    values: in place and grown headers) and commits (fsync of the root)
    many times.  Every whole read must be exactly one version (a file the
    commits wrote, or the view between two edits as read alone), an open
    file must keep showing the bytes of its first read, and no call may
    fail (no EIO).
  - a commit while a passthrough reader holds the unedited view writes a
    new file (the reader keeps the old bytes) and says so; without readers
    it commits in place.

Environment (tests/meson.build): GGUFS, MKFIXTURE.  Exit 0 pass, 1 fail,
77 skip (no FUSE).
"""

import hashlib
import mmap
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402

Fail = J.Fail
log = J.log
PT_OFF = os.environ.get("GGUFS_PASSTHROUGH") == "off"
read_all = J.read_all


def model(path, mb=2, n=4):
    J.mkfixture_model(path, mb, n)


def mount(path, mnt, args=()):
    p = J.run_ggufs(list(args) + [path, mnt])
    if p.returncode != 0:
        raise Fail("ggufs %s: exit %d: %s" % (path, p.returncode, p.stderr.decode(errors="replace")))
    pids = J._procs_for(mnt)
    if len(pids) != 1:
        raise Fail("daemon of %s not found (%r)" % (mnt, pids))
    return pids[0]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def commit(mnt):
    fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------


def sec_proof(tmp):
    path, mnt = os.path.join(tmp, "p.gguf"), os.path.join(tmp, "mnt-p")
    os.mkdir(mnt)
    model(path)
    want = open(path, "rb").read()
    with J.Watchdog(mnt, 120, "passthrough proof"):
        pid = mount(path, mnt)
        view = os.path.join(mnt, "p.gguf")
        fd = os.open(view, os.O_RDONLY)
        got_r, got_m, done = J.stopped_read(pid, fd, len(want))
        if got_r != want or got_m != want:
            raise Fail("live view: read/mmap differ from the GGUF")
        os.close(fd)
        J.unmount(mnt)
    if PT_OFF and done:
        raise Fail("GGUFS_PASSTHROUGH=off: the view was read while the daemon was stopped "
                   "(passthrough still on)")
    if not PT_OFF and not done:
        raise Fail("live view not served by passthrough: reads waited for the stopped daemon")
    log("ok: %s" % ("passthrough off: reads go through the daemon" if PT_OFF
                    else "unedited live view read and mapped with the daemon stopped (passthrough)"))


def reader(view, seconds, q, keep):
    """Opens, reads and maps the view until the time is up; reports the
    hashes of whole reads and any failure."""
    seen, errors = set(), []
    end = time.time() + seconds
    held = []  # (fd, hash of its first read)
    k = 0
    while time.time() < end:
        k += 1
        try:
            fd = os.open(view, os.O_RDONLY)
            a = read_all(fd)
            seen.add(sha(a))
            if k % 3 == 0 and a:
                m = mmap.mmap(fd, len(a), prot=mmap.PROT_READ)
                b = m[:]
                m.close()
                if b != a:
                    at = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
                    errors.append("open %d: mmap differs from read (%s vs %s; %d and %d bytes, first "
                                  "difference at %d)" % (k, sha(b)[:12], sha(a)[:12], len(b), len(a), at))
            if keep and len(held) < 4:
                held.append((fd, sha(a)))
            else:
                os.close(fd)
            for hfd, h in held:
                again = sha(read_all(hfd))
                if again != h:
                    errors.append("an open file changed version: %s then %s" % (h[:12], again[:12]))
            if len(held) == 4 and k % 7 == 0:
                os.close(held.pop(0)[0])
        except OSError as e:
            errors.append("open %d: %s" % (k, e))
            break
    for hfd, _ in held:
        os.close(hfd)
    q.put((seen, errors, k))


def sec_versions(tmp, seconds=12):
    path, mnt = os.path.join(tmp, "v.gguf"), os.path.join(tmp, "mnt-v")
    os.mkdir(mnt)
    model(path)
    known = {sha(open(path, "rb").read())}
    view = os.path.join(mnt, "v.gguf")
    name = os.path.join(mnt, "meta", "general.name")
    with J.Watchdog(mnt, seconds + 240, "versions"):
        mount(path, mnt)
        q = mp.Queue()
        procs = [mp.Process(target=reader, args=(view, seconds, q, i % 2 == 0)) for i in range(4)]
        for p in procs:
            p.start()
        end = time.time() + seconds
        i = commits = 0
        while time.time() < end:
            i += 1
            val = (b"v%d " % i) + (b"x" * (20000 * (i % 5)) if i % 4 == 0 else b"")
            with open(name, "wb") as f:
                f.write(val + b"\n")
            # The view of this version, read alone (no edit runs meanwhile).
            with open(view, "rb") as f:
                known.add(sha(f.read()))
            if i % 2 == 0:
                commit(mnt)
                commits += 1
                known.add(sha(open(path, "rb").read()))
            time.sleep(0.05)
        results = [q.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(60)
        J.unmount(mnt)
    known.add(sha(open(path, "rb").read()))
    opens = sum(r[2] for r in results)
    for seen, errors, _ in results:
        if errors:
            raise Fail("versions: %s" % "; ".join(errors[:5]))
        bad = seen - known
        if bad:
            raise Fail("versions: %d whole reads match no version (mixed bytes?)" % len(bad))
    log("ok: %d edits, %d commits, %d opens by 4 readers: every read one version, open files "
        "kept theirs, no error" % (i, commits, opens))


def sec_commit_under_reader(tmp):
    path, mnt = os.path.join(tmp, "c.gguf"), os.path.join(tmp, "mnt-c")
    os.mkdir(mnt)
    model(path)
    orig = open(path, "rb").read()
    ino = os.stat(path).st_ino
    with J.Watchdog(mnt, 120, "commit under a reader"):
        mount(path, mnt)
        fd = os.open(os.path.join(mnt, "c.gguf"), os.O_RDONLY)
        m = mmap.mmap(fd, len(orig), prot=mmap.PROT_READ)
        with open(os.path.join(mnt, "meta", "general.name"), "wb") as f:
            f.write(b"edited under a reader\n")
        commit(mnt)
        msg = os.getxattr(mnt, "user.ggufs.commit").decode()
        if m[:] != orig or read_all(fd) != orig:
            raise Fail("commit under a reader: the open view changed")
        m.close()
        os.close(fd)
        # no reader now: in place
        with open(os.path.join(mnt, "meta", "general.name"), "wb") as f:
            f.write(b"edited alone\n")
        commit(mnt)
        msg2 = os.getxattr(mnt, "user.ggufs.commit").decode()
        J.unmount(mnt)
    new_file = os.stat(path).st_ino != ino
    if PT_OFF:
        if new_file or "in place" not in msg:
            raise Fail("passthrough off: commit under a reader: %r (new file: %s)" % (msg, new_file))
    elif not new_file or "new file" not in msg:
        raise Fail("commit under a passthrough reader: %r (new file: %s)" % (msg, new_file))
    if "in place" not in msg2:
        raise Fail("commit without readers: %r" % msg2)
    log("ok: commit under a reader: %s; then %s" % (msg.split(": ", 1)[1], msg2.split(": ", 1)[1]))


if __name__ == "__main__":
    J.sections_main("ggufs-pt-", (sec_proof, sec_commit_under_reader, sec_versions), root=not PT_OFF)
