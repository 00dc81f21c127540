#!/usr/bin/env python3
"""mount_storept: a store's models' live views by FUSE passthrough (issue 35).

A store (a folder of three GGUFs made by tests/mkfixture) is mounted as
root.  The kernel shim belongs to the session (fs/base/devio.c), so each model
the store opens passes its live view through as a single-file mount does
(tests/mount_passthrough.py):

  - unedited: each model's MNT/NAME/NAME.gguf is opened and mapped, the
    daemon stopped (SIGSTOP), and reading it whole and touching every page
    still completes with the GGUF's bytes (the kernel reads the file
    itself).  With GGUFS_PASSTHROUGH=off (the suite's second run) the same
    reads must wait for the daemon.  ggml's reader judges each view.
  - an edit pending in one model: an open of its view made before the edit
    keeps the old bytes (its version, passed through); a new open shows
    the edit (ggml reads the new general.name; served by the daemon, as a
    single-file mount serves a view with an edit pending); the two other
    models stay passed through meanwhile.
  - its commit while the old passthrough open is still held writes a new
    file beside (the reader keeps the old bytes; the report says so); the
    committed view is then passed through again, judged by ggml.
  - a model closed to bound memory (-o max_models=1) and opened again
    shows its edit committed at the close, not pages the kernel kept of
    the same inode number; and after a commit under a passthrough reader
    (a new file renamed over the model's), it opens that file.
  - read(2)s of a version that has not changed (an edit pending: served by
    the daemon through FUSE's page cache) send no GETATTR each (issue 35,
    "Reads the daemon serves"; libfuse's -d output counts them).

Environment (tests/meson.build): GGUFS, MKFIXTURE, REFDUMP.  Exit 0 pass,
1 fail, 77 skip (no FUSE, not root).
"""

import hashlib
import mmap
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402

Fail = J.Fail
log = J.log
PT_OFF = os.environ.get("GGUFS_PASSTHROUGH") == "off"
model = J.mkfixture_model
read_all = J.read_all
NAMES = ("alpha", "beta", "gamma")


def sha(b):
    return hashlib.sha256(b).hexdigest()[:12]


def view_of(mnt, name):
    return os.path.join(mnt, name, name + ".gguf")


def judged(path, tmp, label):
    """ggml's reading of a copy of path: {key: content}."""
    out = os.path.join(tmp, "judged.gguf")
    shutil.copyfile(path, out)
    r = J.refdump(out)[1]
    os.unlink(out)
    if r is None:
        raise Fail("%s: ggml rejects %s" % (label, path))
    return {kv.key: kv.content for kv in r.kvs}


def judged_name(view, tmp, label):
    """general.name of the view as ggml's reader sees it (None: none)."""
    got = judged(view, tmp, label).get(b"general.name")
    return None if got is None else got.rstrip(b"\n")


def passed_through(pid, view, want, label, first=True):
    """The view opened now reads and maps as want with the daemon stopped
    (passthrough), or, with GGUFS_PASSTHROUGH=off, waits for it if this is
    the version's first read (later ones may come from FUSE's page cache,
    which the version's inode keeps)."""
    fd = os.open(view, os.O_RDONLY)
    try:
        got_r, got_m, done = J.stopped_read(pid, fd, len(want))
    finally:
        os.close(fd)
    if got_r != want or got_m != want:
        raise Fail("%s: read/mmap of the view differ from the GGUF (%s/%s, want %s)"
                   % (label, sha(got_r or b""), sha(got_m or b""), sha(want)))
    if PT_OFF and first and done:
        raise Fail("%s: GGUFS_PASSTHROUGH=off, yet the view was read with the daemon stopped" % label)
    if not PT_OFF and not done:
        raise Fail("%s: the store model's live view is not passed through: reads waited for "
                   "the stopped daemon" % label)


def served(pid, view, label):
    """A view with an edit pending is the daemon's to serve (as a
    single-file mount's): reads wait while it is stopped."""
    fd = os.open(view, os.O_RDONLY)
    try:
        n = os.fstat(fd).st_size
        _, _, done = J.stopped_read(pid, fd, n)
    finally:
        os.close(fd)
    if done:
        raise Fail("%s: a view with an edit pending was read with the daemon stopped (the "
                   "file's bytes, not the edit's)" % label)


def run(tmp):
    store, mnt = os.path.join(tmp, "store"), os.path.join(tmp, "mnt")
    os.mkdir(store)
    os.mkdir(mnt)
    for i, name in enumerate(NAMES):
        model(os.path.join(store, name + ".gguf"), 1 + i, 3 + i)
    files = {n: os.path.join(store, n + ".gguf") for n in NAMES}
    orig = {n: open(f, "rb").read() for n, f in files.items()}
    with J.Watchdog(mnt, 240, "store passthrough"):
        try:
            mounted(store, mnt, tmp, files, orig)
        finally:
            if J.mountinfo_entry(mnt) is not None:
                J.unmount(mnt, [])


def mounted(store, mnt, tmp, files, orig):
    p = J.run_ggufs([store, mnt])
    if p.returncode != 0:
        raise Fail("ggufs %s: exit %d: %s" % (store, p.returncode, p.stderr.decode(errors="replace")))
    pids = J._procs_for(mnt)
    if len(pids) != 1:
        raise Fail("daemon of %s not found (%r)" % (mnt, pids))
    pid = pids[0]
    for n in NAMES:
        passed_through(pid, view_of(mnt, n), orig[n], "%s, unedited" % n)
        if judged(view_of(mnt, n), tmp, n) != judged(files[n], tmp, n):
            raise Fail("%s: ggml reads other metadata in the live view than in the file" % n)
    log("ok: 3 models of a store: each unedited live view read and mapped with the daemon "
        "stopped%s" % (" (passthrough off: reads waited)" if PT_OFF else ""))
    edited(pid, mnt, tmp, files, orig)


def edited(pid, mnt, tmp, files, orig):
    b = "beta"
    view = view_of(mnt, b)
    old = os.open(view, os.O_RDONLY)  # a version opened before the edit
    om = mmap.mmap(old, len(orig[b]), prot=mmap.PROT_READ)
    with open(os.path.join(mnt, b, "meta", "general.name"), "w") as f:
        f.write("beta edited under a reader\n")
    # Its first read (later ones may come from the version's page cache).
    served(pid, view, "beta, edit pending")
    got = judged_name(view, tmp, "beta, edit pending")
    if got != b"beta edited under a reader":
        raise Fail("beta, edit pending: ggml reads general.name %r from the live view" % got)
    for n in ("alpha", "gamma"):
        passed_through(pid, view_of(mnt, n), orig[n], "%s, beta's edit pending" % n, first=False)
    if om[:] != orig[b] or read_all(old) != orig[b]:
        raise Fail("beta: an open made before the edit changed version")
    # The commit (fsync of the model's directory) under the old reader.
    d = os.open(os.path.join(mnt, b), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(d)
    finally:
        os.close(d)
    msg = os.getxattr(os.path.join(mnt, b), "user.ggufs.commit").decode()
    if om[:] != orig[b] or read_all(old) != orig[b]:
        raise Fail("beta: the commit changed the bytes of an open made before it")
    om.close()
    os.close(old)
    if PT_OFF and "in place" not in msg:
        raise Fail("passthrough off: beta's commit under a reader: %r" % msg)
    if not PT_OFF and "new file" not in msg:
        raise Fail("beta's commit under a passthrough reader did not write a new file: %r" % msg)
    now = open(files[b], "rb").read()
    if now == orig[b]:
        raise Fail("beta: the commit left the GGUF as it was")
    passed_through(pid, view, now, "beta, committed")
    got = judged_name(view, tmp, "beta, committed")
    if got != b"beta edited under a reader":
        raise Fail("beta, committed: ggml reads general.name %r" % got)
    way = "served by the daemon (passthrough off)" if PT_OFF else "passed through"
    log("ok: beta edited: the older open kept its version, ggml reads the edit, alpha and gamma "
        "stayed %s; commit: %s; the committed view %s again" % (way, msg.split(": ", 1)[-1], way))


def reopened(tmp):
    """A model closed to bound memory (-o max_models=1) and opened again
    numbers its views anew: the view shows the file's bytes now (its
    edit, committed at the close), never pages the kernel kept of the
    same inode number's earlier version."""
    store, mnt = os.path.join(tmp, "store2"), os.path.join(tmp, "mnt2")
    os.mkdir(store)
    os.mkdir(mnt)
    for name in NAMES[:2]:
        model(os.path.join(store, name + ".gguf"), 1, 3)
    a = os.path.join(store, "alpha.gguf")
    with J.Watchdog(mnt, 120, "store model reopened"):
        p = J.run_ggufs(["-o", "max_models=1", store, mnt])
        if p.returncode != 0:
            raise Fail("ggufs %s: exit %d: %s" % (store, p.returncode, p.stderr.decode(errors="replace")))
        try:
            first = open(view_of(mnt, "alpha"), "rb").read()
            with open(os.path.join(mnt, "alpha", "meta", "general.name"), "w") as f:
                f.write("alpha renamed\n")
            open(view_of(mnt, "beta"), "rb").read()  # alpha closed: its edit committed
            again = open(view_of(mnt, "alpha"), "rb").read()
            now = open(a, "rb").read()
            if now == first:
                raise Fail("reopened: alpha's edit was not committed when it closed")
            if again != now:
                raise Fail("reopened: alpha's view shows %s, its file holds %s (%s: the version before "
                           "the close)" % (sha(again), sha(now), "yes" if again == first else "no"))
            got = judged_name(view_of(mnt, "alpha"), tmp, "alpha reopened")
            if got != b"alpha renamed":
                raise Fail("reopened: ggml reads general.name %r" % got)
            # A commit under a passthrough reader writes alpha a new file:
            # closed and opened again, alpha is that file (not refused as
            # one swapped behind the store's scan).
            fd = os.open(view_of(mnt, "alpha"), os.O_RDONLY)
            with open(os.path.join(mnt, "alpha", "meta", "general.name"), "w") as f:
                f.write("alpha renewed\n")
            d = os.open(os.path.join(mnt, "alpha"), os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(d)
            os.close(d)
            os.close(fd)
            msg = os.getxattr(os.path.join(mnt, "alpha"), "user.ggufs.commit").decode()
            open(view_of(mnt, "beta"), "rb").read()  # alpha closed
            try:
                again = open(view_of(mnt, "alpha"), "rb").read()
            except OSError as e:
                raise Fail("reopened after a commit (%s): alpha's view: %s" % (msg, e))
            if again != open(a, "rb").read():
                raise Fail("reopened after a commit (%s): alpha's view is not its file" % msg)
            got = judged_name(view_of(mnt, "alpha"), tmp, "alpha reopened after a commit")
            if got != b"alpha renewed":
                raise Fail("reopened after a commit: ggml reads general.name %r" % got)
        finally:
            J.unmount(mnt, [])
    log("ok: a model closed (max_models=1) and opened again shows its committed edit, also after "
        "a commit %s" % ("in place" if "in place" in msg else "that wrote a new file"))


def no_getattr_per_read(tmp):
    """read(2)s of a version of a live view that has not changed, served by
    the daemon through FUSE's page cache (an edit pending), send no GETATTR
    each: the version's attributes are cached (libfuse's debug output, -d,
    counts the requests)."""
    store, mnt = os.path.join(tmp, "store3"), os.path.join(tmp, "mnt3")
    os.mkdir(store)
    os.mkdir(mnt)
    model(os.path.join(store, "alpha.gguf"), 1, 3)
    view = view_of(mnt, "alpha")
    errp = os.path.join(tmp, "debug.log")
    with open(errp, "wb") as err, J.Watchdog(mnt, 120, "getattr per read"):
        proc = subprocess.Popen([J.tool("GGUFS"), "-d", store, mnt], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
        try:
            for _ in range(300):
                if J.mountinfo_entry(mnt) is not None:
                    break
                time.sleep(0.05)
            else:
                raise Fail("ggufs -d %s did not mount" % store)
            with open(os.path.join(mnt, "alpha", "meta", "general.name"), "w") as f:
                f.write("alpha, served by the daemon\n")
            whole = open(view, "rb").read()
            time.sleep(0.3)
            before = open(errp, "rb").read().count(b"GETATTR")
            fd = os.open(view, os.O_RDONLY)
            try:
                got = b"".join(os.pread(fd, 4096, k * 4096) for k in range(100))
            finally:
                os.close(fd)
            time.sleep(0.3)
            n = open(errp, "rb").read().count(b"GETATTR") - before
        finally:
            J.unmount(mnt, [])
            proc.wait(15)
    if got != whole[:len(got)]:
        raise Fail("getattr per read: 100 reads of the view differ from its whole read")
    if n > 2:
        raise Fail("100 read(2)s of an unchanged live view sent %d GETATTRs" % n)
    log("ok: 100 read(2)s of an unchanged view (served by the daemon) sent %d GETATTR" % n)


if __name__ == "__main__":
    J.sections_main("ggufs-storept-", (run, reopened, no_getattr_per_read), root=not PT_OFF)
