#!/usr/bin/env python3
"""CPU time of `pipefill-opt --pipefill-compile` on the bundled examples,
optionally interleaved with a second build (for before/after ratios on a
noisy shared machine).

Usage: bench/compile_examples.py BUILD_DIR [BASELINE_BUILD_DIR] [RUNS]
Prints per example the median and minimum CPU time (user + sys, getrusage of
the child) over RUNS runs (default 21) and the ratio of the medians."""
import argparse
import glob
import os
import resource
import statistics
import subprocess
import sys
import tempfile

import benchargs

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("build", metavar="BUILD_DIR")
ap.add_argument("rest", nargs="*", default=[], help="[BASELINE_BUILD_DIR] [RUNS]")
args = ap.parse_args()
build = args.build
base = args.rest[0] if args.rest and not args.rest[0].lstrip("-").isdigit() else None
counts = args.rest[1:] if base else args.rest
if len(counts) > 1:
    ap.error("expected BUILD_DIR [BASELINE_BUILD_DIR] [RUNS]")
try:
    runs = benchargs.positive_int(counts[0]) if counts else 21
except Exception as e:  # argparse.ArgumentTypeError
    ap.error(f"RUNS: {e}")
benchargs.tools(ap, build, ["pipefill-translate", "pipefill-opt"])
if base:
    benchargs.tools(ap, base, ["pipefill-opt"])


def cpu(opt, mlir):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([opt, "--pipefill-compile", mlir, "-o", os.devnull,
                    "--mlir-disable-threading"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


with tempfile.TemporaryDirectory() as tmp:
    for ex in sorted(glob.glob(os.path.join(root, "examples", "*.pbtxt"))):
        mlir = os.path.join(tmp, "in.mlir")
        subprocess.run([os.path.join(build, "bin", "pipefill-translate"),
                        "--import-job", ex, "-o", mlir], check=True)
        new, old = [], []
        for _ in range(runs):
            if base:
                old.append(cpu(os.path.join(base, "bin", "pipefill-opt"), mlir))
            new.append(cpu(os.path.join(build, "bin", "pipefill-opt"), mlir))
        line = (f"{os.path.basename(ex)}: median {1e3 * statistics.median(new):.1f} ms"
                f" min {1e3 * min(new):.1f} ms")
        if base:
            line += (f"; baseline median {1e3 * statistics.median(old):.1f} ms"
                     f" min {1e3 * min(old):.1f} ms; ratio of medians"
                     f" {statistics.median(new) / statistics.median(old):.3f}")
        print(line)
