"""bench/mix.py - the `mix` group of bench/run (issue 24): models mixed from
several files (-o mix=RECIPE).

Each run, in an order that alternates:
  mount of a mix  `ggufs -o mix=RECIPE BASE MNT` until the root answers a
                  stat, where BASE has N_SHARDS small tensors (the set's
                  merged view, copied) and the recipe takes every one of
                  them from an N_SHARDS-shard set (one tensor a shard,
                  tests/mount_fds.py's writer), vs `ggufs SET MNT` of that
                  set alone (goal <= 2x); both with the daemon's soft
                  RLIMIT_NOFILE at 256
  llama.cpp       load + one token (bench/llama_load.mjs, mmap) from the
                  mixed live view of the llama model (every second layer's
                  tensors from a 3-shard copy of it) vs from the mix
                  materialised by cp (goal <= 2x); both page-cached.  And
                  vs the floor of a view served by FUSE reads: the live
                  view of the unmixed model with -o passthrough=off (a mix
                  has many backing files, FUSE passthrough takes one)
  descriptors     the most descriptors the daemon held (sampled) while
                  reading every tensor of the 1155-source mix (tensors/*),
                  and its VmHWM after, reported
"""
import os
import shutil
import statistics

from shards import _tests  # tests/mount_fds.py: the set's writer, the soft limit
from stores import _status  # a /proc/PID/status field in bytes

N_SHARDS = 1155
MB = 1 << 20


def _make(b, R, top):
    """The files: the many-shard base and set, the llama mix; returns a dict."""
    f = {}
    T = f["T"] = _tests()
    os.mkdir(os.path.join(top, "set"))
    f["set"] = T.make_set(os.path.join(top, "set"), "many", N_SHARDS)[0]
    f["base"] = os.path.join(top, "many.gguf")
    b.m.ggufs(f["set"], b.mnt, opts=["-o", "ro"])
    shutil.copyfile(os.path.join(b.mnt, "many.gguf"), f["base"])
    b.m.unmount(b.mnt, "ggufs")
    f["recipe"] = os.path.join(top, "all.recipe")
    with open(f["recipe"], "w") as w:
        w.write(".* %s\n" % f["set"])
    llama = b.models["llama"]
    os.mkdir(os.path.join(top, "ll"))
    R.run([R.MKSPLIT, llama, os.path.join(top, "ll", "ll"), "3"])
    f["llama"] = llama
    f["ll_recipe"] = os.path.join(top, "ll.recipe")
    with open(f["ll_recipe"], "w") as w:
        w.write("blk\\.[0-9]*[02468]\\..* %s\n" % os.path.join(top, "ll", "ll-00001-of-00003.gguf"))
    f["ll_mat"] = os.path.join(top, "ll-mixed.gguf")
    b.m.ggufs(llama, b.mnt, opts=["-o", "mix=" + f["ll_recipe"], "-o", "ro"])
    shutil.copyfile(os.path.join(b.mnt, os.path.basename(llama)), f["ll_mat"])
    b.m.unmount(b.mnt, "ggufs")
    return f


def _mount(b, R, f, args):
    """A mount under the soft limit of 256 descriptors, until a stat of its
    root."""
    R.run([R.GGUFS] + args + [b.mnt], capture=True, preexec_fn=f["T"].soft_limit)
    b.m.active.add(b.mnt)
    os.stat(b.mnt)


def _mount_mix(b, R, f):
    b.add("mix_mount", R.timed(lambda: _mount(b, R, f, ["-o", "mix=" + f["recipe"], "-o", "ro",
                                                       f["base"]])))
    pid = R.pid_of("ggufs", b.mnt)
    sampler = f["T"].FdSampler(pid)
    sampler.start()
    try:
        tdir = os.path.join(b.mnt, "tensors")
        for n in os.listdir(tdir):
            with open(os.path.join(tdir, n), "rb") as t:
                while t.read(1 << 20):
                    pass
    finally:
        sampler.stop.set()
        sampler.join()
    b.add("mix_fds", sampler.most)
    b.add("mix_hwm", _status(pid, "VmHWM"))
    b.m.unmount(b.mnt, "ggufs")


def _mount_set(b, R, f):
    b.add("mix_set_mount", R.timed(lambda: _mount(b, R, f, ["-o", "ro", f["set"]])))
    b.m.unmount(b.mnt, "ggufs")


def _llama(b, R, f, mixed):
    env = dict(os.environ, PATH=os.path.join(R.REPO, ".deps", "bin") + ":" + os.environ["PATH"])

    def load(path):
        r = R.run(["node", os.path.join(R.REPO, "bench", "llama_load.mjs"), R.NODE_MODULES, path],
                  capture=True, env=env)
        ld, ev = (float(x) / 1e3 for x in r.stdout.split())
        return ld + ev
    R.ensure_cached(f["ll_mat"])
    if mixed:
        opts = ["-o", "mix=" + f["ll_recipe"]] if mixed == "mix" else ["-o", "passthrough=off"]
        b.m.ggufs(f["llama"], b.mnt, opts=opts + ["-o", "ro"])
        b.add("mix_ll_g" if mixed == "mix" else "mix_ll_f",
              load(os.path.join(b.mnt, os.path.basename(f["llama"]))))
        b.m.unmount(b.mnt, "ggufs")
    else:
        b.add("mix_ll_n", load(f["ll_mat"]))


def group_mix(b, R):
    """b: the Bench; R: bench/run's module."""
    top = os.path.join(b.work, "mix")
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    R.log("bench: mix: a %d-shard set and a llama mix" % N_SHARDS)
    try:
        f = _make(b, R, top)
        b.info["mix_n"] = N_SHARDS
        steps = [lambda: _mount_mix(b, R, f), lambda: _mount_set(b, R, f)]
        lsteps = [lambda: _llama(b, R, f, "mix"), lambda: _llama(b, R, f, None),
                  lambda: _llama(b, R, f, "floor")]
        for i in range(b.runs):
            for s in (steps if i % 2 == 0 else steps[::-1]):
                s()
            for s in lsteps[i % 3:] + lsteps[:i % 3]:
                s()
            R.log("bench: mix %d/%d  mount %.0f ms (set alone %.0f)  llama %.0f ms (file %.0f, "
                  "one file's view by FUSE reads %.0f)  "
                  "fds %d  hwm %.0f MB"
                  % (i + 1, b.runs, 1e3 * b.s["mix_mount"][-1], 1e3 * b.s["mix_set_mount"][-1],
                     1e3 * b.s["mix_ll_g"][-1], 1e3 * b.s["mix_ll_n"][-1],
                     1e3 * b.s["mix_ll_f"][-1], b.s["mix_fds"][-1],
                     b.s["mix_hwm"][-1] / MB))
    finally:
        if R.is_mounted(b.mnt):
            R.run(["fusermount3", "-u", b.mnt], check=False, capture=True)
        shutil.rmtree(top, ignore_errors=True)


def rows(b, row, rows_out):
    s, info = b.s, b.info
    if "mix_n" not in info:
        return
    n = info["mix_n"]
    med = lambda k: statistics.median(s[k])  # noqa: E731
    ms = lambda k: "%.1f ms" % (1e3 * med(k))  # noqa: E731
    row("mount of a mix whose recipe takes every tensor from a %d-shard set, until a stat of "
        "the root" % n, "mix_mount", "mix_set_mount", "mount of the set alone",
        "<= 2x (time, lower better)", 2.0, higher=False, fmt=ms)
    row("llama.cpp load + one token from the mixed live view (half the layers from a "
        "3-shard set), page-cached", "mix_ll_g", "mix_ll_n", "the same mix materialised by cp",
        "<= 2x (time, lower better)", 2.0, higher=False, fmt=ms)
    row("same, against the floor of any file FUSE serves by reads: the live view of the unmixed "
        "model with -o passthrough=off (a mix cannot be passed through: many backing files)",
        "mix_ll_g", "mix_ll_f", "one file's view, passthrough off", "<= 1.2x (time, lower better)",
        1.2, higher=False, fmt=ms)
    fds = max(s["mix_fds"])
    rows_out.append(("daemon descriptors (most, sampled) and VmHWM while reading every tensor of "
                     "the %d-source mix, soft limit 256" % n,
                     "%d fds / %.1f MB" % (fds, med("mix_hwm") / MB), "-", "-", "<= 64 fds",
                     "yes" if fds <= 64 else "**no**"))
