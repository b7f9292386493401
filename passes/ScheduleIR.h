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
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/bit.h"

namespace pipefill {

/// The algorithm's view of a pipeline's attributes and stage costs.
sched::PipelineSpec specFromIR(PipelineOp pipeline);

/// The schedule algorithm's kind of an instruction op (InstructionOpInterface::getInstrKind).
sched::InstrKind toSchedKind(InstrKind kind);

/// True for the compute instructions a torch action names (forward, backward, backward-input,
/// backward-weight).
inline bool isComputeKind(sched::InstrKind kind) {
  return kind == sched::InstrKind::Forward || kind == sched::InstrKind::Backward ||
         kind == sched::InstrKind::BackwardInput || kind == sched::InstrKind::BackwardWeight;
}

/// The instruction lists of a pipeline (bubble ops are skipped). `ops[s][i]`
/// is the op behind `schedule[s][i]`. Timing attributes already in the IR
/// are copied into startUs/endUs/liveBytesAfter unless `withTiming` is
/// false. Reads each op's properties directly (one type test per op), which
/// must agree with InstructionOpInterface: an instruction class added to the
/// dialect must be added to readAnyInstr (ScheduleIR.cpp) too.
void scheduleFromIR(PipelineOp pipeline, sched::Schedule &schedule,
                    llvm::SmallVectorImpl<llvm::SmallVector<mlir::Operation *>> &ops,
                    bool withTiming = true);

/// One stage's instruction list, as scheduleFromIR reads it
/// (`virtualStages`: its pipeline's).
void stageFromIR(StageOp stage, int64_t virtualStages, std::vector<sched::Instr> &list,
                 llvm::SmallVectorImpl<mlir::Operation *> &ops, bool withTiming = true);

/// The instruction lists of a module's pipelines (what scheduleFromIR reads,
/// with timing), kept between passes as an MLIR analysis: pipefill-simulate
/// stores the lists it simulated (the timing it wrote into the ops
/// included) and marks the analysis preserved, and pipefill-insert-bubbles
/// takes them instead of reading 10^5-10^6 ops again, and, as their last
/// reader, lets them go. A pass that does not preserve it invalidates it
/// (MLIR's default), so a later pass reads the IR.
class ScheduleAnalysis {
public:
  explicit ScheduleAnalysis(mlir::Operation *) {}
  struct Lists {
    sched::Schedule schedule;
    llvm::SmallVector<llvm::SmallVector<mlir::Operation *>> ops;
    /// Set by pipefill-expand-schedule, which builds every stage from
    /// empty: the stages hold these instructions and nothing else (no
    /// bubbles to replace, so insert-bubbles need not look for any).
    bool stagesHoldOnlyThese = false;
  };
  /// The lists stored for `pipeline`, or null.
  Lists *find(PipelineOp pipeline) {
    auto it = lists.find(pipeline.getOperation());
    return it == lists.end() ? nullptr : &it->second;
  }
  void store(PipelineOp pipeline, Lists value) {
    lists[pipeline.getOperation()] = std::move(value);
  }
  /// Moves the lists stored for `pipeline` into `out` and forgets them;
  /// false (and `out` untouched) when there are none.
  bool take(PipelineOp pipeline, Lists &out) {
    auto it = lists.find(pipeline.getOperation());
    if (it == lists.end())
      return false;
    out = std::move(it->second);
    lists.erase(it);
    return true;
  }

private:
  llvm::DenseMap<mlir::Operation *, Lists> lists;
};

/// The shared deadlock rule (sched::checkDeadlockFree, support/Graph.h) on
/// a pipeline's instruction order, whatever its timing attributes say: an
/// error on the instruction that can never run (its file:line), or on the
/// pipeline when no single instruction is to blame.
mlir::LogicalResult verifyDeadlockFree(PipelineOp pipeline);
/// The same, leaving the instruction lists it read (scheduleFromIR, with
/// the timing where `withTiming`) in `schedule` and `ops`.
mlir::LogicalResult
verifyDeadlockFree(PipelineOp pipeline, sched::Schedule &schedule,
                   llvm::SmallVectorImpl<llvm::SmallVector<mlir::Operation *>> &ops,
                   bool withTiming = false);

/// The timing property of an instruction op (null for other ops), found by
/// the op's class rather than through InstructionOpInterface: for the
/// passes that write it on every instruction.
InstrTiming *timingOf(mlir::Operation &op);

/// The IR kind of a schedule instruction kind (toSchedKind's inverse).
InstrKind fromSchedKind(sched::InstrKind kind);

/// Creates ops of class `OpT` from their properties, straight through
/// Operation::create: no OperationState, no attribute list sorted into a
/// dictionary, the registered name looked up once. For the ops passes build
/// by the hundred thousand (instructions, bubbles); building one that way
/// was ~1600 instructions, ~30% of them the OperationState round trip. The
/// op is inserted at the builder's insertion point.
template <typename OpT> class OpFactory {
public:
  using Op = OpT;
  explicit OpFactory(mlir::MLIRContext *ctx)
      : name(*mlir::RegisteredOperationName::lookup(mlir::TypeID::get<OpT>(), ctx)),
        noAttrs(mlir::DictionaryAttr::get(ctx)) {}
  OpT create(mlir::OpBuilder &b, mlir::Location loc, typename OpT::Properties &props) {
    mlir::Operation *op = mlir::Operation::create(loc, name, mlir::TypeRange(),
                                                  mlir::ValueRange(), noAttrs,
                                                  mlir::OpaqueProperties(&props),
                                                  mlir::BlockRange(), /*numRegions=*/0);
    b.insert(op);
    return llvm::cast<OpT>(op);
  }

private:
  mlir::OperationName name;
  mlir::DictionaryAttr noAttrs;
};

/// f64 and i64 attributes uniqued once per distinct value, for the
/// lowering's stream ops (whose fields are still attributes; the pipefill
/// instructions' are native). Their fields repeat (durations, byte counts,
/// events), and going through the context's uniquer for every op costs
/// more than building the op. One cache per thread.
class AttrCache {
public:
  explicit AttrCache(mlir::MLIRContext *ctx) : b(ctx) {}
  mlir::FloatAttr f64(double v) {
    mlir::FloatAttr &a = floats[llvm::bit_cast<uint64_t>(v)];
    if (!a)
      a = b.getF64FloatAttr(v);
    return a;
  }
  mlir::IntegerAttr i64(int64_t v) {
    mlir::IntegerAttr &a = ints[static_cast<uint64_t>(v)];
    if (!a)
      a = b.getI64IntegerAttr(v);
    return a;
  }

private:
  /// DenseMapInfo<uint64_t> hashes a key as key * 37, which keeps the low
  /// bits of the key: a double's low mantissa bits are zero for the round
  /// times of a schedule (2000.0 is 0x409F400000000000) and byte counts are
  /// multiples of large powers of two, so nearly every key fell into one
  /// bucket and each lookup probed a long chain. Mixed keys spread.
  /// Reserved keys: NaN bit patterns for doubles (as DenseMapInfo<uint64_t>),
  /// INT64_MAX and INT64_MIN for integers (as DenseMapInfo<int64_t>).
  template <uint64_t Empty, uint64_t Tombstone> struct MixedKeyInfo {
    static uint64_t getEmptyKey() { return Empty; }
    static uint64_t getTombstoneKey() { return Tombstone; }
    static unsigned getHashValue(uint64_t v) {
      v ^= v >> 33;
      v *= 0xff51afd7ed558ccdull;
      v ^= v >> 33;
      return static_cast<unsigned>(v);
    }
    static bool isEqual(uint64_t a, uint64_t b) { return a == b; }
  };
  mlir::Builder b;
  llvm::DenseMap<uint64_t, mlir::FloatAttr, MixedKeyInfo<~0ull, ~0ull - 1>> floats;
  llvm::DenseMap<uint64_t, mlir::IntegerAttr,
                 MixedKeyInfo<0x7fffffffffffffffull, 0x8000000000000000ull>>
      ints;
};

/// Creates instruction ops through OpFactory, their fields stored natively
/// in the ops' properties. One per thread.
class InstrBuilder {
public:
  explicit InstrBuilder(mlir::MLIRContext *ctx)
      : payloads{PayloadAttr::get(ctx, Payload::Activation),
                 PayloadAttr::get(ctx, Payload::Gradient)},
        forward(ctx), backward(ctx), backwardInput(ctx), backwardWeight(ctx), send(ctx),
        recv(ctx), allReduce(ctx), optimizer(ctx) {}
  /// The op for one instruction, at the builder's insertion point.
  mlir::Operation *build(mlir::OpBuilder &b, mlir::Location loc, const sched::Instr &instr);

private:
  PayloadAttr payloads[2]; // activation, gradient
  OpFactory<ForwardOp> forward;
  OpFactory<BackwardOp> backward;
  OpFactory<BackwardInputOp> backwardInput;
  OpFactory<BackwardWeightOp> backwardWeight;
  OpFactory<SendOp> send;
  OpFactory<RecvOp> recv;
  OpFactory<AllReduceGradsOp> allReduce;
  OpFactory<OptimizerStepOp> optimizer;
};

/// Numbers for messages: "12.3 GB".
std::string describeBytes(int64_t bytes);

} // namespace pipefill

#endif // PIPEFILL_PASSES_SCHEDULEIR_H
