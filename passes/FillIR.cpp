//===- FillIR.cpp - pipefill IR <-> fill planner data ---------------------===//
#include "passes/FillIR.h"

#include "passes/ScheduleIR.h"
#include "support/Format.h"

#include "mlir/IR/Threading.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace mlir;

namespace pipefill {

static double f64(llvm::APFloat v) { return v.convertToDouble(); }

FillProblem fillProblemFromIR(ModuleOp module, PipelineOp pipeline) {
  FillProblem p;
  int64_t capacity = pipeline.getDeviceMemoryBytes();
  int64_t reserve = pipeline.getReserveBytes();
  double iteration = pipeline.getIterationUs() ? f64(*pipeline.getIterationUs()) : 0;
  // Each stage's bubbles on its own thread: finding them chases the list
  // pointers of every op in the stage (10^5 at 1F1B 64 x 512).
  SmallVector<StageOp> stages(pipeline.getStages());
  p.stages.resize(stages.size());
  p.bubbleOps.resize(stages.size());
  mlir::parallelFor(module->getContext(), 0, stages.size(), [&](size_t s) {
    StageOp stage = stages[s];
    fill::StageBubbles &sb = p.stages[s];
    sb.stage = stage.getIndex();
    sb.iterationUs = iteration;
    int64_t peak = stage.getPeakBytes() ? *stage.getPeakBytes() : 0;
    sb.minFreeBytes = std::max<int64_t>(0, capacity - peak - reserve);
    auto &ops = p.bubbleOps[s];
    for (BubbleOp bubble : stage.getBody().front().getOps<BubbleOp>()) {
      fill::Bubble b;
      b.id = ops.size();
      b.startUs = bubble.getStartUs();
      b.durationUs = bubble.getDurationUs();
      b.freeBytes = bubble.getFreeBytes();
      sb.bubbles.push_back(b);
      ops.push_back(bubble);
    }
  });
  for (FillJobOp jobOp : module.getOps<FillJobOp>()) {
    fill::Job job;
    job.name = jobOp.getSymName().str();
    job.kind = jobOp.getKind() == JobKind::Training ? fill::JobKind::Training
                                                     : fill::JobKind::Inference;
    job.samples = jobOp.getSamples();
    job.priority = f64(jobOp.getPriority());
    job.arrivalUs = f64(jobOp.getArrivalUs());
    for (LayerOp layerOp : jobOp.getLayers()) {
      fill::Layer layer;
      layer.name = layerOp.getName().str();
      layer.forwardUsPerSample = f64(layerOp.getForwardUsPerSample());
      layer.weightBytes = layerOp.getWeightBytes();
      layer.activationBytesPerSample = layerOp.getActivationBytesPerSample();
      layer.backwardUsPerSample = f64(layerOp.getBackwardUsPerSample());
      layer.gradBytes = layerOp.getGradBytes();
      layer.optimizerBytes = layerOp.getOptimizerBytes();
      job.layers.push_back(std::move(layer));
    }
    p.jobIndex[jobOp.getSymName()] = p.jobs.size();
    p.jobs.push_back(std::move(job));
    p.jobOps.push_back(jobOp);
  }
  p.hardware.pcieGBps = f64(pipeline.getPcieBandwidthGbps());
  p.hardware.hbmGBps = f64(pipeline.getHbmBandwidthGbps());
  p.hardware.kernelLaunchUs = f64(pipeline.getKernelLaunchUs());
  p.config.contextSwitchUs = f64(pipeline.getContextSwitchUs());
  p.config.safetyMargin = f64(pipeline.getSafetyMargin());
  p.config.reserveBytes = 0;
  if (auto sizes = pipeline.getBatchSizes())
    p.config.batchSizes.assign(sizes->begin(), sizes->end());
  return p;
}

LogicalResult verifyBubblesMatchTimeline(PipelineOp pipeline) {
  if (!pipeline.getIterationUs())
    return success(); // nothing simulated: no bubbles to compare
  const double iteration = f64(*pipeline.getIterationUs());
  const int64_t capacity = pipeline.getDeviceMemoryBytes();
  // Relative tolerance of the timeline's sums (the simulation adds durations).
  auto tol = [&](double t) { return 1e-9 * std::max({1.0, std::abs(t), iteration}) + 1e-6; };
  for (StageOp stage : pipeline.getStages()) {
    Block &body = stage.getBody().front();
    // The start of the first device-occupying instruction after each op (the iteration's end
    // after the last), by position, from a backward walk.
    std::vector<double> nextStart(body.getOperations().size());
    double next = iteration;
    size_t at = nextStart.size();
    for (Operation &op : llvm::reverse(body)) {
      nextStart[--at] = next;
      if (auto instr = dyn_cast<InstructionOpInterface>(op))
        if (sched::isCompute(toSchedKind(instr.getInstrKind())) && instr.getTiming().hasStart())
          next = std::min(next, instr.getTiming().startUs);
    }
    double cursor = 0; // end of what occupies the device so far (instructions and bubbles)
    int64_t live = static_cast<int64_t>(stage.getStaticBytes());
    at = 0;
    for (Operation &op : body) {
      const double limit = nextStart[at++];
      if (auto instr = dyn_cast<InstructionOpInterface>(op)) {
        const InstrTiming &t = instr.getTiming();
        if (!sched::isCompute(toSchedKind(instr.getInstrKind())))
          continue;
        if (t.hasEnd())
          cursor = std::max(cursor, t.endUs);
        if (t.hasLive())
          live = t.liveBytes;
        continue;
      }
      auto bubble = dyn_cast<BubbleOp>(op);
      if (!bubble)
        continue;
      const double start = bubble.getStartUs(), end = start + bubble.getDurationUs();
      if (start < cursor - tol(cursor) || end > limit + tol(limit))
        return bubble.emitOpError()
               << "spans " << fmtNum(start) << " to " << fmtNum(end)
               << " us, outside the stage's idle gap from " << fmtNum(cursor) << " to "
               << fmtNum(limit)
               << " us in the simulated timeline (bubbles are the gaps between the instructions "
                  "around them and do not overlap; re-run pipefill-insert-bubbles)";
      const int64_t free = std::max<int64_t>(0, capacity - live);
      if (bubble.getFreeBytes() > free)
        return bubble.emitOpError()
               << "has " << bubble.getFreeBytes() << " free bytes, but the device's "
               << capacity << " less the " << live << " bytes live before it leave " << free
               << " (re-run pipefill-insert-bubbles)";
      cursor = std::max(cursor, end);
    }
  }
  return success();
}

} // namespace pipefill
