"""The runtime half: pipefill.run drives the pfrt C API (pfrt_program_load*,
pfrt_run, pfrt_report_*) on the host backend."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

import pipefill
from conftest import job_text

FAST = dict(time_scale=0.05, max_dim=32)

# These tests check what the plan says against what runs (all planned samples, identical
# checksums across entry points), so they use the runtime's deterministic modes: the modelled time
# model and every chunk run where planned (docs/runtime.md 4, 4b). pfrt_options_init reads these
# defaults, also in the pipefill-run subprocesses started below.
os.environ["PFRT_TIME_MODEL"] = "modelled"
os.environ["PFRT_FILL_POLICY"] = "unbounded"


@pytest.fixture(scope="module")
def tiny_plan(tiny_job):
    return pipefill.compile_file(tiny_job)


def test_run_plan_on_host(tiny_plan):
    planned = tiny_plan.report()
    run = pipefill.run(tiny_plan, iterations=2, **FAST)
    stats = run.stats()
    assert stats["backend"] == "host" and stats["iterations"] == 2
    # The module runs with PFRT_TIME_MODEL=modelled: the times say they are not measured.
    assert stats["time_measured"] is False and stats["real_iteration_us_mean"] > 0
    assert stats["planned_iteration_us"] == pytest.approx(planned["iteration_time_us"])
    iteration_us = run.iteration_us()
    assert isinstance(iteration_us, np.ndarray) and iteration_us.shape == (2,)
    assert np.all(iteration_us > 0)
    report = run.report()
    assert report["iterations"] == 2 and len(report["devices"]) == planned["num_stages"]
    assert json.loads(run.report_json()) == report
    jobs = run.jobs()
    assert stats["jobs"] == len(jobs) > 0
    # The fill planned for these iterations ran in full: the plan's samples
    # per iteration (from the compiler) times the iterations.
    per_iteration = {j["name"]: j["samples_per_iteration"] for j in planned["fill"]["jobs"]}
    done = sum(j["samples_this_run"] for j in jobs)
    assert done == pytest.approx(2 * sum(per_iteration.values()))
    assert all(j["samples_completed"] == j["samples_planned"] for j in jobs)
    # ... so no job fell behind and held an iteration; the dict matches the JSON report's.
    assert all(j["iterations_held"] == 0 and j["samples_held"] == 0 for j in jobs)
    held = {j["name"]: (j["iterations_held"], j["samples_held"]) for j in report["fill"]["jobs"]}
    assert held == {j["name"]: (j["iterations_held"], j["samples_held"]) for j in jobs}
    # The samples identity (docs/runtime.md §4b) from the report alone: what is done, pending
    # and held is what the plan completes plus the batches it has in flight at the end.
    for j in report["fill"]["jobs"]:
        assert (j["samples_completed"] + j["samples_pending"] + j["samples_held"] ==
                j["samples_planned"] + j["samples_in_flight_planned"]), j
    assert ({j["name"]: j["samples_in_flight_planned"] for j in report["fill"]["jobs"]} ==
            {j["name"]: j["samples_in_flight_planned"] for j in jobs})
    assert "iteration" in run.summary()


def test_bytes_path_and_plan_give_the_same_fill(tiny_plan, tmp_path):
    # Fill workloads are seeded: the same program gives the same outputs
    # whichever way it reaches the runtime.
    tiny_plan.save(tmp_path / "plan.pb", iterations=2)
    tiny_plan.save(tmp_path / "plan.pbtxt", iterations=2)
    runs = [
        pipefill.run(tiny_plan, iterations=2, **FAST),
        pipefill.run(tiny_plan.stream_program(iterations=2), **FAST),
        pipefill.run(tiny_plan.stream_program(iterations=2, text=True), **FAST),
        pipefill.run(tmp_path / "plan.pb", **FAST),
        pipefill.run(str(tmp_path / "plan.pbtxt"), **FAST),
    ]
    checksums = [[(j["name"], j["samples_completed"], j["checksum"]) for j in r.jobs()] for r in runs]
    assert all(c == checksums[0] for c in checksums)
    assert all(r.stats()["iterations"] == 2 for r in runs)


def test_run_matches_pipefill_run(tiny_plan, tools, tmp_path):
    # The command-line runner on the same program completes the same fill work
    # with the same checksums.
    tiny_plan.save(tmp_path / "plan.pb", iterations=2)
    subprocess.run([tools / "pipefill-run", tmp_path / "plan.pb", "--backend", "host",
                    "--time-scale", "0.05", "--max-dim", "32", "--quiet",
                    "--report", tmp_path / "cli.json"], check=True, capture_output=True)
    cli = json.loads((tmp_path / "cli.json").read_text())
    ours = pipefill.run(tmp_path / "plan.pb", **FAST).report()
    key = lambda r: [(j["name"], j["samples_completed"], j["checksum"]) for j in r["fill"]["jobs"]]
    assert key(ours) == key(cli)


def test_no_fill_runs_the_main_job_alone(tiny_plan):
    run = pipefill.run(tiny_plan, iterations=1, fill=False, **FAST)
    assert all(j["samples_this_run"] == 0 for j in run.jobs())
    assert run.report()["fill_enabled"] is False


def test_profile_mode_closes_the_loop(tiny_job, tiny_plan, tmp_path):
    run = pipefill.run(tiny_plan, iterations=2, profile=True, **FAST)
    run.save_profile(tmp_path / "profile.pbtxt")
    run.save_json(tmp_path / "run.json")
    assert json.loads((tmp_path / "run.json").read_text())["profile_mode"] is True
    replanned = pipefill.compile_file(tiny_job, profile=tmp_path / "profile.pbtxt")
    # The modelled time model measures no main-job time: its profile marks nothing
    # measured, apply-profile keeps the planned costs, and the recompiled plan keeps its
    # iteration time (test_profile_replaces_planned_times shows a measured profile does
    # change it).
    assert len(replanned.report()["stages"]) == 2
    assert replanned.report()["iteration_time_us"] == pytest.approx(
        tiny_plan.report()["iteration_time_us"], rel=0.1)


@pytest.mark.parametrize("ext", [".pbtxt", ".textproto", ".txtpb", ".prototxt", ".txt", ".pb",
                                 ".bin", ".dat"])
def test_every_name_a_file_is_written_under_reads_back(tiny_job, tiny_plan, tmp_path, ext):
    """Plan.save and RunReport.save_profile pick text or binary by the name, and pipefill.run,
    Session and compile(profile=) read by the same rule (support/ProtoText.h). They disagreed:
    a plan saved as .prototxt (binary) was read as text, a profile saved as .txt (text) as
    binary."""
    plan_path = tmp_path / f"plan{ext}"
    tiny_plan.save(plan_path)
    run = pipefill.run(plan_path, iterations=1, profile=True, **FAST)
    pipefill.Session(plan_path, 0).close()
    profile = tmp_path / f"profile{ext}"
    run.save_profile(profile)
    replanned = pipefill.compile_file(tiny_job, profile=profile)
    assert replanned.report()["stages"]


def test_checkpoint_resumes_fill(tiny_plan, tmp_path):
    ckpt = tmp_path / "fill.ckpt"
    first = pipefill.run(tiny_plan, iterations=1, checkpoint=ckpt, **FAST)
    second = pipefill.run(tiny_plan, iterations=1, checkpoint=ckpt, **FAST)
    assert second.stats()["first_iteration"] == 1
    done_first = {j["name"]: j["samples_completed"] for j in first.jobs()}
    for j in second.jobs():
        assert j["samples_completed"] == done_first[j["name"]] + j["samples_this_run"]


def test_checkpoint_of_another_max_dim_names_it(tiny_plan, tmp_path):
    ckpt = tmp_path / "fill.ckpt"
    pipefill.run(tiny_plan, iterations=1, checkpoint=ckpt, max_dim=16, time_scale=0.05)
    with pytest.raises(pipefill.RunError, match=r"cap 16 but this run uses 32 \(run with max_dim=16 to resume it\)"):
        pipefill.run(tiny_plan, iterations=2, checkpoint=ckpt, **FAST)
    resumed = pipefill.run(tiny_plan, iterations=2, checkpoint=ckpt, max_dim=16, time_scale=0.05)
    assert resumed.stats()["first_iteration"] == 1


def test_on_bad_checkpoint(tiny_plan, tmp_path):
    """run()'s on_bad_checkpoint is pipefill-run's --on-bad-checkpoint (docs/runtime.md 7):
    a corrupt checkpoint fails by default with a message naming the keyword, "previous"
    resumes from CHECKPOINT.prev and "restart" moves the bad file aside and starts clean."""
    ckpt = tmp_path / "fill.ckpt"
    pipefill.run(tiny_plan, iterations=1, checkpoint=ckpt, **FAST)
    pipefill.run(tiny_plan, iterations=2, checkpoint=ckpt, **FAST)  # the first one is now .prev
    prev = tmp_path / "fill.ckpt.prev"
    assert prev.exists()
    good = ckpt.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    ckpt.write_bytes(bytes(bad))

    with pytest.raises(pipefill.RunError, match="corrupted") as info:
        pipefill.run(tiny_plan, iterations=1, checkpoint=ckpt, **FAST)
    assert "on_bad_checkpoint='previous' or 'restart'" in str(info.value)
    assert "--on-bad-checkpoint" not in str(info.value)
    assert ckpt.read_bytes() == bytes(bad)  # untouched
    with pytest.raises(ValueError, match="unknown on_bad_checkpoint 'later'"):
        pipefill.run(tiny_plan, iterations=1, checkpoint=ckpt, on_bad_checkpoint="later", **FAST)

    resumed = pipefill.run(tiny_plan, iterations=2, checkpoint=ckpt, on_bad_checkpoint="previous",
                           **FAST)
    assert resumed.stats()["first_iteration"] == 1  # .prev: one iteration done

    ckpt.write_bytes(bytes(bad))
    clean = pipefill.run(tiny_plan, iterations=1, checkpoint=ckpt, on_bad_checkpoint="restart",
                         **FAST)
    assert clean.stats()["first_iteration"] == 0
    assert (tmp_path / "fill.ckpt.bad").read_bytes() == bytes(bad)
    for j in clean.jobs():
        assert j["samples_completed"] == j["samples_this_run"]


def test_paths_with_a_nul_are_refused(tiny_job, tiny_plan, tmp_path):
    """A path goes to C as a C string: "x\\0y" would be "x" there (a run wrote its checkpoint
    to the cut name, compile_file and run read the cut file). Each one raises ValueError."""
    program = tmp_path / "tiny.pb"
    tiny_plan.save(program)
    cut = tmp_path / "fill.ckpt"
    nul = str(cut) + "\0more"
    with pytest.raises(ValueError, match="the checkpoint path contains a NUL character"):
        pipefill.run(tiny_plan, iterations=1, checkpoint=nul, **FAST)
    with pytest.raises(ValueError, match="the program path contains a NUL character"):
        pipefill.run(str(program) + "\0x", iterations=1, **FAST)
    with pytest.raises(ValueError, match="the JobSpec path contains a NUL character"):
        pipefill.compile_file(str(tiny_job) + "\0x")
    with pytest.raises(ValueError, match="the profile path contains a NUL character"):
        pipefill.compile_file(tiny_job, profile=str(tmp_path / "p.json") + "\0x")
    with pipefill.Session(program, 0) as s:
        with pytest.raises(ValueError, match="the checkpoint path contains a NUL character"):
            s.checkpoint_save(nul)
        with pytest.raises(ValueError, match="the checkpoint path contains a NUL character"):
            s.checkpoint_load(nul)
    # The native methods (nanobind refused these with a TypeError listing their signature).
    with pytest.raises(ValueError, match="the stream program path contains a NUL character"):
        tiny_plan.save(nul)
    report = pipefill.run(tiny_plan, iterations=1, **FAST)
    for save, what in ((report.save_json, "report"), (report.save_profile, "profile"),
                       (report.save_trace, "trace")):
        with pytest.raises(ValueError, match=f"the {what} path contains a NUL character"):
            save(nul)
    assert not cut.exists()


def test_arguments_the_native_module_would_refuse_obscurely(tiny_job, tiny_plan, tmp_path):
    """Each gave nanobind's "incompatible function arguments" TypeError, was ignored, or raised
    an OSError without errno; now each names the argument in the usual exception."""
    with pytest.raises(ValueError, match="on_bad_checkpoint='restart' says what to do with a bad "
                                         "checkpoint; no checkpoint= was given"):
        pipefill.run(tiny_plan, iterations=1, on_bad_checkpoint="restart", **FAST)
    with pytest.raises(ValueError, match="iterations is out of range: 18446744073709551616"):
        pipefill.run(tiny_plan, iterations=2**64, **FAST)
    assert pipefill.compile_file(os.fsencode(tiny_job)).name == tiny_plan.name  # bytes path
    with pipefill.Session(tiny_plan, np.int64(0)) as s:  # numpy rank, as every other option
        assert s.rank == 0
        with pytest.raises(FileNotFoundError) as info:
            s.checkpoint_load(tmp_path / "none.ckpt")
        assert info.value.errno == 2 and info.value.filename == str(tmp_path / "none.ckpt")


def test_compare_measures_slowdown_with_its_noise_floor(tiny_plan, tmp_path):
    """pipefill.compare is pfrt_compare: the dict has pipefill-run --compare-json's keys, the
    numbers in its text table are the dict's, and the options reach the runs."""
    c = pipefill.compare(tiny_plan, repetitions=1, iterations=2, time_scale=0.5, max_dim=32)
    assert c["repetitions"] == 1 and c["time_scale"] == 0.5
    assert c["time_model"] == "modelled"  # this module's PFRT_TIME_MODEL
    assert c["slowdown_measured"] is False and "NOT MEASURED" in c["summary"]
    assert c["noise_floor"] >= 0 and c["slowdown_min"] <= c["slowdown"] <= c["slowdown_max"]
    assert c["main_only_us_mean"] > 0 and c["with_fill_us_mean"] > 0
    assert c["fill_samples_per_s_planned"] > 0
    assert f"main-job slowdown        {100 * c['slowdown']:+.2f}%" in c["summary"]
    assert "time scale 0.5: times below are plan us" in c["summary"]
    # The same from the program's bytes and from its file.
    data = tiny_plan.stream_program(iterations=2)
    (tmp_path / "plan.pb").write_bytes(data)
    for program in (data, tmp_path / "plan.pb", str(tmp_path / "plan.pb")):
        r = pipefill.compare(program, repetitions=1, **FAST)
        assert r["repetitions"] == 1 and r["fill_samples_per_s_planned"] > 0
    with pytest.raises(ValueError, match="repetitions must be from 1 to 1000 ABBA blocks, got 0"):
        pipefill.compare(tiny_plan, repetitions=0)
    with pytest.raises(TypeError, match="repetitions"):
        pipefill.compare(tiny_plan, repetitions="3")
    with pytest.raises(FileNotFoundError):
        pipefill.compare(tmp_path / "missing.pb")
    with pytest.raises(TypeError, match=r"^compare\(\) takes a Plan, StreamProgram bytes or a "
                                        r"path, not int$"):
        pipefill.compare(42)


def test_backend_queries():
    assert pipefill.backend_compiled("host")
    assert pipefill.cuda_device_count() >= 0
    assert pipefill.PFRT_API_VERSION >= 1


# ---------------------------------------------------------------- error paths

def test_bad_options_raise_value_error(tiny_plan):
    program = tiny_plan.stream_program()
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        pipefill.run(program, backend="tpu")
    for bad in (0, float("inf"), 1e300, 1e-300):
        with pytest.raises(ValueError, match="time_scale"):
            pipefill.run(program, time_scale=bad)
    with pytest.raises(ValueError, match=r"^iterations must be >= 0 \(0: the program's own "
                                         r"count\)$"):
        pipefill.run(program, iterations=-1)
    with pytest.raises(ValueError, match=r"^stage must be -1 \(every device runs\) or a device "
                                         r"index \(got -2\)$"):
        pipefill.run(program, stage=-2)
    with pytest.raises(ValueError, match=r"^max_dim must be >= 0$"):
        pipefill.run(program, max_dim=-1)
    with pytest.raises(TypeError, match=r"^run\(\) takes a Plan, StreamProgram bytes or a path, "
                                        r"not int$"):
        pipefill.run(42)


# An option of the wrong type names itself (nanobind alone only says that run_bytes()'s
# arguments are incompatible, or a str iterations fails on a comparison); numpy scalars work.
@pytest.mark.parametrize("option, value, message", [
    ("time_scale", "x", "time_scale must be a number, not str"),
    ("iterations", "2", "iterations must be an int, not str"),
    ("iterations", 2.0, "iterations must be an int, not float"),
    ("stage", True, "stage must be an int, not bool"),
    ("max_dim", None, "max_dim must be an int, not NoneType"),
    ("fill", 1, "fill must be a bool, not int"),
    ("backend", None, "backend must be a str, not NoneType"),
    ("on_bad_checkpoint", 0, "on_bad_checkpoint must be a str, not int"),
])
def test_option_of_the_wrong_type_names_itself(tiny_plan, option, value, message):
    for program in (tiny_plan, tiny_plan.stream_program()):
        with pytest.raises(TypeError, match=f"^{message}$"):
            pipefill.run(program, **{option: value})


def test_numpy_scalars_are_options_too(tiny_plan):
    import numpy as np

    args = dict(FAST, iterations=np.int32(2), fill=np.bool_(False), max_dim=np.int64(8))
    args["time_scale"] = np.float32(args["time_scale"])
    r = pipefill.run(tiny_plan, **args)
    assert r.report()["iterations"] == 2 and r.report()["fill_enabled"] is False


def test_replay_of_a_device_that_does_not_exist(tiny_plan):
    with pytest.raises(pipefill.RunError) as info:
        pipefill.run(tiny_plan, stage=7, **FAST)
    assert info.value.status == "PFRT_ERROR_INVALID_ARGUMENT"


def test_corrupt_program_bytes(runtime_data):
    with pytest.raises(pipefill.RunError) as info:
        pipefill.run((runtime_data / "corrupt.pb").read_bytes())
    assert info.value.status == "PFRT_ERROR_PARSE"
    assert "not a valid binary StreamProgram" in str(info.value)


def test_corrupt_text_program_names_line_and_column(runtime_data):
    with pytest.raises(pipefill.RunError, match=r"corrupt\.pbtxt:\d+:\d+:") as info:
        pipefill.run(runtime_data / "corrupt.pbtxt")
    assert info.value.status == "PFRT_ERROR_PARSE"


def test_invalid_program(runtime_data):
    with pytest.raises(pipefill.RunError, match="event 3 does not exist") as info:
        pipefill.run(runtime_data / "invalid.pbtxt")
    assert info.value.status == "PFRT_ERROR_INVALID_PROGRAM"


def test_deadlocking_program_is_refused_not_hung(runtime_data):
    with pytest.raises(pipefill.RunError, match="can never run"):
        pipefill.run(runtime_data / "deadlock.pbtxt")


def test_missing_program_file(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        pipefill.run(tmp_path / "missing.pb")
    assert info.value.filename == str(tmp_path / "missing.pb")


def test_cuda_without_gpu_is_unavailable(tiny_plan):
    if pipefill.cuda_device_count() > 0:
        pytest.skip("a GPU is present: the CUDA backend is available here")
    with pytest.raises(pipefill.RunError) as info:
        pipefill.run(tiny_plan, backend="cuda", **FAST)
    assert info.value.status == "PFRT_ERROR_UNAVAILABLE"


def test_save_trace_has_every_device_and_the_plan(tiny_plan, tmp_path):
    run = pipefill.run(tiny_plan, iterations=2, **FAST)
    run.save_trace(tmp_path / "run.trace.json")
    trace = json.loads((tmp_path / "run.trace.json").read_text())
    report = run.report()
    processes = {e["pid"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert processes == {d["device"] for d in report["devices"]}
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["args"]["time"] for e in slices} <= {"measured", "modelled", "emulated", "planned"}
    # One fill slice per chunk the run reports; the plan's computes in both iterations.
    fill = [e for e in slices if e["cat"] == "fill"]
    assert len(fill) == sum(j["chunks_run"] for j in report["fill"]["jobs"]) > 0
    planned = [e for e in slices if e["cat"] == "planned" and not e["name"].startswith("bubble")]
    computes = [e for e in slices if e["cat"] == "compute"]
    assert len(planned) == len(computes) > 0
    assert trace["otherData"]["time_scale"] == FAST["time_scale"]


def test_report_writes_to_missing_directory_raise(tiny_plan, tmp_path):
    run = pipefill.run(tiny_plan, iterations=1, **FAST)
    with pytest.raises(OSError):
        run.save_trace(tmp_path / "no" / "run.trace.json")
    with pytest.raises(OSError):
        run.save_json(tmp_path / "no" / "run.json")
    with pytest.raises(OSError):
        run.save_profile(tmp_path / "no" / "profile.pbtxt")


def test_quickstart_example_runs(repo, tiny_job):
    import os
    import sys

    env = dict(os.environ)
    out = subprocess.run([sys.executable, repo / "examples" / "python" / "quickstart.py", tiny_job],
                         check=True, capture_output=True, text=True, env=env, timeout=120).stdout
    planned = pipefill.compile_file(tiny_job).report()["iteration_time_us"] / 1e3
    assert f"tiny: planned iteration {planned:.2f} ms" in out
    assert "host run: 2 iterations" in out and "recompiled from the run's profile" in out
    # The label follows the run's time model (modelled, set at the top of this
    # module): a modelled run never prints its mean as measured.
    assert env["PFRT_TIME_MODEL"] == "modelled"
    host_line = next(line for line in out.splitlines() if line.startswith("host run:"))
    assert "modelled mean" in host_line and "measured" not in host_line


# Ctrl-C during pipefill.run: the run used to go on to its last iteration (pfrt_run held the
# thread, the KeyboardInterrupt waited for it). Now the run stops at its next iteration boundary
# and KeyboardInterrupt is raised; the next run is not stopped.
INTERRUPTED_RUN = """
import os, sys, time
os.environ.pop("PFRT_TIME_MODEL", None)  # real time: one iteration takes milliseconds
os.environ.pop("PFRT_FILL_POLICY", None)
import pipefill
plan = pipefill.compile_file(sys.argv[1])
print("ready", flush=True)
try:
    pipefill.run(plan, iterations=1000000)
    print("finished")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
print("next run:", pipefill.run(plan, iterations=3).stats()["iterations"])
"""


def test_ctrl_c_stops_a_run(tiny_job):
    from conftest import interrupt_python

    out, seconds = interrupt_python(INTERRUPTED_RUN, str(tiny_job))
    assert "KeyboardInterrupt" in out and "finished" not in out, out
    assert "next run: 3" in out, out
    assert seconds < 20, out
