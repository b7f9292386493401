"""The numpy pipeline example's measured slowdown next to a control that has
nothing to do with pipefill: the same example while N CPU loops that run at
idle priority (SCHED_IDLE, like a host session's fill worker) share the
machine. On a machine that isolates idle-priority work, the control's steps
without fill are as fast as the plain run's; where they are not, the machine
(a small VM, a hypervisor, shared caches) slows the training job whatever
runs at idle priority, and the example's slowdown measures that too.

usage: .venv/bin/python bench/numpy_example_control.py [--runs K] [--steps S] [--burners N]
(needs the build's Python package: PYTHONPATH=build/python/site, mpirun, mpi4py)
"""

import argparse
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "python" / "pipeline_numpy.py"
BURNER = """
import os, numpy as np
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
while True:
    a = (a @ a) * 1e-3 + 0.5
"""
LINE = re.compile(r"without fill ([0-9.]+) ms, with fill ([0-9.]+) ms")
SAMPLES = re.compile(r"^fill samples (\d+)", re.M)


def run_example(steps: int, env: dict) -> tuple[float, float, int]:
    cmd = [shutil.which("mpirun") or "mpirun", "-n", "4", "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [sys.executable, str(EXAMPLE), "--steps", str(steps)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    m, s = LINE.search(out.stdout), SAMPLES.search(out.stdout)
    if out.returncode != 0 or not m or not s:
        sys.exit(f"the example failed (exit {out.returncode}):\n{out.stdout}\n{out.stderr}")
    return float(m.group(1)), float(m.group(2)), int(s.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--burners", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"{args.runs} runs of {args.steps} steps per condition; times are measured "
          f"(wall clock, mean over the example's steps 1..{args.steps - 1})")
    results = {}
    for condition in ("plain", f"{args.burners} SCHED_IDLE loops"):
        burners = []
        if condition != "plain":
            burners = [subprocess.Popen([sys.executable, "-c", BURNER], env=env)
                       for _ in range(args.burners)]
        try:
            rows = [run_example(args.steps, env) for _ in range(args.runs)]
        finally:
            for b in burners:
                b.kill()
                b.wait()
        results[condition] = rows
        for off, on, samples in rows:
            print(f"  {condition:<20} without fill {off:6.2f} ms  with fill {on:6.2f} ms "
                  f"({(on / off - 1) * 100:+6.1f}%)  fill samples {samples}")
    plain_off = statistics.median(r[0] for r in results["plain"])
    print("medians:")
    for condition, rows in results.items():
        off = statistics.median(r[0] for r in rows)
        on = statistics.median(r[1] for r in rows)
        print(f"  {condition:<20} without fill {off:6.2f} ms ({(off / plain_off - 1) * 100:+.1f}% "
              f"vs plain)  with fill {on:6.2f} ms ({(on / off - 1) * 100:+.1f}% vs its own steps "
              f"without fill)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
