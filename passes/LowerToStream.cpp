//===- LowerToStream.cpp - pipefill-lower-to-stream -----------------------===//
#include "dialect/stream/PfstreamOps.h"
#include "passes/Passes.h"
#include "passes/ScheduleIR.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/StringMap.h"

#include <limits>

using namespace mlir;

namespace pipefill {
#define GEN_PASS_DEF_LOWERTOSTREAM
#include "passes/Passes.h.inc"

namespace {
namespace ps = pfstream;

double f64(llvm::APFloat v) { return v.convertToDouble(); }

ps::ComputeKind computeKind(InstrKind kind) {
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

ps::BubbleKind toStream(BubbleKind kind) {
  switch (kind) {
  case BubbleKind::Warmup: return ps::BubbleKind::Warmup;
  case BubbleKind::Steady: return ps::BubbleKind::Steady;
  case BubbleKind::Cooldown: return ps::BubbleKind::Cooldown;
  case BubbleKind::Tail: return ps::BubbleKind::Tail;
  }
  return ps::BubbleKind::Steady;
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

llvm::StringMap<Schedule> schedulesOf(StageOp stage);
void lowerChunk(const FillChunk &fill, const llvm::StringMap<Schedule> &schedules,
                ps::FillChunkTable &out);

/// Tag of a transfer: unique per (sender, receiver) pair because the
/// (payload, chunk, micro-batch) triple is. `m` micro-batches, `v` chunks.
int64_t tagOf(int64_t m, int64_t v, Payload payload, int64_t chunk, int64_t mb) {
  return (static_cast<int64_t>(payload) * v + chunk) * m + mb;
}

/// What every stage's lowering reads of the pipeline (read-only, shared by
/// the threads that lower stages in parallel).
struct PipelineFacts {
  PipelineOp pipeline;
  double latency = 0, bandwidth = 0;
  int64_t v = 1, m = 1;
  /// The six compute kinds' attributes, uniqued once rather than per op.
  ps::ComputeKindAttr kindAttrs[6];

  explicit PipelineFacts(PipelineOp pipeline) : pipeline(pipeline) {
    MLIRContext *ctx = pipeline.getContext();
    latency = f64(pipeline.getP2pLatencyUs());
    bandwidth = f64(pipeline.getP2pBandwidthGbps());
    v = pipeline.getVirtualStages();
    m = pipeline.getNumMicrobatches();
    const InstrKind kinds[] = {InstrKind::Forward,        InstrKind::Backward,
                               InstrKind::BackwardInput,  InstrKind::BackwardWeight,
                               InstrKind::AllReduceGrads, InstrKind::OptimizerStep};
    for (int i = 0; i < 6; ++i)
      kindAttrs[i] = ps::ComputeKindAttr::get(ctx, computeKind(kinds[i]));
  }

  ps::ComputeKindAttr kindAttr(InstrKind kind) const {
    switch (kind) {
    case InstrKind::Forward: return kindAttrs[0];
    case InstrKind::Backward: return kindAttrs[1];
    case InstrKind::BackwardInput: return kindAttrs[2];
    case InstrKind::BackwardWeight: return kindAttrs[3];
    case InstrKind::AllReduceGrads: return kindAttrs[4];
    case InstrKind::OptimizerStep: return kindAttrs[5];
    case InstrKind::Send:
    case InstrKind::Recv: break;
    }
    return kindAttrs[0];
  }
};

/// Lowers one stage into its device: events, the main and fill streams, the
/// stage's instructions and bubbles in block order, and each filled bubble's
/// chunks. Touches only the stage, its device and its own attribute cache.
class StageLowering {
public:
  StageLowering(const PipelineFacts &facts, StageOp stage, ps::DeviceOp device)
      : facts(facts), stage(stage), device(device), ctx(stage.getContext()), b(ctx),
        attrs(ctx) {}

  void run(ArrayRef<sched::Instr> instrs, ArrayRef<Operation *> instrOps) {
    setDeviceAttrs();
    createStreams();
    llvm::StringMap<Schedule> schedules = schedulesOf(stage);
    size_t next = 0;
    for (Operation &op : stage.getBody().front()) {
      b.setInsertionPointToEnd(mainBody);
      if (auto bubble = dyn_cast<BubbleOp>(op)) {
        lowerBubble(bubble, schedules);
        continue;
      }
      if (next == instrs.size() || instrOps[next] != &op)
        continue;
      lowerInstr(op, instrs[next++]);
    }
  }

private:
  void setDeviceAttrs() {
    PipelineOp pipeline = facts.pipeline;
    device.setIndex(stage.getIndex());
    device.setStage(stage.getIndex());
    device.setMemoryBytes(pipeline.getDeviceMemoryBytes());
    device.setStaticBytes(stage.getStaticBytes());
    device.setPlannedIterationUs(*pipeline.getIterationUs());
    device.setP2pLatencyUs(pipeline.getP2pLatencyUs());
    device.setP2pBandwidthGbps(pipeline.getP2pBandwidthGbps());
    device.setPcieBandwidthGbps(pipeline.getPcieBandwidthGbps());
    double v = double(facts.v);
    double fwd = f64(stage.getForwardUs()) / v, bwd = f64(stage.getBackwardUs()) / v,
           w = f64(stage.getBackwardWeightUs()) / v;
    device.setForwardUs(llvm::APFloat(fwd));
    device.setBackwardUs(llvm::APFloat(bwd));
    device.setBackwardInputUs(llvm::APFloat(bwd - w));
    device.setBackwardWeightUs(llvm::APFloat(w));
  }

  /// One event per bubble that carries fill work, the main stream, and the
  /// fill stream where some bubble is filled.
  void createStreams() {
    Block *deviceBody = b.createBlock(&device.getBody());
    int64_t numEvents = 0;
    for (BubbleOp bubble : stage.getBody().front().getOps<BubbleOp>())
      if (!bubble.getFills().empty()) {
        b.setInsertionPointToEnd(deviceBody);
        b.create<ps::EventOp>(bubble.getLoc(), (uint64_t)numEvents,
                              "bubble" + std::to_string(numEvents));
        ++numEvents;
      }
    b.setInsertionPointToEnd(deviceBody);
    auto mainStream = b.create<ps::StreamOp>(stage.getLoc(), uint64_t(0),
                                             ps::StreamRole::Main, ps::Priority::High);
    mainBody = b.createBlock(&mainStream.getBody());
    if (numEvents > 0) {
      b.setInsertionPointToEnd(deviceBody);
      auto fillStream = b.create<ps::StreamOp>(stage.getLoc(), uint64_t(1),
                                               ps::StreamRole::Fill, ps::Priority::Low);
      fillBody = b.createBlock(&fillStream.getBody());
    }
  }

  /// The bubble on the main stream; where it is filled, a record there and,
  /// on the fill stream, a wait for it followed by its chunks.
  void lowerBubble(BubbleOp bubble, const llvm::StringMap<Schedule> &schedules) {
    int64_t id = bubbleId++;
    bool filled = !bubble.getFills().empty();
    Location loc = bubble.getLoc();
    if (filled)
      b.create<ps::RecordOp>(loc, attrs.i64(event));
    b.create<ps::BubbleOp>(loc, attrs.i64(id),
                           ps::BubbleKindAttr::get(ctx, toStream(bubble.getKind())),
                           bubble.getStartUsAttr(), bubble.getDurationUsAttr(),
                           bubble.getFreeBytesAttr());
    if (!filled)
      return;
    b.setInsertionPointToEnd(fillBody);
    b.create<ps::WaitOp>(loc, attrs.i64(event++));
    ps::FillChunkTable chunks;
    for (const FillChunk &fill : bubble.getFills())
      lowerChunk(fill, schedules, chunks);
    if (!chunks.empty()) {
      auto op = b.create<ps::FillChunksOp>(loc, attrs.i64(id));
      op.getChunkTable() = std::move(chunks);
    }
  }

  /// A send, receive or compute on the main stream.
  void lowerInstr(Operation &op, const sched::Instr &instr) {
    const double at = cast<InstructionOpInterface>(op).getStartUsOr(0.0);
    auto tag = [&] {
      Payload payload = instr.payload == sched::Payload::Activation ? Payload::Activation
                                                                     : Payload::Gradient;
      return attrs.i64(tagOf(facts.m, facts.v, payload, instr.chunk, instr.microbatch));
    };
    switch (instr.kind) {
    case sched::InstrKind::Send: {
      int64_t bytes = instr.bytes;
      double us = facts.latency +
                  (facts.bandwidth > 0 ? bytes / (facts.bandwidth * 1e3) : 0.0);
      b.create<ps::SendOp>(op.getLoc(), attrs.i64(instr.peer), attrs.i64(bytes), tag(),
                           attrs.f64(us))
          .getProperties()
          .planned_start_us = at;
      return;
    }
    case sched::InstrKind::Recv:
      b.create<ps::RecvOp>(op.getLoc(), attrs.i64(instr.peer), attrs.i64(instr.bytes), tag())
          .getProperties()
          .planned_start_us = at;
      return;
    default: {
      InstrKind kind = cast<InstructionOpInterface>(op).getInstrKind();
      double us = instr.durationUs;
      if (kind == InstrKind::AllReduceGrads)
        device.setAllreduceUs(llvm::APFloat(us));
      if (kind == InstrKind::OptimizerStep)
        device.setOptimizerUs(llvm::APFloat(us));
      int64_t mb = std::max<int64_t>(0, instr.microbatch);
      b.create<ps::ComputeOp>(op.getLoc(), facts.kindAttr(kind), attrs.i64(mb),
                              attrs.i64(instr.chunk), attrs.f64(us))
          .getProperties()
          .planned_start_us = at;
      return;
    }
    }
  }

  const PipelineFacts &facts;
  StageOp stage;
  ps::DeviceOp device;
  MLIRContext *ctx;
  OpBuilder b;
  AttrCache attrs;
  Block *mainBody = nullptr, *fillBody = nullptr;
  int64_t event = 0, bubbleId = 0;
};

struct LowerToStreamPass : public impl::LowerToStreamBase<LowerToStreamPass> {
  using LowerToStreamBase::LowerToStreamBase;

  void runOnOperation() override {
    SmallVector<PipelineOp> pipelines(getOperation().getOps<PipelineOp>());
    for (PipelineOp pipeline : pipelines) {
      if (failed(lower(pipeline)))
        return signalPassFailure();
      pipeline.erase();
    }
  }

  LogicalResult lower(PipelineOp pipeline) {
    if (!pipeline.getIterationUs())
      return pipeline.emitError()
             << "has no simulated timeline to lower; run pipefill-simulate "
                "(or --pipefill-compile) first";
    // The runtime rejects an order that deadlocks; so does the compiler,
    // with the same rule, before handing the program on. The instruction
    // lists read for the check are also what the stages are lowered from.
    sched::Schedule schedule;
    SmallVector<SmallVector<Operation *>> instrOps;
    if (failed(verifyDeadlockFree(pipeline, schedule, instrOps)))
      return failure();
    OpBuilder b(pipeline);
    auto program = b.create<ps::ProgramOp>(
        pipeline.getLoc(), (pipeline.getSymName() + "_stream").str(),
        static_cast<uint64_t>(iterations.getValue()),
        llvm::APFloat(f64(*pipeline.getIterationUs())), /*seed=*/uint64_t(0));
    b.createBlock(&program.getBody());
    PipelineFacts facts(pipeline);

    // The devices are created in order here; each one's body is then built
    // from its stage alone, so stages are lowered on parallel threads.
    SmallVector<StageOp> stages(pipeline.getStages());
    SmallVector<ps::DeviceOp> devices;
    for (StageOp stage : stages)
      devices.push_back(b.create<ps::DeviceOp>(stage.getLoc(), TypeRange{}, ValueRange{},
                                               ArrayRef<NamedAttribute>{}));
    mlir::parallelFor(&getContext(), 0, stages.size(), [&](size_t index) {
      // schedule[index] lists the stage's instructions in block order.
      StageLowering(facts, stages[index], devices[index])
          .run(schedule[index], instrOps[index]);
      // The stage is consumed: freeing it now lets the next devices reuse its
      // memory, so the peak is one copy of the IR rather than two.
      stages[index].getBody().front().clear();
      // So are its instruction lists.
      std::vector<sched::Instr>().swap(schedule[index]);
      SmallVector<Operation *>().swap(instrOps[index]);
    });
    return success();
  }
};

/// Reads the assignments of a stage and where each job's steady state
/// begins.
llvm::StringMap<Schedule> schedulesOf(StageOp stage) {
  llvm::StringMap<Schedule> schedules;
  for (AssignmentOp a : stage.getBody().front().getOps<AssignmentOp>()) {
    Schedule &s = schedules[a.getJob()];
    s.prefix = a.getPrefix();
    s.period = a.getPeriod();
    s.batch = a.getBatch();
    s.batchesPerPeriod = a.getBatchesPerPeriod();
    s.firstPeriodBatch = std::numeric_limits<int64_t>::max();
    s.firstPeriodTail = std::numeric_limits<int64_t>::max();
  }
  for (BubbleOp bubble : stage.getBody().front().getOps<BubbleOp>())
    for (const FillChunk &fill : bubble.getFills()) {
      auto it = schedules.find(fill.getJob());
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

/// One planned chunk of the steady state becomes runtime chunks: the
/// prefix iterations (run once, while the plan settles) are dropped, the
/// iteration inside the period becomes the phase, and samples are renumbered
/// within a period, a batch begun in the previous period being continued
/// with offset -1. A chunk that repeats whole batches becomes one chunk per
/// batch.
void lowerChunk(const FillChunk &fill, const llvm::StringMap<Schedule> &schedules,
                ps::FillChunkTable &out) {
  auto it = schedules.find(fill.getJob());
  if (it == schedules.end())
    return;
  const Schedule &s = it->second;
  if (fill.iteration < s.prefix || s.batchesPerPeriod <= 0)
    return;
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

} // namespace
} // namespace pipefill
