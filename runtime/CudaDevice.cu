// CUDA backend, device and stream state (see CudaDevice.h).
#include "runtime/CudaDevice.h"

#include <cstdlib>
#include <cstring>
#include <string>

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

namespace {

// One poll of a CUDA query: true when done; an error other than "not ready" is thrown.
bool done(cudaError_t e, const char *call) {
  if (e == cudaErrorNotReady)
    return false;
  if (e != cudaSuccess)
    cudaFail(e, call, __FILE__, __LINE__);
  return true;
}

} // namespace

void waitEvent(const GpuDevice &g, cudaEvent_t ev, const char *what) {
  if (!g.peerWatch.check) {
    PFRT_CUDA(cudaEventSynchronize(ev));
    return;
  }
  pollUntil([ev] { return done(cudaEventQuery(ev), "cudaEventQuery"); }, g.peerWatch, what);
}

void waitStream(const GpuDevice &g, cudaStream_t s, const char *what) {
  if (!g.peerWatch.check) {
    PFRT_CUDA(cudaStreamSynchronize(s));
    return;
  }
  pollUntil([s] { return done(cudaStreamQuery(s), "cudaStreamQuery"); }, g.peerWatch, what);
}

void CudaStreamState::resolve(std::pair<cudaEvent_t, std::vector<PendingTiming>> &entry) {
  waitEvent(*dev, entry.first, "the GPU's work of an earlier iteration (its timing events)");
  for (PendingTiming &p : entry.second) {
    // Start from the run's base event (float ms: ~8 us resolution after 100 s); the duration
    // from the op's own pair, so every measured duration keeps the events' 0.5 us resolution
    // however long the run is.
    float ms = 0, pair = 0;
    PFRT_CUDA(cudaEventElapsedTime(&ms, dev->base, p.start));
    PFRT_CUDA(cudaEventElapsedTime(&pair, p.start, p.end));
    p.slot->start = dev->baseHostUs + 1000.0 * static_cast<double>(ms);
    p.slot->end = p.slot->start + 1000.0 * static_cast<double>(pair);
    pool.push_back(p.start);
    pool.push_back(p.end);
  }
  pool.push_back(entry.first);
  entry.second.clear();
}

bool envSwitch(const char *name) {
  const char *v = std::getenv(name);
  if (!v || !*v || std::string(v) == "1")
    return true;
  if (std::string(v) == "0")
    return false;
  throw Error(PFRT_ERROR_INVALID_ARGUMENT,
              std::string(name) + "=" + v + ": expected 1 (on) or 0 (off)");
}

HotPathCounters &hotPath() {
  static HotPathCounters counters;
  return counters;
}

PinnedPool::~PinnedPool() {
  for (auto &kv : free_)
    cudaFreeHost(kv.second);
}

void *PinnedPool::get(size_t bytes, size_t *capacity, bool hot) {
  bytes = bytes ? bytes : 1;
  auto it = free_.lower_bound(bytes);
  if (it != free_.end()) {
    void *p = it->second;
    *capacity = it->first;
    free_.erase(it);
    return p;
  }
  void *p = nullptr;
  PFRT_CUDA(cudaMallocHost(&p, bytes));
  if (hot)
    hotPath().pinnedAllocs.fetch_add(1);
  *capacity = bytes;
  return p;
}

void PinnedPool::reserve(size_t bytes) {
  bytes = bytes ? bytes : 1;
  void *p = nullptr;
  PFRT_CUDA(cudaMallocHost(&p, bytes));
  free_.emplace(bytes, p);
}

} // namespace cudabk

CudaHotPathStats cudaHotPathStats() {
  const cudabk::HotPathCounters &c = cudabk::hotPath();
  CudaHotPathStats s;
  s.scratchCarves = c.scratchCarves.load();
  s.deviceAllocs = c.deviceAllocs.load();
  s.pinnedAllocs = c.pinnedAllocs.load();
  s.batchAllocs = c.batchAllocs.load();
  s.poolGrowthBytes = c.poolGrowthBytes.load();
  s.gatedChunks = c.gatedChunks.load();
  s.gateBuildUs = 1e-3 * static_cast<double>(c.gateBuildNs.load());
  return s;
}

} // namespace pfrt
