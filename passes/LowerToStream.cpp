//===- LowerToStream.cpp - pipefill-lower-to-stream -----------------------===//
#include "dialect/stream/PfstreamOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace pipefill {
#define GEN_PASS_DEF_LOWERTOSTREAM
#include "passes/Passes.h.inc"

namespace {
namespace ps = pfstream;

double f64(llvm::APFloat v) { return v.convertToDouble(); }
double attrOr(Operation *op, StringRef name, double fallback) {
  auto a = op->getAttrOfType<FloatAttr>(name);
  return a ? a.getValueAsDouble() : fallback;
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

  /// Tag of a transfer: unique per (sender, receiver) pair because the
  /// (payload, chunk, micro-batch) triple is.
  int64_t tagOf(PipelineOp pipeline, Payload payload, int64_t chunk, int64_t mb) {
    int64_t m = pipeline.getNumMicrobatches(), v = pipeline.getVirtualStages();
    return (static_cast<int64_t>(payload) * v + chunk) * m + mb;
  }

  LogicalResult lower(PipelineOp pipeline) {
    if (!pipeline.getIterationUs())
      return pipeline.emitError()
             << "has no simulated timeline to lower; run pipefill-simulate "
                "(or --pipefill-compile) first";
    OpBuilder b(pipeline);
    auto program = b.create<ps::ProgramOp>(
        pipeline.getLoc(), (pipeline.getSymName() + "_stream").str(),
        static_cast<uint64_t>(iterations.getValue()),
        llvm::APFloat(f64(*pipeline.getIterationUs())), /*seed=*/uint64_t(0));
    Block *programBody = b.createBlock(&program.getBody());
    double latency = f64(pipeline.getP2pLatencyUs());
    double bandwidth = f64(pipeline.getP2pBandwidthGbps());
    int64_t v = pipeline.getVirtualStages();

    for (StageOp stage : pipeline.getStages()) {
      b.setInsertionPointToEnd(programBody);
      auto device = b.create<ps::DeviceOp>(stage.getLoc(), TypeRange{},
                                           ValueRange{}, ArrayRef<NamedAttribute>{});
      device.setIndex(stage.getIndex());
      device.setStage(stage.getIndex());
      device.setMemoryBytes(pipeline.getDeviceMemoryBytes());
      device.setStaticBytes(stage.getStaticBytes());
      device.setPlannedIterationUs(*pipeline.getIterationUs());
      device.setP2pLatencyUs(pipeline.getP2pLatencyUs());
      device.setP2pBandwidthGbps(pipeline.getP2pBandwidthGbps());
      device.setPcieBandwidthGbps(pipeline.getPcieBandwidthGbps());
      double fwd = f64(stage.getForwardUs()) / v, bwd = f64(stage.getBackwardUs()) / v,
             w = f64(stage.getBackwardWeightUs()) / v;
      device.setForwardUs(llvm::APFloat(fwd));
      device.setBackwardUs(llvm::APFloat(bwd));
      device.setBackwardInputUs(llvm::APFloat(bwd - w));
      device.setBackwardWeightUs(llvm::APFloat(w));
      Block *deviceBody = b.createBlock(&device.getBody());

      // Events: one per bubble that carries fill work.
      Block &stageBody = stage.getBody().front();
      int64_t numEvents = 0;
      bool hasFill = false;
      for (BubbleOp bubble : stageBody.getOps<BubbleOp>())
        if (!bubble.getBody().front().empty()) {
          b.setInsertionPointToEnd(deviceBody);
          b.create<ps::EventOp>(bubble.getLoc(), (uint64_t)numEvents,
                                "bubble" + std::to_string(numEvents));
          ++numEvents;
          hasFill = true;
        }

      b.setInsertionPointToEnd(deviceBody);
      auto mainStream = b.create<ps::StreamOp>(stage.getLoc(), uint64_t(0),
                                               ps::StreamRole::Main, ps::Priority::High);
      Block *mainBody = b.createBlock(&mainStream.getBody());
      Block *fillBody = nullptr;
      if (hasFill) {
        b.setInsertionPointToEnd(deviceBody);
        auto fillStream = b.create<ps::StreamOp>(stage.getLoc(), uint64_t(1),
                                                 ps::StreamRole::Fill, ps::Priority::Low);
        fillBody = b.createBlock(&fillStream.getBody());
      }

      int64_t event = 0, bubbleId = 0;
      for (Operation &op : stageBody) {
        b.setInsertionPointToEnd(mainBody);
        double at = attrOr(&op, "start_us", 0.0);
        auto compute = [&](ps::ComputeKind kind, int64_t mb, int64_t chunk, double us) {
          b.create<ps::ComputeOp>(op.getLoc(), kind, (uint64_t)mb, (uint64_t)chunk,
                                  llvm::APFloat(us), llvm::APFloat(at));
        };
        llvm::TypeSwitch<Operation *>(&op)
            .Case<ForwardOp>([&](ForwardOp f) {
              compute(ps::ComputeKind::Forward, f.getMicrobatch(), f.getChunk(),
                      f64(f.getDurationUs()));
            })
            .Case<BackwardOp>([&](BackwardOp f) {
              compute(ps::ComputeKind::Backward, f.getMicrobatch(), f.getChunk(),
                      f64(f.getDurationUs()));
            })
            .Case<BackwardInputOp>([&](BackwardInputOp f) {
              compute(ps::ComputeKind::BackwardInput, f.getMicrobatch(), f.getChunk(),
                      f64(f.getDurationUs()));
            })
            .Case<BackwardWeightOp>([&](BackwardWeightOp f) {
              compute(ps::ComputeKind::BackwardWeight, f.getMicrobatch(), f.getChunk(),
                      f64(f.getDurationUs()));
            })
            .Case<AllReduceGradsOp>([&](AllReduceGradsOp a) {
              device.setAllreduceUs(a.getDurationUs());
              compute(ps::ComputeKind::AllReduce, 0, 0, f64(a.getDurationUs()));
            })
            .Case<OptimizerStepOp>([&](OptimizerStepOp o) {
              device.setOptimizerUs(o.getDurationUs());
              compute(ps::ComputeKind::Optimizer, 0, 0, f64(o.getDurationUs()));
            })
            .Case<SendOp>([&](SendOp s) {
              double us = latency + (bandwidth > 0 ? s.getBytes() / (bandwidth * 1e3) : 0.0);
              b.create<ps::SendOp>(
                  op.getLoc(), s.getPeer(), s.getBytes(),
                  (uint64_t)tagOf(pipeline, s.getPayload(), s.getChunk(), s.getMicrobatch()),
                  llvm::APFloat(us), llvm::APFloat(at));
            })
            .Case<RecvOp>([&](RecvOp r) {
              b.create<ps::RecvOp>(
                  op.getLoc(), r.getPeer(), r.getBytes(),
                  (uint64_t)tagOf(pipeline, r.getPayload(), r.getChunk(), r.getMicrobatch()),
                  llvm::APFloat(at));
            })
            .Case<BubbleOp>([&](BubbleOp bubble) {
              int64_t id = bubbleId++;
              bool filled = !bubble.getBody().front().empty();
              if (filled)
                b.create<ps::RecordOp>(op.getLoc(), (uint64_t)event);
              b.create<ps::BubbleOp>(op.getLoc(), (uint64_t)id, toStream(bubble.getKind()),
                                     bubble.getStartUs(), bubble.getDurationUs(),
                                     bubble.getFreeBytes());
              if (!filled)
                return;
              b.setInsertionPointToEnd(fillBody);
              b.create<ps::WaitOp>(op.getLoc(), (uint64_t)event++);
              for (FillOp fill : bubble.getBody().front().getOps<FillOp>()) {
                auto chunk = b.create<ps::FillChunkOp>(fill.getLoc(), TypeRange{}, ValueRange{},
                                                       ArrayRef<NamedAttribute>{});
                chunk.setJobAttr(fill.getJobAttr());
                chunk.setBubbleId(id);
                chunk.setLayerBegin(fill.getLayerBegin());
                chunk.setLayerEnd(fill.getLayerEnd());
                chunk.setBatch(fill.getBatch());
                chunk.setSampleBegin(fill.getSampleBegin());
                chunk.setIterationOffsetAttr(fill.getIterationOffsetAttr());
                chunk.setWeightsStreamed(fill.getWeights() == WeightPlacement::Streamed);
                chunk.setActivationsOnHost(fill.getActs() == ActPlacement::Host);
                chunk.setPlannedUs(fill.getPredictedUs());
                chunk.setPeakBytes(fill.getPeakBytes());
              }
            });
      }
    }
    return success();
  }
};
} // namespace
} // namespace pipefill
