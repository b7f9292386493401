#!/usr/bin/env bash
# Regenerates the PipeFill scale study (docs/cluster.md) into docs/study/:
#   study.json / study.svg / study.md  the 40B GPT with a fixed global batch on
#                                      1K, 2K, 4K and 8K GPUs, GPipe and 1F1B
#   policies-1k.*                      examples/traces/synthetic-1k.csv replayed
#                                      under FIFO, SJF and efficiency-aware
#   policies-8k.*                      a 10,000-job synthetic queue at 8K GPUs
# Usage: scripts/study.sh [BUILD_DIR]   (default build/, or $PIPEFILL_BUILD_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-${PIPEFILL_BUILD_DIR:-build}}
SIM="$BUILD_DIR/bin/pipefill-sim"
if [ ! -x "$SIM" ]; then
  if [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake --build "$BUILD_DIR" --target pipefill-sim
  else
    echo "study.sh: $SIM not found; build first (scripts/build.sh)" >&2
    exit 1
  fi
fi
JOB=examples/traces/gpt40b-model.pbtxt
OUT=docs/study
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "== scale study: $JOB"
"$SIM" --study "$JOB" --gpus 1024,2048,4096,8192 --schedules gpipe,1f1b \
  --json "$OUT/study.json" --svg "$OUT/study.svg" --markdown "$OUT/study.md" \
  | tee "$OUT/study.txt"

echo "== 1K GPUs, examples/traces/synthetic-1k.csv"
"$SIM" "$JOB" --trace examples/traces/synthetic-1k.csv --policy all \
  --json "$OUT/policies-1k.json" --svg "$OUT/policies-1k.svg" \
  | tee "$OUT/policies-1k.txt"

echo "== 8K GPUs, 10,000 synthetic jobs"
"$SIM" --gen-trace "$TMP/synthetic-8k.csv" "$JOB" --jobs 10000 --rate 300 \
  --median-gpu-s 36000 --seed 1 --quiet
# Run from the temporary folder so the report names the trace without the
# random folder name (the outputs stay byte-identical from run to run).
ROOT=$(pwd)
SIM_ABS=$(cd "$(dirname "$SIM")" && pwd)/$(basename "$SIM")
(cd "$TMP" && "$SIM_ABS" "$ROOT/$JOB" --gpus 8192 --trace synthetic-8k.csv \
  --policy all --json "$ROOT/$OUT/policies-8k.json" \
  --svg "$ROOT/$OUT/policies-8k.svg") | tee "$OUT/policies-8k.txt"

echo "wrote $OUT/{study,policies-1k,policies-8k}.{json,svg,txt} and $OUT/study.md"
