"""A small GPT trained with torch.distributed.pipelining on 4 CPU processes (gloo),
its pipeline bubbles filled by pipefill.

The model (token + position embedding, one pre-norm transformer block per
stage, LM head, vocabulary of 32) is split into 4 stages, one per process:
stage 0 holds the embeddings and block 0, stage 3 block 3, the final norm and
the head (``--schedule interleaved``: 8 stages, stage ``s`` on rank ``s mod 4``).
torch's own schedule object (``Schedule1F1B`` by default, ``ScheduleGPipe`` or
``ScheduleInterleaved1F1B``) runs each training step; ``pipefill.torch.FilledSchedule`` wraps it, so each rank
begins its plan's bubbles right after the compute action they follow and ends
them right before its next compute action, while torch waits for its peer.

The data: sequences ``x_t = (a + b t) mod 32`` with random ``a`` and ``b`` in
1..3; the model learns to predict the next token (cross entropy).

The plan: every rank times its forward and backward calls in warm-up steps run
without fill (``FilledSchedule.step(fill=False)``), the ranks exchange the
means (``all_gather_object``) and each compiles the same JobSpec with those
measured stage costs in process (``pipefill.compile``). The fill: a batch
inference task run in the bubbles on the session's worker thread at the lowest
CPU priority (``--fill-priority normal``: at normal priority). With ``--fill torch`` (needs ``pipefill.FillTask``) it is a torch
``nn.Module`` (a small transformer classifier) doing batch inference; with
``--fill plan`` it is the JobSpec's own fill job (an encoder the runtime runs).

After the warm-up, steps alternate without and with fill, so the measured step
times compare like for like on a shared machine. Printed: the loss of every step,
whether it was filled, its wall time (max over ranks, ``time.perf_counter``) and
the fill samples done in its bubbles (all ranks); at the end the mean step time without and with fill,
the slowdown and the fill throughput (fill samples per second of filled step
time), also written as JSON with ``--report``.

usage: python examples/torch/gpt_pipeline.py [--steps N] [--schedule 1f1b|gpipe|interleaved]
           [--fill torch|plan] [--fill-priority idle|normal] [--report FILE]
(PYTHONPATH must hold the pipefill package, e.g. build/python/site)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import tempfile
import threading
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

import pipefill
import pipefill.torch as pft

STAGES = 4          # pipeline ranks (processes)
VOCAB = 32
SEQ = 32
DIM = 64
HEADS = 4
BATCH = 32          # sequences per step
MICROBATCHES = 8    # 4 sequences each
LR = 3e-3

SCHEDULES = {  # name: (torch class, pipefill schedule, model stages per rank)
    "1f1b": ("Schedule1F1B", "ONE_F_ONE_B", 1),
    "gpipe": ("ScheduleGPipe", "GPIPE", 1),
    "interleaved": ("ScheduleInterleaved1F1B", "INTERLEAVED_1F1B", 2),
}


# -- the model -------------------------------------------------------------------------------
class Block(nn.Module):
    """Pre-norm transformer block with causal self-attention."""

    def __init__(self, dim: int = DIM, heads: int = HEADS) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class FirstStage(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        self.block = Block()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        return self.block(self.tok(tokens) + self.pos(pos))


class MiddleStage(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class LastStage(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.ln = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln(self.block(x)))


def make_stage_module(stage: int, stages: int) -> nn.Module:
    # Every rank builds the whole model (one block per stage) from one seed and keeps its
    # part, so the split model starts from the same weights as the unsplit one would.
    torch.manual_seed(0)
    parts = [FirstStage()] + [MiddleStage() for _ in range(stages - 2)] + [LastStage()]
    return parts[stage]


def lm_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    a = torch.randint(0, VOCAB, (BATCH, 1), generator=g)
    b = torch.randint(1, 4, (BATCH, 1), generator=g)
    seq = (a + b * torch.arange(SEQ + 1)) % VOCAB
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


# -- the fill task: batch inference of another torch model -----------------------------------
class Classifier(nn.Module):
    """A small transformer encoder that classifies sequences (the inference job)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(7)
        self.emb = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(1))
        self.head = nn.Linear(DIM, 4)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.emb(tokens)
        for blk in self.blocks:
            x = blk(x, causal=False)
        return self.head(x.mean(1))


INFER_BATCH = 4


def make_inference_task():
    """A pipefill.FillTask: each step classifies one batch of INFER_BATCH sequences."""

    class InferenceTask(pipefill.FillTask):  # type: ignore[misc, name-defined]
        name = "classifier_inference"

        def __init__(self) -> None:
            super().__init__()
            self.model = Classifier().eval()
            self.gen = torch.Generator().manual_seed(11)
            self.batches = 0
            self.checksum = 0.0
            self.threads: set[int] = set()

        def step(self) -> int:
            if threading.get_ident() not in self.threads:
                # torch's intra-op thread count is per thread (OpenMP): the session's worker
                # thread starts with every core (docs/integration.md, fill tasks).
                torch.set_num_threads(1)
                self.threads.add(threading.get_ident())
            tokens = torch.randint(0, VOCAB, (INFER_BATCH, SEQ), generator=self.gen)
            with torch.inference_mode():
                pred = self.model(tokens).argmax(-1)
            self.batches += 1
            self.checksum += float(pred.sum())
            return INFER_BATCH

        def state_dict(self) -> dict:
            return {"batches": self.batches, "checksum": self.checksum}

        def load_state_dict(self, state: dict) -> None:
            self.batches, self.checksum = state["batches"], state["checksum"]

    return InferenceTask()


def job_spec(schedule: str, per_rank: int, forward_us: list[float], backward_us: list[float],
             plan_fill: bool) -> str:
    # pipefill's stage costs are per rank (all its chunks together): a rank with v stages
    # spends forward_us / v on each chunk's forward.
    act = (BATCH // MICROBATCHES) * SEQ * DIM * 4
    stages = "\n".join(
        f"stage {{ forward_us: {f:.1f} backward_us: {b:.1f} activation_bytes: {act} "
        f"stash_bytes: {8 * act} static_bytes: 4000000 }}"
        for f, b in zip(forward_us, backward_us))
    fill = ""
    if plan_fill:
        fill = """
fill_job {
  name: "encoder_inference"
  kind: INFERENCE
  samples: 100000000
  layer { name: "encoder" repeat: 2 forward_us_per_sample: 60 weight_bytes: 1048576
          activation_bytes_per_sample: 65536
          workload { kind: ENCODER_LAYER hidden: 64 heads: 4 seq: 32 ffn: 256 } }
}"""
    return f"""
name: "gpt_pipeline"
pipeline {{ stages: {STAGES} microbatches: {MICROBATCHES} schedule: {schedule}
            virtual_stages: {per_rank} }}
{stages}
hardware {{ gpu_memory_bytes: 16000000000 p2p_latency_us: 100 p2p_bandwidth_gbps: 1 }}
planner {{ min_bubble_us: 200 reserve_bytes: 0 context_switch_us: 20 batch_sizes: [1, 2, 4, 8] }}
{fill}
"""


# -- one rank --------------------------------------------------------------------------------
def rank_totals(rank: int, fill_steps: list, srep: dict) -> dict:
    """This rank's fill over the filled steps, and its session report's totals."""
    return {
        "rank": rank,
        "bubbles_begun": sum(len(s["bubbles"]) for s in fill_steps),
        "chunks_run": sum(s["chunks_run"] for s in fill_steps),
        "task_steps": sum(s["task_steps"] for s in fill_steps),
        "samples": sum(s["samples_completed"] + s["task_samples"] for s in fill_steps),
        "fill_s": sum(s["fill_us"] + s["task_us"] for s in fill_steps) / 1e6,
        "end_wait_ms": sum(s["end_wait_us"] for s in fill_steps) / 1e3,
        "session": {k: srep.get(k) for k in ("iterations", "bubbles", "chunks_run",
                                             "chunks_deferred", "samples_completed",
                                             "overrun_count", "fill_us")},
        "tasks": srep.get("tasks", []),
    }


def summarize(args: argparse.Namespace, ranks: list, step_s: dict, losses: tuple,
              torch_class: str, use_task: bool, report: dict) -> None:
    """Rank 0: prints the run's result (and writes it to --report)."""
    first_loss, loss = losses
    off = sum(step_s[False]) / len(step_s[False])
    on = sum(step_s[True]) / len(step_s[True])
    samples = sum(r["samples"] for r in ranks)
    filled_time = sum(step_s[True])
    result = {
        "example": "examples/torch/gpt_pipeline.py",
        "schedule": torch_class,
        "fill": "torch FillTask (classifier inference)" if use_task
                else "plan fill job (encoder inference, runtime workload)",
        "fill_priority": args.fill_priority,
        "ranks": STAGES, "microbatches": MICROBATCHES, "steps_each": args.steps,
        "loss_first": first_loss, "loss_last": loss,
        "step_ms_without_fill": off * 1e3, "step_ms_with_fill": on * 1e3,
        "slowdown_pct": (on / off - 1) * 100,
        "fill_samples": samples,
        "fill_chunks_run": sum(r["chunks_run"] for r in ranks),
        "fill_task_steps": sum(r["task_steps"] for r in ranks),
        "fill_bubbles_begun": sum(r["bubbles_begun"] for r in ranks),
        "fill_throughput_samples_per_s": samples / filled_time,
        "fill_busy_s": sum(r["fill_s"] for r in ranks),
        "bubble_end_wait_ms": sum(r["end_wait_ms"] for r in ranks),
        "planned_iteration_ms": report["iteration_time_us"] / 1e3,
        "planned_bubble_fraction": report["bubble_fraction"],
        "per_rank": ranks,
        "measured": "wall clock (time.perf_counter), max over ranks per step",
    }
    print(f"fill: {samples} samples in {result['fill_chunks_run']} plan chunks and "
          f"{result['fill_task_steps']} task steps over "
          f"{result['fill_bubbles_begun']} bubbles, busy {result['fill_busy_s']:.3f} s, "
          f"bubble_end waits {result['bubble_end_wait_ms']:.1f} ms (all ranks)")
    print(f"main step time, measured (mean of {args.steps} each): without fill "
          f"{off * 1e3:.1f} ms, with fill {on * 1e3:.1f} ms, slowdown {result['slowdown_pct']:+.1f}%")
    print(f"fill throughput {result['fill_throughput_samples_per_s']:.1f} samples/s "
          f"(fill samples / filled step time)")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(result, f, indent=1)
        print(f"report: {args.report}")


def worker(rank: int, args: argparse.Namespace, store: str) -> None:
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=STAGES, timeout=datetime.timedelta(seconds=120))
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S

    torch_class, pipefill_schedule, per_rank = SCHEDULES[args.schedule]
    total = STAGES * per_rank
    # Interleaved placement: stage s on rank s mod STAGES.
    indices = [rank + k * STAGES for k in range(per_rank)]
    modules = [make_stage_module(s, total) for s in indices]
    stages = [PipelineStage(m, s, total, torch.device("cpu")) for m, s in zip(modules, indices)]
    cls = getattr(S, torch_class)
    schedule = cls(stages[0] if per_rank == 1 else stages, n_microbatches=MICROBATCHES,
                   loss_fn=lm_loss)
    optimizer = torch.optim.Adam([p for m in modules for p in m.parameters()], lr=LR)
    use_task = args.fill == "torch"

    def train_step(filled: pft.FilledSchedule, step: int, fill: bool) -> float:
        x, y = batch(step)
        losses: list = []
        optimizer.zero_grad(set_to_none=True)
        if rank == 0:
            filled.step(x, fill=fill)
        elif rank == STAGES - 1:
            filled.step(target=y, losses=losses, fill=fill)
        else:
            filled.step(fill=fill)
        optimizer.step()
        loss = torch.tensor([sum(float(l.detach()) for l in losses) / len(losses) if losses else 0.0])
        dist.all_reduce(loss)  # only the last rank contributes
        return float(loss)

    def open_plan(forward_us, backward_us):
        plan = pipefill.compile(job_spec(pipefill_schedule, per_rank, forward_us, backward_us,
                                         plan_fill=not use_task), name="gpt_pipeline.pbtxt")
        session = pipefill.Session(plan, rank, world_size=STAGES,
                                   fill_idle_priority=args.fill_priority == "idle")
        if use_task:
            session.add_task(make_inference_task(), step_us=args.task_step_us)
        return plan, session, pft.FilledSchedule(schedule, session)

    # Warm-up without fill, on a plan with nominal costs (its order is checked all the same).
    _, session, filled = open_plan([1000.0 * per_rank] * STAGES, [2000.0 * per_rank] * STAGES)
    times: dict[str, list[float]] = {"F": [], "B": []}
    step = 0
    first_loss = math.nan
    for _ in range(args.warmup):
        loss = train_step(filled, step, fill=False)
        if step == 0:
            first_loss = loss
        for action, us in filled.last_step["compute_us"]:
            times["F" if "F" in action else "B"].append(us)
        if rank == 0:
            print(f"step {step} loss {loss:.4f} fill warmup step_ms -", flush=True)
        step += 1
    filled.close()
    session.close()

    # The plan with the measured stage costs (mean forward/backward per micro-batch).
    mine = (per_rank * sum(times["F"]) / len(times["F"]),
            per_rank * sum(times["B"]) / len(times["B"]))
    costs: list = [None] * STAGES
    dist.all_gather_object(costs, mine)
    plan, session, filled = open_plan([c[0] for c in costs], [c[1] for c in costs])
    report = plan.report()
    if rank == 0:
        print("per-rank costs, measured (us per micro-batch, all the rank's stages): "
              + ", ".join(f"{s}: F {f:.0f} B {b:.0f}" for s, (f, b) in enumerate(costs)))
        print(f"plan: iteration {report['iteration_time_us'] / 1e3:.2f} ms, bubble fraction "
              f"{report['bubble_fraction']:.3f} (planned); rank {rank} bubbles after "
              + ", ".join(f"{a}" for a in filled.gap_actions().values()), flush=True)

    step_s = {False: [], True: []}
    fill_steps = []
    for k in range(2 * args.steps):
        fill = k % 2 == 1
        dist.barrier()
        loss = train_step(filled, step, fill=fill)
        took = torch.tensor([filled.last_step["step_s"]])
        dist.all_reduce(took, op=dist.ReduceOp.MAX)
        step_s[fill].append(float(took))
        if fill:
            fill_steps.append(filled.last_step)
        done = filled.last_step["samples_completed"] + filled.last_step["task_samples"]
        samples = torch.tensor([done], dtype=torch.float64)
        dist.all_reduce(samples)
        if rank == 0:
            print(f"step {step} loss {loss:.4f} fill {'on ' if fill else 'off'} "
                  f"step_ms {float(took) * 1e3:.1f} fill_samples {int(samples)}", flush=True)
        step += 1

    # Totals over ranks.
    ranks: list = [None] * STAGES
    dist.all_gather_object(ranks, rank_totals(rank, fill_steps, session.report()))
    filled.close()
    session.close()
    if rank == 0:
        summarize(args, ranks, step_s, (first_loss, loss), torch_class, use_task, report)
    dist.barrier()
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="steps without and with fill, each")
    parser.add_argument("--warmup", type=int, default=3, help="unfilled steps that time the stages")
    parser.add_argument("--schedule", choices=sorted(SCHEDULES), default="1f1b")
    parser.add_argument("--fill", choices=["torch", "plan"], default="torch")
    parser.add_argument("--task-step-us", type=float, default=1500.0,
                        help="--fill torch: the task's estimated step time (corrected online)")
    parser.add_argument("--fill-priority", choices=["idle", "normal"], default="idle",
                        help="the fill worker thread's CPU priority (idle: SCHED_IDLE, runs only "
                             "on a core nothing else wants)")
    parser.add_argument("--report", default="")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 1:
        parser.error("--steps and --warmup must be >= 1")
    if args.fill == "torch" and not hasattr(pipefill, "FillTask"):
        print("this pipefill has no pipefill.FillTask: using --fill plan", file=sys.stderr)
        args.fill = "plan"
    with tempfile.TemporaryDirectory(prefix="gpt-pipeline-") as tmp:
        mp.spawn(worker, args=(args, os.path.join(tmp, "store")), nprocs=STAGES, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
