"""pipefill.FillTask through pipefill.Session: the runtime's fill task rules from Python.

The runtime's own tests (runtime/tests/SessionTaskTest.cpp) count steps exactly on a
virtual clock. Here the clock is real, so every count below is one the machine's load
cannot change: limits (max_steps) in generous bubbles, steps that can never fit
(the prediction is a lower bound of real time: a step that sleeps 3 ms is measured at
>= 3 ms), and upper bounds.
"""

from __future__ import annotations

import gc
import math
import os
import pickle
import re
import sys
import threading
import time

import numpy as np
import pytest

import pipefill
from conftest import job_text


@pytest.fixture(scope="module")
def plan():
    return pipefill.compile(job_text(2, 4))  # no fill jobs: the bubbles are the tasks'


def session(plan, **kw):
    kw.setdefault("fill_idle_priority", False)
    return pipefill.Session(plan, 0, **kw)


class Counter(pipefill.FillTask):
    """Walks a fixed dataset; its progress is the position and a running sum."""

    def __init__(self, data=None, sleep_s=0.0, log=None, tag=None):
        self.data = list(range(100)) if data is None else data
        self.position = 0
        self.total = 0
        self.sleep_s = sleep_s
        self.log = log
        self.tag = tag

    def step(self) -> int:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        x = self.data[self.position % len(self.data)]
        self.total += x
        self.position += 1
        if self.log is not None:
            self.log.append(self.tag)
        return 2

    def state_dict(self):
        return {"position": self.position, "total": self.total}

    def load_state_dict(self, state):
        self.position = state["position"]
        self.total = state["total"]


def test_exports_and_api_version():
    assert "FillTask" in pipefill.__all__
    assert pipefill.PFRT_API_VERSION >= 4


def test_host_sessions_have_no_fill_stream(plan):
    # pfrt_session_fill_stream on the host: no CUDA stream, no GPU (API version 8); a step runs
    # in no stream context there, even with torch imported.
    assert pipefill.PFRT_API_VERSION >= 8
    with session(plan) as s:
        assert s.fill_stream == (0, -1)
        assert s._step_context() is None


def test_steps_run_in_a_bubble_and_are_reported(plan):
    with session(plan) as s:
        task = Counter()
        tid = s.add_task(task, step_us=100, max_steps=5)
        assert tid == 0
        with s.unplanned(2e6, wait=True) as b:  # 2 s: room for 5 quick steps under any load
            pass
        assert b.result["task_steps"] == 5
        assert b.result["task_samples"] == 10
        assert task.position == 5
        (t,) = s.tasks()
        assert t["name"] == "Counter" and t["steps"] == 5 and t["samples"] == 10
        assert t["done"] and not t["failed"]
        assert t["measured_us_max"] >= t["measured_us_p50"] > 0
        report = s.report()
        assert report["tasks"][0]["name"] == "Counter"
        assert report["tasks"][0]["steps"] == 5
        assert report["task_steps"] == 5


def test_planned_bubble_runs_tasks(plan):
    with session(plan) as s:
        task = Counter()
        s.add_task(task, step_us=100, max_steps=3)
        k = s.bubbles()[0]["bubble_id"]
        with s.bubble(k, duration_us=2e6, wait=True) as b:
            pass
        assert b.result["task_steps"] == 3


def test_a_step_that_cannot_fit_never_starts(plan):
    with session(plan) as s:
        s.add_task(Counter(), step_us=1e6)  # predicted 1.2 s
        with s.unplanned(20_000, wait=True) as b:
            pass
        assert b.result["task_steps"] == 0
        (t,) = s.tasks()
        assert t["steps"] == 0 and t["skipped_no_fit"] == 1
        assert t["predicted_us"] == pytest.approx(1.2e6)


def test_the_prediction_follows_measured_steps(plan):
    # Estimated at 1 ms, a step sleeps 3 ms: once measured, the prediction is >= 1.2 x 3 ms and
    # a 3 ms bubble no longer admits it.
    with session(plan) as s:
        s.add_task(Counter(sleep_s=0.003), step_us=1000)
        with s.unplanned(2e6, wait=False):
            time.sleep(0.05)
        (t,) = s.tasks()
        assert t["steps"] >= 1
        assert t["measured_us_p50"] >= 3000
        assert t["predicted_us"] >= 1.2 * t["measured_us_p50"]
        before = t["steps"]
        with s.unplanned(3000, wait=True) as b:
            pass
        assert b.result["task_steps"] == 0
        assert s.tasks()[0]["steps"] == before


def test_memory_gates_the_bubbles(plan):
    with session(plan) as s:
        most = max(b["free_bytes"] for b in s.bubbles())
        fits, big = Counter(), Counter()
        s.add_task(fits, step_us=100, max_steps=2, name="fits")
        s.add_task(big, step_us=100, memory_bytes=most + 1, name="big")
        with s.unplanned(2e6, wait=True):
            pass
        k = s.bubbles()[0]["bubble_id"]
        with s.bubble(k, duration_us=2e6, wait=True):
            pass
        fits_stats, big_stats = s.tasks()
        assert fits_stats["steps"] == 2
        assert big_stats["steps"] == 0 and big.position == 0
        assert big_stats["skipped_memory"] == 2


def test_round_robin(plan):
    log = []
    with session(plan) as s:
        s.add_task(Counter(log=log, tag="a"), step_us=100, max_steps=3, name="a")
        s.add_task(Counter(log=log, tag="b"), step_us=100, max_steps=3, name="b")
        with s.unplanned(2e6, wait=True):
            pass
    assert log == ["a", "b", "a", "b", "a", "b"]


def test_unbounded_policy_overruns_where_bounded_does_not_start(plan):
    # Bounded: a step predicted at 1.2 x 200 ms never starts in a 50 ms bubble. Unbounded: it starts
    # (the bubble has time left: 50 ms leaves an idle-priority worker on a loaded machine time to be
    # scheduled, where 5 ms did not), takes >= 120 ms and ends past the deadline.
    results = {}
    for policy in ("bounded", "unbounded"):
        with session(plan, fill_policy=policy) as s:
            s.add_task(Counter(sleep_s=0.120), step_us=200_000)
            with s.unplanned(50_000, wait=True) as b:
                pass
            results[policy] = (b.result, s.tasks()[0])
    assert results["bounded"][0]["task_steps"] == 0
    assert results["bounded"][1]["overruns"] == 0
    assert results["unbounded"][0]["task_steps"] >= 1
    assert results["unbounded"][1]["overruns"] >= 1
    assert results["unbounded"][0]["overrun_us"] > 0


class Exploding(pipefill.FillTask):
    def __init__(self, after):
        self.after = after
        self.calls = 0

    def step(self):
        self.calls += 1
        if self.calls > self.after:
            raise KeyError(f"no sample {self.calls}")
        return 1


@pytest.mark.parametrize("wait", [True, False])
def test_an_exception_in_step_is_raised_at_the_bubble_exit(plan, wait):
    with session(plan) as s:
        bad = Exploding(after=2)
        good = Counter()
        s.add_task(bad, step_us=100, name="exploding")
        s.add_task(good, step_us=100, max_steps=10, name="good")
        with pytest.raises(KeyError, match="no sample 3") as info:
            with s.unplanned(2e6, wait=wait) as b:
                if not wait:
                    deadline = time.monotonic() + 10
                    while bad.calls < 3 and time.monotonic() < deadline:
                        time.sleep(0.001)
        assert any("fill task 'exploding'" in n for n in info.value.__notes__)
        assert isinstance(info.value.__cause__, pipefill.RunError)
        assert "fill task 'exploding'" in str(info.value.__cause__)
        # The bubble ended all the same, and says what ran in it: the steps the tasks count.
        ran = sum(t["steps"] for t in s.tasks())
        assert b.result is not None and b.result["task_steps"] == ran >= 2
        # Without the wait, the end reported the failure, and its error carries the numbers.
        assert info.value.__cause__.bubble_result == (None if wait else b.result)
        # The bubble is over and the task is disabled: later bubbles never call it.
        with s.unplanned(2e6, wait=True):
            pass
        assert bad.calls == 3
        stats = {t["name"]: t for t in s.tasks()}
        assert stats["exploding"]["failed"] and stats["exploding"]["steps"] == 2
        assert stats["good"]["steps"] == 10
        s.iteration_end()  # no bubble is open


def test_a_refused_call_keeps_a_failed_task_for_the_bubble_end(plan):
    """A refused end (another bubble's id) or wait (from a step) raises its own RunError; the
    failed task's exception stays for the bubble's real end (found by the session fuzzer: the
    refusal raised the task's exception and used it up, or a step's wait stole it)."""
    with session(plan) as s:
        bad = Exploding(after=0)
        seen = []

        class Probe(pipefill.FillTask):
            def step(self):
                try:
                    s.wait()
                except pipefill.RunError as e:
                    seen.append(e)
                return 1

        s.add_task(bad, step_us=100, name="exploding")
        s.add_task(Probe(), step_us=100, max_steps=2, name="probe")
        first = s.bubbles()[0]["bubble_id"]
        s.begin(first, 2e6)
        deadline = time.monotonic() + 10  # both tasks run: one fails, the probe's waits are refused
        while (bad.calls < 1 or len(seen) < 2) and time.monotonic() < deadline:
            time.sleep(0.001)
        with pytest.raises(pipefill.RunError, match=f"the open bubble is {first}$"):
            s.end(first + 1)
        with pytest.raises(KeyError, match="no sample 1"):
            s.end(first)
        assert len(seen) == 2
        assert all("called from a fill task's step" in str(e) for e in seen)


class FailsAfterTheEnd(pipefill.FillTask):
    """Its first step starts inside the bubble and raises 50 ms later, after the bubble's end
    (with end_at_once the end returns while the step runs)."""

    def __init__(self):
        self.started = threading.Event()

    def step(self):
        self.started.set()
        time.sleep(0.05)
        raise KeyError("failed after the end")


def test_end_at_once_reports_a_task_failing_after_the_end_at_the_next_call_that_waits(plan):
    """With end_at_once the bubble's end returns before its fill has run: a step that fails
    after it is raised, as its own exception, by the next call that waits for the worker
    (report(), tasks(), a checkpoint, ...), once; one still pending at close() is raised
    there. Before, every later call passed and close() dropped it (found by the end_at_once
    fuzzer)."""
    for where in ("report", "close"):
        s = session(plan, end_at_once=True)
        task = FailsAfterTheEnd()
        s.add_task(task, step_us=100, name="late")
        first = s.bubbles()[0]["bubble_id"]
        s.begin(first, 2e6)
        assert task.started.wait(10)
        assert s.end(first)["task_steps"] == 0  # returned at once, the step still running
        s.iteration_end()
        if where == "report":
            with pytest.raises(KeyError, match="failed after the end") as info:
                s.report()  # waits for the worker: the step has failed by then
            assert any("fill task 'late'" in n for n in info.value.__notes__)
            s.report()  # reported once
            assert s.tasks()[0]["failed"]
            s.close()
        else:
            time.sleep(0.2)  # the step has failed; nothing has reported it
            with pytest.raises(KeyError, match="failed after the end"):
                s.close()
            with pytest.raises(pipefill.RunError, match="closed"):
                s.report()


def test_a_step_must_return_an_int(plan):
    class Bad(pipefill.FillTask):
        def step(self):
            return "three"

    class NoStep(pipefill.FillTask):
        pass

    with session(plan) as s:
        s.add_task(Bad(), step_us=100)
        with pytest.raises(TypeError, match=r"^Bad\.step\(\) must return the samples it did as an "
                                            r"int, not str\n\(raised by a step of pipefill fill "
                                            r"task 'Bad', which is now disabled\)$"):
            with s.unplanned(1e6, wait=True):
                pass
    with session(plan) as s:
        s.add_task(NoStep(), step_us=100)
        with pytest.raises(NotImplementedError, match=r"^NoStep must override FillTask\.step\(\)\n"
                                                      r"\(raised by a step of pipefill fill task "
                                                      r"'NoStep', which is now disabled\)$"):
            with s.unplanned(1e6, wait=True):
                pass


@pytest.mark.parametrize("samples", [-3, 10**15 + 1, 2**63 - 1, 2**64 + 5])
def test_a_step_returning_samples_out_of_range_names_the_task_and_the_value(plan, samples):
    class Huge(pipefill.FillTask):
        def step(self):
            return samples

    with session(plan) as s:
        s.add_task(Huge(), step_us=100, name="huge")
        with pytest.raises(ValueError, match=rf"fill task 'huge' returned {samples}: samples must "
                                             r"be >= 0 and <= 10\*\*15 \(a task counts at most "
                                             r"10\*\*15 in all\)"):
            with s.unplanned(1e6, wait=True):
                pass
        assert s.tasks()[0]["failed"] and s.tasks()[0]["steps"] == 0


@pytest.mark.parametrize("samples", [True, np.bool_(True)], ids=["bool", "numpy_bool"])
def test_a_step_returning_a_bool_is_refused(plan, samples):
    class Flag(pipefill.FillTask):
        def step(self):
            return samples

    with session(plan) as s:
        s.add_task(Flag(), step_us=100)
        with pytest.raises(TypeError, match="must return the samples it did as an int, not bool"):
            with s.unplanned(1e6, wait=True):
                pass
        assert s.tasks()[0]["failed"] and s.tasks()[0]["samples"] == 0


def test_numpy_int_samples(plan):
    class NpTask(pipefill.FillTask):
        def step(self):
            return np.int64(4)

    with session(plan) as s:
        s.add_task(NpTask(), step_us=100, max_steps=2)
        with s.unplanned(2e6, wait=True) as b:
            pass
        assert b.result["task_samples"] == 8


def test_checkpoint_resume_gives_the_uninterrupted_total(plan, tmp_path):
    data = [3 * i * i + 1 for i in range(37)]
    # Uninterrupted: 25 steps.
    with session(plan) as s:
        whole = Counter(data=data)
        s.add_task(whole, step_us=100, max_steps=25, name="walk")
        with s.unplanned(2e6, wait=True):
            pass
    assert whole.position == 25
    # Interrupted after 11 steps: checkpoint, new session, resume for the rest.
    path = tmp_path / "fill.ckpt"
    with session(plan) as s:
        first = Counter(data=data)
        s.add_task(first, step_us=100, max_steps=11, name="walk")
        with s.unplanned(2e6, wait=True):
            pass
        s.checkpoint_save(path)
    with session(plan) as s:
        resumed = Counter(data=data)
        s.add_task(resumed, step_us=100, max_steps=25, name="walk")
        s.checkpoint_load(path)
        assert resumed.position == 11 and s.tasks()[0]["steps"] == 11
        with s.unplanned(2e6, wait=True) as b:
            pass
        assert b.result["task_steps"] == 14
        assert s.tasks()[0]["steps"] == 25
        assert s.tasks()[0]["samples"] == 50
    assert resumed.total == whole.total == sum(data[i % len(data)] for i in range(25))
    # A checkpoint naming a task the session does not have.
    with session(plan) as s:
        with pytest.raises(pipefill.RunError, match="holds fill task 'walk'"):
            s.checkpoint_load(path)


class Picky(Counter):
    """Refuses to load: its load_state_dict raises, after its neighbour has loaded."""

    def load_state_dict(self, state):
        raise KeyError("picky refuses")


def save_first_and_picky(plan, path, first_steps, picky_steps):
    """A checkpoint of two counters, "first" and "picky", after that many steps each."""
    with session(plan) as s:
        s.add_task(Counter(), step_us=100, max_steps=first_steps, name="first")
        s.add_task(Counter(), step_us=100, max_steps=picky_steps, name="picky")
        with s.unplanned(2e6, wait=True):
            pass
        s.checkpoint_save(path)


def test_a_failed_checkpoint_load_leaves_the_session_as_it_was(plan, tmp_path):
    path = tmp_path / "fill.ckpt"
    save_first_and_picky(plan, path, 7, 5)
    with session(plan) as s:
        first, picky = Counter(), Picky()
        s.add_task(first, step_us=100, max_steps=9, name="first")
        s.add_task(picky, step_us=100, max_steps=2, name="picky")
        with s.unplanned(2e6, wait=True):
            pass
        progress = [(t["name"], t["steps"], t["samples"]) for t in s.tasks()]
        assert progress == [("first", 9, 18), ("picky", 2, 4)]
        assert (first.position, picky.position) == (9, 2)
        with pytest.raises(KeyError, match="picky refuses") as info:
            s.checkpoint_load(path)
        notes = getattr(info.value, "__notes__", [])  # Python 3.11+
        # Notes exist from Python 3.11 (PEP 678); there they must be present.
        assert sys.version_info < (3, 11) or any("fill task 'picky'" in n for n in notes)
        assert sys.version_info < (3, 11) or any("nothing was loaded" in n for n in notes)
        # "first" had loaded (position 7) and got its own state back; the counters are the
        # session's own, not the checkpoint's.
        assert (first.position, picky.position) == (9, 2)
        assert [(t["name"], t["steps"], t["samples"]) for t in s.tasks()] == progress
        # The session goes on from there: max_steps counts the 9 steps "first" did.
        with s.unplanned(2e6, wait=True) as b:
            pass
        assert b.result["task_steps"] == 0
        # A load that succeeds still loads everything.
        picky.load_state_dict = Counter.load_state_dict.__get__(picky)
        s.checkpoint_load(path)
        assert (first.position, picky.position) == (7, 5)
        assert [(t["name"], t["steps"]) for t in s.tasks()] == [("first", 7), ("picky", 5)]
        # Inside a bubble the load is refused under its own name (the copy it keeps first
        # is a checkpoint_save).
        with s.unplanned(1000):
            with pytest.raises(pipefill.RunError, match="Session.checkpoint_load inside"):
                s.checkpoint_load(path)


def test_a_task_without_state_before_a_failed_load_is_named_as_not_restored(plan, tmp_path):
    """A load undone after a later task refused: a task that had loaded but whose state_dict()
    was None before the load cannot get its state back; the load's exception says so."""
    class Stateless(Counter):
        def state_dict(self):
            return None

    path = tmp_path / "fill.ckpt"
    save_first_and_picky(plan, path, 3, 3)
    with session(plan) as s:
        first = Stateless()
        s.add_task(first, step_us=100, name="first")
        s.add_task(Picky(), step_us=100, name="picky")
        with pytest.raises(KeyError, match="picky refuses") as info:
            s.checkpoint_load(path)
        assert first.position == 3  # loaded, and not undone
        assert [t["steps"] for t in s.tasks()] == [0, 0]  # the session's progress is undone
    notes = getattr(info.value, "__notes__", [])  # Python 3.11+
    assert sys.version_info < (3, 11) or (
        "(fill task 'first', loaded before, could not be restored: ValueError: its state_dict() "
        "was None before the load)" in notes
        and "(the session's progress is as before, its tasks' state may not be)" in notes), notes


def test_a_state_dict_that_cannot_be_saved_names_its_task(plan, tmp_path):
    """A state_dict() that raises, or returns what pickle refuses, fails the save with a note
    naming the task (a bare AttributeError or TypeError before), and writes nothing."""
    class Unpicklable(Counter):
        def state_dict(self):
            return {"position": self.position, "hook": lambda: None}

    class Raising(Counter):
        def state_dict(self):
            raise RuntimeError("no state today")

    for task, name, error in ((Unpicklable(), "lambda", (AttributeError, pickle.PicklingError)),
                              (Raising(), "raising", RuntimeError)):
        path = tmp_path / f"{name}.ckpt"
        with session(plan) as s:
            s.add_task(Counter(), step_us=100, name="fine")
            s.add_task(task, step_us=100, name=name)
            with pytest.raises(error) as info:
                s.checkpoint_save(path)
            notes = getattr(info.value, "__notes__", [])  # Python 3.11+
            assert sys.version_info < (3, 11) or any(
                f"pipefill fill task {name!r}: its state_dict()" in n for n in notes), notes
        assert not path.exists()


def test_the_gil_is_shared_with_the_main_thread(plan):
    # The step computes with numpy and pure Python on the worker thread while the main thread runs
    # Python inside the bubble: both finish, neither deadlocks.
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64))

    class MatTask(pipefill.FillTask):
        def __init__(self):
            self.trace = 0.0
            self.threads = set()

        def step(self):
            self.threads.add(threading.get_ident())
            self.trace += float(np.trace(a @ a))
            self.trace += sum(math.sqrt(i) for i in range(200))
            return 1

    with session(plan) as s:
        task = MatTask()
        s.add_task(task, step_us=200, max_steps=40)
        with s.unplanned(60e6, wait=True) as b:
            total = 0
            for _ in range(2001):
                total += sum(range(1000))  # Python on the main thread, holding the GIL
        assert total == 2001 * 499500
        assert b.result["task_steps"] == 40
        assert threading.get_ident() not in task.threads  # the steps ran on the worker
        expected = 40 * (float(np.trace(a @ a)) + sum(math.sqrt(i) for i in range(200)))
        assert task.trace == pytest.approx(expected)


def test_bad_calls(plan):
    with session(plan) as s:
        # A ValueError like every other bad option value (it was the runtime's RunError,
        # "got 0.000000"); 1e300 was taken, and the task never ran.
        for bad in (0.0, -5.0, math.nan, math.inf, 1e300):
            with pytest.raises(ValueError, match=r"^step_us must be > 0 and at most 1e9 "
                                                 r"\(1000 s; the estimated real us of one step\), "
                                                 f"got {re.escape(repr(bad))}$"):
                s.add_task(Counter(), step_us=bad)
        with pytest.raises(TypeError, match=r"^add_task takes a pipefill\.FillTask, not function$"):
            s.add_task(lambda: 1, step_us=100)
        # "100" used to pass (float("100")); now every option's type is checked, by name.
        for kw, message in ((dict(step_us="100"), "step_us must be a number, not str"),
                            (dict(step_us=100, memory_bytes=1.5),
                             "memory_bytes must be an int, not float"),
                            (dict(step_us=100, max_steps="3"), "max_steps must be an int, not str")):
            with pytest.raises(TypeError, match=f"^{message}$"):
                s.add_task(Counter(), **kw)
        with pytest.raises(ValueError, match="memory_bytes must be >= 0"):
            s.add_task(Counter(), step_us=100, memory_bytes=-1)
        # A NUL would cut the name short in C ("a"): refused, and nothing is registered.
        with pytest.raises(ValueError, match=r"^name contains a NUL character: 'a\\x00b'$"):
            s.add_task(Counter(), step_us=100, name="a\0b")
        assert s.tasks() == []
        s.add_task(Counter(), step_us=100, max_steps=1)
        with pytest.raises(pipefill.RunError, match="a task of that name exists already"):
            s.add_task(Counter(), step_us=100)
        with s.unplanned(1000):
            with pytest.raises(pipefill.RunError, match="Session.add_task inside a bubble"):
                s.add_task(Counter(), step_us=100, name="late")
            # The save is refused under its own name, not under the task-state call it makes
            # first for each task.
            with pytest.raises(pipefill.RunError,
                               match="Session.checkpoint_save inside a bubble") as e:
                s.checkpoint_save(os.devnull)
            assert "task_state_set" not in str(e.value)
        with pytest.raises(pipefill.RunError, match="task 7 does not exist") as e:
            s._s.task_get(7)
        assert e.value.status == "PFRT_ERROR_INVALID_ARGUMENT"


# A step that calls back into its own session: bubble_end, bubble_wait and close wait for the
# session's worker thread, which is running that very step (a hang, or an abort for close's
# join). They raise RunError inside the step, which disables the task and comes back at the
# bubble's exit; the session stays usable. In a subprocess: without the refusal it never returns.
REENTRANT = """
import sys, pipefill
class Reentrant(pipefill.FillTask):
    def __init__(self, session, call):
        self.session, self.call, self.calls = session, call, 0
    def step(self):
        self.calls += 1
        if self.call == "end":
            self.session.end(-1)
        elif self.call == "wait":
            self.session.wait()
        else:
            self.session.close()
        return 1
s = pipefill.Session(sys.argv[1], 0, fill_idle_priority=False)
task = Reentrant(s, sys.argv[2])
s.add_task(task, step_us=100)
try:
    with s.unplanned(1e6, wait=True):
        pass
except pipefill.RunError as e:
    print("raised:", e.status, e)
print("calls:", task.calls, "failed:", s.tasks()[0]["failed"])
with s.unplanned(1e6, wait=True) as b:
    pass
s.iteration_end()
print("after:", b.result["task_steps"])
s.close()
"""


@pytest.mark.parametrize("call", ["end", "wait", "close"])
def test_a_step_cannot_end_wait_for_or_close_its_own_session(plan, tmp_path, call):
    from conftest import run_python

    path = tmp_path / "plan.pb"
    path.write_bytes(plan.stream_program(iterations=1))
    out = run_python(REENTRANT, str(path), call)
    assert out.returncode == 0, out.stderr
    name = {"end": "bubble_end", "wait": "bubble_wait", "close": "close"}[call]
    assert f"raised: PFRT_ERROR_INVALID_ARGUMENT {name}" in out.stdout, out.stdout
    assert "called from a fill task's step on the session's worker thread" in out.stdout
    assert "calls: 1 failed: True" in out.stdout  # the task is disabled after its failed step
    assert "after: 0" in out.stdout  # and the session goes on


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_dropped_sessions_with_tasks_are_freed(plan):
    # Each session has a worker thread. A session with a task was never freed: the runtime
    # session held the task's runner, which held the Session (its step context), which held the
    # runtime session, a cycle the collector could not see. Dropped now at once, and a cycle
    # through the user's own task (it keeps its session) is collected.
    class Keeper(pipefill.FillTask):
        session = None

        def step(self):
            return 1

    def one():
        s = session(plan)
        s.add_task(Counter(), step_us=100)
        with s.unplanned(1e6):
            pass
        del s

    # A first session before counting: threads the process starts once and keeps (the BLAS
    # library's pool, made at its first large enough product, which the bubble bound may not have
    # let an earlier test run on a loaded machine) are not sessions'.
    one()
    gc.collect()
    before = _threads()
    for _ in range(10):
        one()
    # No collection needed. (A joined thread can still be listed in /proc for a moment: the
    # kernel wakes the joiner before it removes the exiting thread from the process. Under ctest
    # -j2 that read 4 threads against 3 once; ten sessions never freed keep ten threads for good.)
    deadline = time.monotonic() + 5
    while _threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _threads() == before
    for _ in range(10):
        s = session(plan)
        keeper = Keeper()
        keeper.session = s
        s.add_task(keeper, step_us=100)
        del s, keeper
    gc.collect()
    assert _threads() == before


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_a_step_that_drops_the_last_reference_to_its_session(plan):
    # The session is freed on its own worker thread, in the step: it cannot wait for that step,
    # so a helper thread frees it once the step has returned (no hang, no abort, no leak).
    class Dropper(pipefill.FillTask):
        def __init__(self):
            self.session = None
            self.done = threading.Event()

        def step(self):
            self.session = None  # the last reference: the session is released here
            self.done.set()
            return 1

    gc.collect()
    before = _threads()
    s = session(plan)
    task = Dropper()
    task.session = s
    s.add_task(task, step_us=100)
    s.begin(s.bubbles()[0]["bubble_id"], 1e6)  # a bubble the step runs in; nobody ends it
    del s
    assert task.done.wait(10)
    deadline = time.monotonic() + 10
    while _threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _threads() == before


# The interpreter exits while a bubble with a Python task is open (the program failed mid-step).
# The worker kept taking the GIL for steps while the interpreter finalized; CPython ends such a
# thread (pthread_exit), the runtime swallowed that unwind and the process aborted ("FATAL:
# exception not rethrown", status 134) instead of exiting with its own status. Sessions still
# open are closed at exit now; without that hook ("bare") the step path lets the thread end.
AT_EXIT = """
import atexit, sys, time, pipefill
class Sleepy(pipefill.FillTask):
    def step(self):
        time.sleep(0.002)
        return 1
if sys.argv[2] == "bare":
    atexit.unregister(pipefill._session._close_live_sessions)
s = pipefill.Session(sys.argv[1], 0, fill_idle_priority=False)
s.add_task(Sleepy(), step_us=2000)
s._s.begin_unplanned(60e6)  # a 60 s bubble, never ended
time.sleep(0.05)
sys.exit(3)
"""


@pytest.mark.parametrize("hook", ["atexit", "bare"])
def test_exit_with_a_bubble_open_keeps_the_exit_status(plan, tmp_path, hook):
    from conftest import run_python

    path = tmp_path / "plan.pb"
    path.write_bytes(plan.stream_program(iterations=1))
    for _ in range(3):  # the bare case races the worker against the exit
        out = run_python(AT_EXIT, str(path), hook)
        assert out.returncode == 3, out.stderr
        assert "FATAL" not in out.stderr, out.stderr
        if hook == "atexit":  # bare: CPython may end the worker in a step, leaking its frames
            assert "leaked" not in out.stderr, out.stderr


# Ctrl-C in the block of `with session.bubble(k, wait=True)`: the exit waited for the rest of
# the bubble's fill (here 60 s) before the KeyboardInterrupt went on. A block that raises ends
# the bubble at once.
INTERRUPTED_BUBBLE = """
import sys, time, pipefill
class Sleepy(pipefill.FillTask):
    def step(self):
        time.sleep(0.005)
        return 1
s = pipefill.Session(sys.argv[1], 0, fill_idle_priority=False)
s.add_task(Sleepy(), step_us=5000)
try:
    with s.unplanned(60e6, wait=True):
        print("ready", flush=True)
        time.sleep(60)
except KeyboardInterrupt:
    print("KeyboardInterrupt")
s.iteration_end()  # the bubble is over
s.close()
print("closed")
"""


def test_ctrl_c_in_a_waiting_bubble(plan, tmp_path):
    from conftest import interrupt_python

    path = tmp_path / "plan.pb"
    path.write_bytes(plan.stream_program(iterations=1))
    out, seconds = interrupt_python(INTERRUPTED_BUBBLE, str(path))
    assert "KeyboardInterrupt" in out and "closed" in out, out
    assert seconds < 20, out


@pytest.mark.parametrize("raised", [RuntimeError, KeyboardInterrupt])
def test_the_blocks_own_exception_wins_over_a_failed_task(plan, raised):
    # The framework's exception raised in the block (even Ctrl-C) was replaced by the task's.
    # It goes on now, with the task's failure as a note; the bubble is over, the task disabled.
    with session(plan) as s:
        bad = Exploding(after=0)
        s.add_task(bad, step_us=100, name="exploding")
        with pytest.raises(raised, match="the framework failed") as info:
            with s.unplanned(2e6, wait=True):
                deadline = time.monotonic() + 10
                while bad.calls < 1 and time.monotonic() < deadline:
                    time.sleep(0.001)
                raise raised("the framework failed")
        assert any("pipefill fill task 'exploding' failed: KeyError" in n
                   for n in info.value.__notes__), info.value.__notes__
        s.iteration_end()  # no bubble is open
        with s.unplanned(1e6, wait=True):  # the error was consumed: nothing raised again
            pass
        assert s.tasks()[0]["failed"] and bad.calls == 1


class Exhausted(pipefill.FillTask):
    """A data loader that has run dry: next() raises StopIteration."""

    def __init__(self):
        self.it = iter([])

    def step(self) -> int:
        return next(self.it)


@pytest.mark.parametrize("scope", ["bubble", "unplanned"])
def test_stop_iteration_in_a_step_comes_out_as_itself(plan, scope):
    # The bubble's context manager was a generator, so a StopIteration re-raised at its exit
    # came out as "RuntimeError: generator raised StopIteration" (PEP 479).
    with session(plan) as s:
        s.add_task(Exhausted(), step_us=100)
        block = s.bubble(0, 20000, wait=True) if scope == "bubble" else s.unplanned(20000, wait=True)
        with pytest.raises(StopIteration) as info:
            with block:
                pass
        assert any("fill task 'Exhausted'" in n for n in info.value.__notes__)


@pytest.mark.parametrize("manual", [False, True])
def test_every_task_that_failed_in_a_bubble_is_reported_there(plan, manual):
    # Only the first failure was raised; the second came out of a later bubble where its task
    # did not even run (with begin/wait/end: never).
    with session(plan) as s:
        s.add_task(Exploding(after=0), step_us=100, name="A")
        s.add_task(Exploding(after=0), step_us=100, name="B")
        with pytest.raises(KeyError) as info:
            if manual:
                s.begin(0, 200000)
                try:
                    s.wait()
                finally:
                    s.end(0)
            else:
                with s.bubble(0, 200000, wait=True):
                    pass
        notes = info.value.__notes__
        assert any("fill task 'A'" in n and "now disabled" in n for n in notes), notes
        assert any("fill task 'B' failed in the same bubble too: KeyError" in n for n in notes), notes
        with s.bubble(1, 200000, wait=True):  # nothing is left to raise
            pass
        assert [t["failed"] for t in s.tasks()] == [True, True]


CLOSE_RACE = """
import random, sys, threading, time, pipefill
class Sleepy(pipefill.FillTask):
    def step(self):
        time.sleep(0.001)
        return 1
closed = 0
for i in range(int(sys.argv[2])):
    s = pipefill.Session(sys.argv[1], 0)
    s.add_task(Sleepy(), step_us=5)
    s.begin(0, duration_us=20000)
    t = threading.Thread(target=lambda: (time.sleep(random.random() * 0.01), s.close()))
    t.start()
    for call in (s.wait, lambda: s.end(0), s.report, s.iteration_end):
        try:
            call()
        except pipefill.RunError as e:
            assert "the session is closed" in str(e), e
            closed += 1
    t.join()
print("rounds done; calls that found the session closed:", closed)
"""


def test_close_from_another_thread_waits_for_the_call_in_progress(plan, tmp_path):
    # close() on one thread while another was in wait() on the same session destroyed the
    # session under the waiting call: both threads hung (6 runs in 8 of 300 rounds). Calls now
    # take the session's turn; a call after the close finds it closed.
    from conftest import run_python

    path = tmp_path / "plan.pb"
    path.write_bytes(plan.stream_program(iterations=1))
    out = run_python(CLOSE_RACE, str(path), "150", timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "rounds done" in out.stdout


def test_task_names_are_checked_like_other_names(plan):
    # name=5, a lone surrogate or max_steps past 64 bits gave nanobind's TypeError listing the
    # signature; name="" fell back to the class name (a second one then clashed, naming it).
    class Named(Counter):
        name = 7

    with session(plan) as s:
        with pytest.raises(TypeError, match="name must be a str, not int"):
            s.add_task(Counter(), step_us=100, name=5)
        with pytest.raises(ValueError, match="name is not valid text"):
            s.add_task(Counter(), step_us=100, name="\udc80")
        with pytest.raises(ValueError, match=r"^name must not be empty \(it names the task in "
                                             r"reports and checkpoints\)$"):
            s.add_task(Counter(), step_us=100, name="")
        with pytest.raises(TypeError, match="Named.name must be a str, not int"):
            s.add_task(Named(), step_us=100)
        with pytest.raises(ValueError, match="max_steps is out of range"):
            s.add_task(Counter(), step_us=100, max_steps=2**64)
        assert s.tasks() == []
