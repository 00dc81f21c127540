#!/usr/bin/env python3
"""exports.py HEADER OUT - the linker version script of libgguf.so: the
functions declared in the public header (gguf/include/gguf.h) are the
library's interface, every other symbol is local.  The header is the one
place that says what is public; this script only reads it, so a function
added there is exported by the next build and an internal one never is.

A declaration is a name gguf_* followed by "(" outside comments and
preprocessor lines, less the names of function-pointer types
("(*gguf_name)") and of types before one ("enum gguf_status (*read)").  The version node GGUF_0 goes with the soname
libgguf.so.0 (gguf/meson.build)."""
import re
import sys


def public_functions(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"^\s*#.*$", "", text, flags=re.M)
    types = set(re.findall(r"\(\s*\*\s*(gguf_\w+)\s*\)", text))
    names = set(re.findall(r"\b(gguf_\w+)\s*\((?!\s*\*)", text))
    return sorted(names - types)


def main():
    header, out = sys.argv[1], sys.argv[2]
    with open(header, encoding="utf-8") as f:
        names = public_functions(f.read())
    with open(out, "w", encoding="utf-8") as f:
        f.write("GGUF_0 {\n  global:\n")
        f.writelines("    %s;\n" % n for n in names)
        f.write("  local:\n    *;\n};\n")


if __name__ == "__main__":
    main()
