//===- LowerToStream.cpp - pipefill-lower-to-stream -----------------------===//
#include "dialect/stream/PfstreamOps.h"
#include "passes/Passes.h"
#include "passes/ScheduleIR.h"
#include "passes/StageLowering.h"
#include "support/Limits.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/StringMap.h"


using namespace mlir;

namespace pipefill {
#define GEN_PASS_DEF_LOWERTOSTREAM
#include "passes/Passes.h.inc"

namespace {
namespace ps = pfstream;

double f64(llvm::APFloat v) { return v.convertToDouble(); }

/// Builds a stage's lowering as pfstream ops in its device. Touches only the
/// device and its own attribute cache, so stages are lowered in parallel.
class OpSink final : public StreamSink {
public:
  explicit OpSink(ps::DeviceOp device)
      : device(device), ctx(device.getContext()), b(ctx), attrs(ctx) {
    const InstrKind kinds[] = {InstrKind::Forward,        InstrKind::Backward,
                               InstrKind::BackwardInput,  InstrKind::BackwardWeight,
                               InstrKind::AllReduceGrads, InstrKind::OptimizerStep};
    for (InstrKind kind : kinds)
      kindAttrs[int(toStreamKind(kind))] = ps::ComputeKindAttr::get(ctx, toStreamKind(kind));
    deviceBody = b.createBlock(&device.getBody());
  }

  void header(const DeviceHeader &h) override {
    device.setIndex(h.stage);
    device.setStage(h.stage);
    device.setMemoryBytes(h.memoryBytes);
    device.setStaticBytes(h.staticBytes);
    device.setPlannedIterationUs(llvm::APFloat(h.plannedIterationUs));
    device.setP2pLatencyUs(llvm::APFloat(h.p2pLatencyUs));
    device.setP2pBandwidthGbps(llvm::APFloat(h.p2pBandwidthGbps));
    device.setPcieBandwidthGbps(llvm::APFloat(h.pcieBandwidthGbps));
    device.setForwardUs(llvm::APFloat(h.forwardUs));
    device.setBackwardUs(llvm::APFloat(h.backwardUs));
    device.setBackwardInputUs(llvm::APFloat(h.backwardInputUs));
    device.setBackwardWeightUs(llvm::APFloat(h.backwardWeightUs));
    if (h.allreduceUs)
      device.setAllreduceUs(llvm::APFloat(*h.allreduceUs));
    if (h.optimizerUs)
      device.setOptimizerUs(llvm::APFloat(*h.optimizerUs));
  }
  void event(Location loc, uint64_t index) override {
    b.setInsertionPointToEnd(deviceBody);
    b.create<ps::EventOp>(loc, index, "bubble" + std::to_string(index));
  }
  void streams(Location loc, bool fill) override {
    b.setInsertionPointToEnd(deviceBody);
    auto mainStream =
        b.create<ps::StreamOp>(loc, uint64_t(0), ps::StreamRole::Main, ps::Priority::High);
    mainBody = b.createBlock(&mainStream.getBody());
    if (fill) {
      b.setInsertionPointToEnd(deviceBody);
      auto fillStream =
          b.create<ps::StreamOp>(loc, uint64_t(1), ps::StreamRole::Fill, ps::Priority::Low);
      fillBody = b.createBlock(&fillStream.getBody());
    }
  }
  void record(Location loc, int64_t event) override {
    b.setInsertionPointToEnd(mainBody);
    b.create<ps::RecordOp>(loc, attrs.i64(event));
  }
  void bubble(BubbleOp bubble, int64_t id) override {
    b.setInsertionPointToEnd(mainBody);
    b.create<ps::BubbleOp>(bubble.getLoc(), attrs.i64(id),
                           ps::BubbleKindAttr::get(ctx, toStreamKind(bubble.getKind())),
                           attrs.f64(bubble.getStartUs()), attrs.f64(bubble.getDurationUs()),
                           attrs.i64(bubble.getFreeBytes()));
  }
  void send(Location loc, int64_t peer, int64_t bytes, int64_t tag, double plannedUs,
            double startUs) override {
    b.setInsertionPointToEnd(mainBody);
    b.create<ps::SendOp>(loc, attrs.i64(peer), attrs.i64(bytes), attrs.i64(tag),
                         attrs.f64(plannedUs))
        .getProperties()
        .planned_start_us = startUs;
  }
  void recv(Location loc, int64_t peer, int64_t bytes, int64_t tag, double startUs) override {
    b.setInsertionPointToEnd(mainBody);
    b.create<ps::RecvOp>(loc, attrs.i64(peer), attrs.i64(bytes), attrs.i64(tag))
        .getProperties()
        .planned_start_us = startUs;
  }
  void compute(Location loc, InstrKind kind, int64_t microbatch, int64_t chunk, double plannedUs,
               double startUs) override {
    b.setInsertionPointToEnd(mainBody);
    b.create<ps::ComputeOp>(loc, kindAttrs[int(toStreamKind(kind))], attrs.i64(microbatch),
                            attrs.i64(chunk), attrs.f64(plannedUs))
        .getProperties()
        .planned_start_us = startUs;
  }
  void wait(Location loc, int64_t event) override {
    b.setInsertionPointToEnd(fillBody);
    b.create<ps::WaitOp>(loc, attrs.i64(event));
  }
  void fillChunks(Location loc, int64_t bubbleId, ps::FillChunkTable &&chunks) override {
    b.setInsertionPointToEnd(fillBody);
    auto op = b.create<ps::FillChunksOp>(loc, attrs.i64(bubbleId));
    op.getChunkTable() = std::move(chunks);
  }

private:
  ps::DeviceOp device;
  MLIRContext *ctx;
  OpBuilder b;
  AttrCache attrs;
  /// The compute kinds' attributes, uniqued once rather than per op.
  ps::ComputeKindAttr kindAttrs[8];
  Block *deviceBody = nullptr, *mainBody = nullptr, *fillBody = nullptr;
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
    // The runtime's range: the program's field would otherwise narrow a
    // larger count to 32 bits (2^32 + 5 became 5).
    if (iterations < 1 || iterations > kMaxIterations)
      return pipeline.emitError() << "cannot be lowered with iterations = "
                                  << static_cast<int64_t>(iterations)
                                  << ": the runtime runs 1 to " << kMaxIterations
                                  << " iterations per run";
    if (!pipeline.getIterationUs())
      return pipeline.emitError()
             << "has no simulated timeline to lower; run pipefill-simulate "
                "(or --pipefill-compile) first";
    if (failed(checkIterationFitsRuntime(pipeline, f64(*pipeline.getIterationUs()))))
      return failure();
    // The runtime rejects an order that deadlocks; so does the compiler,
    // with the same rule, before handing the program on. The instruction
    // lists read for the check are also what the stages are lowered from.
    sched::Schedule schedule;
    SmallVector<SmallVector<Operation *>> instrOps;
    if (failed(verifyDeadlockFree(pipeline, schedule, instrOps, /*withTiming=*/true)))
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
      OpSink sink(devices[index]);
      lowerStage(facts, stages[index], schedule[index], instrOps[index],
                 stageBubbles(stages[index]), sink);
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

} // namespace
} // namespace pipefill
