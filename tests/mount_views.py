#!/usr/bin/env python3
"""Issue 15: f32/, npy/, index.tsv and the tensor hashes, judged from the
outside.

- f32/NAME against ggml's own conversion of the whole tensor
  (ggml_get_type_traits(type)->to_float of libggml-base, loaded here with
  ctypes from $GGUFS_GGML_LIB or .deps): bit-identical floats for a whole
  read, a read across every block boundary, odd offsets and lengths, and
  mmap, for every type ggml converts (mkfixture dequant: one tensor of
  every type, the ids 40-42 ggufs does not know included, and three large
  ones whose reads are split over the daemon's threads); those large ones
  also read in order in odd sizes from odd offsets and by two readers in
  step (the values the daemon converts ahead of such readers).
- With -o ggml=none: only ggufs's own types are listed, one line at mount
  names the others, and the values are judged by a numpy implementation
  of those block formats written here; the K-quants (q2_K to q6_K, which
  ggufs converts itself) by ggml's to_float called here.
- npy/NAME.npy through numpy.load(mmap_mode='r') (Debian's python3-numpy):
  shape = ggml's ne reversed, dtype <f4, values; the raw header's layout.
- index.tsv against the header walked here; user.gguf.sha256 and
  user.gguf.xxh64 against hashlib and an XXH64 written here (checked
  against Debian's xxhsum when installed); the weights digest on tensors/
  unchanged by a metadata edit and its commit.
- a shard set (mksplit): f32/ of the tensors of every shard.
- -o ggml=PATH refused with one line for a missing library and for one
  writable by others.
"""

import ctypes
import hashlib
import mmap
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402

# ggml's type ids and block sizes (ggml.h; ids 40-42 of ggml 0.5 too).
TYPES = {0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20),
         6: ("q5_0", 32, 22), 7: ("q5_1", 32, 24), 8: ("q8_0", 32, 34), 9: ("q8_1", 32, 36),
         10: ("q2_K", 256, 84), 11: ("q3_K", 256, 110), 12: ("q4_K", 256, 144),
         13: ("q5_K", 256, 176), 14: ("q6_K", 256, 210), 15: ("q8_K", 256, 292),
         16: ("iq2_xxs", 256, 66), 17: ("iq2_xs", 256, 74), 18: ("iq3_xxs", 256, 98),
         19: ("iq1_s", 256, 50), 20: ("iq4_nl", 32, 18), 21: ("iq3_s", 256, 110),
         22: ("iq2_s", 256, 82), 23: ("iq4_xs", 256, 136), 24: ("i8", 1, 1),
         25: ("i16", 1, 2), 26: ("i32", 1, 4), 27: ("i64", 1, 8), 28: ("f64", 1, 8),
         29: ("iq1_m", 256, 56), 30: ("bf16", 1, 2), 34: ("tq1_0", 256, 54),
         35: ("tq2_0", 256, 66), 39: ("mxfp4", 32, 17)}
NEWER = {40: ("nvfp4", 64, 36), 41: ("q1_0", 128, 18), 42: ("q2_0", 64, 18)}
OWN_K = {"q2_K", "q3_K", "q4_K", "q5_K", "q6_K"}  # judged by ggml (ctypes) only
OWN = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"} | OWN_K
PY = "/usr/bin/python3"  # Debian's, with python3-numpy


# ---- XXH64 (the spec's algorithm, written here) -------------------------
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)
M64 = (1 << 64) - 1


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _round(acc, lane):
    return (_rotl((acc + lane * P2) & M64, 31) * P1) & M64


def xxh64(data, seed=0):
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            lanes = struct.unpack_from("<4Q", data, i)
            v = [_round(a, l) for a, l in zip(v, lanes)]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M64
        for a in v:
            h = ((h ^ _round(0, a)) * P1 + P4) & M64
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h = ((_rotl(h ^ _round(0, struct.unpack_from("<Q", data, i)[0]), 27) * P1) + P4) & M64
        i += 8
    if i + 4 <= n:
        h = ((_rotl(h ^ (struct.unpack_from("<I", data, i)[0] * P1 & M64), 23) * P2) + P3) & M64
        i += 4
    while i < n:
        h = (_rotl(h ^ (data[i] * P5 & M64), 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    return h ^ (h >> 32)


# ---- the fixture, as stored ----------------------------------------------

class T:
    pass


def tensors_of(path):
    w = J.walk_gguf(path)
    data = (w.header_end + 31) // 32 * 32  # default alignment
    out = []
    for k, (name, nd, ne, tt, off) in enumerate(w.tensors):
        t = T()
        t.name, t.nd, t.ne, t.type, t.off = name, nd, ne, tt, data + off
        nm, blck, size = TYPES.get(tt) or NEWER[tt]
        t.tname, t.blck, t.bsize = nm, blck, size
        t.elems = 1
        for x in ne:
            t.elems *= x
        t.nbytes = t.elems // blck * size
        out.append(t)
    fsize = os.path.getsize(path)
    for k, t in enumerate(out):  # ggufs's size of an unknown id: up to the next
        t.fsize = t.nbytes if t.type in TYPES else (out[k + 1].off if k + 1 < len(out) else fsize) - t.off
    with open(path, "rb") as f:
        for t in out:
            f.seek(t.off)
            t.raw = f.read(t.fsize)
    return out


# ---- ggml, through ctypes ----------------------------------------------

class Traits(ctypes.Structure):
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def ggml_lib():
    p = os.environ.get("GGUFS_GGML_LIB") or os.path.join(
        os.environ.get("GGUFS_SRCDIR", "."),
        ".deps/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so")
    if not os.path.exists(p):
        J.log("note: no libggml-base.so at %s: ggml's judgement skipped, numpy's only" % p)
        return None, None
    lib = ctypes.CDLL(os.path.realpath(p), mode=os.RTLD_LOCAL)
    lib.ggml_get_type_traits.restype = ctypes.POINTER(Traits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    return lib, os.path.realpath(p)


def ggml_floats(lib, t):
    """ggml's float32 values of tensor t as bytes, or None if ggml has no
    converter for its type (f32: the bytes themselves)."""
    if t.type == 0:
        return t.raw[:t.nbytes]
    tr = lib.ggml_get_type_traits(t.type).contents
    if tr.type_name.decode() != t.tname or tr.blck_size != t.blck or tr.type_size != t.bsize:
        raise J.Fail("ggml's type %d is %s/%d/%d, the test's table says %s/%d/%d"
                     % (t.type, tr.type_name, tr.blck_size, tr.type_size, t.tname, t.blck, t.bsize))
    if not tr.to_float:
        return None
    src = ctypes.create_string_buffer(t.raw[:t.nbytes], t.nbytes)
    dst = (ctypes.c_float * t.elems)()
    TO_FLOAT(tr.to_float)(src, dst, t.elems)
    return bytes(dst)


# ---- the native types, by numpy (run by Debian's python3) -----------------
NUMPY_REF = r"""
import sys, numpy as np
kind, raw_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
raw = np.fromfile(raw_path, dtype=np.uint8)
f32 = np.float32
def half(u8, at):   # float16 fields at byte `at` of each block
    return u8[:, at:at + 2].copy().view('<f2')[:, 0].astype(f32)
if kind == 'f32':
    v = raw.view('<f4')
elif kind == 'f16':
    v = raw.view('<f2').astype(f32)
elif kind == 'bf16':
    v = (raw.view('<u2').astype(np.uint32) << 16).view('<f4')
else:
    bs = {'q8_0': 34, 'q4_0': 18, 'q4_1': 20, 'q5_0': 22, 'q5_1': 24}[kind]
    b = raw.reshape(-1, bs)
    d = half(b, 0)[:, None]
    if kind == 'q8_0':
        v = b[:, 2:].view(np.int8).astype(f32) * d
    else:
        m = half(b, 2)[:, None] if kind in ('q4_1', 'q5_1') else None
        qs = b[:, {'q4_0': 2, 'q4_1': 4, 'q5_0': 6, 'q5_1': 8}[kind]:]
        q = np.concatenate([qs & 0x0f, qs >> 4], axis=1).astype(np.int32)
        if kind.startswith('q5'):
            at = 2 if kind == 'q5_0' else 4
            qh = b[:, at:at + 4].copy().view('<u4')[:, 0].astype(np.int64)
            bits = (qh[:, None] >> np.arange(32)) & 1
            q = q | (bits.astype(np.int32) << 4)
        if kind in ('q4_0', 'q5_0'):
            v = (q - (8 if kind == 'q4_0' else 16)).astype(f32) * d
        else:
            v = q.astype(f32) * d + m
v = np.ascontiguousarray(v, dtype=f32).ravel().view('<u4').copy()
# A signalling NaN comes out quiet in ggml's conversion (and x86's): numpy's
# float16 cast keeps it signalling, so the reference sets the quiet bit.
nan = ((v & 0x7f800000) == 0x7f800000) & ((v & 0x007fffff) != 0)
v[nan] |= 0x00400000
v.tofile(out_path)
"""

NPY_CHECK = r"""
import sys, numpy as np
path, ref, shape = sys.argv[1], sys.argv[2], tuple(int(x) for x in sys.argv[3].split(',') if x)
a = np.load(path, mmap_mode='r')
assert isinstance(a, np.memmap), type(a)
assert a.dtype == np.dtype('<f4'), a.dtype
assert a.shape == shape, (a.shape, shape)
r = np.fromfile(ref, dtype='<u4')
assert np.array_equal(np.asarray(a).view('<u4').ravel(), r), 'values differ'
print('ok')
"""


def have_numpy():
    return os.path.exists(PY) and subprocess.run([PY, "-c", "import numpy"],
                                                 stderr=subprocess.DEVNULL).returncode == 0


def numpy_floats(tmp, t):
    rp, op = os.path.join(tmp, "raw"), os.path.join(tmp, "ref")
    with open(rp, "wb") as f:
        f.write(t.raw[:t.nbytes])
    r = subprocess.run([PY, "-c", NUMPY_REF, t.tname, rp, op], stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise J.Fail("numpy reference for %s: %s" % (t.tname, r.stderr.decode()[-600:]))
    with open(op, "rb") as f:
        return f.read()


def same_values(got, want):
    """Bit-identical."""
    return got == want


def first_diff(got, want):
    for k in range(0, min(len(got), len(want)), 4):
        if got[k:k + 4] != want[k:k + 4]:
            return "float %d: got %s, want %s" % (k // 4, got[k:k + 4].hex(), want[k:k + 4].hex())
    return "lengths %d and %d" % (len(got), len(want))


# ---- the checks -------------------------------------------------------------

def check_values(mnt, t, ref, rng):
    """f32/NAME against ref: size, whole read, every block boundary, odd
    ranges, mmap."""
    name = J.escape_name(t.name).decode()
    p = os.path.join(mnt, "f32", name)
    st = os.stat(p)
    if st.st_size != t.elems * 4 or (st.st_mode & 0o777) != 0o444:
        raise J.Fail("f32/%s: size %d mode %o, want %d and 0444" % (name, st.st_size, st.st_mode & 0o777, t.elems * 4))
    with open(p, "rb") as f:
        got = f.read()
    if not same_values(got, ref):
        raise J.Fail("f32/%s (%s): whole read differs: %s" % (name, t.tname, first_diff(got, ref)))
    fd = os.open(p, os.O_RDONLY)
    try:
        bb = t.blck * 4
        bounds = range(len(ref) // bb + 1)
        if len(bounds) > 400:  # the large tensors: a sample, ends included
            bounds = sorted(set(rng.sample(bounds, 400)) | {0, len(bounds) - 1})
        windows = [(max(0, k * bb - 5), 11) for k in bounds]
        windows += [(rng.randrange(len(ref)) | 1, rng.randrange(1, 3 * bb) | 1) for _ in range(40)]
        for a, n in windows:
            # uncached: each read reaches the daemon
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            g = os.pread(fd, n, a)
            if not same_values(g, ref[a:a + n]):
                raise J.Fail("f32/%s (%s): %d bytes at %d differ: %s"
                             % (name, t.tname, n, a, first_diff(g, ref[a:a + n])))
        with mmap.mmap(fd, st.st_size, prot=mmap.PROT_READ) as m:
            if not same_values(m[:], ref):
                raise J.Fail("f32/%s (%s): mmap differs" % (name, t.tname))
    finally:
        os.close(fd)


def run_threads(fn, args, problems):
    """fn(*a) on one thread per a, at once; fails with what they found."""
    import threading
    th = [threading.Thread(target=fn, args=a) for a in args]
    for x in th:
        x.start()
    for x in th:
        x.join()
    if problems:
        raise J.Fail("; ".join(problems[:3]))


def check_sequential(mnt, ts, refs):
    """Reads in order, as dd and cp do, in odd sizes from odd offsets, and
    two readers of one file in step: the daemon converts ahead of such
    readers, and a read must be served from values converted ahead only
    where they cover it."""
    big = [t for t in ts if t.elems >= 1 << 18]
    for t in big:
        ref = refs[t.name]
        p = os.path.join(mnt, "f32", J.escape_name(t.name).decode())
        for start, bs in ((0, 1 << 20), (3, 12345), (4093, (1 << 20) + 7), (t.blck * 4, 3 * t.blck * 4 + 1)):
            fd = os.open(p, os.O_RDONLY)
            try:
                os.lseek(fd, start, os.SEEK_SET)
                at = start
                while at < len(ref):
                    g = os.read(fd, bs)
                    if not g or g != ref[at:at + len(g)]:
                        raise J.Fail("f32/%s (%s): read in order, %d bytes at %d (reads of %d) differ"
                                     % (t.name, t.tname, bs, at, bs))
                    at += len(g)
            finally:
                os.close(fd)
    problems = []

    def reader(t, bs):
        ref = refs[t.name]
        with open(os.path.join(mnt, "f32", J.escape_name(t.name).decode()), "rb", buffering=0) as f:
            at = 0
            while True:
                g = f.read(bs)
                if not g:
                    break
                if g != ref[at:at + len(g)]:
                    problems.append("f32/%s: two readers in step, %d bytes at %d differ" % (t.name, len(g), at))
                    return
                at += len(g)
    for t in big:
        run_threads(reader, [(t, bs) for bs in (1 << 20, 1 << 19)], problems)
    return len(big)


def check_concurrent(mnt, ts, refs):
    """Four readers at once, uncached ranges of up to 3 MiB of the large
    tensors and small ones of the others: every serving thread's run
    shares the conversion helpers with the others'."""
    problems = []
    big = [t for t in ts if t.elems >= 1 << 20]

    def reader(seed):
        rng = random.Random(seed)
        fds = {}
        try:
            for _ in range(60):
                t = rng.choice(big if big and rng.random() < 0.5 else ts)
                ref = refs[t.name]
                if t.name not in fds:
                    fds[t.name] = os.open(os.path.join(mnt, "f32", J.escape_name(t.name).decode()), os.O_RDONLY)
                fd = fds[t.name]
                a = rng.randrange(len(ref))
                n = rng.randrange(1, min(3 << 20, len(ref) - a) + 1)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                if os.pread(fd, n, a) != ref[a:a + n]:
                    problems.append("f32/%s: %d bytes at %d differ under concurrent reads" % (t.name, n, a))
                    return
        except OSError as e:
            problems.append("concurrent read: %s" % e)
        finally:
            for fd in fds.values():
                os.close(fd)

    run_threads(reader, [(k,) for k in range(4)], problems)


def check_npy(mnt, t, ref, tmp):
    name = J.escape_name(t.name).decode()
    p = os.path.join(mnt, "npy", name + ".npy")
    with open(p, "rb") as f:
        head = f.read(10)
        hl = struct.unpack_from("<H", head, 8)[0]
        rest = f.read(hl)
    if head[:8] != b"\x93NUMPY\x01\x00" or (10 + hl) % 64 or not rest.endswith(b"\n"):
        raise J.Fail("npy/%s.npy: header %r (+%d bytes) is not NumPy 1.0 padded to 64" % (name, head, hl))
    shape = tuple(reversed(t.ne))
    want = ("{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % (shape,)).encode()
    if rest.rstrip(b" \n") != want:
        raise J.Fail("npy/%s.npy: header %r, want %r" % (name, rest, want))
    if os.path.getsize(p) != 10 + hl + t.elems * 4:
        raise J.Fail("npy/%s.npy: size %d" % (name, os.path.getsize(p)))
    if not have_numpy():
        return False
    rp = os.path.join(tmp, "npyref")
    with open(rp, "wb") as f:
        f.write(ref)
    r = subprocess.run([PY, "-c", NPY_CHECK, p, rp, ",".join(str(x) for x in shape)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise J.Fail("numpy.load(%s, mmap_mode='r'): %s" % (p, r.stderr.decode()[-600:]))
    return True


def check_k_without_ggml(mnt, ts, lib, tmp, rng):
    """The K-quant tensors of a mount whose daemon has no ggml: f32/ and
    npy/ bit-identical to ggml's to_float, called here through ctypes (the
    daemon's own converters, gguf/dequant.c)."""
    kt = [t for t in ts if t.tname in OWN_K]
    if not lib:
        J.log("note: no libggml-base.so: the K-quant views without ggml are not judged")
        return
    kinds = sorted({t.tname for t in kt})
    if kinds != sorted(OWN_K):
        raise J.Fail("the fixture's K-quant tensors are of %s, want every one of %s" % (kinds, sorted(OWN_K)))
    n_npy = 0
    for t in kt:
        ref = ggml_floats(lib, t)
        check_values(mnt, t, ref, rng)
        n_npy += check_npy(mnt, t, ref, tmp)
    J.log("ggml=none: f32/ of %d K-quant tensors (%s) and %d npy files bit-identical to ggml's to_float"
          % (len(kt), ", ".join(kinds), n_npy))


def check_index(mnt, ts, with_ggml):
    lines = []
    for t in ts:
        known = t.type in TYPES or with_ggml
        tn = t.tname if known else "type%d" % t.type
        nb = t.nbytes if known else t.fsize
        lines.append("%s\t%s\t%s\t%d\n" % (J.escape_name(t.name).decode(), tn,
                                           ",".join(str(x) for x in t.ne), nb))
    with open(os.path.join(mnt, "index.tsv")) as f:
        got = f.read()
    if got != "".join(lines):
        raise J.Fail("index.tsv:\n%s\nwant:\n%s" % (got[:2000], "".join(lines)[:2000]))


def check_hashes(mnt, ts, with_ggml):
    """The hashes of the tensor files' bytes: with ggml, ids 40-42 are sized
    by ggml (their blocks), else up to the next tensor's offset."""
    allsha, allx = hashlib.sha256(), bytearray()
    xs = shutil.which("xxhsum")
    for k, t in enumerate(ts):
        p = os.path.join(mnt, "tensors", J.escape_name(t.name).decode())
        raw = t.raw[:t.nbytes] if with_ggml else t.raw
        if os.stat(p).st_size != len(raw) or os.getxattr(p, "user.gguf.size") != str(len(raw)).encode():
            raise J.Fail("%s: st_size %d, user.gguf.size %r, want %d"
                         % (p, os.stat(p).st_size, os.getxattr(p, "user.gguf.size"), len(raw)))
        want = hashlib.sha256(raw).hexdigest().encode()
        allsha.update(raw)
        allx += raw
        if os.getxattr(p, "user.gguf.sha256") != want:
            raise J.Fail("%s: user.gguf.sha256 %r, hashlib says %r" % (p, os.getxattr(p, "user.gguf.sha256"), want))
        wx = ("%016x" % xxh64(raw)).encode()
        if os.getxattr(p, "user.gguf.xxh64") != wx:
            raise J.Fail("%s: user.gguf.xxh64 %r, want %r" % (p, os.getxattr(p, "user.gguf.xxh64"), wx))
        if xs and k < 3:  # the test's XXH64 against Debian's
            r = subprocess.run([xs, "-H1", p], stdout=subprocess.PIPE)
            if r.stdout.split()[:1] != [wx]:
                raise J.Fail("xxhsum -H1 %s says %r, the test's xxh64 %r" % (p, r.stdout, wx))
        if not {"user.gguf.sha256", "user.gguf.xxh64"} <= set(os.listxattr(p)):
            raise J.Fail("%s: listxattr lacks the hashes" % p)
    d = os.path.join(mnt, "tensors")
    got = (os.getxattr(d, "user.gguf.sha256"), os.getxattr(d, "user.gguf.xxh64"))
    want = (allsha.hexdigest().encode(), ("%016x" % xxh64(bytes(allx))).encode())
    if got != want:
        raise J.Fail("tensors/: weights digest %r, want %r" % (got, want))
    return got


def check_direct(mnt):
    """On kernels that let direct-I/O files be mapped (6.6 and later),
    f32/ and npy/ are direct I/O: reading one leaves none of its values in
    the page cache, and st_blksize is 1 MiB so that buffered readers ask
    for 1 MiB per request.  Returns what was seen, for the log."""
    rel = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
    if rel < (6, 6):
        return "direct I/O not checked (kernel %s)" % os.uname().release
    seen = []
    for d in ("f32", "npy"):
        f = os.path.join(mnt, d, sorted(os.listdir(os.path.join(mnt, d)))[0])
        with open(f, "rb") as fh:
            while fh.read(1 << 20):
                pass
        bs = os.stat(f).st_blksize
        res = subprocess.run(["fincore", "-b", "-n", "-o", "RES", f], stdout=subprocess.PIPE, text=True)
        resident = int(res.stdout.split()[0]) if res.returncode == 0 and res.stdout.strip() else None
        if bs != 1 << 20:
            raise J.Fail("%s: st_blksize %d, want 1 MiB (direct I/O: one request per read)" % (f, bs))
        if resident:
            raise J.Fail("%s: %d bytes in the page cache after a read: not direct I/O" % (f, resident))
        seen.append(d)
    return "%s in direct I/O (nothing left in the page cache, st_blksize 1 MiB)" % " and ".join(seen)


def run():
    J.require_fuse()
    tmp = tempfile.mkdtemp(prefix="ggufs-views-")
    rng = random.Random(15)
    try:
        gguf = os.path.join(tmp, "d.gguf")
        subprocess.run([J.tool("MKFIXTURE"), "dequant", gguf], check=True)
        ts = tensors_of(gguf)
        mnt = os.path.join(tmp, "m")
        os.mkdir(mnt)
        lib, libpath = ggml_lib()

        # 1. with ggml: every type it converts, judged by ggml itself
        if lib:
            refs = {t.name: ggml_floats(lib, t) for t in ts}
            env = dict(os.environ, GGUFS_GGML_LIB=libpath)
            with _mounted(gguf, mnt, ["-o", "ro", "-o", "ggml=" + libpath], env):
                want = sorted(J.escape_name(t.name).decode() for t in ts if refs[t.name] is not None)
                got = sorted(os.listdir(os.path.join(mnt, "f32")))
                if got != want:
                    raise J.Fail("f32/ lists %s, ggml converts %s" % (got, want))
                for t in ts:
                    if refs[t.name] is not None:
                        check_values(mnt, t, refs[t.name], rng)
                check_concurrent(mnt, [t for t in ts if refs[t.name] is not None], refs)
                n_seq = check_sequential(mnt, [t for t in ts if refs[t.name] is not None], refs)
                n_npy = sum(check_npy(mnt, t, refs[t.name], tmp) for t in ts if refs[t.name] is not None)
                check_index(mnt, ts, True)
                digest = check_hashes(mnt, ts, True)
                dio = check_direct(mnt)
            J.log("ggml (%s): f32/ of %d tensors bit-identical to ggml's to_float (whole, every block "
                  "boundary, odd ranges, mmap; %d read in order in odd sizes and by two readers), "
                  "%d npy files through numpy.load, index.tsv, hashes; %s"
                  % (libpath, len(want), n_seq, n_npy, dio))

        # 2. without ggml: ggufs's own types, judged by numpy
        p = J.run_ggufs(["-o", "ro", "-o", "ggml=none", gguf, mnt])
        if p.returncode != 0:
            raise J.Fail("mount with -o ggml=none: %s" % p.stderr.decode())
        try:
            err = p.stderr.decode()
            line = [l for l in err.splitlines() if "f32/ and npy/ leave out" in l]
            n_other = sum(1 for t in ts if t.tname not in OWN and t.tname not in ("i8", "i16", "i32", "i64"))
            if len(line) != 1 or ("leave out %d tensors" % n_other) not in line[0] or "ggml=none" not in line[0]:
                raise J.Fail("-o ggml=none: want one line naming %d tensors left out, stderr: %r" % (n_other, err))
            want = sorted(J.escape_name(t.name).decode() for t in ts if t.tname in OWN)
            got = sorted(os.listdir(os.path.join(mnt, "f32")))
            if got != want:
                raise J.Fail("-o ggml=none: f32/ lists %s, want %s" % (got, want))
            if have_numpy():
                for t in ts:
                    if t.tname in OWN - OWN_K:
                        ref = numpy_floats(tmp, t)
                        check_values(mnt, t, ref, rng)
                        check_npy(mnt, t, ref, tmp)
                J.log("ggml=none: %d tensors of ggufs's own simple types equal numpy's decoding"
                      % sum(1 for t in ts if t.tname in OWN - OWN_K))
            else:
                J.log("note: Debian's python3-numpy is missing: the numpy judgement is skipped")
            check_k_without_ggml(mnt, ts, lib, tmp, rng)
            check_index(mnt, ts, False)
            check_hashes(mnt, ts, False)
        finally:
            J.unmount(mnt)

        # 3. the weights digest survives a metadata edit and its commit
        if lib:
            env = dict(os.environ, GGUFS_GGML_LIB=libpath)
            with _mounted(gguf, mnt, [], env):
                with open(os.path.join(mnt, "meta", "general.name"), "w") as f:
                    f.write("renamed by mount_views, a much longer name than before " * 20 + "\n")
                d1 = os.getxattr(os.path.join(mnt, "tensors"), "user.gguf.sha256")
            with _mounted(gguf, mnt, ["-o", "ro"], env):
                if not open(os.path.join(mnt, "meta", "general.name")).read().startswith("renamed"):
                    raise J.Fail("the edit of general.name was not committed")
                d2 = os.getxattr(os.path.join(mnt, "tensors"), "user.gguf.sha256")
            if not (d1 == d2 == digest[0]):
                raise J.Fail("weights digest changed by a metadata edit: %r, %r, %r" % (digest[0], d1, d2))
            J.log("weights digest unchanged by a metadata edit and its commit")

        # 4. a shard set: the views of tensors in every shard
        if lib:
            src = os.path.join(tmp, "t.gguf")
            subprocess.run([J.tool("MKFIXTURE"), "tensors", src], check=True)
            prefix = os.path.join(tmp, "s")
            subprocess.run([J.tool("MKSPLIT"), src, prefix, "3"], check=True, stdout=subprocess.DEVNULL)
            env = dict(os.environ, GGUFS_GGML_LIB=libpath)
            n = 0
            with _mounted(prefix + "-00001-of-00003.gguf", mnt, ["-o", "ro"], env):
                for t in tensors_of(src):
                    ref = ggml_floats(lib, t)
                    p = os.path.join(mnt, "f32", J.escape_name(t.name).decode())
                    if ref is None:
                        continue
                    with open(p, "rb") as f:
                        if f.read() != ref:
                            raise J.Fail("shard set: f32/%s differs from ggml's conversion" % t.name)
                    n += 1
            J.log("shard set of 3: f32/ of %d tensors bit-identical to ggml's" % n)

        # 5. -o ggml=PATH that cannot be used: one line, no mount
        bad = os.path.join(tmp, "lib")
        os.mkdir(bad, 0o755)
        cases = [(os.path.join(tmp, "nowhere.so"), "No such file")]
        if lib:
            shutil.copy(libpath, os.path.join(bad, "libggml-base.so"))
            os.chmod(os.path.join(bad, "libggml-base.so"), 0o666)
            cases.append((os.path.join(bad, "libggml-base.so"), "writable by nobody else"))
        for path, why in cases:
            p = J.run_ggufs(["-o", "ro", "-o", "ggml=" + path, gguf, mnt])
            if J.mountinfo_entry(mnt) is not None:
                J.unmount(mnt)
                raise J.Fail("-o ggml=%s mounted" % path)
            lines = p.stderr.decode().strip().splitlines()
            if p.returncode == 0 or not lines or why not in lines[-1] or not lines[-1].startswith("ggufs: "):
                raise J.Fail("-o ggml=%s: exit %d, stderr %r (want one line saying %r)"
                             % (path, p.returncode, p.stderr, why))
        J.log("-o ggml=PATH refused with one line: missing, writable by others")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _mounted(J.Mounted):
    """J.Mounted with its own environment for the daemon."""

    def __init__(self, gguf, mnt, args, env):
        super().__init__(gguf, mnt, args)
        self.env = env

    def __enter__(self):
        p = J.run_ggufs(self.args + [self.gguf, self.mnt], env=self.env)
        if p.returncode != 0 or J.mountinfo_entry(self.mnt) is None:
            raise J.Fail("ggufs %s: exit %d: %s" % (" ".join(self.args), p.returncode, p.stderr.decode()))
        return p


if __name__ == "__main__":
    J.main(run)
