// The CUDA backend's cuBLAS argument conventions (runtime/CudaGemmPlan.h), checked on the host: a
// reference of cuBLAS's documented column-major semantics, fed the arguments the backend passes,
// must reproduce the row-major GEMMs and the attention over samples x heads computed directly from
// their definitions. Runs without a GPU (part of pfrt-tests).
#include "runtime/CudaGemmPlan.h"
#include "runtime/Random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pfrt {
namespace test {
namespace {

using cuda::CublasGemm;
using cuda::RowMajorGemm;

// cuBLAS strided-batched GEMM as documented: column-major, C[i + j ldc] = alpha sum_l
// op(A)(i, l) op(B)(l, j) + beta C[i + j ldc], op(X)(i, l) = X[i + l ld] (N) or X[l + i ld] (T),
// batch p at element offsets p * stride.
void referenceCublas(const CublasGemm &c, double alpha, const std::vector<double> &A,
                     const std::vector<double> &B, double beta, std::vector<double> &C) {
  for (int p = 0; p < c.batch; ++p) {
    const double *a = A.data() + p * c.strideA, *b = B.data() + p * c.strideB;
    double *out = C.data() + p * c.strideC;
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) {
        double sum = 0;
        for (int l = 0; l < c.k; ++l) {
          const double x = c.transa ? a[l + size_t(i) * c.lda] : a[i + size_t(l) * c.lda];
          const double y = c.transb ? b[j + size_t(l) * c.ldb] : b[l + size_t(j) * c.ldb];
          sum += x * y;
        }
        out[i + size_t(j) * c.ldc] = alpha * sum + beta * out[i + size_t(j) * c.ldc];
      }
  }
}

// Runs a RowMajorGemm the way the backend does: cuBLAS's first operand is our B.
void runRowMajor(const RowMajorGemm &g, double alpha, const std::vector<double> &A,
                 const std::vector<double> &B, double beta, std::vector<double> &C) {
  referenceCublas(cuda::toCublas(g), alpha, B, A, beta, C);
}

std::vector<double> randomVector(size_t n, uint64_t stream) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = uniformAt(7, stream, i);
  return v;
}

TEST(CudaGemmPlanTest, RowMajorGemmMapsToCublas) {
  const int M = 5, N = 7, K = 3;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      RowMajorGemm g;
      g.transA = ta;
      g.transB = tb;
      g.M = M;
      g.N = N;
      g.K = K;
      // Stored shapes (rows x cols) with padded leading dimensions, as sub-matrices are passed.
      const int aRows = ta ? K : M, aCols = ta ? M : K, bRows = tb ? N : K, bCols = tb ? K : N;
      g.lda = aCols + 2;
      g.ldb = bCols + 1;
      g.ldc = N + 3;
      std::vector<double> A = randomVector(size_t(aRows) * g.lda, 1);
      std::vector<double> B = randomVector(size_t(bRows) * g.ldb, 2);
      std::vector<double> C = randomVector(size_t(M) * g.ldc, 3), expect = C;
      const double alpha = 0.75, beta = -0.5;
      for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) {
          double sum = 0;
          for (int l = 0; l < K; ++l)
            sum += (ta ? A[size_t(l) * g.lda + r] : A[size_t(r) * g.lda + l]) *
                   (tb ? B[size_t(c) * g.ldb + l] : B[size_t(l) * g.ldb + c]);
          expect[size_t(r) * g.ldc + c] = alpha * sum + beta * expect[size_t(r) * g.ldc + c];
        }
      runRowMajor(g, alpha, A, B, beta, C);
      for (size_t i = 0; i < C.size(); ++i)
        ASSERT_NEAR(C[i], expect[i], 1e-12) << "transA " << ta << " transB " << tb << " at " << i;
    }
}

TEST(CudaGemmPlanTest, HeadMajorLayoutIsAPermutation) {
  const int batch = 3, seq = 5, heads = 4, dh = 6;
  const size_t n = size_t(batch) * seq * heads * dh;
  std::vector<int> hit(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const size_t r = cuda::rowMajorOfHeadMajor(i, seq, heads, dh);
    ASSERT_LT(r, n);
    ++hit[r];
  }
  for (size_t r = 0; r < n; ++r)
    EXPECT_EQ(hit[r], 1) << r;
  // Element (sample 2, head 3, row 4, column 5) of the head-major layout.
  const size_t i = ((size_t(2) * heads + 3) * seq + 4) * dh + 5;
  EXPECT_EQ(cuda::rowMajorOfHeadMajor(i, seq, heads, dh),
            (size_t(2) * seq + 4) * (size_t(heads) * dh) + 3 * dh + 5);
}

// Attention of every sample and head from the definition versus the backend's plan: split to the
// head-major layout, one strided-batched QK^T, softmax per row, one strided-batched PV, merge.
TEST(CudaGemmPlanTest, BatchedAttentionEqualsPerSampleAttention) {
  const int batch = 3, seq = 5, heads = 2, dh = 4, H = heads * dh;
  const size_t n = size_t(batch) * seq * H;
  const std::vector<double> Q = randomVector(n, 11), K = randomVector(n, 12),
                            V = randomVector(n, 13);
  const double scale = 1.0 / std::sqrt(double(dh));
  // Per sample and head, from the definition.
  std::vector<double> expect(n, 0.0);
  for (int b = 0; b < batch; ++b)
    for (int j = 0; j < heads; ++j)
      for (int r = 0; r < seq; ++r) {
        std::vector<double> p(seq);
        double mx = -1e300, sum = 0;
        for (int c = 0; c < seq; ++c) {
          double s = 0;
          for (int d = 0; d < dh; ++d)
            s += Q[size_t(b * seq + r) * H + j * dh + d] * K[size_t(b * seq + c) * H + j * dh + d];
          p[c] = scale * s;
          mx = std::max(mx, p[c]);
        }
        for (int c = 0; c < seq; ++c)
          sum += (p[c] = std::exp(p[c] - mx));
        for (int d = 0; d < dh; ++d) {
          double o = 0;
          for (int c = 0; c < seq; ++c)
            o += p[c] / sum * V[size_t(b * seq + c) * H + j * dh + d];
          expect[size_t(b * seq + r) * H + j * dh + d] = o;
        }
      }
  // The plan.
  std::vector<double> qh(n), kh(n), vh(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t r = cuda::rowMajorOfHeadMajor(i, seq, heads, dh);
    qh[i] = Q[r];
    kh[i] = K[r];
    vh[i] = V[r];
  }
  std::vector<double> scores(size_t(batch) * heads * seq * seq, 0.0);
  runRowMajor(cuda::attentionScores(batch, seq, heads, dh), scale, qh, kh, 0.0, scores);
  for (size_t row = 0; row < scores.size() / seq; ++row) { // softmaxRows(scores, BH * S, S)
    double *x = scores.data() + row * seq, mx = -1e300, sum = 0;
    for (int c = 0; c < seq; ++c)
      mx = std::max(mx, x[c]);
    for (int c = 0; c < seq; ++c)
      sum += (x[c] = std::exp(x[c] - mx));
    for (int c = 0; c < seq; ++c)
      x[c] /= sum;
  }
  std::vector<double> oh(n, 0.0), out(n, 0.0);
  runRowMajor(cuda::attentionValues(batch, seq, heads, dh), 1.0, scores, vh, 0.0, oh);
  for (size_t i = 0; i < n; ++i)
    out[cuda::rowMajorOfHeadMajor(i, seq, heads, dh)] = oh[i];
  for (size_t i = 0; i < n; ++i)
    ASSERT_NEAR(out[i], expect[i], 1e-12) << i;
}

} // namespace
} // namespace test
} // namespace pfrt
