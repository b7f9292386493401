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
"$BIN/pipefill-translate" --to-summary "$OUT/$name.compiled.mlir"
echo
echo "artifacts in $OUT/: $name.compiled.mlir $name.report.json $name.trace.json $name.svg"
