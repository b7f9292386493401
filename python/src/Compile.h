//===- Compile.h - the compiler, in process, for embedders ------*- C++ -*-===//
//
// What `pipefill-translate --import-job | pipefill-opt --pipefill-compile |
// pipefill-opt --pipefill-lower-to-stream | pipefill-translate --to-...` does,
// as one C++ object that runs in the caller's process: the Python package's
// compiler half is a thin binding of this. No MLIR type appears here, so the
// binding translation unit does not parse MLIR headers.
//
// Errors are thrown (this is a plain C++ target, not an LLVM-style one):
// FileError (FileError.h) for an unreadable JobSpec path, CompileFailure for
// everything the compiler diagnoses, each diagnostic formatted exactly as the
// tools print it (`file:line:col: error: message` plus the source line).
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_PYTHON_COMPILE_H
#define PIPEFILL_PYTHON_COMPILE_H

#include "python/src/FileError.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace pipefill::embed {

/// The compiler diagnosed the input (or a profile); `diagnostics` holds every
/// error and note as the tools print them, in order.
struct CompileFailure : std::runtime_error {
  CompileFailure(const std::string &what, std::vector<std::string> diagnostics)
      : std::runtime_error(what), diagnostics(std::move(diagnostics)) {}
  std::vector<std::string> diagnostics;
};

struct CompileOptions {
  /// Measured profile (pipefill-run --profile-out) applied after expansion;
  /// empty: the JobSpec's costs.
  std::string profile;
  /// Non-empty: the input is not a JobSpec but a torch.distributed.pipelining
  /// action table (CSV, docs/torch.md), imported as `pipefill-translate
  /// --import-torch-schedule --job=FILE` does; this is that JobSpec's path
  /// (stage costs, hardware, fill jobs).
  std::string torchScheduleJob;
};

/// Per-bubble columns of a compiled plan, in stage order then schedule order.
struct BubbleColumns {
  std::vector<int64_t> stage, freeBytes, fills;
  std::vector<double> startUs, durationUs, filledUs;
  std::vector<std::string> kind;
};
/// Per-stage columns.
struct StageColumns {
  std::vector<int64_t> stage, peakMemoryBytes, bubbles;
  std::vector<double> busyUs, idleUs;
};

/// A compiled plan: the module after `--pipefill-compile`, and its lowering to
/// a StreamProgram on demand.
class CompiledPlan {
public:
  /// Compiles JobSpec text; `sourceName` is the file name diagnostics print.
  static std::unique_ptr<CompiledPlan>
  fromText(const std::string &text, const std::string &sourceName,
           const CompileOptions &options);
  /// Compiles the JobSpec file at `path`.
  static std::unique_ptr<CompiledPlan> fromFile(const std::string &path,
                                                const CompileOptions &options);
  ~CompiledPlan();

  const std::string &name() const;
  /// Warnings the compiler emitted (e.g. a fill job that fits nowhere).
  const std::vector<std::string> &warnings() const;

  std::string reportJson() const;
  std::string summary() const;
  std::string trace() const;
  std::string svg() const;
  /// The compiled IR; with `debugInfo`, locations (file:line:col of the
  /// JobSpec) are printed too.
  std::string mlir(bool debugInfo) const;
  /// The plan lowered to a StreamProgram (binary protobuf, or text format),
  /// looping `iterations` times. Lowering runs on a copy of the module each
  /// call, so the compiled plan itself never changes.
  std::string streamProgram(int64_t iterations, bool text) const;

  BubbleColumns bubbles() const;
  StageColumns stages() const;

  struct Impl;

private:
  explicit CompiledPlan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace pipefill::embed

#endif // PIPEFILL_PYTHON_COMPILE_H
