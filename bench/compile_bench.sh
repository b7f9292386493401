#!/usr/bin/env bash
# Compile-time benchmark (see bench/compile_bench.py for what it measures):
# JobSpec -> report + stream program, per phase, at the sizes of issue 12
# (1F1B 64x512x100 and 128x4096x100, interleaved v=4 64x512x100) plus a
# growth series. Extra arguments go to the script, e.g.
#   bench/compile_bench.sh --mode both --phases --repeat 5
# Usage: bench/compile_bench.sh [ARGS...]   (BUILD_DIR via --build, default build)
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/compile_bench.py "$@"
