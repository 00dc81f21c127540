"""Shared helpers of the mount tests (python3, stdlib only).

The judge compares what a ggufs mount shows with what ggml's reference GGUF
reader reports (through tests/refdump) and, for the few things ggml's C API
cannot tell (exact name bytes past a NUL, the number of dimensions as
stored), with a minimal walk of the GGUF header written here.  Nothing in
this file uses ggufs' own library.

Conventions: a failed check raises Fail with a precise message; SKIP (77)
is meson's "skipped" exit status.
"""

import contextlib
import errno
import mmap
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal
from fractions import Fraction

SKIP = 77
FILLER_KEY = b"ggufs.padding"


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def log(*a):
    print(*a, flush=True)


def shorten(b, n=200):
    r = repr(b)
    return r if len(r) <= n else r[:n] + "...(%d bytes)" % len(b)


# ---------------------------------------------------------------------------
# environment


def tool(var):
    p = os.environ.get(var)
    if not p:
        raise Fail("environment variable %s is not set (run through meson test)" % var)
    if not os.access(p, os.X_OK):
        raise Fail("%s=%s is not an executable" % (var, p))
    return p


def require_fuse():
    if not os.path.exists("/dev/fuse"):
        raise Skip("/dev/fuse is missing")
    if not shutil.which("fusermount3"):
        raise Skip("fusermount3 is not installed")


def shared_models():
    """The real GGUF files in ../shared/models beside the source tree
    (GGUFS_SRCDIR/../shared/models)."""
    src = os.environ.get("GGUFS_SRCDIR", "")
    d = os.path.join(src, "..", "shared", "models") if src else ""
    if not d or not os.path.isdir(d):
        log("note: no shared models directory (%s); real-model checks skipped" % (d or "GGUFS_SRCDIR unset"))
        return []
    return sorted(os.path.join(os.path.realpath(d), f) for f in os.listdir(d) if f.endswith(".gguf"))


def main(fn):
    """Runs fn() and maps its outcome to an exit status."""
    try:
        fn()
    except Skip as e:
        log("SKIP: %s" % e)
        sys.exit(SKIP)
    except Fail as e:
        log("FAIL: %s" % e)
        sys.exit(1)
    sys.exit(0)


def sections_main(prefix, sections, root=False):
    """main() of a test whose sections each take one shared scratch
    directory (named prefix...): 77 (skip) without /dev/fuse or, when root,
    without root; else every section in order, exit 0, or the first Fail
    logged and exit 1."""
    if not os.path.exists("/dev/fuse"):
        print("SKIP: no /dev/fuse")
        sys.exit(SKIP)
    if root and os.geteuid() != 0:
        print("SKIP: passthrough needs root")
        sys.exit(SKIP)
    try:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            for sec in sections:
                sec(tmp)
    except Fail as e:
        log("FAIL: %s" % e)
        sys.exit(1)
    sys.exit(0)


@contextlib.contextmanager
def store_scratch(prefix, mode=None):
    """(tmp, mnt) of a store test: a scratch tree named prefix... (mode: its
    permissions, e.g. 0o755 for other users to reach the mount point) with
    mnt/ in it, XDG_STATE_HOME inside it (the overlays and pending edits of
    the test's stores stay in its tree); unmounted and removed on exit."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    if mode is not None:
        os.chmod(tmp, mode)
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    os.environ["XDG_STATE_HOME"] = os.path.join(tmp, "state")
    try:
        yield tmp, mnt
    finally:
        cleanup(mnt, tmp)


def chosen(var, fns):
    """The functions of fns that $var (a comma-separated list of their
    names) names, all of them when it is unset or empty."""
    only = os.environ.get(var, "").split(",")
    return [fn for fn in fns if only == [""] or fn.__name__ in only]


def run_watched(mnt, seconds, fns, *args):
    """fn(*args) for each of fns, each under a Watchdog of seconds on mnt."""
    for fn in fns:
        with Watchdog(mnt, seconds, fn.__name__):
            fn(*args)


def node_modules(*pkgs):
    """.deps/node_modules of the source tree, holding every package of pkgs
    (Skip when one is missing, or node)."""
    d = os.path.join(os.environ.get("GGUFS_SRCDIR", ""), ".deps", "node_modules")
    for pkg in pkgs:
        if not os.path.isfile(os.path.join(d, pkg, "package.json")):
            raise Skip("%s is not installed in %s (run dev/setup --tests)" % (pkg, d))
    if not shutil.which("node"):
        raise Skip("node is not installed")
    return d


def stopped_read(pid, fd, n):
    """Reads fd whole and touches every page of a mapping of n bytes with
    the daemon (pid) stopped: (bytes read, bytes mapped, done within 5 s)."""
    m = mmap.mmap(fd, n, prot=mmap.PROT_READ)  # fstat: before the stop
    res = {}

    def work():
        res["read"] = read_all(fd)
        res["mmap"] = m[:]

    os.kill(pid, signal.SIGSTOP)
    try:
        t = threading.Thread(target=work, daemon=True)
        t.start()
        t.join(5)
        done = not t.is_alive()
    finally:
        os.kill(pid, signal.SIGCONT)
    t.join(60)
    m.close()
    return res.get("read"), res.get("mmap"), done


def mkfixture_model(path, mb=1, n=2, vocab=300, timeout=300):
    """mkfixture's model at path: n tensors of mb MiB, a vocabulary of vocab
    tokens; path (Fail with mkfixture's words when it fails)."""
    p = subprocess.run([tool("MKFIXTURE"), "model", path, "--tensor-mb", str(mb), "--n-tensors", str(n),
                        "--vocab", str(vocab)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if p.returncode != 0:
        raise Fail("mkfixture failed: %s" % p.stderr.decode(errors="replace"))
    return path


def read_all(fd):
    """The bytes of fd from offset 0 to its end, read by pread(2)s of 1 MiB."""
    out, off = [], 0
    while True:
        b = os.pread(fd, 1 << 20, off)
        if not b:
            return b"".join(out)
        out.append(b)
        off += len(b)


# ---------------------------------------------------------------------------
# refdump


class KV:
    def __init__(self, key, type_, kind, content, bits):
        self.key, self.type, self.kind, self.content, self.bits = key, type_, kind, content, bits


class Tensor:
    def __init__(self, name, ggml_type, ne, offset, size):
        self.name, self.ggml_type, self.ne, self.offset, self.size = name, ggml_type, ne, offset, size


class Ref:
    pass


def _unhex(s):
    return b"" if s == "-" else bytes.fromhex(s)


def refdump(path):
    """Returns (verdict, Ref or None): verdict is 'ggml-accepts' or
    'ggml-rejects'.  Raises Skip when ggml's library is not available."""
    exe = tool("REFDUMP")
    try:
        p = subprocess.run([exe, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    except subprocess.TimeoutExpired:
        raise Fail("refdump %s timed out" % path)
    err = p.stderr.decode(errors="replace").strip()
    if p.returncode == SKIP:
        raise Skip("refdump: " + err)
    if p.returncode == 1 and p.stdout == b"rejected\n":
        return "ggml-rejects", None
    if p.returncode != 0:
        raise Fail("refdump %s failed with status %d: %s" % (path, p.returncode, err[-2000:]))
    return "ggml-accepts", parse_refdump(p.stdout.decode("ascii"), path)


def parse_refdump(text, path):
    r = Ref()
    r.kvs, r.tensors = [], []
    lines = text.split("\n")
    if lines[0] != "refdump 1" or lines[-2:] != ["end", ""]:
        raise Fail("refdump %s: malformed output" % path)
    for ln in lines[1:-2]:
        f = ln.split(" ")
        if f[0] in ("version", "alignment", "data_offset", "n_kv", "n_tensors"):
            setattr(r, f[0], int(f[1]))
        elif f[0] == "kv":
            bits = [] if f[5] == "-" else [int(x, 16) for x in f[5].split(",")]
            r.kvs.append(KV(_unhex(f[1]), f[2], f[3], _unhex(f[4]), bits))
        elif f[0] == "tensor":
            r.tensors.append(Tensor(_unhex(f[1]), f[2], tuple(int(x) for x in f[3].split(",")),
                                    int(f[4]), int(f[5])))
        else:
            raise Fail("refdump %s: unknown record %r" % (path, ln[:80]))
    if len(r.kvs) != r.n_kv or len(r.tensors) != r.n_tensors:
        raise Fail("refdump %s: record counts do not match" % path)
    return r


# ---------------------------------------------------------------------------
# minimal header walk (exact name and string bytes, stored n_dims)

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B",
           10: "<Q", 11: "<q", 12: "<d"}


class _Reader:
    def __init__(self, f):
        import mmap
        size = os.fstat(f.fileno()).st_size
        self.m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) if size else b""
        self.size = size
        self.pos = 0

    def take(self, n):
        if self.pos + n > self.size:
            raise Fail("header walk: file truncated at %d" % self.pos)
        b = self.m[self.pos:self.pos + n]
        self.pos += n
        return b

    def skip(self, n):
        self.pos += n

    def u32(self):
        if self.pos + 4 > self.size:
            raise Fail("header walk: file truncated at %d" % self.pos)
        self.pos += 4
        return struct.unpack_from("<I", self.m, self.pos - 4)[0]

    def u64(self):
        if self.pos + 8 > self.size:
            raise Fail("header walk: file truncated at %d" % self.pos)
        self.pos += 8
        return struct.unpack_from("<Q", self.m, self.pos - 8)[0]

    def s(self):
        n = self.u64()
        if n > (1 << 30):
            raise Fail("header walk: string of %d bytes at %d" % (n, self.pos))
        return self.take(n)


class Walk:
    pass


def walk_gguf(path):
    """Reads keys, string values and tensor infos exactly as stored.  Only
    used on files ggml accepted."""
    w = Walk()
    w.kvs, w.tensors = [], []
    with open(path, "rb") as f:
        r = _Reader(f)
        if r.take(4) != b"GGUF":
            raise Fail("header walk: %s: bad magic" % path)
        w.version = r.u32()
        w.n_tensors, w.n_kv = r.u64(), r.u64()
        for _ in range(w.n_kv):
            key = r.s()
            t = r.u32()
            strings = None  # the string value, or the list of string elements
            if t == 8:
                strings = r.s()
            elif t == 9:
                at, n = r.u32(), r.u64()
                if at == 8:
                    strings = [r.s() for _ in range(n)]
                elif at in _SCALAR:
                    r.skip(n * struct.calcsize(_SCALAR[at]))
                else:
                    raise Fail("header walk: key %r: array of type %d" % (key, at))
            elif t in _SCALAR:
                r.skip(struct.calcsize(_SCALAR[t]))
            else:
                raise Fail("header walk: key %r: type %d" % (key, t))
            w.kvs.append((key, t, strings))
        for _ in range(w.n_tensors):
            name = r.s()
            nd = r.u32()
            ne = [r.u64() for _ in range(nd)]
            tt = r.u32()
            off = r.u64()
            w.tensors.append((name, nd, ne, tt, off))
        w.header_end = r.pos
    return w


# ---------------------------------------------------------------------------
# the user contract, reimplemented: names and text escapes


def utf8_units(b):
    """Splits b into (bytes, valid) units: a whole valid UTF-8 sequence
    (RFC 3629) or one byte that is not part of one."""
    i, n = 0, len(b)
    out = []
    while i < n:
        c = b[i]
        ln, lo, hi = 0, 0x80, 0xBF
        if c < 0x80:
            ln = 1
        elif 0xC2 <= c <= 0xDF:
            ln = 2
        elif 0xE0 <= c <= 0xEF:
            ln = 3
            if c == 0xE0:
                lo = 0xA0
            elif c == 0xED:
                hi = 0x9F
        elif 0xF0 <= c <= 0xF4:
            ln = 4
            if c == 0xF0:
                lo = 0x90
            elif c == 0xF4:
                hi = 0x8F
        ok = ln > 0 and i + ln <= n
        if ok and ln > 1:
            ok = lo <= b[i + 1] <= hi and all(0x80 <= x <= 0xBF for x in b[i + 2:i + ln])
        if ok:
            out.append((b[i:i + ln], True))
            i += ln
        else:
            out.append((b[i:i + 1], False))
            i += 1
    return out


def fnv1a64(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


HASH_CUT = 237  # see escape_name


def escape_name(raw):
    """File name of a key or tensor name (bytes -> bytes).

    Long names: gguf.h and man/ggufs.1 say the escaped prefix is cut at 238
    bytes, but 238 + len("%~") + 16 = 256 > NAME_MAX, so such a file name
    could not exist; the only cut that honours the 255-byte limit is 237,
    which is what is judged here (and what gguf/names.c does).  The empty
    name (no file name possible) gets the hashed form with an empty prefix.
    """
    if raw == b"":
        return b"%~" + b"%016x" % fnv1a64(raw)
    if raw == b".":
        return b"%2E"
    if raw == b"..":
        return b"%2E%2E"
    units = []
    for u, valid in utf8_units(raw):
        if not valid:
            units.append(b"%%%02X" % u[0])
        elif u == b"%":
            units.append(b"%25")
        elif u == b"/":
            units.append(b"%2F")
        elif len(u) == 1 and (u[0] < 0x20 or u[0] == 0x7F):
            units.append(b"%%%02X" % u[0])
        else:
            units.append(u)
    esc = b"".join(units)
    if len(esc) <= 255:
        return esc
    # Cut at HASH_CUT bytes, never inside a %HH (nor inside a UTF-8
    # sequence, which would leave an invalid UTF-8 file name).
    out = b""
    for u in units:
        if len(out) + len(u) > HASH_CUT:
            break
        out += u
    return out + b"%~" + b"%016x" % fnv1a64(raw)


def escape_elem(raw):
    """One string array element as one line (no newline)."""
    out = []
    for u, valid in utf8_units(raw):
        c = u[0]
        if not valid:
            out.append(b"\\x%02x" % c)
        elif u == b"\\":
            out.append(b"\\\\")
        elif u == b"\n":
            out.append(b"\\n")
        elif u == b"\r":
            out.append(b"\\r")
        elif u == b"\t":
            out.append(b"\\t")
        elif len(u) == 1 and (c < 0x20 or c == 0x7F):
            out.append(b"\\x%02x" % c)
        else:
            out.append(u)
    return b"".join(out)


# ---------------------------------------------------------------------------
# meta.tsv (man/ggufs.1, META.TSV), reimplemented from ggml's reading

TSV_HEADER = b"name\ttype\tcount\tvalue\n"
SHORT_MAX = 80


def short_string(raw):
    """A string as meta.tsv shows it: whole UTF-8 units up to SHORT_MAX
    bytes, escaped to one line, "...(+N bytes)" when cut."""
    n = 0
    for u, _ in utf8_units(raw):
        if n + len(u) > SHORT_MAX:
            break
        n += len(u)
    out = escape_elem(raw[:n])
    return out + (b"...(+%d bytes)" % (len(raw) - n) if n < len(raw) else b"")


def short_array(tokens):
    """Element texts joined as meta.tsv shows an array."""
    out = b"["
    for k, t in enumerate(tokens):
        if k > 0 and len(out) >= SHORT_MAX:
            return out + b", ...(+%d more)]" % (len(tokens) - k)
        out += (b", " if k else b"") + t
    return out + b"]"


def _tsv_tokens(kv, wstr, got_value):
    """The element texts of one key as ggml read it (strings from the
    header walk, exact); floats take the text meta.tsv shows once its bits
    are ggml's (their notation is checked in meta/)."""
    if isinstance(wstr, bytes):
        return [short_string(wstr)], False
    if isinstance(wstr, list):
        return [short_string(e) for e in wstr], True
    if kv.kind in ("f32", "f64"):
        body = got_value[1:-1] if got_value.startswith(b"[") else got_value
        texts = [t for t in body.split(b", ") if t and not t.startswith(b"...(+")]
        if len(texts) > len(kv.bits) or any(parse_float_bits(kv.kind, t.decode()) != b
                                            for t, b in zip(texts, kv.bits)):
            return None, None
        return texts + [b"?"] * (len(kv.bits) - len(texts)), kv.type.startswith("array")
    lines = kv.content.split(b"\n")[:-1]
    return lines, kv.type.startswith("array")


def expected_meta_tsv(ref, walk, got=b""):
    """meta.tsv's lines as ggml reads the file (got: meta.tsv as read, for
    the float texts); a line is None where a float's bits differ."""
    got_values = {}
    for ln in got.split(b"\n")[1:]:
        f = ln.split(b"\t")
        if len(f) == 4:
            got_values[f[0]] = f[3]
    lines = [TSV_HEADER]
    for kv, (wkey, wtype, wstr) in zip(ref.kvs, walk.kvs):
        if wkey == FILLER_KEY:
            continue
        name = escape_name(wkey)
        toks, is_arr = _tsv_tokens(kv, wstr, got_values.get(name, b""))
        if toks is None:
            lines.append(None)
            continue
        count = len(toks) if is_arr else 1
        value = short_array(toks) if is_arr else toks[0]
        lines.append(b"\t".join([name, kv.type.encode(), b"%d" % count, value]) + b"\n")
    return lines


def check_meta_tsv(ck, path, ref, walk, what="meta.tsv"):
    """Compares the meta.tsv at path with ggml's reading (ref, walk)."""
    try:
        with open(path, "rb") as f:
            got = f.read()
    except OSError as e:
        ck.bad("%s: read failed: %s" % (what, e))
        return
    want = expected_meta_tsv(ref, walk, got)
    glines = got.splitlines(keepends=True)
    if len(glines) != len(want):
        ck.bad("%s: %d lines, ggml reads %d keys" % (what, len(glines) - 1, len(want) - 1))
    for k, (w, g) in enumerate(zip(want, glines)):
        if w != g:
            ck.bad("%s line %d: expected %s, got %s" % (what, k + 1, shorten(w), shorten(g)), "meta.tsv")


# ---------------------------------------------------------------------------
# floats: exact parsing and the canonical notation of man/ggufs.1

_F = {"f32": (32, 23, 8), "f64": (64, 52, 11)}
_DEC_RE = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")
_NAN_RE = re.compile(r"(-?)nan(?:\(0x([0-9a-fA-F]+)\))?\Z")


def _bits_to_fraction(kind, b):
    if kind == "f32":
        return Fraction(struct.unpack("<f", struct.pack("<I", b))[0])
    return Fraction(struct.unpack("<d", struct.pack("<Q", b))[0])


def _f32_fast(d):
    """float32 bits of the positive double d rounded to float32, or None when
    d sits exactly on a float32 midpoint (then rounding the decimal through
    a double may differ from strtof's direct rounding; the caller rounds the
    exact value instead).  Off a midpoint, the decimal and its correctly
    rounded double lie on the same side of every midpoint, so the result is
    strtof's."""
    if d == 0:
        return 0
    if d >= 3.4e38:
        return None
    b = struct.unpack("<I", struct.pack("<f", d))[0]
    f = struct.unpack("<f", struct.pack("<I", b))[0]
    if f == d:
        return b
    g = struct.unpack("<f", struct.pack("<I", b + 1 if f < d else b - 1))[0]
    if d == (f + g) / 2:
        return None
    return b


def _round_to_f32(fr):
    """Correctly rounded (ties to even) float32 bits of a positive Fraction,
    as strtof does."""
    d = float(fr) if fr < Fraction(10) ** 39 else float("inf")
    if d >= 3.4028235677973366e38:
        c = 0x7F7FFFFF
    else:
        c = struct.unpack("<I", struct.pack("<f", d))[0]
    best = None
    for b in (c - 1, c, c + 1):
        if b < 0 or b > 0x7F800000:
            continue
        v = Fraction(2) ** 128 if b == 0x7F800000 else _bits_to_fraction("f32", b)
        dist = abs(v - fr)
        key = (dist, b & 1)
        if best is None or key < best[0]:
            best = (key, b)
    return best[1]


def parse_float_bits(kind, s):
    """Bits of the text s as strtof/strtod would read it, or None if s is not
    in the grammar of the contract (decimal, inf, -inf, nan, -nan,
    [-]nan(0xMANTISSA) where MANTISSA is the whole mantissa field)."""
    width, mbits, ebits = _F[kind]
    sign_bit = 1 << (width - 1)
    exp_all = ((1 << ebits) - 1) << mbits
    m = _NAN_RE.match(s)
    if m:
        mant = (1 << (mbits - 1)) if m.group(2) is None else int(m.group(2), 16)
        if mant == 0 or mant >= (1 << mbits):
            return None
        return (sign_bit if m.group(1) else 0) | exp_all | mant
    if s in ("inf", "-inf"):
        return (sign_bit if s[0] == "-" else 0) | exp_all
    if not _DEC_RE.match(s):
        return None
    neg = s.startswith("-")
    body = s[1:] if neg else s
    if kind == "f32":
        b = _f32_fast(float(body))
        if b is None:
            b = _round_to_f32(Fraction(body))
        return b | (sign_bit if neg else 0)
    # Python's float() of a decimal string is correctly rounded, as strtod;
    # overflow gives inf, as strtod does (with ERANGE).
    b = struct.unpack("<Q", struct.pack("<d", float(body)))[0]
    return b | (sign_bit if neg else 0)


def canonical_float(kind, bits, shortest):
    """The exact text man/ggufs.1 prescribes for a float with these bits;
    shortest is a shortest round-trip rendering (%.Ng) of it (for finite
    values only its digits and exponent matter)."""
    width, mbits, ebits = _F[kind]
    neg = bool(bits >> (width - 1))
    exp_all = ((1 << ebits) - 1) << mbits
    mant = bits & ((1 << mbits) - 1)
    if bits & exp_all == exp_all:
        if mant == 0:
            return "-inf" if neg else "inf"
        if mant == 1 << (mbits - 1):
            return "-nan" if neg else "nan"
        return "%snan(0x%x)" % ("-" if neg else "", mant)
    d = Decimal(shortest)
    if d == 0:
        return "-0" if neg else "0"
    t = d.normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    x = t.exponent + len(digits) - 1  # decimal exponent of the first digit
    sign = "-" if t.sign else ""
    if -4 <= x <= 16:
        if x >= len(digits) - 1:
            body = digits + "0" * (x - len(digits) + 1)
        elif x >= 0:
            body = digits[:x + 1] + "." + digits[x + 1:]
        else:
            body = "0." + "0" * (-x - 1) + digits
    else:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + "e%s%02d" % ("-" if x < 0 else "+", abs(x))
    return sign + body


_FIXED_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9])?\Z")
_SCI_RE = re.compile(r"-?[1-9](?:\.[0-9]*[1-9])?e[-+](?:[0-9]{2}|[1-9][0-9]{2,})\Z")


def notation_ok(s, want):
    """s (whose bits are already known to be right) is written as
    man/ggufs.1 prescribes: non-finite values and zeros exactly as want
    (NaN hex digits in either case); otherwise fixed notation for decimal
    exponents -4..16 and %g-style scientific beyond, no longer than the
    canonical shortest form want.  Several strings can qualify (a value
    halfway between two shortest decimals, or an integral value written
    exactly, "123456792" for "123456790"); all are accepted."""
    if not _DEC_RE.match(want) or Decimal(want) == 0:
        return s == want or (want.lstrip("-").startswith("nan(") and s.lower() == want and "(0x" in s)
    if not _DEC_RE.match(s) or Decimal(s) == 0:
        return False
    x = Decimal(s).adjusted()
    rx = _FIXED_RE if -4 <= x <= 16 else _SCI_RE
    return bool(rx.match(s)) and len(s) <= len(want)


def compare_float_content(where, kind, got, ref_lines, bits):
    """Checks a float meta file line by line: every value bit-identical to
    ggml's, and written in the canonical notation.  Returns a list of
    problems (empty if fine)."""
    probs = []
    if not bits:
        if got != b"":
            probs.append("%s: expected an empty file (empty array), got %s" % (where, shorten(got)))
        return probs
    if not got.endswith(b"\n"):
        probs.append("%s: does not end in a newline: %s" % (where, shorten(got[-60:])))
        return probs
    lines = got[:-1].split(b"\n")
    if len(lines) != len(bits):
        probs.append("%s: %d lines, ggml has %d elements" % (where, len(lines), len(bits)))
        return probs
    for j, (ln, b, short) in enumerate(zip(lines, bits, ref_lines)):
        try:
            s = ln.decode("ascii")
        except UnicodeDecodeError:
            s = None
        pb = parse_float_bits(kind, s) if s is not None else None
        hexw = 8 if kind == "f32" else 16
        if pb is None:
            probs.append("%s line %d: %s is not a float in the contract's notation (ggml: bits %0*x)"
                         % (where, j + 1, shorten(ln), hexw, b))
        elif pb != b:
            extra = ""
            w, mb, _ = _F[kind]
            if s is not None and _NAN_RE.match(s) and (pb | (1 << (mb - 1))) == b:
                extra = " (MANTISSA read as the whole mantissa field; got looks like the payload without the quiet bit)"
            probs.append("%s line %d: %r reads back as bits %0*x, ggml has %0*x%s"
                         % (where, j + 1, s, hexw, pb, hexw, b, extra))
        else:
            want = canonical_float(kind, b, short.decode("ascii"))
            if not notation_ok(s, want):
                probs.append("%s line %d: value right but notation %r; man/ggufs.1 prescribes the shortest "
                             "decimal in its notation, e.g. %r" % (where, j + 1, s, want))
        if len(probs) >= 10:
            probs.append("%s: (further float problems not listed)" % where)
            break
    return probs


def first_diff(where, want, got):
    """Precise description of where two byte strings differ, by line."""
    if want == got:
        return None
    wl, gl = want.split(b"\n"), got.split(b"\n")
    for i in range(max(len(wl), len(gl))):
        a = wl[i] if i < len(wl) else None
        b = gl[i] if i < len(gl) else None
        if a != b:
            return ("%s: content differs at line %d (expected %d bytes, got %d)\n"
                    "    expected: %s\n    got:      %s"
                    % (where, i + 1, len(want), len(got),
                       "<none>" if a is None else shorten(a), "<none>" if b is None else shorten(b)))
    return "%s: content differs" % where


# ---------------------------------------------------------------------------
# mounts


def _unoct(s):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def mountinfo_entry(mnt):
    """(fstype, source, mount options) of the mount at mnt, or None."""
    mnt = os.path.realpath(mnt)
    found = None
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            left, _, right = line.rstrip("\n").partition(" - ")
            lf, rf = left.split(" "), right.split(" ")
            if _unoct(lf[4]) == mnt:
                found = (_unoct(rf[0]), _unoct(rf[1]), lf[5])  # the last one is on top
    return found


def _procs_for(mnt):
    """PIDs of ggufs processes whose command line ends with this mountpoint
    (the daemon we started)."""
    exe = os.environ.get("GGUFS", "")
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")[:-1]
        except OSError:
            continue
        if argv and argv[-1] == os.fsencode(mnt) and os.path.basename(argv[0]) == os.path.basename(os.fsencode(exe)):
            pids.append(int(d))
    return pids


class Watchdog:
    """If a check hangs (a FUSE request that never returns), kill the ggufs
    daemon of this mount, detach it, and exit with a failure."""

    def __init__(self, mnt, seconds, what):
        self.mnt, self.what = mnt, what
        self.t = threading.Timer(seconds, self._fire)
        self.t.daemon = True

    def _fire(self):
        log("FAIL: %s hung for too long; killing the ggufs daemon of %s" % (self.what, self.mnt))
        for pid in _procs_for(self.mnt):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], stderr=subprocess.DEVNULL)
        os._exit(1)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *a):
        self.t.cancel()


def run_ggufs(args, timeout=60, **kw):
    exe = tool("GGUFS")
    try:
        return subprocess.run([exe] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise Fail("ggufs %s did not return within %ds" % (" ".join(args), timeout))


def unmount(mnt, problems=None):
    """Unmounts mnt (retrying while busy), then checks it is gone and the
    daemon has exited.  Problems go to the list if given, else raise."""
    msgs = []
    pids = _procs_for(mnt)
    for attempt in range(20):
        p = subprocess.run(["fusermount3", "-u", mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode == 0 or mountinfo_entry(mnt) is None:
            break
        time.sleep(0.25)
    else:
        msgs.append("fusermount3 -u %s kept failing: %s" % (mnt, p.stderr.decode(errors="replace").strip()))
        subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
    if mountinfo_entry(mnt) is not None:
        msgs.append("%s is still mounted after unmounting" % mnt)
    deadline = time.time() + 10
    alive = pids
    while alive and time.time() < deadline:
        alive = [p for p in alive if os.path.exists("/proc/%d" % p) and not _zombie(p)]
        if alive:
            time.sleep(0.1)
    if alive:
        msgs.append("ggufs daemon(s) %s still running 10s after unmount of %s" % (alive, mnt))
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    if msgs:
        if problems is None:
            raise Fail("; ".join(msgs))
        problems.extend(msgs)


def cleanup(mnt, tmp):
    """A test's end, whatever happened: mnt unmounted if something is
    still mounted there (problems ignored), tmp removed."""
    if mountinfo_entry(mnt) is not None:
        unmount(mnt, [])
    shutil.rmtree(tmp, ignore_errors=True)


def _zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


class Mounted:
    """with Mounted(gguf, mnt) as res: ... -- mounts with ggufs (failing
    loudly if it does not), unmounts in the end."""

    def __init__(self, gguf, mnt, args=(), cwd=None):
        self.gguf, self.mnt, self.args, self.cwd = gguf, mnt, list(args), cwd

    def __enter__(self):
        p = run_ggufs(self.args + [self.gguf, self.mnt], cwd=self.cwd)
        self.proc = p
        if p.returncode != 0:
            if mountinfo_entry(self.mnt) is not None:
                unmount(self.mnt, [])
            raise Fail("ggufs %s %s exited with %d: %s"
                       % (self.gguf, self.mnt, p.returncode, p.stderr.decode(errors="replace").strip()))
        if mountinfo_entry(self.mnt) is None:
            raise Fail("ggufs %s %s exited 0 but nothing is mounted at %s" % (self.gguf, self.mnt, self.mnt))
        return p

    def __exit__(self, et, ev, tb):
        problems = []
        unmount(self.mnt, problems)
        if problems and et is None:
            raise Fail("; ".join(problems))
        if problems:
            log("also: " + "; ".join(problems))
        return False


# ---------------------------------------------------------------------------
# the comparison of a mount with ggml's view


def xattr(path, name):
    try:
        return os.getxattr(path, name, follow_symlinks=False)
    except OSError as e:
        return "<%s>" % errno.errorcode.get(e.errno, e.errno)


class Checker:
    def __init__(self, label):
        self.label = label
        self.problems = []

    def bad(self, msg, group=None):
        """Records a problem; problems of one group (e.g. "mtime") are
        summarised after the first three."""
        if group is not None:
            self.groups = getattr(self, "groups", {})
            n = self.groups.get(group, 0) + 1
            self.groups[group] = n
            if n > 3:
                return
        self.problems.append(msg)

    def eq(self, what, want, got):
        if want != got:
            self.bad("%s: expected %s, got %s" % (what, shorten(want), shorten(got)))
            return False
        return True

    def done(self):
        for g, n in sorted(getattr(self, "groups", {}).items()):
            if n > 3:
                self.problems.append("... and %d more files with the same %s problem" % (n - 3, g))
        self.groups = {}
        if self.problems:
            n = len(self.problems)
            shown = self.problems[:60]
            raise Fail("%s: %d mismatch(es):\n  - " % (self.label, n) + "\n  - ".join(shown)
                       + ("\n  ... %d more" % (n - 60) if n > 60 else ""))


# Tensors larger than this are checked by samples (first and last MiB and
# random windows) instead of a full hash, so that a sparse multi-GiB fixture
# stays fast.
FULL_LIMIT = 64 << 20


def _sample_windows(rng, size):
    w = [(0, min(size, 1 << 20)), (max(0, size - (1 << 20)), min(size, 1 << 20))]
    for _ in range(32):
        a = rng.randrange(0, size)
        w.append((a, min(size - a, rng.randrange(1, 1 << 17))))
    return w


def _region_reader(gguf_fd, off, size, chunk=1 << 22):
    pos = 0
    while pos < size:
        n = min(chunk, size - pos)
        b = os.pread(gguf_fd, n, off + pos)
        if not b:
            return
        yield b
        pos += len(b)


def expected_tree(ref, walk, label):
    """From ggml's view (and the header walk for exact bytes): the expected
    meta/ and tensors/ entries.  Returns (meta, tensors) dicts keyed by the
    escaped file name."""
    import hashlib  # noqa: F401  (kept local: only the comparer needs it)
    if walk.n_kv != ref.n_kv or walk.n_tensors != ref.n_tensors or walk.version != ref.version:
        raise Fail("%s: ggml and the header walk disagree on counts/version "
                   "(ggml %d kv %d tensors v%d, walk %d kv %d tensors v%d)"
                   % (label, ref.n_kv, ref.n_tensors, ref.version, walk.n_kv, walk.n_tensors, walk.version))
    meta = {}
    for kv, (wkey, wtype, wstr) in zip(ref.kvs, walk.kvs):
        if wkey.split(b"\0")[0] != kv.key:
            raise Fail("%s: ggml key %r is not the stored key %r" % (label, kv.key, wkey))
        content = kv.content
        if isinstance(wstr, bytes) and b"\0" in wstr:
            content = wstr + b"\n"  # ggml's C API stops at the NUL
        elif isinstance(wstr, list) and any(b"\0" in e for e in wstr):
            content = b"".join(escape_elem(e) + b"\n" for e in wstr)
        if wkey == FILLER_KEY:
            continue
        name = escape_name(wkey)
        if name in meta:
            raise Fail("%s: two keys escape to the same file name %r" % (label, name))
        meta[name] = (wkey, kv, content)
    tensors = {}
    for t, (wname, nd, ne, wtype, woff) in zip(ref.tensors, walk.tensors):
        if wname.split(b"\0")[0] != t.name:
            raise Fail("%s: ggml tensor name %r is not the stored name %r" % (label, t.name, wname))
        padded = tuple(ne) + (1,) * (4 - len(ne))
        if padded != t.ne or ref.data_offset + woff != t.offset:
            raise Fail("%s: tensor %r: ggml shape %s offset %d, stored %s offset %d"
                       % (label, wname, t.ne, t.offset, ne, ref.data_offset + woff))
        shape = ",".join(str(x) for x in ne).encode()
        name = escape_name(wname)
        if name in tensors:
            raise Fail("%s: two tensors escape to the same file name %r" % (label, name))
        tensors[name] = (wname, t, shape)
    return meta, tensors


def _ref_tuple(r):
    return (r.version, r.alignment, r.data_offset,
            [(k.key, k.type, k.kind, k.content, k.bits) for k in r.kvs],
            [(t.name, t.ggml_type, t.ne, t.offset, t.size) for t in r.tensors])


def check_live(ck, gguf, live, ref, check_common):
    """The live view of an unedited mount is byte-identical to the source,
    and ggml's reader, reading it through the mount, sees what it sees in
    the source."""
    import hashlib
    import random
    what = "live view %s" % os.path.basename(live).decode(errors="backslashreplace")
    st = check_common(live, what, False)
    if st is None:
        return
    if stat.S_IMODE(st.st_mode) != 0o644:  # a copy's mode; never written through
        ck.bad("%s: mode %o, expected 0644" % (what, stat.S_IMODE(st.st_mode)))
    size = os.path.getsize(gguf)
    if st.st_size != size:
        ck.bad("%s: st_size %d, the source has %d bytes" % (what, st.st_size, size))
    try:
        fd, gfd = os.open(live, os.O_RDONLY), os.open(gguf, os.O_RDONLY)
    except OSError as e:
        ck.bad("%s: open failed: %s" % (what, e))
        return
    try:
        if size <= 4 * FULL_LIMIT:
            hl, hg = hashlib.sha256(), hashlib.sha256()
            for b in _region_reader(fd, 0, size + 1):
                hl.update(b)
            for b in _region_reader(gfd, 0, size):
                hg.update(b)
            if hl.digest() != hg.digest():
                ck.bad("%s: content differs from the source file (unedited mount)" % what)
        else:
            rng = random.Random(size)
            windows = [(0, min(size, ref.data_offset + 4096))] + _sample_windows(rng, size)
            for a, ln in windows:
                if os.pread(fd, ln, a) != os.pread(gfd, ln, a):
                    ck.bad("%s: %d bytes at %d differ from the source file" % (what, ln, a))
                    break
    finally:
        os.close(fd)
        os.close(gfd)
    verdict, ref2 = refdump(os.fsdecode(live))
    if ref2 is None:
        ck.bad("%s: ggml's reader rejects the live view" % what)
    elif _ref_tuple(ref2) != _ref_tuple(ref):
        ck.bad("%s: ggml's reader sees something else in the live view than in the source" % what)


def compare_mount(gguf, mnt, ref, walk, label, src_stat, readonly, root=None, live_name=None,
                  extra_root=frozenset()):
    """Compares everything the mount at mnt shows with ggml's view of gguf.
    Raises Fail listing every mismatch.  A store's model (tests/
    mount_stores.py): root is its directory in the store mounted at mnt,
    live_name its live view's name; the directory's own times are the
    store's until the model is open, and are not compared; extra_root: the
    other names its root lists (an ollama model's ollama/), judged by the
    caller.  tensors/ files are 0644 on a read-write mount (ggufs(1),
    WRITING TENSORS), else 0444."""
    import hashlib
    import mmap
    import random
    import zlib

    ck = Checker(label)
    meta_exp, tens_exp = expected_tree(ref, walk, label)
    now_stat = os.stat(gguf)
    uid, gid = os.getuid(), os.getgid()
    atimes = {src_stat.st_atime_ns, now_stat.st_atime_ns}
    bmnt = os.fsencode(root or mnt)

    # mountinfo
    mi = mountinfo_entry(mnt)
    want_src = {os.path.abspath(gguf), os.path.realpath(gguf)}
    if root:
        want_src = {mi[1]} if mi else want_src
    if mi is None:
        ck.bad("nothing mounted at %s" % mnt)
    elif readonly and "ro" not in mi[2].split(","):
        ck.bad("mountinfo: a read-only mount without the ro option (%s)" % mi[2])
    else:
        ck.eq("mountinfo fstype", "fuse.ggufs", mi[0])
        if mi[1] not in want_src:
            ck.bad("mountinfo source: expected the absolute GGUF path %r, got %r"
                   % (os.path.abspath(gguf), mi[1]))

    def check_common(path, what, is_dir, dir_mode=0o555, times=True):
        try:
            st = os.lstat(path)
        except OSError as e:
            ck.bad("%s: stat failed: %s" % (what, e))
            return None
        if not times:
            src = os.stat(path)  # the same times: not compared
        else:
            src = src_stat
        if is_dir:
            if not stat.S_ISDIR(st.st_mode):
                ck.bad("%s: not a directory (mode %o)" % (what, st.st_mode))
            elif stat.S_IMODE(st.st_mode) != dir_mode:
                ck.bad("%s: directory mode %o, expected %o (%s mount)"
                       % (what, stat.S_IMODE(st.st_mode), dir_mode, "read-only" if readonly else "writable"))
        elif not stat.S_ISREG(st.st_mode):
            ck.bad("%s: not a regular file (mode %o)" % (what, st.st_mode))
        if (st.st_uid, st.st_gid) != (uid, gid):
            ck.bad("%s: owner %d:%d, expected the mounting user %d:%d" % (what, st.st_uid, st.st_gid, uid, gid), "owner")
        if st.st_mtime_ns != src.st_mtime_ns:
            ck.bad("%s: mtime %d ns, the GGUF's is %d ns" % (what, st.st_mtime_ns, src.st_mtime_ns), "mtime")
        if st.st_ctime_ns != src.st_ctime_ns:
            ck.bad("%s: ctime %d ns, the GGUF's is %d ns" % (what, st.st_ctime_ns, src.st_ctime_ns), "ctime")
        if times and st.st_atime_ns not in atimes:
            ck.bad("%s: atime %d ns, the GGUF's is %s ns" % (what, st.st_atime_ns, sorted(atimes)), "atime")
        return st

    check_common(bmnt, "mount root", True, 0o555 if root is None or readonly else 0o755, times=root is None)
    try:
        top = set(os.listdir(bmnt))
    except OSError as e:
        ck.bad("ls of the mount root failed: %s" % e)
        ck.done()
    if b"meta" not in top or b"tensors" not in top:
        ck.bad("mount root lacks meta/ or tensors/ (has %r)" % sorted(top))
        ck.done()
    live_name = os.fsencode(live_name) if live_name else os.path.basename(os.fsencode(gguf))
    # f32/, npy/ and index.tsv: the converted views (tests/mount_views.py);
    # meta.tsv (tests/mount_status.py)
    views = {b"f32", b"npy", b"index.tsv", b"meta.tsv", b"tokenizer", b"hf"}  # tokenizer/: mount_tokenizer.py
    if top != {b"meta", b"tensors", live_name} | views | set(extra_root):
        ck.bad("mount root lists %r, expected meta, tensors, the live view %r, meta.tsv, f32, npy and "
               "index.tsv" % (sorted(top), live_name))
    check_meta_tsv(ck, os.path.join(bmnt, b"meta.tsv"), ref, walk)
    if live_name in top:
        check_live(ck, gguf, os.path.join(bmnt, live_name), ref, check_common)
    mdir, tdir = os.path.join(bmnt, b"meta"), os.path.join(bmnt, b"tensors")
    check_common(mdir, "meta/", True, 0o555 if readonly else 0o755)
    check_common(tdir, "tensors/", True)

    # ---- meta/
    got = os.listdir(mdir)
    if len(got) != len(set(got)):
        ck.bad("meta/ lists duplicate names")
    missing = sorted(set(meta_exp) - set(got))
    extra = sorted(set(got) - set(meta_exp))
    for n in missing:
        ck.bad("meta/: missing %r (key %r)" % (n, meta_exp[n][0]))
    for n in extra:
        ck.bad("meta/: unexpected entry %r" % n)
    if escape_name(FILLER_KEY) in got:
        ck.bad("meta/ lists the hidden filler key %s" % FILLER_KEY.decode())
    contents = {}
    for n in sorted(set(meta_exp) & set(got)):
        key, kv, want = meta_exp[n]
        p = os.path.join(mdir, n)
        what = "meta/%s" % n.decode(errors="backslashreplace")
        st = check_common(p, what, False)
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError as e:
            ck.bad("%s: read failed: %s" % (what, e))
            continue
        contents[n] = data
        if st is not None:
            if st.st_size != len(data):
                ck.bad("%s: st_size %d but %d bytes read" % (what, st.st_size, len(data)))
            want_mode = 0o444 if readonly else 0o644
            if stat.S_IMODE(st.st_mode) != want_mode:
                ck.bad("%s: mode %o, expected %o (%s mount)" % (what, stat.S_IMODE(st.st_mode), want_mode,
                       "read-only" if readonly else "writable"), "meta mode")
        ck.eq("%s: user.gguf.type" % what, kv.type.encode(), xattr(p, "user.gguf.type"))
        if kv.kind == "bytes" or want is not kv.content:
            d = first_diff(what, want, data)
            if d:
                ck.bad(d)
        else:
            ref_lines = kv.content[:-1].split(b"\n") if kv.content else []
            for prob in compare_float_content(what, kv.kind, data, ref_lines, kv.bits):
                ck.bad(prob)
    if os.path.exists(os.path.join(mdir, b"no.such.key.ggufs-judge")):
        ck.bad("meta/no.such.key.ggufs-judge exists")

    # grep -r and cat over meta/
    files = sorted(contents)
    if files:
        g = subprocess.run(["grep", "-r", "-c", "-a", "", mdir], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=300)
        if g.returncode not in (0, 1) or g.stderr:
            ck.bad("grep -r over meta/ failed (%d): %s" % (g.returncode, g.stderr.decode(errors="replace")[:300]))
        else:
            counts = {}
            for ln in g.stdout.splitlines():
                path, _, c = ln.rpartition(b":")
                counts[path] = int(c)
            for n in files:
                c = contents[n]
                want = c.count(b"\n") + (1 if c and not c.endswith(b"\n") else 0)
                path = os.path.join(mdir, n)
                if counts.get(path) != want:
                    ck.bad("grep -r -c: meta/%r counted %s lines, expected %d" % (n, counts.get(path), want))
        for i in range(0, len(files), 200):
            batch = files[i:i + 200]
            c = subprocess.run(["cat", "--"] + [os.path.join(mdir, n) for n in batch],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
            if c.returncode != 0 or c.stdout != b"".join(contents[n] for n in batch):
                ck.bad("cat of meta files %r..%r: status %d, output %s the files' contents; %s"
                       % (batch[0], batch[-1], c.returncode,
                          "equals" if c.stdout == b"".join(contents[n] for n in batch) else "differs from",
                          c.stderr.decode(errors="replace")[:300]))

    # ---- tensors/
    got = os.listdir(tdir)
    missing = sorted(set(tens_exp) - set(got))
    extra = sorted(set(got) - set(tens_exp))
    for n in missing:
        ck.bad("tensors/: missing %r (tensor %r)" % (n, tens_exp[n][0]))
    for n in extra:
        ck.bad("tensors/: unexpected entry %r" % n)
    fsize = now_stat.st_size
    rng = random.Random(zlib.crc32(label.encode()))
    present = sorted(set(tens_exp) & set(got))
    gfd = os.open(gguf, os.O_RDONLY)
    try:
        for n in present:
            wname, t, shape = tens_exp[n]
            p = os.path.join(tdir, n)
            what = "tensors/%s" % n.decode(errors="backslashreplace")
            st = check_common(p, what, False)
            if st is not None:
                want = 0o444 if readonly else 0o644
                if stat.S_IMODE(st.st_mode) != want:
                    ck.bad("%s: mode %o, expected %o" % (what, stat.S_IMODE(st.st_mode), want), "tensor mode")
                ck.eq("%s: st_size" % what, t.size, st.st_size)
            ck.eq("%s: user.gguf.type" % what, t.ggml_type.encode(), xattr(p, "user.gguf.type"))
            ck.eq("%s: user.gguf.shape" % what, shape, xattr(p, "user.gguf.shape"))
            ck.eq("%s: user.gguf.offset" % what, str(t.offset).encode(), xattr(p, "user.gguf.offset"))
            ck.eq("%s: user.gguf.size" % what, str(t.size).encode(), xattr(p, "user.gguf.size"))
            try:
                names = set(os.listxattr(p, follow_symlinks=False))
                for x in ("user.gguf.type", "user.gguf.shape", "user.gguf.offset", "user.gguf.size"):
                    if x not in names:
                        ck.bad("%s: listxattr lacks %s (has %s)" % (what, x, sorted(names)))
            except OSError as e:
                ck.bad("%s: listxattr failed: %s" % (what, e))
            if t.offset + t.size > fsize:
                ck.bad("%s: ggml places the data at %d+%d, past the end of the file (%d); "
                       "it should not have mounted" % (what, t.offset, t.size, fsize))
                continue
            if t.size > FULL_LIMIT:
                try:
                    fd = os.open(p, os.O_RDONLY)
                    try:
                        for a, ln in _sample_windows(rng, t.size):
                            if os.pread(fd, ln, a) != os.pread(gfd, ln, t.offset + a):
                                ck.bad("%s: %d bytes at %d differ from the GGUF's at %d"
                                       % (what, ln, a, t.offset + a))
                                break
                        if os.pread(fd, 10, t.size) != b"":
                            ck.bad("%s: read at the end of the tensor returned data" % what)
                    finally:
                        os.close(fd)
                except OSError as e:
                    ck.bad("%s: read failed: %s" % (what, e))
                continue
            h_want = hashlib.sha256()
            for b in _region_reader(gfd, t.offset, t.size):
                h_want.update(b)
            h_got = hashlib.sha256()
            n_got = 0
            try:
                with open(p, "rb", buffering=0) as f:
                    while True:
                        b = f.read(1 << 20)
                        if not b:
                            break
                        n_got += len(b)
                        h_got.update(b)
            except OSError as e:
                ck.bad("%s: read failed: %s" % (what, e))
                continue
            if n_got != t.size or h_got.digest() != h_want.digest():
                ck.bad("%s: content (%d bytes, sha256 %s) differs from the GGUF's %d bytes at offset %d (sha256 %s)"
                       % (what, n_got, h_got.hexdigest()[:16], t.size, t.offset, h_want.hexdigest()[:16]))

        # random preads on a few tensors, and an mmap of the largest
        by_size = sorted(present, key=lambda n: tens_exp[n][1].size)
        picks = list(dict.fromkeys(by_size[-1:] + by_size[:1] + rng.sample(by_size, min(2, len(by_size)))))
        for n in picks:
            wname, t, _ = tens_exp[n]
            if t.offset + t.size > fsize:
                continue
            p = os.path.join(tdir, n)
            fd = os.open(p, os.O_RDONLY)
            try:
                for _ in range(16):
                    off = rng.randrange(0, t.size + 64)
                    ln = rng.choice([1, 3, 4096, 65537, rng.randrange(1, 200000)])
                    want = os.pread(gfd, max(0, min(ln, t.size - off)), t.offset + off) if off < t.size else b""
                    got_b = os.pread(fd, ln, off)
                    if got_b != want:
                        ck.bad("tensors/%r: pread(%d bytes at %d) returned %d bytes that differ from the GGUF's %d"
                               % (n, ln, off, len(got_b), len(want)))
                        break
            finally:
                os.close(fd)
        big = [n for n in by_size if 0 < tens_exp[n][1].size and tens_exp[n][1].offset + tens_exp[n][1].size <= fsize]
        if big:
            n = big[-1]
            _, t, _ = tens_exp[n]
            with open(os.path.join(tdir, n), "rb") as f:
                try:
                    mm = mmap.mmap(f.fileno(), t.size, prot=mmap.PROT_READ)
                except OSError as e:
                    ck.bad("tensors/%r: mmap failed: %s" % (n, e))
                else:
                    with mm:
                        if t.size <= FULL_LIMIT:
                            h = hashlib.sha256(mm[:]).digest()
                            hw = hashlib.sha256()
                            for b in _region_reader(gfd, t.offset, t.size):
                                hw.update(b)
                            if h != hw.digest():
                                ck.bad("tensors/%r: mmap shows bytes that differ from the GGUF's" % n)
                        for a, ln in _sample_windows(rng, t.size)[:8]:
                            if mm[a:a + ln] != os.pread(gfd, ln, t.offset + a):
                                ck.bad("tensors/%r: mmap window %d+%d differs from the GGUF's" % (n, a, ln))
                                break
                        for _ in range(8):
                            a = rng.randrange(0, t.size)
                            b2 = min(t.size, a + rng.randrange(1, 5000))
                            if mm[a:b2] != os.pread(gfd, b2 - a, t.offset + a):
                                ck.bad("tensors/%r: mmap slice [%d:%d] differs" % (n, a, b2))
                                break
        # cat of all tensors at once
        ok_t = [n for n in present
                if tens_exp[n][1].offset + tens_exp[n][1].size <= fsize and tens_exp[n][1].size <= FULL_LIMIT]
        if ok_t:
            hw = hashlib.sha256()
            for n in ok_t:
                for b in _region_reader(gfd, tens_exp[n][1].offset, tens_exp[n][1].size):
                    hw.update(b)
            proc = subprocess.Popen(["cat", "--"] + [os.path.join(tdir, n) for n in ok_t],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            hg = hashlib.sha256()
            while True:
                b = proc.stdout.read(1 << 20)
                if not b:
                    break
                hg.update(b)
            err = proc.stderr.read()
            rc = proc.wait()
            if rc != 0 or hg.digest() != hw.digest():
                ck.bad("cat of all %d tensor files: status %d, output %s the GGUF's tensor bytes; %s"
                       % (len(ok_t), rc, "equals" if hg.digest() == hw.digest() else "differs from",
                          err.decode(errors="replace")[:300]))
    finally:
        os.close(gfd)
    ck.done()
    return len(meta_exp), len(tens_exp)


def judge_file(gguf, mnt, label, args=(), cwd=None, gguf_arg=None, timeout=600):
    """refdump + walk + mount + compare + unmount, for a file ggml accepts.
    Returns a short summary; raises Fail on any mismatch."""
    verdict, ref = refdump(gguf)
    if ref is None:
        raise Fail("%s: ggml's reference reader rejects %s; nothing to compare" % (label, gguf))
    walk = walk_gguf(gguf)
    src_stat = os.stat(gguf)
    digest = file_sha256(gguf)
    readonly = "ro" in [a for i, a in enumerate(args) if i > 0 and args[i - 1] == "-o"] \
        or not os.access(gguf, os.W_OK)
    os.makedirs(mnt, exist_ok=True)
    with Watchdog(mnt, timeout, label):
        with Mounted(gguf_arg or gguf, mnt, args=args, cwd=cwd) as p:
            if p.stderr:
                log("%s: ggufs said on stderr: %s" % (label, p.stderr.decode(errors="replace").strip()))
            nk, nt = compare_mount(gguf, mnt, ref, walk, label, src_stat, readonly)
    after = os.stat(gguf)
    if file_sha256(gguf) != digest or after.st_mtime_ns != src_stat.st_mtime_ns or after.st_size != src_stat.st_size:
        raise Fail("%s: mounting, reading and unmounting changed the GGUF file %s" % (label, gguf))
    return "%d keys, %d tensors, %s" % (nk, nt, "ro" if readonly else "rw")


def file_sha256(path, limit=256 << 20):
    """sha256 of the file, or of its first 64 MiB (the header is what a
    mount could rewrite) when it is larger than limit."""
    import hashlib
    h = hashlib.sha256()
    big = os.path.getsize(path) > limit
    with open(path, "rb") as f:
        if big:
            h.update(f.read(64 << 20))
            return h.hexdigest()
        while True:
            b = f.read(1 << 22)
            if not b:
                return h.hexdigest()
            h.update(b)
