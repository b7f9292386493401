"""A torch module's batch inference as a pipefill fill task, in the bubbles of a
training rank that owns its loop.

One process stands in for rank 0 of a 4-stage 1F1B pipeline: it walks the
rank's ops in pipefill's compiled order, runs each compute op as real CPU work
of its planned length (x --time-scale), and at each bubble of the plan waits for
its (imaginary) peer inside ``with session.bubble(k)``; once per step a data
loader stall the plan did not predict becomes an unplanned bubble. The session
runs a :class:`pipefill.FillTask` in those bubbles: batch inference of a small
torch MLP over a dataset, one batch per step, a step starting only where its
predicted time fits what is left of the bubble.

It runs the loop first without the task, then with it, and prints the main step
time of both, the task's steps and samples, its measured and predicted step
times and the bound's skips and overruns. The task's predictions are checked
against the same model run outside the session (exit 1 on a mismatch or when no
step ran); exit 77 (UNSUPPORTED) without torch.

usage: python examples/python/fill_task_torch.py [--steps N] [--time-scale S]
         [--batch B] [--fill-priority idle|normal]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

import pipefill

try:
    import torch
except ImportError as e:  # scripts/setup.sh installs torch unless PIPEFILL_SKIP_TORCH=1
    print(f"UNSUPPORTED: torch is not installed ({e})")
    sys.exit(77)

JOB = """
name: "fill-task-demo"
pipeline { stages: 4 microbatches: 8 schedule: ONE_F_ONE_B }
stage { forward_us: 2000 backward_us: 4000 activation_bytes: 1000000
        stash_bytes: 1000000 static_bytes: 1000000000 }
hardware { gpu_memory_bytes: 16000000000 }
planner { min_bubble_us: 0 reserve_bytes: 0 }
"""


class BatchInference(pipefill.FillTask):
    """Classifies the dataset batch by batch; the position is its checkpointed progress."""

    name = "mlp-inference"

    def __init__(self, model: torch.nn.Module, inputs: torch.Tensor, batch: int) -> None:
        self.model = model.eval()
        self.inputs = inputs
        self.batch = batch
        self.batches = len(inputs) // batch
        self.position = 0
        self.predictions: dict[int, torch.Tensor] = {}  # batch index -> labels (last pass)
        self.threads: set[int] = set()

    def step(self) -> int:
        if threading.get_ident() not in self.threads:
            # torch's intra-op thread count is per thread (OpenMP): the session's worker thread
            # has the default (every core) until it sets its own; with other work on the cores a
            # 1 ms batch then took 45 ms.
            torch.set_num_threads(1)
            self.threads.add(threading.get_ident())
        i = self.position % self.batches
        x = self.inputs[i * self.batch:(i + 1) * self.batch]
        with torch.inference_mode():
            self.predictions[i] = self.model(x).argmax(dim=1)
        self.position += 1
        return len(x)

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state) -> None:
        self.position = state["position"]


def spin(us: float) -> None:
    """Main-job compute stand-in: real CPU work for `us` microseconds."""
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def train(session: pipefill.Session, steps: int, time_scale: float, stall_us: float) -> list[float]:
    """The rank's loop; returns the measured wall time of every step (us)."""
    ops = session.ops()
    after = {b["after_op"]: b for b in session.bubbles()}
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        if -1 in after:
            with session.bubble(after[-1]["bubble_id"]):
                time.sleep(after[-1]["planned_duration_us"] * time_scale * 1e-6)
        for i, op in enumerate(ops):
            if op["kind"] not in ("send", "recv"):
                spin(op["planned_us"] * time_scale)
            if i in after:  # the peer's activation or gradient is not here yet
                b = after[i]
                with session.bubble(b["bubble_id"]):
                    time.sleep(b["planned_duration_us"] * time_scale * 1e-6)
        with session.unplanned(stall_us):  # a data loader stall
            time.sleep(stall_us * 1e-6)
        session.iteration_end()
        times.append((time.perf_counter() - t0) * 1e6)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="real us per planned us of the main work and bubbles")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--stall-us", type=float, default=5000)
    ap.add_argument("--fill-priority", choices=("idle", "normal"), default="idle",
                    help="the fill worker's CPU priority (idle: SCHED_IDLE)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    inputs = torch.randn(64 * args.batch, 64)
    with torch.inference_mode():
        reference = model(inputs).argmax(dim=1)
        # Warm up: torch's first calls initialise lazily (tens of ms). A first step that slow
        # would set the task's prediction above every bubble here, and a step that never starts
        # is never measured again.
        for _ in range(3):
            model(inputs[:args.batch])
    memory = sum(p.numel() * p.element_size() for p in model.parameters()) + \
        args.batch * (64 + 256 + 256 + 10) * 4

    plan = pipefill.compile(JOB)
    opts = dict(time_scale=args.time_scale, fill_idle_priority=args.fill_priority == "idle")
    bubble_us = None
    with pipefill.Session(plan, 0, **opts) as s:
        bubbles = s.bubbles()
        bubble_us = sum(b["planned_duration_us"] for b in bubbles) * args.time_scale
        print(f"rank 0 of {s.ranks}: {len(s.ops())} ops, {len(bubbles)} bubbles per step "
              f"({bubble_us / 1e3:.1f} ms, planned x time scale) + one {args.stall_us / 1e3:.1f} ms "
              f"unplanned stall")
        base = train(s, args.steps, args.time_scale, args.stall_us)

    with pipefill.Session(plan, 0, **opts) as s:
        task = BatchInference(model, inputs, args.batch)
        s.add_task(task, step_us=1000, memory_bytes=memory)  # a guess; measured steps correct it
        filled = train(s, args.steps, args.time_scale, args.stall_us)
        report = s.report()
        (t,) = s.tasks()

    def mean_after_first(v):
        return statistics.mean(v[1:]) if len(v) > 1 else v[0]

    b, f = mean_after_first(base), mean_after_first(filled)
    print(f"main step time (measured, mean of steps 2..{args.steps}): {b / 1e3:.2f} ms without fill, "
          f"{f / 1e3:.2f} ms with fill ({(f - b) / b:+.1%})")
    print(f"fill task {t['name']}: {t['steps']} steps, {t['samples']} samples in "
          f"{report['bubbles']} planned + {report['unplanned_bubbles']} unplanned bubbles "
          f"({t['samples'] / (args.steps * (bubble_us + args.stall_us) * 1e-6):.0f} samples per "
          f"second of bubble)")
    print(f"  step time: estimate {t['step_us']:.0f} us, measured p50 {t['measured_us_p50']:.0f} us, "
          f"p90 {t['measured_us_p90']:.0f} us, max {t['measured_us_max']:.0f} us; "
          f"predicted for the next step {t['predicted_us']:.0f} us")
    print(f"  bound: {t['skipped_no_fit']} bubble ends where the next step did not fit, "
          f"{t['skipped_memory']} bubbles without {t['memory_bytes'] / 1e6:.2f} MB free, "
          f"{t['overruns']} steps ended past their bubble ({t['overrun_us']:.0f} us in all)")
    print(f"  task time {t['task_us'] / 1e3:.1f} ms of "
          f"{args.steps * (bubble_us + args.stall_us) / 1e3:.1f} ms of bubbles")

    agree = all(torch.equal(p, reference[i * args.batch:(i + 1) * args.batch])
                for i, p in task.predictions.items())
    print(f"predictions equal the model run outside the session: {agree} "
          f"({len(task.predictions)} batches)")
    if t["steps"] == 0:
        print("error: the fill task ran no step", file=sys.stderr)
        return 1
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
