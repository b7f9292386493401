#!/usr/bin/env bash
# Refreshes docs/generated/ from the build's generated dialect and pass docs.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${PIPEFILL_BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target pipefill-docs
mkdir -p docs/generated
cp "$BUILD_DIR"/docs/generated/*.md docs/generated/
echo "updated docs/generated/"
