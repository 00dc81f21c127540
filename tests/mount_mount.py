#!/usr/bin/env python3
"""mount_mount: every fixture ($MKFIXTURE all) and every real model in
../shared/models beside the source tree (GGUFS_SRCDIR/../shared/models) is
mounted with ggufs and compared, file by file and byte by byte, with what
ggml's reference reader (tests/refdump) reports.

Environment (set by tests/meson.build): GGUFS, MKFIXTURE, REFDUMP,
GGUFS_SRCDIR.  Exit 0 pass, 1 fail, 77 skip (no FUSE, no ggml library).
"""

import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402


def make_fixtures(tmp):
    out = os.path.join(tmp, "fixtures")
    os.mkdir(out)
    exe = J.tool("MKFIXTURE")
    try:
        p = subprocess.run([exe, "all", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    except subprocess.TimeoutExpired:
        raise J.Fail("mkfixture all timed out")
    if p.returncode != 0:
        raise J.Fail("mkfixture all %s failed with status %d: %s"
                     % (out, p.returncode, p.stderr.decode(errors="replace").strip()[-2000:]))
    files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".gguf"))
    if not files:
        raise J.Fail("mkfixture all %s wrote no .gguf files" % out)
    # Tensors of a few MiB (reads that take several FUSE requests) and a
    # sparse model past 4 GiB (64-bit offsets; checked by samples).
    extra = [("model-8m.gguf", ["--tensor-mb", "8", "--n-tensors", "3", "--vocab", "2000"]),
             ("sparse-5g.gguf", ["--tensor-mb", "5000", "--n-tensors", "5", "--sparse"])]
    for name, args in extra:
        path = os.path.join(out, name)
        p = subprocess.run([exe, "model", path] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        if p.returncode != 0:
            raise J.Fail("mkfixture model %s %s failed with status %d: %s"
                         % (path, " ".join(args), p.returncode, p.stderr.decode(errors="replace").strip()[-2000:]))
        st = os.stat(path)
        if "--sparse" in args and st.st_blocks * 512 > (256 << 20):
            J.log("note: %s is not sparse on this file system (%d bytes allocated); not mounted"
                  % (name, st.st_blocks * 512))
            os.unlink(path)
            continue
        files.append(path)
    files.append(make_handmade(out))
    return files


# ---------------------------------------------------------------------------
# Hand-made files: values the fixture generator does not cover, written by
# this minimal GGUF writer (independent of the library).

_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)


def _s(b):
    return struct.pack("<Q", len(b)) + b


def _val(t, v):
    if t == STR:
        return _s(v)
    if t == ARR:
        at, items = v
        return struct.pack("<IQ", at, len(items)) + b"".join(_val(at, x) for x in items)
    if t in (F32, F64) and isinstance(v, bytes):
        return v  # raw bits
    return struct.pack(_FMT[t], v)


def f32b(bits):
    return struct.pack("<I", bits)


def f64b(bits):
    return struct.pack("<Q", bits)


def write_gguf(path, kvs, tensors, align=32, version=3):
    """kvs: (key bytes, type, value); tensors: (name bytes, ne list, ggml
    type id, bytes of data)."""
    out = [b"GGUF", struct.pack("<IQQ", version, len(tensors), len(kvs))]
    for k, t, v in kvs:
        out += [_s(k), struct.pack("<I", t), _val(t, v)]
    off = 0
    for name, ne, tt, data in tensors:
        out += [_s(name), struct.pack("<I", len(ne)), b"".join(struct.pack("<Q", x) for x in ne),
                struct.pack("<IQ", tt, off)]
        off += (len(data) + align - 1) // align * align
    head = b"".join(out)
    head += b"\0" * (-len(head) % align)
    body = b"".join(d + b"\0" * (-len(d) % align) for _, _, _, d in tensors)
    with open(path, "wb") as f:
        f.write(head + body)


def make_handmade(out):
    rnd = random.Random(7)
    f32_bits = [0x00000001, 0x00800000, 0x7F7FFFFF, 0x80000000, 0x7F800001, 0xFFA5A5A5, 0x7FC00001,
                0x5A5E1A6D,  # 1.5e16: integral, scientific
                struct.unpack("<I", struct.pack("<f", 1e15))[0], struct.unpack("<I", struct.pack("<f", 1e-4))[0],
                struct.unpack("<I", struct.pack("<f", 1e-5))[0], struct.unpack("<I", struct.pack("<f", 16777216.0))[0],
                struct.unpack("<I", struct.pack("<f", 0.1))[0], struct.unpack("<I", struct.pack("<f", 123456792.0))[0]]
    f32_bits += [rnd.getrandbits(32) for _ in range(200)]
    f64_vals = [1e16, 1e17, 123456789012345678.0, 9007199254740993.0, 1e-4, 1e-5, 5e-324, 2.2250738585072014e-308,
                1.7976931348623157e308, -0.0, 0.1, 1 / 3, 1e22, 1e23, 4.35, 100.0]
    f64_bits = [struct.unpack("<Q", struct.pack("<d", v))[0] for v in f64_vals]
    f64_bits += [0x7FF0000000000001, 0xFFF8000000000001, 0x7FF4000000000000] + [rnd.getrandbits(64) for _ in range(200)]
    kvs = [(b"general.architecture", STR, b"handmade")]
    kvs += [(b"hm.f32.%d" % i, F32, f32b(b)) for i, b in enumerate(f32_bits[:14])]
    kvs += [(b"hm.f64.%d" % i, F64, f64b(b)) for i, b in enumerate(f64_bits[:19])]
    kvs += [
        (b"hm.arr.f32", ARR, (F32, [f32b(b) for b in f32_bits])),
        (b"hm.arr.f64", ARR, (F64, [f64b(b) for b in f64_bits])),
        (b"hm.arr.f32.empty", ARR, (F32, [])),
        (b"hm.arr.str.empty", ARR, (STR, [])),
        (b"hm.arr.str", ARR, (STR, [b"", b"tab\there", b"cr\rlf\n", b"back\\slash", b"\xff\xfe", b"\xe2\x82",
                                    b"\xc3\xa9t\xc3\xa9", b"\x7f\x01", b"\xf4\x90\x80\x80", b"\xed\xa0\x80",
                                    b"\\x41", b"nul\0inside"])),
        (b"hm.str.nul", STR, b"before\0after"),
        (b"hm.str.empty", STR, b""),
        (b"hm.str.raw", STR, b"line1\nline2\r\n\xff\ttab\\"),
        (b"hm.ints", ARR, (I64, [-(1 << 63), (1 << 63) - 1, 0, -1])),
        (b"hm.u64", U64, (1 << 64) - 1),
        (b"hm.i8", I8, -128),
        (b"hm.i16", I16, -32768),
        (b"hm.u16", U16, 65535),
        (b"hm.arr.bool", ARR, (BOOL, [1, 0, 1])),
        (b"hm.arr.u8", ARR, (U8, [0, 255])),
        (b"hm.arr.i8", ARR, (I8, [-128, 127])),
        (b"hm.unicode.\xe2\x96\x81\xf0\x9f\x98\x80", U32, 7),
        (b"ggufs.padding", STR, b" " * 40),
    ]
    tensors = [
        (b"four.dims", [32, 1, 1, 1], 0, bytes(rnd.getrandbits(8) for _ in range(128))),
        (b"one.dim", [32], 0, bytes(rnd.getrandbits(8) for _ in range(128))),
        (b"three.dims", [4, 3, 2], 1, bytes(rnd.getrandbits(8) for _ in range(48))),
    ]
    path = os.path.join(out, "handmade.gguf")
    write_gguf(path, kvs, tensors)
    return path


def main():
    J.require_fuse()
    # Probe the reference first so that a missing ggml skips cleanly.
    models = J.shared_models()
    tmp = tempfile.mkdtemp(prefix="ggufs-mount-")
    failures, passed = [], []
    try:
        fixtures = make_fixtures(tmp)
        J.refdump(fixtures[0])  # raises Skip if ggml is unavailable
        # Fixtures are our own files: mounted with the default options
        # (writable).  The shared models are inputs we must never risk
        # changing: mounted -o ro.
        targets = [("fixture " + os.path.basename(f), f, []) for f in fixtures] + \
                  [("model " + os.path.basename(f), f, ["-o", "ro"]) for f in models]
        for i, (label, path, args) in enumerate(targets):
            mnt = os.path.join(tmp, "mnt%d" % i)
            try:
                summary = J.judge_file(path, mnt, label, args=args)
                passed.append(label)
                J.log("ok   %s (%s)" % (label, summary))
            except J.Fail as e:
                failures.append(str(e))
                J.log("FAIL %s" % e)

        # The source in mountinfo is the absolute path even when ggufs is
        # given a relative one.
        if models:
            path = models[-1]
            mnt = os.path.join(tmp, "mnt-rel")
            os.mkdir(mnt)
            try:
                with J.Watchdog(mnt, 120, "relative-path mount"):
                    with J.Mounted(os.path.basename(path), mnt, args=["-o", "ro"], cwd=os.path.dirname(path)):
                        mi = J.mountinfo_entry(mnt)
                        if mi is None or mi[1] not in (os.path.abspath(path), os.path.realpath(path)):
                            raise J.Fail("mounted as a relative path, mountinfo source is %r, expected %r"
                                         % (mi and mi[1], path))
                J.log("ok   relative path %s: source is absolute" % os.path.basename(path))
            except J.Fail as e:
                failures.append("relative path: %s" % e)
                J.log("FAIL relative path: %s" % e)
    finally:
        leftovers = [m for m in os.listdir(tmp) if J.mountinfo_entry(os.path.join(tmp, m))]
        for m in leftovers:
            J.unmount(os.path.join(tmp, m), [])
        if not any(J.mountinfo_entry(os.path.join(tmp, m)) for m in os.listdir(tmp)):
            shutil.rmtree(tmp, ignore_errors=True)
    J.log("%d passed, %d failed" % (len(passed), len(failures)))
    if failures:
        raise J.Fail("%d of %d mounts differ from ggml's view (details above)"
                     % (len(failures), len(failures) + len(passed)))


if __name__ == "__main__":
    J.main(main)
