// Fill never blocks or delays the main stream: an overly long fill chunk keeps running while the
// main stream continues at its planned times, and the overrun is measured.
#include "runtime/tests/TestUtil.h"

namespace pfrt {
namespace test {
namespace {

// main: F(4 ms) record(e) bubble(id 0, idles 4 ms) B(4 ms) F(4 ms)
// fill: wait(e) fill(GEMM_CHAIN job planned `fillUs`)
ProgramPtr bubbleProgram(double fillUs) {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_create("overrun", &raw), PFRT_OK);
  ProgramPtr p(raw);
  uint32_t dev = 0, main = 0, fill = 0, ev = 0, job = 0;
  pfrt_device_desc dd{};
  dd.planned_iteration_us = 16000;
  EXPECT_EQ(pfrt_program_add_device(p.get(), &dd, &dev), PFRT_OK);
  EXPECT_EQ(pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT,
                                       "main", &main),
            PFRT_OK);
  EXPECT_EQ(pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT,
                                       "fill", &fill),
            PFRT_OK);
  EXPECT_EQ(pfrt_program_create_event(p.get(), dev, "bubble0", &ev), PFRT_OK);
  pfrt_fill_job_desc jd{};
  jd.name = "chain";
  jd.kind = PFRT_FILL_INFERENCE;
  EXPECT_EQ(pfrt_program_add_fill_job(p.get(), &jd, &job), PFRT_OK);
  pfrt_fill_layer_desc ld{};
  ld.kind = PFRT_LAYER_GEMM_CHAIN;
  ld.dim = 32;
  ld.planned_us_per_sample = fillUs;
  EXPECT_EQ(pfrt_fill_job_add_layer(p.get(), job, &ld), PFRT_OK);

  EXPECT_EQ(pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 0, 0, 4000, 0),
            PFRT_OK);
  EXPECT_EQ(pfrt_program_enqueue_record(p.get(), dev, main, ev), PFRT_OK);
  pfrt_bubble_desc b{};
  b.bubble_id = 0;
  b.kind = PFRT_BUBBLE_STEADY;
  b.planned_start_us = 4000;
  b.planned_duration_us = 4000;
  b.emulate_idle = 1;
  EXPECT_EQ(pfrt_program_enqueue_bubble(p.get(), dev, main, &b), PFRT_OK);
  EXPECT_EQ(
      pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_BACKWARD, 0, 0, 4000, 8000),
      PFRT_OK);
  EXPECT_EQ(
      pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 1, 0, 4000, 12000),
      PFRT_OK);
  EXPECT_EQ(pfrt_program_enqueue_wait(p.get(), dev, fill, ev), PFRT_OK);
  pfrt_fill_chunk_desc c{};
  c.job = job;
  c.bubble_id = 0;
  c.layer_begin = 0;
  c.layer_end = 1;
  c.batch = 1;
  c.planned_us = fillUs;
  EXPECT_EQ(pfrt_program_enqueue_fill(p.get(), dev, fill, &c), PFRT_OK);
  return p;
}

TEST(FillTimingTest, LongFillChunkDoesNotDelayMainAndIsCountedAsOverrun) {
  ProgramPtr p = bubbleProgram(/*fillUs=*/14000); // 10 ms longer than the bubble
  const uint32_t iterations = 3;
  ReportPtr r = runOk(p.get(), hostOptions(iterations));
  ASSERT_TRUE(r);
  const ReportData &d = r->data;
  const DeviceReport &dev = d.devices[0];
  const double tolerance = 1500; // wake-up jitter on a loaded 2-core machine
  for (size_t k = 0; k < iterations; ++k) {
    const OpTime *ops = dev.mainOps()[k];
    const double t0 = ops[0].start;
    // Main ops start at their planned offsets and stay in program order.
    EXPECT_NEAR(ops[3].start - t0, 8000, tolerance) << "iteration " << k;
    EXPECT_NEAR(ops[4].start - t0, 12000, tolerance) << "iteration " << k;
    EXPECT_LT(ops[3].start, ops[4].start);
  }
  EXPECT_NEAR(d.iterationUsMean, 16000, tolerance);
  // Every iteration's chunk ran past the bubble (whose end is the next main compute).
  EXPECT_EQ(d.overrunCount, iterations);
  EXPECT_NEAR(d.overrunUs / iterations, 10000, 3000);
  ASSERT_EQ(dev.bubbles.size(), 1u);
  EXPECT_NEAR(dev.bubbles[0].measuredMeanUs, 4000, tolerance);
  EXPECT_EQ(d.jobs[0].samplesThisRun, iterations);
}

TEST(FillTimingTest, FillThatFitsHasNoOverrun) {
  ProgramPtr p = bubbleProgram(/*fillUs=*/1000);
  ReportPtr r = runOk(p.get(), hostOptions(3));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data.overrunCount, 0u);
  EXPECT_GE(r->data.switchLatencyMeanUs, 0.0);
  EXPECT_NEAR(r->data.devices[0].bubbles[0].fillUsMean, 1000, 800);
}

TEST(FillTimingTest, NoFillOptionRunsMainOnly) {
  ProgramPtr p = bubbleProgram(1000);
  pfrt_options o = hostOptions(2);
  o.enable_fill = 0;
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data.jobs[0].samplesThisRun, 0u);
  EXPECT_EQ(r->data.jobs[0].samplesPlanned, 2u);
  EXPECT_FALSE(r->data.fillEnabled);
}

// The modelled clock: the same program at time_scale 0.25 reports the same modelled times.
TEST(FillTimingTest, TimeScaleKeepsModelledTimes) {
  ProgramPtr p = bubbleProgram(1000);
  pfrt_options o = hostOptions(3);
  o.time_scale = 0.25;
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->data.iterationUsMean, 16000, 2500);
}

} // namespace
} // namespace test
} // namespace pfrt
