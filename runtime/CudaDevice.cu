// CUDA backend, device and stream state (see CudaDevice.h).
#include "runtime/CudaDevice.h"

#include <cstring>

namespace pfrt {
namespace cudabk {

void cudaFail(cudaError_t e, const char *what, const char *file, int line) {
  const char *base = std::strrchr(file, '/');
  throw Error(PFRT_ERROR_BACKEND, std::string("CUDA error in ") + what + " (" +
                                      (base ? base + 1 : file) + ":" + std::to_string(line) +
                                      "): " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

cudaEvent_t CudaStreamState::take() {
  if (pool.empty()) {
    cudaEvent_t e;
    PFRT_CUDA(cudaEventCreate(&e));
    return e;
  }
  cudaEvent_t e = pool.back();
  pool.pop_back();
  return e;
}

void CudaStreamState::resolve(std::pair<cudaEvent_t, std::vector<PendingTiming>> &entry) {
  PFRT_CUDA(cudaEventSynchronize(entry.first));
  for (PendingTiming &p : entry.second) {
    float ms = 0;
    PFRT_CUDA(cudaEventElapsedTime(&ms, dev->base, p.start));
    p.slot->start = dev->baseHostUs + 1000.0 * ms;
    PFRT_CUDA(cudaEventElapsedTime(&ms, dev->base, p.end));
    p.slot->end = dev->baseHostUs + 1000.0 * ms;
    pool.push_back(p.start);
    pool.push_back(p.end);
  }
  pool.push_back(entry.first);
  entry.second.clear();
}

PinnedPool::~PinnedPool() {
  for (auto &kv : free_)
    for (void *p : kv.second)
      cudaFreeHost(p);
}

void *PinnedPool::get(size_t bytes) {
  auto &list = free_[bytes];
  if (!list.empty()) {
    void *p = list.back();
    list.pop_back();
    return p;
  }
  void *p = nullptr;
  PFRT_CUDA(cudaMallocHost(&p, bytes ? bytes : 1));
  return p;
}

} // namespace cudabk
} // namespace pfrt
