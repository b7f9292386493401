"""Writes torch.distributed.pipelining's own schedule orders as action tables.

Usage: torch_tables.py [--comms] SCHEDULE RANKS MICROBATCHES [STAGES_PER_RANK]
           > table.csv
       torch_tables.py --fixtures DIR   (every table test/torch/Inputs holds)
       torch_tables.py --load FILE SCHEDULE RANKS MICROBATCHES [STAGES_PER_RANK]
           loads FILE with the schedule's `_load_csv` (torch validates it and
           lowers it to communication actions, as its runtime does before
           running it) and writes back the compute table torch then holds
SCHEDULE is a torch schedule class name (ScheduleGPipe, Schedule1F1B,
ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble,
ScheduleDualPipeV, ...). The schedule objects are built from stand-in stage
objects (no process group, no model): a schedule's per-rank order
(`pipeline_order`) depends only on the rank count, stage count and
micro-batch count. The rows hold the compute actions that `_load_csv(format=
"compute_only")` accepts (F, B, I, W, OVERLAP_F_B), without torch's empty
(None) placeholder cells and without the REDUCE_GRAD bookkeeping that
single-stage schedules add to their table. With --comms the table is torch's
own lowering with communication actions (`pipeline_order_with_comms`, what
`_dump_csv(format="compute_comms")` writes); only multi-stage schedules have
one.
"""
import csv
import sys

import torch.distributed.pipelining.schedules as S
from torch.distributed.pipelining.stage import _PipelineStageBase


class _Stage(_PipelineStageBase):
    """Carries only what a schedule's constructor reads."""

    def __init__(self, stage_index, num_stages, group_size, group_rank):
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group_size = group_size
        self.group_rank = group_rank
        self.group = None
        self.submod = None
        self.stage_index_to_group_rank = {}

    @property
    def is_first(self):
        return self.stage_index == 0

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    def _create_grad_recv_info(self, *args, **kwargs):
        return None

    def _prepare_forward_infra(self, *args, **kwargs):
        pass

    def _prepare_backward_infra(self, *args, **kwargs):
        pass


def stages_of(name, rank, ranks, per_rank):
    total = ranks * per_rank
    if per_rank == 1:
        return [rank]
    if name in ("ScheduleZBVZeroBubble", "ScheduleDualPipeV"):
        return [rank, 2 * ranks - 1 - rank]
    return [rank + k * ranks for k in range(per_rank)]


def order(name, ranks, microbatches, per_rank, comms=False):
    cls = getattr(S, name)
    total = ranks * per_rank
    single = issubclass(cls, S.PipelineScheduleSingle)
    # Every rank computes the whole table; build it from rank 0's view.
    stages = [_Stage(s, total, ranks, 0) for s in stages_of(name, 0, ranks, per_rank)]
    sched = cls(stages[0] if single else stages, microbatches,
                loss_fn=lambda out, target: out)
    if comms:
        table = sched.pipeline_order_with_comms
        return [[a for a in table[r] if a is not None] for r in range(ranks)]
    table = sched._get_pipeline_order() if single else sched.pipeline_order
    return [[a for a in table[r] if a is not None and a.is_compute_op]
            for r in range(ranks)]


# The tables under test/torch/Inputs: file name -> (comms, class, p, m, v).
FIXTURES = {
    "torch-gpipe-4x6.csv": (False, "ScheduleGPipe", 4, 6, 1),
    "torch-1f1b-4x8.csv": (False, "Schedule1F1B", 4, 8, 1),
    "torch-interleaved1f1b-4x8x2.csv": (False, "ScheduleInterleaved1F1B", 4, 8, 2),
    "torch-zb1p-4x8.csv": (False, "ScheduleInterleavedZeroBubble", 4, 8, 1),
    "torch-interleavedzb-4x8x2.csv": (False, "ScheduleInterleavedZeroBubble", 4, 8, 2),
    "torch-zbv-4x8.csv": (False, "ScheduleZBVZeroBubble", 4, 8, 2),
    "torch-dualpipev-4x8.csv": (False, "ScheduleDualPipeV", 4, 8, 2),
    "torch-zbv-4x8-comms.csv": (True, "ScheduleZBVZeroBubble", 4, 8, 2),
    "torch-interleaved1f1b-4x8x2-comms.csv": (True, "ScheduleInterleaved1F1B", 4, 8, 2),
}


def write(rows, out):
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        writer.writerow([str(a) for a in row])


def main():
    args = sys.argv[1:]
    if args and args[0] == "--load":
        file, name = args[1], args[2]
        p, m = int(args[3]), int(args[4])
        v = int(args[5]) if len(args) > 5 else 1
        stages = [_Stage(s, p * v, p, 0) for s in stages_of(name, 0, p, v)]
        sched = getattr(S, name)(stages, m, loss_fn=lambda out, target: out)
        sched._load_csv(file)
        if not sched.pipeline_order_with_comms:
            sys.exit("torch lowered no actions")
        write([[a for a in sched.pipeline_order[r] if a is not None]
               for r in range(p)], sys.stdout)
        return
    if args and args[0] == "--fixtures":
        import os
        for file, (comms, name, p, m, v) in FIXTURES.items():
            if not hasattr(S, name):
                print(f"torch has no {name}: {file} skipped", file=sys.stderr)
                continue
            with open(os.path.join(args[1], file), "w", newline="") as out:
                write(order(name, p, m, v, comms), out)
        return
    comms = "--comms" in args
    args = [a for a in args if a != "--comms"]
    name = args[0]
    ranks, microbatches = int(args[1]), int(args[2])
    per_rank = int(args[3]) if len(args) > 3 else 1
    write(order(name, ranks, microbatches, per_rank, comms), sys.stdout)


if __name__ == "__main__":
    main()
