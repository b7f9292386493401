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

#include "tools/HideLLVMOptions.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <sys/resource.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace mlir;
namespace cl = llvm::cl;

namespace {
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
cl::opt<bool> verifyEach("verify-each",
                         cl::desc("Verify the IR after every pass, the lowering included "
                                  "(default: once, after compiling)"),
                         cl::init(false), cl::cat(category));
cl::opt<std::string> timingFile(
    "timing", cl::desc("Write the measured wall time, CPU time and peak RSS of every phase "
                       "as JSON ('-': a table on stderr)"),
    cl::value_desc("file"), cl::cat(category));

/// Measured cost of one phase. peakRssMiB is the process's peak so far.
struct Phase {
  std::string name;
  double wallS, cpuS, peakRssMiB;
};

double cpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}
double peakRssMiB() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

class PhaseTimer {
public:
  void start() {
    wall = std::chrono::steady_clock::now();
    cpu = cpuSeconds();
  }
  void stop(llvm::StringRef name) {
    std::chrono::duration<double> d = std::chrono::steady_clock::now() - wall;
    phases.push_back({name.str(), d.count(), cpuSeconds() - cpu, peakRssMiB()});
  }
  /// Runs `fn` as one phase.
  LogicalResult phase(llvm::StringRef name, llvm::function_ref<LogicalResult()> fn) {
    start();
    LogicalResult result = fn();
    stop(name);
    return result;
  }
  std::vector<Phase> phases;

private:
  std::chrono::steady_clock::time_point wall;
  double cpu = 0;
};

/// Times every top-level pass as its own phase.
class PassTimer : public PassInstrumentation {
public:
  explicit PassTimer(PhaseTimer &timer) : timer(timer) {}
  void runBeforePass(Pass *, Operation *op) override {
    if (!op->getParentOp())
      timer.start();
  }
  void runAfterPass(Pass *pass, Operation *op) override {
    if (!op->getParentOp())
      timer.stop(pass->getArgument().empty() ? pass->getName() : pass->getArgument());
  }
  void runAfterPassFailed(Pass *pass, Operation *op) override { runAfterPass(pass, op); }

private:
  PhaseTimer &timer;
};

/// Opens `path` and runs `write` into it; keeps the file only on success.
LogicalResult writeFile(llvm::StringRef path, MLIRContext &ctx,
                        llvm::function_ref<LogicalResult(llvm::raw_ostream &)> write) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> out = openOutputFile(path, &error);
  if (!out) {
    llvm::errs() << "pipefill-compile: cannot write '" << path << "': " << error << "\n";
    return failure();
  }
  if (failed(write(out->os())))
    return failure();
  out->keep();
  return success();
}

void writeTiming(const std::vector<Phase> &phases, double totalWall, MLIRContext &ctx) {
  if (timingFile == "-") {
    llvm::errs() << llvm::format("%-26s %9s %9s %10s\n", (const char *)"phase (measured)",
                                 (const char *)"wall s", (const char *)"cpu s",
                                 (const char *)"peak MiB");
    for (const Phase &p : phases)
      llvm::errs() << llvm::format("%-26s %9.4f %9.4f %10.1f\n", p.name.c_str(), p.wallS,
                                   p.cpuS, p.peakRssMiB);
    llvm::errs() << llvm::format("%-26s %9.4f\n", (const char *)"total", totalWall);
    return;
  }
  (void)writeFile(timingFile, ctx, [&](llvm::raw_ostream &os) {
    llvm::json::OStream j(os, 2);
    j.object([&] {
      j.attribute("measured", true);
      j.attribute("total_wall_s", totalWall);
      j.attributeArray("phases", [&] {
        for (const Phase &p : phases)
          j.object([&] {
            j.attribute("name", p.name);
            j.attribute("wall_s", p.wallS);
            j.attribute("cpu_s", p.cpuS);
            j.attribute("peak_rss_mib", p.peakRssMiB);
          });
      });
    });
    os << "\n";
    return success();
  });
}

LogicalResult compile(MLIRContext &ctx, llvm::SourceMgr &sourceMgr, PhaseTimer &timer,
                      OwningOpRef<ModuleOp> &module) {
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
  pipefill::buildCompilePipeline(pm, options);
  if (failed(pm.run(*module)))
    return failure();
  if (!verifyEach && failed(timer.phase("verify", [&] { return verify(*module); })))
    return failure();

  auto exportTo = [&](llvm::StringRef what, llvm::StringRef path,
                      LogicalResult (*fn)(ModuleOp, llvm::raw_ostream &)) {
    if (path.empty())
      return success();
    return timer.phase(what, [&] {
      return writeFile(path, ctx, [&](llvm::raw_ostream &os) { return fn(*module, os); });
    });
  };
  if (failed(exportTo("emit-ir", irFile,
                      [](ModuleOp m, llvm::raw_ostream &os) {
                        return writeBytecodeToFile(m, os);
                      })) ||
      failed(exportTo("to-report", reportFile, pipefill::exportReport)) ||
      failed(exportTo("to-summary", summaryFile, pipefill::exportSummary)) ||
      failed(exportTo("to-trace", traceFile, pipefill::exportTrace)) ||
      failed(exportTo("to-svg", svgFile, pipefill::exportSvg)))
    return failure();
  if (programFile.empty() && programTextFile.empty())
    return success();

  PassManager lower(&ctx);
  lower.enableVerifier(verifyEach);
  lower.addInstrumentation(std::make_unique<PassTimer>(timer));
  lower.addPass(pipefill::createLowerToStream(
      pipefill::LowerToStreamOptions{iterations.getValue()}));
  if (failed(lower.run(*module)))
    return failure();
  // The lowered IR is the pass's own output from verified IR; its verifier
  // (and the runtime's program checks when the program is loaded) run in the
  // lit tests of the pass and under --verify-each.
  return failure(
      failed(exportTo("to-stream-program", programFile,
                      [](ModuleOp m, llvm::raw_ostream &os) {
                        return pipefill::exportStreamProgram(m, os, /*text=*/false);
                      })) ||
      failed(exportTo("to-stream-program-text", programTextFile,
                      [](ModuleOp m, llvm::raw_ostream &os) {
                        return pipefill::exportStreamProgram(m, os, /*text=*/true);
                      })));
}
} // namespace

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
  pipefill::hideLLVMBackendOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  cl::HideUnrelatedOptions({&category, &cl::getGeneralCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "pipefill-compile: JobSpec -> report, trace and stream program in one process\n");
  auto start = std::chrono::steady_clock::now();

  DialectRegistry registry;
  registry.insert<pipefill::PipefillDialect, pipefill::pfstream::PfstreamDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // Diagnostics point at the JobSpec; dumping a 10^5-op stage would bury them.
  ctx.printOpOnDiagnostic(false);

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer = openInputFile(input, &error);
  if (!buffer) {
    llvm::errs() << "pipefill-compile: cannot read '" << input << "': " << error << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &ctx);

  PhaseTimer timer;
  OwningOpRef<ModuleOp> module;
  LogicalResult result = compile(ctx, sourceMgr, timer, module);
  std::chrono::duration<double> total = std::chrono::steady_clock::now() - start;
  if (!timingFile.empty())
    writeTiming(timer.phases, total.count(), ctx);
  // Every output file is closed. As compilers do (clang's -disable-free),
  // skip freeing 10^5-10^6 ops and the context one by one: the process exits.
  llvm::outs().flush();
  llvm::errs().flush();
  (void)module.release();
  std::_Exit(failed(result) ? 1 : 0);
}
