// Numerics of the fill workloads: the BLAS path against plain loops, the MLP backward against
// finite differences, and whole runs (chunks across bubbles, batches) against a naive reference.
#include "runtime/HostKernels.h"
#include "runtime/Random.h"
#include "runtime/Workload.h"
#include "runtime/tests/TestUtil.h"

#include <cmath>

namespace pfrt {
namespace test {
namespace {

double maxRelDiff(const std::vector<float> &a, const std::vector<float> &b) {
  double maxAbs = 1e-12, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    maxAbs = std::max(maxAbs, std::fabs(double(b[i])));
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
  }
  return diff / maxAbs;
}

// A one-device program with `job` described by `layer` x layers, one fill chunk per entry of
// `chunks` ({layer_begin, layer_end, batch, sample_begin}), each in its own bubble.
ProgramPtr fillProgram(pfrt_fill_kind kind, const pfrt_fill_layer_desc &layer, uint32_t layers,
                       const std::vector<ChunkSpec> &chunks, uint64_t samplesPerIteration = 0) {
  pfrt_program *raw = nullptr;
  EXPECT_EQ(pfrt_program_create("numerics", &raw), PFRT_OK);
  ProgramPtr p(raw);
  pfrt_program_set_seed(p.get(), 99);
  uint32_t dev = 0, main = 0, fill = 0, job = 0;
  pfrt_program_add_device(p.get(), nullptr, &dev);
  pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_MAIN, PFRT_PRIORITY_DEFAULT, "main", &main);
  pfrt_program_create_stream(p.get(), dev, PFRT_STREAM_FILL, PFRT_PRIORITY_DEFAULT, "fill", &fill);
  pfrt_fill_job_desc jd{};
  jd.name = "job";
  jd.kind = kind;
  jd.seed = 5;
  jd.learning_rate = 0.05f;
  jd.samples_per_iteration = samplesPerIteration;
  pfrt_program_add_fill_job(p.get(), &jd, &job);
  for (uint32_t l = 0; l < layers; ++l)
    EXPECT_EQ(pfrt_fill_job_add_layer(p.get(), job, &layer), PFRT_OK) << pfrt_last_error();
  enqueueChunkBubbles(p.get(), dev, main, fill, job, chunks, /*computeUs=*/200,
                      /*bubbleUs=*/200, /*plannedUs=*/0);
  pfrt_program_enqueue_compute(p.get(), dev, main, PFRT_COMPUTE_BACKWARD, 0, 0, 200, 0);
  EXPECT_EQ(pfrt_program_validate(p.get()), PFRT_OK) << pfrt_last_error();
  return p;
}

TEST(NumericsTest, GemmBlasMatchesNaive) {
  host::initBlas();
  const int M = 7, N = 5, K = 9;
  std::vector<float> a(M * K), b(K * N), at(K * M), bt(N * K), c1(M * N, 1), c2(M * N, 1);
  for (int i = 0; i < M * K; ++i)
    a[i] = uniformAt(1, 1, i);
  for (int i = 0; i < K * N; ++i)
    b[i] = uniformAt(1, 2, i);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k)
      at[k * M + i] = a[i * K + k];
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j)
      bt[j * K + k] = b[k * N + j];
  host::gemm(false, true, true, M, N, K, 0.5f, at.data(), M, bt.data(), K, 2.0f, c1.data(), N);
  host::gemm(true, false, false, M, N, K, 0.5f, a.data(), K, b.data(), N, 2.0f, c2.data(), N);
  EXPECT_LT(maxRelDiff(c1, c2), 1e-5);
}

TEST(NumericsTest, SoftmaxAndLayerNormBasics) {
  std::vector<float> x = {1, 2, 3, 4, -1, 0, 1, 100};
  host::softmaxRows(x.data(), 2, 4);
  for (int r = 0; r < 2; ++r) {
    double s = 0;
    for (int c = 0; c < 4; ++c)
      s += x[r * 4 + c];
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
  std::vector<float> y = {1, 2, 3, 4}, g = {1, 1, 1, 1}, be = {0, 0, 0, 0}, out(4);
  host::layerNorm(y.data(), nullptr, g.data(), be.data(), out.data(), 1, 4);
  double mean = 0, var = 0;
  for (float v : out)
    mean += v / 4;
  for (float v : out)
    var += (v - mean) * (v - mean) / 4;
  EXPECT_NEAR(mean, 0, 1e-6);
  EXPECT_NEAR(var, 1, 1e-4);
}

TEST(NumericsTest, EncoderLayerBlasMatchesNaive) {
  host::initBlas();
  pfrt_program *raw = nullptr;
  pfrt_program_create("x", &raw);
  ProgramPtr p(raw);
  uint32_t job = 0;
  pfrt_fill_job_desc jd{};
  jd.kind = PFRT_FILL_INFERENCE;
  pfrt_program_add_fill_job(p.get(), &jd, &job);
  pfrt_fill_layer_desc l = samples::smallEncoder();
  l.seq = 12;
  pfrt_fill_job_add_layer(p.get(), job, &l);
  JobShape shape = makeJobShape(raw->program, job, 0);
  std::vector<std::vector<float>> w = initLayerWeights(shape, 0);
  const int batch = 3;
  std::vector<float> x(shape.inputElems(batch)), y1(x.size()), y2(x.size());
  makeInput(shape, 10, batch, x.data());
  host::encoderForward(false, shape.layers[0], host::encoderWeights(w), x.data(), y1.data(), batch);
  host::encoderForward(true, shape.layers[0], host::encoderWeights(w), x.data(), y2.data(), batch);
  EXPECT_LT(maxRelDiff(y1, y2), 1e-4);
  // Post-LN output rows are normalised (gamma ~ 1, beta ~ 0): values are O(1), not degenerate.
  double absMean = 0;
  for (float v : y1)
    absMean += std::fabs(v) / y1.size();
  EXPECT_GT(absMean, 0.3);
  EXPECT_LT(absMean, 3.0);
}

TEST(NumericsTest, MlpBackwardMatchesNaiveAndFiniteDifferences) {
  host::initBlas();
  LayerShape ls;
  ls.kind = PFRT_LAYER_MLP;
  ls.in = 6;
  ls.mid = 10;
  ls.out = 4;
  const int rows = 5;
  std::vector<float> w1(ls.in * ls.mid), w2(ls.mid * ls.out), x(rows * ls.in), dy(rows * ls.out);
  for (size_t i = 0; i < w1.size(); ++i)
    w1[i] = 0.5f * uniformAt(3, 1, i);
  for (size_t i = 0; i < w2.size(); ++i)
    w2[i] = 0.5f * uniformAt(3, 2, i);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = uniformAt(3, 3, i);
  for (size_t i = 0; i < dy.size(); ++i)
    dy[i] = uniformAt(3, 4, i);
  std::vector<float> hpre(rows * ls.mid), y(rows * ls.out);
  host::mlpForward(false, ls, w1.data(), w2.data(), x.data(), hpre.data(), y.data(), rows);
  std::vector<float> dx1(x.size()), dw1a(w1.size()), dw2a(w2.size());
  std::vector<float> dx2(x.size()), dw1b(w1.size()), dw2b(w2.size());
  host::mlpBackward(false, ls, w1.data(), w2.data(), x.data(), hpre.data(), dy.data(), dx1.data(),
                    dw1a.data(), dw2a.data(), rows);
  host::mlpBackward(true, ls, w1.data(), w2.data(), x.data(), hpre.data(), dy.data(), dx2.data(),
                    dw1b.data(), dw2b.data(), rows);
  EXPECT_LT(maxRelDiff(dx1, dx2), 1e-5);
  EXPECT_LT(maxRelDiff(dw1a, dw1b), 1e-5);
  EXPECT_LT(maxRelDiff(dw2a, dw2b), 1e-5);

  // L = sum(dy * y): dL/dW1 by central differences.
  auto loss = [&](const std::vector<float> &W1, const std::vector<float> &W2,
                  const std::vector<float> &X) {
    std::vector<float> hp(rows * ls.mid), yy(rows * ls.out);
    host::mlpForward(true, ls, W1.data(), W2.data(), X.data(), hp.data(), yy.data(), rows);
    double s = 0;
    for (size_t i = 0; i < yy.size(); ++i)
      s += double(dy[i]) * yy[i];
    return s;
  };
  const float eps = 1e-2f;
  for (size_t i : {size_t(0), size_t(7), size_t(23), w1.size() - 1}) {
    std::vector<float> p1 = w1, m1 = w1;
    p1[i] += eps;
    m1[i] -= eps;
    double fd = (loss(p1, w2, x) - loss(m1, w2, x)) / (2 * eps);
    EXPECT_NEAR(dw1a[i], fd, 2e-3 + 1e-2 * std::fabs(fd)) << "dW1[" << i << "]";
  }
  for (size_t i : {size_t(1), size_t(13), w2.size() - 1}) {
    std::vector<float> p2 = w2, m2 = w2;
    p2[i] += eps;
    m2[i] -= eps;
    double fd = (loss(w1, p2, x) - loss(w1, m2, x)) / (2 * eps);
    EXPECT_NEAR(dw2a[i], fd, 2e-3 + 1e-2 * std::fabs(fd)) << "dW2[" << i << "]";
  }
  for (size_t i : {size_t(2), size_t(17)}) {
    std::vector<float> px = x, mx = x;
    px[i] += eps;
    mx[i] -= eps;
    double fd = (loss(w1, w2, px) - loss(w1, w2, mx)) / (2 * eps);
    EXPECT_NEAR(dx1[i], fd, 2e-3 + 1e-2 * std::fabs(fd)) << "dX[" << i << "]";
  }
}

// A whole run: the inference checksum equals the naive reference computed here.
TEST(NumericsTest, InferenceRunMatchesNaiveReference) {
  pfrt_fill_layer_desc layer = samples::smallEncoder();
  ProgramPtr p = fillProgram(PFRT_FILL_INFERENCE, layer, 2, {{0, 2, 3, 0}});
  ReportPtr r = runOk(p.get(), hostOptions(2));
  ASSERT_TRUE(r);
  JobShape shape = makeJobShape(p->program, 0, 128);
  std::vector<std::vector<float>> w0 = initLayerWeights(shape, 0), w1 = initLayerWeights(shape, 1);
  double expected = 0;
  for (uint64_t it = 0; it < 2; ++it) {
    const uint32_t batch = 3;
    std::vector<float> a(shape.inputElems(batch)), b(a.size());
    makeInput(shape, it * 3, batch, a.data());
    host::encoderForward(true, shape.layers[0], host::encoderWeights(w0), a.data(), b.data(), batch);
    host::encoderForward(true, shape.layers[1], host::encoderWeights(w1), b.data(), a.data(), batch);
    expected += outputChecksum(shape, it * 3, batch, a.data());
  }
  EXPECT_EQ(r->data.jobs[0].samplesThisRun, 6u);
  EXPECT_NEAR(r->data.jobs[0].checksum, expected, 1e-4 * expected);
}

// Splitting a batch's layers over two bubbles, or the samples over two batches, does not change
// the outputs.
TEST(NumericsTest, ChunkingDoesNotChangeResults) {
  pfrt_fill_layer_desc layer = samples::smallEncoder();
  ProgramPtr whole = fillProgram(PFRT_FILL_INFERENCE, layer, 3, {{0, 3, 4, 0}});
  ProgramPtr layers = fillProgram(PFRT_FILL_INFERENCE, layer, 3, {{0, 1, 4, 0}, {1, 3, 4, 0}});
  ProgramPtr batches = fillProgram(PFRT_FILL_INFERENCE, layer, 3, {{0, 3, 2, 0}, {0, 3, 2, 2}});
  ReportPtr a = runOk(whole.get(), hostOptions(2));
  ReportPtr b = runOk(layers.get(), hostOptions(2));
  ReportPtr c = runOk(batches.get(), hostOptions(2));
  ASSERT_TRUE(a && b && c);
  double x = a->data.jobs[0].checksum;
  EXPECT_EQ(a->data.jobs[0].samplesThisRun, 8u);
  EXPECT_EQ(b->data.jobs[0].samplesThisRun, 8u);
  EXPECT_EQ(c->data.jobs[0].samplesThisRun, 8u);
  EXPECT_NEAR(b->data.jobs[0].checksum, x, 1e-9 * x);
  EXPECT_NEAR(c->data.jobs[0].checksum, x, 1e-5 * x);
}

// A training run (forward, MSE loss, backward, SGD) equals the naive reference step by step.
TEST(NumericsTest, TrainingRunMatchesNaiveReference) {
  pfrt_fill_layer_desc layer = samples::smallMlp();
  // 2 layers -> 4 passes: forward in one bubble, backward + update in the next.
  ProgramPtr p = fillProgram(PFRT_FILL_TRAINING, layer, 2, {{0, 2, 4, 0}, {2, 4, 4, 0}});
  const uint32_t iterations = 3;
  ReportPtr r = runOk(p.get(), hostOptions(iterations));
  ASSERT_TRUE(r);
  JobShape shape = makeJobShape(p->program, 0, 128);
  std::vector<std::vector<std::vector<float>>> w = {initLayerWeights(shape, 0),
                                                    initLayerWeights(shape, 1)};
  double lossSum = 0;
  std::vector<double> losses;
  for (uint32_t it = 0; it < iterations; ++it) {
    const int rows = 4;
    std::vector<std::vector<float>> xs(2), hs(2);
    std::vector<float> act(shape.inputElems(rows));
    makeInput(shape, it * 4, rows, act.data());
    for (int l = 0; l < 2; ++l) {
      const LayerShape &ls = shape.layers[l];
      std::vector<float> hpre(rows * ls.mid), y(rows * ls.out);
      host::mlpForward(true, ls, w[l][0].data(), w[l][1].data(), act.data(), hpre.data(), y.data(),
                       rows);
      xs[l] = act;
      hs[l] = hpre;
      act = y;
    }
    std::vector<float> t(act.size()), dy(act.size());
    makeTarget(shape, it * 4, rows, t.data());
    double loss = host::mseLoss(act.data(), t.data(), dy.data(), act.size(), rows);
    losses.push_back(loss);
    lossSum += loss;
    for (int l = 1; l >= 0; --l) {
      const LayerShape &ls = shape.layers[l];
      std::vector<float> dx(rows * ls.in), dw1(w[l][0].size()), dw2(w[l][1].size());
      host::mlpBackward(true, ls, w[l][0].data(), w[l][1].data(), xs[l].data(), hs[l].data(),
                        dy.data(), dx.data(), dw1.data(), dw2.data(), rows);
      host::sgdUpdate(w[l][0].data(), dw1.data(), dw1.size(), shape.learningRate);
      host::sgdUpdate(w[l][1].data(), dw2.data(), dw2.size(), shape.learningRate);
      dy = dx;
    }
  }
  const RunResult::Job &job = r->data.jobs[0];
  EXPECT_EQ(job.steps, iterations);
  EXPECT_EQ(job.samplesThisRun, 4u * iterations);
  EXPECT_NEAR(job.checksum, lossSum, 1e-5 * lossSum);
  std::vector<std::vector<float>> flat = {w[0][0], w[0][1], w[1][0], w[1][1]};
  double wsum = tensorsChecksum(flat);
  EXPECT_NEAR(job.weightsChecksum, wsum, 1e-5 * wsum);
}

// Training on the same samples again lowers the loss (the update has the right sign).
TEST(NumericsTest, TrainingReducesLoss) {
  pfrt_fill_layer_desc layer = samples::smallMlp();
  // Every iteration trains one step on 8 new samples; targets are seeded noise, so the model
  // learns to shrink its outputs towards them, which lowers the mean loss.
  ProgramPtr p = fillProgram(PFRT_FILL_TRAINING, layer, 2, {{0, 4, 8, 0}});
  pfrt_options o = hostOptions(1);
  ReportPtr first = runOk(p.get(), o);
  ASSERT_TRUE(first);
  o.iterations = 40;
  ReportPtr many = runOk(p.get(), o);
  ASSERT_TRUE(many);
  double firstLoss = first->data.jobs[0].lossSum;
  double meanLoss = many->data.jobs[0].lossSum / many->data.jobs[0].steps;
  EXPECT_LT(meanLoss, firstLoss) << "SGD does not reduce the MSE loss";
}

} // namespace
} // namespace test
} // namespace pfrt
