#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and compiles
# the bundled default example, printing its report summary and writing the
# artifacts to build/example/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${PIPEFILL_BUILD_DIR:-build}
BIN=$BUILD_DIR/bin
JOB=${1:-examples/gpt40b-1f1b.pbtxt}
OUT=$BUILD_DIR/example
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
echo "== run (pipefill-run, backend auto) =="
"$BIN/pipefill-run" "$OUT/$name.pb" --backend auto --iterations 2 --max-dim 32 \
  --time-scale 0.2 --report "$OUT/$name.run.json" | head -14
echo "  ... per-job rows for every device in $OUT/$name.run.json"
echo
echo "artifacts in $OUT/:"
echo "  $name.compiled.mlir  compiled IR (schedule, bubbles, fill plan)"
echo "  $name.report.json    report   $name.svg  timeline picture   $name.trace.json  Chrome trace"
echo "  $name.pb             stream program   $name.run.json  run report (planned vs measured)"
