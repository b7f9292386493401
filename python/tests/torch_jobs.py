"""The JobSpecs of test_torch_wrapper.py, without torch (so that scripts can import them).

CUDA_JOBS holds those that its CUDA-only tests compile, by name. A GPU machine may have the
runtime module only (pipefill._rt, no compiler): scripts/gpu-bundle.sh compiles these with the
full build (precompile_plans.py) and packs the plans, which conftest.compiled() loads there.
"""

from __future__ import annotations

P, M = 4, 8


def job(schedule, v=1, m=M, fill=True):
    if not fill:
        text = job(schedule, v, m)
        return text[: text.index("fill_job")]
    return f"""
name: "wrap"
pipeline {{ stages: {P} microbatches: {m} schedule: {schedule} virtual_stages: {v} }}
stage {{ forward_us: 1000 backward_us: 2000 backward_weight_us: 1000 activation_bytes: 1048576
         stash_bytes: 1000000 static_bytes: 100000000 }}
hardware {{ gpu_memory_bytes: 16000000000 p2p_latency_us: 10 p2p_bandwidth_gbps: 25 }}
planner {{ min_bubble_us: 10 reserve_bytes: 0 context_switch_us: 0 safety_margin: 0 }}
fill_job {{ name: "enc" kind: INFERENCE samples: 1000000
  layer {{ name: "enc" forward_us_per_sample: 25 weight_bytes: 1048576
           activation_bytes_per_sample: 1024 }} }}
"""


CUDA_JOBS = {"1f1b": job("ONE_F_ONE_B")}
