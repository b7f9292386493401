"""pipefill.torch: fill the bubbles of a torch.distributed.pipelining schedule.

:class:`FilledSchedule` wraps a torch pipelining schedule object (``ScheduleGPipe``,
``Schedule1F1B``, ``ScheduleInterleaved1F1B`` or any other
``_PipelineScheduleRuntime`` schedule, including one loaded from a CSV with
``_load_csv``) and this rank's :class:`pipefill.Session`. During
``filled.step(...)`` (same arguments as the schedule's ``step``) every compute
action torch runs on this rank is matched against the plan's compute ops
(``session.ops()``): right after the compute action that a bubble of the plan
follows, the bubble is begun (the session's worker thread runs its fill at the
lowest CPU priority), and it is ended right before the rank's next compute
action, so the time torch spends waiting in its receives is filled. After the
step, ``session.iteration_end()`` is called.

Example (one process per pipeline rank, gloo)::

    import pipefill, pipefill.torch
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    stage = PipelineStage(my_stage_module, rank, 4, torch.device("cpu"))
    schedule = Schedule1F1B(stage, n_microbatches=8, loss_fn=loss_fn)
    plan = pipefill.compile(JOB)          # pipeline { stages: 4 microbatches: 8 schedule: ONE_F_ONE_B }
    session = pipefill.Session(plan, rank, world_size=4)
    with pipefill.torch.FilledSchedule(schedule, session) as filled:
        for x, y in data:
            filled.step(x, target=y)      # or filled.step(x) on middle ranks
            optimizer.step()

How torch's actions map to the plan
-----------------------------------
A torch action is (stage index, F/B/I/W, micro-batch). A plan's compute op is
(kind forward/backward/backward_input/backward_weight, micro-batch, chunk) on
its device (= torch's pipeline rank). The chunk of a torch stage is its
position among the rank's own stages in ascending order: for interleaved
schedules (stage ``s`` on rank ``s mod p``) chunk ``c`` of rank ``r`` is stage
``c*p + r``, pipefill's own convention; for a V-shaped table imported from CSV
(rank ``r`` holds ``r`` and ``2p-1-r``) chunk 0 is ``r`` and chunk 1 is
``2p-1-r``, which is what ``pipefill-translate --import-torch-schedule``
assigns. F is forward, B (FULL_BACKWARD) backward, I backward_input, W
backward_weight; an OVERLAP_F_B group counts as its sub-actions in order.

The wrapper intercepts the stage objects' ``forward_one_chunk``,
``backward_one_chunk`` (``full_backward=False`` is I) and
``backward_weight_one_chunk``, the three calls through which every torch
schedule runs its compute (torch 2.15). A bubble whose ``after_op`` is a send
or a receive belongs to the gap after the last compute op at or before it;
``after_op = -1`` is the gap before the first compute (opened when ``step``
starts), and a bubble after the last compute is ended when ``step`` returns. If
the plan has several bubbles in one gap, the longest is begun (the session
defers the chunks of the others to later bubbles of their jobs).

Checks (each raises :class:`ScheduleMismatchError` naming the rank and op):
when the wrapper is made, the schedule's compute order on this rank (torch's
own ``pipeline_order_with_comms`` for multi-stage schedules, the order
``ScheduleGPipe``/``Schedule1F1B`` run for single-stage ones) must equal the
plan's op for op, and the stage count, micro-batch count and rank count must
match; with a process group the result is exchanged (``all_gather_object``),
so every rank raises together instead of some waiting for a peer that gave up.
A fill task whose ``step()`` raises is disabled by the session; the wrapper
lets torch's step finish (so no peer waits for this rank) and then raises the
task's exception from ``step``. During ``step`` every compute action is
checked against the plan before it runs; a mismatch there (the schedule was changed after wrapping, a custom
function bypassed the stage) raises on that rank before the compute, and its
peers fail at the process group's timeout (give ``init_process_group`` a
``timeout``).

CUDA: stages on a CUDA device need a CUDA session (``pipefill.Session(...,
backend="cuda")``, made with the stages' GPU current). Each bubble is then begun
and ended on the stage's current CUDA stream (``session.begin(k, d, stream=...)``,
the C API's CUDA sessions, docs/integration.md): the calls record events on the
stream and return at once, and the session's worker runs fill on a low-priority
stream of the same GPU from the moment the stream passes the begin event until it
passes the end event, so what is filled is the GPU's gap (the stream waiting in
torch's receives), not the host's. Gaps and compute actions are timed with CUDA
events on that stream instead of ``time.perf_counter``, and ``step`` waits for
the stream to finish the step's last action to read them. The CUDA path is
written but has not yet run on a GPU: its test
(``test_torch_wrapper.py::test_cuda_stages_fill_the_streams_gaps``) skips
without one; ``scripts/gpu-check.sh`` runs it on a GPU machine with the
runtime-only module ``pipefill._rt`` built for that machine's Python
(``scripts/gpu-bundle.sh``, docs/torch.md). A stage on a GPU with a host
session, or CPU stages with a CUDA session, is refused with :class:`ValueError`.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist
from torch.distributed.pipelining import schedules as _S

from ._session import Session

__all__ = [
    "FilledSchedule",
    "ScheduleMismatchError",
    "plan_compute_order",
    "torch_compute_order",
]

COMPUTE_KINDS = ("forward", "backward", "backward_input", "backward_weight")
# What last_step sums over the step's bubbles (fill jobs, then fill tasks).
_FILL_TOTALS = {"fill_us": 0.0, "chunks_run": 0, "samples_completed": 0, "end_wait_us": 0.0,
                "task_steps": 0, "task_samples": 0, "task_us": 0.0}
_LETTER = {"forward": "F", "backward": "B", "backward_input": "I", "backward_weight": "W"}
_KIND_OF_TYPE = {
    _S.FORWARD: "forward",
    _S.FULL_BACKWARD: "backward",
    _S.BACKWARD_INPUT: "backward_input",
    _S.BACKWARD_WEIGHT: "backward_weight",
}


class ScheduleMismatchError(RuntimeError):
    """The torch schedule and pipefill's plan disagree (shape or op order)."""


def _describe(kind: str, stage: int, mb: int) -> str:
    return f"{stage}{_LETTER[kind]}{mb} (stage {stage} {kind} micro-batch {mb})"


def _gpipe_order(stage: int, m: int) -> list[tuple[str, int, int]]:
    return [("forward", stage, i) for i in range(m)] + [("backward", stage, i) for i in range(m)]


def _one_f_one_b_order(stage: int, num_stages: int, m: int) -> list[tuple[str, int, int]]:
    # Schedule1F1B._step_microbatches: min(m, p - s) warm-up forwards, then B, F
    # alternating until every forward ran, then the remaining backwards.
    warmup = min(m, num_stages - stage)
    order = [("forward", stage, i) for i in range(warmup)]
    f, b = warmup, 0
    while True:
        order.append(("backward", stage, b))
        b += 1
        if f == m:
            break
        order.append(("forward", stage, f))
        f += 1
    order.extend(("backward", stage, i) for i in range(b, m))
    return order


def _local_stages(schedule: Any) -> list[Any]:
    if isinstance(schedule, _S.PipelineScheduleSingle):
        return [schedule._stage]
    if isinstance(schedule, _S.PipelineScheduleMulti):
        return list(schedule._stages)
    raise TypeError(
        f"pipefill.torch wraps torch.distributed.pipelining schedules, not {type(schedule).__name__}"
    )


def torch_compute_order(schedule: Any) -> list[tuple[str, int, int]]:
    """The compute actions ``schedule.step`` runs on this rank, in order, as
    ``(kind, torch stage index, micro-batch)``; kind is one of ``forward``,
    ``backward``, ``backward_input``, ``backward_weight``."""
    m = schedule._n_microbatches
    if isinstance(schedule, _S.PipelineScheduleSingle):
        stage = schedule._stage
        if isinstance(schedule, _S.Schedule1F1B):
            return _one_f_one_b_order(stage.stage_index, stage.num_stages, m)
        if isinstance(schedule, _S.ScheduleGPipe):
            return _gpipe_order(stage.stage_index, m)
        raise ScheduleMismatchError(
            f"pipefill.torch: single-stage schedule {type(schedule).__name__} is not supported "
            f"(ScheduleGPipe, Schedule1F1B, or any multi-stage schedule)"
        )
    table = getattr(schedule, "pipeline_order_with_comms", None) or schedule.pipeline_order
    if not table or schedule.rank not in table:
        raise ScheduleMismatchError(
            f"pipefill.torch: {type(schedule).__name__} has no action table for rank {schedule.rank}"
        )
    order: list[tuple[str, int, int]] = []

    def add(action: Any) -> None:
        if action is None:
            return
        if action.computation_type == _S.OVERLAP_F_B:
            for sub in action.sub_actions or ():
                add(sub)
            return
        kind = _KIND_OF_TYPE.get(action.computation_type)
        if kind is not None:
            order.append((kind, action.stage_index, action.microbatch_index))

    for action in table[schedule.rank]:
        add(action)
    return order


def plan_compute_order(session: Session) -> list[tuple[int, str, int, int]]:
    """The plan's compute ops on the session's rank: ``(op index, kind, micro-batch,
    chunk)`` in plan order (indices into ``session.ops()``)."""
    return [
        (i, op["kind"], int(op["microbatch"]), int(op["chunk"]))
        for i, op in enumerate(session.ops())
        if op["kind"] in COMPUTE_KINDS
    ]


class _HostClock:
    """Marks and spans on the host clock (``time.perf_counter``)."""

    def mark(self) -> Any:
        return time.perf_counter()

    def span_us(self, begin: Any, end: Any) -> float:
        return (end - begin) * 1e6

    def finish(self, last: Any) -> None:
        pass


class _CudaClock:
    """Marks recorded as CUDA events on the device's current stream: spans are the GPU's,
    readable once the stream has passed them (``finish`` waits for the last mark)."""

    def __init__(self, device: Any) -> None:
        self.device = device

    def stream(self) -> Any:
        return torch.cuda.current_stream(self.device)

    def mark(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record(self.stream())
        return event

    def span_us(self, begin: Any, end: Any) -> float:
        return float(begin.elapsed_time(end)) * 1e3  # ms -> us

    def finish(self, last: Any) -> None:
        last.synchronize()


def _stage_device(stages: list[Any]) -> Any:
    """The CUDA device of the stages (None: CPU stages); stages on different devices are
    refused (a rank's stages share its GPU and stream)."""
    devices = set()
    for st in stages:
        device = getattr(st, "device", None)
        devices.add(torch.device("cpu") if device is None else torch.device(device))
    if len(devices) > 1:
        raise ValueError(
            "pipefill.torch: this rank's stages are on different devices "
            f"({', '.join(sorted(str(d) for d in devices))}); they must share one"
        )
    device = devices.pop()
    return device if device.type == "cuda" else None


def _gap_of(compute_op_indices: list[int], after_op: int) -> int:
    """The compute position (0-based, -1: before the first) a bubble after op
    ``after_op`` follows: the last compute op at or before it."""
    gap = -1
    for pos, index in enumerate(compute_op_indices):
        if index <= after_op:
            gap = pos
        else:
            break
    return gap


class FilledSchedule:
    """A torch pipelining schedule whose ``step`` fills this rank's bubbles.

    ``schedule``: the torch schedule object of this rank. ``session``: this
    rank's :class:`pipefill.Session`, made from a plan of the same pipeline
    (``pipefill.compile`` of a JobSpec with the same stages, virtual stages,
    micro-batches and schedule, or :func:`pipefill.compile_torch_schedule` of the
    table the schedule runs). ``duration``: ``"planned"`` begins each bubble
    with its planned duration (times the session's ``time_scale``);
    ``"measured"`` (default) with the length this gap had in the previous step
    (filled or not), measured with ``time.perf_counter`` (the framework's own timer, what
    ``pfrt_session_bubble_begin`` takes; on CUDA with CUDA events on the stage's
    stream), planned the first time.
    ``check_all_ranks``: exchange the construction check over the stages'
    process group (collective: every rank must make its wrapper).

    Use as a context manager (or call :meth:`close`) to restore the stages'
    methods; the session is not closed.
    """

    def __init__(
        self,
        schedule: Any,
        session: Session,
        *,
        duration: str = "measured",
        check_all_ranks: bool = True,
    ) -> None:
        if duration not in ("planned", "measured"):
            raise ValueError(f"duration must be 'planned' or 'measured', not {duration!r}")
        self.schedule = schedule
        self.session = session
        self.duration = duration
        self._stages = _local_stages(schedule)
        refused: Optional[ValueError] = None
        try:
            error = self._check()
        except ValueError as e:  # devices and backend: raised after the exchange, like the others
            refused, error = e, str(e)
        if check_all_ranks and dist.is_available() and dist.is_initialized():
            group = self._stages[0].group
            errors: list[Optional[str]] = [None] * dist.get_world_size(group)
            dist.all_gather_object(errors, error, group=group)
            if error is None:
                others = [(r, e) for r, e in enumerate(errors) if e is not None]
                if others:
                    r, e = others[0]
                    error = f"pipefill.torch: rank {r} refused its schedule: {e}"
        if refused is not None:
            raise refused
        if error is not None:
            if not error.startswith("pipefill.torch:"):
                error = "pipefill.torch: " + error
            raise ScheduleMismatchError(error)

        # Bubbles per gap: the one to begin (the longest) and the planned durations.
        indices = [c[0] for c in self._compute]
        gaps: dict[int, list[dict[str, Any]]] = {}
        for b in session.bubbles():
            gaps.setdefault(_gap_of(indices, int(b["after_op"])), []).append(b)
        self._bubble_of_gap: dict[int, int] = {
            g: int(max(bs, key=lambda b: b["planned_duration_us"])["bubble_id"])
            for g, bs in gaps.items()
        }
        self._measured_us: dict[int, float] = {}
        self._clock: Any = _CudaClock(self._device) if self._device is not None else _HostClock()
        self._fill_totals = self._session_totals() if self._device is not None else None

        # Per-step state.
        self._closed = False
        self._active = False
        self._fill = False
        self._pos = 0
        self._open: Optional[tuple[int, int, float]] = None  # (gap, bubble id, begin time)
        self._gap_start: Optional[tuple[int, float]] = None
        self.last_step: dict[str, Any] = {}
        # (stage, method name, what it was (an instance attribute or not), our interceptor)
        self._originals: list[tuple[Any, str, Optional[Callable], Callable]] = []
        self._wrap()

    # -- checks ---------------------------------------------------------------------------------
    def _check_cuda_streams(self, s0: Any) -> None:
        """The session's fill stream is on the stages' GPU (a session takes the GPU current
        when it is made), and the stages' stream outranks it (else the GPU gives main's kernels
        no precedence over fill blocks: a warning)."""
        _, gpu = self.session.fill_stream
        index = self._device.index
        if index is None:
            index = torch.cuda.current_device()
        if gpu >= 0 and gpu != index:
            raise ValueError(
                f"pipefill.torch: stage {s0.stage_index} is on cuda:{index} but the session runs "
                f"fill on GPU {gpu}: make the session after torch.cuda.set_device({index}) (it "
                "takes the GPU current when it is made)"
            )
        fill = self.session._torch_stream()
        if fill is None:
            return
        main = torch.cuda.current_stream(torch.device("cuda", index))
        if main.priority >= fill.priority:  # CUDA: lower numbers are higher priorities
            warnings.warn(
                f"pipefill.torch: the stages' stream on cuda:{index} has priority "
                f"{main.priority}, not above the fill stream's ({fill.priority}): the GPU will "
                "not favour main's kernels over fill blocks. Run step() under "
                "torch.cuda.stream(torch.cuda.Stream(priority=-1)).",
                RuntimeWarning,
                stacklevel=3,
            )

    def _check(self) -> Optional[str]:
        """None when the schedule and the plan agree on this rank; else what differs."""
        s0 = self._stages[0]
        rank = int(s0.group_rank)
        self._device = _stage_device(self._stages)
        backend = getattr(self.session, "backend", "host")
        if self._device is not None and backend != "cuda":
            raise ValueError(
                f"pipefill.torch: stage {s0.stage_index} is on {self._device} but the session's "
                f"backend is {backend!r}: make it with pipefill.Session(..., backend='cuda') "
                "(fill then runs on a low-priority stream of that GPU, gated on the stage's "
                "stream)"
            )
        if self._device is None and backend == "cuda":
            raise ValueError(
                f"pipefill.torch: stage {s0.stage_index} is on the CPU but the session's backend "
                "is 'cuda': make it with pipefill.Session(..., backend='host')"
            )
        if self._device is not None:
            self._check_cuda_streams(s0)
        where = f"rank {rank}"
        if self.session.rank != rank:
            return f"{where}: the session is for rank {self.session.rank} of the plan"
        if self.session.ranks != int(s0.group_size):
            return (f"{where}: the plan has {self.session.ranks} ranks but the schedule's "
                    f"pipeline group has {s0.group_size}")
        self._compute = plan_compute_order(self.session)
        try:
            expected = torch_compute_order(self.schedule)
        except ScheduleMismatchError as e:
            # Its message starts with "pipefill.torch: " for callers of torch_compute_order; the
            # refusal puts that before the rank ("pipefill.torch: rank 0: pipefill.torch: ...").
            what = str(e)
            if what.startswith("pipefill.torch: "):
                what = what[len("pipefill.torch: "):]
            return f"{where}: {what}"
        local = sorted(int(st.stage_index) for st in self._stages)
        self._chunk_of = {s: c for c, s in enumerate(local)}
        self._stage_of = {c: s for c, s in enumerate(local)}
        chunks = 1 + max((c[3] for c in self._compute), default=-1)
        if chunks != len(local):
            return (f"{where}: the plan has {chunks} chunk(s) per rank but the schedule holds "
                    f"{len(local)} stage(s) on this rank ({local})")
        if self.session.ranks * chunks != int(s0.num_stages):
            return (f"{where}: the plan has {self.session.ranks} ranks x {chunks} chunk(s) but "
                    f"the schedule has {s0.num_stages} stages")
        m_plan = 1 + max((c[2] for c in self._compute), default=-1)
        m_torch = int(self.schedule._n_microbatches)
        if m_plan != m_torch:
            return (f"{where}: the plan runs {m_plan} micro-batches but the schedule "
                    f"{m_torch}")
        for pos, ((kind, stage, mb), (index, pkind, pmb, pchunk)) in enumerate(
            zip(expected, self._compute)
        ):
            if (kind, self._chunk_of.get(stage), mb) != (pkind, pchunk, pmb):
                return (f"{where}: {type(self.schedule).__name__} runs "
                        f"{_describe(kind, stage, mb)} as compute action {pos}, where the "
                        f"plan has op {index}: {self._plan_op_text(pos)}")
        if len(expected) != len(self._compute):
            return (f"{where}: {type(self.schedule).__name__} runs {len(expected)} compute "
                    f"actions but the plan has {len(self._compute)}")
        return None

    def _plan_op_text(self, pos: int) -> str:
        index, kind, mb, chunk = self._compute[pos]
        stage = self._stage_of.get(chunk, chunk)
        return f"{kind} micro-batch {mb} chunk {chunk} (torch {stage}{_LETTER[kind]}{mb})"

    # -- interception ---------------------------------------------------------------------------
    def _wrap(self) -> None:
        for st in self._stages:
            for name, kind_of in (
                ("forward_one_chunk", lambda a, kw: "forward"),
                ("backward_one_chunk",
                 lambda a, kw: "backward"
                 if kw.get("full_backward", a[1] if len(a) > 1 else True)
                 else "backward_input"),
                ("backward_weight_one_chunk", lambda a, kw: "backward_weight"),
            ):
                original = getattr(st, name)
                own = vars(st).get(name)  # an earlier wrapper's interceptor, else None
                interceptor = self._intercept(st, original, kind_of)
                interceptor._pipefill_wrapped = (self, own)  # type: ignore[attr-defined]
                setattr(st, name, interceptor)
                self._originals.append((st, name, own, interceptor))

    def _intercept(self, stage: Any, original: Callable, kind_of: Callable) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            if not self._active or self._closed:
                return original(*args, **kwargs)
            mb = args[0] if args else kwargs.get("fwd_chunk_id", kwargs.get("bwd_chunk_id"))
            kind, index = kind_of(args[1:], kwargs), int(stage.stage_index)
            self._before_compute(kind, index, int(mb))
            t0 = self._clock.mark()
            result = original(*args, **kwargs)
            t1 = self._clock.mark()
            self._compute_marks.append((f"{index}{_LETTER[kind]}{int(mb)}", t0, t1))
            self._after_compute(t1)
            return result

        call.__wrapped__ = original  # type: ignore[attr-defined]
        return call

    def close(self) -> None:
        """Restores the stages' methods (the wrapper no longer fills); :meth:`step` then
        raises. A schedule wrapped again after this one keeps its own wrapper: where a later
        wrapper sits over this one's, this one's only passes calls through from now on."""
        self._closed = True
        for st, name, own, interceptor in reversed(self._originals):
            if vars(st).get(name) is not interceptor:
                continue  # wrapped over: the later wrapper calls ours, which passes through
            # Earlier wrappers closed while wrapped over by this one go with it.
            while own is not None and getattr(own, "_pipefill_wrapped", (None,))[0] is not None \
                    and own._pipefill_wrapped[0]._closed:
                own = own._pipefill_wrapped[1]
            if own is None:
                delattr(st, name)
            else:
                setattr(st, name, own)
        self._originals.clear()

    def __enter__(self) -> "FilledSchedule":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one step --------------------------------------------------------------------------------
    def step(self, *args: Any, fill: bool = True, **kwargs: Any) -> Any:
        """Runs ``schedule.step(*args, **kwargs)``, filling this rank's bubbles.

        ``fill=False`` runs the step with the order still checked and the gaps
        measured, but no bubble begun and no ``iteration_end`` (the session's
        fill waits): for measuring the main job alone. Afterwards, also after a
        step that raised, :attr:`last_step` holds what was measured, on the clock named in ``clock``
        (``"perf_counter"``, or ``"cuda_events"`` on the stage's stream for CUDA
        stages): the step's wall time ``step_s`` (host), every compute action's
        time (``compute_us``: ``[("2F3", us), ...]``, the stage's own call, without
        the waits around it), every gap's length (``gap_us``: gap -> us, -1
        before the first compute) and, per begun bubble, what ``bubble_end``
        returned (``bubbles``); ``fill_us``, ``chunks_run``,
        ``samples_completed``, ``end_wait_us`` for the plan's fill jobs and
        ``task_steps``, ``task_samples``, ``task_us`` for fill tasks sum the
        bubbles (on CUDA, where ``bubble_end`` returns before the GPU has run
        the bubble, they are the session's totals over the step)."""
        if self._closed:
            raise RuntimeError(
                "pipefill.torch: the FilledSchedule is closed (close() restored the stages' "
                "methods): wrap the schedule again, or call schedule.step() for an unfilled step"
            )
        if self._active:
            raise RuntimeError("pipefill.torch: step() called from inside a step")
        self._active, self._fill, self._pos, self._open = True, fill, 0, None
        self._results: list[dict[str, Any]] = []
        self._gap_marks: list[tuple[int, Any, Any]] = []
        self._compute_marks: list[tuple[str, Any, Any]] = []
        self._fill_error: Optional[BaseException] = None
        t0 = time.perf_counter()
        failed = True
        try:
            # Inside the try: a bubble that cannot begin fails this step, not every later one.
            self._enter_gap(-1, self._clock.mark())
            out = self.schedule.step(*args, **kwargs)
            failed = False
        finally:
            try:
                last = self._clock.mark()
                self._leave_gap(last)
                # CUDA: the marks are events on the stage's stream; wait for the last one.
                self._clock.finish(last)
                now = time.perf_counter()
                gaps_us = self._read_spans()
                if fill:
                    try:
                        self.session.iteration_end()
                    except Exception:  # noqa: BLE001 - the step's own error goes first
                        if not failed:
                            raise
                # What this step did, also when it or a fill task failed (the bubbles that
                # ended are counted; a stale record of the step before would count twice).
                try:
                    self._record_step(fill, now - t0, gaps_us)
                except Exception:  # noqa: BLE001 - the step's own error goes first
                    if not failed and self._fill_error is None:
                        raise
            finally:
                self._active = False
        if self._fill_error is not None:
            # A fill task's step failed in a bubble (pipefill.FillTask: its own exception).
            error, self._fill_error = self._fill_error, None
            raise error
        if self._pos != len(self._compute):
            raise ScheduleMismatchError(
                f"pipefill.torch: rank {self.session.rank}: step ran {self._pos} compute actions "
                f"but the plan has {len(self._compute)} (next: {self._plan_op_text(self._pos)})"
            )
        return out

    def _record_step(self, fill: bool, step_s: float, gaps_us: dict[int, float]) -> None:
        self.last_step = {
            "fill": fill,
            "step_s": step_s,
            "clock": "cuda_events" if self._device is not None else "perf_counter",
            "bubbles": self._results,
            "gap_us": gaps_us,
            "compute_us": self._compute_us,
        }
        if self._fill_totals is None:
            totals = {k: sum((r.get(k, zero) for r in self._results), zero)
                      for k, zero in _FILL_TOTALS.items()}
        else:
            # CUDA: bubble_end returns before the GPU has run the bubble (its result is zeros);
            # the session's totals, read once the stream has passed the step, say what ran.
            now_totals = self._session_totals()
            totals = {k: now_totals[k] - self._fill_totals[k] for k in _FILL_TOTALS}
            self._fill_totals = now_totals
        self.last_step.update(totals)

    def _session_totals(self) -> dict[str, Any]:
        report = self.session.report()
        return {k: report.get(k, zero) for k, zero in _FILL_TOTALS.items()}

    def _read_spans(self) -> dict[int, float]:
        """Gap and compute times of the step from the clock's marks (the next step's
        ``duration="measured"`` bubbles use the gaps)."""
        gaps_us = {}
        for gap, begin, end in self._gap_marks:
            gaps_us[gap] = self._clock.span_us(begin, end)
            self._measured_us[gap] = gaps_us[gap]
        self._compute_us = [(label, self._clock.span_us(a, b))
                            for label, a, b in self._compute_marks]
        return gaps_us

    def _before_compute(self, kind: str, stage: int, mb: int) -> None:
        self._leave_gap(self._clock.mark())
        pos = self._pos
        if pos >= len(self._compute):
            raise ScheduleMismatchError(
                f"pipefill.torch: rank {self.session.rank} ran {_describe(kind, stage, mb)} "
                f"after all {len(self._compute)} compute ops of the plan"
            )
        _, pkind, pmb, pchunk = self._compute[pos]
        if (kind, self._chunk_of.get(stage), mb) != (pkind, pchunk, pmb):
            raise ScheduleMismatchError(
                f"pipefill.torch: rank {self.session.rank} ran {_describe(kind, stage, mb)} as "
                f"compute action {pos}, where the plan has op {self._compute[pos][0]}: "
                f"{self._plan_op_text(pos)}"
            )

    def _after_compute(self, mark: Any) -> None:
        self._pos += 1
        self._enter_gap(self._pos - 1, mark)

    def _enter_gap(self, gap: int, mark: Any) -> None:
        self._gap_start = (gap, mark)
        if not self._fill:
            return
        bubble = self._bubble_of_gap.get(gap)
        if bubble is None:
            return
        duration_us = self._measured_us.get(gap, 0.0) if self.duration == "measured" else 0.0
        if self._device is not None:
            self.session.begin(bubble, duration_us, stream=self._clock.stream())
        else:
            self.session.begin(bubble, duration_us)
        self._open = (gap, bubble, mark)

    def _leave_gap(self, mark: Any) -> None:
        if self._gap_start is not None:
            gap, began = self._gap_start
            # Marked before bubble_end (which may wait for a chunk in flight).
            self._gap_marks.append((gap, began, mark))
            self._gap_start = None
        if self._open is not None:
            gap, bubble, _ = self._open
            self._open = None
            try:
                result = dict(self.session.end(bubble))
            except BaseException as e:  # noqa: BLE001 - a fill task's error, raised after the step
                # Raising here would stop this rank before its next compute and leave its
                # peers waiting for it; the step finishes first (the failed task is disabled).
                # Any exception: a task's SystemExit or KeyboardInterrupt too (the session
                # raises it in the task's own type). The bubble ended all the same: its
                # numbers count in the step's.
                if self._fill_error is None:
                    self._fill_error = e
                ended = getattr(self.session, "_failed_end", None)
                if ended is None:
                    return
                result = dict(ended)
            result["bubble_id"] = bubble
            result["gap"] = gap
            self._results.append(result)

    # -- what the plan says ---------------------------------------------------------------------
    def bubble_gaps(self) -> dict[int, int]:
        """Gap (compute position after which, -1: before the first) -> bubble begun there."""
        return dict(self._bubble_of_gap)

    def gap_actions(self) -> dict[int, str]:
        """Gap -> the torch action after which the bubble opens (``"start"`` for -1), e.g.
        ``{-1: "start", 3: "0F3", ...}``."""
        out = {}
        for gap in self._bubble_of_gap:
            if gap < 0:
                out[gap] = "start"
            else:
                _, kind, mb, chunk = self._compute[gap]
                out[gap] = f"{self._stage_of[chunk]}{_LETTER[kind]}{mb}"
        return out
