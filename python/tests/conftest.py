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
