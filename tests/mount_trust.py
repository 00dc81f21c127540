#!/usr/bin/env python3
"""Recovery and commits against another user (issue 11).

ggufs runs as root here; the attacker is nobody (setpriv --reuid=65534),
working in a 1777 directory as in /tmp.  Each section is an attack that
rewrote or blinded root's files before the fix:

a. --recover through a symlink: nobody links LINK to a root-owned 0644
   GGUF and writes LINK.ggufs-journal whose old bytes are the target's
   current header (the checksum is FNV, anyone computes it).  Root's
   `ggufs --recover LINK` and a read-write mount of LINK leave the target
   byte-identical.
b. Journal injection: nobody puts a complete, matching journal beside
   root's model.  Root's read-write mount does not apply it, refuses with
   one line naming the journal; the model is byte-identical.
c. A FIFO at the journal name: the read-write mount returns within
   seconds with a message (it used to hang in open).
d. A complete journal of root's, 0600, for another device/inode: not
   applied, one line naming it; the model is byte-identical.
   --recover exits 1 with the same line; a read-only mount still works.
e. ctime: while mounted, another program pwrites the header in place and
   puts the mtime back (os.utime ns=...).  The commit is refused (ggufs -u
   exits 4, edits saved); the other program's bytes are kept.
f. root's own 0600 journal for the model whose new header is not a GGUF
   header: not applied, one line naming it.
g. The race of item 2: in a directory of its own, nobody flips NAME
   between its own GGUF (with a journal of its own that renames the model)
   and a symlink to root's model, as fast as it can, while root mounts
   NAME read-write and runs --recover on it, again and again.  Root's
   model stays byte-identical: the path is looked up once, the file
   opened without following a link, and everything after goes through
   that descriptor (gguf/file.c).
"""
import os
import shutil
import stat
import struct
import subprocess
import tempfile
import time

import judge as J
import mount_edit as E

Fail = J.Fail
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def err_of(p):
    return p.stderr.decode(errors="replace").strip()


def fixture(d, name="model.gguf"):
    path = os.path.join(d, name)
    p = subprocess.run([J.tool("MKFIXTURE"), "model", path, "--tensor-mb", "1",
                        "--n-tensors", "2", "--vocab", "300"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        raise Fail("mkfixture failed: %s" % err_of(p))
    os.chmod(path, 0o644)
    return path


def as_nobody(args, data=None):
    p = subprocess.run(NOBODY + args, input=data, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    if p.returncode != 0:
        raise Fail("as nobody: %s: %s" % (" ".join(args), err_of(p)))


def sha(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fnv(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def data_offset(path):
    ref = J.refdump(path)[1]
    if ref is None:
        raise Fail("%s is not a GGUF ggml accepts" % path)
    return ref.data_offset


def name_value_span(hdr):
    """(start, length) of general.name's string value in the header."""
    key = b"general.name"
    i = hdr.find(struct.pack("<Q", len(key)) + key)
    if i < 0:
        raise Fail("fixture has no general.name")
    at = i + 8 + len(key)
    if struct.unpack_from("<I", hdr, at)[0] != 8:
        raise Fail("general.name is not a string")
    n = struct.unpack_from("<Q", hdr, at + 4)[0]
    return at + 12, n


def journal_for(path, dev=None, ino=None, broken=False):
    """A complete in-place journal (journal.c's layout) that renames the
    model (general.name -> all 'X'): old bytes are the file's own.
    broken: the new header's magic is not GGUF."""
    d = data_offset(path)
    with open(path, "rb") as f:
        old = f.read(d)
    start, n = name_value_span(old)
    new = old[:start] + b"X" * n + old[start + n:]
    if broken:
        new = b"XXXX" + new[4:]
    st = os.stat(path)
    body = b"GGUFSJNL" + struct.pack(
        "<IIQQQQQQQ", 1, 1, st.st_dev if dev is None else dev,
        st.st_ino if ino is None else ino, st.st_size, st.st_mtime_ns, 0, d, d)
    body += old + new
    return body + struct.pack("<Q", fnv(body)) + b"GGUFSEND"


def shared_dir(root, name):
    d = os.path.join(root, name)
    os.makedirs(d)
    os.chmod(d, 0o1777)
    return d


def sec_race(root):
    secret = os.path.join(root, "rootonly")
    os.makedirs(secret)
    target = fixture(secret, "target.gguf")
    before = sha(target)
    atk = os.path.join(root, "atk")
    os.makedirs(atk)
    os.chown(atk, 65534, 65534)
    own = fixture(root, "own.gguf")
    os.chown(own, 65534, 65534)
    jnl = journal_for(own)
    script = """
import os, sys, time
atk, own, target, jnl = sys.argv[1:5]
name = os.path.join(atk, "model.gguf")
with open(own, "rb") as f:
    data = f.read()
end = time.time() + float(sys.argv[5])
while time.time() < end:
    tmp = os.path.join(atk, "t")
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, name)
    fd = os.open(name + ".ggufs-journal", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, open(jnl, "rb").read()); os.close(fd)
    try:
        os.symlink(target, os.path.join(atk, "l"))
    except FileExistsError:
        pass
    os.rename(os.path.join(atk, "l"), name)
"""
    jfile = os.path.join(root, "own.jnl")
    with open(jfile, "wb") as f:
        f.write(jnl)
    os.chmod(jfile, 0o644)
    os.chmod(own, 0o644)
    flipper = subprocess.Popen(NOBODY + ["python3", "-c", script, atk, own, target,
                                         jfile, "15"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    name = os.path.join(atk, "model.gguf")
    tries = 0
    try:
        t_end = time.time() + 12
        while time.time() < t_end:
            J.run_ggufs(["--recover", name], timeout=30)
            try_rw_mount(name, os.path.join(root, "mnt"))
            tries += 1
    finally:
        flipper.kill()
        flipper.wait()
    if sha(target) != before:
        raise Fail("root's model was rewritten through the flipping name")
    return "%d mounts and recoveries while the name flipped: target intact" % tries


def try_rw_mount(path, mnt, timeout=30):
    """A read-write mount attempt; unmounted again (committing nothing) if
    it started.  The completed process."""
    os.makedirs(mnt, exist_ok=True)
    p = J.run_ggufs([path, mnt], timeout=timeout)
    if J.mountinfo_entry(mnt) is not None:
        J.unmount(mnt, [])
    return p


def sec_symlink(root):
    secret = os.path.join(root, "rootonly")
    os.makedirs(secret)
    target = fixture(secret, "target.gguf")
    d = shared_dir(root, "shared")
    link = os.path.join(d, "model.gguf")
    before = sha(target)
    as_nobody(["ln", "-s", target, link])
    as_nobody(["sh", "-c", "umask 077; cat > \"$1\"", "sh", link + ".ggufs-journal"],
              journal_for(target))
    r = J.run_ggufs(["--recover", link], timeout=30)
    m = try_rw_mount(link, os.path.join(root, "mnt"))
    if sha(target) != before:
        raise Fail("the target of the symlink was rewritten (recover exit %d: %r)"
                   % (r.returncode, err_of(r)))
    if r.returncode == 0 or "symbolic link" not in err_of(r):
        raise Fail("--recover through a symlink: exit %d, %r (want a refusal naming "
                   "the symlink)" % (r.returncode, err_of(r)))
    return "--recover: %r; mount exit %d" % (err_of(r)[:100], m.returncode)


def sec_injection(root):
    d = shared_dir(root, "shared")
    model = fixture(d)
    before = sha(model)
    jpath = model + ".ggufs-journal"
    as_nobody(["sh", "-c", "umask 077; cat > \"$1\"", "sh", jpath], journal_for(model))
    m = try_rw_mount(model, os.path.join(root, "mnt"))
    e = err_of(m)
    if sha(model) != before:
        raise Fail("nobody's journal was applied to root's model (mount exit %d, %r)"
                   % (m.returncode, e))
    if m.returncode == 0 or jpath not in e or "uid 65534" not in e or len(e.splitlines()) != 1:
        raise Fail("mount beside nobody's journal: exit %d, %r (want one line naming "
                   "the journal and its owner)" % (m.returncode, e))
    if not os.path.exists(jpath):
        raise Fail("nobody's journal was removed (left in place is the contract)")
    r = J.run_ggufs(["--recover", model], timeout=30)
    if r.returncode != 1 or jpath not in err_of(r) or sha(model) != before:
        raise Fail("--recover beside nobody's journal: exit %d, %r" % (r.returncode, err_of(r)))
    ro = os.path.join(root, "mnt-ro")
    E.mount(model, ro, ["-o", "ro"])  # read-only still works meanwhile (man page)
    J.unmount(ro, [])
    if sha(model) != before:
        raise Fail("model changed by a read-only mount")
    return e[:140]


def sec_fifo(root):
    d = shared_dir(root, "shared")
    model = fixture(d)
    before = sha(model)
    jpath = model + ".ggufs-journal"
    as_nobody(["mkfifo", "-m", "600", jpath])
    t0 = time.time()
    m = try_rw_mount(model, os.path.join(root, "mnt"), timeout=20)
    e = err_of(m)
    if m.returncode == 0 or jpath not in e or "FIFO" not in e:
        raise Fail("mount beside a FIFO journal: exit %d, %r" % (m.returncode, e))
    if sha(model) != before:
        raise Fail("model changed")
    return "%.1fs: %s" % (time.time() - t0, e[:120])


def sec_other_inode(root):
    d = shared_dir(root, "shared")
    model = fixture(d)
    before = sha(model)
    jpath = model + ".ggufs-journal"
    st = os.stat(model)
    fd = os.open(jpath, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, journal_for(model, ino=st.st_ino + 1))
    os.close(fd)
    m = try_rw_mount(model, os.path.join(root, "mnt"))
    e = err_of(m)
    if sha(model) != before:
        raise Fail("a journal for another inode was applied (exit %d, %r)" % (m.returncode, e))
    if m.returncode == 0 or jpath not in e or "inode" not in e:
        raise Fail("mount beside a journal for another inode: exit %d, %r"
                   % (m.returncode, e))
    return e[:140]


def sec_bad_header(root):
    d = shared_dir(root, "shared")
    model = fixture(d)
    before = sha(model)
    jpath = model + ".ggufs-journal"
    fd = os.open(jpath, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, journal_for(model, broken=True))
    os.close(fd)
    m = try_rw_mount(model, os.path.join(root, "mnt"))
    e = err_of(m)
    if sha(model) != before:
        raise Fail("a journal with an invalid new header was applied (exit %d, %r)"
                   % (m.returncode, e))
    if m.returncode == 0 or jpath not in e or "new header" not in e:
        raise Fail("mount beside a journal with an invalid new header: exit %d, %r"
                   % (m.returncode, e))
    return e[:140]


def sec_ctime(root):
    d = os.path.join(root, "own")
    os.makedirs(d)
    model = fixture(d)
    mnt = os.path.join(root, "mnt")
    E.mount(model, mnt)
    try:
        E.write_file(os.path.join(mnt, "meta", "mytool.note"), b"mine\n",
                     os.O_WRONLY | os.O_CREAT)
        with open(model, "rb") as f:
            hdr = f.read(data_offset(model))
        start, n = name_value_span(hdr)
        st = os.stat(model)
        fd = os.open(model, os.O_WRONLY)
        os.pwrite(fd, b"Q" * n, start)
        os.close(fd)
        os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
        if os.stat(model).st_mtime_ns != st.st_mtime_ns:
            raise Fail("could not put the mtime back")
        theirs = sha(model)
        u = J.run_ggufs(["-u", mnt], timeout=60)
    finally:
        if J.mountinfo_entry(mnt) is not None:
            J.unmount(mnt, [])
    e = err_of(u)
    if sha(model) != theirs:
        raise Fail("the other program's in-place write was overwritten (ggufs -u exit %d, %r)"
                   % (u.returncode, e))
    if u.returncode != 4 or "ctime" not in e or "saved in" not in e:
        raise Fail("ggufs -u after an in-place write with the mtime put back: exit %d, %r"
                   % (u.returncode, e))
    return e[:160]


def main():
    J.require_fuse()
    if os.geteuid() != 0:
        raise J.Skip("needs root (ggufs as root, the attacker as nobody)")
    if not os.environ.get("XDG_STATE_HOME"):
        raise Fail("XDG_STATE_HOME must be set (run through meson test)")
    top = tempfile.mkdtemp(prefix="ggufs-trust-", dir="/var/tmp")
    os.chmod(top, 0o755)
    failed = []
    try:
        for name, fn in (("a symlink --recover", sec_symlink),
                         ("b journal injection", sec_injection),
                         ("c FIFO journal", sec_fifo),
                         ("d journal for another inode", sec_other_inode),
                         ("e in-place write, mtime put back", sec_ctime),
                         ("f journal with an invalid new header", sec_bad_header),
                         ("g name flipped to a symlink", sec_race)):
            d = os.path.join(top, name[0])
            os.makedirs(d)
            os.chmod(d, 0o755)
            t0 = time.time()
            try:
                what = fn(d)
                J.log("ok   %s (%.1fs): %s" % (name, time.time() - t0, what))
            except Fail as e:
                J.log("FAIL %s (%.1fs): %s" % (name, time.time() - t0, e))
                failed.append(name)
            finally:
                E.cleanup_mounts(d)
    finally:
        E.cleanup_mounts(top)
        shutil.rmtree(top, ignore_errors=True)
    if failed:
        raise Fail("failed: " + "; ".join(failed))


if __name__ == "__main__":
    J.main(main)
