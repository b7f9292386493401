"""Compile a JobSpec in process, look at its bubbles, run the plan on the host
backend and close the loop with the run's profile (its measured entries).

usage: python examples/python/quickstart.py [JOB.pbtxt]
(from the repository root, after scripts/test.sh or `pip install .`)
"""

import pathlib
import sys
import tempfile

import numpy as np

import pipefill

REPO = pathlib.Path(__file__).resolve().parents[2]
job = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "test/runtime/Inputs/tiny.pbtxt"

plan = pipefill.compile_file(job)
report = plan.report()
print(f"{plan.name}: planned iteration {report['iteration_time_us'] / 1e3:.2f} ms, "
      f"bubble fraction {report['bubble_fraction']:.1%}, "
      f"planned fill {report['fill']['filled_fraction']:.1%} of bubble time")

bubbles = plan.bubbles()
for stage in np.unique(bubbles["stage"]):
    mine = bubbles["stage"] == stage
    print(f"  stage {stage}: {mine.sum()} bubbles, {bubbles['duration_us'][mine].sum():.0f} us idle, "
          f"{bubbles['filled_us'][mine].sum():.0f} us planned fill")

run = pipefill.run(plan, iterations=2, max_dim=32)
stats = run.stats()
# "measured" only when the run timed real main compute on the clock; a modelled
# run (PFRT_TIME_MODEL=modelled) holds the planned times and says so.
time_model = run.report()["time_model"]
print(f"host run: {stats['iterations']} iterations, {time_model} mean {stats['iteration_us_mean']:.0f} us "
      f"(planned {stats['planned_iteration_us']:.0f} us)")
for j in run.report()["fill"]["jobs"]:
    print(f"  fill job {j['name']}: {j['samples_this_run']} samples (planned {j['samples_planned']}); "
          f"chunks {j['chunks_run']} run, {j['chunks_deferred']} deferred, {j['chunks_pending']} pending")
# The bubble bound starts a chunk only if its predicted time fits what is left of
# its bubble; what does not fit waits for a later bubble (deferred, then pending at
# the end) instead of slowing the main job. On a small or busy machine the fill
# threads (lowest priority) share cores with main compute, so fewer samples than
# planned is the honest outcome; the profile round below re-plans with measured costs.

with tempfile.TemporaryDirectory() as tmp:
    profile = pathlib.Path(tmp) / "profile.pbtxt"
    pipefill.run(plan, iterations=2, profile=True).save_profile(profile)
    replanned = pipefill.compile_file(job, profile=profile)
    # apply-profile uses only the profile's measured entries (none after a modelled run).
    print(f"recompiled from the run's profile ({time_model} run): iteration "
          f"{replanned.report()['iteration_time_us'] / 1e3:.2f} ms")
