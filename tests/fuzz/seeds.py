#!/usr/bin/env python3
"""fuzz_seeds: the seed corpus of the fuzz targets, replayed without libFuzzer.

mkfixture all writes the fixtures; mkseeds turns them, the real models in
../shared/models beside the source tree (GGUFS_SRCDIR/../shared/models), the
corrupt-file table and handwritten samples into the corpus;
fuzz_replay_header and fuzz_replay_text run every seed through the targets'
properties (tests/fuzz/fuzz_*.c).  Every fixture must survive
open -> render -> parse -> write_header -> reopen unchanged.

Environment (tests/meson.build): MKSEEDS, MKFIXTURE, REPLAY_HEADER,
REPLAY_TEXT, GGUFS_SRCDIR.  Exit 0 pass, 1 fail.
"""

import os
import shutil
import subprocess
import sys
import tempfile


def run(argv, what):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=550)
    if p.returncode != 0:
        err = p.stderr.decode(errors="replace").strip().splitlines()
        print("FAIL: %s exited with %d; last lines of stderr:\n  %s"
              % (what, p.returncode, "\n  ".join(err[-8:])), flush=True)
        sys.exit(1)
    return p.stdout.decode(errors="replace").strip()


def main():
    env = {k: os.environ.get(k) for k in ("MKSEEDS", "MKFIXTURE", "REPLAY_HEADER", "REPLAY_TEXT")}
    missing = [k for k, v in env.items() if not v]
    if missing:
        print("FAIL: %s not set (run through meson test)" % ", ".join(missing))
        sys.exit(1)
    tmp = tempfile.mkdtemp(prefix="ggufs-seeds-")
    try:
        fix = os.path.join(tmp, "fixtures")
        run([env["MKFIXTURE"], "all", fix], "mkfixture all")
        files = sorted(os.path.join(fix, f) for f in os.listdir(fix))
        models = os.path.join(os.environ.get("GGUFS_SRCDIR", "."), "..", "shared", "models")
        if os.path.isdir(models):
            files += sorted(os.path.join(models, f) for f in os.listdir(models) if f.endswith(".gguf"))
        seeds = os.path.join(tmp, "seeds")
        print(run([env["MKSEEDS"], seeds] + files, "mkseeds"), flush=True)
        for t in ("header", "text"):
            print("%s: %s" % (t, run([env["REPLAY_" + t.upper()], os.path.join(seeds, t)],
                                     "fuzz_replay_%s on the seeds" % t)), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("2 passed, 0 failed")


if __name__ == "__main__":
    main()
