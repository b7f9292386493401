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
