#!/usr/bin/env python3
"""mount_fstab: one store for many users, mounted the way ggufs(1) says
(issue 35, "Multi-user machines"): an /etc/fstab line

    STORE MNT fuse.ggufs ro,allow_other 0 0

mounted by root with mount(8), read by another user (nobody:
setpriv --reuid=65534 --regid=65534 --clear-groups).

The store is a folder of two GGUFs made by tests/mkfixture: open.gguf
(0644) and private.gguf (0600, root's).  The fstab is a file of the test's
(`mount -T FSTAB MNT`: the machine's /etc/fstab is never read or written).
mount(8) drops PATH and runs mount.fuse3, which runs `ggufs STORE MNT -o
OPTIONS` through /bin/sh with sh's default PATH, so ggufs must be where an
install puts it: the checks run in a private mount namespace (unshare -m)
in which a folder holding only a link to the built ggufs is bind mounted
over /usr/local/sbin (first on that PATH, empty on Debian); nothing is
installed on the machine.

Checked:
  1. the mount: fuse.ggufs, the store as its source, and the kernel's
     options allow_other and default_permissions (ggufs always asks for
     the kernel's mode checks);
  2. nobody reads open/open.gguf (the live view), opened and mapped first,
     then read whole and every page touched with the daemon stopped
     (SIGSTOP): the reads complete, with the file's bytes, so the kernel
     read the GGUF itself (passthrough, as tests/mount_storept.py shows it
     for root).  With GGUFS_PASSTHROUGH=off (the ptoff setup) they must
     wait for the daemon instead.  nobody reads open/meta's
     general.architecture as ggml's reader reads it from the file;
  3. nobody, who cannot read private.gguf on disk, gets EACCES on its
     meta/ key, its live view, a tensors/ file (named by root's listing),
     and listing it or its tensors/; models.tsv shows nobody its name only
     (tests/mount_storeusers.py covers the other shapes: folders, groups,
     shards, chmod); root (the mount's owner) reads it;
  4. `umount MNT` unmounts and ends the daemon;
  5. a line with the options a systemd machine's fstab carries
     (default_permissions, nofail, _netdev, x-systemd.automount,
     x-systemd.idle-timeout) mounts the same (mount(8) keeps the x- and
     nofail options to itself) and nobody reads open/.  systemd does not
     run on the machine this was written on (PID 1 is not systemd), so the
     automount unit systemd-fstab-generator would make of it is not
     started here: only mount(8)'s part is tested.
Exit 0 pass, 1 fail, 77 skip (no FUSE, not root, no unshare/mount.fuse3).
"""

import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402

Fail = J.Fail
INNER = "--inner"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
PT_OFF = os.environ.get("GGUFS_PASSTHROUGH") == "off"
LINE = "%s %s fuse.ggufs ro,allow_other 0 0\n"
SYSTEMD_LINE = ("%s %s fuse.ggufs ro,allow_other,default_permissions,nofail,_netdev,"
                "x-systemd.automount,x-systemd.idle-timeout=600 0 0\n")
# nobody's reader: opens and maps the view, says "ready", waits for "go"
# on stdin (the daemon is stopped meanwhile), then reads it whole and
# touches every page of the mapping; prints both sha256s.
READER = r"""
import hashlib, mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
n = os.fstat(fd).st_size
m = mmap.mmap(fd, n, prot=mmap.PROT_READ)
print("ready", flush=True)
sys.stdin.readline()
r, off = hashlib.sha256(), 0
while True:
    b = os.pread(fd, 1 << 20, off)
    if not b:
        break
    r.update(b)
    off += len(b)
t = hashlib.sha256(m[:])
print(r.hexdigest(), t.hexdigest(), flush=True)
"""


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, **kw)


def err(p):
    return p.stderr.decode(errors="replace").strip()


def daemons_of(mnt):
    """Pids of ggufs processes whose command line names mnt (mount.fuse3
    runs `ggufs STORE MNT -o ...`)."""
    pids = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"ggufs" and os.fsencode(mnt) in argv:
            pids.append(int(p))
    return pids


def super_options(mnt):
    """The kernel's options of the FUSE mount at mnt (mountinfo's last
    field), or None."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.rstrip("\n").partition(" - ")
            if left.split(" ")[4] == mnt:
                found = right.split(" ")[2].split(",")
    return found


def fstab_mount(fstab, mnt, line, store):
    with open(fstab, "w") as f:
        f.write(line % (store, mnt))
    p = run(["mount", "-T", fstab, mnt])
    if p.returncode != 0:
        raise Fail("mount -T FSTAB %s (%r) failed (%d): %s" % (mnt, line.strip(), p.returncode, err(p)))
    e = J.mountinfo_entry(mnt)
    if not e or e[0] != "fuse.ggufs" or e[1] != store:
        raise Fail("after mount -T of %r, %s is %r, expected fuse.ggufs of %s" % (line.strip(), mnt, e, store))
    opts = super_options(mnt) or []
    for o in ("allow_other", "default_permissions"):
        if o not in opts:
            raise Fail("the fstab mount's kernel options %s lack %s" % (",".join(opts), o))
    pids = daemons_of(mnt)
    if len(pids) != 1:
        raise Fail("the daemon of the fstab mount %s: %r" % (mnt, pids))
    return pids[0]


def umount(mnt):
    pids = daemons_of(mnt)
    p = run(["umount", mnt])
    if p.returncode != 0:
        raise Fail("umount %s failed: %s" % (mnt, err(p)))
    if J.mountinfo_entry(mnt):
        raise Fail("%s is still mounted after umount" % mnt)
    deadline = time.time() + 10
    while any(os.path.exists("/proc/%d" % q) and not J._zombie(q) for q in pids):
        if time.time() > deadline:
            raise Fail("the ggufs daemon %r of %s runs 10 s after umount" % (pids, mnt))
        time.sleep(0.05)


def stopped_read_as_nobody(pid, view):
    """nobody's reader of view: (its sha256s of the read and the mapping or
    None, whether they came within 5 s with the daemon stopped)."""
    r = subprocess.Popen(NOBODY + ["/usr/bin/python3", "-c", READER, view], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready = r.stdout.readline()
        if ready != b"ready\n":
            r.wait(30)
            raise Fail("nobody could not open and map %s: %s" % (view, r.stderr.read().decode(errors="replace")))
        os.kill(pid, signal.SIGSTOP)
        try:
            r.stdin.write(b"go\n")
            r.stdin.flush()
            done = bool(select.select([r.stdout], [], [], 5)[0])
        finally:
            os.kill(pid, signal.SIGCONT)
        out = r.stdout.readline().split()
        r.wait(60)
    finally:
        if r.poll() is None:
            r.kill()
            r.wait()
    if r.returncode != 0 or len(out) != 2:
        raise Fail("nobody's read of %s failed (%s): %s"
                   % (view, r.returncode, r.stderr.read().decode(errors="replace")))
    return [x.decode() for x in out], done


def nobody_reads(pid, mnt, store, arch):
    view = os.path.join(mnt, "open", "open.gguf")
    got, done = stopped_read_as_nobody(pid, view)
    want = J.file_sha256(os.path.join(store, "open.gguf"))
    if got != [want, want]:
        raise Fail("nobody's read/mmap of open/open.gguf: %s/%s, the file is %s"
                   % (got[0][:12], got[1][:12], want[:12]))
    if PT_OFF and done:
        raise Fail("GGUFS_PASSTHROUGH=off, yet nobody read open/open.gguf with the daemon stopped")
    if not PT_OFF and not done:
        raise Fail("nobody's read of open/open.gguf on the fstab mount waited for the stopped daemon: "
                   "not passed through")
    key = os.path.join(mnt, "open", "meta", "general.architecture")
    p = run(NOBODY + ["cat", key])
    if p.returncode != 0 or p.stdout != arch + b"\n":
        raise Fail("nobody reads %s as %r (%s), ggml reads %r" % (key, p.stdout, err(p), arch))
    J.log("ok   nobody read and mapped open/open.gguf (the file's bytes) %s, and its meta/"
          % ("waiting for the daemon (passthrough off)" if PT_OFF else "with the daemon stopped: passed through"))


def denied(argv, what):
    p = run(NOBODY + argv)
    if p.returncode == 0:
        raise Fail("%s: nobody read it through the fstab mount (%s): %r" % (what, " ".join(argv), p.stdout[:80]))
    if "Permission denied" not in err(p):
        raise Fail("%s: %s failed, but not with EACCES: %s" % (what, " ".join(argv), err(p)))


def nobody_refused(mnt, arch):
    d = os.path.join(mnt, "private")
    key = os.path.join(d, "meta", "general.architecture")
    with open(key, "rb") as f:
        if f.read() != arch + b"\n":
            raise Fail("root (the mount's owner) does not read private/meta/general.architecture")
    tensors = sorted(os.listdir(os.path.join(d, "tensors")))
    if not tensors:
        raise Fail("root lists no tensors/ in private")
    denied(["cat", key], "private/meta")
    denied(["head", "-c", "4", os.path.join(d, "private.gguf")], "private's live view")
    denied(["head", "-c", "4", os.path.join(d, "tensors", tensors[0])], "private/tensors/" + tensors[0])
    denied(["ls", d], "private/")
    denied(["ls", os.path.join(d, "tensors")], "private/tensors/")
    p = run(NOBODY + ["cat", os.path.join(mnt, "models.tsv")])
    rows = {ln.split("\t")[0]: ln.split("\t")[1:] for ln in p.stdout.decode().splitlines()[1:]}
    if p.returncode != 0 or set(rows) != {"open", "private"}:
        raise Fail("models.tsv as nobody: %r (%s)" % (sorted(rows), err(p)))
    if any(c != "-" for c in rows["private"]) or rows["open"][0] != arch.decode():
        raise Fail("models.tsv shows nobody private as %r, open as %r: private's name only is theirs"
                   % (rows["private"], rows["open"]))
    J.log("ok   nobody gets EACCES on private (0600 on disk): meta/, the live view, tensors/%s, listings; "
          "models.tsv its name only; root reads it" % tensors[0])


def inner(store, work, arch):
    mnt, fstab = os.path.join(work, "mnt"), os.path.join(work, "fstab")
    try:
        pid = fstab_mount(fstab, mnt, LINE, store)
        J.log("ok   mount -T FSTAB: %s" % (LINE % (store, mnt)).strip())
        nobody_reads(pid, mnt, store, arch)
        nobody_refused(mnt, arch)
        umount(mnt)
        J.log("ok   umount ended the daemon")
        fstab_mount(fstab, mnt, SYSTEMD_LINE, store)
        p = run(NOBODY + ["cat", os.path.join(mnt, "open", "meta", "general.architecture")])
        if p.returncode != 0 or p.stdout != arch + b"\n":
            raise Fail("nobody reads open/ on the systemd-style line's mount as %r (%s)" % (p.stdout, err(p)))
        denied(["cat", os.path.join(mnt, "private", "meta", "general.architecture")], "private/meta (systemd line)")
        umount(mnt)
        J.log("ok   the systemd-style line (nofail, _netdev, x-systemd.*) mounts and unmounts the same")
    finally:
        if J.mountinfo_entry(mnt):
            run(["umount", "-l", mnt])


def on_disk(store, arch):
    """What nobody may do on disk: the test's premise."""
    if run(NOBODY + ["head", "-c", "4", os.path.join(store, "open.gguf")]).returncode != 0:
        raise Fail("nobody cannot read open.gguf on disk (a folder on the way closed?)")
    if run(NOBODY + ["head", "-c", "4", os.path.join(store, "private.gguf")]).returncode == 0:
        raise Fail("nobody reads private.gguf (0600, root's) on disk")


def main():
    J.require_fuse()
    if os.geteuid() != 0:
        raise J.Skip("needs root (mount(8), a private mount namespace)")
    for t in ("unshare", "mount", "umount", "setpriv"):
        if not shutil.which(t):
            raise J.Skip("%s is not installed" % t)
    if not any(os.path.exists(d + "/mount.fuse3") for d in ("/sbin", "/usr/sbin")):
        raise J.Skip("mount.fuse3 is not installed (fuse3)")
    if not os.access("/usr/bin/python3", os.X_OK):
        raise J.Skip("/usr/bin/python3 (nobody's reader) is not installed")
    if not os.path.isdir("/usr/local/sbin"):
        raise J.Skip("/usr/local/sbin does not exist (the bind mount's target)")
    work = tempfile.mkdtemp(prefix="ggufs-fstab.")
    os.chmod(work, 0o755)  # nobody reaches the mount point and the store
    mnt = os.path.join(work, "mnt")
    try:
        store, sbin = os.path.join(work, "store"), os.path.join(work, "sbin")
        for d in (store, mnt, sbin):
            os.mkdir(d)
            os.chmod(d, 0o755)
        os.symlink(J.tool("GGUFS"), os.path.join(sbin, "ggufs"))
        J.mkfixture_model(os.path.join(store, "open.gguf"), 2, 2, 300)
        J.mkfixture_model(os.path.join(store, "private.gguf"), 1, 2, 400)
        os.chmod(os.path.join(store, "open.gguf"), 0o644)
        os.chmod(os.path.join(store, "private.gguf"), 0o600)
        arch = J.refdump(os.path.join(store, "open.gguf"))[1]
        arch = {kv.key: kv.content for kv in arch.kvs}.get(b"general.architecture", b"").rstrip(b"\n")
        if not arch:
            raise Fail("ggml reads no general.architecture in the fixture")
        on_disk(store, arch)
        script = ("mount --make-rprivate / && mount --bind %s /usr/local/sbin && exec %s %s %s %s %s %s"
                  % tuple(shlex.quote(s) for s in (sbin, sys.executable, os.path.abspath(__file__), INNER, store, work,
                                         arch.decode())))
        p = subprocess.run(["unshare", "--mount", "--", "sh", "-c", script], timeout=400)
        if p.returncode != 0:
            raise Fail("the fstab checks failed (status %d)" % p.returncode)
    finally:
        for pid in daemons_of(mnt):  # a daemon left in the namespace
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == INNER:
        J.main(lambda: inner(sys.argv[2], sys.argv[3], sys.argv[4].encode()))
    else:
        J.main(main)
