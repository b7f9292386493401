#!/usr/bin/env bash
# Installs what is missing, configures (Ninja, ccache) and builds everything
# into build/ (or $PIPEFILL_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${PIPEFILL_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPIPEFILL_WERROR=ON \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py
fi
start=$(date +%s)
cmake --build "$BUILD_DIR" -- -j"${PIPEFILL_JOBS:-$(nproc)}"
echo "build: done in $(( $(date +%s) - start )) s"
