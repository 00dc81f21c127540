#!/usr/bin/env python3
"""mkseeds2 - writes the seed corpus of fuzz_overlay, fuzz_pending and
fuzz_answer into tests/fuzz/regress/{overlay,pending,answer}/ (run once by
hand when the formats change; the files are committed and replayed by
meson test).  Overlays and pending records are written byte by byte from
their layouts (gguf/overlay.c, gguf/pending.c), not by the code under
test; answers are what servers send (nginx, a CDN, hostile ones)."""
import hashlib
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def kv(key, t, payload):
    return s(key) + struct.pack("<I", t) + payload


def gguf(kvs, align=32):
    b = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)
    return b + bytes(-len(b) % align)


def strs(t, items):
    return struct.pack("<IQ", t, len(items)) + b"".join(s(x) for x in items)


def overlay(extra, version=1, shards=1):
    ns = "ggufs.overlay."
    ident = [kv(ns + "version", U32, struct.pack("<I", version)),
             kv(ns + "source", STR, s("/models/base.gguf")),
             kv(ns + "source_size", U64, struct.pack("<Q", 4096)),
             kv(ns + "source_shards", U32, struct.pack("<I", shards)),
             kv(ns + "source_header_hash", STR, s("xxh3-128:" + "0" * 32))]
    return gguf(ident + extra)


EDITS = [kv("general.name", STR, s("edited")),
         kv("llama.context_length", U32, struct.pack("<I", 8192)),
         kv("tokenizer.ggml.tokens", ARR, strs(STR, ["a", "b", "<s>"])),
         kv("mytool.flag", BOOL, b"\x01")]
REMOVED = kv("ggufs.removed_keys", ARR, strs(STR, ["general.architecture"]))


def put(target, name, data):
    d = os.path.join(HERE, "regress", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    put("overlay", "edits", overlay(EDITS))
    put("overlay", "removed", overlay(EDITS + [REMOVED]))
    put("overlay", "remote", overlay([kv("ggufs.overlay.source_etag", STR, s('"abc"'))] + EDITS[:1]))
    put("overlay", "version2", overlay(EDITS, version=2))
    put("overlay", "shards0", overlay(EDITS, shards=0))
    put("overlay", "nested", overlay([kv("x.nested", ARR, struct.pack("<IQ", ARR, 1) + strs(U8, []))]))
    put("overlay", "not-overlay", gguf(EDITS))
    for name, edits in (("edits", EDITS), ("removed", EDITS + [REMOVED]),
                        ("alignment", [kv("general.alignment", U32, struct.pack("<I", 64))])):
        put("pending", name, b"2049 1234567 4096 1700000000000000000 1700000000000000000\n" + gguf(edits))
    put("pending", "old-identity", b"2049 1234567 4096 1700000000000000000\n" + gguf(EDITS[:2]))
    put("pending", "no-identity", gguf(EDITS))
    ok = ("HTTP/1.1 206 Partial Content", "Content-Range: bytes 100-199/1000000",
          "Content-Length: 100", 'ETag: "v1"', "Last-Modified: Tue, 14 Nov 2023 22:13:20 GMT")
    answers = {
        "nginx": ["100 100 100 0"] + list(ok),
        "redirect": ["100 100 100 0", "HTTP/1.1 302 Found", "Location: /x", "Content-Length: 0"] + list(ok),
        "shifted": ["100 100 100 0", ok[0], "Content-Range: bytes 0-99/1000000", ok[2], ok[3]],
        "gzip": ["100 100 100 0"] + list(ok) + ["Content-Encoding: gzip"],
        "overlong": ["100 100 100 4"] + list(ok),
        "short": ["100 100 50 0"] + list(ok),
        "noetag": ["100 100 100 0", ok[0], ok[1], ok[2]],
        "lastmod-only": ["100 100 100 8", ok[0], ok[1], ok[2], ok[4]],
        "412": ["100 100 0 0", "HTTP/1.1 412 Precondition Failed"],
        "503": ["100 100 0 0", "HTTP/1.1 503 Service Unavailable"],
        "200": ["100 100 0 0", "HTTP/1.1 200 OK", "Content-Length: 1000000"],
        "twice": ["100 100 100 0"] + list(ok) + ["Content-Range: bytes 200-299/1000000"],
        "probe": ["0 1 1 2", "HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-0/123456"],
        "head": ["0 0 0 1", "HTTP/1.1 200 OK", "Content-Length: 1000000", 'ETag: "v1"'],
        "huge": ["100 100 100 0", ok[0], "Content-Range: bytes 100-199/99999999999999999999999"],
    }
    for name, lines in answers.items():
        put("answer", name, ("\n".join(lines) + "\n").encode())


if __name__ == "__main__":
    main()
