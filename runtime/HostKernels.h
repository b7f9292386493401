// Host implementations of the fill-job layers. Every function takes `naive`: false uses CPU BLAS
// (OpenBLAS cblas_sgemm), true uses plain loops; the tests check one against the other.
#ifndef PFRT_HOST_KERNELS_H
#define PFRT_HOST_KERNELS_H

#include "runtime/Workload.h"

#include <cstddef>
#include <vector>

namespace pfrt {
namespace host {

// Makes the BLAS single-threaded (each stream is a thread already). Idempotent.
void initBlas();

// Main-stage compute of the host backend's measured time model: a fixed unit of CPU work (one
// 96^3 sgemm on thread-local buffers). workUnitUs() is calibrated once per process (the median of
// several trials timed in thread CPU time, so the time other processes hold the core does not
// count: the unit's uncontended cost) and cached, so every run in the process turns
// a planned time into the same number of units: runs with and without fill do identical work.
double workUnitUs();
// Units that make up `us` real microseconds at the calibrated speed (at least 1 when us > 0).
long workUnitsFor(double us);
void runWorkUnits(long units);
// CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID), us.
double threadCpuUs();
// Tests only: workUnitsFor() returns `factor` x the calibrated units, standing for a machine that
// runs main compute slower (factor > 1) than it was calibrated. 1 restores the calibration.
void setWorkFactorForTesting(double factor);

// Row-major C = alpha * op(A) * op(B) + beta * C with op(A): M x K, op(B): K x N.
void gemm(bool naive, bool transA, bool transB, int M, int N, int K, float alpha, const float *A,
          int lda, const float *B, int ldb, float beta, float *C, int ldc);

void softmaxRows(float *x, int rows, int cols);
// out = LayerNorm(x + residual) * gamma + beta, per row (residual may be null).
void layerNorm(const float *x, const float *residual, const float *gamma, const float *beta,
               float *out, int rows, int cols);
float gelu(float x);
float geluGrad(float x);

// Encoder weights in the order of LayerShape::weightSizes().
struct EncoderWeights {
  const float *wq, *wk, *wv, *wo, *w1, *w2, *g1, *b1, *g2, *b2;
};
EncoderWeights encoderWeights(const std::vector<std::vector<float>> &w);

// Post-LN encoder block on `batch` samples of shape.seq rows: y = block(x). x and y may alias.
void encoderForward(bool naive, const LayerShape &shape, const EncoderWeights &w, const float *x,
                    float *y, int batch);

// MLP forward on `rows` rows: hpre = x W1, y = GELU(hpre) W2.
void mlpForward(bool naive, const LayerShape &shape, const float *w1, const float *w2,
                const float *x, float *hpre, float *y, int rows);
// MLP backward: from dy, computes dx (may be null), dw1, dw2 (overwritten).
void mlpBackward(bool naive, const LayerShape &shape, const float *w1, const float *w2,
                 const float *x, const float *hpre, const float *dy, float *dx, float *dw1,
                 float *dw2, int rows);
// 0.5 * sum((y - t)^2) / batch, and dy = (y - t) / batch.
double mseLoss(const float *y, const float *t, float *dy, size_t n, int batch);
// w -= lr * g
void sgdUpdate(float *w, const float *g, size_t n, float lr);

} // namespace host
} // namespace pfrt

#endif // PFRT_HOST_KERNELS_H
