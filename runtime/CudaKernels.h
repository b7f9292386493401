// Device kernels of the CUDA backend (fill workloads, timed spins) and cuBLAS helpers. Row-major
// conventions match HostKernels.h so the two backends compute the same thing.
#ifndef PFRT_CUDA_KERNELS_H
#define PFRT_CUDA_KERNELS_H

#include "runtime/CudaGemmPlan.h"
#include "runtime/DeviceGate.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pfrt {
namespace cuda {

// Row-major C = alpha * op(A) * op(B) + beta * C (op(A): M x K, op(B): K x N), FP32 SGEMM (the
// main job's calibrated chain).
cublasStatus_t gemm(cublasHandle_t h, bool transA, bool transB, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

// Fill GEMMs with cublasGemmEx: row-major fp32 C = alpha * op(A) * op(B) + beta * C where A and B
// are of type `ab` (CUDA_R_16BF with CUBLAS_COMPUTE_32F: bf16 tensor cores, fp32 accumulation;
// CUDA_R_32F with CUBLAS_COMPUTE_32F_FAST_TF32: TF32 tensor cores). Leading dimensions are in
// elements, row-major; the column-major call is toCublas() of CudaGemmPlan.h.
cublasStatus_t gemmEx(cublasHandle_t h, bool transA, bool transB, int M, int N, int K, float alpha,
                      const void *A, int lda, const void *B, int ldb, float beta, float *C, int ldc,
                      cudaDataType ab, cublasComputeType_t compute);
// Same for a RowMajorGemm; with g.batch > 1 (or nonzero strides) one cublasGemmStridedBatchedEx.
cublasStatus_t gemmPlanEx(cublasHandle_t h, const RowMajorGemm &g, float alpha, const void *A,
                             const void *B, float beta, float *C, cudaDataType ab,
                             cublasComputeType_t compute);

// y[i] = bf16(x[i]) (round to nearest even); y holds n __nv_bfloat16.
void toBf16(const float *x, void *y, size_t n, cudaStream_t s);
// Attention layouts (CudaGemmPlan.h): split: out[i] = x[rowMajorOfHeadMajor(i)], row-major
// [batch * seq][heads * dh] to head-major [batch][heads][seq][dh] (each (sample, head) a contiguous
// seq x dh block, so one strided-batched GEMM covers all); merge is its inverse. out is fp32 or,
// with bf16, __nv_bfloat16 (converted).
void splitHeads(const float *x, void *out, bool bf16, int batch, int seq, int heads, int dh,
                cudaStream_t s);
void mergeHeads(const float *x, void *out, bool bf16, int batch, int seq, int heads, int dh,
                cudaStream_t s);

// out[b * per + e] = uniformAt(seed, kStreamInput + sampleBegin + b, e)
void makeInput(float *out, uint64_t seed, uint64_t sampleBegin, uint32_t batch, size_t per,
               cudaStream_t s);
// out[b * perOut + e] = targetAt(seed, sampleBegin + b, e, inElems)
void makeTarget(float *out, uint64_t seed, uint64_t sampleBegin, uint32_t batch, size_t perOut,
                size_t inElems, cudaStream_t s);
void softmaxRows(float *x, int rows, int cols, cudaStream_t s);
// out = LayerNorm(x + residual) * gamma + beta per row (residual may be null; out may alias x).
void layerNorm(const float *x, const float *residual, const float *gamma, const float *beta,
               float *out, int rows, int cols, cudaStream_t s);
// y = gelu(x) (in place allowed)
void gelu(const float *x, float *y, size_t n, cudaStream_t s);
// d *= gelu'(x)
void geluBackwardMul(float *d, const float *x, size_t n, cudaStream_t s);
// dy = (y - t) / batch; *loss += 0.5 * sum((y - t)^2) / batch (double, on the device)
void mseLoss(const float *y, const float *t, float *dy, size_t n, int batch, double *loss,
             cudaStream_t s);
// *acc += sum_i |y_i| * checksumWeight(base + i)
void checksum(const float *y, size_t n, uint64_t base, double *acc, cudaStream_t s);
// acc[0] += *loss; acc[1] += *loss
void addLoss(const double *loss, double *acc, cudaStream_t s);
// *out = %globaltimer (ns) when the kernel runs (out: device-visible, e.g. mapped host memory).
void readGlobalTimer(unsigned long long *out, cudaStream_t s);
// *p = v, ordered on s (the bubble edges' device-side mark when cuStreamWriteValue64 is missing).
void writeValue(unsigned long long *p, unsigned long long v, cudaStream_t s);
// Loads every kernel of this file on the current device now. CUDA loads a kernel on its first
// use by default (lazy loading, CUDA_MODULE_LOADING): a fill chunk's first kernel would pay that
// inside its bubble, and the load may wait for work already queued on the device (the framework's
// step), which the chunk's measured span and the predictor would then carry. Tries every kernel
// and returns the first error (a kernel with no code for this GPU).
cudaError_t preloadKernels();
// Adds to `graph`, as a root, the one-thread gate before one pass of a bounded fill chunk: it
// decides with gateApply (DeviceGate.h) from the GPU's clock, *lastEdge (device memory: token + 1
// of the last bubble edge the main stream passed) and *state (one per fill stream;
// device-visible host memory), and sets `handle`, the condition of the pass's IF node.
cudaError_t addGateNode(cudaGraph_t graph, cudaGraphConditionalHandle handle,
                        const unsigned long long *lastEdge, GateState *state,
                        const GateArgs &args, cudaGraphNode_t *node);
// Keeps the stream busy for `us` microseconds (one thread, globaltimer + nanosleep).
void spin(double us, cudaStream_t s);

} // namespace cuda
} // namespace pfrt

#endif // PFRT_CUDA_KERNELS_H
