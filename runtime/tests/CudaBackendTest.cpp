// CUDA backend tests. Always built; every test skips with a visible message when
// cudaGetDeviceCount() returns 0 or an error. They compare CUDA results with the host backend and
// check stream priorities, the calibrated main compute, replay mode and non-blocking fill.
#include "runtime/tests/TestUtil.h"

#include <cmath>
#include <cstdio>

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
}

TEST_F(CudaBackendTest, EncoderInferenceMatchesHost) {
  pfrt_fill_layer_desc layer{};
  layer.kind = PFRT_LAYER_ENCODER;
  layer.hidden = 64;
  layer.heads = 4;
  layer.seq = 32;
  layer.ffn = 128;
  ProgramPtr p = fillProgram(PFRT_FILL_INFERENCE, layer, 3,
                             {{0, 1, 4, 0}, {1, 3, 4, 0}, {0, 3, 2, 4}});
  ReportPtr cuda = runOk(p.get(), cudaOptions(3));
  ReportPtr host = runOk(p.get(), hostSame(3));
  ASSERT_TRUE(cuda && host);
  EXPECT_EQ(cuda->data.backend, "cuda");
  EXPECT_EQ(cuda->data.jobs[0].samplesThisRun, 18u);
  EXPECT_EQ(cuda->data.jobs[0].samplesThisRun, host->data.jobs[0].samplesThisRun);
  expectRel(cuda->data.jobs[0].checksum, host->data.jobs[0].checksum, 1e-3, "checksum");
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
  expectRel(cuda->data.jobs[0].checksum, host->data.jobs[0].checksum, 1e-3, "loss sum");
  expectRel(cuda->data.jobs[0].weightsChecksum, host->data.jobs[0].weightsChecksum, 1e-3,
            "weights");
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
  expectRel(resumed->data.jobs[0].checksum, full->data.jobs[0].checksum, 1e-3, "loss sum");
  std::remove(cp.c_str());
}

} // namespace
} // namespace test
} // namespace pfrt
