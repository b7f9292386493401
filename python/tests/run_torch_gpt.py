"""ctest's torch.gpt_pipeline: runs examples/torch/gpt_pipeline.py (4 gloo
processes train a small GPT with torch.distributed.pipelining, pipefill fills
their bubbles) for a few steps and checks, from its JSON report and output:

- the loss falls (last step below the first, both measured by the example);
- the fill task completed work inside bubbles (fill samples and chunks > 0,
  bubbles begun > 0, and every rank's session counted its iterations);
- no deadlock: the run finishes within a timeout (gloo's own timeout is 120 s);
- the report names the slowdown and the fill throughput (finite numbers, and
  the throughput equals fill samples / filled step time as printed).

Exits 77 (ctest: skipped, with the reason) when torch is not installed.

usage: python run_torch_gpt.py [STEPS] [EXTRA EXAMPLE ARGS...]
"""

import importlib.util
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import tempfile

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "torch" / "gpt_pipeline.py"
TIMEOUT_S = 420


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    extra = sys.argv[2:]
    if importlib.util.find_spec("torch") is None:
        print(f"SKIP: torch is not installed for {sys.executable} (scripts/setup.sh installs it)")
        return 77
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="torch-gpt-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        cmd = [sys.executable, str(EXAMPLE), "--steps", str(steps), "--warmup", "2",
               "--report", report_path, *extra]
        print(" ".join(cmd), flush=True)
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired as e:
            print((e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""))
            print(f"FAIL: the example did not finish in {TIMEOUT_S} s (deadlock?)")
            return 1
        print(out.stdout, out.stderr, sep="")
        problems = []
        if out.returncode != 0:
            problems.append(f"the example exited {out.returncode}")
        report = {}
        if os.path.exists(report_path):
            with open(report_path) as f:
                report = json.load(f)
        else:
            problems.append("no report written")
    losses = [float(l) for l in re.findall(r"^step \d+ loss ([0-9.eE+-]+)", out.stdout, re.M)]
    if report:
        if not report["loss_last"] < report["loss_first"]:
            problems.append(f"loss did not fall: {report['loss_first']} -> {report['loss_last']}")
        if losses and (losses[0] != round(report["loss_first"], 4) and
                       abs(losses[0] - report["loss_first"]) > 1e-4):
            problems.append(f"printed first loss {losses[0]} != report {report['loss_first']}")
        for key in ("fill_samples", "fill_bubbles_begun"):
            if not report.get(key, 0) > 0:
                problems.append(f"{key} = {report.get(key)}: no fill inside bubbles")
        # The fill's units: plan chunks (--fill plan) or FillTask steps (--fill torch).
        if not report.get("fill_chunks_run", 0) + report.get("fill_task_steps", 0) > 0:
            problems.append("no fill chunk or task step ran inside a bubble")
        for key in ("slowdown_pct", "fill_throughput_samples_per_s", "step_ms_with_fill",
                    "step_ms_without_fill"):
            if not isinstance(report.get(key), (int, float)) or not math.isfinite(report[key]):
                problems.append(f"report has no finite {key}: {report.get(key)}")
        if report.get("fill_throughput_samples_per_s", 0) <= 0:
            problems.append("fill throughput is not positive")
        slowdown = re.search(r"with fill ([0-9.]+) ms, slowdown ([+-][0-9.]+)%", out.stdout)
        if slowdown is None:
            problems.append("no slowdown printed")
        elif abs(float(slowdown.group(2)) - report["slowdown_pct"]) > 0.06:
            problems.append(f"printed slowdown {slowdown.group(2)} != report {report['slowdown_pct']}")
        # Every rank ran `steps` filled iterations through its session.
        iterations = [r["session"]["iterations"] for r in report.get("per_rank", [])]
        if iterations != [steps] * 4:
            problems.append(f"session iterations per rank {iterations}, expected {steps} each")
        # Bubbles began only in filled steps: samples the sessions report equal the steps'.
        total = sum(r["session"]["samples_completed"] + sum(t["samples"] for t in r["tasks"])
                    for r in report.get("per_rank", []))
        if total != report.get("fill_samples"):
            problems.append(f"sessions report {total} samples, the filled steps {report.get('fill_samples')}")
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"ok: loss {report['loss_first']:.4f} -> {report['loss_last']:.4f}, fill samples "
          f"{report['fill_samples']} in {report['fill_bubbles_begun']} bubbles, slowdown "
          f"{report['slowdown_pct']:+.1f}%, fill {report['fill_throughput_samples_per_s']:.1f} samples/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
