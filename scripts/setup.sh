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
  clang libclang-rt-14-dev
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

# --- Python package (pipefill module: nanobind + scikit-build-core) ------------------------------
# A project virtual environment at .venv/ (git-ignored) built on Debian's python3 (python3-venv,
# python3-dev for the headers), holding the pinned build and test dependencies. `pip install .`
# of the pipefill package then runs with --no-build-isolation against these, so a test run needs
# no downloads once this has run. Fast when everything is present (one import check). lizard
# measures function lengths for test/sizes.test.
# Open MPI and mpi4py (its binary wheel loads Debian's libmpi) are groundwork for one process
# per pipeline rank; ctest's mpi.smoke checks that mpirun starts two ranks that talk.
PIPEFILL_PY_DEBS=(python3-venv python3-dev python3-pip libopenmpi-dev openmpi-bin)
PIPEFILL_PY_PINS=(nanobind==2.9.2 scikit-build-core==0.11.6 numpy==2.2.6 pytest==8.4.2 lizard==1.24.3
                  mpi4py==4.1.2)
py_missing=()
for p in "${PIPEFILL_PY_DEBS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    py_missing+=("$p")
  fi
done
if [ ${#py_missing[@]} -gt 0 ]; then
  echo "setup: installing ${py_missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${py_missing[@]}"
fi
PIPEFILL_VENV=${PIPEFILL_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv}
if [ ! -x "$PIPEFILL_VENV/bin/python" ]; then
  echo "setup: creating the Python virtual environment $PIPEFILL_VENV"
  /usr/bin/python3 -m venv "$PIPEFILL_VENV"
fi
# The stamp holds the pins it was made for; a changed pin list reinstalls.
PIPEFILL_PY_STAMP="$PIPEFILL_VENV/.pipefill-pins"
if [ "$(cat "$PIPEFILL_PY_STAMP" 2>/dev/null)" != "${PIPEFILL_PY_PINS[*]}" ] ||
   ! "$PIPEFILL_VENV/bin/python" -c 'import nanobind, scikit_build_core, numpy, pytest, mpi4py, lizard' 2>/dev/null; then
  echo "setup: pip installing ${PIPEFILL_PY_PINS[*]} into $PIPEFILL_VENV"
  "$PIPEFILL_VENV/bin/python" -m pip install -q --disable-pip-version-check "${PIPEFILL_PY_PINS[@]}"
  echo "${PIPEFILL_PY_PINS[*]}" > "$PIPEFILL_PY_STAMP"
else
  echo "setup: Python venv $PIPEFILL_VENV has ${PIPEFILL_PY_PINS[*]}"
fi

# --- torch (for the torch.distributed.pipelining tests, test/torch/) --------------------------
# The standard PyPI torch wheel, pinned, in the project's virtual environment .venv/ (git-ignored;
# created here the same way as for the Python package if it does not exist yet, on Debian's
# python3 with python3-venv). Installed only when `import torch` fails there, so a second run
# costs one import check. It is a large download (the wheel pulls CUDA libraries) made once.
# Set PIPEFILL_SKIP_TORCH=1 to leave torch out: the tests that need it then report UNSUPPORTED.
# numpy: torch's pipelining sends stage metadata as pickled objects, which needs it (same pin as
# the Python package block).
PIPEFILL_TORCH_PINS=(torch==2.15.0 numpy==2.2.6)
if [ "${PIPEFILL_SKIP_TORCH:-0}" != 1 ]; then
  PIPEFILL_TORCH_VENV=${PIPEFILL_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv}
  if [ ! -x "$PIPEFILL_TORCH_VENV/bin/python" ]; then
    if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q 'install ok installed'; then
      echo "setup: installing python3-venv"
      SUDO=""
      if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
      export DEBIAN_FRONTEND=noninteractive
      $SUDO apt-get update -qq
      $SUDO apt-get install -y -qq --no-install-recommends python3-venv
    fi
    echo "setup: creating the Python virtual environment $PIPEFILL_TORCH_VENV"
    /usr/bin/python3 -m venv "$PIPEFILL_TORCH_VENV"
  fi
  # The wheel and the CUDA libraries it pulls take about 5.5 GB installed, and pip unpacks them
  # first: with less free than PIPEFILL_TORCH_MIN_FREE_GB (default 9) on the venv's or pip's
  # temporary filesystem, torch is left out rather than filling the disk that the build and the
  # tests need.
  torch_min_gb=${PIPEFILL_TORCH_MIN_FREE_GB:-9}
  free_gb() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 { printf "%d", $4 / 1048576 }'; }
  venv_free=$(free_gb "$PIPEFILL_TORCH_VENV")
  tmp_free=$(free_gb "${TMPDIR:-/tmp}")
  if "$PIPEFILL_TORCH_VENV/bin/python" -c 'import torch, numpy' 2>/dev/null; then
    echo "setup: torch present in $PIPEFILL_TORCH_VENV"
  elif [ "${venv_free:-0}" -lt "$torch_min_gb" ] || [ "${tmp_free:-0}" -lt "$torch_min_gb" ]; then
    echo "setup: warning: only ${venv_free:-?} GiB free for $PIPEFILL_TORCH_VENV and ${tmp_free:-?} GiB" \
         "for ${TMPDIR:-/tmp}, under the ${torch_min_gb} GiB torch needs; torch is left out and" \
         "the torch tests will be skipped" >&2
  else
    echo "setup: pip installing ${PIPEFILL_TORCH_PINS[*]} into $PIPEFILL_TORCH_VENV (large download)"
    # A failed download does not stop the build: the torch tests then show as UNSUPPORTED, and
    # whatever pip had installed before it failed (CUDA libraries of several GB) is removed.
    torch_before=$("$PIPEFILL_TORCH_VENV/bin/python" -m pip freeze --all 2>/dev/null | sort)
    if ! "$PIPEFILL_TORCH_VENV/bin/python" -m pip install -q --disable-pip-version-check \
         --no-cache-dir "${PIPEFILL_TORCH_PINS[@]}"; then
      echo "setup: warning: could not install ${PIPEFILL_TORCH_PINS[*]}; the torch tests will be skipped" >&2
      torch_added=$(comm -13 <(echo "$torch_before") \
                      <("$PIPEFILL_TORCH_VENV/bin/python" -m pip freeze --all 2>/dev/null | sort) |
                    sed 's/[=@ ].*//')
      if [ -n "$torch_added" ]; then
        echo "setup: removing what the failed install left: $(echo $torch_added)" >&2
        # shellcheck disable=SC2086
        "$PIPEFILL_TORCH_VENV/bin/python" -m pip uninstall -q -y $torch_added || true
      fi
    fi
  fi
fi
