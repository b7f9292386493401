#!/usr/bin/env bash
# Installs every Debian package pipefill needs that is not already present.
# Idempotent: a second run installs nothing and takes about a second.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache python3 git
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev zlib1g-dev libzstd-dev libedit-dev libcurl4-openssl-dev libxml2-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x /usr/lib/llvm-19/bin/mlir-tblgen ]; then
  echo "setup: error: /usr/lib/llvm-19/bin/mlir-tblgen missing after install" >&2
  exit 1
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "setup: note: no CUDA toolkit found at /usr/local/cuda; the CUDA backend will be skipped"
fi
