#!/usr/bin/env bash
# The one prepared command for a device machine lent to this project (see docs/runtime.md, §10):
# unpacks the bundle that scripts/gpu-bundle.sh made here, runs scripts/gpu-check.sh on it, and
# leaves in $OUT what the `run` tool brings back (at most 8 files): the table, the logs a reader
# needs first, and everything else as one archive.
#   scripts/gpu-device-run.sh [ARCHIVE]   (default .gpu-carry/pfrt-gpu.tar.xz; needs $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
archive=${1:-.gpu-carry/pfrt-gpu.tar.xz}
[ -n "${OUT:-}" ] || { echo "gpu-device-run: \$OUT is not set (the run tool sets it)" >&2; exit 2; }
[ -f "$archive" ] || { echo "gpu-device-run: $archive not found (make it with scripts/gpu-bundle.sh and carry it)" >&2; exit 2; }
work=$(mktemp -d)
# What comes back is copied when this script ends, however it ends (a TERM included); gpu-check
# keeps to its time budget (GPU_CHECK_BUDGET, 480 s by default), so a run with timeout_s 540
# ends on its own with the table made.
collect() {
  local f
  for f in table.txt cuda-tests.log nccl-one-gpu.log compare.txt compare-nogate.txt torch-cuda.log; do
    [ -f "$work/gpu-check/$f" ] && cp "$work/gpu-check/$f" "$OUT/"
  done
  [ -d "$work/gpu-check" ] && tar -C "$work" -czf "$OUT/gpu-check.tgz" gpu-check
}
trap 'collect; rm -rf "$work"' EXIT
trap 'exit 143' TERM INT
mkdir -p "$work/bundle"
tar -C "$work/bundle" -xJf "$archive" || { echo "gpu-device-run: cannot unpack $archive" >&2; exit 2; }
mkdir -p "$work/gpu-check"
# The device machines' python3 is the one that holds torch (a python3.12 elsewhere on PATH might
# not): the torch tests run with it unless PIPEFILL_GPU_PYTHON names another.
if [ -z "${PIPEFILL_GPU_PYTHON:-}" ] && command -v python3 >/dev/null; then
  export PIPEFILL_GPU_PYTHON=$(command -v python3)
fi
GPU_CHECK_PREBUILT="$work/bundle" GPU_CHECK_OUT="$work/gpu-check" bash scripts/gpu-check.sh
status=$?
collect
trap 'rm -rf "$work"' EXIT
echo "gpu-device-run: gpu-check exited $status; $(ls "$OUT" | tr '\n' ' ')"
exit $status
