#!/usr/bin/env python3
"""Clean stop test (issue 14): SIGTERM/SIGINT stop pipefill-run at an iteration boundary.

Runs a stream program whose fill batches span iterations with --checkpoint and --progress,
waits for the first progress line, sends SIGTERM (or SIGINT) at a random point, and checks:
  - the exit code is 128 + the signal (143 / 130) and the report is written, marked incomplete,
    with fewer iterations than asked;
  - the next run resumes exactly where the stopped one ended (its first_iteration equals the
    stopped run's first_iteration + iterations: the checkpoint holds every iteration run);
  - after the last resume, the samples and checksum equal an uninterrupted run's;
  - progress lines read "iteration k/N, elapsed ..., ETA ..." with k rising to N, and a run
    without --progress whose stderr is not a terminal prints none.
usage: stop_resume.py PIPEFILL_RUN PROGRAM WORKDIR
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

run, program, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
ITER, SCALE = "240", "10"
MODE = ["--time-model", "modelled", "--fill-policy", "unbounded", "--iterations", ITER,
        "--time-scale", SCALE, "--quiet"]
PROGRESS = re.compile(r"^pipefill-run: iteration (\d+)/(\d+), elapsed [0-9.]+ s, ETA [0-9.]+ s$")
rng = random.Random(143)


def report(path):
    with open(path) as f:
        return json.load(f)


def fail(msg):
    sys.exit("FAIL: " + msg)


# Uninterrupted reference, with --progress: lines rise to N/N.
ref_json = os.path.join(work, "ref.json")
p = subprocess.run([run, program, *MODE, "--progress", "--report", ref_json],
                   stderr=subprocess.PIPE, text=True, check=True)
steps = [PROGRESS.match(l) for l in p.stderr.splitlines()]
if not steps or not all(steps):
    fail("unexpected progress output:\n" + p.stderr)
done = [int(m.group(1)) for m in steps]
if done != sorted(done) or done[-1] != int(ITER) or any(m.group(2) != ITER for m in steps):
    fail("progress does not rise to %s/%s: %s" % (ITER, ITER, done))
print(f"progress lines: {len(done)}, last {done[-1]}/{ITER}")
ref = report(ref_json)["fill"]["jobs"][0]

# Quiet without --progress when stderr is not a terminal.
p = subprocess.run([run, program, *MODE], stderr=subprocess.PIPE, text=True, check=True)
if "iteration" in p.stderr:
    fail("progress printed without --progress to a pipe:\n" + p.stderr)

cp = os.path.join(work, "cp")
for f in os.listdir(work):
    if f.startswith("cp"):
        os.remove(os.path.join(work, f))

expected_first = 0
stops = 0
for sig in [signal.SIGTERM, signal.SIGINT, signal.SIGTERM]:
    part = os.path.join(work, "part%d.json" % stops)
    p = subprocess.Popen([run, program, *MODE, "--progress", "--checkpoint", cp, "--report", part],
                         stderr=subprocess.PIPE, text=True)
    p.stderr.readline()  # the first progress line: the run is under way
    time.sleep(rng.uniform(0.05, 0.5))
    p.send_signal(sig)
    err = p.stderr.read()
    rc = p.wait()
    if rc == 0:
        print("run finished before the signal; skipped")
        break
    if rc != 128 + sig:
        fail(f"exit code {rc} after signal {sig} (expected {128 + sig}):\n{err}")
    rep = report(part)
    if not rep["incomplete"] or rep["iterations_requested"] != int(ITER) - expected_first:
        fail("report not marked incomplete: %s" % {k: rep[k] for k in
                                                    ("incomplete", "iterations_requested")})
    if rep["first_iteration"] != expected_first:
        fail(f"resumed at {rep['first_iteration']}, expected {expected_first}")
    if "stopped by" not in err:
        fail("no stop message:\n" + err)
    expected_first = rep["first_iteration"] + rep["iterations"]
    stops += 1
    print(f"stop {stops}: signal {int(sig)}, exit {rc}, stopped at iteration {expected_first}")

final_json = os.path.join(work, "final.json")
subprocess.run([run, program, *MODE, "--checkpoint", cp, "--report", final_json], check=True)
rep = report(final_json)
if rep["first_iteration"] != expected_first or rep["incomplete"]:
    fail(f"final run resumed at {rep['first_iteration']}, expected {expected_first}")
fin = rep["fill"]["jobs"][0]
print(f"samples: uninterrupted {ref['samples_completed']}, stopped+resumed {fin['samples_completed']}")
if stops < 2:
    fail(f"only {stops} stops landed inside a run")
if fin["samples_completed"] != ref["samples_completed"]:
    fail("samples not conserved")
if abs(fin["checksum"] - ref["checksum"]) > 1e-9 * max(1.0, abs(ref["checksum"])):
    fail("checksum differs")
print("PASS")
