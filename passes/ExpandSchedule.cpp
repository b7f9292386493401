//===- ExpandSchedule.cpp - pipefill-expand-schedule ----------------------===//
#include "passes/Passes.h"
#include "passes/ScheduleIR.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"

using mlir::Operation;
using llvm::SmallVector;

namespace pipefill {
#define GEN_PASS_DEF_EXPANDSCHEDULE
#include "passes/Passes.h.inc"

namespace {
struct ExpandSchedulePass
    : public impl::ExpandScheduleBase<ExpandSchedulePass> {
  void runOnOperation() override {
    ScheduleAnalysis &lists = getAnalysis<ScheduleAnalysis>();
    for (PipelineOp pipeline : getOperation().getOps<PipelineOp>()) {
      if (pipeline.isExpanded())
        continue;
      if (pipeline.getSchedule() == ScheduleKind::Imported) {
        pipeline.emitError() << "has an imported schedule but no instructions "
                                "to run; re-import its action table";
        return signalPassFailure();
      }
      sched::PipelineSpec spec = specFromIR(pipeline);
      std::string error;
      if (!sched::validateSpec(spec, error)) {
        pipeline.emitError() << "cannot expand the "
                             << stringifyScheduleKind(pipeline.getSchedule())
                             << " schedule: " << error;
        return signalPassFailure();
      }
      // Stages are isolated from each other: each stage's list is expanded
      // and its instructions built into its own block on one thread.
      llvm::SmallVector<StageOp> stages(pipeline.getStages());
      for (StageOp stage : stages)
        if (stage.getBody().empty())
          stage.getBody().emplaceBlock();
      // The lists go to pipefill-simulate as they are (ScheduleAnalysis)
      // with the op of each instruction: they are what it would read back
      // from these ops (stageFromIR), and reading 10^5 ops per stage was a
      // third of its time.
      ScheduleAnalysis::Lists built;
      built.stagesHoldOnlyThese = true; // isExpanded(): every stage was empty
      built.schedule.resize(stages.size());
      built.ops.resize(stages.size());
      mlir::parallelFor(&getContext(), 0, stages.size(), [&](size_t s) {
        std::vector<sched::Instr> &list = built.schedule[s];
        sched::expandStage(spec, int(s), list);
        StageOp stage = stages[s];
        mlir::OpBuilder builder(stage.getContext());
        InstrBuilder instrs(stage.getContext());
        builder.setInsertionPointToEnd(&stage.getBody().front());
        SmallVector<Operation *> &ops = built.ops[s];
        ops.reserve(list.size());
        for (sched::Instr &instr : list) {
          if (instr.kind == sched::InstrKind::AllReduceGrads)
            instr.bytes = spec.gradBytes;
          ops.push_back(instrs.build(builder, stage.getLoc(), instr));
        }
      });
      lists.store(pipeline, std::move(built));
    }
    // A pass in between that changes instructions (pipefill-apply-profile)
    // does not preserve it, and pipefill-simulate then reads the ops.
    markAnalysesPreserved<ScheduleAnalysis>();
  }
};
} // namespace
} // namespace pipefill
