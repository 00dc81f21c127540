#!/usr/bin/env python3
"""Every state a power cut may leave, recovered as ggufs(1) tells a user.

The model of a power cut.  tests/plrec.c (LD_PRELOAD into every ggufs
process: the commands and the daemon) logs each call that changes a
regular file's bytes or a directory's entries beneath the workload's
directory, or makes them durable, in the order they took effect, with the
bytes written.  From a snapshot of the tree taken (after sync) before the
workload, the log is replayed; after each call k the disk may hold:
  - a file's bytes as of its last fsync/fdatasync, plus the writes,
    truncates and fallocates (INSERT_RANGE, COLLAPSE_RANGE, ...) made
    since: all lost, all kept, the first half of them kept, or torn (every
    write since keeps only the 4 KiB blocks of even index, the other
    changes kept);
  - a directory's entries as of its last fsync, plus the creates, links,
    unlinks and renames made in it since, kept as an in-order prefix (a
    rename within a directory is one step; across two, a removal in one and
    an addition in the other);
  - a new directory only if its parent's entry for it survived.
The states built at each k are representative, not every combination:
everything kept (what kill -9 leaves), everything lost, each directory
alone at each shorter prefix, each file alone lost, half kept or torn, all
files lost with the directories kept and the converse.  Equal states are
tried once (with the strictest verdict of the steps that make them).

Each state is written at the workload's paths and recovered as ggufs(1)
says: `ggufs --recover FILE` (every other state: left to the commands
that follow, which complete an interrupted commit themselves),
`--overlay-apply FILE OVERLAY` when the overlay is there, `--apply-pending FILE` (exit 0, or 1 "no pending
edits"), then a read-write mount and `ggufs -u` (the next command must not
be blocked).  ggml's reader (refdump) must see the old or the new model
(--compact: the old or the new bytes; tensor bytes written in place may be
any mix until their fsync, as for any file), and only the new one once
the workload was told its change was durable (a mark: the write(2) and
close(2) of an edit returned, a command exited 0); no journal, staged
tensor, rewrite copy, saved or pending edits may be left.  The recovery
runs with plrec's stat map, so a rebuilt file has the identity (device,
inode, mtime, ctime) the recorded run saw, as after a reboot.  And the
rule itself ("durable" means every created, renamed or unlinked entry's
directory was fsynced) is checked at each mark: a directory change still
unsynced there fails the workload even where recovery happens to cope
(an overlay's lock and the log of detached mounts excepted).

Limits: the calls are ordered as each process's lock saw them (the disk
reorders nothing beyond the rules above); metadata other than size
(modes, owners, times, xattrs) is taken as of the call; mmap writes,
syscall(2) and stdio's own writes are not seen (ggufs writes no durable
file so); no promise of a file system beyond POSIX (ext4's data=ordered,
its rename heuristics) is assumed.  Workloads: in-place edit, grown header
(insert range), a removed key, -o no_insert_range (rewrite), an overlay
and --overlay-apply, a whole tensor replace (cp over tensors/NAME), tensor
bytes written in place into the model and into an overlay, --compact,
--apply-pending after a killed daemon,
a shard set: about 300 to 400 distinct states (the count is printed per
workload; more than GGUFS_POWERLOSS_CAP, 150, in one workload are sampled:
the strict ones first, the rest evenly), about a minute.
First a self-check: a replace whose directory is not fsynced must show
states that lost it and a change not durable, one whose directory is must
not.  GGUFS_POWERLOSS_ONLY=NAME,... runs a subset; GGUFS_POWERLOSS_KEEP=1 keeps
the directory with each workload's log (plrec.log) and last state.
"""
import hashlib
import os
import shutil
import subprocess
import tempfile
import time

import judge as J
import mount_edit as E

Fail = J.Fail
BLOCK = 4096
INSERT_RANGE, COLLAPSE_RANGE, PUNCH_HOLE, ZERO_RANGE, KEEP_SIZE = 0x20, 0x08, 0x02, 0x10, 0x01
RENAME_EXCHANGE = 2
CAP = int(os.environ.get("GGUFS_POWERLOSS_CAP", "150"))  # states per workload


# ---- the log -------------------------------------------------------------

def st_of(f):
    """DEV:INO:MODE:SIZE:MTIME:CTIME -> tuple of ints, or None."""
    if f == "-":
        return None
    dev, ino, mode, size, mt, ct = f.split(":")
    return (int(dev), int(ino), int(mode, 8), int(size), int(mt), int(ct))


def read_log(path):
    if not os.path.exists(path):
        return []  # nothing recorded
    recs, data, i = [], open(path, "rb").read(), 0
    while i < len(data):
        j = data.index(b"\n", i)
        f = data[i:j].decode().split(" ")
        n = int(f[-1])
        recs.append((f[0], f[1:-1], data[j + 1:j + 1 + n]))
        i = j + 1 + n
    return recs


def mark(log_path, what):
    """A point of the workload (the test's own, appended in order)."""
    with open(log_path, "ab") as f:
        f.write(("X %s 0\n" % what).encode())


# ---- the model of the disk -----------------------------------------------

def apply_data(buf, op, torn=False):
    """One change of a file's bytes to buf (a bytearray), in place."""
    kind = op[0]
    if kind == "W":
        _, off, data = op
        if len(buf) < off:
            buf.extend(bytes(off - len(buf)))
        if torn:
            end = off + len(data)
            if len(buf) < end:
                buf.extend(bytes(end - len(buf)))
            for b0 in range(off // BLOCK * BLOCK, end, BLOCK):
                if (b0 // BLOCK) % 2 == 0:
                    s, e = max(b0, off), min(b0 + BLOCK, end)
                    buf[s:e] = data[s - off:e - off]
            return
        buf[off:off + len(data)] = data
    elif kind == "T":
        size = op[1]
        del buf[size:]
        buf.extend(bytes(size - len(buf)))
    elif kind == "F":
        _, mode, off, ln = op
        if mode & INSERT_RANGE:
            buf[off:off] = bytes(ln)
        elif mode & COLLAPSE_RANGE:
            del buf[off:off + ln]
        elif mode & (PUNCH_HOLE | ZERO_RANGE):
            end = min(off + ln, len(buf)) if mode & KEEP_SIZE else off + ln
            if len(buf) < end:
                buf.extend(bytes(end - len(buf)))
            buf[off:end] = bytes(end - off)
        elif not mode & KEEP_SIZE and len(buf) < off + ln:
            buf.extend(bytes(off + ln - len(buf)))


class Obj:
    """An inode: a file's bytes (volatile, durable, the changes since the
    last sync) or a directory's entries (the same three)."""

    def __init__(self, oid, st, data=b"", ents=None):
        self.oid, self.st, self.dst = oid, st, st
        self.dir = (st[2] & 0o170000) == 0o040000
        self.cur, self.dur, self.pend = bytearray(data), bytes(data), []
        self.ents = dict(ents or {})
        self.dents, self.epend = dict(self.ents), []

    def sync(self):
        self.dur, self.pend, self.dst = bytes(self.cur), [], self.st
        self.dents, self.epend = dict(self.ents), []

    def content(self, how):
        """how: 'kept', 'lost', 'half' or 'torn'."""
        if how == "kept" or not self.pend:
            return bytes(self.cur)
        buf = bytearray(self.dur)
        if how == "half":
            ops = self.pend[:len(self.pend) // 2]
        else:
            ops = [] if how == "lost" else self.pend
        for op in ops:
            apply_data(buf, op, torn=(how == "torn"))
        return bytes(buf)

    def entries(self, keep):
        """The entries with the first keep changes since the sync."""
        if keep is None or keep >= len(self.epend):
            return dict(self.ents)
        d = dict(self.dents)
        for op in self.epend[:keep]:
            if op[0] == "add":
                d[op[1]] = op[2]
            elif op[0] == "del":
                d.pop(op[1], None)
            elif op[0] == "ren":
                if op[1] in d:
                    d[op[2]] = d.pop(op[1])
            elif op[0] == "xch":
                a, b = d.get(op[1]), d.get(op[2])
                for name, v in ((op[1], b), (op[2], a)):
                    if v is None:
                        d.pop(name, None)
                    else:
                        d[name] = v
        return d


class Disk:
    """The snapshot of root, then the log applied call by call."""

    def __init__(self, root):
        self.objs, self.byino = {}, {}
        self.root = self._snap(root)

    def _new(self, st, data=b"", ents=None):
        o = Obj(len(self.objs), st, data, ents)
        self.objs[o.oid] = o
        self.byino[(st[0], st[1])] = o
        return o

    def _snap(self, path):
        s = os.lstat(path)
        st = (s.st_dev, s.st_ino, s.st_mode, s.st_size, s.st_mtime_ns, s.st_ctime_ns)
        if os.path.isdir(path) and not os.path.islink(path):
            ents = {n: self._snap(os.path.join(path, n)).oid for n in sorted(os.listdir(path))}
            return self._new(st, ents=ents)
        with open(path, "rb") as f:
            return self._new(st, f.read())

    def obj(self, f):
        st = st_of(f)
        if st is None:
            return None
        o = self.byino.get((st[0], st[1]))
        if o is None:  # beneath the root but made before it was watched
            o = self._new(st)
        o.st = st
        return o

    def apply(self, rec):
        op, f, data = rec
        if op == "W":
            o = self.obj(f[0])
            change = ("W", int(f[1]), data)
        elif op == "T":
            o, change = self.obj(f[0]), ("T", int(f[1]))
        elif op == "F":
            o, change = self.obj(f[0]), ("F", int(f[1]), int(f[2]), int(f[3]))
        elif op == "S":
            self.obj(f[0]).sync()
            return
        elif op == "A":
            for o in self.objs.values():
                o.sync()
            return
        else:
            self._entry(op, f)
            return
        apply_data(o.cur, change)
        o.pend.append(change)

    def _entry(self, op, f):
        if op == "N":
            st = st_of(f[0])
            o = self._new(st)
            if f[1] != "-":
                self._add(self.obj(f[1]), bytes.fromhex(f[2]).decode(), o.oid)
        elif op == "L":
            o = self.obj(f[0])
            self._add(self.obj(f[1]), bytes.fromhex(f[2]).decode(), o.oid)
        elif op == "U":
            d, name = self.obj(f[0]), bytes.fromhex(f[1]).decode()
            d.ents.pop(name, None)
            d.epend.append(("del", name))
        elif op == "R":
            self._rename(f)

    def _add(self, d, name, oid):
        d.ents[name] = oid
        d.epend.append(("add", name, oid))

    def _rename(self, f):
        od, on = self.obj(f[0]), bytes.fromhex(f[1]).decode()
        nd, nn = self.obj(f[2]), bytes.fromhex(f[3]).decode()
        flags = int(f[4])
        moved = od.ents.get(on)
        if moved is None:
            raise Fail("log: rename of %r, which the model does not know" % on)
        if flags & RENAME_EXCHANGE:
            other = nd.ents[nn]
            od.ents[on], nd.ents[nn] = other, moved
            if od is nd:
                od.epend.append(("xch", on, nn))
            else:
                od.epend.append(("add", on, other))
                nd.epend.append(("add", nn, moved))
        else:
            del od.ents[on]
            nd.ents[nn] = moved
            if od is nd:
                od.epend.append(("ren", on, nn))
            else:
                od.epend.append(("del", on))
                nd.epend.append(("add", nn, moved))
        self.obj(f[5])

    def variants(self):
        """(label, {dir oid: prefix}, {file oid: how}) of this instant."""
        dirs = [o for o in self.objs.values() if o.dir and o.epend]
        files = [o for o in self.objs.values() if not o.dir and o.pend]
        names = self.names()
        out = [("all kept", {}, {}),
               ("all lost", {d.oid: 0 for d in dirs}, {f.oid: "lost" for f in files}),
               ("files lost", {}, {f.oid: "lost" for f in files}),
               ("entries lost", {d.oid: 0 for d in dirs}, {})]
        for d in dirs:
            for j in range(len(d.epend)):
                out.append(("%s/ keeps %d of its %d changes" % (names.get(d.oid, "?"), j,
                                                             len(d.epend)), {d.oid: j}, {}))
        for f in files:
            for how in ("lost", "half", "torn"):
                out.append(("%s %s" % (names.get(f.oid, "an unnamed file"), how), {},
                            {f.oid: how}))
        return out

    def names(self):
        """Each inode's path as the calls so far left it (for messages)."""
        out = {self.root.oid: "."}

        def walk(o, rel):
            for name, oid in o.ents.items():
                p = os.path.join(rel, name) if rel else name
                out.setdefault(oid, p)
                if self.objs[oid].dir:
                    walk(self.objs[oid], p)
        walk(self.root, "")
        return out

    def build(self, dirs, files):
        """The tree of one state: {relative path: (identity, content or
        None for a directory)}, the identity (dev, ino, mode, size, mtime,
        ctime) as of the last sync for a file whose changes are lost."""
        tree = {}

        def walk(o, rel):
            for name, oid in sorted(o.entries(dirs.get(o.oid)).items()):
                c = self.objs[oid]
                p = os.path.join(rel, name) if rel else name
                if c.dir:
                    tree[p] = (c.st, None)
                    walk(c, p)
                else:
                    how = files.get(c.oid, "kept")
                    tree[p] = (c.dst if how == "lost" else c.st, c.content(how))
        walk(self.root, "")
        return tree


def digest(tree):
    h = hashlib.sha256()
    for p in sorted(tree):
        ident, data = tree[p]
        h.update(p.encode() + b"\0" + (b"d" if data is None else hashlib.sha256(data).digest()))
        h.update(b"%o" % (ident[2] & 0o7777))
    return h.hexdigest()


def unsynced(disk, harmless):
    """The directory changes not yet made durable: ['DIR/: +NEW, -GONE']."""
    out, names = [], disk.names()
    for d in disk.objs.values():
        said = []
        for op in d.epend if d.dir else ():
            shown = {"add": "+%s", "del": "-%s", "ren": "%s->%%s", "xch": "%s<->%%s"}[op[0]] % op[1]
            if op[0] in ("ren", "xch"):
                shown %= op[2]
            if not any(h in shown for h in harmless):
                said.append(shown)
        if said:
            out.append("%s/: %s" % (names.get(d.oid, "?"), ", ".join(said)))
    return out


def describe(disk, rec, names):
    """One call of the log in words: 'write model.gguf [448, +262144)'."""
    op, f, _ = rec

    def path(st_field, name_hex=None):
        st = st_of(st_field)
        o = disk.byino.get((st[0], st[1])) if st else None
        p = names.get(o.oid, "an unnamed file") if o else "?"
        if name_hex is not None:
            p = os.path.join(p, bytes.fromhex(name_hex).decode(errors="replace"))
        return p
    if op == "W":
        return "write %s [%s, +%s)" % (path(f[0]), f[1], f[2])
    if op == "T":
        return "truncate %s to %s" % (path(f[0]), f[1])
    if op == "F":
        return "fallocate %s mode %#x [%s, +%s)" % (path(f[0]), int(f[1]), f[2], f[3])
    if op == "S":
        return "fsync %s" % path(f[0])
    if op == "A":
        return "sync"
    if op in ("N", "L"):
        return "%s %s" % ("create" if op == "N" else "link",
                          path(f[1], f[2]) if f[1] != "-" else "an unnamed file")
    if op == "U":
        return "unlink %s" % path(f[0], f[1])
    return "rename %s to %s" % (path(f[0], f[1]), path(f[2], f[3]))


def states(disk, log_path):
    """Replays the log over disk (the snapshot): [tree, strict, where] of
    each distinct state, in the order first met; and the breaches of
    "durable": a directory change not fsynced when the workload was told
    its change was durable (a mark) or when the last command returned."""
    out, strict, breaches, recs = {}, False, [], read_log(log_path) + [("X", ["end"], b"")]
    for k, rec in enumerate(recs):
        if rec[0] == "X":
            strict = strict or rec[1][0] == "durable"
            for b in unsynced(disk, (".ggufs-lock", "ggufs.log")):
                if b not in [x[1] for x in breaches]:
                    breaches.append(("at mark %s (call %d)" % (rec[1][0], k), b))
            continue
        disk.apply(rec)
        what = describe(disk, rec, disk.names())
        for label, dirs, files in disk.variants():
            tree = disk.build(dirs, files)
            key = digest(tree)
            where = "after call %d (%s), %s" % (k, what, label)
            if key not in out:
                out[key] = [tree, strict, where]
            elif strict and not out[key][1]:
                out[key][1:] = [True, where]
    return list(out.values()), breaches


def pick(found, cap):
    """At most cap states, chosen deterministically: every strict state
    first (they are the ones a lost edit shows in), then evenly spread."""
    if len(found) <= cap:
        return found
    strict = [s for s in found if s[1]]
    rest = [s for s in found if not s[1]]
    chosen = strict[:cap]
    room = cap - len(chosen)
    if room > 0:
        step = len(rest) / room
        chosen += [rest[int(i * step)] for i in range(room)]
    return chosen


# ---- a state on disk, recovered and judged --------------------------------

def materialize(root, tree, map_path):
    """Writes the state at root's paths; the map gives each file and
    directory the identity the recorded run saw."""
    for n in os.listdir(root):
        p = os.path.join(root, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
    for p in sorted(tree):
        ident, data = tree[p]
        full = os.path.join(root, p)
        if data is None:
            os.mkdir(full)
        else:
            with open(full, "wb") as f:
                f.write(data)
        os.chmod(full, ident[2] & 0o7777)
    lines = []
    for p in sorted(tree):
        want = tree[p][0]
        s = os.lstat(os.path.join(root, p))
        lines.append("%d %d %d %d %d %d %d %d\n" % (
            s.st_dev, s.st_ino, s.st_mtime_ns, s.st_ctime_ns, want[0], want[1], want[4], want[5]))
    with open(map_path, "w") as f:
        f.writelines(lines)


def model_of(path, by_bytes):
    """What ggml's reader sees of path (for --compact: the bytes)."""
    if by_bytes:
        return J.file_sha256(path)
    s = E.snapshot(path, "power-loss state")
    return (tuple(s.kvs), tuple(t[:4] + t[5:] for t in s.tensors))


# Files a finished recovery must not leave: a commit's journal, its staged
# tensor bytes, a rewrite's copy, saved edits, pending edits (in the state
# directory: the same by device and inode).  An overlay's lock, its next
# version (".ggufs-tmp-": removed by the overlay's next write), a running
# overlay mount's record and the log of detached mounts may stay: ggufs(1)
# says a stale one is harmless, and no command is refused over one.
LEFTOVERS = (".ggufs-journal", ".ggufs-new", ".ggufs-edits-", ".pending", ".journal",
             ".journal.data")
HARMLESS = (".ggufs-lock", ".ggufs-tmp-", ".tmp", "ggufs.log", ".overlay-mount")


def leftovers(w):
    bad = []
    for d, _, names in os.walk(w.root):
        for n in names:
            if any(t in n for t in LEFTOVERS) and not any(t in n for t in HARMLESS):
                bad.append(os.path.relpath(os.path.join(d, n), w.root))
    return bad


def differs(a, b):
    """What differs between two models_of (for messages)."""
    if isinstance(a, str):
        return "the bytes"
    ka, kb = dict((k[0], k) for k in a[0]), dict((k[0], k) for k in b[0])
    keys = sorted(k.decode(errors="replace") for k in set(ka) | set(kb) if ka.get(k) != kb.get(k))
    ts = sorted(t[0] for t, u in zip(a[1], b[1]) if t != u)
    return "keys %s, tensors %s" % (keys or "none", ts or "none")


def verdict(w, got, strict):
    """None if got is a model this state may recover to, else why not."""
    if got == w.new:
        return None
    if strict:
        return "not the new model, though the change was durable (%s differ)" % differs(got, w.new)
    if got == w.old:
        return None
    if w.mixed_ok and got[0] == w.old[0]:
        return None  # tensor bytes written in place, before their fsync
    return "neither the old model (%s differ) nor the new one (%s differ)" % (
        differs(got, w.old), differs(got, w.new))


def check_state(w, st, env, mnt, first):
    """Recovers one state as ggufs(1) says (first: by `ggufs --recover`,
    else by the commands that follow, which complete an interrupted commit
    themselves); returns None or why it failed."""
    said = []

    def run(args):
        p = J.run_ggufs(args, timeout=120, env=env)
        err = p.stderr.decode(errors="replace").strip().replace("\n", " | ")
        err = err.replace(w.root + "/", "")
        said.append("[%s: %d %s]" % (args[0], p.returncode, err[:300]))
        return p.returncode, err

    rc, err = run(["--recover", w.file]) if first else (0, "")
    if rc != 0:
        return "ggufs --recover exited %d: %s" % (rc, err)
    if w.overlay and os.path.exists(w.overlay):
        rc, err = run(["--overlay-apply", w.file, w.overlay])
        if rc != 0:
            return "ggufs --overlay-apply exited %d: %s" % (rc, err)
    rc, err = run(["--apply-pending", w.file])
    if rc != 0 and not (rc == 1 and "no pending edits" in err):
        return "ggufs --apply-pending exited %d: %s" % (rc, err)
    try:
        got = model_of(w.file, w.by_bytes)
    except Fail as e:
        return str(e)
    why = verdict(w, got, st[1])
    if why:
        return why + " " + " ".join(said)
    rc, err = run([w.file, mnt])
    if rc != 0:
        return "the next read-write mount exited %d: %s" % (rc, err)
    rc, err = run(["-u", mnt])
    if rc != 0:
        return "ggufs -u of the next mount exited %d: %s" % (rc, err)
    bad = leftovers(w)
    if bad:
        return "left behind: %s" % ", ".join(sorted(bad))
    return None


def preload():
    """The environment that puts plrec into ggufs (in a sanitizer build
    too: there the sanitizer's runtime need not come first, plrec only
    passes each call on)."""
    asan = os.environ.get("ASAN_OPTIONS", "")
    return {"LD_PRELOAD": J.tool("PLREC"),
            "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}


def check_all(w, base):
    if not any(r[0] != "X" for r in read_log(w.log)):
        raise Fail("plrec recorded no call of the workload (is it preloaded?)")
    found, breaches = states(w.disk, w.log)
    chosen = pick(found, CAP)
    map_path = os.path.join(base, "map")
    env = dict(os.environ, PLREC_MAP=map_path, **preload())
    mnt = os.path.join(base, "mnt")
    os.makedirs(mnt, exist_ok=True)
    fails = ["%s, %s was left not durable" % b for b in breaches]
    n_breaches = len(fails)
    for i, st in enumerate(chosen):
        materialize(w.root, st[0], map_path)
        why = check_state(w, st, env, mnt, i % 2 == 0)
        if J.mountinfo_entry(mnt) is not None:
            J.unmount(mnt, [])
        if why:
            fails.append("%s: %s" % (st[2], why))
    return len(found), len(chosen), n_breaches, fails


# ---- the workloads ---------------------------------------------------------

class Work:
    """One workload's place: base/R (the watched root: work/ holds the
    model, state/ is XDG_STATE_HOME, its ggufs/ made by ggufs), base/mnt."""

    def __init__(self, base, name):
        self.name, self.base = name, base
        self.root = os.path.join(base, "R")
        self.work = os.path.join(self.root, "work")
        self.state = os.path.join(self.root, "state")
        self.mnt = os.path.join(base, "mnt")
        self.log = os.path.join(base, "plrec.log")
        self.file = os.path.join(self.work, "model.gguf")
        self.overlay, self.by_bytes, self.mixed_ok = None, False, False
        for d in (self.work, self.state, self.mnt):
            os.makedirs(d)

    def fixture(self, path=None):
        p = subprocess.run([J.tool("MKFIXTURE"), "model", path or self.file, "--tensor-mb", "1",
                            "--n-tensors", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=120)
        if p.returncode != 0:
            raise Fail("mkfixture: %s" % p.stderr.decode(errors="replace"))

    def ggufs(self, args, want=0):
        """Runs ggufs; a command that succeeded is a mark: what it did is
        done (and must be durable)."""
        p = J.run_ggufs(args, timeout=120)
        if p.returncode != want:
            raise Fail("%s: ggufs %s exited %d (want %d): %s" % (
                self.name, " ".join(args), p.returncode, want, p.stderr.decode(errors="replace")))
        if want == 0:
            mark(self.log, "done")

    def durable(self):
        """From here on, the change must survive: only the new model."""
        mark(self.log, "durable")


def edit(w, key, value, flags=os.O_WRONLY | os.O_TRUNC, opts=()):
    E.mount(w.file, w.mnt, list(opts))
    path = os.path.join(w.mnt, "meta", key)
    if value is None:
        os.unlink(path)
    else:
        E.write_file(path, value, flags)
    w.durable()
    w.ggufs(["-u", w.mnt])


def wl_inplace(w):
    edit(w, "general.name", b"edited in place\n")


def wl_grow(w):
    edit(w, "general.name", b"g" * 70000 + b"\n")


def wl_removed(w):
    edit(w, "general.file_type", None)


def wl_rewrite(w):
    edit(w, "general.name", b"r" * 70000 + b"\n", opts=("-o", "no_insert_range"))


def wl_overlay(w):
    w.overlay = os.path.join(w.work, "model.overlay.gguf")
    edit(w, "general.name", b"through an overlay\n", opts=("-o", "overlay=" + w.overlay))
    w.ggufs(["--overlay-apply", w.file, w.overlay])


def tensor_path(w):
    return os.path.join(w.mnt, "tensors", "blk.0.weight")


def wl_tensor(w):
    E.mount(w.file, w.mnt)
    E.write_file(tensor_path(w), bytes(range(256)) * 2048)  # cp: O_TRUNC, whole
    w.durable()
    w.ggufs(["-u", w.mnt])


def write_in_place(w, opts=()):
    """pwrite into a tensor, fsync: durable from there, any mix before."""
    w.mixed_ok = True  # in place: "a crash leaves what had reached the disk"
    E.mount(w.file, w.mnt, list(opts))
    fd = os.open(tensor_path(w), os.O_WRONLY)
    try:
        os.pwrite(fd, b"\x5a" * 3 * BLOCK, BLOCK + 100)
        os.fsync(fd)
    finally:
        os.close(fd)
    w.durable()
    w.ggufs(["-u", w.mnt])


def wl_twrite(w):
    write_in_place(w)


def wl_ovtensor(w):
    w.overlay = os.path.join(w.work, "model.overlay.gguf")
    write_in_place(w, ["-o", "overlay=" + w.overlay])
    w.ggufs(["--overlay-apply", w.file, w.overlay])


def setup_compact(w):
    w.fixture()
    edit(w, "mytool.big", b"c" * 70000 + b"\n", os.O_WRONLY | os.O_CREAT)
    edit(w, "mytool.big", None)  # leaves a header with headroom: a filler
    w.by_bytes = True  # --compact changes the bytes, never the model


def wl_compact(w):
    w.ggufs(["--compact", w.file])
    w.durable()


def wl_killed(w):
    E.mount(w.file, w.mnt)
    pid = int(J.xattr(w.mnt, "user.ggufs.pid").decode())
    E.write_file(os.path.join(w.mnt, "meta", "general.name"), b"kept after kill\n")
    w.durable()
    os.kill(pid, 9)
    for _ in range(500):
        if not os.path.exists("/proc/%d" % pid):
            break
        time.sleep(0.01)
    w.ggufs(["-u", w.mnt], want=4)
    w.ggufs(["--apply-pending", w.file])


def setup_shards(w):
    one = os.path.join(w.base, "one.gguf")
    w.fixture(one)
    p = subprocess.run([J.tool("MKSPLIT"), one, os.path.join(w.work, "set"), "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0:
        raise Fail("mksplit: %s" % p.stderr.decode(errors="replace"))
    w.file = os.path.join(w.work, "set-00001-of-00002.gguf")


def wl_shards(w):
    edit(w, "general.name", b"a set, edited\n")


WORKLOADS = [
    ("inplace", None, wl_inplace),
    ("grow", None, wl_grow),
    ("removed", None, wl_removed),
    ("rewrite", None, wl_rewrite),
    ("overlay", None, wl_overlay),
    ("tensor", None, wl_tensor),
    ("twrite", None, wl_twrite),
    ("ovtensor", None, wl_ovtensor),
    ("compact", setup_compact, wl_compact),
    ("killed", None, wl_killed),
    ("shards", setup_shards, wl_shards),
]


def record(w, setup, fn):
    """Sets up, snapshots, runs fn under the recorder; old and new models."""
    os.environ["XDG_STATE_HOME"] = w.state
    if setup:
        setup(w)
    else:
        w.fixture()
    w.old = model_of(w.file, w.by_bytes)
    os.sync()
    w.disk = Disk(w.root)
    if os.path.exists(w.log):
        os.unlink(w.log)  # the set-up's marks
    extra = dict(preload(), PLREC_LOG=w.log, PLREC_ROOT=w.root)
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        fn(w)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    w.new = model_of(w.file, w.by_bytes)


SELF_PROGRAM = """
import os, sys
d = sys.argv[1]
fd = os.open(os.path.join(d, "f.tmp"), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
os.write(fd, b"new bytes")
os.fsync(fd)
os.close(fd)
os.rename(os.path.join(d, "f.tmp"), os.path.join(d, "f"))
if sys.argv[2] == "sync":
    dfd = os.open(d, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
"""


def selfcheck(top):
    """The recorder and the model on a replace whose directory is, and is
    not, fsynced: without the sync a state loses the file and the mark
    names the change not durable; with it neither happens."""
    for how in ("nosync", "sync"):
        base = os.path.join(top, "self-" + how)
        root, log = os.path.join(base, "R"), os.path.join(base, "plrec.log")
        os.makedirs(os.path.join(root, "d"))
        os.sync()
        disk = Disk(root)
        env = dict(os.environ, PLREC_LOG=log, PLREC_ROOT=root, **preload())
        subprocess.run(["python3", "-c", SELF_PROGRAM, os.path.join(root, "d"), how],
                       env=env, check=True, timeout=60)
        for rec in read_log(log):
            disk.apply(rec)
        lost = [v[0] for v in disk.variants() if "d/f" not in disk.build(v[1], v[2])]
        breaches = unsynced(disk, ())
        if (how == "nosync") != bool(breaches and lost) or (how == "sync") == bool(lost):
            raise Fail("self-check (%s): states without d/f %s, not durable %s: the recorder or "
                       "the model of a power cut is broken" % (how, lost, breaches))


def main():
    J.require_fuse()
    only = [x for x in os.environ.get("GGUFS_POWERLOSS_ONLY", "").split(",") if x]
    top = os.path.realpath(tempfile.mkdtemp(prefix="ggufs-powerloss-", dir="/var/tmp"))
    os.chmod(top, 0o755)
    state_home = os.environ.get("XDG_STATE_HOME")
    total, n_failed, failed = 0, 0, []
    try:
        selfcheck(top)
        for name, setup, fn in WORKLOADS:
            if only and name not in only:
                continue
            t0 = time.time()
            w = Work(os.path.join(top, name), name)
            try:
                record(w, setup, fn)
                n_found, n_tried, n_breaches, fails = check_all(w, w.base)
            except Fail as e:  # the workload itself failed: the others still run
                n_found = n_tried = n_breaches = 0
                fails = ["the workload: %s" % e]
            finally:
                E.cleanup_mounts(w.base)
            total += n_tried
            n_failed += len(fails) - n_breaches
            J.log("%s %s: %d states tried of %d distinct, %d failed; directory changes not "
                  "durable at a mark: %d (%.1f s)" % (
                      "FAIL" if fails else "ok  ", name, n_tried, n_found,
                      len(fails) - n_breaches, n_breaches, time.time() - t0))
            for f in fails:
                J.log("    " + f)
            if fails:
                failed.append(name)
    finally:
        if state_home is not None:
            os.environ["XDG_STATE_HOME"] = state_home
        E.cleanup_mounts(top)
        if not os.environ.get("GGUFS_POWERLOSS_KEEP"):
            shutil.rmtree(top, ignore_errors=True)
    J.log("%d power-loss states tried, %d failed" % (total, n_failed))
    if failed:
        raise Fail("power-loss states that do not recover: " + ", ".join(failed))


if __name__ == "__main__":
    J.main(main)
