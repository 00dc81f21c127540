#!/usr/bin/env python3
"""cli: the ggufs command line as man/ggufs.1 (OPTIONS, EXIT STATUS)
documents it.  Every misuse exits with its documented status and says so
in exactly one line "ggufs: ..." on stderr, with nothing on stdout and
nothing mounted; --version prints ggufs's line first even into a pipe;
good options still mount.

Environment (tests/meson.build): GGUFS, MKFIXTURE.  Exit 0 pass, 1 fail;
the checks that mount are skipped without FUSE, the others always run.
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge as J  # noqa: E402

Fail = J.Fail
USAGE, BADFILE, MOUNT, UNCOMMITTED, BUSY = 2, 1, 3, 5, 6


def run(args, cwd):
    p = J.run_ggufs(args, timeout=60, cwd=cwd)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def expect_error(label, args, status, cwd, mnt=None, says=None):
    """ggufs ARGS exits with status, stdout empty, stderr one line
    'ggufs: ...' (containing says, if given); nothing is mounted at mnt."""
    rc, out, err = run(args, cwd)
    problems = []
    if rc != status:
        problems.append("exit status %d, expected %d" % (rc, status))
    if out:
        problems.append("stdout not empty: %r" % out)
    lines = err.split("\n")
    if not (len(lines) == 2 and lines[1] == "" and lines[0].startswith("ggufs: ")):
        problems.append("stderr is not one line starting with 'ggufs: ': %r" % err)
    if says and says not in err:
        problems.append("stderr %r does not say %r" % (err, says))
    if mnt and J.mountinfo_entry(mnt) is not None:
        J.unmount(mnt, [])
        problems.append("something was mounted at %s" % mnt)
    if problems:
        raise Fail("%s (ggufs %s): %s" % (label, " ".join(args), "; ".join(problems)))
    J.log("ok: %s: exit %d, %s" % (label, rc, err.strip()))


def check_version(cwd):
    for flag in ("--version", "-V"):
        # stdout is a pipe here, the case `ggufs --version | head -1` hit
        rc, out, err = run([flag], cwd)
        lines = out.splitlines()
        if rc != 0:
            raise Fail("ggufs %s exited %d: %r" % (flag, rc, err))
        if not lines or not lines[0].startswith("ggufs version "):
            raise Fail("ggufs %s: the first line is %r, not ggufs's own 'ggufs version ...'"
                       % (flag, lines[0] if lines else ""))
        if len(lines) < 2 or not any("FUSE" in x or "fusermount" in x for x in lines[1:]):
            raise Fail("ggufs %s: libfuse's version lines are missing after ggufs's: %r" % (flag, out))
        J.log("ok: %s: %s" % (flag, " | ".join(lines)))


def check_help(cwd):
    rc, out, err = run(["--help"], cwd)
    if rc != 0 or not out.startswith("usage: "):
        raise Fail("ggufs --help exited %d and printed %r" % (rc, out[:200]))
    for opt in ("timeout=SECONDS", "-u MOUNTPOINT", "--recover"):
        if opt not in out:
            raise Fail("ggufs --help does not mention %s" % opt)
    J.log("ok: --help")


def misuse(tmp, gguf, mnt):
    cwd = tmp
    plain = os.path.join(tmp, "plain")
    os.mkdir(plain)
    missing = os.path.join(tmp, "no-such.gguf")
    cases = [
        ("no arguments", [], USAGE, "missing FILE.gguf and MOUNTPOINT"),
        ("one argument", [gguf], USAGE, "missing MOUNTPOINT"),
        ("three arguments", [gguf, mnt, "extra"], USAGE, "unexpected argument 'extra'"),
        ("unknown option", ["--bogus", gguf, mnt], USAGE, "--bogus"),
        ("unknown short option", ["-Z", gguf, mnt], USAGE, "-Z"),
        ("unknown -o option", ["-o", "unknown=1", gguf, mnt], USAGE, "unknown=1"),
        ("negative timeout", ["-o", "timeout=-5", gguf, mnt], USAGE, "timeout=-5"),
        ("timeout not a number", ["-o", "timeout=abc", gguf, mnt], USAGE, "timeout=abc"),
        ("timeout with junk", ["-o", "timeout=5s", gguf, mnt], USAGE, "timeout=5s"),
        ("timeout not finite", ["-o", "timeout=inf", gguf, mnt], USAGE, "timeout=inf"),
        ("timeout among others", ["-o", "ro,timeout=-1", gguf, mnt], USAGE, "timeout=-1"),
        ("negative max_threads", ["-o", "max_threads=-5", gguf, mnt], USAGE, "max_threads=-5"),
        ("zero max_threads", ["-o", "max_threads=0", gguf, mnt], USAGE, "max_threads=0"),
        ("max_idle_threads not a number", ["-o", "max_idle_threads=x", gguf, mnt], USAGE,
         "max_idle_threads=x"),
        ("max_read", ["-o", "max_read=4096", gguf, mnt], USAGE, "max_read"),
        ("-u without mountpoint", ["-u"], USAGE, "-u takes exactly one MOUNTPOINT"),
        ("-u with two arguments", ["-u", mnt, plain], USAGE, "-u takes exactly one MOUNTPOINT"),
        ("--recover without file", ["--recover"], USAGE, "--recover takes exactly one FILE.gguf"),
        ("-u on a directory that is no ggufs mount", ["-u", plain], MOUNT, "%s: not a ggufs mount" % plain),
        ("-u on a missing directory", ["-u", os.path.join(tmp, "gone")], MOUNT, "gone"),
        ("--recover of a missing file", ["--recover", missing], BADFILE, missing),
        ("--recover of a directory", ["--recover", plain], BADFILE, plain),
        ("missing GGUF", [missing, mnt], BADFILE, missing),
        ("--apply-pending without file", ["--apply-pending"], USAGE,
         "--apply-pending takes exactly one FILE.gguf"),
        ("--drop-pending with two files", ["--drop-pending", gguf, gguf], USAGE,
         "--drop-pending takes exactly one FILE.gguf"),
        ("--apply-pending of a missing file", ["--apply-pending", missing], BADFILE, missing),
        ("--apply-pending with nothing pending", ["--apply-pending", gguf], BADFILE,
         "no pending edits"),
        ("--drop-pending with nothing pending", ["--drop-pending", gguf], BADFILE,
         "no pending edits"),
        ("--apply-saved with one argument", ["--apply-saved", gguf], USAGE,
         "--apply-saved takes EDITS and MODEL"),
        ("--compact without file", ["--compact"], USAGE, "--compact takes exactly one FILE.gguf"),
        ("--compact of a missing file", ["--compact", missing], BADFILE, missing),
        ("--compact of a URL", ["--compact", "http://127.0.0.1:9/m.gguf"], BADFILE,
         "a remote file is never written"),
        ("--apply-saved of a missing edits file", ["--apply-saved", missing, gguf], BADFILE, missing),
        ("--apply-saved onto a missing model", ["--apply-saved", gguf, missing], BADFILE, missing),
        # issue 21
        ("--status without mountpoint", ["--status"], USAGE, "--status takes exactly one MOUNTPOINT"),
        ("--status with two arguments", ["--status", mnt, plain], USAGE,
         "--status takes exactly one MOUNTPOINT"),
        ("--status on a directory that is no ggufs mount", ["--status", plain], MOUNT,
         "%s: not a ggufs mount" % plain),
        ("--show-pending without file", ["--show-pending"], USAGE,
         "--show-pending takes exactly one FILE.gguf"),
        ("--show-pending of a missing file", ["--show-pending", missing], BADFILE, missing),
        ("--show-pending with nothing pending", ["--show-pending", gguf], BADFILE, "no pending edits"),
        ("--show-pending of a URL", ["--show-pending", "https://example.invalid/m.gguf"], BADFILE,
         "for local files"),
    ]
    for label, args, status, says in cases:
        expect_error(label, args, status, cwd, mnt, says)
    # an unknown option is refused before the GGUF is even opened
    expect_error("unknown option and missing GGUF", ["--bogus", missing, mnt], USAGE, cwd, mnt, "--bogus")


def good_options(gguf, mnt):
    """Valid numbers and libfuse options still mount (the checks above
    must not refuse everything)."""
    for args in (["-o", "timeout=0"], ["-o", "timeout=2.5,ro"], ["-o", "max_threads=4"],
                 ["-o", "max_idle_threads=0"], ["-o", "allow_nested,no_insert_range"]):
        with J.Mounted(gguf, mnt, args):
            if not os.path.isdir(os.path.join(mnt, "meta")):
                raise Fail("ggufs %s: no meta/ in the mount" % " ".join(args))
        J.log("ok: mounts with %s" % " ".join(args))
    rc, out, err = run(["--recover", gguf], None)
    if rc != 0 or "nothing to recover" not in out:
        raise Fail("ggufs --recover of a sound file exited %d: %r %r" % (rc, out, err))
    J.log("ok: --recover of a sound file: %s" % out.strip())
    # issue 21: a mount over a mount is refused, in one line, naming it
    other = os.path.join(os.path.dirname(gguf), "other.gguf")
    shutil.copy(gguf, other)
    with J.Mounted(gguf, mnt):
        expect_error("a mount over a ggufs mount", [other, mnt], MOUNT, None, None,
                     "%s: already a mount point (fuse.ggufs of %s); -o over" % (mnt, gguf))
        if J.mountinfo_entry(mnt) is None:
            raise Fail("the refused mount over a mount unmounted the first one")


def uncommitted_status(gguf, mnt):
    """ggufs -u exits 5 (man EXIT STATUS) when files in meta/ were not
    committed, naming them; 0 once none is left (issue 21)."""
    for leave, want in ((True, UNCOMMITTED), (False, 0)):
        rc = J.run_ggufs([gguf, mnt]).returncode
        if rc != 0:
            raise Fail("ggufs %s %s exited %d" % (gguf, mnt, rc))
        with open(os.path.join(mnt, "meta", "notes~"), "w") as f:
            f.write("scratch\n")
        if not leave:
            os.unlink(os.path.join(mnt, "meta", "notes~"))
        rc, out, err = run(["-u", mnt], None)
        if J.mountinfo_entry(mnt) is not None:
            J.unmount(mnt, [])
            raise Fail("ggufs -u left the mount in place")
        if rc != want or (leave and "meta/notes~: not a key, not committed" not in out):
            raise Fail("ggufs -u with%s a FILE left in meta/: exit %d (expected %d), %r %r"
                       % ("" if leave else "out", rc, want, out, err))
        J.log("ok: ggufs -u with%s a FILE left in meta/: exit %d" % ("" if leave else "out", rc))


def busy_status(gguf, mnt):
    """ggufs -u of a mount a program holds (its working directory there)
    exits 6 (man EXIT STATUS), saying the edits were committed; the mount
    stays (issue 32)."""
    if J.run_ggufs([gguf, mnt]).returncode != 0:
        raise Fail("ggufs %s %s did not mount" % (gguf, mnt))
    holder = subprocess.Popen(["sleep", "60"], cwd=mnt)
    try:
        rc, out, err = run(["-u", mnt], None)
    finally:
        holder.kill()
        holder.wait()
    still = J.mountinfo_entry(mnt) is not None
    J.unmount(mnt, [])
    if rc != BUSY or not still or "committed" not in err or "fuser" not in err:
        raise Fail("ggufs -u of a busy mount: exit %d (expected %d), mounted after: %s, %r"
                   % (rc, BUSY, still, err))
    J.log("ok: ggufs -u of a busy mount: exit %d" % rc)


def main():
    with tempfile.TemporaryDirectory(prefix="ggufs-cli-") as tmp:
        gguf = os.path.join(tmp, "model.gguf")
        p = subprocess.run([J.tool("MKFIXTURE"), "types", gguf], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise Fail("mkfixture types failed: %s" % p.stderr.decode(errors="replace"))
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        check_version(tmp)
        check_help(tmp)
        misuse(tmp, gguf, mnt)
        try:
            J.require_fuse()
        except J.Skip as e:
            J.log("note: mounting checks skipped: %s" % e)
            return
        good_options(gguf, mnt)
        uncommitted_status(gguf, mnt)
        busy_status(gguf, mnt)


if __name__ == "__main__":
    J.main(main)
