#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and compiles
# the bundled default example, printing its report summary and writing the
# artifacts to build/example/.
# PIPEFILL_NO_BUILD=1 skips the setup and build (the lit test run-example.test, which runs inside
# a finished build); PIPEFILL_EXAMPLE_OUT names another folder for the artifacts;
# PIPEFILL_RUN_ARGS adds pipefill-run options (the test passes --stage 0: replay on any machine).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${PIPEFILL_NO_BUILD:-0}" != 1 ]; then
  bash scripts/build.sh
fi
BUILD_DIR=${PIPEFILL_BUILD_DIR:-build}
BIN=$BUILD_DIR/bin
JOB=${1:-examples/gpt40b-1f1b.pbtxt}
OUT=${PIPEFILL_EXAMPLE_OUT:-$BUILD_DIR/example}
mkdir -p "$OUT"
name=$(basename "$JOB" .pbtxt)

"$BIN/pipefill-translate" --import-job "$JOB" -o "$OUT/$name.mlir"
"$BIN/pipefill-opt" --pipefill-compile "$OUT/$name.mlir" -o "$OUT/$name.compiled.mlir"
"$BIN/pipefill-translate" --to-report "$OUT/$name.compiled.mlir" -o "$OUT/$name.report.json"
"$BIN/pipefill-translate" --to-trace "$OUT/$name.compiled.mlir" -o "$OUT/$name.trace.json"
"$BIN/pipefill-translate" --to-svg "$OUT/$name.compiled.mlir" -o "$OUT/$name.svg"
"$BIN/pipefill-opt" --pipefill-lower-to-stream=iterations=2 "$OUT/$name.compiled.mlir" \
  -o "$OUT/$name.stream.mlir"
"$BIN/pipefill-translate" --to-stream-program "$OUT/$name.stream.mlir" -o "$OUT/$name.pb"

echo "== compiled plan =="
"$BIN/pipefill-translate" --to-summary "$OUT/$name.compiled.mlir"
echo
# Run the plan: CUDA where a GPU is present, else the host backend. On the host
# the measured time model runs one stage's main compute for real (calibrated
# CPU work; the other stages are emulated at their planned times: replay) and
# the fill kernels for real with their dimensions capped; its timings are CPU
# timings, labelled as such in the summary. Fill is bounded to its bubbles.
# The summary is kept in run.txt as well. (It used to be piped into head, which could kill
# pipefill-run with SIGPIPE while it wrote the rows head no longer read, and stop the script.)
echo "== run (pipefill-run, backend auto) =="
"$BIN/pipefill-run" "$OUT/$name.pb" --backend auto --iterations 2 --max-dim 32 \
  --time-scale 0.2 --report "$OUT/$name.run.json" --trace "$OUT/$name.run-trace.json" \
  ${PIPEFILL_RUN_ARGS:-} > "$OUT/$name.run.txt"
cat "$OUT/$name.run.txt"
echo
echo "artifacts in $OUT/:"
echo "  $name.compiled.mlir  compiled IR (schedule, bubbles, fill plan)"
echo "  $name.report.json    report   $name.svg  timeline picture   $name.trace.json  Chrome trace"
echo "  $name.pb             stream program   $name.run.json  run report (planned vs measured)"
echo "  $name.run.txt        run summary   $name.run-trace.json  the run's timeline (Chrome trace)"
echo "  (open the .trace.json files in https://ui.perfetto.dev or chrome://tracing)"
