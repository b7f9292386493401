// The bubble bound's split: a chunk that does not fit what is left of its bubble runs its longest
// head (its first passes, whole layers) that does, and the rest of it waits first in line for a
// later bubble (PFRT_FILL_BOUNDED); PFRT_FILL_BOUNDED_WHOLE defers the whole chunk.
//
// The plan is deliberately over-committed: each iteration's bubble lasts 2.5 ms and its chunk
// (4 GEMM_CHAIN layers of a batch of 4, 1 ms per layer, exact under the modelled time model) 4 ms.
// Whole chunks never fit, so with whole chunks nothing ever runs; with heads, half a batch runs in
// every bubble. The expected counts follow from that arithmetic; the reference for the outputs is
// an unbounded run of the batches that the bounded run completes.
#include "runtime/CheckpointFile.h"
#include "runtime/ProgramIO.h"
#include "runtime/tests/TestUtil.h"

#include "proto/stream_program.pb.h"

#include <cmath>

namespace pfrt {
namespace test {
namespace {

#define PFRT_EXPECT_OK(call) EXPECT_EQ((call), PFRT_OK) << #call << ": " << pfrt_last_error()

constexpr uint32_t kLayers = 4, kBatch = 4;
constexpr double kBubbleUs = 2500;

struct SessionDeleter {
  void operator()(pfrt_session *s) const { pfrt_session_destroy(s); }
};
using SessionPtr = std::unique_ptr<pfrt_session, SessionDeleter>;

// One device: F (1 ms) | record | bubble (kBubbleUs, idles) | B (1 ms); the fill stream waits for
// the bubble and runs one chunk of all `layers` layers of a batch of kBatch samples, planned at
// its true cost (layers x batch x usPerSample) unless plannedUs says otherwise. The job has
// kBatch samples per iteration.
// A training job's chunk runs the forward and the backward passes of its layers (2 x layers
// passes), planned at forward + backward (twice the forward: the default) unless plannedUs says.
ProgramPtr overCommitted(uint32_t iterations, double usPerSample, uint32_t layers = kLayers,
                         double plannedUs = -1, pfrt_fill_kind kind = PFRT_FILL_INFERENCE) {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_create("split", &raw), PFRT_OK);
  ProgramPtr p(raw);
  uint32_t dev = 0, main = 0, fill = 0, ev = 0, job = 0;
  pfrt_device_desc dd{};
  dd.planned_iteration_us = 2000 + kBubbleUs;
  PFRT_EXPECT_OK(pfrt_program_add_device(p.get(), &dd, &dev));
  PFRT_EXPECT_OK(pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_MAIN,
                                            PFRT_PRIORITY_DEFAULT, "main", &main));
  PFRT_EXPECT_OK(pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_FILL,
                                            PFRT_PRIORITY_DEFAULT, "fill", &fill));
  PFRT_EXPECT_OK(pfrt_program_create_event(p.get(), dev, "bubble", &ev));
  pfrt_fill_job_desc jd{};
  jd.name = "chain";
  jd.kind = kind;
  jd.samples = uint64_t(kBatch) * iterations;
  PFRT_EXPECT_OK(pfrt_program_add_fill_job(p.get(), &jd, &job));
  for (uint32_t l = 0; l < layers; ++l) {
    pfrt_fill_layer_desc ld{};
    ld.kind = PFRT_LAYER_GEMM_CHAIN;
    ld.dim = 16;
    ld.planned_us_per_sample = usPerSample;
    PFRT_EXPECT_OK(pfrt_fill_job_add_layer(p.get(), job, &ld));
  }
  PFRT_EXPECT_OK(
      pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 0));
  PFRT_EXPECT_OK(pfrt_program_enqueue_record(p.get(), dev, main, ev));
  pfrt_bubble_desc b{};
  b.planned_start_us = 1000;
  b.planned_duration_us = kBubbleUs;
  b.emulate_idle = 1;
  PFRT_EXPECT_OK(pfrt_program_enqueue_bubble(p.get(), dev, main, &b));
  PFRT_EXPECT_OK(pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_BACKWARD, 0, 0,
                                              1000, 1000 + kBubbleUs));
  PFRT_EXPECT_OK(pfrt_program_enqueue_wait(p.get(), dev, fill, ev));
  pfrt_fill_chunk_desc c{};
  c.job = job;
  const bool training = kind == PFRT_FILL_TRAINING;
  c.layer_end = training ? 2 * layers : layers;
  c.batch = kBatch;
  c.planned_us = plannedUs >= 0 ? plannedUs : (training ? 3 : 1) * layers * kBatch * usPerSample;
  PFRT_EXPECT_OK(pfrt_program_enqueue_fill(p.get(), dev, fill, &c));
  return p;
}

pfrt_options bounded(uint32_t iterations, pfrt_fill_policy policy) {
  pfrt_options o = hostOptions(iterations); // modelled time: every layer lasts its plan
  o.fill_policy = policy;
  return o;
}

// 1 ms per layer: a head of two layers (2 ms) fits the 2.5 ms bubble, three (3 ms) do not.
constexpr double kUsPerSample = 1000.0 / kBatch;

TEST(ChunkSplitTest, HeadsOfChunksFillBubblesWholeChunksNeverFit) {
  constexpr uint32_t kIterations = 6;
  ProgramPtr p = overCommitted(kIterations, kUsPerSample);
  ASSERT_TRUE(p);
  ReportPtr r = runOk(p.get(), bounded(kIterations, PFRT_FILL_BOUNDED));
  ASSERT_TRUE(r);
  const RunResult::Job &j = r->data.jobs[0];
  if (getenv("PFRT_DEBUG"))
    for (const auto &c : r->data.chunkRuns)
      fprintf(stderr, "it %lld passes [%u, %u) pred %.0f start %.0f end %.0f deferred %d\n",
              (long long)c.iteration, c.passBegin, c.passEnd, c.predictedUs, c.start, c.end,
              c.deferred);
  // Iteration 2k runs the head [0, 2) of batch k; iteration 2k + 1 its rest [2, 4), which
  // completes it; the newer batches queue behind.
  EXPECT_EQ(j.chunksSplit, kIterations / 2);
  EXPECT_EQ(j.chunksRun, kIterations);
  EXPECT_EQ(j.samplesCompleted, uint64_t(kBatch) * kIterations / 2);
  // Nothing lost, nothing twice: what the plan scheduled is done, pending (begun or queued) or
  // held (not begun: the backlog reached two iterations' worth, FillQueue::planIteration).
  EXPECT_EQ(j.samplesCompleted + j.samplesPending + j.samplesHeld,
            uint64_t(kBatch) * kIterations);
  EXPECT_LE(j.chunksPending, 2u);
  EXPECT_EQ(r->data.overrunCount, 0u);
  ASSERT_EQ(r->data.chunkRuns.size(), size_t(kIterations));
  for (const auto &c : r->data.chunkRuns) {
    EXPECT_EQ(c.passEnd - c.passBegin, 2u) << "iteration " << c.iteration;
    EXPECT_EQ(c.passBegin, c.iteration % 2 ? 2u : 0u) << "iteration " << c.iteration;
  }
  // The same outputs as running those batches whole: an unbounded run of half the iterations.
  ReportPtr ref = runOk(p.get(), hostOptions(kIterations / 2));
  ASSERT_TRUE(ref);
  ASSERT_EQ(ref->data.jobs[0].samplesCompleted, j.samplesCompleted);
  EXPECT_NEAR(j.checksum, ref->data.jobs[0].checksum, 1e-9 * std::abs(j.checksum));
}

// The contrast: whole chunks only. The chunk's 4 ms never fits the 2.5 ms bubble (and nothing is
// ever measured to say otherwise): no sample is done in any iteration.
TEST(ChunkSplitTest, WholeChunksOnlyRunNothingInTooShortBubbles) {
  constexpr uint32_t kIterations = 6;
  ProgramPtr p = overCommitted(kIterations, kUsPerSample);
  ASSERT_TRUE(p);
  ReportPtr r = runOk(p.get(), bounded(kIterations, PFRT_FILL_BOUNDED_WHOLE));
  ASSERT_TRUE(r);
  const RunResult::Job &j = r->data.jobs[0];
  EXPECT_EQ(j.chunksRun, 0u);
  EXPECT_EQ(j.chunksSplit, 0u);
  EXPECT_EQ(j.samplesCompleted, 0u);
  // Two iterations' worth queue (one chunk per iteration planned); then the job begins nothing
  // new while they wait, and the plan's later batches are held, not queued.
  EXPECT_EQ(j.chunksPending, 2u);
  EXPECT_EQ(j.samplesPending, 2u * kBatch);
  EXPECT_EQ(j.iterationsHeld, kIterations - 2);
  EXPECT_EQ(j.samplesHeld, uint64_t(kBatch) * (kIterations - 2));
  // The summary says that fill fell behind and what fits the plan to the machine; a plan whose
  // chunks fit says nothing of the kind.
  EXPECT_NE(r->data.summary.find("note: fill fell behind its plan: 2 chunks wait, 2.0 "
                                 "iterations' worth; jobs began no new work in 4 iteration(s)"),
            std::string::npos)
      << r->data.summary;
  EXPECT_NE(r->data.summary.find("--profile-with-fill"), std::string::npos);
  ProgramPtr fits = overCommitted(kIterations, kUsPerSample / 4); // 1 ms chunks, 2.5 ms bubbles
  ASSERT_TRUE(fits);
  ReportPtr ok = runOk(fits.get(), bounded(kIterations, PFRT_FILL_BOUNDED_WHOLE));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->data.jobs[0].chunksPending, 0u);
  EXPECT_EQ(ok->data.jobs[0].iterationsHeld, 0u);
  EXPECT_EQ(ok->data.summary.find("fell behind"), std::string::npos) << ok->data.summary;
}

// Fill that never catches up keeps a bounded backlog: over 40 iterations in which no chunk ever
// fits, two chunks wait (in the report and in the checkpoint, which is written every iteration)
// and the other 38 iterations' batches are held, counted, not queued. Before the hold, the
// backlog, the checkpoint and the run's memory grew by a chunk every iteration.
TEST(ChunkSplitTest, ABacklogThatNeverDrainsStaysTwoIterationsLong) {
  constexpr uint32_t kIterations = 40;
  ProgramPtr p = overCommitted(kIterations, kUsPerSample);
  ASSERT_TRUE(p);
  const std::string path = tempPath("held.ckpt");
  pfrt_options o = bounded(kIterations, PFRT_FILL_BOUNDED_WHOLE);
  o.checkpoint_path = path.c_str();
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  const RunResult::Job &j = r->data.jobs[0];
  EXPECT_EQ(j.chunksPending, 2u);
  EXPECT_EQ(j.iterationsHeld, kIterations - 2);
  EXPECT_EQ(j.samplesPending + j.samplesHeld, uint64_t(kBatch) * kIterations);
  // The identity of docs/runtime.md §4b, from the report's own numbers, with holds.
  EXPECT_EQ(j.samplesCompleted + j.samplesPending + j.samplesHeld,
            j.samplesPlanned + j.samplesInFlightPlanned);
  pipefill::rt::FillCheckpoint cp;
  std::string problem;
  ASSERT_EQ(readCheckpointFile(path, programFingerprint(p->program), cp, problem),
            CheckpointStatus::Ok)
      << problem;
  ASSERT_EQ(cp.jobs(0).devices_size(), 1);
  EXPECT_EQ(cp.jobs(0).devices(0).deferred_size(), 2);
  EXPECT_EQ(cp.jobs(0).devices(0).iterations_held(), int64_t(kIterations - 2));
  // A checkpoint that claims more held iterations than were run is refused at load.
  cp.mutable_jobs(0)->mutable_devices(0)->set_iterations_held(kIterations + 1);
  writeCheckpointFile(path, cp, programFingerprint(p->program));
  o.iterations = kIterations + 1;
  pfrt_report *bad = nullptr;
  EXPECT_EQ(pfrt_run(p.get(), &o, &bad), PFRT_ERROR_PARSE);
  EXPECT_NE(std::string(pfrt_last_error()).find("41 iterations held after 40 iterations"),
            std::string::npos)
      << pfrt_last_error();
  pfrt_report_destroy(bad);
}

// Held iterations are part of the checkpoint: a run stopped and resumed begins the same batches
// as one run straight through (the same samples done, held and pending, the same outputs).
// Without them, the resumed plan would jump ahead of the held batches and never begin them.
TEST(ChunkSplitTest, HeldIterationsSurviveCheckpointAndResume) {
  constexpr uint32_t kIterations = 12;
  ProgramPtr p = overCommitted(kIterations, kUsPerSample);
  ASSERT_TRUE(p);
  ReportPtr straight = runOk(p.get(), bounded(kIterations, PFRT_FILL_BOUNDED));
  ASSERT_TRUE(straight);
  const std::string path = tempPath("held-resume.ckpt");
  pfrt_options o = bounded(5, PFRT_FILL_BOUNDED);
  o.checkpoint_path = path.c_str();
  ReportPtr first = runOk(p.get(), o);
  ASSERT_TRUE(first);
  ASSERT_GT(first->data.jobs[0].iterationsHeld, 0u) << "the plan must hold before the stop";
  o.iterations = kIterations;
  ReportPtr rest = runOk(p.get(), o);
  ASSERT_TRUE(rest);
  const RunResult::Job &a = straight->data.jobs[0], &b = rest->data.jobs[0];
  ASSERT_GT(a.iterationsHeld, first->data.jobs[0].iterationsHeld);
  EXPECT_EQ(b.iterationsHeld, a.iterationsHeld);
  EXPECT_EQ(b.samplesHeld, a.samplesHeld);
  EXPECT_EQ(b.samplesCompleted, a.samplesCompleted);
  EXPECT_EQ(b.samplesPending, a.samplesPending);
  EXPECT_NEAR(b.checksum, a.checksum, 1e-9 * std::abs(a.checksum));
}

// A checkpoint taken between a head and the rest of its chunk: the rest is deferred work in the
// checkpoint, and the resumed run finishes the batch with the same outputs.
TEST(ChunkSplitTest, TheRestOfASplitChunkSurvivesCheckpointAndResume) {
  constexpr uint32_t kIterations = 6;
  ProgramPtr p = overCommitted(kIterations, kUsPerSample);
  ASSERT_TRUE(p);
  const std::string cp = tempPath("split.ckpt");
  pfrt_options o = bounded(1, PFRT_FILL_BOUNDED);
  o.checkpoint_path = cp.c_str();
  ReportPtr first = runOk(p.get(), o); // iteration 0: the head of batch 0
  ASSERT_TRUE(first);
  EXPECT_EQ(first->data.jobs[0].samplesCompleted, 0u);
  EXPECT_EQ(first->data.jobs[0].samplesPending, kBatch);
  o.iterations = kIterations;
  ReportPtr rest = runOk(p.get(), o);
  ASSERT_TRUE(rest);
  ReportPtr straight = runOk(p.get(), bounded(kIterations, PFRT_FILL_BOUNDED));
  ASSERT_TRUE(straight);
  EXPECT_EQ(rest->data.jobs[0].samplesCompleted, straight->data.jobs[0].samplesCompleted);
  EXPECT_NEAR(rest->data.jobs[0].checksum, straight->data.jobs[0].checksum,
              1e-9 * std::abs(straight->data.jobs[0].checksum));
}

// An inference chunk with no head that fits (one layer: a batch of 4 samples of 1 ms in a 2.5 ms
// bubble) runs its first samples that do, half its batch (2 ms), and the other half waits first
// in line as a batch of its own (the chunk's planned time shared by samples) for the next
// bubble: every bubble runs 2 samples. With whole chunks (the contrast; the same as
// PFRT_FILL_BOUNDED before batches were split) nothing ever runs: the chunk fits no bubble.
constexpr double kOneLayerUsPerSample = 1000; // a one-layer chunk of kBatch samples: 4 ms

TEST(ChunkSplitTest, AnInferenceChunkWithNoHeadThatFitsRunsItsFirstSamples) {
  constexpr uint32_t kIterations = 6;
  ProgramPtr p = overCommitted(kIterations, kOneLayerUsPerSample, /*layers=*/1);
  ASSERT_TRUE(p);
  ReportPtr r = runOk(p.get(), bounded(kIterations, PFRT_FILL_BOUNDED));
  ReportPtr whole = runOk(p.get(), bounded(kIterations, PFRT_FILL_BOUNDED_WHOLE));
  ASSERT_TRUE(r && whole);
  const RunResult::Job &j = r->data.jobs[0];
  if (getenv("PFRT_DEBUG"))
    for (const auto &c : r->data.chunkRuns)
      fprintf(stderr, "it %lld batch %u pred %.0f start %.0f end %.0f deferred %d\n",
              (long long)c.iteration, c.batch, c.predictedUs, c.start, c.end, c.deferred);
  // Iteration 2k splits batch k (its first 2 samples run); iteration 2k + 1 runs the other 2.
  ASSERT_EQ(r->data.chunkRuns.size(), size_t(kIterations));
  for (size_t k = 0; k < r->data.chunkRuns.size(); ++k) {
    EXPECT_EQ(r->data.chunkRuns[k].iteration, int64_t(k));
    EXPECT_EQ(r->data.chunkRuns[k].batch, kBatch / 2) << "iteration " << k;
  }
  EXPECT_EQ(j.chunksSplit, kIterations / 2);
  EXPECT_EQ(j.samplesCompleted, uint64_t(kBatch / 2) * kIterations);
  EXPECT_EQ(r->data.overrunCount, 0u);
  // Nothing lost, nothing twice (the identity of docs/runtime.md §4b).
  EXPECT_EQ(j.samplesCompleted + j.samplesPending + j.samplesHeld,
            uint64_t(kBatch) * kIterations);
  EXPECT_EQ(j.samplesCompleted + j.samplesPending + j.samplesHeld,
            j.samplesPlanned + j.samplesInFlightPlanned);
  EXPECT_EQ(whole->data.jobs[0].chunksRun, 0u);
  EXPECT_EQ(whole->data.jobs[0].samplesCompleted, 0u);
  // The outputs of the samples it completed (the first 12) are those of whole batches.
  ReportPtr ref = runOk(p.get(), hostOptions(uint32_t(j.samplesCompleted / kBatch)));
  ASSERT_TRUE(ref);
  ASSERT_EQ(ref->data.jobs[0].samplesCompleted, j.samplesCompleted);
  EXPECT_NEAR(j.checksum, ref->data.jobs[0].checksum, 1e-9 * std::abs(j.checksum));
}

// A training batch is one optimizer step: the same plan as a training job (the forward pass of
// 2 ms, the backward of 4 ms) runs heads of whole batches only. The forward of each batch runs;
// its backward fits no bubble and is passed over, never cut into fewer samples.
TEST(ChunkSplitTest, ATrainingChunkIsNeverSplitBySamples) {
  constexpr uint32_t kIterations = 6;
  ProgramPtr p = overCommitted(kIterations, kOneLayerUsPerSample / 2, /*layers=*/1,
                               /*plannedUs=*/-1, PFRT_FILL_TRAINING);
  ASSERT_TRUE(p);
  ReportPtr r = runOk(p.get(), bounded(kIterations, PFRT_FILL_BOUNDED));
  ASSERT_TRUE(r);
  const RunResult::Job &j = r->data.jobs[0];
  ASSERT_GE(r->data.chunkRuns.size(), 1u);
  for (const auto &c : r->data.chunkRuns) {
    EXPECT_EQ(c.batch, kBatch) << "iteration " << c.iteration;
    EXPECT_EQ(c.passBegin, 0u) << "iteration " << c.iteration;
    EXPECT_EQ(c.passEnd, 1u) << "iteration " << c.iteration;
  }
  EXPECT_EQ(j.samplesCompleted, 0u);
  EXPECT_EQ(j.steps, 0u);
  EXPECT_EQ(j.samplesCompleted + j.samplesPending + j.samplesHeld,
            uint64_t(kBatch) * kIterations);
}

// A checkpoint taken while the rest of a chunk split by samples waits: it is deferred work of
// its own batch in the checkpoint (samples 2 and 3), and the resumed run goes on as one run
// straight through (the same samples done, pending and held, the same outputs).
TEST(ChunkSplitTest, TheSamplesNotRunOfASplitChunkSurviveCheckpointAndResume) {
  constexpr uint32_t kIterations = 6;
  ProgramPtr p = overCommitted(kIterations, kOneLayerUsPerSample, /*layers=*/1);
  ASSERT_TRUE(p);
  const std::string path = tempPath("split-samples.ckpt");
  std::remove(path.c_str());
  pfrt_options o = bounded(1, PFRT_FILL_BOUNDED);
  o.checkpoint_path = path.c_str();
  ReportPtr first = runOk(p.get(), o); // iteration 0: samples 0 and 1
  ASSERT_TRUE(first);
  EXPECT_EQ(first->data.jobs[0].samplesCompleted, kBatch / 2);
  EXPECT_EQ(first->data.jobs[0].samplesPending, kBatch / 2);
  {
    pipefill::rt::FillCheckpoint cp;
    std::string problem;
    ASSERT_EQ(readCheckpointFile(path, programFingerprint(p->program), cp, problem),
              CheckpointStatus::Ok)
        << problem;
    ASSERT_EQ(cp.jobs(0).devices_size(), 1);
    ASSERT_EQ(cp.jobs(0).devices(0).deferred_size(), 1);
    EXPECT_EQ(cp.jobs(0).devices(0).deferred(0).sample_begin(), kBatch / 2);
    EXPECT_EQ(cp.jobs(0).devices(0).deferred(0).batch(), kBatch / 2);
    EXPECT_EQ(cp.jobs(0).devices(0).in_flight_size(), 0);
  }
  o.iterations = kIterations;
  ReportPtr rest = runOk(p.get(), o);
  ASSERT_TRUE(rest);
  ReportPtr straight = runOk(p.get(), bounded(kIterations, PFRT_FILL_BOUNDED));
  ASSERT_TRUE(straight);
  const RunResult::Job &a = straight->data.jobs[0], &b = rest->data.jobs[0];
  EXPECT_TRUE(rest->data.resumed);
  EXPECT_EQ(b.samplesCompleted, a.samplesCompleted);
  EXPECT_EQ(b.samplesPending, a.samplesPending);
  EXPECT_EQ(b.samplesHeld, a.samplesHeld);
  EXPECT_EQ(b.samplesCompleted + b.samplesPending + b.samplesHeld,
            uint64_t(kBatch) * kIterations);
  EXPECT_NEAR(b.checksum, a.checksum, 1e-9 * std::abs(a.checksum));
  std::remove(path.c_str());
}

// The report says why chunks overran. A one-layer chunk planned at 200 us really takes 4 ms
// (modelled time): in iteration 0 the plan's prediction admits it into the 2.5 ms bubble and it
// overruns, all of it because it ran longer than predicted; from then on it is predicted at its
// measured time, does not fit, and (one layer: no head to run) waits.
TEST(ChunkSplitTest, ReportSplitsOverrunsIntoLongerThanPredictedAndShorterBubbles) {
  ProgramPtr p = overCommitted(3, 1000.0, /*layers=*/1, /*plannedUs=*/200);
  ASSERT_TRUE(p);
  // Whole chunks: under PFRT_FILL_BOUNDED its first 2 samples would run in the next bubbles.
  ReportPtr r = runOk(p.get(), bounded(3, PFRT_FILL_BOUNDED_WHOLE));
  ASSERT_TRUE(r);
  const ReportData &d = r->data;
  EXPECT_EQ(d.jobs[0].chunksRun, 1u);
  EXPECT_EQ(d.jobs[0].chunksSplit, 0u);
  ASSERT_EQ(d.overrunCount, 1u);
  EXPECT_EQ(d.overrunChunks, 1u);
  // Ran from about the bubble's start for 4 ms in a 2.5 ms bubble.
  EXPECT_GT(d.overrunUs, 4000 - kBubbleUs - 1);
  EXPECT_NEAR(d.overrunLongerUs, d.overrunUs, 1e-6 * d.overrunUs);
  EXPECT_NEAR(d.overrunShorterBubbleUs, 0, 1e-6);
}

// A chunk that runs longer than predicted stops between passes once its next pass no longer
// fits before the bubble's end: 4 layers of 1 ms planned at 0.4 ms in all (0.1 ms a layer), so
// the bound admits it into the 2.5 ms bubble; before its fourth layer the clock is at 3 ms and
// it stops there (0.5 ms past the bubble), and the fourth layer runs first in the next bubble.
// With whole chunks (the contrast) it runs all four layers: 1.5 ms past the bubble.
TEST(ChunkSplitTest, AChunkLongerThanPredictedStopsBetweenPasses) {
  constexpr uint32_t kIterations = 4;
  ProgramPtr p = overCommitted(kIterations, kUsPerSample, kLayers, /*plannedUs=*/400);
  ASSERT_TRUE(p);
  ReportPtr r = runOk(p.get(), bounded(kIterations, PFRT_FILL_BOUNDED));
  ASSERT_TRUE(r);
  ReportPtr whole = runOk(p.get(), bounded(kIterations, PFRT_FILL_BOUNDED_WHOLE));
  ASSERT_TRUE(whole);
  ASSERT_GE(r->data.chunkRuns.size(), 2u);
  const RunResult::ChunkRun &first = r->data.chunkRuns[0], &second = r->data.chunkRuns[1];
  EXPECT_EQ(first.iteration, 0);
  EXPECT_EQ(first.passBegin, 0u);
  EXPECT_EQ(first.passEnd, 3u);
  EXPECT_NEAR(first.plannedUs, 300, 1e-6); // three quarters of the chunk's plan
  EXPECT_EQ(second.iteration, 1);
  EXPECT_EQ(second.passBegin, 3u);
  EXPECT_EQ(second.passEnd, 4u);
  EXPECT_GE(r->data.jobs[0].chunksSplit, 1u);
  ASSERT_GE(whole->data.chunkRuns.size(), 1u);
  EXPECT_EQ(whole->data.chunkRuns[0].passEnd, 4u);
  EXPECT_EQ(whole->data.jobs[0].chunksSplit, 0u);
  // Overrun in iteration 0: half a layer when cut, one and a half when whole (modelled time).
  auto overrunOfIteration0 = [](const ReportData &d) {
    const BubbleReport &b = d.devices[0].bubbles[0];
    const RunResult::ChunkRun &c = d.chunkRuns[0];
    return c.end - (d.devices[0].mainOps()[0][b.opIndex].start + b.measuredUs[0]);
  };
  EXPECT_NEAR(overrunOfIteration0(r->data), 500, 50);
  EXPECT_NEAR(overrunOfIteration0(whole->data), 1500, 50);
  // Nothing lost, nothing twice; the outputs of the batches it completed are an unbounded run's.
  const RunResult::Job &j = r->data.jobs[0];
  EXPECT_EQ(j.samplesCompleted + j.samplesPending + j.samplesHeld,
            uint64_t(kBatch) * kIterations);
  ASSERT_GT(j.samplesCompleted, 0u);
  ReportPtr ref = runOk(p.get(), hostOptions(uint32_t(j.samplesCompleted / kBatch)));
  ASSERT_TRUE(ref);
  ASSERT_EQ(ref->data.jobs[0].samplesCompleted, j.samplesCompleted);
  EXPECT_NEAR(j.checksum, ref->data.jobs[0].checksum, 1e-9 * std::abs(j.checksum));
}

// A host session of device 0 driven for `iterations` iterations: each begins the device's first
// bubble with the framework's duration `bubbleUs`, gives it whole to fill (bubble_wait) and ends
// it. Null (with a test failure) when a call fails.
SessionPtr driveSession(pfrt_program *p, pfrt_fill_policy policy, uint32_t iterations,
                        double bubbleUs) {
  pfrt_session_options o;
  pfrt_session_options_init(&o);
  o.backend = PFRT_BACKEND_HOST;
  o.fill_policy = policy;
  o.fill_idle_priority = 0;
  pfrt_session *raw = nullptr;
  EXPECT_EQ(pfrt_session_create(p, 0, &o, &raw), PFRT_OK) << pfrt_last_error();
  SessionPtr s(raw);
  pfrt_session_bubble b{};
  if (!s || pfrt_session_bubble_get(s.get(), 0, &b) != PFRT_OK) {
    ADD_FAILURE() << "session: " << pfrt_last_error();
    return nullptr;
  }
  for (uint32_t it = 0; it < iterations; ++it) {
    if (pfrt_session_bubble_begin(s.get(), b.bubble_id, nullptr, bubbleUs) != PFRT_OK ||
        pfrt_session_bubble_wait(s.get()) != PFRT_OK ||
        pfrt_session_bubble_end(s.get(), b.bubble_id, nullptr) != PFRT_OK ||
        pfrt_session_iteration_end(s.get()) != PFRT_OK) {
      ADD_FAILURE() << "iteration " << it << ": " << pfrt_last_error();
      return nullptr;
    }
  }
  return s;
}

// Sessions apply the same rule. On the real clock (sessions time real work), with 8 layers of
// 5 ms: the whole 40 ms chunk never fits a 25 ms bubble (predicted from the plan, and never
// measured), while heads of it do, so the framework's bubbles complete batches.
TEST(ChunkSplitTest, SessionsRunHeadsOfChunksToo) {
  constexpr uint32_t kIterations = 8;
  ProgramPtr p = overCommitted(kIterations, 5000.0 / kBatch, /*layers=*/8);
  ASSERT_TRUE(p);
  uint64_t completed[2] = {0, 0}, run[2] = {0, 0};
  const pfrt_fill_policy policies[2] = {PFRT_FILL_BOUNDED, PFRT_FILL_BOUNDED_WHOLE};
  for (int k = 0; k < 2; ++k) {
    SessionPtr s = driveSession(p.get(), policies[k], kIterations, 25000);
    ASSERT_TRUE(s);
    pfrt_session_stats st{};
    ASSERT_EQ(pfrt_session_get_stats(s.get(), &st), PFRT_OK);
    completed[k] = st.samples_completed;
    run[k] = st.chunks_run;
  }
  // Heads: the first of batch 0 in iteration 0 at the latest, and the batch done by the end.
  // A layer fits a bubble, and the batch's 40 ms fit the 8 bubbles' 200 ms, as long as the
  // machine runs fill less than ~4x slower than calibrated (one CI run was over 2.5x slower).
  EXPECT_GE(run[0], 2u);
  EXPECT_GE(completed[0], kBatch);
  EXPECT_EQ(run[1], 0u);
  EXPECT_EQ(completed[1], 0u);
}

// Sessions split inference chunks by samples too. On the real clock: a one-layer chunk of 4
// samples planned at 40 ms never fits a 25 ms bubble, while its first 2 samples (20 ms, from the
// plan) do; every chunk run is of 2 samples or fewer (1 where the machine runs the layer much
// slower than calibrated), and each completes its samples. Whole chunks run nothing.
TEST(ChunkSplitTest, SessionsRunTheFirstSamplesOfAnInferenceChunk) {
  constexpr uint32_t kIterations = 6;
  ProgramPtr p = overCommitted(kIterations, 10000.0, /*layers=*/1);
  ASSERT_TRUE(p);
  uint64_t completed[2] = {0, 0}, run[2] = {0, 0};
  const pfrt_fill_policy policies[2] = {PFRT_FILL_BOUNDED, PFRT_FILL_BOUNDED_WHOLE};
  for (int k = 0; k < 2; ++k) {
    SessionPtr s = driveSession(p.get(), policies[k], kIterations, 25000);
    ASSERT_TRUE(s);
    pfrt_session_stats st{};
    ASSERT_EQ(pfrt_session_get_stats(s.get(), &st), PFRT_OK);
    completed[k] = st.samples_completed;
    run[k] = st.chunks_run;
    uint32_t n = 0;
    ASSERT_EQ(pfrt_session_chunk_count(s.get(), &n), PFRT_OK);
    uint64_t logged = 0;
    for (uint32_t i = 0; i < n; ++i) {
      pfrt_session_chunk c{};
      ASSERT_EQ(pfrt_session_chunk_get(s.get(), i, &c), PFRT_OK);
      EXPECT_LE(c.batch, kBatch / 2) << "chunk " << i;
      logged += c.batch;
    }
    EXPECT_EQ(logged, completed[k]);
    if (k == 0) {
      EXPECT_GE(st.chunks_split, 1u);
    }
  }
  EXPECT_GE(run[0], 1u);
  EXPECT_GE(completed[0], kBatch / 2);
  EXPECT_EQ(run[1], 0u);
  EXPECT_EQ(completed[1], 0u);
}

// Sessions hold too: whole chunks that never fit leave two of them waiting, and the job's later
// iterations held (the session's job and its JSON report say how many).
TEST(ChunkSplitTest, SessionsHoldAJobTwoIterationsBehind) {
  constexpr uint32_t kIterations = 8;
  ProgramPtr p = overCommitted(kIterations, 5000.0 / kBatch, /*layers=*/8);
  ASSERT_TRUE(p);
  SessionPtr s = driveSession(p.get(), PFRT_FILL_BOUNDED_WHOLE, kIterations, 25000);
  ASSERT_TRUE(s);
  pfrt_session_stats st{};
  ASSERT_EQ(pfrt_session_get_stats(s.get(), &st), PFRT_OK);
  EXPECT_EQ(st.chunks_pending, 2u);
  pfrt_report_job j{};
  ASSERT_EQ(pfrt_session_get_job(s.get(), 0, &j), PFRT_OK);
  EXPECT_EQ(j.iterations_held, kIterations - 2);
  EXPECT_EQ(j.samples_held, uint64_t(kBatch) * (kIterations - 2));
  EXPECT_EQ(j.samples_planned, uint64_t(kBatch) * kIterations);
  const char *json = pfrt_session_report_json(s.get());
  ASSERT_NE(json, nullptr) << pfrt_last_error();
  EXPECT_NE(std::string(json).find("\"iterations_held\": 6"), std::string::npos) << json;
}

// Sessions stop chunks between passes too. On the real clock: 4 layers of 5 ms planned at 4 ms in
// all, so the chunk is admitted into a 12 ms bubble; its third pass ends past 12 ms, and it stops
// there at the latest (sooner on a machine more than 1.2x slower than calibrated); the rest runs
// first in the next bubble. With whole chunks (the contrast) it runs all four layers.
//
// The layers are calibrated once per process, in CPU time, on a VM shared with other work: a run
// whose layers came out much faster than calibrated (once in a sanitizer CI run: all four passes
// ran) may fit a fourth pass legitimately. So the chunk's own measured passes decide which claim
// is checked: near the calibrated speed, the stop after the third pass; faster, the rule itself
// (a pass starts only while it fits: the third ended before the deadline).
TEST(ChunkSplitTest, SessionChunksStopBetweenPasses) {
  constexpr uint32_t kIterations = 2;
  constexpr double kLayerUs = 5000;
  ProgramPtr p = overCommitted(kIterations, kLayerUs / kBatch, kLayers, /*plannedUs=*/4000);
  ASSERT_TRUE(p);
  uint32_t firstEnd[2] = {0, 0}, secondBegin[2] = {0, 0};
  pfrt_session_chunk first[2]{};
  const pfrt_fill_policy policies[2] = {PFRT_FILL_BOUNDED, PFRT_FILL_BOUNDED_WHOLE};
  for (int k = 0; k < 2; ++k) {
    SessionPtr s = driveSession(p.get(), policies[k], kIterations, 12000);
    ASSERT_TRUE(s);
    uint32_t n = 0;
    ASSERT_EQ(pfrt_session_chunk_count(s.get(), &n), PFRT_OK);
    ASSERT_GE(n, 1u);
    pfrt_session_chunk c{};
    ASSERT_EQ(pfrt_session_chunk_get(s.get(), 0, &c), PFRT_OK);
    EXPECT_EQ(c.layer_begin, 0u);
    first[k] = c;
    firstEnd[k] = c.layer_end;
    if (n > 1) {
      ASSERT_EQ(pfrt_session_chunk_get(s.get(), 1, &c), PFRT_OK);
      secondBegin[k] = c.layer_begin;
    }
  }
  ASSERT_GE(firstEnd[0], 1u);
  const pfrt_session_chunk &c = first[0];
  const double passUs = (c.end_us - c.start_us) / double(c.layer_end - c.layer_begin);
  if (passUs >= 0.75 * kLayerUs) {
    EXPECT_LE(firstEnd[0], 3u) << "the chunk ran past its bubble to its last pass (passes of "
                               << passUs << " us, deadline " << c.deadline_us << " us)";
  } else if (firstEnd[0] == kLayers) {
    EXPECT_LE(c.start_us + 3 * passUs, c.deadline_us + 0.25 * passUs)
        << "a pass started past the deadline (passes of " << passUs << " us)";
  }
  if (firstEnd[0] < kLayers) {
    EXPECT_EQ(secondBegin[0], firstEnd[0]) << "the rest runs first in the next bubble";
  }
  EXPECT_EQ(firstEnd[1], kLayers); // whole chunks: never stopped
}

} // namespace
} // namespace test
} // namespace pfrt
