#!/usr/bin/env bash
# Builds the runtime here for the GPU's architecture and packs what a bare GPU machine lacks into one
# archive, for scripts/gpu-check.sh's GPU_CHECK_PREBUILT mode: the GPU machines lent to this project
# carry CUDA (nvcc, cuBLAS) but not protobuf or OpenBLAS, and can fetch nothing.
#   scripts/gpu-bundle.sh [ARCHIVE]      (default .gpu-carry/pfrt-gpu.tar.xz; CUDA_ARCH, default 90)
# The archive holds bin/{pipefill-run,pfrt-tests,pfrt-cuda-tests[,pfrt-nccl-tests]}, lib/ (every library the binaries
# load that is not glibc, libstdc++, zlib or CUDA's own) and examples/gpt40b-1f1b-run.pb when a full
# build made it. Unpack it into a folder and pass that folder as GPU_CHECK_PREBUILT.
set -euo pipefail
cd "$(dirname "$0")/.."
archive=${1:-.gpu-carry/pfrt-gpu.tar.xz}
arch=${CUDA_ARCH:-90}
export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || { echo "gpu-bundle: nvcc not found (CUDA toolkit at /usr/local/cuda)" >&2; exit 1; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S runtime/standalone -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" "${launcher[@]}" >/dev/null
cmake --build build-gpu -j "${PIPEFILL_JOBS:-$(nproc)}" --target pfrt-cuda-tests pfrt-tests pipefill-run
# NCCL support (rank transfers) is built when nccl.h is found; libnccl itself is loaded at run time
# and not packed (200 MB).
grep -q "pfrt-nccl-tests" build-gpu/build.ninja &&
  cmake --build build-gpu -j "${PIPEFILL_JOBS:-$(nproc)}" --target pfrt-nccl-tests
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/examples"
cp build-gpu/bin/pipefill-run build-gpu/bin/pfrt-tests build-gpu/bin/pfrt-cuda-tests "$stage/bin/"
[ -f build-gpu/bin/pfrt-nccl-tests ] && cp build-gpu/bin/pfrt-nccl-tests "$stage/bin/"
ldd build-gpu/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  grep -vE '^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libz|libcuda|libcudart|libcublas|libcublasLt)\.so' |
  while read -r name path; do cp -L "$path" "$stage/lib/$name"; done
[ -f build/examples/gpt40b-1f1b-run.pb ] && cp build/examples/gpt40b-1f1b-run.pb "$stage/examples/"
mkdir -p "$(dirname "$archive")"
tar -C "$stage" -cJf "$archive" .
echo "gpu-bundle: $archive ($(du -h "$archive" | cut -f1)): $(ls "$stage/lib" | tr '\n' ' ')"
