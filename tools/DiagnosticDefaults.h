//===- DiagnosticDefaults.h - short errors by default ------------*- C++ -*-===//
//
// MLIR attaches the whole operation, printed in generic form, to every
// diagnostic emitted on an operation ("see current operation: ..."). For a
// pass that fails on the module (a profile that cannot be read, say) that is
// the whole IR: 56 MB of stderr for a 256 x 256 pipeline, around a one-line
// error. pipefill's tools turn it off unless the command line asks for it
// (--mlir-print-op-on-diagnostic); pipefill-compile and the Python module do
// the same on their own contexts.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_TOOLS_DIAGNOSTICDEFAULTS_H
#define PIPEFILL_TOOLS_DIAGNOSTICDEFAULTS_H

#include "llvm/ADT/StringRef.h"

#include <vector>

namespace pipefill {

/// argv with `--mlir-print-op-on-diagnostic=false` inserted after the program
/// name, unless an argument already sets that option. (After the name, not at
/// the end: behind a `--` it would be read as an input file.)
inline std::vector<char *> withDiagnosticDefaults(int argc, char **argv) {
  static char noOpOnDiagnostic[] = "--mlir-print-op-on-diagnostic=false";
  std::vector<char *> args(argv, argv + argc);
  for (int i = 1; i < argc; ++i)
    if (llvm::StringRef(argv[i]).contains("mlir-print-op-on-diagnostic"))
      return args;
  args.insert(args.begin() + (argc > 0 ? 1 : 0), noOpOnDiagnostic);
  return args;
}

} // namespace pipefill

#endif // PIPEFILL_TOOLS_DIAGNOSTICDEFAULTS_H
