#!/usr/bin/env python3
"""Copies pytest and the distributions it requires, as installed in this interpreter's
environment (the project's .venv, scripts/setup.sh), into DEST: an import path for another
interpreter that has no pytest. scripts/gpu-bundle.sh packs it for the GPU machines, whose
Python cannot install anything. Requirements are those of Python VERSION (their markers
evaluated for it); every file must be pure Python, so one copy serves any CPython 3.

usage: copy-pytest.py DEST VERSION        (e.g. copy-pytest.py bundle/python/vendor 3.12)
"""

from __future__ import annotations

import importlib.metadata as metadata
import pathlib
import shutil
import sys

from packaging.requirements import Requirement

NATIVE = (".so", ".pyd", ".dylib")


def closure(root: str, version: str) -> list[metadata.Distribution]:
    env = {"python_version": version, "python_full_version": f"{version}.0", "extra": ""}
    todo, seen, dists = [root], set(), []
    while todo:
        dist = metadata.distribution(todo.pop())
        name = dist.metadata["Name"].lower()
        if name in seen:
            continue
        seen.add(name)
        dists.append(dist)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return dists


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    dest = pathlib.Path(argv[1])
    for dist in closure("pytest", argv[2]):
        copied = 0
        for f in dist.files or []:
            # Console scripts live outside site-packages (../../bin); bytecode is rebuilt.
            if f.parts[0] == ".." or "__pycache__" in f.parts:
                continue
            if f.name.endswith(NATIVE):
                print(f"copy-pytest: {dist.metadata['Name']} is not pure Python ({f})",
                      file=sys.stderr)
                return 1
            target = dest / f
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f.locate(), target)
            copied += 1
        print(f"copy-pytest: {dist.metadata['Name']} {dist.version} ({copied} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
