// Fill bounded to its bubble: a chunk starts only if its predicted time fits what is left of the
// bubble, else it is deferred in order to a later bubble of its job. Costs are deliberately
// mis-predicted (the plan says 200 us, the chunk lasts 2000 us); the modelled time model makes the
// GEMM_CHAIN chunk last exactly its planned per-sample time, so the schedule is deterministic.
#include "runtime/CheckpointFile.h"
#include "runtime/ProgramIO.h"
#include "runtime/tests/TestUtil.h"

#include "proto/stream_program.pb.h"

#include <fstream>

namespace pfrt {
namespace test {
namespace {

constexpr uint64_t kSamples = 48;     // 6 iterations of 8 samples
constexpr double kChunkRealUs = 2000; // 4 samples x 500 us
constexpr double kChunkPlannedUs = 200;

// main: F(1 ms) record(e1) bubble 1 (idles 20 ms) F(1 ms) record(e0) bubble 0 (idles 1 ms) B(1 ms)
// fill: wait(e1) fill(bubble 1, samples [8i, 8i+4)) wait(e0) fill(bubble 0, samples [8i+4, 8i+8))
ProgramPtr misPredicted() {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_create("bound", &raw), PFRT_OK);
  ProgramPtr p(raw);
  uint32_t dev = 0, main = 0, fill = 0, e0 = 0, e1 = 0, job = 0;
  pfrt_device_desc dd{};
  dd.planned_iteration_us = 24000;
  EXPECT_EQ(pfrt_add_device(p.get(), &dd, &dev), PFRT_OK);
  pfrt_create_stream(p.get(), dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "main", &main);
  pfrt_create_stream(p.get(), dev, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT, "fill", &fill);
  pfrt_create_event(p.get(), dev, "big", &e1);
  pfrt_create_event(p.get(), dev, "small", &e0);
  pfrt_fill_job_desc jd{};
  jd.name = "chain";
  jd.kind = PFRT_FILL_INFERENCE;
  jd.samples = kSamples;
  EXPECT_EQ(pfrt_add_fill_job(p.get(), &jd, &job), PFRT_OK);
  pfrt_fill_layer_desc ld{};
  ld.kind = PFRT_LAYER_GEMM_CHAIN;
  ld.dim = 16;
  ld.planned_us_per_sample = kChunkRealUs / 4;
  EXPECT_EQ(pfrt_fill_job_add_layer(p.get(), job, &ld), PFRT_OK);
  auto bubble = [&](uint32_t id, uint32_t ev, double us) {
    pfrt_enqueue_record(p.get(), dev, main, ev);
    pfrt_bubble_desc b{};
    b.bubble_id = id;
    b.planned_duration_us = us;
    b.emulate_idle = 1;
    EXPECT_EQ(pfrt_enqueue_bubble(p.get(), dev, main, &b), PFRT_OK);
  };
  pfrt_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 0);
  bubble(1, e1, 20000);
  pfrt_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 1, 0, 1000, 0);
  bubble(0, e0, 1000);
  pfrt_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_BACKWARD, 0, 0, 1000, 0);
  auto chunk = [&](uint32_t ev, uint32_t id, uint64_t sample) {
    pfrt_enqueue_wait(p.get(), dev, fill, ev);
    pfrt_fill_chunk_desc c{};
    c.job = job;
    c.bubble_id = id;
    c.layer_end = 1;
    c.batch = 4;
    c.sample_begin = sample;
    c.planned_us = kChunkPlannedUs; // 10x too optimistic
    EXPECT_EQ(pfrt_enqueue_fill(p.get(), dev, fill, &c), PFRT_OK) << pfrt_last_error();
  };
  chunk(e1, 1, 0);
  chunk(e0, 0, 4);
  return p;
}

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
