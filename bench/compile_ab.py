#!/usr/bin/env python3
"""Two builds of pipefill-compile against each other on a shared machine.

The 2-core VMs this project runs on are shared: the same binary's median
moves by 30% from one minute to the next. A comparison is only worth
something when both builds see the same load, so this runs them
alternately (A B A B ...), N rounds, on one generated job, and prints for
each build:
  - the whole process: wall seconds (min, 10th percentile by nearest rank,
    median) and CPU seconds (min, median), from clock reads and wait4()
    while it ran;
  - the schedule passes (expand + simulate + insert-bubbles, medians from
    each run's --timing file) against bench-schedule's plain C++ for the
    same pipeline (Kinds/p64_m512/1), run once per round between the two
    builds: issue 12's "within 3x" target, as median / median and as the
    fastest / the fastest.
Every number is measured.

Usage:
  bench/compile_ab.py --a DIR --b DIR [--rounds N] [--size P:M:J[:SCHED[:V]]]
DIR is a build directory (its bin/pipefill-compile; bench-schedule from
--b's bin/, or --bench-schedule PATH). The default size is 1F1B 64 x 512 x
100, the one bench-schedule measures.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import benchargs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASSES = ["pipefill-expand-schedule", "pipefill-simulate", "pipefill-insert-bubbles"]


def run(exe, job, work):
    timing = os.path.join(work, "timing.json")
    cmd = [exe, job, "--report", os.path.join(work, "r.json"),
           "--stream-program", os.path.join(work, "p.pb"), "--timing", timing]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{exe} failed on {job}")
    with open(timing) as f:
        phases = {ph["name"]: ph["wall_s"] for ph in json.load(f)["phases"]}
    return wall, ru.ru_utime + ru.ru_stime, sum(phases[k] for k in PASSES)


def bench_schedule(exe):
    out = subprocess.run([exe, "--benchmark_filter=^Kinds/p64_m512/1/",
                          "--benchmark_format=json"], capture_output=True, text=True,
                         check=True).stdout
    return [b["real_time"] / 1e3 for b in json.loads(out)["benchmarks"]
            if b.get("run_type") == "iteration" and b.get("time_unit") == "ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--rounds", type=benchargs.positive_int, default=20)
    ap.add_argument("--size", type=benchargs.parse, default="64:512:100:ONE_F_ONE_B",
                    metavar=benchargs.FORM)
    ap.add_argument("--bench-schedule")
    args = ap.parse_args()
    bins = {name: benchargs.tools(ap, d, ["pipefill-compile"])["pipefill-compile"]
            for name, d in (("A", args.a), ("B", args.b))}
    plain_exe = args.bench_schedule or os.path.join(args.b, "bin", "bench-schedule")

    p, m, j, sched, v = args.size
    schedule_line = (p, m, sched) == (64, 512, "ONE_F_ONE_B")
    if schedule_line and not (os.path.isfile(plain_exe) and os.access(plain_exe, os.X_OK)):
        ap.error(f"no executable {plain_exe} (bench-schedule times the schedule passes' "
                 f"plain C++ for this size; build it, or pass --bench-schedule PATH)")
    with tempfile.TemporaryDirectory() as work:
        job = os.path.join(work, "job.pbtxt")
        with open(job, "w") as f:
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_job.py"),
                            str(p), str(m), str(j), sched, str(v)], stdout=f, check=True)
        res = {name: {"wall": [], "cpu": [], "passes": []} for name in bins}
        plain = []
        load0 = os.getloadavg()
        for _ in range(args.rounds):
            for name, exe in bins.items():
                wall, cpu, passes = run(exe, job, work)
                res[name]["wall"].append(wall)
                res[name]["cpu"].append(cpu)
                res[name]["passes"].append(passes)
                if name == "A" and schedule_line:
                    plain += bench_schedule(plain_exe)
        load1 = os.getloadavg()
    print(f"# {benchargs.name(args.size)}, {args.rounds} rounds A B alternated; load average "
          f"{load0[0]:.2f} at start, {load1[0]:.2f} at end; every number measured")
    if plain:
        print(f"# bench-schedule Kinds/p64_m512/1: median {statistics.median(plain) * 1e3:.1f} ms, "
              f"fastest {min(plain) * 1e3:.1f} ms ({len(plain)} runs)")
    for name, d in (("A", args.a), ("B", args.b)):
        r = res[name]
        w = sorted(r["wall"])
        p10 = w[max(0, math.ceil(0.1 * len(w)) - 1)]  # nearest rank: a run's own time
        line = (f"{name} {d}: wall min {w[0]:.3f} p10 {p10:.3f} median {statistics.median(w):.3f} s"
                f" | cpu min {min(r['cpu']):.3f} median {statistics.median(r['cpu']):.3f} s"
                f" | schedule passes median {statistics.median(r['passes']) * 1e3:.1f} ms")
        if plain:
            line += (f" = {statistics.median(r['passes']) / statistics.median(plain):.2f}x"
                     f" (fastest/fastest {min(r['passes']) / min(plain):.2f}x)")
        print(line)


if __name__ == "__main__":
    main()
