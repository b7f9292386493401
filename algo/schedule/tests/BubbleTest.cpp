//===- BubbleTest.cpp - Gap extraction: kinds, placement, free memory -----===//

#include "algo/schedule/tests/TestUtil.h"

using namespace pipefill::sched;
using namespace pipefill::sched::test;

namespace {
// 1F1B, p = 2, m = 2, F = 1, B = 2, static 1000, stash 100 per microbatch.
// Stage 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]   (gradients at 4 and 7)
// Stage 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]
// Iteration (m+p-1)(F+B) = 9.
PipelineSpec smallSpec() {
  PipelineSpec spec = uniformSpec(ScheduleKind::OneFOneB, 2, 2, 1, 2);
  for (StageCost &c : spec.costs) {
    c.staticBytes = 1000;
    c.stashBytes = 100;
  }
  return spec;
}
} // namespace

TEST(Bubbles, SmallOneFOneBByHand) {
  PipelineSpec spec = smallSpec();
  Schedule sched;
  SimResult r;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  ASSERT_EQ(r.iterationUs, 9);
  // Stage 0 list: F0 S F1 S R B0 R B1; stage 1: R F0 B0 S R F1 B1 S.
  std::vector<Bubble> bubbles = findBubbles(spec, sched, r, 10000, 0, 500);
  ASSERT_EQ(bubbles.size(), 4u);

  // Stage 0, [2,4): after its last forward, waiting for gradient 0; two
  // microbatches stashed.
  EXPECT_EQ(bubbles[0].stage, 0);
  EXPECT_EQ(bubbles[0].startUs, 2);
  EXPECT_EQ(bubbles[0].durationUs, 2);
  EXPECT_EQ(bubbles[0].kind, BubbleKind::Cooldown);
  EXPECT_EQ(bubbles[0].insertBefore, 4u); // the gradient recv, after the send
  EXPECT_EQ(bubbles[0].freeBytes, 10000 - 1200 - 500);
  // Stage 0, [6,7): one microbatch stashed.
  EXPECT_EQ(bubbles[1].startUs, 6);
  EXPECT_EQ(bubbles[1].durationUs, 1);
  EXPECT_EQ(bubbles[1].kind, BubbleKind::Cooldown);
  EXPECT_EQ(bubbles[1].insertBefore, 6u);
  EXPECT_EQ(bubbles[1].freeBytes, 10000 - 1100 - 500);
  // Stage 1, [0,1): warm-up, before the first recv.
  EXPECT_EQ(bubbles[2].stage, 1);
  EXPECT_EQ(bubbles[2].startUs, 0);
  EXPECT_EQ(bubbles[2].durationUs, 1);
  EXPECT_EQ(bubbles[2].kind, BubbleKind::Warmup);
  EXPECT_EQ(bubbles[2].insertBefore, 0u);
  EXPECT_EQ(bubbles[2].freeBytes, 10000 - 1000 - 500);
  // Stage 1, [7,9): trailing; the last send is skipped, so size().
  EXPECT_EQ(bubbles[3].startUs, 7);
  EXPECT_EQ(bubbles[3].durationUs, 2);
  EXPECT_EQ(bubbles[3].kind, BubbleKind::Cooldown);
  EXPECT_EQ(bubbles[3].insertBefore, sched[1].size());
  EXPECT_EQ(bubbles[3].freeBytes, 10000 - 1000 - 500);
}

TEST(Bubbles, MinimumDurationAndMemoryClamp) {
  PipelineSpec spec = smallSpec();
  Schedule sched;
  SimResult r;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  std::vector<Bubble> bubbles = findBubbles(spec, sched, r, 1100, 1.5, 0);
  ASSERT_EQ(bubbles.size(), 2u); // the two 2-us gaps
  EXPECT_EQ(bubbles[0].durationUs, 2);
  EXPECT_EQ(bubbles[0].freeBytes, 0); // 1100 - 1200 clamps to 0
  EXPECT_EQ(bubbles[1].durationUs, 2);
  EXPECT_EQ(bubbles[1].freeBytes, 100);
}

TEST(Bubbles, SteadyGapsBetweenForwards) {
  // A slow middle stage starves stage 2 between forwards: gaps there come
  // before its last forward, so they are steady bubbles.
  PipelineSpec spec = uniformSpec(ScheduleKind::OneFOneB, 3, 6, 1, 1);
  spec.costs[1].forwardUs = 5;
  spec.costs[1].backwardUs = 5;
  Schedule sched;
  SimResult r;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  std::vector<Bubble> bubbles = findBubbles(spec, sched, r, 0, 0, 0);
  int steady = 0;
  for (const Bubble &b : bubbles) {
    if (b.stage != 2)
      continue;
    if (b.kind == BubbleKind::Steady) {
      ++steady;
      // Steady gaps sit before a forward's activation recv.
      const Instr &next = sched[2][b.insertBefore];
      EXPECT_EQ(next.kind, InstrKind::Recv);
      EXPECT_EQ(next.payload, Payload::Activation);
    }
  }
  EXPECT_EQ(steady, 5); // before each of forwards 1..5
}

TEST(Bubbles, TailKindAfterLastBackward) {
  PipelineSpec spec = smallSpec();
  spec.tail = true;
  spec.dataParallel = 2;
  spec.dpLatencyUs = 3; // all-reduce = 2(d-1) * 3 = 6 us
  spec.optimizerUs = 4;
  Schedule sched;
  SimResult r;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  EXPECT_EQ(r.iterationUs, 9 + 6 + 4);
  std::vector<Bubble> bubbles = findBubbles(spec, sched, r, 1 << 20, 0, 0);
  // Stage 1 ends its tail at 7 + 10 = 17: trailing gap [17, 19) is tail.
  const Bubble &last = bubbles.back();
  EXPECT_EQ(last.stage, 1);
  EXPECT_EQ(last.startUs, 17);
  EXPECT_EQ(last.durationUs, 2);
  EXPECT_EQ(last.kind, BubbleKind::Tail);
  EXPECT_EQ(last.insertBefore, sched[1].size());
  // Gaps between backwards stay cool-down.
  EXPECT_EQ(bubbles[0].kind, BubbleKind::Cooldown);
}

TEST(Bubbles, EmptyStageIsOneWarmupGap) {
  PipelineSpec spec;
  spec.stages = 2;
  Schedule sched(2);
  sched[0] = {compute(InstrKind::Forward, 0, 5, 10)};
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(spec, sched, r, error)) << error;
  std::vector<Bubble> bubbles = findBubbles(spec, sched, r, 100, 0, 0);
  ASSERT_EQ(bubbles.size(), 1u);
  EXPECT_EQ(bubbles[0].stage, 1);
  EXPECT_EQ(bubbles[0].durationUs, 5);
  EXPECT_EQ(bubbles[0].kind, BubbleKind::Warmup);
  EXPECT_EQ(bubbles[0].insertBefore, 0u);
  EXPECT_EQ(bubbles[0].freeBytes, 100);
}

TEST(Bubbles, InterleavedBubblesSumToClosedForm) {
  const int p = 4, v = 2, m = 8;
  PipelineSpec spec =
      uniformSpec(ScheduleKind::Interleaved1F1B, p, m, 4, 8, v);
  Schedule sched;
  SimResult r;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  std::vector<Bubble> bubbles = findBubbles(spec, sched, r, 0, 0, 0);
  double sum = 0;
  for (const Bubble &b : bubbles)
    sum += b.durationUs;
  EXPECT_EQ(sum, p * (p - 1) * 12.0 / v);
}
