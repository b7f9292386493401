#!/usr/bin/env bash
# Long fuzzing runs of every libFuzzer target (fuzz/targets), one after another (never two at
# once), from the seed corpora into build-san/corpus/NAME; crashes, hangs and OOMs are written to
# build-san/findings/NAME. Usage: scripts/fuzz.sh [RUNS_PER_TARGET (default 1000000)] [TARGET...]
# Prints the inputs each target survived; docs/reliability.md records a run.
set -euo pipefail
cd "$(dirname "$0")/.."
SAN_DIR=${PIPEFILL_SAN_DIR:-build-san}
RUNS=${1:-1000000}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(jobspec program_text program_binary checkpoint profile trace)
fi
if [ ! -f "$SAN_DIR/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S fuzz -B "$SAN_DIR" -G Ninja >/dev/null
fi
ninja -C "$SAN_DIR" -j"${PIPEFILL_JOBS:-2}" $(printf 'fuzz-%s ' "${TARGETS[@]}")
for t in "${TARGETS[@]}"; do
  mkdir -p "$SAN_DIR/corpus/$t" "$SAN_DIR/findings/$t"
  start=$(date +%s)
  set +e
  nice "$SAN_DIR/bin/fuzz-$t" -runs="$RUNS" -timeout=10 -rss_limit_mb=2048 \
    -use_value_profile=1 -print_final_stats=1 -artifact_prefix="$SAN_DIR/findings/$t/" \
    "$SAN_DIR/corpus/$t" "fuzz/corpus/$t" >"$SAN_DIR/findings/$t.log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$SAN_DIR/findings/$t.log" | grep -o '[0-9]*$' || echo '?')
  echo "fuzz $t: exit $rc, $runs inputs, $(( $(date +%s) - start )) s, findings: $(ls "$SAN_DIR/findings/$t" | wc -l)"
done
