#!/usr/bin/env python3
"""Kill-and-resume conservation test (issue 14, crash-safe state).

Runs a stream program whose fill batches span iterations (a batch is in flight
at every checkpoint) with --checkpoint, kills it with SIGKILL at >= 20 random
points, resumes each time, and checks:
  - every checkpoint left behind is readable (the next run resumes, never fails);
  - progress never goes back (iterations done are monotonic: at most the
    iteration in flight is lost);
  - the final totals equal an uninterrupted run's exactly: the same samples
    (nothing counted twice, nothing lost) and the same checksum.
usage: kill_resume.py PIPEFILL_RUN PROGRAM WORKDIR
"""
import json
import os
import random
import signal
import subprocess
import sys
import time

run, program, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
ITER, SCALE = "240", "10"
# Deterministic modes: modelled time and unbounded fill, so an uninterrupted run is a fixed truth.
MODE = ["--time-model", "modelled", "--fill-policy", "unbounded"]
rng = random.Random(14)


def report(path):
    with open(path) as f:
        return json.load(f)


def job(rep):
    return rep["fill"]["jobs"][0]


ref_json = os.path.join(work, "ref.json")
subprocess.run([run, program, *MODE, "--iterations", ITER, "--time-scale", SCALE, "--quiet",
                "--report", ref_json], check=True)
ref = job(report(ref_json))

cp = os.path.join(work, "cp")
for f in os.listdir(work):
    if f.startswith("cp"):
        os.remove(os.path.join(work, f))


def done_iterations():
    """Iterations recorded in the checkpoint (0 when none), read by the runtime itself."""
    if not os.path.exists(cp):
        return 0
    probe = os.path.join(work, "probe.json")
    subprocess.run([run, program, *MODE, "--iterations", "1", "--checkpoint", cp, "--quiet",
                    "--report", probe], check=True)
    return report(probe)["first_iteration"]


kills, last, attempts = 0, 0, 0
while kills < 25 and attempts < 200:
    attempts += 1
    p = subprocess.Popen([run, program, *MODE, "--iterations", ITER, "--time-scale", SCALE, "--quiet",
                          "--checkpoint", cp, "--report", os.path.join(work, "part.json")])
    time.sleep(rng.uniform(0.02, 0.25))
    if p.poll() is not None:
        break  # finished before the kill
    p.send_signal(signal.SIGKILL)
    p.wait()
    kills += 1
    now = done_iterations()
    if now < last:
        sys.exit(f"FAIL: checkpoint went back from {last} to {now} iterations after kill {kills}")
    last = now

final_json = os.path.join(work, "final.json")
subprocess.run([run, program, *MODE, "--iterations", ITER, "--time-scale", SCALE, "--quiet",
                "--checkpoint", cp, "--report", final_json], check=True)
fin = job(report(final_json))
print(f"kills: {kills}, last checkpoint before the final run: {last} iterations")
print(f"samples: uninterrupted {ref['samples_completed']}, killed+resumed {fin['samples_completed']}")
print(f"checksum: uninterrupted {ref['checksum']}, killed+resumed {fin['checksum']}")
if kills < 20:
    sys.exit(f"FAIL: only {kills} kills landed inside a run (need >= 20)")
if fin["samples_completed"] != ref["samples_completed"]:
    sys.exit("FAIL: samples not conserved")
if abs(fin["checksum"] - ref["checksum"]) > 1e-9 * max(1.0, abs(ref["checksum"])):
    sys.exit("FAIL: checksum differs")
print("PASS")
