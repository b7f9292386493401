#include "runtime/tests/TestUtil.h"

#include <cstdio>
#include <unistd.h>

namespace pfrt {
namespace test {

pfrt_options hostOptions(uint32_t iterations) {
  pfrt_options o;
  pfrt_options_init(&o);
  o.backend = PFRT_BACKEND_HOST;
  o.iterations = iterations;
  o.time_model = PFRT_TIME_MODELLED; // exact planned timelines; labelled "modelled" everywhere
  // Every planned chunk runs (numerics, plans and checkpoints are checked against the plan);
  // the bubble-bound tests (BubbleBoundTest) ask for PFRT_FILL_BOUNDED themselves.
  o.fill_policy = PFRT_FILL_UNBOUNDED;
  return o;
}

ReportPtr runOk(pfrt_program *program, const pfrt_options &options) {
  pfrt_report *report = nullptr;
  pfrt_status status = pfrt_run(program, &options, &report);
  EXPECT_EQ(status, PFRT_OK) << pfrt_last_error();
  return ReportPtr(report);
}

ProgramPtr buildOk(const samples::PipelineSpec &spec) {
  std::string error;
  pfrt_program *p = samples::buildPipeline(spec, &error);
  EXPECT_NE(p, nullptr) << error;
  return ProgramPtr(p);
}

std::string tempPath(const std::string &name) {
  const ::testing::TestInfo *info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = ::testing::TempDir();
  if (!dir.empty() && dir.back() != '/')
    dir += '/';
  std::string path = dir + "pfrt-" + std::to_string(::getpid()) + "-" +
                     (info ? std::string(info->test_suite_name()) + "." + info->name() : "x") +
                     "-" + name;
  std::remove(path.c_str());
  return path;
}

std::string dataPath(const std::string &name) { return std::string(PFRT_TEST_DATA_DIR) + "/" + name; }

void enqueueChunkBubbles(pfrt_program *p, uint32_t dev, uint32_t main, uint32_t fill, uint32_t job,
                         const std::vector<ChunkSpec> &chunks, double computeUs, double bubbleUs,
                         double plannedUs) {
  for (uint32_t c = 0; c < chunks.size(); ++c) {
    uint32_t ev = 0;
    pfrt_create_event(p, dev, "b", &ev);
    pfrt_enqueue_compute(p, dev, main, PFRT_COMPUTE_FORWARD, c, 0, computeUs, 0);
    pfrt_enqueue_record(p, dev, main, ev);
    pfrt_bubble_desc b{};
    b.bubble_id = c;
    b.planned_duration_us = bubbleUs;
    b.emulate_idle = 1;
    pfrt_enqueue_bubble(p, dev, main, &b);
    pfrt_enqueue_wait(p, dev, fill, ev);
    pfrt_fill_chunk_desc f{};
    f.job = job;
    f.bubble_id = c;
    f.layer_begin = chunks[c].begin;
    f.layer_end = chunks[c].end;
    f.batch = chunks[c].batch;
    f.sample_begin = chunks[c].sample;
    f.weights_streamed = c % 2;
    f.activations_on_host = c % 2;
    f.planned_us = plannedUs;
    EXPECT_EQ(pfrt_enqueue_fill(p, dev, fill, &f), PFRT_OK) << pfrt_last_error();
  }
}

} // namespace test
} // namespace pfrt
