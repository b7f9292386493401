//===- HideLLVMOptions.h - keep --help about pipefill -----------*- C++ -*-===//
//
// Debian links the tools against libLLVM.so, whose static initializers
// register several hundred code-generation options. They still work but are
// hidden from --help, so the help text lists what pipefill and MLIR offer.
// Call before the MLIR main function registers its own options.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_TOOLS_HIDELLVMOPTIONS_H
#define PIPEFILL_TOOLS_HIDELLVMOPTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

namespace pipefill {

inline void hideLLVMBackendOptions() {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::StringRef name = entry.getKey();
    if (name.starts_with("mlir-") || name == "help" || name == "help-hidden" ||
        name == "version" || name == "debug" || name == "debug-only")
      continue;
    entry.getValue()->setHiddenFlag(llvm::cl::Hidden);
  }
}

} // namespace pipefill

#endif // PIPEFILL_TOOLS_HIDELLVMOPTIONS_H
