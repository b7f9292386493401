//===- Report.h - JSON, SVG and text reports of cluster runs --------------===//
//
// Plain C++17 writers for pipefill-sim: the report of one configuration run
// against a trace (per-policy results), and the scale study. Key names are
// documented in docs/cluster.md.
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_CLUSTER_REPORT_H
#define PIPEFILL_ALGO_CLUSTER_REPORT_H

#include "algo/cluster/Analysis.h"

#include <string>
#include <vector>

namespace pipefill::cluster {

struct RunReport {
  std::string name;            ///< the job's name
  std::string traceFile;
  const PipelineAnalysis *analysis = nullptr;
  const std::vector<TraceJob> *trace = nullptr;
  std::vector<PolicyResult> policies;
  bool perJob = false;         ///< include every job's outcome in the JSON
};

std::string runJson(const RunReport &r);
std::string runSvg(const RunReport &r);
/// Terminal summary: pipeline line, per-stage fill table, policy table.
std::string runTable(const RunReport &r);

struct StudyReport {
  std::string name;
  const PipelineSetup *base = nullptr;
  std::vector<std::string> models;
  const std::vector<StudyPoint> *points = nullptr;
};

std::string studyJson(const StudyReport &r);
std::string studySvg(const StudyReport &r);
std::string studyTable(const StudyReport &r);     ///< terminal
std::string studyMarkdown(const StudyReport &r);  ///< docs/study/study.md

/// One grouped bar chart panel (shared by the two SVGs; exposed for tests).
struct BarPanel {
  std::string title;
  std::string unit;                     ///< appended to value labels
  std::vector<std::string> categories;  ///< x axis groups
  std::vector<std::string> series;      ///< bars within a group
  std::vector<std::vector<double>> values;  ///< [series][category]
};
/// Panels side by side with a common legend; a standalone SVG document.
std::string barChartSvg(const std::string &title,
                        const std::vector<BarPanel> &panels);

} // namespace pipefill::cluster

#endif // PIPEFILL_ALGO_CLUSTER_REPORT_H
