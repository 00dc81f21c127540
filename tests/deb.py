#!/usr/bin/env python3
"""Issue 37: the Debian packages, used as a user uses them.

1. libgguf.so of the build: soname libgguf.so.0, and `nm -D` exports only
   functions the public header gguf/include/gguf.h declares (none of the
   library's internal ones: gguf_jnl_apply, gguf_parse, ...).
2. dev/deb builds ggufs, libgguf0 and libgguf-dev (lintian's errors fail
   it); `apt-get install ./FILE.deb` installs them on this machine (their
   dependencies are dev/setup's packages), and at the end `apt-get purge`
   removes them, leaving none of their files behind.
3. Installed: /usr/bin/ggufs, ggufs(1), gguf(3), the bash completion (it
   completes a model's KEY names for get), the license; an example program
   (tests/example/gguf_example.c) built with `cc $(pkg-config --cflags
   --libs gguf)` against the installed library only, whose reading and
   whose commit ggml's reader judges; `ggufs get/set/ls` from /usr/bin;
   and a mount through an fstab line in a private mount namespace, which
   mount.fuse3 runs from /usr/bin.
Skipped when dpkg-buildpackage or apt-get is missing or not root.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import judge as J

Fail = J.Fail
PKGS = ["ggufs", "libgguf0", "libgguf-dev"]
INTERNAL = ["gguf_jnl_apply", "gguf_parse", "gguf_pwrite_full", "gguf_index_build"]


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, **kw)


def must(cmd, what, **kw):
    p = run(cmd, **kw)
    if p.returncode != 0:
        raise Fail("%s failed (%d): %s %s" % (what, p.returncode,
                   p.stdout.decode(errors="replace")[-1500:],
                   p.stderr.decode(errors="replace")[-1500:]))
    return p.stdout.decode(errors="replace")


def declared(header_text, name):
    import re
    return re.search(r"\b%s\s*\(" % re.escape(name), header_text) is not None


def check_exports(lib, header):
    with open(header) as f:
        text = f.read()
    soname = must(["objdump", "-p", lib], "objdump -p")
    if "SONAME               libgguf.so.0" not in soname:
        raise Fail("%s has no soname libgguf.so.0" % lib)
    out = must(["nm", "-D", "--defined-only", lib], "nm -D")
    syms = [ln.split()[-1].split("@")[0] for ln in out.splitlines() if ln.split()[1:2] == ["T"]]
    bad = [s for s in syms if not declared(text, s)]
    if bad or not syms:
        raise Fail("%s exports %d functions, %d not declared in gguf.h: %s"
                   % (lib, len(syms), len(bad), bad[:10]))
    leaked = [s for s in INTERNAL if s in syms]
    if leaked:
        raise Fail("%s exports internal functions %s" % (lib, leaked))
    J.log("%s: %d functions exported, each declared in gguf.h" % (lib, len(syms)))


def leftovers():
    """Files of the packages still on the machine."""
    pats = ["/usr/bin/ggufs", "/usr/include/gguf.h", "/usr/lib/*/libgguf.so*",
            "/usr/lib/*/pkgconfig/gguf.pc", "/usr/share/man/man1/ggufs.1*",
            "/usr/share/man/man3/gguf.3*", "/usr/share/bash-completion/completions/ggufs",
            "/usr/share/doc/ggufs", "/usr/share/doc/libgguf0", "/usr/share/doc/libgguf-dev"]
    return [p for pat in pats for p in glob.glob(pat)]


def installed_checks(work, model):
    for p in ("/usr/bin/ggufs", "/usr/share/man/man1/ggufs.1.gz", "/usr/share/man/man3/gguf.3.gz",
              "/usr/share/doc/ggufs/copyright", "/usr/include/gguf.h",
              "/usr/share/bash-completion/completions/ggufs"):
        if not os.path.exists(p):
            raise Fail("the installed packages have no %s" % p)
    libs = glob.glob("/usr/lib/*/libgguf.so.0")
    if not libs:
        raise Fail("no libgguf.so.0 installed")
    check_exports(libs[0], "/usr/include/gguf.h")
    # The example, against the installed library only.
    src = os.path.join(os.environ["GGUFS_SRCDIR"], "tests", "example", "gguf_example.c")
    flags = must(["pkg-config", "--cflags", "--libs", "gguf"], "pkg-config gguf").split()
    exe = os.path.join(work, "gguf_example")
    must(["cc", "-o", exe, src] + flags, "cc gguf_example.c $(pkg-config --cflags --libs gguf)")
    out = must([exe, model], "gguf_example " + model)
    _, ref = J.refdump(model)
    arch = [kv.content for kv in ref.kvs if kv.key == b"general.architecture"][0]
    want = "architecture %s\n%d keys, %d tensors\n" % (arch.decode().strip(), ref.n_kv, ref.n_tensors)
    if out != want:
        raise Fail("gguf_example printed %r, ggml reads %r" % (out, want))
    must([exe, model, "llama.context_length", "4096"], "gguf_example set")
    _, ref = J.refdump(model)
    got = [kv.content for kv in ref.kvs if kv.key == b"llama.context_length"]
    if got != [b"4096\n"]:
        raise Fail("after gguf_example's commit ggml reads llama.context_length %r" % got)
    J.log("gguf_example built with pkg-config against the installed libgguf: read and commit ok")
    # The installed command, no mount.
    must(["/usr/bin/ggufs", "set", model, "general.name=from the package"], "ggufs set (installed)")
    got = must(["/usr/bin/ggufs", "get", model, "general.name"], "ggufs get (installed)")
    if got != "from the package\n":
        raise Fail("installed ggufs get general.name: %r" % got)
    # The completion of KEY names.
    script = ("source /usr/share/bash-completion/bash_completion; "
              "source /usr/share/bash-completion/completions/ggufs; "
              "COMP_WORDS=(ggufs get %s general.n); COMP_CWORD=3; "
              "COMP_LINE='ggufs get %s general.n'; COMP_POINT=${#COMP_LINE}; "
              "_ggufs; printf '%%s\\n' \"${COMPREPLY[@]}\"" % (model, model))
    got = must(["bash", "-c", script], "bash completion")
    if got.split() != ["general.name"]:
        raise Fail("completing 'ggufs get MODEL general.n' gave %r" % got)
    J.log("installed ggufs get/set and the completion of key names: ok")


def fstab_mount(work, model):
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    fstab = os.path.join(work, "fstab")
    with open(fstab, "w") as f:
        f.write("%s %s fuse.ggufs ro,allow_other 0 0\n" % (model, mnt))
    cmd = ("mount -T %s %s && cat %s/meta/general.name; s=$?; umount %s; exit $s"
           % (fstab, mnt, mnt, mnt))
    out = must(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd],
               "the fstab mount in a private namespace", env=dict(os.environ, PATH="/usr/sbin:/usr/bin:/sbin:/bin"))
    if out != "from the package\n":
        raise Fail("meta/general.name through the fstab mount: %r" % out)
    J.log("an fstab line mounts with the packaged /usr/bin/ggufs: ok")


def main():
    build = os.environ.get("GGUFS_BUILDDIR", "")
    lib = os.path.join(build, "gguf", "libgguf.so.0")
    src = os.environ.get("GGUFS_SRCDIR", "")
    if os.path.exists(lib):
        check_exports(lib, os.path.join(src, "gguf", "include", "gguf.h"))
    # meson points LD_LIBRARY_PATH at the build's libgguf (this test depends
    # on it): the installed programs must load the installed library only
    # (under the sanitizer build, the build's one would also need its
    # runtime preloaded).
    os.environ.pop("LD_LIBRARY_PATH", None)
    if os.geteuid() != 0 or not shutil.which("dpkg-buildpackage") or not shutil.which("apt-get"):
        raise J.Skip("needs root, dpkg-buildpackage and apt-get (dev/setup --tests)")
    if any(run(["dpkg-query", "-W", "-f=${Status}", p]).stdout.startswith(b"install ok")
           for p in PKGS):
        raise J.Skip("ggufs's packages are installed on this machine: not touching them")
    work = tempfile.mkdtemp(prefix="ggufs-deb-")
    try:
        debs = os.path.join(work, "debs")
        must([os.path.join(src, "dev", "deb"), debs], "dev/deb", timeout=900)
        files = [glob.glob(os.path.join(debs, "%s_*.deb" % p))[0] for p in PKGS]
        model = os.path.join(work, "m.gguf")
        must([J.tool("MKFIXTURE"), "llama", model], "mkfixture llama")
        J.refdump(model)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        try:
            must(["apt-get", "install", "-y", "--no-install-recommends"] + files,
                 "apt-get install ./ggufs_*.deb ./libgguf*.deb", env=env)
            installed_checks(work, model)
            fstab_mount(work, model)
        finally:
            p = run(["apt-get", "purge", "-y"] + PKGS, env=env)
        if p.returncode != 0:
            raise Fail("apt-get purge failed: %s" % p.stderr.decode(errors="replace"))
        left = leftovers()
        if left:
            raise Fail("after apt-get purge these are left: %s" % left)
        J.log("apt-get purge left nothing behind")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    J.main(main)
