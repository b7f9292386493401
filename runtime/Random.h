// Counter-based deterministic random numbers shared by the host and CUDA backends: the same
// (seed, stream, index) gives bit-identical floats on both, so fill workloads agree across backends.
#ifndef PFRT_RANDOM_H
#define PFRT_RANDOM_H

#include <stdint.h>

#if defined(__CUDACC__)
#define PFRT_HD __host__ __device__ __forceinline__
#else
#define PFRT_HD inline
#endif

namespace pfrt {

// splitmix64 finaliser.
PFRT_HD uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), exactly representable (24 random bits).
PFRT_HD float uniformAt(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t h = mix64(seed ^ mix64(stream ^ mix64(index)));
  return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

// Position weight of the output checksum: sum_i |y_i| * checksumWeight(global index of y_i).
PFRT_HD double checksumWeight(uint64_t index) {
  return 1.0 + static_cast<double>(index % 17u) / 17.0;
}

// Training target element e of a sample whose input has inElems elements: a fixed nonlinear
// function of the input (the "teacher"), computed the same way on host and device.
PFRT_HD float targetAt(uint64_t seed, uint64_t sample, uint64_t e, uint64_t inElems);

// Random streams (the `stream` argument of uniformAt).
enum : uint64_t {
  kStreamInput = 0x1000000000ull,
  kStreamWeights = 0x3000000000ull, // + layer * 64 + tensor
};

PFRT_HD float targetAt(uint64_t seed, uint64_t sample, uint64_t e, uint64_t inElems) {
  float a = uniformAt(seed, kStreamInput + sample, e % inElems);
  float b = uniformAt(seed, kStreamInput + sample, (7 * e + 3) % inElems);
  return 0.5f * a - 0.5f * (a * b);
}

} // namespace pfrt

#endif // PFRT_RANDOM_H
