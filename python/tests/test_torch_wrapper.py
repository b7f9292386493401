"""pipefill.torch.FilledSchedule against torch's own schedule code.

The truth is what torch runs: each schedule's real ``step`` (torch 2.15's
``_step_microbatches``, the runtime loop of ``_PipelineScheduleRuntime`` for
multi-stage schedules) drives recording stand-in stages, with no process group
and no model (communication ops are empty lists, stage initialization is
skipped). The wrapper must accept exactly those orders for pipefill's plans of
the same pipeline, begin each bubble right after the compute op that precedes
it in the plan and end it right before the next, and refuse a schedule that
differs, naming the rank and the op.
"""

from __future__ import annotations

import os
import sys
import time
import types

import pytest

# A torch that is there but fails to load is an error, not a skip (exc_type).
torch = pytest.importorskip("torch", reason="torch is not installed (scripts/setup.sh installs it)",
                            exc_type=ModuleNotFoundError)
S = pytest.importorskip("torch.distributed.pipelining.schedules")

import pipefill  # noqa: E402
import pipefill.torch as pft  # noqa: E402

from conftest import REPO, compiled  # noqa: E402
from torch_jobs import CUDA_JOBS, M, P, job  # noqa: E402

sys.path.insert(0, str(REPO / "test" / "torch"))
import torch_tables  # noqa: E402

COMPUTE = ("forward", "backward", "backward_input", "backward_weight")
LETTER = {"forward": "F", "backward": "B", "backward_input": "I", "backward_weight": "W"}


class RecordingStage(torch_tables._Stage):
    """A stand-in stage that logs the compute torch asks of it (``2F3``)."""

    def __init__(self, stage_index, num_stages, group_size, group_rank, log):
        super().__init__(stage_index, num_stages, group_size, group_rank)
        self.log = log
        self.output_chunks = []
        self.has_backward = True

    def forward_one_chunk(self, mb, args=(), kwargs=None, save_forward_output=True):
        self.log.append(f"{self.stage_index}F{mb}")
        return 0

    def backward_one_chunk(self, mb, loss=None, full_backward=True, last_backward=False):
        self.log.append(f"{self.stage_index}{'B' if full_backward else 'I'}{mb}")

    def backward_weight_one_chunk(self, mb, last_backward=False):
        self.log.append(f"{self.stage_index}W{mb}")

    def get_fwd_recv_ops(self, mb):
        return []

    get_fwd_send_ops = get_bwd_recv_ops = get_bwd_send_ops = get_fwd_recv_ops

    def clear_runtime_states(self):
        pass

    def release_fwd_send_outputs(self, mb):
        pass

    def perform_reduce_grad(self, *args):
        pass

    def set_local_fwd_input(self, *args):
        pass

    def set_local_bwd_input(self, *args):
        pass

    def get_local_bwd_output(self, mb):
        return None


def make_schedule(name, rank, v=1, csv_path=None):
    """torch's schedule `name` for `rank`, over recording stages; `csv_path`: the
    schedule is a plain _PipelineScheduleRuntime that loads its table from a CSV."""
    log = []
    stages = [
        RecordingStage(s, P * v, P, rank, log) for s in torch_tables.stages_of(name, rank, P, v)
    ]
    if csv_path is not None:
        sched = S._PipelineScheduleRuntime(stages, M, loss_fn=lambda out, target: out)
        sched._load_csv(str(csv_path))
    else:
        cls = getattr(S, name)
        single = issubclass(cls, S.PipelineScheduleSingle)
        sched = cls(stages[0] if single else stages, M, loss_fn=lambda out, target: out)
    # No process group: skip the P2P and metadata set-up (the order does not depend on it).
    sched._initialize_stage = sched._initialize_stages = lambda *a, **k: None
    return sched, log


def run_step(step):
    # No inputs (the stand-in stages make their own) and a target split into M micro-batches:
    # the call that torch 2.11 (the GPU machines') and 2.15 (here) both take; arg_mbs and
    # target_mbs are 2.15's only.
    step(target=torch.zeros(M), return_outputs=False)


class SpySession:
    """Forwards to a real Session and logs begin/end with the torch compute log's length."""

    def __init__(self, session, log):
        self.s, self.log, self.events = session, log, []

    rank = property(lambda self: self.s.rank)
    ranks = property(lambda self: self.s.ranks)

    def ops(self):
        return self.s.ops()

    def bubbles(self):
        return self.s.bubbles()

    def begin(self, bubble, duration_us=0.0):
        self.events.append(("begin", bubble, len(self.log)))
        self.s.begin(bubble, duration_us)

    def end(self, bubble):
        self.events.append(("end", bubble, len(self.log)))
        return self.s.end(bubble)

    def iteration_end(self):
        self.events.append(("iteration_end", None, len(self.log)))
        self.s.iteration_end()


def torch_stage(name, rank, chunk, v):
    """The placement docs/torch.md states: interleaved c*p + r, V-shape r / 2p-1-r."""
    if v == 1:
        return rank
    if name in ("ScheduleZBVZeroBubble", "ScheduleDualPipeV"):
        return rank if chunk == 0 else 2 * P - 1 - rank
    return chunk * P + rank


def check_rank(plan, name, rank, v, csv_path=None):
    sched, log = make_schedule(name, rank, v, csv_path)
    session = pipefill.Session(plan, rank, world_size=P)
    spy = SpySession(session, log)
    ops = session.ops()
    plan_actions = [
        f"{torch_stage(name, rank, op['chunk'], v)}{LETTER[op['kind']]}{op['microbatch']}"
        for op in ops
        if op["kind"] in COMPUTE
    ]
    compute_index = [i for i, op in enumerate(ops) if op["kind"] in COMPUTE]
    with pft.FilledSchedule(sched, spy, duration="planned") as filled:
        for _ in range(2):
            spy.events.clear()
            del log[:]
            run_step(filled.step)
            # What torch ran is the plan's compute order, through the placement above.
            assert log == plan_actions
            # Every bubble begun follows the compute op before it in the plan and ends
            # before the next compute op runs.
            begun = [e for e in spy.events if e[0] == "begin"]
            ended = [e for e in spy.events if e[0] == "end"]
            assert [b[1] for b in begun] == [e[1] for e in ended]
            assert spy.events[-1][0] == "iteration_end"
            after = {b["bubble_id"]: b["after_op"] for b in session.bubbles()}
            for (_, bubble, ran_before), (_, _, ran_at_end) in zip(begun, ended):
                assert ran_at_end == ran_before  # no compute inside the bubble
                a = after[bubble]
                before = [i for i in compute_index if i <= a]
                assert len(before) == ran_before  # opened right after the op it follows
                # and only transfers lie between that compute op and the bubble
                assert all(ops[i]["kind"] in ("send", "recv") for i in range(
                    before[-1] + 1 if before else 0, a + 1))
            # Every gap of the plan with a bubble got one.
            gaps = {len([i for i in compute_index if i <= b["after_op"]]) for b in session.bubbles()}
            assert sorted({b[2] for b in begun}) == sorted(gaps)
            assert filled.last_step["fill"] and len(filled.last_step["bubbles"]) == len(begun)
    report = session.report()
    assert report["iterations"] == 2
    session.close()
    return len(begun)


@pytest.mark.parametrize(
    "name,schedule,v",
    [
        ("ScheduleGPipe", "GPIPE", 1),
        ("Schedule1F1B", "ONE_F_ONE_B", 1),
        ("ScheduleInterleaved1F1B", "INTERLEAVED_1F1B", 2),
        ("ScheduleInterleavedZeroBubble", "ZB_H1", 1),
    ],
)
def test_pipefill_plan_runs_as_torch_schedule(name, schedule, v):
    plan = pipefill.compile(job(schedule, v))
    total = sum(check_rank(plan, name, rank, v) for rank in range(P))
    assert total > 0


@pytest.mark.parametrize("name", ["ScheduleZBVZeroBubble", "ScheduleDualPipeV"])
def test_csv_schedule(tmp_path, name):
    """A V-shaped table pipefill cannot expand itself: torch writes it, pipefill
    compiles it in process, and torch's _PipelineScheduleRuntime loads the same CSV."""
    table = tmp_path / "table.csv"
    with open(table, "w", newline="") as f:
        torch_tables.write(torch_tables.order(name, P, M, 2), f)
    plan = pipefill.compile_torch_schedule(table, job=job("ONE_F_ONE_B"))
    for rank in range(P):
        check_rank(plan, name, rank, 2, csv_path=table)


def test_gap_actions_name_the_torch_action():
    plan = pipefill.compile(job("ONE_F_ONE_B"))
    sched, _ = make_schedule("Schedule1F1B", 0)
    with pipefill.Session(plan, 0) as session, pft.FilledSchedule(sched, session) as filled:
        ops = session.ops()
        for gap, action in filled.gap_actions().items():
            bubble = filled.bubble_gaps()[gap]
            after = next(b["after_op"] for b in session.bubbles() if b["bubble_id"] == bubble)
            prior = [op for op in ops[: after + 1] if op["kind"] in COMPUTE]
            expect = f"0{LETTER[prior[-1]['kind']]}{prior[-1]['microbatch']}" if prior else "start"
            assert action == expect


def test_unfilled_step_begins_nothing():
    plan = pipefill.compile(job("ONE_F_ONE_B"))
    sched, log = make_schedule("Schedule1F1B", 1)
    with pipefill.Session(plan, 1) as session:
        spy = SpySession(session, log)
        with pft.FilledSchedule(sched, spy) as filled:
            run_step(lambda **kw: filled.step(fill=False, **kw))
        assert spy.events == [] and len(log) == 2 * M
        assert filled.last_step["bubbles"] == [] and not filled.last_step["fill"]
        assert session.report()["iterations"] == 0
    # close() restored the stage's own methods.
    assert "forward_one_chunk" not in vars(sched._stage)


# -- mismatches: a clear error naming the rank and the op, never a hang -----------------------


def refuse(plan, name, rank, v=1, match=""):
    sched, log = make_schedule(name, rank, v)
    with pipefill.Session(plan, rank) as session:
        with pytest.raises(pft.ScheduleMismatchError, match=match):
            pft.FilledSchedule(sched, session)
    return sched


def test_other_schedule_kind_is_refused():
    plan = pipefill.compile(job("ONE_F_ONE_B"))
    # GPipe runs 0F4 where 1F1B's rank 0 runs 0B0: op 9 (F0..F3 each followed by its
    # send, then the receive of B0's gradient).
    refuse(plan, "ScheduleGPipe", 0,
           match=r"rank 0: ScheduleGPipe runs 0F4 \(stage 0 forward micro-batch 4\) as compute "
                 r"action 4, where the plan has op 9: backward micro-batch 0 chunk 0 \(torch 0B0\)")


def test_other_shape_is_refused():
    refuse(pipefill.compile(job("ONE_F_ONE_B", m=12)), "Schedule1F1B", 2,
           match="rank 2: the plan runs 12 micro-batches but the schedule 8")
    refuse(pipefill.compile(job("INTERLEAVED_1F1B", v=2)), "Schedule1F1B", 1,
           match=r"rank 1: the plan has 2 chunk\(s\) per rank but the schedule holds 1 stage")
    refuse(pipefill.compile(job("ONE_F_ONE_B")), "ScheduleInterleaved1F1B", 3, v=2,
           match=r"rank 3: the plan has 1 chunk\(s\) per rank but the schedule holds 2 stage")


def test_what_is_not_a_supported_schedule_is_refused():
    plan = pipefill.compile(job("ONE_F_ONE_B"))
    with pipefill.Session(plan, 0) as session:
        with pytest.raises(TypeError, match=r"^pipefill\.torch wraps torch\.distributed\."
                                            r"pipelining schedules, not Linear$"):
            pft.FilledSchedule(torch.nn.Linear(2, 2), session)
        # A single-stage schedule of torch's whose order pipefill does not know (forward only).
        sched = S._ScheduleForwardOnly(RecordingStage(0, P, P, 0, []), M)
        with pytest.raises(pft.ScheduleMismatchError,
                           match=r"^pipefill\.torch: rank 0: single-stage schedule "
                                 r"_ScheduleForwardOnly is not supported \(ScheduleGPipe, "
                                 r"Schedule1F1B, or any multi-stage schedule\)$"):
            pft.FilledSchedule(sched, session)
    # A multi-stage schedule whose action table has no row for its rank.
    with pipefill.Session(pipefill.compile(job("INTERLEAVED_1F1B", v=2)), 0) as session:
        sched, _ = make_schedule("ScheduleInterleaved1F1B", 0, v=2)
        sched.pipeline_order = {1: sched.pipeline_order[1]}
        if hasattr(sched, "pipeline_order_with_comms"):
            sched.pipeline_order_with_comms = None
        with pytest.raises(pft.ScheduleMismatchError,
                           match=r"^pipefill\.torch: rank 0: ScheduleInterleaved1F1B has no "
                                 r"action table for rank 0$"):
            pft.FilledSchedule(sched, session)


def test_session_of_another_rank_is_refused():
    plan = pipefill.compile(job("ONE_F_ONE_B"))
    sched, _ = make_schedule("Schedule1F1B", 2)
    with pipefill.Session(plan, 1) as session:
        with pytest.raises(pft.ScheduleMismatchError, match="rank 2: the session is for rank 1"):
            pft.FilledSchedule(sched, session)


def test_order_changed_after_wrapping_stops_before_the_compute():
    plan = pipefill.compile(job("INTERLEAVED_1F1B", v=2))
    sched, log = make_schedule("ScheduleInterleaved1F1B", 0, v=2)
    with pipefill.Session(plan, 0) as session:
        filled = pft.FilledSchedule(sched, session)
        # Swap 0F0 and 0F1 in the table torch's runtime runs (stage 0 receives nothing, so
        # torch itself would run the swapped order).
        row = sched.pipeline_order_with_comms[0]
        i, j = [k for k, a in enumerate(row) if a.computation_type == S.FORWARD][:2]
        row[i], row[j] = row[j], row[i]
        with pytest.raises(
            pft.ScheduleMismatchError,
            match=r"rank 0 ran 0F1 \(stage 0 forward micro-batch 1\) as compute action 0, where "
                  r"the plan has op 0: forward micro-batch 0 chunk 0 \(torch 0F0\)",
        ):
            run_step(filled.step)
        assert log == []  # refused before torch computed anything
        # The session is usable: no bubble was left open, the iteration was ended.
        assert session.report()["iterations"] == 1
        filled.close()


def test_devices_must_match_the_session_backend():
    plan = pipefill.compile(job("ONE_F_ONE_B"))
    # A stage on a GPU needs a CUDA session (fill on that GPU, gated on the stage's stream).
    sched, _ = make_schedule("Schedule1F1B", 0)
    sched._stage.device = torch.device("cuda", 0)
    with pipefill.Session(plan, 0) as session:
        assert session.backend == "host"
        with pytest.raises(ValueError, match=r"stage 0 is on cuda:0 but the session's backend is "
                                             r"'host': make it with pipefill.Session\(\.\.\., "
                                             r"backend='cuda'\)"):
            pft.FilledSchedule(sched, session)
    # CPU stages with a CUDA session (only its backend is read before the refusal: no GPU here).
    sched, _ = make_schedule("Schedule1F1B", 0)
    with pytest.raises(ValueError, match="stage 0 is on the CPU but the session's backend is "
                                         "'cuda'"):
        pft.FilledSchedule(sched, types.SimpleNamespace(backend="cuda"), check_all_ranks=False)
    # A rank's stages share one device.
    sched, _ = make_schedule("ScheduleInterleaved1F1B", 0, v=2)
    sched._stages[1].device = torch.device("cuda", 0)
    with pipefill.Session(plan, 0) as session:
        with pytest.raises(ValueError, match=r"^pipefill\.torch: this rank's stages are on "
                                             r"different devices \(cpu, cuda:0\); they must "
                                             r"share one$"):
            pft.FilledSchedule(sched, session)
    # A stage on another GPU than the session's fill (a stand-in CUDA session whose fill runs on
    # GPU 0: only its backend and fill_stream are read before the refusal).
    sched, _ = make_schedule("Schedule1F1B", 0)
    sched._stage.device = torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"^pipefill\.torch: stage 0 is on cuda:1 but the session "
                                         r"runs fill on GPU 0: make the session after "
                                         r"torch\.cuda\.set_device\(1\) \(it takes the GPU current "
                                         r"when it is made\)$"):
        pft.FilledSchedule(sched, types.SimpleNamespace(backend="cuda", fill_stream=(None, 0)),
                           check_all_ranks=False)


class GpuStage(RecordingStage):
    """A recording stage on cuda:0 whose compute keeps its stream busy for the plan's time
    (``torch.cuda._sleep``) and whose receives make the stream wait as long as the plan's
    bubble before that compute (a one-thread spin on the stream: the GPU's other SMs are
    free for fill, as while a real stream waits on a peer's NCCL send)."""

    def __init__(self, *args, spin_us, recv_wait_us):
        super().__init__(*args)
        self.device = torch.device("cuda", 0)
        self.spin_us, self.recv_wait_us = spin_us, recv_wait_us

    def forward_one_chunk(self, mb, args=(), kwargs=None, save_forward_output=True):
        self.spin_us(1000, timed=True)
        return super().forward_one_chunk(mb, args, kwargs, save_forward_output)

    def backward_one_chunk(self, mb, loss=None, full_backward=True, last_backward=False):
        self.spin_us(2000, timed=True)
        super().backward_one_chunk(mb, loss, full_backward, last_backward)

    def get_bwd_recv_ops(self, mb):
        self.spin_us(self.recv_wait_us.get(("backward", mb), 0.0))
        return []


def sleep_cycles_per_us():
    """Cycles of torch.cuda._sleep per microsecond on this GPU, from CUDA events: after a
    warm-up of about 0.2 s (an idle GPU's clock is low and rises under load; the first launch
    also loads the module), the median of three timed sleeps."""
    torch.cuda._sleep(100_000_000)
    torch.cuda.synchronize()
    rates = []
    for _ in range(3):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch.cuda._sleep(10_000_000)
        e1.record()
        e1.synchronize()
        rates.append(10_000_000 / (e0.elapsed_time(e1) * 1e3))
    return sorted(rates)[1]


def cuda_ready():
    """True with a GPU both torch and pipefill see; a GPU that only torch sees fails."""
    if not torch.cuda.is_available():
        return False
    if pipefill.cuda_device_count() == 0:
        pytest.fail("torch sees a CUDA device but pipefill.cuda_device_count() is 0 (a runtime "
                    "built without CUDA, or a CUDA runtime library mismatch)")
    return True


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device: the CUDA path of pipefill.torch has not run")


@needs_cuda
def test_cuda_stages_fill_the_streams_gaps():
    assert cuda_ready()
    torch.cuda.set_device(0)
    cycles_per_us = sleep_cycles_per_us()
    # Each compute's spin timed by its own pair of events: the truth the wrapper's marks (taken
    # around the whole compute call) are checked against, whatever the SM clock does.
    spins = []

    def spin_us(us, timed=False):
        if us <= 0:
            return
        if timed:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
        torch.cuda._sleep(int(us * cycles_per_us))
        if timed:
            e1.record()
            spins.append((e0, e1))

    # Compiled here, or precompiled (scripts/gpu-bundle.sh) where only the runtime module is.
    plan = compiled(CUDA_JOBS["1f1b"])
    session = pipefill.Session(plan, 0, world_size=P, backend="cuda")
    compute = [op for op in session.ops() if op["kind"] in COMPUTE]
    compute_index = [i for i, op in enumerate(session.ops()) if op["kind"] in COMPUTE]
    # The plan's bubble before each compute op, as the stream's wait in the receive before it.
    recv_wait_us, gap_bubble_us = {}, {}
    for b in session.bubbles():
        gap = len([i for i in compute_index if i <= b["after_op"]]) - 1
        gap_bubble_us[gap] = gap_bubble_us.get(gap, 0.0) + b["planned_duration_us"]
    for gap, us in gap_bubble_us.items():
        nxt = compute[gap + 1] if gap + 1 < len(compute) else None
        if nxt is not None and nxt["kind"] == "backward":
            recv_wait_us[("backward", nxt["microbatch"])] = us
    assert recv_wait_us, "the plan of stage 0 has bubbles before its backwards"

    log = []
    stage = GpuStage(0, P, P, 0, log, spin_us=spin_us, recv_wait_us=recv_wait_us)
    sched = S.Schedule1F1B(stage, M, loss_fn=lambda out, target: out)
    sched._initialize_stage = lambda *a, **k: None
    with pft.FilledSchedule(sched, session) as filled:
        for _ in range(4):
            spins.clear()
            run_step(filled.step)
        step = filled.last_step
    assert step["clock"] == "cuda_events"
    # The wrapper's CUDA events time what the stream did: each compute is its spin (measured by
    # the spin's own events, up to the host's launch gaps), about its nominal time; each emulated
    # wait its bubble.
    torch.cuda.synchronize()
    assert len(spins) == len(step["compute_us"]), (len(spins), step["compute_us"])
    for (label, us), (e0, e1) in zip(step["compute_us"], spins):
        own = e0.elapsed_time(e1) * 1e3
        assert own - 20 <= us <= 1.1 * own + 100, (label, us, own)
        want = 1000 if "F" in label else 2000
        assert 0.8 * want <= us <= 1.5 * want + 200, (label, us)
    for (kind, mb), want in recv_wait_us.items():
        gap = next(g for g, op in enumerate(compute) if op["kind"] == kind and
                   op["microbatch"] == mb) - 1
        assert 0.8 * want <= step["gap_us"][gap] <= 1.5 * want + 200, (gap, step["gap_us"][gap])
    # Fill ran in those gaps: chunks on the fill stream, bounded by the gaps' ends. On failure,
    # what the session did (a GPU run is rare: its message must say why by itself).
    report = session.report()
    why = {k: report.get(k) for k in ("iterations", "bubbles", "chunks_run", "chunks_deferred",
                                      "chunks_skipped", "chunks_pending", "chunks_split",
                                      "chunks_stopped_on_device", "samples_completed",
                                      "fill_us", "overrun_count")}
    why["jobs"] = [{k: j.get(k) for k in ("name", "iterations_held", "samples_held",
                                          "chunk_shapes")} for j in report.get("jobs", [])]
    # The first chunks too: a cold first run (a kernel loading inside the bubble) shows there.
    why["first_chunks"] = session.chunks()[:4]
    why["last_chunks"] = session.chunks()[-8:]
    why["bubbles_planned_us"] = {b["bubble_id"]: b["planned_duration_us"]
                                 for b in session.bubbles()}
    why["gap_us"] = step["gap_us"]
    assert step["chunks_run"] > 0 and step["samples_completed"] > 0, why
    # Bounded by the gaps' ends: the last step's chunks, deferred ones too (a chunk deferred from
    # an earlier bubble runs under the deadline of the one it runs in). Not the first step's,
    # whose cold start is not what the bound is about; and never an empty list.
    last = max(c["iteration"] for c in session.chunks())
    chunks = [c for c in session.chunks() if c["iteration"] == last]
    inside = [c for c in chunks if c["end_us"] <= c["deadline_us"] + 200]
    assert chunks and len(inside) >= 0.75 * len(chunks), chunks
    session.close()


def test_bad_duration_option():
    plan = pipefill.compile(job("ONE_F_ONE_B"))
    sched, _ = make_schedule("Schedule1F1B", 0)
    with pipefill.Session(plan, 0) as session:
        with pytest.raises(ValueError, match=r"^duration must be 'planned' or 'measured', "
                                             r"not 'guess'$"):
            pft.FilledSchedule(sched, session, duration="guess")


def test_compile_torch_schedule_errors(tmp_path):
    with pytest.raises(pipefill.CompileError, match=r"^the torch action table could not be "
                                                   r"imported\nbad\.csv:1:5: error: action '0X1'"):
        pipefill.compile_torch_schedule("0F0,0X1\n", job=job("ONE_F_ONE_B"), name="bad.csv")
    missing = tmp_path / "missing.pbtxt"
    with pytest.raises(FileNotFoundError,
                       match=r"^\[Errno 2\] cannot open JobSpec: '.*missing\.pbtxt'$") as e:
        pipefill.compile_torch_schedule("0F0\n", job=missing)
    assert e.value.filename == str(missing)
    with pytest.raises(TypeError, match=r"^compile_torch_schedule\(\) takes the table as text "
                                        r"\(str/bytes\) or a path \(os\.PathLike\), not int$"):
        pipefill.compile_torch_schedule(42, job=job("ONE_F_ONE_B"))
    with pytest.raises(TypeError, match=r"^job must be JobSpec text \(str/bytes\) or a path "
                                        r"\(os\.PathLike\), not dict$"):
        pipefill.compile_torch_schedule("0F0\n", job={"pipeline": {"stages": 1}})
    with pytest.raises(TypeError, match="name must be a str, not int"):
        pipefill.compile_torch_schedule("0F0\n", job=job("ONE_F_ONE_B"), name=3)
    # Ignored before: a name for a table read from a path, and an empty profile path.
    table = tmp_path / "t.csv"
    table.write_text("0F0\n")
    with pytest.raises(ValueError, match="a table read from a path is named by its path"):
        pipefill.compile_torch_schedule(table, job=job("ONE_F_ONE_B"), name="other.csv")
    with pytest.raises(ValueError, match="profile must be a non-empty path"):
        pipefill.compile_torch_schedule("0F0\n", job=job("ONE_F_ONE_B"), profile="")
    # JobSpec text goes through a temporary file; its errors name the JobSpec "<job>", not
    # that file (deleted by the time anyone reads them).
    with pytest.raises(pipefill.CompileError, match=r"<job>:1:1: error: pipeline.schedule") as e:
        pipefill.compile_torch_schedule("0F0,0B0\n", job="pipeline { stages: 1 microbatches: 1 }")
    assert "pipefill-job-" not in str(e.value)
    assert all("pipefill-job-" not in d for d in e.value.diagnostics)
    # A file name given as a str (text) is an error that says what to pass instead.
    with pytest.raises(pipefill.CompileError, match=r"hint: a str is JobSpec text, and "
                       r"'job-4x8.pbtxt' looks like a file name: pass pathlib.Path\('job-4x8.pbtxt'\) "
                       r"as job="):
        pipefill.compile_torch_schedule("0F0,0B0\n", job="job-4x8.pbtxt")
    with pytest.raises(pipefill.CompileError, match=r"hint: a str is schedule table text, and "
                       r"'zbv.csv' looks like a file name"):
        pipefill.compile_torch_schedule("zbv.csv", job=job("ONE_F_ONE_B"))


@pytest.mark.parametrize("exc", [KeyError, SystemExit, KeyboardInterrupt])
def test_failing_fill_task_is_raised_after_the_step(exc):
    """The task's exception must not stop the rank mid-step (its peers would wait for it),
    whatever its type (a task's sys.exit() too): torch's step completes, then the exception is
    raised; the task is disabled after it. last_step is the failed step's, its task steps
    before the failure counted (it was the step before's, or empty)."""
    if not hasattr(pipefill, "FillTask"):
        pytest.skip("this pipefill has no FillTask")

    class Boom(pipefill.FillTask):
        calls = 0

        def step(self):
            Boom.calls += 1
            if Boom.calls == 3:
                raise exc("fill task broke")
            return 1

    plan = pipefill.compile(job("ONE_F_ONE_B", fill=False))
    sched, log = make_schedule("Schedule1F1B", 0)
    # The waits for gradients last 20 ms here, so the bubbles before backwards are long
    # enough for the task's step to start.
    sched._stage.get_bwd_recv_ops = lambda mb: time.sleep(0.02) or []
    with pipefill.Session(plan, 0) as session:
        session.add_task(Boom(), step_us=10)
        with pft.FilledSchedule(sched, session) as filled:
            # The third call may come in a later step on a loaded machine (the bound admits
            # fewer steps): step until it raises.
            steps = 0
            for _ in range(50):
                before = Boom.calls
                del log[:]
                steps += 1
                try:
                    run_step(filled.step)
                except exc as e:
                    assert "fill task broke" in str(e)
                    break
                assert filled.last_step["task_steps"] == Boom.calls - before
            else:
                pytest.fail(f"the task's third call did not come in 50 steps ({Boom.calls} calls)")
            assert len(log) == 2 * M  # every compute action ran
            assert Boom.calls == 3
            # The raising step's record: its calls before the failing one.
            assert filled.last_step["task_steps"] == 2 - before
            assert filled.last_step["task_samples"] == 2 - before
            del log[:]
            run_step(filled.step)  # disabled: no further call, no error
            assert len(log) == 2 * M and Boom.calls == 3
            assert filled.last_step["task_steps"] == 0
        assert session.report()["iterations"] == steps + 1


REFUSAL_SCRIPT = r'''
import os, sys, datetime
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.distributed.pipelining import PipelineStage, Schedule1F1B
import pipefill, pipefill.torch as pft

JOB = """
name: "two"
pipeline {{ stages: 2 microbatches: {m} schedule: ONE_F_ONE_B }}
stage {{ forward_us: 1000 backward_us: 2000 }}
hardware {{ gpu_memory_bytes: 16000000000 }}
"""

def worker(rank, store):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    stage = PipelineStage(torch.nn.Linear(4, 4), rank, 2, torch.device("cpu"))
    sched = Schedule1F1B(stage, n_microbatches=4, loss_fn=lambda o, t: o.sum())
    # Rank 1's plan runs 6 micro-batches: only rank 1 sees the mismatch itself.
    plan = pipefill.compile(JOB.format(m=4 if rank == 0 else 6))
    with pipefill.Session(plan, rank) as session:
        # Each rank writes its verdict to a file of its own: two processes printing long
        # messages to one pipe interleave them.
        try:
            pft.FilledSchedule(sched, session)
            verdict = f"rank {rank} accepted"
        except pft.ScheduleMismatchError as e:
            verdict = f"rank {rank} raised: {e}"
        with open(store + f".rank{rank}", "w") as f:
            f.write(verdict)
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=2, join=True)
'''


def test_refusal_reaches_every_rank(tmp_path):
    """With a process group, a rank whose plan does not match makes every rank raise
    (all_gather of the verdicts), so no rank is left waiting for it: a real 2-process
    gloo run, under a timeout."""
    import subprocess

    script = tmp_path / "refusal.py"
    script.write_text(REFUSAL_SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "store")],
        capture_output=True, text=True, timeout=180,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert out.returncode == 0, out.stderr
    lines = []
    for r in range(2):
        path = tmp_path / f"store.rank{r}"
        assert path.exists(), f"rank {r} wrote no verdict: {out.stdout}{out.stderr}"
        lines.append(path.read_text())
    assert lines[0].startswith(
        "rank 0 raised: pipefill.torch: rank 1 refused its schedule: rank 1: the plan runs "
        "6 micro-batches but the schedule 4"), lines[0]
    assert lines[1].startswith(
        "rank 1 raised: pipefill.torch: rank 1: the plan runs 6 micro-batches but the "
        "schedule 4"), lines[1]


@needs_cuda
def test_cuda_fill_task_steps_run_on_the_fill_stream():
    """A FillTask on a CUDA session: each step runs with the session's fill stream as torch's
    current stream, and the runtime waits for that stream after the step, so the measured step
    time is its GPU work (a 2 ms sleep kernel), not the microseconds its launch took. The
    session's reads (tasks(), report()) release the GIL while they wait for the worker, which
    needs it for the Python step (they used to hang)."""
    assert cuda_ready()
    torch.cuda.set_device(0)
    cycles_per_us = sleep_cycles_per_us()
    session = pipefill.Session(compiled(CUDA_JOBS["1f1b"]), 0, world_size=P, backend="cuda")
    handle, gpu = session.fill_stream
    assert handle != 0 and gpu == 0
    streams = []

    class Spin(pipefill.FillTask):
        def step(self):
            streams.append(torch.cuda.current_stream().cuda_stream)
            torch.cuda._sleep(int(2000 * cycles_per_us))
            return 1

    session.add_task(Spin(), step_us=100, max_steps=4)
    main = torch.cuda.Stream(priority=-1)
    with torch.cuda.stream(main):
        with session.unplanned(1e6, stream=main):
            torch.cuda._sleep(int(100_000 * cycles_per_us))  # 100 ms of main's "wait"
        report = session.report()  # waits for the worker; must not hang
    task = session.tasks()[0]
    assert streams and set(streams) == {handle}, (streams, handle)
    assert task["steps"] == 4, task
    assert task["measured_us_p50"] >= 1500, task
    assert report["unplanned_bubbles"] == 1 and report["task_steps"] == 4, report
    session.close()


def test_a_step_whose_first_bubble_cannot_begin_does_not_break_the_next():
    # step() marked itself active and began its first bubble before its try: one failed begin
    # left it "inside a step" for good (RuntimeError on every later step).
    plan = pipefill.compile(job("ONE_F_ONE_B"))
    sched, log = make_schedule("Schedule1F1B", 1)
    with pipefill.Session(plan, 1) as session:
        with pft.FilledSchedule(sched, session) as filled:
            first = filled.bubble_gaps()[-1]
            session.begin(first)  # the step's first bubble_begin fails: a bubble is open
            for _ in range(2):
                with pytest.raises(pipefill.RunError, match="inside a bubble"):
                    run_step(filled.step)
            session.end(first)
            session.iteration_end()
            del log[:]
            run_step(filled.step)
            assert len(log) == 2 * M
            assert [r["bubble_id"] for r in filled.last_step["bubbles"]][0] == first


def test_step_after_close_is_refused():
    plan = pipefill.compile(job("ONE_F_ONE_B"))
    sched, log = make_schedule("Schedule1F1B", 1)
    with pipefill.Session(plan, 1) as session:
        filled = pft.FilledSchedule(sched, session)
        run_step(filled.step)
        filled.close()
        del log[:]
        with pytest.raises(RuntimeError, match=r"^pipefill\.torch: the FilledSchedule is closed "
                                               r"\(close\(\) restored the stages' methods\): "
                                               r"wrap the schedule again, or call "
                                               r"schedule\.step\(\) for an unfilled step$"):
            run_step(filled.step)
        assert log == []  # no torch step ran
        assert session.report()["iterations"] == 1


def test_step_from_inside_a_step_is_refused():
    # A stage whose forward calls the wrapper's step again: refused there, and the outer step
    # goes on and ends its iteration.
    plan = pipefill.compile(job("ONE_F_ONE_B"))
    sched, log = make_schedule("Schedule1F1B", 1)
    inner = []

    class Reentrant(RecordingStage):
        def forward_one_chunk(self, mb, *args, **kwargs):
            if not inner:
                with pytest.raises(RuntimeError, match=r"^pipefill\.torch: step\(\) called from "
                                                       r"inside a step$") as e:
                    run_step(filled.step)
                inner.append(e.value)
            return super().forward_one_chunk(mb, *args, **kwargs)

    sched._stage.__class__ = Reentrant
    with pipefill.Session(plan, 1) as session:
        with pft.FilledSchedule(sched, session) as filled:
            run_step(filled.step)
        assert len(inner) == 1 and len(log) == 2 * M
        assert session.report()["iterations"] == 1


@pytest.mark.parametrize("close_first", ["old", "new"])
def test_closing_one_of_two_wrappers_leaves_the_other(close_first):
    # Closing the older wrapper of a schedule wrapped twice removed the newer one's hooks: its
    # next step ran no compute it saw ("step ran 0 compute actions but the plan has 16").
    plan = pipefill.compile(job("ONE_F_ONE_B", 1))
    sched, log = make_schedule("Schedule1F1B", 1)
    with pipefill.Session(plan, 1, world_size=P) as session:
        old = pft.FilledSchedule(sched, session, duration="planned")
        new = pft.FilledSchedule(sched, session, duration="planned")
        stages = old._stages
        kept, closed = (new, old) if close_first == "old" else (old, new)
        closed.close()
        run_step(kept.step)
        assert kept.last_step["bubbles"], "the wrapper left open still fills"
        kept.close()
        for st in stages:  # both closed: the stages' own methods again
            for name in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
                assert name not in vars(st), name
