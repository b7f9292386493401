//===- ErrorTest.cpp - Bad specs and malformed schedules are reported -----===//

#include "algo/schedule/tests/TestUtil.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

using namespace pipefill::sched;
using namespace pipefill::sched::test;

namespace {
const InstrKind F = InstrKind::Forward, B = InstrKind::Backward,
                BW = InstrKind::BackwardWeight, S = InstrKind::Send,
                R = InstrKind::Recv;
const Payload A = Payload::Activation, G = Payload::Gradient;

std::string expandError(const PipelineSpec &spec) {
  Schedule sched;
  std::string error;
  EXPECT_FALSE(expandSchedule(spec, sched, error));
  EXPECT_FALSE(error.empty());
  return error;
}

std::string simulateError(const PipelineSpec &spec, Schedule sched) {
  SimResult r;
  std::string error;
  EXPECT_FALSE(simulate(spec, sched, r, error));
  EXPECT_FALSE(error.empty());
  return error;
}

PipelineSpec twoStages() {
  PipelineSpec spec;
  spec.stages = 2;
  return spec;
}
} // namespace

TEST(SpecErrors, InterleavedNeedsMultipleOfStages) {
  PipelineSpec spec =
      uniformSpec(ScheduleKind::Interleaved1F1B, 4, 6, 1, 2, 2);
  std::string e = expandError(spec);
  EXPECT_HAS(e, "multiple of the stage count");
  EXPECT_HAS(e, "6");
  EXPECT_HAS(e, "4");
}

TEST(SpecErrors, InterleavedNeedsTwoChunks) {
  EXPECT_HAS(expandError(
                  uniformSpec(ScheduleKind::Interleaved1F1B, 2, 4, 1, 2, 1)),
              "at least 2 virtual stages");
}

TEST(SpecErrors, VirtualStagesOnlyForInterleaved) {
  EXPECT_HAS(expandError(uniformSpec(ScheduleKind::OneFOneB, 2, 4, 1, 2, 2)),
              "only valid for the interleaved");
}

TEST(SpecErrors, NegativeAndNonFiniteCosts) {
  PipelineSpec spec = uniformSpec(ScheduleKind::OneFOneB, 3, 4, 1, 2);
  spec.costs[2].forwardUs = -1;
  std::string e = expandError(spec);
  EXPECT_HAS(e, "stage 2 forward time");
  EXPECT_HAS(e, "-1");

  spec = uniformSpec(ScheduleKind::OneFOneB, 3, 4, 1, 2);
  spec.costs[1].backwardUs = std::numeric_limits<double>::quiet_NaN();
  EXPECT_HAS(expandError(spec), "stage 1 backward time");

  spec = uniformSpec(ScheduleKind::OneFOneB, 3, 4, 1, 2);
  spec.costs[0].stashBytes = -5;
  EXPECT_HAS(expandError(spec), "stage 0 stash bytes");

  spec = uniformSpec(ScheduleKind::OneFOneB, 3, 4, 1, 2);
  spec.p2pLatencyUs = std::numeric_limits<double>::infinity();
  EXPECT_HAS(expandError(spec), "p2p latency");
}

TEST(SpecErrors, SizesAndCounts) {
  EXPECT_HAS(expandError(uniformSpec(ScheduleKind::GPipe, 0, 4, 1, 2)),
              "stages");
  EXPECT_HAS(expandError(uniformSpec(ScheduleKind::GPipe, 2, 0, 1, 2)),
              "at least 1 microbatch");
  PipelineSpec spec = uniformSpec(ScheduleKind::GPipe, 3, 4, 1, 2);
  spec.costs.pop_back();
  EXPECT_HAS(expandError(spec), "one cost entry per stage");
  spec = uniformSpec(ScheduleKind::GPipe, 1, 1, 1, 2);
  spec.stages = 4096;
  spec.microbatches = 1 << 20;
  spec.costs.assign(4096, spec.costs[0]);
  EXPECT_HAS(expandError(spec), "too large");
}

TEST(SpecErrors, ZeroBubbleWeightLargerThanBackward) {
  PipelineSpec spec = uniformSpec(ScheduleKind::ZBH1, 2, 4, 1, 2);
  spec.costs[1].backwardWeightUs = 3;
  EXPECT_HAS(expandError(spec), "stage 1 backward weight time");
}

TEST(SpecErrors, TailParameters) {
  PipelineSpec spec = uniformSpec(ScheduleKind::OneFOneB, 2, 4, 1, 2);
  spec.tail = true;
  spec.dataParallel = 0;
  EXPECT_HAS(expandError(spec), "data-parallel degree");
  spec.dataParallel = 2;
  spec.optimizerUs = -3;
  EXPECT_HAS(expandError(spec), "optimizer");
}

TEST(ScheduleErrors, DeadlockIsReportedNotHung) {
  // Each stage first waits for what the other sends only afterwards.
  Schedule sched(2);
  sched[0] = {transfer(R, G, 0, 1), transfer(S, A, 0, 1)};
  sched[1] = {transfer(R, A, 0, 0), transfer(S, G, 0, 0)};
  std::string e = simulateError(twoStages(), sched);
  EXPECT_HAS(e, "deadlock: stages 0 -> 1 -> 0 wait on each other");
  EXPECT_HAS(e, "stage 0 instruction 0");
  EXPECT_HAS(e, "stage 1 instruction 0");
}

TEST(ScheduleErrors, DeadlockInExpandedScheduleWithMovedRecv) {
  // Take a valid 1F1B schedule and hoist stage 1's first gradient recv to
  // the front: it now waits for a gradient that needs stage 1's forward.
  PipelineSpec spec = uniformSpec(ScheduleKind::OneFOneB, 4, 64, 1, 2);
  Schedule sched;
  std::string error;
  ASSERT_TRUE(expandSchedule(spec, sched, error)) << error;
  auto &list = sched[1];
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].kind == R && list[i].payload == G) {
      Instr moved = list[i];
      list.erase(list.begin() + long(i));
      list.insert(list.begin(), moved);
      break;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  std::string e = simulateError(spec, sched);
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(std::chrono::duration<double>(elapsed).count(), 1.0);
  EXPECT_HAS(e, "deadlock");
  EXPECT_HAS(e, "stage 1 instruction 0 (recv gradient mb 0");
}

TEST(ScheduleErrors, RecvWithoutSend) {
  Schedule sched(2);
  sched[0] = {compute(F, 0, 1)};
  sched[1] = {transfer(R, A, 5, 0), compute(F, 5, 1)};
  std::string e = simulateError(twoStages(), sched);
  EXPECT_HAS(e, "stage 1 instruction 0 (recv activation mb 5");
  EXPECT_HAS(e, "no matching send on stage 0");
}

TEST(ScheduleErrors, SendWithoutRecv) {
  Schedule sched(2);
  sched[0] = {compute(F, 0, 1), transfer(S, A, 0, 1)};
  sched[1] = {compute(F, 0, 1)};
  std::string e = simulateError(twoStages(), sched);
  EXPECT_HAS(e, "stage 0 instruction 1 (send activation mb 0");
  EXPECT_HAS(e, "no matching recv on stage 1");
}

TEST(ScheduleErrors, MismatchedPairs) {
  // Same microbatch, wrong chunk: neither side matches.
  Schedule sched(2);
  sched[0] = {transfer(S, A, 0, 1, 0, 0)};
  sched[1] = {transfer(R, A, 0, 0, 0, 1)};
  EXPECT_HAS(simulateError(twoStages(), sched),
              "has no matching send");
  // Wrong payload kind.
  sched[0] = {transfer(S, G, 0, 1)};
  sched[1] = {transfer(R, A, 0, 0)};
  {
    std::string e = simulateError(twoStages(), sched);
    EXPECT_HAS(e, "stage 0 instruction 0 (send gradient mb 0");
    EXPECT_HAS(e, "no matching recv on stage 1");
  }
  // Disagreeing sizes.
  sched[0] = {transfer(S, A, 0, 1, 100)};
  sched[1] = {transfer(R, A, 0, 0, 200)};
  std::string e = simulateError(twoStages(), sched);
  EXPECT_HAS(e, "carries 100 bytes");
  EXPECT_HAS(e, "expects 200 bytes");
}

TEST(ScheduleErrors, BadPeers) {
  Schedule sched(2);
  sched[0] = {transfer(S, A, 0, 2)};
  EXPECT_HAS(simulateError(twoStages(), sched),
              "peer stage 2, which is not a stage");
  sched[0] = {transfer(S, A, 0, 0)};
  EXPECT_HAS(simulateError(twoStages(), sched), "its own stage");
}

TEST(ScheduleErrors, BackwardWithoutForward) {
  Schedule sched(1);
  sched[0] = {compute(B, 0, 1), compute(F, 0, 1)};
  PipelineSpec spec;
  EXPECT_HAS(simulateError(spec, sched),
              "stage 0 instruction 0 (backward mb 0 chunk 0) has "
                        "no earlier forward");
  sched[0] = {compute(F, 0, 1), compute(B, 0, 1), compute(B, 0, 1)};
  EXPECT_HAS(simulateError(spec, sched), "instruction 2");
  sched[0] = {compute(F, 0, 1), compute(BW, 0, 1)};
  EXPECT_HAS(simulateError(spec, sched),
              "no earlier backward_input");
  sched[0] = {compute(F, 0, 1), compute(F, 0, 1)};
  EXPECT_HAS(simulateError(spec, sched), "repeats the forward");
}

TEST(ScheduleErrors, BadDurationsAndShapes) {
  PipelineSpec spec;
  Schedule sched(1);
  sched[0] = {compute(F, 0, -2)};
  EXPECT_HAS(simulateError(spec, sched),
              "stage 0 instruction 0 (forward mb 0 chunk 0) has a "
                        "duration");
  sched[0] = {compute(F, 0, std::numeric_limits<double>::quiet_NaN())};
  EXPECT_HAS(simulateError(spec, sched), "duration");
  sched[0] = {compute(F, -1, 1)};
  EXPECT_HAS(simulateError(spec, sched), "negative microbatch");
  sched[0] = {compute(F, 0, 1)};
  sched[0][0].kind = static_cast<InstrKind>(42);
  EXPECT_HAS(simulateError(spec, sched), "unknown instruction");
  // Stage count disagreement.
  Schedule three(3);
  EXPECT_HAS(simulateError(spec, three), "3 stage lists");
  EXPECT_HAS(simulateError(spec, Schedule()), "no stages");
}

// The shared deadlock rule (support/Graph.h, the runtime validator's) against
// the simulator's own detection, which finds a deadlock by running the lists:
// on random moves of one instruction in valid schedules both agree, and the
// rule blames a receive (the only instruction that waits) at the head of a
// stuck stage.
TEST(ScheduleErrors, SharedDeadlockRuleAgreesWithSimulation) {
  std::mt19937 rng(14);
  int deadlocks = 0, fine = 0;
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::ZBH1}) {
    PipelineSpec spec = uniformSpec(kind, 3, 4, 1, 2);
    Schedule base;
    std::string error;
    ASSERT_TRUE(expandSchedule(spec, base, error)) << error;
    int stage = -1;
    size_t index = 0;
    EXPECT_TRUE(checkDeadlockFree(base, stage, index, error)) << error;
    for (int trial = 0; trial < 300; ++trial) {
      Schedule sched = base;
      auto &list = sched[rng() % sched.size()];
      size_t from = rng() % list.size(), to = rng() % list.size();
      Instr moved = list[from];
      list.erase(list.begin() + long(from));
      list.insert(list.begin() + long(to), moved);
      SimResult r;
      std::string simError, ruleError;
      bool simOk = simulate(spec, sched, r, simError);
      bool ruleOk = checkDeadlockFree(sched, stage, index, ruleError);
      if (!simOk && simError.find("deadlock") == std::string::npos)
        continue; // another fault (a backward before its forward)
      EXPECT_EQ(simOk, ruleOk) << simError << " | " << ruleError;
      if (ruleOk) {
        ++fine;
        continue;
      }
      ++deadlocks;
      EXPECT_HAS(ruleError, "can never run");
      ASSERT_GE(stage, 0);
      ASSERT_LT(index, sched[stage].size());
      EXPECT_EQ(sched[stage][index].kind, R) << ruleError;
      EXPECT_HAS(ruleError, "stage " + std::to_string(stage) + " instruction " +
                                std::to_string(index) + " (recv");
    }
  }
  EXPECT_GT(deadlocks, 20);
  EXPECT_GT(fine, 20);
}

// simulate() with its per-stage checks run in another order (as
// pipefill-simulate runs them on several threads) reports the same first
// error: the lowest stage's, not the first one checked.
TEST(ScheduleErrors, FirstErrorIsTheLowestStagesWhateverTheOrder) {
  PipelineSpec spec;
  spec.stages = 4;
  Schedule sched(4);
  sched[0] = {compute(F, 0, 1), compute(B, 0, 1)};
  sched[1] = {compute(F, 0, -1), compute(B, 0, 1)}; // negative duration
  sched[2] = {compute(F, 0, 1), compute(B, 0, 1)};
  sched[3] = {compute(B, 0, 1)};                     // backward before forward
  std::string serial = simulateError(spec, sched);
  EXPECT_NE(serial.find("stage 1"), std::string::npos) << serial;
  auto reversed = [](size_t n, const std::function<void(size_t)> &fn) {
    for (size_t s = n; s-- > 0;)
      fn(s);
  };
  SimResult r;
  std::string error;
  Schedule copy = sched;
  EXPECT_FALSE(simulate(spec, copy, r, error, reversed));
  EXPECT_EQ(error, serial);
  // Without stage 1's error, stage 3's is the first.
  sched[1][0].durationUs = 1;
  std::string later = simulateError(spec, sched);
  EXPECT_NE(later.find("stage 3"), std::string::npos) << later;
  copy = sched;
  error.clear();
  EXPECT_FALSE(simulate(spec, copy, r, error, reversed));
  EXPECT_EQ(error, later);
}

// Every per-instruction check of simulate(), with its whole message: the
// instruction (stage, index, what it is) and the rule it breaks. Stage 0 of a
// two-stage pipeline holds the list.
TEST(ScheduleErrors, InstructionMessages) {
  const Payload unknownPayload = static_cast<Payload>(9);
  struct Case {
    std::vector<Instr> list;
    const char *message;
  };
  const Case cases[] = {
      {{compute(F, 0, -2)},
       "stage 0 instruction 0 (forward mb 0 chunk 0) has a duration that is not a finite "
       "non-negative number of microseconds."},
      {{transfer(S, unknownPayload, 0, 1)}, ") has an unknown payload."},
      {{transfer(S, A, 0, 0)},
       "stage 0 instruction 0 (send activation mb 0 chunk 0 to stage 0) sends to or receives "
       "from its own stage."},
      {{transfer(S, A, 0, 1, -1)},
       "stage 0 instruction 0 (send activation mb 0 chunk 0 to stage 1) has a negative byte "
       "count."},
      {{transfer(R, G, 0, 1, 0, -1)},
       "stage 0 instruction 0 (recv gradient mb 0 chunk -1 from stage 1) has a negative "
       "microbatch or chunk index."},
      {{compute(F, -1, 1)},
       "stage 0 instruction 0 (forward mb -1 chunk 0) has a negative microbatch or chunk "
       "index."},
      {{compute(F, 0, 1, -5)},
       "stage 0 instruction 0 (forward mb 0 chunk 0) has a negative stash size."},
      {{compute(F, 0, 1), compute(F, 1, 1), compute(F, 0, 1)},
       "stage 0 instruction 2 (forward mb 0 chunk 0) repeats the forward of instruction 0."},
      {{compute(F, 0, 1), compute(B, 1, 1)},
       "stage 0 instruction 1 (backward mb 1 chunk 0) has no earlier forward of the same "
       "microbatch and chunk on this stage."},
      {{compute(F, 0, 1), compute(B, 0, 1), compute(B, 0, 1)},
       "stage 0 instruction 2 (backward mb 0 chunk 0) follows an earlier backward of the same "
       "microbatch and chunk."},
      {{compute(F, 0, 1), compute(BW, 0, 1)},
       "stage 0 instruction 1 (backward_weight mb 0 chunk 0) has no earlier backward_input of "
       "the same microbatch and chunk on this stage."},
  };
  for (const Case &c : cases) {
    Schedule sched(2);
    sched[0] = c.list;
    EXPECT_HAS(simulateError(twoStages(), sched), c.message);
  }
}
