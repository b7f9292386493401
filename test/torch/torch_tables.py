"""Writes torch.distributed.pipelining's own schedule orders as action tables.

Usage: torch_tables.py [--comms] SCHEDULE RANKS MICROBATCHES [STAGES_PER_RANK]
           > table.csv
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


def main():
    args = sys.argv[1:]
    comms = "--comms" in args
    args = [a for a in args if a != "--comms"]
    name = args[0]
    ranks, microbatches = int(args[1]), int(args[2])
    per_rank = int(args[3]) if len(args) > 3 else 1
    writer = csv.writer(sys.stdout, lineterminator="\n")
    for row in order(name, ranks, microbatches, per_rank, comms):
        writer.writerow([str(a) for a in row])


if __name__ == "__main__":
    main()
