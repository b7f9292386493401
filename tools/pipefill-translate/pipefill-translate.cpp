//===- pipefill-translate.cpp - import and export -------------------------===//
#include "codegen/Translate.h"
#include "tools/pipefill-translate/TranslateMain.h"

#include "tools/DiagnosticDefaults.h"
#include "tools/HideLLVMOptions.h"

#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace {

/// An option that is never registered: it only owns the TranslationParser
/// that lists the registered translations. (With an argument string of its
/// own, the parser's literal values are not added to the command line.)
class TranslationNames final : public llvm::cl::Option {
public:
  TranslationNames() : Option(llvm::cl::ZeroOrMore, llvm::cl::ReallyHidden) {
    setArgStr("pipefill-translation-names");
  }
  bool handleOccurrence(unsigned, llvm::StringRef, llvm::StringRef) override { return true; }
  size_t getOptionWidth() const override { return 0; }
  void printOptionInfo(size_t) const override {}
  void printOptionValue(size_t, bool) const override {}
  void setDefault() override {}
};

/// mlir-translate registers the translation list once per translation name,
/// so a command line without one gets "must be specified at least once!"
/// once per name (eleven lines). Returns true, after one line that lists
/// them, when no argument names a translation and none asks for help or
/// the version.
/// The name of a flag argument ("--to-report=x" -> "to-report"); empty for
/// anything else.
llvm::StringRef flagName(llvm::StringRef arg) {
  if (!arg.consume_front("-"))
    return {};
  arg.consume_front("-");
  return arg.split('=').first;
}

bool noTranslationChosen(int argc, char **argv) {
  TranslationNames owner;
  mlir::TranslationParser parser(owner);
  parser.initialize();
  for (int i = 1; i < argc; ++i) {
    if (llvm::StringRef(argv[i]) == "--")
      break;
    llvm::StringRef arg = flagName(argv[i]);
    if (arg.empty())
      continue;
    if (arg.starts_with("help") || arg.starts_with("version") || arg.starts_with("print-"))
      return false;
    for (unsigned n = 0, e = parser.getNumOptions(); n < e; ++n)
      if (arg == parser.getOption(n))
        return false;
  }
  std::vector<std::string> sorted;
  for (unsigned n = 0, e = parser.getNumOptions(); n < e; ++n)
    sorted.push_back("--" + parser.getOption(n).str());
  llvm::sort(sorted);
  std::string names = llvm::join(sorted, ", ");
  llvm::errs() << (argc > 0 ? argv[0] : "pipefill-translate")
               << ": no translation chosen; pass one of " << names << " (see --help)\n";
  // A misspelled translation (--to-sumary) is the likely cause: name the closest.
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = flagName(argv[i]);
    for (const std::string &name : sorted)
      if (arg.size() > 2 && llvm::StringRef(name).drop_front(2).edit_distance(arg) <= 2) {
        llvm::errs() << "  " << argv[i] << ": did you mean " << name << "?\n";
        break;
      }
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  pipefill::hideLLVMBackendOptions();
  pipefill::registerTranslations();
  if (noTranslationChosen(argc, argv))
    return 1;
  // An imported job keeps the JobSpec's file:line:col locations in its IR, so
  // later diagnostics (pipefill-opt's warnings and errors) point at the
  // JobSpec rather than at the intermediate IR.
  std::vector<char *> args = pipefill::withDiagnosticDefaults(argc, argv);
  bool importing = false, debugInfoChosen = false;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    importing |= arg == "--import-job" || arg == "-import-job" ||
                 arg == "--import-torch-schedule" || arg == "-import-torch-schedule";
    debugInfoChosen |= arg.contains("mlir-print-debuginfo");
  }
  static char debugInfo[] = "--mlir-print-debuginfo";
  if (importing && !debugInfoChosen)
    args.push_back(debugInfo);
  return mlir::failed(pipefill::translateMain(
      static_cast<int>(args.size()), args.data(),
      "pipefill import (JobSpec) and export (report, summary, trace, SVG, "
      "stream programs, C++)\n"));
}
