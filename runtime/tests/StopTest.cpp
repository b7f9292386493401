// Clean stop (pfrt_stop_request) and the progress callback: a stop request ends the run at an
// iteration boundary agreed by every stream (no stream waits on a peer that stopped), the report
// is marked incomplete, the checkpoint holds exactly the iterations run, and resuming from it
// gives the uninterrupted run's fill accounting (samples, steps, checksum).
#include "runtime/tests/TestUtil.h"

#include "runtime/CheckpointFile.h"
#include "runtime/ProgramIO.h"

#include "proto/stream_program.pb.h"

#include <cstdio>
#include <vector>

namespace pfrt {
namespace test {
namespace {

// Four stages of 1F1B with sends/receives between every pair (the stop point must be shared by
// all of them) and a fill job whose batches span two passes.
ProgramPtr pipeline() {
  samples::PipelineSpec spec;
  spec.name = "stop";
  spec.stages = 4;
  spec.microbatches = 4;
  spec.forwardUs = 200;
  spec.backwardUs = 400;
  spec.iterations = 12;
  spec.layer = samples::smallEncoder();
  return buildOk(spec);
}

struct ProgressLog {
  std::vector<uint32_t> done;
  uint32_t total = 0;
  uint32_t stopAfter = 0; // request a stop when this many iterations are done (0: never)
};

void onProgress(void *user, uint32_t done, uint32_t total, double elapsedS) {
  auto &log = *static_cast<ProgressLog *>(user);
  EXPECT_GE(elapsedS, 0.0);
  log.done.push_back(done);
  log.total = total;
  if (log.stopAfter && done == log.stopAfter)
    pfrt_stop_request();
}

// Clears the process-wide request whatever the test's outcome.
struct StopGuard {
  ~StopGuard() { pfrt_stop_clear(); }
};

uint32_t checkpointIterations(pfrt_program *p, const std::string &path) {
  pipefill::rt::FillCheckpoint cp;
  std::string why;
  EXPECT_EQ(readCheckpointFile(path, programFingerprint(p->program), cp, why),
            CheckpointStatus::Ok)
      << why;
  return cp.iterations_done();
}

TEST(StopTest, ProgressCountsEveryIteration) {
  ProgramPtr p = pipeline();
  ProgressLog log;
  pfrt_options o = hostOptions(5);
  o.progress = onProgress;
  o.progress_user = &log;
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  EXPECT_EQ(pfrt_report_incomplete(r.get()), 0);
  EXPECT_EQ(log.total, 5u);
  EXPECT_EQ(log.done, (std::vector<uint32_t>{1, 2, 3, 4, 5}));
}

TEST(StopTest, StopMidRunThenResumeMatchesUninterrupted) {
  StopGuard guard;
  ProgramPtr p = pipeline();
  ReportPtr full = runOk(p.get(), hostOptions(12));
  ASSERT_TRUE(full);

  std::string cp = tempPath("stop.ckpt");
  ProgressLog log;
  log.stopAfter = 3;
  pfrt_options o = hostOptions(12);
  o.checkpoint_path = cp.c_str();
  o.progress = onProgress;
  o.progress_user = &log;
  ReportPtr first = runOk(p.get(), o);
  ASSERT_TRUE(first);
  EXPECT_EQ(pfrt_report_incomplete(first.get()), 1);
  EXPECT_TRUE(first->data.stopped);
  EXPECT_EQ(first->data.iterationsRequested, 12u);
  // Stopped at a boundary at or after the request, well before the end.
  const uint32_t ran = first->data.iterations;
  EXPECT_GE(ran, 3u);
  EXPECT_LT(ran, 12u);
  EXPECT_EQ(log.done.back(), ran);
  EXPECT_EQ(checkpointIterations(p.get(), cp), ran);
  EXPECT_NE(first->data.json.find("\"incomplete\": true"), std::string::npos);
  EXPECT_NE(std::string(pfrt_report_summary(first.get())).find("INCOMPLETE"), std::string::npos);
  // The profile says so too (it measured `ran` of the 12 asked for); a complete run's does not.
  EXPECT_TRUE(first->data.profile.incomplete());
  EXPECT_EQ(first->data.profile.iterations(), ran);
  EXPECT_EQ(first->data.profile.iterations_requested(), 12u);
  EXPECT_FALSE(full->data.profile.incomplete());
  // Planned samples cover only the iterations that ran.
  pfrt_stop_clear();
  ReportPtr prefix = runOk(p.get(), hostOptions(ran));
  ASSERT_TRUE(prefix);
  EXPECT_EQ(first->data.jobs[0].samplesPlanned, prefix->data.jobs[0].samplesPlanned);
  EXPECT_EQ(first->data.jobs[0].samplesCompleted, prefix->data.jobs[0].samplesCompleted);

  o.progress = nullptr;
  ReportPtr second = runOk(p.get(), o);
  ASSERT_TRUE(second);
  EXPECT_EQ(pfrt_report_incomplete(second.get()), 0);
  EXPECT_EQ(second->data.firstIteration, static_cast<int64_t>(ran));
  const RunResult::Job &a = full->data.jobs[0], &b = second->data.jobs[0];
  EXPECT_GT(a.samplesCompleted, 0u);
  EXPECT_EQ(b.samplesCompleted, a.samplesCompleted);
  EXPECT_NEAR(b.checksum, a.checksum, 1e-9 * a.checksum);
  std::remove(cp.c_str());
  std::remove((cp + ".prev").c_str());
}

TEST(StopTest, StopBeforeTheFirstIterationWritesTheCheckpoint) {
  StopGuard guard;
  ProgramPtr p = pipeline();
  std::string cp = tempPath("early.ckpt");
  pfrt_options o = hostOptions(4);
  o.checkpoint_path = cp.c_str();
  pfrt_stop_request();
  EXPECT_EQ(pfrt_stop_requested(), 1);
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  EXPECT_EQ(pfrt_report_incomplete(r.get()), 1);
  EXPECT_EQ(r->data.iterations, 0u);
  EXPECT_EQ(r->data.jobs[0].samplesCompleted, 0u);
  EXPECT_EQ(r->data.jobs[0].samplesPlanned, 0u);
  EXPECT_EQ(checkpointIterations(p.get(), cp), 0u);
  pfrt_stop_clear();
  EXPECT_EQ(pfrt_stop_requested(), 0);
  ReportPtr again = runOk(p.get(), o);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->data.iterations, 4u);
  EXPECT_EQ(pfrt_report_incomplete(again.get()), 0);
  std::remove(cp.c_str());
  std::remove((cp + ".prev").c_str());
}

} // namespace
} // namespace test
} // namespace pfrt
