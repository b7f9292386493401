//===- StageLowering.cpp - one stage's lowering to streams ----------------===//
#include "passes/StageLowering.h"
#include "passes/ScheduleIR.h"
#include "support/Limits.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>

using namespace mlir;

namespace pipefill {

mlir::LogicalResult checkIterationFitsRuntime(mlir::Operation *anchor, double iterationUs) {
  if (iterationUs <= kMaxUs)
    return mlir::success();
  return anchor->emitError() << "the planned iteration takes "
                             << llvm::formatv("{0:F1}", iterationUs / 1e6).str()
                             << " s; pipefill-run runs iterations (and ops, bubbles and fill "
                                "chunks) of at most "
                             << llvm::formatv("{0:F0}", kMaxUs / 1e6).str() << " s";
}

namespace ps = pfstream;

StreamSink::~StreamSink() = default;

namespace {
double f64(llvm::APFloat v) { return v.convertToDouble(); }

/// Tag of a transfer: unique per (sender, receiver) pair because the
/// (payload, chunk, micro-batch) triple is. `m` micro-batches, `v` chunks.
int64_t tagOf(int64_t m, int64_t v, Payload payload, int64_t chunk, int64_t mb) {
  return (static_cast<int64_t>(payload) * v + chunk) * m + mb;
}

/// What the runtime needs of a stage's assignment to run its periodic plan
/// from the steady state on.
struct Schedule {
  int64_t prefix = 0, period = 1, batch = 1, batchesPerPeriod = 0;
  /// Batch index (along the assignment's stream) of the first batch begun
  /// in the first steady-state period.
  int64_t firstPeriodBatch = 0;
  /// Tail chunks (whole batches smaller than `batch`) number their samples
  /// along a stream of their own: its first sample in that period.
  int64_t firstPeriodTail = 0;
};

/// By the job symbol's uniqued name (a pointer), not its text: looked up
/// once or twice per fill chunk.
using Schedules = llvm::DenseMap<StringAttr, Schedule>;

/// Reads the assignments of a stage and where each job's steady state
/// begins (in its `bubbles`).
Schedules schedulesOf(StageOp stage, ArrayRef<BubbleOp> bubbles) {
  Schedules schedules;
  for (AssignmentOp a : stageAssignments(stage)) {
    Schedule &s = schedules[a.getJobAttr().getAttr()];
    s.prefix = a.getPrefix();
    s.period = a.getPeriod();
    s.batch = a.getBatch();
    s.batchesPerPeriod = a.getBatchesPerPeriod();
    s.firstPeriodBatch = std::numeric_limits<int64_t>::max();
    s.firstPeriodTail = std::numeric_limits<int64_t>::max();
  }
  for (BubbleOp bubble : bubbles)
    for (const FillChunk &fill : bubble.getFills()) {
      auto it = schedules.find(fill.job.getAttr());
      if (it == schedules.end() || fill.layerBegin != 0 || fill.iteration < it->second.prefix)
        continue;
      if (fill.batch < it->second.batch) {
        it->second.firstPeriodTail =
            std::min<int64_t>(it->second.firstPeriodTail, fill.sampleBegin);
        continue;
      }
      it->second.firstPeriodBatch = std::min<int64_t>(
          it->second.firstPeriodBatch, fill.sampleBegin / std::max<int64_t>(1, fill.batch));
    }
  return schedules;
}

/// The schedule of the chunk's job where the chunk lowers to runtime chunks
/// (its `repeat` of them), else null: a chunk of the prefix or of a job
/// without an assignment or without batches in its period lowers to none.
const Schedule *scheduleIfLowered(const FillChunk &fill, const Schedules &schedules) {
  auto it = schedules.find(fill.job.getAttr());
  if (it == schedules.end())
    return nullptr;
  const Schedule &s = it->second;
  if (fill.iteration < s.prefix || s.batchesPerPeriod <= 0)
    return nullptr;
  return &s;
}

/// One planned chunk of the steady state becomes runtime chunks: the
/// prefix iterations (run once, while the plan settles) are dropped, the
/// iteration inside the period becomes the phase, and samples are renumbered
/// within a period, a batch begun in the previous period being continued
/// with offset -1. A chunk that repeats whole batches becomes one chunk per
/// batch.
void lowerChunk(const FillChunk &fill, const Schedules &schedules, ps::FillChunkTable &out) {
  const Schedule *found = scheduleIfLowered(fill, schedules);
  if (!found)
    return;
  const Schedule &s = *found;
  int64_t batch = std::max<int64_t>(1, fill.batch);
  int64_t first = fill.sampleBegin / batch;
  // A tail chunk's samples follow the period's main batches.
  bool tail = batch < s.batch;
  for (int64_t k = 0; k < fill.repeat; ++k) {
    int64_t local = first + k - s.firstPeriodBatch, offset = 0;
    if (tail) {
      local = 0;
    } else if (local < 0) {
      local += s.batchesPerPeriod;
      offset = -1;
    }
    ps::FillChunkRow row;
    row.job = fill.job;
    row.layerBegin = fill.layerBegin;
    row.layerEnd = fill.layerEnd;
    row.batch = batch;
    row.sampleBegin = tail ? s.batch * s.batchesPerPeriod + fill.sampleBegin -
                                 s.firstPeriodTail + k * batch
                           : local * batch;
    row.iterationOffset = offset;
    row.weightsStreamed = fill.weights == WeightPlacement::Streamed;
    row.activationsOnHost = fill.acts == ActPlacement::Host;
    row.plannedUs = fill.predictedUs;
    row.peakBytes = fill.peakBytes;
    row.period = s.period;
    row.phase = fill.iteration - s.prefix;
    row.loc = fill.loc;
    out.push_back(row);
  }
}

/// The header of the stage's device; the all-reduce and optimizer times
/// are those of its instructions of that kind.
DeviceHeader headerOf(const PipelineFacts &facts, StageOp stage,
                      ArrayRef<sched::Instr> instrs, ArrayRef<Operation *> instrOps) {
  PipelineOp pipeline = facts.pipeline;
  DeviceHeader h;
  h.stage = stage.getIndex();
  h.memoryBytes = pipeline.getDeviceMemoryBytes();
  h.staticBytes = stage.getStaticBytes();
  h.plannedIterationUs = f64(*pipeline.getIterationUs());
  h.p2pLatencyUs = f64(pipeline.getP2pLatencyUs());
  h.p2pBandwidthGbps = f64(pipeline.getP2pBandwidthGbps());
  h.pcieBandwidthGbps = f64(pipeline.getPcieBandwidthGbps());
  double v = double(facts.v);
  double fwd = f64(stage.getForwardUs()) / v, bwd = f64(stage.getBackwardUs()) / v,
         w = f64(stage.getBackwardWeightUs()) / v;
  h.forwardUs = fwd;
  h.backwardUs = bwd;
  h.backwardInputUs = bwd - w;
  h.backwardWeightUs = w;
  for (const sched::Instr &instr : instrs) {
    if (instr.kind == sched::InstrKind::AllReduceGrads)
      h.allreduceUs = instr.durationUs;
    if (instr.kind == sched::InstrKind::OptimizerStep)
      h.optimizerUs = instr.durationUs;
  }
  return h;
}
} // namespace

PipelineFacts::PipelineFacts(PipelineOp pipeline) : pipeline(pipeline) {
  latency = f64(pipeline.getP2pLatencyUs());
  bandwidth = f64(pipeline.getP2pBandwidthGbps());
  v = pipeline.getVirtualStages();
  m = pipeline.getNumMicrobatches();
}

ps::ComputeKind toStreamKind(InstrKind kind) {
  switch (kind) {
  case InstrKind::Forward: return ps::ComputeKind::Forward;
  case InstrKind::Backward: return ps::ComputeKind::Backward;
  case InstrKind::BackwardInput: return ps::ComputeKind::BackwardInput;
  case InstrKind::BackwardWeight: return ps::ComputeKind::BackwardWeight;
  case InstrKind::AllReduceGrads: return ps::ComputeKind::AllReduce;
  case InstrKind::OptimizerStep: return ps::ComputeKind::Optimizer;
  case InstrKind::Send:
  case InstrKind::Recv: break;
  }
  return ps::ComputeKind::Forward;
}

ps::BubbleKind toStreamKind(BubbleKind kind) {
  switch (kind) {
  case BubbleKind::Warmup: return ps::BubbleKind::Warmup;
  case BubbleKind::Steady: return ps::BubbleKind::Steady;
  case BubbleKind::Cooldown: return ps::BubbleKind::Cooldown;
  case BubbleKind::Tail: return ps::BubbleKind::Tail;
  }
  return ps::BubbleKind::Steady;
}

SmallVector<BubbleOp> stageBubbles(StageOp stage) {
  return llvm::to_vector(stage.getBody().front().getOps<BubbleOp>());
}

void lowerStage(const PipelineFacts &facts, StageOp stage, ArrayRef<sched::Instr> instrs,
                ArrayRef<Operation *> instrOps, ArrayRef<BubbleOp> bubbles, StreamSink &sink) {
  sink.header(headerOf(facts, stage, instrs, instrOps));
  Block &body = stage.getBody().front();
  // One event per bubble that carries fill work, the main stream, and the
  // fill stream where some bubble is filled.
  uint64_t numEvents = 0;
  for (BubbleOp bubble : bubbles)
    if (!bubble.getFills().empty())
      sink.event(bubble.getLoc(), numEvents++);
  sink.streams(stage.getLoc(), numEvents > 0);

  Schedules schedules = schedulesOf(stage, bubbles);
  int64_t event = 0, bubbleId = 0;
  size_t next = 0;
  for (Operation &op : body) {
    if (auto bubble = dyn_cast<BubbleOp>(op)) {
      // The bubble on the main stream; where it is filled, a record there
      // and, on the fill stream, a wait for it followed by its chunks.
      int64_t id = bubbleId++;
      bool filled = !bubble.getFills().empty();
      if (filled)
        sink.record(bubble.getLoc(), event);
      sink.bubble(bubble, id);
      if (!filled)
        continue;
      sink.wait(bubble.getLoc(), event++);
      ps::FillChunkTable chunks;
      for (const FillChunk &fill : bubble.getFills())
        lowerChunk(fill, schedules, chunks);
      if (!chunks.empty())
        sink.fillChunks(bubble.getLoc(), id, std::move(chunks));
      continue;
    }
    if (next == instrs.size() || instrOps[next] != &op)
      continue;
    // A send, receive or compute on the main stream.
    const sched::Instr &instr = instrs[next++];
    const double at = instr.startUs; // 0 where the timing has no start
    auto tag = [&] {
      Payload payload = instr.payload == sched::Payload::Activation ? Payload::Activation
                                                                     : Payload::Gradient;
      return tagOf(facts.m, facts.v, payload, instr.chunk, instr.microbatch);
    };
    switch (instr.kind) {
    case sched::InstrKind::Send: {
      int64_t bytes = instr.bytes;
      double us = facts.latency + (facts.bandwidth > 0 ? bytes / (facts.bandwidth * 1e3) : 0.0);
      sink.send(op.getLoc(), instr.peer, bytes, tag(), us, at);
      break;
    }
    case sched::InstrKind::Recv:
      sink.recv(op.getLoc(), instr.peer, instr.bytes, tag(), at);
      break;
    default:
      sink.compute(op.getLoc(), fromSchedKind(instr.kind),
                   std::max<int64_t>(0, instr.microbatch), instr.chunk, instr.durationUs, at);
      break;
    }
  }
}

void countLoweredChunks(
    StageOp stage, ArrayRef<BubbleOp> bubbles,
    llvm::function_ref<void(FlatSymbolRefAttr job, int64_t begunSamples)> fn) {
  Schedules schedules = schedulesOf(stage, bubbles);
  for (BubbleOp bubble : bubbles)
    for (const FillChunk &fill : bubble.getFills()) {
      if (!scheduleIfLowered(fill, schedules) || fill.repeat < 1)
        continue;
      // lowerChunk's rows: `repeat` of them, each of batch max(1, batch),
      // beginning their batches where the chunk starts at layer 0.
      fn(fill.job, fill.layerBegin == 0 ? fill.repeat * std::max<int64_t>(1, fill.batch) : 0);
    }
}

} // namespace pipefill
