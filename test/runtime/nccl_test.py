"""ctest's pipefill-run.nccl: CUDA ranks whose sends move their bytes with NCCL.

A 2-stage plan (test/runtime/Inputs/two_stage.pbtxt) runs as 2 MPI ranks on the CUDA backend, one
GPU per rank (the local rank picks it):
1. --rank-transfer nccl: the run succeeds (every ncclSend met its ncclRecv: a mismatch
   would hang until the peer timeout) and the report says transfers between ranks are measured.
2. --rank-transfer modelled: the same run with the planned transfer time; the report says so.
3. The two runs have the same report keys apart from that label's value and equal fill accounting
   of the plan (planned samples).
4. --rank-transfer nccl with PFRT_NCCL_LIBRARY pointing nowhere: a clear error, non-zero exit,
   no hang.

Needs two GPUs, mpirun and a runtime built with MPI and nccl.h; otherwise it exits 77 (ctest:
skipped) and says which is missing. (NCCL refuses two ranks on one GPU by default, so one GPU is not
enough here; docs/runtime.md §5b says how ranks with different NCCL_HOSTID values could share one.)

usage: python3 nccl_test.py BIN_DIR TWO_STAGE_PBTXT WORKDIR
"""

import json
import os
import shutil
import subprocess
import sys
import time


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def gpu_count():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    out = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def main():
    bin_dir, job, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    if not shutil.which("mpirun"):
        skip("mpirun is not installed")
    gpus = gpu_count()
    if gpus < 2:
        skip(f"needs 2 GPUs (one per rank; NCCL refuses two ranks on one GPU), found {gpus}")
    exe = os.path.join(bin_dir, "pipefill-run")
    plan = os.path.join(work, "two.pb")
    subprocess.run([os.path.join(bin_dir, "pipefill-compile"), job, "--stream-program", plan],
                   check=True)
    failures = []

    def check(ok, what):
        print(("ok: " if ok else "FAIL: ") + what, flush=True)
        if not ok:
            failures.append(what)

    def ranks(transfer, report, extra_env=None):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_btl_vader_single_copy_mechanism="none")
        env.update(extra_env or {})
        cmd = [shutil.which("mpirun"), "-n", "2"]
        for k in (extra_env or {}):
            cmd += ["-x", k]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        cmd += [exe, plan, "--backend", "cuda", "--rank-transfer", transfer, "--iterations", "3",
                "--report", report,
                "--peer-timeout", "60", "--quiet"]
        start = time.monotonic()
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        except subprocess.TimeoutExpired:
            check(False, f"{transfer}: mpirun -n 2 did not finish in 300 s (hang)")
            return None
        print(f"{transfer}: exit {out.returncode} in {time.monotonic() - start:.1f} s")
        return out

    reports = {}
    for transfer in ("nccl", "modelled"):
        path = os.path.join(work, f"{transfer}.json")
        out = ranks(transfer, path)
        ok = out is not None and out.returncode == 0
        check(ok, f"{transfer}: 2-rank CUDA run")
        if not ok:
            if out:
                print(out.stdout[-3000:], out.stderr[-3000:])
            continue
        reports[transfer] = json.load(open(path))
        label = reports[transfer]["labels"].get("transfers_between_ranks")
        want = "measured" if transfer == "nccl" else "modelled"
        check(label == want, f"{transfer}: labels.transfers_between_ranks is {label!r} ({want!r})")
    if len(reports) == 2:
        a, b = reports["nccl"], reports["modelled"]
        check(set(a) == set(b), "nccl and modelled reports have the same keys")
        check(a["planned_iteration_us"] == b["planned_iteration_us"],
              "the same plan (planned iteration time)")
        check([j["samples_planned"] for j in a["fill"]["jobs"]] ==
              [j["samples_planned"] for j in b["fill"]["jobs"]], "the same planned fill")

    out = ranks("nccl", os.path.join(work, "bad.json"),
                {"PFRT_NCCL_LIBRARY": "/nonexistent/libnccl.so.2"})
    text = (out.stdout + out.stderr) if out else ""
    check(out is not None and out.returncode != 0 and
          "cannot load the NCCL library '/nonexistent/libnccl.so.2'" in text,
          "a missing NCCL library with --rank-transfer nccl is a clear error")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
