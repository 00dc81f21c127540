"""bench/stores.py - the `stores` group of bench/run (issue 23): a store of
N_MODELS small real GGUF models (tests/mkstore, the project's writer) laid
out as a folder (`dir`) and as ollama lays out its models (`ollama`:
manifests + blobs/sha256-HEX), mounted as a store.

Each run, for each store, times (fresh mounts; the store's files stay in
the page cache):
  mount-ready     `ggufs STORE MNT` until the root answers a stat
                  (absolute goal; the ratio is to the goal.  A single small
                  model's mount is timed too, for scale)
  first cat       after a plain `ls` of the root (the names, no header
                  read): `cat MNT/NAME/meta/general.architecture` of a
                  model not yet open, vs a single-model mount of the same
                  file until the same cat (bench/run's start row)
  daemon RSS      then VmRSS after `cat meta/*` of OPEN models, vs one
                  header (ggml's data offset) and a single-model daemon
                  after `cat meta/*`; VmHWM beside it
  models.tsv      then `cat MNT/models.tsv` (every header read once) vs
                  `ggml_open` of the same N_MODELS files (gguf_init_from_file
                  + gguf_free each, one process); the daemon's VmHWM after
  ls -l           on a mount of its own: `ls -l MNT` vs `ls -l` of the dir
                  store's own folder (N_MODELS native entries); and, without
                  a goal, of that folder through libfuse's passthrough_ll
                  (what any FUSE file system pays); the daemon's RSS after
  find            `find MNT -maxdepth 2 -ls` of the dir store: on a fresh
                  mount (cold) and again at once (warm), read-write and
                  -o ro, vs the same tree on ext4 (each model a directory
                  of empty files and directories named as its entries),
                  warm (issue 35)
  ls -l dirs      `ls -l` of the store's root vs passthrough_ll (fresh mount,
                  its default options) listing a folder of N_MODELS
                  directories (issue 35)
The baselines run in the same iteration, which alternates which goes first.
"""
import os
import shutil
import statistics

N_MODELS = 1000
OPEN = 10  # models whose meta/ is read before the RSS is taken
KINDS = ("dir", "ollama")
READY_GOAL = 0.050  # seconds: mount-ready of the store
MB = 1 << 20


def _status(pid, field):
    """A /proc/PID/status field in bytes (VmRSS, VmHWM)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _make(R, d, kind):
    """Lays out the store; returns [(name, path of its GGUF)]."""
    out = R.run([R.MKSTORE, kind, d, str(N_MODELS)], capture=True).stdout
    return [(n, os.path.join(d, p)) for n, p in
            (line.split("\t") for line in out.splitlines())]


ENTRIES_DIR = ("f32", "hf", "meta", "npy", "tensors", "tokenizer")
ENTRIES_FILE = ("index.tsv", "meta.tsv")  # and NAME.gguf, the live view


def _tree(top, models):
    """The dir store's tree on ext4: a directory per model with empty
    entries named as a mounted model's root shows them."""
    tree = os.path.join(top, "tree")
    for name, _ in models:
        for e in ENTRIES_DIR:
            os.makedirs(os.path.join(tree, name, e))
        for e in ENTRIES_FILE + (name + ".gguf",):
            open(os.path.join(tree, name, e), "w").close()
    return tree


def _dirs(top):
    """A folder of N_MODELS directories (passthrough_ll's ls -l)."""
    d = os.path.join(top, "dirs")
    for i in range(N_MODELS):
        os.makedirs(os.path.join(d, "d%05d" % i))
    return d


def _find(R, path):
    return R.timed(lambda: R.run(["find", path, "-maxdepth", "2", "-ls"], capture=True))


def _ls(R, path):
    return R.timed(lambda: R.run(["ls", "-l", path]))


def group_stores(b, R):
    """b: the Bench; R: bench/run's module (run, timed, pid_of, ...)."""
    top = os.path.join(b.work, "stores")
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    stores = {k: os.path.join(top, k) for k in KINDS}
    models = {}
    R.log("bench: stores: laying out %d models as %s" % (N_MODELS, " and ".join(KINDS)))
    for k in KINDS:
        models[k] = _make(R, stores[k], k)
    tree, dirs = _tree(top, models["dir"]), _dirs(top)
    one = models["dir"][N_MODELS // 2][1]
    b.info["stores_header"] = R.header_size(one)
    b.info["stores_n"] = N_MODELS
    try:
        for i in range(2 * b.runs + 1):
            for k in KINDS:
                _run(b, R, k, stores[k], models[k], i)
            _native(b, R, stores["dir"], i)
            _listings(b, R, stores["dir"], tree, dirs, i)
            R.log("bench: stores %d/%d  ready %.0f/%.0f ms  ls -l %.0f/%.0f ms (native %.0f)  "
                  "tsv %.0f/%.0f ms (ggml %.0f/%.0f)"
                  % (i + 1, 2 * b.runs + 1,
                     1e3 * b.s["st_ready_dir"][-1], 1e3 * b.s["st_ready_ollama"][-1],
                     1e3 * b.s["st_ls_dir"][-1], 1e3 * b.s["st_ls_ollama"][-1],
                     1e3 * b.s["st_ls_n"][-1],
                     1e3 * b.s["st_tsv_dir"][-1], 1e3 * b.s["st_tsv_ollama"][-1],
                     1e3 * b.s["st_tsv_n_dir"][-1], 1e3 * b.s["st_tsv_n_ollama"][-1]))
    finally:
        for mnt in (b.mnt, b.pmnt):
            if R.is_mounted(mnt):
                R.run(["fusermount3", "-u", mnt], check=False, capture=True)
        shutil.rmtree(top, ignore_errors=True)


def _run(b, R, kind, store, models, i):
    """One iteration for one store kind: the store's figures and their
    baselines, in an order that alternates with i."""
    name, path = models[(i * 7919) % N_MODELS]  # a model not opened before
    steps = [lambda: _store(b, R, kind, store, models, name),
             lambda: _store_ls(b, R, kind, store),
             lambda: _single(b, R, kind, path),
             lambda: b.add("st_tsv_n_" + kind, R.timed(
                 lambda: R.run([R.tool("ggml_open")] + [p for _, p in models])))]
    for f in steps[i % 4:] + steps[:i % 4]:
        f()


def _store(b, R, kind, store, models, name):
    """A fresh mount of the store: its ready time; after a plain `ls` (the
    names listed, no header read), the first cat, meta/* of OPEN models,
    the RSS; then models.tsv."""
    mnt = b.mnt
    # The store's files are small and stay in the page cache.
    b.add("st_ready_" + kind, R.timed(lambda: (b.m.ggufs(store, mnt), os.stat(mnt))))
    pid = R.pid_of("ggufs", mnt)
    R.run(["ls", mnt])
    arch = os.path.join(mnt, name, "meta", "general.architecture")

    def cat():
        r = R.run(["cat", arch], capture=True)
        if r.stdout.strip() != "llama":
            raise RuntimeError("%s reads %r" % (arch, r.stdout))
    b.add("st_cat_" + kind, R.timed(cat))
    for n, _ in models[:OPEN]:
        meta = os.path.join(mnt, n, "meta")
        R.run(["cat"] + [os.path.join(meta, k) for k in sorted(os.listdir(meta))])
    b.add("st_rss_" + kind, _status(pid, "VmRSS"))
    b.add("st_hwm_" + kind, _status(pid, "VmHWM"))

    def tsv():
        r = R.run(["cat", os.path.join(mnt, "models.tsv")], capture=True)
        if r.stdout.count("\n") != N_MODELS + 1:
            raise RuntimeError("models.tsv has %d lines" % r.stdout.count("\n"))
    b.add("st_tsv_" + kind, R.timed(tsv))
    b.add("st_tsvhwm_" + kind, _status(pid, "VmHWM"))
    b.m.unmount(mnt, "ggufs")


def _store_ls(b, R, kind, store):
    """`ls -l` of the root of a fresh mount of the store; the RSS after."""
    b.m.ggufs(store, b.mnt)
    b.add("st_ls_" + kind, _ls(R, b.mnt))
    b.add("st_lsrss_" + kind, _status(R.pid_of("ggufs", b.mnt), "VmRSS"))
    b.m.unmount(b.mnt, "ggufs")


def _single(b, R, kind, path):
    """A single-model mount of one of the store's files until `cat
    meta/general.architecture`; its mount alone; its RSS after meta/*."""
    mnt = b.mnt
    arch = os.path.join(mnt, "meta", "general.architecture")
    t = {}

    def go():
        t["m"] = R.timed(lambda: (b.m.ggufs(path, mnt), os.stat(mnt)))
        R.run(["cat", arch])
    b.add("st_cat_n_" + kind, R.timed(go))
    b.add("st_ready_n_" + kind, t["m"])
    meta = os.path.join(mnt, "meta")
    R.run(["cat"] + [os.path.join(meta, k) for k in sorted(os.listdir(meta))])
    b.add("st_rss_n_" + kind, _status(R.pid_of("ggufs", mnt), "VmRSS"))
    b.m.unmount(mnt, "ggufs")


def _native(b, R, folder, i):
    """`ls -l` of the dir store's folder: natively, and through
    passthrough_ll (a fresh mount each time, as the store's is)."""
    def n():
        b.add("st_ls_n", _ls(R, folder))

    def p():
        b.m.passthrough(folder, b.pmnt)
        b.add("st_ls_p", _ls(R, b.pmnt))
        b.m.unmount(b.pmnt, "passthrough_ll")
    for f in ([n, p] if i % 2 == 0 else [p, n]):
        f()


def _listings(b, R, store, tree, dirs, i):
    """find -maxdepth 2 -ls of the dir store (rw and ro, cold and warm) and
    of its tree on ext4; ls -l of the store's root and of N_MODELS
    directories through passthrough_ll; the order alternates with i."""
    def fs(tag, opts):
        b.m.ggufs(store, b.mnt, opts=b.m.ggufs_opts + opts)
        b.add("st_find1_" + tag, _find(R, b.mnt))
        b.add("st_find2_" + tag, _find(R, b.mnt))
        b.m.unmount(b.mnt, "ggufs")

    def ls():
        b.m.ggufs(store, b.mnt)
        b.add("st_lsd_dir", _ls(R, b.mnt))
        b.m.unmount(b.mnt, "ggufs")

    def pt():
        b.m.passthrough(dirs, b.pmnt)
        b.add("st_ls_pd", _ls(R, b.pmnt))
        b.m.unmount(b.pmnt, "passthrough_ll")
    steps = [lambda: fs("rw", []), lambda: fs("ro", ["-o", "ro"]),
             lambda: b.add("st_find_n", _find(R, tree)), ls, pt]
    k = i % len(steps)
    for f in steps[k:] + steps[:k]:
        f()


def rows(b, row, rows_out):
    """The group's rows in bench/run's table."""
    s, info = b.s, b.info
    if "stores_n" not in info:
        return
    n = info["stores_n"]
    med = lambda k: statistics.median(s[k])
    ms = lambda k: "%.1f ms" % (1e3 * med(k))
    us = lambda k: "%.1f us/entry" % (1e6 * med(k) / n)
    for kind in KINDS:
        v = med("st_ready_" + kind)
        rows_out.append(("mount-ready (`ggufs STORE MNT` + stat of the root), %s store of %d "
                         "small models" % (kind, n), "%.1f ms" % (1e3 * v),
                         "goal %.0f ms (a single small model's mount: %.1f ms)"
                         % (1e3 * READY_GOAL, 1e3 * med("st_ready_n_" + kind)),
                         "%.2fx" % (v / READY_GOAL),
                         "<= %.0f ms (absolute)" % (1e3 * READY_GOAL),
                         "yes" if v <= READY_GOAL else "**no**"))
    for kind in KINDS:
        row("`ls -l` of the root after mount, per entry, %s store of %d models" % (kind, n),
            "st_ls_" + kind, "st_ls_n", "native `ls -l` of %d entries" % n,
            "<= 2x (time, lower better)", 2.0, higher=False, fmt=us)
    row("same baseline through passthrough_ll (`ls -l` of the %d-file folder, fresh mount)" % n,
        "st_ls_p", "st_ls_n", "native `ls -l`", "report (what FUSE pays: no goal)", 1e9,
        higher=False, fmt=us)
    row("`ls -l` of the dir store's root of %d models, fresh mount" % n, "st_lsd_dir", "st_ls_pd",
        "passthrough_ll (default options, fresh mount): `ls -l` of %d directories" % n,
        "<= 1.2x (time, lower better)", 1.2, higher=False, fmt=ms)
    for tag, what in (("rw", "read-write"), ("ro", "-o ro")):
        row("`find MNT -maxdepth 2 -ls`, dir store of %d models, %s, first after mount"
            % (n, what), "st_find1_" + tag, "st_find_n", "the same tree on ext4, warm",
            "<= 10x (time, lower better)", 10.0, higher=False, fmt=ms)
        row("same, again at once (warm)", "st_find2_" + tag, "st_find_n",
            "the same tree on ext4, warm", "<= 3x (time, lower better)", 3.0, higher=False,
            fmt=ms)
    for kind in KINDS:
        row("first `cat NAME/meta/general.architecture`, %s store (mounted, listed)" % kind,
            "st_cat_" + kind, "st_cat_n_" + kind, "single-model mount + the same cat",
            "<= 1.5x (time, lower better)", 1.5, higher=False, fmt=ms)
    for kind in KINDS:
        row("`cat models.tsv` of %d models, %s store (every header read once)" % (n, kind),
            "st_tsv_" + kind, "st_tsv_n_" + kind, "ggml_open of the %d files" % n,
            "<= 1.5x (time, lower better)", 1.5, higher=False, fmt=ms)
    h = info["stores_header"]
    lim = 10 * h + 16 * MB
    for kind in KINDS:
        v = med("st_rss_" + kind)
        rows_out.append(("daemon RSS, %s store: %d models listed (`ls`), meta/ of %d read "
                         "(VmHWM %.1f MB; after models.tsv %.1f MB; RSS after `ls -l` %.1f MB)"
                         % (kind, n, OPEN, med("st_hwm_" + kind) / MB,
                            med("st_tsvhwm_" + kind) / MB, med("st_lsrss_" + kind) / MB),
                         "%.1f MB" % (v / MB),
                         "header %d bytes (a single-model daemon: %.1f MB)"
                         % (h, med("st_rss_n_" + kind) / MB),
                         "%.2fx single" % (v / med("st_rss_n_" + kind)),
                         "<= 10x header + 16 MB (%.1f MB)" % (lim / MB),
                         "yes" if v <= lim else "**no**"))
