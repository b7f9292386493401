"""Measures the Python package's in-process compile against the command-line
pipeline (pipefill-translate | pipefill-opt | pipefill-translate, three
processes) on the same JobSpec. Prints medians of N runs, wall-clock.

usage: PYTHONPATH=build/python/site .venv/bin/python bench/python_compile.py [JOB] [N]
"""

import pathlib
import statistics
import subprocess
import sys
import time

import pipefill

REPO = pathlib.Path(__file__).resolve().parents[1]
job = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "examples" / "gpt40b-1f1b.pbtxt"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
bin_dir = REPO / "build" / "bin"


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
