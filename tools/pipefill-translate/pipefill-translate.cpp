//===- pipefill-translate.cpp - import and export -------------------------===//
#include "codegen/Translate.h"

#include "tools/DiagnosticDefaults.h"
#include "tools/HideLLVMOptions.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "llvm/ADT/StringRef.h"

#include <vector>

int main(int argc, char **argv) {
  pipefill::hideLLVMBackendOptions();
  pipefill::registerTranslations();
  // An imported job keeps the JobSpec's file:line:col locations in its IR, so
  // later diagnostics (pipefill-opt's warnings and errors) point at the
  // JobSpec rather than at the intermediate IR.
  std::vector<char *> args = pipefill::withDiagnosticDefaults(argc, argv);
  bool importing = false, debugInfoChosen = false;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    importing |= arg == "--import-job" || arg == "-import-job" ||
                 arg == "--import-torch-schedule" || arg == "-import-torch-schedule";
    debugInfoChosen |= arg.contains("mlir-print-debuginfo");
  }
  static char debugInfo[] = "--mlir-print-debuginfo";
  if (importing && !debugInfoChosen)
    args.push_back(debugInfo);
  return mlir::failed(mlir::mlirTranslateMain(
      static_cast<int>(args.size()), args.data(),
      "pipefill import (JobSpec) and export (report, summary, trace, SVG, "
      "stream programs, C++)\n"));
}
