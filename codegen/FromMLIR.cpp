//===- FromMLIR.cpp - the MLIR input path of the exports ------------------===//
//
// mlir-translate's TranslateFromMLIRRegistration hands the parsed top-level
// op to the export as it is. The exports register through this instead,
// which requires a builtin.module, the op every export reads
// (--no-implicit-module used to hand them any op).
//
//===----------------------------------------------------------------------===//
#include "codegen/Translate.h"
#include "dialect/PipefillDialect.h"
#include "dialect/stream/PfstreamOps.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/ParseUtilities.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;

namespace pipefill {
namespace {

/// mlir-translate's --no-implicit-module, which Translation.cpp registers but
/// keeps to itself.
bool implicitModule() {
  llvm::StringMap<llvm::cl::Option *> &options = llvm::cl::getRegisteredOptions();
  auto it = options.find("no-implicit-module");
  return it == options.end() || !static_cast<llvm::cl::opt<bool> *>(it->second)->getValue();
}

} // namespace

void registerFromMLIR(llvm::StringRef name, llvm::StringRef description,
                      ExportFunction function) {
  TranslateRegistration(
      name, description,
      [function](const std::shared_ptr<llvm::SourceMgr> &sourceMgr, llvm::raw_ostream &os,
                 MLIRContext *context) -> LogicalResult {
        DialectRegistry registry;
        registry.insert<PipefillDialect, pfstream::PfstreamDialect>();
        context->appendDialectRegistry(registry);
        // The parser verifies what it parsed.
        OwningOpRef<Operation *> op =
            parseSourceFileForTool(sourceMgr, ParserConfig(context), implicitModule());
        if (!op)
          return failure();
        auto module = dyn_cast<ModuleOp>(op.get());
        if (!module)
          return op->emitError("expected a 'builtin.module' op, got '")
                 << op->getName() << "'";
        return function(module, os);
      });
}

} // namespace pipefill
