#!/usr/bin/env python3
"""mount_mount: every fixture ($MKFIXTURE all) and every real model in
/work/shared/models is mounted with ggufs and compared, file by file and byte
by byte, with what ggml's reference reader (tests/refdump) reports.

Environment (set by tests/meson.build): GGUFS, MKFIXTURE, REFDUMP,
GGUFS_SRCDIR.  Exit 0 pass, 1 fail, 77 skip (no FUSE, no ggml library).
"""

import os
import shutil
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
    return files


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
