#!/usr/bin/env python3
"""Fails if a function is longer than MAX_FUNCTION lines or a tool source longer than MAX_TOOL.

Function lengths come from lizard (PyPI, installed into .venv by scripts/setup.sh): first to
last line of each function in C++ (.h, .cpp, .cu, .cuh) and Python sources. Tools are thin
drivers (STYLE.md): every .cpp under a `tools/` folder stays under MAX_TOOL lines.
usage: check_sizes.py [--max-function N] [--max-tool N] ROOT DIR [DIR ...]
"""
import argparse
import os
import sys

import lizard

CPP = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
PYTHON = (".py",)
SKIP_DIRS = {".git", ".venv", "__pycache__"}


def sources(root, folder):
    base = os.path.join(root, folder)
    if not os.path.isdir(base):
        raise SystemExit(f"error: {base}: no such folder")
    for dirpath, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
        for name in sorted(files):
            if name.endswith(CPP + PYTHON):
                yield os.path.join(dirpath, name)


def functions(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        code = f.read()
    # lizard picks the language by extension and does not know CUDA's: read it as C++.
    name = path + ".cpp" if path.endswith((".cu", ".cuh")) else path
    return lizard.analyze_file.analyze_source_code(name, code).function_list


def main(argv):
    parser = argparse.ArgumentParser(usage=__doc__.strip().splitlines()[-1])
    parser.add_argument("--max-function", type=int, default=150)
    parser.add_argument("--max-tool", type=int, default=300)
    parser.add_argument("root")
    parser.add_argument("dirs", nargs="+")
    args = parser.parse_args(argv[1:])
    offenders, files, funcs, longest = [], 0, 0, (0, "")
    for folder in args.dirs:
        for path in sources(args.root, folder):
            rel = os.path.relpath(path, args.root)
            files += 1
            for fn in functions(path):
                funcs += 1
                if fn.length > longest[0]:
                    longest = (fn.length, f"{rel}:{fn.start_line} {fn.name}")
                if fn.length > args.max_function:
                    offenders.append(f"{rel}:{fn.start_line}: function {fn.name} has "
                                     f"{fn.length} lines (at most {args.max_function})")
            parts = rel.split(os.sep)
            if "tools" in parts[:-1] and path.endswith(".cpp"):
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = sum(1 for _ in f)
                if lines > args.max_tool:
                    offenders.append(f"{rel}: tool source has {lines} lines "
                                     f"(at most {args.max_tool})")
    for o in offenders:
        print(o)
    print(f"sizes: {files} files, {funcs} functions, longest {longest[0]} lines "
          f"({longest[1]}), {len(offenders)} over the limits")
    return 1 if offenders else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
