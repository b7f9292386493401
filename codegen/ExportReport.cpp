//===- ExportReport.cpp - compiled IR -> report JSON ----------------------===//
//
// The report is computed from the IR alone (simulation results on the
// instructions, bubble ops, fill ops and the planner's per-job results), so it
// describes exactly what was compiled. Keys follow DESIGN section 8.
//
//===----------------------------------------------------------------------===//
#include "codegen/Translate.h"
#include "codegen/IRQueries.h"
#include "dialect/PipefillOps.h"

#include "llvm/Support/JSON.h"

using namespace mlir;

namespace pipefill {

static const char *bubbleKindName(BubbleKind k) {
  return stringifyBubbleKind(k).data();
}

LogicalResult exportReport(ModuleOp module, llvm::raw_ostream &os) {
  PipelineOp pipeline = findPipeline(module);
  if (!pipeline)
    return failure();
  if (!pipeline.getIterationUs())
    return pipeline.emitError()
           << "has not been simulated; run pipefill-opt --pipefill-compile "
              "(or at least --pipefill-simulate) first";

  double iteration = pipeline.getIterationUs()->convertToDouble();
  int64_t numStages = pipeline.getNumStages();
  llvm::json::Array stages;
  double idleTotal = 0, busyTotal = 0, bubbleTotal = 0, filledTotal = 0,
         usefulTotal = 0, overrunMax = 0;
  FillJobIndex jobs(module);

  for (StageOp stage : pipeline.getStages()) {
    double busy = stage.getBusyUs() ? stage.getBusyUs()->convertToDouble() : 0;
    double idle = stage.getIdleUs() ? stage.getIdleUs()->convertToDouble()
                                    : iteration - busy;
    busyTotal += busy;
    idleTotal += idle;
    llvm::json::Array bubbles;
    double overrun = 0;
    for (BubbleOp bubble : stage.getBody().front().getOps<BubbleOp>()) {
      double duration = bubble.getDurationUs().convertToDouble();
      double filled = 0;
      llvm::json::Array fills;
      for (FillOp fill : bubble.getBody().front().getOps<FillOp>()) {
        double t = fill.getPredictedUs().convertToDouble();
        filled += t;
        usefulTotal += jobs.dedicatedUs(fill);
        fills.push_back(llvm::json::Object{
            {"job", fill.getJob().str()},
            {"layer_begin", (int64_t)fill.getLayerBegin()},
            {"layer_end", (int64_t)fill.getLayerEnd()},
            {"batch", (int64_t)fill.getBatch()},
            {"predicted_us", t},
            {"peak_bytes", (int64_t)fill.getPeakBytes()}});
      }
      bubbleTotal += duration;
      filledTotal += std::min(filled, duration);
      overrun += std::max(0.0, filled - duration);
      llvm::json::Object b{
          {"start_us", bubble.getStartUs().convertToDouble()},
          {"duration_us", duration},
          {"free_bytes", (int64_t)bubble.getFreeBytes()},
          {"kind", bubbleKindName(bubble.getKind())},
          {"filled_us", filled}};
      if (!fills.empty())
        b["fills"] = std::move(fills);
      bubbles.push_back(std::move(b));
    }
    overrunMax = std::max(overrunMax, overrun);
    stages.push_back(llvm::json::Object{
        {"stage", (int64_t)stage.getIndex()},
        {"busy_us", busy},
        {"idle_us", idle},
        {"peak_memory_bytes",
         (int64_t)(stage.getPeakBytes() ? *stage.getPeakBytes() : 0)},
        {"bubbles", std::move(bubbles)}});
  }

  llvm::json::Array jobList, unscheduled;
  for (FillJobOp job : module.getOps<FillJobOp>()) {
    if (auto reason = job.getUnscheduled()) {
      unscheduled.push_back(llvm::json::Object{{"name", job.getSymName().str()},
                                               {"reason", reason->str()}});
      continue;
    }
    if (!job.getSamplesPerIteration())
      continue;
    jobList.push_back(llvm::json::Object{
        {"name", job.getSymName().str()},
        {"samples_per_iteration", job.getSamplesPerIteration()->convertToDouble()},
        {"efficiency",
         job.getEfficiency() ? job.getEfficiency()->convertToDouble() : 0.0}});
  }

  llvm::json::Object fill{
      {"filled_fraction", bubbleTotal > 0 ? filledTotal / bubbleTotal : 0.0},
      {"predicted_slowdown", iteration > 0 ? overrunMax / iteration : 0.0},
      {"utilization_gain", busyTotal > 0 ? usefulTotal / busyTotal : 0.0},
      {"jobs", std::move(jobList)},
      {"unscheduled", std::move(unscheduled)}};

  llvm::json::Object report{
      {"name", pipeline.getSymName().str()},
      {"schedule", stringifyScheduleKind(pipeline.getSchedule()).str()},
      {"num_stages", numStages},
      {"num_microbatches", (int64_t)pipeline.getNumMicrobatches()},
      {"virtual_stages", (int64_t)pipeline.getVirtualStages()},
      {"iteration_time_us", iteration},
      {"bubble_fraction",
       iteration > 0 ? idleTotal / (numStages * iteration) : 0.0},
      {"stages", std::move(stages)},
      {"fill", std::move(fill)}};
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
  return success();
}

} // namespace pipefill
