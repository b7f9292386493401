"""A numpy MLP trained with 4-stage pipeline parallelism in 4 processes, its
bubbles filled by pipefill with batch inference of another model.

Each MPI rank holds one stage (a dense layer with tanh; the last stage adds the
output layer and the MSE loss). pipefill compiles the pipeline's JobSpec in
process (rank 0; the plan is broadcast), and every rank follows the plan's 1F1B
order for its stage (``Session.ops()``): forward and backward compute on numpy,
activations and gradients sent point to point with mpi4py. Where the plan has a
bubble, the rank hands it to pipefill (``with session.bubble(k): ...``) while it
waits for its peer; the fill job (an encoder's batch inference, real CPU work
on the host backend) runs in it, bounded by the bubble. The bubble's duration
is the framework's own measurement of that bubble in the last step without
fill (the plan's the first time), so fill does not lengthen its own bubbles.
Leaving a bubble never waits for fill (``end_at_once``): a chunk in flight
finishes its pass on the worker, at idle priority.

Steps alternate without and with fill (step 0 is a warm-up with fill), so the
measured main step times compare like for like.

usage: mpirun -n 4 python examples/python/pipeline_numpy.py [--steps N]
(as root: mpirun --allow-run-as-root --oversubscribe -n 4 ...)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

# Open MPI's single-copy shared-memory path (CMA) fails in containers without ptrace rights
# ("Read -1, expected N, errno = 14") for messages above the eager limit; copy through the
# shared segment instead. Read at MPI_Init, so set before mpi4py is imported.
os.environ.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")

import numpy as np
from mpi4py import MPI

import pipefill

STAGES = 4
MICROBATCHES = 4
BATCH = 32  # samples per micro-batch
WIDTH = 64  # hidden width of the MLP
LR = 0.05

# The main job as pipefill sees it: 4 stages, 1F1B, stage costs in planned us (what a profile
# would say; the bubbles' real lengths come from the framework's own timers), and the fill job.
# Fill batches of 1-2 samples: a chunk's pass must be shorter than the real bubbles (a few
# hundred us on a small machine), not only the planned ones, or the bound never admits it.
JOB = f"""
name: "numpy_mlp"
pipeline {{ stages: {STAGES} microbatches: {MICROBATCHES} schedule: ONE_F_ONE_B }}
stage {{ forward_us: 2000 backward_us: 4000 activation_bytes: {BATCH * WIDTH * 4}
         stash_bytes: 1000000 static_bytes: 100000000 }}
hardware {{ gpu_memory_bytes: 16000000000 p2p_latency_us: 10 p2p_bandwidth_gbps: 25
            pcie_bandwidth_gbps: 25 }}
planner {{ min_bubble_us: 200 reserve_bytes: 100000000 context_switch_us: 20
           batch_sizes: [1, 2] }}
fill_job {{
  name: "encoder_inference"
  kind: INFERENCE
  samples: 1000000
  layer {{
    name: "encoder"
    repeat: 2
    forward_us_per_sample: 60
    weight_bytes: 8388608
    activation_bytes_per_sample: 262144
    workload {{ kind: ENCODER_LAYER hidden: 64 heads: 4 seq: 16 ffn: 128 }}
  }}
}}
"""


def wait_for(request):
    """Waits for a non-blocking receive without spinning the CPU (Open MPI's blocking receive
    busy-polls, which would leave no core to the fill running at idle priority)."""
    while True:
        done, message = request.test()
        if done:
            return message
        time.sleep(50e-6)


def received(queue: list, mb: int) -> np.ndarray:
    """The oldest message received for this direction; the plan's order guarantees it is the
    micro-batch being computed (checked)."""
    got, payload = queue.pop(0)
    if got != mb:
        raise RuntimeError(f"plan order broken: expected micro-batch {mb}, received {got}")
    return payload


class Stage:
    """One pipeline stage: y = tanh(x W + b); the last also has the linear output layer."""

    def __init__(self, rank: int, rng: np.random.Generator) -> None:
        self.last = rank == STAGES - 1
        in_width = 16 if rank == 0 else WIDTH
        self.w = rng.normal(0, 1 / np.sqrt(in_width), (in_width, WIDTH))
        self.b = np.zeros(WIDTH)
        if self.last:
            self.wo = rng.normal(0, 1 / np.sqrt(WIDTH), (WIDTH, 1))
        self.saved: dict[int, tuple] = {}
        self.zero_grads()

    def zero_grads(self) -> None:
        self.gw, self.gb = np.zeros_like(self.w), np.zeros_like(self.b)
        if self.last:
            self.gwo = np.zeros_like(self.wo)

    def forward(self, mb: int, x: np.ndarray, target=None):
        h = np.tanh(x @ self.w + self.b)
        if not self.last:
            self.saved[mb] = (x, h)
            return h, None
        y = h @ self.wo
        diff = y - target
        loss = float(np.mean(diff**2))
        self.saved[mb] = (x, h, 2 * diff / diff.size)
        return None, loss

    def backward(self, mb: int, grad=None) -> np.ndarray:
        if self.last:
            x, h, dy = self.saved.pop(mb)
            self.gwo += h.T @ dy
            grad = dy @ self.wo.T
        else:
            x, h = self.saved.pop(mb)
        dz = grad * (1 - h**2)
        self.gw += x.T @ dz
        self.gb += dz.sum(0)
        return dz @ self.w.T

    def sgd(self) -> None:
        self.w -= LR * self.gw
        self.b -= LR * self.gb
        if self.last:
            self.wo -= LR * self.gwo
        self.zero_grads()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--end-waits", action="store_true",
                        help="bubble ends wait for the fill chunk in flight (the host default); "
                             "without it they return at once (end_at_once)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank = comm.rank
    if comm.size != STAGES:
        print(f"run with {STAGES} ranks (mpirun -n {STAGES}), not {comm.size}", file=sys.stderr)
        return 2

    # The plan: compiled in process on rank 0, lowered to a stream program, sent to every rank.
    program = None
    if rank == 0:
        plan = pipefill.compile(JOB, name="numpy_mlp.pbtxt")
        program = plan.stream_program(iterations=1)
    program = comm.bcast(program, root=0)
    # end_at_once: leaving a bubble never waits for fill (a chunk in flight finishes its pass on
    # the worker, at idle priority); the numbers come with session.report().
    session = pipefill.Session(program, rank, world_size=comm.size, end_at_once=not args.end_waits)
    ops = session.ops()
    bubbles_after: dict[int, list[dict]] = {}
    for b in session.bubbles():
        bubbles_after.setdefault(b["after_op"], []).append(b)

    # Data: a fixed regression task (a random teacher network), the same on every rank.
    data_rng = np.random.default_rng(1234)
    teacher = data_rng.normal(0, 1, (16, 1))
    inputs = data_rng.normal(0, 1, (MICROBATCHES, BATCH, 16))
    targets = np.sin(inputs @ teacher)
    stage = Stage(rank, np.random.default_rng(rank))

    measured_bubble_us: dict[int, float] = {}  # the framework's own timer, per bubble
    step_times = {True: [], False: []}
    for step in range(args.steps):
        fill = step % 2 == 0  # step 0 (warm-up), 2, 4, ... with fill; 1, 3, ... without
        comm.Barrier()
        t0 = time.perf_counter()
        open_bubble = None  # (bubble id, context manager, begin time)

        def begin_bubbles(after: int):
            # Steps without fill time the plan's bubbles too (no session call): the
            # durations handed to the session come from them, not from steps that fill
            # slowed down, so fill does not feed its own bubbles.
            nonlocal open_bubble
            for b in bubbles_after.get(after, []):
                end_bubble()
                k = b["bubble_id"]
                ctx = None
                if fill:
                    ctx = session.bubble(k, measured_bubble_us.get(k, 0.0))
                    ctx.__enter__()
                open_bubble = (k, ctx, time.perf_counter())

        def end_bubble():
            nonlocal open_bubble
            if open_bubble is None:
                return
            k, ctx, began = open_bubble
            if ctx is None:
                measured_bubble_us[k] = (time.perf_counter() - began) * 1e6
            else:
                ctx.__exit__(None, None, None)
            open_bubble = None

        pending_recv = {"act": [], "grad": []}
        out_act: dict[int, np.ndarray] = {}
        out_grad: dict[int, np.ndarray] = {}
        last_mb = {"forward": None, "backward": None}
        losses = []
        sends = []
        begin_bubbles(-1)
        for i, op in enumerate(ops):
            kind = op["kind"]
            if kind in ("forward", "backward"):
                end_bubble()  # the main stream computes again: the bubble is over
                mb = op["microbatch"]
                if kind == "forward":
                    x = inputs[mb] if rank == 0 else received(pending_recv["act"], mb)
                    y, loss = stage.forward(mb, x, targets[mb])
                    if loss is not None:
                        losses.append(loss)
                    out_act[mb] = y
                else:
                    g = None if stage.last else received(pending_recv["grad"], mb)
                    out_grad[mb] = stage.backward(mb, g)
                last_mb[kind] = mb
            elif kind == "send":
                if op["peer"] > rank:  # activations forward
                    mb = last_mb["forward"]
                    sends.append(comm.isend((mb, out_act.pop(mb)), dest=op["peer"], tag=op["tag"]))
                else:  # gradients backward
                    mb = last_mb["backward"]
                    sends.append(comm.isend((mb, out_grad.pop(mb)), dest=op["peer"], tag=op["tag"]))
            elif kind == "recv":
                message = wait_for(comm.irecv(source=op["peer"], tag=op["tag"]))
                pending_recv["act" if op["peer"] < rank else "grad"].append(message)
            begin_bubbles(i)
        MPI.Request.waitall(sends)
        stage.sgd()
        # End of step: the loss reaches every rank (a tail bubble, if any, spans this wait).
        loss = comm.allreduce(float(np.mean(losses)) if losses else 0.0, op=MPI.SUM)
        end_bubble()
        if fill:
            session.iteration_end()
        step_us = comm.allreduce((time.perf_counter() - t0) * 1e6, op=MPI.MAX)
        if step > 0:
            step_times[fill].append(step_us)
        if rank == 0:
            print(f"step {step} loss {loss:.6f} fill {'on ' if fill else 'off'} "
                  f"step_ms {step_us / 1e3:.2f}", flush=True)

    report = session.report()  # waits for the worker: the last chunks' numbers are in
    fill_samples = comm.allreduce(report["samples_completed"], op=MPI.SUM)
    totals = comm.gather(report, root=0)
    if rank == 0:
        deferred = sum(r["chunks_deferred"] for r in totals)
        ran = sum(r["chunks_run"] for r in totals)
        overruns = sum(r["overrun_count"] for r in totals)
        waits = max(r["end_wait_us_max"] for r in totals)
        off = np.mean(step_times[False]) if step_times[False] else float("nan")
        on = np.mean(step_times[True]) if step_times[True] else float("nan")
        print(f"fill samples {fill_samples} (chunks run {ran}, deferred {deferred}, "
              f"overruns {overruns}, longest bubble_end wait {waits:.0f} us)")
        print(f"main step time, measured (wall clock, mean over steps 1..{args.steps - 1}): "
              f"without fill {off / 1e3:.2f} ms, with fill {on / 1e3:.2f} ms "
              f"({(on / off - 1) * 100:+.1f}%)")
    session.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (SystemExit, KeyboardInterrupt, Exception) as e:
        if isinstance(e, SystemExit):
            raise
        # One rank failing (Ctrl-C too) must stop the job: its peers would wait for its
        # messages forever, and mpi4py's exit hook (MPI_Finalize) would wait for them.
        traceback.print_exc()
        print(f"rank {MPI.COMM_WORLD.rank}: {type(e).__name__}: stopping every rank",
              file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Abort(130 if isinstance(e, KeyboardInterrupt) else 1)
