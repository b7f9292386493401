// libFuzzer target: MLIR text with both pipefill dialects registered (pipefill, pfstream) is
// parsed and verified (the ops' verifiers and the dialects' constraints); an accepted module is
// printed, and the printed text must parse and verify again (a printer/parser mismatch aborts).
#include "QuietContext.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
mlir::OwningOpRef<mlir::ModuleOp> parse(mlir::MLIRContext &ctx, llvm::StringRef text) {
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  if (module && mlir::failed(mlir::verify(*module)))
    return nullptr;
  return module;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pipefill::fuzz::QuietContext quiet;
  mlir::MLIRContext &ctx = *quiet.get();
  // MLIR's lexer reads the byte after the buffer (files and std::strings end in NUL; libFuzzer's
  // buffers do not), so the input is copied into a std::string as every real caller's is.
  std::string text(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(ctx, text);
  if (!module)
    return 0;
  std::string printed;
  llvm::raw_string_ostream os(printed);
  module->print(os);
  os.flush();
  if (!parse(ctx, printed)) {
    std::fprintf(stderr, "accepted module does not round-trip:\n%s\n", printed.c_str());
    std::abort();
  }
  return 0;
}
