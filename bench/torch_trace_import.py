"""Times `pipefill-translate --torch-trace-to-profile` on synthetic torch.profiler traces of
growing size, to show how the import scales (a 1-stage GPipe job of M micro-batches; each
PP:<action> range holds 4 aten::mm operators, as torch's pipelining runtime records them).
Prints, per trace: iterations, file size, median wall-clock seconds and the largest peak RSS of
N runs (each run's own, from wait4), the peak over the file's size, and the time ratio to the
previous (smaller) trace: about 2 for linear work when the size doubles.

usage: .venv/bin/python bench/torch_trace_import.py [--microbatches M] [--iterations I ...] [-n N]
       [--build DIR]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

import benchargs

REPO = pathlib.Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--microbatches", type=benchargs.positive_int, default=1000)
ap.add_argument("--iterations", type=benchargs.positive_int, nargs="+", default=[5, 10, 20])
ap.add_argument("-n", type=benchargs.positive_int, default=3, help="runs per trace")
ap.add_argument("--build", default=str(REPO / "build"),
                help="build directory whose bin/pipefill-translate is timed (default: build)")
args = ap.parse_args()
translate = benchargs.tools(ap, args.build, ["pipefill-translate"])["pipefill-translate"]


def run_measured(argv):
    """Runs argv; returns (wall seconds, peak RSS in MiB) of that one process."""
    start = time.perf_counter()
    child = subprocess.Popen(argv)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{argv[0]} failed with exit status {child.returncode}")
    return seconds, usage.ru_maxrss / 1024  # Linux: KiB


def write_trace(path, microbatches, iterations):
    events, t = [], 0
    for _ in range(iterations):
        for kind in "FB":
            for mb in range(microbatches):
                events.append({"ph": "X", "cat": "user_annotation", "name": f"PP:0{kind}{mb}",
                               "pid": 1, "tid": 1, "ts": t, "dur": 10})
                for k in range(4):
                    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
                                   "tid": 1, "ts": t + 1 + 2 * k, "dur": 1})
                t += 12
    path.write_text('{"traceEvents": [\n' + ",\n".join(json.dumps(e) for e in events) + "\n]}")


with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    job = tmp / "job.pbtxt"
    job.write_text(f'name: "one"\npipeline {{ stages: 1 microbatches: {args.microbatches} '
                   'schedule: GPIPE }\nstage { forward_us: 1000 backward_us: 2000 }\n'
                   'hardware { gpu_memory_bytes: 17179869184 }\n')
    mlir = tmp / "job.mlir"
    subprocess.run([translate, "--import-job", str(job), "-o", str(mlir)], check=True)
    with open("/proc/loadavg") as f:
        print("load before:", f.read().split()[:3])
    previous = None
    print(f"{'iterations':>10} {'MB':>7} {'median s':>9} {'peak MiB':>9} {'peak/file':>9} "
          f"{'x previous':>10}")
    for iterations in args.iterations:
        trace = tmp / f"trace{iterations}.json"
        write_trace(trace, args.microbatches, iterations)
        times, peak = [], 0
        for _ in range(args.n):
            seconds, rss = run_measured([str(translate), "--torch-trace-to-profile",
                                         f"--torch-trace={trace}", str(mlir),
                                         "-o", str(tmp / "profile.pbtxt")])
            times.append(seconds)
            peak = max(peak, rss)
        median = statistics.median(times)
        ratio = f"{median / previous:.2f}" if previous else "-"
        size = trace.stat().st_size
        print(f"{iterations:>10} {size / 1e6:>7.1f} {median:>9.2f} "
              f"{peak:>9.0f} {peak * 2**20 / size:>9.1f} {ratio:>10}")
        previous = median
    with open("/proc/loadavg") as f:
        print("load after:", f.read().split()[:3])
