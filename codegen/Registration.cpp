//===- Registration.cpp - pipefill-translate registrations ----------------===//
#include "codegen/Translate.h"
#include "dialect/PipefillOps.h"
#include "dialect/stream/PfstreamOps.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

namespace pipefill {

void registerTranslations() {
  static bool registered = false; // the registry refuses a name twice
  if (registered)
    return;
  registered = true;
  static TranslateToMLIRRegistration importJob(
      "import-job", "import a JobSpec (protobuf text format) into the pipefill dialect",
      [](llvm::SourceMgr &sourceMgr, MLIRContext *context) -> OwningOpRef<Operation *> {
        if (!checkTranslationOptions("import-job"))
          return nullptr;
        OwningOpRef<ModuleOp> module = importJobSpec(sourceMgr, context);
        if (!module)
          return nullptr;
        return OwningOpRef<Operation *>(module.release());
      });
  registerFromMLIR("to-report", "write the report JSON of compiled pipefill IR", exportReport);
  registerFromMLIR("to-summary", "print a summary table of compiled pipefill IR", exportSummary);
  registerFromMLIR(
      "to-stream-program", "write the lowered module as a binary StreamProgram",
      [](ModuleOp module, llvm::raw_ostream &os) {
        return exportStreamProgram(module, os, /*text=*/false);
      });
  registerFromMLIR(
      "to-stream-program-text", "write the lowered module as a text StreamProgram",
      [](ModuleOp module, llvm::raw_ostream &os) {
        return exportStreamProgram(module, os, /*text=*/true);
      });
  registerFromMLIR("to-cpp",
                   "write C++ that builds and runs the lowered module with the runtime",
                   exportCpp);
  registerFromMLIR("to-trace", "write a Chrome trace (Perfetto JSON) of compiled pipefill IR",
                   exportTrace);
  registerFromMLIR("to-svg", "draw the compiled schedule, bubbles and fill as an SVG", exportSvg);
  registerTorchScheduleImport();
  registerTorchScheduleExport();
  registerTorchTraceImport();
}

} // namespace pipefill
