#!/usr/bin/env python3
"""mount_userpt: a mount without privileges (issue 35).  A user (uid 65534,
given /dev/fuse by an ACL removed in the end) mounts a small llama it owns
with ggufs through fusermount3, and programs run as that user judge what
they see of the live view MNT/NAME.gguf:

- unedited, the view is a symbolic link to the model file (fs/live/viewlink.c;
  with GGUFS_PASSTHROUGH=off, the suite's second run, a regular file the
  daemon serves, whose bytes every tool reads as the model's),
  so the kernel serves the file itself: lstat says link, readlink names the
  model, stat follows it to the model's own device and inode; `ls -l`
  shows the arrow; cp copies the model's bytes; cp -a and rsync -a copy
  the link, rsync -aL the bytes; numpy.memmap maps the model's bytes;
  llama.cpp (node-llama-cpp) computes the tokens it computes from the file;
- with an edit pending (general.name), the view is a regular file served by
  the daemon: cp and rsync -a copy the edited GGUF (ggml's reader: the new
  name, every tensor byte for byte), numpy maps the same bytes, llama.cpp
  reads the new name and computes the same tokens;
- a reader that opened the unedited view (through the link: the file) keeps
  its bytes after the edit is committed (fsync of meta/: the commit goes to
  a new file), and the committed view is a link again.

Environment (tests/meson.build): GGUFS, MKFIXTURE, REFDUMP, GGUFS_SRCDIR.
Exit 0 pass, 1 fail, 77 skip (no FUSE, setpriv, setfacl or fusermount3).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_edit as E  # noqa: E402
import mount_llama as L  # noqa: E402

Fail = J.Fail
UID = 65534
AS_USER = ["setpriv", "--reuid=%d" % UID, "--regid=%d" % UID, "--clear-groups", "--"]
PY = "/usr/bin/python3"

# Run as the user: what tools see of VIEW.  Prints one JSON object.
PROBE = r"""
import hashlib, json, os, stat, subprocess, sys
view, model, out = sys.argv[1:4]
ls, st, ms = os.lstat(view), os.stat(view), os.stat(model)
r = {"link": stat.S_ISLNK(ls.st_mode), "same_file": (st.st_dev, st.st_ino) == (ms.st_dev, ms.st_ino),
     "size": st.st_size, "target": os.readlink(view) if stat.S_ISLNK(ls.st_mode) else None,
     "ls": subprocess.run(["ls", "-l", view], stdout=subprocess.PIPE, check=True).stdout.decode().strip()}
for name, cmd in (("cp", ["cp", view]), ("cp_a", ["cp", "-a", view]), ("rsync_a", ["rsync", "-a", view]),
                  ("rsync_aL", ["rsync", "-aL", view])):
    dst = os.path.join(out, name + ".gguf")
    p = subprocess.run(cmd + [dst], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    r[name] = {"rc": p.returncode, "err": p.stderr.decode(errors="replace")[-300:],
               "link": os.path.islink(dst), "target": os.readlink(dst) if os.path.islink(dst) else None}
try:
    import numpy as np
    a = np.memmap(view, dtype=np.uint8, mode="r")
    r["numpy"] = hashlib.sha256(a.tobytes()).hexdigest()
except ImportError:
    r["numpy"] = None
print(json.dumps(r))
"""

# Run as the user: opens VIEW, says so, reads it whole after a line on stdin.
HOLDER = r"""
import hashlib, sys
f = open(sys.argv[1], "rb")
print("open", flush=True)
sys.stdin.readline()
print(hashlib.sha256(f.read()).hexdigest(), flush=True)
"""


USER_ENV = dict(os.environ)  # with the user's own state directory (run())


def as_user(cmd, timeout=300):
    p = subprocess.run(AS_USER + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       timeout=timeout, env=USER_ENV)
    return p


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def probe(view, model, out, what):
    os.makedirs(out)
    os.chown(out, UID, UID)
    p = as_user([PY, "-c", PROBE, view, model, out])
    if p.returncode != 0:
        raise Fail("%s: the user's tools failed on %s: %s" % (what, view, p.stderr.decode(errors="replace")[-800:]))
    r = json.loads(p.stdout)
    for name in ("cp", "cp_a", "rsync_a", "rsync_aL"):
        if r[name]["rc"] != 0:
            raise Fail("%s: %s of %s failed: %s" % (what, name, view, r[name]["err"]))
    J.log("     %s: %s" % (what, r["ls"]))
    return r


def llama(mods, model, what):
    """node-llama-cpp run by the user (mount_llama's evaluation)."""
    p = as_user(["node", os.path.join(HERE, "llama_eval.mjs"), mods, model, json.dumps(L.PROMPT), str(L.N_GEN)])
    if p.returncode == 3:
        raise J.Skip("node-llama-cpp cannot be loaded: " + p.stderr.decode(errors="replace")[-500:])
    if p.returncode != 0:
        raise Fail("%s: llama.cpp failed on %s: %s" % (what, model, p.stderr.decode(errors="replace")[-1500:]))
    r = json.loads(p.stdout)
    J.log("     %s: %s" % (what, r["tokens"]))
    return r


# The suite's second run (GGUFS_PASSTHROUGH=off, meson's ptoff setup) is
# -o passthrough=off, which ggufs(1) says turns the link off too: the
# unedited view is then a regular file the daemon serves.
PT_OFF = os.environ.get("GGUFS_PASSTHROUGH") == "off"


def tools_read(out, r, view, mods, base, what, want, copies, label):
    """The copies named (cp, rsync ...) hold bytes want, numpy maps them,
    llama.cpp computes from the view what it computes from base."""
    for name in copies:
        p = os.path.join(out, name + ".gguf")
        if os.path.islink(p) or sha(p) != want:
            raise Fail("%s: %s of the %s did not copy the model's bytes" % (what, name, label))
    if r["numpy"] is not None and r["numpy"] != want:
        raise Fail("%s: numpy.memmap of the %s maps other bytes than the model's" % (what, label))
    got = llama(mods, view, "llama.cpp, " + what)
    if not L.same_math(got, base):
        raise Fail("%s: llama.cpp computes %s from the view, %s from the file" % (what, got["tokens"], base["tokens"]))


def check_served(d, model, r, view, mods, base, what):
    """-o passthrough=off: the unedited view is no link, and every tool
    reads the model's bytes from it."""
    if r["link"] or r["same_file"]:
        raise Fail("%s: with passthrough off the view is still the model file (`%s`)" % (what, r["ls"]))
    tools_read(os.path.join(d, what.replace(" ", "_")), r, view, mods, base, what, sha(model),
               ("cp", "rsync_a", "rsync_aL"), "served view")


def check_unedited(d, mnt, model, view, mods, base, what):
    r = probe(view, model, os.path.join(d, what.replace(" ", "_")), what)
    if PT_OFF:
        check_served(d, model, r, view, mods, base, what)
        return
    if not r["link"] or r["target"] != model or not r["same_file"]:
        raise Fail("%s: the view is not a link to the model file (lstat link %s, target %r, same inode %s): "
                   "`%s`" % (what, r["link"], r["target"], r["same_file"], r["ls"]))
    if not r["ls"].startswith("l") or not r["ls"].endswith("-> " + model):
        raise Fail("%s: ls -l shows %r" % (what, r["ls"]))
    for name in ("cp_a", "rsync_a"):
        if r[name]["target"] != model:
            raise Fail("%s: %s of the view made %r, not the link to %s" % (what, name, r[name]["target"], model))
    tools_read(os.path.join(d, what.replace(" ", "_")), r, view, mods, base, what, sha(model),
               ("cp", "rsync_aL"), "view")


def check_edited(d, mnt, model, view, mods, base, before):
    what = "edit pending"
    r = probe(view, model, os.path.join(d, "edited"), what)
    if r["link"] or r["same_file"]:
        raise Fail("%s: the view is still the model file (`%s`)" % (what, r["ls"]))
    out = os.path.join(d, "edited")
    cp = os.path.join(out, "cp.gguf")
    snap = E.snapshot(cp, what)
    name = E.kv_of(snap, b"general.name")
    if name is None or name[2] != b"user edit\n":
        raise Fail("%s: ggml reads general.name %r from cp of the view" % (what, name))
    if snap.tensors != before.tensors:
        raise Fail("%s: the view's tensors differ from the model's (ggml's reader, sha256 of each)" % what)
    for n in ("rsync_a", "rsync_aL"):
        p = os.path.join(out, n + ".gguf")
        if os.path.islink(p) or sha(p) != sha(cp):
            raise Fail("%s: %s of the view differs from cp of it" % (what, n))
    if r["numpy"] is not None and r["numpy"] != sha(cp):
        raise Fail("%s: numpy.memmap of the view maps other bytes than cp copies" % what)
    got = llama(mods, view, "llama.cpp, " + what)
    if got["name"] != "user edit" or not L.same_math(got, base):
        raise Fail("%s: llama.cpp reads name %r, tokens %s (file: %s)" % (what, got["name"], got["tokens"],
                                                                          base["tokens"]))


def commit_keeps_reader(mnt, model, view):
    """A reader that opened the unedited view keeps its bytes across a commit."""
    want = sha(model)
    h = subprocess.Popen(AS_USER + [PY, "-c", HOLDER, view], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=USER_ENV)
    try:
        if h.stdout.readline().strip() != b"open":
            raise Fail("the reader could not open the view")
        p = as_user(["sh", "-c", "printf 'committed\\n' > %s/meta/general.name" % mnt])
        if p.returncode != 0:
            raise Fail("edit failed: %s" % p.stderr.decode(errors="replace"))
        p = as_user([PY, "-c", "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)",
                     os.path.join(mnt, "meta")])
        if p.returncode != 0:
            raise Fail("fsync of meta/ (the commit) failed: %s" % p.stderr.decode(errors="replace"))
        got, _ = h.communicate(b"go\n", timeout=120)
    finally:
        if h.poll() is None:
            h.kill()
    if got.strip().decode() != want:
        raise Fail("a reader that opened the unedited view read other bytes after the commit")
    if E.kv_of(E.snapshot(model, "commit"), b"general.name")[2] != b"committed\n":
        raise Fail("the commit did not reach the model file")


def run():
    J.require_fuse()
    for t in ("setpriv", "setfacl", "fusermount3", "rsync"):
        if not shutil.which(t):
            raise J.Skip("%s is not installed" % t)
    mods = L.node_modules()
    d = tempfile.mkdtemp(prefix="ggufs-userpt-", dir="/tmp")
    os.chmod(d, 0o755)
    mnt = os.path.join(d, "mnt")
    os.mkdir(mnt)
    model = os.path.join(d, "tiny-llama.gguf")
    acl = had_acl = False
    try:
        L.make_model(model)
        # The suite's state directory is root's: the user's daemon gets its own.
        state = os.path.join(d, "state")
        os.mkdir(state)
        USER_ENV.update(XDG_STATE_HOME=state, HOME=d)
        for p in (d, mnt, model, state):
            os.chown(p, UID, UID)
        before = E.snapshot(model)
        base = llama(mods, model, "llama.cpp, the file")
        # /dev/fuse's extended ACL entries before ours (getfacl -s prints
        # none for a file with the mode's entries only): put back as found.
        had_acl = subprocess.run(["getfacl", "-cs", "/dev/fuse"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL).stdout.strip() != b""
        subprocess.run(["setfacl", "-m", "u:%d:rw" % UID, "/dev/fuse"], check=True)
        acl = True
        with E.Watchdog(mnt, 600, "non-root mount"):
            p = as_user([J.tool("GGUFS"), model, mnt], timeout=60)
            if p.returncode != 0:
                raise Fail("the user's mount failed: %s" % p.stderr.decode(errors="replace"))
            view = os.path.join(mnt, "tiny-llama.gguf")
            check_unedited(d, mnt, model, view, mods, base, "unedited")
            p = as_user(["sh", "-c", "printf 'user edit\\n' > %s/meta/general.name" % mnt])
            if p.returncode != 0:
                raise Fail("the user's edit failed: %s" % p.stderr.decode(errors="replace"))
            check_edited(d, mnt, model, view, mods, base, before)
            p = as_user([J.tool("GGUFS"), "-u", mnt], timeout=120)
            if p.returncode != 0:
                raise Fail("ggufs -u failed: %s" % p.stderr.decode(errors="replace"))
            p = as_user([J.tool("GGUFS"), model, mnt], timeout=60)
            if p.returncode != 0:
                raise Fail("the user's second mount failed: %s" % p.stderr.decode(errors="replace"))
            commit_keeps_reader(mnt, model, view)
            base2 = llama(mods, model, "llama.cpp, the committed file")
            check_unedited(d, mnt, model, view, mods, base2, "after the commit")
            p = as_user([J.tool("GGUFS"), "-u", mnt], timeout=120)
            if p.returncode != 0:
                raise Fail("ggufs -u failed: %s" % p.stderr.decode(errors="replace"))
    finally:
        if J.mountinfo_entry(mnt) is not None:
            subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
        if acl:
            # -x leaves the mask entry it made: a device without an ACL
            # before gets none after (-b), as the machine had it.
            subprocess.run(["setfacl", "-x", "u:%d" % UID, "/dev/fuse"])
            if not had_acl:
                subprocess.run(["setfacl", "-b", "/dev/fuse"])
        time.sleep(0.1)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    J.main(run)
