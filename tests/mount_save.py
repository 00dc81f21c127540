#!/usr/bin/env python3
"""mount_save: every way common tools save a file, run with the real tools
on every kind of key a mount shows, committed and judged by ggml's
reference reader (tests/refdump).

One row per save pattern (sed -i, perl -pi, GNU patch, python fileinput and
tempfile, rsync, cp --backup, install, vim, ed, mv round trips, shell
redirections).  Each row mounts a fresh copy of a fixture holding a uint32,
a string, an array of strings, a float array and keys whose names are not
new-key names (upper case, '-', space; escaped %2F, %25, %2E; a hashed long
name), edits every one of them with the row's tool, commits with ggufs -u,
and judges the file: each edited key has the intended value, its type and
its position; no stray key (no backup, no temporary name); every other key
byte-identical; tensors untouched.  The result is a table: one line per
row, one cell per key (ok, FAIL, SKIP when the tool is missing).

Then rows that check refusals where the shell sees them: general.alignment,
the split.* keys of a shard set, and mode changes that must not fail a tool
(install -m 644, chmod, cp -p).

Environment (tests/meson.build): GGUFS, REFDUMP, MKSPLIT, MKFIXTURE.
Exit 0 pass, 1 fail, 77 skip (no FUSE, no ggml library).
"""

import difflib
import errno
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402
import mount_edit as E  # noqa: E402
import mount_mount as MM  # noqa: E402

Fail = J.Fail
log = J.log

# ---------------------------------------------------------------------------
# the fixture: (label, key, type, value, text before, old, new) -- old/new:
# the substring a substitution replaces (unique in the text)

LONG = b"long." + b"x" * 300  # escaped name > 255 bytes: hashed
KEYS = [
    ("uint32", b"llama.block_count", MM.U32, 2, b"2\n", b"2", b"3"),
    ("string", b"general.name", MM.STR, b"Save Test", b"Save Test\n", b"Test", b"Best"),
    ("array[string]", b"tokenizer.ggml.tokens", MM.ARR, (MM.STR, [b"alpha", b"beta", b"gamma"]),
     b"alpha\nbeta\ngamma\n", b"beta", b"BETA"),
    ("array[float32]", b"save.floats", MM.ARR, (MM.F32, [0.5, 1.5]), b"0.5\n1.5\n", b"1.5", b"2.5"),
    ("odd name", b"Odd-Key Count", MM.U32, 7, b"7\n", b"7", b"8"),
    ("%2F", b"odd/slash", MM.STR, b"slash value", b"slash value\n", b"value", b"VALUE"),
    ("%25", b"pct%key", MM.U32, 10, b"10\n", b"10", b"11"),
    ("%2E", b".", MM.STR, b"dot value", b"dot value\n", b"value", b"VALUE"),
    ("hashed", LONG, MM.STR, b"long value", b"long value\n", b"value", b"VALUE"),
]


def make_fixture(path):
    kvs = [(b"general.architecture", MM.STR, b"llama"), (b"general.alignment", MM.U32, 32)]
    kvs += [(k, t, v) for _, k, t, v, _, _, _ in KEYS]
    kvs.append((b"save.tail", MM.U32, 99))
    tensors = [(b"t0", [8], 0, bytes(range(32)))]
    MM.write_gguf(path, kvs, tensors, align=32)


def fname(key):
    return J.escape_name(key).decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------------------
# save patterns.  Each gets (meta, name, old text, old, new, work dir) and
# returns None or a problem string; the key must end up holding the text
# with old replaced by new.


def sh(cmd, cwd, stdin=None):
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    if p.returncode != 0:
        return "`%s` exited %d: %s" % (cmd[:120], p.returncode, (p.stdout + p.stderr).decode(errors="replace")
                                       .strip()[:200])
    return None


def q(s):
    return shlex.quote(s)


def bre(b):
    """old as a sed basic regular expression (our olds: letters, digits, '.')."""
    return b.decode().replace(".", "\\.")


def new_src(work, text):
    """A file outside the mount holding text (for cp, rsync, install)."""
    fd, p = tempfile.mkstemp(dir=work)
    os.write(fd, text)
    os.close(fd)
    return p


def pat_echo(meta, n, text, old, new, work):
    return sh("printf %%s %s > %s" % (q(text.replace(old, new, 1).decode()), q(n)), meta)


def pat_truncate_write(meta, n, text, old, new, work):
    """open, ftruncate(fd, 0), write: how editors rewrite a file in place.
    (truncate(2) by path applies the empty text at once, and an empty text
    is no number: ggufs(1), EDITING.)"""
    fd = os.open(os.path.join(meta, n), os.O_RDWR)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, text.replace(old, new, 1))
    finally:
        os.close(fd)


def pat_write_in_place(meta, n, text, old, new, work):
    with open(os.path.join(meta, n), "r+b") as f:
        f.write(text.replace(old, new, 1))
        f.truncate()


def pat_sed(suffix):
    def run(meta, n, text, old, new, work):
        return sh("sed -i%s %s %s" % (suffix, q("s/%s/%s/" % (bre(old), new.decode())), q(n)), meta)
    run.suffix = suffix
    return run


def pat_perl(suffix):
    def run(meta, n, text, old, new, work):
        return sh("perl -pi%s -e %s %s" % (suffix, q("s/\\Q%s\\E/%s/" % (old.decode(), new.decode())), q(n)), meta)
    run.suffix = suffix
    return run


def pat_patch(meta, n, text, old, new, work):
    a = text.decode().splitlines(True)
    b = text.replace(old, new, 1).decode().splitlines(True)
    diff = os.path.join(work, "p.diff")
    with open(diff, "w") as f:
        f.writelines(difflib.unified_diff(a, b, "a", "b"))
    return sh("patch -s %s %s" % (q(n), q(diff)), meta)


PY_FILEINPUT = """
import fileinput, sys
for line in fileinput.input(sys.argv[1], inplace=True%s):
    sys.stdout.write(line.replace(sys.argv[2], sys.argv[3], 1) if fileinput.filelineno() else line)
"""


def pat_fileinput(backup):
    code = PY_FILEINPUT % (", backup=%r" % backup if backup else "")

    def run(meta, n, text, old, new, work):
        # (line-wise: replace only in the line that holds old)
        line = next(i for i, l in enumerate(text.split(b"\n")) if old in l)
        src = code.replace("if fileinput.filelineno() else line",
                           "if fileinput.filelineno() == %d else line" % (line + 1))
        p = subprocess.run([sys.executable, "-c", src, n, old.decode(), new.decode()], cwd=meta,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if p.returncode:
            return "fileinput exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace")[-300:])
    run.suffix = backup or ""
    return run


def pat_tempfile(meta, n, text, old, new, work):
    with tempfile.NamedTemporaryFile(dir=meta, delete=False) as f:
        f.write(text.replace(old, new, 1))
        f.flush()
        os.fsync(f.fileno())
    os.replace(f.name, os.path.join(meta, n))


def pat_rsync(backup):
    def run(meta, n, text, old, new, work):
        if not shutil.which("rsync"):
            return "SKIP"
        src = new_src(work, text.replace(old, new, 1))
        opt = " --backup --suffix=.bak" if backup else ""
        return sh("rsync -I%s %s %s" % (opt, q(src), q(n)), meta)
    run.suffix = ".bak" if backup else ""
    return run


def pat_cp(opt, suffix):
    def run(meta, n, text, old, new, work):
        src = new_src(work, text.replace(old, new, 1))
        return sh("cp %s %s %s" % (opt, q(src), q(n)), meta)
    run.suffix = suffix
    return run


def pat_install(meta, n, text, old, new, work):
    src = new_src(work, text.replace(old, new, 1))
    return sh("install -m 644 %s %s" % (q(src), q(n)), meta)


def vim_exe():
    for v in ("vim", "vim.tiny", "vim.basic"):
        if shutil.which(v):
            return v
    return None


def pat_vim(setting, suffix):
    def run(meta, n, text, old, new, work):
        v = vim_exe()
        if not v:
            return "SKIP"
        cmd = [v, "-N", "-u", "NONE", "-i", "NONE", "-es"]
        if setting:
            cmd += ["-c", setting]
        cmd += ["-c", "%%s/%s/%s/" % (bre(old), new.decode()), "-c", "wq", n]
        p = subprocess.run(cmd, cwd=meta, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        if p.returncode:
            return "vim exited %d: %s" % (p.returncode, (p.stdout + p.stderr).decode(errors="replace")[:200])
    run.suffix = suffix
    return run


def pat_ed(meta, n, text, old, new, work):
    return sh("ed -s %s" % q(n), meta, stdin=(",s/%s/%s/\nw\nq\n" % (bre(old), new.decode())).encode())


def backup_name(n, suffix):
    return n + suffix


def pat_keyname_temp(meta, n, text, old, new, work):
    """sed -i.bak's steps with a temporary name that is a valid key (sed's
    sedXXXXXX is, one time in 25; python's tmpXXXXXXXX always): the key is
    renamed away first, then the temporary key onto its name."""
    p = os.path.join(meta, "sedtmp1x")
    with open(p, "wb") as f:
        f.write(text.replace(old, new, 1))
    os.rename(os.path.join(meta, n), os.path.join(meta, n + ".bak"))
    os.rename(p, os.path.join(meta, n))


def pat_mv_orig(meta, n, text, old, new, work):
    b = backup_name(n, ".orig")
    return sh("mv %s %s && printf %%s %s > %s && rm %s"
              % (q(n), q(b), q(text.replace(old, new, 1).decode()), q(n), q(b)), meta)


def pat_mv_bak(meta, n, text, old, new, work):
    b = backup_name(n, ".bak")
    return sh("mv %s %s && sed -i %s %s && mv %s %s"
              % (q(n), q(b), q("s/%s/%s/" % (bre(old), new.decode())), q(b), q(b), q(n)), meta)


for f in (pat_echo, pat_truncate_write, pat_write_in_place, pat_patch, pat_tempfile, pat_install, pat_ed,
          pat_mv_orig, pat_mv_bak, pat_keyname_temp):
    f.suffix = ""

ROWS = [
    ("echo > KEY", pat_echo),
    ("truncate + write", pat_truncate_write),
    ("write in place", pat_write_in_place),
    ("sed -i", pat_sed("")),
    ("sed -i.bak", pat_sed(".bak")),
    ("perl -pi -e", pat_perl("")),
    ("perl -pi.bak -e", pat_perl(".bak")),
    ("GNU patch", pat_patch),
    ("fileinput", pat_fileinput(None)),
    ("fileinput .bak", pat_fileinput(".bak")),
    ("tempfile+fsync+replace", pat_tempfile),
    ("rsync", pat_rsync(False)),
    ("rsync --backup", pat_rsync(True)),
    ("cp --backup .bak", pat_cp("--backup=simple --suffix=.bak", ".bak")),
    ("cp --backup=numbered", pat_cp("--backup=numbered", ".~1~")),
    ("cp -p", pat_cp("-p", "")),
    ("install -m 644", pat_install),
    ("vim -es", pat_vim("", "~")),
    ("vim backupcopy=no", pat_vim("set backup writebackup backupskip= backupcopy=no", "~")),
    ("ed", pat_ed),
    ("mv K K.orig; echo>K", pat_mv_orig),
    ("mv K K.bak; mv back", pat_mv_bak),
    ("key-named temp, .bak", pat_keyname_temp),
]


def run_row(ctx, label, pat):
    """One save pattern on every key: returns (cells, problems)."""
    d = os.path.join(ctx.tmp, "row")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    mnt, work = os.path.join(d, "mnt"), os.path.join(d, "work")
    os.makedirs(work)
    path = os.path.join(d, "save.gguf")
    shutil.copyfile(ctx.fixture, path)
    before = E.snapshot(path)
    m = E.Model(before)
    meta = os.path.join(mnt, "meta")
    cells, probs, edited = {}, [], []
    with E.Watchdog(mnt, 240, label):
        E.mount(path, mnt)
        try:
            for kl, key, _, _, text, old, new in KEYS:
                n = fname(key)
                try:
                    r = pat(meta, n, text, old, new, work)
                except OSError as e:
                    r = "%s failed: %s" % (label, e)
                if r == "SKIP":
                    cells[kl] = "SKIP"
                    continue
                got = None
                try:
                    got = E.read(os.path.join(meta, n))
                except OSError as e:
                    r = r or "meta/%s unreadable after the save: %s" % (n[:40], e)
                want = text.replace(old, new, 1)
                if r is None and got != want:
                    r = "meta/%s shows %r after the save, expected %r" % (n[:40], got, want)
                if r is None:
                    names = os.listdir(meta)
                    if len(names) != len(set(names)):
                        r = "meta/ lists a name twice: %s" % sorted(x for x in set(names) if names.count(x) > 1)
                    elif n not in names:
                        r = "meta/%s is not listed after the save" % n[:40]
                cells[kl] = "FAIL" if r else "ok"
                if r:
                    probs.append("%s on %s: %s" % (label, kl, r))
                edited.append((kl, key, want))
                if "float" in kl:
                    m.value(key, want, tuple(E.f32bits(float(x)) for x in want.split()))
                else:
                    m.value(key, want)
            keys = {fname(k[1]) for k in KEYS} | {"general.architecture", "general.alignment", "save.tail"}
            left = [x for x in os.listdir(meta) if x not in keys]
        except BaseException:
            E.cleanup_mounts(d)
            raise
        # (an fsync of a meta file commits nothing: all is committed here)
        how, out, err = E.ggufs_u(mnt, None, label)
    after = E.snapshot(path, label)
    # per key: value, type, position; then strays and the others
    wk = {k[0]: (i, k) for i, k in enumerate(m.kvs)}
    gk = {k[0]: (i, k) for i, k in enumerate(after.kvs)}
    for kl, key, want in edited:
        w, g = wk.get(key), gk.get(key)
        why = None
        if g is None:
            why = "the key is gone from the committed file"
        elif E._norm(g[1]) != E._norm(w[1]):
            why = "committed as %s, expected %s" % (E._kvdesc(g[1]), E._kvdesc(w[1]))
        elif g[0] != w[0]:
            why = "moved from position %d to %d" % (w[0], g[0])
        if why:
            if cells.get(kl) == "ok":
                cells[kl] = "FAIL"
            probs.append("%s on %s: %s" % (label, kl, why))
    extra = [k for k in gk if k not in wk]
    if extra:
        probs.append("%s: stray keys committed: %s" % (label, ", ".join(repr(k[:40]) for k in extra)))
    for k, (i, kv) in wk.items():
        if k not in {e[1] for e in edited} and (k not in gk or E._norm(gk[k][1]) != E._norm(kv)):
            probs.append("%s: untouched key %r changed: %s" % (label, k[:40], E._kvdesc(gk.get(k, (0, None))[1])))
    if [t[:5] for t in after.tensors] != [t[:5] for t in before.tensors] or \
            [t[5] for t in after.tensors] != [t[5] for t in before.tensors]:
        probs.append("%s: tensors changed" % label)
    if extra or any(p.startswith(label + ": untouched") for p in probs):
        cells["others"] = "FAIL"
    else:
        cells["others"] = "ok"
    # files left in meta/ that are not keys: named by the commit report
    # (as many as fit in the report, the rest counted)
    unnamed = [x for x in left if "meta/%s: not a key, not committed" % x not in out]
    more = re.search(r"; (\d+) more files in meta/", out)
    if more and int(more.group(1)) == len(unnamed):
        unnamed = []
    if unnamed:
        probs.append("%s: files left in meta/ not named by the commit report: %s (report %r)"
                     % (label, unnamed, out.strip()[:300]))
        cells["others"] = "FAIL"
    return cells, probs


# ---------------------------------------------------------------------------
# refusals where the shell sees them, and mode changes that must not fail


def refusal_rows(ctx):
    rows, probs = [], []
    d = os.path.join(ctx.tmp, "refuse")
    os.makedirs(d)
    mnt = os.path.join(d, "mnt")
    path = os.path.join(d, "save.gguf")
    shutil.copyfile(ctx.fixture, path)
    sha0 = J.file_sha256(path)
    meta = os.path.join(mnt, "meta")

    def row(label, ok, why=""):
        rows.append((label, "ok" if ok else "FAIL"))
        if not ok:
            probs.append("%s: %s" % (label, why))

    with E.Watchdog(mnt, 120, "refusals"):
        E.mount(path, mnt)
        try:
            r = subprocess.run(["bash", "-c", "echo 32 > meta/general.alignment"], cwd=mnt,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            row("echo 32 > general.alignment exits non-zero", r.returncode != 0,
                "exited 0 (%r)" % r.stderr)
            row("general.alignment: user.gguf.error says why",
                isinstance(J.xattr(os.path.join(meta, "general.alignment"), "user.gguf.error"), bytes),
                repr(J.xattr(os.path.join(meta, "general.alignment"), "user.gguf.error")))
            r = subprocess.run(["bash", "-c", "sed -i s/32/64/ general.alignment"], cwd=meta,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            row("sed -i general.alignment exits non-zero", r.returncode != 0, "exited 0")
            for name, fn in (("chmod 600", lambda p: os.chmod(p, 0o600)),
                             ("chown to self", lambda p: os.chown(p, os.getuid(), os.getgid()))):
                try:
                    fn(os.path.join(meta, "general.name"))
                    row("%s meta/general.name succeeds" % name, True)
                except OSError as e:
                    row("%s meta/general.name succeeds" % name, False, str(e))
            names = os.listdir(meta)
            row("meta/ after the refusals: no temporary file left", all(
                n in {fname(k[1]) for k in KEYS} | {"general.architecture", "general.alignment", "save.tail"}
                for n in names), "left: %s" % names)
        except BaseException:
            E.cleanup_mounts(d)
            raise
        E.ggufs_u(mnt, None, "refusals")
    row("the refused edits left the file unchanged", J.file_sha256(path) == sha0, "file changed")

    # split.* of a shard set
    sd = os.path.join(ctx.tmp, "split")
    os.makedirs(sd)
    src = os.path.join(sd, "src.gguf")
    p = subprocess.run([J.tool("MKFIXTURE"), "model", src, "--tensor-mb", "1", "--n-tensors", "4"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode:
        raise Fail("mkfixture model: %s" % p.stderr.decode(errors="replace"))
    prefix = os.path.join(sd, "set")
    p = subprocess.run([J.tool("MKSPLIT"), src, prefix, "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode:
        raise Fail("mksplit: %s" % p.stderr.decode(errors="replace"))
    first = prefix + "-00001-of-00002.gguf"
    shas = [J.file_sha256(prefix + "-%05d-of-00002.gguf" % i) for i in (1, 2)]
    mnt = os.path.join(sd, "mnt")
    meta = os.path.join(mnt, "meta")
    with E.Watchdog(mnt, 120, "split refusals"):
        E.mount(first, mnt)
        try:
            for k, cmd in (("split.count", "echo 5 > split.count"), ("split.no", "sed -i s/0/1/ split.no"),
                           ("split.tensors.count", "mv split.tensors.count x.bak"),
                           ("split.no", "rm split.no"), ("split.count", "truncate -s 0 split.count")):
                r = subprocess.run(["bash", "-c", cmd], cwd=meta, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                row("shard set: `%s` fails" % cmd, r.returncode != 0, "exited 0")
                row("shard set: meta/%s still there after `%s`" % (k, cmd), os.path.exists(os.path.join(meta, k)),
                    "gone")
        except BaseException:
            E.cleanup_mounts(sd)
            raise
        E.ggufs_u(mnt, None, "split refusals")
    row("shard set: the refused edits left every shard unchanged",
        [J.file_sha256(prefix + "-%05d-of-00002.gguf" % i) for i in (1, 2)] == shas, "a shard changed")
    return rows, probs


def rule_rows(ctx):
    """The consequences of the rule for names (ggufs(1), NAMES IN META/),
    in one mount, judged after the commit."""
    rows, probs = [], []
    d = os.path.join(ctx.tmp, "rule")
    os.makedirs(d)
    mnt = os.path.join(d, "mnt")
    path = os.path.join(d, "save.gguf")
    shutil.copyfile(ctx.fixture, path)
    before = E.snapshot(path)
    m = E.Model(before)
    meta = os.path.join(mnt, "meta")

    def row(label, ok, why=""):
        rows.append((label, "ok" if ok else "FAIL"))
        if not ok:
            probs.append("%s: %s" % (label, why))

    def run(cmd):
        r = subprocess.run(["bash", "-c", cmd], cwd=meta, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return r.returncode, r.stderr.decode(errors="replace").strip()

    with E.Watchdog(mnt, 120, "rule"):
        E.mount(path, mnt)
        try:
            rc, err = run("mv general.name general.title")
            names = os.listdir(meta)
            row("mv KEY NEW: succeeds, NEW listed, KEY not", rc == 0 and "general.title" in names
                and "general.name" not in names, "status %d %s, listed %s" % (rc, err, names))
            row("mv KEY NEW: NEW is the key, type kept (issue 21)",
                J.xattr(os.path.join(meta, "general.title"), "user.gguf.type") == b"string",
                repr(J.xattr(os.path.join(meta, "general.title"), "user.gguf.type")))
            m.rename(b"general.name", b"general.title")
            rc, err = run("mv llama.block_count llama.block_count~ && mv llama.block_count~ llama.n_layer")
            row("rename by two mv: succeeds", rc == 0, err)
            row("rename by two mv: user.gguf.type kept",
                J.xattr(os.path.join(meta, "llama.n_layer"), "user.gguf.type") == b"uint32",
                repr(J.xattr(os.path.join(meta, "llama.n_layer"), "user.gguf.type")))
            m.delete(b"llama.block_count")
            m.set(b"llama.n_layer", "uint32", b"2\n")
            rc, err = run("rm save.tail && ls")
            row("rm KEY: the GHOST is not listed", "save.tail" not in os.listdir(meta), "listed")
            rc, err = run("echo 5 > save.tail")
            row("create a GHOST's name: the key comes back with its type",
                rc == 0 and J.xattr(os.path.join(meta, "save.tail"), "user.gguf.type") == b"uint32",
                "status %d %s, type %r" % (rc, err, J.xattr(os.path.join(meta, "save.tail"), "user.gguf.type")))
            m.value(b"save.tail", b"5\n")
            rc, err = run("echo 'hello' > 'Not A Key'")
            row("create a name that is neither a key nor a scratch name: EINVAL (issue 21)",
                rc != 0 and "Invalid argument" in err and "Not A Key" not in os.listdir(meta), err)
            rc, err = run("echo 'hello' > 'notes~' && cat 'notes~'")
            row("create an editor's scratch name: a FILE", rc == 0, err)
            names = os.listdir(meta)
            row("no name listed twice", len(names) == len(set(names)), str(names))
        except BaseException:
            E.cleanup_mounts(d)
            raise
        # notes~ is left: ggufs -u exits 5 (issue 21)
        how, out, err = E.ggufs_u(mnt, 5, "rule")
    row("the commit report names the FILE notes~", "meta/notes~: not a key, not committed" in out, out)
    after = E.snapshot(path, "rule")
    p = E.compare_kvs(m.kvs, after.kvs)
    row("committed: mv'ed keys renamed in place, FILEs absent, the twice-renamed key last", not p, "; ".join(p))
    return rows, probs


# ---------------------------------------------------------------------------


def main():
    J.require_fuse()
    os.environ.pop("GGUFS_FAULT", None)
    ctx = E.Ctx()
    ctx.tmp = tempfile.mkdtemp(prefix="ggufs-save-", dir="/tmp")
    probs = []
    try:
        ctx.fixture = os.path.join(ctx.tmp, "fixture.gguf")
        make_fixture(ctx.fixture)
        v, ref = J.refdump(ctx.fixture)  # raises Skip without ggml
        if ref is None:
            raise Fail("ggml rejects the fixture")
        if not shutil.which("rsync"):
            log("note: rsync is not installed (apt-get install rsync); its rows are skipped")
        if not vim_exe():
            log("note: no vim (apt-get install vim-tiny); its rows are skipped")
        only = os.environ.get("MOUNT_SAVE_ONLY", "")
        cols = [k[0] for k in KEYS] + ["others"]
        w = max(len(r[0]) for r in ROWS)
        log("%-*s  %s" % (w, "save pattern", "  ".join(cols)))
        for label, pat in ROWS:
            if only and only not in label:
                continue
            cells, p = run_row(ctx, label, pat)
            probs += p
            log("%-*s  %s" % (w, label, "  ".join(cells.get(c, "-").ljust(len(c)) for c in cols)))
        if not only:
            for fn in (rule_rows, refusal_rows):
                rows, p = fn(ctx)
                probs += p
                for label, outcome in rows:
                    log("%-4s %s" % (outcome, label))
    finally:
        E.cleanup_mounts(ctx.tmp)
        if not E.mounts_under(ctx.tmp):
            shutil.rmtree(ctx.tmp, ignore_errors=True)
    if probs:
        raise Fail("%d problems:\n  - %s" % (len(probs), "\n  - ".join(probs)))


if __name__ == "__main__":
    J.main(main)
