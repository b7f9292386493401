"""Checks the pipefill package with only its runtime module (pipefill._rt, no compiler).

Plain Python (no pytest, no numpy): it also runs with the interpreter that the GPU
machines have, against the package that scripts/gpu-bundle.sh packs (gpu-bundle and
scripts/gpu-check.sh run it); test_package.py runs it against the build's site-rt/.
Checks that `import pipefill` gives the runtime module and loads no compiler library,
that the compiler's entry points raise ModuleNotFoundError saying the compiler module
is not installed, and a host-backend round trip on PROGRAM (a compiled StreamProgram):
a session lists its bubbles, fills one (plan chunks and a FillTask's steps), reports
a misuse as RunError; pfrt_run runs the program. Exits 0, or 1 after printing FAIL.

usage: python check_runtime_only.py PROGRAM
"""

from __future__ import annotations

import importlib.util
import os
import sys

# The session's chunks run whatever the machine's load (modelled time, no bound).
os.environ["PFRT_TIME_MODEL"] = "modelled"
os.environ["PFRT_FILL_POLICY"] = "unbounded"

import pipefill  # noqa: E402

COMPILER_LIBRARIES = ("libLLVM", "libMLIR", "libz3", "libclang")
NOT_INSTALLED = "needs pipefill's compiler module (pipefill._core), which is not installed"


class Failure(Exception):
    pass


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise Failure(what)


def check_module() -> None:
    native = pipefill._native.native
    print(f"pipefill from {os.path.dirname(pipefill.__file__)}; module {native.__file__}")
    expect(native.__name__ == "pipefill._rt" and not pipefill._native.HAVE_COMPILER,
           f"imported {native.__name__}, not the runtime-only pipefill._rt")
    if os.path.exists("/proc/self/maps"):
        with open("/proc/self/maps") as f:
            loaded = {line.split()[-1] for line in f if "/" in line}
        compiler = sorted(p for p in loaded if os.path.basename(p).startswith(COMPILER_LIBRARIES))
        expect(not compiler, f"compiler libraries loaded: {compiler}")
    missing = [name for name in pipefill.__all__ if not hasattr(pipefill, name)]
    expect(not missing, f"pipefill.__all__ names missing: {missing}")
    expect(importlib.util.find_spec("pipefill.torch") is not None, "pipefill.torch is missing")
    if importlib.util.find_spec("torch") is not None:
        wrapper = importlib.import_module("pipefill.torch")
        expect(hasattr(wrapper, "FilledSchedule"), "pipefill.torch has no FilledSchedule")
    else:
        print("note: no torch here: pipefill.torch found, not imported")


def check_no_compiler(program: str) -> None:
    calls = {
        "pipefill.compile": lambda: pipefill.compile('name: "x"'),
        "pipefill.compile_file": lambda: pipefill.compile_file(program),
        "pipefill.compile_torch_schedule": lambda: pipefill.compile_torch_schedule("", job=""),
        "pipefill.Plan": lambda: pipefill.Plan(),
    }
    for what, call in calls.items():
        try:
            call()
        except ModuleNotFoundError as e:
            expect(str(e).startswith(f"{what} {NOT_INSTALLED}") and e.name == "pipefill._core",
                   f"{what}: unclear error: {e}")
        else:
            raise Failure(f"{what} did not raise ModuleNotFoundError")


class Counter(pipefill.FillTask):
    def __init__(self) -> None:
        self.steps = 0

    def step(self) -> int:
        self.steps += 1
        return 1


def check_session(program: str) -> None:
    with pipefill.Session(program, 0, fill_idle_priority=False) as s:
        bubbles = s.bubbles()
        expect(bubbles and s.rank == 0 and s.ranks >= 1, f"session info {s.ranks} {bubbles}")
        filled = next((b for b in bubbles if b["chunks"] > 0), None)
        expect(filled is not None, "the program plans no fill chunk on rank 0")
        task = Counter()
        s.add_task(task, step_us=10, max_steps=3)
        with s.bubble(filled["bubble_id"], 10e6, wait=True) as b:
            pass
        expect(b.result["chunks_run"] > 0 and b.result["samples_completed"] > 0,
               f"bubble {filled['bubble_id']} ran no chunk: {b.result}")
        expect(task.steps == 3 and s.tasks()[0]["steps"] == 3,
               f"the fill task ran {task.steps} steps (expected 3)")
        s.iteration_end()
        try:
            s.begin(len(bubbles) + 1000)
        except pipefill.RunError as e:
            expect(e.status == "PFRT_ERROR_INVALID_ARGUMENT", f"status {e.status}")
        else:
            raise Failure("an unknown bubble was accepted")
        print(f"ok: session of rank 0 of {s.ranks}: {len(bubbles)} bubbles; bubble "
              f"{filled['bubble_id']} ran {b.result['chunks_run']} chunks, the task 3 steps")
    run = pipefill.run(program, iterations=1, time_scale=0.05, max_dim=32)
    expect(run.stats()["iterations"] == 1, f"run stats {run.stats()}")
    try:
        pipefill.run(program + ".missing")
    except FileNotFoundError:
        pass
    else:
        raise Failure("a missing program file was not FileNotFoundError")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        check_module()
        check_no_compiler(argv[1])
        check_session(argv[1])
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    print(f"ok: runtime-only pipefill (Python {sys.version.split()[0]}): the compiler's entry "
          "points say it is not installed; pfrt_run ran the program")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
