#!/usr/bin/env bash
# Closed loop for fill costs on the host (issue 9, item 4), in replay mode on one stage:
#   1. compile the bundled example and run stage K for real (the others emulated at planned
#      times) with fill, writing a profile that records the measured main compute of stage K and
#      the measured fill-layer costs;
#   2. recompile with --pipefill-compile=profile=FILE and run the new plan the same way;
#   3. print, for stage K, before and after: fill throughput measured / planned, planned fill /
#      the stage's bubble time, and overrun / fill time.
# Usage: runtime/tools/closed-loop-fill/closed-loop-fill.sh [JOB.pbtxt] [STAGE]
# Environment: BUILD_DIR (build), TIME_SCALE (0.1), ITERATIONS (4), MAX_DIM (32), OUT (a temp dir),
# FILL_ONLY (1: the recompile takes only the fill-layer costs from the profile and keeps the
# plan's stage costs, so a loaded machine's slow main compute does not reshape the pipeline; 0:
# the whole profile), CHUNK_GAP (1: the recompile also takes the measured gap between a bubble's
# chunks as the fixed cost per chunk, context_switch_us; 0: the JobSpec's stays), RUN_ARGS (more
# pipefill-run options for both runs, e.g. "--cpu 0 --fill-cpu 1": main and fill on their own cores).
set -euo pipefail
cd "$(dirname "$0")/../../.."
BIN=${BUILD_DIR:-build}/bin
JOB=${1:-examples/gpt40b-1f1b.pbtxt}
STAGE=${2:-0}
SCALE=${TIME_SCALE:-0.1}
ITER=${ITERATIONS:-4}
MAXDIM=${MAX_DIM:-32}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
run() { # plan.pb tag
  "$BIN/pipefill-run" "$1" --backend host --stage "$STAGE" --time-scale "$SCALE" \
    --iterations "$ITER" --max-dim "$MAXDIM" --report "$OUT/$2.run.json" \
    --profile-out "$OUT/$2.profile.pbtxt" --profile-with-fill --quiet ${RUN_ARGS:-}
}
compile() { # tag [profile]
  local extra=""
  [ -n "${2:-}" ] && extra="=profile=$2"
  "$BIN/pipefill-opt" "--pipefill-compile$extra" "$OUT/job.mlir" -o "$OUT/$1.compiled.mlir"
  "$BIN/pipefill-translate" --to-report "$OUT/$1.compiled.mlir" -o "$OUT/$1.report.json"
  "$BIN/pipefill-opt" "--pipefill-lower-to-stream=iterations=$ITER" "$OUT/$1.compiled.mlir" |
    "$BIN/pipefill-translate" --to-stream-program -o "$OUT/$1.pb"
}
"$BIN/pipefill-translate" --import-job "$JOB" -o "$OUT/job.mlir"
compile round0
run "$OUT/round0.pb" round0
profile="$OUT/round0.profile.pbtxt"
if [ "${FILL_ONLY:-1}" = 1 ]; then
  # Main-job entries marked not measured (apply-profile then keeps the plan's stage costs).
  python3 - "$profile" "$OUT/round0.fill-only.pbtxt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def strip(block):
    body = re.sub(r"\n\s*measured_us: [^\n]*", "", block.group(0))
    return re.sub(r"measured: true", "measured: false", body)
text = re.sub(r"(instructions|bubbles) \{[^}]*\}", strip, text)
text = re.sub(r"^  (forward_us|backward_us|backward_input_us|backward_weight_us|allreduce_us|optimizer_us): [^\n]*\n", "", text, flags=re.M)
open(sys.argv[2], "w").write(text)
PY
  profile="$OUT/round0.fill-only.pbtxt"
fi
if [ "${CHUNK_GAP:-1}" = 0 ]; then
  sed '/^fill_chunk_gap {/,/^}/d' "$profile" >"$OUT/round0.no-gap.pbtxt"
  profile="$OUT/round0.no-gap.pbtxt"
fi
compile round1 "$profile"
run "$OUT/round1.pb" round1
python3 - "$OUT" "$STAGE" <<'PY'
import json, os, sys
out, stage = sys.argv[1], int(sys.argv[2])
print(f"closed loop for fill costs, stage {stage} real (replay), results in {out}")
# The throughput ratio is samples per second: (done / planned) / (iteration measured / planned).
# The last two columns are those two factors, so a run whose main job ran slower or faster than
# its plan (the replayed pipeline, and its bubbles, stretch with it) can be told from one whose
# fill did less than its plan.
print(f"{'round':>6} {'fill thr. meas/plan':>20} {'planned fill/bubble':>20} {'overrun/fill':>13} "
      f"{'chunks run/deferred/pending':>28} {'of overrun: waiting/fill':>24} "
      f"{'samples done/planned':>21} {'iteration meas/plan':>20}")
for tag in ("round0", "round1"):
    run = json.load(open(os.path.join(out, tag + ".run.json")))
    rep = json.load(open(os.path.join(out, tag + ".report.json")))
    suffix = f"@{stage}"
    jobs = [j for j in run["fill"]["jobs"] if j["name"].endswith(suffix)]
    done = sum(j["samples_this_run"] for j in jobs)
    planned = sum(j["samples_planned"] for j in jobs)
    dev = run["devices"][stage]
    # Samples per unit time: measured over the real stage's iteration time, planned over the plan's.
    it_meas, it_plan = dev["iteration_us_mean"], dev["planned_iteration_us"] or run["planned_iteration_us"]
    ratio = (done / it_meas) / (planned / it_plan) if planned and it_meas else 0.0
    bubbles = dev["bubbles"]
    bubble_us = sum(b["planned_us"] for b in bubbles)
    fill_us = sum(b["planned_fill_us"] for b in bubbles)
    fb = run["fill_bound"]
    over = fb["overrun_us"] / fb["fill_us_run"] if fb["fill_us_run"] else 0.0
    waiting = run["overruns"].get("fill_thread_waiting_us", 0.0)
    wait = waiting / fb["fill_us_run"] if fb["fill_us_run"] else 0.0
    print(f"{tag:>6} {ratio:>20.3f} {fill_us / bubble_us if bubble_us else 0:>20.3f} {over:>13.4f} "
          f"{fb['chunks_run']:>12}/{fb['chunks_deferred']}/{fb['chunks_pending']} {wait:>24.4f} "
          f"{done / planned if planned else 0:>21.3f} {it_meas / it_plan if it_plan else 0:>20.3f}")
PY
