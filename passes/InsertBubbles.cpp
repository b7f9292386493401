//===- InsertBubbles.cpp - pipefill-insert-bubbles ------------------------===//
#include "passes/Passes.h"
#include "passes/ScheduleIR.h"
#include "support/Format.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"

using namespace mlir;

namespace pipefill {
#define GEN_PASS_DEF_INSERTBUBBLES
#include "passes/Passes.h.inc"

namespace {
BubbleKind toIR(sched::BubbleKind kind) {
  switch (kind) {
  case sched::BubbleKind::Warmup: return BubbleKind::Warmup;
  case sched::BubbleKind::Steady: return BubbleKind::Steady;
  case sched::BubbleKind::Cooldown: return BubbleKind::Cooldown;
  case sched::BubbleKind::Tail: return BubbleKind::Tail;
  }
  return BubbleKind::Steady;
}

struct InsertBubblesPass : public impl::InsertBubblesBase<InsertBubblesPass> {
  using InsertBubblesBase::InsertBubblesBase;

  void runOnOperation() override {
    // -1 (the default) means "the pipeline's own value"; any other negative or NaN is a mistake,
    // not a request for the default.
    Location at = getOperation().getLoc(); // the first pipeline's, where there is one
    for (PipelineOp pipeline : getOperation().getOps<PipelineOp>()) {
      at = pipeline.getLoc();
      break;
    }
    if (!(minDurationUs >= 0) && minDurationUs != -1.0) {
      emitError(at)
          << "pipefill-insert-bubbles: min-duration-us must be a number >= 0 (got "
          << fmtNum(minDurationUs.getValue())
          << "); leave it out for the pipeline's min_bubble_us";
      return signalPassFailure();
    }
    if (reserveBytes < -1) {
      emitError(at)
          << "pipefill-insert-bubbles: reserve-bytes must be >= 0 (got " << reserveBytes.getValue()
          << "); leave it out for the pipeline's reserve_bytes";
      return signalPassFailure();
    }
    ScheduleAnalysis &lists = getAnalysis<ScheduleAnalysis>();
    for (PipelineOp pipeline : getOperation().getOps<PipelineOp>())
      if (failed(insertBubbles(pipeline, lists)))
        return signalPassFailure();
    // Bubbles go between instructions, so the lists would still be right,
    // but no later pass reads them: not preserving them frees them now
    // instead of after pipefill-plan-fill (1F1B 128 x 4096: 295 MB held
    // through planning, the driver's peak).
  }

  LogicalResult insertBubbles(PipelineOp pipeline, ScheduleAnalysis &lists) {
    if (!pipeline.getIterationUs())
      return pipeline.emitError()
             << "has no simulated timeline; run pipefill-simulate first";
    sched::PipelineSpec spec = specFromIR(pipeline);
    // The lists pipefill-simulate left, or read from the IR.
    ScheduleAnalysis::Lists read;
    ScheduleAnalysis::Lists *stored = lists.find(pipeline);
    if (!stored) {
      scheduleFromIR(pipeline, read.schedule, read.ops);
      stored = &read;
    }
    const sched::Schedule &schedule = stored->schedule;
    const auto &ops = stored->ops;
    // Straight after expand-schedule (and simulate) the stages hold only
    // instructions: no earlier bubbles to look for.
    const bool mayHoldBubbles = !stored->stagesHoldOnlyThese;
    sched::SimResult result;
    result.iterationUs = pipeline.getIterationUs()->convertToDouble();
    for (StageOp stage : pipeline.getStages()) {
      sched::StageTimeline t;
      t.busyUs = stage.getBusyUs() ? stage.getBusyUs()->convertToDouble() : 0;
      t.idleUs = stage.getIdleUs() ? stage.getIdleUs()->convertToDouble() : 0;
      t.peakBytes = stage.getPeakBytes() ? *stage.getPeakBytes() : 0;
      result.stages.push_back(t);
    }

    double minUs = minDurationUs >= 0
                       ? minDurationUs.getValue()
                       : pipeline.getMinBubbleUs().convertToDouble();
    int64_t reserve = reserveBytes >= 0
                          ? static_cast<int64_t>(reserveBytes)
                          : static_cast<int64_t>(pipeline.getReserveBytes());
    const int64_t capacity = pipeline.getDeviceMemoryBytes();

    // Bubbles go into their own stage only: each stage's are found and
    // inserted on its own thread; the kinds are uniqued once, the times are
    // native.
    SmallVector<StageOp> stages(pipeline.getStages());
    MLIRContext *ctx = &getContext();
    const BubbleKindAttr kindAttrs[] = {
        BubbleKindAttr::get(ctx, BubbleKind::Warmup), BubbleKindAttr::get(ctx, BubbleKind::Steady),
        BubbleKindAttr::get(ctx, BubbleKind::Cooldown), BubbleKindAttr::get(ctx, BubbleKind::Tail)};
    mlir::parallelFor(ctx, 0, stages.size(), [&](size_t s) {
      OpBuilder builder(ctx);
      OpFactory<BubbleOp> factory(ctx);
      StageOp stage = stages[s];
      Block &body = stage.getBody().front();
      // Re-running replaces earlier bubbles (and the fill work planned in
      // them). Bubbles sit directly in their stage (HasParent), so each
      // stage's thread scans and edits only its own block: the scan chases
      // 10^5 list pointers, which cost ~4 ms on one core at 1F1B 64 x 512.
      if (mayHoldBubbles)
        for (Operation &op : llvm::make_early_inc_range(body))
          if (isa<BubbleOp>(op))
            op.erase();
      const auto &stageOps = ops[s];
      std::vector<sched::Bubble> bubbles;
      sched::findStageBubbles(spec, schedule, int(s), result, capacity, minUs, reserve,
                              bubbles);
      for (const sched::Bubble &bubble : bubbles) {
        if (bubble.insertBefore < stageOps.size())
          builder.setInsertionPoint(stageOps[bubble.insertBefore]);
        else
          builder.setInsertionPointToEnd(&body);
        BubbleOp::Properties props;
        props.kind = kindAttrs[static_cast<int>(toIR(bubble.kind))];
        props.start_us = bubble.startUs;
        props.duration_us = bubble.durationUs;
        props.free_bytes = bubble.freeBytes;
        factory.create(builder, stage.getLoc(), props);
      }
    });
    return success();
  }
};
} // namespace
} // namespace pipefill
