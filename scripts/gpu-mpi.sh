# shellcheck shell=bash
# Rank mode on the GPU machines, sourced by scripts/gpu-bundle.sh and scripts/gpu-check.sh (run from
# the repository root): the Open MPI that the bundle carries (Debian's 4.1 and its external PMIx,
# started through scripts/pfrt-mpirun.sh), where libnccl is, and gpu-check's step that runs two
# CUDA ranks with NCCL on one GPU (test/runtime/nccl_test.py --one-gpu).

# Libraries every GPU machine has (glibc's, the compiler's runtime, zlib): never packed.
gpu_mpi_system='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libz)\.so'
# What a packed Open MPI component may load besides those: Open MPI's own libraries, hwloc (with
# libudev), libevent, PMIx (with munge). Components that need more (UCX, libfabric, verbs, PSM,
# OpenSHMEM, MPI-IO's ompio, the monitoring ones) stay here: one machine runs on shared memory and
# TCP, and Open MPI warns about every component it finds but cannot load.
gpu_mpi_packed='^(libmpi|libopen-pal|libopen-rte|libmca_common_sm|libhwloc|libudev|'
gpu_mpi_packed+='libevent_core-2\.1|libevent_pthreads-2\.1|libpmix|libmunge)\.so'

# gpu_mpi_pack STAGE: Open MPI under STAGE/openmpi in the layout scripts/pfrt-mpirun.sh relocates
# (bin/ with orterun, mpirun and orted, lib/openmpi3 and lib/pmix with the components, share/ with
# the help texts, etc/ with the settings, VERSION) and the wrapper as STAGE/bin/pfrt-mpirun; the
# libraries they load are left to the caller (ldd of STAGE/openmpi/bin/* and
# STAGE/openmpi/lib/*/*.so). Prints what it packed; fails, printing why, when there is no Open MPI.
gpu_mpi_pack() {
  local stage=$1 ompi=$1/openmpi so deps pmix skipped=() n=0
  command -v ompi_info >/dev/null ||
    { echo "no Open MPI here (ompi_info; scripts/setup.sh installs libopenmpi-dev)"; return 1; }
  gpu_mpi_path() { ompi_info --parsable --path "$1" | sed -n "s|^path:$1:||p" | head -n 1; }
  local bindir pkglib pkgdata sysconf
  bindir=$(gpu_mpi_path bindir) pkglib=$(gpu_mpi_path pkglibdir)
  pkgdata=$(gpu_mpi_path pkgdatadir) sysconf=$(gpu_mpi_path sysconfdir)
  mkdir -p "$ompi/bin" "$ompi/lib/openmpi3" "$ompi/share/openmpi" "$ompi/etc" "$stage/bin"
  cp -L "$bindir/orterun" "$bindir/orted" "$bindir/ompi_info" "$ompi/bin/"
  ln -s orterun "$ompi/bin/mpirun"
  for so in "$pkglib"/mca_*.so; do
    deps=$(ldd "$so" | awk '$2 == "=>" {print $1}' |
           grep -vE "$gpu_mpi_system|$gpu_mpi_packed" || true)
    if [ -z "$deps" ]; then
      cp "$so" "$ompi/lib/openmpi3/" && n=$((n + 1))
    else
      skipped+=("$(basename "$so" .so | sed 's/^mca_//')")
    fi
  done
  # An external PMIx (Debian's: mca_pmix_ext3x loads libpmix.so.2) has components of its own.
  pmix=$(ldd "$pkglib"/mca_pmix_ext*.so 2>/dev/null |
         awk '$1 ~ /^libpmix\.so/ {print $3}' | head -n 1)
  if [ -n "$pmix" ]; then
    # Its prefix: Debian's libpmix.so.2 is a link to .../pmix2/lib/libpmix.so.2.6.2.
    pmix=$(dirname "$(dirname "$(readlink -f "$pmix")")")
    mkdir -p "$ompi/lib/pmix" "$ompi/share/pmix"
    [ -d "$pmix/lib/pmix" ] && cp "$pmix"/lib/pmix/*.so "$ompi/lib/pmix/"
    [ -d "$pmix/share/pmix" ] && cp "$pmix"/share/pmix/help-*.txt "$ompi/share/pmix/"
  fi
  cp -r "$pkgdata"/. "$ompi/share/openmpi/"
  [ -f "$sysconf/openmpi-default-hostfile" ] && cp "$sysconf/openmpi-default-hostfile" "$ompi/etc/"
  cat >"$ompi/etc/openmpi-mca-params.conf" <<'EOF'
# The GPU bundle's Open MPI (scripts/gpu-mpi.sh): the ranks of one machine, over shared memory
# (vader; no single-copy mechanism: containers often forbid CMA's process_vm_readv) or TCP.
btl = self,vader,tcp
pml = ob1
btl_vader_single_copy_mechanism = none
EOF
  ompi_info --parsable | sed -n 's/^ompi:version:full:/Open MPI /p' | head -n 1 >"$ompi/VERSION"
  cp scripts/pfrt-mpirun.sh "$stage/bin/pfrt-mpirun"
  chmod +x "$stage/bin/pfrt-mpirun"
  echo "$(cat "$ompi/VERSION") from $bindir: $n components${pmix:+ (PMIx: $pmix)};" \
    "left out (libraries not packed): ${skipped[*]}"
}

# gpu_nccl_library: prints the path of a libnccl.so.2: PFRT_NCCL_LIBRARY, the CUDA toolkit's, the
# loader's (ldconfig), else the NCCL wheel (nvidia-nccl, beside torch) of the machine's python3;
# fails, printing nothing, when there is none.
gpu_nccl_library() {
  local f
  [ -n "${PFRT_NCCL_LIBRARY:-}" ] && { echo "$PFRT_NCCL_LIBRARY"; return 0; }
  for f in /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2 \
           $(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" {print $NF}') \
           $(python3 -c 'import os, nvidia.nccl as n
print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null); do
    [ -f "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}

# gpu_nccl_one_gpu BUILD OUT GPUS: gpu-check's step for NCCL ranks on one GPU. First two host ranks
# of the 2-stage plan under BUILD/bin/pfrt-mpirun (scripts/pfrt-mpirun.sh without a bundle), which
# says whether mpirun and the runtime's MPI work at all; then test/runtime/nccl_test.py --one-gpu:
# 2 CUDA ranks on GPU 0 with NCCL (PFRT_NCCL_LIBRARY, set by the caller) and with modelled
# transfers. Everything goes to OUT/nccl-one-gpu.log, the outcome in one line to
# OUT/nccl-one-gpu.txt (for the table). What is missing (a GPU, mpirun, the runtime's MPI or NCCL
# support, libnccl) skips the NCCL part, saying why. Uses gpu-check's tmo; 60 s at most in all.
gpu_nccl_one_gpu() {
  local build=$1 out=$2 gpus=$3 why=() mpirun=scripts/pfrt-mpirun.sh plan host="" rc
  # The bundle's rank-mode binary is bin/mpi/pipefill-run (its bin/ ones are built without MPI).
  local bin=$build/bin
  [ -x "$build/bin/mpi/pipefill-run" ] && bin=$build/bin/mpi
  local log=$out/nccl-one-gpu.log txt=$out/nccl-one-gpu.txt work=$out/nccl-one-gpu
  mkdir -p "$work"
  echo "machine: $(getconf GNU_LIBC_VERSION 2>/dev/null), $(uname -r)" >"$log"
  [ -x "$build/bin/pfrt-mpirun" ] && mpirun=$build/bin/pfrt-mpirun
  # The plan of ctest pipefill-run.nccl, compiled (the bundle's, or here with a full build's
  # compiler), else the hand-written 2-stage program.
  plan=runtime/tests/data/two_stage.pbtxt
  if [ -f "$build/test/runtime/two_stage.pb" ]; then
    plan=$build/test/runtime/two_stage.pb
  elif [ -x build/bin/pipefill-compile ] && build/bin/pipefill-compile \
       test/runtime/Inputs/two_stage.pbtxt --stream-program "$work/two_stage.pb" >>"$log" 2>&1; then
    plan=$work/two_stage.pb
  fi
  if ! ldd "$bin/pipefill-run" 2>/dev/null | grep 'libmpi\.so' >/dev/null; then
    why+=("pipefill-run was built without MPI (no rank mode)")
  elif ! [ -x "$build/openmpi/bin/orterun" ] && ! command -v mpirun >/dev/null; then
    why+=("no mpirun: the bundle carries no Open MPI ($(cat "$build/openmpi/MISSING" 2>/dev/null ||
          echo "none in $build")) and the machine has none")
  else
    echo "=== 2 host ranks ($plan): does mpirun start the runtime's ranks?" >>"$log"
    tmo 20 "$mpirun" -n 2 "$bin/pipefill-run" "$plan" --backend host --time-model modelled \
      --time-scale 0.01 --iterations 2 --peer-timeout 10 --quiet --report "$work/host.json" \
      >>"$log" 2>&1
    rc=$?
    host="2 host ranks: $([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)")"
    [ "$rc" -eq 0 ] || why+=("the host ranks failed")
  fi
  [ "$gpus" -gt 0 ] || why+=("no GPU")
  [ -x "$build/bin/pfrt-nccl-tests" ] ||
    why+=("the runtime was built without nccl.h (no NCCL rank transfers)")
  [ -n "${PFRT_NCCL_LIBRARY:-}" ] || why+=("no libnccl.so.2 (PFRT_NCCL_LIBRARY,\
 /usr/local/cuda/lib64, ldconfig, python3's nvidia-nccl wheel)")
  if [ "${#why[@]}" -gt 0 ]; then
    echo "${host:+$host; }NCCL skipped: $(printf '%s, ' "${why[@]}" | sed 's/, $//')" |
      tee -a "$log" >"$txt"
    cat "$txt"
    [[ "$host" != *FAILED* ]]
    return
  fi
  echo "=== nccl_test.py --one-gpu (PFRT_NCCL_LIBRARY=$PFRT_NCCL_LIBRARY)" >>"$log"
  tmo 40 python3 test/runtime/nccl_test.py --one-gpu --mpirun "$mpirun" --compiled \
    --run-timeout 20 --peer-timeout 12 "$bin" "$plan" "$work" >>"$log" 2>&1
  rc=$?
  local oks fails
  oks=$(grep -c '^ok: ' "$log")
  fails=$(grep '^FAIL: ' "$log" | sed 's/^FAIL: //' | paste -sd'|' - | sed 's/|/; /g')
  case $rc in
    0) echo "$host; NCCL on one GPU: $oks checks passed ($(grep -E '^(nccl|modelled): exit' "$log" |
         head -n 2 | sed 's/: exit 0 in/ run/' | paste -sd'|' - | sed 's/|/, /'))" >"$txt" ;;
    77) echo "$host; NCCL skipped: $(grep '^SKIP: ' "$log" | sed 's/^SKIP: //')" >"$txt" ;;
    124|137) echo "$host; NCCL on one GPU: timed out; $oks ok${fails:+, FAILED: $fails}" >"$txt" ;;
    *) echo "$host; NCCL on one GPU: FAILED (exit $rc): ${fails:-see nccl-one-gpu.log}" >"$txt" ;;
  esac
  grep -E '^(ok|FAIL|SKIP): |^(nccl|modelled): exit|checks? (passed|failed)' "$log"
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]
}
