"""pipefill.Session: one rank's bubbles handed to pipefill by a training loop
that owns its schedule (the runtime's pfrt_session_* calls).

Example (one process per pipeline rank)::

    import pipefill
    plan = pipefill.compile_file("job.pbtxt")
    with pipefill.Session(plan, rank) as session:
        for step in range(steps):
            for op in ...:                       # the framework's own forward/backward/sends
                ...
                if a bubble k of the plan follows this op:
                    with session.bubble(k) as b: # fill runs on a worker thread meanwhile
                        wait_for_the_peer()
                    print(b.result["chunks_run"])
            session.iteration_end()
        print(session.report()["samples_completed"])
"""

from __future__ import annotations

import atexit
import errno
import os
import pickle
import sys
import tempfile
import weakref
from typing import Any, Callable, ContextManager, Optional, Union

from ._native import Plan, native, native_name, native_option, native_path
from ._errors import RunError
from ._tasks import FillTask, _TaskRunner

__all__ = ["Session", "BubbleScope"]


def _stream_handle(stream: Any) -> int:
    """The cudaStream_t value of ``stream`` (None: 0, the legacy default stream)."""
    if stream is None:
        return 0
    handle = getattr(stream, "cuda_stream", stream)
    if not isinstance(handle, int) or isinstance(handle, bool) or handle < 0:
        raise TypeError(
            "stream must be a CUDA stream (an object with cuda_stream, e.g. torch.cuda.Stream) "
            f"or a cudaStream_t as a non-negative int, not {type(stream).__name__}"
        )
    if handle >= 2**64:  # a pointer: nanobind's refusal would only list begin()'s signature
        raise ValueError(f"stream {handle:#x} is not a cudaStream_t: it is past 2**64")
    return handle


# Sessions not closed yet, closed at the interpreter's exit (before it finalizes): a session's
# worker may be running a Python task's step in an open bubble, and a thread that takes the GIL
# while the interpreter finalizes is ended by CPython, which aborted the process.
_live_sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()


@atexit.register
def _close_live_sessions() -> None:
    for session in list(_live_sessions):
        try:
            session.close()
        except Exception:  # noqa: BLE001 - the exit goes on; a failed close has nobody to tell
            pass


def _add_note(exc: BaseException, note: str) -> None:
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(note)


def _weak_step_context(session: "Session") -> Callable[[], Any]:
    """``session._step_context`` without a reference to the session: the runtime's session
    holds the task runners, so a runner holding its Session would keep both alive for good."""
    method = weakref.WeakMethod(session._step_context)

    def context() -> Any:
        bound = method()
        return None if bound is None else bound()

    return context


# The status of a call the runtime refused (a wrong bubble id, no open bubble, a call from a
# fill task's step): the call did nothing, and a fill task's failure waits for the bubble's
# real end (a task's failure in a bubble has another status: PFRT_ERROR_INTERNAL from a
# Python step).
_REFUSED = "PFRT_ERROR_INVALID_ARGUMENT"


class BubbleScope:
    """What ``with session.bubble(k) as b`` yields: ``b.result`` holds the dict
    that bubble_end returned (chunks_run, chunks_deferred, samples_completed and
    the measured fill_us, overrun_us, end_wait_us) once the block has exited, also
    when a fill task failed in the bubble (the bubble ended all the same)."""

    def __init__(self, bubble: Optional[int]) -> None:
        self.bubble = bubble
        self.result: Optional[dict[str, Any]] = None


class _BubbleBlock:
    """The context manager of :meth:`Session.bubble` and :meth:`Session.unplanned`:
    ``begin()`` on entry, :meth:`Session._finish` on exit. A class, not a
    ``contextlib.contextmanager`` generator: an exception raised at the exit (a fill
    task's, as it was raised in ``step()``) would go through the generator, which
    turns a ``StopIteration`` (an exhausted data iterator) into ``RuntimeError``
    (PEP 479)."""

    def __init__(self, session: "Session", scope: BubbleScope, end_id: int, wait: bool,
                 begin: Callable[[], None]) -> None:
        self._session, self._scope, self._end_id = session, scope, end_id
        self._wait, self._begin = wait, begin

    def __enter__(self) -> BubbleScope:
        self._begin()
        return self._scope

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        if exc is None:
            self._session._finish(self._scope, self._end_id, self._wait)
        else:
            self._session._finish(self._scope, self._end_id, self._wait, raising=exc)


class Session:
    """One rank's fill session (``pfrt_session``).

    ``program``: a :class:`pipefill.Plan` (lowered here, one loop), StreamProgram
    bytes (binary or text), or a path. ``rank``: this process's pipeline rank (a
    device of the plan). ``world_size`` (nonzero): the launcher's world size,
    checked against the plan's ranks. ``time_scale``: real microseconds per
    planned microsecond (planned bubble durations and chunk predictions are
    scaled by it). ``fill_policy``: ``"bounded"`` (a chunk starts only if its
    predicted time fits what is left of the bubble; otherwise the longest head of
    it, whole layers, that fits runs and the rest waits, in order, for a later
    bubble), ``"whole"`` (a chunk that does not fit waits whole) or
    ``"unbounded"``. ``fill_idle_priority``: the fill
    worker thread runs at the lowest CPU priority. ``backend``: ``"host"`` (fill on
    a worker thread of this process) or ``"cuda"`` (the C API's CUDA session: chunks
    on a low-priority stream of the GPU current on this thread, each bubble gated
    on the framework's stream, given to :meth:`bubble` as ``stream``; without a CUDA
    device :class:`pipefill.RunError` with status ``PFRT_ERROR_UNAVAILABLE``; not yet
    run on a GPU, docs/integration.md). ``end_at_once`` (host): :meth:`end` and
    :meth:`iteration_end` return at once, as on CUDA; a chunk in flight finishes its
    pass on the worker afterwards, and the bubble's result is all zeros (:meth:`report`
    has the numbers and waits for the worker); for a loop that must not wait for fill
    when its bubble ends.

    Threads: the C session takes one call at a time; this object serializes them, so
    threads may share it (a call waits for another thread's call, e.g. :meth:`close`
    for a :meth:`wait` in progress, and a call after :meth:`close` raises
    :class:`pipefill.RunError` "the session is closed"). Bubbles still follow one
    schedule order, whichever thread begins them.

    Every misuse (unknown bubble, a bubble begun twice, ``iteration_end`` inside a
    bubble, a rank outside the plan, ...) raises :class:`pipefill.RunError` with
    the runtime's message (``.status`` is e.g. ``PFRT_ERROR_INVALID_ARGUMENT``);
    bad option values raise :class:`ValueError`, options of the wrong type
    :class:`TypeError` naming the option (numpy scalars are fine).
    """

    def __init__(
        self,
        program: Union[Plan, bytes, str, "os.PathLike[str]"],
        rank: int,
        *,
        world_size: int = 0,
        time_scale: float = 1.0,
        max_dim: int = 0,
        fill_policy: str = "bounded",
        fill_idle_priority: bool = True,
        backend: str = "host",
        end_at_once: bool = False,
    ) -> None:
        if isinstance(program, Plan):
            data, name = program.stream_program(iterations=1), f"<plan {program.name}>"
        elif isinstance(program, (bytes, bytearray, memoryview)):
            data, name = bytes(program), "<memory>"
        elif isinstance(program, (str, os.PathLike)):
            name = os.fspath(program)
            with open(name, "rb") as f:
                data = f.read()
        else:
            raise TypeError(
                f"Session() takes a Plan, StreamProgram bytes or a path, not {type(program).__name__}"
            )
        self._s = native.open_session(
            data,
            name,
            native_option(rank, "int", "rank"),
            native_option(world_size, "int", "world_size"),
            native_option(time_scale, "number", "time_scale"),
            native_option(max_dim, "int", "max_dim"),
            native_option(fill_policy, "str", "fill_policy"),
            native_option(fill_idle_priority, "bool", "fill_idle_priority"),
            native_option(backend, "str", "backend"),
            native_option(end_at_once, "bool", "end_at_once"),
        )
        self._runners: list[_TaskRunner] = []
        self._backend = backend
        # end(): the numbers of the last bubble whose end raised (it ended all the same).
        self._failed_end: Optional[dict[str, Any]] = None
        self._torch_fill_stream: Any = None
        _live_sessions.add(self)

    # -- the plan, as this rank sees it -------------------------------------------------------
    @property
    def rank(self) -> int:
        return int(self._s.info()["rank"])

    @property
    def backend(self) -> str:
        """``"host"`` or ``"cuda"``, as given when the session was made."""
        return self._backend

    @property
    def ranks(self) -> int:
        """Number of ranks (devices) of the plan."""
        return int(self._s.info()["ranks"])

    def bubbles(self) -> list[dict[str, Any]]:
        """This rank's bubbles in schedule order (dicts: bubble_id, kind, after_op,
        planned_start_us, planned_duration_us, free_bytes, chunks, planned_fill_us)."""
        return self._s.bubbles()

    def ops(self) -> list[dict[str, Any]]:
        """This rank's main work in plan order (dicts: kind forward/backward/.../send/recv,
        microbatch, chunk, peer, tag, bytes, planned_us, planned_start_us)."""
        return self._s.ops()

    # -- bubbles -------------------------------------------------------------------------------
    def bubble(
        self, bubble: int, duration_us: float = 0.0, *, wait: bool = False, stream: Any = None
    ) -> ContextManager[BubbleScope]:
        """``with session.bubble(k): ...``: fill runs on the session's worker thread
        while the block runs (the block is the framework's own work or wait); the
        exit ends the bubble (no chunk starts after it; the one in flight is waited
        for). ``duration_us`` > 0 replaces the planned duration (the framework's
        own timer). ``wait=True`` gives the whole bubble to fill: the exit first
        waits until nothing more fits (unless the block raised: then the bubble
        ends at once). ``stream`` (CUDA sessions): the stream the
        bubble follows, a ``torch.cuda.Stream`` (anything with ``cuda_stream``) or
        a ``cudaStream_t`` as an int; ``None``: the legacy default stream. A host
        session refuses a stream."""
        bubble = native_option(bubble, "int", "bubble")
        duration = native_option(duration_us, "number", "duration_us")
        handle = _stream_handle(stream)
        return _BubbleBlock(self, BubbleScope(bubble), bubble, wait,
                            lambda: self._s.begin(bubble, duration, handle))

    def unplanned(
        self, duration_us: float, *, wait: bool = False, stream: Any = None
    ) -> ContextManager[BubbleScope]:
        """A bubble the plan did not predict (a slow peer), bounded by ``duration_us``:
        runs deferred work, then pulls this iteration's planned chunks forward.
        ``stream``: as for :meth:`bubble`."""
        duration = native_option(duration_us, "number", "duration_us")
        handle = _stream_handle(stream)
        return _BubbleBlock(self, BubbleScope(None), native.SESSION_UNPLANNED, wait,
                            lambda: self._s.begin_unplanned(duration, handle))

    def _finish(
        self, scope: BubbleScope, bubble: int, wait: bool, raising: Optional[BaseException] = None
    ) -> None:
        # Ends the bubble even when the wait reports a failed task, then raises the first error:
        # a fill task's own exception (its type and message), else the runtime's. When the block
        # is raising (an error of the framework, Ctrl-C) the bubble ends at once, without the
        # wait (the framework is leaving, and the wait would hold it for the rest of the bubble),
        # and the block's exception goes on: a fill failure becomes a note on it.
        error: Optional[RunError] = None
        if wait and raising is None:
            try:
                self._s.wait()
            except RunError as e:
                error = e
        try:
            scope.result = self._s.end(bubble)
        except RunError as e:
            scope.result = e.bubble_result
            error = error or e
        if raising is not None:
            self._note_task_error(raising, error)
            return
        self._raise_task_error(error)

    def _note_task_error(self, raising: BaseException, error: Optional[RunError]) -> None:
        """Attaches a failed task's exception (else the runtime's error) to ``raising`` as a
        note, for the block's own exception to go on."""
        noted = False
        for runner in self._runners:
            if runner.error is not None:
                exc, runner.error = runner.error, None
                noted = True
                _add_note(raising, f"(while this propagated, pipefill fill task {runner.name!r} "
                                   f"failed: {type(exc).__name__}: {exc}; the task is disabled)")
        if not noted and error is not None:
            _add_note(raising, f"(while this propagated, the bubble's end reported: {error})")

    def _checked(self, call: Callable[..., Any], *args: Any) -> Any:
        """A native call that waits for the worker. With ``end_at_once`` (and on CUDA) a bubble's
        end returns before its fill ran, so a fill task that fails after it is reported by the
        next such call: the task's own exception is raised, as :meth:`end` raises it."""
        try:
            return call(*args)
        except RunError as e:
            if e.status != _REFUSED:
                self._raise_task_error(e)
            raise

    def _raise_task_error(self, error: Optional[RunError]) -> None:
        """Raises the first failed task's exception (its own type), with a note for each other
        task that failed in the same bubble (all are disabled: each failure is reported once,
        at the end of the bubble it failed in, or with ``end_at_once`` at the first call after
        it that waits for the worker); else ``error``."""
        failed = [r for r in self._runners if r.error is not None]
        if not failed:
            if error is not None:
                raise error
            return
        errors = []
        for runner in failed:
            errors.append(runner.error)
            runner.error = None
        exc = errors[0]
        _add_note(exc, f"(raised by a step of pipefill fill task {failed[0].name!r}, "
                       f"which is now disabled)")
        for runner, other in zip(failed[1:], errors[1:]):
            _add_note(exc, f"(pipefill fill task {runner.name!r} failed in the same bubble too: "
                           f"{type(other).__name__}: {other}; it is disabled as well)")
        if error is not None:
            raise exc from error
        raise exc

    @property
    def fill_stream(self) -> tuple[int, int]:
        """``(stream, gpu)``: the CUDA stream the session's worker runs fill on (a
        ``cudaStream_t`` as an integer) and its GPU; ``(0, -1)`` on the host. A
        :class:`pipefill.FillTask` on a CUDA session should put its GPU work there
        (torch does, see :meth:`add_task`); the runtime waits for it after every step."""
        handle, gpu = self._s.fill_stream()
        return int(handle), int(gpu)

    def _torch_stream(self) -> Any:
        """The fill stream as a ``torch.cuda.ExternalStream`` (made once); None on the host
        or without torch imported (this never imports torch itself)."""
        torch = sys.modules.get("torch")
        if self._backend != "cuda" or torch is None:
            return None
        if self._torch_fill_stream is None:
            handle, gpu = self.fill_stream
            if not handle:
                return None
            self._torch_fill_stream = torch.cuda.ExternalStream(
                handle, device=torch.device("cuda", gpu)
            )
        return self._torch_fill_stream

    def _step_context(self) -> Any:
        """The context a task's step runs in (on the worker thread): on a CUDA session
        with torch imported, ``torch.cuda.stream`` of the fill stream; else None."""
        stream = self._torch_stream()
        return None if stream is None else sys.modules["torch"].cuda.stream(stream)

    # -- fill tasks ----------------------------------------------------------------------------
    def add_task(
        self,
        task: FillTask,
        *,
        step_us: float,
        memory_bytes: int = 0,
        max_steps: int = 0,
        name: Optional[str] = None,
    ) -> int:
        """Registers a :class:`pipefill.FillTask` (outside bubbles); returns its id.

        In every bubble the plan's fill chunks go first; then the tasks, round-robin,
        one ``task.step()`` at a time on the worker thread, each only if its predicted
        time fits what is left of the bubble (bounded policy) and ``memory_bytes`` fits
        the bubble's free bytes. ``step_us``: estimated real microseconds per step
        (> 0, at most 1e9); the prediction starts at 1.2 x it and then follows the measured steps
        (max of 1.2 x median and the 90th percentile of the last 32). ``max_steps``:
        stop after that many steps in all (checkpointed steps count; 0: no limit).
        ``name``: unique in the session (default: ``task.name`` or the class name).
        """
        if not isinstance(task, FillTask):
            raise TypeError(f"add_task takes a pipefill.FillTask, not {type(task).__name__}")
        if name is None:
            name = task.name if task.name is not None else type(task).__name__
            what = f"{type(task).__name__}.name"
        else:
            what = "name"
        name = native_name(name, what)
        if not name:
            raise ValueError(f"{what} must not be empty (it names the task in reports and "
                             f"checkpoints)")
        step = native_option(step_us, "number", "step_us")
        if not 0 < step <= 1e9:
            # A step over 1000 s would fit no bubble: the task would never run.
            raise ValueError(f"step_us must be > 0 and at most 1e9 (1000 s; the estimated real "
                             f"us of one step), got {step!r}")
        runner = _TaskRunner(task, name, _weak_step_context(self))
        tid = int(
            self._s.task_add(
                name,
                runner,
                step,
                native_option(memory_bytes, "int", "memory_bytes"),
                native_option(max_steps, "int", "max_steps"),
            )
        )
        while len(self._runners) <= tid:
            self._runners.append(runner)
        self._runners[tid] = runner
        return tid

    def tasks(self) -> list[dict[str, Any]]:
        """One dict per fill task, in the order added: name, steps, samples (both with
        those restored from a checkpoint), steps_this_run, samples_this_run, the
        measured step times (measured_us_p50/p90 over the last 32, max, mean),
        predicted_us (what the bound uses next), task_us, skipped_no_fit,
        skipped_memory, overruns, overrun_us, done, failed. Between bubbles."""
        return self._checked(lambda: [self._s.task_get(t) for t in range(self._s.task_count())])

    def begin(self, bubble: int, duration_us: float = 0.0, *, stream: Any = None) -> None:
        """pfrt_session_bubble_begin (prefer ``with session.bubble(k)``); ``stream`` as for
        :meth:`bubble`."""
        self._s.begin(native_option(bubble, "int", "bubble"),
                      native_option(duration_us, "number", "duration_us"), _stream_handle(stream))

    def end(self, bubble: int) -> dict[str, Any]:
        """pfrt_session_bubble_end; ``bubble`` -1 ends an unplanned one."""
        bubble = native_option(bubble, "int", "bubble")
        self._failed_end = None
        try:
            return self._s.end(bubble)
        except RunError as e:
            if e.status != _REFUSED:
                # The bubble ended all the same: its numbers, for a caller that goes on
                # (pipefill.torch counts them in the step's totals).
                self._failed_end = e.bubble_result
                self._raise_task_error(e)
            raise

    def wait(self) -> None:
        """Blocks until the open bubble has nothing more to start."""
        self._checked(self._s.wait)

    def iteration_end(self) -> None:
        """Ends this rank's iteration (chunks of bubbles not begun wait for later ones)."""
        self._s.iteration_end()

    # -- progress and reports ------------------------------------------------------------------
    def checkpoint_save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the fill progress (pfrt_session_checkpoint_save): the plan's jobs, and per
        fill task its steps, samples and ``task.state_dict()`` pickled into the same file
        (one crash-safe, checksummed file)."""
        path = native_path(path, "the checkpoint path")
        for tid, runner in enumerate(self._runners):
            try:
                state = runner.task.state_dict()
                data = b"" if state is None else pickle.dumps(state)
            except Exception as e:
                # A state_dict() that raises or returns what pickle refuses (a lambda, a lock):
                # say which task (nothing is written).
                _add_note(e, f"(pipefill fill task {runner.name!r}: its state_dict() for "
                             f"Session.checkpoint_save; no checkpoint was written)")
                raise
            try:
                self._s.task_state_set(tid, data)
            except RunError as e:
                # Refused for the state the session is in (a bubble open, a task's step): the
                # save is refused for the same reason; say so under the save's name.
                raise RunError(str(e).replace("task_state_set", "checkpoint_save"),
                               e.status) from None
        self._checked(self._s.save_checkpoint, path)

    def checkpoint_load(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Resumes from a checkpoint of the same plan and rank: register the same tasks
        (same names) first; each gets its steps and samples back and, if it saved one,
        ``task.load_state_dict(state)``. Only load checkpoints you trust (pickle).

        All or nothing: when a task's state cannot be unpickled or its ``load_state_dict``
        raises, that exception goes on (with a note naming the task), the tasks loaded
        before it get their own ``state_dict()`` back through ``load_state_dict``, and
        the session's progress is restored from a copy saved just before the load (its
        ``*_this_run`` counters start again from zero, as after any load). A task's
        ``load_state_dict`` that raises should leave the task as it was."""
        path = native_path(path, "the checkpoint path")
        if not os.path.exists(path):  # as open() says it: FileNotFoundError, errno ENOENT
            raise FileNotFoundError(errno.ENOENT, "checkpoint_load: no such checkpoint", path)
        # Tasks with the default load_state_dict ignore their state: nothing of theirs can fail.
        loaders = [
            (tid, runner)
            for tid, runner in enumerate(self._runners)
            if type(runner.task).load_state_dict is not FillTask.load_state_dict
        ]
        if not loaders:
            self._checked(self._s.load_checkpoint, path)
            return
        with tempfile.TemporaryDirectory(prefix="pipefill-load-") as scratch:
            before = os.path.join(scratch, "before.ckpt")
            try:
                self._checked(self._s.save_checkpoint, before)
            except RunError as e:
                # Refused for the state the session is in (a bubble open, closed): the load is
                # refused for the same reason; say so under the load's name.
                raise RunError(str(e).replace("checkpoint_save", "checkpoint_load"),
                               e.status) from None
            self._s.load_checkpoint(path)  # checks the whole file before it changes anything
            self._load_task_states(path, loaders, before)

    def _load_task_states(
        self, path: str, loaders: list[tuple[int, _TaskRunner]], before: str
    ) -> None:
        """The Python half of checkpoint_load; on any failure undoes both halves and raises."""
        loaded: list[tuple[_TaskRunner, Optional[bytes]]] = []  # with their state before
        current: Optional[_TaskRunner] = None
        try:
            states = []
            for tid, runner in loaders:
                current = runner
                data = self._s.task_state_get(tid)
                if data:
                    states.append((runner, pickle.loads(data)))
            for runner, state in states:
                current = runner
                own = runner.task.state_dict()
                saved = None if own is None else pickle.dumps(own)  # a copy: loading may mutate
                runner.task.load_state_dict(state)
                loaded.append((runner, saved))
        except BaseException as e:
            name = current.name if current is not None else "?"
            _add_note(e, f"(while loading fill task {name!r}'s state from checkpoint {path!r})")
            undone = True
            for runner, saved in reversed(loaded):
                try:
                    if saved is None:
                        raise ValueError("its state_dict() was None before the load")
                    runner.task.load_state_dict(pickle.loads(saved))
                except Exception as undo:  # noqa: BLE001 - reported on the load's exception
                    undone = False
                    _add_note(e, f"(fill task {runner.name!r}, loaded before, could not be "
                                 f"restored: {type(undo).__name__}: {undo})")
            try:
                self._s.load_checkpoint(before)
            except Exception as undo:  # noqa: BLE001 - reported on the load's exception
                _add_note(e, f"(the session's progress could not be restored either, it is the "
                             f"checkpoint's: {undo})")
            else:
                _add_note(e, "(nothing was loaded: the session and its tasks are as before)"
                          if undone else
                          "(the session's progress is as before, its tasks' state may not be)")
            raise

    save_checkpoint = checkpoint_save
    load_checkpoint = checkpoint_load

    def report(self) -> dict[str, Any]:
        """The session report: iterations, bubbles, chunks run/deferred/pending, samples, and
        the measured fill time, overruns and bubble_end waits; ``jobs`` per fill job;
        ``tasks`` per fill task (the dicts of :meth:`tasks`)."""
        return self._checked(self._s.report)

    def jobs(self) -> list[dict[str, Any]]:
        """One dict per fill job: samples, checksum, chunk counts, ``iterations_held`` and
        ``samples_held`` (iterations in which the job began nothing new because two
        iterations of its work were deferred, and the planned samples not begun because of
        that), and the measured chunk shapes."""
        return self._checked(self._s.jobs)

    def chunks(self) -> list[dict[str, Any]]:
        """The last chunks that ran: admitted/start/end times measured (us since the bubble's
        begin); ``deadline_us`` is the bound's deadline, from the duration given to
        :meth:`bubble` or, without one, the plan's scaled by the bubble's past lengths."""
        return self._s.chunks()

    def close(self) -> None:
        """Ends an open bubble (waiting for its chunk in flight) and frees the session. A fill
        task that failed after the last call that reports failures (possible with
        ``end_at_once``) is raised here, once the session is closed."""
        self._s.close()
        _live_sessions.discard(self)
        try:
            self._raise_task_error(None)
        finally:
            self._runners = []

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        if exc is None:
            self.close()
            return
        # The block's exception goes on; a fill task's failure is a note on it.
        self._s.close()
        _live_sessions.discard(self)
        self._note_task_error(exc, None)
        self._runners = []

    def __repr__(self) -> str:
        try:
            info = self._s.info()
        except RunError:
            return "<pipefill.Session (closed)>"
        return f"<pipefill.Session rank {info['rank']} of {info['ranks']}, {info['bubbles']} bubbles>"
