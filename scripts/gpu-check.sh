#!/usr/bin/env bash
# The runtime's prepared check for a machine with an NVIDIA GPU (finishes in under 8 minutes):
#   1. installs missing packages (scripts/setup.sh),
#   2. configures and builds the runtime targets in Release (build-gpu/, all cores),
#   3. runs the CUDA tests (CUDA vs host checksums, stream priorities, calibrated compute,
#      replay mode, non-blocking fill, checkpoint portability),
#   4. measures the main job's iteration time with and without fill (slowdown) and the bubble
#      context-switch latency with pfrt-gpu-bench, and prints a short table,
#   5. runs pipefill-run on the bundled example program on the GPU.
# Every step has a time limit; the script exits non-zero if a step fails.
#
# Environment: GPU_CHECK_OUT=DIR copies the reports there (default build-gpu/gpu-check).
set -uo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
start=$(date +%s)
out=${GPU_CHECK_OUT:-$repo/build-gpu/gpu-check}
status=0

step() { echo; echo "=== gpu-check: $* ($(( $(date +%s) - start )) s)"; }
fail() { echo "gpu-check: FAILED: $*" >&2; status=1; }

step "GPU"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
else
  echo "gpu-check: nvidia-smi not found; the CUDA tests will skip if no device is visible"
fi

step "setup"
if ! timeout 240 scripts/setup.sh; then
  echo "gpu-check: warning: scripts/setup.sh failed (offline?); continuing with what is installed"
fi
export PATH="/usr/local/cuda/bin:$PATH"

step "configure"
build=build-gpu
jobs=$(nproc)
if ! timeout 120 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ||
   ! ninja -C "$build" -t targets all 2>/dev/null | grep -q '^pfrt-gpu-bench:'; then
  # The top level needs LLVM/MLIR 19 (and must include runtime/); the runtime needs neither.
  echo "gpu-check: warning: the top-level build has no runtime targets; building the runtime standalone"
  build=build-gpu-runtime
  timeout 120 cmake -S runtime/standalone -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ||
    { fail "configure"; exit 1; }
fi

step "build ($jobs jobs)"
targets="pfrt-cuda-tests pfrt-tests pfrt-gpu-bench pipefill-run"
# With the full top level, also compile the bundled example into its stream
# program and runtime binary (needs the MLIR tools; about a minute on 16 cores).
[ "$build" = build-gpu ] && targets="$targets gpt40b-1f1b-run"
timeout 300 cmake --build "$build" -j "$jobs" --target $targets ||
  { fail "build"; exit 1; }
mkdir -p "$out"

step "CUDA tests"
timeout 180 "$build/bin/pfrt-cuda-tests" --gtest_color=no 2>&1 | tee "$out/cuda-tests.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "pfrt-cuda-tests"
if grep -q "SKIPPED" "$out/cuda-tests.log" && grep -q "no CUDA device" "$out/cuda-tests.log"; then
  fail "no CUDA device visible: the CUDA tests skipped"
fi

step "host tests (sanity, 60 s max)"
timeout 60 "$build/bin/pfrt-tests" --gtest_brief=1 --gtest_color=no || fail "pfrt-tests"

step "slowdown and context switch (pfrt-gpu-bench)"
timeout 150 "$build/bin/pfrt-gpu-bench" --backend cuda --iterations 20 \
  --report-prefix "$out/gpu-bench" 2>&1 | tee "$out/gpu-bench.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "pfrt-gpu-bench"

step "pipefill-run on the example program"
timeout 60 "$build/bin/pipefill-run" runtime/tests/data/two_stage.pbtxt --backend cuda \
  --iterations 10 --report "$out/two_stage.cuda.json" --profile-out "$out/two_stage.profile.pbtxt" ||
  fail "pipefill-run (profile)"
timeout 60 "$build/bin/pipefill-run" runtime/tests/data/two_stage.pbtxt --backend cuda \
  --iterations 10 --report "$out/two_stage.fill.json" || fail "pipefill-run (fill)"

if [ -f "$build/examples/gpt40b-1f1b-run.pb" ]; then
  step "bundled example on one GPU (replay mode: stage 0 real, peers emulated)"
  for stage in 0 15; do
    timeout 60 "$build/bin/pipefill-run" "$build/examples/gpt40b-1f1b-run.pb" --backend cuda \
      --stage $stage --iterations 3 --no-fill --report "$out/gpt40b.stage$stage.nofill.json" ||
      fail "gpt40b stage $stage without fill"
    timeout 60 "$build/bin/pipefill-run" "$build/examples/gpt40b-1f1b-run.pb" --backend cuda \
      --stage $stage --iterations 3 --report "$out/gpt40b.stage$stage.fill.json" ||
      fail "gpt40b stage $stage with fill"
  done
  python3 - "$out" <<'PY' || true
import json, sys, os
out = sys.argv[1]
print(f"{'stage':>5} {'no fill (ms)':>14} {'fill (ms)':>10} {'slowdown':>9} {'overruns':>9}")
for stage in (0, 15):
    try:
        a = json.load(open(os.path.join(out, f"gpt40b.stage{stage}.nofill.json")))
        b = json.load(open(os.path.join(out, f"gpt40b.stage{stage}.fill.json")))
    except OSError:
        continue
    t0, t1 = a["iteration_us_mean"] / 1e3, b["iteration_us_mean"] / 1e3
    print(f"{stage:>5} {t0:>14.2f} {t1:>10.2f} {t1 / t0 - 1:>+9.2%} {b['overruns']['count']:>9}")
PY
fi

step "done"
echo "gpu-check: reports in $out; $(( $(date +%s) - start )) s; status $status"
exit $status
