// CUDA backend: one cudaStream_t per program stream, created with the priority of its role
// (cudaDeviceGetStreamPriorityRange: MAIN gets the greatest, FILL the least), cudaEvents for
// record/wait, cuBLAS GEMMs, the stream-ordered pool (cudaMallocAsync) for allocations and fill
// scratch, pinned host buffers (cudaMallocHost) for offloaded weights/activations, and small
// kernels (CudaKernels.cu) for softmax, layernorm, GELU, loss and checksums.
//
// Each program stream has one host thread that enqueues its ops; every op is bracketed by timing
// events that are resolved two iterations later (the thread never runs more than two iterations
// ahead of its GPU stream). Main-job compute is a chain of square fp32 GEMMs whose length is
// calibrated once at start to the planned duration.
//
// Replay mode (fewer GPUs than devices): the executor runs one device here and the others on the
// host backend's modelled clock. A send to an emulated peer keeps the stream busy for the planned
// transfer time and then publishes from a host callback; a receive from an emulated peer makes the
// enqueueing thread wait for the peer's modelled send before enqueuing the rest of the stream.
#include "runtime/Backend.h"
#include "runtime/CudaKernels.h"
#include "runtime/Executor.h"

#include <cuda_runtime.h>
#include <cublas_v2.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace pfrt {

namespace {

constexpr int64_t kEventRing = 8;   // device events per program event / channel
constexpr size_t kTimingLag = 2;    // iterations a stream thread may run ahead of its GPU stream

[[noreturn]] void cudaFail(cudaError_t e, const char *what, int line) {
  throw Error(PFRT_ERROR_BACKEND, std::string("CUDA error in ") + what + " (CudaBackend.cu:" +
                                      std::to_string(line) + "): " + cudaGetErrorName(e) + ": " +
                                      cudaGetErrorString(e));
}

#define PFRT_CUDA(call)                                                                            \
  do {                                                                                             \
    cudaError_t pfrt_e_ = (call);                                                                  \
    if (pfrt_e_ != cudaSuccess)                                                                    \
      cudaFail(pfrt_e_, #call, __LINE__);                                                          \
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

struct GpuDevice {
  uint32_t device = 0; // program device
  int gpu = 0;         // CUDA ordinal
  int prioLeast = 0, prioGreatest = 0;
  cudaStream_t setup = nullptr; // allocations made outside the stream threads
  // Sends run here, ordered after the sending stream's earlier work by `fork`,
  // so the sending stream goes on at once, as the compiler's simulation
  // assumes (a transfer occupies a link, not the main stream).
  cudaStream_t comm = nullptr;
  cudaEvent_t fork = nullptr;
  cudaEvent_t base = nullptr;   // timing origin
  double baseHostUs = 0;
  // Calibrated GEMM chain of the main job.
  int bigDim = 2048, smallDim = 512;
  double bigUs = 0, smallUs = 0;
  float *gemmA = nullptr, *gemmB = nullptr, *gemmC = nullptr;
  // record/wait events: [event][gen % ring]
  std::vector<std::vector<cudaEvent_t>> events;
  // Copy ops: one device and one pinned buffer of the largest copy.
  uint64_t copyBytes = 0;
  void *copyDevice = nullptr, *copyHost = nullptr;
  // Alloc ops.
  std::mutex buffersMutex;
  std::map<uint32_t, void *> buffers;
  std::atomic<uint64_t> minFree{UINT64_MAX};

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
  cudaEvent_t pendingStart = nullptr;
  std::vector<PendingTiming> current;
  std::deque<std::pair<cudaEvent_t, std::vector<PendingTiming>>> inflight;

  cudaEvent_t take() {
    if (pool.empty()) {
      cudaEvent_t e;
      PFRT_CUDA(cudaEventCreate(&e));
      return e;
    }
    cudaEvent_t e = pool.back();
    pool.pop_back();
    return e;
  }

  // Waits for one iteration's timing events and converts them to host-clock microseconds.
  void resolve(std::pair<cudaEvent_t, std::vector<PendingTiming>> &entry) {
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
};

// Point-to-point between two GPUs of this process.
struct GpuChannel {
  std::vector<cudaEvent_t> ring; // on the sender's GPU
  void *src = nullptr, *dst = nullptr;
};

// Pinned host buffers reused by size (cudaMallocHost is slow).
class PinnedPool {
public:
  ~PinnedPool() {
    for (auto &kv : free_)
      for (void *p : kv.second)
        cudaFreeHost(p);
  }
  void *get(size_t bytes) {
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
  void put(void *p, size_t bytes) { free_[bytes].push_back(p); }

private:
  std::map<size_t, std::vector<void *>> free_;
};

CudaStreamState &streamState(StreamCtx &ctx) {
  return *static_cast<CudaStreamState *>(ctx.backendData);
}

// ---------------------------------------------------------------------------------------------
// Fill jobs
// ---------------------------------------------------------------------------------------------

class CudaJobData;

// A device tensor that may be parked in pinned host memory between chunks.
struct Tensor {
  float *d = nullptr;
  void *h = nullptr;
  size_t n = 0;
};

class CudaBatch : public BatchData {
public:
  explicit CudaBatch(CudaJobData &job) : job_(job) {}
  ~CudaBatch() override;
  std::vector<std::vector<float>> save() override;

  Tensor act;
  double *loss = nullptr; // device, one double
  std::vector<Tensor> stashX, stashH;
  bool onHost = false;

private:
  CudaJobData &job_;
};

class CudaJobData : public JobData {
public:
  CudaJobData(GpuDevice &dev, const JobShape &shape) : dev_(dev), shape_(shape) {
    DeviceGuard guard(dev_.gpu);
    stream_ = dev_.setup;
    for (uint32_t l = 0; l < shape_.numLayers(); ++l) {
      std::vector<std::vector<float>> w = initLayerWeights(shape_, l);
      std::vector<float *> dl;
      for (const auto &t : w) {
        float *p = nullptr;
        PFRT_CUDA(cudaMalloc(&p, std::max<size_t>(1, t.size()) * sizeof(float)));
        PFRT_CUDA(cudaMemcpy(p, t.data(), t.size() * sizeof(float), cudaMemcpyHostToDevice));
        dl.push_back(p);
      }
      dW_.push_back(dl);
      sizes_.push_back(shape_.layers[l].weightSizes());
    }
    PFRT_CUDA(cudaMalloc(&acc_, 2 * sizeof(double)));
    PFRT_CUDA(cudaMemset(acc_, 0, 2 * sizeof(double)));
  }

  ~CudaJobData() override {
    cudaSetDevice(dev_.gpu);
    cudaDeviceSynchronize();
    for (auto &l : dW_)
      for (float *p : l)
        cudaFree(p);
    for (auto &l : hW_)
      for (float *p : l)
        cudaFreeHost(p);
    cudaFree(acc_);
    if (chainA_) {
      cudaFree(chainA_);
      cudaFree(chainB_);
      cudaFree(chainC_);
    }
  }

  void run(StreamCtx &ctx, std::unique_ptr<BatchData> &batchPtr, const FillExec &ex) override {
    CudaStreamState &st = streamState(ctx);
    cudaStream_t s = st.s;
    cublasHandle_t h = st.blas;
    stream_ = s;
    const uint32_t L = shape_.numLayers();
    const bool training = shape_.kind == PFRT_FILL_TRAINING;
    if (ex.begins || !batchPtr) {
      auto b = std::make_unique<CudaBatch>(*this);
      b->act = alloc(shape_.inputElems(ex.batch), s);
      cuda::makeInput(b->act.d, shape_.seed, ex.sampleBegin, ex.batch,
                      size_t(shape_.rows) * shape_.inWidth, s);
      PFRT_CUDA_LAUNCHED();
      if (training) {
        b->stashX.resize(L);
        b->stashH.resize(L);
      }
      PFRT_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&b->loss), sizeof(double), s));
      PFRT_CUDA(cudaMemsetAsync(b->loss, 0, sizeof(double), s));
      batchPtr = std::move(b);
    }
    CudaBatch &b = static_cast<CudaBatch &>(*batchPtr);
    if (b.onHost)
      restore(b, s);
    const int rows = static_cast<int>(ex.batch * shape_.rows);
    for (uint32_t p = ex.passBegin; p < ex.passEnd; ++p) {
      if (p < L) {
        const LayerShape &ls = shape_.layers[p];
        std::vector<float *> staged;
        std::vector<float *> w = dW_[p];
        if (ex.weightsStreamed && !sizes_[p].empty()) {
          ensurePinned(s);
          for (size_t t = 0; t < sizes_[p].size(); ++t) {
            float *d = nullptr;
            PFRT_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&d),
                                      std::max<size_t>(1, sizes_[p][t]) * sizeof(float), s));
            PFRT_CUDA(cudaMemcpyAsync(d, hW_[p][t], sizes_[p][t] * sizeof(float),
                                      cudaMemcpyHostToDevice, s));
            staged.push_back(d);
          }
          w = staged;
        }
        switch (ls.kind) {
        case PFRT_LAYER_ENCODER: {
          Tensor y = alloc(b.act.n, s);
          encoderForward(h, s, ls, w, b.act.d, y.d, static_cast<int>(ex.batch));
          release(b.act, s);
          b.act = y;
          break;
        }
        case PFRT_LAYER_MLP: {
          Tensor hpre = alloc(size_t(rows) * ls.mid, s), y = alloc(size_t(rows) * ls.out, s);
          Tensor hact = alloc(hpre.n, s);
          PFRT_CUBLAS(cuda::gemm(h, false, false, rows, ls.mid, ls.in, 1.0f, b.act.d, ls.in, w[0],
                                 ls.mid, 0.0f, hpre.d, ls.mid));
          cuda::gelu(hpre.d, hact.d, hpre.n, s);
          PFRT_CUDA_LAUNCHED();
          PFRT_CUBLAS(cuda::gemm(h, false, false, rows, ls.out, ls.mid, 1.0f, hact.d, ls.mid,
                                 w[1], ls.out, 0.0f, y.d, ls.out));
          release(hact, s);
          if (training) {
            b.stashX[p] = b.act;
            b.stashH[p] = hpre;
          } else {
            release(b.act, s);
            release(hpre, s);
          }
          b.act = y;
          break;
        }
        case PFRT_LAYER_GEMM_CHAIN:
          chain(h, s, ls, ls.usPerSample * ex.batch);
          break;
        }
        for (float *d : staged)
          PFRT_CUDA(cudaFreeAsync(d, s));
        if (training && p == L - 1) {
          Tensor t = alloc(b.act.n, s), dy = alloc(b.act.n, s);
          cuda::makeTarget(t.d, shape_.seed, ex.sampleBegin, ex.batch,
                           size_t(shape_.rows) * shape_.outWidth,
                           size_t(shape_.rows) * shape_.inWidth, s);
          cuda::mseLoss(b.act.d, t.d, dy.d, b.act.n, static_cast<int>(ex.batch), b.loss, s);
          PFRT_CUDA_LAUNCHED();
          release(t, s);
          release(b.act, s);
          b.act = dy;
        }
      } else {
        const uint32_t l = 2 * L - 1 - p;
        const LayerShape &ls = shape_.layers[l];
        if (ls.kind == PFRT_LAYER_MLP) {
          float *w1 = dW_[l][0], *w2 = dW_[l][1];
          Tensor hact = alloc(b.stashH[l].n, s), dh = alloc(b.stashH[l].n, s);
          Tensor dw1 = alloc(sizes_[l][0], s), dw2 = alloc(sizes_[l][1], s);
          Tensor dx;
          cuda::gelu(b.stashH[l].d, hact.d, hact.n, s);
          PFRT_CUDA_LAUNCHED();
          PFRT_CUBLAS(cuda::gemm(h, true, false, ls.mid, ls.out, rows, 1.0f, hact.d, ls.mid,
                                 b.act.d, ls.out, 0.0f, dw2.d, ls.out));
          PFRT_CUBLAS(cuda::gemm(h, false, true, rows, ls.mid, ls.out, 1.0f, b.act.d, ls.out, w2,
                                 ls.out, 0.0f, dh.d, ls.mid));
          cuda::geluBackwardMul(dh.d, b.stashH[l].d, dh.n, s);
          PFRT_CUDA_LAUNCHED();
          PFRT_CUBLAS(cuda::gemm(h, true, false, ls.in, ls.mid, rows, 1.0f, b.stashX[l].d, ls.in,
                                 dh.d, ls.mid, 0.0f, dw1.d, ls.mid));
          if (l > 0) {
            dx = alloc(size_t(rows) * ls.in, s);
            PFRT_CUBLAS(cuda::gemm(h, false, true, rows, ls.in, ls.mid, 1.0f, dh.d, ls.mid, w1,
                                   ls.mid, 0.0f, dx.d, ls.in));
          }
          const float alpha = -shape_.learningRate;
          PFRT_CUBLAS(cublasSaxpy(h, static_cast<int>(dw1.n), &alpha, dw1.d, 1, w1, 1));
          PFRT_CUBLAS(cublasSaxpy(h, static_cast<int>(dw2.n), &alpha, dw2.d, 1, w2, 1));
          if (!hW_.empty()) // keep the pinned master (streamed weights) in sync
            for (size_t t = 0; t < 2; ++t)
              PFRT_CUDA(cudaMemcpyAsync(hW_[l][t], dW_[l][t], sizes_[l][t] * sizeof(float),
                                        cudaMemcpyDeviceToHost, s));
          release(hact, s);
          release(dh, s);
          release(dw1, s);
          release(dw2, s);
          release(b.stashX[l], s);
          release(b.stashH[l], s);
          release(b.act, s);
          b.act = dx;
        } else {
          chain(h, s, ls, ls.backwardUsPerSample * ex.batch);
        }
      }
    }
    if (ex.completes) {
      if (training) {
        cuda::addLoss(b.loss, acc_, s);
      } else {
        const uint64_t per = uint64_t(shape_.rows) * shape_.outWidth;
        cuda::checksum(b.act.d, b.act.n, ex.sampleBegin * per, acc_, s);
      }
      PFRT_CUDA_LAUNCHED();
    } else if (ex.activationsHost) {
      offload(b, s);
    }
  }

  Accum accumulators() override {
    DeviceGuard guard(dev_.gpu);
    PFRT_CUDA(cudaStreamSynchronize(stream_));
    double host[2] = {0, 0};
    PFRT_CUDA(cudaMemcpy(host, acc_, sizeof host, cudaMemcpyDeviceToHost));
    return {host[0], host[1]};
  }

  std::vector<std::vector<float>> saveWeights() override {
    DeviceGuard guard(dev_.gpu);
    PFRT_CUDA(cudaStreamSynchronize(stream_));
    std::vector<std::vector<float>> out;
    for (size_t l = 0; l < dW_.size(); ++l)
      for (size_t t = 0; t < dW_[l].size(); ++t) {
        std::vector<float> v(sizes_[l][t]);
        PFRT_CUDA(cudaMemcpy(v.data(), dW_[l][t], v.size() * sizeof(float),
                             cudaMemcpyDeviceToHost));
        out.push_back(std::move(v));
      }
    return out;
  }

  void loadWeights(const std::vector<std::vector<float>> &w) override {
    DeviceGuard guard(dev_.gpu);
    size_t k = 0;
    for (size_t l = 0; l < dW_.size(); ++l)
      for (size_t t = 0; t < dW_[l].size(); ++t, ++k) {
        if (k >= w.size() || w[k].size() != sizes_[l][t])
          throw Error(PFRT_ERROR_PARSE,
                      "checkpoint: fill-job weights do not match the job's layer shapes");
        PFRT_CUDA(cudaMemcpy(dW_[l][t], w[k].data(), w[k].size() * sizeof(float),
                             cudaMemcpyHostToDevice));
        if (!hW_.empty())
          std::copy(w[k].begin(), w[k].end(), hW_[l][t]);
      }
  }

  std::unique_ptr<BatchData> loadBatch(const std::vector<std::vector<float>> &t,
                                       uint32_t batch) override {
    (void)batch;
    DeviceGuard guard(dev_.gpu);
    const uint32_t L = shape_.numLayers();
    const bool training = shape_.kind == PFRT_FILL_TRAINING;
    if (t.size() < 2 || (training && t.size() != 2 + 2 * size_t(L)))
      throw Error(PFRT_ERROR_PARSE, "checkpoint: malformed in-flight batch");
    auto b = std::make_unique<CudaBatch>(*this);
    cudaStream_t s = dev_.setup;
    auto upload = [&](const std::vector<float> &v) {
      Tensor x = alloc(v.size(), s);
      if (!v.empty())
        PFRT_CUDA(cudaMemcpyAsync(x.d, v.data(), v.size() * sizeof(float),
                                  cudaMemcpyHostToDevice, s));
      PFRT_CUDA(cudaStreamSynchronize(s));
      return x;
    };
    b->act = upload(t[0]);
    double loss = t[1].empty() ? 0.0 : t[1][0];
    PFRT_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&b->loss), sizeof(double), s));
    PFRT_CUDA(cudaMemcpyAsync(b->loss, &loss, sizeof(double), cudaMemcpyHostToDevice, s));
    PFRT_CUDA(cudaStreamSynchronize(s));
    if (training) {
      for (uint32_t l = 0; l < L; ++l)
        b->stashX.push_back(upload(t[2 + l]));
      for (uint32_t l = 0; l < L; ++l)
        b->stashH.push_back(upload(t[2 + L + l]));
    }
    return b;
  }

  // Used by CudaBatch.
  cudaStream_t stream() const { return stream_; }
  int gpu() const { return dev_.gpu; }

  Tensor alloc(size_t n, cudaStream_t s) {
    Tensor t;
    t.n = n;
    PFRT_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&t.d),
                              std::max<size_t>(1, n) * sizeof(float), s));
    return t;
  }
  void release(Tensor &t, cudaStream_t s) {
    if (t.d)
      cudaFreeAsync(t.d, s);
    if (t.h)
      pinned_.put(t.h, t.n * sizeof(float));
    t = Tensor{};
  }

private:
  void ensurePinned(cudaStream_t s) {
    if (!hW_.empty())
      return;
    for (size_t l = 0; l < dW_.size(); ++l) {
      std::vector<float *> hl;
      for (size_t t = 0; t < dW_[l].size(); ++t) {
        float *p = nullptr;
        PFRT_CUDA(cudaMallocHost(reinterpret_cast<void **>(&p),
                                 std::max<size_t>(1, sizes_[l][t]) * sizeof(float)));
        PFRT_CUDA(cudaMemcpyAsync(p, dW_[l][t], sizes_[l][t] * sizeof(float),
                                  cudaMemcpyDeviceToHost, s));
        hl.push_back(p);
      }
      hW_.push_back(hl);
    }
  }

  void offloadTensor(Tensor &t, cudaStream_t s) {
    if (!t.d)
      return;
    t.h = pinned_.get(t.n * sizeof(float));
    PFRT_CUDA(cudaMemcpyAsync(t.h, t.d, t.n * sizeof(float), cudaMemcpyDeviceToHost, s));
    PFRT_CUDA(cudaFreeAsync(t.d, s));
    t.d = nullptr;
  }
  void restoreTensor(Tensor &t, cudaStream_t s) {
    if (!t.h)
      return;
    PFRT_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&t.d),
                              std::max<size_t>(1, t.n) * sizeof(float), s));
    PFRT_CUDA(cudaMemcpyAsync(t.d, t.h, t.n * sizeof(float), cudaMemcpyHostToDevice, s));
    pinned_.put(t.h, t.n * sizeof(float)); // reused only by later work on this same stream
    t.h = nullptr;
  }
  void offload(CudaBatch &b, cudaStream_t s) {
    offloadTensor(b.act, s);
    for (Tensor &t : b.stashX)
      offloadTensor(t, s);
    for (Tensor &t : b.stashH)
      offloadTensor(t, s);
    b.onHost = true;
  }
  void restore(CudaBatch &b, cudaStream_t s) {
    restoreTensor(b.act, s);
    for (Tensor &t : b.stashX)
      restoreTensor(t, s);
    for (Tensor &t : b.stashH)
      restoreTensor(t, s);
    b.onHost = false;
  }

  void encoderForward(cublasHandle_t h, cudaStream_t s, const LayerShape &ls,
                      const std::vector<float *> &w, const float *x, float *y, int batch) {
    const int H = static_cast<int>(ls.hidden), S = static_cast<int>(ls.seq),
              F = static_cast<int>(ls.ffn), NH = static_cast<int>(ls.heads);
    const int dh = H / NH, N = batch * S;
    const size_t nh = size_t(N) * H;
    Tensor q = alloc(nh, s), k = alloc(nh, s), v = alloc(nh, s), o = alloc(nh, s),
           a = alloc(nh, s), x1 = alloc(nh, s), f1 = alloc(size_t(N) * F, s),
           scores = alloc(size_t(NH) * S * S, s);
    PFRT_CUBLAS(cuda::gemm(h, false, false, N, H, H, 1.0f, x, H, w[0], H, 0.0f, q.d, H));
    PFRT_CUBLAS(cuda::gemm(h, false, false, N, H, H, 1.0f, x, H, w[1], H, 0.0f, k.d, H));
    PFRT_CUBLAS(cuda::gemm(h, false, false, N, H, H, 1.0f, x, H, w[2], H, 0.0f, v.d, H));
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    for (int bi = 0; bi < batch; ++bi) {
      const size_t off = size_t(bi) * S * H;
      PFRT_CUBLAS(cuda::gemmStridedBatched(h, false, true, S, S, dh, scale, q.d + off, H, dh,
                                           k.d + off, H, dh, 0.0f, scores.d, S,
                                           (long long)S * S, NH));
      cuda::softmaxRows(scores.d, NH * S, S, s);
      PFRT_CUDA_LAUNCHED();
      PFRT_CUBLAS(cuda::gemmStridedBatched(h, false, false, S, dh, S, 1.0f, scores.d, S,
                                           (long long)S * S, v.d + off, H, dh, 0.0f, o.d + off, H,
                                           dh, NH));
    }
    PFRT_CUBLAS(cuda::gemm(h, false, false, N, H, H, 1.0f, o.d, H, w[3], H, 0.0f, a.d, H));
    cuda::layerNorm(x, a.d, w[6], w[7], x1.d, N, H, s);
    PFRT_CUBLAS(cuda::gemm(h, false, false, N, F, H, 1.0f, x1.d, H, w[4], F, 0.0f, f1.d, F));
    cuda::gelu(f1.d, f1.d, f1.n, s);
    PFRT_CUBLAS(cuda::gemm(h, false, false, N, H, F, 1.0f, f1.d, F, w[5], H, 0.0f, a.d, H));
    cuda::layerNorm(x1.d, a.d, w[8], w[9], y, N, H, s);
    PFRT_CUDA_LAUNCHED();
    for (Tensor *t : {&q, &k, &v, &o, &a, &x1, &f1, &scores})
      release(*t, s);
  }

  // GEMM_CHAIN stand-in: square GEMMs calibrated (once) to last `us`.
  void chain(cublasHandle_t h, cudaStream_t s, const LayerShape &ls, double us) {
    const int n = static_cast<int>(std::max<uint32_t>(ls.dim, 16));
    if (chainDim_ != n) {
      if (chainA_) {
        PFRT_CUDA(cudaStreamSynchronize(s));
        cudaFree(chainA_);
        cudaFree(chainB_);
        cudaFree(chainC_);
      }
      const size_t bytes = size_t(n) * n * sizeof(float);
      PFRT_CUDA(cudaMalloc(&chainA_, bytes));
      PFRT_CUDA(cudaMalloc(&chainB_, bytes));
      PFRT_CUDA(cudaMalloc(&chainC_, bytes));
      PFRT_CUDA(cudaMemsetAsync(chainA_, 0, bytes, s));
      PFRT_CUDA(cudaMemsetAsync(chainB_, 0, bytes, s));
      chainDim_ = n;
      // Calibrate: time 8 GEMMs.
      cudaEvent_t e0, e1;
      PFRT_CUDA(cudaEventCreate(&e0));
      PFRT_CUDA(cudaEventCreate(&e1));
      PFRT_CUBLAS(cuda::gemm(h, false, false, n, n, n, 1.0f, chainA_, n, chainB_, n, 0.0f,
                             chainC_, n));
      PFRT_CUDA(cudaEventRecord(e0, s));
      for (int i = 0; i < 8; ++i)
        PFRT_CUBLAS(cuda::gemm(h, false, false, n, n, n, 1.0f, chainA_, n, chainB_, n, 0.0f,
                               chainC_, n));
      PFRT_CUDA(cudaEventRecord(e1, s));
      PFRT_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      PFRT_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      chainUs_ = std::max(0.5, 1000.0 * ms / 8);
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
    }
    const long reps = std::max(1L, std::lround(us / chainUs_));
    for (long i = 0; i < reps; ++i)
      PFRT_CUBLAS(cuda::gemm(h, false, false, n, n, n, 1.0f, chainA_, n, chainB_, n, 0.0f,
                             chainC_, n));
  }

  GpuDevice &dev_;
  JobShape shape_;
  cudaStream_t stream_ = nullptr;
  std::vector<std::vector<float *>> dW_, hW_;
  std::vector<std::vector<size_t>> sizes_;
  double *acc_ = nullptr; // checksum, loss sum
  PinnedPool pinned_;
  int chainDim_ = 0;
  float *chainA_ = nullptr, *chainB_ = nullptr, *chainC_ = nullptr;
  double chainUs_ = 1;
};

CudaBatch::~CudaBatch() {
  cudaSetDevice(job_.gpu());
  cudaStream_t s = job_.stream();
  job_.release(act, s);
  for (Tensor &t : stashX)
    job_.release(t, s);
  for (Tensor &t : stashH)
    job_.release(t, s);
  if (loss)
    cudaFreeAsync(loss, s);
}

std::vector<std::vector<float>> CudaBatch::save() {
  DeviceGuard guard(job_.gpu());
  PFRT_CUDA(cudaStreamSynchronize(job_.stream()));
  auto fetch = [](const Tensor &t) {
    std::vector<float> v(t.n);
    if (t.n && t.d)
      PFRT_CUDA(cudaMemcpy(v.data(), t.d, t.n * sizeof(float), cudaMemcpyDeviceToHost));
    else if (t.n && t.h)
      std::copy(static_cast<const float *>(t.h), static_cast<const float *>(t.h) + t.n, v.data());
    return v;
  };
  std::vector<std::vector<float>> out;
  out.push_back(fetch(act));
  double l = 0;
  if (loss)
    PFRT_CUDA(cudaMemcpy(&l, loss, sizeof(double), cudaMemcpyDeviceToHost));
  out.push_back({static_cast<float>(l)});
  for (const Tensor &t : stashX)
    out.push_back(fetch(t));
  for (const Tensor &t : stashH)
    out.push_back(fetch(t));
  return out;
}

// ---------------------------------------------------------------------------------------------
// The backend
// ---------------------------------------------------------------------------------------------

struct PublishCall {
  std::unique_ptr<Publisher> publisher;
};

void CUDART_CB publishFromStream(void *data) {
  std::unique_ptr<PublishCall> call(static_cast<PublishCall *>(data));
  Message m;
  m.readyUs = hostNowUs();
  call->publisher->publish(m);
}

class CudaBackend : public Backend {
public:
  ~CudaBackend() override { release(); }

  std::string name() const override { return "cuda"; }
  bool measuresTime() const override { return true; }

  void prepare(const Program &program, const ProgramInfo &info, const RunConfig &config,
               const std::vector<uint32_t> &devices) override {
    config_ = config;
    int count = 0;
    PFRT_CUDA(cudaGetDeviceCount(&count));
    const bool oneGpuPerDevice = static_cast<size_t>(count) >= program.devices.size();
    for (uint32_t d : devices) {
      auto g = std::make_unique<GpuDevice>();
      g->device = d;
      g->gpu = oneGpuPerDevice ? static_cast<int>(d) : 0;
      PFRT_CUDA(cudaSetDevice(g->gpu));
      PFRT_CUDA(cudaDeviceGetStreamPriorityRange(&g->prioLeast, &g->prioGreatest));
      PFRT_CUDA(cudaStreamCreateWithFlags(&g->setup, cudaStreamNonBlocking));
      PFRT_CUDA(cudaStreamCreateWithPriority(&g->comm, cudaStreamNonBlocking, g->prioGreatest));
      PFRT_CUDA(cudaEventCreateWithFlags(&g->fork, cudaEventDisableTiming));
      PFRT_CUDA(cudaEventCreate(&g->base));
      // A real stream-ordered pool: keep freed memory instead of returning it to the OS.
      cudaMemPool_t pool;
      PFRT_CUDA(cudaDeviceGetDefaultMemPool(&pool, g->gpu));
      uint64_t threshold = UINT64_MAX;
      PFRT_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
      const Device &dev = program.devices[d];
      for (size_t e = 0; e < dev.events.size(); ++e) {
        std::vector<cudaEvent_t> ring(kEventRing);
        for (cudaEvent_t &ev : ring)
          PFRT_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        g->events.push_back(ring);
      }
      for (const Stream &st : dev.streams)
        for (const Op &op : st.ops)
          if (op.kind == OpKind::Copy)
            g->copyBytes = std::max(g->copyBytes, op.bytes);
      if (g->copyBytes) {
        PFRT_CUDA(cudaMalloc(&g->copyDevice, g->copyBytes));
        PFRT_CUDA(cudaMallocHost(&g->copyHost, g->copyBytes));
      }
      gpus_[d] = std::move(g);
    }
    // Streams with their priorities, one cuBLAS handle each.
    for (uint32_t d : devices) {
      GpuDevice &g = *gpus_[d];
      PFRT_CUDA(cudaSetDevice(g.gpu));
      const Device &dev = program.devices[d];
      for (uint32_t s = 0; s < dev.streams.size(); ++s) {
        auto st = std::make_unique<CudaStreamState>();
        st->dev = &g;
        st->device = d;
        st->stream = s;
        st->main = s == info.devices[d].mainStream;
        int prio = g.prioLeast;
        switch (dev.streams[s].effectivePriority()) {
        case PFRT_PRIORITY_HIGH: prio = g.prioGreatest; break;
        case PFRT_PRIORITY_LOW: prio = g.prioLeast; break;
        default: prio = (g.prioLeast + g.prioGreatest) / 2; break;
        }
        PFRT_CUDA(cudaStreamCreateWithPriority(&st->s, cudaStreamNonBlocking, prio));
        PFRT_CUDA(cudaStreamGetPriority(st->s, &st->priority));
        PFRT_CUBLAS(cublasCreate(&st->blas));
        PFRT_CUBLAS(cublasSetStream(st->blas, st->s));
        streams_[{d, s}] = std::move(st);
      }
      calibrate(g, dev, *streams_[{d, info.devices[d].mainStream}]);
      g.sampleMemory();
    }
    // GPU-to-GPU channels (multi-GPU mode only).
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> pairBytes;
    for (uint32_t d : devices)
      for (const Stream &st : program.devices[d].streams)
        for (const Op &op : st.ops)
          if (op.kind == OpKind::Send && gpus_.count(op.peer)) {
            uint64_t &b = pairBytes[{d, op.peer}];
            b = std::max(b, op.bytes);
          }
    for (const auto &pb : pairBytes) {
      GpuDevice &src = *gpus_[pb.first.first], &dst = *gpus_[pb.first.second];
      int can = 0;
      if (src.gpu != dst.gpu &&
          cudaDeviceCanAccessPeer(&can, src.gpu, dst.gpu) == cudaSuccess && can) {
        PFRT_CUDA(cudaSetDevice(src.gpu));
        cudaError_t e = cudaDeviceEnablePeerAccess(dst.gpu, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
          cudaFail(e, "cudaDeviceEnablePeerAccess", __LINE__);
        cudaGetLastError();
      }
      PairBuffers &bufs = pairs_[pb.first];
      PFRT_CUDA(cudaSetDevice(src.gpu));
      PFRT_CUDA(cudaMalloc(&bufs.src, std::max<uint64_t>(1, pb.second)));
      PFRT_CUDA(cudaSetDevice(dst.gpu));
      PFRT_CUDA(cudaMalloc(&bufs.dst, std::max<uint64_t>(1, pb.second)));
    }
    for (uint32_t d : devices)
      for (const Stream &st : program.devices[d].streams)
        for (const Op &op : st.ops)
          if (op.kind == OpKind::Send && gpus_.count(op.peer)) {
            GpuChannel &c = channels_[std::make_tuple(d, op.peer, op.tag)];
            PFRT_CUDA(cudaSetDevice(gpus_[d]->gpu));
            c.ring.resize(kEventRing);
            for (cudaEvent_t &ev : c.ring)
              PFRT_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
            c.src = pairs_[{d, op.peer}].src;
            c.dst = pairs_[{d, op.peer}].dst;
          }
  }

  void begin(double originUs) override {
    (void)originUs;
    for (auto &kv : gpus_) {
      GpuDevice &g = *kv.second;
      PFRT_CUDA(cudaSetDevice(g.gpu));
      PFRT_CUDA(cudaDeviceSynchronize());
      PFRT_CUDA(cudaEventRecord(g.base, g.setup));
      PFRT_CUDA(cudaEventSynchronize(g.base));
      g.baseHostUs = hostNowUs();
    }
  }

  void threadBegin(StreamCtx &ctx) override {
    CudaStreamState &st = *streams_.at({ctx.device, ctx.stream});
    PFRT_CUDA(cudaSetDevice(st.dev->gpu));
    ctx.backendData = &st;
  }

  void threadEnd(StreamCtx &ctx) override {
    CudaStreamState &st = streamState(ctx);
    while (!st.inflight.empty()) {
      st.resolve(st.inflight.front());
      st.inflight.pop_front();
    }
    st.dev->sampleMemory();
  }

  void markStart(StreamCtx &ctx, TimeSlot &) override {
    CudaStreamState &st = streamState(ctx);
    st.pendingStart = st.take();
    PFRT_CUDA(cudaEventRecord(st.pendingStart, st.s));
  }

  void markEnd(StreamCtx &ctx, TimeSlot &slot) override {
    CudaStreamState &st = streamState(ctx);
    cudaEvent_t end = st.take();
    PFRT_CUDA(cudaEventRecord(end, st.s));
    st.current.push_back({&slot, st.pendingStart, end});
    st.pendingStart = nullptr;
  }

  void compute(StreamCtx &ctx, const Op &op, double plannedUs) override {
    CudaStreamState &st = streamState(ctx);
    if (config_.computeFn) {
      config_.computeFn(config_.computeUser, ctx.device, op.compute, op.microbatch, op.chunk,
                        plannedUs, reinterpret_cast<void *>(st.s));
      PFRT_CUDA_LAUNCHED();
      return;
    }
    gemmChain(st, plannedUs);
  }

  void idle(StreamCtx &ctx, double plannedUs) override {
    cuda::spin(plannedUs, streamState(ctx).s);
    PFRT_CUDA_LAUNCHED();
  }

  void record(StreamCtx &ctx, uint32_t event, int64_t gen) override {
    CudaStreamState &st = streamState(ctx);
    ctx.exec->waitForEventConsumers(ctx.device, event, gen, kEventRing);
    PFRT_CUDA(cudaEventRecord(st.dev->events[event][gen % kEventRing], st.s));
  }

  void wait(StreamCtx &ctx, uint32_t event, int64_t gen) override {
    CudaStreamState &st = streamState(ctx);
    PFRT_CUDA(cudaStreamWaitEvent(st.s, st.dev->events[event][gen % kEventRing], 0));
  }

  void send(StreamCtx &ctx, const Op &op, double plannedUs, bool peerLocal,
            Publisher &publisher) override {
    CudaStreamState &st = streamState(ctx);
    // The transfer starts after the work enqueued so far on the sending stream
    // and runs on the device's communication stream. cudaStreamWaitEvent takes
    // the event's state at call time, so one fork event per device suffices.
    GpuDevice &g = *st.dev;
    PFRT_CUDA(cudaEventRecord(g.fork, st.s));
    PFRT_CUDA(cudaStreamWaitEvent(g.comm, g.fork, 0));
    if (peerLocal) {
      GpuChannel &c = channels_.at(std::make_tuple(ctx.device, op.peer, op.tag));
      if (op.bytes)
        PFRT_CUDA(cudaMemcpyPeerAsync(c.dst, gpus_.at(op.peer)->gpu, c.src, st.dev->gpu,
                                      op.bytes, g.comm));
      cudaEvent_t ev = c.ring[ctx.iteration % kEventRing];
      PFRT_CUDA(cudaEventRecord(ev, g.comm));
      Message m;
      m.handle = ev;
      m.owner = static_cast<int>(ctx.device);
      publisher.publish(m);
      return;
    }
    // The peer is emulated: the communication stream is busy for the planned
    // transfer, then the message is published (host callback) when it gets there.
    cuda::spin(plannedUs, g.comm);
    PFRT_CUDA_LAUNCHED();
    auto *call = new PublishCall{publisher.clone()};
    cudaError_t e = cudaLaunchHostFunc(g.comm, publishFromStream, call);
    if (e != cudaSuccess) {
      delete call;
      cudaFail(e, "cudaLaunchHostFunc", __LINE__);
    }
  }

  void recv(StreamCtx &ctx, const Op &, const Message &message) override {
    if (message.handle)
      PFRT_CUDA(cudaStreamWaitEvent(streamState(ctx).s, static_cast<cudaEvent_t>(message.handle),
                                    0));
    // From an emulated peer: the data is there now (this thread waited for it).
  }

  void copy(StreamCtx &ctx, const Op &op, double) override {
    CudaStreamState &st = streamState(ctx);
    if (!op.bytes)
      return;
    GpuDevice &g = *st.dev;
    if (op.direction == PFRT_COPY_HOST_TO_DEVICE)
      PFRT_CUDA(cudaMemcpyAsync(g.copyDevice, g.copyHost, op.bytes, cudaMemcpyHostToDevice, st.s));
    else
      PFRT_CUDA(cudaMemcpyAsync(g.copyHost, g.copyDevice, op.bytes, cudaMemcpyDeviceToHost, st.s));
  }

  void alloc(StreamCtx &ctx, const Op &op) override {
    CudaStreamState &st = streamState(ctx);
    void *p = nullptr;
    cudaError_t e = cudaMallocAsync(&p, std::max<uint64_t>(1, op.bytes), st.s);
    if (e != cudaSuccess)
      throw Error(PFRT_ERROR_BACKEND,
                  "device " + std::to_string(ctx.device) + ": cudaMallocAsync of " +
                      std::to_string(op.bytes) + " bytes for buffer " + std::to_string(op.buffer) +
                      " failed: " + cudaGetErrorString(e));
    std::lock_guard<std::mutex> lock(st.dev->buffersMutex);
    st.dev->buffers[op.buffer] = p;
  }

  void free(StreamCtx &ctx, const Op &op) override {
    CudaStreamState &st = streamState(ctx);
    void *p = nullptr;
    {
      std::lock_guard<std::mutex> lock(st.dev->buffersMutex);
      auto it = st.dev->buffers.find(op.buffer);
      if (it == st.dev->buffers.end())
        throw Error(PFRT_ERROR_INTERNAL, "device " + std::to_string(ctx.device) + ": buffer " +
                                             std::to_string(op.buffer) +
                                             " freed before its allocation was enqueued");
      p = it->second;
      st.dev->buffers.erase(it);
    }
    PFRT_CUDA(cudaFreeAsync(p, st.s));
  }

  bool streamPriority(uint32_t device, uint32_t stream, int &priority) override {
    auto it = streams_.find({device, stream});
    if (it == streams_.end())
      return false;
    priority = it->second->priority;
    return true;
  }

  std::unique_ptr<JobData> createJob(uint32_t device, uint32_t, const JobShape &shape) override {
    return std::make_unique<CudaJobData>(*gpus_.at(device), shape);
  }

  void iterationEnd(StreamCtx &ctx) override {
    CudaStreamState &st = streamState(ctx);
    cudaEvent_t end = st.take();
    PFRT_CUDA(cudaEventRecord(end, st.s));
    st.inflight.emplace_back(end, std::move(st.current));
    st.current.clear();
    while (st.inflight.size() > kTimingLag) {
      st.resolve(st.inflight.front());
      st.inflight.pop_front();
    }
    if (st.main)
      st.dev->sampleMemory();
  }

  void syncStream(StreamCtx &ctx) override {
    PFRT_CUDA(cudaStreamSynchronize(streamState(ctx).s));
  }

  void finish() override {
    for (auto &kv : gpus_) {
      PFRT_CUDA(cudaSetDevice(kv.second->gpu));
      PFRT_CUDA(cudaDeviceSynchronize());
    }
  }

  bool minFreeBytes(uint32_t device, uint64_t &bytes) override {
    auto it = gpus_.find(device);
    if (it == gpus_.end() || it->second->minFree.load() == UINT64_MAX)
      return false;
    bytes = it->second->minFree.load();
    return true;
  }

private:
  struct PairBuffers {
    void *src = nullptr, *dst = nullptr;
  };

  void calibrate(GpuDevice &g, const Device &dev, CudaStreamState &main) {
    g.bigDim = dev.desc.gemm_dim ? static_cast<int>(dev.desc.gemm_dim) : 2048;
    g.smallDim = std::max(64, g.bigDim / 4);
    const size_t bytes = size_t(g.bigDim) * g.bigDim * sizeof(float);
    PFRT_CUDA(cudaMalloc(&g.gemmA, bytes));
    PFRT_CUDA(cudaMalloc(&g.gemmB, bytes));
    PFRT_CUDA(cudaMalloc(&g.gemmC, bytes));
    PFRT_CUDA(cudaMemset(g.gemmA, 0, bytes));
    PFRT_CUDA(cudaMemset(g.gemmB, 0, bytes));
    auto timeGemm = [&](int n, int reps) {
      for (int i = 0; i < 3; ++i) // warm-up
        PFRT_CUBLAS(cuda::gemm(main.blas, false, false, n, n, n, 1.0f, g.gemmA, n, g.gemmB, n,
                               0.0f, g.gemmC, n));
      cudaEvent_t e0, e1;
      PFRT_CUDA(cudaEventCreate(&e0));
      PFRT_CUDA(cudaEventCreate(&e1));
      PFRT_CUDA(cudaEventRecord(e0, main.s));
      for (int i = 0; i < reps; ++i)
        PFRT_CUBLAS(cuda::gemm(main.blas, false, false, n, n, n, 1.0f, g.gemmA, n, g.gemmB, n,
                               0.0f, g.gemmC, n));
      PFRT_CUDA(cudaEventRecord(e1, main.s));
      PFRT_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      PFRT_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      return std::max(0.5, 1000.0 * ms / reps);
    };
    g.bigUs = timeGemm(g.bigDim, 10);
    g.smallUs = timeGemm(g.smallDim, 20);
    if (config_.verbose)
      std::fprintf(stderr, "pfrt: cuda device %u (gpu %d): GEMM %d^3 %.1f us, %d^3 %.1f us\n",
                   g.device, g.gpu, g.bigDim, g.bigUs, g.smallDim, g.smallUs);
  }

  void gemmChain(CudaStreamState &st, double plannedUs) {
    if (plannedUs <= 0)
      return;
    GpuDevice &g = *st.dev;
    long big = static_cast<long>(plannedUs / g.bigUs);
    long small = std::lround((plannedUs - big * g.bigUs) / g.smallUs);
    for (long i = 0; i < big; ++i)
      PFRT_CUBLAS(cuda::gemm(st.blas, false, false, g.bigDim, g.bigDim, g.bigDim, 1.0f, g.gemmA,
                             g.bigDim, g.gemmB, g.bigDim, 0.0f, g.gemmC, g.bigDim));
    for (long i = 0; i < small; ++i)
      PFRT_CUBLAS(cuda::gemm(st.blas, false, false, g.smallDim, g.smallDim, g.smallDim, 1.0f,
                             g.gemmA, g.smallDim, g.gemmB, g.smallDim, 0.0f, g.gemmC,
                             g.smallDim));
  }

  void release() {
    for (auto &kv : streams_) {
      CudaStreamState &st = *kv.second;
      cudaSetDevice(st.dev->gpu);
      for (auto &entry : st.inflight) {
        for (PendingTiming &p : entry.second) {
          cudaEventDestroy(p.start);
          cudaEventDestroy(p.end);
        }
        cudaEventDestroy(entry.first);
      }
      for (PendingTiming &p : st.current) {
        cudaEventDestroy(p.start);
        cudaEventDestroy(p.end);
      }
      for (cudaEvent_t e : st.pool)
        cudaEventDestroy(e);
      if (st.blas)
        cublasDestroy(st.blas);
      if (st.s)
        cudaStreamDestroy(st.s);
    }
    streams_.clear();
    for (auto &kv : channels_)
      for (cudaEvent_t e : kv.second.ring)
        cudaEventDestroy(e);
    channels_.clear();
    for (auto &kv : pairs_) {
      cudaFree(kv.second.src);
      cudaFree(kv.second.dst);
    }
    pairs_.clear();
    for (auto &kv : gpus_) {
      GpuDevice &g = *kv.second;
      cudaSetDevice(g.gpu);
      for (auto &ring : g.events)
        for (cudaEvent_t e : ring)
          cudaEventDestroy(e);
      for (auto &b : g.buffers)
        cudaFree(b.second);
      cudaFree(g.gemmA);
      cudaFree(g.gemmB);
      cudaFree(g.gemmC);
      cudaFree(g.copyDevice);
      cudaFreeHost(g.copyHost);
      if (g.base)
        cudaEventDestroy(g.base);
      if (g.setup)
        cudaStreamDestroy(g.setup);
      if (g.fork)
        cudaEventDestroy(g.fork);
      if (g.comm)
        cudaStreamDestroy(g.comm);
    }
    gpus_.clear();
  }

  RunConfig config_;
  std::map<uint32_t, std::unique_ptr<GpuDevice>> gpus_;
  std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<CudaStreamState>> streams_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, GpuChannel> channels_;
  std::map<std::pair<uint32_t, uint32_t>, PairBuffers> pairs_;
};

} // namespace

std::unique_ptr<Backend> createCudaBackend() { return std::make_unique<CudaBackend>(); }

int cudaDeviceCount() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError(); // clear the sticky-free error (no driver, no device)
    return 0;
  }
  return count;
}

} // namespace pfrt
