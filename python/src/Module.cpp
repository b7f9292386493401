//===- Module.cpp - pipefill._core: the Python binding --------------------===//
//
// The compiler half binds embed::CompiledPlan (python/src/Compile.h, MLIR in
// process); the runtime half (Runtime.cpp, the public C API of runtime/pfrt.h
// only) is the same source that pipefill._rt, the runtime-only module, holds.
// The Python package (python/pipefill/__init__.py) adds the convenience entry
// points `compile` and `run` on top of these.
//
//===----------------------------------------------------------------------===//
#include "python/src/Compile.h"
#include "python/src/Gil.h"
#include "python/src/PyText.h"
#include "python/src/Runtime.h"
#include "python/src/Session.h"
#include "support/ProtoText.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;
using pipefill::embed::CompiledPlan;
using pipefill::py::jsonLoads;
using pipefill::py::pyText;
using pipefill::py::pyTexts;

namespace {

/// A 1-D numpy array that owns a copy of `values`.
template <typename T> nb::object toNumpy(const std::vector<T> &values) {
  auto *data = new std::vector<T>(values);
  nb::capsule owner(data, [](void *p) noexcept { delete static_cast<std::vector<T> *>(p); });
  size_t shape[1] = {data->size()};
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(data->data(), 1, shape, owner));
}

nb::bytes streamProgramBytes(const CompiledPlan &plan, int64_t iterations, bool text) {
  std::string bytes = plan.streamProgram(iterations, text);
  return nb::bytes(bytes.data(), bytes.size());
}

void savePlan(const CompiledPlan &plan, nb::handle where, int64_t iterations) {
  std::string path = pipefill::py::fsPath(where, "the stream program path").string();
  std::string bytes = plan.streamProgram(iterations, pipefill::isTextProtoPath(path));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out)
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    int errnum = errno ? errno : EIO;
    throw pipefill::embed::FileError(std::string("cannot write stream program (") +
                                         std::strerror(errnum) + ")",
                                     path, errnum);
  }
}

nb::dict bubbleTable(const CompiledPlan &plan) {
  pipefill::embed::BubbleColumns c = plan.bubbles();
  nb::dict d;
  d["stage"] = toNumpy(c.stage);
  d["start_us"] = toNumpy(c.startUs);
  d["duration_us"] = toNumpy(c.durationUs);
  d["filled_us"] = toNumpy(c.filledUs);
  d["free_bytes"] = toNumpy(c.freeBytes);
  d["fills"] = toNumpy(c.fills);
  d["kind"] = nb::module_::import_("numpy").attr("asarray")(nb::cast(c.kind), "dtype"_a = "str");
  return d;
}

nb::dict stageTable(const CompiledPlan &plan) {
  pipefill::embed::StageColumns c = plan.stages();
  nb::dict d;
  d["stage"] = toNumpy(c.stage);
  d["busy_us"] = toNumpy(c.busyUs);
  d["idle_us"] = toNumpy(c.idleUs);
  d["peak_memory_bytes"] = toNumpy(c.peakMemoryBytes);
  d["bubbles"] = toNumpy(c.bubbles);
  return d;
}

void translateCompileException(const std::exception_ptr &p, void *) {
  try {
    std::rethrow_exception(p);
  } catch (const pipefill::embed::CompileFailure &e) {
    pipefill::py::callingPython([&] {
      nb::object cls = nb::module_::import_("pipefill._errors").attr("CompileError");
      nb::object exc = cls(pyText(e.what()), pyTexts(e.diagnostics));
      PyErr_SetObject(cls.ptr(), exc.ptr());
    });
  }
}

/// The compiler half: Plan, compile_text, compile_file.
void registerPlan(nb::module_ &m) {
  nb::class_<CompiledPlan>(m, "Plan",
                           "A compiled plan: the JobSpec after the whole --pipefill-compile "
                           "pipeline (schedule expanded, simulated, bubbles materialized, fill "
                           "planned and verified). Create one with pipefill.compile().")
      .def_prop_ro("name", &CompiledPlan::name, "The pipeline's name (the JobSpec's `name`).")
      .def_prop_ro(
          "warnings", [](const CompiledPlan &p) -> nb::list { return pyTexts(p.warnings()); },
          nb::sig("def warnings(self) -> list[str]"),
                   "Warnings the compiler emitted (for example a fill job that fits in no "
                   "bubble), each as `file:line:col: warning: ...` text.")
      .def(
          "report", [](const CompiledPlan &p) { return jsonLoads(p.reportJson()); },
          nb::sig("def report(self) -> dict[str, typing.Any]"),
          "The report as a dict: the keys of `pipefill-translate --to-report` "
          "(iteration_time_us, bubble_fraction, stages[], fill{...}). All numbers are planned.")
      .def("report_json", &CompiledPlan::reportJson, "The report as JSON text.")
      .def("summary", &CompiledPlan::summary,
           "The terminal summary table (`pipefill-translate --to-summary`).")
      .def("trace", &CompiledPlan::trace, "A Chrome/Perfetto trace (JSON text) of the plan.")
      .def("svg", &CompiledPlan::svg, "An SVG picture of the schedule, bubbles and fill.")
      .def("mlir", &CompiledPlan::mlir, "debug_info"_a = false,
           "The compiled IR as text; with debug_info=True every op carries the JobSpec "
           "location it came from.")
      .def("stream_program", &streamProgramBytes, "iterations"_a = 1, "text"_a = false,
           "The plan lowered to a StreamProgram (`--pipefill-lower-to-stream` then "
           "`--to-stream-program`), as bytes: binary protobuf, or text format with text=True. "
           "`iterations` is the loop count written into the program.")
      .def("save", &savePlan, "path"_a, "iterations"_a = 1,
           nb::sig("def save(self, path: str | os.PathLike, iterations: int = 1) -> None"),
           "Writes the stream program to `path`: text format for .pbtxt/.textproto/.txtpb/.prototxt/.txt, "
           "binary otherwise (what pipefill-run and pipefill.run read).")
      .def("bubbles", &bubbleTable,
           nb::sig("def bubbles(self) -> dict[str, numpy.ndarray]"),
           "Every planned bubble as columns of numpy arrays, in stage then schedule order: "
           "stage, start_us, duration_us, filled_us (planned fill time), free_bytes, fills "
           "(number of fill chunks) and kind (warmup/steady/cooldown/tail).")
      .def("stages", &stageTable,
           nb::sig("def stages(self) -> dict[str, numpy.ndarray]"),
           "Per-stage columns as numpy arrays: stage, busy_us, idle_us, peak_memory_bytes, "
           "bubbles (count).")
      .def("__repr__", [](const CompiledPlan &p) {
        return "<pipefill.Plan '" + p.name() + "'>";
      });

  m.def(
      "compile_text",
      [](const std::string &text, const std::string &name, const std::string &profile) {
        pipefill::embed::CompileOptions options;
        options.profile = profile;
        pipefill::py::GilRelease release;
        return CompiledPlan::fromText(text, name, options);
      },
      "text"_a, "name"_a = "<string>", "profile"_a = "",
      "Compiles JobSpec text (protobuf text format); `name` is the file name diagnostics "
      "print. `profile`: a measured profile path (pipefill-run --profile-out). Raises "
      "CompileError with file:line:col diagnostics.");
  m.def(
      "compile_file",
      [](const std::string &path, const std::string &profile) {
        pipefill::embed::CompileOptions options;
        options.profile = profile;
        pipefill::py::GilRelease release;
        return CompiledPlan::fromFile(path, options);
      },
      "path"_a, "profile"_a = "",
      "Compiles the JobSpec file at `path`. Raises FileNotFoundError (OSError) when it "
      "cannot be read, CompileError when the compiler rejects it.");
}

} // namespace

NB_MODULE(_core, m) {
  m.doc() = "pipefill's compiler (in process, through the MLIR libraries) and runtime (the "
            "pfrt C API). Use the functions of the `pipefill` package; this module holds "
            "the bound classes.";
  pipefill::py::registerRuntime(m);
  nb::register_exception_translator(translateCompileException);
  registerPlan(m);
  { void pipefillRegisterTorchImport(nb::module_ &); pipefillRegisterTorchImport(m); }
}
