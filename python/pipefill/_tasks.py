"""pipefill.FillTask: the user's own work, cut into steps, run in a session's bubbles.

Subclass :class:`FillTask`, override :meth:`FillTask.step` (one step; returns the
samples it did) and register it with :meth:`pipefill.Session.add_task`. The
session runs steps on its fill worker thread, after the plan's own fill chunks,
only where the step's predicted time fits what is left of the bubble (the
runtime's bubble bound, ``pfrt_session_task_*``; docs/integration.md).

Example::

    class Inference(pipefill.FillTask):
        def __init__(self, model, batches):
            self.model, self.batches, self.position = model, batches, 0
        def step(self) -> int:
            x = self.batches[self.position % len(self.batches)]
            with torch.no_grad():
                self.model(x)
            self.position += 1
            return len(x)
        def state_dict(self):
            return {"position": self.position}
        def load_state_dict(self, state):
            self.position = state["position"]

    session.add_task(Inference(model, batches), step_us=2000)
"""

from __future__ import annotations

from typing import Any, Callable, Optional

__all__ = ["FillTask"]


class FillTask:
    """Base class of a fill task.

    ``step()`` runs on the session's worker thread while the main thread is in a
    bubble (the runtime takes the GIL for it): keep one step short and about as
    long as the ``step_us`` you register it with; the session measures the steps
    and corrects its prediction. An exception in ``step()`` disables the task and
    is raised again, with its type and message, when the bubble ends (the exit of
    ``with session.bubble(k)``).

    CUDA sessions: the runtime waits for the session's fill stream after every step,
    so a step is timed and bounded by the GPU work it put there. With torch imported,
    each step runs with that stream as torch's current stream (so plain torch code in
    ``step()`` lands there); other libraries get it from :attr:`pipefill.Session.fill_stream`.
    Work a step leaves on other streams is neither waited for nor bounded.

    Threads: the worker is not the main thread. ``torch.set_num_threads`` is per
    thread (OpenMP), so call it inside ``step()`` once; work in numpy/torch
    kernels releases the GIL, pure Python steps take turns with the main thread.

    ``state_dict()`` / ``load_state_dict(state)``: the task's progress, pickled
    into the session checkpoint (:meth:`pipefill.Session.checkpoint_save`), so a
    resumed task continues where it stopped. ``state_dict()`` returning ``None``
    (the default) saves nothing.

    ``name``: the task's name in reports and checkpoints (unique per session);
    defaults to the class name.
    """

    name: Optional[str] = None

    def step(self) -> int:
        """One step of the task; returns the samples (or items) it completed (an int,
        0 .. 10**15: a task counts at most 10**15 samples in all, what a checkpoint
        holds)."""
        raise NotImplementedError(f"{type(self).__name__} must override FillTask.step()")

    def state_dict(self) -> Any:
        """The task's progress for a checkpoint (picklable), or None."""
        return None

    def load_state_dict(self, state: Any) -> None:
        """Restores what :meth:`state_dict` returned."""


# The most samples one step can report: a task counts at most 10**15 in all (the runtime's
# limit, what a checkpoint holds), so no single step may report more.
_MAX_SAMPLES = 10**15


def _is_bool(value: Any) -> bool:
    """A bool or a numpy bool (both have ``__index__``), without importing numpy."""
    return isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", None) == "b"


class _TaskRunner:
    """The callable the runtime's worker calls for one step (python/src/Tasks.cpp):
    returns the samples done, or -1 after keeping the step's exception in
    ``error`` (raised by the session when the bubble ends)."""

    def __init__(
        self, task: FillTask, name: str, context: Optional[Callable[[], Any]] = None
    ) -> None:
        self.task = task
        self.name = name
        self.error: Optional[BaseException] = None
        # Returns the context manager each step runs in (CUDA sessions with torch: the
        # session's fill stream as torch's current stream), or None.
        self.context = context

    def __call__(self) -> int:
        try:
            scope = self.context() if self.context is not None else None
            if scope is None:
                samples = self.task.step()
            else:
                with scope:
                    samples = self.task.step()
            if isinstance(samples, bool) or not isinstance(samples, int):
                try:
                    if _is_bool(samples):
                        raise TypeError  # True would count as 1 sample
                    samples = int(samples.__index__())  # numpy integers
                except Exception:
                    raise TypeError(
                        f"{type(self.task).__name__}.step() must return the samples it did as an "
                        f"int, not {type(samples).__name__}"
                    ) from None
            if samples < 0 or samples > _MAX_SAMPLES:
                raise ValueError(
                    f"{type(self.task).__name__}.step() of fill task {self.name!r} returned "
                    f"{samples}: samples must be >= 0 and <= 10**15 (a task counts at most 10**15 "
                    f"in all)"
                )
            return samples
        except BaseException as e:  # noqa: BLE001 - kept and raised on the main thread
            if self.error is None:
                self.error = e
            return -1
