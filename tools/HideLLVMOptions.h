//===- HideLLVMOptions.h - keep --help about pipefill -----------*- C++ -*-===//
//
// Debian links the tools against libLLVM.so, whose static initializers
// register several hundred code-generation options. They still work but are
// hidden from --help, so the help text lists what pipefill and MLIR offer.
// Call before the MLIR main function registers its own options. A tool's own
// options are registered by the same static initializers: pass their
// categories in `keep`.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_TOOLS_HIDELLVMOPTIONS_H
#define PIPEFILL_TOOLS_HIDELLVMOPTIONS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

namespace pipefill {

inline void
hideLLVMBackendOptions(llvm::ArrayRef<const llvm::cl::OptionCategory *> keep = {}) {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::StringRef name = entry.getKey();
    if (name.starts_with("mlir-") || name == "help" || name == "help-hidden" ||
        name == "version" || name == "debug" || name == "debug-only")
      continue;
    if (llvm::any_of(entry.getValue()->Categories,
                     [&](llvm::cl::OptionCategory *c) { return llvm::is_contained(keep, c); }))
      continue;
    entry.getValue()->setHiddenFlag(llvm::cl::Hidden);
  }
}

} // namespace pipefill

#endif // PIPEFILL_TOOLS_HIDELLVMOPTIONS_H
