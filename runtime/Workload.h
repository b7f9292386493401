// Fill-job workloads: effective (possibly scaled-down) shapes, deterministic weights and inputs.
// Shared by the host and CUDA backends so both compute the same thing.
#ifndef PFRT_WORKLOAD_H
#define PFRT_WORKLOAD_H

#include "runtime/Program.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pfrt {

struct LayerShape {
  pfrt_layer_kind kind = PFRT_LAYER_MLP;
  uint32_t hidden = 0, heads = 0, seq = 0, ffn = 0; // ENCODER
  uint32_t in = 0, mid = 0, out = 0;                // MLP (mid = hidden)
  uint32_t dim = 0;                                 // GEMM_CHAIN link size
  uint32_t inWidth = 0, outWidth = 0;               // activation width in/out
  double usPerSample = 0, backwardUsPerSample = 0;  // planned (GEMM_CHAIN emulation)
  // Weight tensors of the layer, in order (see weightSizes()).
  std::vector<size_t> weightSizes() const;
};

struct JobShape {
  pfrt_fill_kind kind = PFRT_FILL_INFERENCE;
  uint32_t rows = 1;     // activation rows per sample (encoder: seq, MLP: 1)
  uint32_t inWidth = 0;  // width of the job's input
  uint32_t outWidth = 0; // width of the job's output
  uint32_t passes = 0;
  uint32_t divisor = 1;  // every dimension was divided by this (max_dim cap)
  uint64_t seed = 0;
  float learningRate = 0.01f;
  std::vector<LayerShape> layers;
  uint32_t numLayers() const { return static_cast<uint32_t>(layers.size()); }
  size_t inputElems(uint32_t batch) const { return size_t(batch) * rows * inWidth; }
  size_t outputElems(uint32_t batch) const { return size_t(batch) * rows * outWidth; }
  size_t maxWidth() const;
};

// Planned time of pass `q` of a job for `batch` samples: q < L the forward of layer q, else the
// backward of layer 2L - 1 - q (the order of a training chunk's passes).
double plannedPassUs(const JobShape &shape, uint32_t q, uint32_t batch);

// Whether passes [passBegin, passEnd) are all of GEMM_CHAIN stand-ins: in the modelled time model
// such a chunk lasts its planned time (HostBackend) and reports call its time modelled.
bool gemmChainOnly(const JobShape &shape, uint32_t passBegin, uint32_t passEnd);

// Shape of job `job` with every dimension divided by the smallest power of two that brings the
// largest one to <= maxDim (maxDim 0: no scaling). Heads shrink to divide the scaled hidden size.
JobShape makeJobShape(const Program &program, uint32_t job, uint32_t maxDim);

// Refuses (Error PFRT_ERROR_INVALID_ARGUMENT) a host run whose fill chunks would need more than
// half the machine's memory: per chunk the largest activation (batch x rows x width floats, 8 of
// them live, plus an encoder's batch x heads x seq^2 scores) and one layer's weights, of the
// shapes after the dimension cap `maxDim` (what the host backend computes).
void checkHostFillFits(const Program &program, uint32_t maxDim);

// Deterministic initial weights of layer `layer` (one vector per tensor of weightSizes()).
// ENCODER: Wq Wk Wv Wo (H x H), W1 (H x F), W2 (F x H), gamma1 beta1 gamma2 beta2 (H).
// MLP: W1 (in x hidden), W2 (hidden x out). GEMM_CHAIN: none. Row-major.
std::vector<std::vector<float>> initLayerWeights(const JobShape &shape, uint32_t layer);

// Input rows of samples [sampleBegin, sampleBegin + batch): batch x rows x inWidth.
void makeInput(const JobShape &shape, uint64_t sampleBegin, uint32_t batch, float *out);
// Training target: batch x rows x outWidth, a fixed nonlinear function of the sample's input
// (see targetAt in Random.h), so training has something to learn.
void makeTarget(const JobShape &shape, uint64_t sampleBegin, uint32_t batch, float *out);
// Position-weighted |y| checksum of an output block of samples starting at sampleBegin.
double outputChecksum(const JobShape &shape, uint64_t sampleBegin, uint32_t batch,
                      const float *y);
// Position-weighted |w| checksum of a list of tensors.
double tensorsChecksum(const std::vector<std::vector<float>> &tensors);

} // namespace pfrt

#endif // PFRT_WORKLOAD_H
