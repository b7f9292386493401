// The fill-job queue simulator on tiny clusters whose schedules are worked
// out by hand in the comments, plus a synthetic trace where the policies
// must differ.

#include "algo/cluster/Cluster.h"

#include <gtest/gtest.h>

using namespace pipefill::cluster;

namespace {

TraceJob job(double arrival, const std::string &model, int64_t samples,
             double priority = 1) {
  TraceJob j;
  j.arrivalS = arrival;
  j.model = model;
  j.samples = samples;
  j.priority = priority;
  return j;
}

/// One class of `gpus` GPUs, half busy with the main job; model "a" runs at
/// 1 sample/s per GPU and one sample is 1 dedicated GPU-second.
ClusterModel oneClass(int gpus) {
  ClusterModel cm;
  cm.classes = {{"g", gpus, 0.5}};
  cm.models = {"a"};
  cm.usefulSPerSample = {1.0};
  cm.samplesPerS = {{1.0}};
  cm.efficiency = {{0.5}};
  return cm;
}

PolicyResult run(const ClusterModel &cm, const std::vector<TraceJob> &trace,
                 Policy p, double horizon = 0, double aging = 4 * 3600.0,
                 int gang = 1) {
  SimOptions o;
  o.policy = p;
  o.horizonS = horizon;
  o.agingS = aging;
  o.gpusPerJob = gang;
  PolicyResult r;
  std::string error;
  EXPECT_TRUE(simulateQueue(cm, trace, o, r, error)) << error;
  return r;
}

} // namespace

// 2 GPUs, 3 jobs: J0 (t=0, 10 s), J1 (t=1, 6 s), J2 (t=1, 2 s).
// t=0: J0 takes GPU 0 until 10. t=1: one GPU free, J1 and J2 wait.
//   FIFO: J1 (first in trace order) runs [1, 7], J2 [7, 9].
//         completion times 10, 6, 8 (mean 8); queueing 0, 0, 6.
//   SJF:  J2 (2 s of work) runs [1, 3], J1 [3, 9].
//         completion times 10, 8, 2 (mean 6.67); queueing 0, 2, 0.
TEST(Simulator, HandCheckedFifoVsSjf) {
  ClusterModel cm = oneClass(2);
  std::vector<TraceJob> trace = {job(0, "a", 10), job(1, "a", 6),
                                 job(1, "a", 2)};
  PolicyResult fifo = run(cm, trace, Policy::Fifo, 10);
  EXPECT_DOUBLE_EQ(fifo.jobs[0].startS, 0);
  EXPECT_DOUBLE_EQ(fifo.jobs[0].endS, 10);
  EXPECT_DOUBLE_EQ(fifo.jobs[1].startS, 1);
  EXPECT_DOUBLE_EQ(fifo.jobs[1].endS, 7);
  EXPECT_DOUBLE_EQ(fifo.jobs[2].startS, 7);
  EXPECT_DOUBLE_EQ(fifo.jobs[2].endS, 9);
  EXPECT_DOUBLE_EQ(fifo.completionS.mean, 8);
  // Nearest rank of {6, 8, 10}: p50 = 2nd, p90 = p99 = 3rd.
  EXPECT_DOUBLE_EQ(fifo.completionS.p50, 8);
  EXPECT_DOUBLE_EQ(fifo.completionS.p90, 10);
  EXPECT_DOUBLE_EQ(fifo.completionS.p99, 10);
  EXPECT_DOUBLE_EQ(fifo.queueingS.max, 6);
  EXPECT_DOUBLE_EQ(fifo.queueingS.mean, 2);

  PolicyResult sjf = run(cm, trace, Policy::Sjf, 10);
  EXPECT_DOUBLE_EQ(sjf.jobs[2].startS, 1);
  EXPECT_DOUBLE_EQ(sjf.jobs[2].endS, 3);
  EXPECT_DOUBLE_EQ(sjf.jobs[1].startS, 3);
  EXPECT_DOUBLE_EQ(sjf.jobs[1].endS, 9);
  EXPECT_NEAR(sjf.completionS.mean, 20.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(sjf.completionS.p50, 8);
  EXPECT_DOUBLE_EQ(sjf.queueingS.mean, 2.0 / 3);

  // Window [0, 10]: all 18 GPU-seconds of work; the main job is busy
  // 2 GPUs x 0.5 x 10 s = 10 GPU-s: gain 1.8, 1.8 GPU-equivalents.
  for (const PolicyResult *r : {&fifo, &sjf}) {
    EXPECT_EQ(r->completed, 3);
    EXPECT_DOUBLE_EQ(r->usefulGpuS, 18);
    EXPECT_DOUBLE_EQ(r->mainBusyGpuS, 10);
    EXPECT_DOUBLE_EQ(r->utilizationGain, 1.8);
    EXPECT_DOUBLE_EQ(r->gpuEquivalents, 1.8);
    EXPECT_DOUBLE_EQ(r->makespanS, 10);
    // GPU-time holding a fill job: 18 of 2 x 10.
    EXPECT_DOUBLE_EQ(r->occupancy, 0.9);
  }
}

// Default window = last arrival (t = 1): only J0's first second counts.
TEST(Simulator, WindowCountsRunningJobsProRata) {
  ClusterModel cm = oneClass(2);
  std::vector<TraceJob> trace = {job(0, "a", 10), job(1, "a", 6),
                                 job(1, "a", 2)};
  PolicyResult r = run(cm, trace, Policy::Fifo);
  EXPECT_DOUBLE_EQ(r.horizonS, 1);
  EXPECT_DOUBLE_EQ(r.usefulGpuS, 1);
  EXPECT_DOUBLE_EQ(r.totalUsefulGpuS, 18);
  // Whole run: 18 GPU-s over 10 s; busy 2 x 0.5 x 10 = 10.
  EXPECT_DOUBLE_EQ(r.totalGpuEquivalents, 1.8);
  EXPECT_DOUBLE_EQ(r.totalUtilizationGain, 1.8);
}

// Two 1-GPU classes in order [slow, fast], 1 dedicated GPU-second/sample:
//   model a: slow 1 sample/s (eff 0.4), fast 2 samples/s (eff 0.8)
//   model b: slow 1 sample/s (eff 0.9), fast 1 sample/s (eff 0.45)
// J0 = (t=0, a, 4 samples), J1 = (t=0, b, 4 samples).
//   FIFO (first fit): J0 -> slow, 4 s; J1 -> fast, 4 s: completions 4, 4.
//   EFFICIENCY: recovered GPU-s per s: (a, slow) 1, (a, fast) 2, (b, slow) 1,
//   (b, fast) 1 -> J0 on fast (2 s), then J1 on the slow class, where b is
//   the more efficient of the two (4 s): completions 2, 4.
TEST(Simulator, HandCheckedEfficiencyPlacement) {
  ClusterModel cm;
  cm.classes = {{"slow", 1, 0.5}, {"fast", 1, 0.5}};
  cm.models = {"a", "b"};
  cm.usefulSPerSample = {1.0, 1.0};
  cm.samplesPerS = {{1.0, 1.0}, {2.0, 1.0}};
  cm.efficiency = {{0.4, 0.9}, {0.8, 0.45}};
  std::vector<TraceJob> trace = {job(0, "a", 4), job(0, "b", 4)};
  PolicyResult fifo = run(cm, trace, Policy::Fifo, 4);
  EXPECT_EQ(fifo.jobs[0].gpuClass, 0);
  EXPECT_EQ(fifo.jobs[1].gpuClass, 1);
  EXPECT_DOUBLE_EQ(fifo.jobs[0].endS, 4);
  EXPECT_DOUBLE_EQ(fifo.jobs[1].endS, 4);
  PolicyResult eff = run(cm, trace, Policy::Efficiency, 4);
  EXPECT_EQ(eff.jobs[0].gpuClass, 1);
  EXPECT_EQ(eff.jobs[1].gpuClass, 0);
  EXPECT_DOUBLE_EQ(eff.jobs[0].endS, 2);
  EXPECT_DOUBLE_EQ(eff.jobs[1].endS, 4);
  EXPECT_DOUBLE_EQ(eff.completionS.mean, 3);
  EXPECT_DOUBLE_EQ(fifo.completionS.mean, 4);
  EXPECT_EQ(eff.jobsPerClass, (std::vector<int>{1, 1}));
}

// One GPU; model a fills its bubbles well (1 sample/s, eff 0.9), model b
// badly (0.2 samples/s of 1 GPU-second each, eff 0.18).
// A0 = (0, a, 5 samples = 5 s), B0 = (0, b, 1 sample = 5 s), A1 = (1, a, 5 s).
// EFFICIENCY starts A0 at 0. At t = 5: B0 waited 5 s, A1 4 s.
//   aging 100 s: A1 first [5, 10], B0 [10, 15].
//   aging 3 s: both aged, the oldest (B0) first [5, 10], A1 [10, 15].
TEST(Simulator, AgingPreventsStarvation) {
  ClusterModel cm;
  cm.classes = {{"g", 1, 0.5}};
  cm.models = {"a", "b"};
  cm.usefulSPerSample = {1.0, 1.0};
  cm.samplesPerS = {{1.0, 0.2}};
  cm.efficiency = {{0.9, 0.18}};
  std::vector<TraceJob> trace = {job(0, "a", 5), job(0, "b", 1),
                                 job(1, "a", 5)};
  PolicyResult patient = run(cm, trace, Policy::Efficiency, 0, 100);
  EXPECT_DOUBLE_EQ(patient.jobs[0].startS, 0);
  EXPECT_DOUBLE_EQ(patient.jobs[2].startS, 5);
  EXPECT_DOUBLE_EQ(patient.jobs[1].startS, 10);
  EXPECT_DOUBLE_EQ(patient.jobs[1].endS, 15);
  PolicyResult aged = run(cm, trace, Policy::Efficiency, 0, 3);
  EXPECT_DOUBLE_EQ(aged.jobs[1].startS, 5);
  EXPECT_DOUBLE_EQ(aged.jobs[2].startS, 10);
  // FIFO serves B0 second regardless: [5, 10].
  PolicyResult fifo = run(cm, trace, Policy::Fifo);
  EXPECT_DOUBLE_EQ(fifo.jobs[1].startS, 5);
}

// Aging acts inside the top priority tier. One GPU, models a (1 sample/s)
// and b (0.5 samples/s), 1 dedicated GPU-s per sample, aging 3 s:
// A0 = (0, a, 10 s) runs [0, 10]; A1 = (1, a, p1), B2 = (1.5, b, p1) and
// A3 = (2, a, p2) wait. At t = 10 all have waited >= 3 s. Strict tiers:
// A3 (priority 2) runs [10, 11]; then the oldest aged priority-1 job, A1,
// [11, 12] (not B2, although b's efficiency is worse); then B2 [12, 14].
// The guard looked at every model's head whatever its tier: a's head A3 and
// b's head B2 were both aged, the older B2 went first at 10, then A3, and A1
// (hidden behind A3 in a's queue) last.
TEST(Simulator, AgingActsInsideTheTopTier) {
  ClusterModel cm;
  cm.classes = {{"g", 1, 0.5}};
  cm.models = {"a", "b"};
  cm.usefulSPerSample = {1.0, 1.0};
  cm.samplesPerS = {{1.0, 0.5}};
  cm.efficiency = {{0.9, 0.45}};
  std::vector<TraceJob> trace = {job(0, "a", 10), job(1, "a", 1),
                                 job(1.5, "b", 1), job(2, "a", 1, 2)};
  PolicyResult r = run(cm, trace, Policy::Efficiency, 0, 3);
  EXPECT_DOUBLE_EQ(r.jobs[0].startS, 0);
  EXPECT_DOUBLE_EQ(r.jobs[3].startS, 10);
  EXPECT_DOUBLE_EQ(r.jobs[1].startS, 11);
  EXPECT_DOUBLE_EQ(r.jobs[2].startS, 12);
  EXPECT_DOUBLE_EQ(r.jobs[2].endS, 14);
}

// One GPU; model a recovers 1.0 GPU-s/s, model b 0.99 (within the 2%
// tolerance). X0 = (0, a, 1 s) starts at once; B1 = (0.5, b) and
// A1 = (0.6, a) wait. At t = 1 both pairs count as equally good and the
// older B1 goes first; with tolerance 0 the strictly better A1 does.
TEST(Simulator, EfficiencyToleranceServesOldestAmongNearTies) {
  ClusterModel cm;
  cm.classes = {{"g", 1, 0.5}};
  cm.models = {"a", "b"};
  cm.usefulSPerSample = {1.0, 1.0};
  cm.samplesPerS = {{1.0, 0.99}};
  cm.efficiency = {{0.5, 0.495}};
  std::vector<TraceJob> trace = {job(0, "a", 1), job(0.5, "b", 1),
                                 job(0.6, "a", 1)};
  PolicyResult tol = run(cm, trace, Policy::Efficiency);
  EXPECT_DOUBLE_EQ(tol.jobs[1].startS, 1);
  SimOptions o;
  o.policy = Policy::Efficiency;
  o.efficiencyTolerance = 0;
  PolicyResult strict;
  std::string error;
  ASSERT_TRUE(simulateQueue(cm, trace, o, strict, error)) << error;
  EXPECT_DOUBLE_EQ(strict.jobs[2].startS, 1);
  EXPECT_DOUBLE_EQ(strict.jobs[1].startS, 2);
}

// Priorities are strict tiers: a later priority-2 job overtakes.
TEST(Simulator, PriorityTiers) {
  ClusterModel cm = oneClass(1);
  std::vector<TraceJob> trace = {job(0, "a", 3), job(1, "a", 1),
                                 job(2, "a", 5, 2.0)};
  for (Policy p : allPolicies()) {
    PolicyResult r = run(cm, trace, p);
    EXPECT_DOUBLE_EQ(r.jobs[2].startS, 3) << toString(p);
    EXPECT_DOUBLE_EQ(r.jobs[1].startS, 8) << toString(p);
  }
}

// Gangs: a 2-GPU job on a 4-GPU class runs at twice the per-GPU rate and
// two of them run side by side.
TEST(Simulator, Gangs) {
  ClusterModel cm = oneClass(4);
  std::vector<TraceJob> trace = {job(0, "a", 8), job(0, "a", 8),
                                 job(0, "a", 8)};
  PolicyResult r = run(cm, trace, Policy::Fifo, 0, 3600, 2);
  EXPECT_DOUBLE_EQ(r.jobs[0].endS, 4);
  EXPECT_DOUBLE_EQ(r.jobs[1].endS, 4);
  EXPECT_DOUBLE_EQ(r.jobs[2].startS, 4);
  EXPECT_DOUBLE_EQ(r.jobs[2].endS, 8);
}

// A model that fits no class is reported, not queued forever.
TEST(Simulator, Unschedulable) {
  ClusterModel cm = oneClass(1);
  cm.models.push_back("huge");
  cm.usefulSPerSample.push_back(1.0);
  cm.samplesPerS[0].push_back(0.0);
  cm.efficiency[0].push_back(0.0);
  std::vector<TraceJob> trace = {job(0, "huge", 1), job(0, "a", 1)};
  PolicyResult r = run(cm, trace, Policy::Efficiency);
  EXPECT_EQ(r.unschedulable, 1);
  EXPECT_EQ(r.completed, 1);
  EXPECT_EQ(r.jobs[0].gpuClass, -1);
  EXPECT_DOUBLE_EQ(r.jobs[1].endS, 1);
}

TEST(Simulator, Errors) {
  ClusterModel cm = oneClass(2);
  PolicyResult r;
  std::string error;
  SimOptions o;
  o.gpusPerJob = 3;
  EXPECT_FALSE(simulateQueue(cm, {job(0, "a", 1)}, o, r, error));
  EXPECT_EQ(error, "a fill job needs a gang of 3 GPUs but the largest GPU "
                   "class has 2");
  o.gpusPerJob = 1;
  EXPECT_FALSE(simulateQueue(cm, {job(0, "b", 1)}, o, r, error));
  EXPECT_NE(error.find("model 'b'"), std::string::npos);
  EXPECT_FALSE(
      simulateQueue(cm, {job(5, "a", 1), job(1, "a", 1)}, o, r, error));
  EXPECT_NE(error.find("not sorted"), std::string::npos);
  cm.samplesPerS[0][0] = -1;
  EXPECT_FALSE(simulateQueue(cm, {job(0, "a", 1)}, o, r, error));
}

TEST(Simulator, Percentiles) {
  Percentiles p = percentiles({5, 1, 4, 2, 3, 6, 7, 8, 9, 10});
  EXPECT_DOUBLE_EQ(p.p50, 5);
  EXPECT_DOUBLE_EQ(p.p90, 9);
  EXPECT_DOUBLE_EQ(p.p99, 10);
  EXPECT_DOUBLE_EQ(p.mean, 5.5);
  Percentiles empty = percentiles({});
  EXPECT_DOUBLE_EQ(empty.p50, 0);
}

// A loaded synthetic trace on a cluster whose classes suit different models:
// efficiency-aware placement recovers measurably more work in the window
// and SJF finishes the typical job sooner than FIFO.
TEST(Simulator, PoliciesDifferOnSyntheticTrace) {
  ClusterModel cm;
  cm.classes = {{"stage 0", 64, 0.6}, {"stage 1", 64, 0.6},
                {"stage 2", 64, 0.8}};
  cm.models = {"small", "big", "train"};
  cm.usefulSPerSample = {0.001, 0.01, 0.005};
  // Per-GPU samples/s = efficiency x bubble fraction / usefulSPerSample.
  double eff[3][3] = {{0.9, 0.3, 0.5}, {0.6, 0.85, 0.4}, {0.5, 0.5, 0.9}};
  double bubble[3] = {0.4, 0.4, 0.2};
  cm.samplesPerS.assign(3, std::vector<double>(3));
  cm.efficiency.assign(3, std::vector<double>(3));
  for (int c = 0; c < 3; ++c)
    for (int m = 0; m < 3; ++m) {
      cm.efficiency[c][m] = eff[c][m];
      cm.samplesPerS[c][m] =
          eff[c][m] * bubble[c] / cm.usefulSPerSample[size_t(m)];
    }
  TraceGenOptions g;
  g.jobs = 3000;
  g.jobsPerHour = 400;
  g.medianGpuSeconds = 600;
  g.sigma = 1.0;
  g.seed = 7;
  std::vector<TraceJob> trace;
  std::string error;
  ASSERT_TRUE(generateTrace(g, cm.models, cm.usefulSPerSample, trace, error))
      << error;
  PolicyResult fifo = run(cm, trace, Policy::Fifo, 0, 4 * 3600.0, 8);
  PolicyResult sjf = run(cm, trace, Policy::Sjf, 0, 4 * 3600.0, 8);
  PolicyResult effr = run(cm, trace, Policy::Efficiency, 0, 4 * 3600.0, 8);
  EXPECT_EQ(fifo.completed, 3000);
  EXPECT_GT(effr.usefulGpuS, 1.05 * fifo.usefulGpuS);
  EXPECT_GT(effr.gpuEquivalents, fifo.gpuEquivalents);
  EXPECT_LT(sjf.completionS.p50, 0.8 * fifo.completionS.p50);
  EXPECT_LT(sjf.completionS.mean, fifo.completionS.mean);
  // Whole-trace work is the same for every policy.
  EXPECT_NEAR(effr.totalUsefulGpuS, fifo.totalUsefulGpuS,
              1e-9 * fifo.totalUsefulGpuS);
}
