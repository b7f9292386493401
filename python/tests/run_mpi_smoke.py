"""ctest's mpi.smoke: mpirun starts 2 ranks of this interpreter with mpi4py and
they exchange data (an allreduce and a point-to-point message). Groundwork for
one process per pipeline rank. Exits 77 (ctest: skipped, with the reason) when
mpirun or mpi4py is missing; scripts/setup.sh installs both.

usage: python run_mpi_smoke.py
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

RANK_CODE = r"""
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.rank + 1)
if comm.rank == 0:
    comm.send({"from": 0, "payload": list(range(5))}, dest=1, tag=7)
else:
    msg = comm.recv(source=0, tag=7)
    assert msg == {"from": 0, "payload": [0, 1, 2, 3, 4]}, msg
print(f"rank {comm.rank} of {comm.size}: allreduce {total}", flush=True)
"""


def main() -> int:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("SKIP: mpirun not found (scripts/setup.sh installs openmpi-bin)")
        return 77
    if importlib.util.find_spec("mpi4py") is None:
        print(f"SKIP: mpi4py is not installed for {sys.executable} (scripts/setup.sh installs it)")
        return 77
    cmd = [mpirun, "-n", "2", "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [sys.executable, "-c", RANK_CODE]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        print("FAIL: mpirun did not finish in 120 s")
        return 1
    print(out.stdout, out.stderr, sep="")
    # mpirun forwards each rank's output as it comes, so two ranks' lines can
    # arrive glued together: match the reports, not whole lines.
    lines = sorted(re.findall(r"rank \d+ of \d+: allreduce \d+", out.stdout))
    # 1 + 2 from the two ranks: computed here, not by MPI.
    expected = [f"rank {r} of 2: allreduce 3" for r in range(2)]
    if out.returncode != 0 or lines != expected:
        print(f"FAIL: mpirun exited {out.returncode}, rank lines {lines}, expected {expected}")
        return 1
    print("ok: 2 MPI ranks started and exchanged data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
