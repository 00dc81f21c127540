#!/usr/bin/env python3
"""stress/concurrency: readers and an editor on one read-write mount.

A model fixture (mkfixture model: 4 f16 tensors, a 2000-token vocabulary)
is mounted read-write.  For --seconds (default 60):

  - an editor *process* rewrites three meta files in a loop, each edit an
    open(O_TRUNC), the text in several write()s, fsync() (the edit applied
    and kept durably as pending), close(), then an fsync of meta/ (which
    commits it into the GGUF, growing the header now and then, as
    general.name grows):
      general.name            "name-N|BODY|CRC32\\n", BODY growing with N,
                              every third one past 1 MiB (windowed)
      llama.context_length    one digit repeated nine times ("222222222")
      tokenizer.ggml.merges   1 + N % 37 lines "mN-i"
  - reader threads, all the time:
      meta readers   open/read-to-EOF/close the edited files: every read is
                     exactly one complete value the editor wrote (or the
                     original), never a mix or a cut; untouched keys never
                     change;
      tensor readers drop the tensor's page cache (posix_fadvise DONTNEED)
                     and read it whole or in random windows: always the
                     original bytes, while commits rewrite the header or
                     insert blocks in front of the data;
      a live-view reader opens MNT/NAME.gguf, reads its header, walks it
                     (every edited value complete and well formed) and
                     checks the first bytes of each tensor at the offsets
                     that header gives.

Then the editor stops, the mount is unmounted, and the file is checked with
refdump (ggml's reader): it loads, the edited keys hold the last values
written, every other key and every tensor's bytes are unchanged, and no
journal or saved-edits file is left beside it.

Prints iterations and errors; exit 0 pass, 1 fail, 77 skip (no FUSE, no
ggml).  Environment as the mount tests (GGUFS, MKFIXTURE, REFDUMP).
"""

import argparse
import multiprocessing
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import judge as J  # noqa: E402

# Once a bug (fixed in fs/ops.c by direct_io for meta files of read-write
# mounts): a reader saw an empty file while a writer held it open with
# O_TRUNC, or a writer's unapplied write()s mixed into the old value ("XYlf
# of a new name").  Such reads fail the test (strict is the default;
# GGUFS_STRESS_STRICT=0 only counts them, for bisecting).
KNOWN_BUG = "meta reads see other openers' uncommitted drafts (page cache / i_size)"

NAME_KEY, INT_KEY, ARR_KEY = b"general.name", b"llama.context_length", b"tokenizer.ggml.merges"


# ---------------------------------------------------------------------------
# values of known form


# Every third value of general.name is more than 1 MiB of text (a
# windowed text, fs/node/tree.c): a reader opened on one while a commit changes
# it must still read it whole (it got ESTALE: issue 21).
BIG = 1_100_000
_ALPHA = b"abcdefghijklmnopqrstuvwxyz" * 160000


def name_value(n):
    size = 200 + n * 150 + (n * 397) % 20000 + (BIG if (n // 3) % 3 == 1 else 0)
    body = _ALPHA[:size]
    head = b"name-%d|%s|" % (n, body)
    return head + b"%08x\n" % zlib.crc32(head)


def int_value(n):
    return b"%d\n" % int(str(1 + n % 4) * 9)


def arr_value(n):
    return b"".join(b"m%d-%d\n" % (n, i) for i in range(1 + n % 37))


VALUES = {NAME_KEY: name_value, INT_KEY: int_value, ARR_KEY: arr_value}
_NAME_RE = re.compile(rb"name-(\d+)\|")
_ARR_RE = re.compile(rb"m(\d+)-0\n")


def which_value(key, data, original):
    """N if data is exactly the editor's value number N, -1 if it is the
    original value, None if it is neither (a mix, a cut, garbage)."""
    if data == original:
        return -1
    if key == NAME_KEY:
        m = _NAME_RE.match(data)
        cands = [int(m.group(1))] if m else []
    elif key == ARR_KEY:
        m = _ARR_RE.match(data)
        cands = [int(m.group(1))] if m else []
    else:
        # int values repeat every 4 edits: any of the four forms
        cands = list(range(4))
    for n in cands:
        if VALUES[key](n) == data:
            return n
    return None


# ---------------------------------------------------------------------------
# the editor process


def editor(mnt, stop, q, seed):
    rng = random.Random(seed)
    meta = os.path.join(os.fsencode(mnt), b"meta")
    last = {}
    edits = fsyncs = 0
    errors = []
    n = 0
    try:
        while not stop.is_set():
            key = (NAME_KEY, INT_KEY, ARR_KEY)[n % 3]
            val = VALUES[key](n)
            p = os.path.join(meta, key)
            try:
                fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
                try:
                    pos = 0
                    while pos < len(val):
                        k = rng.choice([1, 7, 100, 4096, 65536, len(val)])
                        pos += os.write(fd, val[pos:pos + k])
                    os.fsync(fd)  # durable as a pending edit
                finally:
                    os.close(fd)
                # fsync of meta/ commits
                dfd = os.open(meta, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(dfd)
                    fsyncs += 1
                finally:
                    os.close(dfd)
                last[key] = n
                edits += 1
            except OSError as e:
                errors.append("editor: edit %d of %s (%d bytes): %s" % (n, key.decode(), len(val), e))
                if len(errors) > 20:
                    break
            n += 1
    finally:
        q.put({"last": last, "edits": edits, "fsyncs": fsyncs, "errors": errors})


# ---------------------------------------------------------------------------
# readers


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.errors = []
        self.seen = {}  # key -> set of value numbers seen
        self.n_known = 0
        self.strict = True

    def count(self, what, k=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + k

    def known(self, msg):
        """The reported bug KNOWN_BUG: counted and shown, not failed."""
        with self.lock:
            self.n_known += 1
            if self.n_known <= 5:
                J.log("KNOWN BUG " + msg)

    def error(self, msg):
        with self.lock:
            if len(self.errors) < 200:
                self.errors.append(msg)
        J.log("ERROR " + msg)


def read_file(p, limit=64 << 20):
    fd = os.open(p, os.O_RDONLY)
    try:
        out = []
        n = 0
        while n < limit:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            out.append(b)
            n += len(b)
        return b"".join(out)
    finally:
        os.close(fd)


def meta_reader(mnt, originals, untouched, stop, st, seed):
    rng = random.Random(seed)
    meta = os.path.join(os.fsencode(mnt), b"meta")
    keys = sorted(originals)
    while not stop.is_set():
        if untouched and rng.random() < 0.2:
            key, want = rng.choice(untouched)
            try:
                got = read_file(os.path.join(meta, J.escape_name(key)))
                if got != want:
                    st.error("meta/%s (never edited) changed: %d bytes, was %d" % (key.decode(), len(got), len(want)))
            except OSError as e:
                st.error("meta/%s (never edited): %s" % (key.decode(), e))
            st.count("meta reads (untouched keys)")
            continue
        key = rng.choice(keys)
        try:
            got = read_file(os.path.join(meta, key))
        except OSError as e:
            st.error("meta/%s: read failed: %s" % (key.decode(), e))
            continue
        n = which_value(key, got, originals[key])
        if n is None:
            msg = ("meta/%s: read %d bytes that are no complete value (a mix or a cut): %s"
                   % (key.decode(), len(got), J.shorten(got, 160)))
            if st.strict:
                st.error(msg)
            else:
                st.known(msg)
        else:
            with st.lock:
                st.seen.setdefault(key, set()).add(n)
        st.count("meta reads (edited keys)")


def tensor_reader(mnt, tensors, stop, st, seed):
    rng = random.Random(seed)
    tdir = os.path.join(os.fsencode(mnt), b"tensors")
    while not stop.is_set():
        name, ref = rng.choice(tensors)
        p = os.path.join(tdir, J.escape_name(name))
        try:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                if rng.random() < 0.3:
                    got = b""
                    while True:
                        b = os.read(fd, 1 << 20)
                        if not b:
                            break
                        got += b
                    if got != ref:
                        st.error("tensors/%s: whole read of %d bytes differs from the original (%d)"
                                 % (name.decode(), len(got), len(ref)))
                    st.count("tensor whole reads")
                else:
                    for _ in range(8):
                        a = rng.randrange(0, len(ref))
                        n = rng.choice([1, 4096, 65536, 300000])
                        got = os.pread(fd, n, a)
                        if got != ref[a:a + n]:
                            st.error("tensors/%s: pread(%d at %d) differs from the original" % (name.decode(), n, a))
                            break
                    st.count("tensor preads", 8)
            finally:
                os.close(fd)
        except OSError as e:
            st.error("tensors/%s: %s" % (name.decode(), e))


def walk_header(b):
    """KV values (key -> (type, raw bytes of the value)) and tensor infos of
    the GGUF header in b (raises on truncation)."""
    pos = 24
    n_t, n_kv = struct.unpack_from("<QQ", b, 8)
    kvs = {}
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def s():
        nonlocal pos
        n = struct.unpack_from("<Q", b, pos)[0]
        pos += 8
        if pos + n > len(b):
            raise ValueError("string past the end of what was read")
        v = b[pos:pos + n]
        pos += n
        return v

    align = 32
    for _ in range(n_kv):
        k = s()
        t = struct.unpack_from("<I", b, pos)[0]
        pos += 4
        start = pos
        if t == 8:
            v = s()
        elif t == 9:
            at, n = struct.unpack_from("<IQ", b, pos)
            pos += 12
            if at == 8:
                v = [s() for _ in range(n)]
            else:
                v = b[pos:pos + n * sizes[at]]
                pos += n * sizes[at]
        else:
            v = b[pos:pos + sizes[t]]
            pos += sizes[t]
            if k == b"general.alignment":
                align = struct.unpack("<I", v)[0]
        del start
        kvs[k] = (t, v)
    infos = []
    for _ in range(n_t):
        name = s()
        nd = struct.unpack_from("<I", b, pos)[0]
        pos += 4 + 8 * nd
        _, off = struct.unpack_from("<IQ", b, pos)
        pos += 12
        infos.append((name, off))
    data = (pos + align - 1) // align * align
    return kvs, infos, data


def live_reader(mnt, live_name, tensors, stop, st, seed):
    ref = dict(tensors)
    p = os.path.join(os.fsencode(mnt), live_name)
    while not stop.is_set():
        try:
            fd = os.open(p, os.O_RDONLY)
            try:
                head = b""
                want = 1 << 16
                kvs = None
                while True:
                    while len(head) < want:
                        b = os.pread(fd, want - len(head), len(head))
                        if not b:
                            break
                        head += b
                    try:
                        kvs, infos, data = walk_header(head)
                        break
                    except (ValueError, struct.error, KeyError):
                        if len(head) < want:
                            raise
                        want *= 2
                        if want > (64 << 20):
                            raise
                for key in VALUES:
                    t, v = kvs[key]
                    if key == NAME_KEY:
                        text = v + b"\n"
                    elif key == INT_KEY:
                        text = b"%d\n" % struct.unpack("<I", v)[0]
                    else:
                        text = b"".join(x + b"\n" for x in v)
                    if key in st.originals and which_value(key, text, st.originals[key]) is None:
                        st.error("live view: %s holds no complete value: %s" % (key.decode(), J.shorten(text, 120)))
                for name, off in infos:
                    a = data + off
                    got = os.pread(fd, 4096, a)
                    if got != ref[name][:4096]:
                        st.error("live view: tensor %s at %d (data %d + %d) is not the tensor's bytes"
                                 % (name.decode(), a, data, off))
            finally:
                os.close(fd)
            st.count("live view reads")
        except (OSError, ValueError, struct.error, KeyError) as e:
            st.error("live view: %s: %r" % (live_name.decode(), e))
        time.sleep(0.01)


# Fixed (the read handlers now hold a text reference around the reply);
# kept for runs with GGUFS_STRESS_STRICT=0.  Was: (fs/ops.c, gfs_read) a read of a meta file
# replies with fuse_reply_buf straight from fh->text, holding no reference of
# its own; once the kernel has the bytes the reader may close and another
# thread's gfs_release frees the text while fuse_reply_buf's writev is still
# returning.  Harmless without a sanitizer (the kernel has copied the bytes),
# but ASan checks writev's buffers after the call and kills the daemon with
# a heap-use-after-free (read_iovec < writev < fuse_reply_buf < gfs_read;
# freed by fh_free < gfs_release).  Fix: take a text reference around the
# reply.  In a sanitizer build that report is recognised, shown, and the
# dead mount it leaves is not counted again (unless --strict).
KNOWN_ASAN = "use-after-free of a meta text between gfs_read's reply and gfs_release (ASan builds)"
DEAD_MOUNT = ("Transport endpoint is not connected", "daemon is gone", "unmount:", "did not finish")


def sanitizer_report(d, st):
    for f in sorted(os.listdir(d)):
        with open(os.path.join(d, f), errors="replace") as fh:
            text = fh.read()
        if not text.strip():
            continue
        head = "\n    ".join(text.strip().splitlines()[:30])
        known = ("heap-use-after-free" in text and ("gfs_read" in text or "gfs_op_read" in text)
                 and ("gfs_release" in text or "gfs_op_release" in text)
                 and ("writev" in text or "read_iovec" in text))
        if known and not st.strict:
            with st.lock:
                before = len(st.errors)
                st.errors = [e for e in st.errors if not any(m in e for m in DEAD_MOUNT)]
                st.n_known_asan = before - len(st.errors)
            J.log("KNOWN BUG (reported, tolerated without --strict): %s; the daemon died of it, "
                  "%d errors of the dead mount not counted; its report:\n    %s" % (KNOWN_ASAN, st.n_known_asan, head))
        else:
            st.error("the daemon's sanitizer report (%s):\n    %s" % (f, head))


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--meta-readers", type=int, default=3)
    ap.add_argument("--tensor-readers", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the GGUF lives (default: a temporary directory)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--strict", action="store_true", default=os.environ.get("GGUFS_STRESS_STRICT", "1") != "0",
                    help="fail on the known bug too (see KNOWN_BUG)")
    args = ap.parse_args()
    J.require_fuse()
    tmp = tempfile.mkdtemp(prefix="ggufs-stress-", dir=args.dir)
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    gguf = os.path.join(tmp, "model.gguf")
    st = Stats()
    st.strict = args.strict
    try:
        p = subprocess.run([J.tool("MKFIXTURE"), "model", gguf, "--tensor-mb", "8", "--n-tensors", "4",
                            "--vocab", "2000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        if p.returncode != 0:
            raise J.Fail("mkfixture model failed: %s" % p.stderr.decode(errors="replace")[-500:])
        verdict, ref = J.refdump(gguf)
        if ref is None:
            raise J.Fail("ggml rejects the fixture")
        with open(gguf, "rb") as f:
            raw = f.read()
        tensors = [(t.name, raw[t.offset:t.offset + t.size]) for t in ref.tensors]
        orig_kv = {kv.key: kv.content for kv in ref.kvs}
        for k in VALUES:
            if k not in orig_kv:
                raise J.Fail("the fixture lacks key %s" % k.decode())
        originals = {k: orig_kv[k] for k in VALUES}
        st.originals = originals
        untouched = [(k, v) for k, v in orig_kv.items() if k not in VALUES and
                     next(x for x in ref.kvs if x.key == k).kind == "bytes"]

        # A sanitizer build of the daemon writes its report here (the
        # daemon's stderr is gone once it detaches).
        asan_dir = os.path.join(tmp, "asan")
        os.mkdir(asan_dir)
        env = dict(os.environ)
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            env[var] = (env.get(var, "") + ":log_path=" + os.path.join(asan_dir, var[:5].lower())).lstrip(":")
        res = J.run_ggufs([gguf, mnt], env=env)
        if res.returncode != 0:
            raise J.Fail("ggufs %s %s: exit %d: %s" % (gguf, mnt, res.returncode, res.stderr.decode(errors="replace")))
        watchdog = J.Watchdog(mnt, args.seconds + 300, "the stress run")
        watchdog.__enter__()
        try:
            ctx = multiprocessing.get_context("fork")
            stop_p, q = ctx.Event(), ctx.Queue()
            ed = ctx.Process(target=editor, args=(mnt, stop_p, q, args.seed))
            ed.start()
            stop = threading.Event()
            threads = []
            for i in range(args.meta_readers):
                threads.append(threading.Thread(target=meta_reader,
                                                args=(mnt, originals, untouched, stop, st, args.seed + 10 + i)))
            for i in range(args.tensor_readers):
                threads.append(threading.Thread(target=tensor_reader, args=(mnt, tensors, stop, st, args.seed + 20 + i)))
            threads.append(threading.Thread(target=live_reader,
                                            args=(mnt, b"model.gguf", tensors, stop, st, args.seed + 30)))
            for t in threads:
                t.daemon = True
                t.start()
            t0 = time.time()
            while time.time() - t0 < args.seconds and ed.is_alive():
                time.sleep(0.2)
            stop_p.set()
            try:
                rep = q.get(timeout=120)
            except Exception:
                rep = {"last": {}, "edits": 0, "fsyncs": 0, "errors": ["editor: no report (hung or died)"]}
            ed.join(30)
            stop.set()
            for t in threads:
                t.join(60)
                if t.is_alive():
                    st.error("a reader thread did not finish (a request hangs?)")
            elapsed = time.time() - t0
            if not J._procs_for(mnt):
                st.error("the ggufs daemon is gone at the end of the run")
        finally:
            probs = []
            J.unmount(mnt, probs)
            watchdog.__exit__(None, None, None)
            for pr in probs:
                st.error("unmount: " + pr)
        for e in rep["errors"]:
            st.error(e)
        sanitizer_report(asan_dir, st)

        # The file after the unmount.
        verdict, after = J.refdump(gguf)
        if after is None:
            st.error("ggml rejects the file after the run")
        else:
            akv = {kv.key: kv.content for kv in after.kvs}
            for k, fn in VALUES.items():
                want = fn(rep["last"][k]) if k in rep["last"] else originals[k]
                if akv.get(k) != want:
                    st.error("after unmount: %s is %s, the last value written was %s"
                             % (k.decode(), J.shorten(akv.get(k), 100), J.shorten(want, 100)))
            for k, v in orig_kv.items():
                if k not in VALUES and k != J.FILLER_KEY and akv.get(k) != v:
                    st.error("after unmount: %s changed (never edited)" % k.decode())
            extra = set(akv) - set(orig_kv) - {J.FILLER_KEY}
            if extra:
                st.error("after unmount: new keys %r" % sorted(extra))
            with open(gguf, "rb") as f:
                for t in after.tensors:
                    f.seek(t.offset)
                    if f.read(t.size) != dict(tensors).get(t.name):
                        st.error("after unmount: tensor %s differs from the original" % t.name.decode())
            if [t.name for t in after.tensors] != [n for n, _ in tensors]:
                st.error("after unmount: tensor list changed")
        left = [f for f in os.listdir(tmp) if f.startswith("model.gguf.")]
        if left:
            st.error("files left beside the GGUF: %r" % left)
        J.log("run: %.1f s; editor: %d edits, %d fsyncs (commits), last value numbers %s"
              % (elapsed, rep["edits"], rep["fsyncs"], {k.decode(): v for k, v in rep["last"].items()}))
        J.log("readers: " + ", ".join("%s %d" % kv for kv in sorted(st.counts.items())))
        J.log("distinct values seen by meta readers: " +
              ", ".join("%s %d" % (k.decode(), len(v)) for k, v in sorted(st.seen.items())))
        J.log("final file: %d bytes, data offset %d (was %d)"
              % (os.path.getsize(gguf), after.data_offset if after else -1, ref.data_offset))
        if rep["edits"] == 0:
            st.error("the editor made no edit")
        if st.n_known:
            J.log("KNOWN BUG (reported, tolerated without --strict): %s: %d of the meta reads"
                  % (KNOWN_BUG, st.n_known))
        J.log("errors: %d" % len(st.errors))
        J.log("%d passed, %d failed" % (0 if st.errors else 1, 1 if st.errors else 0))
        if st.errors:
            raise J.Fail("%d error(s) under concurrency (listed above)" % len(st.errors))
    finally:
        if J.mountinfo_entry(mnt):
            J.unmount(mnt, [])
        if not J.mountinfo_entry(mnt):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    J.main(main)
