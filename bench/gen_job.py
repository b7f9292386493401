#!/usr/bin/env python3
"""Writes a synthetic JobSpec for compile benchmarks.

gen_job.py STAGES MICROBATCHES FILL_JOBS [SCHEDULE] [VIRTUAL] > job.pbtxt

Stage costs are uniform (a 64-stage, 512-micro-batch pipeline is the
target size of DESIGN section 9); fill jobs have 10-50 small layers with
deterministic pseudo-random costs.
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchargs  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("stages", type=benchargs.positive_int, metavar="STAGES")
ap.add_argument("microbatches", type=benchargs.positive_int, metavar="MICROBATCHES")
ap.add_argument("jobs", type=benchargs.positive_int, metavar="FILL_JOBS")
ap.add_argument("schedule", nargs="?", default="INTERLEAVED_1F1B", choices=benchargs.SCHEDULES,
                metavar="SCHEDULE")
ap.add_argument("virtual", nargs="?", type=benchargs.positive_int, default=None,
                metavar="VIRTUAL")
args = ap.parse_args()
p, m, jobs, schedule = args.stages, args.microbatches, args.jobs, args.schedule
v = args.virtual if args.virtual else (2 if schedule == "INTERLEAVED_1F1B" else 1)
if v > 1 and schedule != "INTERLEAVED_1F1B":
    ap.error(f"VIRTUAL above 1 needs INTERLEAVED_1F1B (got {schedule} with {v})")
rng = random.Random(42)
print(f'name: "bench_{p}x{m}"')
print(f"pipeline {{ stages: {p} microbatches: {m} schedule: {schedule}"
      + (f" virtual_stages: {v}" if v > 1 else "") + " }")
print("stage { forward_us: 2000 backward_us: 4000 backward_weight_us: 2000 "
      "activation_bytes: 16777216 stash_bytes: 100000000 static_bytes: 4000000000 }")
print("hardware { gpu_memory_bytes: 85899345920 p2p_latency_us: 10 p2p_bandwidth_gbps: 25 "
      "pcie_bandwidth_gbps: 25 }")
print("planner { min_bubble_us: 200 reserve_bytes: 2147483648 }")
for j in range(jobs):
    print(f'fill_job {{ name: "job{j}" kind: INFERENCE samples: 1000000 priority: {rng.choice([1, 1, 2])}')
    for l in range(rng.randint(10, 50)):
        print(f'  layer {{ name: "l{l}" forward_us_per_sample: {rng.uniform(2, 60):.2f} '
              f'weight_bytes: {rng.randint(1, 64) * 1048576} '
              f'activation_bytes_per_sample: {rng.randint(64, 4096) * 1024} }}')
    print("}")
