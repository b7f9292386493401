//===- Cluster.h - Fill-job queue scheduling over a GPU pool --------------===//
//
// Plain C++17. A discrete-event simulation of a fill-job queue on the GPUs of
// a pipeline-parallel training job. The GPUs form classes of identical bubble
// shape (in a pipeline: one class per stage index, dp x tp GPUs each); each
// (class, model) pair has a planned steady-state fill rate, which
// algo/cluster/Analysis.h derives from the schedule and fill planners (or a
// test writes by hand). The simulation only counts free GPUs per class, so
// it is O(events x models x classes), independent of the GPU count.
//
// Semantics (docs/cluster.md):
//  - a job runs on a gang of `gpusPerJob` GPUs of ONE class (default: the TP
//    ranks of one stage of one replica), splits its samples evenly over them
//    and runs to completion, never preempted; a GPU runs one fill job at a
//    time (the job gets the GPU's whole bubble capacity);
//  - runtime = samples / (gpusPerJob x samplesPerS[class][model]);
//  - a job whose model runs on no class is "unschedulable" (reported, not an
//    error);
//  - priorities are strict tiers (higher first) under every policy;
//  - within a tier: FIFO = earliest arrival first, placed on the first class
//    (lowest stage) with a free gang that can run it; SJF = least dedicated
//    work (samples x usefulSPerSample) first, same placement; EFFICIENCY =
//    the (queued model, free class) pair that recovers the most GPU time per
//    second (samplesPerS x usefulSPerSample; on one class that is the model
//    with the highest planned efficiency, useful GPU-seconds per
//    bubble-second; across classes the class where the job finishes
//    soonest; pairs within 2% of the best count as ties, served in queue
//    order), the oldest job of that model, placed on that class; a job
//    waiting longer than `agingS` goes first (FIFO, fastest class) so none
//    starves. All three backfill: a job
//    that fits no free gang does not block later ones.
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_CLUSTER_CLUSTER_H
#define PIPEFILL_ALGO_CLUSTER_CLUSTER_H

#include "algo/cluster/Trace.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pipefill::cluster {

enum class Policy { Fifo, Sjf, Efficiency };
const char *toString(Policy p); ///< "fifo", "sjf", "efficiency"
/// Accepts the names above (case-insensitive) and "shortest-job-first",
/// "efficiency-aware".
bool parsePolicy(const std::string &text, Policy &out);
const std::vector<Policy> &allPolicies();

struct GpuClass {
  std::string name;        ///< e.g. "stage 3"
  int gpus = 0;
  double busyFraction = 0; ///< main-job busy time / wall time, per GPU
};

/// The abstract cluster the queue runs on.
struct ClusterModel {
  std::vector<GpuClass> classes;
  std::vector<std::string> models;
  /// Dedicated-GPU seconds of one sample, per model.
  std::vector<double> usefulSPerSample;
  /// [class][model]: samples per second one GPU of the class completes in
  /// its bubbles; 0 = the model does not fit there.
  std::vector<std::vector<double>> samplesPerS;
  /// [class][model]: useful GPU-seconds per bubble-second (planned).
  std::vector<std::vector<double>> efficiency;

  int totalGpus() const;
  /// Main-job busy GPU-seconds per second of wall time.
  double mainBusyGpus() const;
  /// Index of a model, -1 if unknown.
  int modelIndex(const std::string &name) const;
  /// Checks sizes and values; false with a sentence.
  bool validate(std::string &error) const;
};

struct SimOptions {
  Policy policy = Policy::Fifo;
  int gpusPerJob = 1;
  /// Window for utilization metrics; 0 => the last arrival (or the makespan
  /// if every job arrives at 0).
  double horizonS = 0;
  /// EFFICIENCY only: a job that waited this long is served first.
  double agingS = 4 * 3600.0;
  /// EFFICIENCY only: (model, class) pairs whose score is within this
  /// fraction of the best are equally good; the oldest job among them wins.
  double efficiencyTolerance = 0.02;
};

struct JobOutcome {
  int job = 0;          ///< index into the trace
  int model = -1;
  int gpuClass = -1;    ///< -1: unschedulable
  double arrivalS = 0, startS = 0, endS = 0;
  double usefulGpuS = 0; ///< dedicated-speed GPU-seconds of the whole job
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
};
/// Nearest-rank percentiles (p-th value of the sorted list: index
/// ceil(p/100 n) - 1); all 0 for an empty list.
Percentiles percentiles(std::vector<double> values);

struct PolicyResult {
  Policy policy = Policy::Fifo;
  int gpusPerJob = 1;
  std::vector<JobOutcome> jobs; ///< trace order
  int completed = 0, unschedulable = 0;
  double horizonS = 0, makespanS = 0;
  // Window [0, horizon]: running jobs count pro rata.
  double usefulGpuS = 0;       ///< fill work done at dedicated speed
  double mainBusyGpuS = 0;     ///< main-job busy GPU time
  double utilizationGain = 0;  ///< usefulGpuS / mainBusyGpuS
  double gpuEquivalents = 0;   ///< usefulGpuS / horizon
  double occupancy = 0;        ///< GPU-time holding a fill job / all GPU-time
  // Whole run [0, makespan].
  double totalUsefulGpuS = 0;
  double totalUtilizationGain = 0;
  double totalGpuEquivalents = 0;
  Percentiles completionS;     ///< end - arrival, completed jobs
  Percentiles queueingS;       ///< start - arrival
  std::vector<int> jobsPerClass;
  std::vector<double> usefulPerClass; ///< window, GPU-seconds
};

/// Runs the queue. Errors (unknown model name, gang larger than every class,
/// unsorted arrivals, invalid model) return false with a sentence.
bool simulateQueue(const ClusterModel &cluster,
                   const std::vector<TraceJob> &trace, const SimOptions &opts,
                   PolicyResult &out, std::string &error);

} // namespace pipefill::cluster

#endif // PIPEFILL_ALGO_CLUSTER_CLUSTER_H
