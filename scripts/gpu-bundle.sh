#!/usr/bin/env bash
# Builds the runtime here for the GPU's architecture and packs what a bare GPU machine lacks into one
# archive, for scripts/gpu-check.sh's GPU_CHECK_PREBUILT mode: the GPU machines lent to this project
# carry CUDA (nvcc, cuBLAS) but not protobuf or OpenBLAS, and can fetch nothing.
#   scripts/gpu-bundle.sh [ARCHIVE]      (default .gpu-carry/pfrt-gpu.tar.xz; CUDA_ARCH, default 90)
# The archive holds bin/{pipefill-run,pfrt-tests,pfrt-cuda-tests[,pfrt-nccl-tests]} (built without
# MPI), lib/ (every library the binaries, Open MPI and the Python module load that is not glibc,
# libstdc++, zlib or CUDA's own), examples/gpt40b-1f1b-run.pb when a full build made it; for rank
# mode (scripts/gpu-mpi.sh) bin/mpi/pipefill-run, built with this machine's Open MPI, Open MPI in openmpi/,
# started by bin/pfrt-mpirun (scripts/pfrt-mpirun.sh), and test/runtime/two_stage.pb (the NCCL rank
# test's plan, compiled with the full build); and the Python side of the check
# (scripts/gpu-python.sh): python/site/pipefill (the runtime-only module pipefill._rt for CPython
# 3.12, PIPEFILL_GPU_PYTHON, beside the package's Python files), python/tests (the CUDA test of
# pipefill.torch and what it imports; test/torch/torch_tables.py), python/plans (its plans,
# compiled here with the full build's package: run scripts/build.sh first) and python/vendor
# (pytest, pure Python, from .venv). Without a 3.12 interpreter, nanobind or the full build it
# packs the rest and writes why into python/MISSING (gpu-check shows it); without Open MPI, why
# into openmpi/MISSING (bin/pfrt-mpirun then runs the GPU machine's own mpirun, if any). Unpack the
# archive into a folder and pass that folder as GPU_CHECK_PREBUILT.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-python.sh
source scripts/gpu-mpi.sh
archive=${1:-.gpu-carry/pfrt-gpu.tar.xz}
arch=${CUDA_ARCH:-90}
export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || { echo "gpu-bundle: nvcc not found (CUDA toolkit at /usr/local/cuda)" >&2; exit 1; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
targets=(pfrt-cuda-tests pfrt-tests pipefill-run)
gpu_python_build_args
[ -z "$py_missing" ] && targets+=(_rt)
# Two builds: build-gpu without MPI for everything but rank mode (its binaries need glibc 2.34,
# and a GPU machine with an older glibc than Open MPI's libraries need still runs the whole check
# but the ranks), build-gpu-mpi for bin/mpi/pipefill-run, the rank-mode binary.
cmake -S runtime/standalone -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPFRT_MPI=OFF \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" "${launcher[@]}" \
  "${py_args[@]}" >/dev/null
cmake --build build-gpu -j "${PIPEFILL_JOBS:-$(nproc)}" --target "${targets[@]}"
cmake -S runtime/standalone -B build-gpu-mpi -G Ninja -DCMAKE_BUILD_TYPE=Release -DPFRT_MPI=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" "${launcher[@]}" \
  -DPFRT_PYTHON=OFF >/dev/null
cmake --build build-gpu-mpi -j "${PIPEFILL_JOBS:-$(nproc)}" --target pipefill-run
# NCCL support (rank transfers) is built when nccl.h is found; libnccl itself is loaded at run time
# and not packed (200 MB).
grep -q "pfrt-nccl-tests" build-gpu/build.ninja &&
  cmake --build build-gpu -j "${PIPEFILL_JOBS:-$(nproc)}" --target pfrt-nccl-tests
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin/mpi" "$stage/lib" "$stage/examples"
cp build-gpu/bin/pipefill-run build-gpu/bin/pfrt-tests build-gpu/bin/pfrt-cuda-tests "$stage/bin/"
cp build-gpu-mpi/bin/pipefill-run "$stage/bin/mpi/"
[ -f build-gpu/bin/pfrt-nccl-tests ] && cp build-gpu/bin/pfrt-nccl-tests "$stage/bin/"
if [ -z "$py_missing" ]; then
  mkdir -p "$stage/python/site/pipefill" "$stage/python/tests" "$stage/test/torch"
  cp build-gpu/python/site/pipefill/_rt.*.so python/pipefill/*.py python/pipefill/py.typed \
    "$stage/python/site/pipefill/"
  cp python/tests/{conftest,test_torch_wrapper,torch_jobs,precompile_plans,check_runtime_only}.py \
    "$stage/python/tests/"
  cp test/torch/torch_tables.py "$stage/test/torch/"
  version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if py_missing=$(gpu_python_extras "$stage/python" "$version"); then
    # The module loads with this interpreter, without the compiler, and a host session runs the
    # CUDA test's plan (what the GPU machine will do first).
    PYTHONPATH="$stage/python/site" "$py" python/tests/check_runtime_only.py \
      "$(ls "$stage"/python/plans/*.pb | head -n 1)" ||
      { echo "gpu-bundle: the runtime-only package fails its check" >&2; exit 1; }
  else
    rm -rf "$stage/python" "$stage/test"
  fi
fi
if [ -n "$py_missing" ]; then
  mkdir -p "$stage/python"
  echo "$py_missing" >"$stage/python/MISSING"
  echo "gpu-bundle: warning: no Python package in the bundle: $py_missing" >&2
fi
# Open MPI for rank mode, when the runtime was built with it.
if ! ldd "$stage/bin/mpi/pipefill-run" | grep 'libmpi\.so' >/dev/null; then
  mpi="the runtime was built without MPI (runtime/CMakeLists.txt found none)"
elif ! mpi=$(gpu_mpi_pack "$stage"); then
  mpi="no Open MPI: $mpi"
fi
if [ -d "$stage/openmpi/bin" ]; then
  echo "gpu-bundle: openmpi: $mpi"
else
  mkdir -p "$stage/openmpi"
  echo "$mpi" >"$stage/openmpi/MISSING"
  echo "gpu-bundle: warning: no Open MPI in the bundle (no rank mode there): $mpi" >&2
fi
if [ -x build/bin/pipefill-compile ]; then
  mkdir -p "$stage/test/runtime"
  build/bin/pipefill-compile test/runtime/Inputs/two_stage.pbtxt \
    --stream-program "$stage/test/runtime/two_stage.pb"
fi
# Every library that these load and a bare GPU machine lacks (bin/pfrt-mpirun is a script).
ldd "$stage"/bin/pipefill-run "$stage"/bin/mpi/pipefill-run "$stage"/bin/pfrt-*tests \
  $(ls "$stage"/python/site/pipefill/*.so "$stage"/openmpi/bin/* "$stage"/openmpi/lib/*/*.so 2>/dev/null) |
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  grep -vE '^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libz|libcuda|libcudart|libcublas|libcublasLt)\.so' |
  while read -r name path; do cp -L "$path" "$stage/lib/$name"; done
[ -f build/examples/gpt40b-1f1b-run.pb ] && cp build/examples/gpt40b-1f1b-run.pb "$stage/examples/"
# The newest glibc symbol version that FILES (paths in the stage) and the packed libraries they
# load need: "2.34 (bin/pipefill-run)". The GPU machine's glibc must be as new.
newest_glibc() {
  local f
  # (if/fi and || true: under set -e and pipefail a library that is not packed, or a file without
  # glibc symbols, must not end the script.)
  (cd "$stage" && for f in "$@" $(ldd "$@" 2>/dev/null | awk '$2 == "=>" {print "lib/" $1}'); do
    if [ -f "$f" ]; then
      objdump -T "$f" 2>/dev/null | grep -oE 'GLIBC_[0-9]+\.[0-9]+' | sed "s|\$| $f|" || true
    fi
  done) | sort -V | tail -n 1 | sed -E 's/^GLIBC_([0-9.]+) (.*)/\1 (\2)/'
}
glibc=$(newest_glibc bin/pipefill-run bin/pfrt-*tests $(cd "$stage" && ls python/site/pipefill/*.so 2>/dev/null))
glibc_mpi=$(newest_glibc bin/mpi/pipefill-run $(cd "$stage" && ls openmpi/bin/* openmpi/lib/*/*.so 2>/dev/null))
mkdir -p "$(dirname "$archive")"
tar -C "$stage" -cJf "$archive" .
echo "gpu-bundle: $archive ($(du -h "$archive" | cut -f1)): $(ls "$stage/lib" | tr '\n' ' ')"
echo "gpu-bundle: the GPU machine needs glibc ${glibc:-?} or newer; rank mode (Open MPI) ${glibc_mpi:-?}"
[ -f "$stage/python/MISSING" ] ||
  echo "gpu-bundle: python: $(cd "$stage/python" && du -h site/pipefill/_rt.*.so | tr '\t' ' '), $(ls "$stage"/python/plans/*.pb | wc -l) plan(s), pytest"
