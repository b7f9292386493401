"""The package with its runtime module only (pipefill._rt, no compiler): what a GPU machine
gets from scripts/gpu-bundle.sh. The build stages it in build/python/site-rt/ for the same
interpreter; each check runs in a subprocess with that package on PYTHONPATH."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import pipefill
from conftest import REPO
from precompile_plans import plan_file_name
from torch_jobs import CUDA_JOBS, P

TESTS = REPO / "python" / "tests"
PROGRAM = REPO / "runtime" / "tests" / "data" / "two_stage.pbtxt"


@pytest.fixture(scope="module")
def site_rt() -> pathlib.Path:
    """The build's package with pipefill._rt in place of _core (python/CMakeLists.txt)."""
    build = pathlib.Path(os.environ.get("PIPEFILL_BUILD_DIR", REPO / "build"))
    site = build.resolve() / "python" / "site-rt"
    if not list((site / "pipefill").glob("_rt.*")):
        pytest.skip(f"the runtime-only module is not built in {site}")
    return site


def run(args, pythonpath, cwd, timeout=120, **extra_env):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PIPEFILL_EXPECT_PACKAGE", "PIPEFILL_TEST_PLANS")}
    env.update(PYTHONPATH=os.pathsep.join(str(p) for p in pythonpath), **extra_env)
    return subprocess.run([sys.executable, *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def test_runtime_only_package(site_rt, tmp_path):
    # Sessions, fill tasks and runs from a compiled program; compile() and friends say that
    # the compiler module is not installed.
    check = run([TESTS / "check_runtime_only.py", PROGRAM], [site_rt], tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ok: runtime-only pipefill" in check.stdout


def test_runtime_only_check_refuses_the_compiler_module(tmp_path):
    # The check above can fail: the full package (with _core) is refused.
    check = run([TESTS / "check_runtime_only.py", PROGRAM],
                [pathlib.Path(pipefill.__file__).parents[1]], tmp_path)
    assert check.returncode == 1
    assert "FAIL: imported pipefill._core, not the runtime-only pipefill._rt" in check.stdout


def test_package_without_a_compiled_module_says_so(tmp_path):
    pkg = tmp_path / "pipefill"
    pkg.mkdir()
    for src in pathlib.Path(pipefill.__file__).parent.glob("*.py"):
        shutil.copy(src, pkg / src.name)
    r = run(["-c", "import pipefill"], [tmp_path], tmp_path, timeout=60)
    assert r.returncode != 0
    assert ("ModuleNotFoundError: pipefill: neither the compiler module pipefill._core nor the "
            f"runtime module pipefill._rt is installed in {pkg}") in r.stderr, r.stderr


def test_precompiled_plans_are_the_compiled_ones(tmp_path):
    # What scripts/gpu-bundle.sh packs for the CUDA-only tests: each plan gives the session
    # that the compiled plan gives.
    r = run([TESTS / "precompile_plans.py", tmp_path], [pathlib.Path(pipefill.__file__).parents[1],
                                                        TESTS], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    for text in CUDA_JOBS.values():
        path = tmp_path / plan_file_name(text)
        assert path.with_suffix(".job.pbtxt").read_text() == text
        for rank in range(P):
            with pipefill.Session(path, rank) as a, pipefill.Session(pipefill.compile(text),
                                                                     rank) as b:
                assert a.bubbles() == b.bubbles() and a.ops() == b.ops()
                assert a.bubbles(), f"rank {rank} has no bubbles"


RUNTIME_ONLY_TEST = '''
import pathlib
import pipefill
from conftest import compiled
from torch_jobs import CUDA_JOBS

def test_loads_the_precompiled_plan():
    plan = compiled(CUDA_JOBS["1f1b"])
    assert isinstance(plan, pathlib.Path)
    assert pipefill.Session(plan, 0).bubbles()

def test_an_unlisted_job_has_no_plan():
    compiled('name: "unlisted"')
'''


def test_runtime_only_tests_load_precompiled_plans(site_rt, tmp_path):
    plans = tmp_path / "plans"
    r = run([TESTS / "precompile_plans.py", plans], [pathlib.Path(pipefill.__file__).parents[1],
                                                     TESTS], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    (tmp_path / "test_x.py").write_text(RUNTIME_ONLY_TEST)
    pytest_args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rsf", tmp_path / "test_x.py"]
    r = run(pytest_args, [site_rt, TESTS], tmp_path, PIPEFILL_TEST_PLANS=str(plans))
    assert "1 failed, 1 passed" in r.stdout, r.stdout + r.stderr
    unlisted = plans / plan_file_name('name: "unlisted"')
    assert f"no precompiled plan {unlisted} for this JobSpec" in r.stdout, r.stdout
    # Without PIPEFILL_TEST_PLANS they skip, saying why.
    r = run(pytest_args, [site_rt, TESTS], tmp_path)
    assert "2 skipped" in r.stdout and "PIPEFILL_TEST_PLANS names no folder" in r.stdout, r.stdout
