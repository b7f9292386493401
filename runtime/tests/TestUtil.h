// Helpers shared by the runtime tests.
#ifndef PFRT_TESTS_TEST_UTIL_H
#define PFRT_TESTS_TEST_UTIL_H

#include "runtime/Program.h"
#include "runtime/Report.h"
#include "runtime/pfrt.h"
#include "runtime/testing/SamplePrograms.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pfrt {
namespace test {

struct ProgramDeleter {
  void operator()(pfrt_program *p) const { pfrt_program_destroy(p); }
};
struct ReportDeleter {
  void operator()(pfrt_report *r) const { pfrt_report_destroy(r); }
};
using ProgramPtr = std::unique_ptr<pfrt_program, ProgramDeleter>;
using ReportPtr = std::unique_ptr<pfrt_report, ReportDeleter>;

// Host-backend options: the modelled time model (fast, exact planned timelines), fill on and
// unbounded (every planned chunk runs), time scale 1, given iterations.
pfrt_options hostOptions(uint32_t iterations = 0);

// Runs and fails the test (returning null) on error.
ReportPtr runOk(pfrt_program *program, const pfrt_options &options);

ProgramPtr buildOk(const samples::PipelineSpec &spec);

// A unique file path in the test's temporary directory.
std::string tempPath(const std::string &name);

std::string dataPath(const std::string &name);

// One fill chunk ({layer_begin, layer_end, batch, sample_begin}) of a test program.
struct ChunkSpec {
  uint32_t begin, end, batch;
  uint64_t sample;
};

// On one device, for each entry of `chunks`: a forward of computeUs on the main stream, an event
// recorded there, a self-idling bubble of bubbleUs, and on the fill stream a wait on the event and
// the chunk (planned at plannedUs). Alternating chunks stream their weights from pinned host
// memory and park activations on the host.
void enqueueChunkBubbles(pfrt_program *p, uint32_t dev, uint32_t main, uint32_t fill, uint32_t job,
                         const std::vector<ChunkSpec> &chunks, double computeUs, double bubbleUs,
                         double plannedUs);

// The bubble bound's test plan: costs deliberately mis-predicted (each chunk is planned at 200 us
// and lasts 2000 us: 4 samples x 500 us of GEMM_CHAIN work, exact under the modelled time model,
// calibrated real GPU work on CUDA). One job of 48 samples over 6 iterations:
// main: F(1 ms) record(e1) bubble 1 (idles 20 ms) F(1 ms) record(e0) bubble 0 (idles 1 ms) B(1 ms)
// fill: wait(e1) fill(bubble 1, samples [8i, 8i+4)) wait(e0) fill(bubble 0, samples [8i+4, 8i+8))
constexpr uint64_t kMisPredictedSamples = 48;
constexpr double kMisPredictedChunkUs = 2000;
constexpr double kMisPredictedPlannedUs = 200;
ProgramPtr misPredictedProgram();

// A 2-stage GPipe (f = kTailTestF, b = kTailTestB) whose second device has a warm-up bubble
// (f) before its F0 and a tail bubble (b: device 0's B0) after its B0: two bubbles with no compute
// between them from one iteration to the next. The tail holds one fill chunk of one sample of
// `layers` GEMM-chain layers of dimension `dim`, planned (and, in modelled time, lasting) chunkUs
// in all.
constexpr double kTailTestF = 2000, kTailTestB = 4000;
ProgramPtr tailThenWarmupProgram(double chunkUs = 3000, uint32_t layers = 1, uint32_t dim = 16);

#define PFRT_ASSERT_OK(call)                                                                       \
  do {                                                                                             \
    pfrt_status pfrt_assert_status_ = (call);                                                      \
    ASSERT_EQ(pfrt_assert_status_, PFRT_OK) << #call << ": " << pfrt_last_error();                 \
  } while (0)

// A two-device program of sends and receives only (for the channel-link tests): device 0 sends
// `sendOrder`'s tags in that order, device 1 receives `recvOrder`'s (a permutation of them), each
// on stream 0 unless `sendStream` / `recvStream` name another (0 or 1) for a tag.
Program twoDeviceSends(const std::vector<uint32_t> &sendOrder,
                       const std::vector<uint32_t> &recvOrder,
                       const std::map<uint32_t, uint32_t> &sendStream = {},
                       const std::map<uint32_t, uint32_t> &recvStream = {});

} // namespace test
} // namespace pfrt

#endif // PFRT_TESTS_TEST_UTIL_H
