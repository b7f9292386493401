//===- Registration.cpp - pipefill-translate registrations ----------------===//
#include "codegen/Translate.h"
#include "dialect/PipefillOps.h"
#include "dialect/stream/PfstreamOps.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

namespace pipefill {

void registerTranslations() {
  static TranslateToMLIRRegistration importJob(
      "import-job", "import a JobSpec (protobuf text format) into the pipefill dialect",
      [](llvm::SourceMgr &sourceMgr, MLIRContext *context) -> OwningOpRef<Operation *> {
        OwningOpRef<ModuleOp> module = importJobSpec(sourceMgr, context);
        if (!module)
          return nullptr;
        return OwningOpRef<Operation *>(module.release());
      });
  auto dialects = [](DialectRegistry &registry) {
    registry.insert<PipefillDialect, pfstream::PfstreamDialect>();
  };
  static TranslateFromMLIRRegistration toReport(
      "to-report", "write the report JSON of compiled pipefill IR",
      [](Operation *op, llvm::raw_ostream &os) {
        return exportReport(cast<ModuleOp>(op), os);
      },
      dialects);
  static TranslateFromMLIRRegistration toSummary(
      "to-summary", "print a summary table of compiled pipefill IR",
      [](Operation *op, llvm::raw_ostream &os) {
        return exportSummary(cast<ModuleOp>(op), os);
      },
      dialects);
  static TranslateFromMLIRRegistration toStreamProgram(
      "to-stream-program", "write the lowered module as a binary StreamProgram",
      [](Operation *op, llvm::raw_ostream &os) {
        return exportStreamProgram(cast<ModuleOp>(op), os, /*text=*/false);
      },
      dialects);
  static TranslateFromMLIRRegistration toStreamProgramText(
      "to-stream-program-text", "write the lowered module as a text StreamProgram",
      [](Operation *op, llvm::raw_ostream &os) {
        return exportStreamProgram(cast<ModuleOp>(op), os, /*text=*/true);
      },
      dialects);
  static TranslateFromMLIRRegistration toCpp(
      "to-cpp", "write C++ that builds and runs the lowered module with the runtime",
      [](Operation *op, llvm::raw_ostream &os) {
        return exportCpp(cast<ModuleOp>(op), os);
      },
      dialects);
  static TranslateFromMLIRRegistration toTrace(
      "to-trace", "write a Chrome trace (Perfetto JSON) of compiled pipefill IR",
      [](Operation *op, llvm::raw_ostream &os) {
        return exportTrace(cast<ModuleOp>(op), os);
      },
      dialects);
  static TranslateFromMLIRRegistration toSvg(
      "to-svg", "draw the compiled schedule, bubbles and fill as an SVG",
      [](Operation *op, llvm::raw_ostream &os) {
        return exportSvg(cast<ModuleOp>(op), os);
      },
      dialects);
  registerTorchScheduleImport();
  registerTorchScheduleExport();
  registerTorchTraceImport();
}

} // namespace pipefill
