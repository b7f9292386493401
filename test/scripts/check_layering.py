#!/usr/bin/env python3
"""Fails if a file under the given folders includes an MLIR or LLVM header.

The runtime is built and shipped without LLVM, and the algorithms are plain C++
that passes call (DESIGN.md section 3); this keeps both true.
usage: check_layering.py ROOT DIR [DIR ...]
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]((?:mlir|llvm|llvm-c)/[^>"]*)[>"]')
SOURCES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inc")


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = argv[1]
    offenders = []
    scanned = 0
    for folder in argv[2:]:
        base = os.path.join(root, folder)
        if not os.path.isdir(base):
            print(f"error: {base}: no such folder", file=sys.stderr)
            return 2
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                scanned += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m:
                            rel = os.path.relpath(path, root)
                            offenders.append(f"{rel}:{lineno}: includes {m.group(1)}")
    for o in offenders:
        print(o)
    print(f"layering: {scanned} files scanned, {len(offenders)} MLIR/LLVM includes")
    return 1 if offenders else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
