# The Python side of the GPU check, sourced by scripts/gpu-bundle.sh and scripts/gpu-check.sh (run
# from the repository root): pipefill's runtime-only package (pipefill._rt, no compiler) for the
# GPU machines' interpreter, the plans that the CUDA test of pipefill.torch loads there, pytest,
# and the step that runs them.
#   PIPEFILL_GPU_PYTHON   the interpreter to build the module for and run it with (default: a
#                         CPython 3.12, python3.12 or python3 on PATH or pyenv's; the GPU machines')

# gpu_python_find: prints the interpreter's path; fails, printing nothing, when none runs.
gpu_python_find() {
  if [ -n "${PIPEFILL_GPU_PYTHON:-}" ]; then
    "$PIPEFILL_GPU_PYTHON" -c 'import sys; print(sys.executable)' 2>/dev/null
    return
  fi
  local c candidates=(python3.12 python3)
  command -v pyenv >/dev/null && candidates+=("$(pyenv root)"/versions/3.12*/bin/python3.12)
  for c in "${candidates[@]}"; do
    "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12); print(sys.executable)' \
      2>/dev/null && return 0
  done
  return 1
}

# gpu_python_build_args: sets py (the interpreter), py_args (the options that make the
# runtime-alone build, runtime/standalone, also build pipefill._rt for it, nanobind's CMake package
# from it or else from the project's .venv; or -DPFRT_PYTHON=OFF) and py_missing (empty, or why
# there is no module).
gpu_python_build_args() {
  local nb
  py_args=(-DPFRT_PYTHON=OFF) py_missing=""
  if ! py=$(gpu_python_find); then
    py_missing="no CPython 3.12 here (PIPEFILL_GPU_PYTHON names one)"
  elif ! nb=$("$py" -m nanobind --cmake_dir 2>/dev/null ||
              .venv/bin/python -m nanobind --cmake_dir 2>/dev/null); then
    py_missing="no nanobind (neither $py nor .venv/bin/python has it: scripts/setup.sh)"
  else
    py_args=(-DPFRT_PYTHON=ON "-DPython_EXECUTABLE=$py" "-Dnanobind_DIR=$nb")
  fi
}

# gpu_python_extras DEST VERSION: DEST/plans, the CUDA-only tests' plans compiled with the full
# build's package (python/tests/precompile_plans.py), and DEST/vendor, pytest for Python VERSION
# from .venv (scripts/copy-pytest.py). Fails, saying why, without the full build or .venv.
gpu_python_extras() {
  [ -x .venv/bin/python ] || { echo "no .venv/bin/python (scripts/setup.sh makes it)"; return 1; }
  compgen -G "build/python/site/pipefill/_core.*" >/dev/null ||
    { echo "no compiler module in build/python/site to compile the test plans (scripts/build.sh)"; return 1; }
  PYTHONPATH=build/python/site .venv/bin/python python/tests/precompile_plans.py "$1/plans" >/dev/null &&
    .venv/bin/python scripts/copy-pytest.py "$1/vendor" "$2" >/dev/null ||
    { echo "precompile_plans.py or copy-pytest.py failed"; return 1; }
}

# gpu_python_test SITE TESTS PLANS VENDOR OUT GPUS: the runtime-only package's check
# (check_runtime_only.py: host session on the first plan) and then the CUDA tests of
# pipefill.torch (pytest; the package in SITE, the tests in TESTS, their plans in PLANS, pytest from
# VENDOR when the interpreter has none). Writes one outcome line per test to OUT/torch-cuda.txt
# (NAME passed, NAME failed: why, NAME skipped: why; or one failed/skipped line for all) and the
# logs beside it; fails when a test failed, or when they skipped with GPUS > 0. Called by
# gpu-check.sh, whose tmo (its time budget) limits the two steps.
gpu_python_test() {
  local site=$1 tests=$2 plans=$3 vendor=$4 out=$5 gpus=$6 py suffix outcome
  local result=$out/torch-cuda.txt
  py=$(gpu_python_find) || outcome="skipped: no CPython 3.12 here (PIPEFILL_GPU_PYTHON names one)"
  if [ -z "${outcome:-}" ]; then
    suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    [ -f "$site/pipefill/_rt$suffix" ] || outcome="skipped: no pipefill._rt for $py in $site/pipefill"
  fi
  if [ -n "${outcome:-}" ]; then
    echo "$outcome" | tee "$result"
    [ "$gpus" -eq 0 ]
    return
  fi
  if ! PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$site tmo 60 "$py" "$tests/check_runtime_only.py" \
    "$(ls "$plans"/*.pb | head -n 1)" >"$out/runtime-only.log" 2>&1; then
    tail -5 "$out/runtime-only.log"
    echo "failed: the runtime-only package fails check_runtime_only.py (runtime-only.log)" >"$result"
    return 1
  fi
  tail -1 "$out/runtime-only.log"
  local path=$site
  "$py" -c 'import pytest' 2>/dev/null || path=$site:$vendor
  rm -f "$out/torch-cuda.xml"
  PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$path PIPEFILL_TEST_PLANS=$plans \
    PIPEFILL_EXPECT_PACKAGE=$site/pipefill tmo 180 "$py" -m pytest -q -p no:cacheprovider -rA --junitxml="$out/torch-cuda.xml" \
    "$tests/test_torch_wrapper.py::test_cuda_stages_fill_the_streams_gaps" \
    "$tests/test_torch_wrapper.py::test_cuda_fill_task_steps_run_on_the_fill_stream" \
    >"$out/torch-cuda.log" 2>&1
  [ $? -eq 124 ] && outcome="failed: timed out after 180 s (torch-cuda.log)"
  [ -n "${outcome:-}" ] || outcome=$("$py" - "$out/torch-cuda.xml" <<'PY'
import re, sys, xml.etree.ElementTree as ET
try:
    cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
except (OSError, ET.ParseError):
    cases = None
if not cases:
    print("failed: pytest ran no test (torch-cuda.log)")
# One line per test, "<first word of the outcome>: ..."; the shell reads the first words.
for case in cases or []:
    name = case.get("name", "?").replace("test_cuda_", "")
    sys.stdout.write(name + " ")
    bad = case.find("failure") if case.find("failure") is not None else case.find("error")
    if bad is not None:
        print("failed: " + " ".join(bad.get("message", "").split())[:160] + " (torch-cuda.log)")
    elif case.find("skipped") is not None:
        skip = case.find("skipped")
        reason = skip.get("message", "")
        if reason == "collection skipped":  # a module-level skip: the reason is in the text
            found = re.search(r"Skipped: (.*)'\)\s*$", skip.text or "", re.S)
            reason = found.group(1) if found else skip.text or reason
        print("skipped: " + " ".join(reason.split()))
    else:
        print(f"passed ({float(case.get('time', 0)):.1f} s)")
PY
)
  echo "$outcome" | tee "$result"
  # Every test passed: 0; any failed (or pytest itself): 1; else (skips) only without a GPU.
  if ! grep -qvE '^([a-z_]+ )?passed' <<<"$outcome"; then
    return 0
  elif grep -qE '^([a-z_]+ )?failed' <<<"$outcome"; then
    tail -30 "$out/torch-cuda.log"
    return 1
  fi
  [ "$gpus" -eq 0 ]
}
