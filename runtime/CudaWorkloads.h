// CUDA backend, cuBLAS workloads: the fill jobs' layers (encoder, MLP forward/backward + SGD,
// GEMM_CHAIN stand-ins) with their weights, batches in flight, streamed weights and parked
// activations, and the main job's calibrated GEMM chain. Private to the CUDA backend.
#ifndef PFRT_CUDA_WORKLOADS_H
#define PFRT_CUDA_WORKLOADS_H

#include "runtime/CudaDevice.h"

#include <memory>

namespace pfrt {
namespace cudabk {

// The numeric state of one fill job on GPU `dev` (weights are uploaded here; with streamsWeights
// their pinned host masters are made here too, before the loop).
std::unique_ptr<JobData> createCudaJob(GpuDevice &dev, const JobShape &shape, bool streamsWeights);

// Main-job compute: times one GEMM of gemm_dim^3 and one of a quarter of that on the main stream
// and stores the results in `g`.
void calibrateMainChain(GpuDevice &g, const Device &dev, CudaStreamState &main, bool verbose);
// Enqueues the calibrated chain that lasts plannedUs on the stream.
void enqueueMainChain(CudaStreamState &st, double plannedUs);

} // namespace cudabk
} // namespace pfrt

#endif // PFRT_CUDA_WORKLOADS_H
