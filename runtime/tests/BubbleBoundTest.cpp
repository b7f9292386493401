// Fill bounded to its bubble: a chunk starts only if its predicted time fits what is left of the
// bubble, else it is deferred in order to a later bubble of its job. Costs are deliberately
// mis-predicted (the plan says 200 us, the chunk lasts 2000 us); the modelled time model makes the
// GEMM_CHAIN chunk last exactly its planned per-sample time, so the schedule is deterministic.
#include "runtime/CheckpointFile.h"
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

// The reference: every chunk runs where planned (unbounded), whatever it overruns.
double referenceChecksum() {
  ProgramPtr p = misPredicted();
  ReportPtr r = runOk(p.get(), hostOptions(7));
  EXPECT_EQ(r->data.jobs[0].samplesCompleted, kSamples);
  return r->data.jobs[0].checksum;
}

TEST(BubbleBoundTest, MisPredictedChunksAreDeferredNotLost) {
  ProgramPtr p = misPredicted();
  ReportPtr r = runOk(p.get(), bounded(7));
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
  pfrt_options o = bounded(3);
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

} // namespace
} // namespace test
} // namespace pfrt

namespace pfrt {
namespace test {
namespace {

// Host replay (--stage 0, measured time): device 1 is emulated on the modelled clock and sends
// device 0 the data that ends its bubble at the bubble's planned end (12 ms into each 14 ms
// iteration). Device 0's forward is made 7 ms late by the framework's compute callback, so it
// reaches its 10 ms bubble at 9 ms and has 3 ms of it; the 4 ms chunk must wait for a later
// bubble instead of running 1 ms past the main job's resume. Without the modelled-clock cap the
// deadline was 9 + 10 = 19 ms and every chunk overran (3 overruns in 3 iterations).
void lateForward(void *, uint32_t device, pfrt_compute_kind kind, uint32_t, uint32_t,
                 double plannedUs, void *) {
  const double us = device == 0 && kind == PFRT_COMPUTE_FORWARD ? 9000 : plannedUs;
  std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(us)));
}

TEST(BubbleBoundTest, ReplayBubbleEndsAtItsPlannedEndWhenTheRealStageIsLate) {
  pfrt_program *raw = nullptr;
  PFRT_ASSERT_OK(pfrt_program_create("late", &raw));
  ProgramPtr p(raw);
  uint32_t d0 = 0, d1 = 0, m0 = 0, f0 = 0, m1 = 0, ev = 0, job = 0;
  PFRT_ASSERT_OK(pfrt_program_add_device(p.get(), nullptr, &d0));
  PFRT_ASSERT_OK(pfrt_program_add_device(p.get(), nullptr, &d1));
  PFRT_ASSERT_OK(
      pfrt_program_create_stream(p.get(), d0, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "m", &m0));
  PFRT_ASSERT_OK(
      pfrt_program_create_stream(p.get(), d0, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT, "f", &f0));
  PFRT_ASSERT_OK(
      pfrt_program_create_stream(p.get(), d1, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "m", &m1));
  PFRT_ASSERT_OK(pfrt_program_create_event(p.get(), d0, "b", &ev));
  pfrt_fill_job_desc jd{};
  jd.name = "chain";
  jd.kind = PFRT_FILL_INFERENCE;
  jd.samples = 3;
  PFRT_ASSERT_OK(pfrt_program_add_fill_job(p.get(), &jd, &job));
  pfrt_fill_layer_desc ld{};
  ld.kind = PFRT_LAYER_GEMM_CHAIN;
  ld.dim = 16;
  ld.planned_us_per_sample = 4000;
  PFRT_ASSERT_OK(pfrt_fill_job_add_layer(p.get(), job, &ld));
  // Device 0: F (2 ms planned) | bubble 10 ms | recv from device 1 | B (2 ms).
  PFRT_ASSERT_OK(
      pfrt_program_enqueue_compute(p.get(), d0, m0, PFRT_COMPUTE_FORWARD, 0, 0, 2000, 0));
  PFRT_ASSERT_OK(pfrt_program_enqueue_record(p.get(), d0, m0, ev));
  pfrt_bubble_desc b{};
  b.planned_start_us = 2000;
  b.planned_duration_us = 10000;
  PFRT_ASSERT_OK(pfrt_program_enqueue_bubble(p.get(), d0, m0, &b));
  PFRT_ASSERT_OK(pfrt_program_enqueue_recv(p.get(), d0, m0, d1, 1024, 1, 0, 12000));
  PFRT_ASSERT_OK(
      pfrt_program_enqueue_compute(p.get(), d0, m0, PFRT_COMPUTE_BACKWARD, 0, 0, 2000, 12000));
  PFRT_ASSERT_OK(pfrt_program_enqueue_wait(p.get(), d0, f0, ev));
  pfrt_fill_chunk_desc c{};
  c.job = job;
  c.layer_end = 1;
  c.batch = 1;
  c.planned_us = 4000;
  PFRT_ASSERT_OK(pfrt_program_enqueue_fill(p.get(), d0, f0, &c));
  // Device 1 (emulated): idles to 12 ms, sends (arrives at once), idles to 14 ms.
  pfrt_bubble_desc idle1{};
  idle1.bubble_id = 0;
  idle1.planned_duration_us = 12000;
  idle1.emulate_idle = 1;
  PFRT_ASSERT_OK(pfrt_program_enqueue_bubble(p.get(), d1, m1, &idle1));
  PFRT_ASSERT_OK(pfrt_program_enqueue_send(p.get(), d1, m1, d0, 1024, 1, 0, 12000));
  pfrt_bubble_desc idle2 = idle1;
  idle2.bubble_id = 1;
  idle2.planned_start_us = 12000;
  idle2.planned_duration_us = 2000;
  PFRT_ASSERT_OK(pfrt_program_enqueue_bubble(p.get(), d1, m1, &idle2));
  PFRT_ASSERT_OK(pfrt_program_set_planned_iteration_us(p.get(), 14000));

  pfrt_options o = hostOptions(3);
  o.time_model = PFRT_TIME_MEASURED;
  o.fill_policy = PFRT_FILL_BOUNDED;
  o.stage = 0;
  o.compute_fn = lateForward;
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  const RunResult::Job &j = r->data.jobs[0];
  EXPECT_EQ(r->data.overrunCount, 0u) << "a chunk ran past the bubble's planned end";
  EXPECT_EQ(j.chunksRun, 0u);
  EXPECT_EQ(j.samplesCompleted, 0u);
  EXPECT_EQ(j.chunksPending, 3u); // deferred every iteration, kept, never lost
}

} // namespace
} // namespace test
} // namespace pfrt
