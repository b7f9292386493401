"""Checks the pipefill package that `pip install .` put into this interpreter's
environment (run with `python -I`, so neither PYTHONPATH nor the current
directory can shadow it). Exits 77 (ctest: skipped) when it is not installed.

usage: python -I check_installed.py JOB.pbtxt
"""

import importlib.util
import pathlib
import sys
import sysconfig


def main() -> int:
    job = pathlib.Path(sys.argv[1])
    if importlib.util.find_spec("pipefill") is None:
        print(f"SKIP: pipefill is not installed in {sys.prefix} "
              "(scripts/test.sh runs `pip install .` into .venv/ before ctest)")
        return 77
    import pipefill

    site = pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()
    where = pathlib.Path(pipefill.__file__).resolve()
    print(f"pipefill {pipefill.__version__} from {where}")
    if site not in where.parents:
        print(f"FAIL: imported from {where}, not from {site}")
        return 1
    pkg = where.parent
    for name in ("__init__.py", "_errors.py", "_core.pyi", "py.typed"):
        if not (pkg / name).exists():
            print(f"FAIL: {name} is missing from the installed package {pkg}")
            return 1
    plan = pipefill.compile_file(job)
    report = plan.report()
    if not {"iteration_time_us", "bubble_fraction", "stages", "fill"} <= report.keys():
        print(f"FAIL: report keys {sorted(report)}")
        return 1
    run = pipefill.run(plan, iterations=1, time_scale=0.05, max_dim=32)
    if run.stats()["iterations"] != 1:
        print(f"FAIL: run stats {run.stats()}")
        return 1
    try:
        pipefill.compile("pipeline {", name="bad.pbtxt")
    except pipefill.CompileError as e:
        if "bad.pbtxt:1:" not in str(e):
            print(f"FAIL: error without a location: {e}")
            return 1
    else:
        print("FAIL: bad JobSpec text compiled")
        return 1
    print(f"ok: compiled {job.name} (bubble fraction {report['bubble_fraction']:.3f}) and ran "
          f"it on the host backend")
    return 0


if __name__ == "__main__":
    sys.exit(main())
