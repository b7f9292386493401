// Profile mode: the main job runs without fill and the MeasuredProfile carries per-stage compute
// times, every instruction, bubbles and free memory; the JSON report carries the documented keys.
#include "runtime/tests/TestUtil.h"

#include "proto/profile.pb.h"

#include <cstdio>
#include <fstream>

namespace pfrt {
namespace test {
namespace {

TEST(ProfileTest, ProfileModeWritesMeasuredProfile) {
  samples::PipelineSpec spec;
  spec.stages = 3;
  spec.microbatches = 4;
  spec.forwardUs = 800;
  spec.backwardUs = 1600;
  spec.iterations = 3;
  ProgramPtr p = buildOk(spec);
  ASSERT_TRUE(p);
  pfrt_options o = hostOptions(0);
  o.profile = 1;
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->data.fillEnabled);
  EXPECT_EQ(r->data.jobs[0].samplesThisRun, 0u);
  std::string path = tempPath("profile.pb");
  PFRT_ASSERT_OK(pfrt_report_write_profile(r.get(), path.c_str()));
  pipefill::rt::MeasuredProfile prof;
  {
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(prof.ParseFromIstream(&in));
  }
  EXPECT_EQ(prof.backend(), "host");
  EXPECT_EQ(prof.program(), "pipeline");
  ASSERT_EQ(prof.stages_size(), 3);
  for (const pipefill::rt::MeasuredStage &st : prof.stages()) {
    EXPECT_NEAR(st.forward_us(), 800, 150) << "stage " << st.stage();
    EXPECT_NEAR(st.backward_us(), 1600, 200) << "stage " << st.stage();
    EXPECT_EQ(st.instructions_size(), 8); // 4 forwards + 4 backwards
    EXPECT_TRUE(st.measured());
    EXPECT_EQ(st.min_free_bytes(), spec.memoryBytes - spec.staticBytes);
    for (const pipefill::rt::MeasuredInstruction &mi : st.instructions())
      EXPECT_GT(mi.measured_us(), 0);
  }
  EXPECT_GT(prof.stages(2).bubbles_size(), 0);
  EXPECT_NEAR(prof.iteration_us(), r->data.plannedIterationUs, 0.05 * r->data.plannedIterationUs);
  std::remove(path.c_str());
}

TEST(ProfileTest, ReportJsonHasTheDocumentedKeys) {
  ProgramPtr p = buildOk({});
  ASSERT_TRUE(p);
  pfrt_options o = hostOptions(2);
  o.time_scale = 0.3;
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  std::string json = pfrt_report_json(r.get());
  for (const char *key :
       {"\"backend\"", "\"iterations\"", "\"iteration_us_mean\"", "\"iteration_us\"",
        "\"planned_iteration_us\"", "\"bubbles\"", "\"measured_us_mean\"", "\"planned_us\"",
        "\"samples_completed\"", "\"samples_planned\"", "\"overruns\"", "\"total_us\"",
        "\"checksum\"", "\"switch_latency_us_mean\"", "\"min_free_bytes\""})
    EXPECT_NE(json.find(key), std::string::npos) << key;
  std::string summary = pfrt_report_summary(r.get());
  EXPECT_NE(summary.find("planned"), std::string::npos);
  EXPECT_NE(summary.find("measured"), std::string::npos);
  pfrt_report_stats stats;
  PFRT_ASSERT_OK(pfrt_report_get_stats(r.get(), &stats));
  EXPECT_STREQ(stats.backend, "host");
  EXPECT_EQ(stats.iterations, 2u);
  pfrt_report_job job;
  PFRT_ASSERT_OK(pfrt_report_get_job(r.get(), 0, &job));
  EXPECT_GT(job.samples_this_run, 0u);
  EXPECT_EQ(pfrt_report_get_job(r.get(), 5, &job), PFRT_ERROR_INVALID_ARGUMENT);
}

} // namespace
} // namespace test
} // namespace pfrt
