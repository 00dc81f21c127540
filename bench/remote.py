"""bench/remote.py - the `remote` group of bench/run (issue 13): models
served by nginx on 127.0.0.1 (its own configuration, started here),
mounted by URL, against @huggingface/gguf's gguf(url) and curl.

Rows:
  first metadata   `ggufs URL MNT && cat MNT/meta/general.architecture`
                   (150k vocabulary, empty cache) vs node running
                   gguf(url) and printing general.architecture
  first read       every tensor file read once (empty cache) vs
                   `curl -o /dev/null URL` of the whole file, loopback
  first read CPU   the daemon's CPU per GB of the first read against
                   curl's (goal <= 2x), and against curl downloading into a
                   file on tmpfs (which fills the page cache, as every FUSE
                   read must; report)
  limited          the first PART_MB of the first tensor with nginx's
                   limit_rate per connection, vs curl of the same range:
                   what parallel requests gain.  nginx lets each request
                   send one second's worth at once (limit_rate x 1 s)
                   before it limits, so the rate must stay under half of
                   ggufs's 4 MiB request size, or no request is limited
  ranged requests  a second read, then a remount reading everything:
                   ranged requests in nginx's access log (goal 0)
"""
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import webserver as W  # noqa: E402  (tests/webserver.py: nginx on 127.0.0.1)

LIMIT = "2m"  # nginx limit_rate per connection for the limited row
PART_MB = 32  # bytes read in the limited row

LOCATIONS = ("    location /slow/ {{ limit_rate %s; rewrite ^/slow/(.*)$ /$1 break; }}\n"
             % LIMIT)

HF_META = """import { gguf } from "@huggingface/gguf";
const r = await gguf(process.argv[2]);
console.log(r.metadata["general.architecture"]);
"""


def Nginx(d, root):
    # bench/run runs as root: workers as root too, so that its temporary
    # (0700) directories are readable
    return W.Nginx(d, root, LOCATIONS, as_root=True)


def group_remote(b, R):
    """b: the Bench; R: bench/run's module (run, timed, dd, measure, ...)."""
    if not W.exe():
        R.log("bench: remote: nginx is not installed (dev/setup --tests); skipped")
        return
    node, hf = hf_script(R)
    voc, model = b.models["voc"], b.models["m2g"]
    if os.path.dirname(voc) != os.path.dirname(model):
        raise RuntimeError("models are expected in one directory")
    ngx = Nginx(os.path.join(b.work, "nginx"), os.path.dirname(model))
    mnt = b.mnt
    caches = os.path.join(b.work, "rcache")
    try:
        _start(b, R, ngx, voc, mnt, caches, node, hf)
        _read(b, R, ngx, model, mnt, caches)
    finally:
        if R.is_mounted(mnt):
            b.m.unmount(mnt, "ggufs")
        ngx.stop()
        shutil.rmtree(caches, ignore_errors=True)


def hf_script(R):
    """(node, the script printing gguf(url)'s general.architecture), or
    (node or None, None) when node or @huggingface/gguf is missing."""
    mods = os.path.join(R.REPO, ".deps", "node_modules", "@huggingface", "gguf")
    node = shutil.which("node", path=os.path.join(R.REPO, ".deps", "bin") + ":" + os.environ["PATH"])
    if not node or not os.path.isdir(mods):
        R.log("bench: @huggingface/gguf or node missing: its rows are skipped")
        return node, None
    hf = os.path.join(R.REPO, ".deps", "bench_hf_meta.mjs")
    with open(hf, "w") as f:
        f.write(HF_META)
    return node, hf


def fresh(caches):
    shutil.rmtree(caches, ignore_errors=True)
    os.makedirs(caches)
    return ["-o", "cache=" + caches]


def _start(b, R, ngx, voc, mnt, caches, node, hf):
    url = ngx.url(os.path.basename(voc))
    arch = os.path.join(mnt, "meta", "general.architecture")

    def g():
        opts = fresh(caches)

        def go():
            b.m.ggufs(url, mnt, opts=opts)
            r = R.run(["cat", arch], capture=True)
            if r.stdout.strip() != "llama":
                raise RuntimeError("general.architecture reads %r" % r.stdout)
        b.add("rstart_g", R.timed(go))
        b.m.unmount(mnt, "ggufs")

    def n():
        def go():
            r = R.run([node, hf, url], capture=True)
            if r.stdout.strip() != "llama":
                raise RuntimeError("@huggingface/gguf reads %r" % r.stdout)
        b.add("rstart_n", R.timed(go))

    fns = [g, n] if hf else [g]
    for i in range(2 * b.runs + 1):
        for f in (fns if i % 2 == 0 else fns[::-1]):
            f()
    R.log("bench: remote start  ggufs %.0f ms  @huggingface/gguf %s"
          % (1e3 * statistics.median(b.s["rstart_g"]),
             "%.0f ms" % (1e3 * statistics.median(b.s["rstart_n"])) if hf else "-"))


def _read(b, R, ngx, model, mnt, caches):
    name = os.path.basename(model)
    url, slow = ngx.url(name), ngx.url("slow/" + name)
    tl = R.tensor_list(b.m, model, mnt)
    total = sum(s for _, _, s in tl)
    fsize = os.path.getsize(model)
    first = min(tl, key=lambda t: t[1])
    p_bytes = min(first[2], PART_MB << 20)
    p_off = first[1]
    b.info["remote_bytes"], b.info["remote_part"] = total, p_bytes
    R.ensure_cached(model)

    def files(lst):
        return [os.path.join(mnt, "tensors", n) for n, _, _ in lst]

    def g():
        b.m.ggufs(url, mnt, opts=fresh(caches))
        pid = R.pid_of("ggufs", mnt)
        b.add_rate("rread_g", total, R.read_files(files(tl), pid))
        m0 = ngx.log_mark()
        R.read_files(files(tl), pid)
        b.m.unmount(mnt, "ggufs")
        b.m.ggufs(url, mnt, opts=["-o", "cache=" + caches])
        R.read_files(files(tl), R.pid_of("ggufs", mnt))
        b.add("rranged_g", ngx.ranged_since(m0))
        b.add("rranged_n", 0)
        b.m.unmount(mnt, "ggufs")

    def n():
        b.add_rate("rread_n", fsize, R.measure(
            lambda: R.run(["curl", "-sf", "-o", "/dev/null", url])))

    def nf():  # the download a user would make instead: into a file (tmpfs)
        b.add_rate("rread_f", fsize, R.measure(lambda: R.run(["curl", "-sf", "-o", DL_FILE, url])))
        os.unlink(DL_FILE)

    def gs():
        b.m.ggufs(slow, mnt, opts=fresh(caches))
        pid = R.pid_of("ggufs", mnt)
        b.add_rate("rslow_g", p_bytes, R.measure(
            lambda: R.dd(files([first])[0], 0, p_bytes), pid))
        b.m.unmount(mnt, "ggufs")

    def ns():
        b.add_rate("rslow_n", p_bytes, R.measure(
            lambda: R.run(["curl", "-sf", "-o", "/dev/null", "-r",
                           "%d-%d" % (p_off, p_off + p_bytes - 1), slow])))

    for i in range(b.runs):
        for f in ([g, n, nf, gs, ns] if i % 2 == 0 else [nf, n, g, ns, gs]):
            f()
        R.log("bench: remote %d/%d  ggufs %.2f  curl %.2f GB/s;  limited: ggufs %.4f  curl %.4f GB/s;"
              "  ranged requests on 2nd read + remount: %d"
              % (i + 1, b.runs, b.s["rread_g"][-1] / R.GB, b.s["rread_n"][-1] / R.GB,
                 b.s["rslow_g"][-1] / R.GB, b.s["rslow_n"][-1] / R.GB, b.s["rranged_g"][-1]))


def rows(b, row, rows_out, gbps, ms):
    """The group's rows in bench/run's table."""
    s, info = b.s, b.info
    row("by URL: start until `cat meta/general.architecture` (150k vocab, empty cache)",
        "rstart_g", "rstart_n", "@huggingface/gguf gguf(url)",
        "<= 1.0x (ggufs/peer time, lower better)", 1.0, higher=False, fmt=ms)
    if "remote_bytes" in info:
        row("by URL: read every tensor once (%.1f GB, empty cache, loopback)"
            % (info["remote_bytes"] / R_GB), "rread_g", "rread_n", "curl -o /dev/null",
            ">= 0.5x (ggufs/curl GB/s)", 0.5)
        cpu_rows(b, row, "by URL", "rread")
        row("first %d MiB of a tensor, nginx limit_rate %s per connection"
            % (info["remote_part"] >> 20, LIMIT), "rslow_g", "rslow_n",
            "curl (one connection)", ">= 2x (parallel requests)", 2.0)
    if "rranged_g" in s:
        v = max(s["rranged_g"])
        rows_out.append(("by URL: ranged requests of a second read + remount reading all",
                         "%d (max of runs)" % v, "0", "-", "0", "yes" if v == 0 else "**no**"))


R_GB = 1e9
# curl's download into a file, for the CPU a first read's page-cache fill
# costs (tmpfs: no disk in the way; removed after each run)
DL_FILE = "/dev/shm/ggufs-bench-download"


def cpu_rows(b, row, what, k):
    """The CPU rows of a first read (keys k_g, k_n, k_f): the daemon's CPU
    per GB against curl -o /dev/null's (the goal) and against curl's
    download into a file (which fills the page cache as a FUSE read
    must)."""
    import statistics

    def cpu(key):
        return "%.2f CPU-s/GB" % statistics.median(b.s[key])
    row("%s: first read, the daemon's CPU per GB" % what, k + "_g_dcpu", k + "_n_cpu",
        "curl -o /dev/null", "<= 2x (daemon/curl CPU, lower better)", 2.0, higher=False, fmt=cpu)
    row("same, against curl downloading into a file (tmpfs: the page cache filled)", k + "_g_dcpu",
        k + "_f_cpu", "curl -o FILE", "report (no goal)", 0.0, higher=False, fmt=cpu)
