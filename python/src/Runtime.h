//===- Runtime.h - the runtime half of the Python binding ------*- C++ -*-===//
//
// Everything the package binds from the runtime's public C API (runtime/pfrt.h)
// and nothing from the compiler: pfrt_run (RunReport, run_bytes, run_file),
// sessions (Session with its fill tasks, open_session), cuda_device_count,
// backend_compiled, PFRT_API_VERSION, and the translation of the runtime's
// errors into RunError and OSError. One source for both modules that hold it:
// pipefill._core (Module.cpp: the compiler too) and pipefill._rt
// (RuntimeModule.cpp: the runtime alone, for machines without the compiler's
// libraries).
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_PYTHON_RUNTIME_H
#define PIPEFILL_PYTHON_RUNTIME_H

#include <nanobind/nanobind.h>

namespace pipefill::py {

/// Adds the runtime half to `m` and registers its exception translator.
void registerRuntime(nanobind::module_ &m);

} // namespace pipefill::py

#endif // PIPEFILL_PYTHON_RUNTIME_H
