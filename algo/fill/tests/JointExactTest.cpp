//===- JointExactTest.cpp - Planner vs. the joint exact optimum -----------===//
//
// Random small pipelines (2-4 stages, 2-6 micro-batches, GPipe, 1F1B,
// interleaved 1F1B and ZB-H1, bubbles from the schedule library's own
// simulation) with 1-3 fill jobs of 1-3 layers (a quarter training), PCIe
// 0-32 GB/s and tight memory. exact::solveJoint (tests/ExactSolver.cpp, own
// arithmetic) gives the best plan of the documented model with several jobs
// per stage and tail chunks; the planner must reach 0.95 of it on every
// instance. The planner's slot-by-slot greedy mode (no joint search, no
// exact packing, no tail chunks) is measured on the same instances and must
// fall below 0.95 on some: the comparison can fail. The planner's own
// numbers (value, chunks) never feed the exact solver.
//
//===----------------------------------------------------------------------===//

#include "algo/fill/Planner.h"
#include "algo/fill/tests/ExactSolver.h"
#include "algo/fill/tests/RandomJobs.h"
#include "algo/schedule/Schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

namespace pipefill::fill {
namespace {

struct Instance {
  std::vector<StageBubbles> stages;
  std::vector<Job> jobs;
  Hardware hw;
  Config config;
  const char *schedule = "";
};

/// Bubbles of a simulated pipeline schedule; false if the spec is invalid.
bool pipelineBubbles(std::mt19937_64 &rng, Instance &in) {
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  sched::PipelineSpec spec;
  spec.stages = pick(2, 4);
  spec.microbatches = pick(2, 6);
  const sched::ScheduleKind kinds[] = {
      sched::ScheduleKind::GPipe, sched::ScheduleKind::OneFOneB,
      sched::ScheduleKind::Interleaved1F1B, sched::ScheduleKind::ZBH1};
  spec.schedule = kinds[pick(0, 3)];
  if (spec.schedule == sched::ScheduleKind::Interleaved1F1B) {
    spec.virtualStages = 2;
    spec.microbatches = spec.stages * pick(1, 2);
  }
  in.schedule = sched::toString(spec.schedule);
  sched::StageCost cost;
  cost.forwardUs = std::round(uni(100, 500));
  cost.backwardUs = std::round(cost.forwardUs * uni(1.5, 2.5));
  cost.backwardWeightUs = std::round(cost.backwardUs * 0.5);
  cost.activationBytes = 1000000;
  cost.stashBytes = int64_t(uni(2e6, 8e6));
  cost.staticBytes = 100000000;
  spec.costs.assign(spec.stages, cost);
  spec.p2pLatencyUs = 5;
  spec.p2pBandwidthGBps = 25;
  std::string error;
  sched::Schedule schedule;
  sched::SimResult sim;
  if (!sched::validateSpec(spec, error) ||
      !sched::expandSchedule(spec, schedule, error) ||
      !sched::simulate(spec, schedule, sim, error))
    return false;
  // Tight memory: 2-40 MB above the static bytes plus the stash peak.
  int64_t capacity = cost.staticBytes +
                     int64_t(spec.microbatches) * cost.stashBytes +
                     int64_t(uni(2e6, 40e6));
  std::vector<sched::Bubble> bubbles =
      sched::findBubbles(spec, schedule, sim, capacity, 20, 0);
  for (int s = 0; s < spec.stages; ++s) {
    StageBubbles sb;
    sb.stage = s;
    sb.iterationUs = sim.iterationUs;
    sb.minFreeBytes = std::max<int64_t>(0, capacity - sim.stages[s].peakBytes);
    int id = 0;
    for (const sched::Bubble &b : bubbles)
      if (b.stage == s) {
        Bubble x;
        x.id = id++;
        x.startUs = b.startUs;
        x.durationUs = b.durationUs;
        x.freeBytes = std::max<int64_t>(0, b.freeBytes);
        sb.minFreeBytes = std::min(sb.minFreeBytes, x.freeBytes);
        sb.bubbles.push_back(x);
      }
    if (sb.bubbles.size() > 4) // keep the exact solver small
      sb.bubbles.resize(4);
    in.stages.push_back(sb);
  }
  return true;
}

Instance randomInstance(std::mt19937_64 &rng) {
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  Instance in;
  while (true) {
    in = Instance();
    if (pipelineBubbles(rng, in))
      break;
  }
  const double pcie[] = {0, 8, 16, 32};
  in.hw.pcieGBps = pcie[pick(0, 3)];
  in.config.contextSwitchUs = pick(0, 1) ? 10 : 20;
  in.config.safetyMargin = pick(0, 1) ? 0.05 : 0.0;
  const int batchPool[] = {1, 2, 4, 8};
  in.config.batchSizes.clear();
  int numBatches = pick(1, 2);
  while (int(in.config.batchSizes.size()) < numBatches) {
    int b = batchPool[pick(0, 3)];
    if (std::find(in.config.batchSizes.begin(), in.config.batchSizes.end(), b) ==
        in.config.batchSizes.end())
      in.config.batchSizes.push_back(b);
  }
  in.config.maxJobsPerStage = 3;
  in.jobs = randomFillJobs(rng, /*variedTraining=*/true);
  return in;
}

double weightedValue(const Plan &plan, const std::vector<Job> &jobs) {
  double v = 0;
  for (const Assignment &a : plan.assignments)
    v += a.usefulUs * jobs[a.job].priority;
  return v;
}

TEST(JointExact, PlannerReaches95PercentOfJointOptimum) {
  // FILL_JOINT_SEED / FILL_JOINT_INSTANCES override the defaults for longer
  // hunts (bench or manual runs); the defaults keep the test a few seconds.
  const char *seedEnv = std::getenv("FILL_JOINT_SEED");
  const char *countEnv = std::getenv("FILL_JOINT_INSTANCES");
  std::mt19937_64 rng(seedEnv ? std::strtoull(seedEnv, nullptr, 10) : 13);
  const int kInstances = countEnv ? std::atoi(countEnv) : 1000;
  std::vector<double> ratios, greedyRatios;
  int severalJobs = 0, withTails = 0, below = 0;
  double worst = 1;
  int worstIndex = -1;
  double exactSeconds = 0, plannerSeconds = 0; // measured, for the log only
  for (int i = 0; i < kInstances; ++i) {
    Instance in = randomInstance(rng);
    auto t0 = std::chrono::steady_clock::now();
    double opt = exact::solveJoint(in.stages, in.jobs, in.hw, in.config,
                                   in.config.maxJobsPerStage);
    auto t1 = std::chrono::steady_clock::now();
    Plan plan = planFill(in.stages, in.jobs, in.hw, in.config);
    auto t2 = std::chrono::steady_clock::now();
    exactSeconds += std::chrono::duration<double>(t1 - t0).count();
    plannerSeconds += std::chrono::duration<double>(t2 - t1).count();
    std::vector<std::string> violations =
        verifyPlan(in.stages, in.jobs, in.hw, in.config, plan);
    EXPECT_TRUE(violations.empty()) << "instance " << i << ": " << violations.front();
    double got = weightedValue(plan, in.jobs);
    EXPECT_LE(got, opt * (1 + 1e-9) + 1e-9)
        << "instance " << i << ": planner beats the joint optimum";

    Config greedy = in.config;
    greedy.jointSearch = false;
    greedy.exactPackingLimit = 0;
    greedy.tailChunks = false;
    Plan planGreedy = planFill(in.stages, in.jobs, in.hw, greedy);
    EXPECT_TRUE(verifyPlan(in.stages, in.jobs, in.hw, greedy, planGreedy).empty())
        << "instance " << i;
    double gotGreedy = weightedValue(planGreedy, in.jobs);
    if (opt <= 0) {
      EXPECT_EQ(got, 0) << "instance " << i;
      continue;
    }
    double ratio = got / opt;
    ratios.push_back(ratio);
    greedyRatios.push_back(gotGreedy / opt);
    std::vector<int> perStage(in.stages.size(), 0);
    for (const Assignment &a : plan.assignments)
      ++perStage[a.stage];
    severalJobs += *std::max_element(perStage.begin(), perStage.end()) > 1;
    withTails += std::any_of(plan.assignments.begin(), plan.assignments.end(),
                             [](const Assignment &a) {
                               return a.tailSamplesPerIteration > 0;
                             });
    below += ratio < 0.95;
    if (ratio < worst) {
      worst = ratio;
      worstIndex = i;
    }
    // The target: 0.95 of the joint optimum on every instance.
    EXPECT_GE(ratio, 0.95) << "instance " << i << " (" << in.schedule << ")";
    if (ratio < 0.95 && std::getenv("FILL_JOINT_DEBUG")) {
      std::printf("instance %d (%s): ratio %.4f\n", i, in.schedule, ratio);
      for (size_t s = 0; s < in.stages.size(); ++s) {
        double o = exact::solveJoint({in.stages[s]}, in.jobs, in.hw, in.config,
                                     in.config.maxJobsPerStage);
        double g = 0;
        for (const Assignment &a : plan.assignments)
          if (a.stage == int(s))
            g += a.usefulUs * in.jobs[a.job].priority;
        std::printf("  stage %zu: opt %.2f got %.2f minFree %lld\n", s, o, g,
                    (long long)in.stages[s].minFreeBytes);
        for (const Bubble &b : in.stages[s].bubbles)
          std::printf("    bubble %.1f us %lld B\n", b.durationUs, (long long)b.freeBytes);
        for (const Assignment &a : plan.assignments)
          if (a.stage == int(s))
            std::printf("    job %d batch %d w %d a %d useful %.2f tail %lld period %d\n",
                        a.job, a.batch, int(a.weights), int(a.acts), a.usefulUs,
                        (long long)a.tailSamplesPerIteration, a.periodIterations);
      }
      for (const Job &j : in.jobs) {
        std::printf("  %s %s prio %.2f:", j.name.c_str(),
                    j.kind == JobKind::Training ? "train" : "infer", j.priority);
        for (const Layer &l : j.layers)
          std::printf(" [%g us %lld w %lld a %lld s]", l.forwardUsPerSample,
                      (long long)l.weightBytes, (long long)l.activationBytesPerSample,
                      (long long)l.stashBytesPerSample);
        std::printf("\n");
      }
      std::printf("  ctx %g margin %g pcie %g batches", in.config.contextSwitchUs,
                  in.config.safetyMargin, in.hw.pcieGBps);
      for (int b : in.config.batchSizes)
        std::printf(" %d", b);
      std::printf("\n");
    }
  }
  auto summary = [](std::vector<double> r, const char *name) {
    std::sort(r.begin(), r.end());
    double mean = 0;
    int optimal = 0, under95 = 0;
    for (double x : r) {
      mean += x;
      optimal += x >= 1 - 1e-9;
      under95 += x < 0.95;
    }
    auto q = [&](double f) { return r[size_t(f * (r.size() - 1))]; };
    std::printf("[joint] %-8s n=%zu min %.4f p1 %.4f p10 %.4f median %.4f "
                "mean %.4f optimal %d below-0.95 %d\n",
                name, r.size(), r.front(), q(0.01), q(0.1), q(0.5),
                mean / r.size(), optimal, under95);
    return under95;
  };
  ASSERT_GT(ratios.size(), size_t(kInstances / 2));
  std::printf("[joint] %d instances, %zu with a positive optimum, %d with "
              "several jobs on a stage, %d with tail chunks; worst %.4f "
              "(instance %d)\n",
              kInstances, ratios.size(), severalJobs, withTails, worst,
              worstIndex);
  std::printf("[joint] measured: exact solver %.2f s, planner %.2f s\n",
              exactSeconds, plannerSeconds);
  summary(ratios, "planner");
  int greedyBelow = summary(greedyRatios, "greedy");
  EXPECT_EQ(below, 0);
  // The greedy mode falls short somewhere: the comparison can fail.
  EXPECT_GT(greedyBelow, 0);
  EXPECT_GT(severalJobs, kInstances / 20);
  EXPECT_GT(withTails, kInstances / 20);
}

} // namespace
} // namespace pipefill::fill

namespace pipefill::fill {
namespace {

// Instance 407 of the seed-13 family (stage 0), the worst case of the slot
// search: one 794 us bubble and two 61 us ones that hold nothing; job A
// has three ops of 297, 417 and 77 us at batch 4 (791 us + a 20 us switch:
// no whole batch fits), job B two of 217 and 293 us (530 us with the
// switch). Fixed windows get A alone, two batches every three iterations
// (517.33 us of useful time per iteration); sharing the bubble differently
// in different iterations (A's ops in the time B's batches leave) reaches
// the joint optimum, which the exact solver gives independently.
struct SharedBubble {
  std::vector<StageBubbles> stages;
  std::vector<Job> jobs;
  Hardware hw;
  Config config;
  SharedBubble() {
    StageBubbles sb;
    sb.stage = 0;
    sb.minFreeBytes = 43227804;
    const double durations[] = {794, 61, 61};
    const int64_t free[] = {43227804, 48784946, 54342088};
    for (int k = 0; k < 3; ++k) {
      Bubble b;
      b.id = k;
      b.durationUs = durations[k];
      b.freeBytes = free[k];
      sb.bubbles.push_back(b);
    }
    stages.push_back(sb);
    auto layer = [](double us, int64_t w, int64_t a) {
      Layer l;
      l.name = "l";
      l.forwardUsPerSample = us;
      l.weightBytes = w;
      l.activationBytesPerSample = a;
      return l;
    };
    Job a;
    a.name = "a";
    a.samples = 1000000;
    a.layers = {layer(73, 0, 643369), layer(103, 9259962, 1078360),
                layer(18, 7196554, 1114668)};
    Job b;
    b.name = "b";
    b.samples = 1000000;
    b.layers = {layer(53, 2414219, 1365019), layer(72, 0, 348342)};
    jobs = {a, b};
    hw.pcieGBps = 0;
    config.contextSwitchUs = 20;
    config.safetyMargin = 0;
    config.batchSizes = {4};
    config.maxJobsPerStage = 3;
  }
  static double value(const Plan &plan) {
    double v = 0;
    for (const Assignment &x : plan.assignments)
      v += x.usefulUs;
    return v;
  }
};

TEST(JointPacking, JobsShareABubbleDifferentlyInEachIteration) {
  SharedBubble in;
  double opt = exact::solveJoint(in.stages, in.jobs, in.hw, in.config, 3);
  Config slotOnly = in.config;
  slotOnly.jointExactWorkLimit = 0;
  Plan before = planFill(in.stages, in.jobs, in.hw, slotOnly);
  Plan plan = planFill(in.stages, in.jobs, in.hw, in.config);
  ASSERT_TRUE(verifyPlan(in.stages, in.jobs, in.hw, in.config, plan).empty());
  ASSERT_TRUE(verifyPlan(in.stages, in.jobs, in.hw, slotOnly, before).empty());
  // 4 samples x (73 + 103 + 18) us = 776 us per batch of A: two batches in
  // three iterations.
  EXPECT_NEAR(SharedBubble::value(before), 2 * 776.0 / 3, 1e-6);
  EXPECT_LT(SharedBubble::value(before), 0.95 * opt);
  EXPECT_NEAR(SharedBubble::value(plan), opt, 1e-6 * opt);
  // Both jobs run in the long bubble, and in some iteration of the period
  // B starts at a different offset than in another: not a fixed window.
  ASSERT_EQ(plan.assignments.size(), 2u);
  const Assignment &first = plan.assignments[0];
  std::map<int, std::vector<double>> startsOfB; // iteration -> offsets
  for (const Chunk &c : plan.chunks)
    if (c.bubbleId == 0 && c.job == 1 && c.iteration >= first.prefixIterations)
      startsOfB[c.iteration].push_back(c.offsetUs);
  std::set<double> firstStarts;
  for (auto &[it, offsets] : startsOfB)
    firstStarts.insert(*std::min_element(offsets.begin(), offsets.end()));
  EXPECT_GT(firstStarts.size(), 1u);
  std::printf("[shared bubble] optimum %.2f, slot search %.2f, joint %.2f us "
              "per iteration; prefix %d period %d; B's first offsets in the "
              "long bubble take %zu values\n",
              opt, SharedBubble::value(before), SharedBubble::value(plan),
              first.prefixIterations, first.periodIterations,
              firstStarts.size());

  // The verifier checks each iteration of the run: moving one of B's
  // chunks onto the first chunk of A in the same iteration is caught.
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const Chunk &b = plan.chunks[i];
    if (b.job != 1 || b.bubbleId != 0)
      continue;
    for (const Chunk &a : plan.chunks)
      if (a.job == 0 && a.bubbleId == 0 && a.iteration == b.iteration) {
        Plan broken = plan;
        broken.chunks[i].offsetUs = a.offsetUs;
        std::vector<std::string> v =
            verifyPlan(in.stages, in.jobs, in.hw, in.config, broken);
        ASSERT_FALSE(v.empty());
        EXPECT_NE(v.front().find("overlap"), std::string::npos) << v.front();
        return;
      }
  }
  ADD_FAILURE() << "no iteration with chunks of both jobs in the long bubble";
}

} // namespace
} // namespace pipefill::fill
