//===- ExpandTest.cpp - Schedule shapes and closed-form bubble math -------===//
//
// Truth here is the published closed forms (GPipe/1F1B: (p-1)/(m+p-1);
// interleaved: (p-1)/(v*m+p-1); ZB-H1: (p-1)(F+B-W) per stage) and orders
// written out by hand from the Megatron-LM formulas, not the library's own
// arithmetic. Costs are small integers so every expected value is exact in
// double precision.
//
//===----------------------------------------------------------------------===//

#include "algo/schedule/tests/TestUtil.h"

#include <algorithm>
#include <tuple>

using namespace pipefill::sched;
using namespace pipefill::sched::test;

namespace {

double totalIdle(const SimResult &r) {
  double idle = 0;
  for (const StageTimeline &s : r.stages)
    idle += s.idleUs;
  return idle;
}

std::vector<std::tuple<InstrKind, int, int>> computeOps(
    const std::vector<Instr> &list) {
  std::vector<std::tuple<InstrKind, int, int>> ops;
  for (const Instr &in : list)
    if (isCompute(in.kind))
      ops.emplace_back(in.kind, in.microbatch, in.chunk);
  return ops;
}

} // namespace

TEST(ClosedForm, GPipeAndOneFOneBBubbleFraction) {
  const double f = 3, b = 7;
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
    for (int p : {1, 2, 3, 4, 5, 8, 16}) {
      for (int m : {1, 2, 3, 4, 5, 8, 13, 32, 64}) {
        SCOPED_TRACE(std::string(toString(kind)) + " p=" + std::to_string(p) +
                     " m=" + std::to_string(m));
        PipelineSpec spec = uniformSpec(kind, p, m, f, b);
        Schedule sched;
        SimResult r;
        ASSERT_TRUE(expandAndSimulate(spec, sched, r));
        EXPECT_EQ(r.iterationUs, (m + p - 1) * (f + b));
        for (const StageTimeline &st : r.stages) {
          EXPECT_EQ(st.busyUs, m * (f + b));
          EXPECT_EQ(st.idleUs, (p - 1) * (f + b));
        }
        EXPECT_NEAR(bubbleFraction(r), double(p - 1) / (m + p - 1), 1e-12);
        EXPECT_NEAR(totalIdle(r) / (p * r.iterationUs),
                    double(p - 1) / (m + p - 1), 1e-12);
      }
    }
  }
}

TEST(ClosedForm, InterleavedBubbleFraction) {
  const double f = 12, b = 24; // divisible by v = 2, 3, 4
  for (int p : {1, 2, 3, 4, 8}) {
    for (int v : {2, 3, 4}) {
      for (int k : {1, 2, 3, 4, 8}) {
        int m = p * k;
        SCOPED_TRACE("p=" + std::to_string(p) + " v=" + std::to_string(v) +
                     " m=" + std::to_string(m));
        PipelineSpec spec =
            uniformSpec(ScheduleKind::Interleaved1F1B, p, m, f, b, v);
        Schedule sched;
        SimResult r;
        ASSERT_TRUE(expandAndSimulate(spec, sched, r));
        EXPECT_EQ(r.iterationUs, m * (f + b) + (p - 1) * (f + b) / v);
        for (const StageTimeline &st : r.stages)
          EXPECT_EQ(st.idleUs, (p - 1) * (f + b) / v);
        EXPECT_NEAR(bubbleFraction(r), double(p - 1) / (v * m + p - 1),
                    1e-12);
      }
    }
  }
}

TEST(Memory, OneFOneBPeakStashIsMinOfDepthAndMicrobatches) {
  const int64_t staticBytes = 1000, stash = 64;
  for (int p : {1, 2, 4, 7}) {
    for (int m : {1, 2, 3, 8, 20}) {
      for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
        SCOPED_TRACE(std::string(toString(kind)) + " p=" + std::to_string(p) +
                     " m=" + std::to_string(m));
        PipelineSpec spec = uniformSpec(kind, p, m, 2, 4);
        for (StageCost &c : spec.costs) {
          c.staticBytes = staticBytes;
          c.stashBytes = stash;
        }
        Schedule sched;
        SimResult r;
        ASSERT_TRUE(expandAndSimulate(spec, sched, r));
        for (int i = 0; i < p; ++i) {
          int64_t inFlight = kind == ScheduleKind::GPipe ? m : std::min(p - i, m);
          EXPECT_EQ(r.stages[i].peakBytes, staticBytes + inFlight * stash)
              << "stage " << i;
          EXPECT_EQ(sched[i].back().liveBytesAfter, staticBytes);
        }
      }
    }
  }
}

// F = B_input = W = T: the paper's ZB-H1 bubble is (p-1)(F + B - W) = (p-1)T
// per stage, a third of 1F1B's (p-1)(F + B + W). Our order reaches it
// exactly once m >= p.
TEST(ZBH1, BubbleIsOneThirdOfOneFOneBWithEqualPasses) {
  const double t = 5;
  for (int p : {2, 3, 4, 6, 8, 16}) {
    for (int m : {p, p + 1, 2 * p, 4 * p}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      PipelineSpec zb = uniformSpec(ScheduleKind::ZBH1, p, m, t, 2 * t);
      for (StageCost &c : zb.costs) {
        c.backwardWeightUs = t;
        c.stashBytes = 1000;
        c.staticBytes = 7;
      }
      PipelineSpec ofob = zb;
      ofob.schedule = ScheduleKind::OneFOneB;
      Schedule zs, os;
      SimResult zr, orr;
      ASSERT_TRUE(expandAndSimulate(zb, zs, zr));
      ASSERT_TRUE(expandAndSimulate(ofob, os, orr));
      EXPECT_EQ(zr.iterationUs, 3 * m * t + (p - 1) * t);
      for (int i = 0; i < p; ++i) {
        EXPECT_EQ(zr.stages[i].idleUs, (p - 1) * t) << "stage " << i;
        EXPECT_EQ(orr.stages[i].idleUs, 3 * (p - 1) * t) << "stage " << i;
      }
      // Memory: never above 1F1B's peak; the first stage (which holds the
      // most) is unchanged.
      int64_t zbPeak = 0, ofobPeak = 0;
      for (int i = 0; i < p; ++i) {
        zbPeak = std::max(zbPeak, zr.stages[i].peakBytes);
        ofobPeak = std::max(ofobPeak, orr.stages[i].peakBytes);
      }
      EXPECT_LE(zbPeak, ofobPeak);
      EXPECT_EQ(zr.stages[0].peakBytes, orr.stages[0].peakBytes);
      EXPECT_EQ(ofobPeak, 7 + int64_t(p) * 1000);
    }
  }
}

TEST(ZBH1, InFlightNeverAboveStagesAndNeverSlowerThanOneFOneB) {
  for (int p : {1, 2, 3, 5, 8}) {
    for (int m : {1, 2, 3, 7, 16}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      PipelineSpec zb = uniformSpec(ScheduleKind::ZBH1, p, m, 4, 8);
      for (StageCost &c : zb.costs)
        c.backwardWeightUs = 4;
      PipelineSpec ofob = zb;
      ofob.schedule = ScheduleKind::OneFOneB;
      Schedule zs, os;
      SimResult zr, orr;
      ASSERT_TRUE(expandAndSimulate(zb, zs, zr));
      ASSERT_TRUE(expandAndSimulate(ofob, os, orr));
      EXPECT_LE(zr.iterationUs, orr.iterationUs);
      for (int i = 0; i < p; ++i) {
        int inFlight = 0, most = 0;
        for (const Instr &in : zs[i]) {
          if (in.kind == InstrKind::Forward)
            most = std::max(most, ++inFlight);
          else if (in.kind == InstrKind::BackwardWeight)
            --inFlight;
        }
        EXPECT_EQ(inFlight, 0);
        EXPECT_LE(most, p);
      }
    }
  }
}

TEST(ZBH1, WeightPassLagsByStageIndex) {
  // Stage i runs W(k) right after B(k + i); leftovers after the last B.
  PipelineSpec spec = uniformSpec(ScheduleKind::ZBH1, 4, 6, 1, 3);
  for (StageCost &c : spec.costs)
    c.backwardWeightUs = 1;
  Schedule sched;
  std::string error;
  ASSERT_TRUE(expandSchedule(spec, sched, error)) << error;
  for (int i = 0; i < 4; ++i) {
    auto ops = computeOps(sched[i]);
    ASSERT_EQ(ops.size(), 18u);
    for (size_t j = 0; j < ops.size(); ++j) {
      if (std::get<0>(ops[j]) != InstrKind::BackwardWeight)
        continue;
      int k = std::get<1>(ops[j]);
      if (k + i < 6) {
        ASSERT_GT(j, 0u);
        EXPECT_EQ(ops[j - 1],
                  std::make_tuple(InstrKind::BackwardInput, k + i, 0))
            << "stage " << i << " W" << k;
      }
    }
    // Durations: B_input = backward - weight; W = weight.
    for (const Instr &in : sched[i]) {
      if (in.kind == InstrKind::BackwardInput) {
        EXPECT_EQ(in.durationUs, 2);
      }
      if (in.kind == InstrKind::BackwardWeight) {
        EXPECT_EQ(in.durationUs, 1);
      }
    }
  }
}

TEST(Shape, OneFOneBMiddleStageInstructionList) {
  PipelineSpec spec = uniformSpec(ScheduleKind::OneFOneB, 3, 2, 1, 2);
  spec.costs[0].activationBytes = 100;
  spec.costs[1].activationBytes = 200;
  spec.costs[2].activationBytes = 300;
  Schedule sched;
  std::string error;
  ASSERT_TRUE(expandSchedule(spec, sched, error)) << error;
  // Stage 1: 1 warm-up forward, F1 B0, then B1.
  struct Want {
    InstrKind kind;
    int mb;
    Payload payload;
    int peer;
    int64_t bytes;
  };
  const InstrKind R = InstrKind::Recv, S = InstrKind::Send,
                  F = InstrKind::Forward, B = InstrKind::Backward;
  const Payload A = Payload::Activation, G = Payload::Gradient;
  std::vector<Want> want = {
      {R, 0, A, 0, 100}, {F, 0, A, -1, 0}, {S, 0, A, 2, 200},
      {R, 1, A, 0, 100}, {F, 1, A, -1, 0}, {S, 1, A, 2, 200},
      {R, 0, G, 2, 200}, {B, 0, A, -1, 0}, {S, 0, G, 0, 100},
      {R, 1, G, 2, 200}, {B, 1, A, -1, 0}, {S, 1, G, 0, 100}};
  ASSERT_EQ(sched[1].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Instr &in = sched[1][i];
    SCOPED_TRACE("instruction " + std::to_string(i));
    EXPECT_EQ(in.kind, want[i].kind);
    EXPECT_EQ(in.microbatch, want[i].mb);
    if (!isCompute(in.kind)) {
      EXPECT_EQ(in.payload, want[i].payload);
      EXPECT_EQ(in.peer, want[i].peer);
      EXPECT_EQ(in.bytes, want[i].bytes);
      EXPECT_EQ(in.chunk, 0);
    }
  }
  // First and last stages: no recv of activations / gradients respectively.
  for (const Instr &in : sched[0])
    EXPECT_FALSE(in.kind == R && in.payload == A);
  for (const Instr &in : sched[2])
    EXPECT_FALSE(in.kind == R && in.payload == G);
}

TEST(Shape, InterleavedMegatronOrder) {
  // p = 2, v = 2, m = 4, device 0: warm-up (2-0-1)*2 + (2-1)*2 = 4.
  // forward k: chunk (k/2)%2, mb (k/4)*2 + k%2; backward chunk 1-(k/2)%2.
  PipelineSpec spec =
      uniformSpec(ScheduleKind::Interleaved1F1B, 2, 4, 2, 4, 2);
  Schedule sched;
  std::string error;
  ASSERT_TRUE(expandSchedule(spec, sched, error)) << error;
  const InstrKind F = InstrKind::Forward, B = InstrKind::Backward;
  std::vector<std::tuple<InstrKind, int, int>> want0 = {
      {F, 0, 0}, {F, 1, 0}, {F, 0, 1}, {F, 1, 1}, // warm-up
      {F, 2, 0}, {B, 0, 1}, {F, 3, 0}, {B, 1, 1}, // steady
      {F, 2, 1}, {B, 0, 0}, {F, 3, 1}, {B, 1, 0},
      {B, 2, 1}, {B, 3, 1}, {B, 2, 0}, {B, 3, 0}}; // cool-down
  EXPECT_EQ(computeOps(sched[0]), want0);
  // Device 1: warm-up (2-1-1)*2 + 2 = 2.
  std::vector<std::tuple<InstrKind, int, int>> want1 = {
      {F, 0, 0}, {F, 1, 0}, {F, 0, 1}, {B, 0, 1}, {F, 1, 1}, {B, 1, 1},
      {F, 2, 0}, {B, 0, 0}, {F, 3, 0}, {B, 1, 0}, {F, 2, 1}, {B, 2, 1},
      {F, 3, 1}, {B, 3, 1}, {B, 2, 0}, {B, 3, 0}};
  EXPECT_EQ(computeOps(sched[1]), want1);
  // Durations are per chunk.
  for (const Instr &in : sched[0]) {
    if (in.kind == F) {
      EXPECT_EQ(in.durationUs, 1);
    }
    if (in.kind == B) {
      EXPECT_EQ(in.durationUs, 2);
    }
  }
}

TEST(Shape, InterleavedWrapAroundIsARealTransfer) {
  PipelineSpec spec =
      uniformSpec(ScheduleKind::Interleaved1F1B, 2, 2, 2, 4, 2);
  for (StageCost &c : spec.costs)
    c.activationBytes = 64;
  Schedule sched;
  std::string error;
  ASSERT_TRUE(expandSchedule(spec, sched, error)) << error;
  // Device 1 chunk 0 -> device 0 chunk 1: activation tagged with the
  // sender's chunk 0; its gradient comes back tagged with chunk 1.
  auto has = [&](int stage, InstrKind kind, Payload payload, int chunk,
                 int peer) {
    for (const Instr &in : sched[stage])
      if (in.kind == kind && in.payload == payload && in.chunk == chunk &&
          in.peer == peer && in.microbatch == 0)
        return true;
    return false;
  };
  EXPECT_TRUE(has(1, InstrKind::Send, Payload::Activation, 0, 0));
  EXPECT_TRUE(has(0, InstrKind::Recv, Payload::Activation, 0, 1));
  EXPECT_TRUE(has(0, InstrKind::Send, Payload::Gradient, 1, 1));
  EXPECT_TRUE(has(1, InstrKind::Recv, Payload::Gradient, 1, 0));
  // Device 1's last chunk is the end of the model: it sends no activation
  // for chunk 1, and device 0's chunk 0 sends no gradient.
  EXPECT_FALSE(has(1, InstrKind::Send, Payload::Activation, 1, 0));
  EXPECT_FALSE(has(0, InstrKind::Send, Payload::Gradient, 0, 1));
}

TEST(Shape, SingleDeviceHasNoTransfers) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
        ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1}) {
    int v = kind == ScheduleKind::Interleaved1F1B ? 3 : 1;
    PipelineSpec spec = uniformSpec(kind, 1, 5, 3, 6, v);
    spec.costs[0].activationBytes = 1 << 20;
    Schedule sched;
    SimResult r;
    ASSERT_TRUE(expandAndSimulate(spec, sched, r));
    for (const Instr &in : sched[0])
      EXPECT_TRUE(isCompute(in.kind)) << toString(kind);
    EXPECT_EQ(r.iterationUs, 5 * 9);
    EXPECT_EQ(r.stages[0].idleUs, 0);
  }
}

TEST(Shape, TailAppendsAllReduceThenOptimizer) {
  PipelineSpec spec = uniformSpec(ScheduleKind::OneFOneB, 2, 3, 1, 2);
  spec.tail = true;
  spec.dataParallel = 4;
  spec.gradBytes = 8'000'000;
  spec.dpBandwidthGBps = 100;
  spec.dpLatencyUs = 5;
  spec.optimizerUs = 50;
  // Ring: 2(d-1) latency steps + 2(d-1)/d of the bytes at 100 GB/s.
  const double allReduce = 6 * 5 + 1.5 * 8'000'000 / 100e3; // 150 us
  EXPECT_DOUBLE_EQ(allReduceUs(spec), allReduce);
  Schedule sched;
  SimResult r;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  for (const auto &list : sched) {
    ASSERT_GE(list.size(), 2u);
    EXPECT_EQ(list[list.size() - 2].kind, InstrKind::AllReduceGrads);
    EXPECT_DOUBLE_EQ(list[list.size() - 2].durationUs, allReduce);
    EXPECT_EQ(list[list.size() - 2].bytes, 8'000'000);
    EXPECT_EQ(list.back().kind, InstrKind::OptimizerStep);
    EXPECT_EQ(list.back().durationUs, 50);
  }
  // Stage 0 finishes last: (m+p-1)(F+B) then the tail.
  EXPECT_DOUBLE_EQ(r.iterationUs, 4 * 3 + allReduce + 50);

  spec.dataParallel = 1;
  spec.optimizerUs = 0;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  for (const auto &list : sched)
    for (const Instr &in : list)
      EXPECT_TRUE(in.kind != InstrKind::AllReduceGrads &&
                  in.kind != InstrKind::OptimizerStep);
}

TEST(Costs, TransferAndAllReduceFormulas) {
  PipelineSpec spec;
  spec.p2pLatencyUs = 2;
  spec.p2pBandwidthGBps = 10;
  EXPECT_DOUBLE_EQ(p2pTransferUs(spec, 1'000'000), 2 + 100); // 1 MB @ 10 GB/s
  EXPECT_DOUBLE_EQ(p2pTransferUs(spec, 0), 2);
  spec.p2pBandwidthGBps = 0; // latency only
  EXPECT_DOUBLE_EQ(p2pTransferUs(spec, 1'000'000), 2);
  spec.dataParallel = 1;
  spec.gradBytes = 1 << 30;
  spec.dpBandwidthGBps = 1;
  EXPECT_EQ(allReduceUs(spec), 0);
  spec.dataParallel = 2;
  spec.dpLatencyUs = 1;
  EXPECT_DOUBLE_EQ(allReduceUs(spec), 2 * 1 + 1.0 * (1 << 30) / 1e3);
}

TEST(Names, RoundTrip) {
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                         ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1}) {
    ScheduleKind back;
    ASSERT_TRUE(parseScheduleKind(toString(k), back));
    EXPECT_EQ(back, k);
  }
  ScheduleKind k;
  EXPECT_TRUE(parseScheduleKind("ONE_F_ONE_B", k));
  EXPECT_EQ(k, ScheduleKind::OneFOneB);
  EXPECT_TRUE(parseScheduleKind("ZB-H1", k));
  EXPECT_EQ(k, ScheduleKind::ZBH1);
  EXPECT_TRUE(parseScheduleKind("INTERLEAVED_1F1B", k));
  EXPECT_EQ(k, ScheduleKind::Interleaved1F1B);
  EXPECT_FALSE(parseScheduleKind("2f2b", k));
  for (int i = 0; i <= static_cast<int>(InstrKind::OptimizerStep); ++i) {
    InstrKind back;
    ASSERT_TRUE(parseInstrKind(toString(InstrKind(i)), back));
    EXPECT_EQ(back, InstrKind(i));
  }
  for (BubbleKind b : {BubbleKind::Warmup, BubbleKind::Steady,
                       BubbleKind::Cooldown, BubbleKind::Tail}) {
    BubbleKind back;
    ASSERT_TRUE(parseBubbleKind(toString(b), back));
    EXPECT_EQ(back, b);
  }
  Payload pl;
  EXPECT_TRUE(parsePayload("GRADIENT", pl));
  EXPECT_EQ(pl, Payload::Gradient);
  EXPECT_EQ(describeInstr(transfer(InstrKind::Recv, Payload::Gradient, 3, 2,
                                   0, 1)),
            "recv gradient mb 3 chunk 1 from stage 2");
}

// expandStage replaces whatever the list held (the pass reuses no lists,
// but a caller may): a stage expanded into a list with leftovers equals the
// same stage expanded into an empty one, for every schedule kind. (That
// expandStage builds the right instructions is what the closed forms above
// and ReferenceTest's torch orders check, through expandSchedule, which is
// expandStage per stage.)
TEST(ExpandStage, ReplacesWhatTheListHeld) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1}) {
    PipelineSpec spec;
    spec.schedule = kind;
    spec.stages = 4;
    spec.microbatches = 8;
    spec.virtualStages = kind == ScheduleKind::Interleaved1F1B ? 2 : 1;
    for (int s = 0; s < spec.stages; ++s) {
      StageCost c;
      c.forwardUs = 1 + s;
      c.backwardUs = 2 + s;
      c.backwardWeightUs = kind == ScheduleKind::ZBH1 ? 1 : 0;
      c.activationBytes = 10;
      c.stashBytes = 20;
      spec.costs.push_back(c);
    }
    std::string error;
    ASSERT_TRUE(validateSpec(spec, error)) << error;
    for (int s = 0; s < spec.stages; ++s) {
      std::vector<Instr> fresh, reused(3, compute(InstrKind::Forward, 9, 9));
      expandStage(spec, s, fresh);
      expandStage(spec, s, reused);
      ASSERT_EQ(reused.size(), fresh.size()) << int(kind) << " stage " << s;
      for (size_t i = 0; i < fresh.size(); ++i) {
        const Instr &a = reused[i], &b = fresh[i];
        EXPECT_TRUE(std::tie(a.kind, a.microbatch, a.chunk, a.peer, a.payload, a.bytes,
                             a.durationUs) == std::tie(b.kind, b.microbatch, b.chunk, b.peer,
                                                       b.payload, b.bytes, b.durationUs))
            << int(kind) << " stage " << s << " instruction " << i;
      }
    }
  }
}
