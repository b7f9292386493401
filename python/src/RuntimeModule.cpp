//===- RuntimeModule.cpp - pipefill._rt: the runtime-only module ----------===//
//
// The runtime half of the binding (Runtime.cpp) without the compiler: links
// pfrt and its own dependencies only (protobuf, OpenBLAS, CUDA where built),
// no LLVM, MLIR or z3. For machines that run compiled plans but cannot carry
// or load the compiler (the GPU machines, scripts/gpu-bundle.sh); the package
// imports it when pipefill._core is not installed (python/pipefill/_native.py).
//
//===----------------------------------------------------------------------===//
#include "python/src/Runtime.h"

#include <nanobind/nanobind.h>

NB_MODULE(_rt, m) {
  m.doc() = "pipefill's runtime (the pfrt C API) without the compiler: sessions, fill tasks "
            "and pfrt_run on compiled stream programs. Use the functions of the `pipefill` "
            "package; this module holds the bound classes.";
  pipefill::py::registerRuntime(m);
}
