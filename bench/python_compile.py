"""Measures the Python package's in-process compile against the command-line
pipeline (pipefill-translate | pipefill-opt | pipefill-translate, three
processes) on the same JobSpec. Prints medians of N runs, wall-clock.

usage: PYTHONPATH=build/python/site .venv/bin/python bench/python_compile.py [JOB] [N]
"""

import argparse
import pathlib
import statistics
import subprocess
import sys
import time

import benchargs

REPO = pathlib.Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("job", nargs="?", type=pathlib.Path,
                default=REPO / "examples" / "gpt40b-1f1b.pbtxt", metavar="JOB")
ap.add_argument("n", nargs="?", type=benchargs.positive_int, default=5, metavar="N")
args = ap.parse_args()
job, n = args.job, args.n
if not job.is_file():
    ap.error(f"no JobSpec file {job}")
bin_dir = REPO / "build" / "bin"
benchargs.tools(ap, str(REPO / "build"), ["pipefill-translate", "pipefill-opt"])
try:
    import pipefill
except ImportError as e:
    ap.error(f"the pipefill package is not importable ({e}): build it (scripts/build.sh) "
             f"and run with PYTHONPATH=build/python/site")


def timed(fn):
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples)


def in_process():
    plan = pipefill.compile_file(job)
    plan.report()
    plan.stream_program()


def tools():
    mlir = subprocess.run([bin_dir / "pipefill-translate", "--import-job", job],
                          check=True, capture_output=True).stdout
    compiled = subprocess.run([bin_dir / "pipefill-opt", "--pipefill-compile"], input=mlir,
                              check=True, capture_output=True).stdout
    subprocess.run([bin_dir / "pipefill-translate", "--to-report"], input=compiled,
                   check=True, capture_output=True)
    lowered = subprocess.run([bin_dir / "pipefill-opt", "--pipefill-lower-to-stream"],
                             input=compiled, check=True, capture_output=True).stdout
    subprocess.run([bin_dir / "pipefill-translate", "--to-stream-program"], input=lowered,
                   check=True, capture_output=True)


a = timed(in_process)
b = timed(tools)
print(f"{job.name}: in process {a:.1f} ms, command-line tools {b:.1f} ms "
      f"(median of {n}, measured; ratio {b / a:.1f}x)")
