#!/usr/bin/env python3
"""What `meson install` puts in place, used the way the README says.

1. `meson install --destdir D` installs the ggufs binary and its man page
   (the man page byte-identical to man/ggufs.1).
2. The installed binary is mounted by mount(8) itself, as a user would:
   `mount -t fuse.ggufs FILE MNT`, and an fstab line
   `FILE MNT fuse.ggufs ro,allow_other 0 0` (`mount -T FSTAB MNT`).
   mount(8) runs mount.fuse3, which runs `ggufs` through /bin/sh with no
   PATH of ours, so the binary must be where the installed prefix puts it.
   To leave the machine as it was, this part runs in a private mount
   namespace (unshare -m) in which the installed bin directory is bind
   mounted over the prefix's bin directory.
   Checked: the values read through the mount, that the fstab mount is
   read-only (a write fails with EROFS) and that allow_other lets another
   user (nobody) read it, and that umount ends the daemon.
"""
import errno
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import judge as J

INNER = "--inner"


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120, **kw)


def installed(destdir):
    """Paths of the installed binary and man page under destdir."""
    found = {}
    for root, _, files in os.walk(destdir):
        for f in files:
            if f in ("ggufs", "ggufs.1"):
                found[f] = os.path.join(root, f)
    if "ggufs" not in found or "ggufs.1" not in found:
        raise J.Fail("meson install put %s under %s, expected ggufs and ggufs.1"
                     % (sorted(found.values()), destdir))
    return found["ggufs"], found["ggufs.1"]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def daemons_of(mnt):
    """Pids of ggufs processes whose command line names mnt."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            argv = read("/proc/%s/cmdline" % p).split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"ggufs" and mnt.encode() in argv:
            pids.append(int(p))
    return pids


def wait_gone(mnt):
    for _ in range(200):
        if not daemons_of(mnt):
            return
        time.sleep(0.05)
    raise J.Fail("the ggufs daemon of %s is still running after umount" % mnt)


def mounted(mnt):
    e = J.mountinfo_entry(mnt)
    return e


def inner(gguf, work, arch):
    """Runs inside the private mount namespace, ggufs installed on the
    prefix's bin directory."""
    mnt = os.path.join(work, "m")
    os.makedirs(mnt, exist_ok=True)

    # mount -t fuse.ggufs FILE MNT: a read-write mount by default.
    p = run(["mount", "-t", "fuse.ggufs", gguf, mnt])
    if p.returncode != 0:
        raise J.Fail("mount -t fuse.ggufs %s %s failed (%d): %s"
                     % (gguf, mnt, p.returncode, p.stderr.decode(errors="replace").strip()))
    try:
        e = mounted(mnt)
        if not e or e[0] != "fuse.ggufs":
            raise J.Fail("after mount -t fuse.ggufs, %s is %r, expected fuse.ggufs" % (mnt, e))
        got = read(os.path.join(mnt, "meta", "general.architecture"))
        if got != arch + b"\n":
            raise J.Fail("meta/general.architecture via mount -t is %r, expected %r"
                         % (got, arch + b"\n"))
    finally:
        p = run(["umount", mnt])
    if p.returncode != 0:
        raise J.Fail("umount %s failed: %s" % (mnt, p.stderr.decode(errors="replace").strip()))
    wait_gone(mnt)

    # The README's fstab line.
    fstab = os.path.join(work, "fstab")
    with open(fstab, "w") as f:
        f.write("%s %s fuse.ggufs ro,allow_other 0 0\n" % (gguf, mnt))
    p = run(["mount", "-T", fstab, mnt])
    if p.returncode != 0:
        raise J.Fail("mount of the fstab line failed (%d): %s"
                     % (p.returncode, p.stderr.decode(errors="replace").strip()))
    try:
        e = mounted(mnt)
        if not e or e[0] != "fuse.ggufs":
            raise J.Fail("the fstab mount of %s is %r, expected fuse.ggufs" % (mnt, e))
        name = os.path.join(mnt, "meta", "general.architecture")
        try:
            with open(name, "wb") as f:
                f.write(b"x\n")
            raise J.Fail("writing %s on a ro fstab mount succeeded" % name)
        except OSError as ex:
            if ex.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise J.Fail("writing on a ro mount failed with %s, expected EROFS"
                             % errno.errorcode.get(ex.errno, ex.errno))
        # allow_other: another user reads the mount.
        q = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                 "--", "cat", name])
        if q.returncode != 0 or q.stdout != arch + b"\n":
            raise J.Fail("user nobody could not read %s on the allow_other mount "
                         "(%d): %r %s" % (name, q.returncode, q.stdout,
                                          q.stderr.decode(errors="replace").strip()))
    finally:
        p = run(["umount", mnt])
    if p.returncode != 0:
        raise J.Fail("umount %s failed: %s" % (mnt, p.stderr.decode(errors="replace").strip()))
    wait_gone(mnt)
    J.log("mount -t fuse.ggufs and the fstab line (ro,allow_other): ok")


def main():
    J.require_fuse()
    for t in ("unshare", "mount", "umount", "setpriv", "meson"):
        if not shutil.which(t):
            raise J.Skip("%s is not installed" % t)
    if os.geteuid() != 0:
        raise J.Skip("needs root (mount(8) and a private mount namespace)")
    build = os.environ.get("GGUFS_BUILDDIR")
    src = os.environ.get("GGUFS_SRCDIR")
    if not build or not src:
        raise J.Fail("GGUFS_BUILDDIR and GGUFS_SRCDIR must be set (run through meson test)")
    u = run(["unshare", "--mount", "--", "true"])
    if u.returncode != 0:
        raise J.Skip("no private mount namespace here (unshare --mount: %s)"
                     % u.stderr.decode(errors="replace").strip())
    work = tempfile.mkdtemp(prefix="ggufs-install.")
    os.chmod(work, 0o755)  # nobody must reach the mount point
    try:
        dest = os.path.join(work, "dest")
        p = run(["meson", "install", "-C", build, "--no-rebuild", "--quiet",
                 "--destdir", dest])
        if p.returncode != 0:
            raise J.Fail("meson install failed: %s" % p.stderr.decode(errors="replace").strip())
        binary, man = installed(dest)
        if not os.access(binary, os.X_OK):
            raise J.Fail("installed %s is not executable" % binary)
        if read(man) != read(os.path.join(src, "man", "ggufs.1")):
            raise J.Fail("installed man page %s differs from man/ggufs.1" % man)
        v = run([binary, "--version"])
        if v.returncode != 0 or b"ggufs" not in v.stdout + v.stderr:
            raise J.Fail("installed %s --version failed (%d)" % (binary, v.returncode))
        # Where the installed prefix puts the binary, without destdir.
        bindir = os.path.dirname(binary)[len(dest):]
        if bindir not in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin",
                          "/usr/sbin", "/sbin"):
            raise J.Skip("prefix bin directory %s is not on /bin/sh's default "
                         "PATH, which mount.fuse3 uses" % bindir)
        gguf = os.path.join(work, "model.gguf")
        r = run([J.tool("MKFIXTURE"), "model", gguf, "--tensor-mb", "1",
                 "--n-tensors", "2", "--vocab", "300"])
        if r.returncode != 0:
            raise J.Fail("mkfixture failed: %s" % r.stderr.decode(errors="replace"))
        os.chmod(gguf, 0o644)
        arch = dict((k, v) for k, _, v in J.walk_gguf(gguf).kvs).get(b"general.architecture")
        if not isinstance(arch, bytes):
            raise J.Fail("the fixture %s has no string general.architecture" % gguf)
        os.makedirs(bindir, exist_ok=True)
        script = ("mount --make-rprivate / && mount --bind %s %s && exec %s %s %s %s %s %s"
                  % (shlex.quote(os.path.dirname(binary)), shlex.quote(bindir), shlex.quote(sys.executable),
                     shlex.quote(os.path.abspath(__file__)), INNER, shlex.quote(gguf), shlex.quote(work),
                     shlex.quote(arch.decode())))
        p = subprocess.run(["unshare", "--mount", "--", "sh", "-c", script],
                           timeout=300)
        if p.returncode != 0:
            raise J.Fail("the mount(8) checks failed (status %d)" % p.returncode)
    finally:
        for mp in (os.path.join(work, "m"),):
            if J.mountinfo_entry(mp):
                run(["umount", "-l", mp])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == INNER:
        J.main(lambda: inner(sys.argv[2], sys.argv[3], sys.argv[4].encode()))
    else:
        J.main(main)
