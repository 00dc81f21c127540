"""bench/userlive.py - the `userlive` group of bench/run (issue 35): the live
view of a mount made without privileges.

uid 65534 (given /dev/fuse by an ACL, removed in the end) mounts a copy of
the m2g model that it owns, with fusermount3, and the same user, the GGUF
in page cache, each case mounted afresh:
  unedited     maps the live view (a symbolic link to the GGUF, ggufs(1)
               NAME.gguf) and touches every page, first after the mount
               and again; goal <= 1.25x the file's time (rates: >= 0.8x)
  edit pending the same with general.name edited (served by the daemon):
               reported against the file, and against FUSE's own floor,
               libfuse's passthrough_ll run by the same user serving the
               same file (goal: no slower, >= 1x its rate)
  file         the same mapping of the GGUF itself
  llama.cpp    load + one token (bench/llama_load.mjs, mmap) of the llama
               model (a copy the user owns) from the unedited view vs the
               file; goal <= 1.1x
"""
import os
import shutil
import subprocess
import tempfile
import time

UID = 65534
AS_USER = ["setpriv", "--reuid=%d" % UID, "--regid=%d" % UID, "--clear-groups", "--"]


def _own_copy(b, R, name, top):
    dst = os.path.join(top, os.path.basename(b.models[name]))
    R.log("bench: copying %s for uid %d" % (name, UID))
    R.run(["cp", b.models[name], dst])
    os.chown(dst, UID, UID)
    return dst


def _touch(R, path):
    n = int(R.run(AS_USER + ["stat", "-L", "-c", "%s", path], capture=True).stdout)
    r = R.run(AS_USER + [R.tool("helpers"), "mmap_touch", path, "0", str(n)], capture=True)
    return n, float(r.stdout.split()[0])


def _mounted(R, mnt, cmd):
    R.run(AS_USER + cmd, capture=True)
    for _ in range(100):
        if R.is_mounted(mnt):
            return
        time.sleep(0.05)
    raise RuntimeError("the user's mount at %s did not appear" % mnt)


def _unmount(R, mnt, prog):
    pid = R.pid_of(prog, mnt)
    R.run(AS_USER + ["fusermount3", "-u", mnt], capture=True)
    R.wait_gone(pid)


def _maps(b, R, model, mnt):
    view = os.path.join(mnt, os.path.basename(model))
    top = os.path.dirname(model)
    flip = [0]

    def case(key, cmd, prog, path, edit=False):
        def go():
            R.ensure_cached(model)
            if cmd:
                _mounted(R, mnt, cmd)
            try:
                if edit:  # a value other than the last run's (it was committed)
                    flip[0] += 1
                    R.run(AS_USER + ["sh", "-c", "echo userlive %d > '%s/meta/general.name'"
                                     % (flip[0], mnt)])
                for k in ("1", "2"):
                    n, t = _touch(R, path)
                    b.add("%s_m%s" % (key, k), n / t)
            finally:
                if cmd:
                    _unmount(R, mnt, prog)
        return go

    order = [case("uv_n", None, None, model),
             case("uv_l", [R.GGUFS, model, mnt], "ggufs", view),
             case("uv_e", [R.GGUFS, model, mnt], "ggufs", view, edit=True),
             case("uv_p", [R.tool("passthrough_ll"), "-o", "source=" + top, mnt], "passthrough_ll",
                  os.path.join(mnt, os.path.basename(model)))]
    for i in range(b.runs):
        for f in order[i % 4:] + order[:i % 4]:
            f()
        g = lambda k: b.s[k][-1] / R.GB
        R.log("bench: userlive %d/%d  mmap GB/s first/again: file %.1f/%.1f  view %.1f/%.1f  "
              "edited %.1f/%.1f  passthrough_ll %.1f/%.1f"
              % (i + 1, b.runs, g("uv_n_m1"), g("uv_n_m2"), g("uv_l_m1"), g("uv_l_m2"),
                 g("uv_e_m1"), g("uv_e_m2"), g("uv_p_m1"), g("uv_p_m2")))


def _llama(b, R, model, mnt):
    env = dict(os.environ, HOME="/tmp",
               PATH=os.path.join(R.REPO, ".deps", "bin") + ":" + os.environ["PATH"])
    view = os.path.join(mnt, os.path.basename(model))

    def load(path):
        r = R.run(AS_USER + ["node", os.path.join(R.REPO, "bench", "llama_load.mjs"), R.NODE_MODULES,
                             path], capture=True, env=env)
        return sum(float(x) / 1e3 for x in r.stdout.split())

    for i in range(b.runs):
        R.ensure_cached(model)
        load(model)  # unmeasured: the first load of a pair paid a warm-up
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            if k == 0:
                b.add("uv_ll_n", load(model))
            else:
                _mounted(R, mnt, [R.GGUFS, model, mnt])
                try:
                    b.add("uv_ll_l", load(view))
                finally:
                    _unmount(R, mnt, "ggufs")
        R.log("bench: userlive llama %d/%d  file %.0f ms  view %.0f ms"
              % (i + 1, b.runs, 1e3 * b.s["uv_ll_n"][-1], 1e3 * b.s["uv_ll_l"][-1]))


def group_userlive(b, R):
    for t in ("setpriv", "setfacl", "fusermount3"):
        if not shutil.which(t):
            R.log("bench: userlive skipped (%s is missing)" % t)
            return
    # Its own directory, owned by the user (the run's is root's, 0700).
    top = tempfile.mkdtemp(prefix="ggufs-userlive.", dir="/tmp")
    mnt = os.path.join(top, "mnt")
    os.makedirs(mnt)
    for d in (top, mnt):
        os.chown(d, UID, UID)
    subprocess.run(["setfacl", "-m", "u:%d:rw" % UID, "/dev/fuse"], check=True)
    try:
        model = _own_copy(b, R, "m2g", top)
        b.info["userlive_bytes"] = os.path.getsize(model)
        _maps(b, R, model, mnt)
        os.unlink(model)
        if "llama" in b.models:
            llama = _own_copy(b, R, "llama", top)
            b.info["userlive_llama_bytes"] = os.path.getsize(llama)
            _llama(b, R, llama, mnt)
    finally:
        if R.is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
        subprocess.run(["setfacl", "-x", "u:%d" % UID, "/dev/fuse"])
        shutil.rmtree(top, ignore_errors=True)


def rows(b, row, rows_):
    """The group's rows of the report (bench/run's row())."""
    gb = b.info.get("userlive_bytes", 0) / 1e9
    for k, what in (("1", "first after mount"), ("2", "again")):
        row("non-root mount, live view unedited (a link), %.1f GB: mmap, touch every page, %s"
            % (gb, what), "uv_l_m" + k, "uv_n_m" + k, "the file, same user",
            ">= 0.8x (time <= 1.25x the file)", 0.8)
        row("same, an edit pending (served by the daemon): %s" % what, "uv_e_m" + k, "uv_n_m" + k,
            "the file, same user", "report (no goal)", 0.0)
        row("same, an edit pending, against FUSE's floor: %s" % what, "uv_e_m" + k, "uv_p_m" + k,
            "passthrough_ll, same user", ">= 1x passthrough_ll", 1.0)
    ms = lambda k: "%.0f ms" % (1e3 * sorted(b.s[k])[len(b.s[k]) // 2])
    row("non-root mount: llama.cpp loads a %.1f GB model from the unedited view + 1 token"
        % (b.info.get("userlive_llama_bytes", 0) / 1e9), "uv_ll_l", "uv_ll_n", "the file, same user",
        "<= 1.1x (time, lower better)", 1.1, higher=False, fmt=ms)
