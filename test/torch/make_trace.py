"""Runs a small torch.distributed.pipelining job on CPU and profiles it.

Usage: make_trace.py OUTDIR

Two processes (gloo, a file store in OUTDIR) train a 4-layer MLP split into
4 stages, 2 per rank (ScheduleInterleaved1F1B, 4 micro-batches). After a
warm-up step, one step runs under torch.profiler (CPU) and each rank writes
its Chrome trace to OUTDIR/trace-rank<r>.json. torch's pipelining runtime wraps every action in a `PP:<action>`
record_function range (e.g. `PP:2F1`), which is what pipefill-translate
--torch-trace-to-profile reads.
"""
import os
import subprocess
import sys


def worker(rank, outdir):
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, ScheduleInterleaved1F1B
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=2)

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(256, 256)

        def forward(self, x):
            return torch.relu(self.lin(x))

    stages = []
    for s in (rank, rank + 2):  # interleaved: stage s on rank s mod 2
        stages.append(PipelineStage(Layer(), s, 4, torch.device("cpu")))
    loss = lambda out, target: ((out - target) ** 2).mean()
    sched = ScheduleInterleaved1F1B(stages, n_microbatches=4, loss_fn=loss)
    x = torch.randn(64, 256)
    target = torch.randn(64, 256)

    def step():
        if rank == 0:
            sched.step(x, target=target)
        else:
            sched.step(target=target, losses=[])

    step()  # warm-up
    dist.barrier()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    prof.export_chrome_trace(os.path.join(outdir, f"trace-rank{rank}.json"))
    dist.barrier()
    dist.destroy_process_group()


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), sys.argv[3])
        return
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    store = os.path.join(outdir, "store")
    if os.path.exists(store):
        os.remove(store)
    procs = [subprocess.Popen([sys.executable, "-W", "ignore", __file__, "--worker",
                               str(r), outdir]) for r in range(2)]
    codes = [p.wait(timeout=300) for p in procs]
    if any(codes):
        sys.exit(f"worker exit codes {codes}")


if __name__ == "__main__":
    main()
