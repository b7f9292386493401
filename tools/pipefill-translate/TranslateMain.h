//===- TranslateMain.h - pipefill-translate's driver ------------*- C++ -*-===//
//
// What mlir::mlirTranslateMain does (the same options, chained translations,
// --split-input-file, --verify-diagnostics), except that the input is read
// with the bound every pipefill tool applies (support/Files.h): an input that
// never ends (/dev/zero, an endless pipe) is an error with the tool's name,
// not a read that ends in LLVM's out-of-memory abort.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_TOOLS_TRANSLATEMAIN_H
#define PIPEFILL_TOOLS_TRANSLATEMAIN_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

namespace pipefill {

/// Parses the command line (the registered translations are its flags),
/// reads the input at most kMaxInputBytes long, and runs the translations on
/// it in order, each on the output of the one before.
mlir::LogicalResult translateMain(int argc, char **argv, llvm::StringRef overview);

} // namespace pipefill

#endif // PIPEFILL_TOOLS_TRANSLATEMAIN_H
