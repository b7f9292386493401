#!/usr/bin/env bash
# Timed tool runs: import + the whole --pipefill-compile pipeline + report, at
# growing sizes, to show the cost per instruction stays flat (DESIGN section 9:
# 64 stages x 512 micro-batches x 100 fill jobs well under a second).
# Usage: bench/compile_bench.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build}/bin
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
printf "%-28s %12s %10s %14s %10s %14s\n" "job" "instructions" "compile s" "no-verify s" "total s" "us/instruction"
for size in "16 64 10" "32 128 25" "64 256 50" "64 512 100"; do
  set -- $size
  job=$WORK/job-$1-$2-$3.pbtxt
  python3 bench/gen_job.py "$1" "$2" "$3" > "$job"
  "$BIN/pipefill-translate" --import-job "$job" -o "$WORK/in.mlir"
  t0=$(date +%s.%N)
  "$BIN/pipefill-opt" --pipefill-compile "$WORK/in.mlir" -o "$WORK/out.mlir" --emit-bytecode \
    --mlir-disable-threading 2>/dev/null
  t1=$(date +%s.%N)
  "$BIN/pipefill-translate" --to-report "$WORK/out.mlir" -o "$WORK/report.json"
  t2=$(date +%s.%N)
  # The same compile without MLIR's verification after every pass.
  "$BIN/pipefill-opt" --pipefill-compile "$WORK/in.mlir" -o "$WORK/out2.mlir" --emit-bytecode \
    --mlir-disable-threading --verify-each=false 2>/dev/null
  t3=$(date +%s.%N)
  n=$("$BIN/pipefill-opt" "$WORK/out.mlir" | grep -cE 'pipefill\.(forward|backward|backward_input|backward_weight|send|recv)')
  python3 - "$1x$2, $3 jobs" "$n" "$t0" "$t1" "$t2" "$t3" <<'PY'
import sys
name, n, t0, t1, t2, t3 = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])
print(f"{name:<28} {n:>12} {t1 - t0:>10.3f} {t3 - t2:>14.3f} {t2 - t0:>10.3f} {1e6 * (t1 - t0) / n:>14.3f}")
PY
done
