// Event semantics on the host backend: a wait really waits for the record of the same iteration.
#include "runtime/tests/TestUtil.h"

namespace pfrt {
namespace test {
namespace {

// main:  compute(3 ms) record(e) compute(3 ms)
// copy:  wait(e) copy(0.5 ms)
// The copy may start only after the first compute of the same iteration ended.
TEST(EventTest, WaitWaitsForRecordOfSameIteration) {
  pfrt_program *raw = nullptr;
  PFRT_ASSERT_OK(pfrt_program_create("events", &raw));
  ProgramPtr p(raw);
  uint32_t dev = 0, main = 0, copy = 0, ev = 0;
  PFRT_ASSERT_OK(pfrt_program_add_device(p.get(), nullptr, &dev));
  PFRT_ASSERT_OK(pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT,
                                            "main", &main));
  PFRT_ASSERT_OK(pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_COPY, PFRT_PRIORITY_DEFAULT,
                                            "copy", &copy));
  PFRT_ASSERT_OK(pfrt_program_create_event(p.get(), dev, "e", &ev));
  PFRT_ASSERT_OK(
      pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 0, 0, 3000, 0));
  PFRT_ASSERT_OK(pfrt_program_enqueue_record(p.get(), dev, main, ev));
  PFRT_ASSERT_OK(
      pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_BACKWARD, 0, 0, 3000, 0));
  PFRT_ASSERT_OK(pfrt_program_enqueue_wait(p.get(), dev, copy, ev));
  PFRT_ASSERT_OK(
      pfrt_program_enqueue_copy(p.get(), dev, copy, PFRT_COPY_DEVICE_TO_HOST, 1 << 20, 500));

  ReportPtr r = runOk(p.get(), hostOptions(3));
  ASSERT_TRUE(r);
  const DeviceReport &d = r->data.devices[0];
  for (size_t k = 0; k < 3; ++k) {
    const OpTime &recordOp = d.streamOps[main][k][1];
    const OpTime &firstCompute = d.streamOps[main][k][0];
    const OpTime &waitOp = d.streamOps[copy][k][0];
    const OpTime &copyOp = d.streamOps[copy][k][1];
    ASSERT_GE(recordOp.end, 0);
    ASSERT_GE(copyOp.start, 0);
    EXPECT_GE(waitOp.end, recordOp.start) << "iteration " << k;
    EXPECT_GE(copyOp.start, firstCompute.end) << "iteration " << k;
    // It really waited: the copy stream had nothing else to do, so without the wait it would have
    // started at the beginning of the iteration.
    EXPECT_GE(copyOp.start - firstCompute.start, 2500.0) << "iteration " << k;
  }
}

// Two waits on one event from two streams, and an event recorded late in the main stream: both
// waiters are released by the same record, every iteration.
TEST(EventTest, SeveralWaitersAndManyIterations) {
  pfrt_program *raw = nullptr;
  PFRT_ASSERT_OK(pfrt_program_create("events2", &raw));
  ProgramPtr p(raw);
  uint32_t dev = 0, main = 0, a = 0, b = 0, ev = 0;
  PFRT_ASSERT_OK(pfrt_program_add_device(p.get(), nullptr, &dev));
  PFRT_ASSERT_OK(pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT,
                                            "main", &main));
  PFRT_ASSERT_OK(
      pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_COPY, PFRT_PRIORITY_DEFAULT, "a", &a));
  PFRT_ASSERT_OK(
      pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_COPY, PFRT_PRIORITY_DEFAULT, "b", &b));
  PFRT_ASSERT_OK(pfrt_program_create_event(p.get(), dev, "late", &ev));
  PFRT_ASSERT_OK(
      pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 0));
  PFRT_ASSERT_OK(
      pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 1, 0, 1000, 0));
  PFRT_ASSERT_OK(pfrt_program_enqueue_record(p.get(), dev, main, ev));
  for (uint32_t s : {a, b}) {
    PFRT_ASSERT_OK(pfrt_program_enqueue_wait(p.get(), dev, s, ev));
    PFRT_ASSERT_OK(pfrt_program_enqueue_copy(p.get(), dev, s, PFRT_COPY_HOST_TO_DEVICE, 4096, 100));
  }
  const uint32_t iterations = 8;
  ReportPtr r = runOk(p.get(), hostOptions(iterations));
  ASSERT_TRUE(r);
  const DeviceReport &d = r->data.devices[0];
  for (size_t k = 0; k < iterations; ++k)
    for (uint32_t s : {a, b})
      EXPECT_GE(d.streamOps[s][k][1].start, d.streamOps[main][k][2].start)
          << "stream " << s << " iteration " << k;
}

} // namespace
} // namespace test
} // namespace pfrt
