"""bench/s3.py - the `s3` group of bench/run (issue 25): models in an S3
bucket served by s3rver behind tests/s3check.mjs (the signature checker of
the mount_s3 test, started here as that test starts it), mounted by
s3:// URL (AWS_ENDPOINT_URL: path style).

Rows:
  s3 start         `ggufs s3://pub/VOC MNT && cat MNT/meta/general.architecture`
                   (a public bucket, unsigned; 150k vocabulary, empty
                   cache) vs node running @huggingface/gguf's gguf(url) of
                   the same object by its HTTP URL (bench/remote.py's
                   script)
  s3 first read    every tensor file read once (signed, empty cache) vs
                   `curl --aws-sigv4 "aws:amz:us-east-1:s3" --user KEY:SECRET
                   -H "x-amz-content-sha256: <empty body's>"` downloading
                   the object from the same server; CPU s/GB of each (the
                   daemon's and curl's) beside the ratio
  s3 CPU           the daemon's CPU per GB of that first read against
                   curl's (goal <= 2x), and against curl downloading the
                   object into a file on tmpfs (which fills the page cache,
                   as every FUSE read must; report)
"""
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

AWS_VARS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_REGION")


def group_s3(b, R):
    """b: the Bench; R: bench/run's module."""
    import remote  # bench/remote.py: the @huggingface/gguf script
    os.environ.setdefault("GGUFS_SRCDIR", R.REPO)
    import judge as J  # noqa: F401  (tests/: mount_s3's helpers need it)
    import mount_s3 as T  # tests/mount_s3.py: S3 (s3check + s3rver), KEY, SECRET
    try:
        T.modules()
    except J.Skip as e:
        R.log("bench: s3: %s; skipped" % e)
        return
    node, hf = remote.hf_script(R)
    voc, model = b.models["voc"], b.models["m2g"]
    seed = os.path.join(b.work, "s3seed")
    for bucket, m in (("pub", voc), ("models", model)):
        os.makedirs(os.path.join(seed, bucket), exist_ok=True)
        os.symlink(m, os.path.join(seed, bucket, os.path.basename(m)))
    saved = {v: os.environ.get(v) for v in AWS_VARS}
    s3 = T.S3(b.work, seed)
    caches = os.path.join(b.work, "s3cache")
    try:
        for v in AWS_VARS:
            os.environ.pop(v, None)
        os.environ.update(AWS_ENDPOINT_URL=s3.url, AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
                          AWS_CONFIG_FILE="/nonexistent")
        _start(b, R, s3, voc, caches, node, hf)
        os.environ.update(AWS_ACCESS_KEY_ID=T.KEY, AWS_SECRET_ACCESS_KEY=T.SECRET)
        _read(b, R, T, s3, model, caches)
    finally:
        if R.is_mounted(b.mnt):
            b.m.unmount(b.mnt, "ggufs")
        s3.stop()
        for v, x in saved.items():
            os.environ.pop(v, None)
            if x is not None:
                os.environ[v] = x
        shutil.rmtree(caches, ignore_errors=True)
        shutil.rmtree(seed, ignore_errors=True)
        shutil.rmtree(os.path.join(b.work, "s3data"), ignore_errors=True)


def _start(b, R, s3, voc, caches, node, hf):
    import remote
    name = os.path.basename(voc)
    url, http = "s3://pub/" + name, s3.url + "/pub/" + name
    arch = os.path.join(b.mnt, "meta", "general.architecture")

    def g():
        opts = remote.fresh(caches)

        def go():
            b.m.ggufs(url, b.mnt, opts=opts)
            if R.run(["cat", arch], capture=True).stdout.strip() != "llama":
                raise RuntimeError("%s: general.architecture is not llama" % url)
        b.add("s3start_g", R.timed(go))
        b.m.unmount(b.mnt, "ggufs")

    def n():
        def go():
            if R.run([node, hf, http], capture=True).stdout.strip() != "llama":
                raise RuntimeError("@huggingface/gguf: %s is not llama" % http)
        b.add("s3start_n", R.timed(go))

    fns = [g, n] if hf else [g]
    for i in range(2 * b.runs + 1):
        for f in (fns if i % 2 == 0 else fns[::-1]):
            f()
    R.log("bench: s3 start  ggufs %.0f ms  @huggingface/gguf %s"
          % (1e3 * statistics.median(b.s["s3start_g"]),
             "%.0f ms" % (1e3 * statistics.median(b.s["s3start_n"])) if hf else "-"))


def _read(b, R, T, s3, model, caches):
    import remote
    name = os.path.basename(model)
    url, http = "s3://models/" + name, s3.url + "/models/" + name
    tl = R.tensor_list(b.m, model, b.mnt)
    total, fsize = sum(s for _, _, s in tl), os.path.getsize(model)
    b.info["s3_bytes"] = total
    files = [os.path.join(b.mnt, "tensors", n) for n, _, _ in tl]
    curl = ["curl", "-sf", "-o", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3",
            "--user", "%s:%s" % (T.KEY, T.SECRET), "-H", "x-amz-content-sha256: " + T.EMPTY_SHA, http]

    def g():
        b.m.ggufs(url, b.mnt, opts=remote.fresh(caches))
        b.add_rate("s3read_g", total, R.read_files(files, R.pid_of("ggufs", b.mnt)))
        b.m.unmount(b.mnt, "ggufs")

    def n():
        b.add_rate("s3read_n", fsize, R.measure(lambda: R.run(curl)))

    def nf():  # the download a user would make instead: into a file (tmpfs)
        dl = [remote.DL_FILE if a == "/dev/null" else a for a in curl]
        b.add_rate("s3read_f", fsize, R.measure(lambda: R.run(dl)))
        os.unlink(remote.DL_FILE)

    for i in range(b.runs):
        for f in ([g, n, nf] if i % 2 == 0 else [nf, n, g]):
            f()
        R.log("bench: s3 %d/%d  ggufs %.2f  curl --aws-sigv4 %.2f GB/s"
              % (i + 1, b.runs, b.s["s3read_g"][-1] / R.GB, b.s["s3read_n"][-1] / R.GB))


def rows(b, row, ms):
    """The group's rows in bench/run's table."""
    if "s3start_g" in b.s:
        row("s3://: start until `cat meta/general.architecture` (public bucket, unsigned, 150k vocab, "
            "empty cache)", "s3start_g", "s3start_n", "@huggingface/gguf gguf(HTTP URL)",
            "<= 1.0x (ggufs/peer time, lower better)", 1.0, higher=False, fmt=ms)
    if "s3_bytes" in b.info:
        row("s3://: read every tensor once (%.1f GB, signed, empty cache, loopback)"
            % (b.info["s3_bytes"] / 1e9), "s3read_g", "s3read_n", "curl --aws-sigv4 -o /dev/null",
            ">= 0.5x (ggufs/curl GB/s)", 0.5)
        import remote
        remote.cpu_rows(b, row, "s3://", "s3read")
