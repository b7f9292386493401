// The CUDA backend's cuBLAS argument conventions, in plain C++ (no CUDA headers) so that the host
// tests check them (runtime/tests/CudaGemmPlanTest.cpp) on a machine without a GPU:
//   - the row-major GEMMs of the fill layers and the column-major cuBLAS call that computes each;
//   - attention over samples x heads: the head-major layout splitHeads/mergeHeads make and the two
//     strided-batched GEMMs (QK^T, PV) over it.
#ifndef PFRT_CUDA_GEMM_PLAN_H
#define PFRT_CUDA_GEMM_PLAN_H

#include "runtime/HostDevice.h"

#include <cstddef>

namespace pfrt {
namespace cuda {

// Row-major C (M x N, leading dimension ldc) = alpha op(A) op(B) + beta C with op(A) M x K and
// op(B) K x N (A stored K x M when transA, B stored N x K when transB), `batch` times at element
// strides strideA/B/C.
struct RowMajorGemm {
  bool transA = false, transB = false;
  int M = 0, N = 0, K = 0;
  int lda = 0, ldb = 0, ldc = 0;
  long long strideA = 0, strideB = 0, strideC = 0;
  int batch = 1;
};

// One (unbatched) row-major GEMM.
inline RowMajorGemm rowMajorGemm(bool transA, bool transB, int M, int N, int K, int lda, int ldb,
                                 int ldc) {
  RowMajorGemm g;
  g.transA = transA;
  g.transB = transB;
  g.M = M;
  g.N = N;
  g.K = K;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  return g;
}

// The cuBLAS (column-major) call computing a RowMajorGemm: a row-major matrix read column-major is
// its transpose, so C^T = op(B)^T op(A)^T: cuBLAS's first operand is our B and its second our A,
// with m = N, n = M and each operand keeping its own leading dimension and stride.
struct CublasGemm {
  bool transa = false, transb = false; // op of cuBLAS's first (our B) and second (our A) operand
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;       // of cuBLAS's first operand (our B), second (our A), C
  long long strideA = 0, strideB = 0, strideC = 0;
  int batch = 1;
};

inline CublasGemm toCublas(const RowMajorGemm &g) {
  CublasGemm c;
  c.transa = g.transB;
  c.transb = g.transA;
  c.m = g.N;
  c.n = g.M;
  c.k = g.K;
  c.lda = g.ldb;
  c.ldb = g.lda;
  c.ldc = g.ldc;
  c.strideA = g.strideB;
  c.strideB = g.strideA;
  c.strideC = g.strideC;
  c.batch = g.batch;
  return c;
}

// Head-major layout of attention: element i of [batch][heads][seq][dh] is element
// rowMajorOfHeadMajor(i) of the row-major [batch * seq][heads * dh] tensor (a sample's rows
// together, head j in columns [j dh, (j + 1) dh)). splitHeads copies out[i] = x[that],
// mergeHeads out[that] = x[i].
PFRT_HOST_DEVICE inline size_t rowMajorOfHeadMajor(size_t i, int seq, int heads, int dh) {
  const size_t c = i % dh, r = (i / dh) % seq, bj = i / (size_t(dh) * seq);
  const size_t j = bj % heads, b = bj / heads;
  return (b * seq + r) * (size_t(heads) * dh) + j * dh + c;
}

// scores_i (seq x seq) = Q_i K_i^T for i over batch * heads, Q and K head-major: one seq x dh
// block per (sample, head) at stride seq * dh; scores contiguous, one seq x seq block each.
inline RowMajorGemm attentionScores(int batch, int seq, int heads, int dh) {
  RowMajorGemm g;
  g.transA = false;
  g.transB = true;
  g.M = seq;
  g.N = seq;
  g.K = dh;
  g.lda = dh;
  g.ldb = dh;
  g.ldc = seq;
  g.strideA = g.strideB = (long long)seq * dh;
  g.strideC = (long long)seq * seq;
  g.batch = batch * heads;
  return g;
}

// O_i (seq x dh) = P_i V_i for i over batch * heads, P the softmaxed scores, V and O head-major.
inline RowMajorGemm attentionValues(int batch, int seq, int heads, int dh) {
  RowMajorGemm g;
  g.M = seq;
  g.N = dh;
  g.K = seq;
  g.lda = seq;
  g.ldb = dh;
  g.ldc = dh;
  g.strideA = (long long)seq * seq;
  g.strideB = g.strideC = (long long)seq * dh;
  g.batch = batch * heads;
  return g;
}

} // namespace cuda
} // namespace pfrt

#endif // PFRT_CUDA_GEMM_PLAN_H
