// CUDA backend tests. Always built; every test skips with a visible message when
// cudaGetDeviceCount() returns 0 or an error. They compare CUDA results with the host backend (with
// tolerances derived from the fill GEMMs' precision, fillTolerance), batched attention with
// per-sample attention, and check the allocation-free hot loop, stream priorities, the calibrated
// main compute, replay mode and non-blocking fill.
#include "runtime/Backend.h"
#include "runtime/tests/TestUtil.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#ifdef PFRT_HAVE_CUDA
#include <cuda_runtime.h>
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

// One device; one bubble per entry of `chunks`, each with one fill chunk; alternating chunks
// stream their weights from pinned host memory and park activations on the host.
ProgramPtr fillProgram(pfrt_fill_kind kind, const pfrt_fill_layer_desc &layer, uint32_t layers,
                       const std::vector<ChunkSpec> &chunks, double computeUs = 300) {
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
  enqueueChunkBubbles(p.get(), dev, main, fill, job, chunks, computeUs, /*bubbleUs=*/500,
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
  pfrt_fill_layer_desc mlp{};
  mlp.kind = PFRT_LAYER_MLP;
  mlp.in = 32;
  mlp.hidden = 64;
  mlp.out = 32;
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
  pfrt_fill_layer_desc layer{};
  layer.kind = PFRT_LAYER_MLP;
  layer.in = 32;
  layer.hidden = 64;
  layer.out = 32;
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
    for (size_t k = 1; k < d.mainOps.size(); ++k)
      sum += d.mainOps[k][i].duration();
    double mean = sum / (d.mainOps.size() - 1);
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
  for (size_t k = 0; k < d.mainOps.size(); ++k) {
    const OpTime &nextCompute = d.mainOps[k][3];
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
  o.fill_policy = PFRT_FILL_BOUNDED;
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

} // namespace
} // namespace test
} // namespace pfrt
