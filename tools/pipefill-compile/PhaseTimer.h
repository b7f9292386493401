//===- PhaseTimer.h - measured phases of pipefill-compile -------*- C++ -*-===//
//
// Wall time, CPU time and peak RSS of each phase of the driver, phases run
// on their own threads, and the --timing output.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_TOOLS_PIPEFILL_COMPILE_PHASETIMER_H
#define PIPEFILL_TOOLS_PIPEFILL_COMPILE_PHASETIMER_H

#include "tools/pipefill-compile/OutputFiles.h"

#include "mlir/IR/Operation.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <sys/resource.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace pipefill::compile {
using mlir::failure;
using mlir::LogicalResult;
using mlir::Operation;
using mlir::Pass;
using mlir::PassInstrumentation;
using mlir::success;

/// Measured cost of one phase. peakRssMiB is the process's peak so far. A
/// phase that ran beside others (`concurrent`) has its own wall time; its CPU
/// time is in the window phase that holds it (cpuS < 0 here).
struct Phase {
  std::string name;
  double wallS, cpuS, peakRssMiB;
  bool concurrent = false;
};

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
inline double cpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}
inline double peakRssMiB() {
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
    phases.push_back({name.str(), secondsSince(wall), cpuSeconds() - cpu, peakRssMiB()});
  }
  /// Runs `fn` as one phase.
  LogicalResult phase(llvm::StringRef name, llvm::function_ref<LogicalResult()> fn) {
    start();
    LogicalResult result = fn();
    stop(name);
    return result;
  }
  /// Runs `fn` as a phase that runs beside others: its wall time only.
  template <typename Fn> auto concurrentPhase(llvm::StringRef name, Fn &&fn) {
    auto start = std::chrono::steady_clock::now();
    auto result = fn();
    phases.push_back({name.str(), secondsSince(start), -1, -1, /*concurrent=*/true});
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

/// Takes `path`'s file from `files` and runs `write` into it. The file is
/// kept only once the caller calls keep() on the result (a failed check
/// deletes it).
inline std::unique_ptr<llvm::ToolOutputFile>
writeFile(OutputFiles &files, llvm::StringRef path,
          llvm::function_ref<LogicalResult(llvm::raw_ostream &)> write) {
  std::unique_ptr<llvm::ToolOutputFile> out = files.take(path);
  if (!out)
    return nullptr; // take() said why
  // raw_fd_ostream buffers one file-system block (4 KiB): a 64 x 512
  // report and program were ~8000 write calls. 1 MiB buffers make it ~40.
  out->os().SetBufferSize(1 << 20);
  if (failed(write(out->os())))
    return nullptr;
  return out;
}

/// Writes the phases as a table on stderr (`timingFile` "-") or as JSON into
/// `out`, the --timing file taken from OutputFiles (null when it could not
/// be created: take() said why). False when the file was not written.
inline bool writeTiming(const std::vector<Phase> &phases, double totalWall,
                        llvm::StringRef timingFile, std::unique_ptr<llvm::ToolOutputFile> out) {
  if (timingFile == "-") {
    llvm::errs() << llvm::format("%-26s %9s %9s %10s\n", (const char *)"phase (measured)",
                                 (const char *)"wall s", (const char *)"cpu s",
                                 (const char *)"peak MiB");
    for (const Phase &p : phases) {
      if (p.concurrent)
        llvm::errs() << llvm::format("  %-24s %9.4f %9s %10s\n", p.name.c_str(), p.wallS,
                                     (const char *)"", (const char *)"");
      else
        llvm::errs() << llvm::format("%-26s %9.4f %9.4f %10.1f\n", p.name.c_str(), p.wallS,
                                     p.cpuS, p.peakRssMiB);
    }
    llvm::errs() << llvm::format("%-26s %9.4f\n", (const char *)"total", totalWall);
    return true;
  }
  if (!out)
    return false;
  {
    llvm::raw_ostream &os = out->os();
    llvm::json::OStream j(os, 2);
    j.object([&] {
      j.attribute("measured", true);
      j.attribute("total_wall_s", totalWall);
      j.attributeArray("phases", [&] {
        for (const Phase &p : phases)
          j.object([&] {
            j.attribute("name", p.name);
            j.attribute("wall_s", p.wallS);
            if (p.concurrent) {
              j.attribute("concurrent", true);
              return;
            }
            j.attribute("cpu_s", p.cpuS);
            j.attribute("peak_rss_mib", p.peakRssMiB);
          });
      });
    });
    os << "\n";
  }
  out->os().flush();
  if (std::error_code ec = out->os().error()) {
    llvm::errs() << "pipefill-compile: cannot write '" << timingFile << "': " << ec.message()
                 << "\n";
    out->os().clear_error();
    return false;
  }
  out->keep();
  return true;
}

/// The --timing output: written at the very end, even after a failed
/// compile ("-": a table on stderr), but taken from OutputFiles before any
/// other output is kept, so a run that cannot write it keeps nothing.
class TimingOutput {
public:
  TimingOutput(llvm::StringRef path, OutputFiles &files) : path(path.str()), files(files) {}
  /// False when the file cannot be created (take() said why).
  bool take() {
    if (!taken && !path.empty() && path != "-") {
      taken = true;
      out = files.take(path);
    }
    return path.empty() || path == "-" || out != nullptr;
  }
  /// False when the file could not be created or written.
  bool write(const std::vector<Phase> &phases, double totalWall) {
    return path.empty() || (take() && writeTiming(phases, totalWall, path, std::move(out)));
  }

private:
  std::string path;
  OutputFiles &files;
  bool taken = false;
  std::unique_ptr<llvm::ToolOutputFile> out;
};

/// Runs `fn` on its own thread, timing it as a concurrent phase.
class Concurrent {
public:
  Concurrent(std::string name, std::function<LogicalResult()> fn)
      : name(std::move(name)), thread([this, fn = std::move(fn)] {
          auto start = std::chrono::steady_clock::now();
          ok = succeeded(fn());
          wallS = secondsSince(start);
        }) {}
  /// Waits for the thread; records its phase.
  bool join(PhaseTimer &timer) {
    thread.join();
    timer.phases.push_back({name, wallS, -1, -1, /*concurrent=*/true});
    return ok;
  }

private:
  std::string name;
  bool ok = false;
  double wallS = 0;
  std::thread thread;
};

} // namespace pipefill::compile

#endif // PIPEFILL_TOOLS_PIPEFILL_COMPILE_PHASETIMER_H
