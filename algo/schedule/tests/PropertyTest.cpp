//===- PropertyTest.cpp - Invariants over random pipelines ----------------===//
//
// Random sizes (p <= 16, m <= 64), all four schedule kinds, random
// non-uniform costs. Costs are integers (multiples of 12 so that 1/v chunks
// stay integral) and message sizes multiples of 1000 bytes at 1 GB/s, so
// every time is an exact integer in double precision and the accounting
// identities can be checked with ==. A second pass uses arbitrary real
// costs and bandwidths with a relative tolerance.
//
//===----------------------------------------------------------------------===//

#include "algo/schedule/tests/TestUtil.h"

#include <cmath>
#include <map>
#include <random>
#include <tuple>

using namespace pipefill::sched;
using namespace pipefill::sched::test;

namespace {

PipelineSpec randomSpec(std::mt19937_64 &rng, bool exact) {
  auto uni = [&](int lo, int hi) {
    return lo + int(rng() % uint64_t(hi - lo + 1));
  };
  auto real = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  PipelineSpec spec;
  spec.schedule = ScheduleKind(uni(0, 3));
  spec.stages = uni(1, 16);
  if (spec.schedule == ScheduleKind::Interleaved1F1B) {
    spec.virtualStages = uni(2, 4);
    spec.microbatches = spec.stages * uni(1, std::max(1, 64 / spec.stages));
  } else {
    spec.microbatches = uni(1, 64);
  }
  if (exact) {
    spec.p2pLatencyUs = uni(0, 5);
    spec.p2pBandwidthGBps = 1;
  } else {
    spec.p2pLatencyUs = real(0, 10);
    spec.p2pBandwidthGBps = rng() % 3 == 0 ? 0 : real(0.5, 300);
  }
  for (int s = 0; s < spec.stages; ++s) {
    StageCost c;
    if (exact) {
      c.forwardUs = 12 * uni(0, 8);
      c.backwardUs = 12 * uni(0, 16);
      c.backwardWeightUs = 12 * uni(0, int(c.backwardUs / 12));
      c.activationBytes = 1000 * int64_t(uni(0, 20));
    } else {
      c.forwardUs = real(0, 100);
      c.backwardUs = real(0, 200);
      c.backwardWeightUs = real(0, c.backwardUs);
      c.activationBytes = int64_t(uni(0, 1 << 24));
    }
    c.stashBytes = int64_t(uni(0, 1 << 20));
    c.staticBytes = int64_t(uni(0, 1 << 30));
    spec.costs.push_back(c);
  }
  spec.weightGradStashFraction = real(0, 1);
  if (rng() % 3 == 0) {
    spec.tail = true;
    spec.dataParallel = uni(1, 8);
    spec.gradBytes = exact ? 0 : int64_t(uni(0, 1 << 28));
    spec.dpLatencyUs = exact ? uni(0, 9) : real(0, 10);
    spec.dpBandwidthGBps = exact ? 0 : real(1, 100);
    spec.optimizerUs = exact ? uni(0, 30) : real(0, 100);
  }
  return spec;
}

using Key = std::tuple<int, int, int, int, int>; // payload mb chunk src dst

void checkInvariants(const PipelineSpec &spec, const Schedule &sched,
                     const SimResult &r, bool exact) {
  const int p = spec.stages;
  const double tol = exact ? 0.0 : 1e-9 * std::max(1.0, r.iterationUs);
  auto le = [&](double a, double b) { return a <= b + tol; };
  auto eq = [&](double a, double b) { return std::fabs(a - b) <= tol; };

  // Send/recv matching, rebuilt here from the instruction fields.
  std::map<Key, const Instr *> sends;
  for (int s = 0; s < p; ++s)
    for (const Instr &in : sched[s])
      if (in.kind == InstrKind::Send)
        sends[{int(in.payload), in.microbatch, in.chunk, s, in.peer}] = &in;

  double iteration = 0, totalBusy = 0, totalIdle = 0;
  for (int s = 0; s < p; ++s) {
    SCOPED_TRACE("stage " + std::to_string(s));
    const auto &list = sched[s];
    double clock = 0, busy = 0;
    std::map<std::pair<int, int>, double> fwdEnd, bInEnd;
    int forwards = 0, backwards = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const Instr &in = list[i];
      ASSERT_TRUE(le(clock, in.startUs)) << "instruction " << i
                                         << " starts before the previous ends";
      if (isCompute(in.kind)) {
        ASSERT_TRUE(eq(in.endUs, in.startUs + in.durationUs));
        busy += in.durationUs;
      }
      std::pair<int, int> key{in.microbatch, in.chunk};
      switch (in.kind) {
      case InstrKind::Forward:
        ++forwards;
        fwdEnd[key] = in.endUs;
        break;
      case InstrKind::Backward:
      case InstrKind::BackwardInput:
        ++backwards;
        ASSERT_TRUE(fwdEnd.count(key)) << "backward before its forward";
        ASSERT_TRUE(le(fwdEnd[key], in.startUs));
        bInEnd[key] = in.endUs;
        break;
      case InstrKind::BackwardWeight:
        ASSERT_TRUE(bInEnd.count(key)) << "W before its B";
        ASSERT_TRUE(le(bInEnd[key], in.startUs));
        break;
      case InstrKind::Send:
        ASSERT_EQ(in.startUs, in.endUs);
        break;
      case InstrKind::Recv: {
        auto it = sends.find(
            {int(in.payload), in.microbatch, in.chunk, in.peer, s});
        ASSERT_NE(it, sends.end()) << "recv without send";
        double arrival = it->second->startUs + p2pTransferUs(spec, in.bytes);
        ASSERT_TRUE(le(arrival, in.endUs)) << "recv ends before arrival";
        ASSERT_TRUE(eq(in.endUs, std::max(in.startUs, arrival)));
        break;
      }
      default:
        break;
      }
      clock = in.endUs;
    }
    EXPECT_EQ(forwards, spec.microbatches * spec.virtualStages);
    EXPECT_EQ(backwards, spec.microbatches * spec.virtualStages);
    ASSERT_TRUE(eq(r.stages[s].busyUs, busy));
    iteration = std::max(iteration, clock);
    totalBusy += r.stages[s].busyUs;
    totalIdle += r.stages[s].idleUs;
    // Memory returns to the static footprint and never drops below it.
    EXPECT_EQ(list.back().liveBytesAfter, spec.costs[s].staticBytes);
    EXPECT_GE(r.stages[s].peakBytes, spec.costs[s].staticBytes);
    for (const Instr &in : list)
      ASSERT_LE(in.liveBytesAfter, r.stages[s].peakBytes);
  }
  ASSERT_TRUE(eq(r.iterationUs, iteration));
  double total = p * r.iterationUs;
  if (exact)
    ASSERT_EQ(totalBusy + totalIdle, total);
  else
    ASSERT_NEAR(totalBusy + totalIdle, total, 1e-9 * std::max(1.0, total));

  // Bubbles with no minimum sum to each stage's idle time.
  std::vector<Bubble> bubbles =
      findBubbles(spec, sched, r, int64_t(1) << 40, 0, 0);
  std::vector<double> perStage(p, 0.0);
  for (const Bubble &bb : bubbles) {
    ASSERT_GE(bb.stage, 0);
    ASSERT_LT(bb.stage, p);
    ASSERT_GT(bb.durationUs, 0);
    ASSERT_LE(bb.insertBefore, sched[bb.stage].size());
    perStage[bb.stage] += bb.durationUs;
  }
  for (int s = 0; s < p; ++s) {
    if (exact)
      ASSERT_EQ(perStage[s], r.stages[s].idleUs) << "stage " << s;
    else
      ASSERT_NEAR(perStage[s], r.stages[s].idleUs,
                  1e-9 * std::max(1.0, r.iterationUs))
          << "stage " << s;
  }
}

void runProperties(bool exact, uint64_t seed, int cases) {
  std::mt19937_64 rng(seed);
  for (int c = 0; c < cases; ++c) {
    PipelineSpec spec = randomSpec(rng, exact);
    SCOPED_TRACE("case " + std::to_string(c) + ": " +
                 toString(spec.schedule) + " p=" +
                 std::to_string(spec.stages) +
                 " m=" + std::to_string(spec.microbatches) +
                 " v=" + std::to_string(spec.virtualStages));
    Schedule sched;
    SimResult r;
    ASSERT_TRUE(expandAndSimulate(spec, sched, r));
    checkInvariants(spec, sched, r, exact);
    if (::testing::Test::HasFatalFailure())
      return;
  }
}

} // namespace

TEST(Property, ExactArithmetic) { runProperties(true, 2024, 160); }

TEST(Property, RealValuedCosts) { runProperties(false, 777, 160); }

TEST(Property, DependenciesAcrossVirtualStages) {
  // Forward on virtual stage k+1 starts no earlier than forward on k ends
  // (plus the transfer when the devices differ); backward the other way.
  std::mt19937_64 rng(99);
  for (int c = 0; c < 60; ++c) {
    PipelineSpec spec = randomSpec(rng, false);
    Schedule sched;
    SimResult r;
    ASSERT_TRUE(expandAndSimulate(spec, sched, r));
    const int p = spec.stages, v = spec.virtualStages;
    // (mb, virtual stage) -> forward/backward(-input) start and end.
    std::map<std::pair<int, int>, std::pair<double, double>> fw, bw;
    for (int d = 0; d < p; ++d)
      for (const Instr &in : sched[d]) {
        int vs = in.chunk * p + d;
        if (in.kind == InstrKind::Forward)
          fw[{in.microbatch, vs}] = {in.startUs, in.endUs};
        if (in.kind == InstrKind::Backward ||
            in.kind == InstrKind::BackwardInput)
          bw[{in.microbatch, vs}] = {in.startUs, in.endUs};
      }
    const double tol = 1e-9 * std::max(1.0, r.iterationUs);
    for (int mb = 0; mb < spec.microbatches; ++mb) {
      for (int vs = 0; vs + 1 < p * v; ++vs) {
        int d = vs % p, nd = (vs + 1) % p;
        double gap = d == nd ? 0 : p2pTransferUs(spec, spec.costs[d].activationBytes);
        auto f0 = fw[std::make_pair(mb, vs)], f1 = fw[std::make_pair(mb, vs + 1)];
        auto b0 = bw[std::make_pair(mb, vs)], b1 = bw[std::make_pair(mb, vs + 1)];
        ASSERT_LE(f0.second + gap, f1.first + tol);
        ASSERT_LE(b1.second + gap, b0.first + tol);
      }
      auto fl = fw[std::make_pair(mb, p * v - 1)];
      auto bl = bw[std::make_pair(mb, p * v - 1)];
      ASSERT_LE(fl.second, bl.first + tol);
    }
  }
}
