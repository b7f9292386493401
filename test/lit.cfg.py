# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "pipefill"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".pbtxt", ".test"]
config.excludes = ["Inputs", "scripts", "example-report.test.py", "compare_runs.py", "compare_plan.py", "check_run_trace.py", "scale_profile.py", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.pipefill_obj_root, "test")

config.substitutions.append(("%examples", os.path.join(config.pipefill_src_root, "examples")))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%pipefill_src", config.pipefill_src_root))
config.substitutions.append(("%pipefill_tools", config.pipefill_tools_dir))
config.substitutions.append(("%pipefill_obj", config.pipefill_obj_root))

llvm_config.with_system_environment(["HOME", "TMPDIR", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

# FileCheck, not, count come from the LLVM install; our tools from build/bin.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tools = ["pipefill-opt", "pipefill-translate", "pipefill-compile", "pipefill-run", "pipefill-sim", "tiny-run",
         "gpt40b-1f1b-run"]
# Tests of optional tools run only where the tool was built.
if not os.path.exists(os.path.join(config.pipefill_tools_dir, "pipefill-sim")):
    config.excludes.append("sim")
if not os.path.exists(os.path.join(config.pipefill_tools_dir, "pipefill-run")):
    config.excludes.append("runtime")
from lit.llvm.subst import ToolSubst
# The driver skips MLIR's verifier in release builds (as clang does); every
# test runs it, once on the compiled IR.
llvm_config.add_tool_substitutions(
    [ToolSubst(t, extra_args=["--verify-ir"]) if t == "pipefill-compile" else t
     for t in tools if os.path.exists(os.path.join(config.pipefill_tools_dir, t))],
    [config.pipefill_tools_dir])

# torch (from scripts/setup.sh, in the project's .venv): tests marked
# `REQUIRES: torch` build schedules with torch's own classes; they show as
# UNSUPPORTED where torch is missing. %torch_python runs that interpreter.
import subprocess
_torch_python = os.path.join(config.pipefill_src_root, ".venv", "bin", "python")
if os.path.exists(_torch_python) and subprocess.run(
        [_torch_python, "-c", "import torch.distributed.pipelining"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("torch")
    config.substitutions.append(("%torch_python", _torch_python + " -W ignore"))
else:
    lit_config.note("torch is not installed in .venv: the torch tests are skipped")
config.excludes.extend(["torch_tables.py", "make_trace.py", "check_trace_profile.py"])

# lizard (from scripts/setup.sh, in the project's .venv) measures function lengths for
# sizes.test; %venv_python runs that interpreter.
_venv_python = os.path.join(config.pipefill_src_root, ".venv", "bin", "python")
if os.path.exists(_venv_python) and subprocess.run(
        [_venv_python, "-c", "import lizard"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("lizard")
    config.substitutions.append(("%venv_python", _venv_python))
else:
    lit_config.note("lizard is not installed in .venv: sizes.test is skipped")
