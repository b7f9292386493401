"""ctest's python.pipeline_numpy: runs examples/python/pipeline_numpy.py on 4
MPI ranks for a few steps and checks that the model trains (loss at the last
step below loss at step 0, both parsed from the output) and that the fill job
did work in the bubbles (fill samples > 0). Then Ctrl-C (SIGINT) to one rank of
a long run must end the whole job, non-zero, within a minute (the other ranks
waited for its messages forever, and it waited in MPI_Finalize). Exits 77
(ctest: skipped, with the reason) when mpirun or mpi4py is missing;
scripts/setup.sh installs both.

usage: python run_pipeline_example.py [STEPS]
"""

import importlib.util
import os
import pathlib
import re
import shutil
import signal
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
    base = cmd + [sys.executable, str(EXAMPLE), "--steps"]
    cmd = base + [str(steps)]
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
    return interrupt_one_rank(base, env)


def rank_pid(parent: int, rank: int):
    """The pid of MPI rank `rank` among `parent`'s children (mpirun forks the local ranks)."""
    for task in pathlib.Path(f"/proc/{parent}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                environ = pathlib.Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ:
                return int(child)
    return None


def interrupt_one_rank(base, env) -> int:
    proc = subprocess.Popen(base + ["100000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        # Training is under way once rank 0 prints its second step.
        for line in proc.stdout:
            if line.startswith("step 1 "):
                break
        pid = rank_pid(proc.pid, 2)
        if pid is None:
            print("FAIL: rank 2's process was not found among mpirun's children")
            return 1
        os.kill(pid, signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            print("FAIL: Ctrl-C to rank 2 did not end the job within 60 s (the other ranks "
                  "wait for it)")
            return 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode == 0 or "KeyboardInterrupt: stopping every rank" not in err:
        print(err[-3000:])
        print(f"FAIL: after Ctrl-C to rank 2, mpirun exited {proc.returncode}, expected a "
              f"failure that names the interrupt")
        return 1
    print(f"ok: Ctrl-C to rank 2 ended the job (mpirun exit {proc.returncode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
