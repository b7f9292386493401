// Checkpoint / resume: a stopped run resumes after the last completed iteration without losing
// finished fill work, including a batch in flight across iterations and training weights.
#include "runtime/tests/TestUtil.h"

#include <cstdio>
#include <fstream>

namespace pfrt {
namespace test {
namespace {

// One device, one bubble at the end of the iteration and one at its start (warm-up). A batch
// begins in the cool-down bubble (layers [0,1)) and finishes in the next iteration's warm-up
// bubble (layers [1,2), iteration_offset -1), so a batch is in flight at every checkpoint.
ProgramPtr spanningProgram(pfrt_fill_kind kind) {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_create("spanning", &raw), PFRT_OK);
  ProgramPtr p(raw);
  uint32_t dev = 0, main = 0, fill = 0, job = 0, e0 = 0, e1 = 0;
  pfrt_program_add_device(p.get(), nullptr, &dev);
  pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "main", &main);
  pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT, "fill", &fill);
  pfrt_program_create_event(p.get(), dev, "warmup", &e0);
  pfrt_program_create_event(p.get(), dev, "cooldown", &e1);
  pfrt_fill_job_desc jd{};
  jd.name = "job";
  jd.kind = kind;
  jd.seed = 3;
  pfrt_program_add_fill_job(p.get(), &jd, &job);
  pfrt_fill_layer_desc l = kind == PFRT_FILL_TRAINING ? samples::smallMlp()
                                                      : samples::smallEncoder();
  pfrt_fill_job_add_layer(p.get(), job, &l);
  pfrt_fill_job_add_layer(p.get(), job, &l);
  const uint32_t passes = kind == PFRT_FILL_TRAINING ? 4 : 2;

  pfrt_bubble_desc b{};
  b.planned_duration_us = 300;
  b.emulate_idle = 1;
  pfrt_program_enqueue_record(p.get(), dev, main, e0);
  b.bubble_id = 0;
  b.kind = PFRT_BUBBLE_WARMUP;
  pfrt_program_enqueue_bubble(p.get(), dev, main, &b);
  pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 0, 0, 300, 0);
  pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_BACKWARD, 0, 0, 300, 0);
  pfrt_program_enqueue_record(p.get(), dev, main, e1);
  b.bubble_id = 1;
  b.kind = PFRT_BUBBLE_COOLDOWN;
  pfrt_program_enqueue_bubble(p.get(), dev, main, &b);

  pfrt_fill_chunk_desc c{};
  c.job = job;
  c.batch = 3;
  pfrt_program_enqueue_wait(p.get(), dev, fill, e0);
  c.bubble_id = 0;
  c.layer_begin = 1;
  c.layer_end = passes;
  c.iteration_offset = -1;
  c.activations_on_host = 1;
  EXPECT_EQ(pfrt_program_enqueue_fill(p.get(), dev, fill, &c), PFRT_OK);
  pfrt_program_enqueue_wait(p.get(), dev, fill, e1);
  c.bubble_id = 1;
  c.layer_begin = 0;
  c.layer_end = 1;
  c.iteration_offset = 0;
  EXPECT_EQ(pfrt_program_enqueue_fill(p.get(), dev, fill, &c), PFRT_OK);
  EXPECT_EQ(pfrt_program_validate(p.get()), PFRT_OK) << pfrt_last_error();
  return p;
}

void resumeKeepsWork(pfrt_fill_kind kind, double tolerance) {
  ProgramPtr p = spanningProgram(kind);
  // Uninterrupted: 6 iterations.
  ReportPtr full = runOk(p.get(), hostOptions(6));
  ASSERT_TRUE(full);
  // 3 iterations, then a second process-equivalent run to 6 from the checkpoint.
  std::string cp = tempPath("fill.ckpt");
  pfrt_options o = hostOptions(3);
  o.checkpoint_path = cp.c_str();
  ReportPtr first = runOk(p.get(), o);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->data.jobs[0].samplesThisRun, 6u); // batches of iterations 0 and 1 finished
  o.iterations = 6;
  ReportPtr second = runOk(p.get(), o);
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->data.resumed);
  EXPECT_EQ(second->data.firstIteration, 3);
  EXPECT_EQ(second->data.iterations, 3u);
  const RunResult::Job &a = full->data.jobs[0], &b = second->data.jobs[0];
  EXPECT_EQ(b.samplesCompleted, a.samplesCompleted);
  EXPECT_EQ(b.samplesCompleted, 15u); // 5 batches of 3 (the 6th is still in flight)
  EXPECT_EQ(b.steps, a.steps);
  EXPECT_NEAR(b.checksum, a.checksum, tolerance * a.checksum);
  if (kind == PFRT_FILL_TRAINING) {
    EXPECT_NEAR(b.weightsChecksum, a.weightsChecksum, tolerance * a.weightsChecksum);
  }
  // Running again with the same target does nothing and keeps the totals.
  ReportPtr third = runOk(p.get(), o);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->data.iterations, 0u);
  EXPECT_EQ(third->data.jobs[0].samplesCompleted, a.samplesCompleted);
  // A smaller target does not rewind the checkpoint.
  o.iterations = 4;
  ReportPtr fourth = runOk(p.get(), o);
  ASSERT_TRUE(fourth);
  EXPECT_EQ(fourth->data.iterations, 0u);
  EXPECT_EQ(fourth->data.firstIteration, 6);
  o.iterations = 7;
  ReportPtr fifth = runOk(p.get(), o);
  ASSERT_TRUE(fifth);
  EXPECT_EQ(fifth->data.firstIteration, 6);
  EXPECT_EQ(fifth->data.jobs[0].samplesCompleted, a.samplesCompleted + 3);
  std::remove(cp.c_str());
}

// A resume that does not run fill (--no-fill; with --stage, a device another run had real) keeps
// the batch in flight in its checkpoint and counts it as pending; it used to drop it, and its
// samples were then neither completed, pending nor skipped. The next run with fill finds it there
// and, since the iterations without fill count as held, continues it where the plan stopped.
TEST(CheckpointTest, AResumeWithoutFillKeepsTheBatchInFlight) {
  ProgramPtr p = spanningProgram(PFRT_FILL_INFERENCE);
  std::string cp = tempPath("nofill.ckpt");
  std::remove(cp.c_str());
  pfrt_options o = hostOptions(3);
  o.checkpoint_path = cp.c_str();
  ReportPtr first = runOk(p.get(), o);
  ASSERT_TRUE(first);
  const RunResult::Job &a = first->data.jobs[0];
  ASSERT_EQ(a.samplesPending, 3u); // the batch begun in iteration 2's cool-down bubble
  o.iterations = 4;
  o.enable_fill = 0;
  ReportPtr second = runOk(p.get(), o);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->data.jobs[0].samplesCompleted, a.samplesCompleted);
  EXPECT_EQ(second->data.jobs[0].samplesPending, a.samplesPending) << "the batch was dropped";
  // The device began no work of its plan in that iteration: it counts as held (§4b), and the
  // plan waits instead of running on without its batch.
  EXPECT_EQ(second->data.jobs[0].iterationsHeld, 1u);
  EXPECT_EQ(second->data.jobs[0].samplesHeld, 3u);
  o.iterations = 5;
  o.enable_fill = 1;
  ReportPtr third = runOk(p.get(), o);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->data.jobs[0].samplesCompleted + third->data.jobs[0].samplesPending,
            a.samplesCompleted + a.samplesPending + 3)
      << "the kept batch and the new one (iteration 4's) are each completed or pending";
  // The plan resumed where it stopped: the kept batch's continuation came first and completed
  // it (before, it was planned in the iteration run without fill and stayed pending for good),
  // and loop iteration 4 began plan iteration 3's batch.
  EXPECT_EQ(third->data.jobs[0].samplesCompleted, a.samplesCompleted + 3);
  EXPECT_EQ(third->data.jobs[0].samplesPending, 3u);
  EXPECT_EQ(third->data.jobs[0].iterationsHeld, 1u);
  std::remove(cp.c_str());
  std::remove((cp + ".prev").c_str());
}

// A checkpoint first written by a run without fill names no state for the device. The resume
// with fill used to start the device's plan at the checkpoint's iteration, so the batches of the
// iterations run without fill were never begun (a different sample range, and no sign of it).
// Those iterations count as held: the resumed run does what a fresh run would have done.
TEST(CheckpointTest, AResumeOfACheckpointWithoutFillStartsThePlanAtItsBeginning) {
  for (pfrt_fill_kind kind : {PFRT_FILL_INFERENCE, PFRT_FILL_TRAINING}) {
    ProgramPtr p = spanningProgram(kind);
    ReportPtr fresh = runOk(p.get(), hostOptions(3));
    ASSERT_TRUE(fresh);
    std::string cp = tempPath("neverfilled.ckpt");
    std::remove(cp.c_str());
    pfrt_options o = hostOptions(3);
    o.checkpoint_path = cp.c_str();
    o.enable_fill = 0;
    ReportPtr idle = runOk(p.get(), o);
    ASSERT_TRUE(idle);
    EXPECT_EQ(idle->data.jobs[0].samplesCompleted, 0u);
    o.iterations = 6;
    o.enable_fill = 1;
    ReportPtr resumed = runOk(p.get(), o);
    ASSERT_TRUE(resumed);
    EXPECT_EQ(resumed->data.firstIteration, 3);
    const RunResult::Job &a = fresh->data.jobs[0], &b = resumed->data.jobs[0];
    EXPECT_EQ(b.iterationsHeld, 3u);
    EXPECT_EQ(b.samplesCompleted, a.samplesCompleted);
    EXPECT_EQ(b.samplesPending, a.samplesPending);
    EXPECT_EQ(b.steps, a.steps);
    EXPECT_NEAR(b.checksum, a.checksum, 1e-9 * a.checksum) << "another sample range was filled";
    std::remove(cp.c_str());
    std::remove((cp + ".prev").c_str());
  }
}

// docs/runtime.md §4b: completed + pending + held is what the plan completes in the run's
// iterations plus the batch the plan itself has in flight at the end. Closed form for the spanning
// program: a batch of 3 begins in every cool-down bubble and completes in the next warm-up one;
// iteration 0's warm-up has nothing to complete. Over n iterations the plan completes 3 (n - 1)
// samples and has the batch begun in iteration n - 1 in flight, which the report names
// (samples_in_flight_planned, also through the C API), so the identity is checkable from it alone.
TEST(CheckpointTest, TheSamplesIdentityCountsThePlansOwnBatchInFlight) {
  ProgramPtr p = spanningProgram(PFRT_FILL_INFERENCE);
  for (uint32_t n : {1u, 3u, 5u}) {
    ReportPtr r = runOk(p.get(), hostOptions(n));
    ASSERT_TRUE(r);
    const RunResult::Job &j = r->data.jobs[0];
    EXPECT_EQ(j.samplesPlanned, 3u * (n - 1)) << n;
    EXPECT_EQ(j.samplesCompleted, 3u * (n - 1)) << n;
    EXPECT_EQ(j.samplesPending, 3u) << n;
    EXPECT_EQ(j.samplesHeld, 0u) << n;
    EXPECT_EQ(j.samplesInFlightPlanned, 3u) << n;
    EXPECT_EQ(j.samplesCompleted + j.samplesPending + j.samplesHeld,
              j.samplesPlanned + j.samplesInFlightPlanned)
        << n;
    pfrt_report_job api{};
    ASSERT_EQ(pfrt_report_get_job(r.get(), 0, &api), PFRT_OK);
    EXPECT_EQ(api.samples_in_flight_planned, 3u) << n;
    EXPECT_NE(std::string(pfrt_report_json(r.get())).find("\"samples_in_flight_planned\": 3"),
              std::string::npos)
        << n;
  }
}

TEST(CheckpointTest, InferenceResumeKeepsCompletedSamples) {
  resumeKeepsWork(PFRT_FILL_INFERENCE, 1e-9);
}

TEST(CheckpointTest, TrainingResumeKeepsWeightsAndLosses) {
  resumeKeepsWork(PFRT_FILL_TRAINING, 1e-9);
}

TEST(CheckpointTest, CheckpointOfAnotherProgramIsRejected) {
  ProgramPtr p = spanningProgram(PFRT_FILL_INFERENCE);
  ProgramPtr q = spanningProgram(PFRT_FILL_TRAINING);
  std::string cp = tempPath("other.ckpt");
  pfrt_options o = hostOptions(2);
  o.checkpoint_path = cp.c_str();
  ReportPtr first = runOk(p.get(), o);
  ASSERT_TRUE(first);
  pfrt_report *r = nullptr;
  EXPECT_EQ(pfrt_run(q.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
  EXPECT_NE(std::string(pfrt_last_error()).find("different program"), std::string::npos)
      << pfrt_last_error();
  std::remove(cp.c_str());
}

TEST(CheckpointTest, CorruptCheckpointIsAnError) {
  ProgramPtr p = spanningProgram(PFRT_FILL_INFERENCE);
  std::string cp = tempPath("corrupt.ckpt");
  {
    std::ofstream out(cp, std::ios::binary);
    out << "\x0a\xff\xff\xff garbage";
  }
  pfrt_options o = hostOptions(2);
  o.checkpoint_path = cp.c_str();
  pfrt_report *r = nullptr;
  EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_PARSE);
  EXPECT_NE(std::string(pfrt_last_error()).find(cp), std::string::npos) << pfrt_last_error();
  std::remove(cp.c_str());
}

} // namespace
} // namespace test
} // namespace pfrt
