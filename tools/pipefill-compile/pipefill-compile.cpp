//===- pipefill-compile.cpp - JobSpec to plan in one process -------------===//
//
// The common path in one process: import a JobSpec, run --pipefill-compile,
// write the report / summary / trace / SVG of the compiled IR, lower it to
// stream programs and write the StreamProgram, without printing and
// reparsing IR between tools. pipefill-translate and pipefill-opt stay the
// tools for inspecting IR and for the lit tests of single steps; this driver
// produces the same files (test/compile/).
//
//===----------------------------------------------------------------------===//
#include "codegen/Translate.h"
#include "dialect/PipefillDialect.h"
#include "dialect/stream/PfstreamOps.h"
#include "passes/Passes.h"
#include "support/Files.h"
#include "support/ProtoText.h"

#include "tools/HideLLVMOptions.h"
#include "tools/pipefill-compile/Options.h"
#include "tools/pipefill-compile/PhaseTimer.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace mlir;
namespace cl = llvm::cl;

using namespace pipefill::compile;
using namespace pipefill::compile::opt;

namespace {

/// `takeTiming` takes the --timing file (written at the very end) before
/// any output is kept, so a run that cannot write it keeps nothing.
LogicalResult compile(MLIRContext &ctx, llvm::SourceMgr &sourceMgr, PhaseTimer &timer,
                      OutputFiles &files, OwningOpRef<ModuleOp> &module,
                      llvm::function_ref<bool()> takeTiming) {
  if (failed(timer.phase("import", [&] {
        module = pipefill::importJobSpec(sourceMgr, &ctx);
        return success(static_cast<bool>(module));
      })))
    return failure();

  PassManager pm(&ctx);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  pm.enableVerifier(verifyEach);
  pm.addInstrumentation(std::make_unique<PassTimer>(timer));
  pipefill::CompileOptions options;
  options.profile = profileFile.getValue();
  // The plan check only reads the IR: it runs below, beside the exports.
  options.verifyPlan = false;
  pipefill::buildCompilePipeline(pm, options);
  if (failed(pm.run(*module)))
    return failure();

  // The checks of the compiled IR (the plan check of pipefill-verify-plan
  // and, with --verify-ir unless --verify-each ran it after every pass,
  // MLIR's verifier) and the exports only read the IR, so they run at the
  // same time: the checks and the stream program on their own threads, the
  // other exports on this one. An output is kept only if every check and
  // export succeeds; otherwise it is deleted and the run fails.
  std::vector<std::unique_ptr<llvm::ToolOutputFile>> outputs;
  timer.start();
  // Neither the plan check nor the lowering checks the instruction order
  // for deadlocks again: pipefill-simulate has just run this very order and
  // fails on every order that check rejects (the shared rule,
  // algo/schedule/tests/ErrorTest.cpp), and the passes after it only add
  // bubbles and fill work. The check would hold the whole pipeline's
  // instruction lists (1F1B 128 x 4096: ~300 MB) beside the exports. The
  // separate tools still check.
  const bool lowers = !programFile.empty() || !programTextFile.empty();
  Concurrent planCheck("pipefill-verify-plan", [&] {
    return pipefill::verifyFillPlan(*module, /*checkOrder=*/false);
  });
  std::optional<Concurrent> irCheck;
  if (verifyIR && !verifyEach)
    irCheck.emplace("verify", [&] { return verify(*module); });
  // The stream program: the compiled IR lowered as pipefill-lower-to-stream
  // lowers it, straight into the program's messages without building the
  // pfstream IR. That only reads the IR too, so it runs beside the checks
  // and the other exports. (Under --verify-each the pass runs instead, after
  // them; test/compile/driver.test checks that both ways give the same
  // bytes, and the multi-tool path's.)
  std::unique_ptr<llvm::ToolOutputFile> programOut, programTextOut;
  std::optional<Concurrent> programExport;
  if (lowers && !verifyEach)
    programExport.emplace("lower + to-stream-program", [&] {
      auto write = [&](llvm::StringRef path, bool text,
                       std::unique_ptr<llvm::ToolOutputFile> &out) {
        if (path.empty())
          return true;
        out = writeFile(files, path, [&](llvm::raw_ostream &os) {
          return pipefill::lowerAndExportStreamProgram(*module, iterations.getValue(), os, text,
                                                       /*checkOrder=*/false,
                                                       /*checkWithRuntime=*/verifyIR);
        });
        return out != nullptr;
      };
      return success(write(programFile, /*text=*/false, programOut) &&
                     write(programTextFile, /*text=*/true, programTextOut));
    });
  auto exportTo = [&](llvm::StringRef what, llvm::StringRef path,
                      LogicalResult (*fn)(ModuleOp, llvm::raw_ostream &)) {
    if (path.empty())
      return true;
    outputs.push_back(timer.concurrentPhase(what, [&] {
      return writeFile(files, path, [&](llvm::raw_ostream &os) { return fn(*module, os); });
    }));
    return outputs.back() != nullptr;
  };
  bool exported =
      exportTo("emit-ir", irFile,
               [](ModuleOp m, llvm::raw_ostream &os) { return writeBytecodeToFile(m, os); }) &&
      exportTo("to-report", reportFile, pipefill::exportReport) &&
      exportTo("to-summary", summaryFile, pipefill::exportSummary) &&
      exportTo("to-trace", traceFile, pipefill::exportTrace) &&
      exportTo("to-svg", svgFile, pipefill::exportSvg);
  bool planOk = planCheck.join(timer);
  bool irOk = !irCheck || irCheck->join(timer);
  bool programOk = !programExport || programExport->join(timer);
  timer.stop("checks + exports");
  if (!exported || !planOk || !irOk || !programOk || !takeTiming())
    return failure();
  for (auto &out : outputs)
    out->keep();
  for (auto *out : {&programOut, &programTextOut})
    if (*out)
      (*out)->keep();
  if (!lowers || !verifyEach)
    return success();

  // --verify-each: the lowering pass, its output verified, then exported.
  PassManager lower(&ctx);
  lower.enableVerifier(true);
  lower.addInstrumentation(std::make_unique<PassTimer>(timer));
  lower.addPass(
      pipefill::createLowerToStream(pipefill::LowerToStreamOptions{iterations.getValue()}));
  if (failed(lower.run(*module)))
    return failure();
  auto writeProgram = [&](llvm::StringRef what, llvm::StringRef path, bool text) {
    if (path.empty())
      return success();
    return timer.phase(what, [&] {
      std::unique_ptr<llvm::ToolOutputFile> out = writeFile(
          files, path, [&](llvm::raw_ostream &os) { return pipefill::exportStreamProgram(*module, os, text); });
      if (!out)
        return failure();
      out->keep();
      return success();
    });
  };
  return failure(failed(writeProgram("to-stream-program", programFile, /*text=*/false)) ||
                 failed(writeProgram("to-stream-program-text", programTextFile, /*text=*/true)));
}
} // namespace

/// The fill planner's progress (setProgressHook) on stderr: with --progress at most a line a
/// second and the last one; on a terminal without the option the same once a second has passed
/// (nothing for a quick compile).
void showProgress(std::chrono::steady_clock::time_point start) {
  const bool tty = ::isatty(2) != 0;
  if (!progress && (!tty || progress.getNumOccurrences() > 0))
    return;
  const double quiet = progress ? 0 : 1; // seconds before the first line
  auto lastPrint = std::make_shared<double>(-1);
  pipefill::setProgressHook([=](const char *phase, size_t done, size_t total) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool last = done == total;
    if (s < quiet || (!last && *lastPrint >= 0 && s - *lastPrint < 1))
      return;
    *lastPrint = s;
    llvm::errs() << (tty ? "\r" : "") << "pipefill-compile: " << phase << ": stage " << done << "/"
                 << total << ", " << llvm::format("%.1f", s) << " s" << (tty && !last ? "" : "\n");
    llvm::errs().flush();
  });
}

int main(int argc, char **argv) {
#ifdef __GLIBC__
  // The per-stage passes build 10^5-10^6 ops on MLIR's worker threads. glibc
  // gives each thread its own arena (8 per core), which grows one mprotect
  // call per page; one shared arena kept RSS 10% lower but the workers then
  // queued on its lock (futex waits were 12% of samples; 1F1B 64x512x100
  // 1.43 s -> 1.15 s wall with one arena per core, docs/compiler.md).
  mallopt(M_ARENA_MAX, static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
#endif
  llvm::InitLLVM init(argc, argv);
  pipefill::hideLLVMBackendOptions({&category});
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  cl::HideUnrelatedOptions({&category, &cl::getGeneralCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "pipefill-compile: JobSpec -> report, trace and stream program in one process\n");
  if (!checkOptions())
    return 1;
  auto start = std::chrono::steady_clock::now();
  showProgress(start);

  DialectRegistry registry;
  registry.insert<pipefill::PipefillDialect, pipefill::pfstream::PfstreamDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // Diagnostics point at the JobSpec; dumping a 10^5-op stage would bury them.
  ctx.printOpOnDiagnostic(false);

  std::string text; // read with a bound (support/Files.h): /dev/zero is an error, not OOM
  const pipefill::ReadStatus read =
      pipefill::readBoundedFile(input, pipefill::kMaxInputBytes, text);
  if (!read) {
    llvm::errs() << "pipefill-compile: cannot read '" << input << "': " << read.message << "\n";
    return 1;
  }
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      llvm::MemoryBuffer::getMemBufferCopy(text, input == "-" ? std::string("<stdin>") : input);
  std::string().swap(text);
  // The outputs are created now, beside the import (OutputFiles.h).
  std::vector<std::string> paths;
  for (const auto &[option, path] : outputs())
    paths.push_back(path);
  std::optional<OutputFiles> files(std::in_place, paths);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &ctx);

  PhaseTimer timer;
  OwningOpRef<ModuleOp> module;
  TimingOutput timing(timingFile, *files);
  LogicalResult result =
      compile(ctx, sourceMgr, timer, *files, module, [&] { return timing.take(); });
  std::chrono::duration<double> total = std::chrono::steady_clock::now() - start;
  if (!timing.write(timer.phases, total.count()))
    result = failure();
  // Files a failed run never wrote are removed (not kept) here.
  files.reset();
  if (succeeded(result) && std::all_of(paths.begin(), paths.end() - 1, // --timing is not one
                                       [](const std::string &p) { return p.empty(); }))
    llvm::errs() << "pipefill-compile: " << input << " compiles; no output was asked for "
                 << "(--report, --summary, --trace, --svg, --stream-program, "
                    "--stream-program-text, --emit-ir)\n";
  // Every output file is closed. As compilers do (clang's -disable-free),
  // skip freeing 10^5-10^6 ops and the context one by one: the process exits.
  llvm::outs().flush();
  llvm::errs().flush();
  (void)module.release();
  std::_Exit(failed(result) ? 1 : 0);
}
