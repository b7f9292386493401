"""pipefill.Session: one rank's bubbles driven from Python (pfrt_session_*).

The reference for the fill work is pipefill.run (pfrt_run, every planned chunk
run, modelled time): sessions of both ranks driven bubble by bubble must give
the same samples and checksums."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import textwrap

import pytest

import pipefill

os.environ["PFRT_TIME_MODEL"] = "modelled"
os.environ["PFRT_FILL_POLICY"] = "unbounded"


@pytest.fixture(scope="module")
def tiny_plan(tiny_job):
    return pipefill.compile_file(tiny_job)


def drive(session, iterations, duration_us=10e6):
    for _ in range(iterations):
        for b in session.bubbles():
            with session.bubble(b["bubble_id"], duration_us, wait=True):
                pass
        session.iteration_end()


def test_sessions_of_every_rank_match_the_executor(tiny_plan):
    ref = pipefill.run(tiny_plan, iterations=3, time_scale=0.05).jobs()[0]
    samples, checksum = 0, 0.0
    for rank in range(2):
        with pipefill.Session(tiny_plan, rank, world_size=2) as s:
            drive(s, 3)
            job = s.jobs()[0]
            samples += job["samples_completed"]
            checksum += job["checksum"]
            assert s.report()["chunks_pending"] == 0
    assert ref["samples_completed"] > 0
    assert samples == ref["samples_completed"]
    assert checksum == pytest.approx(ref["checksum"], rel=1e-9)


def test_end_at_once_gives_the_numbers_later_and_the_same_work(tiny_plan):
    """end_at_once: end() returns zeros (not known yet); report() waits for the worker and has
    the same fill as the default mode, bubble for bubble (wait=True hands each bubble whole)."""
    totals = []
    for at_once in (False, True):
        with pipefill.Session(tiny_plan, 0, end_at_once=at_once) as s:
            results = []
            for _ in range(3):
                for b in s.bubbles():
                    with s.bubble(b["bubble_id"], 10e6, wait=True) as scope:
                        pass
                    results.append(scope.result)
                s.iteration_end()
            report = s.report()
            if at_once:
                assert all(r["chunks_run"] == 0 and r["samples_completed"] == 0 for r in results)
            else:
                assert sum(r["chunks_run"] for r in results) == report["chunks_run"]
            totals.append((report["chunks_run"], report["samples_completed"],
                           s.jobs()[0]["checksum"], report["iterations"]))
    assert totals[0][0] > 0
    assert totals[1] == totals[0]


def test_daemon_threads_in_session_calls_do_not_abort_the_exit(tiny_job):
    """At exit CPython ends daemon threads that take the GIL back (pthread_exit); one inside a
    Session call (its GIL released) aborted the whole process ("terminate called without an
    active exception", exit 134: 5 of 5 runs). They park now; the exit is clean."""
    script = textwrap.dedent(f"""
        import threading, time, pipefill
        plan = pipefill.compile_file({str(tiny_job)!r})
        s = pipefill.Session(plan, 0)
        def poll():
            while True:
                try:
                    s.ops()
                    s.report()
                except pipefill.RunError:
                    pass  # the session is closed (atexit)
        def wait_in_a_bubble():
            s2 = pipefill.Session(plan, 1)
            s2.begin(s2.bubbles()[0]["bubble_id"], 60e6)
            s2.wait()
        for target in (poll, poll, wait_in_a_bubble):
            threading.Thread(target=target, daemon=True).start()
        time.sleep(0.2)
        print("main exits", flush=True)
    """)
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ))
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == "main exits"
        assert "terminate" not in out.stderr and "leaked" not in out.stderr, out.stderr[-2000:]


def test_bubbles_and_ops_follow_the_plan(tiny_plan):
    s = pipefill.Session(tiny_plan, 0)
    bubbles, ops = s.bubbles(), s.ops()
    # The plan's own bubble table for stage 0, in the same order.
    table = tiny_plan.bubbles()
    mine = table["stage"] == 0
    assert [b["planned_duration_us"] for b in bubbles] == pytest.approx(
        list(table["duration_us"][mine]))
    assert [b["kind"] for b in bubbles] == list(table["kind"][mine])
    assert sum(o["kind"] == "forward" for o in ops) == 4  # 4 micro-batches
    assert all(-1 <= b["after_op"] < len(ops) for b in bubbles)
    assert s.rank == 0 and s.ranks == 2
    assert "rank 0 of 2" in repr(s)


def test_a_too_short_bubble_defers_and_the_result_says_so(tiny_plan):
    s = pipefill.Session(tiny_plan, 0)
    first = s.bubbles()[0]
    assert first["chunks"] > 0
    with s.bubble(first["bubble_id"], 1.0, wait=True) as b:
        pass
    assert b.result["chunks_run"] == 0 and b.result["chunks_deferred"] > 0
    assert s.report()["chunks_pending"] == b.result["chunks_deferred"]
    with s.unplanned(10e6, wait=True) as u:  # a bubble the plan did not predict runs them
        pass
    assert u.result["chunks_run"] >= b.result["chunks_deferred"]
    assert s.report()["chunks_pending"] == 0
    assert s.report()["unplanned_bubbles"] == 1
    assert all(c["end_us"] >= c["start_us"] for c in s.chunks())


def test_a_job_two_iterations_behind_is_held_not_queued(tiny_plan):
    # 1-us bubbles: nothing ever fits. Two iterations of chunks queue; after that the job
    # begins nothing new (held) and the queue stops growing. A long unplanned bubble drains it
    # and the job runs again, its plan resumed where it was held.
    s = pipefill.Session(tiny_plan, 0)
    drive(s, 2, duration_us=1.0)
    queued = s.report()["chunks_pending"]
    assert queued > 0 and s.jobs()[0]["iterations_held"] == 0
    drive(s, 4, duration_us=1.0)
    job = s.jobs()[0]
    assert s.report()["chunks_pending"] == queued
    assert job["iterations_held"] == 4 and job["samples_held"] > 0
    assert job["samples_completed"] == 0
    with s.unplanned(10e6, wait=True):
        pass
    assert s.report()["chunks_pending"] == 0
    drive(s, 1)
    job = s.jobs()[0]
    assert job["samples_completed"] > 0 and job["iterations_held"] == 4


def test_checkpoint_round_trip(tiny_plan, tmp_path):
    path = tmp_path / "rank1.ckpt"
    a = pipefill.Session(tiny_plan, 1)
    drive(a, 1)
    a.save_checkpoint(path)
    drive(a, 1)
    b = pipefill.Session(tiny_plan, 1)
    b.load_checkpoint(path)
    drive(b, 1)
    assert b.report()["iterations"] == 2
    assert b.jobs()[0]["checksum"] == pytest.approx(a.jobs()[0]["checksum"], rel=1e-9)


def test_checkpoints_are_taken_between_iterations(tiny_plan, tmp_path):
    """A checkpoint saved or loaded between two bubbles of an iteration is refused: a load
    restarts the iteration, so its bubbles ran their chunks twice (chunks pending 3 -> 6, then
    "fill batch at sample 8 begun twice", found by the session fuzzer)."""
    path = tmp_path / "s.ckpt"
    s = pipefill.Session(tiny_plan, 0)
    first = s.bubbles()[0]["bubble_id"]
    with s.bubble(first, 1.0, wait=True):
        pass
    with pytest.raises(pipefill.RunError, match="checkpoint_save in the middle of iteration 0"):
        s.checkpoint_save(path)
    s.iteration_end()
    s.checkpoint_save(path)
    pending = s.report()["chunks_pending"]
    with s.bubble(first, 1.0, wait=True):
        pass
    with pytest.raises(pipefill.RunError, match="checkpoint_load in the middle of iteration 1"):
        s.checkpoint_load(path)
    with pytest.raises(pipefill.RunError, match="begun already"):
        s.begin(first)  # the refused load changed nothing
    s.iteration_end()
    s.checkpoint_load(path)
    assert s.report()["chunks_pending"] == pending
    with s.unplanned(10e6, wait=True):
        pass  # no batch begun twice


def test_a_checkpoint_without_fill_holds_the_plan(tiny_plan, tmp_path):
    """A checkpoint that pipefill.run wrote without fill names no device state: the session
    that loads it starts its plan at the beginning (the iterations count as held), so it
    fills what a fresh session fills. It used to start at the checkpoint's iteration."""
    path = tmp_path / "nofill.ckpt"
    pipefill.run(tiny_plan, iterations=2, fill=False, checkpoint=path, time_scale=0.05)
    fresh = pipefill.Session(tiny_plan, 1)
    drive(fresh, 2)
    resumed = pipefill.Session(tiny_plan, 1)
    resumed.load_checkpoint(path)
    drive(resumed, 2)
    [a] = [j for j in fresh.jobs() if j["on_rank"]]
    [b] = [j for j in resumed.jobs() if j["on_rank"]]
    assert b["iterations_held"] == 2
    assert b["samples_completed"] == a["samples_completed"] > 0
    assert b["checksum"] == pytest.approx(a["checksum"], rel=1e-9)


# ---- every bad call raises, with the runtime's message ----

def test_unknown_bubble(tiny_plan):
    s = pipefill.Session(tiny_plan, 0)
    with pytest.raises(pipefill.RunError, match="bubble 9 is not a bubble of rank 0") as e:
        with s.bubble(9):
            pass
    assert e.value.status == "PFRT_ERROR_INVALID_ARGUMENT"


def test_bubble_begun_twice(tiny_plan):
    s = pipefill.Session(tiny_plan, 0)
    with s.bubble(0):
        with pytest.raises(pipefill.RunError, match="bubble 0 is open"):
            s.begin(1)


def test_end_without_begin(tiny_plan):
    s = pipefill.Session(tiny_plan, 0)
    with pytest.raises(pipefill.RunError, match="without an open bubble"):
        s.end(0)


def test_iteration_end_inside_a_bubble(tiny_plan):
    s = pipefill.Session(tiny_plan, 0)
    with s.bubble(0):
        with pytest.raises(pipefill.RunError, match="iteration_end inside a bubble"):
            s.iteration_end()


def test_bubbles_out_of_order(tiny_plan):
    s = pipefill.Session(tiny_plan, 0)
    with s.bubble(1):
        pass
    with pytest.raises(pipefill.RunError, match="out of order"):
        s.begin(0)


def test_rank_out_of_range_and_plan_for_another_world(tiny_plan):
    with pytest.raises(pipefill.RunError, match="rank 2 is out of range"):
        pipefill.Session(tiny_plan, 2)
    with pytest.raises(pipefill.RunError, match="world has 4"):
        pipefill.Session(tiny_plan, 0, world_size=4)


def test_fill_policies_are_named_in_the_report(tiny_plan):
    for policy, named in (("bounded", "bounded"), ("whole", "bounded-whole"),
                          ("unbounded", "unbounded")):
        s = pipefill.Session(tiny_plan, 0, fill_policy=policy)
        try:
            report = s.report()
            assert report["fill_policy"] == named
            assert report["jobs"][0]["chunks_split"] == 0
        finally:
            s.close()


def test_bad_options_and_inputs(tiny_plan, tmp_path):
    with pytest.raises(ValueError, match="fill_policy"):
        pipefill.Session(tiny_plan, 0, fill_policy="sometimes")
    # The value as written, not std::to_string's 0.000000 (1e-9) or 300 digits (1e300).
    for bad, shown in ((0, "0"), (1e-9, "1e-09"), (1e300, "1e+300"), (float("nan"), "nan"),
                       (5000.0, "5000")):
        with pytest.raises(ValueError, match=rf"^time_scale must be from 0\.0001 to 1000, "
                                             rf"got {re.escape(shown)}$"):
            pipefill.Session(tiny_plan, 0, time_scale=bad)
    with pytest.raises(ValueError, match="rank must be >= 0"):
        pipefill.Session(tiny_plan, -1)
    with pytest.raises(FileNotFoundError):
        pipefill.Session(tmp_path / "missing.pb", 0)
    with pytest.raises(TypeError, match=r"^Session\(\) takes a Plan, StreamProgram bytes or a path, "
                                        r"not int$"):
        pipefill.Session(42, 0)
    # Negative sizes: the native call's own refusal, before the runtime sees them.
    with pytest.raises(ValueError, match=r"^world_size must be >= 0 \(0: not checked\)$"):
        pipefill.Session(tiny_plan, 0, world_size=-1)
    with pytest.raises(ValueError, match=r"^max_dim must be >= 0$"):
        pipefill.Session(tiny_plan, 0, max_dim=-1)
    # Options and arguments of the wrong type name themselves (nanobind alone only says that
    # open_session()'s arguments are incompatible, and "8" used to pass as max_dim 8).
    for option, value, message in (
        ("time_scale", "x", "time_scale must be a number, not str"),
        ("max_dim", "8", "max_dim must be an int, not str"),
        ("world_size", True, "world_size must be an int, not bool"),
        ("fill_policy", 3, "fill_policy must be a str, not int"),
        ("fill_idle_priority", "yes", "fill_idle_priority must be a bool, not str"),
        ("end_at_once", 1, "end_at_once must be a bool, not int"),
        ("backend", None, "backend must be a str, not NoneType"),
    ):
        with pytest.raises(TypeError, match=f"^{message}$"):
            pipefill.Session(tiny_plan, 0, **{option: value})
    s = pipefill.Session(tiny_plan, 0)
    for call, message in (
        (lambda: s.begin("0"), "bubble must be an int, not str"),
        (lambda: s.begin(0, "5"), "duration_us must be a number, not str"),
        (lambda: s.end(0.0), "bubble must be an int, not float"),
        (lambda: s.bubble(None).__enter__(), "bubble must be an int, not NoneType"),
        (lambda: s.unplanned("1000").__enter__(), "duration_us must be a number, not str"),
    ):
        with pytest.raises(TypeError, match=f"^{message}$"):
            call()
    with pytest.raises(pipefill.RunError, match="unplanned bubble needs its duration"):
        with s.unplanned(0):
            pass
    # Past the largest float: a ValueError naming the option, not "OverflowError: int too large
    # to convert to float"; a stream past 2**64: not nanobind's list of begin()'s signature.
    for call, message in (
        (lambda: s.begin(0, 10**400), r"^duration_us is out of range: its magnitude is past the "
                                      r"largest float, 1\.798e\+308$"),
        (lambda: s.unplanned(-10**400).__enter__(), "duration_us is out of range"),
        (lambda: pipefill.Session(tiny_plan, 0, time_scale=10**400), "time_scale is out of range"),
        (lambda: s.begin(0, stream=2**64),
         r"^stream 0x10000000000000000 is not a cudaStream_t: it is past 2\*\*64$"),
    ):
        with pytest.raises(ValueError, match=message):
            call()


def test_errors_name_the_python_methods(tiny_plan):
    # The runtime's messages name its C calls; a Python user called Session methods.
    with pipefill.Session(tiny_plan, 0) as s:
        k = s.bubbles()[0]["bubble_id"]
        for call, message in (
            (lambda: s.end(k), rf"Session.end\({k}\) without an open bubble \(call Session.begin"),
            (lambda: s.end(-1), r"Session.end\(-1\) without an open bubble"),
        ):
            with pytest.raises(pipefill.RunError, match=message) as e:
                call()
            assert "pfrt_session" not in str(e.value) and "PFRT_SESSION" not in str(e.value)
        with s.bubble(k):
            with pytest.raises(pipefill.RunError,
                               match=r"Session.iteration_end inside a bubble: bubble \d+ is open; "
                                     r"call Session.end first") as e:
                s.iteration_end()
            assert "pfrt_session" not in str(e.value)


def test_backends_and_streams(tiny_plan):
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        pipefill.Session(tiny_plan, 0, backend="tpu")
    if pipefill.cuda_device_count() == 0:
        # The C API's CUDA session needs a device; the error says so instead of falling back.
        with pytest.raises(pipefill.RunError) as e:
            pipefill.Session(tiny_plan, 0, backend="cuda")
        assert e.value.status == "PFRT_ERROR_UNAVAILABLE"
    # A host session takes no stream: a cudaStream_t given to it is a mistake, said at once.
    s = pipefill.Session(tiny_plan, 0)

    class FakeStream:
        cuda_stream = 0x1234

    for stream in (FakeStream(), 0x1234):
        with pytest.raises(pipefill.RunError, match="stream must be None on the host backend"):
            with s.bubble(0, stream=stream):
                pass
    not_a_stream = (r"^stream must be a CUDA stream \(an object with cuda_stream, e\.g\. "
                    r"torch\.cuda\.Stream\) or a cudaStream_t as a non-negative int, not ")
    with pytest.raises(TypeError, match=not_a_stream + "str$"):
        with s.bubble(0, stream="main"):
            pass
    with pytest.raises(TypeError, match=not_a_stream + "int$"):
        with s.unplanned(1000.0, stream=-1):
            pass
    with s.bubble(0, stream=None) as b:  # None: no stream, as before
        pass
    assert b.result is not None


def test_calls_after_close(tiny_plan):
    s = pipefill.Session(tiny_plan, 0)
    s.close()
    s.close()  # twice: fine
    with pytest.raises(pipefill.RunError, match="closed"):
        s.begin(0)


def test_checkpoint_of_another_rank(tiny_plan, tmp_path):
    path = tmp_path / "rank1.ckpt"
    s1 = pipefill.Session(tiny_plan, 1)
    drive(s1, 1)
    s1.save_checkpoint(path)
    s0 = pipefill.Session(tiny_plan, 0)
    with pytest.raises(pipefill.RunError, match="not a session checkpoint of rank 0"):
        s0.load_checkpoint(path)


def test_missing_checkpoint_is_file_not_found(tiny_plan, tmp_path):
    # As open() says it: errno ENOENT and the path, under the load's name.
    missing = tmp_path / "none.ckpt"
    with pipefill.Session(tiny_plan, 0) as s:
        with pytest.raises(FileNotFoundError,
                           match=r"^\[Errno 2\] checkpoint_load: no such checkpoint: ") as e:
            s.checkpoint_load(missing)
    assert e.value.errno == errno.ENOENT and e.value.filename == str(missing)


def test_integers_out_of_range_are_refused_not_truncated(tiny_plan):
    # Each was cut to 32 bits: end(2**32) ended bubble 0, end(-5) the unplanned bubble,
    # world_size=2**32+2 passed as 2, iterations=2**32+1 ran 1, stage=2**32 replayed stage 0.
    with pipefill.Session(tiny_plan, 0) as s:
        k = s.bubbles()[0]["bubble_id"]
        s.begin(k)
        for bad in (2**32 + k, -5):
            with pytest.raises(ValueError, match=r"^bubble must be a bubble id \(>= 0 and "
                                                 r"< 2\*\*32 - 1\) or -1 \(the unplanned "
                                                 r"bubble\), got " f"{bad}$"):
                s.end(bad)
        s.end(k)
        # begin too (it was nanobind's TypeError "incompatible function arguments"), and -1,
        # the unplanned bubble's id for end, points to unplanned().
        for bad in (2**32 + k, 2**32 - 1, -5):
            with pytest.raises(ValueError, match=r"^bubble must be a bubble id \(>= 0 and "
                                                 r"< 2\*\*32 - 1\), got " f"{bad}$"):
                s.begin(bad)
        with pytest.raises(ValueError, match=r"bubble -1 is the unplanned bubble: begin it with "
                                             r"unplanned\(duration_us\)"):
            with s.bubble(-1):
                pass
    for option, value in (("world_size", 2**32 + 2), ("max_dim", 2**33)):
        with pytest.raises(ValueError, match=f"^{option} must be >= 0 and < 2\\*\\*32 "
                                             f"\\(got {value}\\)$"):
            pipefill.Session(tiny_plan, 0, **{option: value})
    with pytest.raises(ValueError, match="rank must be >= 0 and < 2\\*\\*32"):
        pipefill.Session(tiny_plan, 2**40)
    data = tiny_plan.stream_program(iterations=1)
    for option, value, text in (("iterations", 2**32 + 1, "iterations must be"),
                                ("stage", 2**32, "stage must be -1"),
                                ("max_dim", 2**33, "max_dim must be")):
        with pytest.raises(ValueError, match=text):
            pipefill.run(data, **{option: value})
    with pytest.raises(ValueError, match="iterations must be >= 1 and < 2\\*\\*32"):
        tiny_plan.stream_program(iterations=2**32 + 1)
