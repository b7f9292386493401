// Sessions: one rank of a stream program, filled bubble by bubble by a framework that owns its
// training loop (pfrt_session_* in pfrt.h, docs/integration.md).
//
// The session keeps the rank's fill state the executor keeps per device (job data, batches in
// flight, the bounded backlog, the chunk predictor) and applies the same chunk rules: a planned
// chunk's samples follow the periodic plan (chunkRunsIn), a continuation runs only after the pass
// before it, deferred work runs before newer work of its job, and under the bubble bound a chunk
// starts only when its predicted time fits what is left of the bubble. What differs is who says
// when a bubble begins and ends: the framework, through bubble_begin / bubble_end, instead of the
// main stream's bubble op; the chunks run on one worker thread per session.
//
// CUDA sessions: bubble_begin and bubble_end record edges (events) on the framework's stream and
// return at once; the framework's host thread runs ahead of its stream, so the worker takes a queue
// of bubbles (and iteration ends). For each it waits until the GPU has reached the begin edge (the
// bubble begins at that event's time, resolved to the host clock), runs the chunks on the
// backend's low-priority fill stream under the same bound (the fill stream's thread waits for each
// chunk, so the clock it reads is the GPU's progress) and starts no chunk once the end edge has
// passed (checked without blocking before each one). Calls that read or replace the fill state
// (stats, checkpoints, tasks) first wait until the worker has finished the queue.
#include "runtime/Session.h"
#include "runtime/SessionTasks.h"

#include "runtime/Backend.h"
#include "runtime/CheckpointFile.h"
#include "runtime/FillQueue.h"
#include "runtime/Program.h"
#include "runtime/ProgramIO.h"
#include "runtime/Report.h"
#include "runtime/pfrt.h"
#include "proto/stream_program.pb.h"
#include "support/Checked.h"
#include "support/Json.h"
#include "support/Limits.h"

#include <algorithm>
#include <cxxabi.h>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

namespace pfrt {

using pipefill::JsonWriter;

namespace {

constexpr uint32_t kHostDefaultMaxDim = 128; // as pfrt_run's host backend

std::atomic<double (*)()> testClock{nullptr};

double sessionNowUs() {
  double (*clock)() = testClock.load();
  return clock ? clock() : hostNowUs();
}

[[noreturn]] void invalid(const std::string &message) {
  throw Error(PFRT_ERROR_INVALID_ARGUMENT, message);
}

// Measured times of one chunk shape of one job.
struct ShapeStats {
  uint64_t runs = 0;
  double plannedUs = 0, predictedUsLast = -1, measuredUsSum = 0, measuredUsMax = 0;
};

// A job's queue on this rank (the executor's chunk rules, FillQueue) and its accounting.
struct JobState : FillQueue {
  JobShape shape;
  uint32_t passes = 0;
  uint64_t stride = 0;
  bool onRank = false; // the job has chunks on this rank
  uint64_t baseSamples = 0, baseSteps = 0;
  double baseChecksum = 0, baseLoss = 0;
  uint64_t samples = 0, steps = 0, samplesPlanned = 0;
  uint64_t chunksRun = 0, chunksDeferred = 0, chunksSkipped = 0, chunksSplit = 0;
  uint64_t chunksStoppedOnDevice = 0; // CUDA's device-side bound
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, ShapeStats> shapes;
};

struct BubbleInfo {
  pfrt_session_bubble desc{};
  uint32_t slotBegin = 0, slotEnd = 0; // into Session::slots_
};

// A planned fill chunk op of this rank: device stream s, op i.
struct Slot {
  uint32_t stream = 0, op = 0, bubble = 0; // bubble: index into bubbles_
};

struct DeviceCommand;

// The open bubble as the worker sees it.
struct BubbleTask {
  bool unplanned = false;
  // CUDA: the bubble's queued command (edges, end), null on the host.
  DeviceCommand *command = nullptr;
  uint32_t bubble = 0; // index into bubbles_
  uint32_t bubbleId = PFRT_SESSION_UNPLANNED;
  double beginUs = 0, deadlineUs = 0;
  pfrt_session_bubble_result result{};
};

constexpr int64_t kEdgeUnset = -2;

// CUDA: one bubble (or iteration end) the framework issued, for the worker.
struct DeviceCommand {
  bool iterationEnd = false;
  BubbleTask task;                     // bubble, id, unplanned; the worker sets the times
  uint32_t skipBegin = 0, skipEnd = 0; // slots of the bubbles skipped before this one
  double durationUs = 0;               // real us from the begin edge to the deadline
  int64_t beginToken = -1;             // Backend::markExternalEdge
  double beginNowUs = -1;              // its time when the token is -1
  // Set by bubble_end while the worker may run the bubble: the time first (token -1), then the
  // token (release); kEdgeUnset until then.
  std::atomic<double> endNowUs{-1};
  std::atomic<int64_t> endToken{kEdgeUnset};
  bool endPassed = false; // worker
  bool done = false;      // guarded by Session::m_
};

} // namespace

void setSessionClockForTesting(double (*clockUs)()) { testClock = clockUs; }

class Session {
public:
  Session(const Program &program, uint32_t rank, const pfrt_session_options &options);
  ~Session();

  uint32_t rank() const { return rank_; }
  uint32_t ranks() const { return static_cast<uint32_t>(program_.devices.size()); }
  const std::vector<pfrt_session_op> &ops() const { return ops_; }
  const std::vector<BubbleInfo> &bubbles() const { return bubbles_; }
  size_t chunkCount() const {
    std::lock_guard<std::mutex> lock(logMutex_);
    return chunkLog_.size();
  }
  pfrt_session_chunk chunkAt(uint32_t index) const {
    std::lock_guard<std::mutex> lock(logMutex_);
    if (index >= chunkLog_.size())
      throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                  "chunk " + std::to_string(index) + " does not exist (the log holds " +
                      std::to_string(chunkLog_.size()) + ")");
    return chunkLog_[index];
  }

  void begin(uint32_t bubbleId, void *mainStream, double durationUs);
  void beginUnplanned(double durationUs, void *mainStream);
  void wait();
  pfrt_session_bubble_result end(uint32_t bubbleId);
  void iterationEnd();
  void saveCheckpoint(const std::string &path);
  void loadCheckpoint(const std::string &path);
  pfrt_session_stats stats() const;
  pfrt_report_job job(uint32_t j) const;
  const std::string &reportJson();
  // Ends an open bubble without the caller's checks (destroy).
  void close();
  // pfrt_session_destroy from a fill task's step (the session's own worker thread, which cannot
  // join itself): true, and the destroy is refused; the session stays live and the step's task
  // fails when the step returns (reported by the next bubble_wait / bubble_end). False elsewhere.
  bool refuseDestroyFromStep();

  // Fill tasks.
  uint32_t addTask(const pfrt_session_task_desc &desc);
  uint32_t taskCount() const { return static_cast<uint32_t>(tasks_.size()); }
  // The CUDA stream the worker runs fill on and its GPU (NULL and -1 on the host).
  void fillStream(void *&stream, int &gpu) const;
  pfrt_session_task_stats taskStats(uint32_t t) const;
  void setTaskState(uint32_t t, const void *data, size_t size);
  const std::string &taskState(uint32_t t) const;

private:
  // The rank's main-stream work (ops_) and bubbles (bubbles_, bubbleIndex_).
  void indexMainStream();
  // The rank's fill chunks (slots_), grouped by bubble in schedule order and in stream order
  // inside one; the fill stream; the free bytes assumed for unplanned bubbles.
  void indexFillSlots();
  void createJobData();
  // Frees the job data and the backend (the caller's thread keeps its current device).
  void releaseBackend();
  // The worker's part of iteration_end (host: on the caller's thread).
  void advanceIteration();
  // CUDA: records the begin edge and queues the command (waits while the queue is full).
  void enqueue(const std::shared_ptr<DeviceCommand> &c, void *mainStream);
  // CUDA: waits until the worker has finished every queued command (host: nothing to do), then
  // reports a failure of the worker.
  void sync() const;
  // The framework ended the bubble (host: bubble_end; CUDA: its end edge has passed on the GPU).
  bool stopped(const BubbleTask &task);
  // Worker, CUDA: one queued bubble.
  void runDeviceBubble(DeviceCommand &c);
  void checkNoBubble(const char *call) const;
  // A call that waits for the worker, made by a fill task's step on the worker itself, would wait
  // for itself forever (or, for a join, abort): refused.
  void checkNotWorker(const char *call) const;
  bool onWorker() const { return std::this_thread::get_id() == thread_.get_id(); }
  void checkMainStream(void *mainStream) const;
  void startTask();
  void worker();
  void runTask(BubbleTask &task);
  // The slot's own planned work this iteration (false: nothing to do, counted as skipped).
  bool ownWork(const pfrt_fill_chunk_desc &f, JobState &js, WorkItem &own);
  // Runs the slot like the executor's runFill: backlog first, then the slot's own chunk.
  void runSlot(const Slot &slot, BubbleTask &task);
  // Queues the slot's own chunk as deferred without running anything.
  void deferSlot(const Slot &slot);
  // Runs the job's backlog while it fits; false when a chunk did not fit (or the bubble ended).
  bool drain(JobState &js, uint32_t job, BubbleTask &task);
  bool fits(JobState &js, const WorkItem &item, const BubbleTask &task, double *predicted);
  // Runs one work item; true when it stopped between passes because its bubble ended or its next
  // pass no longer fit (host, heads of chunks: the rest is first in line again).
  bool exec(JobState &js, uint32_t job, const WorkItem &item, double predicted,
            BubbleTask &task, bool deferred);
  // The plan's chunks of the task's bubble (planned), or deferred and pulled-forward work.
  void runChunks(BubbleTask &task);
  // Then the fill tasks, round-robin, while a step fits.
  void runTasks(BubbleTask &task);
  void runStep(TaskState &ts, uint32_t t, BubbleTask &task);
  const TaskState &taskAt(uint32_t t, const char *call) const;
  // A task's failure, reported (and cleared) by the next bubble_wait / bubble_end.
  void throwTaskError();

  Program program_;
  ProgramInfo info_;
  uint32_t rank_ = 0;
  uint32_t fillStream_ = 0; // the stream context chunks run in
  RunConfig config_;
  std::unique_ptr<Backend> backend_;
  std::vector<pfrt_session_op> ops_;
  std::vector<BubbleInfo> bubbles_;
  std::map<uint32_t, uint32_t> bubbleIndex_; // bubble id -> index
  std::vector<Slot> slots_;
  std::vector<JobState> jobs_;
  std::deque<TaskState> tasks_; // a deque: names stay put as tasks are added
  uint32_t taskTurn_ = 0;       // round-robin: the task that goes first in the next bubble
  uint64_t unplannedFreeBytes_ = 0;
  std::string taskError_;       // worker: a failed step's message (read after taskDone_)
  pfrt_status taskErrorStatus_ = PFRT_OK;

  // CUDA: bubbles are edges on the framework's stream, run by the worker from a queue.
  bool device_ = false;
  size_t maxQueued_ = 0;
  std::deque<std::shared_ptr<DeviceCommand>> commands_; // guarded by m_
  std::shared_ptr<DeviceCommand> openCommand_;          // caller's thread: the open bubble's
  void *openStream_ = nullptr;                          // and its main_stream

  // Loop position. iteration_ is the worker's (CUDA: it lags behind the framework); loopIteration_
  // the caller's.
  int64_t iteration_ = 0;
  int64_t loopIteration_ = 0;
  uint32_t nextBubble_ = 0;     // bubbles below this index are over in this iteration
  std::vector<bool> slotDone_;  // per slot, this iteration
  bool open_ = false;
  bool openUnplanned_ = false;
  uint32_t openBubble_ = 0;
  bool openWaited_ = false; // bubble_wait was called: the bubble's length is the fill's, not known
  uint32_t openIndex_ = 0;   // host: the open planned bubble's index into bubbles_
  double openBeginUs_ = 0;   // host: when it began

  // Host: each planned bubble's measured / planned length (begin -> end call) in its last
  // kLengthHistory iterations that the framework did not hand to fill whole (bubble_wait). A bubble
  // begun without a duration is predicted to last its plan x the smallest of them (1 before any),
  // as the executor's bound does (docs/runtime.md §4b).
  static constexpr size_t kLengthHistory = 5;
  std::map<uint32_t, std::deque<double>> lengthRatios_;
  double lengthFactor(uint32_t bubbleId) const;

  // Worker handshake.
  std::thread thread_;
  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  bool hasTask_ = false, taskDone_ = true, quit_ = false;
  bool destroyRefused_ = false; // worker: the running step called pfrt_session_destroy
  BubbleTask task_;
  std::atomic<bool> stop_{false};
  mutable std::string workerError_;
  mutable pfrt_status workerStatus_ = PFRT_OK;
  StreamCtx ctx_;
  TimeSlot dummySlot_;

  // Totals.
  uint64_t bubblesRun_ = 0, unplannedRun_ = 0, overrunCount_ = 0;
  double fillUs_ = 0, overrunUs_ = 0, endWaitUs_ = 0, endWaitUsMax_ = 0;
  std::deque<pfrt_session_chunk> chunkLog_;
  mutable std::mutex logMutex_;
  double admittedUs_ = 0; // worker: the clock reading of the last bound decision
  bool ownLast_ = false; // worker: the backlog being drained ends with the slot's own chunk
  std::string json_;
};

Session::Session(const Program &program, uint32_t rank, const pfrt_session_options &options)
    : program_(program) {
  info_ = validate(program_);
  const uint32_t n = static_cast<uint32_t>(program_.devices.size());
  if (options.world_size && options.world_size != n)
    invalid("the plan has " + std::to_string(n) + " ranks (devices) but the world has " +
            std::to_string(options.world_size) + ": it is a plan for another job");
  if (rank >= n)
    invalid("rank " + std::to_string(rank) + " is out of range: the plan has " +
            std::to_string(n) + " ranks (devices 0.." + std::to_string(n - 1) + ")");
  rank_ = rank;
  if (options.backend != PFRT_BACKEND_AUTO && options.backend != PFRT_BACKEND_HOST &&
      options.backend != PFRT_BACKEND_CUDA)
    invalid("unknown backend " + std::to_string(static_cast<int>(options.backend)));
  if (!(options.time_scale == 0 || (options.time_scale >= kMinTimeScale &&
                                     options.time_scale <= kMaxTimeScale)))
    invalid("time_scale must be 0 (1.0) or in [" + std::to_string(kMinTimeScale) + ", " +
            std::to_string(kMaxTimeScale) + "], got " + std::to_string(options.time_scale));
  if (options.fill_policy != PFRT_FILL_BOUNDED && options.fill_policy != PFRT_FILL_UNBOUNDED &&
      options.fill_policy != PFRT_FILL_BOUNDED_WHOLE)
    invalid("unknown fill_policy " + std::to_string(static_cast<int>(options.fill_policy)));
  device_ = options.backend == PFRT_BACKEND_CUDA;
  if (device_ && cudaDeviceCount() <= 0)
    throw Error(PFRT_ERROR_UNAVAILABLE,
                createCudaBackend() ? "backend CUDA asked but there is no CUDA device "
                                      "(cudaGetDeviceCount found none, or no driver)"
                                    : "backend CUDA asked but the runtime was built without CUDA");

  config_.backend = device_ ? PFRT_BACKEND_CUDA : PFRT_BACKEND_HOST;
  config_.fill = true;
  config_.timeScale = options.time_scale > 0 ? options.time_scale : 1.0;
  // CUDA: 0 is no cap (the jobs' real dimensions), as pfrt_run's CUDA backend.
  config_.maxDim = options.max_dim ? options.max_dim : device_ ? 0 : kHostDefaultMaxDim;
  if (device_)
    config_.gpu = kGpuCurrent; // the GPU current on the thread that creates the session
  config_.modelledTime = false; // fill chunks are real work timed on the clock
  config_.fillBounded = options.fill_policy != PFRT_FILL_UNBOUNDED;
  config_.fillSplit = options.fill_policy == PFRT_FILL_BOUNDED;
  config_.fillIdlePriority = options.fill_idle_priority != 0;
  config_.emulated.assign(n, false);

  indexMainStream();
  indexFillSlots();

  backend_ = device_ ? createCudaBackend() : createHostBackend();
  backend_->prepare(program_, info_, config_, {rank_});
  // The edge ring (CudaBackend::prepare) holds 64 per planned bubble and at least 64: a queue of
  // 16 per bubble (two edges each) and at least 16 never reuses an edge the worker still needs.
  maxQueued_ = std::max<size_t>(16, 16 * bubbles_.size());
  jobs_.resize(program_.jobs.size());
  for (uint32_t j = 0; j < program_.jobs.size(); ++j) {
    JobState &js = jobs_[j];
    js.shape = makeJobShape(program_, j, config_.maxDim);
    js.passes = info_.jobs[j].passes;
    js.stride = info_.jobs[j].stride;
    js.onRank = info_.jobs[j].streamOnDevice.count(rank_) != 0;
    if (js.onRank)
      js.holdAt = FillQueue::holdThreshold(
          program_.devices[rank_].streams[info_.jobs[j].streamOnDevice.at(rank_)], j);
  }
  {
    std::unique_ptr<Backend::DeviceScope> scope = backend_->useDevice(rank_);
    createJobData();
    if (device_)
      backend_->begin(hostNowUs()); // the edges' time base; frees the jobs' pool reservations
  }

  ctx_.device = rank_;
  ctx_.stream = fillStream_;
  ctx_.program = &program_;
  ctx_.dev = &program_.devices[rank_];
  ctx_.s = &program_.devices[rank_].streams[fillStream_];
  ctx_.slot = &dummySlot_;
  // The worker starts its backend thread state before the first bubble so that bubble_begin
  // only hands over a task.
  {
    std::unique_lock<std::mutex> lock(m_);
    taskDone_ = false;
  }
  thread_ = std::thread(&Session::worker, this);
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait(lock, [&] { return taskDone_; });
  if (workerStatus_ != PFRT_OK) {
    lock.unlock();
    close();
    releaseBackend();
    throw Error(workerStatus_, workerError_);
  }
}

void Session::indexMainStream() {
  const Device &dev = program_.devices[rank_];
  const Stream &main = dev.streams[info_.devices[rank_].mainStream];
  int32_t lastOp = -1;
  for (const Op &op : main.ops) {
    if (op.kind == OpKind::Compute || op.kind == OpKind::Send || op.kind == OpKind::Recv) {
      pfrt_session_op o{};
      o.kind = op.kind == OpKind::Compute ? PFRT_SESSION_OP_COMPUTE
               : op.kind == OpKind::Send  ? PFRT_SESSION_OP_SEND
                                          : PFRT_SESSION_OP_RECV;
      o.compute = op.compute;
      o.microbatch = op.microbatch;
      o.chunk = op.chunk;
      o.peer = op.peer;
      o.tag = op.tag;
      o.bytes = op.bytes;
      o.planned_us = effectivePlannedUs(dev, op);
      o.planned_start_us = op.plannedStartUs;
      ops_.push_back(o);
      lastOp = static_cast<int32_t>(ops_.size()) - 1;
    } else if (op.kind == OpKind::Bubble) {
      BubbleInfo b;
      b.desc.bubble_id = op.bubble.bubble_id;
      b.desc.kind = op.bubble.kind;
      b.desc.after_op = lastOp;
      b.desc.planned_start_us = op.bubble.planned_start_us;
      b.desc.planned_duration_us = op.bubble.planned_duration_us;
      b.desc.free_bytes = op.bubble.free_bytes;
      bubbleIndex_[b.desc.bubble_id] = static_cast<uint32_t>(bubbles_.size());
      bubbles_.push_back(b);
    }
  }
}

void Session::indexFillSlots() {
  const Device &dev = program_.devices[rank_];
  std::vector<std::vector<Slot>> byBubble(bubbles_.size());
  bool haveFill = false;
  for (uint32_t s = 0; s < dev.streams.size(); ++s) {
    const Stream &st = dev.streams[s];
    for (uint32_t i = 0; i < st.ops.size(); ++i) {
      const Op &op = st.ops[i];
      if (op.kind != OpKind::Fill)
        continue;
      if (!haveFill) {
        fillStream_ = s;
        haveFill = true;
      }
      auto it = bubbleIndex_.find(op.fill.bubble_id);
      if (it == bubbleIndex_.end())
        continue; // validate() refuses this; kept defensive
      Slot slot;
      slot.stream = s;
      slot.op = i;
      slot.bubble = it->second;
      byBubble[it->second].push_back(slot);
      BubbleInfo &b = bubbles_[it->second];
      ++b.desc.chunks;
      b.desc.planned_fill_us += op.fill.planned_us;
    }
  }
  for (uint32_t k = 0; k < bubbles_.size(); ++k) {
    bubbles_[k].slotBegin = static_cast<uint32_t>(slots_.size());
    slots_.insert(slots_.end(), byBubble[k].begin(), byBubble[k].end());
    bubbles_[k].slotEnd = static_cast<uint32_t>(slots_.size());
  }
  if (!haveFill)
    fillStream_ = info_.devices[rank_].mainStream;
  for (uint32_t k = 0; k < bubbles_.size(); ++k)
    unplannedFreeBytes_ = k ? std::min(unplannedFreeBytes_, bubbles_[k].desc.free_bytes)
                            : bubbles_[k].desc.free_bytes;
  slotDone_.assign(slots_.size(), false);
}

Session::~Session() {
  close();
  releaseBackend();
}

void Session::releaseBackend() {
  if (!backend_)
    return;
  // CUDA: the job data and the backend free device memory; the caller's device stays current.
  std::unique_ptr<Backend::DeviceScope> scope = backend_->useDevice(rank_);
  for (JobState &js : jobs_) {
    js.flights.clear();
    js.data.reset();
  }
  backend_.reset();
}

void Session::close() {
  if (!thread_.joinable())
    return;
  stop_ = true; // CUDA: queued bubbles start no chunk
  {
    std::lock_guard<std::mutex> lock(m_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Session::refuseDestroyFromStep() {
  if (!onWorker())
    return false;
  destroyRefused_ = true;
  setLastError("pfrt_session_destroy called from a fill task's step on the session's worker "
               "thread: refused, the session stays live (the worker cannot wait for itself); the "
               "task fails when the step returns. Destroy the session from the framework's thread");
  return true;
}

void Session::createJobData() {
  for (uint32_t j = 0; j < jobs_.size(); ++j) {
    JobState &js = jobs_[j];
    js.flights.clear();
    js.backlog.clear();
    js.resetPlan();
    js.data = js.onRank ? backend_->createJob(rank_, j, js.shape) : nullptr;
  }
}

void Session::checkNoBubble(const char *call) const {
  if (!open_)
    return;
  const std::string which = openUnplanned_ ? std::string("an unplanned bubble")
                                           : "bubble " + std::to_string(openBubble_);
  invalid(std::string(call) + " inside a bubble: " + which +
          " is open; call pfrt_session_bubble_end first");
}

void Session::checkNotWorker(const char *call) const {
  if (onWorker())
    invalid(std::string(call) +
            " called from a fill task's step on the session's worker thread: it would wait for "
            "the step that calls it (a step cannot end or wait for its own session's bubble; "
            "return from the step instead)");
}

void Session::checkMainStream(void *mainStream) const {
  if (mainStream && !device_)
    invalid("main_stream must be NULL on the host backend (a cudaStream_t is for CUDA sessions)");
}

void Session::enqueue(const std::shared_ptr<DeviceCommand> &c, void *mainStream) {
  checkNotWorker(c->iterationEnd ? "pfrt_session_iteration_end" : "pfrt_session_bubble_begin");
  {
    // The framework's thread runs ahead of its stream; past maxQueued_ bubbles it waits for the
    // GPU (the edge ring must not wrap onto an edge the worker still needs).
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return commands_.size() < maxQueued_; });
  }
  if (!c->iterationEnd) {
    double now = -1;
    c->beginToken = backend_->markExternalEdge(rank_, mainStream, now);
    c->beginNowUs = now;
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    commands_.push_back(c);
  }
  cv_.notify_all();
}

void Session::sync() const {
  if (!device_)
    return;
  checkNotWorker("a call that waits for the worker (stats, tasks, checkpoints)");
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait(lock, [&] { return commands_.empty(); });
  if (workerStatus_ != PFRT_OK) {
    const pfrt_status st = workerStatus_;
    workerStatus_ = PFRT_OK;
    throw Error(st, workerError_);
  }
}

bool Session::stopped(const BubbleTask &task) {
  if (stop_)
    return true;
  DeviceCommand *c = task.command;
  if (!c)
    return false;
  if (c->endPassed)
    return true;
  const int64_t token = c->endToken.load(std::memory_order_acquire);
  if (token == kEdgeUnset)
    return false; // bubble_end not called yet
  double us = -1;
  if (token < 0)
    c->endPassed = sessionNowUs() >= c->endNowUs.load();
  else
    c->endPassed = backend_->edgeTimeUs(rank_, token, /*block=*/false, us);
  return c->endPassed;
}

void Session::begin(uint32_t bubbleId, void *mainStream, double durationUs) {
  if (open_)
    checkNoBubble(("pfrt_session_bubble_begin(" + std::to_string(bubbleId) + ")").c_str());
  checkMainStream(mainStream);
  if (!(durationUs >= 0) || std::isinf(durationUs))
    invalid("duration_us must be >= 0 and finite (0: the planned duration)");
  auto it = bubbleIndex_.find(bubbleId);
  if (it == bubbleIndex_.end()) {
    std::string ids;
    for (size_t k = 0; k < bubbles_.size() && k < 8; ++k)
      ids += (k ? ", " : "") + std::to_string(bubbles_[k].desc.bubble_id);
    if (bubbles_.size() > 8)
      ids += ", ...";
    invalid("bubble " + std::to_string(bubbleId) + " is not a bubble of rank " +
            std::to_string(rank_) + " (it has " + std::to_string(bubbles_.size()) +
            " bubbles" + (bubbles_.empty() ? "" : ": " + ids) + ")");
  }
  const uint32_t k = it->second;
  if (k < nextBubble_)
    invalid("bubble " + std::to_string(bubbleId) + " of iteration " +
            std::to_string(loopIteration_) +
            " is out of order: it was begun already or a later bubble (" +
            std::to_string(bubbles_[nextBubble_ - 1].desc.bubble_id) +
            ") was; call pfrt_session_iteration_end to start the next iteration");
  if (device_) {
    auto c = std::make_shared<DeviceCommand>();
    c->task.bubble = k;
    c->task.bubbleId = bubbleId;
    c->skipBegin = bubbles_[nextBubble_].slotBegin;
    c->skipEnd = bubbles_[k].slotBegin;
    c->durationUs =
        durationUs > 0 ? durationUs : bubbles_[k].desc.planned_duration_us * config_.timeScale;
    enqueue(c, mainStream);
    openCommand_ = c;
    openStream_ = mainStream;
    nextBubble_ = k + 1;
    open_ = true;
    openUnplanned_ = false;
    openBubble_ = bubbleId;
    ++bubblesRun_;
    return;
  }
  const double now = sessionNowUs();
  BubbleTask task;
  task.bubble = k;
  task.bubbleId = bubbleId;
  task.beginUs = now;
  task.deadlineUs = now + (durationUs > 0 ? durationUs
                                          : bubbles_[k].desc.planned_duration_us *
                                                config_.timeScale * lengthFactor(bubbleId));
  task_ = task;
  // Chunks of the bubbles skipped before this one wait for a later bubble, in plan order.
  for (uint32_t s = bubbles_[nextBubble_].slotBegin; s < bubbles_[k].slotBegin; ++s)
    if (!slotDone_[s]) {
      slotDone_[s] = true;
      deferSlot(slots_[s]);
    }
  nextBubble_ = k + 1;
  open_ = true;
  openUnplanned_ = false;
  openBubble_ = bubbleId;
  openWaited_ = false;
  openIndex_ = k;
  openBeginUs_ = now;
  ++bubblesRun_;
  startTask();
}

double Session::lengthFactor(uint32_t bubbleId) const {
  auto it = lengthRatios_.find(bubbleId);
  if (it == lengthRatios_.end() || it->second.empty())
    return 1.0;
  return *std::min_element(it->second.begin(), it->second.end());
}

void Session::beginUnplanned(double durationUs, void *mainStream) {
  if (open_)
    checkNoBubble("pfrt_session_unplanned_begin");
  checkMainStream(mainStream);
  if (!(durationUs > 0) || std::isinf(durationUs))
    invalid("an unplanned bubble needs its duration: duration_us must be > 0 and finite");
  if (device_) {
    auto c = std::make_shared<DeviceCommand>();
    c->task.unplanned = true;
    c->durationUs = durationUs;
    enqueue(c, mainStream);
    openCommand_ = c;
    openStream_ = mainStream;
    open_ = true;
    openUnplanned_ = true;
    ++unplannedRun_;
    return;
  }
  BubbleTask task;
  task.unplanned = true;
  task.beginUs = sessionNowUs();
  task.deadlineUs = task.beginUs + durationUs;
  task_ = task;
  open_ = true;
  openUnplanned_ = true;
  ++unplannedRun_;
  startTask();
}

void Session::startTask() {
  // Nothing to run (no chunk and no deferred work): no handoff to the worker.
  bool work = false;
  if (task_.unplanned) {
    for (uint32_t s = 0; s < slots_.size() && !work; ++s)
      work = !slotDone_[s];
  } else {
    for (uint32_t s = bubbles_[task_.bubble].slotBegin; s < bubbles_[task_.bubble].slotEnd; ++s)
      work = work || !slotDone_[s];
  }
  for (const JobState &js : jobs_)
    work = work || !js.backlog.empty();
  for (const TaskState &ts : tasks_)
    work = work || ts.runnable();
  if (!work)
    return;
  stop_ = false;
  {
    std::lock_guard<std::mutex> lock(m_);
    hasTask_ = true;
    taskDone_ = false;
  }
  cv_.notify_all();
}

void Session::wait() {
  checkNotWorker("pfrt_session_bubble_wait");
  if (!open_)
    invalid("pfrt_session_bubble_wait without an open bubble (call pfrt_session_bubble_begin "
            "first)");
  std::unique_lock<std::mutex> lock(m_);
  if (device_) {
    // The open bubble is the last command: when it is done the worker is idle.
    const DeviceCommand *c = openCommand_.get();
    cv_.wait(lock, [&] { return c->done; });
    lock.unlock();
    sync();
  } else {
    cv_.wait(lock, [&] { return taskDone_; });
    lock.unlock();
    openWaited_ = true;
  }
  throwTaskError();
}

void Session::throwTaskError() {
  std::string message;
  pfrt_status st = PFRT_OK;
  {
    std::lock_guard<std::mutex> lock(m_); // CUDA: the worker may be running a later bubble
    if (taskError_.empty())
      return;
    message.swap(taskError_);
    st = taskErrorStatus_;
    taskErrorStatus_ = PFRT_OK;
  }
  throw Error(st, message);
}

pfrt_session_bubble_result Session::end(uint32_t bubbleId) {
  checkNotWorker("pfrt_session_bubble_end");
  if (!open_)
    invalid("pfrt_session_bubble_end(" +
            (bubbleId == PFRT_SESSION_UNPLANNED ? std::string("PFRT_SESSION_UNPLANNED")
                                                : std::to_string(bubbleId)) +
            ") without an open bubble (call pfrt_session_bubble_begin first)");
  if (openUnplanned_ != (bubbleId == PFRT_SESSION_UNPLANNED) ||
      (!openUnplanned_ && bubbleId != openBubble_))
    invalid("pfrt_session_bubble_end(" +
            (bubbleId == PFRT_SESSION_UNPLANNED ? std::string("PFRT_SESSION_UNPLANNED")
                                                : std::to_string(bubbleId)) +
            "): the open bubble is " +
            (openUnplanned_ ? std::string("an unplanned one (end it with PFRT_SESSION_UNPLANNED)")
                            : std::to_string(openBubble_)));
  if (device_) {
    // Marks the end on the framework's stream and returns: the worker starts no chunk once the
    // GPU has passed it. The bubble's numbers are not known yet (the stats have them after a
    // call that waits for the worker); end_wait_us is 0: nothing waited.
    std::shared_ptr<DeviceCommand> c = std::move(openCommand_);
    open_ = false;
    double now = -1;
    int64_t token = -1;
    try {
      token = backend_->markExternalEdge(rank_, openStream_, now);
    } catch (...) {
      c->endNowUs.store(sessionNowUs()); // the bubble ends now, as the host would
      c->endToken.store(-1, std::memory_order_release);
      throw;
    }
    c->endNowUs.store(now);
    c->endToken.store(token, std::memory_order_release);
    {
      std::lock_guard<std::mutex> lock(m_);
      if (workerStatus_ != PFRT_OK) {
        const pfrt_status st = workerStatus_;
        workerStatus_ = PFRT_OK;
        throw Error(st, workerError_);
      }
    }
    throwTaskError();
    return pfrt_session_bubble_result{};
  }
  const double t0 = sessionNowUs();
  stop_ = true;
  if (!openUnplanned_ && !openWaited_) {
    const double planned = bubbles_[openIndex_].desc.planned_duration_us * config_.timeScale;
    if (planned > 0) {
      std::deque<double> &h = lengthRatios_[openBubble_];
      h.push_back((t0 - openBeginUs_) / planned);
      if (h.size() > kLengthHistory)
        h.pop_front();
    }
  }
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait(lock, [&] { return taskDone_; });
  const double waited = sessionNowUs() - t0;
  open_ = false;
  pfrt_session_bubble_result r = task_.result;
  r.end_wait_us = waited;
  if (workerStatus_ != PFRT_OK) {
    pfrt_status st = workerStatus_;
    workerStatus_ = PFRT_OK;
    throw Error(st, workerError_);
  }
  endWaitUs_ += r.end_wait_us;
  endWaitUsMax_ = std::max(endWaitUsMax_, r.end_wait_us);
  fillUs_ += r.fill_us;
  lock.unlock();
  throwTaskError(); // the bubble is over either way
  return r;
}

void Session::worker() {
  auto fail = [&](pfrt_status st, const std::string &msg) {
    std::lock_guard<std::mutex> lock(m_);
    if (workerStatus_ == PFRT_OK) {
      workerStatus_ = st;
      workerError_ = msg;
    }
  };
  // Runs `body`; an error becomes the worker's status, reported by the next call that waits.
  auto guarded = [&](auto &&body) {
    try {
      body();
      return true;
    } catch (const Error &e) {
      fail(e.status(), e.what());
    } catch (const std::exception &e) {
      fail(PFRT_ERROR_INTERNAL, std::string("internal error: ") + e.what());
    }
    return false;
  };
  const bool began = guarded([&] { backend_->threadBegin(ctx_); });
  {
    std::lock_guard<std::mutex> lock(m_);
    taskDone_ = true;
  }
  cv_.notify_all();
  if (!began)
    return;
  while (device_) {
    std::shared_ptr<DeviceCommand> c;
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return !commands_.empty() || quit_; });
      if (quit_)
        break;
      c = commands_.front();
    }
    if (c->iterationEnd)
      guarded([&] { advanceIteration(); });
    else
      guarded([&] { runDeviceBubble(*c); });
    {
      std::lock_guard<std::mutex> lock(m_);
      c->done = true;
      commands_.pop_front();
    }
    cv_.notify_all();
  }
  while (!device_) {
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return hasTask_ || quit_; });
      if (quit_)
        break;
      hasTask_ = false;
    }
    guarded([&] { runTask(task_); });
    {
      std::lock_guard<std::mutex> lock(m_);
      taskDone_ = true;
    }
    cv_.notify_all();
  }
  try {
    backend_->threadEnd(ctx_);
  } catch (...) {
  }
}

void Session::runDeviceBubble(DeviceCommand &c) {
  BubbleTask &task = task_; // deferSlot counts into task_
  task = c.task;
  task.command = &c;
  // Chunks of the bubbles skipped before this one wait for a later bubble, in plan order.
  for (uint32_t s = c.skipBegin; s < c.skipEnd; ++s)
    if (!slotDone_[s]) {
      slotDone_[s] = true;
      deferSlot(slots_[s]);
    }
  // The bubble begins when the GPU gets there.
  double beginUs = c.beginNowUs;
  const bool reached =
      c.beginToken < 0 || backend_->edgeTimeUs(rank_, c.beginToken, /*block=*/true, beginUs);
  if (!reached)
    beginUs = sessionNowUs() - c.durationUs; // its edge was reused: long over, nothing fits
  task.beginUs = beginUs;
  task.deadlineUs = beginUs + c.durationUs;
  struct Detach { // the command is popped after this returns
    BubbleTask &t;
    ~Detach() { t.command = nullptr; }
  } detach{task};
  runTask(task);
  std::lock_guard<std::mutex> lock(m_);
  fillUs_ += task.result.fill_us;
}

void Session::runTask(BubbleTask &task) {
  ctx_.iteration = iteration_;
  runChunks(task);
  runTasks(task);
}

void Session::runChunks(BubbleTask &task) {
  if (!task.unplanned) {
    const BubbleInfo &b = bubbles_[task.bubble];
    for (uint32_t s = b.slotBegin; s < b.slotEnd; ++s) {
      if (slotDone_[s])
        continue; // an unplanned bubble took it forward
      slotDone_[s] = true;
      if (stopped(task) && config_.fillBounded)
        deferSlot(slots_[s]); // the framework ended the bubble: the rest waits
      else
        runSlot(slots_[s], task);
    }
    return;
  }
  // Unplanned: deferred work first (every job), then this iteration's planned chunks that no
  // bubble has taken yet, pulled forward in plan order until one does not fit.
  for (uint32_t j = 0; j < jobs_.size(); ++j)
    if (!drain(jobs_[j], j, task))
      return;
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    if (slotDone_[s])
      continue;
    const Op &op = program_.devices[rank_].streams[slots_[s].stream].ops[slots_[s].op];
    JobState &js = jobs_[op.fill.job];
    WorkItem own;
    if (!ownWork(op.fill, js, own)) {
      slotDone_[s] = true;
      continue;
    }
    double predicted = -1;
    if (!fits(js, own, task, &predicted))
      return; // stays for its planned bubble
    slotDone_[s] = true;
    if (exec(js, op.fill.job, own, predicted, task, false))
      return; // stopped between passes: the bubble is over
  }
}

bool Session::ownWork(const pfrt_fill_chunk_desc &f, JobState &js, WorkItem &own) {
  switch (js.ownWork(f, iteration_, program_.jobs[f.job], js.stride, own)) {
  case FillQueue::Own::NotThisIteration:
  case FillQueue::Own::Held: // fill is two iterations behind: deferred work only
    return false;            // not a skip
  case FillQueue::Own::Skipped:
    ++js.chunksSkipped;
    return false;
  case FillQueue::Own::Ready:
    break;
  }
  return true;
}

void Session::deferSlot(const Slot &slot) {
  const Op &op = program_.devices[rank_].streams[slot.stream].ops[slot.op];
  JobState &js = jobs_[op.fill.job];
  WorkItem own;
  if (!ownWork(op.fill, js, own))
    return;
  js.backlog.push_back(own);
  ++js.chunksDeferred;
  ++task_.result.chunks_deferred;
}

bool Session::fits(JobState &js, const WorkItem &item, const BubbleTask &task,
                   double *predicted) {
  *predicted = js.predictor.predict(item.passBegin, item.passEnd, item.batch, item.plannedUs);
  admittedUs_ = sessionNowUs();
  if (!config_.fillBounded)
    return true;
  if (stopped(task))
    return false;
  return admittedUs_ + *predicted * config_.timeScale <= task.deadlineUs;
}

bool Session::drain(JobState &js, uint32_t job, BubbleTask &task) {
  while (!js.backlog.empty()) {
    const WorkItem item = js.backlog.front();
    double predicted = -1;
    // The slot's own chunk is the last item of its backlog (runSlot); everything before it, and
    // all of an unplanned bubble's backlog, is deferred work.
    const bool deferred = !(ownLast_ && js.backlog.size() == 1);
    if (!fits(js, item, task, &predicted)) {
      // Its longest head that fits runs now; the rest (or all of it) waits, first in line.
      WorkItem head;
      if (!config_.fillBounded || !config_.fillSplit || stopped(task) ||
          !js.fittingHead(item, js.shape, (task.deadlineUs - admittedUs_) / config_.timeScale,
                          &head, &predicted))
        return false;
      FillQueue::dropHead(js.backlog.front(), head);
      ++js.chunksSplit;
      if (exec(js, job, head, predicted, task, deferred))
        return false; // stopped between passes: the bubble is over
      continue;
    }
    js.backlog.pop_front();
    if (exec(js, job, item, predicted, task, deferred))
      return false;
  }
  return true;
}

void Session::runSlot(const Slot &slot, BubbleTask &task) {
  const Op &op = program_.devices[rank_].streams[slot.stream].ops[slot.op];
  const uint32_t job = op.fill.job;
  JobState &js = jobs_[job];
  WorkItem own;
  const bool hasOwn = ownWork(op.fill, js, own);
  if (!hasOwn && js.backlog.empty())
    return;
  if (hasOwn)
    js.backlog.push_back(own); // behind older deferred work: plan order is kept
  ownLast_ = hasOwn;
  drain(js, job, task);
  ownLast_ = false;
  if (hasOwn && !js.backlog.empty()) {
    ++js.chunksDeferred; // the slot's own chunk is still queued (it is the last item)
    ++task.result.chunks_deferred;
  }
}

bool Session::exec(JobState &js, uint32_t job, const WorkItem &item, double predicted,
                   BubbleTask &task, bool deferred) {
  const FillJob &fj = program_.jobs[job];
  bool begunTwice = false;
  Flight *flight = js.admit(item, &begunTwice);
  if (begunTwice)
    throw Error(PFRT_ERROR_INTERNAL, "session rank " + std::to_string(rank_) +
                                         ": fill batch at sample " +
                                         std::to_string(item.sampleBegin) + " begun twice");
  if (!flight) {
    ++js.chunksSkipped;
    return false;
  }
  // Bounded with heads of chunks: between passes, the chunk stops once bubble_end has been called
  // or its next pass no longer fits before the deadline (FillQueue::run; on CUDA the gates before
  // each pass check it on the device, DeviceGate.h).
  std::function<double()> deadlineNow;
  if (config_.fillBounded && config_.fillSplit)
    deadlineNow = [&] {
      return stopped(task) ? -std::numeric_limits<double>::infinity() : task.deadlineUs;
    };
  const FillQueue::Ran ran = js.run(ctx_, *backend_, *flight, job, js.shape, js.passes, item,
                                    config_, task.deadlineUs, predicted, /*timed=*/true,
                                    deadlineNow, task.command ? task.command->beginToken : -1);
  if (ran.deviceStop)
    ++js.chunksStoppedOnDevice;
  if (ran.passEnd == item.passBegin)
    return true; // the device ran none of it: the bubble is over (the chunk is first in line)
  const double t0 = ran.startUs, t1 = ran.endUs;
  ++js.chunksRun;
  if (ran.cut)
    ++js.chunksSplit;
  if (ran.completed) {
    js.samples += ran.batch;
    task.result.samples_completed += ran.batch;
    if (fj.kind == PFRT_FILL_TRAINING)
      ++js.steps;
  }
  const double measured = (t1 - t0) / config_.timeScale;
  ShapeStats &ss = js.shapes[std::make_tuple(item.passBegin, ran.passEnd, item.batch)];
  ++ss.runs;
  ss.plannedUs = ran.plannedUs;
  ss.predictedUsLast = predicted;
  ss.measuredUsSum += measured;
  ss.measuredUsMax = std::max(ss.measuredUsMax, measured);
  ++task.result.chunks_run;
  task.result.fill_us += t1 - t0;
  pfrt_session_chunk c{};
  c.job = job;
  c.bubble_id = task.bubbleId;
  c.iteration = static_cast<uint64_t>(iteration_);
  c.layer_begin = item.passBegin;
  c.layer_end = ran.passEnd;
  c.batch = item.batch;
  c.sample_begin = item.sampleBegin;
  c.deferred = deferred ? 1 : 0;
  c.planned_us = ran.plannedUs;
  c.predicted_us = config_.fillBounded ? predicted * config_.timeScale : -1;
  c.admitted_us = admittedUs_ - task.beginUs;
  c.start_us = t0 - task.beginUs;
  c.end_us = t1 - task.beginUs;
  c.deadline_us = task.deadlineUs - task.beginUs;
  {
    std::lock_guard<std::mutex> lock(logMutex_);
    chunkLog_.push_back(c);
    if (chunkLog_.size() > 4096)
      chunkLog_.pop_front();
  }
  if (t1 > task.deadlineUs) {
    const double over = t1 - task.deadlineUs;
    if (over > task.result.overrun_us)
      task.result.overrun_us = over;
    ++overrunCount_;
    overrunUs_ += over;
  }
  return ran.cut;
}

void Session::runTasks(BubbleTask &task) {
  const uint32_t n = static_cast<uint32_t>(tasks_.size());
  if (!n)
    return;
  const uint64_t freeBytes =
      task.unplanned ? unplannedFreeBytes_ : bubbles_[task.bubble].desc.free_bytes;
  // out[t]: task t starts no further step in this bubble.
  std::vector<char> out(n, 0);
  for (uint32_t t = 0; t < n; ++t) {
    TaskState &ts = tasks_[t];
    if (!ts.runnable()) {
      out[t] = 1;
    } else if (ts.memoryBytes > freeBytes) {
      ++ts.skippedMemory;
      out[t] = 1;
    }
  }
  uint32_t next = taskTurn_ % n;
  while (!stopped(task)) {
    uint32_t t = n;
    for (uint32_t k = 0; k < n && t == n; ++k)
      if (!out[(next + k) % n])
        t = (next + k) % n;
    if (t == n)
      return; // no task has a step that fits
    TaskState &ts = tasks_[t];
    const double predicted = ts.predictor.predict();
    const double now = sessionNowUs();
    const bool admit = config_.fillBounded ? now + predicted <= task.deadlineUs
                                           : now < task.deadlineUs;
    next = (t + 1) % n;
    if (!admit) {
      // The time left only shrinks and the prediction stays until the task runs again: it
      // waits for the next bubble.
      ++ts.skippedNoFit;
      out[t] = 1;
      continue;
    }
    runStep(ts, t, task);
    taskTurn_ = next;
    if (!ts.runnable())
      out[t] = 1;
  }
}

void Session::fillStream(void *&stream, int &gpu) const {
  stream = nullptr;
  gpu = -1;
  if (device_)
    backend_->nativeStream(const_cast<StreamCtx &>(ctx_), stream, gpu);
}

void Session::runStep(TaskState &ts, uint32_t t, BubbleTask &task) {
  uint64_t samples = 0;
  pfrt_status st = PFRT_ERROR_INTERNAL;
  std::string thrown;
  const double t0 = sessionNowUs();
  try {
    st = ts.step(ts.user, &samples);
    // CUDA: the step's GPU work (on the fill stream, pfrt_session_fill_stream) is part of the
    // step: its time is measured, and the next step is admitted, once that work is done.
    if (device_ && st == PFRT_OK)
      backend_->syncStream(ctx_);
  } catch (const std::exception &e) {
    thrown = e.what();
  } catch (abi::__forced_unwind &) {
    throw; // the step's thread is being ended (pthread_exit, e.g. by an exiting interpreter)
  } catch (...) {
    thrown = "unknown exception";
  }
  const double t1 = sessionNowUs();
  const double us = t1 - t0;
  ts.taskUs += us;
  task.result.task_us += us;
  const bool destroyed = destroyRefused_; // the step called pfrt_session_destroy (refused)
  destroyRefused_ = false;
  // A C step may report any count; a task's total stays within what a checkpoint holds.
  constexpr uint64_t kMaxSamples = static_cast<uint64_t>(pipefill::kMaxCheckpointCount);
  const uint64_t before = std::min(pipefill::satAddU(ts.baseSamples, ts.samples), kMaxSamples);
  const bool tooMany = st == PFRT_OK && thrown.empty() && samples > kMaxSamples - before;
  if (st != PFRT_OK || !thrown.empty() || destroyed || tooMany) {
    ts.failed = true;
    const bool known = st >= PFRT_ERROR_INVALID_ARGUMENT && st <= PFRT_ERROR_INTERNAL;
    ts.errorStatus = destroyed || tooMany      ? PFRT_ERROR_INVALID_ARGUMENT
                     : known && thrown.empty() ? st
                                               : PFRT_ERROR_INTERNAL;
    std::string why = destroyed ? std::string("its step called pfrt_session_destroy on its own "
                                              "session, which was refused (the session's worker "
                                              "thread cannot destroy it)")
                      : tooMany ? "its step reported " + std::to_string(samples) +
                                      " samples, which takes the task past 10^15 samples in all "
                                      "(the most a checkpoint counts; it has " +
                                      std::to_string(before) + ")"
                      : !thrown.empty() ? "its step threw a C++ exception: " + thrown
                      : known           ? std::string("its step returned ") + pfrt_status_name(st)
                                        : "its step returned an unknown status " +
                                              std::to_string(static_cast<int>(st));
    std::string message = "fill task '" + ts.name + "' (task " + std::to_string(t) +
                          ") failed at step " + std::to_string(ts.totalSteps()) + ": " + why +
                          "; the task is disabled";
    std::lock_guard<std::mutex> lock(m_);
    if (taskError_.empty()) {
      taskError_ = std::move(message);
      taskErrorStatus_ = ts.errorStatus;
    } else {
      taskError_ += "; " + message; // the status is the first failure's
    }
    return;
  }
  ++ts.steps;
  ts.samples += samples; // <= 10^15 in all (tooMany above)
  ts.predictor.add(us);
  ts.measuredMax = std::max(ts.measuredMax, us);
  ts.measuredSum += us;
  ++task.result.task_steps;
  task.result.task_samples += samples;
  if (t1 > task.deadlineUs) {
    const double over = t1 - task.deadlineUs;
    task.result.overrun_us = std::max(task.result.overrun_us, over);
    ++ts.overruns;
    ts.overrunUs += over;
  }
}

uint32_t Session::addTask(const pfrt_session_task_desc &d) {
  checkNoBubble("pfrt_session_task_add");
  sync(); // CUDA: the worker reads the tasks
  const std::string name = d.name ? d.name : "";
  if (name.empty())
    invalid("pfrt_session_task_add: the task needs a name (desc.name is NULL or empty)");
  const std::string what = "pfrt_session_task_add('" + name + "'): ";
  if (!d.step)
    invalid(what + "step is NULL");
  if (!(d.step_us > 0) || std::isinf(d.step_us))
    invalid(what + "step_us must be > 0 and finite (the estimated real us of one step), got " +
            std::to_string(d.step_us));
  for (const TaskState &ts : tasks_)
    if (ts.name == name)
      invalid(what + "a task of that name exists already (names are unique: checkpoints "
                     "match tasks by name)");
  TaskState ts;
  ts.name = name;
  ts.step = d.step;
  ts.user = d.user_data;
  ts.stepUs = d.step_us;
  ts.memoryBytes = d.memory_bytes;
  ts.maxSteps = d.max_steps;
  ts.predictor = StepPredictor(d.step_us);
  tasks_.push_back(std::move(ts));
  return static_cast<uint32_t>(tasks_.size() - 1);
}

const TaskState &Session::taskAt(uint32_t t, const char *call) const {
  if (t >= tasks_.size())
    invalid(std::string(call) + ": task " + std::to_string(t) + " does not exist (the session has " +
            std::to_string(tasks_.size()) + " tasks)");
  return tasks_[t];
}

pfrt_session_task_stats Session::taskStats(uint32_t t) const {
  const TaskState &ts = taskAt(t, "pfrt_session_task_get");
  checkNoBubble("pfrt_session_task_get");
  sync();
  pfrt_session_task_stats o{};
  o.name = ts.name.c_str();
  o.step_us = ts.stepUs;
  o.memory_bytes = ts.memoryBytes;
  o.max_steps = ts.maxSteps;
  o.steps = ts.totalSteps();
  o.samples = ts.baseSamples + ts.samples;
  o.steps_this_run = ts.steps;
  o.samples_this_run = ts.samples;
  o.measured_us_p50 = ts.predictor.quantile(0.5);
  o.measured_us_p90 = ts.predictor.quantile(0.9);
  o.measured_us_max = ts.measuredMax;
  o.measured_us_mean = ts.steps ? ts.measuredSum / static_cast<double>(ts.steps) : 0;
  o.predicted_us = ts.predictor.predict();
  o.task_us = ts.taskUs;
  o.skipped_no_fit = ts.skippedNoFit;
  o.skipped_memory = ts.skippedMemory;
  o.overruns = ts.overruns;
  o.overrun_us = ts.overrunUs;
  o.done = ts.done() ? 1 : 0;
  o.failed = ts.failed ? 1 : 0;
  o.error_status = ts.errorStatus;
  return o;
}

void Session::setTaskState(uint32_t t, const void *data, size_t size) {
  taskAt(t, "pfrt_session_task_state_set");
  checkNoBubble("pfrt_session_task_state_set");
  sync();
  if (!data && size)
    invalid("pfrt_session_task_state_set: data is NULL");
  // The state goes into the checkpoint, which is read back whole (at most 16 x 256 MiB).
  if (size > pipefill::kMaxInputBytes)
    invalid("pfrt_session_task_state_set: " + std::to_string(size) +
            " bytes of state; a task's state is at most " +
            std::to_string(pipefill::kMaxInputBytes) + " bytes (it is saved in the checkpoint)");
  tasks_[t].state.assign(static_cast<const char *>(data), size);
}

const std::string &Session::taskState(uint32_t t) const {
  taskAt(t, "pfrt_session_task_state_get");
  checkNoBubble("pfrt_session_task_state_get");
  sync();
  return tasks_[t].state;
}

void Session::iterationEnd() {
  checkNoBubble("pfrt_session_iteration_end");
  ++loopIteration_;
  nextBubble_ = 0;
  if (device_) {
    auto c = std::make_shared<DeviceCommand>();
    c->iterationEnd = true;
    enqueue(c, nullptr);
    return;
  }
  advanceIteration();
}

void Session::advanceIteration() {
  if (device_)
    backend_->resyncClock(rank_); // the worker: no edge is being resolved
  // Chunks of bubbles not begun this iteration wait for later bubbles, in plan order.
  for (uint32_t s = 0; s < slots_.size(); ++s)
    if (!slotDone_[s]) {
      slotDone_[s] = true;
      deferSlot(slots_[s]);
    }
  // What the plan scheduled on this rank in the iteration that ends.
  for (const Slot &slot : slots_) {
    const pfrt_fill_chunk_desc &f =
        program_.devices[rank_].streams[slot.stream].ops[slot.op].fill;
    JobState &js = jobs_[f.job];
    js.samplesPlanned +=
        samplesCompletedBy(f, iteration_, js.passes, js.stride, program_.jobs[f.job].samples);
  }
  slotDone_.assign(slots_.size(), false);
  ++iteration_;
}

void Session::saveCheckpoint(const std::string &path) {
  checkNoBubble("pfrt_session_checkpoint_save");
  if (path.empty())
    invalid("checkpoint path is empty");
  sync();
  std::unique_ptr<Backend::DeviceScope> scope = backend_->useDevice(rank_);
  pipefill::rt::FillCheckpoint cp;
  cp.set_program_fingerprint(programFingerprint(program_));
  cp.set_iterations_done(static_cast<uint32_t>(iteration_));
  cp.set_max_dim(config_.maxDim);
  for (uint32_t j = 0; j < jobs_.size(); ++j) {
    JobState &js = jobs_[j];
    pipefill::rt::FillJobCheckpoint *jc = cp.add_jobs();
    jc->set_name(program_.jobs[j].name);
    JobData::Accum a = js.data ? js.data->accumulators() : JobData::Accum{};
    jc->set_samples_done(js.baseSamples + js.samples);
    jc->set_steps_done(js.baseSteps + js.steps);
    jc->set_checksum(js.baseChecksum + a.checksum);
    jc->set_loss_sum(js.baseLoss + a.lossSum);
    if (!js.data)
      continue;
    pipefill::rt::FillDeviceState *ds = jc->add_devices();
    ds->set_device(rank_);
    js.save(*ds, program_.jobs[j].kind == PFRT_FILL_TRAINING);
  }
  for (const TaskState &ts : tasks_) {
    pipefill::rt::FillTaskCheckpoint *tc = cp.add_tasks();
    tc->set_name(ts.name);
    tc->set_steps_done(ts.totalSteps());
    tc->set_samples_done(ts.baseSamples + ts.samples);
    tc->set_state(ts.state);
  }
  writeCheckpointFile(path, cp, cp.program_fingerprint());
}

void Session::loadCheckpoint(const std::string &path) {
  checkNoBubble("pfrt_session_checkpoint_load");
  if (path.empty())
    invalid("checkpoint path is empty");
  sync();
  std::unique_ptr<Backend::DeviceScope> scope = backend_->useDevice(rank_);
  pipefill::rt::FillCheckpoint cp;
  std::string problem;
  switch (readCheckpointFile(path, programFingerprint(program_), cp, problem)) {
  case CheckpointStatus::Ok:
    break;
  case CheckpointStatus::Missing:
    throw Error(PFRT_ERROR_IO, "checkpoint " + path + " does not exist");
  case CheckpointStatus::Foreign:
    invalid("checkpoint " + path + " " + problem);
  case CheckpointStatus::Bad:
    throw Error(PFRT_ERROR_PARSE, "checkpoint " + path + " " + problem);
  }
  const std::string what = "checkpoint " + path + " ";
  if (cp.max_dim() != config_.maxDim)
    invalid(what + "was written with workload dimension cap " + std::to_string(cp.max_dim()) +
            " but this session uses " + std::to_string(config_.maxDim));
  if (cp.jobs_size() != static_cast<int>(jobs_.size()))
    throw Error(PFRT_ERROR_PARSE, what + "has " + std::to_string(cp.jobs_size()) +
                                      " jobs, the program " + std::to_string(jobs_.size()));
  for (uint32_t j = 0; j < jobs_.size(); ++j) {
    const pipefill::rt::FillJobCheckpoint &jc = cp.jobs(static_cast<int>(j));
    if (jc.name() != program_.jobs[j].name)
      throw Error(PFRT_ERROR_PARSE, what + "names job " + std::to_string(j) + " '" + jc.name() +
                                        "', the program '" + program_.jobs[j].name + "'");
    for (const pipefill::rt::FillDeviceState &ds : jc.devices()) {
      if (ds.device() != rank_ || !jobs_[j].onRank)
        invalid(what + "holds job '" + jc.name() + "' state of device " +
                std::to_string(ds.device()) + ": it is not a session checkpoint of rank " +
                std::to_string(rank_));
      for (const pipefill::rt::InFlightBatch &b : ds.in_flight()) {
        std::string bad = checkInFlightShape(jobs_[j].shape, b);
        if (!bad.empty())
          throw Error(PFRT_ERROR_PARSE, what + "job '" + jc.name() + "' batch at sample " +
                                            std::to_string(b.sample_begin()) + ": " + bad);
      }
      for (const pipefill::rt::DeferredChunk &dc : ds.deferred()) {
        const std::string bad = FillQueue::deferredChunkProblem(dc, jobs_[j].passes);
        if (!bad.empty())
          throw Error(PFRT_ERROR_PARSE, what + "job '" + jc.name() + "' has " + bad);
      }
      const std::string held = FillQueue::heldProblem(ds, cp.iterations_done());
      if (!held.empty())
        throw Error(PFRT_ERROR_PARSE, what + "job '" + jc.name() + "' has " + held);
    }
  }
  std::vector<const pipefill::rt::FillTaskCheckpoint *> taskCps(tasks_.size(), nullptr);
  for (const pipefill::rt::FillTaskCheckpoint &tc : cp.tasks()) {
    uint32_t t = 0;
    while (t < tasks_.size() && tasks_[t].name != tc.name())
      ++t;
    if (t == tasks_.size())
      invalid(what + "holds fill task '" + tc.name() +
              "', which this session does not have: add it (pfrt_session_task_add) before "
              "loading the checkpoint");
    if (taskCps[t])
      throw Error(PFRT_ERROR_PARSE, what + "names fill task '" + tc.name() + "' twice");
    taskCps[t] = &tc;
  }
  // Checked: replace the state.
  for (uint32_t t = 0; t < tasks_.size(); ++t) {
    TaskState &ts = tasks_[t];
    ts.baseSteps = taskCps[t] ? taskCps[t]->steps_done() : 0;
    ts.baseSamples = taskCps[t] ? taskCps[t]->samples_done() : 0;
    ts.state = taskCps[t] ? taskCps[t]->state() : std::string();
    ts.steps = ts.samples = 0;
  }
  createJobData();
  if (device_)
    backend_->begin(hostNowUs()); // frees the new jobs' pool reservations; no edge is pending
  for (uint32_t j = 0; j < jobs_.size(); ++j) {
    const pipefill::rt::FillJobCheckpoint &jc = cp.jobs(static_cast<int>(j));
    JobState &js = jobs_[j];
    js.baseSamples = jc.samples_done();
    js.baseSteps = jc.steps_done();
    js.baseChecksum = jc.checksum();
    js.baseLoss = jc.loss_sum();
    js.samples = js.steps = 0;
    for (const pipefill::rt::FillDeviceState &ds : jc.devices()) {
      const std::string bad = js.restore(ds, js.passes); // checked above: never fails here
      if (!bad.empty())
        throw Error(PFRT_ERROR_PARSE, what + "job '" + program_.jobs[j].name + "' " + bad);
    }
    // A checkpoint without this rank's state (one pipefill-run wrote with --no-fill) ran no
    // fill here: the plan has not begun, and its iterations count as held (as in pfrt_run).
    if (js.onRank && jc.devices().empty())
      js.restoreUnfilled(rank_, cp.iterations_done(), js.passes);
  }
  iteration_ = loopIteration_ = cp.iterations_done();
  nextBubble_ = 0;
  slotDone_.assign(slots_.size(), false);
}

pfrt_session_stats Session::stats() const {
  // The worker updates the counters while a bubble is open: read them between bubbles.
  checkNoBubble("pfrt_session_get_stats");
  sync(); // CUDA: the worker's numbers of the bubbles queued so far
  pfrt_session_stats s{};
  s.rank = rank_;
  s.iterations = static_cast<uint64_t>(iteration_);
  s.bubbles = bubblesRun_;
  s.unplanned_bubbles = unplannedRun_;
  for (const JobState &js : jobs_) {
    s.chunks_run += js.chunksRun;
    s.chunks_deferred += js.chunksDeferred;
    s.chunks_split += js.chunksSplit;
    s.chunks_stopped_on_device += js.chunksStoppedOnDevice;
    s.chunks_skipped += js.chunksSkipped;
    s.chunks_pending += js.backlog.size();
    s.samples_completed += js.baseSamples + js.samples;
  }
  s.fill_us = fillUs_;
  s.overrun_count = overrunCount_;
  s.overrun_us = overrunUs_;
  s.end_wait_us = endWaitUs_;
  s.end_wait_us_max = endWaitUsMax_;
  s.tasks = static_cast<uint32_t>(tasks_.size());
  for (const TaskState &ts : tasks_) {
    s.task_steps += ts.totalSteps();
    s.task_samples =
        pipefill::satAddU(s.task_samples, pipefill::satAddU(ts.baseSamples, ts.samples));
    s.task_us += ts.taskUs;
    s.task_overrun_count += ts.overruns;
    s.task_overrun_us += ts.overrunUs;
  }
  return s;
}

pfrt_report_job Session::job(uint32_t j) const {
  checkNoBubble("pfrt_session_get_job");
  sync();
  if (j >= jobs_.size())
    invalid("job " + std::to_string(j) + " does not exist (the program has " +
            std::to_string(jobs_.size()) + " fill jobs)");
  const JobState &js = jobs_[j];
  pfrt_report_job out{};
  out.name = program_.jobs[j].name.c_str();
  out.kind = program_.jobs[j].kind;
  out.samples_completed = js.baseSamples + js.samples;
  out.samples_this_run = js.samples;
  out.samples_planned = js.samplesPlanned;
  JobData::Accum a = js.data ? js.data->accumulators() : JobData::Accum{};
  out.checksum = js.baseChecksum + a.checksum;
  out.steps = js.baseSteps + js.steps;
  out.weights_checksum = js.data && out.kind == PFRT_FILL_TRAINING
                             ? tensorsChecksum(js.data->saveWeights())
                             : 0;
  out.iterations_held = static_cast<uint64_t>(js.held);
  if (js.onRank) {
    const Stream &st = program_.devices[rank_].streams[info_.jobs[j].streamOnDevice.at(rank_)];
    out.samples_held = FillQueue::heldSamples(st, j, js.passes, js.stride,
                                              program_.jobs[j].samples, js.held,
                                              js.loopEnd(iteration_));
    out.samples_in_flight_planned =
        samplesInFlightAt(st, j, iteration_, js.passes, js.stride, program_.jobs[j].samples);
  }
  return out;
}

const std::string &Session::reportJson() {
  checkNoBubble("pfrt_session_report_json");
  const pfrt_session_stats s = stats();
  JsonWriter w;
  w.beginObject();
  w.value("rank", s.rank);
  w.value("ranks", ranks());
  w.value("time_measured", true);
  w.value("time_scale", config_.timeScale);
  w.value("fill_policy", !config_.fillBounded ? "unbounded"
                         : config_.fillSplit ? "bounded"
                                             : "bounded-whole");
  w.value("iterations", s.iterations);
  w.value("bubbles", s.bubbles);
  w.value("unplanned_bubbles", s.unplanned_bubbles);
  writeChunkCounts(w, {s.chunks_run, s.chunks_deferred, s.chunks_skipped, s.chunks_pending,
                       s.chunks_split, s.chunks_stopped_on_device});
  w.value("samples_completed", s.samples_completed);
  w.value("fill_us", s.fill_us);
  w.value("overrun_count", s.overrun_count);
  w.value("overrun_us", s.overrun_us);
  w.value("end_wait_us", s.end_wait_us);
  w.value("end_wait_us_max", s.end_wait_us_max);
  w.beginArray("jobs");
  for (uint32_t j = 0; j < jobs_.size(); ++j) {
    const pfrt_report_job rj = job(j);
    const JobState &js = jobs_[j];
    w.beginObject();
    w.value("name", rj.name);
    w.value("kind", fillKindName(rj.kind));
    w.value("on_rank", js.onRank);
    w.value("samples_completed", rj.samples_completed);
    w.value("samples_this_run", rj.samples_this_run);
    w.value("samples_planned", rj.samples_planned);
    w.value("samples_in_flight_planned", rj.samples_in_flight_planned);
    w.value("checksum", rj.checksum);
    w.value("steps", rj.steps);
    writeChunkCounts(w, {js.chunksRun, js.chunksDeferred, js.chunksSkipped, js.backlog.size(),
                         js.chunksSplit, js.chunksStoppedOnDevice});
    w.value("iterations_held", rj.iterations_held);
    w.value("samples_held", rj.samples_held);
    w.beginArray("chunk_shapes");
    for (const auto &kv : js.shapes) {
      w.beginObject();
      w.value("layer_begin", std::get<0>(kv.first));
      w.value("layer_end", std::get<1>(kv.first));
      w.value("batch", std::get<2>(kv.first));
      w.value("runs", kv.second.runs);
      w.value("planned_us", kv.second.plannedUs);
      w.value("predicted_us_last", kv.second.predictedUsLast);
      w.value("measured_us_mean", kv.second.measuredUsSum / static_cast<double>(kv.second.runs));
      w.value("measured_us_max", kv.second.measuredUsMax);
      w.endObject();
    }
    w.endArray();
    w.endObject();
  }
  w.endArray();
  w.value("task_steps", s.task_steps);
  w.value("task_samples", s.task_samples);
  w.value("task_us", s.task_us);
  w.value("task_overrun_count", s.task_overrun_count);
  w.value("task_overrun_us", s.task_overrun_us);
  w.beginArray("tasks");
  for (uint32_t t = 0; t < tasks_.size(); ++t) {
    const pfrt_session_task_stats ts = taskStats(t);
    w.beginObject();
    w.value("name", ts.name);
    w.value("task", t);
    w.value("step_us", ts.step_us);
    w.value("memory_bytes", ts.memory_bytes);
    w.value("max_steps", ts.max_steps);
    w.value("steps", ts.steps);
    w.value("samples", ts.samples);
    w.value("steps_this_run", ts.steps_this_run);
    w.value("samples_this_run", ts.samples_this_run);
    w.value("measured_us_p50", ts.measured_us_p50);
    w.value("measured_us_p90", ts.measured_us_p90);
    w.value("measured_us_max", ts.measured_us_max);
    w.value("measured_us_mean", ts.measured_us_mean);
    w.value("predicted_us", ts.predicted_us);
    w.value("task_us", ts.task_us);
    w.value("skipped_no_fit", ts.skipped_no_fit);
    w.value("skipped_memory", ts.skipped_memory);
    w.value("overruns", ts.overruns);
    w.value("overrun_us", ts.overrun_us);
    w.value("done", ts.done != 0);
    w.value("failed", ts.failed != 0);
    w.endObject();
  }
  w.endArray();
  w.endObject();
  json_ = w.str();
  return json_;
}

} // namespace pfrt

// The opaque handle.
struct pfrt_session {
  std::unique_ptr<pfrt::Session> impl;
};

namespace {

using pfrt::Error;

// Live sessions: a call on a destroyed (or never created) handle is an error, not a crash.
std::mutex liveMutex;
std::set<const pfrt_session *> &live() {
  static std::set<const pfrt_session *> set;
  return set;
}

template <class F> pfrt_status guard(F &&f) {
  try {
    f();
    return PFRT_OK;
  } catch (const Error &e) {
    pfrt::setLastError(e.what());
    return e.status();
  } catch (const std::bad_alloc &) {
    pfrt::setLastError("out of memory");
    return PFRT_ERROR_INTERNAL;
  } catch (const std::exception &e) {
    pfrt::setLastError(std::string("internal error: ") + e.what());
    return PFRT_ERROR_INTERNAL;
  } catch (...) {
    pfrt::setLastError("internal error: unknown exception");
    return PFRT_ERROR_INTERNAL;
  }
}

pfrt::Session &sess(const pfrt_session *s) {
  if (!s)
    pfrt::invalid("session is NULL");
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    if (!live().count(s))
      pfrt::invalid("session is not a live session (destroyed, or not made by "
                    "pfrt_session_create)");
  }
  return *s->impl;
}

// A read call: a live session and a non-NULL `out` (named `what` in the error), set to f(session).
template <class T, class F>
pfrt_status read(const pfrt_session *session, T *out, const char *what, F &&f) {
  return guard([&] {
    const pfrt::Session &s = sess(session);
    if (!out)
      pfrt::invalid(std::string(what) + " is NULL");
    *out = f(s);
  });
}

void create(const pfrt::Program &program, uint32_t rank, const pfrt_session_options *options,
            pfrt_session **out) {
  pfrt_session_options o;
  pfrt_session_options_init(&o);
  if (options)
    o = *options;
  auto s = std::make_unique<pfrt_session>();
  s->impl = std::make_unique<pfrt::Session>(program, rank, o);
  std::lock_guard<std::mutex> lock(liveMutex);
  live().insert(s.get());
  *out = s.release();
}

struct ProgramOwner {
  pfrt_program *p = nullptr;
  ~ProgramOwner() { pfrt_program_destroy(p); }
};

} // namespace

extern "C" {

void pfrt_session_options_init(pfrt_session_options *options) {
  if (!options)
    return;
  *options = pfrt_session_options{};
  options->backend = PFRT_BACKEND_AUTO;
  options->time_scale = 1.0;
  options->fill_policy = PFRT_FILL_BOUNDED;
  options->fill_idle_priority = 1;
}

pfrt_status pfrt_session_create(const pfrt_program *program, uint32_t rank,
                                const pfrt_session_options *options, pfrt_session **out) {
  return guard([&] {
    if (!out)
      pfrt::invalid("out_session is NULL");
    *out = nullptr;
    if (!program)
      pfrt::invalid("program is NULL");
    create(program->program, rank, options, out);
  });
}

pfrt_status pfrt_session_create_file(const char *path, uint32_t rank,
                                     const pfrt_session_options *options, pfrt_session **out) {
  return guard([&] {
    if (!out)
      pfrt::invalid("out_session is NULL");
    *out = nullptr;
    if (!path || !*path)
      pfrt::invalid("program path is empty");
    ProgramOwner p;
    p.p = pfrt::loadProgram(pfrt::readFile(path), path);
    create(p.p->program, rank, options, out);
  });
}

pfrt_status pfrt_session_create_memory(const void *data, size_t size, const char *source,
                                       uint32_t rank, const pfrt_session_options *options,
                                       pfrt_session **out) {
  return guard([&] {
    if (!out)
      pfrt::invalid("out_session is NULL");
    *out = nullptr;
    if (!data && size)
      pfrt::invalid("data is NULL");
    ProgramOwner p;
    p.p = pfrt::loadProgram(std::string(static_cast<const char *>(data), size),
                            source ? source : "<memory>");
    create(p.p->program, rank, options, out);
  });
}

void pfrt_session_destroy(pfrt_session *session) {
  if (!session)
    return;
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    if (!live().count(session))
      return; // not live: destroyed twice, or never ours
    // From a fill task's step: the worker cannot join itself. Refused (the session stays live);
    // the task fails when the step returns and the next bubble_wait / bubble_end reports it.
    if (session->impl->refuseDestroyFromStep())
      return;
    live().erase(session);
  }
  delete session;
}

pfrt_status pfrt_session_rank_info(const pfrt_session *session, uint32_t *rank, uint32_t *ranks,
                                   uint32_t *ops, uint32_t *bubbles) {
  return guard([&] {
    const pfrt::Session &s = sess(session);
    if (rank)
      *rank = s.rank();
    if (ranks)
      *ranks = s.ranks();
    if (ops)
      *ops = static_cast<uint32_t>(s.ops().size());
    if (bubbles)
      *bubbles = static_cast<uint32_t>(s.bubbles().size());
  });
}

pfrt_status pfrt_session_op_get(const pfrt_session *session, uint32_t index,
                                pfrt_session_op *out) {
  return read(session, out, "out_op", [&](const pfrt::Session &s) {
    if (index >= s.ops().size())
      pfrt::invalid("op " + std::to_string(index) + " does not exist (rank " +
                    std::to_string(s.rank()) + " has " + std::to_string(s.ops().size()) +
                    " main ops)");
    return s.ops()[index];
  });
}

pfrt_status pfrt_session_bubble_get(const pfrt_session *session, uint32_t index,
                                    pfrt_session_bubble *out) {
  return read(session, out, "out_bubble", [&](const pfrt::Session &s) {
    if (index >= s.bubbles().size())
      pfrt::invalid("bubble index " + std::to_string(index) + " does not exist (rank " +
                    std::to_string(s.rank()) + " has " + std::to_string(s.bubbles().size()) +
                    " bubbles)");
    return s.bubbles()[index].desc;
  });
}

pfrt_status pfrt_session_bubble_begin(pfrt_session *session, uint32_t bubble, void *main_stream,
                                      double duration_us) {
  return guard([&] { sess(session).begin(bubble, main_stream, duration_us); });
}

pfrt_status pfrt_session_unplanned_begin(pfrt_session *session, double duration_us,
                                         void *main_stream) {
  return guard([&] { sess(session).beginUnplanned(duration_us, main_stream); });
}

pfrt_status pfrt_session_bubble_end(pfrt_session *session, uint32_t bubble,
                                    pfrt_session_bubble_result *out) {
  return guard([&] {
    pfrt_session_bubble_result r = sess(session).end(bubble);
    if (out)
      *out = r;
  });
}

pfrt_status pfrt_session_bubble_wait(pfrt_session *session) {
  return guard([&] { sess(session).wait(); });
}

pfrt_status pfrt_session_iteration_end(pfrt_session *session) {
  return guard([&] { sess(session).iterationEnd(); });
}

pfrt_status pfrt_session_checkpoint_save(pfrt_session *session, const char *path) {
  return guard([&] { sess(session).saveCheckpoint(path ? path : ""); });
}

pfrt_status pfrt_session_checkpoint_load(pfrt_session *session, const char *path) {
  return guard([&] { sess(session).loadCheckpoint(path ? path : ""); });
}

pfrt_status pfrt_session_get_stats(const pfrt_session *session, pfrt_session_stats *out) {
  return read(session, out, "out_stats", [](const pfrt::Session &s) { return s.stats(); });
}

pfrt_status pfrt_session_chunk_count(const pfrt_session *session, uint32_t *out) {
  return read(session, out, "out_count",
              [](const pfrt::Session &s) { return static_cast<uint32_t>(s.chunkCount()); });
}

pfrt_status pfrt_session_chunk_get(const pfrt_session *session, uint32_t index,
                                   pfrt_session_chunk *out) {
  return read(session, out, "out_chunk",
              [&](const pfrt::Session &s) { return s.chunkAt(index); });
}

pfrt_status pfrt_session_get_job(const pfrt_session *session, uint32_t job,
                                 pfrt_report_job *out) {
  return read(session, out, "out_job", [&](const pfrt::Session &s) { return s.job(job); });
}

pfrt_status pfrt_session_task_add(pfrt_session *session, const pfrt_session_task_desc *desc,
                                  uint32_t *out_task) {
  return guard([&] {
    pfrt::Session &s = sess(session);
    if (!desc)
      pfrt::invalid("pfrt_session_task_add: desc is NULL");
    const uint32_t t = s.addTask(*desc);
    if (out_task)
      *out_task = t;
  });
}

pfrt_status pfrt_session_fill_stream(const pfrt_session *session, void **out_stream,
                                     int *out_gpu) {
  return guard([&] {
    if (!out_stream)
      pfrt::invalid("pfrt_session_fill_stream: out_stream is NULL");
    void *stream = nullptr;
    int gpu = -1;
    sess(session).fillStream(stream, gpu);
    *out_stream = stream;
    if (out_gpu)
      *out_gpu = gpu;
  });
}

pfrt_status pfrt_session_task_count(const pfrt_session *session, uint32_t *out) {
  return read(session, out, "out_count", [](const pfrt::Session &s) { return s.taskCount(); });
}

pfrt_status pfrt_session_task_get(const pfrt_session *session, uint32_t task,
                                  pfrt_session_task_stats *out) {
  return read(session, out, "out_stats",
              [&](const pfrt::Session &s) { return s.taskStats(task); });
}

pfrt_status pfrt_session_task_state_set(pfrt_session *session, uint32_t task, const void *data,
                                        size_t size) {
  return guard([&] { sess(session).setTaskState(task, data, size); });
}

pfrt_status pfrt_session_task_state_get(const pfrt_session *session, uint32_t task,
                                        const void **out_data, size_t *out_size) {
  return guard([&] {
    const pfrt::Session &s = sess(session);
    if (!out_data || !out_size)
      pfrt::invalid("pfrt_session_task_state_get: out_data or out_size is NULL");
    const std::string &state = s.taskState(task);
    *out_data = state.data();
    *out_size = state.size();
  });
}

const char *pfrt_session_report_json(pfrt_session *session) {
  const char *out = nullptr;
  guard([&] { out = sess(session).reportJson().c_str(); });
  return out;
}

} // extern "C"
