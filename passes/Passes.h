//===- Passes.h - pipefill passes -------------------------------*- C++ -*-===//
#ifndef PIPEFILL_PASSES_PASSES_H
#define PIPEFILL_PASSES_PASSES_H

#include "dialect/PipefillOps.h"
#include "dialect/stream/PfstreamOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

#include <functional>
#include <memory>

namespace pipefill {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// Options of the `--pipefill-compile` pipeline.
struct CompileOptions : public mlir::PassPipelineOptions<CompileOptions> {
  Option<std::string> profile{
      *this, "profile",
      llvm::cl::desc("Measured profile (pipefill-run --profile-out) whose "
                     "instruction times replace the planned ones")};
  Option<bool> verifyPlan{
      *this, "verify-plan",
      llvm::cl::desc("End with pipefill-verify-plan (pipefill-compile runs the "
                     "same check beside its exports instead)"),
      llvm::cl::init(true)};
};

/// What pipefill-verify-plan checks, as a function: the schedule is free of
/// deadlocks (unless `checkOrder` is false, for a caller that lowers the IR
/// next: pipefill-lower-to-stream checks the order with the same rule) and
/// the fill plan read back from the IR verifies (fill::checkPlan). Only reads
/// the IR, so it may run beside other readers.
mlir::LogicalResult verifyFillPlan(mlir::ModuleOp module, bool checkOrder = true);

/// A progress line for long work: pipefill-plan-fill calls it with ("plan-fill", stages planned,
/// stages) after each stage (from its threads, one call at a time). Process-wide, set by a
/// driver (pipefill-compile --progress) before it runs passes; empty: no calls.
using ProgressHook = std::function<void(const char *phase, size_t done, size_t total)>;
void setProgressHook(ProgressHook hook);
const ProgressHook &progressHook();

/// Adds the passes of `--pipefill-compile` to `pm`.
void buildCompilePipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// Registers every pipefill pass and the `pipefill-compile` pipeline.
void registerPasses();

} // namespace pipefill

#endif // PIPEFILL_PASSES_PASSES_H
