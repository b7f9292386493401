//===- SimulateTest.cpp - Timeline semantics on hand-computed cases -------===//

#include "algo/schedule/tests/TestUtil.h"

using namespace pipefill::sched;
using namespace pipefill::sched::test;

namespace {
const InstrKind F = InstrKind::Forward, B = InstrKind::Backward,
                BI = InstrKind::BackwardInput,
                BW = InstrKind::BackwardWeight, S = InstrKind::Send,
                R = InstrKind::Recv;
const Payload A = Payload::Activation, G = Payload::Gradient;
} // namespace

// Two stages, latency 2 us, 1 GB/s, 1000-byte messages: 3 us per transfer.
TEST(Simulate, HandBuiltTwoStageTimeline) {
  PipelineSpec spec;
  spec.stages = 2;
  spec.p2pLatencyUs = 2;
  spec.p2pBandwidthGBps = 1;
  Schedule sched(2);
  sched[0] = {compute(F, 0, 10, 100), transfer(S, A, 0, 1, 1000),
              transfer(R, G, 0, 1, 1000), compute(B, 0, 20)};
  sched[1] = {transfer(R, A, 0, 0, 1000), compute(F, 0, 5, 40),
              compute(B, 0, 8), transfer(S, G, 0, 0, 1000)};
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(spec, sched, r, error)) << error;
  // Stage 0: F [0,10], send at 10 (arrives 13), waits for the gradient.
  EXPECT_EQ(sched[0][0].startUs, 0);
  EXPECT_EQ(sched[0][0].endUs, 10);
  EXPECT_EQ(sched[0][1].startUs, 10);
  EXPECT_EQ(sched[0][1].endUs, 10);
  // Stage 1: recv [0,13], F [13,18], B [18,26], send at 26 (arrives 29).
  EXPECT_EQ(sched[1][0].startUs, 0);
  EXPECT_EQ(sched[1][0].endUs, 13);
  EXPECT_EQ(sched[1][1].startUs, 13);
  EXPECT_EQ(sched[1][2].startUs, 18);
  EXPECT_EQ(sched[1][2].endUs, 26);
  EXPECT_EQ(sched[1][3].startUs, 26);
  // Stage 0: recv [10,29], B [29,49].
  EXPECT_EQ(sched[0][2].startUs, 10);
  EXPECT_EQ(sched[0][2].endUs, 29);
  EXPECT_EQ(sched[0][3].startUs, 29);
  EXPECT_EQ(sched[0][3].endUs, 49);
  EXPECT_EQ(r.iterationUs, 49);
  EXPECT_EQ(r.stages[0].busyUs, 30);
  EXPECT_EQ(r.stages[0].idleUs, 19);
  EXPECT_EQ(r.stages[1].busyUs, 13);
  EXPECT_EQ(r.stages[1].idleUs, 36);
  // Memory without costs: static 0; the forward's stash counts from its start.
  EXPECT_EQ(sched[0][0].liveBytesAfter, 100);
  EXPECT_EQ(sched[0][2].liveBytesAfter, 100);
  EXPECT_EQ(sched[0][3].liveBytesAfter, 0);
  EXPECT_EQ(r.stages[0].peakBytes, 100);
  EXPECT_EQ(r.stages[1].peakBytes, 40);
}

TEST(Simulate, RecvOfDataAlreadyThereTakesNoTime) {
  PipelineSpec spec;
  spec.stages = 2;
  spec.p2pLatencyUs = 1;
  Schedule sched(2);
  sched[0] = {compute(F, 0, 1), transfer(S, A, 0, 1)};
  sched[1] = {compute(F, 7, 10), transfer(R, A, 0, 0), compute(F, 0, 1)};
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(spec, sched, r, error)) << error;
  EXPECT_EQ(sched[1][1].startUs, 10);
  EXPECT_EQ(sched[1][1].endUs, 10);
  EXPECT_EQ(sched[1][2].startUs, 10);
  EXPECT_EQ(r.iterationUs, 11);
}

TEST(Simulate, EditedDurationsAreUsed) {
  // Expand with F=1, B=2, then a "measured profile" triples every compute.
  const int p = 4, m = 6;
  PipelineSpec spec = uniformSpec(ScheduleKind::OneFOneB, p, m, 1, 2);
  Schedule sched;
  SimResult r;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  EXPECT_EQ(r.iterationUs, (m + p - 1) * 3);
  for (auto &list : sched)
    for (Instr &in : list)
      in.durationUs *= 3;
  std::string error;
  ASSERT_TRUE(simulate(spec, sched, r, error)) << error;
  EXPECT_EQ(r.iterationUs, (m + p - 1) * 9);
  // Re-simulating is idempotent.
  ASSERT_TRUE(simulate(spec, sched, r, error)) << error;
  EXPECT_EQ(r.iterationUs, (m + p - 1) * 9);
}

TEST(Simulate, SlowLastStageBoundsSteadyState) {
  // With one stage much slower than the rest and free transfers, 1F1B runs
  // at that stage's pace: its own busy time plus the time before its first
  // forward can start plus the time after its last backward.
  const int p = 3, m = 10;
  PipelineSpec spec = uniformSpec(ScheduleKind::OneFOneB, p, m, 1, 1);
  spec.costs[2].forwardUs = 10;
  spec.costs[2].backwardUs = 20;
  Schedule sched;
  SimResult r;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  // Stage 2 starts at 2 (two 1-us forwards upstream), runs 10 x 30 us back
  // to back, then the last gradient crosses stages 1 and 0 (1 us each).
  EXPECT_EQ(r.iterationUs, 2 + 300 + 2);
  EXPECT_EQ(r.stages[2].idleUs, 4);
}

TEST(Simulate, MemoryTimelineOneFOneB) {
  PipelineSpec spec = uniformSpec(ScheduleKind::OneFOneB, 2, 3, 1, 2);
  for (StageCost &c : spec.costs) {
    c.staticBytes = 1000;
    c.stashBytes = 10;
  }
  Schedule sched;
  SimResult r;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  // Stage 0 order: F0 F1 B0 F2 B1 B2.
  std::vector<int64_t> live;
  for (const Instr &in : sched[0])
    if (isCompute(in.kind))
      live.push_back(in.liveBytesAfter);
  EXPECT_EQ(live, (std::vector<int64_t>{1010, 1020, 1010, 1020, 1010, 1000}));
  EXPECT_EQ(r.stages[0].peakBytes, 1020);
  EXPECT_EQ(r.stages[1].peakBytes, 1010);
}

TEST(Simulate, ZeroBubbleSplitsTheFree) {
  PipelineSpec spec;
  spec.stages = 1;
  spec.costs.resize(1);
  spec.costs[0].staticBytes = 1000;
  spec.weightGradStashFraction = 0.25;
  Schedule sched(1);
  sched[0] = {compute(F, 0, 1, 101), compute(F, 1, 1, 100),
              compute(BI, 0, 1), compute(BI, 1, 1), compute(BW, 1, 1),
              compute(BW, 0, 1)};
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(spec, sched, r, error)) << error;
  // mb0 keeps floor(101 * 0.25) = 25 bytes after B_input; mb1 keeps 25.
  std::vector<int64_t> want = {1101, 1201, 1125, 1050, 1025, 1000};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(sched[0][i].liveBytesAfter, want[i]) << i;
  EXPECT_EQ(r.stages[0].peakBytes, 1201);
  EXPECT_EQ(r.iterationUs, 6);
}

TEST(Simulate, ZeroDurationsAndEmptyStages) {
  PipelineSpec spec;
  spec.stages = 3;
  Schedule sched(3);
  sched[0] = {compute(F, 0, 0), transfer(S, A, 0, 1)};
  sched[1] = {transfer(R, A, 0, 0), compute(F, 0, 0)};
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(spec, sched, r, error)) << error;
  EXPECT_EQ(r.iterationUs, 0);
  ASSERT_EQ(r.stages.size(), 3u);
  EXPECT_EQ(r.stages[2].busyUs, 0);
  EXPECT_EQ(bubbleFraction(r), 0);
}

TEST(Simulate, OutOfOrderChannelStillMatchesByKey) {
  // Sends in mb order 0,1 but the receiver takes mb 1 first.
  PipelineSpec spec;
  spec.stages = 2;
  spec.p2pLatencyUs = 1;
  Schedule sched(2);
  sched[0] = {compute(F, 0, 2), transfer(S, A, 0, 1), compute(F, 1, 2),
              transfer(S, A, 1, 1)};
  sched[1] = {transfer(R, A, 1, 0), compute(F, 1, 1), transfer(R, A, 0, 0),
              compute(F, 0, 1)};
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(spec, sched, r, error)) << error;
  EXPECT_EQ(sched[1][0].endUs, 5); // mb 1 sent at 4, arrives 5
  EXPECT_EQ(sched[1][1].endUs, 6);
  EXPECT_EQ(sched[1][2].endUs, 6); // mb 0 arrived at 3
  EXPECT_EQ(r.iterationUs, 7);
}
