// CUDA backend tests. Always built; every test skips with a visible message when
// cudaGetDeviceCount() returns 0 or an error. They compare CUDA results with the host backend (with
// tolerances derived from the fill GEMMs' precision, fillTolerance), batched attention with
// per-sample attention, and check the allocation-free hot loop, stream priorities, the calibrated
// main compute, replay mode and non-blocking fill.
#include "runtime/Backend.h"
#include "runtime/tests/TestUtil.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#ifdef PFRT_HAVE_CUDA
#include <cuda_runtime.h>

#include "runtime/CudaKernels.h"
#endif

namespace pfrt {
namespace test {
namespace {

class CudaBackendTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!pfrt_backend_compiled(PFRT_BACKEND_CUDA))
      GTEST_SKIP() << "CUDA tests skipped: the runtime was built without CUDA";
    if (pfrt_cuda_device_count() <= 0)
      GTEST_SKIP() << "CUDA tests skipped: no CUDA device (cudaGetDeviceCount returned 0 or an "
                      "error)";
  }
};

pfrt_options cudaOptions(uint32_t iterations) {
  pfrt_options o;
  pfrt_options_init(&o);
  o.backend = PFRT_BACKEND_CUDA;
  o.iterations = iterations;
  o.max_dim = 4096; // the same (no) scaling on both backends
  // Every planned chunk runs (numerics and timelines are compared with the host's); the
  // bubble-bound tests below ask for PFRT_FILL_BOUNDED themselves.
  o.fill_policy = PFRT_FILL_UNBOUNDED;
  return o;
}

pfrt_options hostSame(uint32_t iterations) {
  pfrt_options o = hostOptions(iterations);
  o.max_dim = 4096;
  return o;
}

// One device; one bubble per entry of `chunks` (bubbleUs long), each with one fill chunk planned
// at 400 us; alternating chunks stream their weights from pinned host memory and park
// activations on the host.
ProgramPtr fillProgram(pfrt_fill_kind kind, const pfrt_fill_layer_desc &layer, uint32_t layers,
                       const std::vector<ChunkSpec> &chunks, double computeUs = 300,
                       double bubbleUs = 500) {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_create("cuda-fill", &raw), PFRT_OK);
  ProgramPtr p(raw);
  pfrt_program_set_seed(p.get(), 2024);
  uint32_t dev = 0, main = 0, fill = 0, copy = 0, job = 0;
  pfrt_device_desc dd{};
  dd.gemm_dim = 1024;
  pfrt_program_add_device(p.get(), &dd, &dev);
  pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "main", &main);
  pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT, "fill", &fill);
  pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_COPY, PFRT_PRIORITY_DEFAULT, "copy", &copy);
  pfrt_fill_job_desc jd{};
  jd.name = "job";
  jd.kind = kind;
  jd.seed = 11;
  jd.learning_rate = 0.05f;
  pfrt_program_add_fill_job(p.get(), &jd, &job);
  for (uint32_t l = 0; l < layers; ++l)
    EXPECT_EQ(pfrt_fill_job_add_layer(p.get(), job, &layer), PFRT_OK) << pfrt_last_error();
  enqueueChunkBubbles(p.get(), dev, main, fill, job, chunks, computeUs, bubbleUs,
                      /*plannedUs=*/400);
  pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_BACKWARD, 0, 0, computeUs, 0);
  pfrt_program_enqueue_copy(p.get(), dev, copy, PFRT_COPY_DEVICE_TO_HOST, 1 << 20, 0);
  EXPECT_EQ(pfrt_program_validate(p.get()), PFRT_OK) << pfrt_last_error();
  return p;
}

void expectRel(double a, double b, double tol, const char *what) {
  double scale = std::max(std::fabs(a), std::fabs(b));
  EXPECT_LE(std::fabs(a - b), tol * scale + 1e-9) << what << ": cuda " << a << " host " << b;
  std::printf("%s: cuda %.9g host %.9g, rel. error %.2e (tolerance %.2e)\n", what, a, b,
              std::fabs(a - b) / std::max(scale, 1e-30), tol);
}

// Relative tolerance of a CUDA fill result against the host's fp32 one.
//
// The fill GEMMs round both operands to bf16 (unit roundoff u = 2^-8; 2^-11 for TF32 with
// PFRT_CUDA_FILL_MATH=tf32) and accumulate in fp32 (2^-24). One output element c = sum_i a_i b_i
// of a reduction of length K then carries
//   - the operands' rounding: sum_i a_i b_i (e_ai + e_bi) with |e| <= u, which for rounding to
//     nearest behaves like independent zero-mean errors of rms u / sqrt(3): rms sqrt(2/3) u
//     sqrt(sum_i (a_i b_i)^2), i.e. sqrt(2/3) u relative to |c| when the terms have random signs
//     (they do here: the weights are symmetric random, so c's rms is sqrt(sum_i (a_i b_i)^2));
//   - fp32 accumulation: at most K 2^-24 relative (the worst case, not rms: a bound);
// so per GEMM stage e = sqrt(2/3) u + K 2^-24 (K: the longest reduction of the stage).
// Independent stages on the path from input to output add in quadrature: sqrt(D) e after D of
// them (LayerNorm rescales each layer's output, so a stage passes its input's relative error on
// with gain ~1). The reports compare checksums sum_e w_e |y_e| (w_e > 0), whose relative error is
// at most sum_e w_e |dy_e| / sum_e w_e |y_e|, a weighted mean of the elements' errors relative to
// the elements' size: at most the elements' rms relative error, so sqrt(D) e bounds it.
double fillTolerance(int stages, int maxK) {
  const char *m = std::getenv("PFRT_CUDA_FILL_MATH");
  const bool tf32 = m && std::string(m) == "tf32";
  const double u = std::ldexp(1.0, tf32 ? -11 : -8), u32 = std::ldexp(1.0, -24);
  const double perStage = std::sqrt(2.0 / 3.0) * u + maxK * u32;
  return std::sqrt(static_cast<double>(stages)) * perStage;
}
// GEMM stages on an encoder layer's longest path: Q (or K, V), QK^T, PV, Wo, W1, W2.
constexpr int kEncoderStages = 6;

// Sets an environment variable for one scope (tests run one at a time).
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

private:
  const char *name_;
  bool had_ = false;
  std::string old_;
};

pfrt_fill_layer_desc testEncoder() {
  pfrt_fill_layer_desc layer{};
  layer.kind = PFRT_LAYER_ENCODER;
  layer.hidden = 64;
  layer.heads = 4;
  layer.seq = 32;
  layer.ffn = 128;
  return layer;
}

// An MLP layer 32 -> 64 -> 32.
pfrt_fill_layer_desc testMlp() {
  pfrt_fill_layer_desc layer{};
  layer.kind = PFRT_LAYER_MLP;
  layer.in = 32;
  layer.hidden = 64;
  layer.out = 32;
  return layer;
}

TEST_F(CudaBackendTest, EncoderInferenceMatchesHost) {
  ProgramPtr p = fillProgram(PFRT_FILL_INFERENCE, testEncoder(), 3,
                             {{0, 1, 4, 0}, {1, 3, 4, 0}, {0, 3, 2, 4}});
  ReportPtr cuda = runOk(p.get(), cudaOptions(3));
  ReportPtr host = runOk(p.get(), hostSame(3));
  ASSERT_TRUE(cuda && host);
  EXPECT_EQ(cuda->data.backend, "cuda");
  EXPECT_EQ(cuda->data.jobs[0].samplesThisRun, 18u);
  EXPECT_EQ(cuda->data.jobs[0].samplesThisRun, host->data.jobs[0].samplesThisRun);
  // 3 layers of 6 GEMM stages; the longest reduction is the FFN's (K = ffn = 128).
  expectRel(cuda->data.jobs[0].checksum, host->data.jobs[0].checksum,
            fillTolerance(3 * kEncoderStages, 128), "checksum");
}

// The TF32 option (PFRT_CUDA_FILL_MATH=tf32) against the host, with TF32's unit roundoff; an
// unknown value is an error, not a silent default.
TEST_F(CudaBackendTest, Tf32OptionMatchesHostAndBadValueIsAnError) {
  ProgramPtr p = fillProgram(PFRT_FILL_INFERENCE, testEncoder(), 2, {{0, 2, 4, 0}});
  ReportPtr host = runOk(p.get(), hostSame(2));
  ASSERT_TRUE(host);
  {
    ScopedEnv env("PFRT_CUDA_FILL_MATH", "tf32");
    ReportPtr cuda = runOk(p.get(), cudaOptions(2));
    ASSERT_TRUE(cuda);
    expectRel(cuda->data.jobs[0].checksum, host->data.jobs[0].checksum,
              fillTolerance(2 * kEncoderStages, 128), "checksum (tf32)");
  }
  {
    ScopedEnv env("PFRT_CUDA_FILL_MATH", "fp8");
    pfrt_options o = cudaOptions(1);
    pfrt_report *r = nullptr;
    EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(pfrt_last_error()).find("PFRT_CUDA_FILL_MATH=fp8"), std::string::npos)
        << pfrt_last_error();
    pfrt_report_destroy(r);
  }
}

// Attention runs as one strided-batched GEMM over samples x heads per layer (QK^T and PV each).
// A batch of 8 in one chunk gives the result of the same 8 samples run one per chunk (batch 1:
// each sample's heads alone). The bf16 roundings of the operands are the same elementwise in
// both; only cuBLAS's fp32 accumulation order may differ (<= K 2^-24 per stage, K <= 128, and
// an occasional flipped bf16 rounding of an element that differs by that much, <= 2 u times the
// chance K 2^-24 / u of being that close to a rounding boundary: again K 2^-24 on average), so
// the checksums agree to D 3 K 2^-24 for D stages. Mixing samples or heads up changes O(1).
TEST_F(CudaBackendTest, BatchedAttentionMatchesPerSample) {
  ProgramPtr batched = fillProgram(PFRT_FILL_INFERENCE, testEncoder(), 1, {{0, 1, 8, 0}});
  std::vector<ChunkSpec> single;
  for (uint64_t k = 0; k < 8; ++k)
    single.push_back({0, 1, 1, k});
  ProgramPtr perSample = fillProgram(PFRT_FILL_INFERENCE, testEncoder(), 1, single);
  ReportPtr a = runOk(batched.get(), cudaOptions(2));
  ReportPtr b = runOk(perSample.get(), cudaOptions(2));
  ReportPtr host = runOk(batched.get(), hostSame(2));
  ASSERT_TRUE(a && b && host);
  ASSERT_EQ(a->data.jobs[0].samplesThisRun, 16u);
  ASSERT_EQ(b->data.jobs[0].samplesThisRun, 16u);
  expectRel(a->data.jobs[0].checksum, b->data.jobs[0].checksum,
            kEncoderStages * 3.0 * 128 * std::ldexp(1.0, -24), "batched vs per-sample");
  expectRel(a->data.jobs[0].checksum, host->data.jobs[0].checksum,
            fillTolerance(kEncoderStages, 128), "batched vs host");
}

// The hot loop allocates nothing: per-layer scratch is carved from arenas made before the loop,
// parked activations go to pinned buffers made before the loop, GEMM_CHAIN buffers are made and
// timed before it, and the batches' state comes from a fill pool grown before it (its reserved
// memory does not grow). Chunks alternate streamed weights and parked activations
// (enqueueChunkBubbles), so every path runs.
TEST_F(CudaBackendTest, HotLoopMakesNoAllocation) {
  const pfrt_fill_layer_desc mlp = testMlp();
  pfrt_fill_layer_desc chainLayer{};
  chainLayer.kind = PFRT_LAYER_GEMM_CHAIN;
  chainLayer.dim = 256;
  chainLayer.planned_us_per_sample = 20;
  struct Case {
    const char *name;
    pfrt_fill_kind kind;
    pfrt_fill_layer_desc layer;
    uint32_t layers;
    std::vector<ChunkSpec> chunks;
  };
  const std::vector<Case> cases = {
      {"encoder inference", PFRT_FILL_INFERENCE, testEncoder(), 3,
       {{0, 1, 4, 0}, {1, 3, 4, 0}, {0, 3, 2, 4}}},
      {"mlp training", PFRT_FILL_TRAINING, mlp, 3, {{0, 2, 8, 0}, {2, 4, 8, 0}, {4, 6, 8, 0}}},
      {"gemm chain", PFRT_FILL_INFERENCE, chainLayer, 2, {{0, 1, 2, 0}, {1, 2, 2, 0}}},
  };
  for (const Case &c : cases) {
    ProgramPtr p = fillProgram(c.kind, c.layer, c.layers, c.chunks);
    const CudaHotPathStats before = cudaHotPathStats();
    ReportPtr r = runOk(p.get(), cudaOptions(4));
    const CudaHotPathStats after = cudaHotPathStats();
    ASSERT_TRUE(r);
    EXPECT_GT(r->data.jobs[0].samplesThisRun, 0u) << c.name;
    EXPECT_EQ(after.deviceAllocs - before.deviceAllocs, 0u) << c.name;
    EXPECT_EQ(after.pinnedAllocs - before.pinnedAllocs, 0u) << c.name;
    EXPECT_EQ(after.poolGrowthBytes - before.poolGrowthBytes, 0u) << c.name;
    if (c.layer.kind != PFRT_LAYER_GEMM_CHAIN) { // the chain needs no scratch
      EXPECT_GT(after.scratchCarves - before.scratchCarves, 0u) << c.name;
    }
    std::printf("%s: %llu scratch carves, %llu batch sub-allocations from the fill pool, %llu "
                "device / %llu pinned allocations, pool growth %llu bytes\n",
                c.name, (unsigned long long)(after.scratchCarves - before.scratchCarves),
                (unsigned long long)(after.batchAllocs - before.batchAllocs),
                (unsigned long long)(after.deviceAllocs - before.deviceAllocs),
                (unsigned long long)(after.pinnedAllocs - before.pinnedAllocs),
                (unsigned long long)(after.poolGrowthBytes - before.poolGrowthBytes));
  }
}

TEST_F(CudaBackendTest, MlpTrainingMatchesHost) {
  const pfrt_fill_layer_desc layer = testMlp();
  // 3 layers -> 6 passes, split over three bubbles.
  ProgramPtr p = fillProgram(PFRT_FILL_TRAINING, layer, 3, {{0, 2, 8, 0}, {2, 4, 8, 0}, {4, 6, 8, 0}});
  ReportPtr cuda = runOk(p.get(), cudaOptions(5));
  ReportPtr host = runOk(p.get(), hostSame(5));
  ASSERT_TRUE(cuda && host);
  EXPECT_EQ(cuda->data.jobs[0].steps, 5u);
  // The loss: the forward path's 2 GEMMs per layer (D = 6, K <= 64); the loss 0.5 |y - t|^2 at
  // most doubles y's relative error (when |y - t| ~ |y|). The weights: D = 12 stages (forward and
  // backward) bound the gradients' relative error, and the updates are smaller than the weights.
  expectRel(cuda->data.jobs[0].checksum, host->data.jobs[0].checksum, 2 * fillTolerance(6, 64),
            "loss sum");
  expectRel(cuda->data.jobs[0].weightsChecksum, host->data.jobs[0].weightsChecksum,
            fillTolerance(12, 64), "weights");
}

TEST_F(CudaBackendTest, StreamPrioritiesAreApplied) {
  ProgramPtr p = fillProgram(PFRT_FILL_INFERENCE, samples::smallEncoder(), 1, {{0, 1, 1, 0}});
  ReportPtr r = runOk(p.get(), cudaOptions(1));
  ASSERT_TRUE(r);
  const std::vector<int32_t> &prio = r->data.devices[0].streamPriority;
  ASSERT_EQ(prio.size(), 3u);
#ifdef PFRT_HAVE_CUDA
  int least = 0, greatest = 0;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  EXPECT_EQ(prio[0], greatest) << "main stream";
  EXPECT_EQ(prio[1], least) << "fill stream";
  EXPECT_LE(prio[2], least) << "copy stream";
  EXPECT_GE(prio[2], greatest) << "copy stream";
  if (least != greatest) {
    EXPECT_LT(prio[0], prio[1]) << "main must have a higher priority than fill";
  }
  std::printf("stream priorities: main %d fill %d copy %d (range %d..%d)\n", prio[0], prio[1],
              prio[2], greatest, least);
#endif
  EXPECT_NE(std::string(pfrt_report_json(r.get())).find("\"cuda_priority\""), std::string::npos);
}

TEST_F(CudaBackendTest, MainComputeIsCalibratedToPlannedTime) {
  pfrt_program *raw = nullptr;
  PFRT_ASSERT_OK(pfrt_program_create("calibrated", &raw));
  ProgramPtr p(raw);
  uint32_t dev = 0, main = 0;
  pfrt_device_desc dd{};
  dd.gemm_dim = 2048;
  PFRT_ASSERT_OK(pfrt_program_add_device(p.get(), &dd, &dev));
  PFRT_ASSERT_OK(pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT,
                                            "main", &main));
  PFRT_ASSERT_OK(
      pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_FORWARD, 0, 0, 3000, 0));
  PFRT_ASSERT_OK(
      pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_BACKWARD, 0, 0, 6000, 0));
  PFRT_ASSERT_OK(
      pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_OPTIMIZER, 0, 0, 500, 0));
  ReportPtr r = runOk(p.get(), cudaOptions(6));
  ASSERT_TRUE(r);
  const DeviceReport &d = r->data.devices[0];
  const double planned[3] = {3000, 6000, 500};
  for (size_t i = 0; i < 3; ++i) {
    double sum = 0;
    for (size_t k = 1; k < d.mainOps().size(); ++k)
      sum += d.mainOps()[k][i].duration();
    double mean = sum / (d.mainOps().size() - 1);
    EXPECT_NEAR(mean, planned[i], 0.15 * planned[i] + 50) << "compute op " << i;
  }
  EXPECT_NEAR(r->data.iterationUsMean, 9500, 0.15 * 9500);
}

// An overly long fill chunk: the main stream does not wait for it (its next compute starts while
// the chunk still runs) and the overrun is counted.
TEST_F(CudaBackendTest, LongFillChunkDoesNotBlockMain) {
  pfrt_fill_layer_desc layer{};
  layer.kind = PFRT_LAYER_GEMM_CHAIN;
  layer.dim = 1024;
  layer.planned_us_per_sample = 20000; // 20 ms in a 0.5 ms bubble
  ProgramPtr p = fillProgram(PFRT_FILL_INFERENCE, layer, 1, {{0, 1, 1, 0}}, 2000);
  ReportPtr r = runOk(p.get(), cudaOptions(3));
  ASSERT_TRUE(r);
  const DeviceReport &d = r->data.devices[0];
  for (size_t k = 0; k < d.mainOps().size(); ++k) {
    const OpTime &nextCompute = d.mainOps()[k][3];
    const OpTime &chunk = d.streamOps[1][k][1];
    ASSERT_GE(chunk.start, 0);
    EXPECT_LT(nextCompute.start, chunk.end) << "iteration " << k << ": main waited for fill";
  }
  EXPECT_GE(r->data.overrunCount, 1u);
  std::printf("overruns %llu (%.0f us), switch latency %.1f us\n",
              (unsigned long long)r->data.overrunCount, r->data.overrunUs,
              r->data.switchLatencyMeanUs);
}

// The bubble bound on the GPU (misPredictedProgram: each chunk planned at 200 us, really 2 ms of
// GEMMs; bubble 1 idles 20 ms, bubble 0 idles 1 ms). The bubble's begin and end are GPU events
// resolved to the host clock, and the fill thread decides each chunk against the GPU's real
// progress. Once a chunk was measured, the 1 ms bubble's chunk never fits and is deferred to the
// next 20 ms bubble: the same counts as the host backend's BubbleBoundTest, now with GPU time.
TEST_F(CudaBackendTest, BoundedFillDefersWhatDoesNotFitItsBubble) {
  ProgramPtr p = misPredictedProgram();
  pfrt_options o = cudaOptions(7);
  // Whole chunks, as the host test's (BubbleBoundTest::boundedWhole): PFRT_FILL_BOUNDED would run
  // the first samples of the 1 ms bubble's chunk that fit.
  o.fill_policy = PFRT_FILL_BOUNDED_WHOLE;
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  const RunResult::Job &j = r->data.jobs[0];
  for (const auto &c : r->data.chunkRuns)
    std::printf("it %lld bubble %u predicted %.0f us, ran %.0f .. %.0f us%s\n",
                (long long)c.iteration, c.bubbleId, c.predictedUs, c.start, c.end,
                c.deferred ? " (deferred)" : "");
  EXPECT_EQ(j.chunksDeferred, 6u);
  EXPECT_EQ(j.chunksRun, 12u);
  EXPECT_EQ(j.chunksPending, 0u);
  EXPECT_EQ(j.samplesCompleted, kMisPredictedSamples);
  EXPECT_EQ(r->data.overrunCount, 0u) << r->data.overrunUs << " us over";
  // The same samples, some in later bubbles: the outputs are those of the unbounded run.
  ReportPtr all = runOk(p.get(), cudaOptions(7));
  ASSERT_TRUE(all);
  EXPECT_EQ(all->data.jobs[0].samplesCompleted, kMisPredictedSamples);
  expectRel(j.checksum, all->data.jobs[0].checksum, 1e-5, "checksum");
}

// Without the bound the same plan overruns the 1 ms bubble every iteration on the GPU too, so the
// test above can fail.
TEST_F(CudaBackendTest, UnboundedFillOverrunsTheSmallBubble) {
  ProgramPtr p = misPredictedProgram();
  ReportPtr r = runOk(p.get(), cudaOptions(7));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data.jobs[0].chunksDeferred, 0u);
  EXPECT_GE(r->data.overrunCount, 6u);
}

// Each bubble (bubbleUs) gets a chunk of batch 4 of four GEMM_CHAIN passes of passUs each on the
// GPU (links of dim^3, about 50 us at 2048 on an H200, so a pass is a few to a few dozen GEMMs),
// planned at plannedUs for the four. The default: 500 us passes planned at 200 us for the four,
// 10x too optimistic, in 1.5 ms bubbles, so the host admits the first chunk.
ProgramPtr fourPassProgram(double passUs = 500, double plannedUs = 200, double bubbleUs = 1500,
                           uint32_t dim = 2048) {
  pfrt_device_desc dd{};
  dd.planned_iteration_us = bubbleUs + 2000;
  pfrt_fill_job_desc jd{};
  jd.name = "chain4";
  jd.kind = PFRT_FILL_INFERENCE;
  pfrt_fill_layer_desc ld{};
  ld.kind = PFRT_LAYER_GEMM_CHAIN;
  ld.dim = dim;
  ld.planned_us_per_sample = passUs / 4; // x batch 4
  std::string error;
  const samples::OneDeviceProgram p = samples::oneDeviceProgram("gate", jd, ld, 4, &dd, &error);
  EXPECT_NE(p.program, nullptr) << error;
  ProgramPtr owner(p.program);
  if (!p.program)
    return owner;
  uint32_t ev = 0;
  pfrt_program_create_event(p.program, p.device, "b", &ev);
  pfrt_program_enqueue_compute(p.program, p.device, p.main, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 0);
  pfrt_bubble_desc b{};
  b.bubble_id = 0;
  b.planned_duration_us = bubbleUs;
  b.emulate_idle = 1;
  pfrt_fill_chunk_desc c{};
  c.bubble_id = 0;
  c.layer_end = 4;
  c.batch = 4;
  c.planned_us = plannedUs;
  EXPECT_EQ(samples::enqueueFilledBubble(p, ev, b, &c), PFRT_OK) << pfrt_last_error();
  pfrt_program_enqueue_compute(p.program, p.device, p.main, PFRT_COMPUTE_BACKWARD, 0, 0, 1000, 0);
  return owner;
}

// The device-side bound (DeviceGate.h). The host admits the first chunk on its plan (200 us in a
// 1.5 ms bubble); on the GPU the gate before each pass stops it once the next pass no longer fits
// (or main has resumed), so it ends near its bubble's end. With the gates off
// (PFRT_CUDA_DEVICE_GATE=0) the same chunk runs all four passes, about 2 ms, and overruns by about
// 500 us, more than the gated one: that run shows this test can fail. Nothing is lost either
// way: every planned sample is completed or pending at the end.
TEST_F(CudaBackendTest, DeviceGatesStopAChunkBetweenPasses) {
  ProgramPtr p = fourPassProgram();
  ASSERT_TRUE(p);
  pfrt_options o = cudaOptions(6);
  o.fill_policy = PFRT_FILL_BOUNDED;
  const CudaHotPathStats before = cudaHotPathStats();
  ReportPtr gated = runOk(p.get(), o);
  ASSERT_TRUE(gated);
  const CudaHotPathStats after = cudaHotPathStats();
  const uint64_t graphs = after.gatedChunks - before.gatedChunks;
  EXPECT_GE(graphs, 1u);
  std::printf("gated chunks: %llu, host time to each one's first pass (measured): %.1f us\n",
              (unsigned long long)graphs,
              graphs ? (after.gateBuildUs - before.gateBuildUs) / graphs : 0.0);
  EXPECT_TRUE(gated->data.boundedOnDevice);
  ReportPtr open;
  {
    ScopedEnv env("PFRT_CUDA_DEVICE_GATE", "0");
    open = runOk(p.get(), o);
  }
  ASSERT_TRUE(open);
  auto firstChunk = [](const ReportPtr &r) {
    for (const RunResult::ChunkRun &c : r->data.chunkRuns)
      if (c.iteration == 0)
        return c;
    return RunResult::ChunkRun{};
  };
  for (const ReportPtr *r : {&gated, &open}) {
    const RunResult::Job &j = (*r)->data.jobs[0];
    const RunResult::ChunkRun c = firstChunk(*r);
    std::printf("%s: first chunk passes [%u, %u) in %.0f us; %llu stopped on the GPU, overrun max "
                "%.0f us, total %.0f us; samples %llu done + %llu pending + %llu held "
                "(%llu iterations held)\n",
                r == &gated ? "gates on " : "gates off", c.passBegin, c.passEnd, c.end - c.start,
                (unsigned long long)j.chunksStoppedOnDevice, (*r)->data.overrunMaxUs,
                (*r)->data.overrunUs, (unsigned long long)j.samplesCompleted,
                (unsigned long long)j.samplesPending, (unsigned long long)j.samplesHeld,
                (unsigned long long)j.iterationsHeld);
    // Backpressure (docs/runtime.md §4b): with two chunks deferred the job holds its plan, and
    // a held iteration's batch is never begun: it counts in samples_held, not pending.
    EXPECT_EQ(j.samplesCompleted + j.samplesPending + j.samplesHeld, 6u * 4u)
        << "samples lost or counted twice";
  }
  EXPECT_EQ(firstChunk(open).passEnd, 4u);
  EXPECT_EQ(open->data.jobs[0].chunksStoppedOnDevice, 0u);
  EXPECT_FALSE(open->data.boundedOnDevice);
  EXPECT_LT(firstChunk(gated).passEnd, 4u) << "the GPU ran the pass that did not fit";
  EXPECT_GE(gated->data.jobs[0].chunksStoppedOnDevice, 1u);
  // The gated chunk ends after at most one pass that started in time; the ungated one runs its
  // fourth pass too (the host's time to build the graph delays the gated chunk's start, so the
  // margin between the two is not fixed).
  EXPECT_LT(gated->data.overrunMaxUs, open->data.overrunMaxUs);
}

// An MLP training job of three layers whose chunks of two passes (so they run gated under the
// bounded policy) alternate streamed weights and parked activations, one per 20 ms bubble.
ProgramPtr twoPassMlpProgram() {
  return fillProgram(PFRT_FILL_TRAINING, testMlp(), 3, {{0, 2, 8, 0}, {2, 4, 8, 0}, {4, 6, 8, 0}},
                     /*computeUs=*/300, /*bubbleUs=*/20000);
}

// Gated chunks compute what ungated ones do: an MLP training job whose chunks of two passes
// alternate streamed weights and parked activations, in bubbles that fit them (every gate opens:
// 20 ms bubbles, because each pass's gate waits for the host to build that pass's graph, about
// 0.1-0.3 ms estimated, while the tiny MLP's passes take tens of us on the GPU; in 0.5 ms
// bubbles the second gate could see the deadline),
// bounded (gated graphs: allocations on the side stream, the batch made behind the first gate,
// the loss behind the last, the snapshot commit) against unbounded (passes enqueued directly).
// Same kernels, same order, same cuBLAS handles: the results agree to fp32 round-off (bitwise,
// barring a reordered reduction).
TEST_F(CudaBackendTest, GatedChunksComputeWhatUngatedOnesDo) {
  ProgramPtr p = twoPassMlpProgram();
  pfrt_options bounded = cudaOptions(5);
  bounded.fill_policy = PFRT_FILL_BOUNDED;
  const CudaHotPathStats before = cudaHotPathStats();
  ReportPtr gated = runOk(p.get(), bounded);
  const CudaHotPathStats after = cudaHotPathStats();
  ReportPtr direct = runOk(p.get(), cudaOptions(5));
  ASSERT_TRUE(gated && direct);
  EXPECT_EQ(after.gatedChunks - before.gatedChunks, 15u) << "every chunk should run gated";
  EXPECT_EQ(gated->data.jobs[0].chunksStoppedOnDevice, 0u);
  EXPECT_EQ(gated->data.jobs[0].steps, 5u);
  EXPECT_EQ(direct->data.jobs[0].steps, 5u);
  expectRel(gated->data.jobs[0].checksum, direct->data.jobs[0].checksum, 1e-6, "loss sum");
  expectRel(gated->data.jobs[0].weightsChecksum, direct->data.jobs[0].weightsChecksum, 1e-6,
            "weights");
}

// The warm-up before the loop (PFRT_CUDA_WARMUP, docs/runtime.md §4b) runs every pass of the job's
// chunks behind gates that never open: with it on, an MLP training job (chunks of two passes, so
// they run gated) ends with the same losses and weights as with it off, and every chunk still
// runs gated with no pass stopped. A warm-up that ran a pass (an SGD step) or left a batch behind
// would change the weights or the step count.
TEST_F(CudaBackendTest, WarmUpChangesNoResult) {
  ProgramPtr p = twoPassMlpProgram();
  pfrt_options bounded = cudaOptions(5);
  bounded.fill_policy = PFRT_FILL_BOUNDED;
  const CudaHotPathStats before = cudaHotPathStats();
  ReportPtr warm = runOk(p.get(), bounded);
  const CudaHotPathStats after = cudaHotPathStats();
  ReportPtr cold;
  {
    ScopedEnv env("PFRT_CUDA_WARMUP", "0");
    cold = runOk(p.get(), bounded);
  }
  ASSERT_TRUE(warm && cold);
  EXPECT_EQ(after.gatedChunks - before.gatedChunks, 15u) << "the warm-up's chunks are not counted";
  EXPECT_EQ(after.deviceAllocs - before.deviceAllocs, 0u);
  for (const ReportPtr *r : {&warm, &cold}) {
    EXPECT_EQ((*r)->data.jobs[0].steps, 5u);
    EXPECT_EQ((*r)->data.jobs[0].chunksStoppedOnDevice, 0u);
  }
  expectRel(warm->data.jobs[0].checksum, cold->data.jobs[0].checksum, 1e-6, "loss sum");
  expectRel(warm->data.jobs[0].weightsChecksum, cold->data.jobs[0].weightsChecksum, 1e-6,
            "weights");
}

// A bad PFRT_CUDA_DEVICE_GATE is an error, not a silent default.
TEST_F(CudaBackendTest, BadDeviceGateValueIsAnError) {
  ProgramPtr p = fourPassProgram();
  ASSERT_TRUE(p);
  ScopedEnv env("PFRT_CUDA_DEVICE_GATE", "yes");
  pfrt_options o = cudaOptions(1);
  pfrt_report *r = nullptr;
  EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT) << pfrt_last_error();
  EXPECT_NE(std::string(pfrt_last_error()).find("PFRT_CUDA_DEVICE_GATE=yes"), std::string::npos)
      << pfrt_last_error();
  pfrt_report_destroy(r);
}

// A bad PFRT_CUDA_WARMUP is an error naming it, not a silent default.
TEST_F(CudaBackendTest, BadWarmUpValueIsAnError) {
  ProgramPtr p = fourPassProgram();
  ASSERT_TRUE(p);
  ScopedEnv env("PFRT_CUDA_WARMUP", "later");
  pfrt_options o = cudaOptions(1);
  pfrt_report *r = nullptr;
  EXPECT_EQ(pfrt_run(p.get(), &o, &r), PFRT_ERROR_INVALID_ARGUMENT) << pfrt_last_error();
  EXPECT_NE(std::string(pfrt_last_error()).find("PFRT_CUDA_WARMUP=later: expected 1 (on) or 0"),
            std::string::npos)
      << pfrt_last_error();
  pfrt_report_destroy(r);
}

// Fewer GPUs than devices: one stage runs on the GPU, its peers are emulated at planned times.
TEST_F(CudaBackendTest, ReplayModeRunsOneStage) {
  samples::PipelineSpec spec;
  spec.stages = 4;
  spec.microbatches = 4;
  spec.forwardUs = 1500;
  spec.backwardUs = 3000;
  spec.iterations = 4;
  spec.fillUsPerSample = 50;
  ProgramPtr p = buildOk(spec);
  ASSERT_TRUE(p);
  pfrt_options o = cudaOptions(0);
  o.stage = 1;
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data.backend, "cuda-replay");
  EXPECT_EQ(r->data.replayDevice, 1);
  EXPECT_EQ(r->data.devices[1].backend, "cuda");
  EXPECT_EQ(r->data.devices[0].backend, "emulated");
  EXPECT_NEAR(r->data.iterationUsMean, r->data.plannedIterationUs,
              0.2 * r->data.plannedIterationUs);
  // Only the real stage fills (the plan has chunks on every stage).
  EXPECT_GT(r->data.jobs[0].samplesThisRun, 0u);
  EXPECT_TRUE(r->data.devices[1].fill);
  EXPECT_FALSE(r->data.devices[0].fill);
  std::printf("replay: planned %.0f us, measured %.0f us, fill samples %llu\n",
              r->data.plannedIterationUs, r->data.iterationUsMean,
              (unsigned long long)r->data.jobs[0].samplesThisRun);
}

// A tail bubble and the next iteration's warm-up bubble share one idle stretch; the main stream
// passes both begin edges before it waits for its next input. The gate of a tail chunk must not
// take the warm-up's begin edge for main having resumed (it did, and every tail chunk was stopped
// on the GPU before its first pass), and the host's bound must give the tail its planned share
// (BubbleBoundTest.ATailBubbleFollowedByTheNextWarmupKeepsItsPlannedShare on the host). Replay:
// device 1, which has both bubbles, on the GPU; a 3 ms chunk of two gated passes in its 4 ms tail.
// The chain's GEMMs are 2048 wide (about 50 us each on an H200): with 16-wide ones (a few us) a
// 1.5 ms pass is hundreds of GEMMs, whose graph took the host longer to build (2.4-2.7 ms) than
// the pass runs, so the second gate saw its deadline for that reason alone (docs/runtime.md §10b).
TEST_F(CudaBackendTest, TailBubbleChunksRunBeforeTheNextWarmup) {
  ProgramPtr p = tailThenWarmupProgram(3000, 2, /*dim=*/2048);
  ASSERT_TRUE(p);
  pfrt_options o = cudaOptions(4);
  o.stage = 1;
  o.fill_policy = PFRT_FILL_BOUNDED;
  const CudaHotPathStats before = cudaHotPathStats();
  ReportPtr r = runOk(p.get(), o);
  ASSERT_TRUE(r);
  const CudaHotPathStats after = cudaHotPathStats();
  const RunResult::Job &j = r->data.jobs[0];
  const BubbleReport &tail = r->data.devices[1].bubbles[1];
  std::printf("tail chunks: %llu gated, %llu run, %llu deferred, %llu stopped on the GPU; samples "
              "%llu of 4; tail measured %.0f us (planned %.0f)\n",
              (unsigned long long)(after.gatedChunks - before.gatedChunks),
              (unsigned long long)j.chunksRun, (unsigned long long)j.chunksDeferred,
              (unsigned long long)j.chunksStoppedOnDevice, (unsigned long long)j.samplesCompleted,
              tail.measuredMeanUs, tail.plannedUs);
  EXPECT_EQ(r->data.devices[1].backend, "cuda");
  EXPECT_GE(after.gatedChunks - before.gatedChunks, 1u) << "the chunks should run gated";
  EXPECT_EQ(j.chunksStoppedOnDevice, 0u) << "a gate took the warm-up's edge for main resuming";
  EXPECT_EQ(j.samplesCompleted, 4u);
  for (const RunResult::ChunkRun &c : r->data.chunkRuns) {
    EXPECT_EQ(c.bubbleId, 1u);
    EXPECT_FALSE(c.deferred) << "iteration " << c.iteration;
  }
}

// A checkpoint written by the CUDA backend resumes on the host backend with the same results.
TEST_F(CudaBackendTest, CheckpointIsPortableToHost) {
  pfrt_fill_layer_desc layer{};
  layer.kind = PFRT_LAYER_MLP;
  layer.in = 16;
  layer.hidden = 32;
  layer.out = 16;
  ProgramPtr p = fillProgram(PFRT_FILL_TRAINING, layer, 2, {{0, 2, 4, 0}, {2, 4, 4, 0}});
  std::string cp = tempPath("cuda.ckpt");
  pfrt_options o = cudaOptions(2);
  o.checkpoint_path = cp.c_str();
  ReportPtr first = runOk(p.get(), o);
  ASSERT_TRUE(first);
  pfrt_options h = hostSame(4);
  h.checkpoint_path = cp.c_str();
  ReportPtr resumed = runOk(p.get(), h);
  ReportPtr full = runOk(p.get(), hostSame(4));
  ASSERT_TRUE(resumed && full);
  EXPECT_EQ(resumed->data.firstIteration, 2);
  EXPECT_EQ(resumed->data.jobs[0].steps, 4u);
  // The first two steps' losses came from the GPU (2 layers: D = 4, K <= 32; see
  // MlpTrainingMatchesHost for the factor 2).
  expectRel(resumed->data.jobs[0].checksum, full->data.jobs[0].checksum,
            2 * fillTolerance(4, 32), "loss sum");
  std::remove(cp.c_str());
}


// ---------------------------------------------------------------------------------------------
// CUDA sessions (pfrt_session_* with backend CUDA): the framework's stream is a cudaStream_t of
// the test whose "work" is timed spin kernels (cuda::spin: one thread reading the GPU's global
// timer), so the test knows when the GPU reaches each bubble. Not host functions that sleep: the
// driver may run the host functions of all streams on one thread (cuda_runtime_api.h,
// cudaLaunchHostFunc), so a fill stream's host function would wait behind the framework's.
// ---------------------------------------------------------------------------------------------
#ifdef PFRT_HAVE_CUDA

struct SessionDeleter {
  void operator()(pfrt_session *s) const { pfrt_session_destroy(s); }
};
using SessionPtr = std::unique_ptr<pfrt_session, SessionDeleter>;

double steadyUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Keeps `stream` busy for `us` (the framework's forward/backward as far as the session can tell).
void busy(cudaStream_t stream, uint64_t us) {
  cuda::spin(static_cast<double>(us), stream);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
}

pfrt_session_options sessionOptions(pfrt_backend backend, pfrt_fill_policy policy) {
  pfrt_session_options o;
  pfrt_session_options_init(&o);
  o.backend = backend;
  o.fill_policy = policy;
  o.max_dim = 4096; // the same (no) scaling on both backends
  o.fill_idle_priority = 0;
  return o;
}

SessionPtr sessionOk(const pfrt_program *p, const pfrt_session_options &o) {
  pfrt_session *s = nullptr;
  EXPECT_EQ(pfrt_session_create(p, 0, &o, &s), PFRT_OK) << pfrt_last_error();
  return SessionPtr(s);
}

std::vector<pfrt_session_bubble> sessionBubbles(pfrt_session *s) {
  uint32_t n = 0;
  EXPECT_EQ(pfrt_session_rank_info(s, nullptr, nullptr, nullptr, &n), PFRT_OK);
  std::vector<pfrt_session_bubble> out(n);
  for (uint32_t k = 0; k < n; ++k)
    EXPECT_EQ(pfrt_session_bubble_get(s, k, &out[k]), PFRT_OK) << pfrt_last_error();
  return out;
}

std::vector<pfrt_session_chunk> chunkLog(pfrt_session *s) {
  uint32_t n = 0;
  EXPECT_EQ(pfrt_session_chunk_count(s, &n), PFRT_OK) << pfrt_last_error();
  std::vector<pfrt_session_chunk> out(n);
  for (uint32_t i = 0; i < n; ++i)
    EXPECT_EQ(pfrt_session_chunk_get(s, i, &out[i]), PFRT_OK) << pfrt_last_error();
  return out;
}

class FrameworkStream {
public:
  FrameworkStream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess); }
  ~FrameworkStream() {
    cudaStreamSynchronize(s_);
    cudaStreamDestroy(s_);
  }
  cudaStream_t get() const { return s_; }

private:
  cudaStream_t s_ = nullptr;
};

// The mis-predicted plan (TestUtil: chunks planned at 200 us that take 2 ms of GPU work; bubble 1
// of 20 ms, bubble 0 of 1 ms) driven by a framework whose stream is 50 ms behind its host thread
// when the first bubble is begun: the whole loop (7 iterations) is queued in far less time than the
// stream takes, so bubble_begin / bubble_end do not wait for the GPU. No chunk starts before the GPU
// reaches its bubble; the bound then gives the executor's counts (BoundedFillDefers... above):
// once a chunk was measured, the 1 ms bubble's chunk never fits and runs in the next 20 ms bubble.
TEST_F(CudaBackendTest, SessionFillWaitsForTheGpuAndIsBounded) {
  ProgramPtr p = misPredictedProgram();
  // Whole chunks: the executor test's counts (BoundedFillDefersWhatDoesNotFitItsBubble).
  SessionPtr s = sessionOk(p.get(), sessionOptions(PFRT_BACKEND_CUDA, PFRT_FILL_BOUNDED_WHOLE));
  ASSERT_TRUE(s);
  FrameworkStream fw;
  const std::vector<pfrt_session_bubble> bubbles = sessionBubbles(s.get());
  ASSERT_EQ(bubbles.size(), 2u);
  busy(fw.get(), 50000);
  const double t0 = steadyUs();
  double endMaxUs = 0;
  for (int it = 0; it < 7; ++it) {
    for (const pfrt_session_bubble &b : bubbles) {
      busy(fw.get(), 1000); // the forward before the bubble
      ASSERT_EQ(pfrt_session_bubble_begin(s.get(), b.bubble_id, fw.get(), 0), PFRT_OK)
          << pfrt_last_error();
      busy(fw.get(), static_cast<uint64_t>(b.planned_duration_us)); // the bubble itself
      const double e0 = steadyUs();
      pfrt_session_bubble_result r{};
      ASSERT_EQ(pfrt_session_bubble_end(s.get(), b.bubble_id, &r), PFRT_OK) << pfrt_last_error();
      endMaxUs = std::max(endMaxUs, steadyUs() - e0);
      EXPECT_EQ(r.end_wait_us, 0.0);
    }
    ASSERT_EQ(pfrt_session_iteration_end(s.get()), PFRT_OK) << pfrt_last_error();
  }
  const double queuedUs = steadyUs() - t0;
  // The stream has ~200 ms of work queued; the host thread got through the loop long before.
  uint32_t early = 99;
  ASSERT_EQ(pfrt_session_chunk_count(s.get(), &early), PFRT_OK);
  std::printf("queued 7 iterations in %.0f us (bubble_end at most %.0f us); chunks run before the "
              "GPU reached the first bubble: %u\n",
              queuedUs, endMaxUs, early);
  EXPECT_LT(queuedUs, 25000.0) << "bubble_begin/bubble_end waited for the GPU";
  EXPECT_EQ(early, 0u) << "fill started before the GPU reached the bubble";
  pfrt_session_stats st{};
  ASSERT_EQ(pfrt_session_get_stats(s.get(), &st), PFRT_OK) << pfrt_last_error(); // waits
  EXPECT_EQ(st.iterations, 7u);
  EXPECT_EQ(st.bubbles, 14u);
  EXPECT_EQ(st.chunks_deferred, 6u);
  EXPECT_EQ(st.chunks_run, 12u);
  EXPECT_EQ(st.chunks_pending, 0u);
  EXPECT_EQ(st.samples_completed, kMisPredictedSamples);
  EXPECT_EQ(st.overrun_count, 0u) << st.overrun_us << " us over";
  for (const pfrt_session_chunk &c : chunkLog(s.get())) {
    std::printf("it %llu bubble %u admitted %.0f us, ran %.0f .. %.0f us, deadline %.0f us%s\n",
                (unsigned long long)c.iteration, c.bubble_id, c.admitted_us, c.start_us, c.end_us,
                c.deadline_us, c.deferred ? " (deferred)" : "");
    // Times are from the bubble's begin edge as the GPU reached it. Edge times map GPU time to
    // the host clock through one event read after a synchronise (CudaBackend::begin/resyncClock),
    // whose wake-up latency (tens of us) is the resolution of that mapping.
    EXPECT_GE(c.admitted_us, -100.0);
    EXPECT_GE(c.start_us, c.admitted_us);
    EXPECT_LE(c.admitted_us + c.predicted_us, c.deadline_us);
  }
}

// pipefill.torch hands the session torch's current stream, which is by default the legacy default
// stream (cudaStream_t 0, torch.cuda.default_stream().cuda_stream): the framework's bubbles on it
// are filled as on a stream of its own (the fill streams are non-blocking, so nothing on the
// legacy stream waits for them or they for it). The same loop as above: the same counts.
TEST_F(CudaBackendTest, SessionFillsBehindTheLegacyDefaultStream) {
  ProgramPtr p = misPredictedProgram();
  // Whole chunks: the executor test's counts (BoundedFillDefersWhatDoesNotFitItsBubble).
  SessionPtr s = sessionOk(p.get(), sessionOptions(PFRT_BACKEND_CUDA, PFRT_FILL_BOUNDED_WHOLE));
  ASSERT_TRUE(s);
  cudaStream_t legacy = nullptr; // cudaStreamLegacy's handle as torch passes it: 0
  busy(legacy, 50000);
  for (int it = 0; it < 7; ++it) {
    for (const pfrt_session_bubble &b : sessionBubbles(s.get())) {
      busy(legacy, 1000);
      ASSERT_EQ(pfrt_session_bubble_begin(s.get(), b.bubble_id, legacy, 0), PFRT_OK)
          << pfrt_last_error();
      busy(legacy, static_cast<uint64_t>(b.planned_duration_us));
      ASSERT_EQ(pfrt_session_bubble_end(s.get(), b.bubble_id, nullptr), PFRT_OK)
          << pfrt_last_error();
    }
    ASSERT_EQ(pfrt_session_iteration_end(s.get()), PFRT_OK) << pfrt_last_error();
  }
  pfrt_session_stats st{};
  ASSERT_EQ(pfrt_session_get_stats(s.get(), &st), PFRT_OK) << pfrt_last_error();
  for (const pfrt_session_chunk &c : chunkLog(s.get()))
    std::printf("legacy stream: it %llu bubble %u admitted %.0f us, ran %.0f .. %.0f us, "
                "deadline %.0f us%s\n",
                (unsigned long long)c.iteration, c.bubble_id, c.admitted_us, c.start_us,
                c.end_us, c.deadline_us, c.deferred ? " (deferred)" : "");
  EXPECT_EQ(st.chunks_run, 12u);
  EXPECT_EQ(st.chunks_deferred, 6u);
  EXPECT_EQ(st.samples_completed, kMisPredictedSamples);
  EXPECT_EQ(st.overrun_count, 0u) << st.overrun_us << " us over";
  ASSERT_EQ(cudaStreamSynchronize(legacy), cudaSuccess);
}

// bubble_end's edge stops the fill when the GPU passes it, not when the host calls it: a fill task
// of 1 ms steps in a bubble whose duration is 1 s but whose end the framework's stream reaches
// 20 ms after its begin runs about 20 steps (not 1000), and bubble_end returns at once.
TEST_F(CudaBackendTest, SessionStopsAtTheEndEdge) {
  ProgramPtr p = misPredictedProgram();
  SessionPtr s = sessionOk(p.get(), sessionOptions(PFRT_BACKEND_CUDA, PFRT_FILL_BOUNDED));
  ASSERT_TRUE(s);
  pfrt_session_task_desc d{};
  d.name = "sleeper";
  d.step_us = 1000;
  d.step = [](void *, uint64_t *samples) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    *samples = 1;
    return PFRT_OK;
  };
  ASSERT_EQ(pfrt_session_task_add(s.get(), &d, nullptr), PFRT_OK) << pfrt_last_error();
  FrameworkStream fw;
  busy(fw.get(), 10000);
  ASSERT_EQ(pfrt_session_bubble_begin(s.get(), 1, fw.get(), 1e6), PFRT_OK) << pfrt_last_error();
  busy(fw.get(), 20000);
  const double e0 = steadyUs();
  ASSERT_EQ(pfrt_session_bubble_end(s.get(), 1, nullptr), PFRT_OK) << pfrt_last_error();
  const double endUs = steadyUs() - e0;
  pfrt_session_task_stats ts{};
  ASSERT_EQ(pfrt_session_task_get(s.get(), 0, &ts), PFRT_OK) << pfrt_last_error(); // waits
  std::printf("bubble_end returned in %.0f us; %llu steps in the 20 ms window\n", endUs,
              (unsigned long long)ts.steps);
  EXPECT_LT(endUs, 5000.0);
  // 20 ms minus the 2 ms chunk, 1 ms steps (sleep overshoot makes them longer), and at most one
  // step started just before the edge passed.
  EXPECT_GE(ts.steps, 5u);
  EXPECT_LE(ts.steps, 22u);
}

// A task's step on a CUDA session puts its GPU work on the session's fill stream
// (pfrt_session_fill_stream) and returns at once; the runtime waits for that stream after the
// step, so the step's measured time is its GPU work (a 3 ms spin kernel on the stream), not the
// microseconds its enqueue took, and the bound admits the next step only after it. Without that
// wait the step would be measured at a few us and every step of a 1 s bubble would queue at once.
TEST_F(CudaBackendTest, SessionTaskStepsAreTimedWithTheirGpuWork) {
  ProgramPtr p = misPredictedProgram();
  SessionPtr s = sessionOk(p.get(), sessionOptions(PFRT_BACKEND_CUDA, PFRT_FILL_BOUNDED));
  ASSERT_TRUE(s);
  void *fill = nullptr;
  int gpu = -1;
  ASSERT_EQ(pfrt_session_fill_stream(s.get(), &fill, &gpu), PFRT_OK) << pfrt_last_error();
  ASSERT_NE(fill, nullptr);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(gpu, current) << "the session takes the GPU current when it is made";
  pfrt_session_task_desc d{};
  d.name = "on-the-fill-stream";
  d.step_us = 100; // a wrong estimate: the measured steps correct it
  d.user_data = fill;
  d.max_steps = 5;
  d.step = [](void *stream, uint64_t *samples) {
    *samples = 1;
    cuda::spin(3000, static_cast<cudaStream_t>(stream));
    return cudaGetLastError() == cudaSuccess ? PFRT_OK : PFRT_ERROR_BACKEND;
  };
  ASSERT_EQ(pfrt_session_task_add(s.get(), &d, nullptr), PFRT_OK) << pfrt_last_error();
  FrameworkStream fw;
  ASSERT_EQ(pfrt_session_bubble_begin(s.get(), 1, fw.get(), 1e6), PFRT_OK) << pfrt_last_error();
  busy(fw.get(), 100000); // the bubble: 100 ms on the framework's stream
  ASSERT_EQ(pfrt_session_bubble_end(s.get(), 1, nullptr), PFRT_OK) << pfrt_last_error();
  pfrt_session_task_stats ts{};
  ASSERT_EQ(pfrt_session_task_get(s.get(), 0, &ts), PFRT_OK) << pfrt_last_error(); // waits
  std::printf("%llu steps, measured p50 %.0f us, max %.0f us, task time %.0f us\n",
              (unsigned long long)ts.steps, ts.measured_us_p50, ts.measured_us_max, ts.task_us);
  EXPECT_EQ(ts.steps, 5u);
  EXPECT_GE(ts.measured_us_p50, 2500.0) << "the step was timed without its GPU work";
  EXPECT_GE(ts.task_us, 5 * 2500.0);
}

// The gates' other test, main's end edge, in a CUDA session: a chunk of four 10 ms passes, planned
// at its true 40 ms, in a bubble the framework gives 1 s but whose end its stream reaches 15 ms
// after the begin. The host admits the chunk (40 ms of 1 s); on the GPU the gate before each pass
// reads the edge word that bubble_end's edge sets on the framework's stream, so the chunk stops at
// the first pass that would start after it: 2 passes (the third starts at 20 ms), not 4. With
// PFRT_CUDA_DEVICE_GATE=0 the same chunk runs all 4, 25 ms past the bubble: the test can fail.
TEST_F(CudaBackendTest, SessionGatesStopAtTheEndEdge) {
  ProgramPtr p = fourPassProgram(10000, 40000, 50000, 4096);
  ASSERT_TRUE(p);
  auto firstChunk = [&](bool gates, uint64_t *stopped) {
    std::unique_ptr<ScopedEnv> env;
    if (!gates)
      env = std::make_unique<ScopedEnv>("PFRT_CUDA_DEVICE_GATE", "0");
    SessionPtr s = sessionOk(p.get(), sessionOptions(PFRT_BACKEND_CUDA, PFRT_FILL_BOUNDED));
    pfrt_session_chunk first{};
    if (!s)
      return first;
    FrameworkStream fw;
    busy(fw.get(), 5000);
    EXPECT_EQ(pfrt_session_bubble_begin(s.get(), 0, fw.get(), 1e6), PFRT_OK) << pfrt_last_error();
    busy(fw.get(), 15000);
    EXPECT_EQ(pfrt_session_bubble_end(s.get(), 0, nullptr), PFRT_OK) << pfrt_last_error();
    pfrt_session_stats st{};
    EXPECT_EQ(pfrt_session_get_stats(s.get(), &st), PFRT_OK) << pfrt_last_error(); // waits
    *stopped = st.chunks_stopped_on_device;
    const std::vector<pfrt_session_chunk> log = chunkLog(s.get());
    if (!log.empty())
      first = log.front();
    std::printf("gates %s: first chunk passes [%u, %u), %.0f .. %.0f us after the begin; %llu "
                "stopped on the GPU\n",
                gates ? "on " : "off", first.layer_begin, first.layer_end, first.start_us,
                first.end_us, (unsigned long long)st.chunks_stopped_on_device);
    return first;
  };
  uint64_t stoppedOn = 0, stoppedOff = 0;
  const pfrt_session_chunk on = firstChunk(true, &stoppedOn);
  const pfrt_session_chunk off = firstChunk(false, &stoppedOff);
  EXPECT_EQ(off.layer_end, 4u);
  EXPECT_EQ(stoppedOff, 0u);
  EXPECT_GE(on.layer_end, 1u);
  EXPECT_LE(on.layer_end, 3u) << "the GPU ran passes after main's end edge had passed";
  EXPECT_EQ(stoppedOn, 1u);
}

// The numbers: every chunk of the encoder plan run by a CUDA session (unbounded: the same chunks
// whatever the GPU's speed) gives the host session's checksum within the fill GEMMs' tolerance.
TEST_F(CudaBackendTest, SessionChecksumMatchesHostSession) {
  ProgramPtr p = fillProgram(PFRT_FILL_INFERENCE, testEncoder(), 3,
                             {{0, 1, 4, 0}, {1, 3, 4, 0}, {0, 3, 2, 4}});
  SessionPtr cuda = sessionOk(p.get(), sessionOptions(PFRT_BACKEND_CUDA, PFRT_FILL_UNBOUNDED));
  SessionPtr host = sessionOk(p.get(), sessionOptions(PFRT_BACKEND_HOST, PFRT_FILL_UNBOUNDED));
  ASSERT_TRUE(cuda && host);
  FrameworkStream fw;
  const std::vector<pfrt_session_bubble> bubbles = sessionBubbles(cuda.get());
  for (int it = 0; it < 3; ++it) {
    for (const pfrt_session_bubble &b : bubbles) {
      busy(fw.get(), 300);
      ASSERT_EQ(pfrt_session_bubble_begin(cuda.get(), b.bubble_id, fw.get(), 0), PFRT_OK)
          << pfrt_last_error();
      busy(fw.get(), 500);
      ASSERT_EQ(pfrt_session_bubble_end(cuda.get(), b.bubble_id, nullptr), PFRT_OK)
          << pfrt_last_error();
      ASSERT_EQ(pfrt_session_bubble_begin(host.get(), b.bubble_id, nullptr, 0), PFRT_OK)
          << pfrt_last_error();
      ASSERT_EQ(pfrt_session_bubble_wait(host.get()), PFRT_OK) << pfrt_last_error();
      ASSERT_EQ(pfrt_session_bubble_end(host.get(), b.bubble_id, nullptr), PFRT_OK)
          << pfrt_last_error();
    }
    ASSERT_EQ(pfrt_session_iteration_end(cuda.get()), PFRT_OK) << pfrt_last_error();
    ASSERT_EQ(pfrt_session_iteration_end(host.get()), PFRT_OK) << pfrt_last_error();
  }
  pfrt_report_job c{}, h{};
  ASSERT_EQ(pfrt_session_get_job(cuda.get(), 0, &c), PFRT_OK) << pfrt_last_error();
  ASSERT_EQ(pfrt_session_get_job(host.get(), 0, &h), PFRT_OK) << pfrt_last_error();
  EXPECT_EQ(c.samples_completed, 18u);
  EXPECT_EQ(c.samples_completed, h.samples_completed);
  expectRel(c.checksum, h.checksum, fillTolerance(3 * kEncoderStages, 128), "session checksum");
}

#endif // PFRT_HAVE_CUDA

} // namespace
} // namespace test
} // namespace pfrt
