//===- VerifyPlan.cpp - pipefill-verify-plan ------------------------------===//
//
// Rebuilds the plan from the IR alone and hands it to fill::verifyPlan, which
// recomputes every chunk's time and memory with its own loops (not the
// planner's packing code). The IR's fill ops are what the runtime executes,
// so checking them, rather than the planner's in-memory result, is what
// guarantees that nothing the compiler hands on overruns a bubble.
//
//===----------------------------------------------------------------------===//
#include "passes/FillIR.h"
#include "passes/Passes.h"
#include "passes/ScheduleIR.h"

#include <map>

using namespace mlir;

namespace pipefill {
#define GEN_PASS_DEF_VERIFYPLAN
#include "passes/Passes.h.inc"

namespace {
fill::WeightPlacement toPlan(WeightPlacement w) {
  return w == WeightPlacement::Streamed ? fill::WeightPlacement::Streamed
                                        : fill::WeightPlacement::Resident;
}
fill::ActPlacement toPlan(ActPlacement a) {
  return a == ActPlacement::Host ? fill::ActPlacement::Host : fill::ActPlacement::Device;
}

LogicalResult verifyPipelinePlan(ModuleOp module, PipelineOp pipeline) {
  FillProblem problem = fillProblemFromIR(module, pipeline);
  fill::Plan plan;
  // The op behind each plan entry, for the diagnostics.
  SmallVector<AssignmentOp> assignmentOps;
  // Each chunk's bubble and index there.
  SmallVector<std::pair<BubbleOp, size_t>> fillAt;
  SmallVector<StageOp> stageOps(pipeline.getStages());
  std::map<std::pair<int, int>, fill::Assignment *> byKey;
  bool any = false;
  int stageIndex = 0;
  for (StageOp stage : pipeline.getStages()) {
    for (AssignmentOp a : stage.getBody().front().getOps<AssignmentOp>()) {
      auto it = problem.jobIndex.find(a.getJob());
      if (it == problem.jobIndex.end())
        return a.emitOpError() << "names an unknown fill job";
      fill::Assignment x;
      x.stage = stageIndex;
      x.job = it->second;
      x.batch = a.getBatch();
      x.weights = toPlan(a.getWeights());
      x.acts = toPlan(a.getActs());
      x.optimizer = a.getOptimizerOnHost() ? fill::OptimizerPlacement::Host
                                           : fill::OptimizerPlacement::Device;
      x.checkpoint = a.getCheckpoint();
      x.prefixIterations = a.getPrefix();
      x.periodIterations = a.getPeriod();
      x.batchesPerPeriod = a.getBatchesPerPeriod();
      x.samplesPerIteration = a.getSamplesPerIteration().convertToDouble();
      x.persistentBytes = a.getPersistentBytes();
      plan.assignments.push_back(x);
      assignmentOps.push_back(a);
      any = true;
    }
    ++stageIndex;
  }
  for (fill::Assignment &a : plan.assignments)
    byKey[{a.stage, a.job}] = &a;

  // 10^5-10^6 chunks: counted first so the two lists are allocated once.
  size_t numFills = 0;
  for (const SmallVector<BubbleOp> &bubbles : problem.bubbleOps)
    for (BubbleOp bubble : bubbles)
      numFills += bubble.getFills().size();
  plan.chunks.reserve(numFills);
  fillAt.reserve(numFills);
  for (size_t s = 0; s < problem.bubbleOps.size(); ++s) {
    for (size_t id = 0; id < problem.bubbleOps[s].size(); ++id) {
      BubbleOp bubble = problem.bubbleOps[s][id];
      ArrayRef<FillChunk> fills = bubble.getFills();
      for (size_t i = 0; i < fills.size(); ++i) {
        const FillChunk &f = fills[i];
        any = true;
        int job = problem.jobIndex.lookup(f.getJob());
        auto as = byKey.find({(int)s, job});
        if (as == byKey.end())
          return bubble.emitFillError(i) << "has no pipefill.assignment for " << f.job
                                         << " on stage " << s;
        fill::Chunk c;
        c.stage = s;
        c.bubbleId = id;
        c.job = job;
        c.layerBegin = f.layerBegin;
        c.layerEnd = f.layerEnd;
        c.batch = f.batch;
        c.sampleBegin = f.sampleBegin;
        c.weights = toPlan(f.weights);
        c.acts = toPlan(f.acts);
        c.optimizer = as->second->optimizer;
        c.checkpoint = as->second->checkpoint;
        c.copyUs = f.copyUs;
        c.predictedUs = f.predictedUs;
        c.peakBytes = f.peakBytes;
        c.iteration = f.iteration;
        c.repeat = f.repeat;
        c.offsetUs = f.offsetUs;
        plan.chunks.push_back(c);
        fillAt.push_back({bubble, i});
      }
    }
  }
  if (!any)
    return success();

  // Plan-wide figures as the verifier defines them.
  for (const fill::StageBubbles &s : problem.stages)
    for (const fill::Bubble &b : s.bubbles)
      plan.bubbleUs += b.durationUs;
  for (const fill::Chunk &c : plan.chunks) {
    const fill::Assignment &a = *byKey[{c.stage, c.job}];
    if (c.iteration >= a.prefixIterations)
      plan.filledUs += c.repeat * c.predictedUs / a.periodIterations;
  }
  plan.filledFraction = plan.bubbleUs > 0 ? plan.filledUs / plan.bubbleUs : 0;

  std::vector<fill::Violation> violations =
      fill::checkPlan(problem.stages, problem.jobs, problem.hardware, problem.config, plan);
  if (violations.empty())
    return success();
  // Each violation on the op that causes it, in IR terms.
  for (const fill::Violation &v : violations) {
    switch (v.on) {
    case fill::Violation::On::Chunk: {
      auto [bubble, i] = fillAt[v.index];
      bubble.emitFillError(i) << v.message;
      break;
    }
    case fill::Violation::On::Assignment:
      assignmentOps[v.index].emitOpError() << v.message;
      break;
    case fill::Violation::On::Stage:
      if (v.index >= 0 && v.index < (int)stageOps.size())
        stageOps[v.index].emitOpError() << v.message;
      else
        pipeline.emitOpError() << "stage " << v.index << ": " << v.message;
      break;
    case fill::Violation::On::Plan:
      pipeline.emitOpError() << v.message;
      break;
    }
  }
  pipeline.emitError() << "fill plan does not verify: " << violations.size() << " violation(s)";
  return failure();
}

struct VerifyPlanPass : public impl::VerifyPlanBase<VerifyPlanPass> {
  void runOnOperation() override {
    if (failed(verifyFillPlan(getOperation())))
      signalPassFailure();
  }
};
} // namespace

LogicalResult verifyFillPlan(ModuleOp module, bool checkOrder) {
  for (PipelineOp pipeline : module.getOps<PipelineOp>())
    if ((checkOrder && failed(verifyDeadlockFree(pipeline))) ||
        failed(verifyPipelinePlan(module, pipeline)))
      return failure();
  return success();
}
} // namespace pipefill
