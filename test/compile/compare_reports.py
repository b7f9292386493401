#!/usr/bin/env python3
"""compare_reports.py A.json B.json: exit 0 when the two report JSON files
have the same structure, the same strings and numbers equal to within a
relative 1e-9 (the driver and the multi-tool path compute the same report
from the same IR; text round trips of doubles may differ in the last bit).
Prints the first difference and exits 1 otherwise."""
import json
import math
import sys


def diff(a, b, path):
    if isinstance(a, bool) or isinstance(b, bool):
        return None if a is b else f"{path}: {a!r} != {b!r}"
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9):
            return None
        return f"{path}: {a!r} != {b!r}"
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        if sorted(a) != sorted(b):
            return f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in sorted(a):
            d = diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} entries != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


with open(sys.argv[1]) as f:
    a = json.load(f)
with open(sys.argv[2]) as f:
    b = json.load(f)
d = diff(a, b, "$")
if d:
    print("reports differ:", d)
    sys.exit(1)
print("reports match")
