"""Compiles the JobSpecs of the CUDA-only tests (torch_jobs.CUDA_JOBS) into StreamPrograms
for a machine whose pipefill has the runtime module only (pipefill._rt: a GPU machine), where
conftest.compiled() loads them. scripts/gpu-bundle.sh runs it with the full build's package.
Each plan is named after its JobSpec's text (plan_file_name), so a changed JobSpec cannot load
a stale plan; the JobSpec is written beside it (.job.pbtxt).

usage: python precompile_plans.py OUTDIR
"""

from __future__ import annotations

import hashlib
import pathlib
import sys


def plan_file_name(text: str) -> str:
    """The file name of the plan compiled from JobSpec `text`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] + ".pb"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    import pipefill
    from torch_jobs import CUDA_JOBS

    out = pathlib.Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, text in CUDA_JOBS.items():
        path = out / plan_file_name(text)
        # What pipefill.Session(plan) runs: the stream program lowered with one loop.
        pipefill.compile(text).save(path, iterations=1)
        path.with_suffix(".job.pbtxt").write_text(text, encoding="utf-8")
        print(f"precompile_plans: {name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
