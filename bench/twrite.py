"""bench/twrite.py - the `twrite` group of bench/run (issue 24): tensors
written through tensors/ on a read-write mount.

A copy of the m2g model (16 tensors of 128 MiB; --quick: 8 of 32) in the
work directory.  Each run, in an order that alternates:
  in place   `dd if=SRC of=MNT/tensors/NAME bs=1M conv=notrunc` of one
             whole tensor (the bytes go into the GGUF at its offset) vs
             `dd of=COPY bs=1M seek=OFF oflag=seek_bytes conv=notrunc` of
             the same bytes natively to the same file (a pwrite loop):
             goal >= 0.5x, with CPU seconds per GB (dd's and the daemon's)
  replace    `cp SRC MNT/tensors/NAME` (O_TRUNC: journal, seal, copy in,
             fdatasync twice) against the same native dd followed by
             fdatasync (conv=fdatasync): reported
Both write from the page cache into the page cache (the source is read
first); the model's pages are dropped between runs by nothing: the bytes
written are the same each run.
"""
import os
import shutil
import statistics

GB = 1e9


def group_twrite(b, R):
    top = os.path.join(b.work, "twrite")
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    model = os.path.join(top, "w.gguf")
    shutil.copyfile(b.models["m2g"], model)
    tl = R.tensor_list(b.m, model, b.mnt)
    name, off, size = tl[len(tl) // 2]
    src = os.path.join(top, "src.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(1 << 20) * (size >> 20))
    R.ensure_cached(src)
    b.info["tw_size"] = size
    R.log("bench: twrite: tensor %s, %d MiB" % (name, size >> 20))

    def fuse(key, cmd_of):
        b.m.ggufs(model, b.mnt, opts=[])
        pid = R.pid_of("ggufs", b.mnt)
        t = os.path.join(b.mnt, "tensors", name)
        b.add_rate(key, size, R.measure(lambda: R.run(cmd_of(t)), pid))
        b.m.ggufs_u(b.mnt)

    def native(key, extra):
        b.add_rate(key, size, R.measure(lambda: R.run(
            ["dd", "if=" + src, "of=" + model, "bs=1M", "seek=%d" % off, "oflag=seek_bytes",
             "conv=notrunc" + extra, "status=none"])))

    steps = [lambda: fuse("tw_g", lambda t: ["dd", "if=" + src, "of=" + t, "bs=1M", "conv=notrunc",
                                             "status=none"]),
             lambda: native("tw_n", ""),
             lambda: fuse("tw_cp", lambda t: ["cp", src, t]),
             lambda: native("tw_ns", ",fdatasync")]
    try:
        for i in range(b.runs):
            for f in steps[i % 4:] + steps[:i % 4]:
                f()
            R.log("bench: twrite %d/%d  in place %.2f GB/s (native %.2f)  cp %.2f GB/s (native + "
                  "fdatasync %.2f)" % (i + 1, b.runs, b.s["tw_g"][-1] / GB, b.s["tw_n"][-1] / GB,
                                        b.s["tw_cp"][-1] / GB, b.s["tw_ns"][-1] / GB))
    finally:
        if R.is_mounted(b.mnt):
            R.run(["fusermount3", "-u", b.mnt], check=False, capture=True)
        shutil.rmtree(top, ignore_errors=True)


def rows(b, row, rows_out, gbps):
    if "tw_size" not in b.info:
        return
    mb = b.info["tw_size"] >> 20
    row("tensor write through tensors/ in place (`dd bs=1M conv=notrunc`, one %d MiB tensor)" % mb,
        "tw_g", "tw_n", "dd to the GGUF at the tensor's offset", ">= 0.5x native pwrite", 0.5)
    row("tensor replaced whole by `cp` (journal, seal, copy in, fdatasync)", "tw_cp", "tw_ns",
        "dd + fdatasync natively", "report (crash-safe: the bytes are written twice)", 0.0)
