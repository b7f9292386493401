"""ctest's pipefill-run.ranks: one process per pipeline rank (mpirun) against one process.

1. A 4-stage plan (test/runtime/Inputs/four_stage.pbtxt) runs once in one process and once as
   4 MPI ranks (host backend, modelled time, unbounded fill: deterministic). The merged report of
   the ranks has exactly the keys of the single-process report, and every number that does not
   come from the fill kernels' clock is equal: the main streams' timeline (iteration times, every
   bubble's start and gap per iteration, busy time) and the fill accounting (planned samples,
   samples completed, chunks run/deferred/skipped/pending, checksums).
2. `pipefill-run --merge` of the rank parts gives the report rank 0 gathered over MPI.
3. The bundled example (16 stages) as 16 ranks against one process, likewise.
4. Errors: world != device count, rank out of range, ranks started with other options (all fail
   at the start, naming the option), a rank that hangs (the others fail with a timeout naming
   the silent rank, no hang), --merge of parts that do not belong together (other program,
   settings, a rank missing, or two runs with the same settings).
5. --checkpoint with ranks: one file per rank, a resume equals a straight run, ranks stopped
   iterations apart (by hand: killed ranks) resume together, with nothing in common they fail.
   A stop signal to one rank, or SIGUSR1 to mpirun, stops every rank at one iteration (they
   vote), with every checkpoint there and the merged report marked incomplete.

Exits 77 (ctest: skipped, with the reason) without mpirun or when pipefill-run was built without
MPI.

usage: python3 ranks_test.py BIN_DIR FOUR_STAGE_PBTXT TINY_PBTXT EXAMPLE_PB WORKDIR
"""

import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

# Common run options: deterministic main timeline and fill accounting.
RUN = ["--backend", "host", "--time-model", "modelled", "--fill-policy", "unbounded",
       "--time-scale", "0.2", "--quiet"]

# Report values that come from the clock of the fill kernels (real work on a loaded machine),
# as (where, key): present in both reports (their keys are compared) but not equal.
CLOCK = {
    ("", "host_lag_us_max"), ("", "fill_us_per_iteration"), ("", "overruns"),
    ("", "switch_latency_us_mean"), ("", "switch_latency_us_max"),
    ("", "switch_latency_idle_fill"),
    (".fill_bound", "fill_us_run"), (".fill_bound", "overrun_us"),
    (".fill_bound", "overrun_fraction_of_fill"),
    (".devices[].bubbles[]", "fill_us_mean"), (".devices[].bubbles[]", "switch_latency_us_mean"),
    (".devices[].bubbles[]", "overruns"), (".devices[].bubbles[]", "overrun_us"),
}

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def mpirun_cmd(n):
    cmd = [shutil.which("mpirun"), "-n", str(n), "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def run(cmd, timeout=600):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    start = time.monotonic()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        print(f"FAIL: {' '.join(cmd)} did not finish in {timeout} s (hang)")
        failures.append("hang: " + " ".join(cmd))
        return None, timeout
    return out, time.monotonic() - start


def compare(a, b, path="", where="", keys_only=False):
    """Same keys everywhere; equal values except the fill-clock ones. Returns the differences."""
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            return [f"{path}: keys {sorted(a)} vs {sorted(b) if isinstance(b, dict) else b!r}"]
        bad = []
        for k in a:
            bad += compare(a[k], b[k], f"{path}.{k}", f"{where}.{k}",
                           keys_only or (where, k) in CLOCK)
        return bad
    if isinstance(a, list):
        if not isinstance(b, list) or (len(a) != len(b) and not keys_only):
            return [f"{path}: {len(a)} items vs {len(b) if isinstance(b, list) else b!r}"]
        bad = []
        for i, (x, y) in enumerate(zip(a, b)):
            bad += compare(x, y, f"{path}[{i}]", f"{where}[]", keys_only)
        return bad
    if keys_only:
        return []
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(b, (int, float)) or abs(a - b) > 1e-6 * max(1.0, abs(a)):
            return [f"{path}: {a} vs {b}"]
        return []
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def single_vs_ranks(bin_dir, program, n, extra, work, name):
    exe = os.path.join(bin_dir, "pipefill-run")
    single = os.path.join(work, f"{name}.single.json")
    multi = os.path.join(work, f"{name}.ranks.json")
    for f in glob.glob(os.path.join(work, f"{name}.ranks*.json")):
        os.remove(f)
    traces = [os.path.join(work, f"{name}.{kind}.trace.json") for kind in ("single", "ranks")]
    out, secs = run([exe, program, *RUN, *extra, "--report", single, "--trace", traces[0]])
    check(out is not None and out.returncode == 0, f"{name}: single-process run ({secs:.1f} s)")
    if out is None or out.returncode:
        print(out.stdout if out else "", out.stderr if out else "")
        return None
    out, secs = run(mpirun_cmd(n) + [exe, program, *RUN, *extra, "--report", multi,
                                     "--trace", traces[1], "--peer-timeout", "120"])
    ok = out is not None and out.returncode == 0
    check(ok, f"{name}: mpirun -n {n} run ({secs:.1f} s)")
    if not ok:
        if out:
            print(out.stdout[-4000:], out.stderr[-4000:])
        return None
    # Rank 0's trace has every rank's devices, and (modelled time) the single run's timeline.
    def computes(path):
        return sorted((e["pid"], e["tid"], e["name"], e["args"]["iteration"], round(e["ts"], 1),
                       round(e["dur"], 1))
                      for e in json.load(open(path))["traceEvents"] if e.get("cat") == "compute")
    a_trace, b_trace = computes(traces[0]), computes(traces[1])
    check(a_trace and a_trace == b_trace,
          f"{name}: rank 0's trace has the single run's {len(a_trace)} compute slices, "
          f"on {len({c[0] for c in a_trace})} devices")
    parts = sorted(glob.glob(os.path.join(work, f"{name}.ranks.rank*.json")))
    check(len(parts) == n, f"{name}: every rank wrote its part ({len(parts)} of {n})")
    a, b = json.load(open(single)), json.load(open(multi))
    bad = compare(a, b)
    for m in bad[:20]:
        print("   ", m)
    check(not bad, f"{name}: merged report has the single-process keys and equal planned, "
                   f"modelled and fill-accounting numbers ({len(bad)} differences)")
    # Independent of the report code: the totals a single process counted are the sums of what
    # each rank counted on its own device.
    sums = {}
    for p in parts:
        # Parts are proto3 JSON: a field at its default (0, false, "", []) is left out.
        for j in json.load(open(p)).get("jobs", []):
            s = sums.setdefault(j["name"], [0, 0])
            s[0] += int(j.get("samples_this_run", 0))
            s[1] += int(j.get("chunks_run", 0))
    expected = {j["name"]: [j["samples_this_run"], j["chunks_run"]] for j in a["fill"]["jobs"]}
    check(sums == expected, f"{name}: per-rank samples and chunks sum to the single run's {expected}")
    check(all(j["samples_completed"] == j["samples_planned"] for j in a["fill"]["jobs"]) and
          sum(j["samples_planned"] for j in a["fill"]["jobs"]) > 0,
          f"{name}: unbounded fill completed every planned sample")
    return parts, multi


def expect_error(cmd, regex_parts, what, timeout=120):
    """Runs cmd, checks it fails naming regex_parts; its output (None if it could not run)."""
    out, secs = run(cmd, timeout)
    if out is None:
        return None
    text = out.stdout + out.stderr
    ok = out.returncode != 0 and all(p in text for p in regex_parts)
    check(ok, f"{what}: exit {out.returncode} in {secs:.1f} s, message names {regex_parts}")
    if not ok:
        print(text[-3000:])
    return text


def merge_errors(exe, four, parts, work):
    """--merge of parts that are damaged or do not belong together, and outputs over inputs."""
    # --merge of parts that do not belong together.
    expect_error([exe, "--merge", parts[0], parts[0], parts[2], parts[3]],
                 ["are both rank 0"], "--merge with a rank twice")
    # A part whose fill chunk runs name what the program does not have (the report indexed
    # past them and crashed: SIGSEGV).
    for key, value, message in [("job", 99, "names fill job 99; the program has"),
                                ("pass_end", 1000, "runs passes [0, 1000)"),
                                ("device", 0, "is on device 0, which this part did not run"),
                                ("bubble_id", 999, "names bubble 999"),
                                ("iteration", 99999, "is in iteration 99999, outside")]:
        bad = json.load(open(parts[1]))
        bad["chunk_runs"][0][key] = value
        if key == "pass_end":
            bad["chunk_runs"][0]["pass_begin"] = 0
        bad_part = os.path.join(work, f"four.bad-{key}.rank1.json")
        json.dump(bad, open(bad_part, "w"))
        expect_error([exe, "--merge", parts[0], bad_part, parts[2], parts[3]],
                     ["rank reports do not belong together", message],
                     f"--merge of a part whose chunk run has {key} {value}")
    # Values that size or scale the merge, and times and sums that are not numbers of a run:
    # each used to pass (a world of 2^32 - 1 sized a 16 GiB table; a time scale of 0, NaN op
    # times or checksums printed impossible reports with exit 0; a first iteration near
    # 2^63 overflowed).
    def mutate(bad, path, value):
        node = bad
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value

    for name, path, value, message in [
            ("world", ["world"], 4294967295, "is from a world of 4294967295 ranks"),
            ("first", ["first_iteration"], str(2**63 - 3), "a run has at most 10^6"),
            ("scale0", ["time_scale"], 0, "has time scale 0; runs use 0.0001 to 1000"),
            ("scaleinf", ["time_scale"], "Infinity", "has time scale inf"),
            ("optime", ["devices", 0, "streams", 0, "start", 0], "NaN", "has op time nan"),
            ("checksum", ["jobs", 0, "checksum"], "NaN", "has checksum nan"),
            ("chunkstart", ["chunk_runs", 0, "start"], "-Infinity", "not times of a run"),
            # A part that lists its device twice (it said "device 1 is in P and in P").
            ("twice", ["devices"], None, "lists device 1 twice")]:
        bad = json.load(open(parts[1]))
        if value is None:  # the whole list, twice
            bad[path[0]] = bad[path[0]] * 2
        else:
            mutate(bad, path, value)
        bad_part = os.path.join(work, f"four.bad-{name}.rank1.json")
        json.dump(bad, open(bad_part, "w"))
        expect_error([exe, "--merge", parts[0], bad_part, parts[2], parts[3]],
                     ["do not belong together", bad_part, message],
                     f"--merge of a part with {'.'.join(map(str, path))} = {value}")
    # Without PROGRAM the first part's embedded program is the program: messages say so (they
    # spoke of "the given program", and of a .pbtxt extension for its bytes).
    for name, key, value, message in [
            ("fingerprint", "program_fingerprint", "1", "the program {} carries"),
            ("proto", "program_proto", "AAEC/w==", "{} (the program it carries): not a valid "
                                                   "binary StreamProgram (protobuf parse failed)")]:
        bad = json.load(open(parts[0]))
        bad[key] = value
        bad_part = os.path.join(work, f"four.bad-{name}.rank0.json")
        json.dump(bad, open(bad_part, "w"))
        expect_error([exe, "--merge", bad_part, *parts[1:]], [message.format(bad_part)],
                     f"--merge whose first part carries a bad {key}")
    # Files that are not rank parts, each named: not JSON, another JSON (a merged report), a
    # part with a field it does not have or of another format, a first part without its program.
    v1 = '"format": "pipefill.rank_result.v1"'
    no_program = json.load(open(parts[0]))
    del no_program["program_proto"]
    for name, text, first, message in [
            ("notjson", "\x01 not json", False, "not a rank report (not a JSON object"),
            ("report", '{"program": {}, "fill_bound": 1}', False,
             'not a rank report: a JSON object without "format": "pipefill.rank_result.v1" (it '
             'is a merged run report: give the rank parts, RUN.rank0.json ...)'),
            ("field", "{" + v1 + ', "bogus": 1}', False, "not a rank report (bogus: "),
            ("format", '{"format": "other"}', False,
             "not a rank report (format 'other', expected 'pipefill.rank_result.v1')"),
            ("noprogram", json.dumps(no_program), True, "the rank report holds no program")]:
        bad_part = os.path.join(work, f"four.not-{name}.rank1.json")
        with open(bad_part, "w") as f:
            f.write(text)
        cmd = [exe, "--merge", bad_part, *parts[1:]] if first else [exe, "--merge", parts[0],
                                                                    bad_part, *parts[2:]]
        expect_error(cmd, [f"{bad_part}: {message}"], f"--merge of a part that is {name}")
    # An output over an input part or the program, or two outputs at one path: refused before
    # anything is written (a part may be the only copy of a rank's times).
    before = open(parts[0], "rb").read()
    for extra, message in [(["--report", parts[0]], "PART and --report are the same file"),
                           (["--trace", four], "PROGRAM and --trace are the same file"),
                           (["--report", os.path.join(work, "o.json"), "--profile-out",
                             os.path.join(work, ".", "o.json")],
                            "--report and --profile-out are the same file")]:
        expect_error([exe, four, "--merge", *parts, *extra], [message],
                     f"--merge writing {' '.join(extra)}")
    check(open(parts[0], "rb").read() == before, "--merge left its input parts alone")


def progress_and_compare(exe, four, work):
    """--progress and --compare under mpirun."""
    # --progress under mpirun: the rank of the last stage reports, once per line, to the end.
    out, _ = run(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "6", "--progress"])
    lines = [line.split(",")[0] for line in (out.stderr if out else "").splitlines()
             if line.startswith("pipefill-run: iteration ")]
    check(out is not None and out.returncode == 0 and len(lines) == len(set(lines)) and
          lines[-1:] == ["pipefill-run: iteration 6/6"],
          f"--progress with ranks: one rank reports, up to 6/6 ({lines})")

    # --compare under mpirun: every A and B run is a rank-mode run; rank 0 alone prints the
    # slowdown of the merged runs (measured: the ranks' main compute is real CPU work).
    cmp_json = os.path.join(work, "compare.json")
    if os.path.exists(cmp_json):
        os.remove(cmp_json)
    out, _ = run(mpirun_cmd(4) + [exe, four, "--backend", "host", "--time-model", "measured",
                                  "--time-scale", "0.2", "--iterations", "4", "--compare", "1",
                                  "--compare-json", cmp_json])
    c = json.load(open(cmp_json)) if out is not None and os.path.exists(cmp_json) else {}
    chunks = sum(c.get(k, 0) for k in ("chunks_run", "chunks_deferred", "chunks_skipped",
                                       "chunks_pending"))
    check(out is not None and out.returncode == 0 and
          out.stdout.count("pipefill-run --compare:") == 1 and "4 ranks (processes)" in out.stdout
          and c.get("ranks") == 4 and c.get("time_model") == "measured" and
          c.get("main_only_us_mean", 0) > 0 and c.get("with_fill_us_mean", 0) > 0 and
          c.get("noise_floor", -1) >= 0 and chunks > 0,
          f"--compare with ranks: one table, from rank 0, of measured merged runs "
          f"(slowdown {c.get('slowdown')}, noise floor {c.get('noise_floor')}, {chunks} chunks)")


def rank_pids(mpirun_pid):
    """{rank: pid} of mpirun's children, by the rank their launcher environment gives them."""
    pids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
            environ = open(f"/proc/{entry}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) != mpirun_pid:
            continue
        for var in environ:
            if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                pids[int(var.split(b"=", 1)[1])] = int(entry)
    return pids


def stopped_together(exe, four, work, name, how, code):
    """Runs four.pb as 4 ranks with --checkpoint, signals them after 2 s (`how`: one rank only, or
    mpirun, which forwards SIGUSR1), and checks that every rank stopped at the same iteration:
    exit code `code`, one stop message per rank, every rank's checkpoint at that iteration, and
    rank 0's merged report marked incomplete there. Returns (that iteration or 0, checkpoint)."""
    ck = os.path.join(work, f"stop-{name}.ckpt")
    report = os.path.join(work, f"stop-{name}.json")
    for f in glob.glob(ck + "*") + glob.glob(os.path.join(work, f"stop-{name}.*json")):
        os.remove(f)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.Popen(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "100000",
                                             "--checkpoint", ck, "--report", report],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(2)
    if how.startswith("SIGTERM to rank 2"):
        pids = rank_pids(proc.pid)
        if 2 not in pids:
            proc.kill()
            proc.communicate()
            check(False, f"{how}: rank 2's process found among mpirun's children ({pids})")
            return 0, ck
        os.kill(pids[2], subprocess.signal.SIGTERM)
    else:
        proc.send_signal(subprocess.signal.SIGUSR1)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        check(False, f"{how}: the ranks stopped within 120 s")
        return 0, ck
    stops = [line for line in err.splitlines() if line.startswith("pipefill-run: stopped by ")]
    at = sorted({int(line.split(" (through iteration ")[1].split(")")[0]) for line in stops})
    n = at[0] if len(at) == 1 else 0
    history = [max([int(f.rsplit(".it", 1)[1]) for f in glob.glob(f"{ck}.rank{k}.it*")] or [0])
               for k in range(4)]
    r = json.load(open(report)) if os.path.exists(report) else {}
    ok = (proc.returncode == code and len(stops) == 4 and n > 0 and history == [n] * 4 and
          r.get("incomplete") is True and r.get("iterations") == n and
          r.get("iterations_requested") == 100000 and
          all(os.path.exists(os.path.join(work, f"stop-{name}.rank{k}.json")) for k in range(4)))
    if how.startswith("SIGTERM to rank 2"):
        ok = ok and sum("another rank's stop signal" in line for line in stops) == 3
    check(ok, f"{how}: every rank stopped at iteration {n} (exit {proc.returncode}, want {code}; "
              f"stop messages at {at}, {len(stops)} of 4; checkpoints at {history}; merged report "
              f"incomplete: {r.get('incomplete')})")
    if not ok:
        print(err[-3000:])
        return n, ck
    # The parts say where the run stopped too: --merge of them gives rank 0's verdict.
    merged = os.path.join(work, f"stop-{name}.merged.json")
    out, _ = run([exe, "--merge", *[os.path.join(work, f"stop-{name}.rank{k}.json")
                                    for k in range(4)], "--report", merged, "--quiet"])
    m = json.load(open(merged)) if out is not None and out.returncode == 0 else {}
    check(m.get("incomplete") is True and m.get("iterations") == n and
          m.get("iterations_requested") == 100000,
          f"{how}: --merge of the stopped ranks' parts is incomplete at iteration {n} too")
    return n, ck


def rank_checkpoints(exe, four, work):
    """--checkpoint with ranks: each rank its own CHECKPOINT.rankR and its last checkpoints as
    CHECKPOINT.rankR.itN. 2 iterations, then a resume to 4, give a straight 4-iteration run's
    samples and checksums. Ranks killed apart (each one's last checkpoint is where its fill streams
    were, and they lag main by different amounts) resume together at the latest iteration all
    have: made here by taking ranks 1 and 2 back to iterations 2 and 3. Ranks stopped by a signal
    stop together (stopped_together) and resume as a straight run. Ranks with no iteration in
    common fail, naming what each has."""
    def jobs(path):
        return [(j["name"], j["samples_completed"], round(j["checksum"], 6))
                for j in json.load(open(path))["fill"]["jobs"]]

    def straight_run(n):
        path = os.path.join(work, f"ck.straight{n}.json")
        run(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", str(n), "--report", path])
        return jobs(path)

    resumed = os.path.join(work, "ck.resumed.json")
    ck = os.path.join(work, "fill.ckpt")
    for f in glob.glob(os.path.join(work, "fill.ckpt*")) + glob.glob(os.path.join(work, "nofill.ckpt*")):
        os.remove(f)
    run(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "2", "--checkpoint", ck])
    out, _ = run(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "4", "--checkpoint", ck,
                                  "--report", resumed])
    ok = out is not None and out.returncode == 0 and os.path.exists(resumed)
    r = json.load(open(resumed)) if ok else {}
    check(ok and sorted(os.path.basename(f) for f in glob.glob(ck + ".rank?")) ==
          [f"fill.ckpt.rank{k}" for k in range(4)] and r["first_iteration"] == 2 and
          r["checkpoint"] == {"path": ck + ".rankR", "resumed": True} and
          jobs(resumed) == straight_run(4),
          "ranks with --checkpoint: one file per rank, a resume equals a straight run")
    # Apart: ranks 0 and 3 at 4, rank 2 back at 3, rank 1 at 2 (what they would have written had
    # they stopped there).
    for rank, at in ((1, 2), (2, 3)):
        for n in range(at + 1, 5):
            os.remove(f"{ck}.rank{rank}.it{n}")
        shutil.copyfile(f"{ck}.rank{rank}.it{at}", f"{ck}.rank{rank}")
    out, _ = run(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "6", "--checkpoint", ck,
                                  "--report", resumed])
    ok = out is not None and out.returncode == 0
    check(ok and "the ranks' latest common checkpoint is at iteration 2, this rank's (0) at 4; "
          "resuming from" in out.stderr and json.load(open(resumed))["first_iteration"] == 2 and
          jobs(resumed) == straight_run(6),
          "ranks whose checkpoints are iterations apart resume together at the latest common one")
    # For real: the ranks stop together at one iteration, whichever of them got the signal.
    n = 0
    for name, how, code in (("one", "SIGTERM to rank 2 only", 143),
                            ("all", "SIGUSR1 to mpirun (it forwards it to every rank)", 138)):
        n, ck2 = stopped_together(exe, four, work, name, how, code)
        if n:
            out, _ = run(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", str(n + 3),
                                          "--checkpoint", ck2, "--report", resumed])
            check(out is not None and out.returncode == 0 and
                  json.load(open(resumed))["first_iteration"] == n and
                  jobs(resumed) == straight_run(n + 3),
                  f"ranks stopped together by {how} at iteration {n} resume to {n + 3} as a "
                  "straight run")
    # Ranks without fill state (--no-fill) have nothing to restore: they resume together at the
    # furthest iteration, here 3 although rank 0 was taken back to 2.
    nf = os.path.join(work, "nofill.ckpt")
    run(mpirun_cmd(4) + [exe, four, *RUN, "--no-fill", "--iterations", "2", "--checkpoint", nf])
    shutil.copyfile(nf + ".rank0", nf + ".saved")
    run(mpirun_cmd(4) + [exe, four, *RUN, "--no-fill", "--iterations", "3", "--checkpoint", nf])
    shutil.copyfile(nf + ".saved", nf + ".rank0")
    out, _ = run(mpirun_cmd(4) + [exe, four, *RUN, "--no-fill", "--iterations", "5",
                                  "--checkpoint", nf, "--report", resumed])
    check(out is not None and out.returncode == 0 and
          json.load(open(resumed))["first_iteration"] == 3,
          "ranks without fill state resume together at the furthest iteration")
    # Nothing in common: rank 1 has no checkpoint at all.
    for f in glob.glob(ck2 + ".rank1*"):
        os.remove(f)
    expect_error(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", str(n + 6), "--checkpoint", ck2],
                 ["the ranks' checkpoints have no iteration in common (rank 0: ", "rank 1: none",
                  "the ranks cannot resume at one iteration"],
                 "ranks whose checkpoints have no iteration in common fail, naming what each has")
    # A rank's latest checkpoint damaged (it is a hard link of its newest history file: both are):
    # the default fails naming the file and the way out; --on-bad-checkpoint previous resumes
    # every rank at the latest iteration all of them can restore (it failed: rank 2 offered the
    # damaged iteration 3 and could not load it).
    bad = os.path.join(work, "bad.ckpt")
    for f in glob.glob(bad + "*"):
        os.remove(f)
    run(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "3", "--checkpoint", bad])
    with open(bad + ".rank2", "r+b") as f:
        f.truncate(100)
    expect_error(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "5", "--checkpoint", bad],
                 [f"checkpoint {bad}.rank2 is truncated", "--on-bad-checkpoint previous"],
                 "a rank's damaged checkpoint fails by default, naming the way out")
    out, _ = run(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "5", "--checkpoint", bad,
                                  "--on-bad-checkpoint", "previous", "--report", resumed])
    check(out is not None and out.returncode == 0 and
          json.load(open(resumed))["first_iteration"] == 2 and jobs(resumed) == straight_run(5),
          "--on-bad-checkpoint previous with ranks: all resume at the latest iteration every "
          "rank can restore, as a straight run")
    # A checkpoint of the other way of running: each run would have started at iteration 0 with
    # exit 0, the progress in those files dropped (a rank reads CHECKPOINT.rankR, one process
    # CHECKPOINT).
    one = os.path.join(work, "one.ckpt")
    for f in glob.glob(one + "*"):
        os.remove(f)
    run([exe, four, *RUN, "--iterations", "2", "--checkpoint", one])
    expect_error(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "4", "--checkpoint", one],
                 [f"checkpoint {one} holds a single-process run's fill progress",
                  "resume that run as one process"],
                 "a single process's checkpoint resumed under mpirun is refused")
    expect_error([exe, four, *RUN, "--iterations", "4", "--checkpoint", ck],
                 [f"checkpoint {ck} does not exist, but {ck}.rank0 does",
                  "resume that run under mpirun"],
                 "ranks' checkpoints resumed by one process are refused")


def start_errors(exe, four):
    """4: runs that cannot start, or lose a rank: every rank fails soon, naming why."""
    expect_error([exe, four, *RUN, "--rank", "0", "--world", "3"],
                 ["world 3 does not match the program's 4 devices", "mpirun -n 4"],
                 "world != device count (--world)")
    expect_error(mpirun_cmd(2) + [exe, four, *RUN],
                 ["world 2 does not match the program's 4 devices"],
                 "world != device count (mpirun -n 2)")
    expect_error([exe, four, *RUN, "--rank", "4", "--world", "4"],
                 ["rank 4 is out of range", "ranks 0 to 3"], "rank out of range")
    # A --rank that the launcher contradicts fails that process alone; the others waited for it
    # until --peer-timeout (120 s). Now it aborts MPI and mpirun stops them at once.
    start = time.monotonic()
    text = expect_error(mpirun_cmd(4) + [exe, four, *RUN, "--rank", "1"],
                        ["rank 1 was asked for but this process is MPI rank"],
                        "--rank the launcher contradicts", timeout=120)
    check(time.monotonic() - start < 30, "the contradicted --rank stopped every rank at once, "
                                         "not after the peer timeout")
    # mpirun's SIGTERM reaches the three failed ranks after their run has returned: they used to
    # print "stopping at the next iteration boundary" too (three such lines); only the rank whose
    # run had started (MPI rank 1, waiting for its peers) may still say it.
    stops = (text or "").count("stopping at the next iteration boundary")
    check(stops <= 1, f"the failed ranks did not announce a stop at an iteration boundary "
                      f"({stops} such lines)")
    # Ranks started with other options disagree on their messages (rank 3 running one iteration
    # stops sending early) or on what the merge adds up (--no-fill): every rank fails at once,
    # naming the option (whichever rank prints first: mpirun stops the others). They used to wait
    # out --peer-timeout (120 s by default), or merge.
    for what, theirs, needle in (
            ("--iterations", ["--iterations", "1"], "runs with --iterations "),
            ("--no-fill", ["--iterations", "3", "--no-fill"], "runs with fill (--no-fill) o"),
            # Named as --no-fill before (profile mode runs without fill).
            ("--profile-out", ["--iterations", "3", "--profile-out",
                               os.path.join(tempfile.gettempdir(), "pf-rank3-profile.pbtxt")],
             "runs with profile mode (--profile-out) o")):
        start = time.monotonic()
        cmd = mpirun_cmd(3) + [exe, four, *RUN, "--iterations", "3", ":",
                               "-n", "1", exe, four, *RUN, *theirs]
        expect_error(cmd, [needle, "every rank must run the same program with the same options"],
                     f"ranks with another {what}: all fail at the start", timeout=120)
        check(time.monotonic() - start < 30, f"the {what} mismatch was found at the start, not by a timeout")
    # A rank that hangs mid-run (stopped with SIGSTOP): the others fail with a timeout naming the
    # rank they wait for (rank 3, or one waiting for it in turn: whichever times out first) instead
    # of waiting forever, and mpirun stops the job.
    start = time.monotonic()
    many = [exe, four, *RUN, "--iterations", "400", "--peer-timeout", "3"]
    cmd = mpirun_cmd(3) + many + [":", "-n", "1", "sh", "-c",
                                  shlex.join(many) + " & p=$!; sleep 1.5; kill -STOP $p; wait $p"]
    expect_error(cmd, ["no message from rank ", "--peer-timeout"],
                 "a rank that hangs: the others time out", timeout=120)
    check(time.monotonic() - start < 100, "the hung peer was detected well before the hang limit")


def main():
    bin_dir, four_pbtxt, tiny_pbtxt, example_pb, work = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    if shutil.which("mpirun") is None:
        print("SKIP: mpirun not found (scripts/setup.sh installs openmpi-bin)")
        return 77
    exe = os.path.join(bin_dir, "pipefill-run")
    compile_ = os.path.join(bin_dir, "pipefill-compile")
    four = os.path.join(work, "four.pb")
    tiny = os.path.join(work, "tiny.pb")
    for src, dst in ((four_pbtxt, four), (tiny_pbtxt, tiny)):
        subprocess.run([compile_, src, "--stream-program", dst], check=True,
                       stdout=subprocess.DEVNULL)
    probe, _ = run([exe, tiny, "--rank", "1", "--world", "2", "--quiet"], 60)
    if probe is not None and "built without MPI" in probe.stderr:
        print("SKIP: pipefill-run was built without MPI:", probe.stderr.strip())
        return 77
    # Without a launcher MPI has one process: --world 2 cannot be honoured.
    check(probe is not None and probe.returncode != 0 and
          "world 2 was asked for but MPI_COMM_WORLD has 1 process(es)" in probe.stderr,
          "--rank/--world without mpirun: a clear error")

    # 1 + 2: the 4-stage plan.
    got = single_vs_ranks(bin_dir, four, 4, ["--iterations", "3"], work, "four")
    if got:
        parts, multi = got
        merged = os.path.join(work, "four.merged.json")
        out, _ = run([exe, "--merge", *reversed(parts), "--report", merged, "--quiet"])
        check(out is not None and out.returncode == 0 and
              json.load(open(merged)) == json.load(open(multi)),
              "--merge of the parts (any order) equals the report rank 0 gathered over MPI")
        out, _ = run([exe, four, "--merge", *parts, "--report", merged, "--quiet"])
        check(out is not None and out.returncode == 0 and
              json.load(open(merged)) == json.load(open(multi)),
              "--merge with the program given, likewise")
        # Parts named without .json (a --report without it) are parts by their content; they
        # were taken for the program.
        noext = []
        for k, part in enumerate(parts):
            noext.append(os.path.join(work, f"noext.rank{k}"))
            shutil.copyfile(part, noext[-1])
        out, _ = run([exe, "--merge", *noext, "--report", merged, "--quiet"])
        check(out is not None and out.returncode == 0 and
              json.load(open(merged)) == json.load(open(multi)),
              "--merge of parts named without .json, likewise")

        merge_errors(exe, four, parts, work)
        expect_error([exe, "--merge", *parts[:3]], ["rank 3 of 4 is missing"],
                     "--merge with a rank missing")
        expect_error([exe, tiny, "--merge", *parts], ["not of the given program"],
                     "--merge with another program")
        expect_error([exe, "--merge", os.path.join(work, "four.single.json"), *parts[1:]],
                     ["not a rank report", "it is a merged run report: give the rank parts"],
                     "--merge of a whole report")
        other = os.path.join(work, "other.json")
        run(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "2", "--report", other])
        other_part = os.path.join(work, "other.rank3.json")
        expect_error([exe, "--merge", *parts[:3], other_part], ["differ in iterations"],
                     "--merge of ranks of two runs with other iterations")
        # Two runs with the same settings: their parts merged without a word into numbers of
        # neither. Every part carries its run's id (rank 0's random number).
        again = os.path.join(work, "again.json")
        run(mpirun_cmd(4) + [exe, four, *RUN, "--iterations", "3", "--report", again])
        again_part = os.path.join(work, "again.rank2.json")
        expect_error([exe, "--merge", parts[0], parts[1], again_part, parts[3]],
                     ["again.rank2.json and", "differ in run: they are parts of two runs (run_id"],
                     "--merge of ranks of two runs with the same settings")

        rank_checkpoints(exe, four, work)

        # Measured time model: every rank runs its device's main compute for real and times it;
        # the plan's numbers equal a single-process run's of the same iterations.
        meas = os.path.join(work, "four.measured.json")
        single2 = os.path.join(work, "four.single2.json")
        run([exe, four, *RUN, "--iterations", "2", "--report", single2])
        out, secs = run(mpirun_cmd(4) + [exe, four, "--backend", "host", "--iterations", "2",
                                         "--time-scale", "0.2", "--quiet", "--report", meas])
        ok = out is not None and out.returncode == 0 and os.path.exists(single2)
        if ok:
            m, one = json.load(open(meas)), json.load(open(single2))
            ok = (m["time_model"] == "measured" and m["labels"]["main_compute"] == "measured" and
                  [d["time_source"] for d in m["devices"]] == ["measured"] * 4 and
                  len(m["iteration_us"]) == 2 and all(t > 0 for t in m["iteration_us"]) and
                  m["planned_iteration_us"] == one["planned_iteration_us"] and
                  [j["samples_planned"] for j in m["fill"]["jobs"]] ==
                  [j["samples_planned"] for j in one["fill"]["jobs"]])
        check(ok, f"measured time model as 4 ranks: every device measured and labelled so, "
                  f"planned numbers as in one process ({secs:.1f} s)")
        # Each chunk's CPU time travels in the parts (the merged report's overrun split into
        # fill-thread waiting needs it; without it the key was missing in rank mode).
        runs = [c for p in sorted(glob.glob(os.path.join(work, "four.measured.rank*.json")))
                for c in json.load(open(p)).get("chunk_runs", [])]
        check(runs and all(c.get("cpu_us", -1) >= 0 for c in runs),
              f"measured rank parts carry each chunk's CPU time ({len(runs)} chunk runs)")

    # 3: the bundled example, one rank per stage.
    if os.path.exists(example_pb):
        single_vs_ranks(bin_dir, example_pb, 16,
                        ["--iterations", "1", "--max-dim", "16", "--time-scale", "0.05"],
                        work, "example")
    else:
        check(False, f"the bundled example's plan {example_pb} exists (made by the build)")

    progress_and_compare(exe, four, work)

    start_errors(exe, four)

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all rank checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
