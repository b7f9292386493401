//===- TorchImport.cpp - pipefill._core.compile_torch_schedule ------------===//
//
// The in-process counterpart of `pipefill-translate --import-torch-schedule
// TABLE.csv --job JOB.pbtxt | pipefill-opt --pipefill-compile`: a torch
// action table (CSV) plus a JobSpec file in, a compiled Plan out. Registered
// from Module.cpp's NB_MODULE (pipefillRegisterTorchImport); the Python entry
// point is pipefill.compile_torch_schedule.
//
//===----------------------------------------------------------------------===//
#include "python/src/Compile.h"
#include "python/src/Gil.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include <memory>
#include <string>

namespace nb = nanobind;
using namespace nb::literals;

void pipefillRegisterTorchImport(nb::module_ &m) {
  m.def(
      "compile_torch_schedule",
      [](const std::string &table, const std::string &name, const std::string &jobPath,
         const std::string &profile) {
        if (jobPath.empty())
          throw std::invalid_argument(
              "compile_torch_schedule needs the JobSpec path (stage costs, hardware, fill jobs)");
        pipefill::embed::CompileOptions options;
        options.profile = profile;
        options.torchScheduleJob = jobPath;
        pipefill::py::GilRelease release;
        return pipefill::embed::CompiledPlan::fromText(table, name, options);
      },
      "table"_a, "name"_a, "job_path"_a, "profile"_a = "",
      "Compiles a torch.distributed.pipelining action table (CSV text; `name` is the file name "
      "diagnostics print) with the stage costs, hardware and fill jobs of the JobSpec file at "
      "`job_path`, as `pipefill-translate --import-torch-schedule --job` followed by "
      "--pipefill-compile. Raises CompileError with file:line:col diagnostics.");
}
