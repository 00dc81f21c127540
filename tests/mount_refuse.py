#!/usr/bin/env python3
"""mount_refuse: ggufs refuses what ggml refuses, with one precise line.

$MKCORRUPT DIR writes NAME.gguf + NAME.expect (line 1: reject / loose /
accept; line 2: a substring of the expected message; line 3: ggml-rejects /
ggml-accepts).  For every case:
  - refdump's verdict must equal line 3 (the case table is honest about ggml);
  - reject: ggufs exits 1, says exactly one line "ggufs: ..." naming the file
    and containing the substring, and leaves nothing mounted;
  - loose: ggufs mounts, warns on stderr (lines "ggufs: ...", one containing
    the substring), meta/ and tensors/ list;
  - accept: ggufs mounts silently, and the whole mount is compared with
    ggml's view as in mount_mount.
Then the command-line failures: nonexistent file, a directory, an unreadable
file, a missing mountpoint, no arguments.
"""

import os
import shutil
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402

VERDICTS = ("reject", "loose", "accept")
GGML = ("ggml-rejects", "ggml-accepts")


def one_line_error(p, what, must_contain, status=None):
    """Problems with a refusal: status, stderr exactly one 'ggufs: ' line
    containing every string of must_contain."""
    probs = []
    err = p.stderr.decode(errors="replace")
    if status is not None and p.returncode != status:
        probs.append("%s: exit status %d, expected %d" % (what, p.returncode, status))
    elif p.returncode == 0:
        probs.append("%s: exit status 0, expected a failure" % what)
    if not err.endswith("\n") or err.count("\n") != 1:
        probs.append("%s: stderr is not exactly one line: %r" % (what, err[:600]))
    elif not err.startswith("ggufs: "):
        probs.append("%s: stderr does not start with 'ggufs: ': %r" % (what, err[:300]))
    for s in must_contain:
        if s not in err:
            probs.append("%s: stderr %r does not contain %r" % (what, err.strip()[:400], s))
    return probs


def read_expect(path):
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != 3 or lines[0] not in VERDICTS or lines[2] not in GGML:
        raise J.Fail("%s: malformed case file %r" % (path, lines))
    return lines


def run_case(name, gguf, expect, mnt, probs):
    verdict, substr, ggml_says = expect
    got_ggml, ref = J.refdump(gguf)
    if got_ggml != ggml_says:
        probs.append("%s: the case table says %s but ggml's reader %s it"
                     % (name, ggml_says, "accepts" if got_ggml == "ggml-accepts" else "rejects"))
    if verdict == "accept" and got_ggml != "ggml-accepts":
        probs.append("%s: an 'accept' case that ggml rejects" % name)
    if verdict == "reject" and got_ggml != "ggml-rejects":
        # The one refusal beyond ggml's reader: tensor data past the end of
        # the file (llama.cpp's loader refuses it too; the bytes do not
        # exist).  Allowed only when ggml's own numbers show it.
        size = os.path.getsize(gguf)
        past = [t for t in ref.tensors if t.offset + t.size > size]
        if not past or "past the end of the file" not in substr:
            probs.append("%s: ggufs is to reject a file ggml accepts (ggufs must mount every file ggml accepts)"
                         % name)
    os.makedirs(mnt, exist_ok=True)

    if verdict == "reject":
        with J.Watchdog(mnt, 120, name):
            p = J.run_ggufs([gguf, mnt])
            mounted = J.mountinfo_entry(mnt) is not None
            if mounted:
                J.unmount(mnt, [])
        probs.extend(one_line_error(p, name, [gguf, substr], status=1))
        if mounted:
            probs.append("%s: a refused file left a mount at %s" % (name, mnt))
        if p.stdout:
            probs.append("%s: stdout is not empty: %r" % (name, p.stdout[:200]))
        return

    if verdict == "accept" and ref is not None:
        J.judge_file(gguf, mnt, name)  # mounts, compares everything, unmounts
        return

    # loose (or an accept case ggml rejects, already reported above)
    with J.Watchdog(mnt, 120, name):
        try:
            with J.Mounted(gguf, mnt) as p:
                err = p.stderr.decode(errors="replace")
                lines = err.splitlines()
                if verdict == "loose":
                    if not lines:
                        probs.append("%s: mounted without the expected warning" % name)
                    for ln in lines:
                        if not ln.startswith("ggufs: "):
                            probs.append("%s: warning line does not start with 'ggufs: ': %r" % (name, ln))
                    if substr and not any(substr in ln for ln in lines):
                        probs.append("%s: no warning line contains %r: %r" % (name, substr, err[:400]))
                elif err:
                    probs.append("%s: unexpected stderr: %r" % (name, err[:400]))
                for d in ("meta", "tensors"):
                    try:
                        os.listdir(os.path.join(mnt, d))
                    except OSError as e:
                        probs.append("%s: ls %s/ failed: %s" % (name, d, e))
                check_loose_contents(name, gguf, mnt, ref, probs)
                lt = subprocess.run(["ls", "-l", os.path.join(mnt, "tensors"), os.path.join(mnt, "meta")],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
                if lt.returncode != 0:
                    probs.append("%s: ls -l failed: %s" % (name, lt.stderr.decode(errors="replace").strip()[:300]))
        except J.Fail as e:
            probs.append("%s: %s" % (name, e))


def check_loose_contents(name, gguf, mnt, ref, probs):
    """Every listed file of a loosely accepted mount can be read; where ggml
    reads the file too, tensors sit at ggml's offsets and hold its bytes
    (the size may be larger for a type ggufs sizes from the next offset)."""
    for d in ("meta", "tensors"):
        dd = os.path.join(os.fsencode(mnt), d.encode())
        try:
            names = os.listdir(dd)
        except OSError:
            continue
        for n in names:
            p = os.path.join(dd, n)
            try:
                with open(p, "rb") as f:
                    data = f.read()
                if os.stat(p).st_size != len(data):
                    probs.append("%s: %s/%r: st_size %d, %d bytes read" % (name, d, n, os.stat(p).st_size, len(data)))
            except OSError as e:
                probs.append("%s: %s/%r cannot be read although it is listed: %s" % (name, d, n, e))
    if ref is None:
        return
    # Where ggml reads the file, the metadata shows what ggml reads.
    walk = J.walk_gguf(gguf)
    meta, _ = J.expected_tree(ref, walk, name)
    for fname, (key, kv, want) in meta.items():
        p = os.path.join(os.fsencode(mnt), b"meta", fname)
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError as e:
            probs.append("%s: meta/%r: %s" % (name, fname, e))
            continue
        if kv.kind == "bytes":
            d = J.first_diff("%s: meta/%s" % (name, fname.decode(errors="backslashreplace")), want, data)
            if d:
                probs.append(d)
        else:
            lines = kv.content[:-1].split(b"\n") if kv.content else []
            probs.extend(J.compare_float_content("%s: meta/%r" % (name, fname), kv.kind, data, lines, kv.bits))
    with open(gguf, "rb") as g:
        blob = g.read()
    for t in ref.tensors:
        p = os.path.join(os.fsencode(mnt), b"tensors", J.escape_name(t.name))
        try:
            off = J.xattr(p, "user.gguf.offset")
            with open(p, "rb") as f:
                data = f.read()
        except OSError as e:
            probs.append("%s: tensor %r: %s" % (name, t.name, e))
            continue
        if off != str(t.offset).encode():
            probs.append("%s: tensor %r: user.gguf.offset %r, ggml says %d" % (name, t.name, off, t.offset))
        if len(data) < t.size or data[:t.size] != blob[t.offset:t.offset + t.size]:
            probs.append("%s: tensor %r: content does not start with ggml's %d bytes at %d"
                         % (name, t.name, t.size, t.offset))


def cli_cases(tmp, good, probs):
    exe = J.tool("GGUFS")
    mnt = os.path.join(tmp, "cli-mnt")
    os.mkdir(mnt)

    def expect_fail(what, args, contains, status, **kw):
        with J.Watchdog(mnt, 120, what):
            p = J.run_ggufs(args, **kw)
            if J.mountinfo_entry(mnt) is not None:
                probs.append("%s: left a mount at %s" % (what, mnt))
                J.unmount(mnt, [])
        pr = one_line_error(p, what, contains, status)
        probs.extend(pr)
        J.log("%s %s" % ("FAIL" if pr else "ok  ", what))

    missing = os.path.join(tmp, "no-such-file.gguf")
    expect_fail("nonexistent file", [missing, mnt], [missing], 1)
    # A directory is a store (issue 23): an empty one mounts with only
    # models.tsv (its header); one the user cannot read is refused.
    adir = os.path.join(tmp, "a-directory.gguf")
    os.mkdir(adir)
    with J.Watchdog(mnt, 120, "empty store"):
        p = J.run_ggufs([adir, mnt])
        if p.returncode != 0:
            probs.append("empty store: exit %d: %r" % (p.returncode, p.stderr))
        else:
            names = sorted(os.listdir(mnt))
            with open(os.path.join(mnt, "models.tsv"), "rb") as f:
                tsv = f.read()
            J.unmount(mnt, [])
            if names != ["models.tsv"] or tsv.count(b"\n") != 1 or not tsv.startswith(b"name\t"):
                probs.append("empty store: lists %r, models.tsv %r" % (names, tsv))
    J.log("ok   empty store")

    # Unreadable: a mode-000 file.  Root reads anything, so as root run
    # ggufs as nobody (it must fail on the file, before any mounting).
    locked_dir = os.path.join(tmp, "locked")
    os.mkdir(locked_dir)
    os.chmod(tmp, 0o755)
    os.chmod(locked_dir, 0o755)
    unreadable = os.path.join(locked_dir, "unreadable.gguf")
    shutil.copyfile(good, unreadable)
    os.chmod(unreadable, 0)
    kw = {}
    if os.geteuid() == 0:
        nmnt = os.path.join(locked_dir, "mnt")
        os.mkdir(nmnt)
        os.chown(nmnt, 65534, 65534)

        def drop():
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        kw["preexec_fn"] = drop
        target = nmnt
    else:
        target = mnt
    p = J.run_ggufs([unreadable, target], **kw)
    if J.mountinfo_entry(target) is not None:
        probs.append("unreadable file: left a mount at %s" % target)
        J.unmount(target, [])
    pr = one_line_error(p, "unreadable file", [unreadable], 1)
    probs.extend(pr)
    J.log("%s unreadable file" % ("FAIL" if pr else "ok  "))
    if os.geteuid() == 0:  # a store its user cannot read: refused, named
        store = os.path.join(locked_dir, "store")
        os.mkdir(store, 0o700)
        p = J.run_ggufs([store, target], **kw)
        if J.mountinfo_entry(target) is not None:
            probs.append("unreadable store: left a mount at %s" % target)
            J.unmount(target, [])
        pr = one_line_error(p, "unreadable store", [store], 1)
        probs.extend(pr)
        J.log("%s unreadable store" % ("FAIL" if pr else "ok  "))

    nomnt = os.path.join(tmp, "no-such-mountpoint")
    expect_fail("missing mountpoint", [good, nomnt], [nomnt], 3)

    p = subprocess.run([exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=30)
    if p.returncode != 2 or not p.stderr:
        probs.append("no arguments: exit %d (expected 2, usage error) with stderr %r" % (p.returncode, p.stderr[:200]))
        J.log("FAIL no arguments")
    else:
        J.log("ok   no arguments")


def main():
    J.require_fuse()
    tmp = tempfile.mkdtemp(prefix="ggufs-refuse-")
    probs, n_cases = [], 0
    try:
        cases_dir = os.path.join(tmp, "cases")
        os.mkdir(cases_dir)
        exe = J.tool("MKCORRUPT")
        p = subprocess.run([exe, cases_dir], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        if p.returncode != 0:
            raise J.Fail("mkcorrupt %s failed with status %d: %s"
                         % (cases_dir, p.returncode, p.stderr.decode(errors="replace").strip()[-2000:]))
        names = sorted(f[:-7] for f in os.listdir(cases_dir) if f.endswith(".expect"))
        if not names:
            raise J.Fail("mkcorrupt wrote no cases")
        good = None
        for i, name in enumerate(names):
            gguf = os.path.join(cases_dir, name + ".gguf")
            if not os.path.exists(gguf):
                probs.append("%s: %s.expect without %s.gguf" % (name, name, name))
                continue
            expect = read_expect(os.path.join(cases_dir, name + ".expect"))
            if expect[0] == "accept" and expect[2] == "ggml-accepts" and good is None:
                good = gguf
            before = len(probs)
            try:
                run_case(name, gguf, expect, os.path.join(tmp, "mnt%d" % i), probs)
            except J.Fail as e:
                probs.append(str(e))
            n_cases += 1
            J.log("%s %s (%s, %s)" % ("FAIL" if len(probs) > before else "ok  ", name, expect[0], expect[2]))
            for pr in probs[before:]:
                J.log("     " + pr)
        if good is None:
            models = J.shared_models()
            good = models[-1] if models else None
        if good is None:
            raise J.Fail("no valid GGUF for the command-line cases (no 'accept' case, no shared model)")
        cli_cases(tmp, good, probs)
    finally:
        for root, dirs, _ in os.walk(tmp):
            for d in dirs:
                if J.mountinfo_entry(os.path.join(root, d)):
                    J.unmount(os.path.join(root, d), [])
        if not any(J.mountinfo_entry(os.path.join(r, d)) for r, ds, _ in os.walk(tmp) for d in ds):
            for r, ds, fs in os.walk(tmp):
                for x in ds + fs:
                    try:
                        os.chmod(os.path.join(r, x), stat.S_IRWXU)
                    except OSError:
                        pass
            shutil.rmtree(tmp, ignore_errors=True)
    J.log("%d corrupt cases, %d problems" % (n_cases, len(probs)))
    if probs:
        raise J.Fail("%d problem(s):\n  - %s" % (len(probs), "\n  - ".join(probs)))


if __name__ == "__main__":
    J.main(main)
