"""ctest's python.pipeline_numpy: runs examples/python/pipeline_numpy.py on 4
MPI ranks for a few steps and checks that the model trains (loss at the last
step below loss at step 0, both parsed from the output) and that the fill job
did work in the bubbles (fill samples > 0). Exits 77 (ctest: skipped, with the
reason) when mpirun or mpi4py is missing; scripts/setup.sh installs both.

usage: python run_pipeline_example.py [STEPS]
"""

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "pipeline_numpy.py"


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("SKIP: mpirun not found (scripts/setup.sh installs openmpi-bin)")
        return 77
    if importlib.util.find_spec("mpi4py") is None:
        print(f"SKIP: mpi4py is not installed for {sys.executable} (scripts/setup.sh installs it)")
        return 77
    cmd = [mpirun, "-n", "4", "--oversubscribe"]
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # One BLAS thread per rank: 4 ranks share the machine's cores with the fill workers.
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    cmd += [sys.executable, str(EXAMPLE), "--steps", str(steps)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    except subprocess.TimeoutExpired:
        print("FAIL: mpirun did not finish in 240 s")
        return 1
    print(out.stdout, out.stderr, sep="")
    losses = {int(s): float(l) for s, l in re.findall(r"step (\d+) loss ([0-9.eE+-]+)", out.stdout)}
    samples = re.findall(r"^fill samples (\d+)", out.stdout, re.M)
    timing = re.search(r"without fill ([0-9.]+) ms, with fill ([0-9.]+) ms", out.stdout)
    problems = []
    if out.returncode != 0:
        problems.append(f"mpirun exited {out.returncode}")
    if sorted(losses) != list(range(steps)):
        problems.append(f"loss lines for steps {sorted(losses)}, expected 0..{steps - 1}")
    elif not losses[steps - 1] < losses[0]:
        problems.append(f"loss did not fall: step 0 {losses[0]}, step {steps - 1} {losses[steps - 1]}")
    if not samples or int(samples[-1]) <= 0:
        problems.append(f"no fill samples done ({samples})")
    if timing is None:
        problems.append("no measured step times printed")
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"ok: loss {losses[0]:.4f} -> {losses[steps - 1]:.4f}, fill samples {samples[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
