#!/usr/bin/env python3
"""mixref: GGUF files written by ggml's own writer (libggml-base.so through
ctypes), independently of ggufs, for the mix tests (tests/mount_mix.py):

  donor BASE OUT TYPE REGEX   BASE's keys and tensors, but every tensor whose
                              name matches REGEX (whole) with its values
                              scaled by 0.5 and stored as TYPE (f32, f16 or
                              q8_0: ggml_quantize_chunk), so that a mix of it
                              is visibly different from BASE
  mix BASE OUT SRC REGEX ...  the reference mix: BASE's keys and tensor
                              order, each tensor taken (type, shape, bytes)
                              from the last SRC whose REGEX matches its name

Both load every file with gguf_init_from_file (no_alloc false: ggml reads
the data) and write with gguf_init_empty, gguf_set_kv, gguf_add_tensor and
gguf_write_to_file.  Exit 0, or 1 with a message; 77 if the library is
missing.
"""

import ctypes
import os
import re
import sys

GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
TYPES = {"f32": GGML_F32, "f16": GGML_F16, "q8_0": GGML_Q8_0}


class InitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.POINTER(ctypes.c_void_p))]


class GgmlParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                ("no_alloc", ctypes.c_bool)]


def lib_path():
    return os.environ.get("GGUFS_GGML_LIB") or os.path.join(
        os.environ.get("GGUFS_SRCDIR", os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        ".deps/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so")


def load():
    p = lib_path()
    if not os.path.exists(p):
        return None
    L = ctypes.CDLL(os.path.realpath(p), mode=os.RTLD_LOCAL)
    vp, i64, cs = ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p
    sig = {
        "gguf_init_from_file": (vp, [cs, InitParams]),
        "gguf_init_empty": (vp, []),
        "gguf_free": (None, [vp]),
        "gguf_get_n_tensors": (i64, [vp]),
        "gguf_get_tensor_name": (cs, [vp, i64]),
        "gguf_set_kv": (None, [vp, vp]),
        "gguf_add_tensor": (None, [vp, vp]),
        "gguf_write_to_file": (ctypes.c_bool, [vp, cs, ctypes.c_bool]),
        "ggml_init": (vp, [GgmlParams]),
        "ggml_free": (None, [vp]),
        "ggml_get_tensor": (vp, [vp, cs]),
        "ggml_get_data": (vp, [vp]),
        "ggml_nelements": (i64, [vp]),
        "ggml_n_dims": (ctypes.c_int, [vp]),
        "ggml_nbytes": (ctypes.c_size_t, [vp]),
        "ggml_new_tensor": (vp, [vp, ctypes.c_int, ctypes.c_int, ctypes.POINTER(i64)]),
        "ggml_set_name": (vp, [vp, cs]),
        "ggml_quantize_chunk": (ctypes.c_size_t, [ctypes.c_int, vp, vp, i64, i64, i64, vp]),
        "ggml_fp16_to_fp32_row": (None, [vp, vp, i64]),
    }
    for name, (res, args) in sig.items():
        f = getattr(L, name)
        f.restype, f.argtypes = res, args
    return L


def ttype(t):
    return ctypes.c_int.from_address(t).value  # struct ggml_tensor starts with its type


def tne(t):
    # type (4 bytes, padded to 8), the buffer pointer, then ne[4]
    return (ctypes.c_int64 * 4).from_address(t + 16)


class Gguf:
    """A file read by ggml whole: its gguf context and the ggml context that
    holds the tensors and their data."""

    def __init__(self, L, path):
        self.L, self.g = L, ctypes.c_void_p()
        self.ctx = L.gguf_init_from_file(path.encode(), InitParams(False, ctypes.pointer(self.g)))
        if not self.ctx:
            raise SystemExit("mixref: ggml cannot read %s" % path)
        self.names = [L.gguf_get_tensor_name(self.ctx, i).decode()
                      for i in range(L.gguf_get_n_tensors(self.ctx))]

    def tensor(self, name):
        t = self.L.ggml_get_tensor(self.g, name.encode())
        if not t:
            raise SystemExit("mixref: no tensor %s" % name)
        return t


def floats(L, t):
    n = L.ggml_nelements(t)
    out = (ctypes.c_float * n)()
    if ttype(t) == GGML_F32:
        ctypes.memmove(out, L.ggml_get_data(t), 4 * n)
    elif ttype(t) == GGML_F16:
        L.ggml_fp16_to_fp32_row(L.ggml_get_data(t), out, n)
    else:
        raise SystemExit("mixref: donor: base tensors must be f32 or f16")
    return out


def donor(L, base, out, tname, regex):
    b = Gguf(L, base)
    gctx = L.ggml_init(GgmlParams(1 << 30, None, False))
    o = L.gguf_init_empty()
    L.gguf_set_kv(o, b.ctx)
    rx = re.compile(regex)
    for name in b.names:
        t = b.tensor(name)
        if rx.fullmatch(name):
            v = floats(L, t)
            for k in range(len(v)):
                v[k] *= 0.5
            ne = tne(t)
            nd = L.ggml_n_dims(t)
            nt = L.ggml_new_tensor(gctx, TYPES[tname], nd, ne)
            L.ggml_set_name(nt, name.encode())
            dst = L.ggml_get_data(nt)
            if TYPES[tname] == GGML_F32:
                ctypes.memmove(dst, v, 4 * len(v))
            else:
                rows = len(v) // ne[0]
                L.ggml_quantize_chunk(TYPES[tname], v, dst, 0, rows, ne[0], None)
            t = nt
        L.gguf_add_tensor(o, t)
    if not L.gguf_write_to_file(o, out.encode(), False):
        raise SystemExit("mixref: ggml cannot write %s" % out)


def mix(L, base, out, rules):
    b = Gguf(L, base)
    srcs = {}
    o = L.gguf_init_empty()
    L.gguf_set_kv(o, b.ctx)
    for name in b.names:
        t = b.tensor(name)
        for path, rx in reversed(rules):
            if re.fullmatch(rx, name):
                if path not in srcs:
                    srcs[path] = Gguf(L, path)
                t = srcs[path].tensor(name)
                break
        L.gguf_add_tensor(o, t)
    if not L.gguf_write_to_file(o, out.encode(), False):
        raise SystemExit("mixref: ggml cannot write %s" % out)


def main(argv):
    L = load()
    if not L:
        print("mixref: no libggml-base.so at %s" % lib_path(), file=sys.stderr)
        return 77
    if len(argv) == 5 and argv[0] == "donor":
        donor(L, argv[1], argv[2], argv[3], argv[4])
    elif len(argv) >= 5 and argv[0] == "mix" and len(argv) % 2 == 1:
        mix(L, argv[1], argv[2], [(argv[k], argv[k + 1]) for k in range(3, len(argv), 2)])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
