// CUDA backend, cuBLAS workloads: the fill jobs' layers (encoder, MLP forward/backward + SGD,
// GEMM_CHAIN stand-ins) with their weights, batches in flight, streamed weights and parked
// activations, and the main job's calibrated GEMM chain. Private to the CUDA backend.
#ifndef PFRT_CUDA_WORKLOADS_H
#define PFRT_CUDA_WORKLOADS_H

#include "runtime/CudaDevice.h"

#include <memory>

namespace pfrt {
namespace cudabk {

// The precision of the fill jobs' GEMMs (PFRT_CUDA_FILL_MATH). Bf16 (the default) matches the
// fill cost model (algo/cost/ModelZoo.cpp: bf16 weights and activations, FLOPs at the GPU's dense
// bf16 tensor-core peak): the operands are rounded to bf16 (weights once per update, activations
// right before each GEMM), products accumulate in fp32 and results are fp32. Tf32: fp32 operands,
// CUBLAS_COMPUTE_32F_FAST_TF32.
enum class FillMath { Bf16, Tf32 };
const char *fillMathName(FillMath m);

// One planned chunk of the job on this device, as far as sizing before the loop needs it.
struct JobChunk {
  uint32_t stream = 0; // program stream
  uint32_t batch = 0, passBegin = 0, passEnd = 0;
  bool weightsStreamed = false, activationsHost = false;
};

// The numeric state of one fill job on GPU `dev`. Everything the job's chunks need is made here,
// before the loop: weights (fp32 masters and their bf16 copies), the pinned host masters of
// streamed weights, one scratch arena per fill stream sized for the largest chunk's layers, the
// pinned buffers parked activations go to, the GEMM_CHAIN buffers and their calibration, and a
// reservation in the fill pool for the batches' state (handed back to the pool by
// releaseFillReservations before the loop).
std::unique_ptr<JobData> createCudaJob(GpuDevice &dev, const JobShape &shape, FillMath math,
                                       const std::vector<JobChunk> &chunks);
// Before the loop (PFRT_CUDA_WARMUP, default on): every fill job made on `dev` since the last call
// captures each of its chunk shapes once behind gates that never open (CudaJobData::warmUp), so
// what CUDA and cuBLAS do the first time happens here and not in a bubble. Only the gates run on
// the GPU; no pass runs and no job's state changes. streamOf: as in WarmUp. A job that fails is
// left cold and the others still warm; returns the first failure's message ("" when none).
std::string warmUpFillJobs(GpuDevice &dev,
                           const std::function<CudaStreamState *(uint32_t)> &streamOf);
// Frees the jobs' fill-pool reservations (the pool keeps the memory: release threshold).
void releaseFillReservations(GpuDevice &dev);

// Main-job compute: times one GEMM of gemm_dim^3 and one of a quarter of that on the main stream
// and stores the results in `g`.
void calibrateMainChain(GpuDevice &g, const Device &dev, CudaStreamState &main, bool verbose);
// Enqueues the calibrated chain that lasts plannedUs on the stream.
void enqueueMainChain(CudaStreamState &st, double plannedUs);

} // namespace cudabk
} // namespace pfrt

#endif // PFRT_CUDA_WORKLOADS_H
