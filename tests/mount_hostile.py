#!/usr/bin/env python3
"""mount_hostile: a hostile or broken server gets no more from ggufs than a
hostile file does (issue 20).

Against tests/faultserver.py's hostile modes and nginx on 127.0.0.1:
  ranges      a 206 of another range (shifted), an encoded body (gzip), a
              body longer than asked (overlong): EIO, one log line naming
              the URL, the range asked and what came; none of its bytes is
              cached: a remount against the honest server, from the same
              cache, serves the file's bytes
  validators  a proxy that drops the ETag (or Last-Modified) and ignores
              the condition while the file changes: EIO, never two versions
  header      a 49-byte file the server says is 16 GiB longer, whose one key
              claims 2^30 uint64: refused at once under a memory limit, with
              one line naming the URL and max_header, nothing cached; and
              -o max_header below a real header's size
  trickle     a server trickling 8 KiB/s: one read fails within the bound
              the man page states ((retries + 1) x 8 x net_timeout + the
              backoffs)
  hashes      with allow_other, another user (nobody) cannot start a hash
              of a remote mount (EACCES) and gets it once the owner has;
              ggufs -u during a hash returns within 2.5 s; SIGTERM during
              one leaves no dead mountpoint
  sources     /proc/mounts shows no query string and no user info; a URL
              whose query looks like a credential gets a warning
"""
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import faultserver as FS  # noqa: E402
import webserver as W  # noqa: E402
import mount_remote as R  # noqa: E402

Fail = J.Fail
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


class Foreground:
    """ggufs -f URL MNT with its log (stderr) in a file; unmounted at the
    end.  .lines(): the log so far."""

    def __init__(self, url, mnt, args, log):
        self.url, self.mnt, self.args, self.log = url, mnt, list(args), log

    def __enter__(self):
        self.lf = open(self.log, "wb")
        self.p = subprocess.Popen([J.tool("GGUFS"), "-f"] + self.args + [self.url, self.mnt],
                                  stdout=self.lf, stderr=self.lf, stdin=subprocess.DEVNULL)
        try:
            R.wait_mounted(self.mnt)
        except Fail:
            self.p.kill()
            raise Fail("%s: not mounted: %s" % (self.url, open(self.log, errors="replace").read()))
        return self

    def lines(self):
        return open(self.log, errors="replace").read().splitlines()

    def __exit__(self, *a):
        subprocess.run(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
        self.lf.close()
        return False


def last_tensor(mnt):
    td = os.path.join(mnt, "tensors")
    return os.path.join(td, sorted(os.listdir(td), key=lambda n: os.getxattr(os.path.join(td, n),
                                                                              "user.gguf.offset"))[-1])


def read_fails(path, what):
    """Reads path whole: EIO expected.  Seconds it took."""
    t0 = time.time()
    try:
        with open(path, "rb") as fh:
            fh.read()
    except OSError as e:
        if e.errno != 5:
            raise Fail("%s: %s, expected EIO" % (what, e))
        return time.time() - t0
    raise Fail("%s: the read succeeded" % what)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    J.require_fuse()
    tmp = tempfile.mkdtemp(prefix="ggufs-hostile-")
    os.chmod(tmp, 0o755)
    mnt = os.path.join(tmp, "mnt")
    www = os.path.join(tmp, "www")
    os.makedirs(mnt)
    os.makedirs(www)
    try:
        R.make_model(os.path.join(www, "big.gguf"), 4, 4)
        check_ranges(tmp, www, mnt)
        check_validators(tmp, www, mnt)
        check_header(tmp, www, mnt)
        check_trickle(tmp, www, mnt)
        check_sources(tmp, www, mnt)
        check_hashes(tmp, www, mnt)
    finally:
        J.cleanup(mnt, tmp)


FAST = ["-o", "net_timeout=2", "-o", "net_retries=1"]
RANGE_SAYS = {"shifted": "got bytes 0-", "gzip": "Content-Encoding: gzip", "overlong": "got more than"}


def check_ranges(tmp, www, mnt):
    want = sha(os.path.join(www, "big.gguf"))
    srv = FS.start(www)
    try:
        for mode, says in sorted(RANGE_SAYS.items()):
            url, cache = srv.url(mode, "big.gguf"), os.path.join(tmp, "c-" + mode)
            srv.evil = False
            with Foreground(url, mnt, ["-o", "cache=" + cache] + FAST, os.path.join(tmp, mode + ".log")) as m:
                srv.evil = True
                read_fails(last_tensor(mnt), "%s answers" % mode)
                lines = [ln for ln in m.lines() if "reading bytes" in ln]
            if not lines or url not in lines[0] or says not in lines[0] or "asked for bytes" not in lines[0]:
                raise Fail("%s answers: the log does not name the URL, the range asked and what came: %r"
                           % (mode, lines[:2]))
            srv.evil = False
            with J.Mounted(url, mnt, args=["-o", "cache=" + cache]):
                got = sha(os.path.join(mnt, "big.gguf"))
            if got != want:
                raise Fail("%s answers were cached: a remount against the honest server serves other bytes" % mode)
            J.log("ok   %s answers (%d): EIO, logged (%s), nothing cached: a remount serves the file"
                  % (mode, srv.faults, lines[0].split(": ", 1)[1][:110]))
            srv.faults = 0
    finally:
        srv.stop()


def check_validators(tmp, www, mnt):
    srv = FS.start(www)
    try:
        for mode, what in (("proxy", "no ETag"), ("proxylm", "no Last-Modified")):
            srv.changed = False
            url = srv.url(mode, "big.gguf")
            with Foreground(url, mnt, ["-o", "cache=%s/c-%s" % (tmp, mode)] + FAST,
                            os.path.join(tmp, mode + ".log")) as m:
                first = os.path.join(mnt, "tensors", sorted(os.listdir(os.path.join(mnt, "tensors")))[0])
                before = open(first, "rb").read(4096)
                srv.changed = True
                read_fails(last_tensor(mnt), "%s: the file changed, the answers without %s" % (mode, what[3:]))
                if open(first, "rb").read(4096) != before:
                    raise Fail("%s: bytes read before the change are no longer served" % mode)
                lines = [ln for ln in m.lines() if "changed on the server" in ln]
            if not lines or what not in lines[0]:
                raise Fail("%s: no log line says the answer had %s: %r" % (mode, what, m.lines()[-3:]))
            J.log("ok   %s: an answer with %s is a change: EIO, one version served (%s)"
                  % (mode, what, lines[0].split(": ", 1)[1][:90]))
    finally:
        srv.stop()


def claim_file(path):
    """A GGUF header whose one key is an array of 2^30 uint64: 49 bytes."""
    b = b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
    b += (1).to_bytes(8, "little") + b"a" + (9).to_bytes(4, "little") + (10).to_bytes(4, "little")
    b += (1 << 30).to_bytes(8, "little")
    with open(path, "wb") as f:
        f.write(b)


def cgroup_limited(args, limit):
    """args run in a new memory cgroup of limit bytes (v1 or v2, where
    this machine lets us make one), else under prlimit --as (not under
    ASan, which maps terabytes of shadow), else None."""
    name = "ggufs-hostile-%d" % os.getpid()
    for base, knob in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes"), ("/sys/fs/cgroup", "memory.max")):
        d = os.path.join(base, name)
        try:
            os.mkdir(d)
            with open(os.path.join(d, knob), "w") as f:
                f.write(str(limit))
            return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', d] + args, d
        except OSError:
            try:
                os.rmdir(d)
            except OSError:
                pass
    ldd = subprocess.run(["ldd", J.tool("GGUFS")], stdout=subprocess.PIPE).stdout
    if b"libasan" not in ldd:
        return ["prlimit", "--as=%d" % (limit * 4)] + args, None
    return None, None


def check_header(tmp, www, mnt):
    claim_file(os.path.join(www, "claim.gguf"))
    srv = FS.start(www)
    cache = os.path.join(tmp, "c-claim")
    url = srv.url("claim", "claim.gguf")
    cmd, cg = cgroup_limited([J.tool("GGUFS"), "-o", "cache=" + cache, url, mnt], 1 << 30)
    try:
        if cmd is None:
            J.log("note: no memory cgroup and an ASan build: the claimed-header check runs without a limit")
            cmd = [J.tool("GGUFS"), "-o", "cache=" + cache, url, mnt]
        t0 = time.time()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        dt = time.time() - t0
        err = p.stderr.decode(errors="replace").strip()
        if J.mountinfo_entry(mnt) is not None:
            J.unmount(mnt, [])
            raise Fail("a header claiming 8 GiB was mounted")
        if p.returncode != 1 or len(err.splitlines()) != 1 or url not in err or "max_header" not in err:
            raise Fail("a header claiming 8 GiB: exit %d, %r (want 1 and one line naming the URL and max_header)"
                       % (p.returncode, err))
        held = sum(os.lstat(os.path.join(dp, f)).st_blocks * 512 for dp, _, fs in os.walk(cache) for f in fs)
        if held > 1 << 20:
            raise Fail("a refused header left %d bytes in the cache" % held)
        J.log("ok   a 49-byte header claiming an array of 2^30 uint64 (server: 16 GiB more): refused in %.2f s, "
              "%d bytes cached: %s" % (dt, held, err))
    finally:
        srv.stop()
        if cg:
            os.rmdir(cg)
    ngx = R.Nginx(os.path.join(tmp, "ngx-h"), www)
    try:
        url = ngx.url("big.gguf")
        _, ref = J.refdump(os.path.join(www, "big.gguf"))
        hdr = min(t.offset for t in ref.tensors)  # the header and its padding
        R.expect_refused(url, mnt, ["-o", "cache=%s/c-h" % tmp, "-o", "max_header=%d" % (hdr // 2)],
                         "max_header")
        with J.Mounted(url, mnt, args=["-o", "cache=%s/c-h" % tmp]):
            pass
        J.log("ok   -o max_header=%d refuses a model whose data starts at %d (one line); the default mounts it"
              % (hdr // 2, hdr))
    finally:
        ngx.stop()


def check_trickle(tmp, www, mnt):
    srv = FS.start(www)
    timeout, retries = 1, 1
    bound = (retries + 1) * 8 * timeout + sum(0.5 * 2 ** a for a in range(retries))
    try:
        with Foreground(srv.url("trickle", "big.gguf"), mnt,
                        ["-o", "cache=%s/c-trickle" % tmp, "-o", "net_timeout=%d" % timeout,
                         "-o", "net_retries=%d" % retries], os.path.join(tmp, "trickle.log")):
            srv.evil = True
            with J.Watchdog(mnt, 300, "trickle"):
                dt = read_fails(last_tensor(mnt), "a trickling server")
    finally:
        srv.stop()
    if dt > bound + 3:
        raise Fail("a trickling server held one read %.1f s; the bound is %.1f s" % (dt, bound))
    J.log("ok   a server trickling 8 KiB/s: one read failed after %.1f s (bound %.1f s: net_timeout=%d, "
          "net_retries=%d)" % (dt, bound, timeout, retries))


def check_sources(tmp, www, mnt):
    ngx = R.Nginx(os.path.join(tmp, "ngx-s"), www)
    try:
        for url, secret, warn in ((ngx.url("big.gguf?X-Amz-Signature=deadbeef77&download=true"), "deadbeef77",
                                   "X-Amz-Signature"),
                                  (ngx.url("big.gguf").replace("://", "://alice:pw9secret@"), "pw9secret",
                                   "user info")):
            with J.Mounted(url, mnt, args=["-o", "cache=%s/c-s" % tmp]) as p:
                src = J.mountinfo_entry(mnt)[1]
                shown = os.getxattr(mnt, "user.ggufs.url").decode()
                listed = os.listxattr(mnt)
            err = p.stderr.decode(errors="replace")
            for where, text in (("/proc/mounts", src), ("user.ggufs.url", shown)):
                if secret in text or "?" in text or "@" in text:
                    raise Fail("%s shows %r" % (where, text))
            if warn not in err or "warning" not in err:
                raise Fail("a URL with a credential (%s): no warning: %r" % (warn, err))
            if "user.ggufs.url" not in listed or "user.ggufs.identity" not in listed:
                raise Fail("listxattr of a remote mount's root: %r" % listed)
        J.log("ok   /proc/mounts and user.ggufs.url show %s (no query, no user info); warnings: %s"
              % (src, err.strip().splitlines()[-1][:100]))
        # https:// against a plain-HTTP server: a TLS failure is not retried
        # (issue 21: 3.8 s of retries and OpenSSL's text)
        url = ngx.url("big.gguf").replace("http://", "https://")
        t0 = time.time()
        R.expect_refused(url, mnt, ["-o", "cache=%s/c-s" % tmp], "TLS failed")
        dt = time.time() - t0
        if dt > 2:
            raise Fail("https:// against a plain-HTTP server took %.1f s to refuse" % dt)
    finally:
        ngx.stop()


SLOW = """
    location /slow/ {{ limit_rate 8m; rewrite ^/slow/(.*)$ /$1 break; }}
"""


def weights_sha256(path):
    """The sha256 of every tensor's bytes in file order, by ggml's reading
    of the header (tests/refdump) and hashlib."""
    _, ref = J.refdump(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for t in sorted(ref.tensors, key=lambda t: t.offset):
            f.seek(t.offset)
            h.update(f.read(t.size))
    return h.hexdigest()


def daemon_pid(mnt):
    return int(os.getxattr(mnt, "user.ggufs.pid"))


def check_hashes(tmp, www, mnt):
    R.make_model(os.path.join(www, "huge.gguf"), 320, 4)
    want = weights_sha256(os.path.join(www, "huge.gguf"))
    ngx = W.Nginx(os.path.join(tmp, "ngx-hash"), www, SLOW, as_root=True)
    attr = "user.gguf.sha256"
    try:
        url = ngx.url("huge.gguf")
        args = ["-o", "allow_other", "-o", "cache=%s/c-hash" % tmp]
        with J.Mounted(url, mnt, args=args):
            td = os.path.join(mnt, "tensors")
            p = subprocess.run(NOBODY + ["getfattr", "-n", attr, "--only-values", td],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            if p.returncode == 0 or b"Permission denied" not in p.stderr:
                raise Fail("nobody started the weights hash of a remote mount: %r" % p.stderr)
            if os.getxattr(td, attr).decode() != want:
                raise Fail("the owner's weights hash of a remote mount is not hashlib's")
            p = subprocess.run(NOBODY + ["getfattr", "-n", attr, "--only-values", td],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            if p.stdout.decode() != want:
                raise Fail("nobody does not get the weights hash once known: %r" % p.stderr)
        J.log("ok   remote mount, allow_other: nobody's weights hash refused (EACCES) until the owner's, "
              "then served; it is hashlib's over ggml's tensors")
        slow = ngx.url("slow/huge.gguf")
        for how in ("ggufs -u", "SIGTERM"):
            with J.Watchdog(mnt, 120, "hash and " + how):
                unmount_during_hash(tmp, slow, mnt, how, attr)
    finally:
        ngx.stop()


def unmount_during_hash(tmp, url, mnt, how, attr, who=()):
    """how (ggufs -u, SIGTERM) while who (a command prefix: another user)
    computes the weights hash."""
    cache = os.path.join(tmp, "c-" + how.replace(" ", ""))
    p = J.run_ggufs(["-o", "allow_other", "-o", "cache=" + cache, url, mnt], timeout=60)
    if p.returncode != 0:
        raise Fail("%s: exit %d: %s" % (url, p.returncode, p.stderr.decode(errors="replace")))
    pid = daemon_pid(mnt)
    g = subprocess.Popen(list(who) + ["getfattr", "-n", attr, os.path.join(mnt, "tensors")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.5)
    td = os.path.join(mnt, "tensors")
    seen = [os.getxattr(td, "user.gguf.hash_progress").decode()]
    # It moves by the hash's 4 MiB chunks: on a loaded machine (ASan, two
    # suites on two cores) a chunk can take over half a second.
    t1 = time.time()
    while time.time() - t1 < 6 and g.poll() is None:
        time.sleep(0.25)
        now = os.getxattr(td, "user.gguf.hash_progress").decode()
        if now != seen[0]:
            break
    seen.append(now)
    if g.poll() is not None:
        raise Fail("the hash ended before the %s (the model downloads too fast to test?): %s"
                   % (how, g.stderr.read().decode(errors="replace").strip()))
    done = [int(x.split()[0]) if x.endswith("%)") and " of " in x else -1 for x in seen]
    if not 0 < done[0] < done[1]:
        raise Fail("user.gguf.hash_progress while hashing: %r" % seen)
    t0 = time.time()
    if how == "ggufs -u":
        u = J.run_ggufs(["-u", mnt], timeout=60)
        dt = time.time() - t0
        if u.returncode != 0:
            raise Fail("ggufs -u during a hash: exit %d: %s" % (u.returncode, u.stderr.decode(errors="replace")))
    else:
        os.kill(pid, signal.SIGTERM)
        while os.path.exists("/proc/%d" % pid) and not J._zombie(pid) and time.time() - t0 < 30:
            time.sleep(0.05)
        dt = time.time() - t0
    g.wait(timeout=30)
    for _ in range(100):
        if J.mountinfo_entry(mnt) is None:
            break
        time.sleep(0.05)
    if J.mountinfo_entry(mnt) is not None:
        try:
            os.stat(mnt)
            state = "still mounted"
        except OSError as e:
            state = "a dead mountpoint (%s)" % e.strerror
        subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
        raise Fail("%s during a hash left %s" % (how, state))
    if how == "ggufs -u" and dt > 2.5:
        raise Fail("ggufs -u during a hash took %.1f s" % dt)
    J.log("ok   %s during a weights hash of a remote mount (user.gguf.hash_progress: %s, then %s): "
          "unmounted after %.2f s, the hash ended (%s)"
          % (how, seen[0], seen[1], dt, g.stderr.read().decode(errors="replace").strip()[-60:]))


if __name__ == "__main__":
    J.main(main)
