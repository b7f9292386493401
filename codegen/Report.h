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

// Names are views into the module (symbol names, enum spellings): a report
// lives no longer than the module it describes.
/// One bubble; its fill chunks are read from `op` where they are needed
/// (the report lists 10^5-10^6 of them; copying them out first doubled the
/// report's memory).
struct ReportBubble {
  BubbleOp op;
  double startUs, durationUs, filledUs;
  int64_t freeBytes;
  llvm::StringRef kind;
  int64_t numFills;
};
/// One fill job's planned share of a stage (from its pipefill.assignment).
struct ReportStageJob {
  std::string job;
  int64_t batch;
  double samplesPerIteration, filledUs;
};
/// Where a stage's bubble time goes per iteration, as planned by
/// pipefill-plan-fill (the stage's pipefill.fill_account attribute): keys
/// and values in the planner's order (bubble_us, filled_us, useful_us,
/// switch_us, launch_us, other_overhead_us, idle_us, margin_us,
/// too_short_us, memory_us, granularity_us).
struct ReportFillAccount {
  std::vector<std::pair<std::string, double>> fields;
  double get(llvm::StringRef key) const {
    for (const auto &f : fields)
      if (f.first == key)
        return f.second;
    return 0;
  }
};
struct ReportStage {
  int64_t stage;
  double busyUs, idleUs;
  int64_t peakBytes;
  std::vector<ReportBubble> bubbles;
  std::vector<ReportStageJob> jobs;
  std::optional<ReportFillAccount> fillAccount;
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
  /// usefulUs / bubbleUs: bubble time that becomes fill work at dedicated
  /// speed (filledFraction less switches, launches and other overheads).
  double usefulFraction;
  double bubbleUs, filledUs, usefulUs, busyUs;
  std::vector<ReportJob> jobs;
  std::vector<ReportUnscheduled> unscheduled;
};

/// Computes the figures; emits an error and returns nullopt when the module
/// has no simulated pipeline.
std::optional<ReportData> computeReport(mlir::ModuleOp module);

} // namespace pipefill

#endif // PIPEFILL_CODEGEN_REPORT_H
