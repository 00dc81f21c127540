#!/usr/bin/env python3
"""dev/check-tree's layering rule (dev/layers, issue 34) refuses what it must.

Each case runs the repository's dev/check-tree --layers-only in a scratch
tree (its dev/ copied, so the real table is the one judged):
  - the real fs/ and libraries, with one line added: a file of fs/source/
    including a wing's header must make it fail naming that file, that
    include and the rule; nothing else changes in what it says;
  - small trees compiled here with cc, their objects read by nm through a
    compile_commands.json as meson writes one: a clean one passes; a
    symbol going up, a wing calling a peer, two files calling each other,
    three calling round, a file in a folder of no part, and objects older
    than their source are each refused with their own line.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get('GGUFS_SRCDIR') or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CC = os.environ.get('CC', 'cc')
failures = []


def check(cond, what, out=''):
    print(('ok   ' if cond else 'FAIL ') + what)
    if not cond:
        failures.append(what)
        if out:
            print('  output:\n    ' + '\n    '.join(out.splitlines()))


def scratch_tree(tmp):
    """A tree holding the repository's dev/ checker and table only."""
    root = tempfile.mkdtemp(dir=tmp)
    os.mkdir(os.path.join(root, 'dev'))
    for f in ('check-tree', 'check-layers', 'layers'):
        if os.path.exists(os.path.join(SRC, 'dev', f)):  # a tree before dev/layers: fails below
            shutil.copy2(os.path.join(SRC, 'dev', f), os.path.join(root, 'dev', f))
    return root


def run(root, *args):
    p = subprocess.run([os.path.join(root, 'dev', 'check-tree'), '--layers-only'] + list(args),
                       capture_output=True, text=True)
    return p.returncode, p.stderr + p.stdout


def put(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, 'w') as f:
        f.write(text)


def build(root, files):
    """Compiles files (paths of the tree) as meson would lay their objects
    out in root/build, and writes its compile_commands.json."""
    b = os.path.join(root, 'build')
    cmds = []
    for path in files:
        top, rest = path.split('/', 1)
        out = '%s/lib%s.a.p/%s.o' % (top, top, rest.replace('/', '_'))
        os.makedirs(os.path.join(b, os.path.dirname(out)), exist_ok=True)
        subprocess.run([CC, '-c', '-o', os.path.join(b, out), os.path.join(root, path)],
                       check=True)
        cmds.append({'directory': b, 'file': '../' + path, 'output': out,
                     'command': '%s -c -o %s ../%s' % (CC, out, path)})
    with open(os.path.join(b, 'compile_commands.json'), 'w') as f:
        json.dump(cmds, f)
    return b


def real_tree_include(tmp):
    root = scratch_tree(tmp)
    for d in ('fs', 'gguf', 'remote', 'catalog', 'vocab'):
        shutil.copytree(os.path.join(SRC, d), os.path.join(root, d))
    shutil.copy2(os.path.join(SRC, 'status.h'), os.path.join(root, 'status.h'))
    _, before = run(root)
    victim = os.path.join(root, 'fs', 'source', 'data.c')
    with open(victim) as f:
        lines = f.read().split('\n')
    at = max(i for i, l in enumerate(lines) if l.startswith('#include')) + 1
    lines.insert(at, '#include "../views/views.h"')
    with open(victim, 'w') as f:
        f.write('\n'.join(lines))
    rc, after = run(root)
    new = [l for l in after.splitlines() if l not in before.splitlines()]
    check(rc == 1, 'fs/source/data.c including ../views/views.h: check-tree fails', after)
    check(len(new) == 1 and 'fs/source/data.c:%d: #include "../views/views.h"' % (at + 1)
          in new[0] and 'fs/source/ (level 7)' in new[0] and 'fs/views/ (level 5)' in new[0],
          'the one new line names the file, its line, the include and both levels',
          '\n'.join(new))
    check(not any('fs/source/data.c' in l for l in before.splitlines()),
          'the tree as it is: no include of fs/source/data.c is refused', before)


def small_tree(tmp):
    root = scratch_tree(tmp)
    put(root, 'fs/base/log.c', 'void gfs_log(void) {}\n')
    put(root, 'fs/tensors/tensorw.h', 'void gfs_tw_wait(void);\n')
    put(root, 'fs/tensors/tensorw.c', '#include "tensorw.h"\nvoid gfs_tw_wait(void) {}\n')
    put(root, 'fs/source/data.c', 'void gfs_log(void);\nvoid gfs_data_read(void) { gfs_log(); }\n')
    put(root, 'fs/live/liveview.c',
        'void gfs_data_read(void);\nvoid gfs_view(void) { gfs_data_read(); }\n')
    put(root, 'fs/model.c', '#include "ggufs.h"\n#include "tensors/tensorw.h"\n'
        'void gfs_view(void);\nvoid gfs_open(void) { gfs_view(); gfs_tw_wait(); }\n')
    put(root, 'fs/ggufs.h', '/* shared: declarations only */\n')
    files = ['fs/base/log.c', 'fs/tensors/tensorw.c', 'fs/source/data.c', 'fs/live/liveview.c',
             'fs/model.c']
    return root, files


def symbol_cases(tmp):
    root, files = small_tree(tmp)
    b = build(root, files)
    rc, out = run(root, '--objects', b)
    check(rc == 0 and out == '', 'a clean small tree passes, with its objects', out)

    # a symbol going up: source/ (level 7) calls tensors/ (level 5)
    put(root, 'fs/source/data.c', 'void gfs_log(void);\nvoid gfs_tw_wait(void);\n'
        'void gfs_data_read(void) { gfs_log(); gfs_tw_wait(); }\n')
    b = build(root, files)
    rc, out = run(root, '--objects', b)
    check(rc == 1 and 'fs/source/data.c uses gfs_tw_wait of fs/tensors/tensorw.c: fs/source/ '
          '(level 7) may call only its own part and those below it, not fs/tensors/ (level 5)'
          in out and 'gfs_log' not in out, 'a call from fs/source/ up into a wing is refused', out)
    check(rc == 1 and 'a circle of files' not in out, 'and is no circle', out)

    # a wing calling a peer (by symbol and by include)
    root, files = small_tree(tmp)
    put(root, 'fs/live/liveview.c', '#include "../tensors/tensorw.h"\n'
        'void gfs_view(void) { gfs_tw_wait(); }\n')
    b = build(root, files)
    rc, out = run(root, '--objects', b)
    check(rc == 1 and 'fs/live/liveview.c uses gfs_tw_wait of fs/tensors/tensorw.c: fs/live/ and '
          'fs/tensors/ are peers (level 5)' in out and
          'fs/live/liveview.c:1: #include "../tensors/tensorw.h" (fs/tensors/tensorw.h): '
          'fs/live/ and fs/tensors/ are peers' in out, 'a wing calling a peer is refused', out)

    # two files of one part calling each other; three files calling round
    root, files = small_tree(tmp)
    put(root, 'fs/base/a.c', 'void gfs_b(void);\nvoid gfs_a(void) { gfs_b(); }\n')
    put(root, 'fs/base/b.c', 'void gfs_a(void);\nvoid gfs_b(void) { gfs_a(); }\n')
    put(root, 'gguf/x.c', 'void gguf_y(void);\nvoid gguf_x(void) { gguf_y(); }\n')
    put(root, 'gguf/y.c', 'void gguf_z(void);\nvoid gguf_y(void) { gguf_z(); }\n')
    put(root, 'gguf/z.c', 'void gguf_x(void);\nvoid gguf_z(void) { gguf_x(); }\n')
    b = build(root, files + ['fs/base/a.c', 'fs/base/b.c', 'gguf/x.c', 'gguf/y.c', 'gguf/z.c'])
    rc, out = run(root, '--objects', b)
    check(rc == 1 and 'a circle of files: fs/base/a.c uses gfs_b of fs/base/b.c, which uses gfs_a '
          'of it' in out, 'two files calling each other are refused, with the symbols', out)
    check(rc == 1 and 'a circle of files: gguf/x.c (gguf_y) -> gguf/y.c (gguf_z) -> gguf/z.c '
          '(gguf_x) -> gguf/x.c' in out, 'three files calling round are refused', out)

    # a folder of fs/ that is no part; objects older than their source
    root, files = small_tree(tmp)
    put(root, 'fs/stray/x.c', 'int gfs_stray;\n')
    b = build(root, files)
    st = os.stat(os.path.join(root, 'fs/source/data.c'))
    os.utime(os.path.join(root, 'fs/source/data.c'), (st.st_atime + 10, st.st_mtime + 10))
    rc, out = run(root, '--objects', b)
    check(rc == 1 and 'fs/stray/x.c is in no part of dev/layers' in out,
          'a file of a folder of no part is refused', out)
    check(rc == 1 and 'the symbols cannot be checked: build/fs/libfs.a.p/source_data.c.o is older '
          'than fs/source/data.c' in out, 'a stale object is refused with --objects', out)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        real_tree_include(tmp)
        symbol_cases(tmp)
    if failures:
        print('%d failed' % len(failures))
        return 1
    print('all passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
