//===- TranslateMain.cpp - pipefill-translate's driver --------------------===//
#include "tools/pipefill-translate/TranslateMain.h"

#include "support/Files.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/ToolUtilities.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>

namespace pipefill {
namespace {

using Translations = llvm::cl::list<const mlir::Translation *, bool, mlir::TranslationParser>;

/// The input as one buffer, read with the tool's bound: `path` ("-" is
/// standard input), aligned as the first translation asks. Null, after a
/// message, when it cannot be read or is too long.
std::unique_ptr<llvm::MemoryBuffer> readInput(llvm::StringRef tool, const std::string &path,
                                              std::optional<llvm::Align> alignment) {
  std::string text;
  const ReadStatus read = readBoundedFile(path, kMaxInputBytes, text);
  if (!read) {
    llvm::errs() << tool << ": cannot read '" << path << "': " << read.message << "\n";
    return nullptr;
  }
  const std::string name = path == "-" ? "<stdin>" : path;
  if (!alignment)
    return llvm::MemoryBuffer::getMemBufferCopy(text, name);
  std::unique_ptr<llvm::WritableMemoryBuffer> buffer =
      llvm::WritableMemoryBuffer::getNewUninitMemBuffer(text.size(), name, alignment);
  if (!buffer) {
    llvm::errs() << tool << ": cannot hold '" << path << "' in memory\n";
    return nullptr;
  }
  if (!text.empty())
    std::memcpy(buffer->getBufferStart(), text.data(), text.size());
  return buffer;
}

} // namespace

mlir::LogicalResult translateMain(int argc, char **argv, llvm::StringRef overview) {
  static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                              llvm::cl::desc("<input file>"), llvm::cl::init("-"));
  static llvm::cl::opt<std::string> outputFile("o", llvm::cl::desc("Output filename"),
                                               llvm::cl::value_desc("filename"),
                                               llvm::cl::init("-"));
  static llvm::cl::opt<bool> allowUnregistered(
      "allow-unregistered-dialect",
      llvm::cl::desc("Allow operations of dialects that are not registered (testing only)"),
      llvm::cl::init(false));
  static llvm::cl::opt<std::string> splitMarker(
      "split-input-file", llvm::cl::ValueOptional,
      llvm::cl::callback([](const std::string &marker) {
        if (marker.empty()) // the flag alone: the default marker
          splitMarker.setValue(mlir::kDefaultSplitMarker);
      }),
      llvm::cl::desc("Split the input at the given (or the default) marker and translate each "
                     "chunk on its own"),
      llvm::cl::init(""));
  static llvm::cl::opt<bool> verifyDiagnostics(
      "verify-diagnostics",
      llvm::cl::desc("Check that the diagnostics match the expected-* lines of the input"),
      llvm::cl::init(false));
  static llvm::cl::opt<bool> errorsOnly(
      "error-diagnostics-only",
      llvm::cl::desc("Print error diagnostics only, no warnings or remarks (testing only)"),
      llvm::cl::init(false));
  static llvm::cl::opt<std::string> outputSplitMarker(
      "output-split-marker", llvm::cl::desc("The marker written between the chunks' outputs"),
      llvm::cl::init(""));
  Translations requested("", llvm::cl::desc("Translations to perform"), llvm::cl::Required);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerTranslationCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  llvm::cl::ParseCommandLineOptions(argc, argv, overview);
  const llvm::StringRef tool = llvm::sys::path::filename(argc > 0 ? argv[0] : "pipefill-translate");

  mlir::DefaultTimingManager timingManager;
  mlir::applyDefaultTimingManagerCLOptions(timingManager);
  mlir::TimingScope timing = timingManager.getRootScope();

  std::unique_ptr<llvm::MemoryBuffer> input =
      readInput(tool, inputFile, requested[0]->getInputAlignment());
  if (!input)
    return mlir::failure();
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return mlir::failure();
  }

  // One chunk: each translation in a context of its own, on the previous one's output.
  auto translateChunk = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                            llvm::raw_ostream &os) -> mlir::LogicalResult {
    // A chunk of a split input does not end in a NUL, which the parsers expect.
    if (!chunk->getBuffer().ends_with('\0'))
      chunk = llvm::MemoryBuffer::getMemBufferCopy(chunk->getBuffer(),
                                                   chunk->getBufferIdentifier());
    std::string between;
    for (size_t i = 0, e = requested.size(); i < e; ++i) {
      std::string produced;
      llvm::raw_string_ostream toNext(produced);
      llvm::raw_ostream &out = i + 1 == e ? os : toNext;
      const mlir::Translation &translation = *requested[i];
      mlir::TimingScope scope = timing.nest(translation.getDescription());
      mlir::MLIRContext context;
      context.allowUnregisteredDialects(allowUnregistered);
      context.printOpOnDiagnostic(!verifyDiagnostics);
      auto sourceMgr = std::make_shared<llvm::SourceMgr>();
      sourceMgr->AddNewSourceBuffer(std::move(chunk), llvm::SMLoc());
      mlir::LogicalResult result = mlir::success();
      if (verifyDiagnostics) {
        // Whether the translation fails is for the expected-* lines to say.
        mlir::SourceMgrDiagnosticVerifierHandler handler(*sourceMgr, &context);
        (void)translation(sourceMgr, os, &context);
        result = handler.verify();
      } else {
        mlir::SourceMgrDiagnosticHandler handler(*sourceMgr, &context);
        std::optional<mlir::ScopedDiagnosticHandler> onlyErrors;
        if (errorsOnly)
          onlyErrors.emplace(&context, [](mlir::Diagnostic &d) {
            return mlir::success(d.getSeverity() != mlir::DiagnosticSeverity::Error);
          });
        result = translation(sourceMgr, out, &context);
      }
      if (mlir::failed(result))
        return result;
      if (i + 1 < e) {
        between = std::move(produced);
        chunk = llvm::MemoryBuffer::getMemBuffer(between, "<translated>");
      }
    }
    return mlir::success();
  };
  if (mlir::failed(mlir::splitAndProcessBuffer(std::move(input), translateChunk, output->os(),
                                               splitMarker, outputSplitMarker)))
    return mlir::failure();
  output->keep();
  return mlir::success();
}

} // namespace pipefill
