//===- Options.h - pipefill-compile's command line ---------------*- C++ -*-===//
//
// The options of pipefill-compile (defined in Options.cpp) and the check of
// the rules between them.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_TOOLS_PIPEFILL_COMPILE_OPTIONS_H
#define PIPEFILL_TOOLS_PIPEFILL_COMPILE_OPTIONS_H

#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pipefill::compile::opt {

extern llvm::cl::OptionCategory category;
extern llvm::cl::opt<std::string> input, reportFile, summaryFile, traceFile, svgFile,
    programFile, programTextFile, irFile, profileFile, timingFile;
extern llvm::cl::opt<int64_t> iterations;
extern llvm::cl::opt<bool> verifyIR, verifyEach, progress;

/// Every output file (option, path), --timing last.
std::vector<std::pair<const char *, std::string>> outputs();

/// The rules of the options that cl::opt cannot express; false with the
/// error printed.
bool checkOptions();

} // namespace pipefill::compile::opt

#endif // PIPEFILL_TOOLS_PIPEFILL_COMPILE_OPTIONS_H
