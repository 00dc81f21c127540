#!/usr/bin/env python3
"""mount_storenames: what a store user trips over (issue 32, items 4, 5,
7, 8, 10), through real FUSE mounts of stores laid out by tests/mkstore as
ollama and huggingface_hub lay them out.  Checked:
  aliases     `ollama cp tiny-a:latest tiny-a:f16` (a second manifest of
              one blob): for every name `ollama list` shows,
              MNT/NAME/NAME.gguf is the live view (listed there, ggml
              reads it, the blob's bytes);
  busy        `ggufs -u` while a program holds a file of the mount open:
              exit 6, says the edits were committed and names
              `fuser -vm`; the file holds the edit; -u after the close: 0;
  homes       `ggufs ~/.ollama MNT`, `ggufs ~/.cache/huggingface MNT`
              mount the store below (saying so; mountinfo names it), an
              empty folder says it holds no models;
  status      `--status` of a store names each open model's pending edit,
              `--status MNT/MODEL` (and through an alias) is the model's;
              MNT/MODEL/meta is refused naming the mount;
  reports     `ggufs -u` of a store: one line per model, named by the
              model, no blob path; names holding a newline or an escape
              sequence keep a line each, no control byte printed;
  mix         a mix with no edit does not report an overlay that does
              not exist;
  copy        `cp` of a live view makes a file its owner can write;
  help        --help lists -o mix with the options, not under Stores;
  pretok      hf/README of a gpt2 vocabulary without tokenizer.ggml.pre
              says so (no empty quoted name);
  grep        README's grep -r with --exclude-dir at a store root reads
              the keys only (bytes read measured against a plain grep -r);
  s3          s3://BUCKET is the bucket's store; s3://BUCKET/PREFIX
              without '/' hints at the prefix form (s3rver; skipped
              without it).
Every case runs; the failures are listed at the end.
Exit 0 pass, 1 fail, 77 skip (no FUSE, no ggml).
"""

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_stores as S  # noqa: E402

Fail = J.Fail
BUSY = 6  # man/ggufs.1, EXIT STATUS; status.h EXIT_BUSY


def ggufs(*args, **kw):
    p = J.run_ggufs(list(args), **kw)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def mount(src, mnt, *args):
    rc, out, err = ggufs(*(list(args) + [src, mnt]))
    if rc != 0 or J.mountinfo_entry(mnt) is None:
        raise Fail("ggufs %s %s: exit %d: %s" % (src, mnt, rc, err.strip()))
    return err


def ollama_cp(store, src_tag, dst_tag):
    """What `ollama cp` does: the manifest copied under the new name."""
    d = os.path.join(store, "manifests", "registry.ollama.ai", "library")
    (m, t), (m2, t2) = src_tag.split(":"), dst_tag.split(":")
    os.makedirs(os.path.join(d, m2), exist_ok=True)
    shutil.copyfile(os.path.join(d, m, t), os.path.join(d, m2, t2))


def kv(path, key):
    verdict, ref = J.refdump(path)
    if ref is None:
        raise Fail("ggml rejects %s: %s" % (path, verdict))
    return S.kv_of(ref, key.encode())


def case_aliases(tmp, mnt):
    store = os.path.join(tmp, "ollama")
    names = dict(S.mkstore("ollama", store))
    ollama_cp(store, "tiny-a:latest", "tiny-a:f16")
    names["tiny-a:f16"] = names["tiny-a:latest"]
    mount(store, mnt)
    try:
        for name, blob in sorted(names.items()):
            d = os.path.join(mnt, name)
            view = os.path.join(d, S.live_name(name))
            if S.live_name(name) not in os.listdir(d):
                raise Fail("%s/ lists %s, not its own %s" % (name, sorted(os.listdir(d)), S.live_name(name)))
            with open(view, "rb") as f, open(blob, "rb") as g:
                if f.read() != g.read():
                    raise Fail("%s: not the bytes of the blob %s" % (view, blob))
            if kv(view, "general.architecture") != kv(blob, "general.architecture"):
                raise Fail("%s: ggml reads another model than the blob" % view)
        link = os.readlink(os.path.join(mnt, "tiny-a:latest"))
    finally:
        J.unmount(mnt)
    J.log("ok   aliases: MNT/NAME/NAME.gguf for all %d names (tiny-a:latest -> %s, ollama cp), the blob's bytes, "
          "read by ggml" % (len(names), link))


def case_busy(tmp, mnt):
    gguf = os.path.join(tmp, "busy.gguf")
    subprocess.run([J.tool("MKFIXTURE"), "types", gguf], check=True)
    mount(gguf, mnt)
    held = None
    try:
        with open(os.path.join(mnt, "meta", "general.name"), "w") as f:
            f.write("edited while held\n")
        held = os.open(os.path.join(mnt, "meta", "general.name"), os.O_RDONLY)
        rc, out, said = ggufs("-u", mnt)
        err = said
        if rc != BUSY or "the edits were committed" not in err or "fuser -vm" not in err:
            raise Fail("ggufs -u of a mount with a file held open: exit %d (want %d), %r %r" % (rc, BUSY, out, err))
        if J.mountinfo_entry(mnt) is None:
            raise Fail("ggufs -u said the mount stays, but it is gone")
        if kv(gguf, "general.name") != "edited while held":
            raise Fail("ggufs -u said the edits were committed; the file says general.name is %r"
                       % kv(gguf, "general.name"))
        os.close(held)
        held = None
        rc, out, err = ggufs("-u", mnt)
        if rc != 0 or J.mountinfo_entry(mnt) is not None:
            raise Fail("ggufs -u after the file was closed: exit %d, %r" % (rc, err))
    finally:
        if held is not None:
            os.close(held)
        J.cleanup(mnt, os.path.join(tmp, "nothing"))
    J.log("ok   busy: ggufs -u exit %d, %s; the file holds the edit; -u after the close: 0"
          % (BUSY, said.strip().splitlines()[-1]))


def case_homes(tmp, mnt):
    home = os.path.join(tmp, "home")
    want = {}
    for tool, parent, sub in (("ollama", ".ollama", "models"), ("hf", ".cache/huggingface", "hub")):
        store = os.path.join(home, parent, sub)
        os.makedirs(os.path.dirname(store))
        want[parent] = (store, [n for n, _ in S.mkstore(tool, store)])
    # What else the tools keep there: ollama's key and history, the Hub's token and xet cache.
    for f in (".ollama/id_ed25519", ".ollama/history", ".cache/huggingface/token"):
        with open(os.path.join(home, f), "w") as g:
            g.write("x\n")
    os.makedirs(os.path.join(home, ".cache/huggingface/xet/logs"))
    for parent, (store, names) in sorted(want.items()):
        err = mount(os.path.join(home, parent), mnt)
        try:
            src = J.mountinfo_entry(mnt)[1]
            S.check_listing(mnt, names, parent)
        finally:
            J.unmount(mnt)
        if store not in err or src != store:
            raise Fail("ggufs ~/%s: the mount's source %s, said %r; the store is %s" % (parent, src, err, store))
        J.log("ok   homes: ggufs ~/%s mounts %s (%d models): %s" % (parent, src, len(names), err.strip()))
    empty = os.path.join(tmp, "empty")
    os.makedirs(os.path.join(empty, "notes"))
    err = mount(empty, mnt)
    J.unmount(mnt)
    if "no models" not in err:
        raise Fail("an empty folder mounted without a word: %r" % err)
    J.log("ok   homes: an empty folder: %s" % err.strip())


def case_status(tmp, mnt):
    store = os.path.join(tmp, "ollama-st")
    S.mkstore("ollama", store)
    ollama_cp(store, "tiny-a:latest", "tiny-a:f16")
    mount(store, mnt)
    try:
        with open(os.path.join(mnt, "tiny-b:q4", "meta", "general.name"), "w") as f:
            f.write("status-b\n")
        rc, out, err = ggufs("--status", mnt)
        if rc != 0 or not re.search(r"model tiny-b:q4: pending edits: 1 key", out) or "status-b" not in out:
            raise Fail("ggufs --status of the store: exit %d, does not name tiny-b:q4's edit: %r %r" % (rc, out, err))
        for m in ("tiny-b:q4", "tiny-a:latest"):
            rc2, out2, err2 = ggufs("--status", os.path.join(mnt, m))
            if rc2 != 0 or "pending edits" not in out2 or ("status-b" in out2) != (m == "tiny-b:q4"):
                raise Fail("ggufs --status MNT/%s: exit %d, %r %r" % (m, rc2, out2, err2))
        rc3, out3, err3 = ggufs("--status", os.path.join(mnt, "tiny-b:q4", "meta"))
        if rc3 != 3 or "not a model's directory" not in err3:
            raise Fail("ggufs --status MNT/tiny-b:q4/meta: exit %d, %r" % (rc3, err3))
    finally:
        J.unmount(mnt)
    J.log("ok   status: the store's names tiny-b:q4's edit; MNT/MODEL (and an alias) its own; MNT/MODEL/meta: %s"
          % err3.strip())


def case_reports(tmp, mnt):
    store = os.path.join(tmp, "ollama-rep")
    S.mkstore("ollama", store)
    mount(store, mnt)
    try:
        for m in ("tiny-a:latest", "tiny-b:q4"):
            with open(os.path.join(mnt, m, "meta", "general.name"), "w") as f:
                f.write("report %s\n" % m)
        rc, out, err = ggufs("-u", mnt)
    finally:
        J.cleanup(mnt, os.path.join(tmp, "nothing"))
    lines = out.splitlines()
    named = [ln for ln in lines if re.match(r"ggufs: (tiny-a:latest|tiny-b:q4): ", ln)]
    if rc != 0 or len(named) != 2 or "blobs/sha256-" in out:
        raise Fail("ggufs -u of a store with 2 models edited: exit %d, report %r (want one line per model, "
                   "named by the model, no blob path)" % (rc, out))
    J.log("ok   reports: %s" % " | ".join(lines))


def case_hostile_names(tmp, mnt):
    """Names of a store's files with a newline and an escape sequence:
    --status and the commit report keep one line per model, no control
    byte reaches the terminal."""
    store = os.path.join(tmp, "dir-hostile")
    made = dict(S.mkstore("dir", store))
    for bad in ("evil\nname", "esc\x1b[31mred"):
        shutil.copyfile(made["tiny-a"], os.path.join(store, bad + ".gguf"))
    mount(store, mnt)
    try:
        for bad in ("evil\nname", "esc\x1b[31mred"):
            with open(os.path.join(mnt, bad, "meta", "general.name"), "w") as f:
                f.write("hostile\n")
        rc1, status, _ = ggufs("--status", mnt)
        rc, out, err = ggufs("-u", mnt)
    finally:
        J.cleanup(mnt, os.path.join(tmp, "nothing"))
    ctl = [c for c in status + out if ord(c) < 0x20 and c not in "\n\t"]
    lines = [ln for ln in out.splitlines() if ln.startswith("ggufs: ")]
    named = "model evil?name: pending" in status and "model esc?[31mred: pending" in status
    if rc1 != 0 or rc != 0 or ctl or len(lines) != 2 or len(out.splitlines()) != 2 or not named:
        raise Fail("hostile names: --status exit %d %r; -u exit %d %r" % (rc1, status, rc, out))
    J.log("ok   hostile names: %s" % " | ".join(lines))


def case_mix(tmp, mnt):
    d = os.path.join(tmp, "mix")
    os.makedirs(d)
    base, donor = os.path.join(d, "base.gguf"), os.path.join(d, "donor.gguf")
    subprocess.run([J.tool("MKFIXTURE"), "model", base, "--tensor-mb", "1", "--n-tensors", "2"], check=True)
    shutil.copyfile(base, donor)
    names = [t.name for t in J.refdump(base)[1].tensors]
    recipe = os.path.join(d, "recipe")
    with open(recipe, "w") as f:
        f.write("%s donor.gguf\n" % re.escape(names[0].decode()))
    mount(base, mnt, "-o", "mix=" + recipe)
    rc, out, err = ggufs("-u", mnt)
    J.cleanup(mnt, os.path.join(tmp, "nothing"))
    named = re.findall(r"(/\S+\.overlay\.gguf)", out + err)
    missing = [p for p in named if not os.path.exists(p)]
    if rc != 0 or missing:
        raise Fail("ggufs -u of a mix with no edit: exit %d, names overlays that do not exist %s: %r"
                   % (rc, missing, out + err))
    J.log("ok   mix: ggufs -u of a mix with no edit: %s" % out.strip())


def case_copy(tmp, mnt):
    store = os.path.join(tmp, "dir-copy")
    S.mkstore("dir", store)
    mount(store, mnt)
    dst = os.path.join(tmp, "copy.gguf")
    try:
        subprocess.run(["cp", os.path.join(mnt, "tiny-a", "tiny-a.gguf"), dst], check=True)
    finally:
        J.unmount(mnt)
    mode = stat.S_IMODE(os.stat(dst).st_mode)
    if not mode & stat.S_IWUSR:
        raise Fail("cp of a live view made a file of mode %o: its owner cannot write it" % mode)
    J.log("ok   copy: cp of a live view makes a %o file" % mode)


def case_help(tmp, mnt):
    rc, out, err = ggufs("--help")
    stores = out.split("\nStores", 1)[1].split("\n\n", 1)[0] if "\nStores" in out else None
    if rc != 0 or stores is None or "mix=" in stores or "-o mix=RECIPE" not in out:
        raise Fail("--help: -o mix listed under Stores (or not at all): %r" % (stores,))
    J.log("ok   help: -o mix with the options, not under Stores")


def case_pretok(tmp, mnt):
    gguf = os.path.join(tmp, "gpt2-nopre.gguf")
    subprocess.run([J.tool("MKFIXTURE"), "llama", gguf], check=True, stdout=subprocess.DEVNULL)
    mount(gguf, mnt, "-o", "overlay=" + os.path.join(tmp, "pretok.overlay.gguf"))
    try:
        with open(os.path.join(mnt, "meta", "tokenizer.ggml.model"), "w") as f:
            f.write("gpt2\n")
        os.unlink(os.path.join(mnt, "meta", "tokenizer.ggml.pre"))
        with open(os.path.join(mnt, "hf", "README")) as f:
            line = f.readline().rstrip("\n")
    finally:
        J.cleanup(mnt, os.path.join(tmp, "nothing"))
    # The bug: the README quoted the missing name as ''.  Which reason it
    # gives depends on the rest of the vocabulary (here: no merges).
    if "''" in line or not line.startswith("tokenizer.json: "):
        raise Fail("hf/README of a gpt2 vocabulary without tokenizer.ggml.pre: %r" % line)
    J.log("ok   pretok: %s" % line)


def rchar(argv):
    """Bytes argv's process read (its /proc/PID/io, sampled until it
    exits), and its exit status."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    last = 0
    while p.poll() is None:
        try:
            with open("/proc/%d/io" % p.pid) as f:
                last = int([ln for ln in f if ln.startswith("rchar:")][0].split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return last, p.returncode


def case_grep(tmp, mnt):
    store = os.path.join(tmp, "dir-grep")
    os.makedirs(store)
    model = os.path.join(store, "q.gguf")
    subprocess.run([J.tool("MKFIXTURE"), "quants", model, "--mega", "1"], check=True)
    mount(store, mnt)
    try:
        plain, _ = rchar(["grep", "-r", "zz-no-such-text-zz", mnt])
        # README and ggufs(1), STORES: the recipe as written there (the
        # shell's '*.gguf' is *.gguf; the text sought is this model's
        # architecture, llama there), and its second form.
        recipe = ["grep", "-r", "--exclude-dir=f32", "--exclude-dir=npy", "--exclude-dir=tensors",
                  "--exclude=*.gguf", "quants", mnt]
        excl, rc = rchar(recipe)
        found = subprocess.run(recipe[:1] + ["-l"] + recipe[1:], stdout=subprocess.PIPE).stdout
        found += subprocess.run("grep -H . %s/*/meta/general.architecture" % mnt, shell=True,
                                stdout=subprocess.PIPE).stdout
    finally:
        J.unmount(mnt)
    size = os.path.getsize(model)
    if (plain < 5 * size or excl > size // 20 or rc != 0 or b"meta/general.architecture" not in found
            or b"q/meta/general.architecture:quants" not in found):
        raise Fail("grep -r at a store root read %d bytes (model %d); with the excludes %d, exit %d, found %r"
                   % (plain, size, excl, rc, found))
    J.log("ok   grep: grep -r at a store root reads %.1f MB for a %.1f MB model (%.1fx: tensors/, f32/, npy/, "
          "the view); with README's --exclude-dir recipe %.3f MB" % (plain / 1e6, size / 1e6, plain / size, excl / 1e6))


def case_s3(tmp, mnt):
    import mount_s3 as M3
    import mount_remote as R
    try:
        M3.modules()
    except J.Skip as e:
        J.log("note: s3 skipped: %s" % e)
        return
    seed = os.path.join(tmp, "s3seed")
    os.makedirs(os.path.join(seed, "bk", "team"))
    R.make_model(os.path.join(seed, "bk", "team", "m.gguf"), 1, 2)
    R.make_model(os.path.join(seed, "bk", "top.gguf"), 1, 3)
    s3 = M3.S3(tmp, seed)
    saved = dict(os.environ)
    try:
        os.environ["AWS_ENDPOINT_URL"] = s3.url
        os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.path.join(tmp, "no-credentials")
        os.environ["AWS_CONFIG_FILE"] = os.path.join(tmp, "no-config")
        os.environ.pop("AWS_PROFILE", None)
        M3.creds()
        cache = ["-o", "ro,cache=" + os.path.join(tmp, "s3cache")]
        rc, out, err = ggufs(*(cache + ["s3://bk", mnt]))
        try:
            got = sorted(os.listdir(mnt)) if rc == 0 else None
            team = sorted(os.listdir(os.path.join(mnt, "team"))) if rc == 0 else None
        finally:
            if J.mountinfo_entry(mnt):
                J.unmount(mnt)
        bad = []  # both checked, whatever the first says
        if got != ["models.tsv", "team", "top"] or team != ["m"]:
            bad.append("s3://bk (a bucket): exit %d, lists %s, team/ %s: %r" % (rc, got, team, err))
        else:
            J.log("ok   s3: s3://bk is the bucket's store: %s, team/%s" % (got, team))
        rc, out, err = ggufs(*(cache + ["s3://bk/team", mnt]))
        if J.mountinfo_entry(mnt):
            J.unmount(mnt)
        if rc == 0 or "s3://BUCKET/PREFIX/" not in err:
            bad.append("s3://bk/team (a prefix without '/'): exit %d, no hint at the prefix form: %r" % (rc, err))
        else:
            J.log("ok   s3: s3://bk/team: %s" % err.strip())
        if bad:
            raise Fail("; ".join(bad))
    finally:
        os.environ.clear()
        os.environ.update(saved)
        s3.stop()


CASES = [case_aliases, case_busy, case_homes, case_status, case_reports, case_hostile_names, case_mix,
         case_copy, case_help, case_pretok, case_grep, case_s3]


def main():
    J.require_fuse()
    tmp = tempfile.mkdtemp(prefix="ggufs-storenames-", dir="/tmp")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    failed = []
    try:
        for case in CASES:
            try:
                with J.Watchdog(mnt, 300, case.__name__):
                    case(tmp, mnt)
            except Fail as e:
                J.log("FAIL %s: %s" % (case.__name__, e))
                failed.append(case.__name__)
            if J.mountinfo_entry(mnt) is not None:
                J.unmount(mnt, [])
    finally:
        J.cleanup(mnt, tmp)
    if failed:
        raise Fail("%d of %d cases failed: %s" % (len(failed), len(CASES), ", ".join(failed)))


if __name__ == "__main__":
    J.main(main)
