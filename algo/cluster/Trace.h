//===- Trace.h - Fill-job queue traces: CSV reader and generator ----------===//
//
// Plain C++17. A trace is the list of fill jobs submitted to the cluster, in
// arrival order, as CSV with a header:
//
//   arrival_s,model,samples,priority
//   0.000,bert-large,2000000,1
//   12.500,llama-7b,40000,2
//
// Blank lines and lines starting with '#' are ignored; priority may be left
// empty (= 1). Errors name file:line. docs/cluster.md describes the format
// and the synthetic generator's distribution.
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_CLUSTER_TRACE_H
#define PIPEFILL_ALGO_CLUSTER_TRACE_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pipefill::cluster {

struct TraceJob {
  double arrivalS = 0;
  std::string model;   ///< canonical model name (after resolution)
  int64_t samples = 0;
  double priority = 1; ///< higher is served first (strict tiers)
  int line = 0;        ///< source line, 0 for generated jobs
};

/// Maps a model name as written in a trace to its canonical name, or "" if
/// unknown. `known` is listed in the error for an unknown name.
struct ModelResolver {
  std::function<std::string(const std::string &)> resolve;
  std::string known;
};

/// Parses CSV text. Errors (every bad line, at most 20) go into `error`, one
/// per line as "FILE:LINE: error: MESSAGE"; returns false if there was any.
bool parseTrace(const std::string &text, const std::string &file,
                const ModelResolver &models, std::vector<TraceJob> &out,
                std::string &error);
/// Reads and parses a file ("FILE: error: cannot open ..." if unreadable).
bool readTraceFile(const std::string &path, const ModelResolver &models,
                   std::vector<TraceJob> &out, std::string &error);

/// The CSV text of a trace (header + one line per job).
std::string formatTrace(const std::vector<TraceJob> &jobs);

/// Synthetic trace (docs/cluster.md, "Synthetic traces"):
///  - arrivals: Poisson process of rate `jobsPerHour` (exponential gaps);
///  - model: drawn with the given weights (equal if empty);
///  - size: log-normal dedicated work, median `medianGpuSeconds` GPU-seconds
///    and shape `sigma`; samples = work / usefulSPerSample[model] (>= 1);
///  - priority: `highPriority` with probability `highPriorityFraction`,
///    else 1.
/// Uses its own splitmix64 / Box-Muller sampling (not <random>'s
/// distributions) so a seed gives the same trace with every compiler.
/// Most jobs one generated trace may have.
constexpr int kMaxGeneratedJobs = 100000000;

struct TraceGenOptions {
  int jobs = 1000;
  double jobsPerHour = 60;
  uint64_t seed = 1;
  double medianGpuSeconds = 1800;
  double sigma = 1.0;
  double highPriorityFraction = 0.1;
  double highPriority = 2;
  std::vector<double> weights; ///< per model; empty = equal
};
bool generateTrace(const TraceGenOptions &opts,
                   const std::vector<std::string> &models,
                   const std::vector<double> &usefulSPerSample,
                   std::vector<TraceJob> &out, std::string &error);

} // namespace pipefill::cluster

#endif // PIPEFILL_ALGO_CLUSTER_TRACE_H
