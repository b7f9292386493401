// Fill tasks of a session (pfrt_session_task_*): the user's steps run in bubbles under the bound.
//
// Most tests run on a virtual clock (setSessionClockForTesting): a step "takes" c us by advancing
// the clock, so bubble deadlines, the bound's decisions and the measured step times are exact and
// the expected step counts follow from the rule in pfrt.h by hand (closed forms below), not from
// the runtime's own code; the machine's load cannot change them. One test uses the real clock with
// a busy-waiting step and checks what load cannot break (an upper bound and the measured time).
#include "runtime/CheckpointFile.h"
#include "runtime/ProgramIO.h"
#include "runtime/Session.h"
#include "runtime/SessionTasks.h"
#include "runtime/tests/TestUtil.h"

#include "proto/stream_program.pb.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <thread>
#include <vector>

namespace pfrt {
namespace test {
namespace {

struct SessionDeleter {
  void operator()(pfrt_session *s) const { pfrt_session_destroy(s); }
};
using SessionPtr = std::unique_ptr<pfrt_session, SessionDeleter>;

// The virtual clock (us). Steps advance it on the session's worker; the framework thread reads it
// at the same time (bubble_end), so it is atomic.
std::atomic<double> virtualNow{0};
double virtualClock() { return virtualNow.load(); }
// Only the worker writes while a session runs, so a load and a store need no compare-and-swap.
void advanceVirtualClock(double us) { virtualNow.store(virtualNow.load() + us); }

class VirtualClock {
public:
  VirtualClock() {
    virtualNow = 1000;
    setSessionClockForTesting(&virtualClock);
  }
  ~VirtualClock() { setSessionClockForTesting(nullptr); }
};

// A task whose every step takes `costUs` (virtual) and reports `samples`; it records the order of
// steps across tasks in `*order` (its id) and, if given, the session's chunk count at each step.
struct FakeTask {
  double costUs = 100;
  uint64_t samples = 1;
  uint32_t id = 0;
  std::vector<uint32_t> *order = nullptr;
  std::atomic<uint64_t> calls{0};
  uint64_t failAt = std::numeric_limits<uint64_t>::max(); // the call that returns an error
  // What the failing call returns; an int, as a C step function may return any value (a
  // pfrt_status lvalue holding 42 would be undefined behaviour to load, UBSan's enum check).
  int failWith = PFRT_ERROR_BACKEND;
  const pfrt_session *session = nullptr;
  std::vector<uint32_t> chunkCounts;
};

pfrt_status fakeStep(void *user, uint64_t *outSamples) {
  FakeTask &t = *static_cast<FakeTask *>(user);
  if (t.calls++ == t.failAt)
    return static_cast<pfrt_status>(t.failWith);
  if (t.session) {
    uint32_t n = 0;
    pfrt_session_chunk_count(t.session, &n);
    t.chunkCounts.push_back(n);
  }
  advanceVirtualClock(t.costUs);
  if (t.order)
    t.order->push_back(t.id);
  *outSamples = t.samples;
  return PFRT_OK;
}

pfrt_session_options options(pfrt_fill_policy policy = PFRT_FILL_BOUNDED) {
  pfrt_session_options o;
  pfrt_session_options_init(&o);
  o.backend = PFRT_BACKEND_HOST;
  o.fill_policy = policy;
  o.fill_idle_priority = 0;
  return o;
}

// A 2-stage 1F1B pipeline without fill jobs: bubbles only.
ProgramPtr noFillPlan() {
  samples::PipelineSpec spec;
  spec.stages = 2;
  spec.microbatches = 4;
  spec.fill = false;
  return buildOk(spec);
}

ProgramPtr tinyPlan() {
  pfrt_program *p = nullptr;
  EXPECT_EQ(pfrt_program_load(dataPath("tiny_plan.pbtxt").c_str(), &p), PFRT_OK)
      << pfrt_last_error();
  return ProgramPtr(p);
}

SessionPtr sessionOk(const pfrt_program *p, uint32_t rank, const pfrt_session_options &o) {
  pfrt_session *s = nullptr;
  EXPECT_EQ(pfrt_session_create(p, rank, &o, &s), PFRT_OK) << pfrt_last_error();
  return SessionPtr(s);
}

uint32_t addOk(pfrt_session *s, const char *name, FakeTask &t, double stepUs,
               uint64_t memoryBytes = 0, uint64_t maxSteps = 0) {
  pfrt_session_task_desc d{};
  d.name = name;
  d.step = fakeStep;
  d.user_data = &t;
  d.step_us = stepUs;
  d.memory_bytes = memoryBytes;
  d.max_steps = maxSteps;
  uint32_t id = 99;
  EXPECT_EQ(pfrt_session_task_add(s, &d, &id), PFRT_OK) << pfrt_last_error();
  t.id = id;
  return id;
}

pfrt_session_task_stats statsOf(const pfrt_session *s, uint32_t task) {
  pfrt_session_task_stats out{};
  EXPECT_EQ(pfrt_session_task_get(s, task, &out), PFRT_OK) << pfrt_last_error();
  return out;
}

// An unplanned bubble of `durationUs`, given entirely to fill.
pfrt_session_bubble_result unplanned(pfrt_session *s, double durationUs) {
  pfrt_session_bubble_result r{};
  EXPECT_EQ(pfrt_session_unplanned_begin(s, durationUs, nullptr), PFRT_OK) << pfrt_last_error();
  EXPECT_EQ(pfrt_session_bubble_wait(s), PFRT_OK) << pfrt_last_error();
  EXPECT_EQ(pfrt_session_bubble_end(s, PFRT_SESSION_UNPLANNED, &r), PFRT_OK) << pfrt_last_error();
  return r;
}

// The rule of pfrt.h, by hand, for steps that each take exactly c (so every prediction after the
// first step is max(1.2 c, c) = 1.2 c, and the first is 1.2 x the estimate e): steps start at
// 0, c, 2c, ... while start + prediction <= D.
uint64_t expectedSteps(double D, double c, double e) {
  if (1.2 * e > D)
    return 0;
  if (1.2 * c > D - c)
    return 1;
  // The first step, then k >= 1 with k c + 1.2 c <= D.
  return 1 + static_cast<uint64_t>(std::floor((D - 1.2 * c) / c));
}

void expectError(pfrt_status st, pfrt_status expected, const std::string &text) {
  EXPECT_EQ(st, expected) << pfrt_status_name(st) << ": " << pfrt_last_error();
  EXPECT_NE(std::string(pfrt_last_error()).find(text), std::string::npos) << pfrt_last_error();
}

TEST(StepPredictorTest, StartsFromTheEstimateThenFollowsTheMeasuredSteps) {
  StepPredictor p(100);
  EXPECT_DOUBLE_EQ(p.predict(), 120); // 1.2 x the estimate
  p.add(300);
  EXPECT_DOUBLE_EQ(p.predict(), 360); // 1.2 x median 300
  for (double v : {100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0})
    p.add(v);
  // 10 steps: median 100, nearest-rank p90 = 9th smallest = 100, so 1.2 x median wins.
  EXPECT_DOUBLE_EQ(p.quantile(0.5), 100);
  EXPECT_DOUBLE_EQ(p.predict(), 120);
  // A heavy tail: p90 over 1.2 x median. 20 steps: 14 of 100, 6 of 500: p90 = 18th = 500.
  StepPredictor q(1);
  for (int i = 0; i < 14; ++i)
    q.add(100);
  for (int i = 0; i < 6; ++i)
    q.add(500);
  EXPECT_DOUBLE_EQ(q.predict(), 500);
  // The window is the last 32: old slow steps fall out.
  StepPredictor w(1);
  for (int i = 0; i < 32; ++i)
    w.add(1000);
  for (int i = 0; i < 32; ++i)
    w.add(10);
  EXPECT_DOUBLE_EQ(w.predict(), 12);
}

// Known step time, bubbles of known durations: exactly the steps the rule allows, no overrun.
TEST(SessionTaskTest, StepsThatFitTheBubbleAndNoMore) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  FakeTask t;
  t.costUs = 100;
  t.samples = 3;
  const uint32_t id = addOk(s.get(), "exact", t, 100);
  uint64_t total = 0;
  for (double D : {1000.0, 1050.0, 119.0, 120.0, 219.0, 221.0, 5000.0}) {
    const uint64_t want = expectedSteps(D, 100, 100);
    pfrt_session_bubble_result r = unplanned(s.get(), D);
    EXPECT_EQ(r.task_steps, want) << "bubble of " << D << " us";
    EXPECT_EQ(r.task_samples, 3 * want);
    EXPECT_DOUBLE_EQ(r.task_us, 100.0 * static_cast<double>(want));
    EXPECT_EQ(r.overrun_us, 0.0);
    total += want;
  }
  EXPECT_EQ(total, 9u + 10u + 0u + 1u + 1u + 2u + 49u); // the closed form, spelled out
  pfrt_session_task_stats st = statsOf(s.get(), id);
  EXPECT_EQ(st.steps, total);
  EXPECT_EQ(st.samples, 3 * total);
  EXPECT_EQ(st.overruns, 0u);
  EXPECT_DOUBLE_EQ(st.measured_us_p50, 100);
  EXPECT_DOUBLE_EQ(st.measured_us_max, 100);
  EXPECT_DOUBLE_EQ(st.measured_us_mean, 100);
  EXPECT_DOUBLE_EQ(st.task_us, 100.0 * static_cast<double>(total));
  EXPECT_DOUBLE_EQ(st.predicted_us, 120);
  EXPECT_EQ(st.skipped_no_fit, 7u); // every bubble ended with a step that did not fit
  EXPECT_EQ(std::string(st.name), "exact");
}

// A step that takes 3x its estimate: the first is admitted on the estimate (and overruns a short
// bubble); from the second on the prediction is the measured 1.2 x 300 = 360 us and steps drop.
TEST(SessionTaskTest, PredictorCorrectsAnUnderestimatedStep) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  FakeTask t;
  t.costUs = 300;
  const uint32_t id = addOk(s.get(), "slow", t, 100);
  // Bubble 1 (250 us): 120 <= 250 admits the first step; it takes 300 and overruns by 50.
  pfrt_session_bubble_result r1 = unplanned(s.get(), 250);
  EXPECT_EQ(r1.task_steps, 1u);
  EXPECT_DOUBLE_EQ(r1.overrun_us, 50);
  EXPECT_DOUBLE_EQ(statsOf(s.get(), id).predicted_us, 360);
  // Bubble 2, the same 250 us: 360 > 250, no step, no overrun.
  pfrt_session_bubble_result r2 = unplanned(s.get(), 250);
  EXPECT_EQ(r2.task_steps, 0u);
  EXPECT_EQ(r2.overrun_us, 0.0);
  // Bubble 3 (1050 us): 0+360, 300+360, 600+360 fit, 900+360 does not: 3 steps, no overrun.
  // On the estimate alone (120 us) a 4th would start at 900 and end at 1200, 150 us late.
  pfrt_session_bubble_result r3 = unplanned(s.get(), 1050);
  EXPECT_EQ(r3.task_steps, 3u);
  EXPECT_EQ(r3.overrun_us, 0.0);
  pfrt_session_task_stats st = statsOf(s.get(), id);
  EXPECT_EQ(st.overruns, 1u);
  EXPECT_EQ(st.skipped_no_fit, 3u);
  EXPECT_DOUBLE_EQ(st.measured_us_p50, 300);
}

// A task whose first step is slow (50 ms: a framework's first call, which loads and compiles what
// later calls reuse) and whose later steps take their 100 us estimate, in 1 ms bubbles. Without
// the starvation escape the prediction stays at 1.2 x 50 ms and the task never runs again (1 step
// in 20 bubbles). With it: bubbles 2-9 refuse it (8 refusals: the estimate fits each), the eighth
// retires the slow step, and bubbles 10-20 run expectedSteps(1000, 100, 100) = 9 steps each.
TEST(SessionTaskTest, ASlowFirstStepDoesNotStarveTheTask) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  FakeTask t;
  t.costUs = 50000;
  const uint32_t id = addOk(s.get(), "cold", t, 100);
  std::vector<uint64_t> steps;
  for (int b = 1; b <= 20; ++b) {
    steps.push_back(unplanned(s.get(), 1000).task_steps);
    t.costUs = 100;
  }
  const std::vector<uint64_t> expected{1, 0, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
  EXPECT_EQ(steps, expected);
  const pfrt_session_task_stats st = statsOf(s.get(), id);
  EXPECT_EQ(st.steps, 1u + 11u * 9u);
  EXPECT_EQ(st.overruns, 1u) << "only the slow first step";
}

// The unbounded policy starts a step whenever the bubble has time left: more steps, overruns.
TEST(SessionTaskTest, UnboundedPolicyOverrunsTheBound) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  SessionPtr bounded = sessionOk(p.get(), 0, options(PFRT_FILL_BOUNDED));
  SessionPtr unbounded = sessionOk(p.get(), 0, options(PFRT_FILL_UNBOUNDED));
  FakeTask a, b;
  const uint32_t ia = addOk(bounded.get(), "t", a, 100);
  const uint32_t ib = addOk(unbounded.get(), "t", b, 100);
  pfrt_session_bubble_result rb = unplanned(bounded.get(), 1050);
  pfrt_session_bubble_result ru = unplanned(unbounded.get(), 1050);
  EXPECT_EQ(rb.task_steps, 10u); // starts 0..900: 900 + 120 <= 1050
  EXPECT_EQ(ru.task_steps, 11u); // starts 0..1000: every start before 1050
  EXPECT_EQ(statsOf(bounded.get(), ia).overruns, 0u);
  EXPECT_EQ(statsOf(unbounded.get(), ib).overruns, 1u);
  EXPECT_DOUBLE_EQ(ru.overrun_us, 50);
}

// Memory: a task runs only in bubbles with at least its memory_bytes free. An unplanned bubble
// counts the smallest free bytes of the rank's planned bubbles.
TEST(SessionTaskTest, MemoryGatesTheBubblesATaskRunsIn) {
  VirtualClock clock;
  ProgramPtr p = tinyPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  uint32_t n = 0;
  PFRT_ASSERT_OK(pfrt_session_rank_info(s.get(), nullptr, nullptr, nullptr, &n));
  std::vector<pfrt_session_bubble> bubbles(n);
  uint64_t minFree = std::numeric_limits<uint64_t>::max(), maxFree = 0;
  for (uint32_t k = 0; k < n; ++k) {
    PFRT_ASSERT_OK(pfrt_session_bubble_get(s.get(), k, &bubbles[k]));
    minFree = std::min(minFree, bubbles[k].free_bytes);
    maxFree = std::max(maxFree, bubbles[k].free_bytes);
  }
  ASSERT_LT(minFree, maxFree) << "the test needs bubbles with different free bytes";
  FakeTask small, big, huge;
  const uint32_t is = addOk(s.get(), "small", small, 100, minFree, 0);
  const uint32_t ib = addOk(s.get(), "big", big, 100, maxFree, 0);
  const uint32_t ih = addOk(s.get(), "huge", huge, 100, maxFree + 1, 0);
  uint32_t bigBubbles = 0;
  for (const pfrt_session_bubble &b : bubbles) {
    PFRT_ASSERT_OK(pfrt_session_bubble_begin(s.get(), b.bubble_id, nullptr, 1000));
    PFRT_ASSERT_OK(pfrt_session_bubble_wait(s.get()));
    PFRT_ASSERT_OK(pfrt_session_bubble_end(s.get(), b.bubble_id, nullptr));
    bigBubbles += b.free_bytes >= maxFree;
  }
  PFRT_ASSERT_OK(pfrt_session_iteration_end(s.get()));
  unplanned(s.get(), 1000);
  EXPECT_GT(statsOf(s.get(), is).steps, 0u);
  EXPECT_EQ(statsOf(s.get(), is).skipped_memory, 0u);
  // big: only the planned bubbles with maxFree free; the unplanned one has minFree.
  EXPECT_EQ(statsOf(s.get(), ib).skipped_memory, n - bigBubbles + 1);
  EXPECT_GT(statsOf(s.get(), ib).steps, 0u);
  EXPECT_EQ(statsOf(s.get(), ih).steps, 0u);
  EXPECT_EQ(statsOf(s.get(), ih).skipped_memory, n + 1);
}

// Two tasks take turns, one step each; the turn carries over to the next bubble.
TEST(SessionTaskTest, RoundRobinBetweenTasks) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  std::vector<uint32_t> order;
  FakeTask a, b;
  a.order = b.order = &order;
  const uint32_t ia = addOk(s.get(), "a", a, 100);
  const uint32_t ib = addOk(s.get(), "b", b, 100);
  // 1000 us: 9 steps (as above); a b a b a b a b a.
  EXPECT_EQ(unplanned(s.get(), 1000).task_steps, 9u);
  // 500 us: 4 steps, starting with b (a had the last turn).
  EXPECT_EQ(unplanned(s.get(), 500).task_steps, 4u);
  std::vector<uint32_t> want = {ia, ib, ia, ib, ia, ib, ia, ib, ia, ib, ia, ib, ia};
  EXPECT_EQ(order, want);
  EXPECT_EQ(statsOf(s.get(), ia).steps, 7u);
  EXPECT_EQ(statsOf(s.get(), ib).steps, 6u);
}

// Tasks of different step times: turns, not time, are shared; a task whose step does not fit
// what is left drops out of the bubble while a shorter one goes on.
TEST(SessionTaskTest, ALongTaskDropsOutWhileAShortOneGoesOn) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  std::vector<uint32_t> order;
  FakeTask longer, shorter;
  longer.costUs = 400;
  shorter.costUs = 100;
  longer.order = shorter.order = &order;
  const uint32_t il = addOk(s.get(), "long", longer, 400);
  const uint32_t is = addOk(s.get(), "short", shorter, 100);
  // 1200 us: long (0, pred 480) short (400) long (500+480 <= 1200) short (900), then long:
  // 1000 + 480 > 1200 drops out; short: 1000 + 120 <= 1200 runs (1100); 1100 + 120 > 1200.
  EXPECT_EQ(unplanned(s.get(), 1200).task_steps, 5u);
  EXPECT_EQ(order, (std::vector<uint32_t>{il, is, il, is, is}));
  EXPECT_EQ(statsOf(s.get(), il).skipped_no_fit, 1u);
}

// The plan's chunks go first in a bubble; tasks run after them.
TEST(SessionTaskTest, PlanChunksRunBeforeTasks) {
  VirtualClock clock;
  ProgramPtr p = tinyPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  FakeTask t;
  t.session = s.get();
  addOk(s.get(), "after", t, 100);
  uint32_t n = 0;
  PFRT_ASSERT_OK(pfrt_session_rank_info(s.get(), nullptr, nullptr, nullptr, &n));
  uint32_t bubblesWithBoth = 0;
  for (int it = 0; it < 2; ++it) {
    for (uint32_t k = 0; k < n; ++k) {
      pfrt_session_bubble b{};
      PFRT_ASSERT_OK(pfrt_session_bubble_get(s.get(), k, &b));
      const size_t before = t.chunkCounts.size();
      PFRT_ASSERT_OK(pfrt_session_bubble_begin(s.get(), b.bubble_id, nullptr, 1e4));
      PFRT_ASSERT_OK(pfrt_session_bubble_wait(s.get()));
      pfrt_session_bubble_result r{};
      PFRT_ASSERT_OK(pfrt_session_bubble_end(s.get(), b.bubble_id, &r));
      uint32_t chunksAfter = 0;
      PFRT_ASSERT_OK(pfrt_session_chunk_count(s.get(), &chunksAfter));
      // Every step of this bubble saw all of the bubble's chunks done.
      for (size_t i = before; i < t.chunkCounts.size(); ++i)
        EXPECT_EQ(t.chunkCounts[i], chunksAfter) << "a chunk ran after a task step";
      EXPECT_GT(t.chunkCounts.size(), before) << "1e4 us has room for task steps";
      bubblesWithBoth += r.chunks_run > 0 && r.task_steps > 0;
    }
    PFRT_ASSERT_OK(pfrt_session_iteration_end(s.get()));
  }
  EXPECT_GT(bubblesWithBoth, 0u);
}

TEST(SessionTaskTest, MaxStepsAndCheckpointResume) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  const std::string path = tempPath("tasks.ckpt");
  FakeTask a;
  a.samples = 5;
  SessionPtr s = sessionOk(p.get(), 0, options());
  const uint32_t id = addOk(s.get(), "limited", a, 100, 0, 7);
  EXPECT_EQ(unplanned(s.get(), 450).task_steps, 4u);
  PFRT_ASSERT_OK(pfrt_session_task_state_set(s.get(), id, "pos=4", 5));
  PFRT_ASSERT_OK(pfrt_session_checkpoint_save(s.get(), path.c_str()));
  EXPECT_EQ(unplanned(s.get(), 1e6).task_steps, 3u); // the limit, not the bubble, stops it
  EXPECT_EQ(unplanned(s.get(), 1e6).task_steps, 0u);
  EXPECT_EQ(statsOf(s.get(), id).done, 1);
  EXPECT_EQ(statsOf(s.get(), id).steps, 7u);

  // Resume: 4 steps restored, 3 to go; the state bytes come back.
  FakeTask b;
  b.samples = 5;
  SessionPtr r = sessionOk(p.get(), 0, options());
  const uint32_t rid = addOk(r.get(), "limited", b, 100, 0, 7);
  PFRT_ASSERT_OK(pfrt_session_checkpoint_load(r.get(), path.c_str()));
  const void *data = nullptr;
  size_t size = 0;
  PFRT_ASSERT_OK(pfrt_session_task_state_get(r.get(), rid, &data, &size));
  EXPECT_EQ(std::string(static_cast<const char *>(data), size), "pos=4");
  EXPECT_EQ(statsOf(r.get(), rid).steps, 4u);
  EXPECT_EQ(unplanned(r.get(), 1e6).task_steps, 3u);
  EXPECT_EQ(statsOf(r.get(), rid).steps, statsOf(s.get(), id).steps);
  EXPECT_EQ(statsOf(r.get(), rid).samples, statsOf(s.get(), id).samples);
  EXPECT_EQ(statsOf(r.get(), rid).steps_this_run, 3u);

  // A checkpoint naming a task this session lacks.
  SessionPtr bare = sessionOk(p.get(), 0, options());
  expectError(pfrt_session_checkpoint_load(bare.get(), path.c_str()), PFRT_ERROR_INVALID_ARGUMENT,
              "holds fill task 'limited', which this session does not have");
  // A checkpoint intact on disk that names its task twice, or holds a job the program lacks.
  {
    const uint64_t fp = programFingerprint(p->program);
    pipefill::rt::FillCheckpoint cp;
    std::string problem;
    ASSERT_EQ(readCheckpointFile(path, fp, cp, problem), CheckpointStatus::Ok) << problem;
    const std::string twice = tempPath("tasks-twice.ckpt"), jobs = tempPath("tasks-jobs.ckpt");
    pipefill::rt::FillCheckpoint bad = cp;
    *bad.add_tasks() = cp.tasks(0);
    writeCheckpointFile(twice, bad, fp);
    bad = cp;
    bad.add_jobs()->set_name("extra");
    writeCheckpointFile(jobs, bad, fp);
    FakeTask t;
    SessionPtr r3 = sessionOk(p.get(), 0, options());
    addOk(r3.get(), "limited", t, 100, 0, 7);
    expectError(pfrt_session_checkpoint_load(r3.get(), twice.c_str()), PFRT_ERROR_PARSE,
                "checkpoint " + twice + " names fill task 'limited' twice");
    expectError(pfrt_session_checkpoint_load(r3.get(), jobs.c_str()), PFRT_ERROR_PARSE,
                "checkpoint " + jobs + " has " + std::to_string(bad.jobs_size()) +
                    " jobs, the program " + std::to_string(p->program.jobs.size()));
  }
  // The checkpoint's checksum covers the tasks: a flipped byte is refused.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff end = f.tellg();
    ASSERT_GT(end, 8);
    std::string bytes(static_cast<size_t>(end), '\0');
    f.seekg(0);
    f.read(&bytes[0], end);
    const size_t at = bytes.find("pos=4");
    ASSERT_NE(at, std::string::npos);
    f.seekp(static_cast<std::streamoff>(at));
    f.put('X');
  }
  FakeTask c;
  SessionPtr r2 = sessionOk(p.get(), 0, options());
  addOk(r2.get(), "limited", c, 100, 0, 7);
  EXPECT_EQ(pfrt_session_checkpoint_load(r2.get(), path.c_str()), PFRT_ERROR_PARSE)
      << pfrt_last_error();
}

// measured_us_mean is over this session's steps (as max and p50 are), also after a checkpoint
// load resets steps_this_run: each step takes exactly 100 us, so the mean is 100 whatever was
// loaded (it was the sum over 7 steps divided by the 3 after the load: 233 us, above the max).
TEST(SessionTaskTest, MeanStepTimeSurvivesACheckpointLoad) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  const std::string path = tempPath("mean.ckpt");
  FakeTask t;
  SessionPtr s = sessionOk(p.get(), 0, options());
  const uint32_t id = addOk(s.get(), "steady", t, 100);
  EXPECT_EQ(unplanned(s.get(), 450).task_steps, 4u);
  PFRT_ASSERT_OK(pfrt_session_checkpoint_save(s.get(), path.c_str()));
  PFRT_ASSERT_OK(pfrt_session_checkpoint_load(s.get(), path.c_str()));
  EXPECT_EQ(unplanned(s.get(), 450).task_steps, 4u);
  const pfrt_session_task_stats st = statsOf(s.get(), id);
  EXPECT_EQ(st.steps_this_run, 4u);
  EXPECT_EQ(st.steps, 8u);
  EXPECT_DOUBLE_EQ(st.measured_us_max, 100);
  EXPECT_DOUBLE_EQ(st.measured_us_mean, 100);
}

// A planned bubble begun without a duration lasts its plan x the smallest measured / planned
// length of its last 5 iterations. One that the framework ended at once (ratio 0) predicts no
// time for the next ones; when the framework then gives the bubble to fill whole
// (bubble_wait), those iterations measure nothing but age the 0 out: 5 iterations later the
// plan's length is back. (The waited ones were left out of the window, so the 0 stayed for good
// and the bubble ran nothing ever again.)
TEST(SessionTaskTest, WaitedBubblesAgeAShortOneOut) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  pfrt_session_bubble b{};
  PFRT_ASSERT_OK(pfrt_session_bubble_get(s.get(), 0, &b));
  ASSERT_GT(b.planned_duration_us, 500) << "room for steps of 100 us";
  FakeTask t;
  addOk(s.get(), "steady", t, 100);
  pfrt_session_bubble_result r{};
  // Ended at once (ratio 0). Its 1 us deadline lets no step start: a step that the worker began
  // before the end call would advance the virtual clock and lengthen the bubble.
  PFRT_ASSERT_OK(pfrt_session_bubble_begin(s.get(), b.bubble_id, nullptr, 1));
  PFRT_ASSERT_OK(pfrt_session_bubble_end(s.get(), b.bubble_id, &r));
  PFRT_ASSERT_OK(pfrt_session_iteration_end(s.get()));
  EXPECT_EQ(r.task_steps, 0u);
  for (int it = 1; it <= 6; ++it) {
    PFRT_ASSERT_OK(pfrt_session_bubble_begin(s.get(), b.bubble_id, nullptr, 0));
    PFRT_ASSERT_OK(pfrt_session_bubble_wait(s.get()));
    PFRT_ASSERT_OK(pfrt_session_bubble_end(s.get(), b.bubble_id, &r));
    PFRT_ASSERT_OK(pfrt_session_iteration_end(s.get()));
    EXPECT_EQ(r.task_steps, it <= 5 ? 0u : expectedSteps(b.planned_duration_us, 100, 100))
        << "iteration " << it;
  }
}

// A C step may report any sample count, but a task's total stays within what a checkpoint counts
// (10^15): the step that would pass it disables the task with an error that says so, and what was
// done before it is kept and checkpoints (not wrapped, not refused on load).
TEST(SessionTaskTest, SampleCountsPastTheCheckpointLimitAreRefused) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  const std::string path = tempPath("huge.ckpt");
  FakeTask t;
  t.samples = 400000000000000; // 4 x 10^14: the third step would make 1.2 x 10^15
  SessionPtr s = sessionOk(p.get(), 0, options());
  const uint32_t id = addOk(s.get(), "huge", t, 100);
  PFRT_ASSERT_OK(pfrt_session_unplanned_begin(s.get(), 1e6, nullptr));
  expectError(pfrt_session_bubble_wait(s.get()), PFRT_ERROR_INVALID_ARGUMENT,
              "fill task 'huge' (task 0) failed at step 2: its step reported 400000000000000 "
              "samples, which takes the task past 10^15 samples in all (the most a checkpoint "
              "counts; it has 800000000000000); the task is disabled");
  PFRT_ASSERT_OK(pfrt_session_bubble_end(s.get(), PFRT_SESSION_UNPLANNED, nullptr));
  pfrt_session_task_stats st = statsOf(s.get(), id);
  EXPECT_EQ(st.steps, 2u);
  EXPECT_EQ(st.samples, 800000000000000u);
  EXPECT_EQ(st.failed, 1);
  PFRT_ASSERT_OK(pfrt_session_checkpoint_save(s.get(), path.c_str()));
  FakeTask u;
  u.samples = std::numeric_limits<uint64_t>::max(); // refused at once, whatever was done
  SessionPtr resumed = sessionOk(p.get(), 0, options());
  const uint32_t rid = addOk(resumed.get(), "huge", u, 100);
  PFRT_ASSERT_OK(pfrt_session_checkpoint_load(resumed.get(), path.c_str()));
  EXPECT_EQ(statsOf(resumed.get(), rid).samples, 800000000000000u);
  PFRT_ASSERT_OK(pfrt_session_unplanned_begin(resumed.get(), 1e6, nullptr));
  expectError(pfrt_session_bubble_wait(resumed.get()), PFRT_ERROR_INVALID_ARGUMENT,
              "its step reported 18446744073709551615 samples");
  PFRT_ASSERT_OK(pfrt_session_bubble_end(resumed.get(), PFRT_SESSION_UNPLANNED, nullptr));
  EXPECT_EQ(statsOf(resumed.get(), rid).samples, 800000000000000u);
  EXPECT_EQ(statsOf(resumed.get(), rid).samples_this_run, 0u);
}

// A failing step disables its task; the error names it and comes back from the next bubble_wait or
// bubble_end; other tasks go on.
TEST(SessionTaskTest, AFailingStepDisablesItsTask) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  FakeTask bad, good;
  bad.failAt = 2;
  const uint32_t ibad = addOk(s.get(), "flaky", bad, 100);
  const uint32_t igood = addOk(s.get(), "steady", good, 100);
  PFRT_ASSERT_OK(pfrt_session_unplanned_begin(s.get(), 1000, nullptr));
  expectError(pfrt_session_bubble_wait(s.get()), PFRT_ERROR_BACKEND,
              "fill task 'flaky' (task 0) failed at step 2: its step returned "
              "PFRT_ERROR_BACKEND; the task is disabled");
  PFRT_ASSERT_OK(pfrt_session_bubble_end(s.get(), PFRT_SESSION_UNPLANNED, nullptr));
  EXPECT_EQ(statsOf(s.get(), ibad).failed, 1);
  EXPECT_EQ(statsOf(s.get(), ibad).error_status, PFRT_ERROR_BACKEND);
  EXPECT_EQ(statsOf(s.get(), ibad).steps, 2u);
  // a b a b (a fails: its 3rd call), then b alone: 9 steps in 1000 us as before, minus the failed
  // call, which took no virtual time: 2 of a + 7 of b.
  EXPECT_EQ(statsOf(s.get(), igood).steps, 7u);
  EXPECT_EQ(unplanned(s.get(), 1000).task_steps, 9u); // b only; a is not called again
  EXPECT_EQ(bad.calls, 3u);
  // bubble_end (no wait) returns the error as well, and the bubble is over: its result is
  // written all the same (it kept the caller's bytes before).
  FakeTask bad2;
  bad2.failAt = 0;
  bad2.failWith = 42;
  addOk(s.get(), "odd", bad2, 100);
  const uint64_t goodBefore = good.calls;
  PFRT_ASSERT_OK(pfrt_session_unplanned_begin(s.get(), 1000, nullptr));
  while (bad2.calls == 0)
    std::this_thread::yield();
  pfrt_session_bubble_result r;
  std::memset(&r, 0xAB, sizeof r);
  expectError(pfrt_session_bubble_end(s.get(), PFRT_SESSION_UNPLANNED, &r),
              PFRT_ERROR_INTERNAL, "fill task 'odd' (task 2) failed at step 0: its step returned "
                                   "an unknown status 42");
  EXPECT_EQ(r.task_steps, good.calls - goodBefore) << "the steady task's steps in this bubble";
  EXPECT_EQ(r.chunks_run, 0u);
  EXPECT_EQ(r.task_samples, r.task_steps);
  EXPECT_GE(r.end_wait_us, 0);
  EXPECT_LT(r.end_wait_us, 60e6);
  PFRT_ASSERT_OK(pfrt_session_iteration_end(s.get())); // no bubble open
  const char *json = pfrt_session_report_json(s.get());
  ASSERT_NE(json, nullptr);
  EXPECT_NE(std::string(json).find("\"name\": \"flaky\""), std::string::npos) << json;
  EXPECT_NE(std::string(json).find("\"failed\": true"), std::string::npos) << json;
}

// The real clock, a step that busy-waits 2 ms: at most the steps the rule allows (load only makes
// steps longer), each measured at >= 2 ms.
TEST(SessionTaskTest, BusyWaitingStepOnTheRealClock) {
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  constexpr double kStepUs = 2000, kBubbleUs = 30000;
  struct Busy {
    uint64_t steps = 0;
  } busy;
  pfrt_session_task_desc d{};
  d.name = "busy";
  d.step = [](void *user, uint64_t *out) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(2000);
    while (std::chrono::steady_clock::now() < until) {
    }
    ++static_cast<Busy *>(user)->steps;
    *out = 1;
    return PFRT_OK;
  };
  d.user_data = &busy;
  d.step_us = kStepUs;
  uint32_t id = 0;
  PFRT_ASSERT_OK(pfrt_session_task_add(s.get(), &d, &id));
  pfrt_session_bubble_result r = unplanned(s.get(), kBubbleUs);
  // Each step takes >= 2000 us, so every prediction is >= 2400 us: starts at >= k x 2000.
  EXPECT_LE(r.task_steps, expectedSteps(kBubbleUs, kStepUs, kStepUs)); // 14
  EXPECT_GE(r.task_steps, 1u);
  EXPECT_EQ(busy.steps, r.task_steps);
  pfrt_session_task_stats st = statsOf(s.get(), id);
  EXPECT_GE(st.measured_us_p50, kStepUs);
  EXPECT_GE(st.predicted_us, 1.2 * st.measured_us_p50);
}

// host_end_at_once: bubble_end and iteration_end return while the worker still runs the bubble's
// work (here a step held until the test lets it go, at most 10 s); the numbers come with the next
// call that waits for the worker. Without the option bubble_end waits for the step: the test
// then sees the step over when the end returns (and takes the 10 s).
TEST(SessionTaskTest, EndAtOnceReturnsWhileTheStepRuns) {
  ProgramPtr p = noFillPlan();
  pfrt_session_options o = options();
  o.host_end_at_once = 1;
  SessionPtr s = sessionOk(p.get(), 0, o);
  struct Held {
    std::mutex m;
    std::condition_variable cv;
    bool released = false;
    std::atomic<bool> started{false}, returned{false};
  } held;
  pfrt_session_task_desc d{};
  d.name = "held";
  d.step = [](void *user, uint64_t *out) {
    Held &h = *static_cast<Held *>(user);
    h.started = true;
    std::unique_lock<std::mutex> lock(h.m);
    h.cv.wait_for(lock, std::chrono::seconds(10), [&] { return h.released; });
    h.returned = true;
    *out = 3;
    return PFRT_OK;
  };
  d.user_data = &held;
  d.step_us = 100;
  d.max_steps = 1;
  PFRT_ASSERT_OK(pfrt_session_task_add(s.get(), &d, nullptr));
  pfrt_session_bubble first{};
  PFRT_ASSERT_OK(pfrt_session_bubble_get(s.get(), 0, &first));
  const uint32_t bubble = first.bubble_id;
  PFRT_ASSERT_OK(pfrt_session_bubble_begin(s.get(), bubble, nullptr, 1e6));
  for (int k = 0; k < 10000 && !held.started; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(held.started) << "the worker did not start the step";
  pfrt_session_bubble_result r{};
  r.task_steps = 99;
  const pfrt_status ended = pfrt_session_bubble_end(s.get(), bubble, &r);
  const pfrt_status iterated = pfrt_session_iteration_end(s.get());
  const bool returnedBeforeEnd = held.returned;
  {
    std::lock_guard<std::mutex> lock(held.m);
    held.released = true;
  }
  held.cv.notify_all();
  PFRT_ASSERT_OK(ended);
  PFRT_ASSERT_OK(iterated);
  EXPECT_FALSE(returnedBeforeEnd) << "bubble_end waited for the step";
  EXPECT_EQ(r.task_steps, 0u) << "the result is not known at the end";
  pfrt_session_stats st{};
  PFRT_ASSERT_OK(pfrt_session_get_stats(s.get(), &st)); // waits for the worker
  EXPECT_TRUE(held.returned);
  EXPECT_EQ(st.task_steps, 1u);
  EXPECT_EQ(st.task_samples, 3u);
  EXPECT_EQ(st.iterations, 1u);
}

TEST(SessionTaskErrorTest, BadTaskDescriptions) {
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  FakeTask t;
  pfrt_session_task_desc d{};
  d.name = "t";
  d.step = fakeStep;
  d.user_data = &t;
  d.step_us = 100;
  uint32_t id = 0;
  expectError(pfrt_session_task_add(s.get(), nullptr, &id), PFRT_ERROR_INVALID_ARGUMENT,
              "desc is NULL");
  expectError(pfrt_session_task_add(nullptr, &d, &id), PFRT_ERROR_INVALID_ARGUMENT,
              "session is NULL");
  pfrt_session_task_desc bad = d;
  bad.step = nullptr;
  expectError(pfrt_session_task_add(s.get(), &bad, &id), PFRT_ERROR_INVALID_ARGUMENT,
              "pfrt_session_task_add('t'): step is NULL");
  for (double us : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity(), 1e300}) {
    bad = d;
    bad.step_us = us;
    expectError(pfrt_session_task_add(s.get(), &bad, &id), PFRT_ERROR_INVALID_ARGUMENT,
                "step_us must be > 0 and at most 1e9 (1000 s; the estimated real us of one "
                "step), got ");
  }
  bad = d;
  bad.step_us = 0;
  expectError(pfrt_session_task_add(s.get(), &bad, &id), PFRT_ERROR_INVALID_ARGUMENT,
              "one step), got 0");
  bad = d;
  bad.name = nullptr;
  expectError(pfrt_session_task_add(s.get(), &bad, &id), PFRT_ERROR_INVALID_ARGUMENT,
              "needs a name");
  bad.name = "";
  expectError(pfrt_session_task_add(s.get(), &bad, &id), PFRT_ERROR_INVALID_ARGUMENT,
              "needs a name");
  PFRT_ASSERT_OK(pfrt_session_task_add(s.get(), &d, &id));
  expectError(pfrt_session_task_add(s.get(), &d, &id), PFRT_ERROR_INVALID_ARGUMENT,
              "a task of that name exists already");
  uint32_t count = 0;
  PFRT_ASSERT_OK(pfrt_session_task_count(s.get(), &count));
  EXPECT_EQ(count, 1u); // the refused ones were not added
}

// pfrt_session_fill_stream: the host has no fill stream (NULL, GPU -1); NULL for the result and
// NULL for the session are errors. (CUDA sessions: CudaBackendTest.SessionTaskStepsAreTimedWith
// TheirGpuWork.)
TEST(SessionTaskErrorTest, FillStreamOnTheHostIsNone) {
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  void *stream = &stream;
  int gpu = 7;
  PFRT_ASSERT_OK(pfrt_session_fill_stream(s.get(), &stream, &gpu));
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(gpu, -1);
  stream = &stream;
  PFRT_ASSERT_OK(pfrt_session_fill_stream(s.get(), &stream, nullptr)); // the GPU is optional
  EXPECT_EQ(stream, nullptr);
  expectError(pfrt_session_fill_stream(s.get(), nullptr, &gpu), PFRT_ERROR_INVALID_ARGUMENT,
              "pfrt_session_fill_stream: out_stream is NULL");
  expectError(pfrt_session_fill_stream(nullptr, &stream, &gpu), PFRT_ERROR_INVALID_ARGUMENT,
              "session is NULL");
}

TEST(SessionTaskErrorTest, AddingATaskInsideABubble) {
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  FakeTask t;
  pfrt_session_task_desc d{};
  d.name = "late";
  d.step = fakeStep;
  d.user_data = &t;
  d.step_us = 100;
  PFRT_ASSERT_OK(pfrt_session_unplanned_begin(s.get(), 100, nullptr));
  expectError(pfrt_session_task_add(s.get(), &d, nullptr), PFRT_ERROR_INVALID_ARGUMENT,
              "pfrt_session_task_add inside a bubble");
  PFRT_ASSERT_OK(pfrt_session_bubble_end(s.get(), PFRT_SESSION_UNPLANNED, nullptr));
  PFRT_ASSERT_OK(pfrt_session_task_add(s.get(), &d, nullptr));
}

TEST(SessionTaskErrorTest, UnknownTaskAndReadsInsideABubble) {
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  pfrt_session_task_stats st{};
  expectError(pfrt_session_task_get(s.get(), 0, &st), PFRT_ERROR_INVALID_ARGUMENT,
              "task 0 does not exist (the session has 0 tasks)");
  expectError(pfrt_session_task_state_set(s.get(), 3, "x", 1), PFRT_ERROR_INVALID_ARGUMENT,
              "task 3 does not exist");
  const void *data = nullptr;
  size_t size = 0;
  expectError(pfrt_session_task_state_get(s.get(), 0, &data, &size), PFRT_ERROR_INVALID_ARGUMENT,
              "task 0 does not exist");
  FakeTask t;
  const uint32_t id = addOk(s.get(), "t", t, 100);
  expectError(pfrt_session_task_get(s.get(), id, nullptr), PFRT_ERROR_INVALID_ARGUMENT,
              "out_stats is NULL");
  expectError(pfrt_session_task_state_set(s.get(), id, nullptr, 4), PFRT_ERROR_INVALID_ARGUMENT,
              "data is NULL");
  // A size no checkpoint holds is refused before a byte is read (it was an internal error from
  // std::string, "basic_string::_M_replace").
  expectError(pfrt_session_task_state_set(s.get(), id, "x", size_t(1) << 62),
              PFRT_ERROR_INVALID_ARGUMENT,
              "4611686018427387904 bytes of state; a task's state is at most 268435456 bytes");
  PFRT_ASSERT_OK(pfrt_session_unplanned_begin(s.get(), 100, nullptr));
  expectError(pfrt_session_task_get(s.get(), id, &st), PFRT_ERROR_INVALID_ARGUMENT,
              "pfrt_session_task_get inside a bubble");
  PFRT_ASSERT_OK(pfrt_session_bubble_end(s.get(), PFRT_SESSION_UNPLANNED, nullptr));
}

// A step that calls back into its own session (on the session's worker thread) once: bubble_end,
// bubble_wait or destroy, each of which waits for the worker, so they would wait for the step
// that calls them (a hang, or for destroy's join an abort); iteration_end or get_stats, which on
// a CUDA session (its worker lags the framework, so no bubble is open as far as the step can see)
// changed the loop position or waited for the worker before being refused. It records what the
// call returned.
struct ReentrantTask {
  enum Call { kEnd, kWait, kDestroy, kIterationEnd, kStats, kBegin, kUnplanned } call = kEnd;
  pfrt_session *session = nullptr;
  std::atomic<uint64_t> calls{0};
  pfrt_status status = PFRT_OK;
  std::string message;
};

pfrt_status reentrantStep(void *user, uint64_t *outSamples) {
  ReentrantTask &t = *static_cast<ReentrantTask *>(user);
  if (t.calls++ == 0) {
    switch (t.call) {
    case ReentrantTask::kEnd:
      t.status = pfrt_session_bubble_end(t.session, PFRT_SESSION_UNPLANNED, nullptr);
      break;
    case ReentrantTask::kWait:
      t.status = pfrt_session_bubble_wait(t.session);
      break;
    case ReentrantTask::kDestroy:
      pfrt_session_destroy(t.session);
      break;
    case ReentrantTask::kIterationEnd:
      t.status = pfrt_session_iteration_end(t.session);
      break;
    case ReentrantTask::kStats: {
      pfrt_session_stats st{};
      t.status = pfrt_session_get_stats(t.session, &st);
      break;
    }
    case ReentrantTask::kBegin:
      t.status = pfrt_session_bubble_begin(t.session, 0, nullptr, 0);
      break;
    case ReentrantTask::kUnplanned:
      t.status = pfrt_session_unplanned_begin(t.session, 1000, nullptr);
      break;
    }
    t.message = pfrt_last_error();
  }
  advanceVirtualClock(100);
  *outSamples = 1;
  return PFRT_OK;
}

uint32_t addReentrant(pfrt_session *s, ReentrantTask &t) {
  t.session = s;
  pfrt_session_task_desc d{};
  d.name = "reentrant";
  d.step = reentrantStep;
  d.user_data = &t;
  d.step_us = 100;
  uint32_t id = 99;
  EXPECT_EQ(pfrt_session_task_add(s, &d, &id), PFRT_OK) << pfrt_last_error();
  return id;
}

// bubble_end and bubble_wait from a step refuse (they would wait for the step itself); the step
// goes on, and the framework's own calls end the bubble as usual. Calls refused inside a bubble
// are refused as calls from the worker first, before they read or change the loop's position
// (which the framework's thread owns).
TEST(SessionTaskErrorTest, EndAndWaitFromAStepAreRefused) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  const std::pair<ReentrantTask::Call, const char *> calls[] = {
      {ReentrantTask::kEnd, "pfrt_session_bubble_end"},
      {ReentrantTask::kWait, "pfrt_session_bubble_wait"},
      {ReentrantTask::kIterationEnd, "pfrt_session_iteration_end"},
      {ReentrantTask::kStats, "pfrt_session_get_stats"},
      {ReentrantTask::kBegin, "pfrt_session_bubble_begin(0)"},
      {ReentrantTask::kUnplanned, "pfrt_session_unplanned_begin"}};
  for (const auto &[call, callName] : calls) {
    SCOPED_TRACE(callName);
    SessionPtr s = sessionOk(p.get(), 0, options());
    ReentrantTask t;
    t.call = call;
    const uint32_t id = addReentrant(s.get(), t);
    pfrt_session_bubble_result r = unplanned(s.get(), 1000);
    EXPECT_EQ(t.status, PFRT_ERROR_INVALID_ARGUMENT);
    const std::string name = callName;
    EXPECT_NE(t.message.find(name + " called from a fill task's step on the session's worker "
                                    "thread"),
              std::string::npos)
        << t.message;
    // 1000 us, steps of 100 us predicted at 120: 9 steps, the refused call's among them.
    EXPECT_EQ(r.task_steps, 9u);
    EXPECT_EQ(statsOf(s.get(), id).failed, 0);
  }
}

// The same with host_end_at_once, where bubble_end returns while a step runs: a step that called
// begin after the framework's end (no bubble open) got the argument checks ("bubble 0 ... is out
// of order") and read the loop's state without a lock, instead of this refusal. Real clock: the
// step waits until the test has ended the bubble.
struct AfterTheEnd {
  ReentrantTask::Call call = ReentrantTask::kBegin;
  pfrt_session *session = nullptr;
  std::atomic<bool> started{false}, ended{false};
  pfrt_status status = PFRT_OK;
  std::string message;
};

TEST(SessionTaskErrorTest, CallsFromAStepAfterTheEndAreRefusedWithEndAtOnce) {
  ProgramPtr p = noFillPlan();
  pfrt_session_options o = options();
  o.host_end_at_once = 1;
  const std::pair<ReentrantTask::Call, const char *> calls[] = {
      {ReentrantTask::kBegin, "pfrt_session_bubble_begin(0)"},
      {ReentrantTask::kUnplanned, "pfrt_session_unplanned_begin"},
      {ReentrantTask::kIterationEnd, "pfrt_session_iteration_end"}};
  for (const auto &[call, callName] : calls) {
    SCOPED_TRACE(callName);
    SessionPtr s = sessionOk(p.get(), 0, o);
    AfterTheEnd t;
    t.call = call;
    t.session = s.get();
    pfrt_session_task_desc d{};
    d.name = "after-the-end";
    d.user_data = &t;
    d.step_us = 100;
    d.max_steps = 1;
    d.step = [](void *user, uint64_t *out) {
      AfterTheEnd &a = *static_cast<AfterTheEnd *>(user);
      a.started = true;
      for (int k = 0; k < 10000 && !a.ended; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      a.status = a.call == ReentrantTask::kBegin ? pfrt_session_bubble_begin(a.session, 0, nullptr, 0)
                 : a.call == ReentrantTask::kUnplanned
                     ? pfrt_session_unplanned_begin(a.session, 1000, nullptr)
                     : pfrt_session_iteration_end(a.session);
      a.message = pfrt_last_error();
      *out = 1;
      return PFRT_OK;
    };
    PFRT_ASSERT_OK(pfrt_session_task_add(s.get(), &d, nullptr));
    PFRT_ASSERT_OK(pfrt_session_unplanned_begin(s.get(), 1e6, nullptr));
    for (int k = 0; k < 10000 && !t.started; ++k)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(t.started);
    PFRT_ASSERT_OK(pfrt_session_bubble_end(s.get(), PFRT_SESSION_UNPLANNED, nullptr));
    t.ended = true;
    pfrt_session_stats st{};
    PFRT_ASSERT_OK(pfrt_session_get_stats(s.get(), &st)); // waits for the step
    EXPECT_EQ(t.status, PFRT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(t.message.find(std::string(callName) +
                             " called from a fill task's step on the session's worker thread"),
              std::string::npos)
        << t.message;
    EXPECT_EQ(st.task_steps, 1u);
  }
}

// destroy from a step cannot join the worker it runs on: refused, the session stays live, and the
// step's task fails when the step returns (the next bubble_wait / bubble_end says why).
TEST(SessionTaskErrorTest, DestroyFromAStepIsRefused) {
  VirtualClock clock;
  ProgramPtr p = noFillPlan();
  SessionPtr s = sessionOk(p.get(), 0, options());
  ReentrantTask t;
  t.call = ReentrantTask::kDestroy;
  const uint32_t id = addReentrant(s.get(), t);
  PFRT_ASSERT_OK(pfrt_session_unplanned_begin(s.get(), 1000, nullptr));
  expectError(pfrt_session_bubble_wait(s.get()), PFRT_ERROR_INVALID_ARGUMENT,
              "fill task 'reentrant' (task 0) failed at step 0: its step called "
              "pfrt_session_destroy on its own session, which was refused");
  EXPECT_NE(t.message.find("pfrt_session_destroy called from a fill task's step on the session's "
                           "worker thread: refused, the session stays live"),
            std::string::npos)
      << t.message;
  PFRT_ASSERT_OK(pfrt_session_bubble_end(s.get(), PFRT_SESSION_UNPLANNED, nullptr));
  EXPECT_EQ(t.calls, 1u); // the task is disabled
  const pfrt_session_task_stats st = statsOf(s.get(), id);
  EXPECT_EQ(st.failed, 1);
  EXPECT_EQ(st.error_status, PFRT_ERROR_INVALID_ARGUMENT);
  // Still live: the framework's own calls go on, and its destroy (SessionPtr) frees it.
  PFRT_ASSERT_OK(pfrt_session_iteration_end(s.get()));
  EXPECT_EQ(unplanned(s.get(), 1000).task_steps, 0u);
}

} // namespace
} // namespace test
} // namespace pfrt
