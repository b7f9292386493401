//===- PipefillOps.cpp - pipefill operations ------------------------------===//
//
// Structural rules that traits cannot express: stage numbering, index ranges,
// backward-after-forward order on a stage, send/recv pairing, and fill work
// that fits its bubble.
//
//===----------------------------------------------------------------------===//
#include "dialect/PipefillOps.h"

#include "llvm/Support/Format.h"
#include "dialect/PipefillConstraints.h"
#include "support/Format.h"
#include "support/Limits.h"
#include "support/Utf8.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

using namespace mlir;
using namespace pipefill;

#include "dialect/PipefillEnums.cpp.inc"
#include "dialect/PipefillInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "dialect/PipefillOps.cpp.inc"

//===----------------------------------------------------------------------===//
// PipelineOp
//===----------------------------------------------------------------------===//

bool PipelineOp::isExpanded() {
  for (StageOp stage : getStages())
    if (!stage.getBody().empty() && !stage.getBody().front().empty())
      return true;
  return false;
}

namespace {
/// Identifies one transfer: (sender stage, receiver stage, payload, mb, chunk).
using TransferKey = std::tuple<int64_t, int64_t, int, int64_t, int64_t>;
struct TransferEnd {
  Operation *op;
  int64_t bytes;
};

/// The fields of one instruction the verifier checks, read straight from
/// the op's properties (one type test per op rather than an interface
/// dispatch per field); the same values InstructionOpInterface returns.
struct InstrFields {
  InstrKind kind = InstrKind::Forward;
  int64_t mb = -1, chunk = 0, peer = -1, bytes = 0;
  Payload payload = Payload::Activation;
  const InstrTiming *timing = nullptr;
};

template <typename Op>
void readFields(Op op, InstrFields &f) {
  f.kind = Op::kInstrKind;
  if constexpr (::pipefill::detail::kHasMicrobatch<Op>) {
    f.mb = static_cast<int64_t>(op.getMicrobatch());
    f.chunk = static_cast<int64_t>(op.getChunk());
  }
  if constexpr (::pipefill::detail::kHasPeer<Op>) {
    f.peer = static_cast<int64_t>(op.getPeer());
    f.payload = op.getPayload();
  }
  if constexpr (::pipefill::detail::kHasBytes<Op>)
    f.bytes = static_cast<int64_t>(op.getBytes());
  f.timing = &op.getProperties().timing;
}

/// readFields for whichever instruction class `op` is; false for others.
bool readAnyFields(Operation &op, InstrFields &f) {
  f = InstrFields();
  TypeID id = op.getName().getTypeID();
  if (id == TypeID::get<ForwardOp>())
    return readFields(ForwardOp(&op), f), true;
  if (id == TypeID::get<BackwardOp>())
    return readFields(BackwardOp(&op), f), true;
  if (id == TypeID::get<SendOp>())
    return readFields(SendOp(&op), f), true;
  if (id == TypeID::get<RecvOp>())
    return readFields(RecvOp(&op), f), true;
  if (id == TypeID::get<BackwardInputOp>())
    return readFields(BackwardInputOp(&op), f), true;
  if (id == TypeID::get<BackwardWeightOp>())
    return readFields(BackwardWeightOp(&op), f), true;
  if (id == TypeID::get<AllReduceGradsOp>())
    return readFields(AllReduceGradsOp(&op), f), true;
  if (id == TypeID::get<OptimizerStepOp>())
    return readFields(OptimizerStepOp(&op), f), true;
  // Keep the list above complete: an instruction class it misses would
  // escape the checks.
  assert(!isa<InstructionOpInterface>(op) && "instruction class missing in readAnyFields");
  return false;
}

/// The instruction rules of a pipeline, stage by stage, then the transfer
/// pairing across stages, then completeness (every stage runs every
/// micro-batch and chunk once the pipeline holds instructions).
///
/// Transfers are identified by a dense 64-bit packing of their key (indices
/// are range-checked before packing). A send's sender is its own stage and a
/// recv's receiver is its own stage, so a repeated transfer can only repeat
/// one on the same stage: repeats are found with a per-stage set, and sends
/// are matched to recvs afterwards by sorting (no pipeline-wide hash table;
/// at 64 x 512 x 4 chunks these tables held 500k entries). Diagnostics are
/// those of a program-order scan: the first repeat, then the first send (in
/// program order) without its recv, then the first recv without its send.
class InstructionChecker {
public:
  InstructionChecker(int64_t numStages, int64_t numMb, int64_t numChunks)
      : numStages(numStages), numMb(numMb), numChunks(numChunks),
        seen(static_cast<size_t>(numMb) * numChunks) {}

  /// Times, index ranges, forward/backward order and transfers of one stage.
  LogicalResult checkStage(StageOp stage) {
    int64_t self = stage.getIndex();
    std::fill(seen.begin(), seen.end(), 0);
    stageTransfers.clear();
    InstrFields fields;
    stageHasCompute = false;
    for (Operation &op : stage.getBody().front())
      if (readAnyFields(op, fields))
        if (failed(checkInstruction(op, fields, self)))
          return failure();
    anyCompute |= stageHasCompute;
    if (!gap.stage)
      findGap(stage);
    return success();
  }

  /// Every send has its recv with the same bytes, every recv its send.
  LogicalResult matchTransfers();

  /// Once any stage holds compute instructions, every stage runs the forward
  /// and the backward (or backward_input and backward_weight) of every
  /// micro-batch and chunk: the first stage (in order) that misses one.
  LogicalResult checkComplete();

private:
  struct Transfer {
    TransferKey key;
    uint64_t packed;
    TransferEnd end;
  };
  // Per stage, per (mb, chunk): which of forward / backward / backward_input
  // / backward_weight has been seen.
  enum : uint8_t { kForward = 1, kBackward = 2, kInputGrad = 4, kWeightGrad = 8 };

  /// The first compute a stage misses: its forward, its backward (after a
  /// forward), or its backward_weight (after a backward_input).
  struct Gap {
    StageOp stage;
    InstrKind missing = InstrKind::Forward;
    int64_t mb = 0, chunk = 0;
  };

  uint64_t pack(const TransferKey &k) const {
    auto [from, to, payload, mb, chunk] = k;
    return ((((uint64_t)from * numStages + to) * 2 + payload) * numChunks + chunk) *
               (uint64_t)numMb +
           mb;
  }

  LogicalResult checkInstruction(Operation &op, const InstrFields &instr,
                                 int64_t self);
  LogicalResult checkOrder(Operation &op, InstrKind kind, int64_t mb,
                           int64_t chunk, int64_t self);
  LogicalResult addTransfer(Operation &op, const InstrFields &instr,
                            int64_t self, int64_t mb, int64_t chunk);
  void findGap(StageOp stage);

  const int64_t numStages, numMb, numChunks;
  std::vector<uint8_t> seen;
  bool stageHasCompute = false, anyCompute = false;
  Gap gap; ///< the first stage's first gap (gap.stage null: none so far)
  llvm::DenseSet<uint64_t> stageTransfers;
  std::vector<Transfer> sendList, recvList;
};

LogicalResult InstructionChecker::checkInstruction(Operation &op,
                                                   const InstrFields &instr,
                                                   int64_t self) {
  if (const InstrTiming *t = instr.timing) {
    if (!t->empty()) {
      std::string error = checkTiming(*t);
      if (!error.empty())
        return op.emitOpError() << error;
    }
    if (t->hasStart() && t->hasEnd() && t->endUs < t->startUs)
      return op.emitOpError() << "ends (" << fmtNum(t->endUs) << " us) before it starts ("
                              << fmtNum(t->startUs) << " us)";
  }
  int64_t mb = instr.mb, chunk = instr.chunk;
  if (mb < 0)
    return success();
  if (mb >= numMb)
    return op.emitOpError() << "micro-batch " << mb
                            << " is out of range [0, " << numMb << ")";
  if (chunk >= numChunks || chunk < 0)
    return op.emitOpError() << "chunk " << chunk << " is out of range [0, "
                            << numChunks << ")";
  InstrKind kind = instr.kind;
  if (kind == InstrKind::Send || kind == InstrKind::Recv)
    return addTransfer(op, instr, self, mb, chunk);
  return checkOrder(op, kind, mb, chunk, self);
}

/// Forward once, backward (or backward_input) once after it, backward_weight
/// once after backward_input.
LogicalResult InstructionChecker::checkOrder(Operation &op, InstrKind kind,
                                             int64_t mb, int64_t chunk,
                                             int64_t self) {
  uint8_t &flags = seen[static_cast<size_t>(mb) * numChunks + chunk];
  stageHasCompute |= kind == InstrKind::Forward || kind == InstrKind::Backward ||
                     kind == InstrKind::BackwardInput || kind == InstrKind::BackwardWeight;
  switch (kind) {
  case InstrKind::Forward:
    if (flags & kForward)
      return op.emitOpError() << "repeats the forward of micro-batch " << mb
                              << " chunk " << chunk << " on stage " << self;
    flags |= kForward;
    break;
  case InstrKind::Backward:
  case InstrKind::BackwardInput:
    if (!(flags & kForward))
      return op.emitOpError() << "of micro-batch " << mb << " chunk " << chunk
                              << " comes before its forward on stage " << self;
    if (flags & kBackward)
      return op.emitOpError() << "repeats the backward of micro-batch " << mb
                              << " chunk " << chunk << " on stage " << self;
    flags |= kBackward;
    if (kind == InstrKind::BackwardInput)
      flags |= kInputGrad;
    break;
  case InstrKind::BackwardWeight:
    if (!(flags & kInputGrad))
      return op.emitOpError() << "of micro-batch " << mb << " chunk " << chunk
                              << " comes before its backward_input on stage "
                              << self;
    if (flags & kWeightGrad)
      return op.emitOpError() << "repeats the backward_weight of micro-batch " << mb
                              << " chunk " << chunk << " on stage " << self;
    flags |= kWeightGrad;
    break;
  case InstrKind::Send:
  case InstrKind::Recv:
  case InstrKind::AllReduceGrads:
  case InstrKind::OptimizerStep:
    break;
  }
  return success();
}

/// Records the first (micro-batch, chunk) whose forward, backward or
/// backward_weight `stage` misses, from the flags its scan left in `seen`.
void InstructionChecker::findGap(StageOp stage) {
  for (size_t i = 0; i < seen.size(); ++i) {
    uint8_t flags = seen[i];
    InstrKind missing;
    if (!(flags & kForward))
      missing = InstrKind::Forward;
    else if (!(flags & kBackward))
      missing = InstrKind::Backward;
    else if ((flags & kInputGrad) && !(flags & kWeightGrad))
      missing = InstrKind::BackwardWeight;
    else
      continue;
    gap = {stage, missing, static_cast<int64_t>(i) / numChunks,
           static_cast<int64_t>(i) % numChunks};
    return;
  }
}

LogicalResult InstructionChecker::checkComplete() {
  if (!anyCompute || !gap.stage)
    return success();
  const int64_t self = gap.stage.getIndex(), mb = gap.mb, chunk = gap.chunk;
  if (gap.missing == InstrKind::Forward)
    return gap.stage.emitOpError()
           << "never runs the forward of micro-batch " << mb << " chunk " << chunk
           << "; a pipeline with instructions runs the forward and backward of "
              "every micro-batch and chunk on every stage";
  // The op that lacks its successor: the forward, or the backward_input.
  InstrKind have = gap.missing == InstrKind::Backward ? InstrKind::Forward
                                                      : InstrKind::BackwardInput;
  InstrFields fields;
  for (Operation &op : gap.stage.getBody().front())
    if (readAnyFields(op, fields) && fields.kind == have && fields.mb == mb &&
        fields.chunk == chunk)
      return op.emitOpError()
             << "of micro-batch " << mb << " chunk " << chunk << " on stage " << self
             << (gap.missing == InstrKind::Backward
                     ? " has no backward (or backward_input and backward_weight)"
                     : " has no backward_weight");
  return gap.stage.emitOpError() << "misses an instruction of micro-batch " << mb;
}

/// A send or recv: its peer in range, not a repeat on this stage; recorded
/// for matchTransfers.
LogicalResult InstructionChecker::addTransfer(Operation &op,
                                              const InstrFields &instr,
                                              int64_t self, int64_t mb,
                                              int64_t chunk) {
  int64_t peer = instr.peer;
  if (peer >= numStages)
    return op.emitOpError() << "peer stage " << peer << " is out of range [0, "
                            << numStages << ")";
  if (peer == self)
    return op.emitOpError() << "names its own stage " << self << " as peer";
  bool isSend = instr.kind == InstrKind::Send;
  Payload payload = instr.payload;
  TransferKey tk{isSend ? self : peer, isSend ? peer : self,
                 static_cast<int>(payload), mb, chunk};
  uint64_t packed = pack(tk);
  // Sends and recvs have disjoint packed keys on one stage (the stage
  // is the sender of one and the receiver of the other, and never its
  // own peer); the top bit keeps them apart all the same.
  if (!stageTransfers.insert(packed ^ (isSend ? 0 : (1ull << 63))).second)
    return op.emitOpError() << "duplicates a transfer of "
                            << stringifyPayload(payload) << " micro-batch "
                            << mb << " chunk " << chunk;
  (isSend ? sendList : recvList)
      .push_back({tk, packed, TransferEnd{&op, instr.bytes}});
  return success();
}

LogicalResult InstructionChecker::matchTransfers() {
  // (packed key, index in program order), sorted.
  auto sortedKeys = [](const std::vector<Transfer> &list) {
    std::vector<std::pair<uint64_t, uint32_t>> keys;
    keys.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i)
      keys.push_back({list[i].packed, static_cast<uint32_t>(i)});
    llvm::sort(keys);
    return keys;
  };
  auto sendKeys = sortedKeys(sendList), recvKeys = sortedKeys(recvList);
  // recvOfSend[i]: the recv index matching send i (or -1), and whether each
  // recv has a send. Keys are unique within each list.
  std::vector<int64_t> recvOfSend(sendList.size(), -1);
  std::vector<bool> recvMatched(recvList.size(), false);
  for (size_t i = 0, j = 0; i < sendKeys.size() && j < recvKeys.size();) {
    if (sendKeys[i].first < recvKeys[j].first) {
      ++i;
    } else if (recvKeys[j].first < sendKeys[i].first) {
      ++j;
    } else {
      recvOfSend[sendKeys[i].second] = recvKeys[j].second;
      recvMatched[recvKeys[j].second] = true;
      ++i;
      ++j;
    }
  }
  for (size_t i = 0; i < sendList.size(); ++i) {
    const TransferEnd &send = sendList[i].end;
    auto [from, to, payload, mb, chunk] = sendList[i].key;
    if (recvOfSend[i] < 0)
      return send.op->emitOpError()
             << "of " << stringifyPayload(static_cast<Payload>(payload))
             << " micro-batch " << mb << " chunk " << chunk << " to stage "
             << to << " has no matching recv on stage " << to;
    const TransferEnd &recv = recvList[recvOfSend[i]].end;
    if (recv.bytes != send.bytes)
      return recv.op->emitOpError()
             << "expects " << recv.bytes << " bytes but the matching "
             << "send from stage " << from << " sends " << send.bytes;
  }
  for (size_t i = 0; i < recvList.size(); ++i) {
    if (recvMatched[i])
      continue;
    auto [from, to, payload, mb, chunk] = recvList[i].key;
    return recvList[i].end.op->emitOpError()
           << "of " << stringifyPayload(static_cast<Payload>(payload))
           << " micro-batch " << mb << " chunk " << chunk << " from stage "
           << from << " has no matching send on stage " << from;
  }
  return success();
}
} // namespace

/// The shape limits of docs/reliability.md (those the JobSpec reader checks),
/// for MLIR written by hand: the region verifier sizes its tables by
/// micro-batches x virtual stages, and every pass by the chunk count. It runs
/// before the nested ops and verifyRegions (a failure here stops both).
LogicalResult PipelineOp::verify() {
  int64_t numStages = getNumStages(), numMb = getNumMicrobatches(),
          numChunks = getVirtualStages();
  for (auto [name, value, max] :
       {std::tuple<const char *, int64_t, int64_t>{"num_stages", numStages, kMaxStages},
        {"num_microbatches", numMb, kMaxMicrobatches},
        {"virtual_stages", numChunks, kMaxVirtualStages}})
    if (value > max)
      return emitOpError() << name << " = " << value << " exceeds the limit of " << max;
  // Each factor is bounded above, so the product (<= 2^36) is exact.
  int64_t chunks = numStages * numMb * numChunks;
  if (chunks > kMaxPipelineChunks)
    return emitOpError() << "has num_stages x num_microbatches x virtual_stages = " << chunks
                         << " micro-batch chunks; at most " << kMaxPipelineChunks
                         << " are allowed (about 2^24 instructions)";
  // The fill planner's settings, named as written here (the planner refuses them too, in its
  // own words, at the pipeline as a whole).
  if (double margin = getSafetyMarginAttr().getValueAsDouble(); !(margin < 1.0)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", margin);
    return emitOpError() << "safety_margin = " << text
                         << " must be below 1: it is the share of each bubble kept free";
  }
  if (!(getHbmBandwidthGbpsAttr().getValueAsDouble() > 0.0))
    return emitOpError() << "hbm_bandwidth_gbps must be positive: fill layers' memory time is "
                            "their bytes over it";
  if (std::optional<llvm::ArrayRef<int64_t>> sizes = getBatchSizes()) {
    if (sizes->empty())
      return emitOpError() << "batch_sizes is empty (leave it out for the planner's default "
                              "sizes)";
    for (int64_t b : *sizes)
      if (b <= 0 || b > std::numeric_limits<int32_t>::max())
        return emitOpError() << "batch_sizes holds " << b
                             << ": a batch size must be in [1, 2^31-1]";
  }
  return success();
}

LogicalResult PipelineOp::verifyRegions() {
  Block &block = getBody().front();
  int64_t numStages = getNumStages();
  int64_t numMb = getNumMicrobatches();
  int64_t numChunks = getVirtualStages();

  if (numChunks > 1 && getSchedule() != ScheduleKind::Interleaved1F1B &&
      getSchedule() != ScheduleKind::Imported)
    return emitOpError() << "virtual_stages = " << numChunks
                         << " requires schedule interleaved_1f1b (or imported)";

  int64_t position = 0;
  for (Operation &op : block) {
    auto stage = dyn_cast<StageOp>(op);
    if (!stage)
      return op.emitOpError() << "is not allowed directly in a pipeline; "
                                 "expected only 'pipefill.stage' ops";
    if (static_cast<int64_t>(stage.getIndex()) != position)
      return stage.emitOpError()
             << "has index " << stage.getIndex() << " at position " << position
             << "; stages must be numbered 0.." << numStages - 1 << " in order";
    ++position;
  }
  if (position != numStages)
    return emitOpError() << "has " << position << " stages but num_stages = "
                         << numStages;

  InstructionChecker checker(numStages, numMb, numChunks);
  for (StageOp stage : getStages())
    if (failed(checker.checkStage(stage)))
      return failure();
  if (failed(checker.matchTransfers()))
    return failure();
  return checker.checkComplete();
}

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

LogicalResult StageOp::verify() {
  if (getBackwardWeightUs().convertToDouble() >
      getBackwardUs().convertToDouble())
    return emitOpError() << "backward_weight_us ("
                         << fmtNum(getBackwardWeightUs().convertToDouble())
                         << ") exceeds backward_us ("
                         << fmtNum(getBackwardUs().convertToDouble()) << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

namespace {
/// What the fields' attribute constraints checked before the fields became
/// native numbers (Pipefill_InstrOp): indices and bytes >= 0, durations >= 0
/// as a double compares (+0, -0 and +inf pass; NaN does not). A generic form
/// without a field's key leaves its "unset" value (-1, NaN), caught here.
template <typename Op>
LogicalResult verifyInstrFields(Op op) {
  auto index = [&](const char *name, int64_t value) -> LogicalResult {
    if (value >= 0)
      return success();
    return op.emitOpError() << name << " must be >= 0 (got " << value << ")";
  };
  if constexpr (::pipefill::detail::kHasMicrobatch<Op>)
    if (failed(index("microbatch", op.getMicrobatch())) ||
        failed(index("chunk", op.getChunk())))
      return failure();
  if constexpr (::pipefill::detail::kHasPeer<Op>)
    if (failed(index("peer", op.getPeer())))
      return failure();
  if constexpr (::pipefill::detail::kHasBytes<Op>)
    if (failed(index("bytes", op.getBytes())))
      return failure();
  if constexpr (::pipefill::detail::kHasDuration<Op>) {
    double us = op.getDurationUs();
    if (!(us >= 0)) {
      std::string text;
      llvm::raw_string_ostream(text) << llvm::format("%g", us);
      return op.emitOpError() << "duration_us must be a number >= 0 (got " << text << ")";
    }
    // The JobSpec's bound for one op's time (support/Limits.h): beyond it, sums lose the
    // microsecond and printed times come out wrong (1e300 us printed as 1e30 ms).
    if (us > kMaxUs) {
      std::string text;
      llvm::raw_string_ostream(text) << llvm::format("%g", us);
      return op.emitOpError() << "duration_us " << text
                              << " exceeds 1e+09 us (1000 s), the limit for one instruction";
    }
  }
  return success();
}
} // namespace

// The fields each instruction class has: InstructionOpInterface, the
// verifier and the passes detect them by their accessors, so a class that
// lost one would read as "no micro-batch" everywhere, silently.
namespace {
template <typename Op>
constexpr bool hasFields(bool microbatch, bool peer, bool bytes, bool duration) {
  using namespace ::pipefill::detail;
  return kHasMicrobatch<Op> == microbatch && kHasPeer<Op> == peer &&
         kHasBytes<Op> == bytes && kHasDuration<Op> == duration;
}
static_assert(hasFields<ForwardOp>(true, false, false, true));
static_assert(hasFields<BackwardOp>(true, false, false, true));
static_assert(hasFields<BackwardInputOp>(true, false, false, true));
static_assert(hasFields<BackwardWeightOp>(true, false, false, true));
static_assert(hasFields<SendOp>(true, true, true, false));
static_assert(hasFields<RecvOp>(true, true, true, false));
static_assert(hasFields<AllReduceGradsOp>(false, false, true, true));
static_assert(hasFields<OptimizerStepOp>(false, false, false, true));
} // namespace

LogicalResult ForwardOp::verify() { return verifyInstrFields(*this); }
LogicalResult BackwardOp::verify() { return verifyInstrFields(*this); }
LogicalResult BackwardInputOp::verify() { return verifyInstrFields(*this); }
LogicalResult BackwardWeightOp::verify() { return verifyInstrFields(*this); }
LogicalResult SendOp::verify() { return verifyInstrFields(*this); }
LogicalResult RecvOp::verify() { return verifyInstrFields(*this); }
LogicalResult AllReduceGradsOp::verify() { return verifyInstrFields(*this); }
LogicalResult OptimizerStepOp::verify() { return verifyInstrFields(*this); }

//===----------------------------------------------------------------------===//
// BubbleOp
//===----------------------------------------------------------------------===//

SmallVector<FillIterationTotal, 8> pipefill::fillIterationTotals(BubbleOp bubble) {
  // A bubble holds a few chunks of a few jobs: a small vector, searched
  // linearly, then sorted (the order a std::map would give).
  SmallVector<FillIterationTotal, 8> totals;
  for (const FillChunk &fill : bubble.getFills()) {
    StringRef job = fill.getJob();
    int64_t iteration = fill.iteration;
    double us = fill.predictedUs * fill.repeat;
    auto it = llvm::find_if(totals, [&](const FillIterationTotal &t) {
      return t.iteration == iteration && t.job == job;
    });
    if (it == totals.end())
      totals.push_back({job, iteration, us});
    else
      it->us += us;
  }
  llvm::sort(totals, [](const FillIterationTotal &a, const FillIterationTotal &b) {
    return std::make_pair(a.job, a.iteration) < std::make_pair(b.job, b.iteration);
  });
  return totals;
}

SmallVector<std::pair<StringRef, double>, 4>
pipefill::worstIterationPerJob(ArrayRef<FillIterationTotal> totals) {
  SmallVector<std::pair<StringRef, double>, 4> perJob;
  for (size_t i = 0; i < totals.size();) {
    double worst = 0;
    size_t j = i;
    for (; j < totals.size() && totals[j].job == totals[i].job; ++j)
      worst = std::max(worst, totals[j].us);
    perJob.push_back({totals[i].job, worst});
    i = j;
  }
  return perJob;
}

double pipefill::worstIterationFillUs(BubbleOp bubble) {
  SmallVector<FillIterationTotal, 8> totals = fillIterationTotals(bubble);
  SmallVector<std::pair<StringRef, double>, 4> perJob = worstIterationPerJob(totals);
  double planned = 0;
  for (auto &[job, worst] : perJob)
    planned += worst;
  // One job, or a sum that fits: the iterations need not be looked at.
  const double duration = bubble.getDurationUs();
  if (perJob.size() <= 1 || planned <= duration * (1 + 1e-9) + 1e-6)
    return planned;
  auto perIteration = [&](StringRef job, int64_t iteration) -> const FillIterationTotal * {
    auto it = llvm::lower_bound(totals, std::make_pair(job, iteration),
                                [](const FillIterationTotal &t,
                                   const std::pair<StringRef, int64_t> &key) {
                                  return std::make_pair(t.job, t.iteration) < key;
                                });
    return it != totals.end() && it->job == job && it->iteration == iteration ? &*it
                                                                               : nullptr;
  };
  std::map<StringRef, std::pair<int64_t, int64_t>> schedule; // prefix, period
  if (auto stage = bubble->getParentOfType<StageOp>())
    for (AssignmentOp a : stageAssignments(stage))
      schedule[a.getJob()] = {(int64_t)a.getPrefix(), (int64_t)a.getPeriod()};
  constexpr int64_t kMaxHorizon = 4096;
  int64_t maxPrefix = 0, lcm = 1;
  for (auto &[job, total] : perJob) {
    auto it = schedule.find(job);
    // A prefix past the horizon is unbounded too (and keeps maxPrefix + lcm
    // from overflowing, whatever the assignment's own verifier said yet).
    if (it == schedule.end() || it->second.second < 1 || it->second.first < 0 ||
        it->second.first > kMaxHorizon)
      return planned;
    maxPrefix = std::max(maxPrefix, it->second.first);
    lcm = std::lcm(lcm, it->second.second);
    if (lcm > kMaxHorizon)
      return planned;
  }
  if (maxPrefix + lcm > kMaxHorizon)
    return planned;
  planned = 0;
  for (int64_t t = 0; t < maxPrefix + lcm; ++t) {
    double sum = 0;
    for (auto &[job, total] : perJob) {
      auto [prefix, period] = schedule[job];
      int64_t listed = t < prefix ? t : prefix + (t - prefix) % period;
      if (const FillIterationTotal *entry = perIteration(job, listed))
        sum += entry->us;
    }
    planned = std::max(planned, sum);
  }
  return planned;
}

InFlightDiagnostic BubbleOp::emitFillError(size_t i) {
  LocationAttr loc = getFills()[i].loc;
  return mlir::emitError(loc ? Location(loc) : getLoc())
         << "'" << getOperationName() << "' op fill " << i << " ";
}

LogicalResult BubbleOp::verify() {
  // The native start, duration and free bytes (no attribute constraint
  // checks them): a finite time >= 0 (-0 passes), bytes >= 0.
  for (auto [name, value] : {std::pair<const char *, double>{"start", getStartUs()},
                             std::pair<const char *, double>{"duration", getDurationUs()}})
    if (!(std::isfinite(value) && value >= 0))
    {
      std::string text;
      llvm::raw_string_ostream(text) << llvm::format("%g", value);
      return emitOpError() << name << " must be a finite number >= 0 (got " << text << ")";
    }
  if (getFreeBytes() < 0)
    return emitOpError() << "free bytes must be >= 0 (got " << getFreeBytes() << ")";
  auto pipeline = (*this)->getParentOfType<PipelineOp>();
  if (pipeline && static_cast<int64_t>(getFreeBytes()) >
                      static_cast<int64_t>(pipeline.getDeviceMemoryBytes()))
    return emitOpError() << "claims " << getFreeBytes()
                         << " free bytes, more than the device's "
                         << pipeline.getDeviceMemoryBytes();
  ArrayRef<FillChunk> fills = getFills();
  if (fills.empty())
    return success();
  const int64_t freeBytes = getFreeBytes();
  for (size_t i = 0; i < fills.size(); ++i) {
    std::string error = checkFillChunk(fills[i]);
    if (!error.empty())
      return emitFillError(i) << error;
    if (fills[i].peakBytes > freeBytes)
      return emitFillError(i) << "needs " << fills[i].peakBytes << " bytes but the bubble has "
                              << freeBytes << " free";
  }
  // Plans repeat over iterations and several jobs may share a bubble: in each
  // iteration of the run the jobs' totals in that iteration must fit
  // together.
  const double duration = getDurationUs();
  const double planned = worstIterationFillUs(*this);
  if (planned > duration * (1 + 1e-9) + 1e-6)
    return emitOpError() << "holds " << fmtNum(planned)
                         << " us of fill work but lasts only " << fmtNum(duration)
                         << " us";
  return success();
}

//===----------------------------------------------------------------------===//
// FillJobOp, FillOp
//===----------------------------------------------------------------------===//

int64_t FillJobOp::getNumLayers() {
  return std::distance(getLayers().begin(), getLayers().end());
}

LogicalResult FillJobOp::verifyRegions() {
  for (Operation &op : getBody().front())
    if (!isa<LayerOp>(op))
      return op.emitOpError()
             << "is not allowed in a fill job; expected only 'pipefill.layer'";
  if (getNumLayers() == 0)
    return emitOpError() << "'" << getSymName() << "' has no layers";
  return success();
}

int64_t FillJobOp::getNumPasses() {
  return getNumLayers() * (getKind() == JobKind::Training ? 2 : 1);
}

LogicalResult BubbleOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  ArrayRef<FillChunk> fills = getFills();
  if (fills.empty())
    return success();
  // Bubbles, stages and pipelines are not symbol tables, so the nearest one
  // is above the pipeline: skipped by op class instead of asking each of them
  // for the trait. A bubble's chunks name a few jobs: each looked up once.
  Operation *table = (*this)->getParentOp();
  while (table && isa<StageOp, PipelineOp>(table))
    table = table->getParentOp();
  FlatSymbolRefAttr lastRef;
  FillJobOp job;
  for (size_t i = 0; i < fills.size(); ++i) {
    const FillChunk &fill = fills[i];
    if (fill.job != lastRef) {
      lastRef = fill.job;
      job = isa_and_nonnull<ModuleOp>(table)
                ? symbolTable.lookupSymbolIn<FillJobOp>(table, fill.job)
                : symbolTable.lookupNearestSymbolFrom<FillJobOp>(*this, fill.job);
    }
    if (!job)
      return emitFillError(i) << "refers to " << fill.job
                              << ", which is not a 'pipefill.fill_job'";
    if (fill.layerEnd > job.getNumPasses())
      return emitFillError(i) << "runs layers up to " << fill.layerEnd << " but " << fill.job
                              << " has " << job.getNumPasses()
                              << (job.getKind() == JobKind::Training
                                      ? " passes (forward and backward of each layer)"
                                      : "");
  }
  return success();
}

LogicalResult AssignmentOp::verify() {
  // Only the op before is looked at: the stage's leading run of assignments
  // is checked op by op, in O(1) each.
  Operation *prev = (*this)->getPrevNode();
  if (prev && !isa<AssignmentOp>(prev))
    return emitOpError() << "must come before every instruction and bubble of its "
                            "stage (after '"
                         << prev->getName() << "')";
  // The runtime's ranges (support/Limits.h); the plan's readers hold these
  // in 32 bits and add prefix and period.
  for (auto [name, value, max] :
       {std::tuple<const char *, uint64_t, int64_t>{"prefix", getPrefix(), kMaxFillPrefix},
        {"period", getPeriod(), kMaxFillPeriod},
        {"batch", getBatch(), kMaxFillBatch}})
    if (value > static_cast<uint64_t>(max))
      return emitOpError() << name << " = " << value << " exceeds the limit of " << max;
  return success();
}

// The runtime holds a layer's dimensions in 32 bits (StreamProgram, pfrt_fill_layer_desc): a
// larger one would be exported cut to its low bits, a different layer.
LogicalResult LayerOp::verify() {
  constexpr int64_t kMax = UINT32_MAX;
  for (auto [name, value] : {std::pair<const char *, std::optional<uint64_t>>{"hidden", getHidden()},
                             {"heads", getHeads()},
                             {"seq", getSeq()},
                             {"ffn", getFfn()}})
    if (value && *value > static_cast<uint64_t>(kMax))
      return emitOpError() << name << " = " << *value
                           << " exceeds the runtime's 32-bit limit of " << kMax;
  // Without ffn the runtime's layer takes 4 x hidden (encoder feed-forward, MLP hidden width).
  const std::optional<uint64_t> hidden = getHidden();
  if (hidden && !getFfn() && getWorkload() &&
      (*getWorkload() == "ENCODER_LAYER" || *getWorkload() == "MLP") &&
      4 * *hidden > static_cast<uint64_t>(kMax))
    return emitOpError() << "hidden = " << *hidden << " gives ffn = 4 x hidden = " << 4 * *hidden
                         << ", over the runtime's 32-bit limit of " << kMax
                         << "; give ffn explicitly";
  return success();
}

LogicalResult
AssignmentOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto job =
      symbolTable.lookupNearestSymbolFrom<FillJobOp>(*this, getJobAttr());
  if (!job)
    return emitOpError() << "refers to " << getJobAttr()
                         << ", which is not a 'pipefill.fill_job'";
  if ((getOptimizerOnHost() || getCheckpoint()) &&
      job.getKind() != JobKind::Training)
    return emitOpError() << "sets training knobs for inference job "
                         << getJobAttr();
  return success();
}
