#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every
# test (lit suite, unit tests, the generated runtime binary) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${PIPEFILL_BUILD_DIR:-build}
cd "$BUILD_DIR"
ctest --output-on-failure -j"${PIPEFILL_JOBS:-$(nproc)}"
