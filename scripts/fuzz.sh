#!/usr/bin/env bash
# Long fuzzing runs of every libFuzzer target (fuzz/targets), one after another (never two at
# once), from the seed corpora into build-san/corpus/NAME; crashes, hangs and OOMs are written to
# build-san/findings/NAME (the MLIR targets mlir_parse and compile: build-fuzz-mlir, see
# scripts/sanitize.sh). Usage: scripts/fuzz.sh [RUNS_PER_TARGET (default 1000000)] [TARGET...]
# Prints the inputs each target survived; docs/reliability.md records a run.
# FUZZ_TIMEOUT (default 10): seconds one input may take before libFuzzer reports a hang. It is wall
# time: on a machine loaded by other work a niced fuzzer can be starved past it (rerun the
# reported input alone to tell), so long runs on shared machines use a larger value.
# FUZZ_FLAGS: more libFuzzer flags (e.g. -max_len=4096: the trace seeds include a 30 KB,
# 1000-job CSV that makes every input slow; capped, inputs are cut to their first 4 KB; or
# -fork=1 -ignore_crashes=1: the fuzzing runs in child processes and goes on past a crash, each
# distinct crash saved in the findings folder, for a long run while a known finding is unfixed).
set -euo pipefail
cd "$(dirname "$0")/.."
SAN_DIR=${PIPEFILL_SAN_DIR:-build-san}
RUNS=${1:-1000000}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(jobspec program_text program_binary checkpoint profile trace mlir_parse compile json_stream)
fi
FUZZ_MLIR_DIR=${PIPEFILL_FUZZ_MLIR_DIR:-build-fuzz-mlir}
dir_of() { case "$1" in mlir_parse|compile|json_stream) echo "$FUZZ_MLIR_DIR" ;; *) echo "$SAN_DIR" ;; esac; }
PLAIN=() MLIR=()
for t in "${TARGETS[@]}"; do
  if [ "$(dir_of "$t")" = "$SAN_DIR" ]; then PLAIN+=("fuzz-$t"); else MLIR+=("fuzz-$t"); fi
done
if [ ${#PLAIN[@]} -gt 0 ]; then
  if [ ! -f "$SAN_DIR/build.ninja" ]; then
    CC=clang CXX=clang++ cmake -S fuzz -B "$SAN_DIR" -G Ninja >/dev/null
  fi
  ninja -C "$SAN_DIR" -j"${PIPEFILL_JOBS:-2}" "${PLAIN[@]}"
fi
if [ ${#MLIR[@]} -gt 0 ]; then
  if [ ! -f "$FUZZ_MLIR_DIR/build.ninja" ]; then
    CC=clang CXX=clang++ cmake -S . -B "$FUZZ_MLIR_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DPIPEFILL_MLIR_FUZZERS=ON -DPIPEFILL_ENABLE_CUDA=OFF -DPIPEFILL_PYTHON=OFF \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >/dev/null
  fi
  ninja -C "$FUZZ_MLIR_DIR" -j"${PIPEFILL_JOBS:-2}" "${MLIR[@]}"
fi
for t in "${TARGETS[@]}"; do
  DIR=$(dir_of "$t")
  mkdir -p "$DIR/corpus/$t" "$DIR/findings/$t"
  start=$(date +%s)
  set +e
  nice "$DIR/bin/fuzz-$t" -runs="$RUNS" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 \
    -use_value_profile=1 -print_final_stats=1 ${FUZZ_FLAGS:-} -artifact_prefix="$DIR/findings/$t/" \
    "$DIR/corpus/$t" "fuzz/corpus/$t" >"$DIR/findings/$t.log" 2>&1
  rc=$?
  set -e
  # One process: its stat:: line counts. -fork=N (FUZZ_FLAGS): the parent's stat:: line (when it
  # prints one, e.g. when stopped by a signal) says 0, and its last "#RUNS: cov: ..." status line
  # counts the jobs' inputs: the larger of the two is the count.
  stat=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$DIR/findings/$t.log" | tail -1 |
         grep -o '[0-9]*$' || echo 0)
  status=$(grep -o '^#[0-9]*: cov:' "$DIR/findings/$t.log" | tail -1 | grep -o '[0-9]*' || echo 0)
  runs=$(( stat > status ? stat : status ))
  echo "fuzz $t: exit $rc, $runs inputs, $(( $(date +%s) - start )) s, findings: $(ls "$DIR/findings/$t" | wc -l)"
done
