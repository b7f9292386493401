// CUDA backend, cuBLAS workloads (see CudaWorkloads.h).
#include "runtime/CudaWorkloads.h"

#include "runtime/CudaGate.h"
#include "runtime/CudaKernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

namespace pfrt {
namespace cudabk {

namespace {

class CudaJobData;

constexpr size_t kAlign = 256; // carved scratch: cuBLAS and vector loads like aligned operands
size_t padded(size_t bytes) { return (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign; }

// A device tensor that may be parked in pinned host memory between chunks (h, hcap: the pinned
// buffer and its capacity).
struct Tensor {
  float *d = nullptr;
  void *h = nullptr;
  size_t n = 0, hcap = 0;
};

// Per-layer scratch of one fill stream: allocated once, before the loop, and carved from the start
// again for every pass. Reuse is safe because everything carved is used only by work enqueued on
// this one stream, in order.
struct Arena {
  char *base = nullptr;
  size_t capacity = 0, used = 0;
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

  // Calls f on every tensor the batch holds: the activations, then the stashes.
  template <class F> void forEachTensor(F f) {
    f(act);
    for (Tensor &t : stashX)
      f(t);
    for (Tensor &t : stashH)
      f(t);
  }

private:
  CudaJobData &job_;
};

class CudaJobData : public JobData, public WarmUp {
public:
  CudaJobData(GpuDevice &dev, const JobShape &shape, FillMath math,
              const std::vector<JobChunk> &chunks)
      : dev_(dev), shape_(shape), bf16_(math == FillMath::Bf16) {
    DeviceGuard guard(dev_.gpu);
    stream_ = dev_.setup;
    bool streamsWeights = false;
    for (const JobChunk &c : chunks)
      streamsWeights = streamsWeights || c.weightsStreamed;
    for (uint32_t l = 0; l < shape_.numLayers(); ++l) {
      std::vector<std::vector<float>> w = initLayerWeights(shape_, l);
      std::vector<float *> dl;
      std::vector<void *> cl;
      for (size_t t = 0; t < w.size(); ++t) {
        float *p = nullptr;
        PFRT_CUDA(cudaMalloc(&p, std::max<size_t>(1, w[t].size()) * sizeof(float)));
        // On the setup stream (non-blocking, like the streams that use the weights), so the
        // conversion below is ordered after the copy.
        PFRT_CUDA(cudaMemcpyAsync(p, w[t].data(), w[t].size() * sizeof(float),
                                  cudaMemcpyHostToDevice, stream_));
        dl.push_back(p);
        void *c = p;
        if (bf16_ && isGemmWeight(l, t)) {
          PFRT_CUDA(cudaMalloc(&c, std::max<size_t>(1, w[t].size()) * 2));
          cuda::toBf16(p, c, w[t].size(), stream_);
          PFRT_CUDA_LAUNCHED();
        }
        cl.push_back(c);
      }
      dW_.push_back(dl);
      cW_.push_back(cl);
      sizes_.push_back(shape_.layers[l].weightSizes());
      PFRT_CUDA(cudaStreamSynchronize(stream_)); // `w` (pageable) goes out of scope
    }
    PFRT_CUDA(cudaMalloc(&acc_, 2 * sizeof(double)));
    PFRT_CUDA(cudaMemsetAsync(acc_, 0, 2 * sizeof(double), stream_));
    if (streamsWeights) { // pinned masters made now, not at the first chunk (the hot path)
      for (size_t l = 0; l < cW_.size(); ++l) {
        std::vector<void *> hl;
        for (size_t t = 0; t < cW_[l].size(); ++t) {
          void *p = nullptr;
          PFRT_CUDA(cudaMallocHost(&p, std::max<size_t>(1, computeBytes(l, t))));
          PFRT_CUDA(cudaMemcpyAsync(p, cW_[l][t], computeBytes(l, t), cudaMemcpyDeviceToHost,
                                    stream_));
          hl.push_back(p);
        }
        hW_.push_back(hl);
      }
    }
    // Scratch: one arena per fill stream that runs the job, each for the largest chunk of the job
    // on this device (deferred work may run on another of its streams).
    size_t scratch = 0, batchState = 0;
    for (const JobChunk &c : chunks) {
      for (uint32_t p = c.passBegin; p < c.passEnd; ++p)
        scratch = std::max(scratch, scratchBytes(p, c.batch, c.weightsStreamed));
      if (c.passBegin == 0)
        batchState += batchStateBytes(c.batch);
      if (c.activationsHost && c.passEnd < shape_.passes)
        for (size_t bytes : parkedBytes(c.passEnd, c.batch))
          pinned_.reserve(bytes);
    }
    for (const JobChunk &c : chunks) {
      Arena &a = arenas_[c.stream];
      if (!a.base && scratch) {
        PFRT_CUDA(cudaMalloc(reinterpret_cast<void **>(&a.base), scratch));
        a.capacity = scratch;
      }
    }
    // GEMM_CHAIN stand-ins: buffers for the largest link and each size timed now.
    for (const LayerShape &ls : shape_.layers)
      if (ls.kind == PFRT_LAYER_GEMM_CHAIN)
        chainDim_ = std::max(chainDim_, chainDim(ls));
    if (chainDim_) {
      allocChain(chainDim_, stream_);
      cublasHandle_t h = nullptr;
      PFRT_CUBLAS(cublasCreate(&h));
      cublasStatus_t st = cublasSetStream(h, stream_);
      try {
        if (st != CUBLAS_STATUS_SUCCESS)
          PFRT_CUBLAS(st);
        for (const LayerShape &ls : shape_.layers)
          if (ls.kind == PFRT_LAYER_GEMM_CHAIN && !chainUs_.count(chainDim(ls)))
            chainUs_[chainDim(ls)] = timeChain(h, stream_, chainDim(ls));
      } catch (...) {
        cublasDestroy(h);
        throw;
      }
      PFRT_CUBLAS(cublasDestroy(h));
    }
    // The batches' state comes from the fill pool: reserve it now (freed with the other jobs'
    // reservations before the loop, so the pool does not grow in the hot path).
    if (batchState) {
      void *r = nullptr;
      PFRT_CUDA(cudaMallocFromPoolAsync(&r, batchState, dev_.fillPool, stream_));
      std::lock_guard<std::mutex> lock(dev_.reserveMutex);
      dev_.reservations.push_back(r);
    }
    PFRT_CUDA(cudaStreamSynchronize(stream_));
    // Warm-up shapes: each distinct planned chunk of two passes or more (those may run gated),
    // and an inference job's one-pass chunks too (they run ungated, but a first run would load
    // its cuBLAS kernels inside its bubble, lazily; the capture behind a closed gate loads them
    // before the loop). A training chunk that continues a batch is warmed from the batch's
    // creation (its backward passes read the forward passes' stashes), so not its one-pass
    // chunks (about P^2 / 2 passes for a job of P); any other chunk from its own first pass,
    // with a batch made for it, so a warm chunk holds no more memory than the chunk itself.
    const bool training = shape_.kind == PFRT_FILL_TRAINING;
    std::set<std::tuple<uint32_t, uint32_t, bool, uint32_t, uint32_t>> seen;
    for (const JobChunk &c : chunks) {
      if (c.passEnd < c.passBegin + (training ? 2 : 1))
        continue;
      JobChunk w = c;
      if (training)
        w.passBegin = 0;
      w.activationsHost = false;
      if (seen.insert({w.stream, w.batch, w.weightsStreamed, w.passBegin, w.passEnd}).second)
        warmShapes_.push_back(w);
    }
    std::lock_guard<std::mutex> lock(dev_.warmMutex);
    dev_.toWarm.push_back(this);
  }

  ~CudaJobData() override {
    {
      std::lock_guard<std::mutex> lock(dev_.warmMutex);
      dev_.toWarm.erase(std::remove(dev_.toWarm.begin(), dev_.toWarm.end(), this),
                        dev_.toWarm.end());
    }
    cudaSetDevice(dev_.gpu);
    cudaDeviceSynchronize();
    for (size_t l = 0; l < dW_.size(); ++l)
      for (size_t t = 0; t < dW_[l].size(); ++t) {
        if (cW_[l][t] != dW_[l][t])
          cudaFree(cW_[l][t]);
        cudaFree(dW_[l][t]);
      }
    for (auto &l : hW_)
      for (void *p : l)
        cudaFreeHost(p);
    for (auto &kv : arenas_)
      cudaFree(kv.second.base);
    cudaFree(acc_);
    if (chainA_) {
      cudaFree(chainA_);
      cudaFree(chainB_);
      cudaFree(chainC_);
    }
  }

  // A batch's state at its first pass: its input activations (the samples from ex.sampleBegin),
  // empty stashes (training) and a zeroed loss.
  std::unique_ptr<CudaBatch> newBatch(const FillExec &ex, cudaStream_t s) {
    auto b = std::make_unique<CudaBatch>(*this);
    b->act = alloc(shape_.inputElems(ex.batch), s);
    cuda::makeInput(b->act.d, shape_.seed, ex.sampleBegin, ex.batch,
                    size_t(shape_.rows) * shape_.inWidth, s);
    PFRT_CUDA_LAUNCHED();
    if (shape_.kind == PFRT_FILL_TRAINING) {
      b->stashX.resize(shape_.numLayers());
      b->stashH.resize(shape_.numLayers());
    }
    b->loss = static_cast<double *>(allocBytes(sizeof(double), s, /*hot=*/true));
    PFRT_CUDA(cudaMemsetAsync(b->loss, 0, sizeof(double), s));
    return b;
  }

  // The backward pass of MLP layer l over `rows` rows: b.act (dY) becomes dX (none for layer
  // 0), the layer's weights take an SGD step and its stashes are released.
  void mlpBackward(cublasHandle_t h, cudaStream_t s, CudaBatch &b, uint32_t l, int rows) {
    const LayerShape &ls = shape_.layers[l];
    float *w1 = dW_[l][0], *w2 = dW_[l][1];
    const size_t nh = b.stashH[l].n;
    float *hact = carveF(nh), *dh = carveF(nh);
    float *dw1 = carveF(sizes_[l][0]), *dw2 = carveF(sizes_[l][1]);
    Tensor dx;
    cuda::gelu(b.stashH[l].d, hact, nh, s);
    PFRT_CUDA_LAUNCHED();
    // dW2 = gelu(H)^T dY, dH = dY W2^T (weights before this step's update).
    const void *dyOp = operand(b.act.d, b.act.n, s);
    PFRT_CUBLAS(mm(h, true, false, ls.mid, ls.out, rows, 1.0f, operand(hact, nh, s),
                   ls.mid, dyOp, ls.out, 0.0f, dw2, ls.out));
    PFRT_CUBLAS(mm(h, false, true, rows, ls.mid, ls.out, 1.0f, dyOp, ls.out, cW_[l][1],
                   ls.out, 0.0f, dh, ls.mid));
    cuda::geluBackwardMul(dh, b.stashH[l].d, nh, s);
    PFRT_CUDA_LAUNCHED();
    // dW1 = X^T dH, dX = dH W1^T.
    const void *dhOp = operand(dh, nh, s);
    PFRT_CUBLAS(mm(h, true, false, ls.in, ls.mid, rows, 1.0f,
                   operand(b.stashX[l].d, b.stashX[l].n, s), ls.in, dhOp, ls.mid, 0.0f,
                   dw1, ls.mid));
    if (l > 0) {
      dx = alloc(size_t(rows) * ls.in, s);
      PFRT_CUBLAS(mm(h, false, true, rows, ls.in, ls.mid, 1.0f, dhOp, ls.mid, cW_[l][0],
                     ls.mid, 0.0f, dx.d, ls.in));
    }
    // SGD on the fp32 masters, then their bf16 copies and the pinned masters follow.
    const float alpha = -shape_.learningRate;
    PFRT_CUBLAS(cublasSaxpy(h, static_cast<int>(sizes_[l][0]), &alpha, dw1, 1, w1, 1));
    PFRT_CUBLAS(cublasSaxpy(h, static_cast<int>(sizes_[l][1]), &alpha, dw2, 1, w2, 1));
    for (size_t t = 0; t < 2; ++t) {
      if (cW_[l][t] != dW_[l][t]) {
        cuda::toBf16(dW_[l][t], cW_[l][t], sizes_[l][t], s);
        PFRT_CUDA_LAUNCHED();
      }
      if (!hW_.empty()) // keep the pinned master (streamed weights) in sync
        PFRT_CUDA(cudaMemcpyAsync(hW_[l][t], cW_[l][t], computeBytes(l, t),
                                  cudaMemcpyDeviceToHost, s));
    }
    release(b.stashX[l], s);
    release(b.stashH[l], s);
    release(b.act, s);
    b.act = dx;
  }

  // Unbounded chunks (and bounded ones with PFRT_CUDA_DEVICE_GATE=0): every pass is enqueued at
  // once and runs (keepGoing is for the host). Bounded ones run behind device-side gates.
  uint32_t run(StreamCtx &ctx, std::unique_ptr<BatchData> &batchPtr,
               const FillExec &ex) override {
    CudaStreamState &st = streamState(ctx);
    cudaStream_t s = st.s;
    stream_ = s;
    arena_ = &arenas_[ctx.stream];
    st.lastGated = false;
    if (gated(st, ex))
      return runGated(st, batchPtr, ex);
    if (ex.begins || !batchPtr)
      batchPtr = newBatch(ex, s);
    CudaBatch &b = static_cast<CudaBatch &>(*batchPtr);
    if (b.onHost)
      restore(b, s);
    for (uint32_t p = ex.passBegin; p < ex.passEnd; ++p) {
      // Every pass carves its scratch from the start of the stream's arena: the previous pass's
      // scratch is dead once this pass's kernels run (same stream, in order).
      reserveScratch(scratchBytes(p, ex.batch, ex.weightsStreamed), s);
      enqueuePass(st.blas, s, b, ex, p);
    }
    if (ex.completes)
      enqueueCompletion(b, ex, s);
    else if (ex.activationsHost)
      offload(b, s);
    return ex.passEnd;
  }

  // Pass p of the batch: its kernels and cuBLAS calls on stream s.
  void enqueuePass(cublasHandle_t h, cudaStream_t s, CudaBatch &b, const FillExec &ex,
                   uint32_t p) {
    const uint32_t L = shape_.numLayers();
    const bool training = shape_.kind == PFRT_FILL_TRAINING;
    const int rows = static_cast<int>(ex.batch * shape_.rows);
    if (p >= L) {
      const uint32_t l = 2 * L - 1 - p;
      const LayerShape &ls = shape_.layers[l];
      if (ls.kind == PFRT_LAYER_MLP)
        mlpBackward(h, s, b, l, rows);
      else
        chain(h, s, ls, ls.backwardUsPerSample * ex.batch);
      return;
    }
    const LayerShape &ls = shape_.layers[p];
    std::vector<const void *> w(cW_[p].begin(), cW_[p].end());
    if (ex.weightsStreamed && !sizes_[p].empty())
      for (size_t t = 0; t < sizes_[p].size(); ++t) {
        void *d = carve(computeBytes(p, t));
        PFRT_CUDA(cudaMemcpyAsync(d, hW_[p][t], computeBytes(p, t), cudaMemcpyHostToDevice, s));
        w[t] = d;
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
      Tensor hpre = training ? alloc(size_t(rows) * ls.mid, s) : scratch(size_t(rows) * ls.mid);
      Tensor y = alloc(size_t(rows) * ls.out, s);
      float *hact = carveF(size_t(rows) * ls.mid);
      PFRT_CUBLAS(mm(h, false, false, rows, ls.mid, ls.in, 1.0f,
                     operand(b.act.d, size_t(rows) * ls.in, s), ls.in, w[0], ls.mid, 0.0f,
                     hpre.d, ls.mid));
      cuda::gelu(hpre.d, hact, hpre.n, s);
      PFRT_CUDA_LAUNCHED();
      PFRT_CUBLAS(mm(h, false, false, rows, ls.out, ls.mid, 1.0f,
                     operand(hact, size_t(rows) * ls.mid, s), ls.mid, w[1], ls.out, 0.0f, y.d,
                     ls.out));
      if (training) {
        b.stashX[p] = b.act;
        b.stashH[p] = hpre;
      } else {
        release(b.act, s);
      }
      b.act = y;
      break;
    }
    case PFRT_LAYER_GEMM_CHAIN:
      chain(h, s, ls, ls.usPerSample * ex.batch);
      break;
    }
    if (training && p == L - 1) {
      float *t = carveF(b.act.n);
      Tensor dy = alloc(b.act.n, s);
      cuda::makeTarget(t, shape_.seed, ex.sampleBegin, ex.batch,
                       size_t(shape_.rows) * shape_.outWidth,
                       size_t(shape_.rows) * shape_.inWidth, s);
      cuda::mseLoss(b.act.d, t, dy.d, b.act.n, static_cast<int>(ex.batch), b.loss, s);
      PFRT_CUDA_LAUNCHED();
      release(b.act, s);
      b.act = dy;
    }
  }

  // The batch's last pass has been enqueued: its loss (training) or output checksum (inference)
  // goes into the job's accumulators.
  void enqueueCompletion(CudaBatch &b, const FillExec &ex, cudaStream_t s) {
    if (shape_.kind == PFRT_FILL_TRAINING) {
      cuda::addLoss(b.loss, acc_, s);
    } else {
      const uint64_t per = uint64_t(shape_.rows) * shape_.outWidth;
      cuda::checksum(b.act.d, b.act.n, ex.sampleBegin * per, acc_, s);
    }
    PFRT_CUDA_LAUNCHED();
  }

  // ---- The device-side bound (DeviceGate.h) ----

  // A batch's tensors at one point of a gated chunk (before it, after each pass).
  struct Snapshot {
    bool exists = false;
    Tensor act;
    double *loss = nullptr;
    std::vector<Tensor> stashX, stashH;
  };
  static Snapshot snapshot(const std::unique_ptr<BatchData> &batch) {
    Snapshot sn;
    if (!batch)
      return sn;
    const CudaBatch &b = static_cast<const CudaBatch &>(*batch);
    sn.exists = true;
    sn.act = b.act;
    sn.loss = b.loss;
    sn.stashX = b.stashX;
    sn.stashH = b.stashH;
    return sn;
  }
  static void devicePointers(const Snapshot &sn, std::set<void *> &out) {
    if (!sn.exists)
      return;
    out.insert(sn.act.d);
    out.insert(sn.loss);
    for (const Tensor &t : sn.stashX)
      out.insert(t.d);
    for (const Tensor &t : sn.stashH)
      out.insert(t.d);
    out.erase(nullptr);
  }
  // Makes the batch hold what `sn` held (nothing is freed; without a batch in `sn`, none).
  static void restoreSnapshot(std::unique_ptr<BatchData> &batch, const Snapshot &sn) {
    if (!batch)
      return;
    CudaBatch &b = static_cast<CudaBatch &>(*batch);
    b.act = sn.act;
    b.loss = sn.loss;
    b.stashX = sn.stashX;
    b.stashH = sn.stashH;
    if (!sn.exists)
      batch.reset(); // its handles are empty now: the destructor frees nothing
  }

  // Before the loop (CudaBackend::warmUp): one chunk of each warm-up shape, its batch made behind
  // its first gate, captured and launched behind gates whose deadline is long past, so no pass
  // runs and no state changes (the commit frees the batch and everything the capture allocated).
  // What CUDA and cuBLAS do the first time happens now instead of in a bubble: cuBLAS's host work
  // for each GEMM shape during capture (the H200's first gated MLP chunk was launched 184 ms after
  // its decision, docs/runtime.md §10b), loading the modules of the gate kernel and of every
  // kernel captured (lazy module loading, CUDA's default, loads a kernel when its handle is first
  // resolved, which a capture does; it delayed the first gate by 3.4 ms there), and the graph
  // machinery's one-time set-up. A shape whose passes need more scratch than the stream's arena
  // holds is skipped (growing the arena here would keep memory the plan never asked for). Not
  // counted in the hot path's counters or the gate trace. On an error the chunk's allocations are
  // freed and the error goes to the caller (which warns and goes on).
  void warmUp(const std::function<CudaStreamState *(uint32_t)> &streamOf) override {
    DeviceGuard guard(dev_.gpu);
    warming_ = true;
    struct Done {
      CudaJobData &job;
      ~Done() {
        job.warming_ = false;
        job.stream_ = job.dev_.setup;
        job.arena_ = nullptr;
      }
    } done{*this};
    for (const JobChunk &c : warmShapes_) {
      CudaStreamState *st = streamOf(c.stream);
      if (!st || !st->gateHost || !dev_.gateOn.load())
        continue;
      size_t most = 0;
      for (uint32_t p = c.passBegin; p < c.passEnd; ++p)
        most = std::max(most, scratchBytes(p, c.batch, c.weightsStreamed));
      Arena &arena = arenas_[c.stream];
      if (most > arena.capacity)
        continue;
      stream_ = st->s;
      arena_ = &arena;
      FillExec ex;
      ex.shape = &shape_;
      ex.passBegin = c.passBegin;
      ex.passEnd = c.passEnd;
      ex.batch = c.batch;
      ex.weightsStreamed = c.weightsStreamed;
      ex.begins = true; // the batch is made behind the first gate (never, as no gate opens)
      ex.completes = c.passEnd == shape_.passes;
      ex.bounded = ex.splitPasses = true;
      ex.deadlineUs = dev_.gtHostUs - 1e6;                  // a second before the calibration
      ex.passNeedUs.assign(c.passEnd - c.passBegin, 1e9); // and no pass fits before it
      std::unique_ptr<BatchData> batch;
      uint32_t ran = 0;
      try {
        ran = runGated(*st, batch, ex);
      } catch (...) {
        gating_ = nullptr;
        restoreSnapshot(batch, Snapshot{}); // its tensors are among the chunk's allocations
        cudaStreamSynchronize(st->allocStream); // allocations not yet ordered before st->s
        cudaStreamSynchronize(st->s);
        for (void *p : gatedAllocs_)
          cudaFreeAsync(p, st->s);
        gatedAllocs_.clear();
        cudaStreamSynchronize(st->s);
        cudaGetLastError();
        throw;
      }
      st->lastGated = false;
      st->lastGate = GateState{};
      if (ran != 0 || batch)
        throw Error(PFRT_ERROR_INTERNAL, "cuda fill warm-up: a pass ran behind a closed gate");
    }
  }

  // Gated: bounded chunks of two passes or more that may stop between them. A chunk of one pass
  // (or a whole chunk, PFRT_FILL_BOUNDED_WHOLE) would get a single gate, which would check what
  // the host has just checked: the fill stream is idle when the host decides (streamNowUs waits
  // for it) and reaches the chunk's first kernel microseconds later, so a gate would only add the
  // graph's cost.
  bool gated(const CudaStreamState &st, const FillExec &ex) const {
    return dev_.gateOn.load() && st.gateHost && dev_.gtNs != 0 && ex.bounded && ex.splitPasses &&
           ex.passEnd >= ex.passBegin + 2 && ex.deadlineUs > 0 && std::isfinite(ex.deadlineUs) &&
           ex.passNeedUs.size() == size_t(ex.passEnd - ex.passBegin);
  }

  // A bounded chunk, each pass behind its gate (CudaGate.h: one small graph per pass, launched
  // as soon as it is built). The host waits for them, keeps the batch as the passes that ran left
  // it, and frees what the chunk held or made that is no longer used. If a pass's graph cannot be
  // built on this GPU, the device's gates are turned off (with a warning) and the chunk ends with
  // the passes launched before it: the rest goes back to the queue and runs ungated.
  uint32_t runGated(CudaStreamState &st, std::unique_ptr<BatchData> &batchPtr,
                    const FillExec &ex) {
    cudaStream_t s = st.s;
    if (ex.begins)
      batchPtr.reset(); // the batch is made behind the first gate
    else if (batchPtr && static_cast<CudaBatch &>(*batchPtr).onHost)
      restore(static_cast<CudaBatch &>(*batchPtr), s); // copies, before the gates
    size_t most = 0; // the arena must not be replaced while a pass is captured
    for (uint32_t p = ex.passBegin; p < ex.passEnd; ++p)
      most = std::max(most, scratchBytes(p, ex.batch, ex.weightsStreamed));
    reserveScratch(most, s);
    std::vector<Snapshot> snaps{snapshot(batchPtr)};
    GatedLaunch launch(st);
    std::string failure;
    try {
      captureAndLaunch(st, launch, batchPtr, ex, snaps);
    } catch (const Error &e) {
      gating_ = nullptr;
      launch.abandon();
      if (e.status() != PFRT_ERROR_BACKEND) { // not the GPU refusing a graph: a bug
        restoreSnapshot(batchPtr, snaps.back());
        throw;
      }
      failure = e.what();
    }
    const double waitT0 = hostNowUs();
    const GateState gs = launch.wait();
    const double waitUs = hostNowUs() - waitT0;
    const uint32_t launched = static_cast<uint32_t>(launch.launched());
    if (gateTrace() && !warming_)
      traceGated(ex, gs, launched, waitUs, launch);
    const uint32_t ran = std::min(gs.passesRun, launched);
    commit(batchPtr, snaps, ran, s);
    st.lastGated = launched > 0;
    st.lastGate = gs;
    if (ran == launched)
      st.lastGate.stop = kGateRuns; // no gate closed (a build failure stopped it, if anything)
    // A one-pass shape is warmed (its kernels loaded) but never runs gated: its failure is the
    // warm-up's (the job stays cold), not a sign that gates cannot run on this GPU.
    if (!failure.empty() && warming_ && ex.passEnd < ex.passBegin + 2)
      throw Error(PFRT_ERROR_BACKEND, failure);
    if (!failure.empty() && dev_.gateOn.exchange(false))
      std::fprintf(stderr,
                   "pfrt: warning: cuda device %u (gpu %d): fill chunks cannot run behind "
                   "device-side gates (%s); their bubble bound is checked on the host only\n",
                   dev_.device, dev_.gpu, failure.c_str());
    const uint32_t passEnd = ex.passBegin + ran;
    if (batchPtr && !(ex.completes && passEnd == ex.passEnd) && ex.activationsHost)
      offload(static_cast<CudaBatch &>(*batchPtr), s);
    return passEnd;
  }

  // PFRT_CUDA_GATE_TRACE=1: one stderr line per gated chunk (diagnostics of the device bound).
  static bool gateTrace() {
    static const bool on = [] {
      const char *v = std::getenv("PFRT_CUDA_GATE_TRACE");
      return v && *v && std::string(v) != "0";
    }();
    return on;
  }
  // Times relative to the host's decision (t = 0: captureAndLaunch began), on the host clock;
  // the gates' %globaltimer readings converted with the run's calibration.
  void traceGated(const FillExec &ex, const GateState &gs, uint32_t launched, double waitUs,
                  const GatedLaunch &launch) {
    const double gtToHost = dev_.gtHostUs - traceT0_;
    auto hostOf = [&](uint64_t ns) {
      return ns ? gtToHost + 1e-3 * (static_cast<double>(ns) - static_cast<double>(dev_.gtNs))
                : -1.0;
    };
    std::string segs, costs;
    for (double t : traceLaunchUs_)
      segs += (segs.empty() ? "" : ",") + std::to_string(static_cast<long>(t));
    for (const GatedLaunch::SegmentCost &c : launch.costs())
      costs += (costs.empty() ? "" : ",") + std::to_string(static_cast<long>(c.captureUs)) + "/" +
               std::to_string(static_cast<long>(c.instantiateUs)) + "/" +
               std::to_string(static_cast<long>(c.launchUs));
    static const char *why[] = {"runs", "ENDED", "DEADLINE", "earlier"};
    // HOST: every pass launched ran, and the host built no more (gateSureToRefuse).
    const bool hostStop = gs.stop == kGateRuns && gs.passesRun >= launched &&
                          launched < ex.passEnd - ex.passBegin;
    int64_t nextEdge = 0;
    {
      std::lock_guard<std::mutex> lock(dev_.edgeMutex);
      nextEdge = dev_.nextEdge;
    }
    std::fprintf(stderr,
                 "pfrt-gate: sample %llu passes [%u,%u) launched %u ran %u stop %s | host us "
                 "from decision: launches at [%s] (capture/instantiate/launch [%s]), wait %.0f, "
                 "deadline %.0f, first gate %.0f, "
                 "stop gate %.0f | need[0] %.0f us | edge: begin %llu, word at stop %llu, "
                 "device nextEdge %lld | bubble token %lld\n",
                 (unsigned long long)ex.sampleBegin, ex.passBegin, ex.passEnd, launched,
                 gs.passesRun, hostStop ? "HOST" : why[gs.stop < 4 ? gs.stop : 0], segs.c_str(),
                 costs.c_str(),
                 waitUs,
                 ex.deadlineUs - traceT0_, hostOf(gs.firstNs), hostOf(gs.stopNs),
                 ex.passNeedUs.empty() ? 0.0 : ex.passNeedUs[0],
                 (unsigned long long)(ex.bubbleToken >= 0 ? ex.bubbleToken + 1 : 0),
                 (unsigned long long)gs.stopEdge, (long long)nextEdge,
                 (long long)ex.bubbleToken);
  }

  // Captures and launches each pass behind its gate; snaps gets the batch after each pass
  // launched. Counts the gated chunk and the host time before its first pass could start. A
  // pass whose gate is sure to refuse it (an earlier gate closed, or it no longer fits on the
  // host's clock: gateSureToRefuse) is not built, nor are the passes after it; the warm-up builds
  // every pass (its gates are closed on purpose).
  void captureAndLaunch(CudaStreamState &st, GatedLaunch &launch,
                        std::unique_ptr<BatchData> &batchPtr, const FillExec &ex,
                        std::vector<Snapshot> &snaps) {
    cudaStream_t s = st.s;
    const double t0 = hostNowUs();
    traceT0_ = t0;
    traceLaunchUs_.clear();
    const uint64_t deadlineNs = deadlineToGlobalNs(ex.deadlineUs, dev_.gtHostUs, dev_.gtNs);
    gating_ = &st;
    gatedAllocs_.clear();
    *st.gateHost = GateState{}; // no gate of this stream is in flight (the last chunk was waited)
    for (uint32_t p = ex.passBegin; p < ex.passEnd; ++p) {
      if (p > ex.passBegin && !warming_) {
        // Written by the gate kernels in flight (mapped memory, __threadfence_system after).
        GateState seen;
        seen.stop = __atomic_load_n(&st.gateHost->stop, __ATOMIC_ACQUIRE);
        // The slack: the calibration's error, and 10 us for the clocks' drift since it was read.
        if (gateSureToRefuse(seen, hostNowUs(), ex.passNeedUs[p - ex.passBegin], ex.deadlineUs,
                             dev_.gtErrUs + 10.0))
          break;
      }
      GateArgs a;
      a.pass = p - ex.passBegin;
      a.beginEdge = ex.bubbleToken >= 0 ? static_cast<uint64_t>(ex.bubbleToken) + 1 : 0;
      a.deadlineNs = deadlineNs;
      a.needNs = static_cast<uint64_t>(std::max(0.0, ex.passNeedUs[a.pass]) * 1000.0);
      launch.beginSegment(a);
      if (!batchPtr)
        batchPtr = newBatch(ex, s);
      CudaBatch &b = static_cast<CudaBatch &>(*batchPtr);
      arena_->used = 0;
      enqueuePass(st.blas, s, b, ex, p);
      if (p + 1 == ex.passEnd && ex.completes)
        enqueueCompletion(b, ex, s);
      launch.endSegment();
      traceLaunchUs_.push_back(hostNowUs() - t0);
      snaps.push_back(snapshot(batchPtr));
      if (p == ex.passBegin && !warming_) {
        hotPath().gatedChunks.fetch_add(1);
        hotPath().gateBuildNs.fetch_add(static_cast<uint64_t>(1e3 * (hostNowUs() - t0)));
      }
    }
    gating_ = nullptr;
  }

  // After a gated chunk ran `ran` of its passes: the batch holds snaps[ran]; everything else
  // the chunk held before or allocated is freed (stream-ordered, after the graph).
  void commit(std::unique_ptr<BatchData> &batchPtr, const std::vector<Snapshot> &snaps,
              uint32_t ran, cudaStream_t s) {
    std::set<void *> keep, drop(gatedAllocs_.begin(), gatedAllocs_.end());
    gatedAllocs_.clear();
    devicePointers(snaps[ran], keep);
    for (const Snapshot &sn : snaps)
      devicePointers(sn, drop);
    restoreSnapshot(batchPtr, snaps[ran]);
    for (void *p : drop)
      if (!keep.count(p))
        PFRT_CUDA(cudaFreeAsync(p, s));
  }

  Accum accumulators() override {
    DeviceGuard guard(dev_.gpu);
    // On the job's stream, never the legacy default one: a session's framework may have queued
    // work there (torch does), which a synchronous cudaMemcpy would wait behind.
    double host[2] = {0, 0};
    PFRT_CUDA(cudaMemcpyAsync(host, acc_, sizeof host, cudaMemcpyDeviceToHost, stream_));
    PFRT_CUDA(cudaStreamSynchronize(stream_));
    return {host[0], host[1]};
  }

  std::vector<std::vector<float>> saveWeights() override {
    DeviceGuard guard(dev_.gpu);
    PFRT_CUDA(cudaStreamSynchronize(stream_));
    std::vector<std::vector<float>> out;
    for (size_t l = 0; l < dW_.size(); ++l)
      for (size_t t = 0; t < dW_[l].size(); ++t) {
        std::vector<float> v(sizes_[l][t]);
        PFRT_CUDA(cudaMemcpyAsync(v.data(), dW_[l][t], v.size() * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_)); // not the legacy stream
        out.push_back(std::move(v));
      }
    PFRT_CUDA(cudaStreamSynchronize(stream_));
    return out;
  }

  void loadWeights(const std::vector<std::vector<float>> &w) override {
    DeviceGuard guard(dev_.gpu);
    PFRT_CUDA(cudaStreamSynchronize(stream_));
    size_t k = 0;
    for (size_t l = 0; l < dW_.size(); ++l)
      for (size_t t = 0; t < dW_[l].size(); ++t, ++k) {
        if (k >= w.size() || w[k].size() != sizes_[l][t])
          throw Error(PFRT_ERROR_PARSE,
                      "checkpoint: fill-job weights do not match the job's layer shapes");
        PFRT_CUDA(cudaMemcpyAsync(dW_[l][t], w[k].data(), w[k].size() * sizeof(float),
                                  cudaMemcpyHostToDevice, dev_.setup));
        if (cW_[l][t] != dW_[l][t]) {
          cuda::toBf16(dW_[l][t], cW_[l][t], sizes_[l][t], dev_.setup);
          PFRT_CUDA_LAUNCHED();
        }
        if (!hW_.empty())
          PFRT_CUDA(cudaMemcpyAsync(hW_[l][t], cW_[l][t], computeBytes(l, t),
                                    cudaMemcpyDeviceToHost, dev_.setup));
      }
    PFRT_CUDA(cudaStreamSynchronize(dev_.setup));
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
      Tensor x;
      if (v.empty()) // an absent tensor (e.g. a stash of a layer that keeps none)
        return x;
      x = alloc(v.size(), s, /*hot=*/false);
      PFRT_CUDA(cudaMemcpyAsync(x.d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice,
                                s));
      PFRT_CUDA(cudaStreamSynchronize(s));
      return x;
    };
    b->act = upload(t[0]);
    double loss = t[1].empty() ? 0.0 : t[1][0];
    PFRT_CUDA(cudaMallocFromPoolAsync(reinterpret_cast<void **>(&b->loss), sizeof(double),
                                      dev_.fillPool, s));
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

  // Batch state (activations between chunks, stashes): a stream-ordered sub-allocation from the
  // fill pool, which was grown before the loop.
  // While a gated chunk is captured (gating_), on the stream's allocation stream, remembered for
  // the chunk's commit.
  Tensor alloc(size_t n, cudaStream_t s, bool hot = true) {
    Tensor t;
    t.n = n;
    t.d = static_cast<float *>(allocBytes(std::max<size_t>(1, n) * sizeof(float), s, hot));
    return t;
  }
  void *allocBytes(size_t bytes, cudaStream_t s, bool hot) {
    void *p = nullptr;
    cudaStream_t on = gating_ ? gating_->allocStream : s;
    PFRT_CUDA(cudaMallocFromPoolAsync(&p, bytes, dev_.fillPool, on));
    if (gating_)
      gatedAllocs_.push_back(p);
    if (hot && !warming_)
      hotPath().batchAllocs.fetch_add(1);
    return p;
  }
  // checked: false from destructors (which must not throw). While a gated chunk is captured the
  // tensor is only dropped from the batch: the chunk's commit frees what the passes that ran
  // left unused.
  void release(Tensor &t, cudaStream_t s, bool checked = true) {
    if (gating_) {
      t = Tensor{};
      return;
    }
    if (t.d) {
      const cudaError_t e = cudaFreeAsync(t.d, s);
      if (checked && e != cudaSuccess)
        cudaFail(e, "cudaFreeAsync", __FILE__, __LINE__);
    }
    if (t.h)
      pinned_.put(t.h, t.hcap);
    t = Tensor{};
  }

private:
  bool isGemmWeight(size_t l, size_t t) const {
    const LayerShape &ls = shape_.layers[l];
    return ls.kind == PFRT_LAYER_MLP || (ls.kind == PFRT_LAYER_ENCODER && t < 6);
  }
  // Bytes of weight tensor t of layer l in the form the GEMMs read (bf16 or fp32).
  size_t computeBytes(size_t l, size_t t) const {
    return sizes_[l][t] * (bf16_ && isGemmWeight(l, t) ? 2 : sizeof(float));
  }
  size_t esz() const { return bf16_ ? 2 : sizeof(float); }
  static int chainDim(const LayerShape &ls) { return static_cast<int>(std::max<uint32_t>(ls.dim, 16)); }

  // The arena bytes pass p of a batch of `batch` samples carves; run() carves in this order and
  // carve() checks the bound. Mirrors run(), encoderForward() and operand().
  size_t scratchBytes(uint32_t p, uint32_t batch, bool streamed) const {
    const uint32_t L = shape_.numLayers();
    const size_t rows = size_t(batch) * shape_.rows;
    const size_t f4 = sizeof(float), c = esz(), b2 = bf16_ ? 2 : 0; // b2: operand() copies
    size_t total = 0;
    if (p < L) {
      const LayerShape &ls = shape_.layers[p];
      if (streamed)
        for (size_t t = 0; t < sizes_[p].size(); ++t)
          total += padded(computeBytes(p, t));
      if (ls.kind == PFRT_LAYER_ENCODER) {
        const size_t N = size_t(batch) * ls.seq, H = ls.hidden, F = ls.ffn, NH = ls.heads,
                     S = ls.seq;
        const size_t scores = size_t(batch) * NH * S * S;
        total += padded(b2 * N * H);                     // x (bf16)
        total += 3 * padded(f4 * N * H);                 // q k v
        total += 3 * padded(c * N * H);                  // q k v by head
        total += padded(f4 * scores) + padded(b2 * scores); // scores, P (bf16)
        total += padded(f4 * N * H) + padded(c * N * H); // o by head, o merged
        total += padded(f4 * N * H);                     // a
        total += padded(f4 * N * H) + padded(b2 * N * H); // x1, x1 (bf16)
        total += padded(f4 * N * F) + padded(b2 * N * F); // f1, f1 (bf16)
      } else if (ls.kind == PFRT_LAYER_MLP) {
        const bool training = shape_.kind == PFRT_FILL_TRAINING;
        if (!training)
          total += padded(f4 * rows * ls.mid);           // hpre
        total += padded(f4 * rows * ls.mid);             // gelu(hpre)
        total += padded(b2 * rows * ls.in) + padded(b2 * rows * ls.mid); // operands (bf16)
      }
      if (shape_.kind == PFRT_FILL_TRAINING && p == L - 1)
        total += padded(f4 * rows * shape_.outWidth);    // target
    } else {
      const LayerShape &ls = shape_.layers[2 * L - 1 - p];
      if (ls.kind == PFRT_LAYER_MLP) {
        const size_t nh = rows * ls.mid;
        total += 2 * padded(f4 * nh);                    // gelu(H), dH
        total += padded(f4 * ls.in * ls.mid) + padded(f4 * ls.mid * ls.out); // dW1 dW2
        total += padded(b2 * rows * ls.out) + padded(b2 * nh); // dY, gelu(H) (bf16)
        total += padded(b2 * nh) + padded(b2 * rows * ls.in);  // dH, X (bf16)
      }
    }
    return total;
  }

  // Device bytes of a batch's state at its largest (reserved in the fill pool before the loop):
  // the input and each layer's output at once (a layer's input is freed after its output is
  // made), the loss, and in training every layer's stash and the loss gradient.
  size_t batchStateBytes(uint32_t batch) const {
    const size_t rows = size_t(batch) * shape_.rows;
    size_t widest = 0, stash = 0;
    uint32_t prev = shape_.inWidth;
    for (const LayerShape &ls : shape_.layers) {
      widest = std::max(widest, padded(sizeof(float) * rows * prev) +
                                    padded(sizeof(float) * rows * ls.outWidth));
      if (ls.kind == PFRT_LAYER_MLP)
        stash += padded(sizeof(float) * rows * ls.in) + padded(sizeof(float) * rows * ls.mid);
      prev = ls.outWidth;
    }
    return widest + stash + padded(sizeof(double)) +
           (shape_.kind == PFRT_FILL_TRAINING ? padded(sizeof(float) * rows * shape_.outWidth) : 0);
  }

  // Bytes of the tensors a batch of `batch` parks on the host after its passes [0, next).
  std::vector<size_t> parkedBytes(uint32_t next, uint32_t batch) const {
    const uint32_t L = shape_.numLayers();
    const size_t rows = size_t(batch) * shape_.rows;
    std::vector<size_t> out;
    if (next == 0)
      return out;
    const uint32_t q = next - 1; // the last pass run
    // The activation's width after pass q, as run() changes it: encoder and MLP layers make their
    // output (the loss gradient has the output's size), a GEMM_CHAIN leaves it; an MLP's backward
    // makes dX (none for layer 0), a GEMM_CHAIN's leaves it.
    size_t width = shape_.inWidth;
    for (uint32_t p = 0; p <= q; ++p) {
      const LayerShape &ls = shape_.layers[p < L ? p : 2 * L - 1 - p];
      if (ls.kind == PFRT_LAYER_GEMM_CHAIN)
        continue;
      if (p < L)
        width = ls.kind == PFRT_LAYER_MLP ? ls.out : ls.outWidth;
      else if (ls.kind == PFRT_LAYER_MLP)
        width = 2 * L - 1 - p > 0 ? ls.in : 0;
    }
    if (width)
      out.push_back(sizeof(float) * rows * width);
    if (shape_.kind == PFRT_FILL_TRAINING)
      for (uint32_t l = 0; l < L; ++l) {
        const LayerShape &ls = shape_.layers[l];
        if (ls.kind == PFRT_LAYER_MLP && l <= q && l + q < 2 * L - 1) { // forward done, not back
          out.push_back(sizeof(float) * rows * ls.in);
          out.push_back(sizeof(float) * rows * ls.mid);
        }
      }
    return out;
  }

  // Starts a pass: its scratch from the start of the stream's arena. An arena that is missing or
  // too small (a chunk larger than any the plan sized for) is replaced, counted as a hot-path
  // allocation.
  void reserveScratch(size_t bytes, cudaStream_t s) {
    Arena &a = *arena_;
    a.used = 0;
    if (bytes <= a.capacity)
      return;
    PFRT_CUDA(cudaStreamSynchronize(s)); // the old arena may still be in use on this stream
    PFRT_CUDA(cudaFree(a.base));
    a.base = nullptr;
    a.capacity = 0;
    PFRT_CUDA(cudaMalloc(reinterpret_cast<void **>(&a.base), bytes));
    a.capacity = bytes;
    if (!warming_)
      hotPath().deviceAllocs.fetch_add(1);
  }
  void *carve(size_t bytes) {
    Arena &a = *arena_;
    const size_t need = padded(bytes);
    if (a.used + need > a.capacity)
      throw Error(PFRT_ERROR_INTERNAL, "cuda fill scratch: carving " + std::to_string(need) +
                                           " bytes at " + std::to_string(a.used) +
                                           " overruns the arena of " +
                                           std::to_string(a.capacity) + " (scratchBytes is wrong)");
    void *p = a.base + a.used;
    a.used += need;
    if (!warming_)
      hotPath().scratchCarves.fetch_add(1);
    return p;
  }
  float *carveF(size_t n) { return static_cast<float *>(carve(n * sizeof(float))); }
  Tensor scratch(size_t n) {
    Tensor t;
    t.n = n;
    t.d = carveF(n);
    return t;
  }
  // The GEMM operand of fp32 tensor x (n elements): x itself (TF32), or its bf16 copy carved from
  // the arena (same layout, so leading dimensions and strides do not change).
  const void *operand(const float *x, size_t n, cudaStream_t s) {
    if (!bf16_)
      return x;
    void *y = carve(n * 2);
    cuda::toBf16(x, y, n, s);
    PFRT_CUDA_LAUNCHED();
    return y;
  }
  cudaDataType abType() const { return bf16_ ? CUDA_R_16BF : CUDA_R_32F; }
  cublasComputeType_t computeType() const {
    return bf16_ ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
  }
  cublasStatus_t mm(cublasHandle_t h, bool tA, bool tB, int M, int N, int K, float alpha,
                    const void *A, int lda, const void *B, int ldb, float beta, float *C,
                    int ldc) const {
    return cuda::gemmEx(h, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, abType(),
                        computeType());
  }

  void offloadTensor(Tensor &t, cudaStream_t s) {
    if (!t.d)
      return;
    t.h = pinned_.get(t.n * sizeof(float), &t.hcap, /*hot=*/true);
    PFRT_CUDA(cudaMemcpyAsync(t.h, t.d, t.n * sizeof(float), cudaMemcpyDeviceToHost, s));
    PFRT_CUDA(cudaFreeAsync(t.d, s));
    t.d = nullptr;
  }
  void restoreTensor(Tensor &t, cudaStream_t s) {
    if (!t.h)
      return;
    PFRT_CUDA(cudaMallocFromPoolAsync(reinterpret_cast<void **>(&t.d),
                                      std::max<size_t>(1, t.n) * sizeof(float), dev_.fillPool, s));
    hotPath().batchAllocs.fetch_add(1);
    PFRT_CUDA(cudaMemcpyAsync(t.d, t.h, t.n * sizeof(float), cudaMemcpyHostToDevice, s));
    pinned_.put(t.h, t.hcap); // reused only by later work on this same stream
    t.h = nullptr;
    t.hcap = 0;
  }
  void offload(CudaBatch &b, cudaStream_t s) {
    b.forEachTensor([&](Tensor &t) { offloadTensor(t, s); });
    b.onHost = true;
  }
  void restore(CudaBatch &b, cudaStream_t s) {
    b.forEachTensor([&](Tensor &t) { restoreTensor(t, s); });
    b.onHost = false;
  }

  // One encoder layer, row-major, N = batch * S rows of H. Attention over all samples and heads
  // at once: Q, K, V are rearranged to [batch][heads][S][dh] (converted to bf16 on the way), so
  // that every (sample, head) pair is one S x dh block at a fixed stride and QK^T and PV are one
  // strided-batched GEMM each over batch * heads.
  void encoderForward(cublasHandle_t h, cudaStream_t s, const LayerShape &ls,
                      const std::vector<const void *> &w, const float *x, float *y, int batch) {
    const int H = static_cast<int>(ls.hidden), S = static_cast<int>(ls.seq),
              F = static_cast<int>(ls.ffn), NH = static_cast<int>(ls.heads);
    const int dh = H / NH, N = batch * S, BH = batch * NH;
    const size_t nh = size_t(N) * H, nScores = size_t(BH) * S * S;
    const void *xo = operand(x, nh, s);
    float *q = carveF(nh), *k = carveF(nh), *v = carveF(nh);
    PFRT_CUBLAS(mm(h, false, false, N, H, H, 1.0f, xo, H, w[0], H, 0.0f, q, H));
    PFRT_CUBLAS(mm(h, false, false, N, H, H, 1.0f, xo, H, w[1], H, 0.0f, k, H));
    PFRT_CUBLAS(mm(h, false, false, N, H, H, 1.0f, xo, H, w[2], H, 0.0f, v, H));
    void *qh = carve(nh * esz()), *kh = carve(nh * esz()), *vh = carve(nh * esz());
    cuda::splitHeads(q, qh, bf16_, batch, S, NH, dh, s);
    cuda::splitHeads(k, kh, bf16_, batch, S, NH, dh, s);
    cuda::splitHeads(v, vh, bf16_, batch, S, NH, dh, s);
    PFRT_CUDA_LAUNCHED();
    // scores_i = scale Q_i K_i^T (S x S), i over batch * heads.
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    float *scores = carveF(nScores);
    PFRT_CUBLAS(cuda::gemmPlanEx(h, cuda::attentionScores(batch, S, NH, dh), scale, qh, kh, 0.0f,
                                 scores, abType(), computeType()));
    cuda::softmaxRows(scores, BH * S, S, s);
    PFRT_CUDA_LAUNCHED();
    // O_i = P_i V_i (S x dh), back to N x H for the output projection.
    const void *po = operand(scores, nScores, s);
    float *oh = carveF(nh);
    PFRT_CUBLAS(cuda::gemmPlanEx(h, cuda::attentionValues(batch, S, NH, dh), 1.0f, po, vh, 0.0f,
                                 oh, abType(), computeType()));
    void *om = carve(nh * esz());
    cuda::mergeHeads(oh, om, bf16_, batch, S, NH, dh, s);
    PFRT_CUDA_LAUNCHED();
    float *a = carveF(nh);
    PFRT_CUBLAS(mm(h, false, false, N, H, H, 1.0f, om, H, w[3], H, 0.0f, a, H));
    // Layer norms read fp32 parameters: the masters (tiny, never streamed as bf16).
    float *x1 = carveF(nh);
    cuda::layerNorm(x, a, static_cast<const float *>(w[6]), static_cast<const float *>(w[7]), x1,
                    N, H, s);
    PFRT_CUDA_LAUNCHED();
    float *f1 = carveF(size_t(N) * F);
    PFRT_CUBLAS(mm(h, false, false, N, F, H, 1.0f, operand(x1, nh, s), H, w[4], F, 0.0f, f1, F));
    cuda::gelu(f1, f1, size_t(N) * F, s);
    PFRT_CUDA_LAUNCHED();
    PFRT_CUBLAS(mm(h, false, false, N, H, F, 1.0f, operand(f1, size_t(N) * F, s), F, w[5], H,
                   0.0f, a, H));
    cuda::layerNorm(x1, a, static_cast<const float *>(w[8]), static_cast<const float *>(w[9]), y,
                    N, H, s);
    PFRT_CUDA_LAUNCHED();
  }

  void allocChain(int n, cudaStream_t s) {
    const size_t bytes = size_t(n) * n * sizeof(float);
    PFRT_CUDA(cudaMalloc(&chainA_, bytes));
    PFRT_CUDA(cudaMalloc(&chainB_, bytes));
    PFRT_CUDA(cudaMalloc(&chainC_, bytes));
    PFRT_CUDA(cudaMemsetAsync(chainA_, 0, bytes, s));
    PFRT_CUDA(cudaMemsetAsync(chainB_, 0, bytes, s));
  }
  cublasStatus_t chainGemm(cublasHandle_t h, int n) {
    return cuda::gemmEx(h, false, false, n, n, n, 1.0f, chainA_, n, chainB_, n, 0.0f, chainC_, n,
                        CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32);
  }
  // Times one n^3 link (the mean of 8 after a warm-up) on stream s; before the loop.
  double timeChain(cublasHandle_t h, cudaStream_t s, int n) {
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    PFRT_CUDA(cudaEventCreate(&e0));
    cudaError_t ce = cudaEventCreate(&e1);
    if (ce != cudaSuccess) {
      cudaEventDestroy(e0);
      cudaFail(ce, "cudaEventCreate", __FILE__, __LINE__);
    }
    float ms = 0;
    try {
      PFRT_CUBLAS(chainGemm(h, n));
      PFRT_CUDA(cudaEventRecord(e0, s));
      for (int i = 0; i < 8; ++i)
        PFRT_CUBLAS(chainGemm(h, n));
      PFRT_CUDA(cudaEventRecord(e1, s));
      PFRT_CUDA(cudaEventSynchronize(e1));
      PFRT_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    } catch (...) {
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      throw;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return std::max(0.5, 1000.0 * ms / 8);
  }

  // GEMM_CHAIN stand-in: square TF32 GEMMs (their precision does not matter: the chain stands
  // for planned time) timed before the loop, as many as last `us`.
  void chain(cublasHandle_t h, cudaStream_t s, const LayerShape &ls, double us) {
    const int n = chainDim(ls);
    auto it = chainUs_.find(n);
    if (it == chainUs_.end() || n > chainDim_) { // not sized before the loop: should not happen
      // Sizing synchronises and allocates, which a stream being captured (a gated pass) refuses
      // and which would invalidate the capture: say what went wrong instead.
      cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
      PFRT_CUDA(cudaStreamIsCapturing(s, &capturing));
      if (capturing != cudaStreamCaptureStatusNone)
        throw Error(PFRT_ERROR_INTERNAL, "fill GEMM chain of dimension " + std::to_string(n) +
                                             " was not sized before the loop (found inside a "
                                             "gated pass, which cannot allocate)");
      if (n > chainDim_) {
        PFRT_CUDA(cudaStreamSynchronize(s));
        cudaFree(chainA_);
        cudaFree(chainB_);
        cudaFree(chainC_);
        allocChain(n, s);
        chainDim_ = n;
        hotPath().deviceAllocs.fetch_add(1);
      }
      chainUs_[n] = timeChain(h, s, n);
      it = chainUs_.find(n);
    }
    const long reps = std::max(1L, std::lround(us / it->second));
    for (long i = 0; i < reps; ++i)
      PFRT_CUBLAS(chainGemm(h, n));
  }

  GpuDevice &dev_;
  JobShape shape_;
  bool bf16_;
  cudaStream_t stream_ = nullptr;
  // Weights: fp32 masters (dW_), the form the GEMMs read (cW_: bf16 copies of GEMM weights in
  // bf16 mode, else the masters themselves), pinned host masters of cW_ for streamed weights.
  std::vector<std::vector<float *>> dW_;
  std::vector<std::vector<void *>> cW_, hW_;
  std::vector<std::vector<size_t>> sizes_;
  double *acc_ = nullptr; // checksum, loss sum
  PinnedPool pinned_;
  std::map<uint32_t, Arena> arenas_; // by program stream
  Arena *arena_ = nullptr;           // the running chunk's stream's
  // Set while a gated chunk's passes are captured: its stream, and what was allocated.
  CudaStreamState *gating_ = nullptr;
  std::vector<void *> gatedAllocs_;
  // The planned chunks' distinct (stream, batch, streamed weights), and whether warmUp is running
  // (its allocations and graphs are not the hot path's).
  std::vector<JobChunk> warmShapes_;
  bool warming_ = false;
  // PFRT_CUDA_GATE_TRACE: the host time the chunk's capture began, and each pass's launch.
  double traceT0_ = 0;
  std::vector<double> traceLaunchUs_;
  int chainDim_ = 0;
  std::map<int, double> chainUs_;
  float *chainA_ = nullptr, *chainB_ = nullptr, *chainC_ = nullptr;
};

CudaBatch::~CudaBatch() {
  cudaSetDevice(job_.gpu());
  cudaStream_t s = job_.stream();
  forEachTensor([&](Tensor &t) { job_.release(t, s, /*checked=*/false); });
  if (loss)
    cudaFreeAsync(loss, s);
}

std::vector<std::vector<float>> CudaBatch::save() {
  DeviceGuard guard(job_.gpu());
  cudaStream_t s = job_.stream(); // copies on it, not on the legacy default stream
  PFRT_CUDA(cudaStreamSynchronize(s));
  auto fetch = [s](const Tensor &t) {
    std::vector<float> v(t.n);
    if (t.n && t.d) {
      PFRT_CUDA(cudaMemcpyAsync(v.data(), t.d, t.n * sizeof(float), cudaMemcpyDeviceToHost, s));
      PFRT_CUDA(cudaStreamSynchronize(s));
    }
    else if (t.n && t.h)
      std::copy(static_cast<const float *>(t.h), static_cast<const float *>(t.h) + t.n, v.data());
    return v;
  };
  std::vector<std::vector<float>> out;
  out.push_back(fetch(act));
  double l = 0;
  if (loss) {
    PFRT_CUDA(cudaMemcpyAsync(&l, loss, sizeof(double), cudaMemcpyDeviceToHost, s));
    PFRT_CUDA(cudaStreamSynchronize(s));
  }
  out.push_back({static_cast<float>(l)});
  for (const Tensor &t : stashX)
    out.push_back(fetch(t));
  for (const Tensor &t : stashH)
    out.push_back(fetch(t));
  return out;
}

} // namespace

const char *fillMathName(FillMath m) { return m == FillMath::Bf16 ? "bf16" : "tf32"; }

std::unique_ptr<JobData> createCudaJob(GpuDevice &dev, const JobShape &shape, FillMath math,
                                       const std::vector<JobChunk> &chunks) {
  return std::make_unique<CudaJobData>(dev, shape, math, chunks);
}

std::string warmUpFillJobs(GpuDevice &dev,
                           const std::function<CudaStreamState *(uint32_t)> &streamOf) {
  std::vector<WarmUp *> jobs;
  {
    std::lock_guard<std::mutex> lock(dev.warmMutex);
    jobs.swap(dev.toWarm);
  }
  std::string failed;
  for (WarmUp *job : jobs) {
    try {
      job->warmUp(streamOf);
    } catch (const std::exception &e) { // Error, std::bad_alloc, ...: the next job still warms
      if (failed.empty())
        failed = e.what();
    }
  }
  return failed;
}

void releaseFillReservations(GpuDevice &dev) {
  std::lock_guard<std::mutex> lock(dev.reserveMutex);
  if (dev.reservations.empty())
    return;
  while (!dev.reservations.empty()) { // one at a time: a failed free leaves only the rest listed
    void *p = dev.reservations.back();
    dev.reservations.pop_back();
    PFRT_CUDA(cudaFreeAsync(p, dev.setup));
  }
  PFRT_CUDA(cudaStreamSynchronize(dev.setup));
}

void calibrateMainChain(GpuDevice &g, const Device &dev, CudaStreamState &main, bool verbose) {
  g.bigDim = dev.desc.gemm_dim ? static_cast<int>(dev.desc.gemm_dim) : 2048;
  g.smallDim = std::max(64, g.bigDim / 4);
  const size_t bytes = size_t(g.bigDim) * g.bigDim * sizeof(float);
  PFRT_CUDA(cudaMalloc(&g.gemmA, bytes));
  PFRT_CUDA(cudaMalloc(&g.gemmB, bytes));
  PFRT_CUDA(cudaMalloc(&g.gemmC, bytes));
  // On main's own stream: it is non-blocking, so a legacy-stream memset would not order the
  // timed GEMMs after it (they could read the memory before it is set).
  PFRT_CUDA(cudaMemsetAsync(g.gemmA, 0, bytes, main.s));
  PFRT_CUDA(cudaMemsetAsync(g.gemmB, 0, bytes, main.s));
  auto timeGemm = [&](int n, int reps) {
    // Warm-up of at least 20 ms (at most 400 GEMMs): an idle GPU runs at a low clock and takes
    // a while to reach its working one; timed too early, the chain would come out short.
    const double w0 = hostNowUs();
    for (int i = 0; i < 400 && (i < 3 || hostNowUs() - w0 < 20000); ++i) {
      PFRT_CUBLAS(cuda::gemm(main.blas, false, false, n, n, n, 1.0f, g.gemmA, n, g.gemmB, n,
                             0.0f, g.gemmC, n));
      if (i % 4 == 3)
        PFRT_CUDA(cudaStreamSynchronize(main.s)); // the clock above is the host's
    }
    cudaEvent_t e0, e1;
    PFRT_CUDA(cudaEventCreate(&e0));
    PFRT_CUDA(cudaEventCreate(&e1));
    double rounds[3];
    for (double &r : rounds) { // the median of three rounds
      PFRT_CUDA(cudaEventRecord(e0, main.s));
      for (int i = 0; i < reps; ++i)
        PFRT_CUBLAS(cuda::gemm(main.blas, false, false, n, n, n, 1.0f, g.gemmA, n, g.gemmB, n,
                               0.0f, g.gemmC, n));
      PFRT_CUDA(cudaEventRecord(e1, main.s));
      PFRT_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      PFRT_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      r = 1000.0 * ms / reps;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(rounds, rounds + 3);
    return std::max(0.5, rounds[1]);
  };
  // Calibrated once per process and GPU (and GEMM size), then reused: every run of the process
  // (the A and B runs of pfrt_compare) issues the same chain for the same planned time.
  static std::mutex cacheMutex;
  static std::map<std::pair<int, int>, std::pair<double, double>> cache;
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = cache.find({g.gpu, g.bigDim});
    if (it != cache.end()) {
      g.bigUs = it->second.first;
      g.smallUs = it->second.second;
      return;
    }
  }
  g.bigUs = timeGemm(g.bigDim, 10);
  g.smallUs = timeGemm(g.smallDim, 20);
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    cache[{g.gpu, g.bigDim}] = {g.bigUs, g.smallUs};
  }
  if (verbose)
    std::fprintf(stderr, "pfrt: cuda device %u (gpu %d): GEMM %d^3 %.1f us, %d^3 %.1f us\n",
                 g.device, g.gpu, g.bigDim, g.bigUs, g.smallDim, g.smallUs);
}

void enqueueMainChain(CudaStreamState &st, double plannedUs) {
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

} // namespace cudabk
} // namespace pfrt
