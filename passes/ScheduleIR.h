//===- ScheduleIR.h - pipefill IR <-> schedule algorithm data ---*- C++ -*-===//
//
// The schedule passes translate a pipefill.pipeline into the plain C++
// problem of algo/schedule, call the algorithm, and write the answer back.
// This file holds those translations so each pass file stays small.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_PASSES_SCHEDULEIR_H
#define PIPEFILL_PASSES_SCHEDULEIR_H

#include "algo/schedule/Schedule.h"
#include "dialect/PipefillOps.h"

#include "llvm/ADT/SmallVector.h"

namespace pipefill {

/// The algorithm's view of a pipeline's attributes and stage costs.
sched::PipelineSpec specFromIR(PipelineOp pipeline);

/// The instruction lists of a pipeline (bubble ops are skipped). `ops[s][i]`
/// is the op behind `schedule[s][i]`. Timing attributes already in the IR
/// are copied into startUs/endUs/liveBytesAfter.
void scheduleFromIR(PipelineOp pipeline, sched::Schedule &schedule,
                    llvm::SmallVectorImpl<llvm::SmallVector<mlir::Operation *>> &ops);

/// Creates the op for one instruction at the builder's insertion point.
mlir::Operation *buildInstr(mlir::OpBuilder &builder, mlir::Location loc,
                            const sched::Instr &instr);

/// Numbers for messages: "12.3 GB".
std::string describeBytes(int64_t bytes);

} // namespace pipefill

#endif // PIPEFILL_PASSES_SCHEDULEIR_H
