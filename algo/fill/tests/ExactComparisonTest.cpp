//===- ExactComparisonTest.cpp - Planner vs. exact optimum ----------------===//
//
// Many small random instances: the planner (one job per stage, so both solve
// the same problem) must reach >= 95% of the exact optimum's
// priority-weighted useful time per iteration on every instance. The worst
// and mean ratios are printed (docs/planner.md quotes them).
//
//===----------------------------------------------------------------------===//

#include "algo/fill/Planner.h"
#include "algo/fill/tests/ExactSolver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace pipefill::fill {
namespace {

struct Instance {
  std::vector<StageBubbles> stages;
  std::vector<Job> jobs;
  Hardware hw;
  Config config;
};

Instance randomInstance(std::mt19937_64 &rng) {
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  Instance in;
  const double pcie[] = {8, 25, 64};
  in.hw.pcieGBps = pcie[pick(0, 2)];
  in.hw.hbmGBps = 2000;
  in.hw.kernelLaunchUs = 5;
  const double ctx[] = {0, 10, 20};
  in.config.contextSwitchUs = ctx[pick(0, 2)];
  in.config.safetyMargin = pick(0, 1) ? 0.05 : 0.0;
  in.config.reserveBytes = pick(0, 3) == 0 ? 1000000 : 0;
  in.config.allowMultipleJobsPerStage = false;
  // This solver's model has no tail chunks (tests/JointExactTest.cpp has).
  in.config.tailChunks = false;
  const int batchPool[] = {1, 2, 3, 4, 8};
  int numBatches = pick(1, 3);
  in.config.batchSizes.clear();
  while (int(in.config.batchSizes.size()) < numBatches) {
    int b = batchPool[pick(0, 4)];
    if (std::find(in.config.batchSizes.begin(), in.config.batchSizes.end(), b) ==
        in.config.batchSizes.end())
      in.config.batchSizes.push_back(b);
  }

  int numStages = pick(1, 3);
  for (int s = 0; s < numStages; ++s) {
    StageBubbles sb;
    sb.stage = s;
    int numBubbles = pick(1, 4);
    double t = 0;
    int64_t minFree = INT64_MAX;
    for (int k = 0; k < numBubbles; ++k) {
      Bubble b;
      b.id = 10 * s + k;
      b.startUs = t;
      b.durationUs = std::round(uni(40, 1200));
      b.freeBytes = int64_t(uni(2e6, 48e6));
      t += b.durationUs + 500;
      minFree = std::min(minFree, b.freeBytes);
      sb.bubbles.push_back(b);
    }
    sb.iterationUs = t;
    sb.minFreeBytes = int64_t(double(minFree) * uni(0.1, 1.0));
    in.stages.push_back(sb);
  }

  int numJobs = pick(1, 3);
  for (int j = 0; j < numJobs; ++j) {
    Job job;
    job.name = "job" + std::to_string(j);
    job.kind = pick(0, 3) == 0 ? JobKind::Training : JobKind::Inference;
    job.samples = pick(0, 5) == 0 ? pick(1, 3) : 100000;
    job.priority = uni(0.5, 2);
    int numLayers = job.kind == JobKind::Training ? pick(1, 3) : pick(1, 5);
    for (int l = 0; l < numLayers; ++l) {
      Layer layer;
      layer.name = "l" + std::to_string(l);
      layer.forwardUsPerSample = std::round(uni(2, 60));
      layer.weightBytes = pick(0, 3) == 0 ? 0 : int64_t(uni(0.1e6, 12e6));
      layer.activationBytesPerSample = int64_t(uni(0, 1.5e6));
      if (job.kind == JobKind::Training) {
        layer.backwardUsPerSample = std::round(layer.forwardUsPerSample * uni(1, 2.5));
        layer.gradBytes = layer.weightBytes;
        layer.optimizerBytes = 2 * layer.weightBytes;
        layer.stashBytesPerSample =
            pick(0, 1) ? int64_t(layer.activationBytesPerSample * uni(1, 4)) : 0;
      }
      job.layers.push_back(layer);
    }
    in.jobs.push_back(job);
  }
  return in;
}

double weightedValue(const Plan &plan, const std::vector<Job> &jobs) {
  double v = 0;
  for (const Assignment &a : plan.assignments)
    v += a.usefulUs * jobs[a.job].priority;
  return v;
}

TEST(ExactComparison, PlannerReaches95PercentOfOptimum) {
  // FILL_EXACT_SEED / FILL_EXACT_INSTANCES override the defaults for longer
  // hunts; the defaults keep the test fast.
  const char *seedEnv = std::getenv("FILL_EXACT_SEED");
  const char *countEnv = std::getenv("FILL_EXACT_INSTANCES");
  std::mt19937_64 rng(seedEnv ? std::strtoull(seedEnv, nullptr, 10) : 20250601);
  const int kInstances = countEnv ? std::atoi(countEnv) : 1000;
  int compared = 0, exactlyOptimal = 0;
  double worst = 1, sum = 0;
  int worstIndex = -1;
  double worstMulti = 1, worstGreedy = 1, sumGreedy = 0;
  int greedyBelow95 = 0;
  for (int i = 0; i < kInstances; ++i) {
    Instance in = randomInstance(rng);
    exact::Optimum opt = exact::solve(in.stages, in.jobs, in.hw, in.config);
    Plan plan = planFill(in.stages, in.jobs, in.hw, in.config);
    std::vector<std::string> violations =
        verifyPlan(in.stages, in.jobs, in.hw, in.config, plan);
    EXPECT_TRUE(violations.empty())
        << "instance " << i << ": " << violations.front();
    double got = weightedValue(plan, in.jobs);
    EXPECT_LE(got, opt.value * (1 + 1e-9) + 1e-9)
        << "instance " << i << ": planner beats the exact optimum";

    // The greedy packing alone (no exact packing of small configurations
    // with PCIe copies): measured, not held to 95% on every instance.
    Config greedyOnly = in.config;
    greedyOnly.exactPackingLimit = 0;
    Plan planGreedy = planFill(in.stages, in.jobs, in.hw, greedyOnly);
    EXPECT_TRUE(verifyPlan(in.stages, in.jobs, in.hw, greedyOnly, planGreedy).empty())
        << "instance " << i;
    double gotGreedy = weightedValue(planGreedy, in.jobs);

    // With several jobs per stage the planner may only do better.
    Config multi = in.config;
    multi.allowMultipleJobsPerStage = true;
    Plan planMulti = planFill(in.stages, in.jobs, in.hw, multi);
    EXPECT_TRUE(verifyPlan(in.stages, in.jobs, in.hw, multi, planMulti).empty())
        << "instance " << i;
    double gotMulti = weightedValue(planMulti, in.jobs);

    if (opt.value <= 0) {
      EXPECT_EQ(got, 0) << "instance " << i;
      continue;
    }
    double ratio = got / opt.value;
    ++compared;
    sum += ratio;
    if (ratio >= 1 - 1e-9)
      ++exactlyOptimal;
    if (ratio < worst) {
      worst = ratio;
      worstIndex = i;
    }
    worstMulti = std::min(worstMulti, gotMulti / opt.value);
    worstGreedy = std::min(worstGreedy, gotGreedy / opt.value);
    sumGreedy += gotGreedy / opt.value;
    greedyBelow95 += gotGreedy / opt.value < 0.95;
    EXPECT_GE(ratio, 0.95) << "instance " << i;
    EXPECT_GE(gotMulti / opt.value, 0.95) << "instance " << i;
  }
  std::printf("[exact] %d instances (%d with positive optimum): worst ratio "
              "%.4f (instance %d), mean %.4f, optimal on %d; with several "
              "jobs per stage worst %.4f; greedy packing only: worst %.4f, "
              "mean %.4f, %d below 0.95\n",
              kInstances, compared, worst, worstIndex,
              compared ? sum / compared : 1.0, exactlyOptimal, worstMulti,
              worstGreedy, compared ? sumGreedy / compared : 1.0, greedyBelow95);
  EXPECT_GT(compared, kInstances / 2);
  EXPECT_GE(compared ? sumGreedy / compared : 1.0, 0.99);
}

// The Karp maximum-mean-cycle value agrees with a plain finite-horizon DP.
TEST(ExactComparison, KarpMatchesFiniteHorizon) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 60; ++i) {
    Instance in = randomInstance(rng);
    for (const StageBubbles &s : in.stages)
      for (const Job &job : in.jobs) {
        exact::KnobChoice k;
        k.batch = in.config.batchSizes.front();
        double finite = 0, edge = 0;
        int horizon = 0;
        double rate = exact::bestOpsPerIteration(s, job, k, in.hw, in.config,
                                                 &finite, &horizon, &edge);
        int n = numOps(job);
        // best over H iterations is within [H rate - 2n e, H rate + n e], e = largest edge.
        EXPECT_LE(finite, rate * horizon + n * edge + 1e-6);
        EXPECT_GE(finite, rate * horizon - 2 * n * edge - 1e-6);
      }
  }
}

} // namespace
} // namespace pipefill::fill

