//===- Simulate.cpp - pipefill-simulate -----------------------------------===//
#include "passes/Passes.h"
#include "passes/ScheduleIR.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/bit.h"

using namespace mlir;

namespace pipefill {
#define GEN_PASS_DEF_SIMULATE
#include "passes/Passes.h.inc"

namespace {
struct SimulatePass : public impl::SimulateBase<SimulatePass> {
  void runOnOperation() override {
    ScheduleAnalysis &lists = getAnalysis<ScheduleAnalysis>();
    for (PipelineOp pipeline : getOperation().getOps<PipelineOp>())
      if (failed(simulatePipeline(pipeline, lists)))
        return signalPassFailure();
    // The instruction lists, their timing as written into the ops, for
    // pipefill-insert-bubbles.
    markAnalysesPreserved<ScheduleAnalysis>();
  }

  LogicalResult simulatePipeline(PipelineOp pipeline, ScheduleAnalysis &lists) {
    if (!pipeline.isExpanded())
      return pipeline.emitError()
             << "has no instructions to simulate; run "
                "pipefill-expand-schedule first";
    sched::PipelineSpec spec = specFromIR(pipeline);
    // The lists pipefill-expand-schedule built these ops from, or read from them.
    ScheduleAnalysis::Lists read;
    if (!lists.take(pipeline, read))
      scheduleFromIR(pipeline, read.schedule, read.ops);
    sched::Schedule &schedule = read.schedule;
    SmallVector<SmallVector<Operation *>> &ops = read.ops;
    sched::SimResult result;
    std::string error;
    // The per-stage checks on MLIR's threads; timing the whole pipeline is
    // one sequential pass.
    auto forEachStage = [&](size_t n, const std::function<void(size_t)> &fn) {
      mlir::parallelFor(&getContext(), 0, n, fn);
    };
    if (!sched::simulate(spec, schedule, result, error, forEachStage))
      return pipeline.emitError() << "cannot simulate the schedule: " << error;

    Builder b(&getContext());
    // Stages are isolated: write each stage's timing on its own thread
    // (three numbers in each instruction's properties, nothing uniqued).
    mlir::parallelFor(&getContext(), 0, schedule.size(), [&](size_t s) {
      for (size_t i = 0; i < schedule[s].size(); ++i) {
        const sched::Instr &instr = schedule[s][i];
        InstrTiming *t = timingOf(*ops[s][i]); // scheduleFromIR read only instructions
        t->startUs = instr.startUs;
        t->endUs = instr.endUs;
        t->liveBytes = instr.liveBytesAfter;
      }
    });

    int64_t capacity = pipeline.getDeviceMemoryBytes();
    bool fits = true;
    size_t s = 0;
    for (StageOp stage : pipeline.getStages()) {
      const sched::StageTimeline &t = result.stages[s++];
      stage.setBusyUsAttr(b.getF64FloatAttr(t.busyUs));
      stage.setIdleUsAttr(b.getF64FloatAttr(t.idleUs));
      stage.setPeakBytesAttr(b.getI64IntegerAttr(t.peakBytes));
      if (t.peakBytes > capacity) {
        stage.emitError() << "stage " << stage.getIndex() << " needs "
                          << describeBytes(t.peakBytes)
                          << " at its peak (static "
                          << describeBytes(stage.getStaticBytes())
                          << " + stashed activations) but the device has "
                          << describeBytes(capacity);
        fits = false;
      }
    }
    pipeline.setIterationUsAttr(b.getF64FloatAttr(result.iterationUs));
    lists.store(pipeline, std::move(read));
    return success(fits);
  }
};
} // namespace
} // namespace pipefill
