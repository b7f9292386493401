#!/usr/bin/env bash
# The sanitizer configuration (fuzz/CMakeLists.txt): every plain-C++ part of pipefill (protos,
# support/, algo/, the runtime's host backend) built with clang under AddressSanitizer and
# UndefinedBehaviorSanitizer; runs all their unit tests and each libFuzzer target for
# PIPEFILL_FUZZ_SECONDS (default 3) from its seed corpus. Then the MLIR side: the main project
# configured by clang with -DPIPEFILL_MLIR_FUZZERS=ON in build-fuzz-mlir (dialects, passes and
# codegen instrumented), of which only the fuzz-* targets are built and run the same way.
# Part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
SAN_DIR=${PIPEFILL_SAN_DIR:-build-san}
JOBS=${PIPEFILL_JOBS:-$(nproc)}
if ! command -v clang++ >/dev/null; then
  echo "sanitize: clang++ not found (run scripts/setup.sh)" >&2
  exit 1
fi
if [ ! -f "$SAN_DIR/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S fuzz -B "$SAN_DIR" -G Ninja \
    -DPIPEFILL_FUZZ_SECONDS="${PIPEFILL_FUZZ_SECONDS:-3}" >/dev/null
fi
ninja -C "$SAN_DIR" -j"$JOBS"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$SAN_DIR" --output-on-failure -j"$JOBS" -LE timing
# Wall-clock contrasts run alone, up to 3 attempts each (as in scripts/test.sh).
ctest --test-dir "$SAN_DIR" --output-on-failure -L timing --repeat until-pass:3

FUZZ_MLIR_DIR=${PIPEFILL_FUZZ_MLIR_DIR:-build-fuzz-mlir}
if [ ! -f "$FUZZ_MLIR_DIR/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$FUZZ_MLIR_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPIPEFILL_MLIR_FUZZERS=ON -DPIPEFILL_ENABLE_CUDA=OFF -DPIPEFILL_PYTHON=OFF \
    -DPIPEFILL_FUZZ_SECONDS="${PIPEFILL_FUZZ_SECONDS:-3}" \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >/dev/null
fi
ninja -C "$FUZZ_MLIR_DIR" -j"$JOBS" fuzz-mlir_parse fuzz-compile fuzz-json_stream
ctest --test-dir "$FUZZ_MLIR_DIR" -L fuzz --output-on-failure -j"$JOBS"
