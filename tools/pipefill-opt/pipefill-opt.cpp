//===- pipefill-opt.cpp - the pipefill compiler driver --------------------===//
#include "dialect/PipefillDialect.h"
#include "dialect/stream/PfstreamOps.h"
#include "passes/Passes.h"
#include "support/Files.h"
#include "support/MlirNesting.h"
#include "support/ProtoText.h"

#include "tools/DiagnosticDefaults.h"
#include "tools/HideLLVMOptions.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

namespace {

/// Reports MLIR text nested deeper than the parser's stack allows
/// (support/MlirNesting.h) at its file:line:col, before MlirOptMain parses
/// it. Bytecode is not text and is not scanned.
bool nestedTooDeep(const llvm::MemoryBuffer &buffer) {
  if (mlir::isBytecode(buffer.getMemBufferRef()))
    return false;
  std::optional<pipefill::TooDeepNesting> tooDeep =
      pipefill::findTooDeepNesting(buffer.getBuffer());
  if (!tooDeep)
    return false;
  llvm::errs() << tooDeep->diagnostic(buffer.getBufferIdentifier()) << "\n";
  return true;
}

} // namespace

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<pipefill::PipefillDialect, pipefill::pfstream::PfstreamDialect>();
  pipefill::hideLLVMBackendOptions();
  pipefill::registerPasses();
  // Generic cleanups that are handy in pipelines.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  std::vector<char *> args = pipefill::withDiagnosticDefaults(argc, argv);
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      static_cast<int>(args.size()), args.data(),
      "pipefill compiler: schedules, bubbles and fill plans\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects())
    return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, inputFile, outputFile, registry));
  // What MlirOptMain(argc, argv, ...) does with the files, with the nesting
  // check between reading the input and parsing it.
  llvm::InitLLVM init(argc, argv);
  std::string error;
  // Read with a bound (support/Files.h): an input that never ends (/dev/zero, an endless pipe)
  // is an error, not an allocation that ends in LLVM's out-of-memory abort.
  std::string text;
  const pipefill::ReadStatus read =
      pipefill::readBoundedFile(inputFile, pipefill::kMaxInputBytes, text);
  if (!read) {
    llvm::errs() << "pipefill-opt: cannot read '" << inputFile << "': " << read.message << "\n";
    return 1;
  }
  std::unique_ptr<llvm::MemoryBuffer> input =
      llvm::MemoryBuffer::getMemBufferCopy(text, inputFile == "-" ? "<stdin>" : inputFile);
  std::string().swap(text);
  if (nestedTooDeep(*input))
    return 1;
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
