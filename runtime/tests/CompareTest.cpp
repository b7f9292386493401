// pfrt_compare measures the main job's slowdown from fill (ABBA runs, measured time model: real
// main compute and real fill work on one shared core). The figure is a measurement, not true by
// construction: a fill chunk that is forced to run unbounded beside the main job's compute (at the
// main job's priority) makes it move far above the noise floor, while the bubble-bound rule keeps
// it near zero. (The 2-core test machine is shared and noisy: A/A noise floors of 30-60% were
// seen, so the assertions only ask for a clear separation of the two medians, not for the
// figure to clear its noise floor; pfrt_compare prints both.)
#include "runtime/tests/TestUtil.h"

namespace pfrt {
namespace test {
namespace {

// main: F(6 ms) record(e) bubble (idles 4 ms) B(backwardUs, 6 ms by default); fill: wait(e) chunk
// of 30 ms of real work that the plan says takes 0.4 ms (unbounded, the fill stream is busy all
// the time).
ProgramPtr contended(double backwardUs = 6000) {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_create("contended", &raw), PFRT_OK);
  ProgramPtr p(raw);
  uint32_t dev = 0, main = 0, fill = 0, ev = 0, job = 0;
  pfrt_device_desc dd{};
  dd.planned_iteration_us = 10000 + backwardUs;
  pfrt_program_add_device(p.get(), &dd, &dev);
  pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "main", &main);
  pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT, "fill", &fill);
  pfrt_program_create_event(p.get(), dev, "bubble", &ev);
  pfrt_fill_job_desc jd{};
  jd.name = "chain";
  jd.kind = PFRT_FILL_INFERENCE;
  pfrt_program_add_fill_job(p.get(), &jd, &job);
  pfrt_fill_layer_desc ld{};
  ld.kind = PFRT_LAYER_GEMM_CHAIN;
  ld.planned_us_per_sample = 30000;
  pfrt_fill_job_add_layer(p.get(), job, &ld);
  pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 0, 0, 6000, 0);
  pfrt_program_enqueue_record(p.get(), dev, main, ev);
  pfrt_bubble_desc b{};
  b.planned_duration_us = 4000;
  b.emulate_idle = 1;
  pfrt_program_enqueue_bubble(p.get(), dev, main, &b);
  pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_BACKWARD, 0, 0, backwardUs, 0);
  pfrt_program_enqueue_wait(p.get(), dev, fill, ev);
  pfrt_fill_chunk_desc c{};
  c.job = job;
  c.layer_end = 1;
  c.batch = 1;
  c.planned_us = 400;
  EXPECT_EQ(pfrt_program_enqueue_fill(p.get(), dev, fill, &c), PFRT_OK) << pfrt_last_error();
  return p;
}

pfrt_options measured() {
  pfrt_options o = hostOptions(6);
  o.time_model = PFRT_TIME_MEASURED;
  // Main and fill share one core for real: unpinned, the fill thread could run on the other
  // core of the machine whenever it is free, and the unbounded contrast would measure nothing
  // (4.6% instead of > 25% was seen in a full ctest -j2 run).
  o.cpu = 0;
  return o;
}

#if defined(__SANITIZE_ADDRESS__)
#define PFRT_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PFRT_UNDER_ASAN 1
#endif
#endif

TEST(CompareTest, SlowdownMovesWhenFillRunsUnbounded) {
#ifdef PFRT_UNDER_ASAN
  // A contention contrast measured under ASan's instrumentation measures the instrumentation
  // (-0.9% against > 25% was seen); the main suite runs it uninstrumented.
  GTEST_SKIP() << "timing contrast: not meaningful under AddressSanitizer";
#endif
  ProgramPtr p = contended();
  pfrt_options bounded = measured();
  bounded.fill_policy = PFRT_FILL_BOUNDED;
  pfrt_compare_result rb{};
  PFRT_ASSERT_OK(pfrt_compare(p.get(), &bounded, 3, &rb));
  pfrt_options unbounded = measured();
  unbounded.fill_policy = PFRT_FILL_UNBOUNDED;
  unbounded.fill_idle_priority = 0;
  pfrt_compare_result ru{};
  PFRT_ASSERT_OK(pfrt_compare(p.get(), &unbounded, 3, &ru));
  EXPECT_EQ(rb.time_measured, 1);
  // Bound: the chunk overran once (the plan under-predicted it), then it is always deferred.
  EXPECT_GT(rb.chunks_deferred, 0u);
  // Unbounded at main's priority: main compute shares its core with fill all the time (ideally
  // +75%: 12 ms of compute take 24 ms).
  EXPECT_GT(ru.slowdown, 0.25) << pfrt_compare_format(&ru, 0);
  EXPECT_GT(ru.slowdown, rb.slowdown + 0.15) << pfrt_compare_format(&rb, 0)
                                             << pfrt_compare_format(&ru, 0);
  EXPECT_GT(ru.overrun_us, 0);
}

// The report says how much of an overrun the fill thread spent waiting for a core. Main and fill
// share CPU 0 and fill runs at SCHED_IDLE: the 30 ms chunk (planned 0.4 ms, run unbounded) is
// still running when main's 6 ms backward starts, and main takes the core from it for those 6 ms,
// so the fill thread's wall time in the chunk exceeds its CPU time by at least most of that.
TEST(CompareTest, OverrunCountsTheTimeTheFillThreadWaitedForItsCore) {
  ProgramPtr p = contended();
  pfrt_options o = measured();
  o.iterations = 2;
  o.fill_policy = PFRT_FILL_UNBOUNDED;
  o.fill_idle_priority = 1;
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  const ReportData &d = r->data;
  ASSERT_GT(d.overrunUs, 0);
  ASSERT_GE(d.overrunThreadWaitingUs, 0) << "a measured host run knows the fill thread's CPU time";
  EXPECT_GT(d.overrunThreadWaitingUs, 0.5 * 6000);
  EXPECT_LE(d.overrunThreadWaitingUs, d.overrunUs + 1e-6);
  // The chunk's own work is not waiting: the first chunk spends 30 ms of CPU time, 4 of them in
  // its bubble, so at least 26 ms of its overrun are its own (a figure that counted the whole
  // overrun as waiting would fail here).
  EXPECT_GT(d.overrunUs - d.overrunThreadWaitingUs, 0.5 * (30000 - 4000))
      << "overrun " << d.overrunUs << " us, waiting " << d.overrunThreadWaitingUs << " us";
  EXPECT_NE(std::string(pfrt_report_json(r.get())).find("\"fill_thread_waiting_us\": "),
            std::string::npos);
  // The figure follows main's use of the core: with main's backward 18 ms longer, the same
  // chunks wait about 36 ms longer (main takes the core from them for both iterations' backward,
  // see above). Both runs share CPU 0, so a process that holds the machine's other core (which
  // once failed a contrast with fill pinned there) moves neither; one on CPU 0 moves both alike.
  // Asking for half of the expected difference leaves room for the noise seen here (the 6 ms run
  // waited 9-17 ms across runs).
  constexpr double kLongerUs = 18000;
  ProgramPtr longer = contended(6000 + kLongerUs);
  ReportPtr lr = runOk(longer.get(), o);
  ASSERT_TRUE(lr);
  EXPECT_GT(lr->data.overrunThreadWaitingUs - d.overrunThreadWaitingUs, 0.5 * 2 * kLongerUs)
      << "backward 6 ms: " << d.overrunThreadWaitingUs
      << " us waiting; backward 24 ms: " << lr->data.overrunThreadWaitingUs << " us waiting";
  // The modelled time model does not know it (and does not print it).
  pfrt_options m = hostOptions(2);
  m.fill_policy = PFRT_FILL_UNBOUNDED;
  ReportPtr mr = runOk(p.get(), m);
  ASSERT_TRUE(mr);
  EXPECT_LT(mr->data.overrunThreadWaitingUs, 0);
  EXPECT_EQ(std::string(pfrt_report_json(mr.get())).find("fill_thread_waiting_us"),
            std::string::npos);
}

// Under --time-scale the runs' times are plan microseconds (real / time_scale), as in run
// reports: the result carries the scale and the text says so, with the switch latency also in
// real microseconds. The independent truth is the plan: in the modelled time model main's
// compute and idle bubble last their planned time x time_scale of real time, so an iteration
// comes out near its planned 16 ms in plan us (a figure in real us would be near 8 ms).
TEST(CompareTest, TimesAreInPlanMicrosecondsUnderATimeScale) {
  ProgramPtr p = contended();
  pfrt_options o = hostOptions(3);
  o.time_scale = 0.5;
  o.fill_policy = PFRT_FILL_BOUNDED;
  pfrt_compare_result r{};
  PFRT_ASSERT_OK(pfrt_compare(p.get(), &o, 1, &r));
  EXPECT_EQ(r.time_scale, 0.5);
  EXPECT_GT(r.main_only_us_mean, 0.9 * 16000) << pfrt_compare_format(&r, 0);
  EXPECT_LT(r.main_only_us_mean, 1.5 * 16000) << pfrt_compare_format(&r, 0);
  const std::string text = pfrt_compare_format(&r, 0);
  EXPECT_NE(text.find("time scale 0.5: times below are plan us (real us / 0.5)"),
            std::string::npos)
      << text;
  if (r.switch_latency_count) {
    char real[64];
    std::snprintf(real, sizeof real, "real us: p50 %.1f", 0.5 * r.switch_latency_us_p50);
    EXPECT_NE(text.find(real), std::string::npos) << text;
  }
  EXPECT_NE(std::string(pfrt_compare_format(&r, 1)).find("\"time_scale\": 0.5"),
            std::string::npos);
  // At scale 1 there is nothing to convert and nothing is said.
  o.time_scale = 1.0;
  PFRT_ASSERT_OK(pfrt_compare(p.get(), &o, 1, &r));
  EXPECT_EQ(std::string(pfrt_compare_format(&r, 0)).find("plan us"), std::string::npos);
}

// A stop request (what a signal to pipefill-run --compare sends) ends the comparison after the
// run in progress; the blocks completed before it are the result, marked incomplete, and the cut
// block is left out. The request here comes from the progress callback, at the first iteration
// of run 7: the second block's first A run (runs 1-2: A/A; 3-6: block 1).
struct StopAtRun {
  uint32_t runs = 0, stopAt = 7;
};
void stopAtRun(void *user, uint32_t done, uint32_t, double) {
  StopAtRun &s = *static_cast<StopAtRun *>(user);
  if (done == 1 && ++s.runs == s.stopAt)
    pfrt_stop_request();
}

TEST(CompareTest, AStopRequestKeepsTheCompletedBlocks) {
  ProgramPtr p = contended();
  pfrt_options o = hostOptions(2);
  o.fill_policy = PFRT_FILL_BOUNDED;
  StopAtRun s;
  o.progress = stopAtRun;
  o.progress_user = &s;
  pfrt_compare_result r{};
  const pfrt_status st = pfrt_compare(p.get(), &o, 3, &r);
  pfrt_stop_clear();
  PFRT_ASSERT_OK(st);
  EXPECT_EQ(s.runs, 7u) << "no run started after the stop";
  EXPECT_EQ(r.incomplete, 1);
  EXPECT_EQ(r.repetitions, 1u);
  EXPECT_EQ(r.repetitions_requested, 3u);
  EXPECT_EQ(r.slowdown_min, r.slowdown_max) << "one block";
  const std::string text = pfrt_compare_format(&r, 0);
  EXPECT_NE(text.find("INCOMPLETE: stopped on request after 1 of 3 block(s)"), std::string::npos)
      << text;
  EXPECT_NE(std::string(pfrt_compare_format(&r, 1)).find("\"incomplete\": true"),
            std::string::npos);
  // Without a stop the same comparison is complete.
  o.progress = nullptr;
  PFRT_ASSERT_OK(pfrt_compare(p.get(), &o, 1, &r));
  EXPECT_EQ(r.incomplete, 0);
  EXPECT_EQ(r.repetitions, 1u);
  EXPECT_EQ(r.repetitions_requested, 1u);
}

TEST(CompareTest, BadArgumentsAreErrors) {
  ProgramPtr p = contended();
  pfrt_options o = measured();
  pfrt_compare_result r{};
  EXPECT_EQ(pfrt_compare(p.get(), &o, 0, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error()).find("compare runs 1 to 1000 ABBA repetitions, got 0"),
            std::string::npos)
      << pfrt_last_error();
  // pipefill-run caps --compare at 1000; the C API ran 100000 (days) without a word.
  EXPECT_EQ(pfrt_compare(p.get(), &o, 100000, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error()).find("got 100000"), std::string::npos);
  o.checkpoint_path = "x.ckpt";
  EXPECT_EQ(pfrt_compare(p.get(), &o, 1, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(pfrt_last_error(),
               "compare runs the program many times: it cannot use a checkpoint");
  EXPECT_EQ(pfrt_compare(p.get(), nullptr, 1, nullptr), PFRT_ERROR_INVALID_ARGUMENT);
  o = measured();
  o.enable_fill = 0;
  EXPECT_EQ(pfrt_compare(p.get(), &o, 1, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(pfrt_last_error(),
               "compare needs fill enabled (it runs with and without fill itself)");
  o = measured();
  o.fill_cpu = 0;
  EXPECT_EQ(pfrt_compare(p.get(), &o, 1, &r), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(pfrt_last_error(), "compare measures main and fill contending for one core: it "
                                  "cannot pin fill to its own CPU (fill_cpu / --fill-cpu)");
  // A CPU that does not exist is an error of the run, not a silent no-op.
  o.fill_cpu = 4000;
  pfrt_report *rep = nullptr;
  EXPECT_EQ(pfrt_run(p.get(), &o, &rep), PFRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error()).find("fill_cpu must be -1 (not pinned) or a CPU of this machine"),
            std::string::npos)
      << pfrt_last_error();
  pfrt_report_destroy(rep);
}

} // namespace
} // namespace test
} // namespace pfrt
