"""ctest's pipefill-run.ranks-faults: ranks that hang, fail or were started differently.

The project's rule for rank mode (docs/runtime.md, "Ranks as processes"): a peer that fails or
freezes, or ranks started with different options, end with a clear error and a non-zero exit in
bounded time (about --peer-timeout), never a hang, a crash or a lost result. A fault injector
(test/runtime/fault_shim.c, preloaded into the ranks with mpirun -x LD_PRELOAD) freezes one rank
(SIGSTOP) at a chosen call; each case checks the exit status, the error text and the time taken.
Every run is bounded by a timeout; on a timeout the test kills what it started (mpirun's process
group and the frozen ranks, by pid) and fails.

Exits 77 (ctest: skipped, with the reason) without mpirun or when pipefill-run was built without
MPI.

usage: python3 rank_faults_test.py BIN_DIR FAULT_SHIM_SO FOUR_STAGE_PBTXT WORKDIR
"""

import glob
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

RUN = ["--backend", "host", "--time-model", "modelled", "--fill-policy", "unbounded",
       "--time-scale", "0.2", "--quiet"]
PEER_TIMEOUT = 3
# MPI_Init, the ranks' meeting at exit and MPI_Finalize wait --peer-timeout but at least this long
# (runtime/MpiExit.h, kMpiExitFloorS).
EXIT_FLOOR = 5

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def mpirun_prefix():
    cmd = [shutil.which("mpirun"), "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


class Env:
    bin_dir = shim = four = two_pbtxt = program = work = ""


def kill_pids(path):
    for line in open(path).read().split() if os.path.exists(path) else []:
        try:
            os.kill(int(line), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def run_mpi(groups, fault=None, timeout=60):
    """Runs `groups` ([(n, args)], joined with ':') under mpirun, with the fault injector when
    `fault` (a dict of FAULT_* settings) is given. Returns (returncode or None on a hang, output,
    seconds)."""
    pids = os.path.join(Env.work, "fault.pids")
    if os.path.exists(pids):
        os.remove(pids)
    cmd = mpirun_prefix()
    if fault:
        cmd += ["-x", "LD_PRELOAD=" + Env.shim, "-x", "FAULT_PIDS=" + pids]
        for k, v in fault.items():
            cmd += ["-x", f"{k}={v}"]
    exe = os.path.join(Env.bin_dir, "pipefill-run")
    for i, (n, args) in enumerate(groups):
        cmd += ([":"] if i else []) + ["-n", str(n), exe, Env.program, *args]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        kill_pids(pids)
        out, _ = proc.communicate()
        rc = None
    kill_pids(pids)  # a frozen rank mpirun did not end
    return rc, out, time.monotonic() - start


def expect_failure(what, groups, needles, fault=None, limit=30, timeout=60):
    """The run fails (non-zero exit) within `limit` seconds and its output names `needles`."""
    rc, out, secs = run_mpi(groups, fault, timeout)
    ok = rc is not None and rc != 0 and secs < limit and all(n in out for n in needles)
    check(ok, f"{what}: exit {rc if rc is not None else 'none (hang, killed)'} in {secs:.1f} s "
              f"(limit {limit} s), output names {needles}")
    if not ok:
        print(out[-3000:])
    return out


def report(name):
    return os.path.join(Env.work, name + ".json")


def clean(name):
    for f in glob.glob(os.path.join(Env.work, name + "*")):
        os.remove(f)


def finalize_hang():
    """A1: a rank frozen between the exit barrier and MPI_Finalize: the others' MPI_Finalize
    waits for it (Open MPI's is a fence), bounded by the peer timeout; the reports are written."""
    clean("fin")
    expect_failure(
        "a rank frozen before MPI_Finalize",
        [(4, [*RUN, "--iterations", "3", "--peer-timeout", str(PEER_TIMEOUT),
              "--report", report("fin")])],
        [f"MPI_Finalize did not return after {EXIT_FLOOR} s (a peer is hung"],
        fault={"FAULT_RANK": 2, "FAULT_AT": "MPI_Finalize"})
    check(os.path.exists(report("fin")) and
          json.load(open(report("fin"))).get("iterations") == 3,
          "a rank frozen before MPI_Finalize: the merged report was written before")


def init_hang():
    """D1: a rank frozen before MPI_Init: Open MPI's MPI_Init waits for every rank (a fence over
    the launcher), so the others waited in it forever. Now a watchdog ends each of them after
    --peer-timeout (at least EXIT_FLOOR s) with a clear message."""
    expect_failure(
        "a rank frozen before MPI_Init",
        [(4, [*RUN, "--iterations", "2", "--peer-timeout", str(PEER_TIMEOUT)])],
        [f"MPI_Init did not return after {EXIT_FLOOR} s"],
        fault={"FAULT_RANK": 1, "FAULT_AT": "MPI_Init_thread"}, limit=25, timeout=45)


def setup_hang():
    """D2: a rank frozen right after MPI_Init: the others waited forever in MPI_Comm_dup (a
    blocking collective). The communicators are now made with MPI_Comm_idup, polled under
    --peer-timeout."""
    expect_failure(
        "a rank frozen after MPI_Init (before the communicators are made)",
        [(4, [*RUN, "--iterations", "2", "--peer-timeout", str(PEER_TIMEOUT)])],
        ["making the run's communicators", f"timed out after {PEER_TIMEOUT} s"],
        fault={"FAULT_RANK": 1, "FAULT_AT": "MPI_Init_thread", "FAULT_WHEN": "after"},
        limit=25, timeout=45)


def exit_hang():
    """D3: a rank frozen before the ranks meet at exit: the others waited forever at the exit
    barrier (unbounded: rank 0 may merge for minutes). Now each rank hears from the ranks it waits
    for at least once a second (heartbeats from the final gather on); rank 0 fails when a rank
    goes silent for --peer-timeout (at least EXIT_FLOOR s). The merged report was written."""
    clean("eh")
    expect_failure(
        "a rank frozen before the ranks meet at exit",
        [(4, [*RUN, "--iterations", "3", "--peer-timeout", str(PEER_TIMEOUT),
              "--report", report("eh")])],
        [f"rank 0: no word from rank 2 for {EXIT_FLOOR} s at exit"],
        fault={"FAULT_RANK": 2, "FAULT_AT": "MPI_Finalized"}, limit=25, timeout=45)
    check(os.path.exists(report("eh")) and json.load(open(report("eh"))).get("iterations") == 3,
          "a rank frozen before the ranks meet at exit: the merged report was written before")


def merge_hang():
    """D4: rank 0 frozen while it writes the merged report: the others waited forever at exit.
    Now rank 0 sends heartbeats while it merges and writes; without them for --peer-timeout (at
    least EXIT_FLOOR s) the others fail. Every rank's part was written before."""
    clean("mh")
    expect_failure(
        "rank 0 frozen while it writes the merged report",
        [(4, [*RUN, "--iterations", "3", "--peer-timeout", str(PEER_TIMEOUT),
              "--report", report("mh")])],
        [f"no word from rank 0 for {EXIT_FLOOR} s while it merges and writes the report"],
        fault={"FAULT_RANK": 0, "FAULT_AT": "rename", "FAULT_NTH": 2}, limit=25, timeout=45)
    parts = [os.path.join(Env.work, f"mh.rank{r}.json") for r in range(4)]
    check(all(os.path.exists(p) for p in parts),
          "rank 0 frozen while it writes the merged report: every rank's part was written")


def mpi_errors():
    """D5: failed nonblocking MPI calls were ignored (MPI_Ibarrier, MPI_Test, the gathers' calls):
    an MPI_Test that fails ran on into the peer timeout with a wrong reason, a failed MPI_Ibarrier
    left its request unset. Each now fails the run naming the call and MPI's error."""
    common = [*RUN, "--iterations", "3", "--peer-timeout", str(PEER_TIMEOUT)]
    expect_failure(
        "MPI_Ibarrier fails on a rank (the start barrier)",
        [(4, common)], ["MPI_Ibarrier (the start barrier", "failed: MPI_ERR_OTHER"],
        fault={"FAULT_RANK": 1, "FAULT_AT": "MPI_Ibarrier", "FAULT_SIG": "ERR"}, limit=20)
    expect_failure(
        "MPI_Test fails on a rank (from its 30th call on)",
        [(4, common)], ["rank 2: MPI_Test (", "failed: MPI_ERR_OTHER"],
        fault={"FAULT_RANK": 2, "FAULT_AT": "MPI_Test", "FAULT_SIG": "ERR", "FAULT_NTH": 30},
        limit=20)


def finalize_floor():
    """D6: MPI_Finalize was bounded by --peer-timeout alone: with --peer-timeout 0.5, a rank 2 s
    late into MPI_Finalize failed a run whose outputs were all written. The bound is now at least
    EXIT_FLOOR s."""
    clean("ff")
    rc, out, secs = run_mpi(
        [(4, [*RUN, "--iterations", "2", "--peer-timeout", "0.5", "--report", report("ff")])],
        fault={"FAULT_RANK": 2, "FAULT_AT": "MPI_Finalize", "FAULT_SIG": "DELAY",
               "FAULT_DELAY_S": 2}, timeout=45)
    ok = rc == 0 and "did not return" not in out and os.path.exists(report("ff"))
    check(ok, f"--peer-timeout 0.5, a rank 2 s late into MPI_Finalize: the run succeeds "
              f"(exit {rc}, {secs:.1f} s)")
    if not ok:
        print(out[-3000:])


def compare_differs():
    """A4: ranks given another --compare N ran other numbers of runs; the ones with fewer waited at
    exit for the others, which waited in their next run: a hang. Now refused at the first run."""
    common = [*RUN, "--iterations", "2", "--peer-timeout", str(PEER_TIMEOUT)]
    expect_failure(
        "ranks with another --compare N",
        [(3, [*common, "--compare", "1"]), (1, [*common, "--compare", "2"])],
        ["runs with --compare ", "(run 1 of ", "every rank must run the same program"],
        limit=20)
    expect_failure(
        "a rank with --compare, the others without",
        [(3, [*common, "--no-fill"]), (1, [*common, "--compare", "1"])],
        ["runs with --compare ", "every rank must run the same program"], limit=20)


def communicators_reused():
    """C3a: each run made two communicators and never freed them (MPI has about 32k ids, --compare
    1000 is 4002 runs); now a process makes them once (three: messages, stop votes, exit). The
    fault injector kills rank 1 at a fourth communicator made (MPI_Comm_idup): --compare 1 (6 runs)
    must not make one."""
    rc, out, secs = run_mpi(
        [(4, [*RUN, "--iterations", "2", "--compare", "1", "--peer-timeout", "20"])],
        fault={"FAULT_RANK": 1, "FAULT_AT": "MPI_Comm_idup", "FAULT_NTH": 4, "FAULT_SIG": "KILL"})
    ok = rc == 0 and "FAULT:" not in out
    check(ok, f"--compare 1 as 4 ranks (6 runs) makes its communicators once "
              f"(exit {rc}, {secs:.1f} s)")
    if not ok:
        print(out[-3000:])


def parts_before_gather():
    """B: a run that failed at its end (rank 0's gather or merge) lost every part: rank 0 wrote
    none, the others after the gather only. Now each rank writes its part before the gather; a
    rank frozen at the gather makes the run fail, and --merge of the parts gives the report."""
    clean("pg")
    expect_failure(
        "a rank frozen at the gather",
        [(4, [*RUN, "--iterations", "3", "--peer-timeout", str(PEER_TIMEOUT),
              "--report", report("pg")])],
        ["gathering the ranks' results on rank 0 timed out"],
        fault={"FAULT_RANK": 2, "FAULT_AT": "MPI_Igatherv"})
    parts = [os.path.join(Env.work, f"pg.rank{r}.json") for r in range(4)]
    check(all(os.path.exists(p) for p in parts), "a rank frozen at the gather: every rank's part "
          f"was written ({[os.path.basename(p) for p in parts if os.path.exists(p)]})")
    merged = os.path.join(Env.work, "pg.merged.json")
    out = subprocess.run([os.path.join(Env.bin_dir, "pipefill-run"), "--merge", *parts,
                          "--report", merged, "--quiet"], capture_output=True, text=True,
                         timeout=60)
    check(out.returncode == 0 and json.load(open(merged)).get("iterations") == 3,
          "a rank frozen at the gather: --merge of the parts gives the run's report")


def long_run_small_timeout():
    """B3: after 4000 iterations each rank serializes a part of MBs and reaches the gather up to
    a second after the others: a --peer-timeout of 0.2 s failed that healthy run at its end. The
    gather now also waits four times the rank's own serializing and saving time."""
    clean("long")
    rc, out, secs = run_mpi(
        [(4, ["--backend", "host", "--time-model", "modelled", "--fill-policy", "unbounded",
              "--quiet", "--time-scale", "0.001", "--iterations", "4000", "--no-fill",
              "--peer-timeout", "0.2", "--report", report("long")])], timeout=120)
    ok = rc == 0 and os.path.exists(report("long"))
    check(ok, f"4000 iterations with --peer-timeout 0.2: the gather waits for ranks still "
              f"serializing (exit {rc}, {secs:.1f} s)")
    if not ok:
        print(out[-3000:])


def set_iterations_done(path, new):
    """Rewrites a fresh checkpoint's iterations_done (2) to `new`, with its size and FNV-1a
    header (a run past 10^6 iterations in seconds)."""
    def varint(n):
        out = b""
        while True:
            b, n = n & 0x7f, n >> 7
            if not n:
                return out + bytes([b])
            out += bytes([b | 0x80])
    data = open(path, "rb").read()
    payload = data[32:]
    i = payload.index(b"\x10\x02")  # field 2, iterations_done, = 2
    payload = payload[:i] + b"\x10" + varint(new) + payload[i + 2:]
    h = 1469598103934665603
    for c in payload:
        h = ((h ^ c) * 1099511628211) & 0xffffffffffffffff
    os.remove(path)  # a new file: the history's hard links keep iteration 2
    open(path, "wb").write(data[:16] + struct.pack("<QQ", len(payload), h) + payload)


def resume_past_million():
    """B1: a resume past iteration 10^6 ran and then failed at the merge ("a run has at most 10^6
    of each": the bound was applied to the first iteration); --iterations above 10^6 ran in one
    process and failed the merge with ranks. Now a run starts anywhere and runs at most 10^6, in
    both modes, refused at the start."""
    clean("million")
    ck = os.path.join(Env.work, "million.ck")
    args = [*RUN, "--no-fill", "--peer-timeout", "20", "--checkpoint", ck]
    rc, out, _ = run_mpi([(4, [*args, "--iterations", "2"])])
    check(rc == 0, f"a 2-iteration run with --checkpoint (exit {rc})")
    for r in range(4):
        set_iterations_done(f"{ck}.rank{r}", 1000010)
        for f in glob.glob(f"{ck}.rank{r}.it*"):
            os.remove(f)
    rc, out, secs = run_mpi([(4, [*args, "--iterations", "1000012", "--report",
                                  report("million")])])
    got = json.load(open(report("million"))) if rc == 0 else {}
    ok = rc == 0 and got.get("first_iteration") == 1000010 and got.get("iterations") == 2
    check(ok, f"a resume from iteration 1000010 to 1000012 as 4 ranks (exit {rc}, {secs:.1f} s, "
              f"first {got.get('first_iteration')}, {got.get('iterations')} iterations)")
    if not ok:
        print(out[-3000:])
    exe = os.path.join(Env.bin_dir, "pipefill-run")
    start = time.monotonic()
    try:
        p = subprocess.run([exe, Env.four, *RUN, "--iterations", "1000001"], capture_output=True,
                           text=True, timeout=30)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        rc, text = None, "(ran on: not refused)"
    check(rc not in (0, None) and "a run has at most 1000000" in text,
          f"--iterations 1000001 in one process: refused at the start (exit {rc}, "
          f"{time.monotonic() - start:.1f} s)")
    expect_failure("--iterations 1000001 as 4 ranks: refused at the start",
                   [(4, [*RUN, "--iterations", "1000001"])], ["a run has at most 1000000"],
                   limit=20, timeout=30)


def output_at_checkpoint_temp():
    """C2: an output named like a checkpoint's temporary file (CHECKPOINT[.rankR].tmp.XXXXXX) was
    written, then silently deleted by the next run with that --checkpoint (it removes such files
    as left over by a killed run). Such names are now refused as outputs before the run."""
    ck = os.path.join(Env.work, "tmpck")
    exe = os.path.join(Env.bin_dir, "pipefill-run")
    single = subprocess.run([exe, Env.four, *RUN, "--iterations", "1", "--checkpoint", ck,
                             "--report", ck + ".tmp.report"], capture_output=True, text=True,
                            timeout=60)
    check(single.returncode == 2 and "is a name of the checkpoint's temporary files" in
          single.stderr and not os.path.exists(ck + ".tmp.report"),
          f"one process: --report CHECKPOINT.tmp.report refused (exit {single.returncode})")
    expect_failure(
        "4 ranks: --report CHECKPOINT.rank2.tmp.abcdef",
        [(4, [*RUN, "--iterations", "1", "--checkpoint", ck, "--report",
              ck + ".rank2.tmp.abcdef"])],
        ["is a name of rank 2's checkpoint temporary files"], limit=20)


def has_gpu():
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl")


def backends_differ():
    """C1, B2 (CUDA only, skipped without a GPU): ranks on different backends ran the whole run
    and were refused at the merge; ranks with another --rank-transfer met in the NCCL setup, a
    collective only the NCCL ranks join (mismatched MPI calls). Both are now refused at the start,
    before the backends are prepared."""
    if not has_gpu():
        print("skip: backends: no GPU (/dev/nvidia0)")
        return
    two = os.path.join(Env.work, "two.pb")
    subprocess.run([os.path.join(Env.bin_dir, "pipefill-compile"), Env.two_pbtxt,
                    "--stream-program", two], check=True, stdout=subprocess.DEVNULL)
    common = ["--time-model", "modelled", "--time-scale", "1", "--max-dim", "128", "--quiet",
              "--iterations", "3", "--peer-timeout", "20"]
    Env.program = two
    try:
        expect_failure(
            "a CUDA rank and a host rank",
            [(1, ["--backend", "cuda", "--rank-transfer", "modelled", *common]),
             (1, ["--backend", "host", *common])],
            ["runs with the backend (--backend, as resolved) ",
             "every rank must run the same program"], limit=40, timeout=45)
        expect_failure(
            "CUDA ranks with another --rank-transfer",
            [(1, ["--backend", "cuda", "--rank-transfer", "nccl", *common]),
             (1, ["--backend", "cuda", "--rank-transfer", "modelled", *common])],
            ["runs with --rank-transfer ", "every rank must run the same program"], limit=40, timeout=45)
    finally:
        Env.program = Env.four


CASES = {
    "finalize": finalize_hang,
    "init": init_hang,
    "setup": setup_hang,
    "exit": exit_hang,
    "merge": merge_hang,
    "errors": mpi_errors,
    "floor": finalize_floor,
    "compare": compare_differs,
    "communicators": communicators_reused,
    "backends": backends_differ,
    "parts": parts_before_gather,
    "long": long_run_small_timeout,
    "million": resume_past_million,
    "temps": output_at_checkpoint_temp,
}


def main():
    Env.bin_dir, Env.shim, four_pbtxt, Env.work = sys.argv[1:5]
    only = sys.argv[5:]
    os.makedirs(Env.work, exist_ok=True)
    if shutil.which("mpirun") is None:
        print("SKIP: mpirun not found (scripts/setup.sh installs openmpi-bin)")
        return 77
    Env.four = Env.program = os.path.join(Env.work, "four.pb")
    Env.two_pbtxt = os.path.join(os.path.dirname(four_pbtxt), "two_stage.pbtxt")
    subprocess.run([os.path.join(Env.bin_dir, "pipefill-compile"), four_pbtxt,
                    "--stream-program", Env.four], check=True, stdout=subprocess.DEVNULL)
    for name, case in CASES.items():
        if not only or name in only:
            start = time.monotonic()
            case()
            print(f"-- {name}: {time.monotonic() - start:.1f} s", flush=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all rank fault checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
