// CUDA backend, device and stream state: error checking, the per-GPU state (streams for setup and
// communication, event rings, the timing origin, copy buffers, allocations), the per-program-stream
// state (cudaStream_t, cuBLAS handle, timing events awaiting resolution), GPU-to-GPU channels and the
// pinned host pool. Private to the CUDA backend's .cu files (CudaBackend.cu, CudaWorkloads.cu).
#ifndef PFRT_CUDA_DEVICE_H
#define PFRT_CUDA_DEVICE_H

#include "runtime/Backend.h"
#include "runtime/DeviceGate.h"
#include "runtime/PeerWait.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace pfrt {
namespace cudabk {

constexpr int64_t kEventRing = 8;   // device events per program event / channel
constexpr size_t kTimingLag = 2;    // iterations a stream thread may run ahead of its GPU stream

// An on/off environment switch of the CUDA backend: unset, empty or "1" on, "0" off; anything else
// is an Error(PFRT_ERROR_INVALID_ARGUMENT) naming the variable and its value.
bool envSwitch(const char *name);

// Throws Error(PFRT_ERROR_BACKEND) naming the call and its source line.
[[noreturn]] void cudaFail(cudaError_t e, const char *what, const char *file, int line);

struct GpuDevice;
// cudaEventSynchronize / cudaStreamSynchronize, except with g.peerWatch set (rank mode with NCCL):
// then they poll under the peer time limit and check the communicators between polls
// (pollUntil), so a peer that hangs is an error, not a wait for good. `what` names the wait.
void waitEvent(const GpuDevice &g, cudaEvent_t ev, const char *what);
void waitStream(const GpuDevice &g, cudaStream_t s, const char *what);

#define PFRT_CUDA(call)                                                                            \
  do {                                                                                             \
    cudaError_t pfrt_e_ = (call);                                                                  \
    if (pfrt_e_ != cudaSuccess)                                                                    \
      cudaFail(pfrt_e_, #call, __FILE__, __LINE__);                                                          \
  } while (0)

#define PFRT_CUBLAS(call)                                                                          \
  do {                                                                                             \
    cublasStatus_t pfrt_s_ = (call);                                                               \
    if (pfrt_s_ != CUBLAS_STATUS_SUCCESS)                                                          \
      throw Error(PFRT_ERROR_BACKEND, std::string("cuBLAS error in ") + #call + ": " +             \
                                          cublasGetStatusName(pfrt_s_));                           \
  } while (0)

// Kernel launches report errors lazily; check right after enqueuing.
#define PFRT_CUDA_LAUNCHED() PFRT_CUDA(cudaGetLastError())

// Restores the calling thread's current device.
class DeviceGuard {
public:
  explicit DeviceGuard(int gpu) {
    cudaGetDevice(&saved_);
    if (saved_ != gpu)
      PFRT_CUDA(cudaSetDevice(gpu));
  }
  ~DeviceGuard() { cudaSetDevice(saved_); }

private:
  int saved_ = 0;
};

struct CudaStreamState;

// What a fill job does once on its GPU before the loop (CudaBackend::begin; CudaJobData::warmUp):
// streamOf gives the state of a program stream of this device (null for one this backend has not).
class WarmUp {
public:
  virtual void warmUp(const std::function<CudaStreamState *(uint32_t stream)> &streamOf) = 0;

protected:
  ~WarmUp() = default;
};

struct GpuDevice {
  uint32_t device = 0; // program device
  int gpu = 0;         // CUDA ordinal
  int prioLeast = 0, prioGreatest = 0;
  cudaStream_t setup = nullptr; // allocations made outside the stream threads
  // Sends run here, ordered after the sending stream's earlier work by that stream's `fork`
  // (CudaStreamState), so the sending stream goes on at once, as the compiler's simulation
  // assumes (a transfer occupies a link, not the main stream).
  cudaStream_t comm = nullptr;
  cudaEvent_t base = nullptr;   // timing origin
  // Rank mode with NCCL: the communicators' check and the peer time limit, under which the
  // backend's GPU waits poll (PeerWait.h); no check: they block as CUDA does.
  PeerWatch peerWatch;
  // Fill scratch, batches and streamed weights come from their own pool, so a main-job
  // allocation (AllocOp, default pool) never waits on fill frees.
  cudaMemPool_t fillPool = nullptr;
  // The jobs' reservations in fillPool (batch state), allocated when the jobs are made and freed
  // together before the loop, so the pool holds their sum; fillPoolReserved: the pool's reserved
  // bytes when the loop begins (its growth in the loop is counted in hotPath()).
  std::mutex reserveMutex;
  std::vector<void *> reservations;
  uint64_t fillPoolReserved = 0;
  double baseHostUs = 0;
  // Calibrated GEMM chain of the main job.
  int bigDim = 2048, smallDim = 512;
  double bigUs = 0, smallUs = 0;
  float *gemmA = nullptr, *gemmB = nullptr, *gemmC = nullptr;
  // record/wait events: [event][gen % ring]
  std::vector<std::vector<cudaEvent_t>> events;
  // Bubble edges on the main stream (Backend::markEdge): token t lives in edges[t % size] until
  // token t + size reuses the slot; edgeOwner says which token a slot holds now.
  std::mutex edgeMutex;
  std::vector<cudaEvent_t> edges;
  std::vector<int64_t> edgeOwner;
  int64_t nextEdge = 0;
  // The device-side bubble bound (DeviceGate.h, CudaGate.cu). lastEdge: device memory that every
  // edge sets to its token + 1 on its stream, so gates see when main has passed a bubble's end.
  // %globaltimer reads gtNs at host time gtHostUs (calibrated with the event clock), to within
  // gtErrUs (half the round trip of the reading: the host's instant is its midpoint). gateOn:
  // bounded chunks run behind gates (PFRT_CUDA_DEVICE_GATE, default on; off for good, with a
  // warning, if a gated chunk cannot be built on this GPU). edgeMemOp: edges are set with
  // cuStreamWriteValue64 (else a one-thread kernel).
  std::atomic<bool> gateOn{false};
  bool edgeMemOp = false;
  unsigned long long *lastEdge = nullptr;
  unsigned long long *timerHost = nullptr, *timerDevice = nullptr; // mapped, for calibration
  uint64_t gtNs = 0;
  double gtHostUs = 0, gtErrUs = 0;
  // Copy ops: one device and one pinned buffer of the largest copy.
  uint64_t copyBytes = 0;
  void *copyDevice = nullptr, *copyHost = nullptr;
  // Alloc ops.
  std::mutex buffersMutex;
  std::map<uint32_t, void *> buffers;
  std::atomic<uint64_t> minFree{UINT64_MAX};
  // The fill jobs made on this GPU and not warmed up yet: each adds itself when made and removes
  // itself when destroyed; CudaBackend::begin warms them up and empties the list.
  std::mutex warmMutex;
  std::vector<WarmUp *> toWarm;

  void sampleMemory() {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
      uint64_t seen = minFree.load();
      while (free < seen && !minFree.compare_exchange_weak(seen, free)) {
      }
    }
  }
};

struct PendingTiming {
  TimeSlot *slot;
  cudaEvent_t start, end;
};

struct CudaStreamState {
  GpuDevice *dev = nullptr;
  uint32_t device = 0, stream = 0;
  bool main = false;
  cudaStream_t s = nullptr;
  cublasHandle_t blas = nullptr;
  int priority = 0;
  std::vector<cudaEvent_t> pool;
  // Orders a send on the device's communication stream after this stream's earlier work (one
  // per stream: stream threads send concurrently, and a shared event could be re-recorded by
  // another stream between one thread's record and its wait).
  cudaEvent_t fork = nullptr;
  cudaEvent_t pendingStart = nullptr;
  std::vector<PendingTiming> current;
  std::deque<std::pair<cudaEvent_t, std::vector<PendingTiming>>> inflight;
  // Fill streams, device-side bound: the gates' state (host memory mapped into the device: host
  // and device pointers), a stream that allocates while a gated chunk is captured (stream-ordered
  // allocation nodes are not allowed in conditional bodies), an event ordering it before the
  // launch, and how the stream's last gated chunk ended (GateState, read after it ran).
  GateState *gateHost = nullptr, *gateDevice = nullptr;
  cudaStream_t allocStream = nullptr;
  cudaEvent_t allocDone = nullptr;
  void *blasWorkspace = nullptr;
  GateState lastGate;
  bool lastGated = false;
  // The last gated chunk's span on the GPU (host clock, us): from an event before its first graph
  // to the event after the graph of the last pass that ran (segmentEnds[k]: after graph k; made
  // as chunks need them), else after its last graph.
  cudaEvent_t spanStart = nullptr, spanEnd = nullptr;
  std::vector<cudaEvent_t> segmentEnds;
  double lastStartUs = -1, lastEndUs = -1;

  // A timing event from the pool (created when the pool is empty).
  cudaEvent_t take();

  // Waits for one iteration's timing events and converts them to host-clock microseconds.
  void resolve(std::pair<cudaEvent_t, std::vector<PendingTiming>> &entry);
};

// Point-to-point between two GPUs of this process.
struct GpuChannel {
  std::vector<cudaEvent_t> ring; // on the sender's GPU
  void *src = nullptr, *dst = nullptr;
};

// Allocations made in the hot path (by the fill jobs' chunks, i.e. between Backend::begin and
// finish), cumulative over the process; cudaHotPathStats() (Backend.h) reads them for the tests.
struct HotPathCounters {
  std::atomic<uint64_t> scratchCarves{0}, deviceAllocs{0}, pinnedAllocs{0}, batchAllocs{0},
      poolGrowthBytes{0};
  // The device-side bound: gated chunks, and host ns from each one's capture to its first pass.
  std::atomic<uint64_t> gatedChunks{0}, gateBuildNs{0};
};
HotPathCounters &hotPath();

// Pinned host buffers (cudaMallocHost is slow), made before the loop and reused by capacity.
class PinnedPool {
public:
  ~PinnedPool();
  // The smallest free buffer of at least `bytes`, else a new one of `bytes` (counted in
  // hotPath().pinnedAllocs when `hot`). *capacity: the buffer's size, to give to put().
  void *get(size_t bytes, size_t *capacity, bool hot);
  void put(void *p, size_t capacity) { free_.emplace(capacity, p); }
  // Adds a free buffer of `bytes` (before the loop).
  void reserve(size_t bytes);

private:
  std::multimap<size_t, void *> free_;
};

inline CudaStreamState &streamState(StreamCtx &ctx) {
  return *static_cast<CudaStreamState *>(ctx.backendData);
}

} // namespace cudabk
} // namespace pfrt

#endif // PFRT_CUDA_DEVICE_H
