// CUDA backend (the Backend implementation): one cudaStream_t per program stream, created with the priority of its role
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
// Bubble bound: the main stream's bubble edges are events from a per-device ring (markEdge); the
// fill thread resolves them to the host clock and waits for each chunk (streamNowUs of a fill
// stream synchronises it), so the executor's host-side bound sees the GPU's real progress. Then
// the GPU checks again (DeviceGate.h, CudaGate.*): each pass of a bounded chunk of two or more
// runs as a small graph in which a one-thread gate reads %globaltimer and the last edge main has
// passed (every edge also sets a device word, cuStreamWriteValue64), and the pass's kernels launch
// only if main is still in the bubble and the pass's predicted time fits before its deadline.
//
// Replay mode (fewer GPUs than devices): the executor runs one device here and the others on the
// host backend's modelled clock. A send to an emulated peer keeps the stream busy for the planned
// transfer time and then publishes from a host callback; a receive from an emulated peer makes the
// enqueueing thread wait for the peer's modelled send before enqueuing the rest of the stream.
//
// Files: CudaDevice.* (device and stream state), CudaWorkloads.* (cuBLAS fill layers and the main
// job's GEMM chain), CudaGate.* (the device-side bound), CudaKernels.* (device kernels), this file
// (the Backend).
#include "runtime/CudaDevice.h"
#include "runtime/CudaGate.h"
#include "runtime/CudaKernels.h"
#include "runtime/CudaWorkloads.h"
#include "runtime/Executor.h"
#if PFRT_HAVE_NCCL
#include "runtime/Nccl.h"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace pfrt {
namespace cudabk {
namespace {

// ---------------------------------------------------------------------------------------------
// The backend
// ---------------------------------------------------------------------------------------------

// A failure in a host function on a stream: the driver's thread that runs it cannot take an
// exception (it would end the process), so the first one is kept here and thrown by the backend's
// next call from a host thread of the run (check()).
struct CallbackErrors {
  std::atomic<bool> failed{false};
  std::mutex m;
  std::string first;
  void record(const std::string &message) {
    std::lock_guard<std::mutex> lock(m);
    if (!failed.load()) {
      first = message;
      failed.store(true);
    }
  }
  void check() {
    if (!failed.load(std::memory_order_relaxed))
      return;
    std::lock_guard<std::mutex> lock(m);
    throw Error(PFRT_ERROR_BACKEND, "publishing a send from its CUDA stream failed: " + first);
  }
};

struct PublishCall {
  std::unique_ptr<Publisher> publisher;
  std::shared_ptr<CallbackErrors> errors;
};

// A host function (cudaLaunchHostFunc): it calls no CUDA API (the rule for host functions) and
// lets no exception out.
void CUDART_CB publishFromStream(void *data) {
  std::unique_ptr<PublishCall> call(static_cast<PublishCall *>(data));
  Message m;
  m.readyUs = hostNowUs();
  try {
    call->publisher->publish(m);
  } catch (const std::exception &e) {
    call->errors->record(e.what());
  } catch (...) {
    call->errors->record("an unknown exception");
  }
}

// Creates the stream-ordered pools of GPU g: the default pool (main-job allocations) and the fill
// pool, both keeping freed memory instead of returning it to the OS. The fill pool is sized before
// the loop: the largest chunk peak of `dev` is allocated and freed once, and the pool keeps it
// (release threshold), so chunks do not grow it in the hot path.
void createPools(GpuDevice &g, const Device &dev) {
  cudaMemPool_t pool;
  PFRT_CUDA(cudaDeviceGetDefaultMemPool(&pool, g.gpu));
  uint64_t threshold = UINT64_MAX;
  PFRT_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = g.gpu;
  PFRT_CUDA(cudaMemPoolCreate(&g.fillPool, &props));
  PFRT_CUDA(cudaMemPoolSetAttribute(g.fillPool, cudaMemPoolAttrReleaseThreshold, &threshold));
  uint64_t peak = 0;
  for (const Stream &st : dev.streams)
    for (const Op &op : st.ops)
      if (op.kind == OpKind::Fill)
        peak = std::max<uint64_t>(peak, op.fill.peak_bytes);
  if (peak) {
    void *reserve = nullptr;
    PFRT_CUDA(cudaMallocFromPoolAsync(&reserve, peak, g.fillPool, g.setup));
    PFRT_CUDA(cudaFreeAsync(reserve, g.setup));
    PFRT_CUDA(cudaStreamSynchronize(g.setup));
  }
}

// The device's events (a ring per program event) and its bubble edges. Edges: two per bubble of
// the main stream per iteration; the main thread runs at most kTimingLag iterations ahead of the
// GPU and the fill threads wait for the GPU, so a ring of many iterations' edges is never reused
// while a fill thread still needs a slot. (Sessions bound their queue of bubbles to a quarter of
// the ring, and need a ring for unplanned bubbles even in a plan without bubbles: there is always
// one.)
void createEvents(GpuDevice &g, const Device &dev) {
  for (size_t e = 0; e < dev.events.size(); ++e) {
    std::vector<cudaEvent_t> ring(kEventRing);
    for (cudaEvent_t &ev : ring)
      PFRT_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    g.events.push_back(ring);
  }
  size_t bubbles = 0;
  for (const Stream &st : dev.streams)
    for (const Op &op : st.ops)
      bubbles += op.kind == OpKind::Bubble;
  g.edges.resize(std::max<size_t>(64, 2 * bubbles * 32));
  g.edgeOwner.assign(g.edges.size(), -1);
  for (cudaEvent_t &ev : g.edges)
    PFRT_CUDA(cudaEventCreate(&ev));
}

// The copy ops' buffers: one on the GPU and one pinned on the host, of the largest copy.
void createCopyBuffers(GpuDevice &g, const Device &dev) {
  for (const Stream &st : dev.streams)
    for (const Op &op : st.ops)
      if (op.kind == OpKind::Copy)
        g.copyBytes = std::max(g.copyBytes, op.bytes);
  if (g.copyBytes) {
    PFRT_CUDA(cudaMalloc(&g.copyDevice, g.copyBytes));
    PFRT_CUDA(cudaMallocHost(&g.copyHost, g.copyBytes));
  }
}

// Program device d (`dev`) on CUDA ordinal `gpu`: its setup and communication streams, timing
// events, pools, event rings and copy buffers.
std::unique_ptr<GpuDevice> createGpuDevice(const Device &dev, uint32_t d, int gpu, bool gate) {
  auto g = std::make_unique<GpuDevice>();
  g->device = d;
  g->gpu = gpu;
  PFRT_CUDA(cudaSetDevice(g->gpu));
  // None of the runtime's kernels loads lazily inside a bubble. Only that: a kernel that cannot
  // load on this GPU fails where it is launched, with its own message, as without the preload.
  if (cuda::preloadKernels() != cudaSuccess)
    cudaGetLastError();
  PFRT_CUDA(cudaDeviceGetStreamPriorityRange(&g->prioLeast, &g->prioGreatest));
  PFRT_CUDA(cudaStreamCreateWithFlags(&g->setup, cudaStreamNonBlocking));
  PFRT_CUDA(cudaStreamCreateWithPriority(&g->comm, cudaStreamNonBlocking, g->prioGreatest));
  PFRT_CUDA(cudaEventCreate(&g->base));
  createPools(*g, dev);
  createEvents(*g, dev);
  createCopyBuffers(*g, dev);
  createGate(*g, gate);
  return g;
}

class CudaBackend : public Backend {
public:
  ~CudaBackend() override { release(); }

  std::string name() const override { return "cuda"; }
  bool measuresTime() const override { return true; }

  void prepare(const Program &program, const ProgramInfo &info, const RunConfig &config,
               const std::vector<uint32_t> &devices) override {
    config_ = config;
    program_ = &program;
    readFillMath();
    gateRequested_ = deviceGateRequested();
    warmUp_ = envSwitch("PFRT_CUDA_WARMUP");
    int count = 0;
    PFRT_CUDA(cudaGetDeviceCount(&count));
    if (count <= 0)
      throw Error(PFRT_ERROR_UNAVAILABLE, "no CUDA device (cudaGetDeviceCount found none)");
    const bool oneGpuPerDevice = static_cast<size_t>(count) >= program.devices.size();
    // Sessions: the GPU current on this (the framework's) thread; restored when prepare returns.
    int current = 0;
    PFRT_CUDA(cudaGetDevice(&current));
    DeviceGuard restore(current);
    // One GPU per device when there are enough; otherwise the GPU chosen by --device / the local
    // rank (pfrt_options.gpu), modulo the visible GPUs (CUDA_VISIBLE_DEVICES already restricts
    // and renumbers them), else 0.
    const int first = config.gpu >= 0            ? config.gpu % count
                      : config.gpu == kGpuCurrent ? current
                                                  : 0;
    for (uint32_t d : devices)
      gpus_[d] = createGpuDevice(program.devices[d], d,
                                 oneGpuPerDevice && config.gpu == -1 ? static_cast<int>(d) : first,
                                 gateRequested_);
    for (uint32_t d : devices)
      createStreams(program.devices[d], d, info.devices[d]);
    connectGpus(program, devices);
    prepareRankTransfers(program, devices);
  }

  // The fill jobs' first capture of their gated chunks (warmUpFillJobs), where chunks may run
  // gated: gates on and the bounded policy that stops chunks between passes. The jobs'
  // reservations go back to the fill pool first (the warm-up reuses that memory), and the clocks
  // are set as begin() sets them (GatedLaunch reads the span from the timing origin; the closed
  // gates' deadline is in %globaltimer time). Best effort: an error is a warning, after which the
  // loop pays these costs itself.
  void warmUp() override {
    if (!warmUp_ || !config_.fillBounded || !config_.fillSplit)
      return;
    int current = 0;
    PFRT_CUDA(cudaGetDevice(&current));
    DeviceGuard restore(current); // a session calls this from the framework's thread
    for (auto &kv : gpus_) {
      GpuDevice &g = *kv.second;
      if (!g.gateOn.load())
        continue;
      const uint32_t d = kv.first;
      std::string failed;
      try {
        PFRT_CUDA(cudaSetDevice(g.gpu));
        releaseFillReservations(g);
        PFRT_CUDA(cudaDeviceSynchronize());
        uint64_t reserved = 0; // what the pool holds for the jobs: the warm-up keeps no more
        PFRT_CUDA(cudaMemPoolGetAttribute(g.fillPool, cudaMemPoolAttrReservedMemCurrent,
                                          &reserved));
        setClocks(g);
        failed = warmUpFillJobs(g, [&](uint32_t s) -> CudaStreamState * {
          auto it = streams_.find({d, s});
          return it == streams_.end() ? nullptr : it->second.get();
        });
        PFRT_CUDA(cudaDeviceSynchronize()); // the warm chunks' stream-ordered frees
        PFRT_CUDA(cudaMemPoolTrimTo(g.fillPool, reserved));
      } catch (const std::exception &e) {
        failed = e.what();
      }
      if (!failed.empty())
        std::fprintf(stderr,
                     "pfrt: warning: cuda device %u (gpu %d): the fill jobs' warm-up failed "
                     "(%s); their first chunks pay for it in the loop\n",
                     d, g.gpu, failed.c_str());
    }
  }

  void begin(double originUs) override {
    (void)originUs;
    int current = 0;
    PFRT_CUDA(cudaGetDevice(&current));
    DeviceGuard restore(current); // a session calls this from the framework's thread
    for (auto &kv : gpus_) {
      GpuDevice &g = *kv.second;
      PFRT_CUDA(cudaSetDevice(g.gpu));
      // The jobs' reservations go back to the fill pool together (it keeps their sum); what the
      // pool holds now is the baseline its growth in the loop is measured from.
      releaseFillReservations(g);
      PFRT_CUDA(cudaMemPoolGetAttribute(g.fillPool, cudaMemPoolAttrReservedMemCurrent,
                                        &g.fillPoolReserved));
      PFRT_CUDA(cudaDeviceSynchronize());
      setClocks(g);
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
    callbackErrors_->check();
    CudaStreamState &st = streamState(ctx);
    if (config_.computeFn) {
      config_.computeFn(config_.computeUser, ctx.device, op.compute, op.microbatch, op.chunk,
                        plannedUs, reinterpret_cast<void *>(st.s));
      PFRT_CUDA_LAUNCHED();
      return;
    }
    enqueueMainChain(st, plannedUs);
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
    // The transfer starts after the work enqueued so far on the sending stream and runs on the
    // device's communication stream. cudaStreamWaitEvent takes the event's state at call time,
    // so the stream's one fork event suffices.
    GpuDevice &g = *st.dev;
    PFRT_CUDA(cudaEventRecord(st.fork, st.s));
    PFRT_CUDA(cudaStreamWaitEvent(g.comm, st.fork, 0));
    if (peerLocal) {
      GpuChannel &c = channels_.at(std::make_tuple(ctx.device, op.peer, op.tag));
      if (op.bytes)
        PFRT_CUDA(cudaMemcpyPeerAsync(c.dst, gpus_.at(op.peer)->gpu, c.src, st.dev->gpu,
                                      op.bytes, g.comm));
      // The receiver must have enqueued its wait on this slot's previous use.
      ctx.exec->waitForChannelConsumers(ctx.device, op.peer, op.tag, ctx.iteration, kEventRing);
      cudaEvent_t ev = c.ring[ctx.iteration % kEventRing];
      PFRT_CUDA(cudaEventRecord(ev, g.comm));
      Message m;
      m.handle = ev;
      m.owner = static_cast<int>(ctx.device);
      publisher.publish(m);
      return;
    }
#if PFRT_HAVE_NCCL
    if (nccl_ && nccl_->has(ChannelKey{ctx.device, op.peer, op.tag})) {
      // Another rank's GPU: the bytes go with ncclSend on the link's own stream, after the
      // sending stream's earlier work; the receiver's ncclRecv waits for them on its GPU, so the
      // message only tells its host thread that the send is enqueued.
      const ChannelKey key{ctx.device, op.peer, op.tag};
      NcclLink &link = ncclLinks_.at(nccl_->linkOf(key));
      PFRT_CUDA(cudaEventRecord(link.fork, st.s));
      PFRT_CUDA(cudaStreamWaitEvent(link.stream, link.fork, 0));
      nccl_->send(key, link.buffer, op.bytes, link.stream);
      publisher.publish(Message{});
      return;
    }
#endif
    // The peer is emulated (or another rank without NCCL): the communication stream is busy for
    // the planned transfer, then the message is published (host callback) when it gets there.
    cuda::spin(plannedUs, g.comm);
    PFRT_CUDA_LAUNCHED();
    auto *call = new PublishCall{publisher.clone(), callbackErrors_};
    cudaError_t e = cudaLaunchHostFunc(g.comm, publishFromStream, call);
    if (e != cudaSuccess) {
      delete call;
      cudaFail(e, "cudaLaunchHostFunc", __FILE__, __LINE__);
    }
  }

  void recv(StreamCtx &ctx, const Op &op, const Message &message) override {
#if PFRT_HAVE_NCCL
    if (nccl_ && nccl_->has(ChannelKey{op.peer, ctx.device, op.tag})) {
      const ChannelKey key{op.peer, ctx.device, op.tag};
      nccl_->recv(key, ncclLinks_.at(nccl_->linkOf(key)).buffer, op.bytes, streamState(ctx).s);
      return;
    }
#else
    (void)op;
#endif
    if (message.handle)
      PFRT_CUDA(cudaStreamWaitEvent(streamState(ctx).s, static_cast<cudaEvent_t>(message.handle),
                                    0));
    // From an emulated peer: the data is there at the peer's modelled ready time; enqueue the
    // rest of the stream no earlier (the GPU may still be behind, then there is no extra wait).
    if (!message.handle && message.readyUs > 0) {
      double now = hostNowUs();
      while (now < message.readyUs) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(message.readyUs - now));
        now = hostNowUs();
      }
    }
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

  std::unique_ptr<JobData> createJob(uint32_t device, uint32_t job, const JobShape &shape) override {
    // The job's chunks on this device size its scratch, pinned buffers and pool reservation.
    std::vector<JobChunk> chunks;
    const std::vector<Stream> &streams = program_->devices[device].streams;
    for (uint32_t s = 0; s < streams.size(); ++s)
      for (const Op &op : streams[s].ops)
        if (op.kind == OpKind::Fill && op.fill.job == job) {
          JobChunk c;
          c.stream = s;
          c.batch = op.fill.batch;
          c.passBegin = op.fill.layer_begin;
          c.passEnd = std::min(op.fill.layer_end, shape.passes);
          c.weightsStreamed = op.fill.weights_streamed != 0;
          c.activationsHost = op.fill.activations_on_host != 0;
          chunks.push_back(c);
        }
    GpuDevice &g = *gpus_.at(device);
    DeviceGuard guard(g.gpu); // a session calls this from the framework's thread
    return createCudaJob(g, shape, fillMath_, chunks);
  }

  void iterationEnd(StreamCtx &ctx) override {
    callbackErrors_->check();
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

  // A fill stream's time: its thread waits for everything it enqueued (a bounded fill chunk is
  // decided, run and measured one at a time, so the decision sees the GPU's real progress, not
  // the enqueue position). A main stream's thread runs ahead of the GPU and never waits here.
  double streamNowUs(StreamCtx &ctx) override {
    CudaStreamState &st = streamState(ctx);
    if (!st.main)
      waitStream(*st.dev, st.s, "a fill stream's work");
    return hostNowUs();
  }

  int64_t markEdge(StreamCtx &ctx, double &nowUs) override {
    CudaStreamState &st = streamState(ctx);
    GpuDevice &g = *st.dev;
    if (g.edges.empty()) {
      nowUs = hostNowUs();
      return -1;
    }
    std::lock_guard<std::mutex> lock(g.edgeMutex);
    const int64_t token = g.nextEdge++;
    const size_t slot = static_cast<size_t>(token) % g.edges.size();
    g.edgeOwner[slot] = token;
    PFRT_CUDA(cudaEventRecord(g.edges[slot], st.s));
    markEdgeOnDevice(g, st.s, token);
    nowUs = -1;
    return token;
  }

  // A session's edge on the framework's stream (any thread; the token ring is the device's, shared
  // with markEdge under edgeMutex). The event belongs to the session's GPU, so the stream must be
  // on that GPU too (cudaEventRecord refuses one of another device).
  int64_t markExternalEdge(uint32_t device, void *stream, double &nowUs) override {
    GpuDevice &g = *gpus_.at(device);
    DeviceGuard guard(g.gpu);
    std::lock_guard<std::mutex> lock(g.edgeMutex);
    const int64_t token = g.nextEdge;
    const size_t slot = static_cast<size_t>(token) % g.edges.size();
    const cudaError_t e = cudaEventRecord(g.edges[slot], static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) {
      cudaGetLastError(); // not sticky: clear it so later calls do not report it
      throw Error(PFRT_ERROR_BACKEND,
                  std::string("cudaEventRecord of a bubble edge on the framework's stream "
                              "(main_stream) failed: ") +
                      cudaGetErrorString(e) + " (is main_stream a live cudaStream_t of GPU " +
                      std::to_string(g.gpu) + ", the session's GPU?)");
    }
    markEdgeOnDevice(g, static_cast<cudaStream_t>(stream), token);
    ++g.nextEdge;
    g.edgeOwner[slot] = token;
    nowUs = -1;
    return token;
  }

  void resyncClock(uint32_t device) override {
    GpuDevice &g = *gpus_.at(device);
    DeviceGuard guard(g.gpu);
    setClocks(g);
  }

  std::unique_ptr<DeviceScope> useDevice(uint32_t device) override {
    struct Scope : DeviceScope {
      explicit Scope(int gpu) : guard(gpu) {}
      DeviceGuard guard;
    };
    return std::make_unique<Scope>(gpus_.at(device)->gpu);
  }

  bool edgeTimeUs(uint32_t device, int64_t token, bool block, double &us) override {
    GpuDevice &g = *gpus_.at(device);
    cudaEvent_t ev = nullptr;
    const size_t slot = static_cast<size_t>(token) % g.edges.size();
    {
      std::lock_guard<std::mutex> lock(g.edgeMutex);
      if (g.edgeOwner[slot] != token)
        return false; // reused: long past
      ev = g.edges[slot];
    }
    PFRT_CUDA(cudaSetDevice(g.gpu));
    if (block) {
      waitEvent(g, ev, "the main stream's bubble edge");
    } else {
      const cudaError_t q = cudaEventQuery(ev);
      if (q == cudaErrorNotReady)
        return false;
      PFRT_CUDA(q);
    }
    float ms = 0;
    PFRT_CUDA(cudaEventElapsedTime(&ms, g.base, ev));
    {
      std::lock_guard<std::mutex> lock(g.edgeMutex);
      if (g.edgeOwner[slot] != token)
        return false; // reused while we waited
    }
    us = g.baseHostUs + 1000.0 * static_cast<double>(ms);
    return true;
  }

  void syncStream(StreamCtx &ctx) override {
    CudaStreamState &st = streamState(ctx);
    waitStream(*st.dev, st.s, "a stream's work");
  }

  bool nativeStream(StreamCtx &ctx, void *&stream, int &gpu) override {
    if (!ctx.backendData) { // the thread that runs this context has not begun (or has ended)
      stream = nullptr;
      gpu = -1;
      return false;
    }
    CudaStreamState &st = streamState(ctx);
    stream = st.s;
    gpu = st.dev->gpu;
    return true;
  }

  void runFailed() override {
#if PFRT_HAVE_NCCL
    // A peer may never send or receive what this rank's NCCL kernels wait for: aborting the
    // communicators makes those kernels return, so finish's device synchronization cannot hang.
    if (nccl_)
      nccl_->close(/*failed=*/true);
#endif
  }

  // With NCCL, a device synchronization would wait without a limit for a kernel whose peer hung:
  // it runs on another thread while this one polls the communicators under the peer time limit,
  // and aborts them (which ends the kernels) on an error or at the limit.
  void synchronizeDevice(GpuDevice &g) {
#if PFRT_HAVE_NCCL
    if (nccl_ && nccl_->communicators() > 0) {
      std::atomic<bool> done{false};
      cudaError_t result = cudaSuccess;
      std::thread sync([&] {
        cudaSetDevice(g.gpu);
        result = cudaDeviceSynchronize();
        done = true;
      });
      const auto start = std::chrono::steady_clock::now();
      std::string error;
      while (!done) {
        try {
          nccl_->check();
        } catch (const Error &e) {
          error = e.what();
        }
        if (error.empty() && std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                           start).count() > config_.peerTimeoutS)
        {
          char limit[32];
          std::snprintf(limit, sizeof limit, "%g", config_.peerTimeoutS);
          error = std::string("the GPU's work did not finish within ") + limit +
                  " s of the run's end: an NCCL transfer's peer rank hung (--peer-timeout sets "
                  "the limit)";
        }
        if (!error.empty()) {
          nccl_->close(/*failed=*/true);
          sync.join();
          throw Error(PFRT_ERROR_BACKEND, error);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      sync.join();
      if (result != cudaSuccess)
        cudaFail(result, "cudaDeviceSynchronize", __FILE__, __LINE__);
      return;
    }
#endif
    PFRT_CUDA(cudaDeviceSynchronize());
  }

  void finish() override {
    for (auto &kv : gpus_) {
      GpuDevice &g = *kv.second;
      PFRT_CUDA(cudaSetDevice(g.gpu));
      synchronizeDevice(g);
      callbackErrors_->check(); // every host function has run
      uint64_t reserved = 0;
      PFRT_CUDA(cudaMemPoolGetAttribute(g.fillPool, cudaMemPoolAttrReservedMemCurrent, &reserved));
      if (reserved > g.fillPoolReserved)
        hotPath().poolGrowthBytes.fetch_add(reserved - g.fillPoolReserved);
    }
#if PFRT_HAVE_NCCL
    if (nccl_) {
      nccl_->check();
      nccl_->close(/*failed=*/false);
    }
#endif
    finished_ = true;
  }

  const char *rankTransfer() const override {
    if (config_.rank < 0)
      return nullptr;
#if PFRT_HAVE_NCCL
    if (nccl_)
      return "nccl";
#endif
    return "modelled";
  }

  // A gated chunk: its graphs' span on the GPU, so the predictor learns GPU time, not the host's
  // time to build them.
  bool lastWorkSpan(StreamCtx &ctx, double &start, double &end) override {
    CudaStreamState &st = streamState(ctx);
    if (!st.lastGated)
      return false;
    start = st.lastStartUs;
    end = st.lastEndUs;
    return true;
  }

  bool boundsOnDevice() const override {
    for (const auto &kv : gpus_)
      if (!kv.second->gateOn.load())
        return false;
    return !gpus_.empty();
  }

  uint32_t lastDeviceStop(StreamCtx &ctx) override {
    CudaStreamState &st = streamState(ctx);
    return st.lastGated ? st.lastGate.stop : 0;
  }

  bool minFreeBytes(uint32_t device, uint64_t &bytes) override {
    auto it = gpus_.find(device);
    if (it == gpus_.end() || it->second->minFree.load() == UINT64_MAX)
      return false;
    bytes = it->second->minFree.load();
    return true;
  }

private:
  // The timing origin (g.base recorded on the idle setup stream, read on the host clock) and the
  // %globaltimer calibration, with g's GPU current. The setup stream is idle outside allocations
  // made before the loop: the event completes as soon as the GPU sees it.
  // The GPU passed the event between the host's record call and its wake-up after it, so the
  // origin is the midpoint of that round trip, off by at most half of it. A round in which the
  // host thread lost its core would move every edge of the iteration late by as much, so rounds
  // repeat (at most 5) until one takes at most 20 us or 1.5 x the shortest before it.
  static void setClocks(GpuDevice &g) {
    double shortest = 0;
    for (int round = 0; round < 5; ++round) {
      const double t0 = hostNowUs();
      PFRT_CUDA(cudaEventRecord(g.base, g.setup));
      PFRT_CUDA(cudaEventSynchronize(g.base));
      const double t1 = hostNowUs();
      g.baseHostUs = 0.5 * (t0 + t1);
      const double rt = t1 - t0;
      if (rt <= 20.0 || (round > 0 && rt <= 1.5 * shortest))
        break;
      shortest = round == 0 ? rt : std::min(shortest, rt);
    }
    calibrateGlobalTimer(g);
  }

  struct PairBuffers {
    void *src = nullptr, *dst = nullptr;
  };

  // The fill GEMMs' precision: bf16 (the fill cost model's) unless PFRT_CUDA_FILL_MATH=tf32.
  void readFillMath() {
    if (const char *m = std::getenv("PFRT_CUDA_FILL_MATH")) {
      const std::string v = m;
      if (v == "bf16" || v.empty())
        fillMath_ = FillMath::Bf16;
      else if (v == "tf32")
        fillMath_ = FillMath::Tf32;
      else
        throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                    "PFRT_CUDA_FILL_MATH=" + v + ": expected bf16 or tf32");
    }
  }

  // Device d's program streams (`dev`) with their priorities, one cuBLAS handle each, and the
  // gate state of those that run fill (`info`); then the main job's GEMM chain calibrated on its
  // main stream.
  void createStreams(const Device &dev, uint32_t d, const ProgramInfo::DeviceInfo &info) {
    const uint32_t mainStream = info.mainStream;
    GpuDevice &g = *gpus_[d];
    PFRT_CUDA(cudaSetDevice(g.gpu));
    for (uint32_t s = 0; s < dev.streams.size(); ++s) {
      auto st = std::make_unique<CudaStreamState>();
      st->dev = &g;
      st->device = d;
      st->stream = s;
      st->main = s == mainStream;
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
      PFRT_CUDA(cudaEventCreateWithFlags(&st->fork, cudaEventDisableTiming));
      if (!st->main && info.streamHasFill[s])
        createStreamGate(*st);
      // The handles keep the default math mode: fill GEMMs name their compute type themselves
      // (cublasGemmEx, CudaWorkloads.cu), the main chain stays FP32 (calibrated, its precision
      // does not matter).
      streams_[{d, s}] = std::move(st);
    }
    calibrateMainChain(g, dev, *streams_[{d, mainStream}], config_.verbose);
    if (config_.verbose)
      std::fprintf(stderr, "pfrt: cuda device %u (gpu %d): fill GEMMs in %s\n", d, g.gpu,
                   fillMathName(fillMath_));
    g.sampleMemory();
  }

  // GPU-to-GPU channels (multi-GPU mode only): peer access where the GPUs allow it, one pair of
  // buffers (of the largest send) per connected device pair, an event ring per channel.
  void connectGpus(const Program &program, const std::vector<uint32_t> &devices) {
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
          cudaFail(e, "cudaDeviceEnablePeerAccess", __FILE__, __LINE__);
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

  // Rank mode: NCCL for the channels to other ranks when asked for (PFRT_RANK_TRANSFER_NCCL) or
  // by default when the library loads (AUTO); otherwise the planned time (modelled).
  void prepareRankTransfers(const Program &program, const std::vector<uint32_t> &devices) {
    if (config_.rank < 0 || !config_.transport ||
        config_.rankTransfer == PFRT_RANK_TRANSFER_MODELLED)
      return;
#if PFRT_HAVE_NCCL
    std::string why;
    std::shared_ptr<const NcclApi> api = loadNccl(why);
    if (!api) {
      if (config_.rankTransfer == PFRT_RANK_TRANSFER_NCCL)
        throw Error(PFRT_ERROR_UNAVAILABLE, "rank transfers with NCCL: " + why);
      std::fprintf(stderr, "pfrt: rank %d: %s; transfers between ranks are modelled (planned "
                           "time)\n", config_.rank, why.c_str());
      return;
    }
    if (config_.verbose)
      std::fprintf(stderr, "pfrt: rank %d: NCCL %s from %s\n", config_.rank,
                   ncclVersionName(api->version).c_str(), api->path.c_str());
    GpuDevice &g = *gpus_.at(devices.front());
    PFRT_CUDA(cudaSetDevice(g.gpu));
    // Every rank must take part in the id exchange, even one whose device has no crossing
    // channel, so the communicators are made before the buffers are sized.
    nccl_ = std::make_unique<NcclChannels>(api, orderedChannelLinks(program), *config_.transport,
                                           config_.peerTimeoutS);
    // The GPU waits of this rank's threads poll the communicators under the peer time limit.
    auto expired = std::make_shared<std::atomic<bool>>(false);
    for (uint32_t d : devices)
      gpus_.at(d)->peerWatch =
          PeerWatch{[this] { nccl_->check(); }, config_.peerTimeoutS, expired};
    ncclLinks_.resize(nccl_->communicators());
    for (uint32_t d : devices)
      for (const Stream &st : program.devices[d].streams)
        for (const Op &op : st.ops) {
          ChannelKey key;
          if (op.kind == OpKind::Send)
            key = ChannelKey{d, op.peer, op.tag};
          else if (op.kind == OpKind::Recv)
            key = ChannelKey{op.peer, d, op.tag};
          else
            continue;
          if (!nccl_->has(key))
            continue;
          NcclLink &link = ncclLinks_[nccl_->linkOf(key)];
          link.bytes = std::max(link.bytes, op.bytes);
          link.sender = op.kind == OpKind::Send;
        }
    for (NcclLink &link : ncclLinks_) {
      PFRT_CUDA(cudaMalloc(&link.buffer, std::max<uint64_t>(1, link.bytes)));
      if (link.sender) {
        PFRT_CUDA(cudaStreamCreateWithPriority(&link.stream, cudaStreamNonBlocking,
                                               g.prioGreatest));
        PFRT_CUDA(cudaEventCreateWithFlags(&link.fork, cudaEventDisableTiming));
      }
    }
    // Connect every link now, both ends at once: NCCL connects a pair on its first message, and
    // a run's first send would otherwise wait for a receive its peer issues only after it.
    if (!ncclLinks_.empty()) {
      cudaStream_t setup = nullptr;
      PFRT_CUDA(cudaStreamCreateWithFlags(&setup, cudaStreamNonBlocking));
      try {
        nccl_->connect(ncclLinks_.front().buffer, setup);
        nccl_->waitStream(setup, "connecting the links");
      } catch (...) {
        cudaStreamDestroy(setup);
        throw;
      }
      PFRT_CUDA(cudaStreamDestroy(setup));
    }
#else
    if (config_.rankTransfer == PFRT_RANK_TRANSFER_NCCL)
      throw Error(PFRT_ERROR_UNAVAILABLE,
                  "rank transfers with NCCL: the runtime was built without nccl.h");
#endif
  }

  // One crossing link's end on this rank (its channels' messages, one after another): a buffer
  // for the largest and, on the sender, the link's own stream (so that its sends never hold up
  // the sending stream) and the event that orders a send after the sending stream's work.
  struct NcclLink {
    uint64_t bytes = 0;
    bool sender = false;
    void *buffer = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t fork = nullptr;
  };

  void release() {
    // A session releases from the framework's thread: give it back its current device.
    int current = -1;
    const bool restore = cudaGetDevice(&current) == cudaSuccess;
#if PFRT_HAVE_NCCL
    for (auto &kv : gpus_)
      kv.second->peerWatch = PeerWatch{}; // nothing to check once the communicators are gone
    // A run that did not reach finish() failed: abort the communicators (a peer may be gone).
    if (nccl_)
      nccl_->close(/*failed=*/!finished_);
    nccl_.reset();
#endif
    for (NcclLink &link : ncclLinks_) {
      if (!gpus_.empty())
        cudaSetDevice(gpus_.begin()->second->gpu); // rank mode: this rank's one GPU
      cudaFree(link.buffer);
      if (link.stream)
        cudaStreamDestroy(link.stream);
      if (link.fork)
        cudaEventDestroy(link.fork);
    }
    ncclLinks_.clear();
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
      if (st.fork)
        cudaEventDestroy(st.fork);
      if (st.blas)
        cublasDestroy(st.blas);
      destroyStreamGate(st);
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
      for (cudaEvent_t e : g.edges)
        cudaEventDestroy(e);
      for (auto &b : g.buffers)
        cudaFree(b.second);
      cudaFree(g.gemmA);
      cudaFree(g.gemmB);
      cudaFree(g.gemmC);
      cudaFree(g.copyDevice);
      cudaFreeHost(g.copyHost);
      destroyGate(g);
      if (g.base)
        cudaEventDestroy(g.base);
      if (g.fillPool) {
        for (void *p : g.reservations) // a run that failed before begin()
          cudaFreeAsync(p, g.setup);
        g.reservations.clear();
        cudaDeviceSynchronize();
        cudaMemPoolDestroy(g.fillPool);
      }
      if (g.setup)
        cudaStreamDestroy(g.setup);
      if (g.comm)
        cudaStreamDestroy(g.comm);
    }
    gpus_.clear();
    if (restore)
      cudaSetDevice(current);
  }

  RunConfig config_;
  std::shared_ptr<CallbackErrors> callbackErrors_ = std::make_shared<CallbackErrors>();
  FillMath fillMath_ = FillMath::Bf16;
  bool gateRequested_ = true;
  bool warmUp_ = true; // PFRT_CUDA_WARMUP
  const Program *program_ = nullptr;
  std::map<uint32_t, std::unique_ptr<GpuDevice>> gpus_;
  std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<CudaStreamState>> streams_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, GpuChannel> channels_;
  std::map<std::pair<uint32_t, uint32_t>, PairBuffers> pairs_;
  std::vector<NcclLink> ncclLinks_; // by NcclChannels::linkOf
#if PFRT_HAVE_NCCL
  std::unique_ptr<NcclChannels> nccl_;
#endif
  bool finished_ = false;
};

} // namespace
} // namespace cudabk

std::unique_ptr<Backend> createCudaBackend() { return std::make_unique<cudabk::CudaBackend>(); }

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
