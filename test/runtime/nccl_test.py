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
skipped) and says which is missing. NCCL refuses two ranks on one GPU (its duplicate check compares
the host hash and the bus id), so --one-gpu (scripts/gpu-check.sh on the one GPU lent to this
project) runs both ranks on GPU 0 (--device 0) as two hosts: each rank starts through a small
script that sets NCCL_HOSTID from its rank, with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 (and
NCCL_NET=Socket, NCCL_IB_DISABLE=1, NCCL_SOCKET_IFNAME=lo unless set), so the bytes go over the
socket transport on the loopback. That checks the communicator setup, the in-order pairing and
the first message's connection, not NVLink (and not speed: the two processes take turns on the
GPU); the ranks' whole output is printed (NCCL_DEBUG=INFO unless set).

usage: python3 nccl_test.py [--one-gpu] [--mpirun PATH] [--compiled] [--run-timeout S]
                            [--peer-timeout S] BIN_DIR TWO_STAGE_PBTXT WORKDIR
  --compiled: TWO_STAGE_PBTXT is already a StreamProgram (.pb or .pbtxt), not compiled with
  BIN_DIR/pipefill-compile (a GPU machine has no compiler).
"""

import argparse
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

RANK_SCRIPT = """#!/bin/sh
# One rank of nccl_test.py --one-gpu: a host id of its own, so NCCL takes the two ranks on one GPU
# for ranks on two hosts.
export NCCL_HOSTID="pfrt-nccl-test-rank${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}"
exec "$@"
"""


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def gpu_count():
    smi = shutil.which("nvidia-smi") or "/usr/local/nvidia/bin/nvidia-smi"
    if not os.access(smi, os.X_OK):
        return 0
    out = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def parse_args(argv):
    p = argparse.ArgumentParser(usage=__doc__.split("usage: ")[1].split("\n  --")[0])
    p.add_argument("--one-gpu", action="store_true")
    p.add_argument("--mpirun", default=shutil.which("mpirun"))
    p.add_argument("--compiled", action="store_true")
    p.add_argument("--run-timeout", type=float, default=300)
    p.add_argument("--peer-timeout", type=float, default=60)
    p.add_argument("bin_dir")
    p.add_argument("job")
    p.add_argument("work")
    return p.parse_args(argv)


class Ranks:
    """Starts the 2-rank runs and records the checks' outcomes."""

    def __init__(self, args, plan):
        self.args, self.plan, self.failures = args, plan, []
        self.exe = os.path.join(args.bin_dir, "pipefill-run")
        self.prefix = []  # between mpirun's options and the program
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                        OMPI_MCA_btl_vader_single_copy_mechanism="none")
        if args.one_gpu:
            script = os.path.join(args.work, "one-gpu-rank.sh")
            with open(script, "w") as f:
                f.write(RANK_SCRIPT)
            os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR)
            self.prefix = [script]
            self.env.update(NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1")
            for k, v in (("NCCL_NET", "Socket"), ("NCCL_IB_DISABLE", "1"),
                         ("NCCL_SOCKET_IFNAME", "lo"), ("NCCL_DEBUG", "INFO")):
                self.env.setdefault(k, v)

    def check(self, ok, what):
        print(("ok: " if ok else "FAIL: ") + what, flush=True)
        if not ok:
            self.failures.append(what)

    def run(self, transfer, report, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        cmd = [self.args.mpirun, "-n", "2"]
        for k in (extra_env or {}):
            cmd += ["-x", k]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        cmd += self.prefix + [self.exe, self.plan, "--backend", "cuda", "--rank-transfer",
                              transfer, "--iterations", "3", "--report", report,
                              "--peer-timeout", f"{self.args.peer_timeout:g}", "--quiet"]
        if self.args.one_gpu:
            cmd += ["--device", "0"]
        start = time.monotonic()
        # mpirun and its ranks in a process group of their own: on a timeout the whole group is
        # killed, so no rank is left on the GPU spinning in NCCL under the next check.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=self.args.run_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            self.check(False, f"{transfer}: mpirun -n 2 did not finish in "
                              f"{self.args.run_timeout:g} s (hang)")
            self.show(cmd, stdout, stderr)
            return None
        out = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
        print(f"{transfer}: exit {out.returncode} in {time.monotonic() - start:.1f} s", flush=True)
        if self.args.one_gpu:
            self.show(cmd, out.stdout, out.stderr)
        return out

    @staticmethod
    def show(cmd, stdout, stderr):
        def text(s):
            return s.decode(errors="replace") if isinstance(s, bytes) else (s or "")
        print("--- " + " ".join(cmd))
        print(text(stdout).rstrip())
        print(text(stderr).rstrip())
        print("---", flush=True)


def compare_reports(r, reports):
    a, b = reports["nccl"], reports["modelled"]
    r.check(set(a) == set(b), "nccl and modelled reports have the same keys")
    r.check(a["planned_iteration_us"] == b["planned_iteration_us"],
            "the same plan (planned iteration time)")
    r.check([j["samples_planned"] for j in a["fill"]["jobs"]] ==
            [j["samples_planned"] for j in b["fill"]["jobs"]], "the same planned fill")


def main():
    args = parse_args(sys.argv[1:])
    os.makedirs(args.work, exist_ok=True)
    if not args.mpirun or not shutil.which(args.mpirun):
        skip("mpirun is not installed" + (f" ({args.mpirun})" if args.mpirun else ""))
    gpus, need = gpu_count(), 1 if args.one_gpu else 2
    if gpus < need:
        skip(f"needs 1 GPU, found {gpus}" if args.one_gpu else
             f"needs 2 GPUs (one per rank; NCCL refuses two ranks on one GPU), found {gpus}")
    plan = args.job
    if not args.compiled:
        plan = os.path.join(args.work, "two.pb")
        subprocess.run([os.path.join(args.bin_dir, "pipefill-compile"), args.job,
                        "--stream-program", plan], check=True)
    r = Ranks(args, plan)
    # The quick check first: a slow NCCL run must not leave it without time.
    out = r.run("nccl", os.path.join(args.work, "bad.json"),
                {"PFRT_NCCL_LIBRARY": "/nonexistent/libnccl.so.2"})
    text = (out.stdout + out.stderr) if out else ""
    r.check(out is not None and out.returncode != 0 and
            "cannot load the NCCL library '/nonexistent/libnccl.so.2'" in text,
            "a missing NCCL library with --rank-transfer nccl is a clear error")
    reports = {}
    for transfer in ("nccl", "modelled"):
        path = os.path.join(args.work, f"{transfer}.json")
        out = r.run(transfer, path)
        ok = out is not None and out.returncode == 0
        r.check(ok, f"{transfer}: 2-rank CUDA run")
        if not ok:
            if out and not args.one_gpu:
                print(out.stdout[-3000:], out.stderr[-3000:])
            continue
        reports[transfer] = json.load(open(path))
        label = reports[transfer]["labels"].get("transfers_between_ranks")
        want = "measured" if transfer == "nccl" else "modelled"
        r.check(label == want,
                f"{transfer}: labels.transfers_between_ranks is {label!r} ({want!r})")
    if len(reports) == 2:
        compare_reports(r, reports)

    if r.failures:
        print(f"{len(r.failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
