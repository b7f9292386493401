//===- PlanFill.cpp - pipefill-plan-fill ----------------------------------===//
#include "passes/FillIR.h"
#include "passes/Passes.h"
#include "passes/ScheduleIR.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"

#include <algorithm>
#include <map>

using namespace mlir;

namespace pipefill {
#define GEN_PASS_DEF_PLANFILL
#include "passes/Passes.h.inc"

namespace {
WeightPlacement toIR(fill::WeightPlacement w) {
  return w == fill::WeightPlacement::Streamed ? WeightPlacement::Streamed
                                              : WeightPlacement::Resident;
}
ActPlacement toIR(fill::ActPlacement a) {
  return a == fill::ActPlacement::Host ? ActPlacement::Host : ActPlacement::Device;
}

struct PlanFillPass : public impl::PlanFillBase<PlanFillPass> {
  using PlanFillBase::PlanFillBase;

  void runOnOperation() override {
    for (PipelineOp pipeline : getOperation().getOps<PipelineOp>())
      if (failed(plan(pipeline)))
        return signalPassFailure();
  }

  LogicalResult plan(PipelineOp pipeline) {
    if (!pipeline.getIterationUs())
      return pipeline.emitError()
             << "has no simulated bubbles to fill; run pipefill-simulate and "
                "pipefill-insert-bubbles first";
    if (failed(verifyBubblesMatchTimeline(pipeline)))
      return failure();
    FillProblem problem = fillProblemFromIR(getOperation(), pipeline);
    removePreviousPlan(pipeline, problem);
    if (problem.jobs.empty())
      return success();
    problem.config.allowMultipleJobsPerStage = !singleJobPerStage;
    // Stages are planned in parallel where MLIR may use threads (same plan either way).
    MLIRContext *ctx = &getContext();
    problem.config.threads =
        ctx->isMultithreadingEnabled() ? int(ctx->getNumThreads()) : 1;
    if (const ProgressHook &hook = progressHook())
      problem.config.progress = [&hook](size_t done, size_t total) {
        hook("plan-fill", done, total);
      };
    // Each stage's chunks go into its bubbles' fill tables as soon as the
    // stage is planned (on the planner's threads; stages are isolated), so
    // the plan never holds every chunk beside the tables.
    SmallVector<FlatSymbolRefAttr> jobRefs;
    for (size_t j = 0; j < problem.jobOps.size(); ++j)
      jobRefs.push_back(jobRef(problem, j));
    fill::Plan plan = fill::planFill(
        problem.stages, problem.jobs, problem.hardware, problem.config,
        [&](int stage, std::vector<fill::Chunk> &&chunks) {
          writeChunks(chunks, problem.bubbleOps[stage], jobRefs);
        });
    if (!plan.errors.empty()) {
      InFlightDiagnostic diag = pipeline.emitError() << "cannot plan fill work";
      for (const std::string &e : plan.errors)
        diag.attachNote() << e;
      return failure();
    }
    SmallVector<StageOp> stages(pipeline.getStages());
    writeAssignments(plan, problem, stages);
    writeAccounts(plan, stages);
    writeJobResults(plan, problem);
    return success();
  }

  /// Re-planning replaces the previous plan: its fill chunks and assignments,
  /// the stages' accounts and the jobs' results. The bubbles are those
  /// `problem` read (its plan input is their times and memory, not their
  /// fill), the assignments their stage's leading ops: neither needs another
  /// walk of the stage's 10^3-10^5 ops (each walk chases a list pointer per
  /// op: ~4 ms on one core at 1F1B 64 x 512).
  void removePreviousPlan(PipelineOp pipeline, const FillProblem &problem) {
    SmallVector<StageOp> stages(pipeline.getStages());
    mlir::parallelFor(&getContext(), 0, stages.size(), [&](size_t s) {
      StageOp stage = stages[s];
      stage->removeAttr(kFillAccountAttr);
      for (BubbleOp bubble : problem.bubbleOps[s])
        bubble.getFillTable().clear();
      for (AssignmentOp assignment : llvm::make_early_inc_range(stageAssignments(stage)))
        assignment.erase();
    });
    for (FillJobOp job : getOperation().getOps<FillJobOp>()) {
      job.removeSamplesPerIterationAttr();
      job.removeEfficiencyAttr();
      job.removeUnscheduledAttr();
    }
  }

  static FlatSymbolRefAttr jobRef(const FillProblem &problem, int job) {
    FillJobOp op = problem.jobOps[job]; // a handle; its accessors are non-const
    return FlatSymbolRefAttr::get(op.getSymNameAttr());
  }

  /// One pipefill.assignment per (stage, job) at the top of its stage.
  void writeAssignments(const fill::Plan &plan, const FillProblem &problem,
                        ArrayRef<StageOp> stages) {
    OpBuilder b(&getContext());
    for (const fill::Assignment &a : plan.assignments) {
      StageOp stage = stages[a.stage];
      b.setInsertionPointToStart(&stage.getBody().front());
      auto op = b.create<AssignmentOp>(stage.getLoc(), TypeRange{}, ValueRange{},
                                       ArrayRef<NamedAttribute>{});
      op.setJobAttr(jobRef(problem, a.job));
      op.setBatch(a.batch);
      op.setWeights(toIR(a.weights));
      op.setActs(toIR(a.acts));
      op.setOptimizerOnHost(a.optimizer == fill::OptimizerPlacement::Host);
      op.setCheckpoint(a.checkpoint);
      op.setPrefix(a.prefixIterations);
      op.setPeriod(a.periodIterations);
      op.setBatchesPerPeriod(a.batchesPerPeriod);
      op.setSamplesPerIteration(llvm::APFloat(a.samplesPerIteration));
      op.setPersistentBytes(a.persistentBytes);
    }
  }

  /// Where each stage's bubble time goes (planned), for the report and the
  /// summary: a discardable dictionary on the stage.
  void writeAccounts(const fill::Plan &plan, ArrayRef<StageOp> stages) {
    OpBuilder b(&getContext());
    for (const fill::StageAccount &a : plan.accounts) {
      auto f = [&](double v) { return b.getF64FloatAttr(v); };
      stages[a.stage]->setAttr(
          kFillAccountAttr,
          b.getDictionaryAttr({
              b.getNamedAttr("bubble_us", f(a.bubbleUs)),
              b.getNamedAttr("filled_us", f(a.filledUs)),
              b.getNamedAttr("useful_us", f(a.usefulUs)),
              b.getNamedAttr("switch_us", f(a.switchUs)),
              b.getNamedAttr("launch_us", f(a.launchUs)),
              b.getNamedAttr("other_overhead_us", f(a.otherOverheadUs)),
              b.getNamedAttr("idle_us", f(a.idleUs)),
              b.getNamedAttr("margin_us", f(a.marginUs)),
              b.getNamedAttr("too_short_us", f(a.tooShortUs)),
              b.getNamedAttr("memory_us", f(a.memoryUs)),
              b.getNamedAttr("granularity_us", f(a.granularityUs)),
          }));
    }
  }

  /// A stage's chunks go into its bubbles' fill tables in execution order
  /// (by bubble, then iteration, then offset; the plan's order among equals).
  static void writeChunks(const std::vector<fill::Chunk> &stageChunks,
                          ArrayRef<BubbleOp> bubbleOps, ArrayRef<FlatSymbolRefAttr> jobRefs) {
    std::vector<const fill::Chunk *> chunks;
    chunks.reserve(stageChunks.size());
    for (const fill::Chunk &c : stageChunks)
      chunks.push_back(&c);
    std::stable_sort(chunks.begin(), chunks.end(),
                     [](const fill::Chunk *x, const fill::Chunk *y) {
                       return std::make_tuple(x->bubbleId, x->iteration, x->offsetUs) <
                              std::make_tuple(y->bubbleId, y->iteration, y->offsetUs);
                     });
    // Each table sized once (grown by doubling, the tables held up to twice
    // the room their chunks need).
    for (size_t i = 0; i < chunks.size();) {
      size_t j = i;
      while (j < chunks.size() && chunks[j]->bubbleId == chunks[i]->bubbleId)
        ++j;
      BubbleOp bubble = bubbleOps[chunks[i]->bubbleId]; // a handle; accessors are non-const
      bubble.getFillTable().reserve(bubble.getFillTable().size() + (j - i));
      i = j;
    }
    for (const fill::Chunk *c : chunks) {
      BubbleOp bubble = bubbleOps[c->bubbleId];
      FillChunk f;
      f.job = jobRefs[c->job];
      f.layerBegin = c->layerBegin;
      f.layerEnd = c->layerEnd;
      f.batch = c->batch;
      f.sampleBegin = c->sampleBegin;
      f.weights = toIR(c->weights);
      f.acts = toIR(c->acts);
      f.predictedUs = c->predictedUs;
      f.peakBytes = c->peakBytes;
      f.copyUs = c->copyUs;
      f.iteration = c->iteration;
      f.repeat = c->repeat;
      f.offsetUs = c->offsetUs;
      bubble.getFillTable().push_back(f);
    }
  }

  /// Each job's samples per iteration and efficiency, or why it is
  /// unscheduled (a warning, or a remark when it only lost its stages to
  /// more valuable jobs).
  void writeJobResults(const fill::Plan &plan, const FillProblem &problem) {
    OpBuilder b(&getContext());
    std::map<std::string, std::string> unscheduled;
    for (const fill::Unscheduled &u : plan.unscheduled)
      unscheduled[u.name] = u.reason;
    for (size_t j = 0; j < problem.jobs.size(); ++j) {
      FillJobOp jobOp = problem.jobOps[j];
      const fill::JobResult &r = plan.jobs[j];
      if (r.samplesPerIteration > 0) {
        jobOp.setSamplesPerIterationAttr(b.getF64FloatAttr(r.samplesPerIteration));
        jobOp.setEfficiencyAttr(b.getF64FloatAttr(r.efficiency));
        continue;
      }
      auto it = unscheduled.find(jobOp.getSymName().str());
      std::string reason =
          it != unscheduled.end() ? it->second : "no bubble time was assigned to it";
      jobOp.setUnscheduledAttr(b.getStringAttr(reason));
      // A job that fits nowhere is worth a warning; one that fits but lost its
      // stages to more valuable jobs is only a remark.
      if (StringRef(reason).starts_with("not placed"))
        mlir::emitRemark(jobOp.getLoc())
            << "fill job '" << jobOp.getSymName() << "' is unscheduled: " << reason;
      else
        mlir::emitWarning(jobOp.getLoc())
            << "fill job '" << jobOp.getSymName() << "' is unscheduled: " << reason;
    }
  }
};
} // namespace
} // namespace pipefill
