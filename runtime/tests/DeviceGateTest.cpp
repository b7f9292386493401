// The CUDA backend's device-side bound, the parts that run without a GPU: the gate's decision
// (DeviceGate.h, the same function the gate kernel calls) against a reference written out here,
// and what the fill queue does with a chunk the device stopped (FillQueue::run with a stand-in
// backend whose chunks stop where the test says): nothing lost, nothing begun twice.
#include "runtime/DeviceGate.h"
#include "runtime/FillQueue.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace pfrt {
namespace test {
namespace {

GateArgs args(uint32_t pass, uint64_t beginEdge, uint64_t deadlineNs, uint64_t needNs) {
  GateArgs a;
  a.pass = pass;
  a.beginEdge = beginEdge;
  a.deadlineNs = deadlineNs;
  a.needNs = needNs;
  return a;
}

TEST(DeviceGateTest, DecidesOnTheDeadlineTheEndEdgeAndEarlierSegments) {
  // Fits exactly, and one nanosecond too late.
  EXPECT_EQ(gateDecide(900, 0, 0, args(0, 0, 1000, 100)), kGateRuns);
  EXPECT_EQ(gateDecide(901, 0, 0, args(0, 0, 1000, 100)), kGateDeadline);
  // The begin edge (token 4, stored as 5) is the last one main passed: the bubble is open.
  EXPECT_EQ(gateDecide(0, 5, 0, args(0, 5, 1000, 100)), kGateRuns);
  // A later edge passed: main resumed, however much time the deadline leaves.
  EXPECT_EQ(gateDecide(0, 6, 0, args(0, 5, 1000, 100)), kGateEnded);
  // No begin edge known: only the deadline counts.
  EXPECT_EQ(gateDecide(0, 99, 0, args(0, 0, 1000, 100)), kGateRuns);
  // An earlier pass did not run: never this one (the passes that run are a prefix).
  EXPECT_EQ(gateDecide(0, 0, 1, args(2, 0, 1000, 100)), kGateEarlier);
  EXPECT_EQ(gateDecide(0, 0, 2, args(2, 0, 1000, 100)), kGateRuns);
}

// now + need overflows 64 bits, or need exceeds the deadline itself: computed naively both would
// wrap and run.
TEST(DeviceGateTest, NoWrapAroundNearTheEndsOfTheClock) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(gateDecide(max - 5, 0, 0, args(0, 0, max, 10)), kGateDeadline);
  EXPECT_EQ(gateDecide(max - 10, 0, 0, args(0, 0, max, 10)), kGateRuns);
  EXPECT_EQ(gateDecide(0, 0, 0, args(0, 0, 100, 200)), kGateDeadline);
}

// A chunk's gates one after another, the clock advancing by each pass's real time, against a
// reference: the passes that run are the longest prefix whose every pass starts at a time
// that leaves its predicted time before the deadline. The state is reused by the next chunk.
TEST(DeviceGateTest, GatesOfAChunkRunTheLongestFittingPrefix) {
  struct Case {
    std::vector<double> realUs, needUs;
    double deadlineUs;
  };
  const std::vector<Case> cases = {
      {{500, 500, 500, 500}, {50, 50, 50, 50}, 1500},   // mispredicted: stops before the 4th
      {{100, 100, 100, 100}, {100, 100, 100, 100}, 400}, // exact fit: all four
      {{100, 100, 100, 100}, {100, 100, 100, 101}, 400}, // the last one 1 us too long
      {{10, 10}, {600, 10}, 500},                        // the first does not fit: none
  };
  GateState state;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case &k = cases[c];
    const uint64_t t0 = 1'000'000'000ull;
    uint32_t expected = 0;
    double t = 0;
    for (size_t i = 0; i < k.realUs.size(); ++i) {
      if (t + k.needUs[i] > k.deadlineUs)
        break;
      t += k.realUs[i];
      ++expected;
    }
    uint64_t now = t0;
    uint32_t ran = 0;
    for (uint32_t i = 0; i < k.realUs.size(); ++i) {
      const GateArgs a = args(i, 0, t0 + static_cast<uint64_t>(k.deadlineUs * 1000),
                              static_cast<uint64_t>(k.needUs[i] * 1000));
      if (gateApply(now, 0, state, a)) {
        now += static_cast<uint64_t>(k.realUs[i] * 1000);
        ++ran;
      }
    }
    EXPECT_EQ(ran, expected) << "case " << c;
    EXPECT_EQ(state.passesRun, expected) << "case " << c;
    EXPECT_EQ(state.stop, expected == k.realUs.size() ? kGateRuns : kGateDeadline) << "case " << c;
  }
}

TEST(DeviceGateTest, HostDeadlinesBecomeGlobalTimerNanoseconds) {
  // The clocks read 5 s (timer) at host 1000 us: 500 us later is 5 s + 500 000 ns.
  EXPECT_EQ(deadlineToGlobalNs(1500, 1000, 5'000'000'000ull), 5'000'500'000ull);
  EXPECT_EQ(deadlineToGlobalNs(999.5, 1000, 5'000'000'000ull), 4'999'999'500ull);
  EXPECT_EQ(deadlineToGlobalNs(-1e12, 1000, 5'000'000'000ull), 0u); // before the timer's start
  EXPECT_EQ(deadlineToGlobalNs(-std::numeric_limits<double>::infinity(), 0, 1), 0u);
  EXPECT_EQ(deadlineToGlobalNs(std::nan(""), 0, 1), 0u);
  EXPECT_EQ(deadlineToGlobalNs(std::numeric_limits<double>::infinity(), 0, 1),
            std::numeric_limits<uint64_t>::max());
  // A timer counting from an epoch: exact to the nanosecond (a double sum would round to 256).
  const uint64_t epoch = 1'700'000'000'000'000'123ull;
  EXPECT_EQ(deadlineToGlobalNs(2001.5, 500, epoch), epoch + 1'501'500);
  EXPECT_EQ(deadlineToGlobalNs(499, 500, epoch), epoch - 1000);
}

// The host leaves a pass unbuilt only when its gate would refuse it: checked against the gate's
// own decision at every GPU time from the host's now on, with the clocks converted by
// deadlineToGlobalNs as the backend does (random cases, times a whole microsecond apart so that
// nanosecond rounding cannot decide). And the other way: where the host builds, a gate run at the
// host's now lets the pass through.
TEST(DeviceGateTest, TheHostSkipsOnlyPassesWhoseGateRefuses) {
  const uint64_t gtNs = 1'700'000'000'000'000'000ull; // %globaltimer at host 1000 us
  const double calUs = 1000;
  uint64_t x = 88172645463325252ull;
  auto next = [&](int n) { // xorshift64, 0 .. n-1
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<int>(x % static_cast<uint64_t>(n));
  };
  int skipped = 0, built = 0;
  for (int i = 0; i < 2000; ++i) {
    const double now = calUs + next(5000), need = next(3000), deadline = calUs + next(8000);
    GateArgs a = args(1, 0, deadlineToGlobalNs(deadline, calUs, gtNs),
                      static_cast<uint64_t>(need * 1000));
    GateState running; // the chunk's first gate let its pass run: nothing seen closed
    running.passesRun = 1;
    const bool skip = gateSureToRefuse(running, now, need, deadline, 0);
    for (double later : {0.0, 1.0, 250.0, 4000.0}) {
      const uint64_t gpuNs = deadlineToGlobalNs(now + later, calUs, gtNs);
      if (skip) {
        EXPECT_EQ(gateDecide(gpuNs, 0, 1, a), kGateDeadline)
            << "now " << now << " need " << need << " deadline " << deadline << " +" << later;
      }
    }
    if (!skip) {
      EXPECT_EQ(gateDecide(deadlineToGlobalNs(now, calUs, gtNs), 0, 1, a), kGateRuns)
          << "now " << now << " need " << need << " deadline " << deadline;
    }
    (skip ? skipped : built) += 1;
  }
  EXPECT_GT(skipped, 100);
  EXPECT_GT(built, 100);
  // A gate seen closed (the deadline, or main resumed): every later gate refuses, as kGateEarlier.
  for (uint32_t stop : {kGateEnded, kGateDeadline}) {
    GateState seen;
    seen.passesRun = 1;
    seen.stop = stop;
    EXPECT_TRUE(gateSureToRefuse(seen, 0, 0, 1e9, 0));
    EXPECT_EQ(gateDecide(0, 0, seen.passesRun, args(2, 0, UINT64_MAX, 0)), kGateEarlier);
  }
  // The state the host clears before a chunk: nothing seen closed.
  EXPECT_FALSE(gateSureToRefuse(GateState{}, 0, 10, 100, 0));
  // The slack (the clocks' calibration error) keeps a pass that misses its deadline by less.
  EXPECT_FALSE(gateSureToRefuse(GateState{}, 95, 10, 100, 5));
  EXPECT_TRUE(gateSureToRefuse(GateState{}, 96, 10, 100, 5));
}

// ---- The fill queue with a backend whose device stops chunks ----

class ScriptedBatch : public BatchData {
public:
  std::vector<std::vector<float>> save() override { return {}; }
};

// Runs as many passes as the test scripted next; remembers what it was asked.
class ScriptedJob : public JobData {
public:
  uint32_t nextRan = 0; // passes the next run() runs
  FillExec last;
  uint32_t batchesMade = 0;
  uint32_t run(StreamCtx &, std::unique_ptr<BatchData> &batch, const FillExec &ex) override {
    last = ex;
    last.keepGoing = nullptr;
    if (ex.begins && nextRan > 0) {
      batch = std::make_unique<ScriptedBatch>();
      ++batchesMade;
    }
    if (ex.begins && nextRan == 0)
      batch.reset(); // as the CUDA backend drops a batch whose first pass never ran
    return ex.passBegin + nextRan;
  }
  Accum accumulators() override { return {}; }
  std::vector<std::vector<float>> saveWeights() override { return {}; }
  void loadWeights(const std::vector<std::vector<float>> &) override {}
  std::unique_ptr<BatchData> loadBatch(const std::vector<std::vector<float>> &,
                                       uint32_t) override {
    return nullptr;
  }
};

class StoppingBackend : public Backend {
public:
  uint32_t stop = 0; // what lastDeviceStop reports
  double clockUs = 0;
  std::string name() const override { return "scripted"; }
  bool measuresTime() const override { return true; }
  void prepare(const Program &, const ProgramInfo &, const RunConfig &,
               const std::vector<uint32_t> &) override {}
  void threadBegin(StreamCtx &) override {}
  void threadEnd(StreamCtx &) override {}
  void markStart(StreamCtx &, TimeSlot &) override {}
  void markEnd(StreamCtx &, TimeSlot &) override {}
  void compute(StreamCtx &, const Op &, double) override {}
  void idle(StreamCtx &, double) override {}
  void record(StreamCtx &, uint32_t, int64_t) override {}
  void wait(StreamCtx &, uint32_t, int64_t) override {}
  void send(StreamCtx &, const Op &, double, bool, Publisher &) override {}
  void recv(StreamCtx &, const Op &, const Message &) override {}
  void copy(StreamCtx &, const Op &, double) override {}
  void alloc(StreamCtx &, const Op &) override {}
  void free(StreamCtx &, const Op &) override {}
  std::unique_ptr<JobData> createJob(uint32_t, uint32_t, const JobShape &) override {
    return nullptr;
  }
  void iterationEnd(StreamCtx &) override {}
  void syncStream(StreamCtx &) override {}
  void finish() override {}
  double streamNowUs(StreamCtx &) override { return clockUs += 100; }
  uint32_t lastDeviceStop(StreamCtx &) override { return stop; }
};

JobShape fourChainLayers() {
  JobShape shape;
  shape.passes = 4;
  for (int l = 0; l < 4; ++l) {
    LayerShape ls;
    ls.kind = PFRT_LAYER_GEMM_CHAIN;
    ls.usPerSample = 25.0 * (l + 1); // passes of 50, 100, 150 and 200 us at batch 2
    shape.layers.push_back(ls);
  }
  return shape;
}

// A fill queue whose job is a ScriptedJob, run by a StoppingBackend.
class DeviceStopTest : public ::testing::Test {
protected:
  DeviceStopTest() {
    auto owned = std::make_unique<ScriptedJob>();
    job_ = owned.get();
    q.data = std::move(owned);
  }
  const JobShape shape = fourChainLayers();
  FillQueue q;
  ScriptedJob *job_ = nullptr;
  StoppingBackend backend;
  StreamCtx ctx;
};

// A chunk the device skips whole, then one it stops after two passes, then the rest: each time
// the queue keeps exactly the passes that did not run, first in line, and the batch's state
// where the device left it. The device's inputs: each pass's share of the prediction, the bubble's
// begin edge.
TEST_F(DeviceStopTest, QueueKeepsWhatTheDeviceDidNotRun) {
  ScriptedJob &job = *job_;
  RunConfig config; // bounded, split
  WorkItem item;
  item.sampleBegin = 8;
  item.batch = 2;
  item.passEnd = 4;
  item.plannedUs = 1000; // in proportion to 50:100:150:200 us: 100, 200, 300, 400
  q.backlog.push_back(item);
  const std::function<double()> deadlineNow = [] { return 1e9; };

  // 1. Nothing ran on the device (the bubble had ended): the batch is not in flight, and the whole
  // item waits first in line; the predictor learned nothing.
  q.backlog.pop_front();
  bool twice = false;
  Flight *f = q.admit(item, &twice);
  ASSERT_NE(f, nullptr);
  job.nextRan = 0;
  backend.stop = kGateEnded;
  FillQueue::Ran ran = q.run(ctx, backend, *f, 0, shape, 4, item, config, 1e9, 500, true,
                             deadlineNow, /*bubbleToken=*/41);
  EXPECT_EQ(ran.passEnd, 0u);
  EXPECT_TRUE(ran.cut);
  EXPECT_FALSE(ran.completed);
  EXPECT_EQ(ran.deviceStop, uint32_t(kGateEnded));
  EXPECT_DOUBLE_EQ(ran.plannedUs, 0);
  EXPECT_TRUE(q.flights.empty()) << "a batch whose first pass never ran stays in flight";
  ASSERT_EQ(q.backlog.size(), 1u);
  EXPECT_EQ(q.backlog.front().passBegin, 0u);
  EXPECT_EQ(q.backlog.front().passEnd, 4u);
  EXPECT_DOUBLE_EQ(q.backlog.front().plannedUs, 1000);
  EXPECT_DOUBLE_EQ(q.predictor.predict(0, 4, 2, 1000), 1000) << "learned from a skipped chunk";
  // What the device was given: the prediction (500) split as the planned costs, the edge.
  ASSERT_EQ(job.last.passNeedUs.size(), 4u);
  EXPECT_NEAR(job.last.passNeedUs[0], 50, 1e-9);
  EXPECT_NEAR(job.last.passNeedUs[3], 200, 1e-9);
  EXPECT_NEAR(std::accumulate(job.last.passNeedUs.begin(), job.last.passNeedUs.end(), 0.0), 500,
              1e-9);
  EXPECT_TRUE(job.last.splitPasses);
  EXPECT_EQ(job.last.bubbleToken, 41);

  // 2. The same item again (not "begun twice"): the device stops it after two passes.
  item = q.backlog.front();
  q.backlog.pop_front();
  f = q.admit(item, &twice);
  EXPECT_FALSE(twice);
  ASSERT_NE(f, nullptr);
  job.nextRan = 2;
  backend.stop = kGateDeadline;
  ran = q.run(ctx, backend, *f, 0, shape, 4, item, config, 1e9, 500, true, deadlineNow, 41);
  EXPECT_EQ(ran.passEnd, 2u);
  EXPECT_EQ(ran.deviceStop, uint32_t(kGateDeadline));
  EXPECT_NEAR(ran.plannedUs, 300, 1e-9);
  ASSERT_EQ(q.flights.count(8), 1u);
  EXPECT_EQ(q.flights[8].next, 2u);
  ASSERT_EQ(q.backlog.size(), 1u);
  EXPECT_EQ(q.backlog.front().passBegin, 2u);
  EXPECT_NEAR(q.backlog.front().plannedUs, 700, 1e-9);

  // 3. The rest runs to the end: the batch completes once, with the batch made once.
  item = q.backlog.front();
  q.backlog.pop_front();
  f = q.admit(item, &twice);
  ASSERT_NE(f, nullptr);
  job.nextRan = 2;
  backend.stop = 0;
  ran = q.run(ctx, backend, *f, 0, shape, 4, item, config, 1e9, 500, true, deadlineNow, 41);
  EXPECT_EQ(ran.passEnd, 4u);
  EXPECT_TRUE(ran.completed);
  EXPECT_TRUE(q.flights.empty());
  EXPECT_TRUE(q.backlog.empty());
  EXPECT_EQ(job.batchesMade, 1u);
}

// Whole chunks (PFRT_FILL_BOUNDED_WHOLE, no deadlineNow): the device is told they may not stop
// between passes (CUDA runs them without gates); unbounded chunks (no deadline): nothing for the
// device to check.
TEST_F(DeviceStopTest, WholeAndUnboundedChunksTellTheDeviceSo) {
  ScriptedJob &job = *job_;
  RunConfig config;
  WorkItem item;
  item.batch = 2;
  item.passEnd = 4;
  item.plannedUs = 1000;
  bool twice = false;
  Flight *f = q.admit(item, &twice);
  job.nextRan = 4;
  q.run(ctx, backend, *f, 0, shape, 4, item, config, 1e9, 500, true, {}, 3);
  EXPECT_FALSE(job.last.splitPasses);
  EXPECT_EQ(job.last.passNeedUs.size(), 4u);
  item.sampleBegin = 2;
  f = q.admit(item, &twice);
  q.run(ctx, backend, *f, 0, shape, 4, item, config, 0, -1, true);
  EXPECT_TRUE(job.last.passNeedUs.empty());
  EXPECT_EQ(job.last.bubbleToken, -1);
}


// What CudaBackendTest.DeviceGatesStopAChunkBetweenPasses saw on the GPU (gates on: "0 done + 8
// pending" of 24): a job of one 4-pass chunk per iteration whose chunks the device skips whole
// in iterations 0 and 1 has two chunks queued, so backpressure holds iterations 2.. (holdAt 2,
// FillQueue::holdThreshold). Their batches are never begun: they are neither completed nor
// pending but held (the report's samples_held), and completed + pending + held is what the
// plan completes. Counting completed + pending alone is 16 short after 6 iterations.
TEST_F(DeviceStopTest, ChunksSkippedWholeHoldThePlanAndTheirSamplesCountAsHeld) {
  ScriptedJob &job = *job_;
  RunConfig config;
  const std::function<double()> deadlineNow = [] { return 1e9; };
  q.holdAt = 2;
  backend.stop = kGateEnded;
  job.nextRan = 0;
  uint64_t begun = 0;
  for (int64_t it = 0; it < 6; ++it) {
    int64_t planIt = 0;
    if (q.planIteration(it, &planIt)) {
      WorkItem own;
      own.sampleBegin = 4 * static_cast<uint64_t>(planIt);
      own.batch = 4;
      own.passEnd = 4;
      own.plannedUs = 200;
      q.backlog.push_back(own);
      begun += own.batch;
    }
    if (it >= 2) // the fill thread came too late (the bubble was over): nothing ran
      continue;
    const WorkItem item = q.backlog.front();
    q.backlog.pop_front();
    bool twice = false;
    Flight *f = q.admit(item, &twice);
    ASSERT_NE(f, nullptr);
    q.run(ctx, backend, *f, 0, shape, 4, item, config, 1e9, 200, true, deadlineNow, 1);
  }
  uint64_t pending = 0;
  for (const auto &fl : q.flights)
    pending += fl.second.batch;
  for (const WorkItem &w : q.backlog)
    if (w.passBegin == 0)
      pending += w.batch;
  EXPECT_EQ(q.held, 4);
  EXPECT_EQ(pending, 8u);
  EXPECT_EQ(begun, 8u);
  EXPECT_EQ(0u + pending + 4u * static_cast<uint64_t>(q.held), 6u * 4u);
}

} // namespace
} // namespace test
} // namespace pfrt
