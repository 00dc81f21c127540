#!/usr/bin/env python3
"""mount_damage: ggufs survives damaged GGUF files as they occur in the wild.

Sources: every fixture of `$MKFIXTURE all` and copies of the real models in
../shared/models beside the source tree (GGUFS_SRCDIR/../shared/models).
Each source's header is walked here (Python, no ggufs code) to find its
regions and fields, then damaged copies are made:

  trunc     truncated at every region boundary (end of magic, version,
            counts, inside and at the end of each KV, each tensor info, the
            padding, the start, middle and end of each tensor's data) and
            at random points;
  textmode  bytes replaced by U+FFFD (EF BF BD) at random spots, as a
            text-mode transfer does (one byte becomes three, the rest
            shifts), overwritten in place, and the whole file passed
            through a UTF-8 "repair" (every invalid byte -> EF BF BD);
  flip      single bit flips in the counts, string and array lengths, value
            and element types, n_dims, dimensions, tensor types and tensor
            offsets (low and high bits).

For each damaged file, `ggufs -o ro FILE MNT` must either
  - refuse: non-zero exit, stderr exactly one line "ggufs: FILE: ...",
    nothing mounted; or
  - mount: then every entry of the mount is listed, stat'ed, read to the end
    (as many bytes as st_size), its xattrs listed and read; tensor files
    hold the file's bytes at their user.gguf.offset; the live view
    (MNT/NAME.gguf) equals the file; no entry name is '.', '..' or has a
    '/'; and at the end the mount still answers and the daemon is alive;
    then it unmounts cleanly.

Then the names check: names.gguf (keys and tensor names with '/', '..',
'%', control bytes, invalid UTF-8, 255+ bytes) mounted read-only: every key
and tensor is reachable under the escaped name the contract prescribes
(judge.escape_name), nothing else is listed, every path resolves inside
the mount, and the unescaped spellings ('..', 'a/b') do not lead anywhere
else.

Prints a summary (files tried, refused, mounted, per kind).  Runs within
--budget seconds (default 150): the cases are put in a fixed-seed random
order, boundary truncations of the small fixtures first, and the run stops
early when the budget is spent (the summary says how many were left).

Environment (tests/meson.build): GGUFS, MKFIXTURE, GGUFS_SRCDIR.
Exit 0 pass, 1 fail, 77 skip (no FUSE).
"""

import argparse
import os
import random
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402

SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
READ_CAP = 256 << 20


# ---------------------------------------------------------------------------
# the header walk: regions and fields of a valid file


class Layout:
    def __init__(self):
        self.bounds = {}   # offset -> label
        self.fields = []   # (offset, width in bytes, kind, label)
        self.tensors = []  # (data start, size)


def layout(b):
    """Boundaries and fields of the valid GGUF bytes b."""
    L = Layout()
    pos = 0

    def u32():
        nonlocal pos
        v = struct.unpack_from("<I", b, pos)[0]
        pos += 4
        return v

    def u64():
        nonlocal pos
        v = struct.unpack_from("<Q", b, pos)[0]
        pos += 8
        return v

    def field(width, kind, label):
        L.fields.append((pos, width, kind, label))

    def string(kind, label):
        nonlocal pos
        field(8, kind, label + " length")
        n = u64()
        s = b[pos:pos + n]
        pos += n
        return s

    L.bounds[4] = "end of magic"
    pos = 4
    field(4, "version", "version")
    u32()
    L.bounds[8] = "end of version"
    field(8, "count", "n_tensors")
    n_t = u64()
    L.bounds[16] = "end of n_tensors"
    field(8, "count", "n_kv")
    n_kv = u64()
    L.bounds[24] = "end of counts"
    align = 32
    for i in range(n_kv):
        start = pos
        key = string("len", "key %d" % i)
        L.bounds.setdefault(start + 4, "inside key %d length" % i)
        L.bounds.setdefault(pos, "after key %d name" % i)
        field(4, "type", "key %d type" % i)
        t = u32()
        L.bounds.setdefault(pos, "after key %d type" % i)
        if t == 8:
            string("len", "key %d value" % i)
        elif t == 9:
            field(4, "type", "key %d element type" % i)
            at = u32()
            field(8, "count", "key %d element count" % i)
            n = u64()
            L.bounds.setdefault(pos, "key %d first element" % i)
            if at == 8:
                for j in range(n):
                    if j < 3:
                        string("len", "key %d element %d" % (i, j))
                    else:
                        pos += 8 + struct.unpack_from("<Q", b, pos)[0]
            elif at in SCALAR_SIZE:
                pos += n * SCALAR_SIZE[at]
            else:
                raise J.Fail("layout: key %r: array of type %d" % (key, at))
        elif t in SCALAR_SIZE:
            if key == b"general.alignment" and t == 4:
                align = struct.unpack_from("<I", b, pos)[0]
            pos += SCALAR_SIZE[t]
        else:
            raise J.Fail("layout: key %r: type %d" % (key, t))
        L.bounds.setdefault(pos, "end of key %d" % i)
    infos = []
    for i in range(n_t):
        start = pos
        string("len", "tensor %d name" % i)
        L.bounds.setdefault(pos, "after tensor %d name" % i)
        field(4, "dims", "tensor %d n_dims" % i)
        nd = u32()
        for j in range(nd):
            field(8, "dims", "tensor %d ne[%d]" % (i, j))
            u64()
        field(4, "type", "tensor %d ggml type" % i)
        u32()
        field(8, "offset", "tensor %d offset" % i)
        off = u64()
        infos.append(off)
        L.bounds.setdefault(pos, "end of tensor info %d" % i)
        del start
    hdr_end = pos
    data = (hdr_end + align - 1) // align * align
    L.bounds.setdefault(hdr_end, "end of the tensor infos (start of padding)")
    if data > hdr_end:
        L.bounds.setdefault(hdr_end + (data - hdr_end) // 2, "inside the padding")
    L.bounds.setdefault(data, "start of the data section")
    offs = sorted(set(infos))
    for k, off in enumerate(offs):
        a = data + off
        e = data + offs[k + 1] if k + 1 < len(offs) else len(b)
        L.tensors.append((a, e - a))
        L.bounds.setdefault(a, "start of tensor data at %d" % a)
        if e - a > 1:
            L.bounds.setdefault(a + (e - a) // 2, "inside tensor data at %d" % a)
    L.bounds.setdefault(len(b) - 1, "one byte short of the end")
    L.header_end, L.data = hdr_end, data
    return L


# ---------------------------------------------------------------------------
# damage


def cases_for(name, b, rng, n_random_trunc, n_textmode, n_flips):
    """(kind, label, bytes) for one source."""
    L = layout(b)
    out = []
    for off in sorted(L.bounds):
        if 0 < off < len(b):
            out.append(("trunc", "%s cut at %d (%s)" % (name, off, L.bounds[off]), b[:off]))
    for _ in range(n_random_trunc):
        off = rng.randrange(1, len(b))
        out.append(("trunc", "%s cut at random point %d" % (name, off), b[:off]))

    # U+FFFD: mostly in the header, where it matters; some anywhere.
    rep = b"\xef\xbf\xbd"
    for k in range(n_textmode):
        hi = L.header_end if k % 3 else len(b)
        at = rng.randrange(0, max(1, hi))
        if k % 2:
            out.append(("textmode", "%s byte %d replaced by EF BF BD (shifted)" % (name, at),
                        b[:at] + rep + b[at + 1:]))
        else:
            out.append(("textmode", "%s EF BF BD written over %d..%d" % (name, at, at + 2),
                        b[:at] + rep + b[at + 3:] if at + 3 <= len(b) else b[:at] + rep[:len(b) - at]))
    fixed = b.decode("utf-8", errors="replace").encode("utf-8")
    if fixed != b:
        out.append(("textmode", "%s through a UTF-8 repair (%d -> %d bytes)" % (name, len(b), len(fixed)), fixed))

    # Bit flips in fields; counts always, the rest sampled.
    cand = []
    for off, width, kind, label in L.fields:
        bits = [0, 1, 2, 4, 7, 15, width * 8 - 1]
        if width == 8:
            bits += [31, 32, 40, 62]
        for bit in sorted(set(bits)):
            cand.append((off, width, kind, label, bit))
    must = [c for c in cand if c[2] in ("count", "version")]
    rest = [c for c in cand if c[2] not in ("count", "version")]
    rng.shuffle(rest)
    for off, width, kind, label, bit in must + rest[:max(0, n_flips - len(must))]:
        d = bytearray(b)
        d[off + bit // 8] ^= 1 << (bit % 8)
        out.append(("flip", "%s bit %d of %s (%s at %d)" % (name, bit, label, kind, off), bytes(d)))
    return out


# ---------------------------------------------------------------------------
# one damaged file


class Result:
    def __init__(self):
        self.tried = self.refused = self.mounted = 0
        self.by_kind = {}
        self.problems = []
        self.refusals = {}
        self.warned = 0
        self.failed_files = 0


def read_all(path, limit):
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks, n = [], 0
        while n < limit:
            c = os.read(fd, min(1 << 20, limit - n))
            if not c:
                break
            chunks.append(c)
            n += len(c)
        return b"".join(chunks)
    finally:
        os.close(fd)


def walk_mount(mnt, damaged, probs, label):
    """Lists, stats, reads and xattrs every entry of the mount."""
    real_mnt = os.path.realpath(mnt)
    n_files = 0
    stack = [os.fsencode(mnt)]
    while stack:
        d = stack.pop()
        try:
            names = os.listdir(d)
        except OSError as e:
            probs.append("%s: listing %r failed: %s" % (label, d, e))
            continue
        if len(set(names)) != len(names):
            probs.append("%s: %r lists a name twice" % (label, d))
        for n in names:
            if n in (b".", b"..") or b"/" in n or b"\0" in n or len(n) > 255:
                probs.append("%s: %r lists an illegal name %r" % (label, d, n))
                continue
            p = os.path.join(d, n)
            if not os.path.realpath(p).startswith(os.fsencode(real_mnt) + b"/"):
                probs.append("%s: %r resolves outside the mount" % (label, p))
            try:
                st = os.lstat(p)
            except OSError as e:
                probs.append("%s: stat %r failed: %s" % (label, p, e))
                continue
            try:
                for x in os.listxattr(p, follow_symlinks=False):
                    os.getxattr(p, x, follow_symlinks=False)
            except OSError as e:
                probs.append("%s: xattrs of %r: %s" % (label, p, e))
            if stat.S_ISDIR(st.st_mode):
                stack.append(p)
                continue
            if not stat.S_ISREG(st.st_mode):
                probs.append("%s: %r is neither a file nor a directory (mode %o)" % (label, p, st.st_mode))
                continue
            n_files += 1
            try:
                data = read_all(p, min(st.st_size + 4096, READ_CAP))
            except OSError as e:
                probs.append("%s: reading %r failed: %s" % (label, p, e))
                continue
            if st.st_size <= READ_CAP and len(data) != st.st_size:
                probs.append("%s: %r: st_size %d but %d bytes read" % (label, p, st.st_size, len(data)))
            parent = os.path.basename(d)
            if parent == b"tensors":
                try:
                    off = int(os.getxattr(p, "user.gguf.offset"))
                    if damaged[off:off + len(data)] != data:
                        probs.append("%s: %r: bytes differ from the file's at its offset %d" % (label, p, off))
                except (OSError, ValueError) as e:
                    probs.append("%s: %r: user.gguf.offset: %s" % (label, p, e))
            elif d == os.fsencode(mnt) and n.endswith(b".gguf"):
                if data != damaged:
                    probs.append("%s: live view %r (%d bytes) differs from the unedited file (%d bytes)"
                                 % (label, p, len(data), len(damaged)))
    return n_files


def try_one(kind, label, data, tmp, idx, res):
    path = os.path.join(tmp, "damaged-%d.gguf" % idx)
    mnt = os.path.join(tmp, "mnt")
    with open(path, "wb") as f:
        f.write(data)
    os.makedirs(mnt, exist_ok=True)
    res.tried += 1
    k = res.by_kind.setdefault(kind, [0, 0, 0])
    k[0] += 1
    probs = []
    with J.Watchdog(mnt, 120, label):
        asan = os.path.join(tmp, "asan")
        os.makedirs(asan, exist_ok=True)
        env = dict(os.environ)
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            env[var] = (env.get(var, "") + ":log_path=" + os.path.join(asan, var[:5].lower())).lstrip(":")
        p = J.run_ggufs(["-o", "ro", path, mnt], timeout=60, env=env)
        mounted = J.mountinfo_entry(mnt) is not None
        err = p.stderr.decode(errors="replace")
        if p.returncode != 0:
            res.refused += 1
            k[1] += 1
            if mounted:
                probs.append("%s: refused (exit %d) but left a mount" % (label, p.returncode))
                J.unmount(mnt, probs)
            if not (err.endswith("\n") and err.count("\n") == 1 and err.startswith("ggufs: %s: " % path)):
                probs.append("%s: exit %d with stderr not one line 'ggufs: %s: ...': %r"
                             % (label, p.returncode, path, err[:500]))
            else:
                msg = err[len("ggufs: %s: " % path):].strip()
                res.refusals.setdefault(msg.split(" at offset")[0][:60], label)
        else:
            res.mounted += 1
            k[2] += 1
            if err:
                res.warned += 1
                for ln in err.splitlines():
                    if not ln.startswith("ggufs: "):
                        probs.append("%s: mounted with a stderr line not starting 'ggufs: ': %r" % (label, ln[:300]))
            if not mounted:
                probs.append("%s: exit 0 but nothing mounted" % label)
            else:
                pids = J._procs_for(mnt)
                walk_mount(mnt, data, probs, label)
                try:
                    top = os.listdir(mnt)
                    if "meta" not in top or "tensors" not in top:
                        probs.append("%s: after the reads the mount root lists %r" % (label, top))
                except OSError as e:
                    probs.append("%s: after the reads the mount no longer answers: %s" % (label, e))
                dead = [q for q in pids if not os.path.exists("/proc/%d" % q) or J._zombie(q)]
                if not pids or dead:
                    probs.append("%s: the ggufs daemon died during the reads" % label)
                J.unmount(mnt, probs)
    for f in sorted(os.listdir(asan)):
        # A sanitizer build of ggufs (or its daemon) reported something.
        fp = os.path.join(asan, f)
        with open(fp, errors="replace") as fh:
            rep = fh.read().strip()
        os.unlink(fp)
        if rep:
            keep = os.path.join(tmp, "..", "ggufs-damage-%d.gguf" % idx)
            shutil.copyfile(path, keep)
            probs.append("%s: sanitizer report (file kept as %s):\n    %s"
                         % (label, os.path.realpath(keep), "\n    ".join(rep.splitlines()[:30])))
    os.unlink(path)
    if probs:
        res.failed_files += 1
    res.problems.extend(probs)
    for pr in probs:
        J.log("FAIL " + pr)


# ---------------------------------------------------------------------------
# faults: the file changes under a mount


def check_faults(sources, tmp, res):
    """A GGUF truncated, shrunk to nothing, or overwritten while mounted
    read-only: reads may fail (EIO) or come back short, but every request
    is answered, the daemon lives on, and the mount unmounts cleanly."""
    n = 0
    for src in sources:
        with open(src, "rb") as f:
            b = f.read()
        L = layout(b)
        for how in ("truncate to the data start", "truncate to nothing", "header overwritten with 0xff",
                    "data overwritten with U+FFFD"):
            path = os.path.join(tmp, "fault.gguf")
            with open(path, "wb") as f:
                f.write(b)
            mnt = os.path.join(tmp, "mnt-fault")
            os.makedirs(mnt, exist_ok=True)
            label = "fault: %s, %s under the mount" % (os.path.basename(src), how)
            probs = []
            with J.Watchdog(mnt, 120, label):
                with J.Mounted(path, mnt, args=["-o", "ro"]):
                    pids = J._procs_for(mnt)
                    # Touch everything once so that names and sizes are known.
                    for d in ("meta", "tensors"):
                        for e in os.listdir(os.path.join(mnt, d)):
                            os.stat(os.path.join(mnt, d, e))
                    with open(path, "r+b") as f:
                        if how == "truncate to the data start":
                            f.truncate(L.data)
                        elif how == "truncate to nothing":
                            f.truncate(0)
                        elif how.startswith("header"):
                            f.write(b"\xff" * L.header_end)
                        else:
                            f.seek(L.data)
                            f.write(b"\xef\xbf\xbd" * ((len(b) - L.data) // 3))
                    errs = 0
                    for d in ("", "meta", "tensors"):
                        for e in os.listdir(os.path.join(mnt, d)):
                            p = os.path.join(mnt, d, e)
                            if os.path.isdir(p):
                                continue
                            try:
                                with open(p, "rb") as f:
                                    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                                    while f.read(1 << 20):
                                        pass
                                for x in os.listxattr(p):
                                    os.getxattr(p, x)
                            except OSError:
                                errs += 1
                    try:
                        os.listdir(os.path.join(mnt, "meta"))
                    except OSError as e:
                        probs.append("%s: the mount no longer answers: %s" % (label, e))
                    if not pids or any(not os.path.exists("/proc/%d" % q) or J._zombie(q) for q in pids):
                        probs.append("%s: the ggufs daemon died" % label)
            os.unlink(path)
            n += 1
            J.log("ok   %s (%d reads failed, as they may)" % (label, errs) if not probs else "FAIL " + "; ".join(probs))
            res.problems.extend(probs)
            res.failed_files += bool(probs)
    res.faults = n


# ---------------------------------------------------------------------------
# names: reachable, escaped, nothing escapes the mount


def check_names(names_gguf, tmp, res):
    w = J.walk_gguf(names_gguf)
    mnt = os.path.join(tmp, "mnt-names")
    os.makedirs(mnt, exist_ok=True)
    probs = []
    with J.Watchdog(mnt, 120, "names"):
        with J.Mounted(names_gguf, mnt, args=["-o", "ro"]):
            bm = os.fsencode(mnt)
            real = os.path.realpath(bm)
            for sub, raw_names in ((b"meta", [k for k, _, _ in w.kvs if k != J.FILLER_KEY]),
                                   (b"tensors", [t[0] for t in w.tensors])):
                d = os.path.join(bm, sub)
                listed = set(os.listdir(d))
                want = {J.escape_name(n): n for n in raw_names}
                if len(want) != len(raw_names):
                    probs.append("names: two %s names escape alike in the judge" % sub.decode())
                for f, raw in want.items():
                    if f not in listed:
                        probs.append("names: %s/%r (name %r) is not listed" % (sub.decode(), f, raw))
                        continue
                    p = os.path.join(d, f)
                    try:
                        st = os.stat(p)
                        data = read_all(p, READ_CAP)
                        if len(data) != st.st_size:
                            probs.append("names: %s/%r: %d bytes read, st_size %d" % (sub.decode(), f, len(data), st.st_size))
                    except OSError as e:
                        probs.append("names: %s/%r cannot be stat'ed or read: %s" % (sub.decode(), f, e))
                    if not os.path.realpath(p).startswith(real + b"/" + sub + b"/"):
                        probs.append("names: %s/%r resolves to %r" % (sub.decode(), f, os.path.realpath(p)))
                    if len(f) > 255 or b"/" in f or f in (b".", b".."):
                        probs.append("names: illegal file name %r" % f)
                extra = listed - set(want)
                if extra:
                    probs.append("names: %s/ lists unexpected entries %r" % (sub.decode(), sorted(extra)[:5]))
                # The raw spellings lead nowhere else: '..' is the parent
                # directory (the kernel's), 'a/b' is a lookup of 'a' in d.
                if os.path.realpath(os.path.join(d, b"..")) != real:
                    probs.append("names: %s/.. is not the mount root" % sub.decode())
                for raw in raw_names:
                    if raw in (b".", b".."):
                        continue
                    if b"/" in raw and not raw.startswith(b"/") and b"\0" not in raw:
                        p = os.path.join(d, raw)
                        if os.path.exists(p):
                            probs.append("names: the unescaped path %r exists" % p)
                # "%2E%2E" is the tensor/key named "..", a file, not the parent.
                for f in (b"%2E", b"%2E%2E"):
                    if f in want:
                        st = os.lstat(os.path.join(d, f))
                        if not stat.S_ISREG(st.st_mode):
                            probs.append("names: %s/%s is not the regular file of the name %r"
                                         % (sub.decode(), f.decode(), want[f]))
                # Lookups of names the escaping never produces fail.
                for f in (b"%2e", b"%41", b"%", b"%~", b"a%2fb", b"%2F%2E%2E%2F"):
                    if f not in want and os.path.exists(os.path.join(d, f)):
                        probs.append("names: non-canonical %s/%r exists" % (sub.decode(), f))
            n_checked = len(w.kvs) + len(w.tensors)
    res.names_failed = bool(probs)
    res.problems.extend(probs)
    for pr in probs:
        J.log("FAIL " + pr)
    J.log("names: %d keys and tensors of %s checked, %d problem(s)" % (n_checked, os.path.basename(names_gguf), len(probs)))


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=float(os.environ.get("DAMAGE_BUDGET", "150")),
                    help="seconds to spend on damaged files (default 150)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    J.require_fuse()
    J.tool("GGUFS")
    rng = random.Random(args.seed)
    tmp = tempfile.mkdtemp(prefix="ggufs-damage-")
    res = Result()
    try:
        fix = os.path.join(tmp, "fixtures")
        p = subprocess.run([J.tool("MKFIXTURE"), "all", fix], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=600)
        if p.returncode != 0:
            raise J.Fail("mkfixture all failed: %s" % p.stderr.decode(errors="replace")[-500:])
        sources = sorted(os.path.join(fix, f) for f in os.listdir(fix) if f.endswith(".gguf"))
        sources += J.shared_models()
        first, later = [], []
        for s in sources:
            with open(s, "rb") as f:
                b = f.read()
            name = os.path.basename(s)
            big = len(b) > (1 << 20)
            cs = cases_for(name, b, rng, n_random_trunc=5, n_textmode=8 if big else 30,
                           n_flips=60 if big else 200)
            # Boundary truncations of small files first (the contract's
            # list); everything else in random order after them.
            for c in cs:
                (first if c[0] == "trunc" and "random" not in c[1] and not big else later).append(c)
        rng.shuffle(later)
        cases = first + later
        J.log("%d damaged files from %d sources (%d boundary truncations of small files first)"
              % (len(cases), len(sources), len(first)))
        t0 = time.time()
        left = 0
        for i, (kind, label, data) in enumerate(cases):
            if time.time() - t0 > args.budget:
                left = len(cases) - i
                break
            try_one(kind, label, data, tmp, i, res)
        el = time.time() - t0
        check_faults([os.path.join(fix, "tensors.gguf")] + J.shared_models()[-1:], tmp, res)
        names = os.path.join(fix, "names.gguf")
        if os.path.exists(names):
            check_names(names, tmp, res)
        else:
            res.problems.append("mkfixture all wrote no names.gguf")
    finally:
        for m in os.listdir(tmp):
            if J.mountinfo_entry(os.path.join(tmp, m)):
                J.unmount(os.path.join(tmp, m), [])
        if not any(J.mountinfo_entry(os.path.join(tmp, m)) for m in os.listdir(tmp)):
            shutil.rmtree(tmp, ignore_errors=True)
    J.log("refusal messages seen (first words, one example each):")
    for m, ex in sorted(res.refusals.items())[:40]:
        J.log("  %-62s e.g. %s" % (m, ex[:90]))
    J.log("by kind (tried/refused/mounted): " + ", ".join(
        "%s %d/%d/%d" % (k, v[0], v[1], v[2]) for k, v in sorted(res.by_kind.items())))
    J.log("damaged files: %d tried, %d refused, %d mounted (%d with warnings) in %.0f s%s"
          % (res.tried, res.refused, res.mounted, res.warned, el,
             "; %d left out by the %.0f s budget" % (left, args.budget) if left else ""))
    nf = res.failed_files + int(getattr(res, "names_failed", True))
    J.log("%d passed, %d failed" % (res.tried + getattr(res, "faults", 0) + 1 - nf, nf))
    if res.problems:
        raise J.Fail("%d problem(s) with damaged files or names (listed above)" % len(res.problems))


if __name__ == "__main__":
    J.main(main)
