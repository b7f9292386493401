// The internal interface between the executor (stream threads, event generations, channels, fill
// bookkeeping, checkpoints: the same for every backend) and a backend (what an op does on the
// hardware and how its time is taken).
//
// Every stream of every device gets one host thread that walks the stream's op list once per
// iteration and calls the backend. The host backend does the work synchronously on that thread and
// reads the clock; the CUDA backend enqueues it into the stream's cudaStream_t and brackets it with
// timing events that it resolves later (the thread runs a bounded number of iterations ahead).
#ifndef PFRT_BACKEND_H
#define PFRT_BACKEND_H

#include "runtime/Program.h"
#include "runtime/Workload.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pfrt {

class Executor;
class Transport;

// Microseconds since the run's start on the host clock (the time base of every slot).
double hostNowUs();

// Start/end of one op in one iteration, real microseconds since the run's start (-1: not run).
struct TimeSlot {
  double start = -1, end = -1;
};

// RunConfig::gpu: the GPU current on the thread that calls Backend::prepare (sessions).
constexpr int32_t kGpuCurrent = -2;

struct RunConfig {
  pfrt_backend backend = PFRT_BACKEND_AUTO;
  uint32_t iterations = 1;  // total loop count (a resumed run starts later)
  bool fill = true;
  bool profile = false;
  double timeScale = 1.0;
  std::string checkpointPath;
  int checkpointRecovery = 0; // PFRT_CHECKPOINT_FAIL / _PREVIOUS / _RESTART
  int32_t stage = -1;
  uint32_t maxDim = 0;      // effective cap (backend default applied)
  pfrt_compute_fn computeFn = nullptr;
  void *computeUser = nullptr;
  bool verbose = false;
  bool modelledTime = false;     // host: PFRT_TIME_MODELLED
  bool fillBounded = true;       // PFRT_FILL_BOUNDED or PFRT_FILL_BOUNDED_WHOLE
  bool fillSplit = true;         // PFRT_FILL_BOUNDED: run the head of a chunk that does not fit
  bool fillIdlePriority = true;  // host: fill/copy threads at SCHED_IDLE
  int32_t cpu = -1;              // host, measured: pin real devices' threads here
  int32_t fillCpu = -1;          // host: pin real devices' fill and copy threads here (-1: cpu)
  int32_t gpu = -1;              // CUDA: ordinal of the first device (-1: local rank / 0;
                                 // kGpuCurrent: the preparing thread's current device)
  // Clean stop: when *stopRequest becomes nonzero the run stops at the next iteration boundary.
  const std::atomic<int> *stopRequest = nullptr;
  pfrt_progress_fn progressFn = nullptr; // called after each iteration of the last main stream
  void *progressUser = nullptr;
  // Set by the executor before prepare(): per device, true when it is emulated at planned times.
  std::vector<bool> emulated;
  // Host replay, measured time: emulated computes follow the real stage's measured speed (their
  // planned time x its measured/planned ratio) instead of the plan.
  bool replayScalesPeers = false;
  // One process per rank (a rank = a device): this process runs device `rank` only and reaches
  // the others through `transport`. -1: every device runs in this process.
  int32_t rank = -1;
  // Carries the sends between devices; null: the in-process transport (the executor owns it).
  Transport *transport = nullptr;
  // Rank mode: how long a peer may keep this rank waiting; how sends reach other ranks' GPUs.
  double peerTimeoutS = 120.0;
  pfrt_rank_transfer rankTransfer = PFRT_RANK_TRANSFER_AUTO;
  // pfrt_compare's run this is (currentCompareRun: "none", or "N (run k of M)"); ranks must agree.
  std::string compareRun = "none";
};

// A point-to-point message as published by a sender.
struct Message {
  void *handle = nullptr; // backend specific (CUDA: the cudaEvent_t recorded after the transfer)
  int owner = -1;         // device whose backend produced the handle
  double readyUs = -1;    // host clock: when the data is (modelled to be) there; -1 unknown
};

// Lets a backend publish a send now or later (e.g. from a CUDA host callback).
class Publisher {
public:
  virtual ~Publisher() = default;
  virtual void publish(const Message &message) = 0;
  // A copy that outlives the send call (for publishing from a callback).
  virtual std::unique_ptr<Publisher> clone() const = 0;
};

// Per-stream-thread state.
struct StreamCtx {
  Executor *exec = nullptr;
  uint32_t device = 0, stream = 0;
  const Program *program = nullptr;
  const Device *dev = nullptr;
  const Stream *s = nullptr;
  int64_t iteration = 0; // absolute loop index
  TimeSlot *slot = nullptr; // slot of the op being executed
  void *backendData = nullptr;
};

// One fill chunk as the backend executes it.
struct FillExec {
  uint32_t job = 0, device = 0;
  const JobShape *shape = nullptr;
  uint32_t passBegin = 0, passEnd = 0;
  uint32_t batch = 0;           // possibly truncated to the job's remaining samples
  uint64_t sampleBegin = 0;     // absolute
  bool weightsStreamed = false;
  bool activationsHost = false;
  bool begins = false;          // passBegin == 0: creates the batch
  bool completes = false;       // passEnd == passes: finishes the batch (checksum / loss)
  double plannedUs = 0;
  double timeScale = 1.0;
  // Bubble bound (host clock, real us): the chunk's bubble is predicted to end at deadlineUs and
  // the chunk to take predictedUs. The fill stream's thread checks before starting the chunk, on
  // every backend: on CUDA against the GPU's progress (bubble edges are GPU events resolved to the
  // host clock, and the fill thread runs one chunk at a time; docs/runtime.md section 4b).
  bool bounded = false;
  double deadlineUs = 0, predictedUs = 0;
  // Bounded: asked before each pass after the first; false stops the chunk before that pass (the
  // passes from it on are left for later). Empty: every pass runs. The host backend asks it.
  std::function<bool(uint32_t pass)> keepGoing;
  // Bounded, for a backend that also checks on the device (CUDA, DeviceGate.h): the predicted
  // real time of each pass [passBegin, passEnd); whether the chunk may stop between passes
  // (else it runs whole or not at all); the token of the bubble's begin edge (Backend::markEdge,
  // -1: unknown), so the device can see main pass the bubble's end. The device skips what does
  // not fit when the fill stream gets there; JobData::run returns where it stopped.
  std::vector<double> passNeedUs;
  bool splitPasses = false;
  int64_t bubbleToken = -1;
};

// State of one batch in flight between chunks. save() returns the checkpoint layout shared by all
// backends: [activations (or gradient), {loss}, stashX[0..L), stashHpre[0..L)].
class BatchData {
public:
  virtual ~BatchData() = default;
  virtual std::vector<std::vector<float>> save() = 0;
};

// The numeric state of one fill job on one device (weights, accumulators).
class JobData {
public:
  virtual ~JobData() = default;
  // Runs passes [exec.passBegin, exec.passEnd) of the batch; creates *batch when exec.begins.
  // Returns the pass after the last one run: exec.passEnd, or an earlier one where
  // exec.keepGoing stopped it (the batch then stays in flight, as after a head).
  virtual uint32_t run(StreamCtx &ctx, std::unique_ptr<BatchData> &batch,
                       const FillExec &exec) = 0;
  struct Accum {
    double checksum = 0; // inference outputs / training losses, since creation
    double lossSum = 0;
  };
  // Synchronises with the device if needed.
  virtual Accum accumulators() = 0;
  virtual std::vector<std::vector<float>> saveWeights() = 0; // all layers, concatenated lists
  virtual void loadWeights(const std::vector<std::vector<float>> &weights) = 0;
  virtual std::unique_ptr<BatchData> loadBatch(const std::vector<std::vector<float>> &tensors,
                                               uint32_t batch) = 0;
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // True when times are measured on a device; false for the host's modelled time.
  virtual bool measuresTime() const = 0;
  // Called once, before any thread starts, with the devices this backend runs.
  virtual void prepare(const Program &program, const ProgramInfo &info, const RunConfig &config,
                       const std::vector<uint32_t> &devices) = 0;
  // Called once the jobs are made and before the run's clocks start (before the ranks' start
  // barrier): one-time costs of the jobs' first chunks are paid here, not in a bubble (CUDA:
  // docs/runtime.md §4b "Warm-up before the loop"). Best effort: a failure is a warning.
  virtual void warmUp() {}
  // Called right before the stream threads start; originUs (host clock) is the common instant
  // the first ops of every stream are modelled to start at.
  virtual void begin(double originUs) { (void)originUs; }
  virtual void threadBegin(StreamCtx &ctx) = 0;
  virtual void threadEnd(StreamCtx &ctx) = 0;
  // Bracket an op (the host reads the clock, CUDA records timing events).
  virtual void markStart(StreamCtx &ctx, TimeSlot &slot) = 0;
  virtual void markEnd(StreamCtx &ctx, TimeSlot &slot) = 0;

  virtual void compute(StreamCtx &ctx, const Op &op, double plannedUs) = 0;
  virtual void idle(StreamCtx &ctx, double plannedUs) = 0;
  // `gen` is the absolute iteration of the record/wait.
  virtual void record(StreamCtx &ctx, uint32_t event, int64_t gen) = 0;
  virtual void wait(StreamCtx &ctx, uint32_t event, int64_t gen) = 0;
  // Emulates/performs the transfer and publishes the message (now or later). peerLocal: the
  // receiving device runs on this same backend instance.
  virtual void send(StreamCtx &ctx, const Op &op, double plannedUs, bool peerLocal,
                    Publisher &publisher) = 0;
  // Called after the message was published (the host thread has waited for it).
  virtual void recv(StreamCtx &ctx, const Op &op, const Message &message) = 0;
  virtual void copy(StreamCtx &ctx, const Op &op, double plannedUs) = 0;
  virtual void alloc(StreamCtx &ctx, const Op &op) = 0;
  virtual void free(StreamCtx &ctx, const Op &op) = 0;
  // The priority the stream really got (CUDA: cudaStreamGetPriority), if the backend has one.
  virtual bool streamPriority(uint32_t device, uint32_t stream, int &priority) {
    (void)device;
    (void)stream;
    (void)priority;
    return false;
  }

  virtual std::unique_ptr<JobData> createJob(uint32_t device, uint32_t job,
                                             const JobShape &shape) = 0;
  // End of one iteration of one stream (CUDA: throttle, resolve older timing events).
  virtual void iterationEnd(StreamCtx &ctx) = 0;
  // Wait until everything enqueued on the stream has finished (before a checkpoint).
  virtual void syncStream(StreamCtx &ctx) = 0;
  // After all threads joined: every slot is resolved.
  virtual void finish() = 0;
  // The run failed (called before finish): give up transfers a peer may never complete, so that
  // finish does not wait for them (CUDA with NCCL: abort the communicators).
  virtual void runFailed() {}
  // The stream's current time on the host clock (host: its intended time if that is later).
  virtual double streamNowUs(StreamCtx &ctx) {
    (void)ctx;
    return hostNowUs();
  }
  // Rank mode: "nccl" when sends to other ranks move their bytes, "modelled" when they take the
  // planned time; null when not in rank mode or not applicable (host).
  virtual const char *rankTransfer() const { return nullptr; }
  // Start/end (host clock) of the fill chunk JobData::run just ran, when the backend knows them
  // (host: modelled times for a modelled chunk, clock times for real work).
  virtual bool lastWorkSpan(StreamCtx &ctx, double &start, double &end) {
    (void)ctx;
    (void)start;
    (void)end;
    return false;
  }
  // True when bounded chunks also run behind device-side checks (CUDA gates; false after the
  // backend fell back to the host's check alone, or on the host).
  virtual bool boundsOnDevice() const { return false; }
  // After JobData::run of a bounded chunk: why the device stopped it before its last pass (a
  // GateOutcome of DeviceGate.h: kGateEnded, kGateDeadline), or 0 when it ran every pass or the
  // backend does not check on the device (host).
  virtual uint32_t lastDeviceStop(StreamCtx &ctx) {
    (void)ctx;
    return 0;
  }
  // True when the executor decides on the host whether a chunk fits its bubble (both backends:
  // on CUDA the bubble's edges are GPU events resolved to the host clock, see markEdge, and the
  // fill stream's thread waits for each chunk, so it never runs ahead of the GPU); false for a
  // backend that would enforce the bound on the device itself.
  virtual bool boundsOnHost() const { return true; }
  // The native stream of a stream context and the GPU it is on (CUDA: a cudaStream_t); false
  // where there is none (the host).
  virtual bool nativeStream(StreamCtx &ctx, void *&stream, int &gpu) {
    (void)ctx;
    stream = nullptr;
    gpu = -1;
    return false;
  }
  // CPU time (us) the calling thread has used, when fill work runs on the thread that calls
  // JobData::run (host); -1 when it does not (CUDA: the GPU runs it).
  virtual double fillThreadCpuUs() { return -1; }
  // A point on a stream's timeline (a bubble's begin or end on the main stream). When the host
  // reaches it at the same time as the stream (host backend) the time is stored in nowUs and the
  // result is -1; otherwise (CUDA: the enqueueing thread runs ahead of the GPU) the result is a
  // token whose time edgeTimeUs resolves once the stream has passed that point.
  virtual int64_t markEdge(StreamCtx &ctx, double &nowUs) {
    nowUs = streamNowUs(ctx);
    return -1;
  }
  // The same on a stream the runtime does not own (a session's framework stream: a cudaStream_t,
  // NULL for the default stream), from any thread: a token for edgeTimeUs, or -1 with the time in
  // nowUs when the backend has no device-side edges (host: the host clock now).
  virtual int64_t markExternalEdge(uint32_t device, void *stream, double &nowUs) {
    (void)device;
    (void)stream;
    nowUs = hostNowUs();
    return -1;
  }
  // Makes `device`'s GPU current on the calling thread until the result is destroyed, which
  // restores the thread's previous device (CUDA); null when there is nothing to do (host). For
  // calls from a thread the runtime does not own (a session's framework thread).
  class DeviceScope {
  public:
    virtual ~DeviceScope() = default;
  };
  virtual std::unique_ptr<DeviceScope> useDevice(uint32_t device) {
    (void)device;
    return nullptr;
  }
  // Re-reads the offset between the device's clock (edge times) and the host clock: a session
  // runs for hours and the GPU's timer drifts from the host's. Not while another thread resolves
  // edges of the device (a session calls it from its worker, the only one that does).
  virtual void resyncClock(uint32_t device) { (void)device; }
  // The host-clock time of an edge token of `device`. block: wait until the stream has passed it;
  // otherwise false when it has not yet.
  virtual bool edgeTimeUs(uint32_t device, int64_t token, bool block, double &us) {
    (void)device;
    (void)token;
    (void)block;
    (void)us;
    return false;
  }
  // How far (real us) the threads lagged behind the modelled clock at worst (host backend).
  virtual double lagUs() const { return 0; }
  // Host replay: the emulated devices' compute time / planned (RunConfig::replayScalesPeers), the
  // median over the real stage's recent computes at the end of the run; 0 when not scaled.
  virtual double emulatedSpeedRatio() const { return 0; }
  // Measured minimum free device memory, or false when the backend does not measure it.
  virtual bool minFreeBytes(uint32_t device, uint64_t &bytes) {
    (void)device;
    (void)bytes;
    return false;
  }
};

std::unique_ptr<Backend> createHostBackend();
// Null when the runtime was built without CUDA.
std::unique_ptr<Backend> createCudaBackend();
// Number of CUDA devices (0 without CUDA, driver or GPU).
int cudaDeviceCount();
// CUDA backend: what the fill chunks allocated in the hot path (between Backend::begin and
// finish), cumulative over the process (tests compare before and after a run); zero without CUDA.
struct CudaHotPathStats {
  uint64_t scratchCarves = 0;   // per-layer scratch carved from the preallocated arenas (no alloc)
  uint64_t deviceAllocs = 0;    // device allocations (an arena or GEMM_CHAIN buffer too small)
  uint64_t pinnedAllocs = 0;    // cudaMallocHost (no preallocated pinned buffer fit)
  uint64_t batchAllocs = 0;     // batch-state sub-allocations from the pre-grown fill pool
  uint64_t poolGrowthBytes = 0; // growth of the fill pool's reserved memory during the loop
  // The device-side bound: chunks run behind gates, and the host time (measured) from the start
  // of each one's capture to the launch of its first pass, in all.
  uint64_t gatedChunks = 0;
  double gateBuildUs = 0;
};
CudaHotPathStats cudaHotPathStats();

} // namespace pfrt

#endif // PFRT_BACKEND_H
