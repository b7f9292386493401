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

import contextlib
import os
from typing import Any, Iterator, Optional, Union

from . import _core

__all__ = ["Session", "BubbleScope"]


class BubbleScope:
    """What ``with session.bubble(k) as b`` yields: ``b.result`` holds the dict
    that bubble_end returned (chunks_run, chunks_deferred, samples_completed and
    the measured fill_us, overrun_us, end_wait_us) once the block has exited."""

    def __init__(self, bubble: Optional[int]) -> None:
        self.bubble = bubble
        self.result: Optional[dict[str, Any]] = None


class Session:
    """One rank's fill session (``pfrt_session``).

    ``program``: a :class:`pipefill.Plan` (lowered here, one loop), StreamProgram
    bytes (binary or text), or a path. ``rank``: this process's pipeline rank (a
    device of the plan). ``world_size`` (nonzero): the launcher's world size,
    checked against the plan's ranks. ``time_scale``: real microseconds per
    planned microsecond (planned bubble durations and chunk predictions are
    scaled by it). ``fill_policy``: ``"bounded"`` (a chunk starts only if its
    predicted time fits what is left of the bubble; otherwise it waits, in order,
    for a later bubble) or ``"unbounded"``. ``fill_idle_priority``: the fill
    worker thread runs at the lowest CPU priority.

    Every misuse (unknown bubble, a bubble begun twice, ``iteration_end`` inside a
    bubble, a rank outside the plan, ...) raises :class:`pipefill.RunError` with
    the runtime's message (``.status`` is e.g. ``PFRT_ERROR_INVALID_ARGUMENT``);
    bad option values raise :class:`ValueError`.
    """

    def __init__(
        self,
        program: Union["_core.Plan", bytes, str, "os.PathLike[str]"],
        rank: int,
        *,
        world_size: int = 0,
        time_scale: float = 1.0,
        max_dim: int = 0,
        fill_policy: str = "bounded",
        fill_idle_priority: bool = True,
    ) -> None:
        if isinstance(program, _core.Plan):
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
        if not isinstance(rank, int) or isinstance(rank, bool):
            raise TypeError(f"rank must be an int, not {type(rank).__name__}")
        self._s = _core.open_session(
            data,
            name,
            rank,
            world_size,
            time_scale,
            max_dim,
            fill_policy,
            fill_idle_priority,
        )

    # -- the plan, as this rank sees it -------------------------------------------------------
    @property
    def rank(self) -> int:
        return int(self._s.info()["rank"])

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
    @contextlib.contextmanager
    def bubble(self, bubble: int, duration_us: float = 0.0, *, wait: bool = False) -> Iterator[BubbleScope]:
        """``with session.bubble(k): ...``: fill runs on the session's worker thread
        while the block runs (the block is the framework's own work or wait); the
        exit ends the bubble (no chunk starts after it; the one in flight is waited
        for). ``duration_us`` > 0 replaces the planned duration (the framework's
        own timer). ``wait=True`` gives the whole bubble to fill: the exit first
        waits until nothing more fits."""
        scope = BubbleScope(bubble)
        self._s.begin(bubble, duration_us)
        try:
            yield scope
        finally:
            if wait:
                self._s.wait()
            scope.result = self._s.end(bubble)

    @contextlib.contextmanager
    def unplanned(self, duration_us: float, *, wait: bool = False) -> Iterator[BubbleScope]:
        """A bubble the plan did not predict (a slow peer), bounded by ``duration_us``:
        runs deferred work, then pulls this iteration's planned chunks forward."""
        scope = BubbleScope(None)
        self._s.begin_unplanned(duration_us)
        try:
            yield scope
        finally:
            if wait:
                self._s.wait()
            scope.result = self._s.end(_core.SESSION_UNPLANNED)

    def begin(self, bubble: int, duration_us: float = 0.0) -> None:
        """pfrt_session_bubble_begin (prefer ``with session.bubble(k)``)."""
        self._s.begin(bubble, duration_us)

    def end(self, bubble: int) -> dict[str, Any]:
        """pfrt_session_bubble_end; ``bubble`` -1 ends an unplanned one."""
        return self._s.end(bubble)

    def wait(self) -> None:
        """Blocks until the open bubble has nothing more to start."""
        self._s.wait()

    def iteration_end(self) -> None:
        """Ends this rank's iteration (chunks of bubbles not begun wait for later ones)."""
        self._s.iteration_end()

    # -- progress and reports ------------------------------------------------------------------
    def save_checkpoint(self, path: Union[str, "os.PathLike[str]"]) -> None:
        self._s.save_checkpoint(os.fspath(path))

    def load_checkpoint(self, path: Union[str, "os.PathLike[str]"]) -> None:
        self._s.load_checkpoint(os.fspath(path))

    def report(self) -> dict[str, Any]:
        """The session report: iterations, bubbles, chunks run/deferred/pending, samples, and
        the measured fill time, overruns and bubble_end waits; ``jobs`` per fill job."""
        return self._s.report()

    def jobs(self) -> list[dict[str, Any]]:
        return self._s.jobs()

    def chunks(self) -> list[dict[str, Any]]:
        """The last chunks that ran, with admitted/start/end/deadline times (measured)."""
        return self._s.chunks()

    def close(self) -> None:
        """Ends an open bubble (waiting for its chunk in flight) and frees the session."""
        self._s.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        info = self._s.info()
        return f"<pipefill.Session rank {info['rank']} of {info['ranks']}, {info['bubbles']} bubbles>"
