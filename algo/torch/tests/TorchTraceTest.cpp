//===- TorchTraceTest.cpp - measured costs from torch profiler events -----===//
#include "algo/torch/TorchTrace.h"

#include <gtest/gtest.h>

using namespace pipefill;
using namespace pipefill::torchsched;

namespace {

TraceEvent ev(const std::string &name, const std::string &cat, double ts,
              double dur, const std::string &thread = "1/1", int line = 0) {
  TraceEvent e;
  e.name = name;
  e.cat = cat;
  e.ts = ts;
  e.dur = dur;
  e.thread = thread;
  e.line = line;
  return e;
}

StagePlacement twoByOne() {
  StagePlacement p;
  p.devices = 2;
  p.chunks = 1;
  p.deviceOfStage = {0, 1};
  p.chunkOfStage = {0, 0};
  return p;
}

const MeasuredOp *find(const TraceProfile &t, int device, sched::InstrKind k,
                       int mb) {
  for (const MeasuredOp &m : t.ops)
    if (m.device == device && m.kind == k && m.microbatch == mb)
      return &m;
  return nullptr;
}

} // namespace

// The F range also holds the wait for its input (no operator events there)
// and a communication operator: only the span of the compute operators
// counts, and the idle stretches show as gaps.
TEST(Trace, ComputeSpanLeavesOutWaitsAndCommunication) {
  TraceFile r0, r1;
  r0.path = "r0.json";
  r1.path = "r1.json";
  // Rank 0: 0F0 at [0,100], 0B0 range [300,700] whose compute is [600,700].
  r0.events = {ev("PP:0F0", "user_annotation", 0, 120, "1/1", 3),
               ev("aten::linear", "cpu_op", 10, 90),
               ev("c10d::send", "cpu_op", 100, 20),
               ev("PP:0B0", "user_annotation", 300, 400, "1/1", 9),
               ev("autograd::engine::evaluate_function: AddmmBackward0",
                  "cpu_op", 600, 100)};
  // Rank 1: 1F0 range [50, 250], waits until 150, computes [150, 250];
  // 1B0 [260, 560].
  r1.events = {ev("PP:1F0", "user_annotation", 50, 200, "2/2", 4),
               ev("aten::linear", "cpu_op", 150, 100, "2/2"),
               ev("PP:1RECV_F0", "user_annotation", 40, 5, "2/2", 2),
               ev("PP:1B0", "user_annotation", 260, 300, "2/2", 5),
               ev("autograd::engine::evaluate_function: X", "cpu_op", 260, 300,
                  "2/2")};
  TraceProfile t;
  TraceDiag d;
  ASSERT_TRUE(profileFromTraces({r0, r1}, twoByOne(), t, d)) << d.message;
  ASSERT_EQ(t.ops.size(), 4u);
  EXPECT_DOUBLE_EQ(find(t, 0, sched::InstrKind::Forward, 0)->meanUs, 90);
  EXPECT_DOUBLE_EQ(find(t, 0, sched::InstrKind::Backward, 0)->meanUs, 100);
  EXPECT_DOUBLE_EQ(find(t, 1, sched::InstrKind::Forward, 0)->meanUs, 100);
  EXPECT_DOUBLE_EQ(find(t, 1, sched::InstrKind::Forward, 0)->meanStartUs, 140);
  EXPECT_EQ(t.iterations, 1);
  // Origin 10 (first compute), end 700.
  EXPECT_DOUBLE_EQ(t.iterationUs, 690);
  // Rank 0 gaps: [100, 600] steady; rank 1: warmup [10,150], steady
  // [250, 260], cooldown [560, 700].
  ASSERT_EQ(t.gaps.size(), 4u);
  EXPECT_EQ(t.gaps[0].device, 0);
  EXPECT_DOUBLE_EQ(t.gaps[0].startUs, 90);
  EXPECT_DOUBLE_EQ(t.gaps[0].durationUs, 500);
  EXPECT_EQ(t.gaps[1].kind, sched::BubbleKind::Warmup);
  EXPECT_DOUBLE_EQ(t.gaps[1].durationUs, 140);
  EXPECT_EQ(t.gaps[2].kind, sched::BubbleKind::Steady);
  EXPECT_DOUBLE_EQ(t.gaps[2].durationUs, 10);
  EXPECT_EQ(t.gaps[3].kind, sched::BubbleKind::Cooldown);
  EXPECT_DOUBLE_EQ(t.gaps[3].durationUs, 140);
}

TEST(Trace, LaterIterationsAreAveragedWithoutTheFirst) {
  TraceFile f;
  f.path = "t.json";
  StagePlacement p;
  p.deviceOfStage = {0};
  p.chunkOfStage = {0};
  for (int it = 0; it < 3; ++it) {
    double base = 1000.0 * it, dur = it == 0 ? 500 : 10.0 * (it + 1);
    f.events.push_back(ev("PP:0F0", "user_annotation", base, dur));
    f.events.push_back(ev("PP:0B0", "user_annotation", base + 600, 40));
  }
  TraceProfile t;
  TraceDiag d;
  ASSERT_TRUE(profileFromTraces({f}, p, t, d)) << d.message;
  EXPECT_EQ(t.iterations, 3);
  // Iterations 1 and 2: 20 and 30 us (iteration 0's 500 is warm-up).
  EXPECT_DOUBLE_EQ(find(t, 0, sched::InstrKind::Forward, 0)->meanUs, 25);
  EXPECT_EQ(find(t, 0, sched::InstrKind::Forward, 0)->samples, 2);
  EXPECT_DOUBLE_EQ(t.iterationUs, 640);
}

TEST(Trace, OverlapGroupsSplitByOperatorKindAndSingleStageLabels) {
  TraceFile f;
  f.path = "t.json";
  f.rank = 1;
  StagePlacement p = twoByOne();
  f.events = {ev("PP:(1F1;1B0)OVERLAP_F_B", "user_annotation", 0, 100),
              ev("aten::mm", "cpu_op", 0, 30),
              ev("autograd::engine::evaluate_function: MmBackward0", "cpu_op",
                 40, 50),
              ev("Forward 0", "user_annotation", 200, 10)};
  TraceProfile t;
  TraceDiag d;
  ASSERT_TRUE(profileFromTraces({f}, p, t, d)) << d.message;
  EXPECT_DOUBLE_EQ(find(t, 1, sched::InstrKind::Forward, 1)->meanUs, 30);
  EXPECT_DOUBLE_EQ(find(t, 1, sched::InstrKind::Backward, 0)->meanUs, 50);
  // "Forward 0" of a single-stage schedule: stage = the trace's rank.
  EXPECT_DOUBLE_EQ(find(t, 1, sched::InstrKind::Forward, 0)->meanUs, 10);
}

// ScheduleGPipe's "Forward <mb>" range holds the receive of its input: the
// buffer's allocation (an operator), c10d::recv_ and gloo's wait (the
// gloo:recv annotation), then the compute and the send. Times as in a real
// 2-rank gloo trace (torch 2.15): the compute starts after the receive ends.
TEST(Trace, SingleStageRangesLeaveOutTheReceiveOfTheirInput) {
  TraceFile f;
  f.path = "t.json";
  f.rank = 1;
  StagePlacement p = twoByOne();
  f.events = {ev("Forward 0", "user_annotation", 0, 14674),
              ev("aten::empty_strided", "cpu_op", 5602, 9),
              ev("c10d::recv_", "cpu_op", 5827, 425),
              ev("gloo:recv", "user_annotation", 6238, 2210),
              ev("aten::linear", "cpu_op", 8830, 442),
              ev("aten::tanh", "cpu_op", 9426, 1000),
              ev("c10d::send", "cpu_op", 10500, 30),
              // The last stage's backward receives nothing: all of it counts.
              ev("Backward 0", "user_annotation", 20000, 900),
              ev("aten::ones_like", "cpu_op", 20100, 100),
              ev("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", 20300, 500)};
  TraceProfile t;
  TraceDiag d;
  ASSERT_TRUE(profileFromTraces({f}, p, t, d)) << d.message;
  EXPECT_DOUBLE_EQ(find(t, 1, sched::InstrKind::Forward, 0)->meanUs, 10426 - 8830);
  EXPECT_DOUBLE_EQ(find(t, 1, sched::InstrKind::Backward, 0)->meanUs, 700);
}

TEST(Trace, ErrorsNameFileAndLine) {
  StagePlacement p = twoByOne();
  struct Case {
    std::vector<TraceEvent> events;
    int rank;
    int line;
    const char *needle;
  } cases[] = {
      {{ev("aten::mm", "cpu_op", 0, 1)}, 0, 0, "no torch pipelining action"},
      {{ev("PP:0Q1", "user_annotation", 0, 1, "1/1", 7)}, 0, 7,
       "not a torch pipelining action label"},
      {{ev("PP:5F0", "user_annotation", 0, 1, "1/1", 8)}, 0, 8,
       "names stage 5, but the pipeline has 2 stages"},
      {{ev("Backward 2", "user_annotation", 0, 1, "1/1", 9)}, -1, 9,
       "needs the trace's rank"},
  };
  for (const Case &c : cases) {
    TraceFile f;
    f.path = "bad.json";
    f.rank = c.rank;
    f.events = c.events;
    TraceProfile t;
    TraceDiag d;
    EXPECT_FALSE(profileFromTraces({f}, p, t, d));
    EXPECT_EQ(d.path, "bad.json");
    EXPECT_EQ(d.line, c.line) << d.message;
    EXPECT_NE(d.message.find(c.needle), std::string::npos) << d.message;
  }
  // One stage in two ranks' traces.
  TraceFile a, b;
  a.path = "a.json";
  b.path = "b.json";
  a.events = {ev("PP:0F0", "user_annotation", 0, 1, "1/1", 2)};
  b.events = {ev("PP:0F0", "user_annotation", 5, 1, "1/1", 3)};
  TraceProfile t;
  TraceDiag d;
  EXPECT_FALSE(profileFromTraces({a, b}, p, t, d));
  EXPECT_EQ(d.path, "b.json");
  EXPECT_EQ(d.line, 3);
  EXPECT_NE(d.message.find("also appears in a.json"), std::string::npos)
      << d.message;
}

// The k-th occurrence of an action is iteration k, so an action seen fewer
// times than another would have its mean and the iteration's origin taken
// from different steps: an error naming the action and both counts. (Before,
// 0B0 seen once next to three 0F0 was averaged over iteration 0, the warm-up
// the others leave out.)
TEST(Trace, ActionsSeenADifferentNumberOfTimesAreAnError) {
  StagePlacement p;
  p.deviceOfStage = {0};
  p.chunkOfStage = {0};
  TraceFile f;
  f.path = "t.json";
  f.events = {ev("PP:0F0", "user_annotation", 0, 10, "1/1", 2),
              ev("PP:0B0", "user_annotation", 20, 10, "1/1", 3),
              ev("PP:0F0", "user_annotation", 100, 50, "1/1", 4),
              ev("PP:0F0", "user_annotation", 200, 70, "1/1", 5)};
  TraceProfile t;
  TraceDiag d;
  EXPECT_FALSE(profileFromTraces({f}, p, t, d));
  EXPECT_EQ(d.path, "t.json");
  EXPECT_EQ(d.line, 3);
  EXPECT_NE(d.message.find("stage 0 micro-batch 0 backward appears once, but stage 0 "
                           "micro-batch 0 forward appears 3 times (at line 2 of t.json)"),
            std::string::npos)
      << d.message;
  // With the second and third 0B0 the same trace is three iterations.
  f.events.push_back(ev("PP:0B0", "user_annotation", 160, 10, "1/1", 6));
  f.events.push_back(ev("PP:0B0", "user_annotation", 280, 10, "1/1", 7));
  ASSERT_TRUE(profileFromTraces({f}, p, t, d)) << d.message;
  EXPECT_EQ(t.iterations, 3);
  // Iterations 1 and 2: 50 and 70 us.
  EXPECT_DOUBLE_EQ(find(t, 0, sched::InstrKind::Forward, 0)->meanUs, 60);
}

// With the pipeline's micro-batch count known, an action of another
// micro-batch is an error at its line; so are times no clock gives.
TEST(Trace, MicrobatchesAndTimesOutsideThePipelineAreErrors) {
  StagePlacement p = twoByOne();
  p.microbatches = 2;
  struct Case {
    TraceEvent event;
    int rank;
    const char *needle;
  } cases[] = {
      {ev("PP:0F7", "user_annotation", 0, 1, "1/1", 4), 0,
       "'PP:0F7' names micro-batch 7, but the pipeline has 2 micro-batches"},
      {ev("Forward 2", "user_annotation", 0, 1, "1/1", 4), 1,
       "'Forward 2' names micro-batch 2, but the pipeline has 2 micro-batches"},
      {ev("PP:0F0", "user_annotation", 1e300, 1, "1/1", 4), 0,
       "'PP:0F0' has ts 1e+300 and dur 1 us"},
      {ev("PP:0F0", "user_annotation", -2e15, 1, "1/1", 4), 0, "ts must be within +-1e15 us"},
      {ev("PP:0F0", "user_annotation", 0, 2e9, "1/1", 4), 0, "dur at most 1e9 us"},
  };
  for (const Case &c : cases) {
    TraceFile f;
    f.path = "bad.json";
    f.rank = c.rank;
    f.events = {c.event};
    TraceProfile t;
    TraceDiag d;
    EXPECT_FALSE(profileFromTraces({f}, p, t, d)) << c.needle;
    EXPECT_EQ(d.path, "bad.json");
    EXPECT_EQ(d.line, 4) << d.message;
    EXPECT_NE(d.message.find(c.needle), std::string::npos) << d.message;
  }
  // The last micro-batch and the clock's bounds are fine.
  TraceFile f;
  f.path = "ok.json";
  f.events = {ev("PP:0F1", "user_annotation", 1e15 - 2e9, 1e9, "1/1", 2)};
  TraceProfile t;
  TraceDiag d;
  EXPECT_TRUE(profileFromTraces({f}, p, t, d)) << d.message;
}
