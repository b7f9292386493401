//===- PlannerTest.cpp - Hand-checked cases, properties, bad inputs -------===//

#include "algo/fill/Planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>

namespace pipefill::fill {
namespace {

Layer makeLayer(std::string name, double fwdUs, int64_t weights = 0,
                int64_t act = 0) {
  Layer l;
  l.name = std::move(name);
  l.forwardUsPerSample = fwdUs;
  l.weightBytes = weights;
  l.activationBytesPerSample = act;
  return l;
}

Job makeJob(std::string name, int layers, double fwdUs, int64_t weights = 0,
            int64_t act = 0) {
  Job j;
  j.name = std::move(name);
  j.samples = 1000000;
  for (int i = 0; i < layers; ++i)
    j.layers.push_back(makeLayer("l" + std::to_string(i), fwdUs, weights, act));
  return j;
}

StageBubbles oneBubble(double us, int64_t free, int64_t minFree) {
  StageBubbles s;
  s.stage = 0;
  s.iterationUs = 10 * us;
  s.minFreeBytes = minFree;
  Bubble b;
  b.id = 7;
  b.durationUs = us;
  b.freeBytes = free;
  s.bubbles.push_back(b);
  return s;
}

/// Random draws for the property tests (a distribution per draw, so the
/// sequence depends only on the seed and the calls).
struct Draw {
  explicit Draw(uint64_t seed) : rng(seed) {}
  double uni(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  std::mt19937_64 rng;
};

void expectValid(const std::vector<StageBubbles> &stages,
                 const std::vector<Job> &jobs, const Hardware &hw,
                 const Config &config, const Plan &plan) {
  std::vector<std::string> v = verifyPlan(stages, jobs, hw, config, plan);
  EXPECT_TRUE(v.empty()) << v.size() << " violations, first: " << v.front();
}

TEST(TimeModel, RooflinePlusLaunch) {
  Hardware hw; // hbm 2000 GB/s = 2e6 B/us, launch 5 us
  Layer l = makeLayer("ffn", 10, 4000000, 500000);
  // compute-bound at batch 8: 5 + max(80, (4e6 + 8e6) / 2e6 = 6) = 85
  EXPECT_DOUBLE_EQ(layerForwardUs(l, 8, hw), 85);
  // memory-bound at batch 1 with big weights: 5 + (40e6 + 1e6) / 2e6 = 25.5
  l.weightBytes = 40000000;
  EXPECT_DOUBLE_EQ(layerForwardUs(l, 1, hw), 25.5);
  // backward reads weights and gradients: 5 + max(1 * 30, (40e6 + 40e6 +
  // 1e6) / 2e6 = 40.5) = 45.5
  l.backwardUsPerSample = 30;
  l.gradBytes = 40000000;
  EXPECT_DOUBLE_EQ(layerBackwardUs(l, 1, hw), 45.5);
  // update: 5 + (2 * 40e6 + 40e6 + 2 * 80e6) / 2e6 = 145
  l.optimizerBytes = 80000000;
  EXPECT_DOUBLE_EQ(layerOptimizerUs(l, hw), 145);
  EXPECT_DOUBLE_EQ(layerOptimizerUs(makeLayer("relu", 1), hw), 0);
}

// One bubble of 1000 us, 10 layers of 10 us/sample, batch forced to 8,
// context switch 20 us, no margin. Each layer takes 5 + 8 * 10 = 85 us.
// Iteration with the cursor at c: finish the batch, (10 - c) layers = 20 +
// 85 (10 - c) us, leaving 130 + 85 c us: for c <= 8 a new batch gets c + 1
// layers (20 + 85 (c + 1) <= 130 + 85 c, one more does not fit); for c = 9 a
// whole batch fits (870 <= 895) and the cursor returns to 0. So every
// iteration runs 11 layers in 2 chunks (975 us), the cursor walks 0..9 and
// the period is 10 iterations, 11 batches: 8.8 samples per iteration, useful
// 8.8 * 100 = 880 us, efficiency 880 / 975. 11 layers is also the optimum:
// 12 layers need 12 * 85 + 2 * 20 = 1060 us.
TEST(HandChecked, TenLayersBatchEight) {
  Hardware hw;
  Config config;
  config.safetyMargin = 0;
  config.batchSizes = {8};
  std::vector<StageBubbles> stages = {oneBubble(1000, 1000000, 1000000)};
  std::vector<Job> jobs = {makeJob("tiny", 10, 10)};
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  ASSERT_EQ(plan.assignments.size(), 1u);
  const Assignment &a = plan.assignments[0];
  EXPECT_EQ(a.batch, 8);
  EXPECT_EQ(a.prefixIterations, 0);
  EXPECT_EQ(a.periodIterations, 10);
  EXPECT_EQ(a.batchesPerPeriod, 11);
  EXPECT_DOUBLE_EQ(a.samplesPerIteration, 8.8);
  EXPECT_NEAR(plan.usefulUs, 880, 1e-9);
  EXPECT_NEAR(plan.filledUs, 975, 1e-9);
  EXPECT_NEAR(plan.filledFraction, 0.975, 1e-12);
  EXPECT_NEAR(plan.jobs[0].efficiency, 880.0 / 975.0, 1e-12);
  EXPECT_NEAR(plan.jobs[0].iterationsToComplete, 1000000 / 8.8, 1e-6);
  // Iteration 0: a whole batch [0, 10) (870 us) then [0, 1) (105 us).
  std::vector<const Chunk *> first;
  for (const Chunk &c : plan.chunks)
    if (c.iteration == 0)
      first.push_back(&c);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0]->layerBegin, 0);
  EXPECT_EQ(first[0]->layerEnd, 10);
  EXPECT_DOUBLE_EQ(first[0]->predictedUs, 870);
  EXPECT_DOUBLE_EQ(first[0]->offsetUs, 0);
  EXPECT_EQ(first[1]->layerEnd, 1);
  EXPECT_EQ(first[1]->sampleBegin, 8);
  EXPECT_DOUBLE_EQ(first[1]->predictedUs, 105);
  EXPECT_DOUBLE_EQ(first[1]->offsetUs, 870);
  EXPECT_EQ(first[1]->bubbleId, 7);
  EXPECT_TRUE(plan.unscheduled.empty());
}

// Streaming: 2 layers of 10 us/sample with 2.5 MB of weights each, batch 8,
// PCIe 25 GB/s (100 us per layer), only 1 MB free across the iteration, so
// the 5 MB of weights cannot stay resident. Double-buffered chunk [0, 2):
// copy-in 0 ends at 100, compute 0 at 185 (85 us), copy-in 1 at 200,
// compute 1 at max(185, 200) + 85 = 285; with the context switch 305 us and
// 5 MB of buffers (both layers' weights). The 2000 us bubble takes 6 whole
// batches (1830 us), the remaining 170 us not even one layer (205 us):
// 48 samples and 6 * 2 * 80 = 960 us of useful work per iteration.
TEST(HandChecked, StreamedWeights) {
  Hardware hw;
  Config config;
  config.safetyMargin = 0;
  config.batchSizes = {8};
  std::vector<StageBubbles> stages = {oneBubble(2000, 10000000, 1000000)};
  std::vector<Job> jobs = {makeJob("streamy", 2, 10, 2500000)};
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  ASSERT_EQ(plan.assignments.size(), 1u);
  EXPECT_EQ(plan.assignments[0].weights, WeightPlacement::Streamed);
  EXPECT_EQ(plan.assignments[0].persistentBytes, 0);
  EXPECT_DOUBLE_EQ(plan.jobs[0].samplesPerIteration, 48);
  EXPECT_NEAR(plan.usefulUs, 960, 1e-9);
  EXPECT_NEAR(plan.filledUs, 1830, 1e-9);
  int batches = 0;
  for (const Chunk &c : plan.chunks) {
    EXPECT_DOUBLE_EQ(c.predictedUs, 305);
    EXPECT_DOUBLE_EQ(c.computeUs, 170);
    EXPECT_DOUBLE_EQ(c.copyUs, 200);
    EXPECT_EQ(c.peakBytes, 5000000);
    batches += c.repeat;
  }
  EXPECT_EQ(batches, 6);
}

// With room for the weights, residency wins: 2 * 85 + 20 = 190 us per batch,
// 10 batches in 2000 us (1900 us): 80 samples per iteration.
TEST(HandChecked, ResidentWhenItFits) {
  Hardware hw;
  Config config;
  config.safetyMargin = 0;
  config.batchSizes = {8};
  std::vector<StageBubbles> stages = {oneBubble(2000, 10000000, 6000000)};
  std::vector<Job> jobs = {makeJob("resident", 2, 10, 2500000)};
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  ASSERT_EQ(plan.assignments.size(), 1u);
  EXPECT_EQ(plan.assignments[0].weights, WeightPlacement::Resident);
  EXPECT_EQ(plan.assignments[0].persistentBytes, 5000000);
  EXPECT_DOUBLE_EQ(plan.jobs[0].samplesPerIteration, 80);
  EXPECT_NEAR(plan.filledUs, 1900, 1e-9);
}

// Training, one layer (10 us/sample forward, 20 backward, no weights),
// batch 8: forward op 85 us, backward op 165 us, a whole step 20 + 250 =
// 270 us. Iteration 0 (1000 us): 3 steps (810), then the forward of a 4th
// (105); iteration 1: its backward (185), 3 steps (810), cursor back at 0.
// 7 steps per 2 iterations = 28 samples and 28 * 30 = 840 us useful per
// iteration; filled (915 + 995) / 2 = 955 us.
TEST(HandChecked, TrainingStep) {
  Hardware hw;
  Config config;
  config.safetyMargin = 0;
  config.batchSizes = {8};
  std::vector<StageBubbles> stages = {oneBubble(1000, 1000000, 1000000)};
  Job job = makeJob("train", 1, 10);
  job.kind = JobKind::Training;
  job.layers[0].backwardUsPerSample = 20;
  std::vector<Job> jobs = {job};
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  ASSERT_EQ(plan.assignments.size(), 1u);
  EXPECT_EQ(plan.assignments[0].periodIterations, 2);
  EXPECT_DOUBLE_EQ(plan.jobs[0].samplesPerIteration, 28);
  EXPECT_NEAR(plan.usefulUs, 840, 1e-9);
  EXPECT_NEAR(plan.filledUs, 955, 1e-9);
  EXPECT_EQ(numOps(job), 2);
  bool backward = false;
  EXPECT_EQ(opLayer(job, 1, &backward), 0);
  EXPECT_TRUE(backward);
}

// Host activations: batch 1, two layers of 150 us/sample with 2.5 MB of
// output each (100 us over PCIe). Device memory for the activation between
// bubbles is not there (minFree 1 MB), so it waits on the host. A whole
// batch (20 + 2 * 155 = 330 us) fits no bubble; chunk [0, 1) = 20 + 155 +
// 100 (copy out) = 275 us, chunk [1, 2) = 20 + 100 (copy in) + 155 = 275 us.
// Two bubbles of 300 us: one layer each, 1 sample per iteration.
TEST(HandChecked, HostActivations) {
  Hardware hw;
  Config config;
  config.safetyMargin = 0;
  config.batchSizes = {1};
  StageBubbles s = oneBubble(300, 100000000, 1000000);
  s.bubbles.push_back(s.bubbles[0]);
  s.bubbles[1].id = 8;
  std::vector<StageBubbles> stages = {s};
  std::vector<Job> jobs = {makeJob("acts", 2, 150, 0, 2500000)};
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  ASSERT_EQ(plan.assignments.size(), 1u);
  EXPECT_EQ(plan.assignments[0].acts, ActPlacement::Host);
  EXPECT_DOUBLE_EQ(plan.jobs[0].samplesPerIteration, 1);
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_DOUBLE_EQ(plan.chunks[0].predictedUs, 275);
  EXPECT_DOUBLE_EQ(plan.chunks[0].copyUs, 100);
  EXPECT_DOUBLE_EQ(plan.chunks[1].predictedUs, 275);
  EXPECT_DOUBLE_EQ(plan.chunks[1].copyUs, 100);
  EXPECT_EQ(plan.chunks[1].bubbleId, 8);
}

// A job whose layers are too slow for the short bubbles of a stage shares
// the stage with a fine-grained one that fills what it leaves.
TEST(MultiJob, SmallJobFillsWhatTheBigOneLeaves) {
  Hardware hw;
  Config config;
  config.safetyMargin = 0;
  config.batchSizes = {4};
  StageBubbles s = oneBubble(2000, 1000000000, 1000000000);
  for (int k = 0; k < 4; ++k) {
    Bubble b;
    b.id = 100 + k;
    b.durationUs = 300;
    b.freeBytes = 1000000000;
    s.bubbles.push_back(b);
  }
  std::vector<StageBubbles> stages = {s};
  Job big = makeJob("big", 2, 200);  // 805 us per layer at batch 4
  big.priority = 3;
  Job small = makeJob("small", 4, 5); // 25 us per layer
  std::vector<Job> jobs = {big, small};
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  ASSERT_EQ(plan.assignments.size(), 2u);
  EXPECT_EQ(plan.assignments[0].job, 0);
  EXPECT_EQ(plan.assignments[1].job, 1);
  EXPECT_GT(plan.jobs[1].samplesPerIteration, 0);
  // The small job runs in the short bubbles and after the big one.
  bool inShort = false;
  for (const Chunk &c : plan.chunks)
    inShort |= c.job == 1 && c.bubbleId >= 100;
  EXPECT_TRUE(inShort);

  config.allowMultipleJobsPerStage = false;
  Plan single = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, single);
  EXPECT_EQ(single.assignments.size(), 1u);
  EXPECT_LT(single.usefulUs, plan.usefulUs);
  ASSERT_EQ(single.unscheduled.size(), 1u);
  EXPECT_NE(single.unscheduled[0].reason.find("not placed"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Bad inputs: unscheduled with a specific reason, or an error; never a crash.
// ---------------------------------------------------------------------------

TEST(BadInput, LayerLongerThanEveryBubble) {
  Hardware hw;
  Config config;
  std::vector<StageBubbles> stages = {oneBubble(1500, 12000000000, 12000000000)};
  Job job = makeJob("slow", 3, 1);
  job.layers[1] = makeLayer("ffn", 2103); // >= 2108 us even at batch 1
  std::vector<Job> jobs = {job};
  Plan plan = planFill(stages, jobs, hw, config);
  EXPECT_TRUE(plan.chunks.empty());
  ASSERT_EQ(plan.unscheduled.size(), 1u);
  const std::string &r = plan.unscheduled[0].reason;
  EXPECT_NE(r.find("layer 'ffn'"), std::string::npos) << r;
  EXPECT_NE(r.find("2.13 ms"), std::string::npos) << r;   // 2108 + 20
  EXPECT_NE(r.find("1.43 ms"), std::string::npos) << r;   // 1500 * 0.95
  EXPECT_NE(r.find("1.50 ms"), std::string::npos) << r;
  EXPECT_EQ(plan.jobs[0].samplesPerIteration, 0);
  EXPECT_TRUE(std::isinf(plan.jobs[0].iterationsToComplete));
}

TEST(BadInput, LayerLargerThanEveryBubble) {
  Hardware hw;
  Config config;
  std::vector<StageBubbles> stages = {oneBubble(100000, 12000000000, 12000000000)};
  // 30 GB of weights: even streamed, one layer needs them on the device.
  Job job = makeJob("huge", 2, 1);
  job.layers[0] = makeLayer("ffn", 1, 30000000000);
  std::vector<Job> jobs = {job};
  Plan plan = planFill(stages, jobs, hw, config);
  ASSERT_EQ(plan.unscheduled.size(), 1u);
  const std::string &r = plan.unscheduled[0].reason;
  EXPECT_NE(r.find("layer 'ffn' needs 30.0 GB"), std::string::npos) << r;
  EXPECT_NE(r.find("12.0 GB free"), std::string::npos) << r;
  // Streaming it would also take 1.2 s over PCIe, beyond the 95 ms bubble.
  EXPECT_NE(r.find("longest bubble allows 95.00 ms"), std::string::npos) << r;
}

TEST(BadInput, ZeroFreeMemory) {
  Hardware hw;
  Config config;
  std::vector<StageBubbles> stages = {oneBubble(5000, 0, 0)};
  std::vector<Job> jobs = {makeJob("acts", 2, 1, 0, 1000)};
  Plan plan = planFill(stages, jobs, hw, config);
  EXPECT_TRUE(plan.chunks.empty());
  ASSERT_EQ(plan.unscheduled.size(), 1u);
  EXPECT_NE(plan.unscheduled[0].reason.find("0 B free"), std::string::npos)
      << plan.unscheduled[0].reason;
  expectValid(stages, jobs, hw, config, plan);
}

// A stage without a bubble (a one-stage pipeline has none): nothing to fill, and no arithmetic on
// "the largest bubble" of none (the fuzzer found INT64_MIN - bytes, signed overflow, in the
// candidate filter of a one-stage interleaved JobSpec).
TEST(BadInput, StageWithoutBubbles) {
  Hardware hw;
  Config config;
  StageBubbles s;
  s.stage = 0;
  s.iterationUs = 50000;
  s.minFreeBytes = 12000000000;
  std::vector<StageBubbles> stages = {s};
  std::vector<Job> jobs = {makeJob("enc", 2, 1, /*weights=*/1000000)}; // persistent bytes > 0
  Plan plan = planFill(stages, jobs, hw, config);
  EXPECT_TRUE(plan.chunks.empty());
  EXPECT_EQ(plan.jobs[0].samplesPerIteration, 0);
  expectValid(stages, jobs, hw, config, plan);
}

TEST(BadInput, ZeroSamplesNoLayersAndBadNumbers) {
  Hardware hw;
  Config config;
  std::vector<StageBubbles> stages = {oneBubble(5000, 1000000000, 1000000000)};
  Job none = makeJob("none", 2, 1);
  none.samples = 0;
  Job empty = makeJob("empty", 0, 1);
  Job nan = makeJob("nan", 2, 1);
  nan.layers[1].forwardUsPerSample = std::nan("");
  Job negative = makeJob("negative", 2, 1);
  negative.layers[0].weightBytes = -5;
  Job lazy = makeJob("lazy", 2, 0);
  Job noPriority = makeJob("noPriority", 2, 1);
  noPriority.priority = 0;
  Job huge = makeJob("huge", 2, 1);
  huge.layers[1].activationBytesPerSample = int64_t(1) << 62;
  Job good = makeJob("good", 2, 1);
  std::vector<Job> jobs = {none,       empty, nan, negative, lazy,
                           noPriority, huge,  good};
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  ASSERT_EQ(plan.unscheduled.size(), 7u);
  auto reasonOf = [&](const std::string &name) {
    for (const Unscheduled &u : plan.unscheduled)
      if (u.name == name)
        return u.reason;
    return std::string("<scheduled>");
  };
  EXPECT_NE(reasonOf("none").find("no samples"), std::string::npos);
  EXPECT_NE(reasonOf("empty").find("no layers"), std::string::npos);
  EXPECT_NE(reasonOf("nan").find("forwardUsPerSample"), std::string::npos);
  EXPECT_NE(reasonOf("negative").find("weightBytes"), std::string::npos);
  EXPECT_NE(reasonOf("lazy").find("no work"), std::string::npos);
  EXPECT_NE(reasonOf("noPriority").find("priority"), std::string::npos);
  EXPECT_NE(reasonOf("huge").find("activationBytesPerSample"), std::string::npos);
  EXPECT_EQ(reasonOf("good"), "<scheduled>");
}

TEST(BadInput, NoPcieKeepsWeightsResident) {
  Hardware hw;
  hw.pcieGBps = 0;
  Config config;
  std::vector<StageBubbles> stages = {oneBubble(5000, 10000000, 1000000)};
  std::vector<Job> jobs = {makeJob("fat", 2, 1, 2000000)};
  Plan plan = planFill(stages, jobs, hw, config);
  ASSERT_EQ(plan.unscheduled.size(), 1u);
  EXPECT_NE(plan.unscheduled[0].reason.find("no PCIe"), std::string::npos)
      << plan.unscheduled[0].reason;
}

TEST(BadInput, InvalidStagesAndConfig) {
  Hardware hw;
  Config config;
  std::vector<StageBubbles> stages = {oneBubble(1000, 1000000, 1000000),
                                      oneBubble(1000, 1000000, 1000000)};
  stages[1].stage = 1;
  stages[1].bubbles[0].durationUs = -3;
  std::vector<Job> jobs = {makeJob("ok", 2, 1)};
  Plan plan = planFill(stages, jobs, hw, config);
  ASSERT_EQ(plan.errors.size(), 1u);
  EXPECT_NE(plan.errors[0].find("stage 1"), std::string::npos);
  for (const Chunk &c : plan.chunks)
    EXPECT_EQ(c.stage, 0);

  Config bad = config;
  bad.safetyMargin = 1.5;
  bad.batchSizes = {0};
  Plan none = planFill(stages, jobs, hw, bad);
  EXPECT_EQ(none.errors.size(), 3u); // margin, batch 0, stage 1
  EXPECT_TRUE(none.chunks.empty());
  ASSERT_EQ(none.unscheduled.size(), 1u);

  std::vector<StageBubbles> dup = {oneBubble(1000, 1000000, 1000000)};
  dup[0].bubbles.push_back(dup[0].bubbles[0]);
  Plan d = planFill(dup, jobs, hw, config);
  ASSERT_EQ(d.errors.size(), 1u);
  EXPECT_NE(d.errors[0].find("bubble id 7 appears more than once"), std::string::npos);
  // The same stage twice: the second copy is skipped, the first planned.
  std::vector<StageBubbles> twice = {oneBubble(1000, 1000000, 1000000),
                                     oneBubble(1000, 1000000, 1000000)};
  Plan t = planFill(twice, jobs, hw, config);
  ASSERT_EQ(t.errors.size(), 1u);
  EXPECT_NE(t.errors[0].find("appears more than once; stage skipped"), std::string::npos);
  EXPECT_FALSE(t.chunks.empty());

  Hardware noHbm;
  noHbm.hbmGBps = 0;
  EXPECT_FALSE(planFill(stages, jobs, noHbm, config).errors.empty());
  // Nothing at all.
  Plan empty = planFill({}, {}, hw, config);
  EXPECT_TRUE(empty.chunks.empty());
  EXPECT_EQ(empty.filledFraction, 0);
  Plan noBubbles = planFill({}, jobs, hw, config);
  ASSERT_EQ(noBubbles.unscheduled.size(), 1u);
  EXPECT_NE(noBubbles.unscheduled[0].reason.find("no bubbles"), std::string::npos);
}

// ---------------------------------------------------------------------------
// The verifier catches broken plans.
// ---------------------------------------------------------------------------

TEST(Verifier, CatchesCorruptedPlans) {
  Hardware hw;
  Config config;
  config.safetyMargin = 0;
  config.batchSizes = {8};
  std::vector<StageBubbles> stages = {oneBubble(1000, 1000000, 1000000)};
  std::vector<Job> jobs = {makeJob("tiny", 10, 10)};
  Plan plan = planFill(stages, jobs, hw, config);
  ASSERT_TRUE(verifyPlan(stages, jobs, hw, config, plan).empty());
  ASSERT_GE(plan.chunks.size(), 2u);

  auto broken = [&](auto mutate) {
    Plan p = plan;
    mutate(p);
    return !verifyPlan(stages, jobs, hw, config, p).empty();
  };
  EXPECT_TRUE(broken([](Plan &p) { p.chunks[0].predictedUs -= 50; }));
  EXPECT_TRUE(broken([](Plan &p) { p.chunks[1].offsetUs += 100; }));
  EXPECT_TRUE(broken([](Plan &p) { p.chunks[1].layerEnd += 1; }));
  EXPECT_TRUE(broken([](Plan &p) { p.chunks[0].layerEnd = 11; }));
  EXPECT_TRUE(broken([](Plan &p) { p.chunks[0].bubbleId = 99; }));
  EXPECT_TRUE(broken([](Plan &p) { p.chunks[0].peakBytes = 5; }));
  EXPECT_TRUE(broken([](Plan &p) { p.chunks[0].sampleBegin = 3; }));
  EXPECT_TRUE(broken([](Plan &p) { p.chunks[0].repeat = 2; }));
  EXPECT_TRUE(broken([](Plan &p) { p.chunks.pop_back(); }));
  EXPECT_TRUE(broken([](Plan &p) { p.assignments[0].batchesPerPeriod += 1; }));
  EXPECT_TRUE(broken([](Plan &p) { p.filledUs *= 2; }));
  EXPECT_TRUE(broken([](Plan &p) {
    p.chunks[0].weights = WeightPlacement::Streamed;
  }));
  // Too little memory for what the plan keeps resident.
  std::vector<StageBubbles> tight = stages;
  tight[0].bubbles[0].freeBytes = 0;
  Plan big = planFill(stages, {makeJob("w", 2, 10, 400000)}, hw, config);
  EXPECT_FALSE(
      verifyPlan(tight, {makeJob("w", 2, 10, 400000)}, hw, config, big).empty());
}

// ---------------------------------------------------------------------------
// Properties on random instances.
// ---------------------------------------------------------------------------

// Exactly the same plan: every chunk and assignment field, job results and reasons.
void expectSamePlan(const Plan &a, const Plan &b) {
  ASSERT_EQ(a.chunks.size(), b.chunks.size());
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    const Chunk &x = a.chunks[i], &y = b.chunks[i];
    EXPECT_TRUE(x.stage == y.stage && x.bubbleId == y.bubbleId && x.job == y.job &&
                x.layerBegin == y.layerBegin && x.layerEnd == y.layerEnd &&
                x.batch == y.batch && x.sampleBegin == y.sampleBegin &&
                x.weights == y.weights && x.acts == y.acts && x.optimizer == y.optimizer &&
                x.checkpoint == y.checkpoint && x.computeUs == y.computeUs &&
                x.copyUs == y.copyUs && x.predictedUs == y.predictedUs &&
                x.peakBytes == y.peakBytes && x.iteration == y.iteration &&
                x.repeat == y.repeat && x.offsetUs == y.offsetUs)
        << "chunk " << i;
  }
  ASSERT_EQ(a.assignments.size(), b.assignments.size());
  for (size_t i = 0; i < a.assignments.size(); ++i) {
    const Assignment &x = a.assignments[i], &y = b.assignments[i];
    EXPECT_TRUE(x.stage == y.stage && x.job == y.job && x.batch == y.batch &&
                x.prefixIterations == y.prefixIterations &&
                x.periodIterations == y.periodIterations &&
                x.batchesPerPeriod == y.batchesPerPeriod &&
                x.tailSamplesPerIteration == y.tailSamplesPerIteration &&
                x.samplesPerIteration == y.samplesPerIteration && x.usefulUs == y.usefulUs &&
                x.filledUs == y.filledUs && x.persistentBytes == y.persistentBytes)
        << "assignment " << i;
  }
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t j = 0; j < a.jobs.size(); ++j)
    EXPECT_EQ(a.jobs[j].samplesPerIteration, b.jobs[j].samplesPerIteration) << "job " << j;
  ASSERT_EQ(a.unscheduled.size(), b.unscheduled.size());
  for (size_t j = 0; j < a.unscheduled.size(); ++j)
    EXPECT_EQ(a.unscheduled[j].reason, b.unscheduled[j].reason);
  EXPECT_EQ(a.filledUs, b.filledUs);
}

TEST(Properties, RandomPlansVerify) {
  Draw draw(99);
  auto uni = [&](double lo, double hi) { return draw.uni(lo, hi); };
  auto pick = [&](int lo, int hi) { return draw.pick(lo, hi); };
  for (int inst = 0; inst < 150; ++inst) {
    Hardware hw;
    hw.pcieGBps = uni(4, 64);
    hw.kernelLaunchUs = pick(0, 4) == 0 ? 0 : 5;
    Config config;
    config.contextSwitchUs = pick(0, 4) == 0 ? 0 : uni(0, 40);
    config.safetyMargin = uni(0, 0.2);
    config.reserveBytes = pick(0, 1) ? int64_t(uni(0, 4e8)) : 0;
    config.allowMultipleJobsPerStage = pick(0, 3) != 0;
    config.batchSizes = {1, 4, 16, 64};
    std::vector<StageBubbles> stages;
    int numStages = pick(1, 6);
    for (int s = 0; s < numStages; ++s) {
      StageBubbles sb;
      sb.stage = 100 + s;
      double t = 0;
      int64_t minFree = INT64_MAX;
      for (int k = pick(0, 8); k > 0; --k) {
        Bubble b;
        b.id = k;
        b.startUs = t;
        b.durationUs = uni(0, 20000);
        b.freeBytes = int64_t(uni(0, 8e9));
        t += b.durationUs + uni(0, 5000);
        minFree = std::min(minFree, b.freeBytes);
        sb.bubbles.push_back(b);
      }
      sb.iterationUs = t;
      sb.minFreeBytes = sb.bubbles.empty() ? 0 : int64_t(minFree * uni(0, 1));
      stages.push_back(sb);
    }
    std::vector<Job> jobs;
    for (int j = pick(1, 5); j > 0; --j) {
      Job job;
      job.name = "j" + std::to_string(j);
      job.kind = pick(0, 2) == 0 ? JobKind::Training : JobKind::Inference;
      job.samples = pick(0, 10) == 0 ? pick(1, 20) : 1000000;
      job.priority = uni(0.1, 4);
      for (int l = pick(1, 12); l > 0; --l) {
        Layer layer = makeLayer("l" + std::to_string(l), uni(0.1, 200),
                                int64_t(uni(0, 3e8)), int64_t(uni(0, 4e6)));
        layer.backwardUsPerSample = 2 * layer.forwardUsPerSample;
        layer.gradBytes = layer.weightBytes;
        layer.optimizerBytes = 2 * layer.weightBytes;
        layer.stashBytesPerSample = int64_t(uni(0, 1.6e7));
        job.layers.push_back(layer);
      }
      jobs.push_back(job);
    }
    Plan plan = planFill(stages, jobs, hw, config);
    EXPECT_TRUE(plan.errors.empty());
    expectValid(stages, jobs, hw, config, plan);
    // The stages planned on three threads: the same plan.
    Config parallel = config;
    parallel.threads = 3;
    expectSamePlan(plan, planFill(stages, jobs, hw, parallel));
    // Through a sink (as pipefill-plan-fill takes them), on one and on two
    // threads: each stage's chunks exactly once, only that stage's, and the
    // same plan once put back in stage order.
    for (int threads : {1, 2}) {
      Config sunk = config;
      sunk.threads = threads;
      std::vector<std::vector<Chunk>> byStage(stages.size());
      std::vector<int> calls(stages.size(), 0);
      std::mutex lock;
      Plan viaSink = planFill(stages, jobs, hw, sunk,
                              [&](int stage, std::vector<Chunk> &&chunks) {
                                std::lock_guard<std::mutex> guard(lock);
                                ++calls[stage];
                                byStage[stage] = std::move(chunks);
                              });
      EXPECT_TRUE(viaSink.chunks.empty());
      for (size_t s = 0; s < stages.size(); ++s) {
        EXPECT_LE(calls[s], 1) << "stage " << s;
        for (const Chunk &c : byStage[s])
          EXPECT_EQ(c.stage, stages[s].stage) << "stage " << s;
        viaSink.chunks.insert(viaSink.chunks.end(), byStage[s].begin(), byStage[s].end());
      }
      expectSamePlan(plan, viaSink);
    }
    EXPECT_LE(plan.filledFraction, 1 + 1e-12);
    EXPECT_GE(plan.filledFraction, 0);
    EXPECT_LE(plan.usefulUs, plan.filledUs + 1e-6);
    EXPECT_EQ(plan.jobs.size(), jobs.size());
    for (const Chunk &c : plan.chunks) {
      const StageBubbles *stage = nullptr;
      for (const StageBubbles &s : stages)
        if (s.stage == c.stage)
          stage = &s;
      ASSERT_NE(stage, nullptr);
      const Bubble *bubble = nullptr;
      for (const Bubble &b : stage->bubbles)
        if (b.id == c.bubbleId)
          bubble = &b;
      ASSERT_NE(bubble, nullptr);
      EXPECT_GE(c.offsetUs, 0);
      EXPECT_LE(c.offsetUs + c.repeat * c.predictedUs,
                bubble->durationUs * (1 - config.safetyMargin) + 1e-6);
      EXPECT_LE(c.peakBytes, bubble->freeBytes - config.reserveBytes);
      EXPECT_GE(c.predictedUs, config.contextSwitchUs + c.computeUs - 1e-9);
    }
    // Every job is either scheduled somewhere or listed with a reason.
    for (size_t j = 0; j < jobs.size(); ++j) {
      bool listed = false;
      for (const Unscheduled &u : plan.unscheduled)
        listed |= u.name == jobs[j].name && !u.reason.empty();
      EXPECT_NE(plan.jobs[j].stages > 0, listed) << jobs[j].name;
    }
    // Deterministic.
    Plan again = planFill(stages, jobs, hw, config);
    EXPECT_EQ(again.chunks.size(), plan.chunks.size());
    EXPECT_EQ(again.usefulUs, plan.usefulUs);
  }
}

// Stages of many bubbles or jobs are searched in the order of a second, tighter
// bound (StagePlanner's tierBound), which stops after fewer packings; with a
// simulation cap they are searched in the order of the first. Both must give
// the same plan: a tier bound below some candidate's value would skip it.
TEST(Properties, TierOrderGivesTheBoundOrderPlan) {
  Draw draw(7);
  auto uni = [&](double lo, double hi) { return draw.uni(lo, hi); };
  auto pick = [&](int lo, int hi) { return draw.pick(lo, hi); };
  int planned = 0;
  for (int inst = 0; inst < 40; ++inst) {
    Hardware hw;
    hw.pcieGBps = uni(4, 64);
    Config config;
    config.contextSwitchUs = pick(0, 4) == 0 ? 0 : uni(0, 40);
    config.batchSizes = {1, 4, 16};
    config.maxJobsPerStage = pick(1, 3);
    std::vector<StageBubbles> stages;
    for (int s = pick(1, 3); s > 0; --s) {
      // A pipeline's bubbles: a few lengths repeated (differing in their
      // last bits), and one or two long ones.
      StageBubbles sb;
      sb.stage = s;
      std::vector<double> lengths = {uni(50, 3000), uni(50, 3000), uni(2e4, 2e5)};
      double t = 0;
      int64_t minFree = INT64_MAX;
      for (int k = pick(17, 60); k > 0; --k) {
        Bubble b;
        b.id = k;
        b.startUs = t;
        int which = pick(0, 9) == 0 ? 2 : pick(0, 1);
        b.durationUs = lengths[which] * (1 + 1e-15 * pick(0, 3));
        b.freeBytes = int64_t(uni(2e8, 8e9));
        t += b.durationUs + uni(0, 5000);
        minFree = std::min(minFree, b.freeBytes);
        sb.bubbles.push_back(b);
      }
      sb.iterationUs = t;
      sb.minFreeBytes = int64_t(minFree * uni(0.5, 1));
      stages.push_back(sb);
    }
    std::vector<Job> jobs;
    for (int j = pick(5, 9); j > 0; --j) {
      Job job;
      job.name = "j" + std::to_string(j);
      job.kind = pick(0, 2) == 0 ? JobKind::Training : JobKind::Inference;
      job.samples = 1000000;
      job.priority = pick(0, 1) ? 1 : uni(0.5, 3);
      for (int l = pick(1, 12); l > 0; --l) {
        // Some layers long beside the short bubbles.
        double us = pick(0, 3) == 0 ? uni(20, 400) : uni(0.1, 20);
        Layer layer = makeLayer("l" + std::to_string(l), us, int64_t(uni(0, 3e8)),
                                int64_t(uni(0, 4e6)));
        layer.backwardUsPerSample = 2 * layer.forwardUsPerSample;
        layer.gradBytes = layer.weightBytes;
        layer.optimizerBytes = 2 * layer.weightBytes;
        job.layers.push_back(layer);
      }
      jobs.push_back(job);
    }
    Plan plan = planFill(stages, jobs, hw, config);
    EXPECT_TRUE(plan.errors.empty());
    Config boundOrder = config;
    boundOrder.maxSimulationsPerSlot = 1 << 30; // a cap never reached
    expectSamePlan(plan, planFill(stages, jobs, hw, boundOrder));
    planned += !plan.assignments.empty();
  }
  EXPECT_GT(planned, 30);
}

// ---------------------------------------------------------------------------
// Realistic bubbles: a 16-stage 1F1B pipeline, fine-grained inference.
// ---------------------------------------------------------------------------

/// Idle intervals of each stage of a 1F1B pipeline with uniform stage costs,
/// from a list-scheduling simulation; the idle time at the end of an
/// iteration and at the start of the next is one bubble.
std::vector<StageBubbles> oneFOneB(int p, int m, double fwdUs, double bwdUs,
                                   int64_t freeBytes) {
  struct Op {
    bool backward;
    int micro;
  };
  std::vector<std::vector<Op>> order(p);
  for (int s = 0; s < p; ++s) {
    int warm = std::min(p - s - 1, m);
    int f = 0, b = 0;
    for (; f < warm; ++f)
      order[s].push_back({false, f});
    while (b < m) {
      if (f < m)
        order[s].push_back({false, f++});
      order[s].push_back({true, b++});
    }
  }
  std::vector<std::vector<double>> fEnd(p, std::vector<double>(m, -1)),
      bEnd(p, std::vector<double>(m, -1));
  std::vector<size_t> next(p, 0);
  std::vector<double> free(p, 0);
  std::vector<std::vector<std::pair<double, double>>> busy(p);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < order[s].size()) {
        Op op = order[s][next[s]];
        double ready;
        if (!op.backward) {
          if (s > 0 && fEnd[s - 1][op.micro] < 0)
            break;
          ready = s > 0 ? fEnd[s - 1][op.micro] : 0;
        } else {
          if (s + 1 < p && bEnd[s + 1][op.micro] < 0)
            break;
          ready = s + 1 < p ? bEnd[s + 1][op.micro] : fEnd[s][op.micro];
        }
        double start = std::max(ready, free[s]);
        double end = start + (op.backward ? bwdUs : fwdUs);
        (op.backward ? bEnd : fEnd)[s][op.micro] = end;
        busy[s].push_back({start, end});
        free[s] = end;
        ++next[s];
        progress = true;
      }
    }
  }
  double iteration = 0;
  for (int s = 0; s < p; ++s)
    iteration = std::max(iteration, free[s]);
  std::vector<StageBubbles> stages(p);
  for (int s = 0; s < p; ++s) {
    StageBubbles &sb = stages[s];
    sb.stage = s;
    sb.iterationUs = iteration;
    sb.minFreeBytes = freeBytes / 2;
    double t = busy[s].front().first; // idle before: merged into the last
    int id = 0;
    for (size_t i = 1; i < busy[s].size(); ++i) {
      double gap = busy[s][i].first - busy[s][i - 1].second;
      if (gap > 1e-9)
        sb.bubbles.push_back({id++, busy[s][i - 1].second, gap, freeBytes});
    }
    double tail = iteration - busy[s].back().second + t;
    if (tail > 1e-9)
      sb.bubbles.push_back({id++, busy[s].back().second, tail, freeBytes});
  }
  return stages;
}

TEST(Realistic, FineGrainedInferenceFillsOneFOneBBubbles) {
  const int p = 16, m = 64;
  std::vector<StageBubbles> stages = oneFOneB(p, m, 2000, 4000, 8000000000);
  double total = 0;
  for (const StageBubbles &s : stages)
    for (const Bubble &b : s.bubbles)
      total += b.durationUs;
  // (p - 1) (fwd + bwd) idle per stage, as the closed form says.
  EXPECT_NEAR(total, p * (p - 1) * 6000.0, 1e-6);
  Hardware hw;
  Config config;
  // A 96-layer encoder-like inference job: 2 us/sample per layer, 8 MB of
  // weights, 16 KB of activations per sample.
  Job job = makeJob("encoder", 96, 2, 8000000, 16000);
  std::vector<Job> jobs = {job};
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  EXPECT_EQ(plan.assignments.size(), size_t(p));
  EXPECT_GE(plan.filledFraction, 0.9);
  EXPECT_GT(plan.jobs[0].efficiency, 0.85);
  std::printf("[1f1b] %d stages x %d microbatches: %zu bubbles, filled "
              "%.4f, efficiency %.4f, %.1f samples/iteration\n",
              p, m, size_t(stages[0].bubbles.size()), plan.filledFraction,
              plan.jobs[0].efficiency, plan.jobs[0].samplesPerIteration);
}

// ---------------------------------------------------------------------------
// Tail chunks, priorities, and the account of idle time.
// ---------------------------------------------------------------------------

// The case: a one-layer job in 1442 us bubbles. Batch 256 takes
// 20 (switch) + 5 (launch) + 256 x 2 = 537 us, so two fit the 1369.9 us budget
// (1442 less 5%) and leave 295.9 us, where a batch-128 chunk (281 us) fits:
// 640 samples per bubble instead of 512 (batch 128 alone: 4 x 281 = 1124 us
// + a batch-64 tail of 153 us = 576 samples).
TEST(TailChunks, OneLayerJobGetsASmallerBatchInTheTimeLeft) {
  std::vector<StageBubbles> stages = {oneBubble(1442, 8000000000, 8000000000)};
  std::vector<Job> jobs = {makeJob("onelayer", 1, 2.0, 0, 1000)};
  Hardware hw;
  Config config;
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  ASSERT_EQ(plan.assignments.size(), 1u);
  const Assignment &a = plan.assignments[0];
  EXPECT_EQ(a.batch, 256);
  EXPECT_EQ(a.tailSamplesPerIteration, 128);
  EXPECT_NEAR(a.samplesPerIteration, 640, 1e-9);
  int tails = 0;
  for (const Chunk &c : plan.chunks)
    tails += c.batch == 128;
  EXPECT_EQ(tails, 1);
  // Idle beyond the 5% margin: 1369.9 - 2 x 537 - 281 = 14.9 us, 1% of the
  // bubble (the issue asks for within 5%).
  double budget = 1442 * 0.95;
  EXPECT_NEAR(budget - plan.filledUs, 14.9, 1e-6);
  EXPECT_LE((budget - plan.filledUs) / 1442, 0.05);
  ASSERT_EQ(plan.accounts.size(), 1u);
  EXPECT_NEAR(plan.accounts[0].granularityUs + plan.accounts[0].tooShortUs,
              14.9, 1e-6);

  // Without tail chunks the gap is the one the issue reports.
  config.tailChunks = false;
  Plan without = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, without);
  EXPECT_NEAR(without.assignments[0].samplesPerIteration, 512, 1e-9);
  EXPECT_GT((budget - without.filledUs) / 1442, 0.05);
}

// The objective is priority-weighted useful time: a lower-priority job wins
// a bubble only if it does more than (priority ratio) times the work; more
// total work alone never displaces a higher-priority job.
TEST(Priorities, HigherPriorityIsNotDisplacedForMoreTotalWork) {
  // One 100 us bubble, room for one job: each job keeps 6 GB resident and
  // the stage has 10 GB. A: 60 us of work per chunk at priority 2 (value
  // 120); B: 75 us per chunk, 1.25x the work, at priority 1 (value 75).
  std::vector<StageBubbles> stages = {oneBubble(100, 10000000000, 10000000000)};
  Job a = makeJob("a", 1, 60, 6000000000, 0);
  a.priority = 2;
  Job b = makeJob("b", 1, 75, 6000000000, 0);
  b.priority = 1;
  Hardware hw;
  hw.pcieGBps = 0; // weights cannot be streamed: one job per stage
  hw.hbmGBps = 1e9; // compute-bound
  hw.kernelLaunchUs = 0;
  Config config;
  config.contextSwitchUs = 0;
  config.safetyMargin = 0;
  config.batchSizes = {1};
  std::vector<Job> jobs = {a, b};
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  ASSERT_EQ(plan.assignments.size(), 1u);
  EXPECT_EQ(plan.assignments[0].job, 0);
  // A at priority 0.5 with 30 us per sample: three chunks fit (90 us of
  // work, value 45) against B's one chunk (75 us, value 75): B wins now.
  jobs[0].layers[0].forwardUsPerSample = 30;
  jobs[0].priority = 0.5;
  Plan flipped = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, flipped);
  ASSERT_EQ(flipped.assignments.size(), 1u);
  EXPECT_EQ(flipped.assignments[0].job, 1);
}

// Every microsecond of bubble time is accounted for: filled = useful +
// switches + launches + other overheads, idle = margin + too short + memory
// + granularity, filled + idle = bubble time, on random instances.
TEST(Account, EveryMicrosecondIsAccountedFor) {
  std::mt19937_64 rng(99);
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  int checked = 0;
  for (int i = 0; i < 30; ++i) {
    std::vector<StageBubbles> stages;
    for (int s = 0; s < 3; ++s) {
      StageBubbles sb;
      sb.stage = s;
      for (int k = 0; k < 4; ++k) {
        Bubble b;
        b.id = k;
        b.durationUs = uni(20, 3000);
        b.freeBytes = int64_t(uni(1e6, 4e9));
        sb.bubbles.push_back(b);
      }
      sb.minFreeBytes = int64_t(uni(0, 2e9));
      stages.push_back(sb);
    }
    std::vector<Job> jobs = {makeJob("x", 3, uni(0.5, 30), int64_t(uni(0, 4e8)),
                                     int64_t(uni(1e3, 2e6))),
                             makeJob("y", 1, uni(0.05, 5), int64_t(uni(0, 4e7)),
                                     int64_t(uni(1e3, 2e5)))};
    Hardware hw;
    Config config;
    Plan plan = planFill(stages, jobs, hw, config);
    expectValid(stages, jobs, hw, config, plan);
    ASSERT_EQ(plan.accounts.size(), stages.size());
    double useful = 0, filled = 0;
    for (const StageAccount &a : plan.accounts) {
      double tol = 1e-6 * std::max(1.0, a.bubbleUs);
      EXPECT_NEAR(a.filledUs + a.idleUs, a.bubbleUs, tol);
      EXPECT_NEAR(a.usefulUs + a.switchUs + a.launchUs + a.otherOverheadUs,
                  a.filledUs, tol);
      EXPECT_NEAR(a.marginUs + a.tooShortUs + a.memoryUs + a.granularityUs,
                  a.idleUs, tol);
      useful += a.usefulUs;
      filled += a.filledUs;
      checked += a.filledUs > 0;
    }
    EXPECT_NEAR(useful, plan.usefulUs, 1e-6 * std::max(1.0, useful));
    EXPECT_NEAR(filled, plan.filledUs, 1e-6 * std::max(1.0, filled));
    EXPECT_LE(plan.usefulFraction, plan.filledFraction + 1e-12);
  }
  EXPECT_GT(checked, 15);
}

// A very fine-grained job: the bubble is "filled" but mostly with switches
// and launches; the useful fraction says so.
TEST(Account, FineGrainedJobIsFilledButNotUseful) {
  // 0.05 us per sample, batch at most 8: a chunk is 20 + 5 + 0.4 us.
  std::vector<StageBubbles> stages = {oneBubble(1000, 8000000000, 8000000000)};
  std::vector<Job> jobs = {makeJob("tiny", 1, 0.05, 0, 1000)};
  Hardware hw;
  Config config;
  config.batchSizes = {1, 2, 4, 8};
  Plan plan = planFill(stages, jobs, hw, config);
  expectValid(stages, jobs, hw, config, plan);
  EXPECT_GT(plan.filledFraction, 0.9);
  EXPECT_LT(plan.usefulFraction, 0.05);
  const StageAccount &a = plan.accounts[0];
  EXPECT_GT(a.switchUs, 0.7 * a.filledUs);
  EXPECT_GT(a.launchUs, 0.15 * a.filledUs);
}

} // namespace
} // namespace pipefill::fill
