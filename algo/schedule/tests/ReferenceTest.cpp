//===- ReferenceTest.cpp - simulate() vs a naive fixed-point 1F1B model ---===//
//
// The reference below shares no code with the library: it derives the 1F1B
// order from the rule "a stage may run at most p - i forwards ahead of its
// backwards", then computes start times as the least fixed point of
//   start(op) = max(end of the op before it on the stage,
//                   end of the producer op on the neighbour stage + transfer)
// by sweeping over all ops until nothing changes. simulate() must agree on
// the iteration time and on every instruction's start and end.
//
//===----------------------------------------------------------------------===//

#include "algo/schedule/tests/TestUtil.h"

#include <cmath>
#include <map>
#include <random>

using namespace pipefill::sched;
using namespace pipefill::sched::test;

namespace {

struct RefOp {
  bool backward;
  int mb;
  double start = 0, end = 0;
};

struct Reference {
  int p, m;
  std::vector<double> f, b;
  std::vector<int64_t> act;
  double latency, bandwidth;
  std::vector<std::vector<RefOp>> ops; // per stage, in order
  double iteration = 0;

  double comm(int64_t bytes) const {
    return latency + (bandwidth > 0 ? double(bytes) / (bandwidth * 1000.0)
                                    : 0.0);
  }

  void buildOrder() {
    ops.assign(p, {});
    for (int s = 0; s < p; ++s) {
      // Greedy token rule: run a backward whenever p - s forwards are
      // outstanding or all forwards are done; otherwise run a forward.
      int nf = 0, nb = 0;
      while (nb < m) {
        int outstanding = nf - nb;
        if (nf < m && outstanding < p - s) {
          ops[s].push_back({false, nf++});
        } else {
          ops[s].push_back({true, nb++});
        }
      }
    }
  }

  const RefOp &find(int s, bool backward, int mb) const {
    for (const RefOp &op : ops[s])
      if (op.backward == backward && op.mb == mb)
        return op;
    static RefOp none{false, -1};
    return none;
  }

  void solve() {
    bool changed = true;
    int sweeps = 0;
    while (changed) {
      changed = false;
      ++sweeps;
      for (int s = p - 1; s >= 0; --s) { // deliberately "wrong" direction
        double prevEnd = 0;
        for (RefOp &op : ops[s]) {
          double ready = prevEnd;
          if (!op.backward && s > 0)
            ready = std::max(ready,
                             find(s - 1, false, op.mb).end + comm(act[s - 1]));
          if (op.backward && s < p - 1)
            ready =
                std::max(ready, find(s + 1, true, op.mb).end + comm(act[s]));
          double dur = op.backward ? b[s] : f[s];
          if (ready != op.start || ready + dur != op.end) {
            op.start = ready;
            op.end = ready + dur;
            changed = true;
          }
          prevEnd = op.end;
        }
      }
      ASSERT_LT(sweeps, 100000);
    }
    iteration = 0;
    for (auto &list : ops)
      for (RefOp &op : list)
        iteration = std::max(iteration, op.end);
  }

  // End of the compute op before `target` on stage s (0 if none).
  double prevEnd(int s, bool backward, int mb) const {
    double e = 0;
    for (const RefOp &op : ops[s]) {
      if (op.backward == backward && op.mb == mb)
        return e;
      e = op.end;
    }
    return e;
  }
};

void compareOnce(std::mt19937_64 &rng, int p, int m) {
  std::uniform_real_distribution<double> cost(0.5, 100.0);
  std::uniform_int_distribution<int64_t> bytes(0, 50'000'000);
  std::uniform_real_distribution<double> lat(0.0, 30.0);
  std::uniform_real_distribution<double> bw(1.0, 200.0);
  Reference ref;
  ref.p = p;
  ref.m = m;
  ref.latency = lat(rng);
  ref.bandwidth = (rng() % 4 == 0) ? 0.0 : bw(rng);
  PipelineSpec spec;
  spec.schedule = ScheduleKind::OneFOneB;
  spec.stages = p;
  spec.microbatches = m;
  spec.p2pLatencyUs = ref.latency;
  spec.p2pBandwidthGBps = ref.bandwidth;
  for (int s = 0; s < p; ++s) {
    StageCost c;
    c.forwardUs = cost(rng);
    c.backwardUs = cost(rng) * 2;
    c.activationBytes = bytes(rng);
    spec.costs.push_back(c);
    ref.f.push_back(c.forwardUs);
    ref.b.push_back(c.backwardUs);
    ref.act.push_back(c.activationBytes);
  }
  ref.buildOrder();
  ref.solve();

  Schedule sched;
  SimResult r;
  ASSERT_TRUE(expandAndSimulate(spec, sched, r));
  auto near = [](double x, double y) {
    return std::fabs(x - y) <= 1e-9 * std::max(1.0, std::fabs(y));
  };
  ASSERT_TRUE(near(r.iterationUs, ref.iteration))
      << r.iterationUs << " vs " << ref.iteration;
  for (int s = 0; s < p; ++s) {
    size_t computes = 0;
    for (size_t i = 0; i < sched[s].size(); ++i) {
      const Instr &in = sched[s][i];
      SCOPED_TRACE("stage " + std::to_string(s) + " instruction " +
                   std::to_string(i) + " " + describeInstr(in));
      bool backward;
      if (isCompute(in.kind))
        backward = in.kind == InstrKind::Backward;
      else
        backward = in.payload == Payload::Gradient;
      const RefOp &op = ref.find(s, backward, in.microbatch);
      ASSERT_GE(op.mb, 0);
      switch (in.kind) {
      case InstrKind::Forward:
      case InstrKind::Backward:
        ASSERT_EQ(ref.ops[s][computes].backward, backward) << "order differs";
        ASSERT_EQ(ref.ops[s][computes].mb, in.microbatch) << "order differs";
        ++computes;
        ASSERT_TRUE(near(in.startUs, op.start)) << in.startUs << " vs "
                                                << op.start;
        ASSERT_TRUE(near(in.endUs, op.end));
        break;
      case InstrKind::Recv: // waits from the previous op's end to the start
        ASSERT_TRUE(near(in.startUs, ref.prevEnd(s, backward, in.microbatch)));
        ASSERT_TRUE(near(in.endUs, op.start));
        break;
      case InstrKind::Send: // leaves when the producing op ends
        ASSERT_TRUE(near(in.startUs, op.end));
        break;
      default:
        FAIL() << "unexpected instruction";
      }
    }
    ASSERT_EQ(computes, 2 * size_t(m));
  }
}

} // namespace

TEST(Reference, OneFOneBMatchesNaiveFixedPoint) {
  std::mt19937_64 rng(12345);
  for (int seed = 0; seed < 150; ++seed) {
    int p = 1 + int(rng() % 10);
    int m = 1 + int(rng() % 24);
    SCOPED_TRACE("case " + std::to_string(seed) + " p=" + std::to_string(p) +
                 " m=" + std::to_string(m));
    compareOnce(rng, p, m);
    if (HasFatalFailure())
      return;
  }
}
