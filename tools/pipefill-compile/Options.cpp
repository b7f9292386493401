//===- Options.cpp - pipefill-compile's command line ---------------------===//
//
// The options (llvm::cl) and the rules between them that cl::opt cannot
// express, checked before anything is read or written.
//
//===----------------------------------------------------------------------===//
#include "tools/pipefill-compile/Options.h"

#include "tools/pipefill-compile/OutputFiles.h"
#include "support/Limits.h"

#include "llvm/Support/raw_ostream.h"

namespace pipefill::compile::opt {

namespace cl = llvm::cl;

cl::OptionCategory category("pipefill-compile options");
cl::opt<std::string> input(cl::Positional, cl::desc("<job.pbtxt>"), cl::Required,
                           cl::cat(category));
cl::opt<std::string> reportFile("report", cl::desc("Write the report JSON"),
                                cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> summaryFile("summary", cl::desc("Write the summary table ('-': stdout)"),
                                 cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> traceFile("trace", cl::desc("Write a Chrome trace"),
                               cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> svgFile("svg", cl::desc("Write an SVG picture"), cl::value_desc("file"),
                             cl::cat(category));
cl::opt<std::string> programFile("stream-program",
                                 cl::desc("Write the binary StreamProgram (lowers the IR)"),
                                 cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> programTextFile(
    "stream-program-text", cl::desc("Write the StreamProgram in text format (lowers the IR)"),
    cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> irFile("emit-ir",
                            cl::desc("Write the compiled pipefill IR as MLIR bytecode"),
                            cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> profileFile(
    "profile", cl::desc("Measured profile whose instruction times replace the planned ones"),
    cl::value_desc("file"), cl::cat(category));
cl::opt<int64_t> iterations("iterations",
                            cl::desc("Loop count written into the stream program"),
                            cl::init(1), cl::cat(category));
#ifdef NDEBUG
constexpr bool kVerifyIRByDefault = false;
#else
constexpr bool kVerifyIRByDefault = true;
#endif
cl::opt<bool> verifyIR(
    "verify-ir",
    cl::desc("Run MLIR's verifier once on the compiled IR, beside the exports, and load "
             "the StreamProgram through the runtime's checks (default: in builds with "
             "assertions only, as clang verifies LLVM IR; the lit tests always pass it; the "
             "plan check runs either way)"),
    cl::init(kVerifyIRByDefault), cl::cat(category));
cl::opt<bool> verifyEach("verify-each",
                         cl::desc("Verify the IR after every pass, the lowering included "
                                  "(default: once, after compiling)"),
                         cl::init(false), cl::cat(category));
cl::opt<bool> progress("progress",
                       cl::desc("Print progress lines on stderr while the fill planner runs "
                                "(default: on a terminal, once it has taken a second; "
                                "--progress=false turns it off)"),
                       cl::init(false), cl::cat(category));
cl::opt<std::string> timingFile(
    "timing", cl::desc("Write the measured wall time, CPU time and peak RSS of every phase "
                       "as JSON ('-': a table on stderr)"),
    cl::value_desc("file"), cl::cat(category));

/// Every output file (option, path), --timing last.
std::vector<std::pair<const char *, std::string>> outputs() {
  return {{"report", reportFile},   {"summary", summaryFile},
          {"trace", traceFile},     {"svg", svgFile},
          {"stream-program", programFile}, {"stream-program-text", programTextFile},
          {"emit-ir", irFile},      {"timing", timingFile}};
}

/// The rules of the options that cl::opt cannot express; false with the
/// error printed.
bool checkOptions() {
  // The runtime's range; the StreamProgram's field is 32 bits, so a larger
  // count used to wrap (2^32 + 5 became 5, -1 became 2^32 - 1).
  if (iterations < 1 || iterations > pipefill::kMaxIterations) {
    llvm::errs() << "pipefill-compile: --iterations must be between 1 and "
                 << pipefill::kMaxIterations << " (got " << iterations.getValue() << ")\n";
    return false;
  }
  if (iterations.getNumOccurrences() && programFile.empty() && programTextFile.empty()) {
    llvm::errs() << "pipefill-compile: --iterations is the stream program's loop count: it "
                    "needs --stream-program or --stream-program-text\n";
    return false;
  }
  return checkOutputPaths(outputs(), {{"the input", input.getValue()},
                                      {"the --profile file", profileFile.getValue()}});
}

} // namespace pipefill::compile::opt
