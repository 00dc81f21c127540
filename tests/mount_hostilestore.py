#!/usr/bin/env python3
"""mount_hostilestore: a hostile store, recipe or model against the
daemon (issue 33, items 1, 2 (the listing), 5, 6 and 7), through real FUSE
mounts of stores laid out by tests/mkstore as their tools lay them out.

  1. FIFOs planted in a store: an HF cache's refs/main and an ollama
     manifest (read at mount), an ollama layer's blob swapped for a FIFO
     under an open model (ollama/template), a folder's model swapped for a
     FIFO between a scan and the first models.tsv: every open returns
     within seconds (refused, named in the log), the other models served;
     links planted the same way into a FUSE mount whose daemon is stopped
     (the model's file, a directory on its way): refused at once;
  2. a hostile Hub listing (a server of this test's own): 100 000 entries
     of 4000-byte paths, the daemon in a memory cgroup of 512 MiB: it
     mounts, lists a bounded part, says so in one log line;
  5. names with a newline, a tab and an ESC: models.tsv holds one row per
     model, 8 fields each, no control byte, the names escaped as meta.tsv
     escapes strings; Hub paths with control characters are refused (one
     log line each), the others listed;
  6. a mix recipe line that would make glibc's regcomp take gigabytes,
     the daemon in a memory cgroup: refused with RECIPE:LINE, one line;
  7. tokenizer texts of a hostile vocabulary: their size bounded before
     they are made, and the daemon's total for texts bounded.
Every operation that could hang runs in a child with a deadline: a hang
fails the test (the daemon is killed, the mount detached), never hangs it.
Exit 0 pass, 1 fail, 77 skip (no FUSE).
"""

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import http.server

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402

Fail = J.Fail
TSV_FIELDS = 8
DEADLINE = 10  # seconds any one operation below may take


def mkstore(kind, d):
    p = subprocess.run([J.tool("MKSTORE"), kind, d], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkstore %s failed: %s" % (kind, p.stderr.decode(errors="replace")))
    return [tuple(ln.split("\t")) for ln in p.stdout.decode().splitlines()]


class Fg:
    """A store mounted in the foreground (-f), its log (stderr) at hand;
    mounted within DEADLINE seconds or a failure (the daemon killed)."""

    def __init__(self, src, mnt, args=(), env=None, cmd=None):
        self.src, self.mnt, self.args, self.env = src, mnt, list(args), env
        self.cmd = cmd or [J.tool("GGUFS")]

    def __enter__(self):
        self.errf = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.cmd + ["-f"] + self.args + [self.src, self.mnt],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.errf,
                                     env=self.env)
        deadline = time.time() + DEADLINE
        while J.mountinfo_entry(self.mnt) is None:
            if self.proc.poll() is not None or time.time() > deadline:
                died = self.proc.poll()
                self.kill()
                raise Fail("ggufs -f %s %s %s: %s"
                           % (self.src, self.mnt, "did not mount within %d s" % DEADLINE if died is None
                              else "exited with status %d before it mounted" % died, self.log()[-600:]))
            time.sleep(0.05)
        return self

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], stderr=subprocess.DEVNULL)

    def log(self):
        self.errf.seek(0)
        return self.errf.read().decode(errors="replace")

    def __exit__(self, et, ev, tb):
        if self.proc.poll() is not None:
            self.kill()
            if et is None:
                raise Fail("the daemon of %s died (status %d): %s" % (self.src, self.proc.returncode,
                                                                      self.log()[-600:]))
            return False
        problems = []
        J.unmount(self.mnt, problems)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.kill()
            problems.append("ggufs -f did not exit after unmount")
        if problems and et is None:
            raise Fail("; ".join(problems))
        return False


def bounded(fg, argv, what):
    """argv run in a child with DEADLINE seconds: (status, stdout, stderr).
    A child still blocked then is a hang: the daemon is killed (which ends
    the child's FUSE request) and the test fails."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        out, err = p.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        fg.kill()
        p.kill()
        p.communicate()
        raise Fail("%s: still blocked after %d s (the daemon hangs)" % (what, DEADLINE))
    return p.returncode, out, err


def cat(fg, path, what):
    return bounded(fg, ["cat", path], what)


def ls(fg, path, what):
    rc, out, err = bounded(fg, ["ls", "-1", path], what)
    if rc != 0:
        raise Fail("%s: ls %s failed: %s" % (what, path, err.decode(errors="replace")))
    return out.decode(errors="replace").splitlines()


def fifo_over(path):
    """A FIFO put in path's place by rename (as a hostile user of the store
    would plant it)."""
    tmp = path + ".fifo"
    os.mkfifo(tmp)
    os.rename(tmp, path)


# ---------------------------------------------------------------------------
# 1: FIFOs


def check_fifo_refs(tmp, mnt):
    store = os.path.join(tmp, "hf-fifo")
    names = [n for n, _ in mkstore("hf", store)]
    refs = os.path.join(store, "models--tiny--Tiny-GGUF", "refs", "main")
    rev = open(refs).read().strip()
    fifo_over(refs)
    with Fg(store, mnt, ["-o", "ro"]) as fg:
        got = ls(fg, os.path.join(mnt, "tiny", "Tiny-GGUF"), "hf store with a FIFO as refs/main")
        want = "tiny-a@" + rev
        if want not in got:
            raise Fail("refs/main a FIFO: %s not listed as @REV (got %s)" % (want, got))
        log = fg.log()
    if "refs/main: not a regular file" not in log:
        raise Fail("refs/main a FIFO: the log does not say so: %r" % log[-600:])
    J.log("ok   refs/main a FIFO: mounted, every snapshot as @REV (%d models), the log names it" % len(names))


def check_fifo_manifest(tmp, mnt):
    store = os.path.join(tmp, "ollama-fifo")
    names = [n for n, _ in mkstore("ollama", store)]
    d = os.path.join(store, "manifests", "registry.ollama.ai", "library", "fifo")
    os.makedirs(d)
    os.mkfifo(os.path.join(d, "latest"))
    with Fg(store, mnt, ["-o", "ro"]) as fg:
        got = ls(fg, mnt, "ollama store with a FIFO manifest")
        for n in names:
            if n.split("/")[0] not in got:
                raise Fail("a FIFO manifest beside: %s not listed (%s)" % (n, got))
        if any(x.startswith("fifo") for x in got):
            raise Fail("a FIFO manifest is listed as a model: %s" % got)
        log = fg.log()
    if "fifo/latest: not a readable regular file" not in log:
        raise Fail("a FIFO manifest: the log does not name it: %r" % log[-600:])
    J.log("ok   an ollama manifest that is a FIFO: mounted, left out, named in the log")


def layer_blob(store, manifest, kind):
    with open(os.path.join(store, "manifests", manifest)) as f:
        m = json.load(f)
    for layer in m["layers"]:
        if layer["mediaType"].endswith("." + kind):
            return os.path.join(store, "blobs", layer["digest"].replace(":", "-"))
    raise Fail("mkstore's %s has no %s layer" % (manifest, kind))


def check_fifo_layer(tmp, mnt):
    store = os.path.join(tmp, "ollama-layer")
    mkstore("ollama", store)
    blob = layer_blob(store, "registry.ollama.ai/library/tiny-b/q4", "template")
    with Fg(store, mnt, ["-o", "ro"]) as fg:
        d = os.path.join(mnt, "tiny-b:q4", "ollama")
        if "template" not in ls(fg, d, "ollama/"):
            raise Fail("tiny-b:q4/ollama has no template")
        fifo_over(blob)
        rc, out, err = cat(fg, os.path.join(d, "template"), "ollama/template swapped for a FIFO")
        if rc == 0:
            raise Fail("ollama/template swapped for a FIFO read %r" % out)
        others = ls(fg, mnt, "the root after a FIFO layer")
        if "tiny-a:latest" not in others:
            raise Fail("after a FIFO layer the root lists %s" % others)
    J.log("ok   an ollama layer swapped for a FIFO under an open model: refused at once (%s)"
          % err.decode(errors="replace").strip())


def check_fifo_tsv(tmp, mnt):
    store = os.path.join(tmp, "dir-fifo")
    mkstore("dir", store)
    with Fg(store, mnt, ["-o", "ro"]) as fg:
        time.sleep(1.2)  # the next request scans the store ...
        ls(fg, mnt, "the root")
        fifo_over(os.path.join(store, "tiny-a.gguf"))  # ... and this one comes within its second
        rc, out, err = cat(fg, os.path.join(mnt, "models.tsv"), "models.tsv with a model swapped for a FIFO")
        if rc != 0:
            raise Fail("models.tsv with a FIFO model: %s" % err.decode(errors="replace"))
        rows = out.decode().splitlines()
        sub = [r for r in rows if r.startswith("sub/tiny-b\t")]
        if not sub or sub[0].split("\t")[1] == "-":
            raise Fail("models.tsv with a FIFO model beside: sub/tiny-b's row is %r" % sub)
        log = fg.log()
    if "tiny-a.gguf: not a regular file" not in log:
        raise Fail("models.tsv with a FIFO model: the log does not name it: %r" % log[-600:])
    J.log("ok   a folder's model swapped for a FIFO before models.tsv: answered at once, the others' rows made")


def link_over(path, target):
    """A symbolic link to target put in path's place by rename (a
    directory moved aside first)."""
    tmp = path + ".link"
    os.symlink(target, tmp)
    if os.path.isdir(path) and not os.path.islink(path):
        os.rename(path, path + ".gone")
    os.rename(tmp, path)


def check_link_stopped(tmp, mnt):
    """A link planted in a folder store between its scan and a model's
    first open, into another FUSE mount whose daemon is stopped (a local
    user's, SIGSTOP): as the model's file (its last component) and as a
    directory on its way.  Resolving either waits on the stopped daemon
    for ever (the store's model was opened by its path: realpath, then
    open); the open refuses it at once, named in the log, the mount
    serving on."""
    store = os.path.join(tmp, "dir-link")
    mkstore("dir", store)
    other, other_mnt = os.path.join(tmp, "other.gguf"), os.path.join(tmp, "other-mnt")
    shutil.copyfile(os.path.join(store, "tiny-a.gguf"), other)
    os.makedirs(other_mnt, exist_ok=True)
    with J.Mounted(other, other_mnt, ["-o", "ro"]):
        pids = J._procs_for(other_mnt)
        if len(pids) != 1:
            raise Fail("the other mount's daemon: %r" % pids)
        with Fg(store, mnt, ["-o", "ro"]) as fg:
            os.kill(pids[0], signal.SIGSTOP)
            try:
                for model, planted, target in (
                        ("tiny-a", os.path.join(store, "tiny-a.gguf"), os.path.join(other_mnt, "other.gguf")),
                        ("sub/tiny-b", os.path.join(store, "sub"), other_mnt)):
                    time.sleep(1.2)  # the next request scans the store ...
                    ls(fg, mnt, "the root")
                    link_over(planted, target)  # ... and this one comes within its second
                    rc, out, err = cat(fg, os.path.join(mnt, model, "meta", "general.architecture"),
                                       "%s's meta/ with %s a link into a stopped mount" % (model, planted))
                    if rc == 0:
                        raise Fail("%s through a link into a stopped mount: read %r" % (model, out))
                rc, out, err = cat(fg, os.path.join(mnt, "models.tsv"), "models.tsv after them")
                if rc != 0:
                    raise Fail("models.tsv after the links: %s" % err.decode(errors="replace"))
            finally:
                os.kill(pids[0], signal.SIGCONT)
            log = fg.log()
    for name, why in (("tiny-a.gguf", "symbolic link"), ("sub/tiny-b.gguf", "symbolic link")):
        if not any(name in ln and why in ln for ln in log.splitlines()):
            raise Fail("a link into a stopped mount: the log does not name %s (%s): %r" % (name, why, log[-800:]))
    J.log("ok   links planted into a stopped FUSE mount (the model's file, a directory on its way): "
          "refused at once, named in the log, the store served on")


# ---------------------------------------------------------------------------
# 5: control characters in names


def check_control_names(tmp, mnt):
    store = os.path.join(tmp, "dir-ctl")
    made = mkstore("dir", store)
    evil = "ev\nil\tx\x1b[31mred"
    shutil.copyfile(os.path.join(store, "tiny-a.gguf"), os.path.join(store, evil + ".gguf"))
    os.mkfifo(os.path.join(store, "x\nggufs: forged\x1b[2J.gguf"))  # logged: not a regular file
    with Fg(store, mnt, ["-o", "ro"]) as fg:
        if evil not in ls(fg, mnt, "root") and not os.path.isdir(os.path.join(mnt, evil)):
            raise Fail("the model named %r is not listed" % evil)
        rc, out, err = cat(fg, os.path.join(mnt, "models.tsv"), "models.tsv")
        log = fg.log()
    rows = out.split(b"\n")[1:-1]
    if len(rows) != len(made) + 1:
        raise Fail("models.tsv of %d models has %d rows: %r" % (len(made) + 1, len(rows), out))
    for r in rows:
        f = r.split(b"\t")
        if len(f) != TSV_FIELDS or any(b < 0x20 for b in r if b != 0x09):
            raise Fail("models.tsv row %r: %d fields or a control byte" % (r, len(f)))
    if "\x1b" in log or any(ln.startswith("ggufs: forged") for ln in log.splitlines()):
        raise Fail("a file named with a newline and an ESC forged a log line or wrote an escape: %r" % log[-600:])
    if "x\\x0aggufs: forged\\x1b[2J.gguf: not a regular file" not in log:
        raise Fail("the log does not name the FIFO with its control bytes escaped: %r" % log[-600:])
    want = b"ev\\nil\\tx\\x1b[31mred\t"
    if not any(r.startswith(want) for r in rows):
        raise Fail("models.tsv: no row starts with %r: %r" % (want, rows))
    J.log("ok   a model named with a newline, a tab and an ESC: one models.tsv row, escaped, and the log's "
          "lines escape them too: %r"
          % [r for r in rows if r.startswith(want)][0][:40])


# ---------------------------------------------------------------------------
# 2 and 5: a Hub listing of this test's own


class HubPages(http.server.BaseHTTPRequestHandler):
    """/api/models/o/r/tree/main?recursive=true&cursor=N: page N of
    pages(N) (a list of entries), the next page in a Link header."""
    pages = None
    n_pages = 0

    def log_message(self, *a):
        pass

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path != "/api/models/o/r/tree/main":
            self.send_error(404)
            return
        args = dict(a.partition("=")[::2] for a in query.split("&"))
        n = int(args.get("cursor", "0") or 0)
        body = self.pages(n)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if n + 1 < self.n_pages:
            self.send_header("Link", '<http://127.0.0.1:%d/api/models/o/r/tree/main?recursive=true&cursor=%d>; '
                             'rel="next"' % (self.server.server_port, n + 1))
        self.end_headers()
        self.wfile.write(body)


def serve(pages, n_pages):
    h = type("H", (HubPages,), {"pages": staticmethod(pages), "n_pages": n_pages})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def hub_env(srv):
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:%d" % srv.server_port)
    env.pop("HF_TOKEN", None)
    return env


def check_hub_control(tmp, mnt):
    entries = [{"type": "file", "oid": "3" * 40, "size": 1000, "path": p}
               for p in ("good.gguf", "bad\nrow.gguf", "esc\x1b[2J.gguf", "tab\tx.gguf", "del\x7f.gguf")]
    body = json.dumps(entries).encode()
    srv = serve(lambda n: body, 1)
    try:
        with Fg("hf://o/r", mnt, ["-o", "ro,cache=" + os.path.join(tmp, "c-ctl")], env=hub_env(srv)) as fg:
            got = ls(fg, mnt, "hub root")
            log = fg.log()
    finally:
        srv.shutdown()
    if sorted(got) != ["good", "models.tsv"]:
        raise Fail("a Hub listing with control characters in paths lists %r (want good, models.tsv)" % got)
    said = [ln for ln in log.splitlines() if "holds a control character" in ln]
    if len(said) != 4:
        raise Fail("4 Hub paths with control characters: %d log lines say so: %r" % (len(said), log[-1200:]))
    J.log("ok   Hub paths with a newline, an ESC, a tab, a DEL: refused, one log line each")


def sanitized():
    """True for a sanitizer build of ggufs (its shadow memory and
    quarantine need more room: the limits below are tripled)."""
    ldd = subprocess.run(["ldd", J.tool("GGUFS")], stdout=subprocess.PIPE).stdout
    return b"libasan" in ldd


def cgroup_limited(args, limit):
    """args in a new memory cgroup (v1) of limit bytes (three times that
    for a sanitizer build): (argv, its directory), or (None, None) where
    none can be made."""
    if sanitized():
        limit *= 3
    d = "/sys/fs/cgroup/memory/ggufs-hostilestore-%d" % os.getpid()
    try:
        os.mkdir(d)
        with open(os.path.join(d, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit))
        with open(os.path.join(d, "memory.memsw.limit_in_bytes"), "a") as f:
            try:
                f.write(str(limit))
            except OSError:
                pass
    except OSError:
        try:
            os.rmdir(d)
        except OSError:
            pass
        return None, None
    return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', d] + args, d


def cgroup_peak(d):
    with open(os.path.join(d, "memory.max_usage_in_bytes")) as f:
        return int(f.read())


def cgroup_remove(d):
    for _ in range(50):
        try:
            os.rmdir(d)
            return
        except OSError:
            time.sleep(0.1)


HOSTILE_ENTRIES = 100000
PER_PAGE = 3500  # 4 KiB paths: a page under the lister's 16 MiB


def hostile_page(n):
    entries = []
    for i in range(n * PER_PAGE, min((n + 1) * PER_PAGE, HOSTILE_ENTRIES)):
        head = "e%06d" % i
        parts = [head + "x" * 193] * 20  # 20 levels of 200 bytes: 4019 bytes
        entries.append({"type": "file", "oid": "3" * 40, "size": 1 << 20, "path": "/".join(parts) + ".gguf"})
    return json.dumps(entries).encode()


def check_hub_memory(tmp, mnt):
    limit = 512 << 20
    cmd, cg = cgroup_limited([J.tool("GGUFS")], limit)
    if cmd is None:
        J.log("note: no memory cgroup (v1) can be made here: the hostile listing's memory check skipped")
        return
    n_pages = (HOSTILE_ENTRIES + PER_PAGE - 1) // PER_PAGE
    srv = serve(hostile_page, n_pages)
    global DEADLINE
    saved, DEADLINE = DEADLINE, 180  # 400 MB of listing to fetch and parse
    try:
        with Fg("hf://o/r", mnt, ["-o", "ro,cache=" + os.path.join(tmp, "c-mem")], env=hub_env(srv), cmd=cmd) as fg:
            DEADLINE = saved
            got = ls(fg, mnt, "a hostile Hub listing's root")
            log = fg.log()
            peak = cgroup_peak(cg)
    finally:
        DEADLINE = saved
        srv.shutdown()
        cgroup_remove(cg)
    if len(got) < 2 or len(got) >= HOSTILE_ENTRIES:
        raise Fail("a hostile Hub listing: the root lists %d names" % len(got))
    said = [ln for ln in log.splitlines() if "the rest left out" in ln]
    if len(said) != 1:
        raise Fail("a hostile Hub listing: %d log lines say the rest is left out: %r" % (len(said), log[-1200:]))
    J.log("ok   a Hub listing of %d entries of 4 KiB paths, the daemon in %d MiB: mounted, %d models, peak %d MiB; %s"
          % (HOSTILE_ENTRIES, (limit >> 20) * (3 if sanitized() else 1), len(got) - 1, peak >> 20, said[0][:160]))


# ---------------------------------------------------------------------------
# 6: a recipe's REGEX that would cost regcomp gigabytes


def check_recipe(tmp, mnt):
    base = os.path.join(tmp, "mixbase.gguf")
    p = subprocess.run([J.tool("MKFIXTURE"), "llama", base], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture llama failed: %s" % p.stderr.decode(errors="replace"))
    shutil.copyfile(base, os.path.join(tmp, "mixsrc.gguf"))
    recipe = os.path.join(tmp, "hostile.recipe")
    usual = ["blk\\.[0-9]+\\.ffn_(up|down|gate)\\.weight", "blk\\.(1[0-9]|2[0-3])\\.attn_.*\\.weight",
             "token_embd\\.weight", "[a-z_]+\\.[0-9]{1,3}\\..*"]
    limit = 256 << 20
    for lines, bad in ((usual, None), (usual + ["(.{1,255}){1,255}{1,255}"], len(usual) + 1),
                       (["((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))"], 1)):
        with open(recipe, "w") as f:
            f.write("# a comment\n" + "".join("%s mixsrc.gguf\n" % ln for ln in lines))
        cmd, cg = cgroup_limited([J.tool("GGUFS"), "-o", "mix=%s,ro" % recipe, base, mnt], limit)
        if cmd is None:
            J.log("note: no memory cgroup (v1) can be made here: the recipe runs without a limit")
            cmd = [J.tool("GGUFS"), "-o", "mix=%s,ro" % recipe, base, mnt]
        try:
            t0 = time.time()
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            dt = time.time() - t0
        except subprocess.TimeoutExpired:
            raise Fail("a recipe of %d lines: ggufs did not return within 60 s" % len(lines))
        finally:
            if J.mountinfo_entry(mnt) is not None:
                J.unmount(mnt, [])
            if cg:
                cgroup_remove(cg)
        err = p.stderr.decode(errors="replace").strip()
        if bad is None:
            if p.returncode != 0:
                raise Fail("usual rules refused: %s" % err)
            continue
        where = "%s:%d:" % (recipe, bad + 1)  # + the comment line
        if p.returncode != 1 or len(err.splitlines()) != 1 or where + " " not in err:
            raise Fail("recipe line %d %r: exit %d in %.2f s, %r (want 1 and one line naming %s)"
                       % (bad + 1, lines[bad - 1], p.returncode, dt, err, where))
        J.log("ok   recipe line %r refused in %.2f s, the daemon in %d MiB: %s"
              % (lines[bad - 1][:40], dt, (limit >> 20) * (3 if sanitized() else 1), err))


# ---------------------------------------------------------------------------
# 7: tokenizer texts of a hostile vocabulary


def gguf_str(b):
    return struct.pack("<Q", len(b)) + b


def hostile_vocab(path, n, ln):
    """A GGUF of no tensors whose vocabulary is n tokens and n merges of ln
    bytes, all control bytes but a number: each byte is 4 in tokens.tsv
    and merges.txt (\\xHH).  No scores: no hf/tokenizer.json (its check
    of a SentencePiece vocabulary is vocab/'s, issue 36)."""
    toks = [bytes([1 + (i % 30)]) * (ln - 6) + b"%06d" % i for i in range(n)]
    arr = lambda key, t, items: gguf_str(key) + struct.pack("<IIQ", 9, t, n) + items  # noqa: E731
    kvs = [gguf_str(b"general.architecture") + struct.pack("<I", 8) + gguf_str(b"llama"),
           gguf_str(b"tokenizer.ggml.model") + struct.pack("<I", 8) + gguf_str(b"llama"),
           arr(b"tokenizer.ggml.tokens", 8, b"".join(gguf_str(t) for t in toks)),
           arr(b"tokenizer.ggml.token_type", 5, struct.pack("<%di" % n, *([1] * n))),
           arr(b"tokenizer.ggml.merges", 8, b"".join(gguf_str(t[:ln // 2] + b" " + t[ln // 2:]) for t in toks))]
    hdr = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)
    with open(path, "wb") as f:
        f.write(hdr + b"\0" * (-len(hdr) % 32))


HOLD = """
import os, sys, time
got = []
for p in sys.argv[1:]:
    try:
        fd = os.open(p, os.O_RDONLY)
        n = 0
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            n += len(b)
        got.append("%s %d" % (os.path.basename(p), n))
    except OSError as e:
        got.append("%s %s" % (os.path.basename(p), os.strerror(e.errno)))
print(";".join(got), flush=True)
"""


def check_tokenizer(tmp, mnt):
    limit = 400 << 20
    for n, label in ((160000, "each text past the bound"), (80000, "two texts past the bound together")):
        gguf = os.path.join(tmp, "vocab%d.gguf" % n)
        hostile_vocab(gguf, n, 250)
        cmd, cg = cgroup_limited([J.tool("GGUFS")], limit)
        if cmd is None:
            J.log("note: no memory cgroup (v1) can be made here: the tokenizer texts' check skipped")
            return
        try:
            with Fg(gguf, mnt, ["-o", "ro"], cmd=cmd) as fg:
                files = [os.path.join(mnt, "tokenizer", "tokens.tsv"), os.path.join(mnt, "tokenizer", "merges.txt")]
                t0 = time.time()
                rc, out, err = bounded(fg, [sys.executable, "-c", HOLD] + files, "reading " + label)
                dt = time.time() - t0
                if fg.proc.poll() is not None:
                    raise Fail("%s: the daemon died (status %d) reading the tokenizer's files"
                               % (label, fg.proc.returncode))
                peak = cgroup_peak(cg)
                log = fg.log()
        finally:
            cgroup_remove(cg)
        got = out.decode().strip()
        sizes = [int(x.split()[1]) for x in got.split(";") if x.split()[1].isdigit()]
        if sum(sizes) > 128 << 20 or len(sizes) == 2:
            raise Fail("%s: %s: more than the bound read together" % (label, got))
        said = [ln for ln in log.splitlines() if "may hold together" in ln]
        if not said:
            raise Fail("%s: the log does not say why: %r" % (label, log[-600:]))
        J.log("ok   a vocabulary of %d control-byte tokens (%d MB), %s: %s in %.1f s, daemon peak %d MiB "
              "(limit %d MiB); %s" % (n, os.path.getsize(gguf) >> 20, label, got, dt, peak >> 20,
                                      (limit >> 20) * (3 if sanitized() else 1),
                                      said[0][:200]))


CHECKS = [check_fifo_refs, check_fifo_manifest, check_fifo_layer, check_fifo_tsv, check_link_stopped,
          check_control_names,
          check_hub_control, check_hub_memory, check_recipe, check_tokenizer]


def run():
    J.require_fuse()
    failed = []
    with J.store_scratch("ggufs-hostilestore-") as (tmp, mnt):
        for fn in J.chosen("HOSTILESTORE_ONLY", CHECKS):
            try:
                fn(tmp, mnt)
            except Fail as e:
                J.log("FAIL %s: %s" % (fn.__name__, e))
                failed.append(fn.__name__)
                if J.mountinfo_entry(mnt) is not None:
                    subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
    if failed:
        raise Fail("failed: " + ", ".join(failed))


if __name__ == "__main__":
    J.main(run)
