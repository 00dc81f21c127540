"""bench/shards.py - the `shards` group of bench/run (issue 24): a shard set
of N one-tensor files (the layout of llama.cpp's gguf-split, written by
tests/mount_fds.py's writer), mounted with the daemon's soft RLIMIT_NOFILE
at 256 (as a user's `ulimit -Sn 256`).

Each run (fresh mounts; the set's files stay in the page cache):
  mount           `ggufs FIRST MNT` until the root answers a stat, vs
                  `ggml_open` of the same N files (gguf_init_from_file +
                  gguf_free each, one process): what opening the headers
                  costs without a mount
  read            then every tensors/ file read once: the most descriptors
                  the daemon held meanwhile (/proc/PID/fd, sampled), and
                  its VmRSS and VmHWM after
The baseline runs in the same iteration, which alternates which goes first.
"""
import os
import shutil
import statistics
import sys

from stores import _status  # a /proc/PID/status field in bytes

N = 1155
MAX_FDS = 64  # the bound on the daemon's descriptors while reading
MB = 1 << 20


def _tests():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "tests"))
    import mount_fds  # the set's writer, the soft limit, the sampler
    return mount_fds


def _ggufs(b, R, T, shards):
    mnt = b.mnt

    def mount():
        R.run([R.GGUFS, "-o", "ro", shards[0], mnt], capture=True, preexec_fn=T.soft_limit)
        b.m.active.add(mnt)
        os.stat(mnt)
    b.add("sh_mount_g", R.timed(mount))
    pid = R.pid_of("ggufs", mnt)
    sampler = T.FdSampler(pid)
    sampler.start()
    try:
        for k in range(N):
            with open(os.path.join(mnt, "tensors", "blk.%d.w" % k), "rb") as f:
                f.read()
    finally:
        sampler.stop.set()
        sampler.join()
    b.add("sh_fds", sampler.most)
    b.add("sh_rss", _status(pid, "VmRSS"))
    b.add("sh_hwm", _status(pid, "VmHWM"))
    b.m.unmount(mnt, "ggufs")


def group_shards(b, R):
    """b: the Bench; R: bench/run's module (run, timed, pid_of, ...)."""
    T = _tests()
    top = os.path.join(b.work, "shards")
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    R.log("bench: shards: writing a set of %d shards" % N)
    shards = T.make_set(top, "big", N)
    b.info["shards_n"] = N
    try:
        for i in range(b.runs):
            steps = [lambda: _ggufs(b, R, T, shards),
                     lambda: b.add("sh_mount_n", R.timed(
                         lambda: R.run([R.tool("ggml_open")] + shards)))]
            for f in steps[i % 2:] + steps[:i % 2]:
                f()
            R.log("bench: shards %d/%d  mount %.0f ms (ggml_open %.0f ms)  fds %d  RSS %.1f MB"
                  % (i + 1, b.runs, 1e3 * b.s["sh_mount_g"][-1], 1e3 * b.s["sh_mount_n"][-1],
                     b.s["sh_fds"][-1], b.s["sh_rss"][-1] / MB))
    finally:
        if R.is_mounted(b.mnt):
            R.run(["fusermount3", "-u", b.mnt], check=False, capture=True)
        shutil.rmtree(top, ignore_errors=True)


def rows(b, row, rows_out):
    """The group's rows in bench/run's table."""
    if "shards_n" not in b.info:
        return
    n, s = b.info["shards_n"], b.s
    med = lambda k: statistics.median(s[k])
    row("mount of a %d-shard set (`ggufs FIRST MNT` + stat of the root), soft RLIMIT_NOFILE 256" % n,
        "sh_mount_g", "sh_mount_n", "`ggml_open` of the %d files" % n,
        "report (time, lower better)", 1e9, higher=False, fmt=lambda k: "%.1f ms" % (1e3 * med(k)))
    most = max(s["sh_fds"])
    rows_out.append(("daemon descriptors while reading every tensor of the %d-shard set (most seen)" % n,
                     "%d" % most, "goal %d" % MAX_FDS, "%.2fx" % (most / MAX_FDS),
                     "<= %d (absolute)" % MAX_FDS, "yes" if most <= MAX_FDS else "**no**"))
    rows_out.append(("daemon VmRSS after reading every tensor of the %d-shard set" % n,
                     "%.1f MB" % (med("sh_rss") / MB), "VmHWM %.1f MB" % (med("sh_hwm") / MB),
                     "-", "report", "-"))
