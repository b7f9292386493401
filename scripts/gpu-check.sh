#!/usr/bin/env bash
# The runtime's prepared check for one NVIDIA GPU (an H200 here; under 8 minutes):
#   1. configures the runtime alone (runtime/standalone: no LLVM/MLIR needed) for the GPU's
#      architecture (CMAKE_CUDA_ARCHITECTURES, default 90) and builds only the runtime targets;
#   2. runs the CUDA tests (they skip visibly without a GPU), CUDA sessions included
#      (CudaBackendTest.Session*: no test data files, so they run from a prebuilt bundle too);
#   3. cuBLAS vs host numerics on full-size layers (a BERT-large encoder layer, an MLP training
#      step), fill GEMMs in bf16 (the default) and in TF32: relative error of the output checksums
#      and of the trained weights' checksum, each with its derived bound (early: seconds each);
#   4. the CUDA tests of pipefill.torch (python/tests/test_torch_wrapper.py::test_cuda_*, pytest)
#      with the runtime-only Python module pipefill._rt and plans compiled ahead
#      (scripts/gpu-python.sh), after a host-session check of that package; needs a CPython 3.12
#      (PIPEFILL_GPU_PYTHON) with torch, else it says why it skipped;
#   5. NCCL ranks on one GPU (scripts/gpu-mpi.sh, test/runtime/nccl_test.py --one-gpu): two host
#      ranks under mpirun (the bundle's Open MPI), then two CUDA ranks of a 2-stage plan on GPU 0,
#      each with its own NCCL_HOSTID so that NCCL takes them (socket transport), with NCCL and with
#      modelled transfers; skipped, saying why, without a GPU, mpirun or libnccl (60 s max);
#   6. --compare on the bundled example in replay mode (stage 0 real, the others emulated):
#      ABBA main-job slowdown with its A/A noise floor, switch latency p50/p99 on bubbles with an
#      idle fill stream, fill throughput measured / planned (and once more with the device-side
#      gates off);
#   7. the host tests;
#   8. prints one table (and writes it to $OUT/table.txt).
# Without a GPU it still builds, runs the CPU-side parts (host tests, the host --compare, the host
# side of the numerics, the runtime-only package's host check, two host ranks under mpirun) and
# exits 3 with "no GPU" after printing what it could.
#
# Environment: GPU_CHECK_OUT (default build-gpu/gpu-check), CUDA_ARCH (90), GPU_CHECK_BUILD_TIMEOUT
# (seconds, 300), GPU_CHECK_PREBUILT (a folder made by scripts/gpu-bundle.sh and unpacked: bin/ with
# the three binaries, lib/ with the libraries the GPU machine lacks, optional examples/, python/
# with the runtime-only package, its tests, plans and pytest, openmpi/ and bin/pfrt-mpirun,
# test/runtime/ with the NCCL rank test's plan; the configure and build steps are skipped,
# for a GPU machine without protobuf/OpenBLAS headers), GPU_CHECK_PROGRAM
# (a compiled StreamProgram; default build/examples/gpt40b-1f1b-run.pb when a full build made it,
# else runtime/tests/data/two_stage.pbtxt), GPU_CHECK_REPS (ABBA blocks, 3), GPU_CHECK_BUDGET
# (seconds, 480: every step's limit is cut to what is left of it, a step with less than 5 s left
# is skipped and fails, and 20 s are kept for the table, so the table is printed even when a step
# hangs; a device machine's command is killed at its own limit, with nothing copied back).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-python.sh
source scripts/gpu-mpi.sh
repo=$(pwd)
start=$(date +%s)
out=${GPU_CHECK_OUT:-$repo/build-gpu/gpu-check}
arch=${CUDA_ARCH:-90}
reps=${GPU_CHECK_REPS:-3}
build=build-gpu
status=0
mkdir -p "$out"
step() { echo; echo "=== gpu-check: $* ($(( $(date +%s) - start )) s)"; }
fail() { echo "gpu-check: FAILED: $*" >&2; status=1; }
deadline=$(( start + ${GPU_CHECK_BUDGET:-480} ))
exec 3>&2 # tmo's own messages, also from steps whose output goes to a log
# tmo SECONDS CMD...: CMD under a limit of SECONDS, cut to what is left of the budget (20 s kept
# for the table); with under 5 s left, CMD is skipped and the step fails with timeout's 124.
tmo() {
  local want=$1 left=$(( deadline - $(date +%s) - 20 ))
  shift
  [ "$left" -lt "$want" ] && want=$left
  if [ "$want" -lt 5 ]; then
    echo "gpu-check: skipped, the time budget (GPU_CHECK_BUDGET) is spent: $*" >&3
    return 124
  fi
  timeout -k 5 "$want" "$@"
  local rc=$?
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "gpu-check: timed out after $want s: $1" >&3
  return "$rc"
}
# The library folders of the NVIDIA wheels (nvidia-cublas, nvidia-nccl, ...) that the machine's
# python3 holds, ':'-separated; empty without them.
nvidia_wheel_libs() {
  command -v python3 >/dev/null || return 0
  python3 -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(p) for r in nvidia.__path__
                       for p in glob.glob(os.path.join(r, "*", "lib", "lib*.so*"))})))' 2>/dev/null
}

step "GPU"
gpus=0
smi=$(command -v nvidia-smi || ls /usr/local/nvidia/bin/nvidia-smi 2>/dev/null || true)
if [ -n "$smi" ] && "$smi" -L >/dev/null 2>&1; then
  "$smi" --query-gpu=name,memory.total,driver_version --format=csv,noheader
  gpus=$("$smi" -L | grep -c '^GPU')
fi
echo "gpu-check: $gpus GPU(s) visible"
export PATH="/usr/local/cuda/bin:$PATH"

if [ -n "${GPU_CHECK_PREBUILT:-}" ]; then
  step "prebuilt binaries from $GPU_CHECK_PREBUILT (configure and build skipped)"
  build=$GPU_CHECK_PREBUILT
  export LD_LIBRARY_PATH="$build/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  missing=$(ldd "$build/bin/pipefill-run" "$build/bin/pfrt-cuda-tests" | grep "not found" | sort -u)
  if [ -n "$missing" ]; then
    # No toolkit libraries there: those of the CUDA wheels (nvidia-cublas, nvidia-cuda-runtime)
    # that the machine's Python holds, if any.
    wheels=$(nvidia_wheel_libs)
    if [ -n "$wheels" ]; then
      echo "gpu-check: adding the CUDA wheels' libraries: $wheels"
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$wheels"
      missing=$(ldd "$build/bin/pipefill-run" "$build/bin/pfrt-cuda-tests" | grep "not found" | sort -u)
    fi
  fi
  [ -z "$missing" ] || { echo "$missing"; fail "prebuilt binaries miss libraries"; exit 1; }
else
  step "configure (runtime only, sm_$arch)"
  cuda_args=()
  [ -x /usr/local/cuda/bin/nvcc ] && cuda_args=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  # The runtime-only Python module too, where a CPython 3.12 and nanobind are here.
  targets=(pfrt-cuda-tests pfrt-tests pipefill-run)
  gpu_python_build_args
  [ -z "$py_missing" ] && targets+=(_rt pipefill_py_sources)
  # PFRT_MPI=ON explicitly: scripts/gpu-bundle.sh caches OFF in build-gpu (its main binaries).
  tmo 120 cmake -S runtime/standalone -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPFRT_MPI=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" "${cuda_args[@]}" "${launcher[@]}" "${py_args[@]}" \
    >"$out/configure.log" 2>&1 || { cat "$out/configure.log"; fail "configure"; exit 1; }

  step "build ($(nproc) jobs)"
  tmo "${GPU_CHECK_BUILD_TIMEOUT:-300}" cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" \
    >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; fail "build"; exit 1; }
fi
run=$build/bin/pipefill-run

step "CUDA tests"
tmo 150 "$build/bin/pfrt-cuda-tests" --gtest_color=no >"$out/cuda-tests.log" 2>&1 ||
  fail "pfrt-cuda-tests"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran" "$out/cuda-tests.log"
cuda_tests=$(grep -Eo "^\[  PASSED  \] [0-9]+" "$out/cuda-tests.log" | grep -Eo "[0-9]+$" || echo 0)
cuda_skipped=$(grep -cE "^\[  SKIPPED \] CudaBackend.* \([0-9]+ ms\)" "$out/cuda-tests.log" || true)
# Failed tests by name (the table named only passed and skipped ones: 3 failures read as 18 / 0).
cuda_failed=$(grep -oE "^\[  FAILED  \] CudaBackendTest\.[A-Za-z0-9_]+ \(" "$out/cuda-tests.log" |
              sed -E 's/^\[  FAILED  \] CudaBackendTest\.//; s/ \($//' | paste -sd, - || true)

if [ "$gpus" -gt 0 ]; then
  # Seconds: the gated tests again with one trace line per gated chunk (host cost of each pass's
  # graph: capture / instantiate / launch), with the warm-up before the loop and without it.
  step "gate diagnostics: the gated tests traced, warm-up on and off (30 s max each)"
  gated='CudaBackendTest.*Gate*:CudaBackendTest.TailBubble*'
  PFRT_CUDA_GATE_TRACE=1 tmo 30 "$build/bin/pfrt-cuda-tests" --gtest_color=no \
    --gtest_filter="$gated" >"$out/gate-trace.log" 2>&1 || true
  PFRT_CUDA_WARMUP=0 PFRT_CUDA_GATE_TRACE=1 tmo 30 "$build/bin/pfrt-cuda-tests" --gtest_color=no \
    --gtest_filter="$gated" >"$out/gate-trace-nowarmup.log" 2>&1 || true
  grep -hE "^\[  (PASSED|FAILED) " "$out/gate-trace.log" "$out/gate-trace-nowarmup.log" || true
fi

# libnccl for the NCCL steps (loaded at run time): PFRT_NCCL_LIBRARY, else the CUDA toolkit's, the
# loader's, or the NCCL wheel (nvidia-nccl) of the machine's Python.
if nccl_lib=$(gpu_nccl_library); then
  export PFRT_NCCL_LIBRARY=$nccl_lib
  echo "gpu-check: NCCL from $PFRT_NCCL_LIBRARY"
fi
if [ -x "$build/bin/pfrt-nccl-tests" ]; then
  step "NCCL rank transfers: the library loads, the channel setup (fake NCCL); 30 s max"
  tmo 30 "$build/bin/pfrt-nccl-tests" --gtest_brief=1 --gtest_color=no || fail "pfrt-nccl-tests"
fi

step "NCCL ranks on one GPU: 2 ranks on GPU 0, each its own NCCL_HOSTID (sockets); 60 s max"
gpu_nccl_one_gpu "$build" "$out" "$gpus" ||
  fail "NCCL ranks on one GPU ($(cat "$out/nccl-one-gpu.txt" 2>/dev/null); nccl-one-gpu.log)"

# Early: the cheapest direct check of the CUDA fill kernels (seconds each), before the longer
# steps can spend the budget.
step "numerics: full-size layers, host (OpenBLAS) vs cuBLAS"
num=runtime/tests/data/full_size_numerics.pbtxt
tmo 120 "$run" "$num" --backend host --max-dim 1048576 --time-model modelled --fill-policy unbounded \
  --quiet --report "$out/numerics.host.json" || fail "numerics (host)"
if [ "$gpus" -gt 0 ]; then
  # The default fill precision (bf16 operands, fp32 accumulation: the cost model's) and the TF32
  # option (PFRT_CUDA_FILL_MATH=tf32).
  PFRT_CUDA_FILL_MATH=bf16 tmo 120 "$run" "$num" --backend cuda --max-dim 1048576 \
    --fill-policy unbounded --quiet --report "$out/numerics.cuda.json" || fail "numerics (cuda bf16)"
  PFRT_CUDA_FILL_MATH=tf32 tmo 120 "$run" "$num" --backend cuda --max-dim 1048576 \
    --fill-policy unbounded --quiet --report "$out/numerics.cuda-tf32.json" ||
    fail "numerics (cuda tf32)"
fi

step "pipefill.torch on CUDA: pytest with the runtime-only package (4 min max; early: it is short)"
if [ -n "${GPU_CHECK_PREBUILT:-}" ]; then
  py_dir=$GPU_CHECK_PREBUILT/python py_site=$GPU_CHECK_PREBUILT/python/site
  py_tests=$GPU_CHECK_PREBUILT/python/tests
  py_missing=""
  [ -d "$py_site" ] || py_missing="the bundle has no python/site (made by an older gpu-bundle.sh)"
  [ -f "$py_dir/MISSING" ] && py_missing="the bundle has no Python package: $(cat "$py_dir/MISSING")"
else
  # The module built above; the test's plans compiled with the full build's package and pytest
  # copied from .venv, into $out/python.
  py_dir=$out/python py_site=$build/python/site py_tests=python/tests
  if [ -z "$py_missing" ]; then
    py_missing=$(gpu_python_extras "$py_dir" "$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')")
  fi
fi
if [ -n "$py_missing" ]; then
  echo "skipped: $py_missing" | tee "$out/torch-cuda.txt"
  [ "$gpus" -eq 0 ] || fail "pipefill.torch CUDA test not run on a GPU machine"
else
  gpu_python_test "$py_site" "$py_tests" "$py_dir/plans" "$py_dir/vendor" "$out" "$gpus" ||
    fail "pipefill.torch CUDA test ($(cat "$out/torch-cuda.txt"))"
fi

program=${GPU_CHECK_PROGRAM:-}
if [ -z "$program" ]; then
  program=runtime/tests/data/two_stage.pbtxt
  [ -f build/examples/gpt40b-1f1b-run.pb ] && program=build/examples/gpt40b-1f1b-run.pb
  [ -n "${GPU_CHECK_PREBUILT:-}" ] && [ -f "$GPU_CHECK_PREBUILT/examples/gpt40b-1f1b-run.pb" ] &&
    program=$GPU_CHECK_PREBUILT/examples/gpt40b-1f1b-run.pb
fi
if [ "$gpus" -gt 0 ]; then
  step "slowdown: $program on the GPU, replay (stage 0), $reps ABBA blocks"
  tmo 240 "$run" "$program" --backend cuda --stage 0 --iterations 4 --compare "$reps" \
    --compare-json "$out/compare.json" | tee "$out/compare.txt" || fail "compare (cuda)"
  step "the same with the device-side gates off (PFRT_CUDA_DEVICE_GATE=0), 1 ABBA block"
  PFRT_CUDA_DEVICE_GATE=0 tmo 150 "$run" "$program" --backend cuda --stage 0 --iterations 4 \
    --compare 1 --compare-json "$out/compare-nogate.json" | tee "$out/compare-nogate.txt" ||
    fail "compare (cuda, gates off)"
else
  step "slowdown: $program on the host (no GPU), replay (stage 0), 1 ABBA block"
  tmo 240 "$run" "$program" --backend host --stage 0 --iterations 3 --time-scale 0.1 \
    --max-dim 32 --compare 1 --compare-json "$out/compare.json" | tee "$out/compare.txt" ||
    fail "compare (host)"
fi

step "host tests (bubble bound, labels; 60 s max; last: they need no GPU)"
tmo 60 "$build/bin/pfrt-tests" --gtest_brief=1 --gtest_color=no \
  --gtest_filter='BubbleBound*:Profile*' || fail "pfrt-tests"

step "table"
python3 - "$out" "$gpus" "$cuda_tests" "$cuda_skipped" "${cuda_failed:-}" <<'PY' | tee "$out/table.txt"
import json, os, sys
out, gpus, passed, skipped = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
failed = [f for f in sys.argv[5].split(",") if f]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None
rows = [("GPUs visible", str(gpus)),
        ("CUDA tests passed / failed / skipped", f"{passed} / {len(failed)} / {skipped}")]
if failed:
    rows.append(("CUDA tests failed", ", ".join(failed)))
c = load("compare.json")
if c:
    where = "GPU" if gpus else "host (no GPU)"
    rows += [
        (f"main-job slowdown ({where}, {c['time_model']})",
         f"{100 * c['slowdown']:+.2f}% (noise floor {100 * c['noise_floor']:.2f}%, "
         f"blocks {100 * c['slowdown_min']:+.2f}..{100 * c['slowdown_max']:+.2f}%)"),
        # Real us: the comparison's times are plan us (real / time_scale; 1 on the GPU).
        ("switch latency p50 / p99 (idle fill)",
         f"{c['switch_latency_idle_fill']['p50_us'] * c.get('time_scale', 1):.1f} / "
         f"{c['switch_latency_idle_fill']['p99_us'] * c.get('time_scale', 1):.1f} us real "
         f"({c['switch_latency_idle_fill']['count']} bubbles)"),
        ("fill throughput measured / planned",
         f"{c['fill_throughput_ratio']:.3f} ({c['fill_samples_per_s']:.1f} vs {c['fill_samples_per_s_planned']:.1f} samples/s)"),
        ("fill chunks run / deferred / pending",
         f"{c['chunks_run']} / {c['chunks_deferred']} / {c['chunks_pending']}"),
        ("overrun / fill time", f"{100 * c['overrun_fraction_of_fill']:.2f}%"),
    ]
    if gpus:
        rows.append(("fill chunks stopped on the GPU (gates)",
                     str(c.get("chunks_stopped_on_device", "-"))))
n = load("compare-nogate.json")
if n:
    rows += [("gates off: slowdown, overrun / fill",
              f"{100 * n['slowdown']:+.2f}% (noise floor {100 * n['noise_floor']:.2f}%), "
              f"{100 * n['overrun_fraction_of_fill']:.2f}%; switch p50 "
              f"{n['switch_latency_idle_fill']['p50_us'] * n.get('time_scale', 1):.1f} us real")]
try:  # printed by CudaBackendTest.DeviceGatesStopAChunkBetweenPasses
    for line in open(os.path.join(out, "cuda-tests.log")):
        if line.startswith("gated chunks:"):
            rows.append(("gated chunk: host time to its first pass (measured)",
                         line.split("(measured):")[-1].strip()))
        if line.startswith("gates on :") or line.startswith("gates off:"):
            rows.append((f"gate test, {line[:9].strip()}", line[10:].strip()))
except OSError:
    pass
# Derived bound on the relative error of a checksum (runtime/tests/CudaBackendTest.cpp,
# fillTolerance): per GEMM stage sqrt(2/3) u + K 2^-24 (operand rounding, unit roundoff u; fp32
# accumulation over K), sqrt(D) of that over D stages, x2 for a loss. Full-size layers: the encoder
# layer D = 6 (Q, QK^T, PV, Wo, W1, W2), the MLP step's loss D = 2 and weights D = 4; K <= 4096.
def bound(u, stages, factor=1.0, k=4096):
    return factor * stages ** 0.5 * ((2.0 / 3.0) ** 0.5 * u + k * 2.0 ** -24)
stages = {("bert-layer", "checksum"): (6, 1.0), ("mlp-train", "checksum"): (2, 2.0),
          ("mlp-train", "weights_checksum"): (4, 1.0)}
h = load("numerics.host.json")
over = []  # checksums past their bound: the check fails (below, in the shell)
for tag, name, u in (("bf16", "numerics.cuda.json", 2.0 ** -8),
                     ("tf32", "numerics.cuda-tf32.json", 2.0 ** -11)):
    g = load(name)
    if not (h and g):
        continue
    for jh, jg in zip(h["fill"]["jobs"], g["fill"]["jobs"]):
        for key in ("checksum", "weights_checksum"):
            if key in jh and key in jg:
                a, b = jh[key], jg[key]
                d, f = stages.get((jh["name"], key), (6, 1.0))
                err = abs(b - a) / max(abs(a), 1e-30)
                rows.append((f"cuBLAS {tag} vs host, {jh['name']} {key}",
                             f"rel. error {err:.2e} "
                             f"(bound {bound(u, d, f):.1e}; host {a:.6g}, cuda {b:.6g})"))
                if not err <= bound(u, d, f):  # NaN too
                    over.append(f"{tag} {jh['name']} {key}: {err:.2e} > {bound(u, d, f):.1e}")
if h and not load("numerics.cuda.json"):
    rows.append(("cuBLAS vs host numerics", "host side only (no GPU)"))
try:
    rows.append(("NCCL ranks on one GPU (mpirun -n 2)",
                 open(os.path.join(out, "nccl-one-gpu.txt")).read().strip()))
except OSError:
    rows.append(("NCCL ranks on one GPU (mpirun -n 2)", "not run"))
try:
    rows.append(("pipefill.torch CUDA tests (pytest, _rt)",
                 "; ".join(open(os.path.join(out, "torch-cuda.txt")).read().split("\n")).strip("; ")))
except OSError:
    rows.append(("pipefill.torch CUDA tests (pytest, _rt)", "not run"))
w = max(len(r[0]) for r in rows)
for k, v in rows:
    print(f"{k:<{w}}  {v}")
with open(os.path.join(out, "numerics-over-bound.txt"), "w") as f:
    f.write("".join(line + "\n" for line in over))
PY
# The table is only read by people: a number past its bound or a test that did not run on a GPU
# machine fails the check.
if [ -s "$out/numerics-over-bound.txt" ]; then
  fail "cuBLAS checksums past their derived error bound: $(tr '\n' ';' <"$out/numerics-over-bound.txt")"
fi
if [ "$gpus" -gt 0 ] && [ "${cuda_skipped:-0}" -gt 0 ]; then
  fail "$cuda_skipped CUDA tests skipped on a machine with $gpus GPU(s) (cuda-tests.log says why)"
fi

step "done"
if [ "$gpus" -eq 0 ]; then
  echo "gpu-check: no GPU: the CPU-side parts ran; the GPU numbers above are missing ($(( $(date +%s) - start )) s)"
  exit 3
fi
echo "gpu-check: reports in $out; $(( $(date +%s) - start )) s; status $status"
exit $status
