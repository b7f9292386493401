// pfrt_options.compute_fn: a framework's own main-job compute in place of the calibrated chain.
#include "runtime/tests/TestUtil.h"

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

namespace {

using pfrt::test::ProgramPtr;

struct Calls {
  std::mutex m;
  // (device, kind, microbatch) -> calls; planned us of the first call.
  std::map<std::tuple<uint32_t, int, uint32_t>, uint32_t> count;
  std::map<std::tuple<uint32_t, int, uint32_t>, double> planned;
  double realPerPlanned = 0; // each call sleeps planned_us x this (time scale 1)
};

void recordingCompute(void *user, uint32_t device, pfrt_compute_kind kind, uint32_t microbatch,
                      uint32_t /*chunk*/, double plannedUs, void *stream) {
  Calls &c = *static_cast<Calls *>(user);
  EXPECT_EQ(stream, nullptr); // the host backend has no stream to hand
  {
    std::lock_guard<std::mutex> lock(c.m);
    auto key = std::make_tuple(device, static_cast<int>(kind), microbatch);
    ++c.count[key];
    c.planned.emplace(key, plannedUs);
  }
  std::this_thread::sleep_for(
      std::chrono::duration<double, std::micro>(plannedUs * c.realPerPlanned));
}

pfrt::samples::PipelineSpec twoStages() {
  pfrt::samples::PipelineSpec spec;
  spec.stages = 2;
  spec.microbatches = 4;
  spec.forwardUs = 1000;
  spec.backwardUs = 2000;
  spec.fill = false;
  return spec;
}

pfrt_options measuredOptions(Calls &calls, uint32_t iterations) {
  pfrt_options o = pfrt::test::hostOptions(iterations);
  o.time_model = PFRT_TIME_MEASURED;
  o.enable_fill = 0;
  o.compute_fn = recordingCompute;
  o.compute_user = &calls;
  return o;
}

} // namespace

// Every compute op of every device calls compute_fn once per iteration with its planned time, and
// the report times it on the clock: compute that takes 3x its plan makes the measured iteration
// at least 2x the planned one (a one-sided bound: sleeping never takes less than asked).
TEST(ComputeFnTest, CalledOncePerComputeOpAndTimedOnTheClock) {
  const pfrt::samples::PipelineSpec spec = twoStages();
  ProgramPtr p = pfrt::test::buildOk(spec);
  ASSERT_TRUE(p);
  Calls calls;
  calls.realPerPlanned = 3;
  const uint32_t iterations = 3;
  pfrt::test::ReportPtr r = pfrt::test::runOk(p.get(), measuredOptions(calls, iterations));
  ASSERT_TRUE(r);
  for (uint32_t d = 0; d < spec.stages; ++d)
    for (uint32_t mb = 0; mb < spec.microbatches; ++mb) {
      auto f = std::make_tuple(d, static_cast<int>(PFRT_COMPUTE_FORWARD), mb);
      auto b = std::make_tuple(d, static_cast<int>(PFRT_COMPUTE_BACKWARD), mb);
      EXPECT_EQ(calls.count[f], iterations) << "device " << d << " forward " << mb;
      EXPECT_EQ(calls.count[b], iterations) << "device " << d << " backward " << mb;
      EXPECT_DOUBLE_EQ(calls.planned[f], spec.forwardUs);
      EXPECT_DOUBLE_EQ(calls.planned[b], spec.backwardUs);
    }
  EXPECT_EQ(calls.count.size(), 2u * spec.stages * spec.microbatches) << "no other compute op";
  pfrt_report_stats stats;
  pfrt_report_get_stats(r.get(), &stats);
  EXPECT_EQ(stats.time_measured, 1);
  EXPECT_GE(stats.iteration_us_mean, 2 * stats.planned_iteration_us)
      << "the framework's compute (3x its plan) is what the report measured";
}

// Replay: only the real stage's compute is the framework's; the emulated stage holds its plan.
TEST(ComputeFnTest, ReplayCallsItForTheRealStageOnly) {
  ProgramPtr p = pfrt::test::buildOk(twoStages());
  ASSERT_TRUE(p);
  Calls calls;
  pfrt_options o = measuredOptions(calls, 2);
  o.stage = 1;
  pfrt::test::ReportPtr r = pfrt::test::runOk(p.get(), o);
  ASSERT_TRUE(r);
  ASSERT_FALSE(calls.count.empty());
  for (const auto &[key, n] : calls.count)
    EXPECT_EQ(std::get<0>(key), 1u) << "compute_fn called for emulated device "
                                    << std::get<0>(key);
}

// The modelled time model labels main compute modelled at its planned times: a framework's real
// compute under it would be mislabelled, so the combination is refused by name.
TEST(ComputeFnTest, RefusedWithTheModelledTimeModel) {
  ProgramPtr p = pfrt::test::buildOk(twoStages());
  ASSERT_TRUE(p);
  Calls calls;
  pfrt_options o = measuredOptions(calls, 1);
  o.time_model = PFRT_TIME_MODELLED;
  pfrt_report *r = nullptr;
  EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
  EXPECT_NE(std::string(pfrt_last_error()).find("compute_fn runs the main job's compute for real"),
            std::string::npos)
      << pfrt_last_error();
  EXPECT_TRUE(calls.count.empty());
}
