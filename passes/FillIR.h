//===- FillIR.h - pipefill IR <-> fill planner data -------------*- C++ -*-===//
//
// Translations between the IR (pipelines with bubbles, fill jobs, planned
// fill chunks) and the plain C++ problem of algo/fill, shared by
// pipefill-plan-fill and pipefill-verify-plan.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_PASSES_FILLIR_H
#define PIPEFILL_PASSES_FILLIR_H

#include "algo/fill/Planner.h"
#include "dialect/PipefillOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

namespace pipefill {

/// Discardable dictionary attribute that pipefill-plan-fill puts on each
/// stage: where its bubble time goes per iteration (planned), read by the
/// report and the summary. Keys: bubble_us, filled_us, useful_us, switch_us,
/// launch_us, other_overhead_us, idle_us, margin_us, too_short_us,
/// memory_us, granularity_us (fill::StageAccount).
inline constexpr llvm::StringLiteral kFillAccountAttr = "pipefill.fill_account";

/// The planning problem of one pipeline.
struct FillProblem {
  std::vector<fill::StageBubbles> stages;
  std::vector<fill::Job> jobs;
  fill::Hardware hardware;
  fill::Config config;
  /// jobOps[i] is the declaration behind jobs[i]; jobIndex maps its name.
  llvm::SmallVector<FillJobOp> jobOps;
  llvm::StringMap<int> jobIndex;
  /// bubbleOps[s][id] is the bubble op with planner id `id` on stage s.
  llvm::SmallVector<llvm::SmallVector<BubbleOp>> bubbleOps;
};

/// Builds the problem. The bubbles' free bytes already exclude the reserve,
/// so the planner's own reserve is 0 and each stage's minimum free memory is
/// capacity - peak live bytes - reserve.
FillProblem fillProblemFromIR(mlir::ModuleOp module, PipelineOp pipeline);

/// The bubbles of `pipeline` are gaps of its simulated timeline: each lies between the end of
/// the device-occupying instructions before it and the start of those after it (or the
/// iteration's end), bubbles do not overlap, and a bubble's free bytes do not exceed the device
/// memory less the bytes live after the instruction before it (the stage's static bytes when
/// none). pipefill-insert-bubbles makes them so; IR edited by hand (a longer bubble, one
/// duplicated, more free memory) would otherwise get fill planned into time or memory the run
/// does not have. pipefill-plan-fill and pipefill-verify-plan call it; errors are on the bubble.
mlir::LogicalResult verifyBubblesMatchTimeline(PipelineOp pipeline);

} // namespace pipefill

#endif // PIPEFILL_PASSES_FILLIR_H
