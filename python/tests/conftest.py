"""Shared fixtures of the pipefill package tests.

ctest runs this suite against the package staged in the build tree
(PIPEFILL_EXPECT_PACKAGE names it, and the check below makes sure that copy is
the one imported, never a stale installed one).
"""

from __future__ import annotations

import os
import pathlib

import pytest

import pipefill
from precompile_plans import plan_file_name

REPO = pathlib.Path(__file__).resolve().parents[2]


def pytest_report_header(config):
    return f"pipefill package: {pipefill.__file__}"


def pytest_sessionstart(session):
    expected = os.environ.get("PIPEFILL_EXPECT_PACKAGE")
    if expected:
        got = pathlib.Path(pipefill.__file__).resolve().parent
        if got != pathlib.Path(expected).resolve():
            raise pytest.UsageError(f"imported pipefill from {got}, expected {expected}")


@pytest.fixture(scope="session")
def repo() -> pathlib.Path:
    return REPO


@pytest.fixture(scope="session")
def tiny_job() -> pathlib.Path:
    return REPO / "test" / "runtime" / "Inputs" / "tiny.pbtxt"


@pytest.fixture(scope="session")
def runtime_data() -> pathlib.Path:
    return REPO / "runtime" / "tests" / "data"


@pytest.fixture(scope="session")
def tools() -> pathlib.Path:
    """The build tree's bin/ (command-line tools), for comparisons against them."""
    build = pathlib.Path(os.environ.get("PIPEFILL_BUILD_DIR", REPO / "build"))
    bin_dir = build / "bin"
    needed = ["pipefill-translate", "pipefill-opt", "pipefill-run"]
    missing = [t for t in needed if not (bin_dir / t).exists()]
    if missing:
        pytest.skip(f"command-line tools not built in {bin_dir}: {', '.join(missing)}")
    return bin_dir


def compiled(text: str):
    """The plan of JobSpec `text`, for pipefill.Session: pipefill.compile(text) where the
    compiler module is installed. Where this pipefill has the runtime only (pipefill._rt, a
    GPU machine), the StreamProgram that precompile_plans.py compiled from the same text, in the
    folder $PIPEFILL_TEST_PLANS (scripts/gpu-bundle.sh packs it; scripts/gpu-check.sh sets it)."""
    if pipefill._native.HAVE_COMPILER:
        return pipefill.compile(text)
    folder = os.environ.get("PIPEFILL_TEST_PLANS")
    if not folder:
        pytest.skip("this pipefill has the runtime only (no compiler module) and "
                    "PIPEFILL_TEST_PLANS names no folder of precompiled plans "
                    "(scripts/gpu-bundle.sh packs one)")
    path = pathlib.Path(folder) / plan_file_name(text)
    if not path.is_file():
        pytest.fail(f"no precompiled plan {path} for this JobSpec: precompile_plans.py compiles "
                    "those of torch_jobs.CUDA_JOBS (is it listed there?)")
    return path


def job_text(stages: int, microbatches: int, schedule: str = "ONE_F_ONE_B",
             virtual_stages: int = 1, forward_us: float = 100, backward_us: float = 200,
             extra: str = "") -> str:
    """A JobSpec without communication cost, so closed forms hold exactly."""
    vs = f" virtual_stages: {virtual_stages}" if virtual_stages > 1 else ""
    return (
        f'name: "t"\n'
        f"pipeline {{ stages: {stages} microbatches: {microbatches} schedule: {schedule}{vs} }}\n"
        f"stage {{ forward_us: {forward_us} backward_us: {backward_us} "
        f"activation_bytes: 0 stash_bytes: 1000 static_bytes: 1000 }}\n"
        f"hardware {{ gpu_memory_bytes: 100000000 }}\n"
        f"planner {{ min_bubble_us: 0 reserve_bytes: 0 }}\n" + extra
    )


def run_python(code: str, *args: str, timeout: float = 60, **kw):
    """Runs `code` in a fresh interpreter that imports this same pipefill (for what must not
    take the test process down: a hang, an abort, the interpreter's exit). Returns the
    CompletedProcess (text output); a run past `timeout` seconds fails the test."""
    import subprocess
    import sys

    env = dict(os.environ)
    paths = [str(pathlib.Path(pipefill.__file__).resolve().parents[1]),
             str(REPO / "python" / "tests")]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-c", code, *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the script ran past {timeout} s (a hang?); its output:\n{e.stdout}\n{e.stderr}")


def interrupt_python(code: str, *args: str, after_s: float = 0.5, timeout: float = 60):
    """Runs `code` as run_python does, sends it SIGINT (Ctrl-C) `after_s` seconds after it prints
    the line "ready", and returns (its output, seconds from the signal to its exit)."""
    import signal
    import subprocess
    import sys
    import time

    env = dict(os.environ)
    paths = [str(pathlib.Path(pipefill.__file__).resolve().parents[1]),
             str(REPO / "python" / "tests")]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    p = subprocess.Popen([sys.executable, "-u", "-c", code, *args], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        first = p.stdout.readline()
        assert first.strip() == "ready", first + p.stdout.read()
        time.sleep(after_s)
        p.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        out = p.communicate(timeout=timeout)[0]
        return out, time.monotonic() - t0
    except subprocess.TimeoutExpired:
        pytest.fail(f"the script did not stop within {timeout} s of Ctrl-C")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
