#!/usr/bin/env python3
"""Long-run benchmark of pipefill-run: how wall time, CPU time and peak memory
grow with the iteration count.

For each binary (--bin, repeatable: an old and a new build side by side) and
each iteration count, runs `pipefill-run PROGRAM --backend host --time-model
modelled --time-scale X --iterations N --quiet` (plus --no-fill for the
main-only line) and reads, for that child process alone (os.wait4), its wall
time, user+system CPU time and peak RSS. Binaries and iteration counts are
alternated `--repeat` times so that all of them see the same machine load;
the medians are printed, then per binary the growth between the smallest and
the largest count: KiB of peak RSS, ms of wall and of CPU time per extra
iteration, and the exponents of wall and CPU time in the iteration count (1.0:
linear). The host backend's 32 stream threads sleep to the modelled clock, so
on a loaded machine wall time wanders more than CPU time: read CPU first.

The default is the bundled example (build/examples/gpt40b-1f1b-run.pb, 16
devices, ~23k ops per iteration) at --time-scale 0.0001: every fill chunk's
real compute is far longer than its scaled bubble, so the bubble bound defers
nearly everything and the backlog of deferred chunks grows every iteration
(the case of a plan made for a faster machine).

With --checkpoint, every run also writes a fill checkpoint after each
iteration (pipefill-run --checkpoint, into a fresh temporary directory) and the
table adds the final checkpoint's size: with fill falling behind, it shows
what the backlog of deferred chunks costs (each job is held at two iterations
of deferred work since 2026-12-03; before, the backlog and every checkpoint
grew with the run).

Every number printed is measured; the machine is shared, so read ratios.

Usage:
  bench/run_scaling.py [--bin build/bin/pipefill-run ...] [--program FILE]
                       [--iterations 250,1000] [--repeat 2] [--time-scale X]
                       [--checkpoint]
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run_once(binary, program, iterations, time_scale, fill, checkpoint):
    cmd = [binary, program, "--backend", "host", "--time-model", "modelled",
           "--time-scale", str(time_scale), "--iterations", str(iterations), "--quiet"]
    if not fill:
        cmd.append("--no-fill")
    tmp = tempfile.TemporaryDirectory(prefix="run-scaling-") if checkpoint else None
    if tmp:
        cmd += ["--checkpoint", os.path.join(tmp.name, "fill.ckpt")]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"run_scaling: {' '.join(cmd)} failed ({proc.returncode}):\n{err}")
    ckpt_kib = 0.0
    if tmp:
        ckpt_kib = os.path.getsize(os.path.join(tmp.name, "fill.ckpt")) / 1024.0
        tmp.cleanup()
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, ckpt_kib


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", action="append", help="pipefill-run binary (repeatable)")
    ap.add_argument("--program", default="build/examples/gpt40b-1f1b-run.pb")
    ap.add_argument("--iterations", default="250,1000")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--time-scale", type=float, default=0.0001)
    ap.add_argument("--checkpoint", action="store_true",
                    help="write a checkpoint every iteration and report its final size")
    args = ap.parse_args()
    bins = args.bin or ["build/bin/pipefill-run"]
    counts = sorted(int(x) for x in args.iterations.split(","))
    for b in bins:
        if not os.access(b, os.X_OK):
            sys.exit(f"run_scaling: {b} is not an executable (build it first)")
    if not os.path.exists(args.program):
        sys.exit(f"run_scaling: {args.program} not found (scripts/build.sh builds it)")
    load = os.getloadavg()
    print(f"# program {args.program}, time scale {args.time_scale}, "
          f"{os.cpu_count()} CPUs, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    results = {}  # (bin, fill, n) -> [(wall, cpu, rss)]
    for r in range(args.repeat):
        for n in counts:
            for fill in (True, False):
                for b in bins:
                    res = run_once(b, args.program, n, args.time_scale, fill, args.checkpoint)
                    results.setdefault((b, fill, n), []).append(res)
                    print(f"  run {r + 1}/{args.repeat}: {b} {'fill' if fill else 'no-fill'} "
                          f"{n} iterations: {res[0]:.2f} s wall, {res[1]:.2f} s CPU, "
                          f"{res[2]:.0f} MiB", file=sys.stderr)
    ckpt_col = f" {'ckpt KiB':>9}" if args.checkpoint else ""
    print(f"{'binary':<40} {'mode':<8} {'iters':>6} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}"
          + ckpt_col)
    med = {}
    for (b, fill, n), rs in sorted(results.items()):
        m = tuple(statistics.median(x[i] for x in rs) for i in range(4))
        med[(b, fill, n)] = m
        print(f"{b:<40} {'fill' if fill else 'no-fill':<8} {n:>6} {m[0]:>8.2f} {m[1]:>8.2f} "
              f"{m[2]:>9.0f}" + (f" {m[3]:>9.0f}" if args.checkpoint else ""))
    lo, hi = counts[0], counts[-1]
    if hi > lo:
        print(f"\ngrowth from {lo} to {hi} iterations (medians):")
        print(f"{'binary':<40} {'mode':<8} {'KiB/iter':>9} {'wall ms/iter':>13} "
              f"{'CPU ms/iter':>12} {'wall exp':>9} {'CPU exp':>8}")
        for b in bins:
            for fill in (True, False):
                a, z = med[(b, fill, lo)], med[(b, fill, hi)]
                kib = (z[2] - a[2]) * 1024 / (hi - lo)
                ms = [(z[i] - a[i]) * 1000 / (hi - lo) for i in (0, 1)]
                exp = [math.log(z[i] / a[i]) / math.log(hi / lo) if a[i] > 0 else float("nan")
                       for i in (0, 1)]
                print(f"{b:<40} {'fill' if fill else 'no-fill':<8} {kib:>9.0f} {ms[0]:>13.2f} "
                      f"{ms[1]:>12.2f} {exp[0]:>9.2f} {exp[1]:>8.2f}")


if __name__ == "__main__":
    main()
