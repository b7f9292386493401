//===- Analysis.h - Main job -> bubbles -> per-stage fill rates -> study --===//
//
// Plain C++17. Glue between the cost model, the schedule library and the fill
// planner at cluster scale:
//
//   TransformerConfig --cost--> PipelineSpec --sched--> bubbles per stage
//     --fill::planFill (one stage, one model; cached)--> fill rate per GPU
//     --> ClusterModel (one class per stage, dp x tp GPUs) --> simulateQueue
//
// and the scale study: the same model with a fixed global batch on N GPUs
// (dp = N / (tp x pp), so micro-batches per pipeline fall as N grows).
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_CLUSTER_ANALYSIS_H
#define PIPEFILL_ALGO_CLUSTER_ANALYSIS_H

#include "algo/cluster/Cluster.h"
#include "algo/cost/CostModel.h"
#include "algo/fill/Planner.h"
#include "algo/schedule/Schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pipefill::cluster {

/// Bubble extraction and fill planning knobs (JobSpec `planner { }`).
struct PlannerOptions {
  double minBubbleUs = 50;
  int64_t reserveBytes = int64_t(1) << 30;
  fill::Config fill;  ///< context switch, safety margin, batch sizes, ...
};

/// Present fields override the GPU preset (JobSpec `hardware { }`).
struct HardwareOverrides {
  int64_t gpuMemoryBytes = 0;  ///< 0 = preset
  double pcieGBps = -1, hbmGBps = -1, kernelLaunchUs = -1;  ///< < 0 = preset
  double p2pLatencyUs = -1, p2pBandwidthGBps = -1;          ///< < 0 = preset
};

enum class Recompute { Off, On, Auto };
const char *toString(Recompute r);  ///< "off", "on", "auto"
bool parseRecompute(const std::string &text, Recompute &out);

struct PipelineSetup {
  cost::TransformerConfig model;
  sched::ScheduleKind schedule = sched::ScheduleKind::OneFOneB;
  /// Model chunks per device, used only by the interleaved schedule.
  int virtualStages = 2;
  /// Auto: as configured if the main job fits in memory, else with full
  /// recomputation (what GPipe needs at many micro-batches).
  Recompute recompute = Recompute::Auto;
  PlannerOptions planner;
  HardwareOverrides hardware;
};

/// One model planned alone on one stage's bubbles (steady state).
struct StageFill {
  double samplesPerIteration = 0;
  double usefulUs = 0;     ///< samples x usefulUsPerSample, per iteration
  double filledUs = 0;     ///< bubble time the plan uses
  double efficiency = 0;   ///< usefulUs / the stage's bubble time
  int batch = 0;
  std::string knobs;       ///< "batch 16, weights resident, ..."
  std::string reason;      ///< why it does not fit, when samples == 0
};

struct StageSummary {
  int stage = 0;
  double busyUs = 0, idleUs = 0;
  double bubbleUs = 0;     ///< sum of bubbles >= minBubbleUs
  int bubbles = 0;
  int64_t peakBytes = 0, minFreeBytes = 0;
  std::vector<StageFill> fills;  ///< per model, same order as the models
};

struct PipelineAnalysis {
  PipelineSetup setup;     ///< as run (recompute resolved)
  bool recompute = false;  ///< what the main job ran with
  cost::ModelCosts costs;
  sched::SimResult sim;
  double iterationUs = 0, bubbleFraction = 0, mfu = 0;
  int gpus = 0, gpusPerStage = 0;
  int64_t gpuMemoryBytes = 0;
  fill::Hardware fillHardware;
  std::vector<fill::Job> models;
  std::vector<StageSummary> stages;
  int plannerCalls = 0, cacheHits = 0;
};

/// Runs cost model, schedule expansion, simulation, bubble extraction and
/// one fill plan per (stage, model) (stages with identical bubble shapes
/// share a plan). Errors: invalid config, a schedule the spec does not
/// allow, a main job that does not fit in GPU memory, no models.
bool analyzePipeline(const PipelineSetup &setup,
                     const std::vector<fill::Job> &models,
                     PipelineAnalysis &out, std::string &error);

/// One GPU class per stage (dp x tp GPUs, busy fraction busyUs/iteration),
/// rates from the per-stage plans.
ClusterModel clusterModelFrom(const PipelineAnalysis &a);

/// Steady state with an endless queue: every GPU always runs a fill job.
struct Capacity {
  double usefulGpus = 0;       ///< GPU-equivalents of work recovered
  double utilizationGain = 0;  ///< useful / main busy GPU time
  double idleGpus = 0;         ///< GPU-equivalents of bubble time
  double filledFraction = 0;   ///< bubble time used / bubble time
  std::vector<int> modelPerStage;  ///< which model each stage runs
};
/// `model` >= 0: every stage runs that model; -1: each stage runs its most
/// efficient model (the efficiency-aware policy's saturated limit).
Capacity saturatedCapacity(const PipelineAnalysis &a, int model);

/// One point of the scale study.
struct StudyPoint {
  int gpus = 0, dp = 0, microbatches = 0;
  sched::ScheduleKind schedule = sched::ScheduleKind::OneFOneB;
  bool ok = false;
  std::string error;           ///< when !ok (e.g. does not fit)
  bool recompute = false;
  double iterationUs = 0, bubbleFraction = 0, mfu = 0;
  Capacity best;               ///< most efficient model per stage
  std::vector<Capacity> perModel;
  std::vector<PolicyResult> policies;  ///< when a trace is given
};

struct StudyOptions {
  std::vector<int> gpus = {1024, 2048, 4096, 8192};
  std::vector<sched::ScheduleKind> schedules = {sched::ScheduleKind::GPipe,
                                                sched::ScheduleKind::OneFOneB};
  /// Optional: the same trace is run with every policy at every point.
  const std::vector<TraceJob> *trace = nullptr;
  std::vector<Policy> policies = allPolicies();
  int gpusPerJob = 0;          ///< 0 = tp
  double horizonS = 0;
  double agingS = 4 * 3600.0;  ///< see SimOptions
  double efficiencyTolerance = 0.02;
};

/// The study: for every GPU count and schedule, dp = N / (tp x pp) with the
/// base config's global batch. Points that cannot run (N not a multiple of
/// tp x pp, global batch not divisible, out of memory) are reported with
/// ok = false rather than failing the study; `error` is set only for
/// problems that affect every point.
bool runStudy(const PipelineSetup &base, const std::vector<fill::Job> &models,
              const StudyOptions &opts, std::vector<StudyPoint> &out,
              std::string &error);

} // namespace pipefill::cluster

#endif // PIPEFILL_ALGO_CLUSTER_ANALYSIS_H
