// Fill bounded to its bubble: a chunk starts only if its predicted time fits what is left of the
// bubble, else it is deferred in order to a later bubble of its job. Costs are deliberately
// mis-predicted (the plan says 200 us, the chunk lasts 2000 us); the modelled time model makes the
// GEMM_CHAIN chunk last exactly its planned per-sample time, so the schedule is deterministic.
#include "runtime/CheckpointFile.h"
#include "runtime/HostKernels.h"
#include "runtime/ProgramIO.h"
#include "runtime/tests/TestUtil.h"

#include "proto/stream_program.pb.h"

#include <chrono>
#include <fstream>
#include <thread>

namespace pfrt {
namespace test {
namespace {

constexpr uint64_t kSamples = kMisPredictedSamples;
constexpr double kChunkRealUs = kMisPredictedChunkUs;

ProgramPtr misPredicted() { return misPredictedProgram(); }

pfrt_options bounded(uint32_t iterations) {
  pfrt_options o = hostOptions(iterations);
  o.fill_policy = PFRT_FILL_BOUNDED;
  return o;
}

// Whole chunks: these tests' one-pass inference chunks are deferred (or passed over) whole, as
// under PFRT_FILL_BOUNDED before it ran the first samples of such a chunk that fit
// (ChunkSplitTest.AnInferenceChunkWithNoHeadThatFitsRunsItsFirstSamples); their arithmetic is
// that of whole chunks.
pfrt_options boundedWhole(uint32_t iterations) {
  pfrt_options o = hostOptions(iterations);
  o.fill_policy = PFRT_FILL_BOUNDED_WHOLE;
  return o;
}

// The reference: every chunk runs where planned (unbounded), whatever it overruns.
double referenceChecksum() {
  ProgramPtr p = misPredicted();
  ReportPtr r = runOk(p.get(), hostOptions(7));
  EXPECT_EQ(r->data.jobs[0].samplesCompleted, kSamples);
  return r->data.jobs[0].checksum;
}

TEST(BubbleBoundTest, MisPredictedChunksAreDeferredNotLost) {
  ProgramPtr p = misPredicted();
  ReportPtr r = runOk(p.get(), boundedWhole(7));
  ASSERT_TRUE(r);
  const RunResult::Job &j = r->data.jobs[0];
  if (getenv("PFRT_DEBUG"))
    for (const auto &c : r->data.chunkRuns)
      fprintf(stderr, "it %lld bubble %u pred %.0f start %.0f end %.0f deferred %d\n",
              (long long)c.iteration, c.bubbleId, c.predictedUs, c.start, c.end, c.deferred);
  // The small bubble's chunk never fits once its real cost is known (and the first one did not
  // even start there: the first measurement came from the big bubble), so each of the 6 is
  // deferred to the next iteration's big bubble; all 48 samples complete, none twice.
  EXPECT_EQ(j.chunksDeferred, 6u);
  EXPECT_EQ(j.chunksRun, 12u);
  EXPECT_EQ(j.chunksPending, 0u);
  EXPECT_EQ(j.samplesPending, 0u);
  EXPECT_EQ(j.samplesCompleted, kSamples);
  EXPECT_EQ(r->data.overrunCount, 0u);
  EXPECT_NEAR(j.checksum, referenceChecksum(), 1e-6 * std::abs(j.checksum));
}

// Without the bound the same plan overruns the small bubble every iteration (so the test above
// can fail): the bound is what keeps fill inside its bubbles.
TEST(BubbleBoundTest, UnboundedFillOverrunsTheSmallBubble) {
  ProgramPtr p = misPredicted();
  ReportPtr r = runOk(p.get(), hostOptions(7));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data.jobs[0].chunksDeferred, 0u);
  EXPECT_GE(r->data.overrunCount, 6u);
  EXPECT_GE(r->data.overrunUs, 6 * 0.8 * (kChunkRealUs - 1000));
}

// After every prefix of iterations: completed + pending (begun or queued) == what the plan began.
TEST(BubbleBoundTest, SamplesAreConservedAcrossIterations) {
  ProgramPtr p = misPredicted();
  for (uint32_t k = 1; k <= 6; ++k) {
    ReportPtr r = runOk(p.get(), bounded(k));
    ASSERT_TRUE(r);
    const RunResult::Job &j = r->data.jobs[0];
    EXPECT_EQ(j.samplesCompleted + j.samplesPending, 8u * k) << k << " iterations";
    EXPECT_GE(j.chunksPending, 1u) << k << " iterations"; // at least the last small-bubble chunk
  }
}

// The deferred chunk is in the checkpoint and runs after the resume: same samples, same checksum.
TEST(BubbleBoundTest, DeferredWorkSurvivesCheckpointAndResume) {
  ProgramPtr p = misPredicted();
  const std::string path = tempPath("bound.ckpt");
  pfrt_options o = boundedWhole(3);
  o.checkpoint_path = path.c_str();
  ReportPtr first = runOk(p.get(), o);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->data.jobs[0].samplesCompleted, 20u);
  EXPECT_EQ(first->data.jobs[0].samplesPending, 4u);
  {
    pipefill::rt::FillCheckpoint cp;
    std::string problem;
    ASSERT_EQ(readCheckpointFile(path, programFingerprint(p->program), cp, problem),
              CheckpointStatus::Ok)
        << problem;
    ASSERT_EQ(cp.jobs_size(), 1);
    ASSERT_EQ(cp.jobs(0).devices_size(), 1);
    ASSERT_EQ(cp.jobs(0).devices(0).deferred_size(), 1);
    EXPECT_EQ(cp.jobs(0).devices(0).deferred(0).sample_begin(), 20u);
    EXPECT_EQ(cp.jobs(0).samples_done(), 20u);
  }
  o.iterations = 7;
  ReportPtr second = runOk(p.get(), o);
  ASSERT_TRUE(second);
  if (getenv("PFRT_DEBUG"))
    for (const auto &c : second->data.chunkRuns)
      fprintf(stderr, "it %lld bubble %u pred %.0f start %.0f end %.0f deferred %d\n",
              (long long)c.iteration, c.bubbleId, c.predictedUs, c.start, c.end, c.deferred);
  const RunResult::Job &j = second->data.jobs[0];
  EXPECT_TRUE(second->data.resumed);
  EXPECT_EQ(j.samplesCompleted, kSamples);
  EXPECT_EQ(j.samplesThisRun, kSamples - 20);
  EXPECT_EQ(j.samplesPending, 0u);
  EXPECT_NEAR(j.checksum, referenceChecksum(), 1e-6 * std::abs(j.checksum));
  std::remove(path.c_str());
}

// One job of GEMM-chain work on device 0 (modelled: a chunk lasts 1 ms per sample): a 30 ms
// chunk planned in bubble 0, planned at 40 ms, then bubble 1 (10 ms) with two 2 ms chunks. Bubble
// 0 ends when device 1's 14 ms forward returns, so it really lasts about 14 ms: the big chunk fits
// its plan and no bubble of the job in reality.
// device 0 main: F(1) send | record e0, bubble 0 (40 planned) | recv B(1) | record e1, bubble 1 (10)
// device 1 main: recv F(14) send
// device 0 fill: wait(e0) fill(bubble 0, batch 30) wait(e1) fill(bubble 1, 2) fill(bubble 1, 2)
ProgramPtr bigChunkInAShortBubble() {
  std::string error;
  const samples::OneDeviceProgram p = samples::chainJobProgram("park", 1, &error);
  EXPECT_NE(p.program, nullptr) << error;
  ProgramPtr owner(p.program);
  if (!p.program)
    return owner;
  uint32_t d1 = 0, m1 = 0, big = 0, small = 0;
  EXPECT_EQ(PFRT_OK, pfrt_program_add_device(p.program, nullptr, &d1));
  EXPECT_EQ(PFRT_OK, pfrt_program_create_stream(p.program, d1, PFRT_STREAM_MAIN,
                                                PFRT_PRIORITY_DEFAULT, "main", &m1));
  EXPECT_EQ(PFRT_OK, pfrt_program_create_event(p.program, p.device, "big", &big));
  EXPECT_EQ(PFRT_OK, pfrt_program_create_event(p.program, p.device, "small", &small));
  const auto chunk = samples::chainChunk;
  const uint32_t d0 = p.device, m0 = p.main;
  pfrt_bubble_desc b{};
  EXPECT_EQ(PFRT_OK,
            pfrt_program_enqueue_compute(p.program, d0, m0, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 0));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_send(p.program, d0, m0, d1, 1024, 0, 100, 1000));
  b.bubble_id = 0;
  b.planned_start_us = 1000;
  b.planned_duration_us = 40000; // main does not idle it: the recv below ends it
  const pfrt_fill_chunk_desc c0 = chunk(0, 30, 0);
  EXPECT_EQ(samples::enqueueFilledBubble(p, big, b, &c0), PFRT_OK) << pfrt_last_error();
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_recv(p.program, d0, m0, d1, 1024, 1, 100, 41000));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_compute(p.program, d0, m0, PFRT_COMPUTE_BACKWARD, 0, 0,
                                                  1000, 41100));
  b.bubble_id = 1;
  b.planned_start_us = 42100;
  b.planned_duration_us = 10000;
  b.emulate_idle = 1;
  const pfrt_fill_chunk_desc c1 = chunk(1, 2, 30);
  EXPECT_EQ(samples::enqueueFilledBubble(p, small, b, &c1), PFRT_OK) << pfrt_last_error();
  pfrt_fill_chunk_desc c2 = chunk(1, 2, 32);
  c2.job = p.job;
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_fill(p.program, d0, p.fill, &c2)) << pfrt_last_error();
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_recv(p.program, d1, m1, d0, 1024, 0, 100, 1000));
  EXPECT_EQ(PFRT_OK,
            pfrt_program_enqueue_compute(p.program, d1, m1, PFRT_COMPUTE_FORWARD, 0, 0, 14000, 1100));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_send(p.program, d1, m1, d0, 1024, 1, 100, 15100));
  EXPECT_EQ(PFRT_OK, pfrt_program_set_planned_iteration_us(p.program, 52100));
  return owner;
}

// The 30 ms chunk fits the plan's 40 ms bubble 0 (it may run, past the bubble's real end, in the
// first iteration, before the bubble was measured), then no bubble of its job: the 14 ms bubble 0,
// the 10 ms bubble 1. It waits, but not in front of the small chunks: once a whole iteration's
// bubbles have shown that none holds it, they run in their bubbles. In plan order the big chunk
// first in line held the job out of every bubble from the second iteration on.
TEST(BubbleBoundTest, AChunkNoBubbleCanHoldDoesNotHoldUpTheRest) {
  ProgramPtr p = bigChunkInAShortBubble();
  ASSERT_TRUE(p);
  constexpr uint32_t kIterations = 6;
  ReportPtr r = runOk(p.get(), boundedWhole(kIterations));
  ASSERT_TRUE(r);
  const RunResult::Job &j = r->data.jobs[0];
  uint32_t lateSmall = 0, lateBig = 0;
  for (const RunResult::ChunkRun &c : r->data.chunkRuns) {
    if (getenv("PFRT_DEBUG"))
      fprintf(stderr, "it %lld bubble %u batch %u pred %.0f start %.0f end %.0f deferred %d\n",
              (long long)c.iteration, c.bubbleId, c.batch, c.predictedUs, c.start, c.end,
              c.deferred);
    if (c.iteration >= 2)
      ++(c.batch == 30 ? lateBig : lateSmall);
  }
  if (getenv("PFRT_DEBUG"))
    fprintf(stderr, "run %llu deferred %llu pending %llu completed %llu held %llu\n",
            (unsigned long long)j.chunksRun, (unsigned long long)j.chunksDeferred,
            (unsigned long long)j.chunksPending, (unsigned long long)j.samplesCompleted,
            (unsigned long long)j.samplesHeld);
  EXPECT_GE(lateSmall, 2u) << "the small chunks were held up behind one that fits nowhere";
  EXPECT_EQ(lateBig, 0u) << "a 30 ms chunk ran in a bubble of 14 ms or less";
  EXPECT_GE(j.chunksPending, 1u); // the big chunks wait, in the report and the checkpoint
  // None lost, none twice: done, pending (queued) or held (backpressure).
  EXPECT_EQ(j.samplesCompleted + j.samplesPending + j.samplesHeld,
            j.samplesPlanned + j.samplesInFlightPlanned);
  EXPECT_EQ(j.samplesPlanned, 34u * kIterations);
}

// The passed-over chunks keep their place: after 4 iterations the checkpoint holds the big chunks
// alone (the small ones behind them ran; in plan order they would wait there too), in plan
// order, and a resumed run goes on from it with nothing lost or run twice (its predictor, bubble
// lengths and rooms start again from the plan, as every resumed run's do).
TEST(BubbleBoundTest, AChunkNoBubbleCanHoldKeepsItsPlaceInTheCheckpoint) {
  ProgramPtr p = bigChunkInAShortBubble();
  ASSERT_TRUE(p);
  const std::string path = tempPath("parked.ckpt");
  std::remove(path.c_str());
  pfrt_options o = boundedWhole(4);
  o.checkpoint_path = path.c_str();
  ReportPtr first = runOk(p.get(), o);
  ASSERT_TRUE(first);
  {
    pipefill::rt::FillCheckpoint cp;
    std::string problem;
    ASSERT_EQ(readCheckpointFile(path, programFingerprint(p->program), cp, problem),
              CheckpointStatus::Ok)
        << problem;
    ASSERT_EQ(cp.jobs_size(), 1);
    ASSERT_EQ(cp.jobs(0).devices_size(), 1);
    const auto &deferred = cp.jobs(0).devices(0).deferred();
    ASSERT_EQ(static_cast<uint64_t>(deferred.size()), first->data.jobs[0].chunksPending);
    ASSERT_GE(deferred.size(), 1);
    for (int k = 0; k < deferred.size(); ++k) {
      EXPECT_EQ(deferred.Get(k).batch(), 30u) << k << ": a small chunk waits behind a big one";
      if (k > 0) {
        EXPECT_LT(deferred.Get(k - 1).sample_begin(), deferred.Get(k).sample_begin()) << k;
      }
    }
  }
  o.iterations = 7;
  ReportPtr second = runOk(p.get(), o);
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->data.resumed);
  const RunResult::Job &j = second->data.jobs[0];
  EXPECT_EQ(j.samplesCompleted, first->data.jobs[0].samplesCompleted + j.samplesThisRun);
  // The plan's 7 iterations from the start (samplesPlanned counts this run's 3 only).
  EXPECT_EQ(j.samplesCompleted + j.samplesPending + j.samplesHeld, 34u * 7);
  std::remove(path.c_str());
}

} // namespace
} // namespace test
} // namespace pfrt

namespace pfrt {
namespace test {
namespace {

// Host replay (--stage 0, measured time): the emulated stage stands for the same hardware as the
// real one, so its computes last their planned time x the real stage's measured/planned ratio.
// A 2-stage 1F1B with f = 2 ms, b = 4 ms: device 0 runs F0 F1 | bubble | B0 B1, device 1 (emulated)
// F0 B0 F1 B1. Main compute is made 3x slower than calibrated. Device 0's bubble is what device 1
// takes for F0 + B0 minus device 0's own F1: with peers at the plan, 6 - 6 = 0 ms (the real stage
// "falls behind" them and loses its bubble); with peers at the real stage's speed, 18 - 6 = 12 ms,
// the planned 4 ms stretched like everything else.
constexpr double kF = 2000, kB = 4000;

// The 2-stage 1F1B above. withFill: device 0 also has a fill stream whose chunk (one sample of a
// small encoder layer, planned at 5 ms: longer than the 4 ms bubble; it really takes well under
// 1 ms) waits for the bubble.
ProgramPtr slowTwoStages(bool withFill) {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_create("slow", &raw), PFRT_OK);
  ProgramPtr p(raw);
  uint32_t d0 = 0, d1 = 0, m0 = 0, m1 = 0;
  EXPECT_EQ(PFRT_OK, pfrt_program_add_device(p.get(), nullptr, &d0));
  EXPECT_EQ(PFRT_OK, pfrt_program_add_device(p.get(), nullptr, &d1));
  EXPECT_EQ(PFRT_OK, 
      pfrt_program_create_stream(p.get(), d0, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "m", &m0));
  EXPECT_EQ(PFRT_OK, 
      pfrt_program_create_stream(p.get(), d1, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "m", &m1));
  const double f = kF, b = kB;
  auto compute = [&](uint32_t d, uint32_t s, pfrt_compute_kind k, uint32_t mb, double at) {
    EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_compute(p.get(), d, s, k, mb, 0, k == PFRT_COMPUTE_FORWARD ? f : b, at));
  };
  // Device 0: F0 send F1 send | bubble | recv B0, B0, recv B1, B1.
  compute(d0, m0, PFRT_COMPUTE_FORWARD, 0, 0);
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_send(p.get(), d0, m0, d1, 1024, 0, 0, f));
  compute(d0, m0, PFRT_COMPUTE_FORWARD, 1, f);
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_send(p.get(), d0, m0, d1, 1024, 1, 0, 2 * f));
  pfrt_bubble_desc bubble{};
  bubble.planned_start_us = 2 * f;
  bubble.planned_duration_us = b;
  uint32_t ev = 0;
  if (withFill) {
    EXPECT_EQ(PFRT_OK, pfrt_program_create_event(p.get(), d0, "b", &ev));
    EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_record(p.get(), d0, m0, ev));
  }
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_bubble(p.get(), d0, m0, &bubble));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_recv(p.get(), d0, m0, d1, 1024, 2, 0, 2 * f));
  compute(d0, m0, PFRT_COMPUTE_BACKWARD, 0, 2 * f + b);
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_recv(p.get(), d0, m0, d1, 1024, 3, 0, 2 * f + 2 * b));
  compute(d0, m0, PFRT_COMPUTE_BACKWARD, 1, 2 * f + 2 * b + f);
  // Device 1: recv F0, F0, B0, send B0, recv F1, F1, B1, send B1.
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_recv(p.get(), d1, m1, d0, 1024, 0, 0, f));
  compute(d1, m1, PFRT_COMPUTE_FORWARD, 0, f);
  compute(d1, m1, PFRT_COMPUTE_BACKWARD, 0, 2 * f);
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_send(p.get(), d1, m1, d0, 1024, 2, 0, 2 * f + b));
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_recv(p.get(), d1, m1, d0, 1024, 1, 0, 2 * f + b));
  compute(d1, m1, PFRT_COMPUTE_FORWARD, 1, 2 * f + b);
  compute(d1, m1, PFRT_COMPUTE_BACKWARD, 1, 3 * f + b);
  EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_send(p.get(), d1, m1, d0, 1024, 3, 0, 3 * f + 2 * b));
  EXPECT_EQ(PFRT_OK, pfrt_program_set_planned_iteration_us(p.get(), 3 * f + 3 * b));
  if (withFill) {
    uint32_t f0 = 0, job = 0;
    EXPECT_EQ(PFRT_OK, pfrt_program_create_stream(p.get(), d0, PFRT_STREAM_FILL,
                                                  PFRT_PRIORITY_DEFAULT, "f", &f0));
    pfrt_fill_job_desc jd{};
    jd.name = "enc";
    jd.kind = PFRT_FILL_INFERENCE;
    jd.samples = 4;
    EXPECT_EQ(PFRT_OK, pfrt_program_add_fill_job(p.get(), &jd, &job));
    pfrt_fill_layer_desc ld = samples::smallEncoder();
    ld.planned_us_per_sample = 5000;
    EXPECT_EQ(PFRT_OK, pfrt_fill_job_add_layer(p.get(), job, &ld));
    EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_wait(p.get(), d0, f0, ev));
    pfrt_fill_chunk_desc c{};
    c.job = job;
    c.layer_end = 1;
    c.batch = 1;
    c.planned_us = 5000;
    EXPECT_EQ(PFRT_OK, pfrt_program_enqueue_fill(p.get(), d0, f0, &c));
  }
  return p;
}

// Host replay (--stage 0, measured time): the emulated stage stands for the same hardware as the
// real one (see above), so with main compute 3x slower than calibrated, the peers are too.
TEST(BubbleBoundTest, ReplayPeersFollowTheRealStagesMeasuredSpeed) {
  const double f = kF, b = kB;
  ProgramPtr p = slowTwoStages(false);
  ASSERT_TRUE(p);
  pfrt_options o = hostOptions(2);
  o.time_model = PFRT_TIME_MEASURED;
  o.enable_fill = 0;
  o.stage = 0;
  host::setWorkFactorForTesting(3);
  ReportPtr r = runOk(p.get(), o);
  host::setWorkFactorForTesting(1);
  ASSERT_TRUE(r);
  const auto &s0 = r->data.devices[0].streamOps[0], &s1 = r->data.devices[1].streamOps[0];
  ASSERT_EQ(s0.size(), 2u);
  ASSERT_EQ(s1.size(), 2u);
  const size_t computes0[] = {0, 2, 6, 8}, computes1[] = {1, 2, 5, 6};
  // The real stage's measured/planned ratios so far; the peer's computes use medians of them.
  double lo = 1e9, hi = 0;
  for (size_t k = 0; k < 2; ++k) {
    for (size_t i : computes0) {
      const double ratio = s0[k][i].duration() / (i < 4 ? f : b);
      lo = std::min(lo, ratio);
      hi = std::max(hi, ratio);
    }
    for (size_t i : computes1) {
      const double ratio = s1[k][i].duration() / (i == 1 || i == 5 ? f : b);
      EXPECT_GE(ratio, 1.5) << "iteration " << k << " op " << i << ": the peer kept the plan";
      if (k == 1) { // by then the real stage has run every kind
        EXPECT_LE(ratio, 1.02 * hi) << "op " << i;
      }
    }
    EXPECT_GE(lo, 1.5) << "main compute was not slowed";
    // Device 0's bubble: from the end of F1 to the start of B0.
    // It ends when the peer's B0 is there (transfers take no time here); with peers at the plan it
    // would be ~0 (the peer's F0 + B0 = 6 ms = the real F1), at the real stage's speed ~12 ms
    // (less when a loaded machine slows the real F1 more than the F0 the peer's speed came from).
    const double bubbleUs = s0[k][6].start - s0[k][2].end;
    EXPECT_GE(bubbleUs, s1[k][2].end - s0[k][2].end - 1) << "iteration " << k;
    EXPECT_GE(bubbleUs, 0.25 * b) << "iteration " << k;
    EXPECT_NEAR(r->data.devices[0].bubbles[0].measuredUs[k], bubbleUs, 1) << "iteration " << k;
  }
}

// The bound predicts a bubble's length from its past iterations (the smallest measured / planned
// of the last five), not from the plan alone. Here the bubble really lasts ~16 ms (the pipeline
// runs 4x slower than planned) against 4 ms planned; the chunk, planned at 5 ms, does not fit the
// plan's 4 ms, so in the first iteration it is deferred, and from the second (the bubble measured
// once) it runs. Predicted from the plan alone it would never run: 0 of 4 samples.
TEST(BubbleBoundTest, BubbleLengthIsLearnedFromPastIterations) {
  ProgramPtr p = slowTwoStages(true);
  ASSERT_TRUE(p);
  pfrt_options o = hostOptions(4);
  o.time_model = PFRT_TIME_MEASURED;
  o.fill_policy = PFRT_FILL_BOUNDED_WHOLE; // the chunk whole (see boundedWhole)
  o.stage = 0;
  host::setWorkFactorForTesting(4); // 4x: the bubble lasts ~16 ms, well past the chunk's 5
  ReportPtr r = runOk(p.get(), o);
  host::setWorkFactorForTesting(1);
  ASSERT_TRUE(r);
  const RunResult::Job &j = r->data.jobs[0];
  if (getenv("PFRT_DEBUG"))
    for (const auto &c : r->data.chunkRuns)
      fprintf(stderr, "it %lld pred %.0f start %.0f end %.0f deferred %d\n",
              (long long)c.iteration, c.predictedUs, c.start, c.end, c.deferred);
  const std::vector<double> &gaps = r->data.devices[0].bubbles[0].measuredUs;
  ASSERT_EQ(gaps.size(), 4u);
  EXPECT_GT(gaps[0], 1.5 * kB) << "the bubble must outlast the 5 ms chunk for this test";
  EXPECT_GE(j.chunksDeferred, 1u); // the first iteration: 5 ms of prediction > 4 ms of plan
  EXPECT_GE(j.samplesCompleted, 3u);
  EXPECT_EQ(j.samplesCompleted + j.samplesPending, 4u);
}

// A later stage's idle stretch between iterations is two bubbles: the tail bubble after its last
// backward and the next iteration's warm-up bubble before its first forward. Nothing runs on the
// device between their markers (both are passed before it waits for the next forward's input), so
// the boundary between them is where the plan puts it. A 2-stage GPipe with f = 2 ms, b = 4 ms,
// modelled time (deterministic): device 1 runs warm-up (2 ms) | F0 B0 | tail (4 ms, device 0's
// B0), and its tail bubble holds a 3 ms fill chunk. The tail must measure 4 ms and the warm-up
// 2 ms (not 0 and 6), and the chunk must run in its own bubble in every iteration (when the tail
// ended at the warm-up's marker, it never fit and was deferred, every iteration).
ProgramPtr tailThenWarmup(double chunkUs = 3000) { return tailThenWarmupProgram(chunkUs); }

TEST(BubbleBoundTest, ATailBubbleFollowedByTheNextWarmupKeepsItsPlannedShare) {
  ProgramPtr p = tailThenWarmup();
  ASSERT_TRUE(p);
  pfrt_options o = bounded(4);
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  const DeviceReport &d1 = r->data.devices[1];
  ASSERT_EQ(d1.bubbles.size(), 2u);
  const BubbleReport &warmup = d1.bubbles[0], &tail = d1.bubbles[1];
  ASSERT_EQ(tail.bubbleId, 1u);
  for (size_t k = 0; k + 1 < 4; ++k) {
    EXPECT_NEAR(tail.measuredUs[k], kB, 50) << "iteration " << k;
    EXPECT_NEAR(warmup.measuredUs[k + 1], kF, 50) << "iteration " << k + 1;
    // Together they are the whole idle stretch: from the tail's marker to the next forward.
    EXPECT_NEAR(tail.measuredUs[k] + warmup.measuredUs[k + 1],
                d1.mainOps()[k + 1][2].start - d1.mainOps()[k][6].start, 1)
        << "iteration " << k;
  }
  const RunResult::Job &j = r->data.jobs[0];
  EXPECT_EQ(j.chunksDeferred, 0u);
  EXPECT_EQ(j.samplesCompleted, 4u);
  ASSERT_EQ(r->data.chunkRuns.size(), 4u);
  for (const RunResult::ChunkRun &c : r->data.chunkRuns) {
    EXPECT_EQ(c.bubbleId, 1u);
    EXPECT_FALSE(c.deferred) << "iteration " << c.iteration;
  }
}

// An overrun is fill still running when main resumes compute. A tail chunk that runs on into the
// next warm-up bubble while main is still idle is not one: unbounded, a 5 ms chunk in the 4 ms
// tail of the 6 ms stretch overruns nothing; a 7 ms one overruns by 1 ms in each iteration that
// has a next one (the last tail's end is not known).
TEST(BubbleBoundTest, ATailChunkRunningIntoTheWarmupIsNoOverrun) {
  for (double chunkUs : {5000.0, 7000.0}) {
    ProgramPtr p = tailThenWarmup(chunkUs);
    ASSERT_TRUE(p);
    pfrt_options o = hostOptions(4);
    o.fill_policy = PFRT_FILL_UNBOUNDED;
    ReportPtr r = runOk(p.get(), o);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->data.jobs[0].samplesCompleted, 4u) << chunkUs;
    if (chunkUs < kB + kF) {
      EXPECT_EQ(r->data.overrunCount, 0u) << "a " << chunkUs << " us chunk in a 6 ms stretch";
    } else {
      EXPECT_EQ(r->data.overrunCount, 3u);
      EXPECT_NEAR(r->data.overrunUs, 3 * (chunkUs - kB - kF), 150);
    }
  }
}

} // namespace
} // namespace test
} // namespace pfrt
