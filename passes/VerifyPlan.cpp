//===- VerifyPlan.cpp - pipefill-verify-plan ------------------------------===//
//
// Rebuilds the plan from the IR alone and hands it to fill::checkPlan, which
// recomputes every chunk's time and memory with its own loops (not the
// planner's packing code). The IR's fill chunks are what the runtime
// executes, so checking them, rather than the planner's in-memory result,
// is what guarantees that nothing the compiler hands on overruns a bubble.
// Every rule is per stage, so each stage's plan is rebuilt and checked on
// its own (in parallel, one stage's copy at a time per thread).
//
//===----------------------------------------------------------------------===//
#include "passes/FillIR.h"
#include "passes/Passes.h"
#include "passes/ScheduleIR.h"
#include "support/Format.h"

#include "mlir/IR/Threading.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

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

/// One stage's plan read back from the IR and its check, independent of
/// the other stages' (every rule of fill::checkPlan is per stage; the
/// plan-wide figures are sums the verifier defines the same way per stage).
struct StageCheck {
  fill::Plan plan;
  SmallVector<AssignmentOp> assignmentOps;            // behind plan.assignments
  SmallVector<std::pair<BubbleOp, size_t>> fillAt;    // behind plan.chunks
  std::optional<std::pair<BubbleOp, size_t>> orphan;  // a chunk without assignment
  std::vector<fill::Violation> violations;
};

/// The bubbles the plan fills are the gaps of the simulated timing, so that timing must be the
/// one the costs give: an instruction whose end - start is not its duration (IR written or edited
/// by hand, a cost changed without re-simulating) would plan fill into gaps the run does not
/// have, while lowering hands the runtime the duration.
LogicalResult verifyTimingMatchesCosts(PipelineOp pipeline) {
  for (StageOp stage : pipeline.getStages())
    for (Operation &op : stage.getBody().front()) {
      auto instr = dyn_cast<InstructionOpInterface>(op);
      if (!instr)
        continue;
      const InstrTiming &t = instr.getTiming();
      const double us = instr.getDeviceUs();
      if (!t.hasStart() || !t.hasEnd() || !(us > 0))
        continue;
      const double span = t.endUs - t.startUs;
      if (std::abs(span - us) > 1e-9 * std::max({1.0, std::abs(t.endUs), us}) + 1e-6)
        return op.emitOpError() << "lasts " << fmtNum(us) << " us but its simulated timing spans "
                                << fmtNum(span) << " us (start " << fmtNum(t.startUs) << ", end "
                                << fmtNum(t.endUs)
                                << "): the timing is not the costs' (re-run pipefill-simulate)";
    }
  return success();
}

LogicalResult verifyPipelinePlan(ModuleOp module, PipelineOp pipeline) {
  FillProblem problem = fillProblemFromIR(module, pipeline);
  SmallVector<StageOp> stageOps(pipeline.getStages());
  std::vector<StageCheck> checks(stageOps.size());
  int stageIndex = 0;
  for (StageOp stage : stageOps) {
    StageCheck &check = checks[stageIndex];
    for (AssignmentOp a : stageAssignments(stage)) {
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
      // The assignment verifier bounds prefix, period and batch (support/
      // Limits.h), so they fit the plan's 32-bit fields.
      x.prefixIterations = a.getPrefix();
      x.periodIterations = a.getPeriod();
      x.batchesPerPeriod = a.getBatchesPerPeriod();
      x.samplesPerIteration = a.getSamplesPerIteration().convertToDouble();
      x.persistentBytes = a.getPersistentBytes();
      check.plan.assignments.push_back(x);
      check.assignmentOps.push_back(a);
    }
    ++stageIndex;
  }

  // Stages are checked on MLIR's threads, each with a plan of its own: a
  // 128 x 4096 plan has 2.6 million chunks, and one copy of all of them
  // with the checker's per-bubble indexes was the driver's peak memory.
  // Each job's index by its symbol's uniqued name (a pointer): looked up
  // once per chunk.
  llvm::DenseMap<StringAttr, int> jobOf;
  for (size_t j = 0; j < problem.jobOps.size(); ++j)
    jobOf[problem.jobOps[j].getSymNameAttr()] = int(j);
  mlir::parallelFor(module.getContext(), 0, checks.size(), [&](size_t s) {
    StageCheck &check = checks[s];
    fill::Plan &plan = check.plan;
    std::map<int, const fill::Assignment *> byJob;
    for (const fill::Assignment &a : plan.assignments)
      byJob[a.job] = &a;
    size_t numFills = 0;
    for (BubbleOp bubble : problem.bubbleOps[s])
      numFills += bubble.getFills().size();
    if (plan.assignments.empty() && numFills == 0)
      return;
    plan.chunks.reserve(numFills);
    check.fillAt.reserve(numFills);
    for (size_t id = 0; id < problem.bubbleOps[s].size(); ++id) {
      BubbleOp bubble = problem.bubbleOps[s][id];
      ArrayRef<FillChunk> fills = bubble.getFills();
      for (size_t i = 0; i < fills.size(); ++i) {
        const FillChunk &f = fills[i];
        auto known = jobOf.find(f.job.getAttr());
        int job = known == jobOf.end() ? problem.jobIndex.lookup(f.getJob()) : known->second;
        auto as = byJob.find(job);
        if (as == byJob.end()) {
          check.orphan = {bubble, i};
          return;
        }
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
        check.fillAt.push_back({bubble, i});
      }
    }
    // The stage's figures as the verifier defines them.
    for (const fill::Bubble &b : problem.stages[s].bubbles)
      plan.bubbleUs += b.durationUs;
    for (const fill::Chunk &c : plan.chunks) {
      const fill::Assignment &a = *byJob[c.job];
      if (c.iteration >= a.prefixIterations)
        plan.filledUs += c.repeat * c.predictedUs / a.periodIterations;
    }
    plan.filledFraction = plan.bubbleUs > 0 ? plan.filledUs / plan.bubbleUs : 0;
    check.violations = fill::checkPlan({problem.stages[s]}, problem.jobs, problem.hardware,
                                       problem.config, plan);
    // The plan is not needed past here: freed on this thread, stage by stage.
    std::vector<fill::Chunk>().swap(plan.chunks);
  });

  // Reported in stage order, as one pass over the pipeline would.
  for (size_t s = 0; s < checks.size(); ++s)
    if (auto orphan = checks[s].orphan) {
      auto [bubble, i] = *orphan;
      return bubble.emitFillError(i) << "has no pipefill.assignment for "
                                     << bubble.getFills()[i].job << " on stage " << s;
    }
  size_t numViolations = 0;
  for (size_t s = 0; s < checks.size(); ++s) {
    StageCheck &check = checks[s];
    numViolations += check.violations.size();
    // Each violation on the op that causes it, in IR terms.
    for (const fill::Violation &v : check.violations) {
      switch (v.on) {
      case fill::Violation::On::Chunk: {
        auto [bubble, i] = check.fillAt[v.index];
        bubble.emitFillError(i) << v.message;
        break;
      }
      case fill::Violation::On::Assignment:
        check.assignmentOps[v.index].emitOpError() << v.message;
        break;
      case fill::Violation::On::Stage:
        if (v.index >= 0 && v.index < (int)stageOps.size())
          stageOps[v.index].emitOpError() << v.message;
        else
          pipeline.emitOpError() << "stage " << v.index << ": " << v.message;
        break;
      case fill::Violation::On::Plan:
        pipeline.emitOpError() << "stage " << s << ": " << v.message;
        break;
      }
    }
  }
  if (numViolations == 0)
    return success();
  pipeline.emitError() << "fill plan does not verify: " << numViolations << " violation(s)";
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
        failed(verifyTimingMatchesCosts(pipeline)) || failed(verifyBubblesMatchTimeline(pipeline)) ||
        failed(verifyPipelinePlan(module, pipeline)))
      return failure();
  return success();
}
} // namespace pipefill
