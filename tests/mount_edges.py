#!/usr/bin/env python3
"""mount_edges: the edges of issue 10 through real mounts.

  - a model whose file name is 250 bytes long commits in place and by
    rewrite (the journal and the new file are named within NAME_MAX), and a
    failed commit saves its edits beside it under a name within NAME_MAX;
  - a read-only mount notices the GGUF changing under it (written in place,
    or replaced): opens and reads fail with EIO, one line says why;
  - refusal messages as users see them (user.gguf.error): `echo 7 >>` on a
    number, a backslash shown as typed, the line of the file for a long
    array written in many write(2) calls; "\\r\\n" accepted for a number.

Environment (tests/meson.build): GGUFS, MKFIXTURE.  Exit 0 pass, 1 fail,
77 skip (no FUSE).
"""

import errno
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402

Fail = J.Fail
log = J.log
SAVED_RE = re.compile(r"edits saved in (/\S+\.gguf)")
NAME_MAX = 255


def model(tmp, path):
    """A small model at path (made under a short name: mkfixture's own
    temporary name would be too long beside a long one)."""
    short = os.path.join(tmp, "fixture.gguf")
    p = subprocess.run([J.tool("MKFIXTURE"), "model", short, "--tensor-mb", "1", "--n-tensors", "2",
                        "--vocab", "300"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture model %s: %s" % (short, p.stderr.decode(errors="replace")))
    os.rename(short, path)


def kv_string(path, key):
    for k, t, s in J.walk_gguf(path).kvs:
        if k == key:
            return s
    return None


def write(path, data, flags=os.O_WRONLY | os.O_TRUNC):
    fd = os.open(path, flags)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def mount(path, mnt, args=()):
    p = J.run_ggufs(list(args) + [path, mnt])
    if p.returncode != 0:
        raise Fail("ggufs %s %s: exit %d: %s" % (" ".join(args), path, p.returncode,
                                                 p.stderr.decode(errors="replace").strip()))


def ggufs_u(mnt, want):
    p = J.run_ggufs(["-u", mnt], timeout=300)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    if J.mountinfo_entry(mnt) is not None:
        J.unmount(mnt, [])
    if p.returncode != want:
        raise Fail("ggufs -u %s: exit %d, expected %d: %r %r" % (mnt, p.returncode, want, out, err))
    return out, err


def only_model_left(d, base, label):
    extra = sorted(f for f in os.listdir(d) if f != base)
    if extra:
        raise Fail("%s: files left beside the model: %r" % (label, extra))


# ---------------------------------------------------------------------------


def sec_long_names(tmp):
    d = os.path.join(tmp, "long")
    os.mkdir(d)
    mnt = os.path.join(tmp, "mnt-long")
    os.mkdir(mnt)
    base = "m" * 245 + ".gguf"  # 250 bytes: PATH.ggufs-journal is 264
    assert len(base.encode()) == 250
    path = os.path.join(d, base)
    model(tmp, path)
    # in place: the journal
    with J.Watchdog(mnt, 120, "long name, in place"):
        mount(path, mnt)
        write(os.path.join(mnt, "meta", "general.name"), b"long name in place\n")
        out, _ = ggufs_u(mnt, 0)
    if "in place" not in out or kv_string(path, b"general.name") != b"long name in place":
        raise Fail("long name, in place: commit said %r; general.name is %r"
                   % (out, kv_string(path, b"general.name")))
    only_model_left(d, base, "long name, in place")
    log("ok: 250-byte name: committed in place")
    # grown by rewriting: the new file beside it
    big = b"x" * 300000
    with J.Watchdog(mnt, 120, "long name, rewrite"):
        mount(path, mnt, ["-o", "no_insert_range"])
        write(os.path.join(mnt, "meta", "tokenizer.ggml.pre"), big + b"\n")
        out, _ = ggufs_u(mnt, 0)
    if "rewriting" not in out or kv_string(path, b"tokenizer.ggml.pre") != big:
        raise Fail("long name, rewrite: commit said %r" % out)
    only_model_left(d, base, "long name, rewrite")
    log("ok: 250-byte name: committed by rewriting the file")
    # a failed commit (the file changed behind the mount): edits saved
    with J.Watchdog(mnt, 120, "long name, failed commit"):
        mount(path, mnt)
        write(os.path.join(mnt, "meta", "general.name"), b"saved aside\n")
        w = J.walk_gguf(path)
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) - 8)
            f.write(b"\x55\x66\x77\x88")
        _, err = ggufs_u(mnt, 4)
    m = SAVED_RE.search(err)
    if not m:
        raise Fail("long name, failed commit: ggufs -u does not name the saved edits: %r" % err)
    saved = m.group(1)
    sb = os.path.basename(saved)
    if os.path.dirname(saved) != d or not os.path.exists(saved):
        raise Fail("long name, failed commit: saved edits %s not beside the model or missing" % saved)
    # most of the base survives the cut (the suffix: stamp, random part, .gguf)
    if len(sb.encode()) > NAME_MAX or not sb.startswith("m" * 180) or ".ggufs-edits-" not in sb:
        raise Fail("long name, failed commit: saved edits named %r (%d bytes)" % (sb, len(sb.encode())))
    if kv_string(saved, b"general.name") != b"saved aside":
        raise Fail("long name, failed commit: the saved edits lack general.name")
    del w
    os.unlink(saved)
    only_model_left(d, base, "long name, failed commit")
    log("ok: 250-byte name: failed commit saved its edits as %s (%d bytes)" % (sb, len(sb.encode())))


# ---------------------------------------------------------------------------


def sec_readonly_change(tmp):
    for way in ("written in place", "replaced"):
        d = os.path.join(tmp, "ro-" + way.replace(" ", "-"))
        os.mkdir(d)
        mnt = os.path.join(d, "mnt")
        os.mkdir(mnt)
        path = os.path.join(d, "model.gguf")
        model(tmp, path)
        # foreground, so that the daemon's log line comes to our pipe
        proc = subprocess.Popen([J.tool("GGUFS"), "-f", "-o", "ro", path, mnt], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            with J.Watchdog(mnt, 120, "read-only change (%s)" % way):
                t0 = time.time()
                while J.mountinfo_entry(mnt) is None:
                    if proc.poll() is not None or time.time() - t0 > 20:
                        raise Fail("ggufs -f -o ro did not mount: %r" % proc.stderr.read())
                    time.sleep(0.05)
                with open(os.path.join(mnt, "meta", "general.name"), "rb") as f:
                    f.read()  # fine before the change
                held = os.open(os.path.join(mnt, "tensors", "blk.1.weight"), os.O_RDONLY)
                try:
                    time.sleep(0.02)
                    if way == "replaced":
                        shutil.copyfile(path, path + ".other")
                        os.replace(path + ".other", path)
                    else:
                        with open(path, "r+b") as f:
                            f.seek(os.path.getsize(path) - 4)
                            f.write(b"\x01\x02\x03\x04")
                    for name in ("meta/llama.block_count", "tensors/blk.0.weight", "model.gguf"):
                        try:
                            with open(os.path.join(mnt, name), "rb") as f:
                                f.read(16)
                            raise Fail("%s: %s opened and read after the GGUF was %s" % (way, name, way))
                        except OSError as e:
                            if e.errno != errno.EIO:
                                raise Fail("%s: open of %s failed with %s, not EIO" % (way, name, e))
                    try:
                        os.pread(held, 16, 0)
                        raise Fail("%s: a tensor opened before the change still reads" % way)
                    except OSError as e:
                        if e.errno != errno.EIO:
                            raise Fail("%s: read of a held tensor failed with %s, not EIO" % (way, e))
                finally:
                    os.close(held)
                J.unmount(mnt)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err = proc.stderr.read().decode(errors="replace")
        lines = [x for x in err.splitlines() if "changed since it was mounted read-only" in x]
        want = "replaced" if way == "replaced" else "mtime"
        if len(lines) != 1 or path not in lines[0] or want not in lines[0]:
            raise Fail("%s: the daemon's log should have one line naming %s and saying %r: %r"
                       % (way, path, want, err))
        log("ok: read-only mount, GGUF %s: EIO; %s" % (way, lines[0]))


# ---------------------------------------------------------------------------


def error_of(mnt, key):
    x = J.xattr(os.path.join(mnt, "meta", key), "user.gguf.error")
    return x.decode(errors="replace") if isinstance(x, bytes) else x


def sec_messages(tmp):
    d = os.path.join(tmp, "msg")
    os.mkdir(d)
    mnt = os.path.join(d, "mnt")
    os.mkdir(mnt)
    path = os.path.join(d, "model.gguf")
    model(tmp, path)
    with J.Watchdog(mnt, 120, "messages"):
        with J.Mounted(path, mnt):
            meta = os.path.join(mnt, "meta")
            # echo 7 >> a number
            p = subprocess.run(["sh", "-c", "echo 7 >> llama.block_count"], cwd=meta,
                               stderr=subprocess.PIPE)
            e = error_of(mnt, "llama.block_count")
            if p.returncode == 0 or e != "line 2: a uint32 value is one line; the text has 2 lines":
                raise Fail("echo 7 >> llama.block_count: status %d, user.gguf.error %r" % (p.returncode, e))
            log("ok: echo 7 >>: %s" % e)
            # a backslash as typed
            try:
                write(os.path.join(meta, "llama.context_length"), b"1\\\n")
            except OSError:
                pass
            e = error_of(mnt, "llama.context_length")
            if e != "line 1: '1\\' is not a uint32":
                raise Fail("a backslash: user.gguf.error is %r" % e)
            log("ok: backslash: %s" % e)
            # CRLF
            write(os.path.join(meta, "llama.block_count"), b"5\r\n")
            with open(os.path.join(meta, "llama.block_count"), "rb") as f:
                got = f.read()
            if got != b"5\n":
                raise Fail("printf '5\\r\\n' > llama.block_count reads back %r" % got)
            log("ok: 5\\r\\n accepted")
            # a long array in many writes: the line of the file
            text = b"".join(b"x\n" if i == 32000 else b"1\n" for i in range(1, 40001))
            fd = os.open(os.path.join(meta, "tokenizer.ggml.token_type"), os.O_WRONLY | os.O_TRUNC)
            refused = False
            try:
                for at in range(0, len(text), 4096):
                    os.write(fd, text[at:at + 4096])
            except OSError as ex:
                refused = ex.errno == errno.EINVAL
            finally:
                try:
                    os.close(fd)
                except OSError:
                    pass
            e = error_of(mnt, "tokenizer.ggml.token_type")
            if not refused or e != "line 32000: 'x' is not an int32":
                raise Fail("40000 lines with a bad line 32000, 4 KiB per write: refused %s, "
                           "user.gguf.error %r" % (refused, e))
            log("ok: many writes: %s" % e)


def sec_ghost_order(tmp):
    """Keys removed and brought back (rm, then create the name again: what
    editors' backup dances do) return to their own places in the KV order,
    in whichever order they come back, and the file is byte-identical."""
    d = os.path.join(tmp, "order")
    os.makedirs(d)
    path = os.path.join(d, "m.gguf")
    model(d, path)
    with open(path, "rb") as f:
        orig = f.read()
    keys = [k for k, t, s in J.walk_gguf(path).kvs if k != b"ggufs.padding"]
    mid = len(keys) // 2
    pick = [k.decode() for k in keys[mid - 1:mid + 2]]  # three neighbours
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    for order in ((0, 1, 2), (2, 0, 1), (1, 2, 0)):
        mount(path, mnt)
        try:
            texts = {}
            for k in pick:
                texts[k] = open(os.path.join(mnt, "meta", k), "rb").read()
                os.unlink(os.path.join(mnt, "meta", k))
            for n in order:
                k = pick[n]
                write(os.path.join(mnt, "meta", k), texts[k], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        finally:
            ggufs_u(mnt, 0)
        now = [k for k, t, s in J.walk_gguf(path).kvs if k != b"ggufs.padding"]
        if now != keys:
            raise Fail("keys %s removed, brought back in order %s: KV order %r, was %r"
                       % (pick, order, now[mid - 3:mid + 4], keys[mid - 3:mid + 4]))
        with open(path, "rb") as f:
            if f.read() != orig:
                raise Fail("keys brought back in order %s: the file is not byte-identical" % (order,))
    log("ok   keys brought back in any order keep their places: %s" % pick)


def main():
    J.require_fuse()
    with tempfile.TemporaryDirectory(prefix="ggufs-edges-") as tmp:
        try:
            sec_long_names(tmp)
            sec_readonly_change(tmp)
            sec_messages(tmp)
            sec_ghost_order(tmp)
        finally:
            for root, dirs, _ in os.walk(tmp):
                for x in dirs:
                    p = os.path.join(root, x)
                    if J.mountinfo_entry(p) is not None:
                        subprocess.run(["fusermount3", "-u", "-z", p], stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    J.main(main)
