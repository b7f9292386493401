//===- ScheduleIR.cpp - pipefill IR <-> schedule algorithm data -----------===//
#include "passes/ScheduleIR.h"
#include "support/Format.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"

using namespace mlir;

namespace pipefill {

static sched::ScheduleKind toSched(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe: return sched::ScheduleKind::GPipe;
  case ScheduleKind::OneFOneB: return sched::ScheduleKind::OneFOneB;
  case ScheduleKind::Interleaved1F1B: return sched::ScheduleKind::Interleaved1F1B;
  case ScheduleKind::ZBH1: return sched::ScheduleKind::ZBH1;
  // An imported order is never expanded; simulation reads only the
  // instructions themselves.
  case ScheduleKind::Imported: return sched::ScheduleKind::OneFOneB;
  }
  return sched::ScheduleKind::OneFOneB;
}

static double f64(llvm::APFloat v) { return v.convertToDouble(); }

sched::PipelineSpec specFromIR(PipelineOp pipeline) {
  sched::PipelineSpec spec;
  spec.stages = pipeline.getNumStages();
  spec.microbatches = pipeline.getNumMicrobatches();
  spec.virtualStages = pipeline.getVirtualStages();
  spec.schedule = toSched(pipeline.getSchedule());
  spec.p2pLatencyUs = f64(pipeline.getP2pLatencyUs());
  spec.p2pBandwidthGBps = f64(pipeline.getP2pBandwidthGbps());
  spec.tail = pipeline.getTail();
  spec.dataParallel = pipeline.getDataParallel();
  spec.gradBytes = pipeline.getGradBytes();
  spec.dpBandwidthGBps = f64(pipeline.getAllreduceBandwidthGbps());
  spec.dpLatencyUs = f64(pipeline.getAllreduceLatencyUs());
  spec.optimizerUs = f64(pipeline.getOptimizerUs());
  for (StageOp stage : pipeline.getStages()) {
    sched::StageCost cost;
    cost.forwardUs = f64(stage.getForwardUs());
    cost.backwardUs = f64(stage.getBackwardUs());
    cost.backwardWeightUs = f64(stage.getBackwardWeightUs());
    cost.activationBytes = stage.getActivationBytes();
    cost.stashBytes = stage.getStashBytes();
    cost.staticBytes = stage.getStaticBytes();
    spec.costs.push_back(cost);
  }
  return spec;
}

sched::InstrKind toSchedKind(InstrKind kind) {
  switch (kind) {
  case InstrKind::Forward: return sched::InstrKind::Forward;
  case InstrKind::Backward: return sched::InstrKind::Backward;
  case InstrKind::BackwardInput: return sched::InstrKind::BackwardInput;
  case InstrKind::BackwardWeight: return sched::InstrKind::BackwardWeight;
  case InstrKind::Send: return sched::InstrKind::Send;
  case InstrKind::Recv: return sched::InstrKind::Recv;
  case InstrKind::AllReduceGrads: return sched::InstrKind::AllReduceGrads;
  case InstrKind::OptimizerStep: return sched::InstrKind::OptimizerStep;
  }
  return sched::InstrKind::Forward;
}

InstrKind fromSchedKind(sched::InstrKind kind) {
  switch (kind) {
  case sched::InstrKind::Forward: return InstrKind::Forward;
  case sched::InstrKind::Backward: return InstrKind::Backward;
  case sched::InstrKind::BackwardInput: return InstrKind::BackwardInput;
  case sched::InstrKind::BackwardWeight: return InstrKind::BackwardWeight;
  case sched::InstrKind::Send: return InstrKind::Send;
  case sched::InstrKind::Recv: return InstrKind::Recv;
  case sched::InstrKind::AllReduceGrads: return InstrKind::AllReduceGrads;
  case sched::InstrKind::OptimizerStep: return InstrKind::OptimizerStep;
  }
  return InstrKind::Forward;
}

namespace {
/// Calls fn with `op` as its instruction class (found by TypeID, the common
/// classes first) and returns what it returns; `none` for other ops. What
/// the passes that touch every instruction use instead of the interface's
/// per-call dispatch.
template <typename R, typename Fn> R visitInstr(Operation &op, R none, Fn &&fn) {
  TypeID id = op.getName().getTypeID();
  if (id == TypeID::get<ForwardOp>())
    return fn(ForwardOp(&op));
  if (id == TypeID::get<BackwardOp>())
    return fn(BackwardOp(&op));
  if (id == TypeID::get<SendOp>())
    return fn(SendOp(&op));
  if (id == TypeID::get<RecvOp>())
    return fn(RecvOp(&op));
  if (id == TypeID::get<BackwardInputOp>())
    return fn(BackwardInputOp(&op));
  if (id == TypeID::get<BackwardWeightOp>())
    return fn(BackwardWeightOp(&op));
  if (id == TypeID::get<AllReduceGradsOp>())
    return fn(AllReduceGradsOp(&op));
  if (id == TypeID::get<OptimizerStepOp>())
    return fn(OptimizerStepOp(&op));
  return none;
}
} // namespace

InstrTiming *timingOf(Operation &op) {
  return visitInstr(op, static_cast<InstrTiming *>(nullptr),
                    [](auto typed) { return &typed.getProperties().timing; });
}

namespace {
/// Reads one instruction op of class `Op` into `instr`: its fields straight
/// from the op's properties, without the interface's per-field dispatch.
template <typename Op>
void readInstr(Op op, int64_t stashPerChunk, bool withTiming, sched::Instr &instr) {
  instr.kind = toSchedKind(Op::kInstrKind);
  if constexpr (detail::kHasMicrobatch<Op>) {
    instr.microbatch = static_cast<int64_t>(op.getMicrobatch());
    instr.chunk = static_cast<int64_t>(op.getChunk());
  } else {
    instr.microbatch = -1;
    instr.chunk = 0;
  }
  if constexpr (detail::kHasDuration<Op>)
    instr.durationUs = op.getDurationUs();
  else
    instr.durationUs = 0.0;
  if constexpr (std::is_same_v<Op, ForwardOp>)
    instr.bytes = stashPerChunk;
  else if constexpr (detail::kHasBytes<Op>)
    instr.bytes = static_cast<int64_t>(op.getBytes());
  else
    instr.bytes = 0;
  if constexpr (detail::kHasPeer<Op>) {
    instr.payload = op.getPayload() == Payload::Activation ? sched::Payload::Activation
                                                           : sched::Payload::Gradient;
    instr.peer = static_cast<int64_t>(op.getPeer());
  }
  if (!withTiming)
    return;
  const InstrTiming &t = op.getProperties().timing;
  if (t.hasStart())
    instr.startUs = t.startUs;
  if (t.hasEnd())
    instr.endUs = t.endUs;
  if (t.hasLive())
    instr.liveBytesAfter = t.liveBytes;
}

/// readInstr for whichever instruction class `op` is; false for other ops.
bool readAnyInstr(Operation &op, int64_t stashPerChunk, bool withTiming,
                  sched::Instr &instr) {
  return visitInstr(op, false, [&](auto typed) {
    readInstr(typed, stashPerChunk, withTiming, instr);
    return true;
  });
}
} // namespace

void stageFromIR(StageOp stage, int64_t virtualStages, std::vector<sched::Instr> &list,
                 SmallVectorImpl<Operation *> &ops, bool withTiming) {
  list.clear();
  ops.clear();
  int64_t stashPerChunk = static_cast<int64_t>(stage.getStashBytes()) / virtualStages;
  // No reserve: Block's op list is an ilist whose size() walks every op,
  // and at 10^5 ops per stage that walk (a cache miss per op) cost three
  // times the read below.
  for (Operation &op : stage.getBody().front()) {
    sched::Instr instr;
    if (!readAnyInstr(op, stashPerChunk, withTiming, instr))
      continue;
    list.push_back(instr);
    ops.push_back(&op);
  }
}

void scheduleFromIR(PipelineOp pipeline, sched::Schedule &schedule,
                    SmallVectorImpl<SmallVector<Operation *>> &ops, bool withTiming) {
  int64_t v = pipeline.getVirtualStages();
  SmallVector<StageOp> stages(pipeline.getStages());
  schedule.assign(stages.size(), {});
  ops.assign(stages.size(), {});
  // Stages are isolated from above: each is read on its own thread.
  mlir::parallelFor(pipeline->getContext(), 0, stages.size(), [&](size_t s) {
    stageFromIR(stages[s], v, schedule[s], ops[s], withTiming);
  });
}

Operation *InstrBuilder::build(OpBuilder &b, Location loc, const sched::Instr &instr) {
  const int64_t mb = instr.microbatch < 0 ? 0 : instr.microbatch;
  // A compute op (forward, backward and its halves) of the factory's class.
  auto compute = [&](auto &factory) -> Operation * {
    typename std::decay_t<decltype(factory)>::Op::Properties p;
    p.microbatch = mb;
    p.chunk = instr.chunk;
    p.duration_us = instr.durationUs;
    return factory.create(b, loc, p);
  };
  // A send or receive.
  auto transfer = [&](auto &factory) -> Operation * {
    typename std::decay_t<decltype(factory)>::Op::Properties p;
    p.payload = payloads[instr.payload == sched::Payload::Activation ? 0 : 1];
    p.microbatch = mb;
    p.chunk = instr.chunk;
    p.peer = instr.peer;
    p.bytes = instr.bytes;
    return factory.create(b, loc, p);
  };
  switch (instr.kind) {
  case sched::InstrKind::Forward:
    return compute(forward);
  case sched::InstrKind::Backward:
    return compute(backward);
  case sched::InstrKind::BackwardInput:
    return compute(backwardInput);
  case sched::InstrKind::BackwardWeight:
    return compute(backwardWeight);
  case sched::InstrKind::Send:
    return transfer(send);
  case sched::InstrKind::Recv:
    return transfer(recv);
  case sched::InstrKind::AllReduceGrads: {
    AllReduceGradsOp::Properties p;
    p.bytes = instr.bytes;
    p.duration_us = instr.durationUs;
    return allReduce.create(b, loc, p);
  }
  case sched::InstrKind::OptimizerStep: {
    OptimizerStepOp::Properties p;
    p.duration_us = instr.durationUs;
    return optimizer.create(b, loc, p);
  }
  }
  return nullptr;
}

LogicalResult verifyDeadlockFree(PipelineOp pipeline) {
  sched::Schedule schedule;
  SmallVector<SmallVector<Operation *>> ops;
  return verifyDeadlockFree(pipeline, schedule, ops);
}

LogicalResult verifyDeadlockFree(PipelineOp pipeline, sched::Schedule &schedule,
                                 SmallVectorImpl<SmallVector<Operation *>> &ops,
                                 bool withTiming) {
  // The order alone decides; the timing is read only for the caller.
  scheduleFromIR(pipeline, schedule, ops, withTiming);
  int stage = -1;
  size_t index = 0;
  std::string error;
  if (sched::checkDeadlockFree(schedule, stage, index, error))
    return success();
  if (stage >= 0)
    return ops[stage][index]->emitOpError() << error;
  return pipeline.emitOpError() << error;
}

std::string describeBytes(int64_t bytes) { return fmtBytes(bytes); }

} // namespace pipefill
