//===- FromMLIR.cpp - the MLIR input path of the exports ------------------===//
//
// mlir-translate's TranslateFromMLIRRegistration parses the input straight
// away. The exports register through this instead, which first refuses text
// nested deeper than the parser's stack allows (support/MlirNesting.h) and
// then requires the parsed top-level op to be a builtin.module, which every
// export reads (--no-implicit-module used to hand them any op).
//
//===----------------------------------------------------------------------===//
#include "codegen/Translate.h"
#include "dialect/PipefillDialect.h"
#include "dialect/stream/PfstreamOps.h"
#include "support/MlirNesting.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/ParseUtilities.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"

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

/// --mlir-print-op-on-diagnostic as given (pipefill-translate turns it off
/// unless asked, tools/DiagnosticDefaults.h). Its driver, like
/// mlirTranslateMain, sets the context's flag itself (to !verify-diagnostics),
/// so the exports apply the option again on the context they are handed.
bool printOpOnDiagnostic() {
  llvm::StringMap<llvm::cl::Option *> &options = llvm::cl::getRegisteredOptions();
  auto it = options.find("mlir-print-op-on-diagnostic");
  return it != options.end() && static_cast<llvm::cl::opt<bool> *>(it->second)->getValue();
}

/// Reports the input's first bracket nested too deep, without echoing its
/// line (support/MlirNesting.h). Bytecode is not text and is not scanned.
bool nestedTooDeep(const llvm::SourceMgr &sourceMgr) {
  const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  if (isBytecode(buffer->getMemBufferRef()))
    return false;
  std::optional<TooDeepNesting> tooDeep = findTooDeepNesting(buffer->getBuffer());
  if (!tooDeep)
    return false;
  llvm::errs() << tooDeep->diagnostic(buffer->getBufferIdentifier()) << "\n";
  return true;
}

} // namespace

bool checkTranslationOptions(llvm::StringRef translation) {
  static const std::pair<const char *, const char *> kOwned[] = {
      {"job", "import-torch-schedule"}, {"torch-trace", "torch-trace-to-profile"}};
  llvm::StringMap<llvm::cl::Option *> &options = llvm::cl::getRegisteredOptions();
  for (const auto &[option, owner] : kOwned) {
    auto it = options.find(option);
    if (it != options.end() && it->second->getNumOccurrences() && translation != owner) {
      llvm::errs() << "pipefill-translate: --" << option << " is for --" << owner << "; --"
                   << translation << " does not read it\n";
      return false;
    }
  }
  return true;
}

void registerFromMLIR(llvm::StringRef name, llvm::StringRef description,
                      ExportFunction function) {
  TranslateRegistration(
      name, description,
      [function, name = name.str()](const std::shared_ptr<llvm::SourceMgr> &sourceMgr,
                                     llvm::raw_ostream &os,
                 MLIRContext *context) -> LogicalResult {
        if (!checkTranslationOptions(name))
          return failure();
        DialectRegistry registry;
        registry.insert<PipefillDialect, pfstream::PfstreamDialect>();
        context->appendDialectRegistry(registry);
        if (!printOpOnDiagnostic())
          context->printOpOnDiagnostic(false);
        if (nestedTooDeep(*sourceMgr))
          return failure();
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
