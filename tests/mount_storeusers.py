#!/usr/bin/env python3
"""mount_storeusers: a store mounted by root with -o allow_other, seen by
other users (issue 33), through real FUSE mounts; another user is nobody
(setpriv --reuid=65534 --regid=65534 --clear-groups), or 65533.

Checked:
  1. reading (item 3): a folder store whose models are a 0600 file in a
     0700 folder, a 0644 file in a 0700 folder, a 0600 file in an open
     folder, a 2-shard set with one 0600 shard, a 0644 file in a 0750
     folder of group 4321, and a 0644 file in an open folder.  nobody
     reads the open model's meta/ (ggml's architecture) and lists it, and
     gets EACCES on every path into each of the others (meta/, the live
     view, tensors/, a listing); nobody with group 4321 reads the group's
     model; models.tsv shows nobody the private models' names only; root
     reads them all (the mount's owner); a chmod on disk is followed
     within seconds, both ways; an HF cache whose blobs/ is 0700 (the
     snapshots' links lead there) is refused until it is 0755;
  2. eviction (item 4): -o max_models=2, root edits a model (a pending
     edit); nobody reading two other models in turn does not commit it
     (the file's bytes on disk unchanged, the edit still shown);
  3. holding (item 4): -o max_models=2 and 4 models; nobody holds a file
     open in one model, a second model's open fails with EMFILE, and so
     does user 65533's; root still reads the other models in turn;
  4. forgetting (item 2): a folder of 4000 empty *.gguf renamed once a
     second, listed through the mount after each rename: the daemon's RSS
     (/proc/PID/status) after 24 renames stays within 3 MiB of what it was
     after 12 (it grew by ~0.9 MiB a rename when nodes were never freed;
     under ASan, with no quarantine).
Exit 0 pass, 1 fail, 77 skip (no FUSE, not root, no setpriv).
"""

import hashlib
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_stores as S  # noqa: E402

Fail = J.Fail
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
GROUPED = ["setpriv", "--reuid=65534", "--regid=65534", "--groups=4321", "--"]
OTHER = ["setpriv", "--reuid=65533", "--regid=65533", "--clear-groups", "--"]
ALICE = 1000


def as_user(who, argv, timeout=30):
    return subprocess.run(who + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def place(src, dst, mode, uid=0, gid=0):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    os.chown(dst, uid, gid)
    os.chmod(dst, mode)


def folder(path, mode, uid=0, gid=0):
    os.makedirs(path, exist_ok=True)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def arch_of(path):
    """ggml's general.architecture of a GGUF on disk."""
    r = J.refdump(path)[1]
    if r is None:
        raise Fail("ggml rejects %s" % path)
    return S.kv_of(r, b"general.architecture")


def readers_store(tmp):
    """The store of check 1: {name: (files, who may read)}."""
    made = dict(S.mkstore("dir", os.path.join(tmp, "made")))
    tiny, split = made["tiny-a"], made["tiny-split"]
    store = os.path.join(tmp, "readers")
    folder(store, 0o755)
    folder(os.path.join(store, "alice"), 0o700, ALICE, ALICE)
    place(tiny, os.path.join(store, "alice", "private.gguf"), 0o600, ALICE, ALICE)
    place(tiny, os.path.join(store, "alice", "hidden.gguf"), 0o644, ALICE, ALICE)
    folder(os.path.join(store, "open"), 0o755)
    place(tiny, os.path.join(store, "open", "public.gguf"), 0o644)
    place(tiny, os.path.join(store, "open", "secret.gguf"), 0o600, ALICE, ALICE)
    s1 = os.path.join(store, "open", os.path.basename(split))
    place(split, s1, 0o644)
    place(split.replace("-00001-of-", "-00002-of-"), s1.replace("-00001-of-", "-00002-of-"), 0o600)
    folder(os.path.join(store, "team"), 0o750, 0, 4321)
    place(tiny, os.path.join(store, "team", "shared.gguf"), 0o644)
    return store


def denied(who, argv, what):
    p = as_user(who, argv)
    err = p.stderr.decode(errors="replace")
    if p.returncode == 0:
        raise Fail("%s: another user read it through the store (%s): %r"
                   % (what, " ".join(argv), p.stdout[:80]))
    if "Permission denied" not in err:
        raise Fail("%s: %s failed, but not with EACCES: %s" % (what, " ".join(argv), err.strip()))


def check_readers(tmp):
    mnt = os.path.join(tmp, "mnt")
    store = readers_store(tmp)
    want = arch_of(os.path.join(store, "open", "public.gguf"))
    private = ["alice/private", "alice/hidden", "open/secret", "open/tiny-split"]
    with S.Fg(store, mnt, ["-o", "ro,allow_other"]):
        key = os.path.join(mnt, "open", "public", "meta", "general.architecture")
        p = as_user(NOBODY, ["cat", key])
        if p.returncode != 0 or p.stdout.decode().strip() != want:
            raise Fail("nobody could not read open/public (0644 in an open folder): %r %r"
                       % (p.stdout, p.stderr))
        if as_user(NOBODY, ["ls", os.path.join(mnt, "open", "public", "tensors")]).returncode != 0:
            raise Fail("nobody could not list open/public/tensors")
        for name in private:
            d = os.path.join(mnt, name)
            base = os.path.basename(name)
            denied(NOBODY, ["cat", os.path.join(d, "meta", "general.architecture")], name + "/meta")
            denied(NOBODY, ["ls", d], name)
            denied(NOBODY, ["ls", os.path.join(d, "tensors")], name + "/tensors")
            denied(NOBODY, ["head", "-c", "4", os.path.join(d, base + ".gguf")], name + "'s live view")
        J.log("ok   nobody reads open/public, and gets EACCES on %s (meta/, tensors/, the live view)"
              % ", ".join(private))
        team = os.path.join(mnt, "team", "shared", "meta", "general.architecture")
        denied(NOBODY, ["cat", team], "team/shared without group 4321")
        p = as_user(GROUPED, ["cat", team])
        if p.returncode != 0 or p.stdout.decode().strip() != want:
            raise Fail("nobody with group 4321 could not read team/shared (0750 folder of 4321): %r"
                       % p.stderr)
        J.log("ok   team/shared (a 0750 folder of group 4321): read with the group, refused without")
        p = as_user(NOBODY, ["cat", os.path.join(mnt, "models.tsv")])
        rows = {ln.split("\t")[0]: ln.split("\t")[1:] for ln in p.stdout.decode().splitlines()[1:]}
        for name in private:
            if rows.get(name) != ["-"] * 7:
                raise Fail("models.tsv shows nobody %s's line %r: only its name is theirs" % (name, rows.get(name)))
        if rows.get("open/public", ["-"])[0] != want:
            raise Fail("models.tsv shows nobody open/public as %r" % rows.get("open/public"))
        J.log("ok   models.tsv as nobody: the private models' names only, open/public's whole line")
        for name in private + ["team/shared"]:
            a = S.meta(mnt, name, "general.architecture").strip()
            if a != want:
                raise Fail("root reads %s/meta/general.architecture as %r" % (name, a))
        J.log("ok   root (the mount's owner) reads every model")
        # A chmod on disk shows within a second or so, both ways.
        os.chmod(os.path.join(store, "alice"), 0o755)
        os.chmod(os.path.join(store, "alice", "private.gguf"), 0o644)
        os.chmod(os.path.join(store, "open", "public.gguf"), 0o600)
        priv = os.path.join(mnt, "alice", "private", "meta", "general.architecture")
        deadline = time.time() + 5
        while as_user(NOBODY, ["cat", priv]).returncode != 0 or as_user(NOBODY, ["cat", key]).returncode == 0:
            if time.time() > deadline:
                raise Fail("5 s after chmod on disk, nobody's access through the store has not followed "
                           "(alice/private opened to all, open/public closed)")
            time.sleep(0.2)
        J.log("ok   a chmod on disk is followed: alice/private readable, open/public refused")


def check_hf(tmp):
    """An HF cache whose blobs/ is 0700: the snapshot's links lead there."""
    mnt = os.path.join(tmp, "mnt")
    store = os.path.join(tmp, "hf")
    made = S.mkstore("hf", store)
    blobs = os.path.join(store, "models--tiny--Tiny-GGUF", "blobs")
    os.chmod(blobs, 0o700)
    with S.Fg(store, mnt, ["-o", "ro,allow_other"]):
        for name, _ in made:
            denied(NOBODY, ["cat", os.path.join(mnt, name, "meta", "general.architecture")], "hf " + name)
        os.chmod(blobs, 0o755)
        name = made[0][0]
        deadline = time.time() + 5
        while as_user(NOBODY, ["cat", os.path.join(mnt, name, "meta", "general.architecture")]).returncode != 0:
            if time.time() > deadline:
                raise Fail("hf %s: nobody cannot read it once blobs/ is 0755" % name)
            time.sleep(0.2)
    J.log("ok   an HF cache with a 0700 blobs/: nobody gets EACCES on its %d models (the links' targets count), "
          "reads them once it is 0755" % len(made))


def check_eviction(tmp):
    mnt = os.path.join(tmp, "mnt")
    made = dict(S.mkstore("dir", os.path.join(tmp, "made4")))
    store = os.path.join(tmp, "evict")
    folder(store, 0o755)
    for n in ("a", "b", "c"):
        place(made["tiny-a"], os.path.join(store, n + ".gguf"), 0o644)
    a = os.path.join(store, "a.gguf")
    before = sha(a)
    with S.Fg(store, mnt, ["-o", "allow_other,max_models=2"]):
        S.set_meta(mnt, "a", "general.name", "edited by root")
        for _ in range(3):
            for n in ("b", "c"):
                p = as_user(NOBODY, ["cat", os.path.join(mnt, n, "meta", "general.architecture")])
                if p.returncode != 0:
                    raise Fail("nobody could not read %s: %s" % (n, p.stderr.decode(errors="replace")))
        if sha(a) != before:
            raise Fail("nobody's reads of b and c (-o max_models=2) committed root's pending edit of a "
                       "(a.gguf changed on disk)")
        shown = S.meta(mnt, "a", "general.name")
        if shown.strip() != "edited by root":
            raise Fail("root's pending edit of a is not shown after nobody's reads: %r" % shown)
    J.log("ok   -o max_models=2: nobody reading b and c in turn leaves root's pending edit of a pending")


def holder(who, path):
    """A process of user who holding path open until killed."""
    p = subprocess.Popen(who + ["sh", "-c", 'exec 3<"$1" && echo held && exec sleep 60', "sh", path],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline().decode().strip()
    if line != "held":
        p.wait(5)
        return p, p.stderr.read().decode(errors="replace").strip()
    return p, None


def hold_models(mnt, names, procs, m):
    """nobody holds m1 and tries m2, 65533 tries m2; root reads m2..m4."""
    key = os.path.join(mnt, "%s", "meta", "general.architecture")
    errs = []
    for who, n in ((NOBODY, "m1"), (NOBODY, "m2"), (OTHER, "m2")):
        p, err = holder(who, key % n)
        procs.append(p)
        errs.append(err)
    for _ in range(2):
        for n in names[1:]:
            try:
                S.meta(mnt, n, "general.architecture")
            except OSError as e:
                raise Fail("root's read of %s failed (%s) while other users hold files open (-o max_models=2)"
                           % (n, os.strerror(e.errno)))
    if errs[0]:
        raise Fail("nobody could not hold m1 open: %s" % errs[0])
    for what, err in (("nobody", errs[1]), ("user 65533", errs[2])):
        if not err or "Too many open files" not in err:
            raise Fail("%s holds m2 open while nobody holds m1 (-o max_models=2): not refused with EMFILE (%r)"
                       % (what, err))
    if "user 65534 holds files open" not in m.log():
        raise Fail("the log does not say nobody's open was refused: %r" % m.log()[-500:])


def check_holding(tmp):
    mnt = os.path.join(tmp, "mnt")
    made = dict(S.mkstore("dir", os.path.join(tmp, "made3")))
    store = os.path.join(tmp, "hold")
    folder(store, 0o755)
    names = ["m1", "m2", "m3", "m4"]
    for n in names:
        place(made["tiny-a"], os.path.join(store, n + ".gguf"), 0o644)
    procs = []
    with S.Fg(store, mnt, ["-o", "ro,allow_other,max_models=2"]) as m:
        try:
            hold_models(mnt, names, procs, m)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
    J.log("ok   -o max_models=2: nobody holds one model, a second (and 65533's) is EMFILE; root reads the rest")


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    raise Fail("no VmRSS for %d" % pid)


def check_forget(tmp):
    mnt = os.path.join(tmp, "mnt")
    store = os.path.join(tmp, "renames")
    n = 4000
    d = os.path.join(store, "d0")
    os.makedirs(d)
    for i in range(n):
        open(os.path.join(d, "m%05d.gguf" % i), "w").close()
    seen = {}
    # Under AddressSanitizer, freed memory waits in its quarantine (256 MiB):
    # none here, so that what the daemon frees is used again, as without it.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0").lstrip(":")
    with S.Fg(store, mnt, ["-o", "ro"], env=env) as m:
        for r in range(1, 25):
            new = os.path.join(store, "d%d" % r)
            os.rename(d, new)
            d = new
            deadline = time.time() + 5
            while sorted(os.listdir(mnt)) != ["d%d" % r, "models.tsv"]:
                if time.time() > deadline:
                    raise Fail("the rename to d%d is not shown within 5 s: %r" % (r, os.listdir(mnt)))
                time.sleep(0.1)
            got = len(os.listdir(os.path.join(mnt, "d%d" % r)))
            if got != n:
                raise Fail("d%d lists %d names, not %d" % (r, got, n))
            seen[r] = rss_kib(m.pid)
        # The kernel's FORGETs of the last renames come when it gets to them
        # (the names are told to it by the daemon's inval thread): on a busy
        # machine a generation or two may still be held at the sample.  The
        # least RSS over a few seconds is what the daemon keeps; without
        # forgetting (6da5eae) it only grows.
        deadline = time.time() + 5
        while seen[24] - seen[12] > 3 * 1024 and time.time() < deadline:
            time.sleep(0.25)
            seen[24] = min(seen[24], rss_kib(m.pid))
        grown = seen[24] - seen[12]
        J.log("     RSS after renames 4, 12, 24: %d, %d, %d KiB (f_files %d)"
              % (seen[4], seen[12], seen[24], os.statvfs(mnt).f_files))
        if grown > 3 * 1024:
            raise Fail("a folder of %d names renamed 12 more times grew the daemon by %d KiB (RSS %d -> %d KiB): "
                       "nodes are not forgotten" % (n, grown, seen[12], seen[24]))
    J.log("ok   %d names renamed 24 times: the daemon grew by %d KiB from rename 12 to 24" % (n, grown))


def run():
    J.require_fuse()
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        raise J.Skip("needs root and setpriv (another user, allow_other)")
    with J.store_scratch("ggufs-storeusers-", 0o755) as (tmp, mnt):  # 0755: other users reach the mount point
        J.run_watched(mnt, 300, J.chosen("STOREUSERS_ONLY", (check_readers, check_hf, check_eviction,
                                                             check_holding, check_forget)), tmp)


if __name__ == "__main__":
    J.main(run)
