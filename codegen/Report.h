//===- Report.h - the numbers of a compiled pipeline ------------*- C++ -*-===//
//
// One computation of a compiled module's figures, shared by the report JSON
// and the terminal summary so the two can never disagree.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_CODEGEN_REPORT_H
#define PIPEFILL_CODEGEN_REPORT_H

#include "dialect/PipefillOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace pipefill {

struct ReportFill {
  std::string job;
  int64_t layerBegin, layerEnd, batch, peakBytes, iteration, repeat;
  double predictedUs;
};
struct ReportBubble {
  double startUs, durationUs, filledUs;
  int64_t freeBytes;
  std::string kind;
  std::vector<ReportFill> fills;
};
/// One fill job's planned share of a stage (from its pipefill.assignment).
struct ReportStageJob {
  std::string job;
  int64_t batch;
  double samplesPerIteration, filledUs;
};
struct ReportStage {
  int64_t stage;
  double busyUs, idleUs;
  int64_t peakBytes;
  std::vector<ReportBubble> bubbles;
  std::vector<ReportStageJob> jobs;
};
struct ReportJob {
  std::string name;
  double samplesPerIteration, efficiency;
};
struct ReportUnscheduled {
  std::string name, reason;
};
struct ReportData {
  std::string name, schedule;
  int64_t numStages, numMicrobatches, virtualStages;
  double iterationUs, bubbleFraction;
  std::vector<ReportStage> stages;
  double filledFraction, predictedSlowdown, utilizationGain;
  double bubbleUs, filledUs, usefulUs, busyUs;
  std::vector<ReportJob> jobs;
  std::vector<ReportUnscheduled> unscheduled;
};

/// Computes the figures; emits an error and returns nullopt when the module
/// has no simulated pipeline.
std::optional<ReportData> computeReport(mlir::ModuleOp module);

} // namespace pipefill

#endif // PIPEFILL_CODEGEN_REPORT_H
