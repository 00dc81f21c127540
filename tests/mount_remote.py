#!/usr/bin/env python3
"""mount_remote: models mounted where they live (issue 13).

A real web server, nginx (Debian's nginx-light), is started on 127.0.0.1
with its own configuration and serves fixtures made by mkfixture and, when
present, ../shared/models.  Each is mounted by URL and judged by ggml's
reader on the local copy exactly as a local mount is (judge.compare_mount:
every meta file, xattr and tensor byte, the live view), except the times
(a URL has Last-Modified, checked to the second) and the mount's source
(the URL).  Then: a remount reads everything from the cache with zero
ranged requests (nginx's access log); redirects; a bearer-token path with
-o header=FILE, and the token not sent after a redirect to another host;
hf:// through HF_ENDPOINT with HF_TOKEN (and HF_TOKEN never sent to a
plain URL); readahead along tensor boundaries (4 KiB of tensor 0 fetches
tensor 1, never tensor 2) and few requests for many small reads; 404 and 401 at mount: one line, exit 1; a remote shard set
whose merged live view ggml accepts; the cache's modes, a corrupted cache
block never served, two mounts of one URL at once, a bounded cache.

A fault-injecting server of our own (tests/faultserver.py) does what nginx
will not: drops connections mid-body, answers 503 then recovers, changes
the file between requests (EIO and one log line, never mixed bytes),
ignores Range (exit 1 at mount), redirects to a signed URL that expires
(resolved again), goes away and comes back on its port (EIO meanwhile,
then served again), stalls (EIO within the bound set by -o net_timeout,
net_retries).

Finally llama.cpp (node-llama-cpp) runs a model from the live view of a
remote mount with the same greedy tokens and probabilities as from the
local file (skipped without node-llama-cpp).
Exit 0 pass, 1 fail, 77 skip (no FUSE, no nginx).
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import faultserver as FS  # noqa: E402
import mount_bounds as MB  # noqa: E402  (vm_hwm, asan_slack)
import webserver as W  # noqa: E402

Fail = J.Fail


_Checker = J.Checker


class RemoteChecker(_Checker):
    """compare_mount's checker, minus what a URL cannot match: the local
    copy's nanosecond times and its path as the mount's source (both
    checked here instead)."""

    def bad(self, msg, group=None):
        if group in ("mtime", "ctime", "atime") or msg.startswith("mountinfo source"):
            return
        _Checker.bad(self, msg, group)


J.Checker = RemoteChecker


LOCATIONS = """
    location /redir/ {{ rewrite ^/redir/(.*)$ /$1 redirect; }}
    location /redir2/ {{ rewrite ^/redir2/(.*)$ /redir/$1 permanent; }}
    location /xredir/ {{ rewrite ^/xredir/(.*)$ http://localhost:{port}/private/$1 redirect; }}
    location /private/ {{
      if ($http_authorization != "Bearer s3cret") {{ return 401; }}
      if ($http_x_secret != "yes") {{ return 403; }}
      rewrite ^/private/(.*)$ /$1 break;
    }}
    location /hf/ {{
      if ($http_authorization != "Bearer hftok") {{ return 401; }}
      rewrite ^/hf/o/r/resolve/(main|v1)/(.*)$ /$2 break;
      return 404;
    }}
"""


def make_model(path, mb, n):
    """mkfixture's model: n tensors of mb MiB in all, at path."""
    p = subprocess.run([J.tool("MKFIXTURE"), "model", path, "--tensor-mb", str(mb), "--n-tensors", str(n)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture model failed: %s" % p.stderr.decode(errors="replace"))


def Nginx(d, www):
    if not W.exe():
        raise J.Skip("nginx is not installed (dev/setup --tests installs nginx-light)")
    try:
        return W.Nginx(d, www, LOCATIONS)
    except RuntimeError as e:
        raise Fail(str(e))


def ranged(lines):
    return [ln for ln in lines if '"bytes=' in ln]


def read_all(mnt):
    """Every file of the tree, read whole: their sha256 by path."""
    out = {}
    for dp, dn, fn in os.walk(mnt):
        for f in fn:
            p = os.path.join(dp, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, mnt)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def tensor_xattrs(mnt):
    """Every tensor's attributes; user.gguf.source's file part (a path
    here, a URL there) cut to its last component, its offset kept."""
    td = os.path.join(mnt, "tensors")
    out = {}
    for n in os.listdir(td):
        p = os.path.join(td, n)
        out[n] = {a: os.getxattr(p, a) for a in os.listxattr(p)}
        src = out[n].get("user.gguf.source")
        if src is None:
            out[n]["user.gguf.source"] = b"<missing>"
        else:
            where, _, off = src.rpartition(b"@")
            out[n]["user.gguf.source"] = where.rsplit(b"/", 1)[-1] + b"@" + off
    return out


def mount_url(url, mnt, args=(), env=None):
    os.makedirs(mnt, exist_ok=True)
    return J.run_ggufs(list(args) + [url, mnt], env=env, timeout=120)


def expect_refused(url, mnt, args, want, env=None):
    p = mount_url(url, mnt, args, env)
    err = p.stderr.decode(errors="replace").strip()
    wants = [want] if isinstance(want, str) else list(want)
    if p.returncode != 1 or len(err.splitlines()) != 1 or any(w not in err for w in wants) or url not in err:
        if J.mountinfo_entry(mnt):
            J.unmount(mnt, [])
        raise Fail("%s: expected exit 1 and one line naming the URL and %r, got %d: %r"
                   % (url, want, p.returncode, err))
    J.log("ok   %s refused: %s" % (url, err))


def judge_remote(local, url, mnt, label, args):
    verdict, ref = J.refdump(local)
    if ref is None:
        raise Fail("%s: ggml rejects the local copy" % label)
    walk = J.walk_gguf(local)
    st = os.stat(local)
    with J.Watchdog(mnt, 300, label):
        with J.Mounted(url, mnt, args=args) as p:
            if p.stderr:
                J.log("%s: ggufs said: %s" % (label, p.stderr.decode(errors="replace").strip()))
            mi = J.mountinfo_entry(mnt)
            if mi is None or mi[1] != url.replace("hf://", "") and not mi[1].startswith("http"):
                raise Fail("%s: mount source %r" % (label, mi and mi[1]))
            nk, nt = J.compare_mount(local, mnt, ref, walk, label, st, True)
            m = os.stat(os.path.join(mnt, "meta")).st_mtime
            if int(m) != int(st.st_mtime):
                raise Fail("%s: times %d, Last-Modified of the file is %d" % (label, m, st.st_mtime))
    return nk, nt


def main():
    J.require_fuse()
    tmp = tempfile.mkdtemp(prefix="ggufs-remote-", dir="/tmp")
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    os.chmod(tmp, 0o755)
    cache = os.path.join(tmp, "cache")
    mnt = os.path.join(tmp, "mnt")
    ngx = None
    try:
        os.makedirs(mnt)
        ngx = Nginx(os.path.join(tmp, "nginx"), www)
        run(tmp, www, cache, mnt, ngx)
    finally:
        for m in (mnt, mnt + "2"):
            if J.mountinfo_entry(m):
                J.unmount(m, [])
        if ngx:
            ngx.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def served_all(ranges, lo, hi):
    """Whether the byte ranges (A, B inclusive) cover lo..hi-1."""
    for a, b in sorted(ranges):
        if a > lo:
            return False
        lo = max(lo, b + 1)
        if lo >= hi:
            return True
    return lo >= hi


def check_signed(srv, tmp, mnt, f0, want0, fast):
    """A quarter of f0 read through a signed URL, every signed URL then
    expired, the rest read: the daemon must resolve the original URL again.
    Where readahead had fetched all the rest before the expiry (a loaded
    machine: seen once under the sanitizer build) nothing needed the URL
    again: that round proves nothing and is made again (3 at most)."""
    quarter = len(want0) // 4
    for attempt in range(3):
        srv.reset()
        c = os.path.join(tmp, "c-signed%d" % attempt)
        with J.Mounted(srv.url("signed", f0), mnt, args=["-o", "cache=" + c] + fast):
            with open(os.path.join(mnt, f0), "rb") as fh:
                first = fh.read(quarter)
                with srv.lock:
                    srv.sig_gen += 1  # every signed URL given so far expires
                    before = list(srv.sig_ranges)
                rest = fh.read()
            if first + rest != want0:
                raise Fail("signed URL: the live view differs from the file")
        if srv.resolves >= 2:
            J.log("ok   an expired signed URL was resolved again from the original (%d redirects)"
                  % srv.resolves)
            return
        if not served_all(before, quarter, len(want0)):
            raise Fail("signed URL: resolved %d times, expected again after it expired" % srv.resolves)
        J.log("note: signed URL round %d: readahead had fetched the rest before the expiry; again"
              % (attempt + 1))
    raise Fail("signed URL: in 3 rounds readahead fetched the whole file before the URL expired")


def run(tmp, www, cache, mnt, ngx):
    fx = os.path.join(tmp, "fx")
    p = subprocess.run([J.tool("MKFIXTURE"), "all", fx], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture all failed: %s" % p.stderr.decode(errors="replace"))
    files = []
    for f in sorted(os.listdir(fx)):
        if f.endswith(".gguf") and J.refdump(os.path.join(fx, f))[1] is not None:
            shutil.copy(os.path.join(fx, f), os.path.join(www, f))
            files.append(f)
    # a model of 4 tensors of 1 MiB: bigger than the first blocks, so that
    # tensor reads need requests of their own
    make_model(os.path.join(www, "big.gguf"), 1, 4)
    files.append("big.gguf")
    shared = J.shared_models()
    for s in shared:
        os.symlink(s, os.path.join(www, os.path.basename(s)))  # nginx follows it
        files.append(os.path.basename(s))
    if not shared:
        J.log("note: ../shared/models absent: real models skipped")
    base = ["-o", "cache=" + cache]

    # 1. every file judged through a remote mount, then a remount: zero
    # ranged requests for everything read again.
    for f in files:
        url = ngx.url(f)
        mark = ngx.log_mark()
        nk, nt = judge_remote(os.path.join(www, f), url, mnt, f, base)
        n1 = len(ranged(ngx.log_since(mark)))
        mark = ngx.log_mark()
        with J.Mounted(url, mnt, args=base):
            again = read_all(mnt)
        rr = ranged(ngx.log_since(mark))
        if rr:
            raise Fail("%s: remount and a second read sent %d ranged requests: %s" % (f, len(rr), rr[:3]))
        J.log("ok   %s by URL: %d keys, %d tensors as ggml reads the local copy (%d ranged requests); "
              "remount + read all: 0 ranged requests" % (f, nk, nt, n1))
    # every file of the tree (f32/, npy/, index.tsv included) and every
    # tensor's xattrs (hashes included) as a local read-only mount shows them
    lmnt = mnt + "-local"
    os.makedirs(lmnt, exist_ok=True)
    for f in ("big.gguf", "tensors.gguf"):
        with J.Mounted(os.path.join(www, f), lmnt, args=["-o", "ro"]):
            want = read_all(lmnt)
            want_x = tensor_xattrs(lmnt)
        with J.Mounted(ngx.url(f), mnt, args=base):
            got = read_all(mnt)
            got_x = tensor_xattrs(mnt)
        if got != want or got_x != want_x:
            bad = sorted(k for k in set(want) | set(got) if got.get(k) != want.get(k))
            raise Fail("%s by URL: the tree differs from a local mount's: %s %s"
                       % (f, bad[:5], [k for k in want_x if got_x.get(k) != want_x[k]][:3]))
        J.log("ok   %s by URL: all %d files and the tensors' xattrs (hashes too) as a local mount's"
              % (f, len(got)))
    # cache layout: private
    for dp, dn, fn in os.walk(cache):
        for n in dn:
            if os.stat(os.path.join(dp, n)).st_mode & 0o777 != 0o700:
                raise Fail("cache directory %s is not 0700" % os.path.join(dp, n))
        for n in fn:
            if os.stat(os.path.join(dp, n)).st_mode & 0o777 != 0o600:
                raise Fail("cache file %s is not 0600" % os.path.join(dp, n))
    J.log("ok   cache directories 0700, files 0600")

    f0 = "tensors.gguf" if "tensors.gguf" in files else files[0]
    local0 = os.path.join(www, f0)
    want0 = open(local0, "rb").read()

    def live_bytes(m, name=f0):
        with open(os.path.join(m, name), "rb") as fh:
            return fh.read()

    # 2. redirects (one and two hops, same origin); read-only
    for pre in ("redir/", "redir2/"):
        with J.Mounted(ngx.url(pre + f0), mnt, args=["-o", "cache=" + tmp + "/c-redir-" + pre[:-1]]):
            if live_bytes(mnt) != want0:
                raise Fail("through %s: the live view differs from the file" % pre)
            try:
                with open(os.path.join(mnt, "meta", os.listdir(os.path.join(mnt, "meta"))[0]), "w") as fh:
                    fh.write("x")
                raise Fail("a remote mount accepted a write")
            except OSError as e:
                if e.errno != 30:
                    raise Fail("a write to a remote mount failed with %s, expected EROFS" % e)
    J.log("ok   redirects followed (1 and 2 hops); writes fail with EROFS")

    # 3. errors at mount: one line, exit 1
    expect_refused(ngx.url("missing.gguf"), mnt, base, "HTTP 404")
    expect_refused(ngx.url("private/" + f0), mnt, base, "HTTP 401")

    # 4. credentials from a header file; never sent to another host
    hdr = os.path.join(tmp, "headers")
    with open(hdr, "w") as fh:
        fh.write("# test\nAuthorization: Bearer s3cret\nX-Secret: yes\n")
    os.chmod(hdr, 0o600)
    with J.Mounted(ngx.url("private/" + f0), mnt, args=base + ["-o", "header=" + hdr]):
        if live_bytes(mnt) != want0:
            raise Fail("private path: the live view differs from the file")
        mi = open("/proc/self/mountinfo").read()
        if "s3cret" in mi:
            raise Fail("the token appears in /proc/self/mountinfo")
    mark = ngx.log_mark()
    expect_refused(ngx.url("xredir/" + f0), mnt, base + ["-o", "header=" + hdr], "HTTP 401")
    leaked = [ln for ln in ngx.log_since(mark) if ln.endswith(" localhost") and ("s3cret" in ln or '"yes"' in ln)]
    if leaked:
        raise Fail("credentials were sent to another host after a redirect: %s" % leaked)
    J.log("ok   -o header=FILE: bearer-protected path read; nothing sent to another host after a redirect")

    # 5. hf:// through HF_ENDPOINT, HF_TOKEN for it only
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:%d/hf/" % ngx.port, HF_TOKEN="hftok")
    for src in ("hf://o/r/" + f0, "hf://o/r/" + f0 + "@v1"):
        p = mount_url(src, mnt, base, env)
        if p.returncode != 0:
            raise Fail("%s: exit %d: %s" % (src, p.returncode, p.stderr.decode(errors="replace")))
        try:
            if live_bytes(mnt) != want0:
                raise Fail("%s: the live view differs from the file" % src)
        finally:
            J.unmount(mnt)
    # an hf:// 404 names the URL it was resolved to (issue 21)
    expect_refused("hf://o/r/" + f0 + "@nope", mnt, base, ("HTTP 404", "(at %s)" % ngx.url("hf/o/r/resolve/nope/" + f0)), env)
    mark = ngx.log_mark()
    with _env_mount(ngx.url(f0), mnt, base, env):
        live_bytes(mnt)
    if any("hftok" in ln for ln in ngx.log_since(mark)):
        raise Fail("HF_TOKEN was sent to a plain http:// URL")
    J.log("ok   hf://o/r/PATH[@REV] through HF_ENDPOINT with HF_TOKEN; HF_TOKEN not sent elsewhere")

    # 6. a remote shard set: the merged live view is what ggml reads
    if "tensors.gguf" in files:
        prefix = os.path.join(www, "set")
        p = subprocess.run([J.tool("MKSPLIT"), local0, prefix, "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise Fail("mksplit: %s" % p.stderr.decode(errors="replace"))
        local_set = os.path.join(mnt + "-local")
        os.makedirs(local_set, exist_ok=True)
        with J.Mounted(prefix + "-00001-of-00003.gguf", local_set, args=["-o", "ro"]):
            want_set = read_all(local_set)
        with J.Mounted(ngx.url("set-00001-of-00003.gguf"), mnt, args=base):
            got_set = read_all(mnt)
            out = os.path.join(tmp, "merged.gguf")
            shutil.copyfile(os.path.join(mnt, "set.gguf"), out)
        if got_set != want_set:
            bad = sorted(k for k in want_set if got_set.get(k) != want_set[k])
            raise Fail("remote shard set differs from the local mount of it: %s" % bad[:5])
        if J.refdump(out)[1] is None:
            raise Fail("ggml rejects the merged live view of the remote shard set")
        # a download link's query string ("?download=true", the Hub's
        # download button) is the same for every shard
        with J.Mounted(ngx.url("set-00001-of-00003.gguf?download=true"), mnt, args=base):
            if read_all(mnt) != want_set:
                raise Fail("remote shard set by a URL with a query string differs from the local mount")
        with J.Mounted(ngx.url(f0 + "?download=true"), mnt, args=base):
            if live_bytes(mnt) != want0:
                raise Fail("%s?download=true: the live view is not %s" % (f0, f0))
        J.log("ok   remote 3-shard set: every file as the local mount's, merged live view accepted by ggml; "
              "the same by a URL ending in ?download=true; a single file's live view named without it")

    check_readahead(tmp, ngx, mnt)
    check_hot(tmp, ngx, mnt)
    check_hot_shards(tmp, ngx, mnt)
    check_cache(tmp, ngx, f0, want0, mnt, live_bytes)
    check_faults(tmp, www, "big.gguf", open(os.path.join(www, "big.gguf"), "rb").read(), mnt)
    check_log_storm(tmp, www, mnt)
    check_llama(tmp, ngx, www, mnt)


class _env_mount:
    def __init__(self, url, mnt, args, env):
        self.url, self.mnt, self.args, self.env = url, mnt, args, env

    def __enter__(self):
        p = mount_url(self.url, self.mnt, self.args, self.env)
        if p.returncode != 0:
            raise Fail("%s: exit %d: %s" % (self.url, p.returncode, p.stderr.decode(errors="replace")))

    def __exit__(self, *a):
        J.unmount(self.mnt)
        return False


def covered(lines):
    """The byte ranges of ranged requests in nginx's log lines."""
    out = []
    for ln in lines:
        i = ln.find('"bytes=')
        if i >= 0:
            a, b = ln[i + 7:ln.index('"', i + 7)].split("-")
            out.append((int(a), int(b) + 1))
    return out


def check_readahead(tmp, ngx, mnt):
    """A reader of tensor N gets N+1 fetched ahead, not N+2; small reads
    never cost one request each."""
    model = os.path.join(ngx.www, "ra.gguf")
    make_model(model, 16, 4)
    url = ngx.url("ra.gguf")
    with J.Mounted(url, mnt, args=["-o", "cache=" + os.path.join(tmp, "c-ra")]):
        td = os.path.join(mnt, "tensors")
        ts = sorted(os.listdir(td), key=lambda n: int(J.xattr(os.path.join(td, n), "user.gguf.offset")))
        ext = [(int(J.xattr(os.path.join(td, n), "user.gguf.offset")),
                int(J.xattr(os.path.join(td, n), "user.gguf.size"))) for n in ts]
        mark = ngx.log_mark()
        fd = os.open(os.path.join(td, ts[0]), os.O_RDONLY)
        os.read(fd, 4096)
        os.close(fd)
        deadline = time.time() + 10
        t1_end = ext[1][0] + ext[1][1]
        while time.time() < deadline:
            got = covered(ngx.log_since(mark))
            if any(a < t1_end <= b for a, b in got):
                break
            time.sleep(0.1)
        else:
            raise Fail("readahead: reading 4 KiB of tensor 0 did not fetch tensor 1 (ranges %s)" % got)
        time.sleep(0.5)
        got = covered(ngx.log_since(mark))
        if any(b > ext[2][0] + (1 << 16) for a, b in got):
            raise Fail("readahead went into tensor 2 after a read of tensor 0: %s" % got)
        # the rest, in 4 KiB reads: whole blocks ahead, few requests
        mark = ngx.log_mark()
        n = 0
        for name in ts:
            fd = os.open(os.path.join(td, name), os.O_RDONLY)
            while os.read(fd, 4096):
                n += 1
            os.close(fd)
        reqs = len(ranged(ngx.log_since(mark)))
        if reqs > 64:
            raise Fail("%d reads of 4 KiB cost %d ranged requests" % (n, reqs))
    J.log("ok   readahead: 4 KiB of tensor 0 fetched tensor 1 ahead, nothing of tensor 2; "
          "%d reads of 4 KiB (%d MiB) then cost %d ranged requests" % (n, sum(e[1] for e in ext) >> 20, reqs))


def check_hot(tmp, ngx, mnt):
    """A first read is served from the runs just fetched (kept in memory
    up to 64 MiB, remote/source.c) and from the cache file once they have
    left: a 120 MiB model read backwards in scattered 1 MiB pieces, then
    forwards, gives the file's bytes; the cache file was written past the
    page cache (direct I/O) where its filesystem allows it."""
    model = os.path.join(ngx.www, "hot.gguf")
    make_model(model, 120, 5)
    want = open(model, "rb").read()
    c = os.path.join(tmp, "c-hot")
    name = os.path.join(mnt, "hot.gguf")
    with J.Mounted(ngx.url("hot.gguf"), mnt, args=["-o", "cache=" + c]):
        fd = os.open(name, os.O_RDONLY)
        try:
            step = (1 << 20) + 4096 * 3  # pieces that straddle blocks and runs
            for off in range(len(want) - step, -1, -3 * step):
                if os.pread(fd, step, off) != want[off:off + step]:
                    raise Fail("hot runs: bytes %d-%d read backwards differ from the file" % (off, off + step))
            for off in range(0, len(want), 1 << 20):
                if os.pread(fd, 1 << 20, off) != want[off:off + (1 << 20)]:
                    raise Fail("hot runs: bytes at %d differ from the file" % off)
        finally:
            os.close(fd)
        data = [os.path.join(dp, f) for dp, dn, fn in os.walk(c) for f in fn if f == "data"][0]
        out = subprocess.run(["fincore", "-b", "-n", "-o", "RES", data], stdout=subprocess.PIPE, text=True)
        res = int(out.stdout.split()[0]) if out.returncode == 0 and out.stdout.strip() else None
    fs = subprocess.run(["stat", "-f", "-c", "%T", c], stdout=subprocess.PIPE, text=True).stdout.strip()
    if res is not None and fs in ("ext2/ext3", "xfs", "btrfs") and res > len(want) // 4:
        raise Fail("hot runs: %d bytes of the cache file (model: %d bytes) are in the page cache after a first read "
                   "(%s): written through it, not by direct I/O" % (res, len(want), fs))
    mark = ngx.log_mark()
    with J.Mounted(ngx.url("hot.gguf"), mnt, args=["-o", "cache=" + c]):
        if open(name, "rb").read() != want:
            raise Fail("hot runs: a remount serves wrong bytes from the cache written by direct I/O")
    if ranged(ngx.log_since(mark)):
        raise Fail("hot runs: a remount sent ranged requests")
    os.unlink(model)
    J.log("ok   120 MiB read backwards and forwards by URL: right bytes from memory and cache; cache file "
          "written past the page cache (%s of %d bytes resident, %s); remount from the cache alone"
          % (res, len(want), fs))


def check_hot_shards(tmp, ngx, mnt):
    """The hot runs of all shards share one bound: a 3-shard set of 300
    MiB read whole by URL keeps the daemon's peak RSS near what one
    source may hold (64 MiB of runs, 32 MiB of spare buffers, the fetches
    in flight), not three times that."""
    model = os.path.join(tmp, "hs.gguf")
    make_model(model, 300, 6)
    prefix = os.path.join(ngx.www, "hs")
    p = subprocess.run([J.tool("MKSPLIT"), model, prefix, "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mksplit: %s" % p.stderr.decode(errors="replace"))
    os.unlink(model)
    # 64 MiB of hot runs, 16 of spare buffers, 4 MiB per fetch in flight
    # (4 readahead workers, up to 10 FUSE threads): 136 MiB; the daemon's
    # own (curl's buffers, reply buffers, the header) and allocator slack
    # on top.  Each shard with runs of its own: 377 MiB.
    bound = 240 << 20
    with J.Mounted(ngx.url("hs-00001-of-00003.gguf"), mnt, args=["-o", "cache=" + os.path.join(tmp, "c-hs")]):
        pid = J._procs_for(mnt)[0]
        bound += MB.asan_slack(pid)
        td = os.path.join(mnt, "tensors")
        n = 0
        for t in sorted(os.listdir(td)):
            with open(os.path.join(td, t), "rb") as fh:
                while True:
                    b = fh.read(1 << 20)
                    if not b:
                        break
                    n += len(b)
        hwm = MB.vm_hwm(pid)
    for f in os.listdir(ngx.www):
        if f.startswith("hs-"):
            os.unlink(os.path.join(ngx.www, f))
    if hwm > bound:
        raise Fail("a 3-shard set of %d MiB read by URL: the daemon's peak RSS is %d MiB (bound %d MiB): "
                   "each shard keeps hot runs of its own" % (n >> 20, hwm >> 20, bound >> 20))
    J.log("ok   3-shard set of %d MiB read by URL: daemon peak RSS %d MiB (one bound for all shards' hot runs, "
          "at most %d MiB)" % (n >> 20, hwm >> 20, bound >> 20))


def check_cache(tmp, ngx, f0, want0, mnt, live_bytes):
    """Damaged blocks are fetched again; two mounts at once; a bound."""
    c = os.path.join(tmp, "c-damage")
    url = ngx.url(f0)
    with J.Mounted(url, mnt, args=["-o", "cache=" + c]):
        live_bytes(mnt)
    entries = os.listdir(os.path.join(c, "v1"))
    data = os.path.join(c, "v1", entries[0], "data")
    with open(data, "r+b") as fh:  # flip bytes in every block
        n = os.path.getsize(data)
        for off in range(0, n, 65536):
            fh.seek(off + 7)
            b = fh.read(1)
            fh.seek(off + 7)
            fh.write(bytes([b[0] ^ 0xff]) if b else b"")
    with J.Mounted(url, mnt, args=["-o", "cache=" + c]):
        if live_bytes(mnt) != want0:
            raise Fail("a damaged cache block was served")
    J.log("ok   every cache block damaged on disk: the mount fetched them again, served the right bytes")

    # kill -9 in the middle of reading: a remount serves the right bytes
    big = os.path.join(ngx.www, "big.gguf")
    wantb = open(big, "rb").read()
    ck = os.path.join(tmp, "c-kill")
    for cut in (1 << 16, len(wantb) // 2, len(wantb) - 100):
        p = mount_url(ngx.url("big.gguf"), mnt, ["-o", "cache=" + ck])
        if p.returncode != 0:
            raise Fail("mount for kill -9: %s" % p.stderr.decode(errors="replace"))
        pids = J._procs_for(mnt)
        with open(os.path.join(mnt, "big.gguf"), "rb") as fh:
            fh.read(cut)
        for pid in pids:
            os.kill(pid, 9)
        subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
        time.sleep(0.2)
        with J.Mounted(ngx.url("big.gguf"), mnt, args=["-o", "cache=" + ck]):
            if live_bytes(mnt, "big.gguf") != wantb:
                raise Fail("after kill -9 of a mount (at byte %d), a remount served wrong bytes" % cut)
    J.log("ok   kill -9 while reading (3 points): remounts serve the right bytes")

    # two mounts of one URL at once, reading in parallel, then a third from
    # the cache alone
    c2 = os.path.join(tmp, "c-two")
    m2 = mnt + "2"
    os.makedirs(m2, exist_ok=True)
    with J.Mounted(url, mnt, args=["-o", "cache=" + c2]), J.Mounted(url, m2, args=["-o", "cache=" + c2]):
        res = {}
        ts = [threading.Thread(target=lambda m=m: res.__setitem__(m, live_bytes(m))) for m in (mnt, m2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if res.get(mnt) != want0 or res.get(m2) != want0:
            raise Fail("two mounts of one URL at once read wrong bytes")
    mark = ngx.log_mark()
    with J.Mounted(url, mnt, args=["-o", "cache=" + c2]):
        if live_bytes(mnt) != want0:
            raise Fail("after two mounts at once, the cache serves wrong bytes")
    if ranged(ngx.log_since(mark)):
        raise Fail("after two mounts at once, the cache lacks blocks")
    J.log("ok   two mounts of one URL at once share the cache; a third reads it alone")

    # a bound: a cache of 256 KiB for a bigger file
    big = [f for f in os.listdir(ngx.www) if os.path.getsize(os.path.join(ngx.www, f)) > (1 << 20)]
    if big:
        c3 = os.path.join(tmp, "c-bound")
        want = open(os.path.join(ngx.www, big[0]), "rb").read()
        with J.Mounted(ngx.url(big[0]), mnt, args=["-o", "cache=" + c3, "-o", "cache_max=256K"]):
            if live_bytes(mnt, big[0]) != want:
                raise Fail("with -o cache_max, the live view of %s differs" % big[0])
        used = sum(os.stat(os.path.join(dp, f)).st_blocks * 512 for dp, dn, fn in os.walk(c3) for f in fn
                   if f == "data")
        if used > (256 << 10) + (4 << 20) + (64 << 10):
            raise Fail("-o cache_max=256K: the cache holds %d bytes" % used)
        J.log("ok   -o cache_max=256K: %s (%d bytes) read right, cache holds %d bytes"
              % (big[0], len(want), used))


def check_faults(tmp, www, f0, want0, mnt):
    srv = FS.start(www)
    try:
        fast = ["-o", "net_timeout=1", "-o", "net_retries=2"]
        for mode in ("drop", "503"):
            srv.reset()
            c = os.path.join(tmp, "c-" + mode)
            with J.Mounted(srv.url(mode, f0), mnt, args=["-o", "cache=" + c] + fast):
                with open(os.path.join(mnt, f0), "rb") as fh:
                    got = fh.read()
            if got != want0:
                raise Fail("fault %s: the live view differs from the file" % mode)
            if not srv.faults:
                raise Fail("fault %s: the server injected nothing" % mode)
            J.log("ok   %s: %d faults injected, retried, the right bytes" % (mode, srv.faults))
        expect_refused(srv.url("norange", f0), mnt, ["-o", "cache=" + tmp + "/c-nr"], "ignores Range")
        # servers that refuse HEAD (405; 403 as a URL signed for GET only):
        # the size and identity come from a ranged GET of the first byte
        for mode in ("nohead", "getonly"):
            with J.Mounted(srv.url(mode, f0), mnt, args=["-o", "cache=" + tmp + "/c-" + mode]):
                with open(os.path.join(mnt, f0), "rb") as fh:
                    got = fh.read()
                ident = J.xattr(mnt, "user.ggufs.identity")
            if got != want0:
                raise Fail("HEAD refused (%s): the live view differs from the file" % mode)
            if b"etag" not in ident:
                raise Fail("HEAD refused (%s): the identity is %r, not the GET's ETag" % (mode, ident))
        J.log("ok   HEAD refused (405, 403): identity and size from a ranged GET; the right bytes")

        # the file changes between requests: cached bytes stay, others EIO
        srv.reset()
        c = os.path.join(tmp, "c-change")
        log = os.path.join(tmp, "change.log")
        with open(log, "wb") as lf:
            d = subprocess.Popen([J.tool("GGUFS"), "-f", "-o", "cache=" + c] + fast
                                 + [srv.url("change", f0), mnt], stdout=lf, stderr=lf)
            try:
                wait_mounted(mnt)
                meta = os.listdir(os.path.join(mnt, "meta"))
                srv.changed = True
                errs = 0
                tdir = os.path.join(mnt, "tensors")
                for t in os.listdir(tdir):
                    try:
                        with open(os.path.join(tdir, t), "rb") as fh:
                            fh.read()
                    except OSError as e:
                        if e.errno != 5:
                            raise Fail("changed file: read failed with %s, expected EIO" % e)
                        errs += 1
                if not errs:
                    raise Fail("the file changed on the server, yet every tensor read succeeded")
                with open(os.path.join(mnt, "meta", meta[0]), "rb") as fh:
                    fh.read()  # metadata read at mount: still served
            finally:
                J.unmount(mnt, [])
                d.wait(20)
        text = open(log, encoding="utf-8", errors="replace").read()
        if text.count("changed on the server") != 1:
            raise Fail("changed file: expected one log line saying so, got: %r" % text)
        J.log("ok   the file changed on the server: %d tensor reads EIO, one log line" % errs)

        # an expired signed URL (403 from where a redirect led) is resolved
        # again from the original URL
        check_signed(srv, tmp, mnt, f0, want0, fast)

        # the server goes away (connections refused), then comes back on
        # the same port: EIO meanwhile, then reads are served again
        srv.reset()
        c = os.path.join(tmp, "c-away")
        with J.Mounted(srv.url("plain", f0), mnt, args=["-o", "cache=" + c] + fast):
            port = srv.port
            srv.stop()
            dt_away = expect_eio(os.path.join(mnt, f0), len(want0), "server gone")
            srv = FS.start(www, port)
            time.sleep(1.1)  # a run that failed fails again at once for 1 s (ggufs(1))
            with open(os.path.join(mnt, f0), "rb") as fh:
                if fh.read() != want0:
                    raise Fail("after the server came back, the live view differs")
        J.log("ok   server gone: EIO after %.1f s; back on its port: served again, the daemon never died"
              % dt_away)

        # stall: every data request hangs; reads fail with EIO within the bound
        srv.reset()
        c = os.path.join(tmp, "c-stall")
        with J.Mounted(srv.url("stall", f0), mnt, args=["-o", "cache=" + c, "-o", "net_timeout=1",
                                                      "-o", "net_retries=1"]):
            srv.stall = True
            dt = expect_eio(os.path.join(mnt, f0), len(want0), "stalled server")
            if dt > 40:
                raise Fail("stalled server: EIO only after %.0f s" % dt)
            srv.stall = False  # the server is back: reads succeed again
            time.sleep(1.1)  # a run that failed fails again at once for 1 s (ggufs(1))
            with open(os.path.join(mnt, f0), "rb") as fh:
                if fh.read() != want0:
                    raise Fail("after the server came back, the live view differs")
        J.log("ok   stalled server: EIO after %.1f s; served again once it answers" % dt)

        # unmounting while readahead hangs on a stalled server: the daemon
        # ends at once, not when the timeouts (60 s here) would end it
        srv.reset()
        c = os.path.join(tmp, "c-stall2")
        p = mount_url(srv.url("stall", "ra.gguf"), mnt, ["-o", "cache=" + c, "-o", "net_timeout=60"])
        if p.returncode != 0:
            raise Fail("mount for the stalled unmount: %s" % p.stderr.decode(errors="replace"))
        pids = J._procs_for(mnt)
        srv.stall = True
        td = os.path.join(mnt, "tensors")
        first = min(os.listdir(td), key=lambda n: int(J.xattr(os.path.join(td, n), "user.gguf.offset")))
        with open(os.path.join(td, first), "rb") as fh:  # cached with the header: readahead starts
            fh.read(16)
        n0 = srv.faults
        for _ in range(100):
            if srv.faults > n0:
                break
            time.sleep(0.05)
        if srv.faults == n0:
            raise Fail("stalled unmount: no readahead request reached the server")
        t0 = time.time()
        subprocess.run(["fusermount3", "-u", mnt], check=True)
        while any(os.path.exists("/proc/%d" % q) for q in pids) and time.time() - t0 < 30:
            time.sleep(0.05)
        dt = time.time() - t0
        srv.stall = False
        if dt > 5:
            raise Fail("unmount with readahead stalled: the daemon took %.1f s to end" % dt)
        J.log("ok   unmount while readahead hangs: the daemon ended after %.2f s" % dt)
    finally:
        srv.stop()


def expect_eio(path, size, what):
    """Reads the last bytes of path (not cached): EIO expected; returns
    how long it took."""
    t0 = time.time()
    try:
        with open(path, "rb") as fh:
            fh.seek(size - 10)
            fh.read()
        raise Fail("%s: a read succeeded" % what)
    except OSError as e:
        if e.errno != 5:
            raise Fail("%s: %s, expected EIO" % (what, e))
    return time.time() - t0


def wait_mounted(mnt, secs=30):
    for _ in range(int(secs * 20)):
        if J.mountinfo_entry(mnt) is not None:
            return
        time.sleep(0.05)
    raise Fail("nothing mounted at %s" % mnt)


def check_llama(tmp, ngx, www, mnt):
    try:
        import mount_llama as L
        mods = L.node_modules()
    except J.Skip as e:
        J.log("note: llama.cpp part skipped: %s" % e)
        return
    model = os.path.join(www, "tiny-llama.gguf")
    L.make_model(model)
    base = L.evaluate(mods, model, "local file")
    with J.Watchdog(mnt, 300, "llama remote"):
        with J.Mounted(ngx.url("tiny-llama.gguf"), mnt, args=["-o", "cache=" + tmp + "/c-llama"]):
            got = L.evaluate(mods, os.path.join(mnt, "tiny-llama.gguf"), "remote live view")
    if not L.same_math(got, base):
        raise Fail("llama.cpp on the remote live view generates %s, on the local file %s"
                   % (got["tokens"], base["tokens"]))
    J.log("ok   llama.cpp on the live view of a remote mount: the same greedy tokens and probabilities")
    check_llama_gone(tmp, www, mnt, mods, model)


def check_llama_gone(tmp, www, mnt, mods, model):
    """What ggufs(1) tells llama.cpp users: with --no-mmap (useMmap false)
    and the server gone before the weights were read, llama.cpp's read(2)
    gets EIO and it reports an error, promptly; the daemon stays up.  (With
    mmap, the page that cannot be read raises SIGBUS, which Node.js's
    handler returns from: node-llama-cpp re-faults the page forever.)"""
    name = os.path.basename(model)
    srv = FS.start(www)
    try:
        # The default net options: what a user gets.
        with J.Mounted(srv.url("plain", name), mnt, args=["-o", "cache=%s/c-gone" % tmp]):
            srv.stop()  # after the header: no tensor byte is cached
            t0 = time.time()
            try:
                p = subprocess.run(["node", os.path.join(HERE, "llama_eval.mjs"), mods, os.path.join(mnt, name),
                                    "[1, 2]", "2", "nommap"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, timeout=60)
            except subprocess.TimeoutExpired:
                raise Fail("llama.cpp --no-mmap with the server gone: no answer within 60 s")
            dt = time.time() - t0
            if not J._procs_for(mnt):
                raise Fail("llama.cpp --no-mmap with the server gone: the daemon died")
    finally:
        srv.stop()
    err = p.stderr.decode(errors="replace")
    if p.returncode <= 0 or "llama_eval:" not in err:
        raise Fail("llama.cpp --no-mmap with the server gone: status %d, not a reported error: %s"
                   % (p.returncode, err[-500:]))
    # ggufs(1): the retries' backoffs, 0.5 + 1 + 2 s with the defaults,
    # once for the read (a run that failed fails again at once).
    if dt > 3.5 + 4:
        raise Fail("llama.cpp --no-mmap with the server gone: the error came after %.1f s (man: about 4 s)" % dt)
    J.log("ok   server gone before the weights were read: llama.cpp --no-mmap reported an error after "
          "%.1f s; the daemon stayed up" % dt)


def check_log_storm(tmp, www, mnt):
    """A reader retrying failed reads in a loop (the server gone) costs the
    log at most 20 lines at once and one a second, not a line a read; the
    next line says how many were left out."""
    srv = FS.start(www)
    log = os.path.join(tmp, "storm.log")
    with open(log, "wb") as lf:
        d = subprocess.Popen([J.tool("GGUFS"), "-f", "-o", "cache=" + os.path.join(tmp, "c-storm"),
                              "-o", "net_timeout=1", "-o", "net_retries=0", srv.url("plain", "ra.gguf"), mnt],
                             stdout=lf, stderr=lf)
        try:
            wait_mounted(mnt)
            srv.stop()
            td = os.path.join(mnt, "tensors")
            t = os.path.join(td, sorted(os.listdir(td))[-1])
            fails, t0 = 0, time.time()
            fd = os.open(t, os.O_RDONLY)
            try:
                while time.time() - t0 < 3:
                    try:
                        os.pread(fd, 4096, (fails * 65536) % (1 << 22))
                    except OSError as e:
                        if e.errno != 5:
                            raise Fail("log storm: %s, expected EIO" % e)
                        fails += 1
            finally:
                os.close(fd)
            dt = time.time() - t0
        finally:
            subprocess.run(["fusermount3", "-u", mnt])
            d.wait(timeout=30)
            srv.stop()
    lines = [ln for ln in open(log, errors="replace").read().splitlines() if "reading bytes" in ln]
    if fails < 100:
        raise Fail("log storm: only %d failed reads in %.1f s" % (fails, dt))
    if len(lines) > 20 + dt + 2:
        raise Fail("log storm: %d failed reads in %.1f s wrote %d log lines" % (fails, dt, len(lines)))
    J.log("ok   %d failed reads in %.1f s (server gone): %d log lines" % (fails, dt, len(lines)))


if __name__ == "__main__":
    J.main(main)
