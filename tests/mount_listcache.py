#!/usr/bin/env python3
"""mount_listcache: what the kernel keeps of a read-write store's model
listings (issue 35) never shows an edit late, through a real FUSE mount of
a folder store laid out by tests/mkstore.

The kernel keeps, on a read-write store: the attributes of a model's meta/,
tokenizer/ and hf/ (which no edit changes), of meta.tsv (told at each edit:
the edit section's end), and the listing of a model's root (while it is what
the daemon would list).  Checked, each after the kernel has cached what it
may (every name stat'ed and listed twice):
  1. an edit of a meta/ key, a new key (a file created in meta/ with a value),
     a FILE created and one unlinked: at once, stat and find -ls show meta.tsv's
     new size, equal to the bytes it reads (direct I/O, never the kernel's
     size); the key's size is its value's; the live view's size is the
     model's file's after the commit at unmount; meta/'s listing has the new
     names, not the unlinked one;
  2. the root's listing (readdir's d_ino) names the live view's inode as
     lstat does, after each edit (a version moves the view to a new inode)
     and after the model is closed and opened again (-o max_models=1) past
     a commit;
  3. a second find -maxdepth 2 -ls of the unedited store sends no
     READDIRPLUS of a model's root and no GETATTR of its meta.tsv, meta/,
     tokenizer/ or hf/ (the daemon's -d log): the caches are on.
Exit 0 pass, 1 fail, 77 skip (no FUSE).
"""

import errno
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_stores as S  # noqa: E402
import mount_storelist as L  # noqa: E402

Fail = J.Fail


def cache_all(mnt):
    """Lists and stats everything find -maxdepth 2 -ls reaches, twice, so
    that the kernel holds what it may."""
    for _ in range(2):
        L.find_ls(mnt)
        for top in os.scandir(mnt):
            if top.is_dir(follow_symlinks=False):
                for e in os.scandir(top.path):
                    os.lstat(e.path)


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def check_tsv(mnt, name, what):
    """meta.tsv's size as stat and find -ls give it (asked first) is the
    length of its text (read by direct I/O: the daemon's)."""
    p = os.path.join(mnt, name, "meta.tsv")
    size = os.stat(p).st_size
    found = subprocess.run(["find", os.path.join(mnt, name), "-maxdepth", "1", "-name", "meta.tsv",
                            "-printf", "%s"], stdout=subprocess.PIPE, timeout=60).stdout.decode()
    text = read_all(p)
    if size != len(text) or found != str(len(text)):
        raise Fail("%s: meta.tsv of %s is %d bytes, stat says %d, find says %s: the kernel kept a "
                   "stale size" % (what, name, len(text), size, found))
    return text


def check_inode(mnt, name, what):
    """The root's listing names the live view's inode as lstat does."""
    d = os.path.join(mnt, name)
    listed = {e.name: e.inode() for e in os.scandir(d)}
    live = name + ".gguf"
    if live not in listed:
        raise Fail("%s: %s's listing has no %s: %s" % (what, name, live, sorted(listed)))
    st = os.lstat(os.path.join(d, live)).st_ino
    if listed[live] != st:
        raise Fail("%s: %s's listing names the live view's inode %d, lstat says %d: the kernel kept "
                   "a stale listing of the model's root" % (what, name, listed[live], st))


def live_size(mnt, name):
    """The live view's size; None while opening the model fails (EIO)."""
    try:
        return os.stat(os.path.join(mnt, name, name + ".gguf")).st_size
    except OSError as e:
        if e.errno != errno.EIO:
            raise
        return None


def put(mnt, name, rel, value):
    with open(os.path.join(mnt, name, "meta", rel), "w") as f:
        f.write(value)


def check_edits(tmp):
    store = os.path.join(tmp, "edits")
    names = L.bench_store(store, 2)
    mnt = os.path.join(tmp, "mnt")
    a = names[0]
    with S.Fg(store, mnt):
        cache_all(mnt)
        before = check_tsv(mnt, a, "unedited")
        check_inode(mnt, a, "unedited")
        steps = (("general.name set 3000 bytes longer", "general.name", "n" * 3000 + "\n"),
                 ("a new key created", "test.note", "a note\n"),
                 ("general.name set short", "general.name", "x\n"))
        for what, key, value in steps:
            cache_all(mnt)
            put(mnt, a, key, value)
            text = check_tsv(mnt, a, what)
            if text == before:
                raise Fail("%s: meta.tsv of %s did not change" % (what, a))
            before = text
            ksize = os.stat(os.path.join(mnt, a, "meta", key)).st_size
            if ksize != len(read_all(os.path.join(mnt, a, "meta", key))):
                raise Fail("%s: meta/%s's size %d is not its text's" % (what, key, ksize))
            check_inode(mnt, a, what)
        cache_all(mnt)
        with open(os.path.join(mnt, a, "meta", "notes.bak"), "w") as f:
            f.write("a file, not a key\n")
        if "notes.bak" not in os.listdir(os.path.join(mnt, a, "meta")):
            raise Fail("a FILE (a backup name) created in meta/ is not listed at once")
        os.unlink(os.path.join(mnt, a, "meta", "test.note"))
        if "test.note" in os.listdir(os.path.join(mnt, a, "meta")):
            raise Fail("an unlinked key is still listed in meta/")
        check_tsv(mnt, a, "a key unlinked")
        check_inode(mnt, a, "a key unlinked")
        live = os.stat(os.path.join(mnt, a, a + ".gguf")).st_size
    disk = os.path.getsize(os.path.join(store, a + ".gguf"))
    if live != disk:
        raise Fail("the live view showed %d bytes after the edits; the model committed at unmount is "
                   "%d" % (live, disk))
    J.log("ok   a read-write store's cached attributes and listings show each edit at once "
          "(meta.tsv, meta/, the live view and its inode in the listing)")


def check_reopen(tmp):
    """A model closed and opened again (-o max_models=1): the listing the
    kernel kept from before its commit is not kept."""
    store = os.path.join(tmp, "reopen")
    names = L.bench_store(store, 2)
    mnt = os.path.join(tmp, "mnt")
    a, b = names
    with S.Fg(store, mnt, ["-o", "max_models=1"]):
        cache_all(mnt)
        os.listdir(os.path.join(mnt, a))
        check_inode(mnt, a, "unedited")
        put(mnt, a, "general.name", "edited before the commit\n")
        check_inode(mnt, a, "edited")
        fd = os.open(os.path.join(mnt, a, "meta"), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)  # commits: the model may close
        finally:
            os.close(fd)
        os.listdir(os.path.join(mnt, b))  # closes a
        check_inode(mnt, a, "opened again after its commit")
        check_tsv(mnt, a, "opened again after its commit")
    J.log("ok   a model opened again lists its live view's inode as lstat does")


def check_counts(tmp):
    store = os.path.join(tmp, "counts")
    names = L.bench_store(store, 20)
    mnt = os.path.join(tmp, "mnt")
    with S.Fg(store, mnt, ["-d"]) as fg:
        L.find_ls(mnt)
        mark = len(fg.log())
        L.find_ls(mnt)
        log = fg.log()[mark:]
    plus = log.count("opcode: READDIRPLUS")
    attrs = log.count("opcode: GETATTR")
    if plus > 4 or attrs > 4:
        raise Fail("a second find -maxdepth 2 -ls of %d models sent %d READDIRPLUS and %d GETATTR "
                   "(the models' listings or attributes not kept)" % (len(names), plus, attrs))
    J.log("ok   a second find of %d models: %d READDIRPLUS, %d GETATTR" % (len(names), plus, attrs))


def check_closed(tmp):
    """Past -o max_models (4 of 12), a second find of the read-write store
    opens no model (the store answers a closed unedited model's OPENDIR and
    its live view's LOOKUP) and lists the same; a model edited, committed
    and closed is opened again and shows its new size; a model whose file
    the store replaces shows the new file within 1.5 s, one rewritten in
    place at once."""
    store = os.path.join(tmp, "closed")
    names = L.bench_store(store, 12)
    mnt = os.path.join(tmp, "mnt")
    with S.Fg(store, mnt, ["-o", "max_models=4"]) as fg:
        first = L.find_ls(mnt)
        L.find_ls(mnt)
        again = {}
        if shutil.which("strace"):
            n = L.daemon_openats(fg.pid, lambda: again.update(L.find_ls(mnt)), tmp)
            if n > 2:
                raise Fail("a second find of %d models (-o max_models=4), read-write, made the daemon "
                           "open %d files: the closed models opened again" % (len(names), n))
        else:
            again = L.find_ls(mnt)
        if again != first:
            raise Fail("a second find of the read-write store lists otherwise")
        a, b = names[0], names[1]
        size = os.stat(os.path.join(mnt, a, a + ".gguf")).st_size
        put(mnt, a, "general.name", "m" * 8000 + "\n")
        fd = os.open(os.path.join(mnt, a, "meta"), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        for _ in range(2):
            L.find_ls(mnt)  # a closes, edited and committed
        grown = os.stat(os.path.join(mnt, a, a + ".gguf")).st_size
        disk = os.path.getsize(os.path.join(store, a + ".gguf"))
        if grown != disk or grown <= size:
            raise Fail("a model edited, committed and closed: its live view shows %d bytes, the file "
                       "holds %d (%d before the edit)" % (grown, disk, size))
        check_inode(mnt, a, "edited, committed, closed")
        part = os.path.join(tmp, "replace.gguf")
        shutil.copyfile(os.path.join(store, a + ".gguf"), part)
        os.rename(part, os.path.join(store, b + ".gguf"))
        # Until the store's scan sees the new file, opening the closed
        # model fails (EIO: the file is not the one listed), as it did
        # before the store answered for closed models.
        S.wait_for(lambda: live_size(mnt, b) == disk,
                   "a closed model's file replaced in the store (its live view's size)", 2.5)
        # A file rewritten in place (curl -o, cp onto it): the same inode,
        # the store's folder unchanged; shown at once all the same.
        c = names[2]
        for _ in range(2):
            L.find_ls(mnt)  # c closed, fresh
        with open(os.path.join(store, a + ".gguf"), "rb") as src, \
                open(os.path.join(store, c + ".gguf"), "r+b") as dst:
            dst.write(src.read())
            dst.truncate()
        got = os.stat(os.path.join(mnt, c, c + ".gguf")).st_size
        if got != disk:
            raise Fail("a closed model's file rewritten in place (%d bytes): its live view shows %d"
                       % (disk, got))
    J.log("ok   past max_models a read-write store's second find opens no model; edits, a "
          "replaced file and one rewritten in place show")


def check_closed_user(tmp):
    """Another user is refused a closed fresh model's directory and live
    view the owner listed (the store's own answers ask as the model's)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        J.log("skip another user's refusal (not root, or no setpriv)")
        return
    made = L.bench_store(os.path.join(tmp, "made"), 1)
    store = os.path.join(tmp, "users")
    os.makedirs(store)
    os.chmod(tmp, 0o755)
    os.chmod(store, 0o755)
    for name, mode in (("public", 0o644), ("private", 0o600), ("other", 0o644)):
        dst = os.path.join(store, name + ".gguf")
        shutil.copyfile(os.path.join(tmp, "made", made[0] + ".gguf"), dst)
        os.chown(dst, 1000, 1000)
        os.chmod(dst, mode)
    mnt = os.path.join(tmp, "mnt")
    with S.Fg(store, mnt, ["-o", "allow_other,max_models=1"]):
        for _ in range(2):
            L.find_ls(mnt)
        os.listdir(os.path.join(mnt, "other"))  # private closes
        for cmd in (["ls", os.path.join(mnt, "private")],
                    ["stat", os.path.join(mnt, "private", "private.gguf")]):
            p = subprocess.run(L.NOBODY + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=30)
            if p.returncode == 0 or "Permission denied" not in p.stderr.decode(errors="replace"):
                raise Fail("nobody ran %s on a closed 0600 model of a read-write store after root "
                           "listed it: %r %r" % (cmd[0], p.stdout[:80], p.stderr[:120]))
        p = subprocess.run(L.NOBODY + ["stat", os.path.join(mnt, "public", "public.gguf")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        if p.returncode != 0:
            raise Fail("nobody could not stat a 0644 model's live view: %r" % p.stderr[:120])
    J.log("ok   another user is refused a closed private model of a read-write store")


def run():
    J.require_fuse()
    with J.store_scratch("ggufs-listcache-") as (tmp, mnt):
        with J.Watchdog(mnt, 280, "listcache"):  # LISTCACHE_ONLY=check_edits: that one alone
            for fn in J.chosen("LISTCACHE_ONLY", (check_edits, check_reopen, check_counts, check_closed,
                                                    check_closed_user)):
                fn(tmp)


if __name__ == "__main__":
    J.main(run)
