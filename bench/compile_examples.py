#!/usr/bin/env python3
"""CPU time of `pipefill-opt --pipefill-compile` on the bundled examples,
optionally interleaved with a second build (for before/after ratios on a
noisy shared machine).

Usage: bench/compile_examples.py BUILD_DIR [BASELINE_BUILD_DIR] [RUNS]
Prints per example the median and minimum CPU time (user + sys, getrusage of
the child) over RUNS runs (default 21) and the ratio of the medians."""
import glob
import os
import resource
import statistics
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = sys.argv[1]
base = sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].isdigit() else None
runs = int(sys.argv[-1]) if sys.argv[-1].isdigit() else 21


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
