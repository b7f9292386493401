//===- JointPackTest.cpp - Work of the joint packing on long bubbles ------===//
//
// A one-layer job whose per-sample time is tiny next to the bubble (the
// last stage of a 64-stage 1F1B pipeline with one micro-batch): its tail
// items (batches of 1, 2, 4, ... samples) take thousands of grid steps,
// and every one of them is a point of the knapsack's frontier. Reading each
// point's item counts back by walking the grid took a step per grid step
// below it (minutes for pipefill-compile on such specs); the bound below
// holds only when the counts are read back in one pass over the grid.
//
//===----------------------------------------------------------------------===//

#include "algo/fill/Planner.h"
#include "algo/fill/PlannerInternal.h"

#include <gtest/gtest.h>

namespace pipefill::fill::detail {
namespace {

TEST(JointPack, ReadingKnapsackPointsBackIsLinearInTheGrid) {
  Job job;
  job.name = "j0";
  job.samples = 100;
  Layer l;
  l.name = "enc";
  l.forwardUsPerSample = 25;
  l.weightBytes = 1 << 20;
  l.activationBytesPerSample = 1024;
  job.layers = {l};
  Hardware hw;
  Config config;
  config.contextSwitchUs = 0;
  JobInfo info = buildJob(job, 0, hw, config);
  ASSERT_TRUE(info.reason.empty()) << info.reason;
  // The largest batch as the main stream, the smaller ones as its tails.
  const JobConfig *main = nullptr;
  for (const JobConfig &c : info.configs)
    if (!main || c.knobs.batch > main->knobs.batch)
      main = &c;
  ASSERT_NE(main, nullptr);
  JointMember member{main, {}};
  for (const JobConfig &c : info.configs)
    if (c.knobs.batch < main->knobs.batch && c.knobs.weights == main->knobs.weights &&
        c.knobs.acts == main->knobs.acts)
      member.tails.push_back(&c);
  ASSERT_GE(member.tails.size(), 4u);

  const double bubbleUs = 189000; // 63 x (1000 + 2000) us
  const int64_t freeBytes = int64_t(16) << 30;
  std::vector<double> budget = {bubbleUs};
  std::vector<int64_t> mem = {freeBytes - main->persistentBytes};
  BubbleFrontier frontier;
  frontier.build(budget, {freeBytes});
  std::vector<Chunk> chunks;
  JointResult r = jointPack({member}, config.contextSwitchUs, budget, mem,
                            frontier, main->persistentBytes, &chunks, 0, {7});
  ASSERT_TRUE(r.ok);
  // Nearly all of the bubble is filled (the packing itself is unchanged).
  EXPECT_GT(r.value, 0.9 * bubbleUs);
  EXPECT_FALSE(chunks.empty());
  // The grid knapsack ran (the exact frontier outgrows its 64 points) ...
  EXPECT_GT(r.readBackSteps, 0);
  // ... and read its points back in at most a step per grid step and one
  // per point, for each of the bubble's two frontiers (with and without
  // the job's whole batches). The walk per point took ~10^7 steps here.
  const double kMaxGrid = 4096;
  EXPECT_LE(r.readBackSteps, 2 * 2 * (kMaxGrid + 1));
}

} // namespace
} // namespace pipefill::fill::detail
