#!/usr/bin/env python3
"""mount_storelist: listings of a store of many models (issue 35), through
a real FUSE mount of a folder store laid out by tests/mkstore.

Checked:
  1. ls -l of the root of N models asks the file system for extended
     attributes twice, not 3 N times: names outside user.* (the ACLs,
     security.selinux) are "not supported" (EOPNOTSUPP), which coreutils
     remembers per device; user.ggufs.pid still answers;
  2. find -maxdepth 2 -ls: every chunk of the root's listing is a
     READDIRPLUS with the models' entries, and a model directory's
     READDIRPLUS gives its subdirectories' entries: at most 3 LOOKUPs
     per model (its files), counted in the daemon's -d log; find's modes
     are what lstat says afterwards;
  3. a read-only store (-o ro,max_models=4): a second find -maxdepth 2
     opens no model again (the store answers a closed model's opendir;
     the kernel keeps the listing): the daemon's openat calls, by strace;
  4. with those caches, the store's changes still show within 1.5 s
     (mount_stores' bound): a model added, renamed (its new name's
     entries right), removed;
  5. with those caches, another user (allow_other) is still refused a
     private model's directory after root listed it (the kernel's cached
     listing is not answered to an opendir the store refuses).
Exit 0 pass, 1 fail, 77 skip (no FUSE).
"""

import errno
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_stores as S  # noqa: E402

Fail = J.Fail
N = 1000  # past one chunk of the root's listing (find reads 32 KiB)
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def bench_store(d, n):
    """A folder of n distinct small models (mkstore's bench form)."""
    p = subprocess.run([J.tool("MKSTORE"), "dir", d, str(n)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkstore dir %s %d failed: %s" % (d, n, p.stderr.decode(errors="replace")))
    return [ln.split("\t")[0] for ln in p.stdout.decode().splitlines()]


def find_ls(mnt, gone_ok=False):
    """find MNT -maxdepth 2 -ls: {path below mnt: mode string}; gone_ok:
    while the store changes (names may leave while find runs)."""
    p = subprocess.run(["find", mnt, "-maxdepth", "2", "-ls"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    err = p.stderr.decode(errors="replace")
    # A name that left between the listing and its stat: ENOENT, as on
    # any file system that changes; never another error.
    vanished = all("No such file or directory" in ln for ln in err.splitlines())
    if p.returncode != 0 and not (gone_ok and vanished):
        raise Fail("find %s -maxdepth 2 -ls failed: %s" % (mnt, err))
    out = {}
    for ln in p.stdout.decode().splitlines():
        f = ln.split()
        out[os.path.relpath(f[-1], mnt)] = f[2]
    return out


def check_xattrs(tmp, store, names):
    mnt = os.path.join(tmp, "mnt")
    with S.Fg(store, mnt) as fg:
        if not shutil.which("strace"):
            J.log("skip ls -l's getxattr count (no strace)")
        else:
            trace = os.path.join(tmp, "ls.trace")
            p = subprocess.run(["strace", "-o", trace, "-e", "trace=getxattr,lgetxattr", "ls", "-l", mnt],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            if p.returncode != 0 or p.stdout.decode().count("\n") != len(names) + 2:
                raise Fail("ls -l of the store: status %d, %d lines for %d models"
                           % (p.returncode, p.stdout.decode().count("\n"), len(names)))
            with open(trace) as f:
                asked = sum(1 for ln in f if "getxattr(" in ln)
            if asked > 4:
                raise Fail("ls -l of %d models asked getxattr %d times (the ACLs and security.selinux"
                           " of every entry: ENODATA, not EOPNOTSUPP)" % (len(names), asked))
        try:
            os.getxattr(os.path.join(mnt, names[0]), "security.selinux")
            raise Fail("security.selinux of a model's root has a value")
        except OSError as e:
            if e.errno != errno.EOPNOTSUPP:
                raise Fail("security.selinux of a model's root: %s, not EOPNOTSUPP" % e)
        if os.getxattr(mnt, "user.ggufs.pid").decode() != str(fg.pid):
            raise Fail("user.ggufs.pid of the root is not the daemon's pid")
    J.log("ok   ls -l of %d models: getxattr asked at most twice; user.* answered" % len(names))


def check_plus(tmp, store, names):
    mnt = os.path.join(tmp, "mnt")
    with S.Fg(store, mnt, ["-d"]) as fg:
        seen = find_ls(mnt)
        log = fg.log()
    lookups = log.count("opcode: LOOKUP")
    if lookups > 3 * len(names) + 10:
        raise Fail("find -maxdepth 2 -ls of %d models sent %d LOOKUPs (more than 3 a model: a "
                   "listing without its entries)" % (len(names), lookups))
    for n in (names[0], names[-1]):
        for sub, kind in (("meta", "d"), ("tensors", "d"), ("meta.tsv", "-"), (n + ".gguf", "-")):
            got = seen.get(os.path.join(n, sub))
            if not got or got[0] != kind:
                raise Fail("find lists %s/%s as %r" % (n, sub, got))
    if len([p for p in seen if os.sep not in p and p != "."]) != len(names) + 1:
        raise Fail("find lists %d names at the root for %d models and models.tsv"
                   % (len([p for p in seen if os.sep not in p]), len(names)))
    J.log("ok   find -maxdepth 2 -ls of %d models: %d LOOKUPs" % (len(names), lookups))


def daemon_openats(pid, action, tmp):
    """openat calls of the daemon (all threads) while action runs."""
    trace = os.path.join(tmp, "daemon.trace")
    st = subprocess.Popen(["strace", "-f", "-o", trace, "-e", "trace=openat,openat2", "-p", str(pid)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # strace says "attached" once per thread on stderr: wait for the first.
    st.stderr.readline()
    time.sleep(0.3)
    try:
        action()
    finally:
        st.send_signal(signal.SIGINT)
        st.wait(30)
    with open(trace) as f:
        return sum(1 for ln in f if "openat" in ln and "resumed" not in ln)


def check_ro_reopen(tmp, store, names):
    mnt = os.path.join(tmp, "mnt")
    if not shutil.which("strace"):
        J.log("skip the read-only store's reopen count (no strace)")
        return
    with S.Fg(store, mnt, ["-o", "ro,max_models=4"]) as fg:
        first = find_ls(mnt)
        again = {}
        n = daemon_openats(fg.pid, lambda: again.update(find_ls(mnt)), tmp)
    if again != first:
        raise Fail("a second find -maxdepth 2 -ls of the read-only store lists otherwise")
    if n > len(names) // 10:
        raise Fail("a second find -maxdepth 2 -ls of %d models (-o ro,max_models=4) made the daemon "
                   "open %d files: the closed models opened again" % (len(names), n))
    J.log("ok   a second find of a read-only store of %d models: %d files opened" % (len(names), n))


def check_changes(tmp):
    mnt = os.path.join(tmp, "mnt")
    store = os.path.join(tmp, "changing")
    names = bench_store(store, 20)
    src = os.path.join(store, names[0] + ".gguf")
    with S.Fg(store, mnt, ["-o", "ro,max_models=4"]):
        find_ls(mnt), find_ls(mnt)
        part = os.path.join(tmp, "new.gguf")
        shutil.copyfile(src, part)
        os.rename(part, os.path.join(store, "added.gguf"))
        S.wait_for(lambda: find_ls(mnt, True).get("added/meta", "")[:1] == "d", "a model added (find)")
        find_ls(mnt)
        os.rename(os.path.join(store, names[1] + ".gguf"), os.path.join(store, "renamed.gguf"))
        S.wait_for(lambda: "renamed/meta" in find_ls(mnt, True) and names[1] not in find_ls(mnt, True),
                   "a model renamed (find)")
        seen = find_ls(mnt)
        for sub in ("meta", "tensors"):
            if not os.path.isdir(os.path.join(mnt, "renamed", sub)) or seen["renamed/" + sub][0] != "d":
                raise Fail("the renamed model's %s is not a directory right after the rename" % sub)
        if os.path.getsize(os.path.join(mnt, "renamed", "renamed.gguf")) != os.path.getsize(src):
            raise Fail("the renamed model's live view has not the file's size")
        os.unlink(os.path.join(store, "added.gguf"))
        S.wait_for(lambda: "added" not in find_ls(mnt, True), "a model removed (find)")
    J.log("ok   a read-only store's listings show models added, renamed, removed within 1.5 s")


def check_other_user(tmp):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        J.log("skip another user's refusal (not root, or no setpriv)")
        return
    mnt = os.path.join(tmp, "mnt")
    made = bench_store(os.path.join(tmp, "made"), 1)
    store = os.path.join(tmp, "users")
    os.makedirs(store)
    os.chmod(tmp, 0o755)
    os.chmod(store, 0o755)
    for name, mode in (("public", 0o644), ("private", 0o600)):
        dst = os.path.join(store, name + ".gguf")
        shutil.copyfile(os.path.join(tmp, "made", made[0] + ".gguf"), dst)
        os.chown(dst, 1000, 1000)
        os.chmod(dst, mode)
    with S.Fg(store, mnt, ["-o", "ro,allow_other"]):
        for _ in range(2):
            find_ls(mnt)  # root lists both: the kernel keeps the listings
            p = subprocess.run(NOBODY + ["ls", os.path.join(mnt, "private")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            if p.returncode == 0 or "Permission denied" not in p.stderr.decode(errors="replace"):
                raise Fail("nobody listed a 0600 model's directory after root did: %r %r"
                           % (p.stdout[:80], p.stderr[:120]))
            p = subprocess.run(NOBODY + ["ls", os.path.join(mnt, "public")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            if p.returncode != 0 or b"meta" not in p.stdout:
                raise Fail("nobody could not list a 0644 model: %r" % p.stderr[:120])
    J.log("ok   another user is refused a private model's directory the kernel holds a listing of")


def run():
    J.require_fuse()
    with J.store_scratch("ggufs-storelist-") as (tmp, mnt):
        store = os.path.join(tmp, "many")
        names = bench_store(store, N)
        with J.Watchdog(mnt, 580, "storelist"):  # STORELIST_ONLY=check_plus: that one alone
            for fn in J.chosen("STORELIST_ONLY", (check_xattrs, check_plus, check_ro_reopen)):
                fn(tmp, store, names)
            for fn in J.chosen("STORELIST_ONLY", (check_changes, check_other_user)):
                fn(tmp)


if __name__ == "__main__":
    J.main(run)
