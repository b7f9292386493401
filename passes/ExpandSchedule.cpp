//===- ExpandSchedule.cpp - pipefill-expand-schedule ----------------------===//
#include "passes/Passes.h"
#include "passes/ScheduleIR.h"

#include "mlir/IR/Builders.h"

namespace pipefill {
#define GEN_PASS_DEF_EXPANDSCHEDULE
#include "passes/Passes.h.inc"

namespace {
struct ExpandSchedulePass
    : public impl::ExpandScheduleBase<ExpandSchedulePass> {
  void runOnOperation() override {
    for (PipelineOp pipeline : getOperation().getOps<PipelineOp>()) {
      if (pipeline.isExpanded())
        continue;
      if (pipeline.getSchedule() == ScheduleKind::Imported) {
        pipeline.emitError() << "has an imported schedule but no instructions "
                                "to run; re-import its action table";
        return signalPassFailure();
      }
      sched::PipelineSpec spec = specFromIR(pipeline);
      sched::Schedule schedule;
      std::string error;
      if (!sched::expandSchedule(spec, schedule, error)) {
        pipeline.emitError() << "cannot expand the "
                             << stringifyScheduleKind(pipeline.getSchedule())
                             << " schedule: " << error;
        return signalPassFailure();
      }
      mlir::OpBuilder builder(&getContext());
      size_t s = 0;
      for (StageOp stage : pipeline.getStages()) {
        if (stage.getBody().empty())
          builder.createBlock(&stage.getBody());
        builder.setInsertionPointToEnd(&stage.getBody().front());
        for (sched::Instr instr : schedule[s]) {
          if (instr.kind == sched::InstrKind::AllReduceGrads)
            instr.bytes = spec.gradBytes;
          buildInstr(builder, stage.getLoc(), instr);
        }
        ++s;
      }
    }
  }
};
} // namespace
} // namespace pipefill
