// Sessions: one rank of a stream program, filled bubble by bubble by a framework that owns its
// training loop (pfrt_session_* in pfrt.h, docs/integration.md).
//
// The session keeps the rank's fill state the executor keeps per device (job data, batches in
// flight, the bounded backlog, the chunk predictor) and applies the same chunk rules: a planned
// chunk's samples follow the periodic plan (chunkRunsIn), a continuation runs only after the pass
// before it, deferred work runs before newer work of its job (except that a chunk no bubble can
// hold does not hold up other batches behind it: drain, docs/runtime.md §4b), and under the bubble
// bound a chunk starts only when its predicted time fits what is left of the bubble. What differs
// is who says when a bubble begins and ends: the framework, through bubble_begin / bubble_end,
// instead of the main stream's bubble op; the chunks run on one worker thread per session.
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
#include "runtime/SessionImpl.h"

#include "runtime/Backend.h"
#include "runtime/FillQueue.h"
#include "runtime/Program.h"
#include "runtime/pfrt.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace pfrt {
namespace session {

namespace {
std::atomic<double (*)()> testClock{nullptr};
std::atomic<void (*)()> testWorkerPause{nullptr};
} // namespace

double sessionNowUs() {
  double (*clock)() = testClock.load();
  return clock ? clock() : hostNowUs();
}

} // namespace session

void setSessionClockForTesting(double (*clockUs)()) { session::testClock = clockUs; }
void setSessionWorkerPauseForTesting(void (*pause)()) { session::testWorkerPause = pause; }

namespace session {

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
  queued_ = device_ || options.host_end_at_once != 0;
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
  resetRooms();

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
    if (device_) {
      backend_->warmUp();
      backend_->begin(hostNowUs()); // the edges' time base; frees the jobs' pool reservations
    }
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
  // First: on a CUDA session the worker lags the framework's thread, so a step may see no bubble
  // open and would go on to read or change the loop's state, which that thread owns.
  checkNotWorker(call);
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
    // Host: the bubble begins now (token -1: the worker takes beginNowUs).
    c->beginToken = device_ ? backend_->markExternalEdge(rank_, mainStream, now) : -1;
    c->beginNowUs = device_ ? now : sessionNowUs();
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    commands_.push_back(c);
  }
  cv_.notify_all();
}

void Session::sync() const {
  if (!queued_)
    return;
  checkNotWorker("a call that waits for the worker (stats, tasks, checkpoints)");
  {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return commands_.empty(); });
    if (workerStatus_ != PFRT_OK) {
      const pfrt_status st = workerStatus_;
      workerStatus_ = PFRT_OK;
      throw Error(st, workerError_);
    }
  }
  // A fill task that failed after its bubble's end returned (the worker runs bubbles after the
  // calls): the first call that waits for the worker reports it, once, else nothing would.
  throwTaskError();
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
  // First: a step on the worker must not read the loop's state, which the framework's thread owns.
  checkNotWorker(("pfrt_session_bubble_begin(" + std::to_string(bubbleId) + ")").c_str());
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
  if (k < nextBubble_) {
    const std::string what = "bubble " + std::to_string(bubbleId) + " of iteration " +
                             std::to_string(loopIteration_);
    invalid(k + 1 == nextBubble_
                ? what + " was begun already; call pfrt_session_iteration_end to start the next "
                         "iteration"
                : what + " is out of order: bubble " +
                      std::to_string(bubbles_[nextBubble_ - 1].desc.bubble_id) +
                      ", which comes after it in schedule order, was begun already; call "
                      "pfrt_session_iteration_end to start the next iteration");
  }
  if (queued_) {
    auto c = std::make_shared<DeviceCommand>();
    c->task.bubble = k;
    c->task.bubbleId = bubbleId;
    c->skipBegin = bubbles_[nextBubble_].slotBegin;
    c->skipEnd = bubbles_[k].slotBegin;
    // Host: a bubble begun without a duration is predicted from its past lengths, as below.
    c->durationUs = durationUs > 0 ? durationUs
                                   : bubbles_[k].desc.planned_duration_us * config_.timeScale *
                                         (device_ ? 1.0 : lengthFactor(bubbleId));
    enqueue(c, mainStream);
    openWaited_ = false;
    openIndex_ = k;
    openBeginUs_ = c->beginNowUs;
    openCommand_ = c;
    openStream_ = mainStream;
    nextBubble_ = k + 1;
    open_ = true;
    openUnplanned_ = false;
    openBubble_ = bubbleId;
    ++bubblesRun_;
    ++loopBubbles_;
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
  ++loopBubbles_;
  startTask();
}

void Session::resetRooms() {
  roomUs_[0] = roomUs_[1] = 0;
  for (const BubbleInfo &b : bubbles_)
    roomUs_[1] = std::max(roomUs_[1], b.desc.planned_duration_us * config_.timeScale);
}

double Session::lengthFactor(uint32_t bubbleId) const {
  auto it = lengthRatios_.find(bubbleId);
  double factor = 1.0;
  bool measured = false;
  if (it != lengthRatios_.end())
    for (double ratio : it->second)
      if (!std::isnan(ratio)) {
        factor = measured ? std::min(factor, ratio) : ratio;
        measured = true;
      }
  return factor;
}

void Session::beginUnplanned(double durationUs, void *mainStream) {
  checkNotWorker("pfrt_session_unplanned_begin");
  if (open_)
    checkNoBubble("pfrt_session_unplanned_begin");
  checkMainStream(mainStream);
  if (!(durationUs > 0) || std::isinf(durationUs))
    invalid("an unplanned bubble needs its duration: duration_us must be > 0 and finite");
  if (queued_) {
    auto c = std::make_shared<DeviceCommand>();
    c->task.unplanned = true;
    c->durationUs = durationUs;
    enqueue(c, mainStream);
    openCommand_ = c;
    openStream_ = mainStream;
    open_ = true;
    openUnplanned_ = true;
    ++unplannedRun_;
    ++loopBubbles_;
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
  ++loopBubbles_;
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
  if (queued_) {
    // The open bubble is the last command: when it is done the worker is idle.
    const DeviceCommand *c = openCommand_.get();
    cv_.wait(lock, [&] { return c->done; });
    lock.unlock();
    sync();
    openWaited_ = true;
  } else {
    cv_.wait(lock, [&] { return taskDone_; });
    lock.unlock();
    openWaited_ = true;
  }
  throwTaskError();
}

void Session::throwTaskError() const {
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

void Session::end(uint32_t bubbleId, pfrt_session_bubble_result &out) {
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
  if (queued_) {
    // Marks the end (CUDA: on the framework's stream; host: now) and returns: the worker starts
    // no chunk once the GPU, or the host clock, has passed it; a chunk in flight stops at its
    // next pass, after this call. The bubble's numbers are not known yet (the stats have them
    // after a call that waits for the worker); end_wait_us is 0: nothing waited.
    std::shared_ptr<DeviceCommand> c = std::move(openCommand_);
    open_ = false;
    if (!device_)
      recordLength(sessionNowUs());
    double now = -1;
    int64_t token = -1;
    try {
      if (device_)
        token = backend_->markExternalEdge(rank_, openStream_, now);
      else
        now = sessionNowUs();
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
    out = pfrt_session_bubble_result{};
    throwTaskError();
    return;
  }
  const double t0 = sessionNowUs();
  stop_ = true;
  recordLength(t0);
  std::unique_lock<std::mutex> lock(m_);
  takeBackUnstarted(lock);
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
  out = r;
  throwTaskError(); // the bubble is over either way
}

void Session::recordLength(double endUs) {
  if (openUnplanned_)
    return;
  const double planned = bubbles_[openIndex_].desc.planned_duration_us * config_.timeScale;
  if (planned > 0) {
    std::deque<double> &h = lengthRatios_[openBubble_];
    h.push_back(openWaited_ ? std::nan("") : (endUs - openBeginUs_) / planned);
    if (h.size() > kLengthHistory)
      h.pop_front();
  }
}

void Session::takeBackUnstarted(std::unique_lock<std::mutex> &lock) {
  // The worker has not taken the bubble yet: a thread at idle priority waits for a free core, and
  // a loaded machine may not give it one for a long time, so waiting for it would keep the
  // framework's thread waiting on fill after its bubble. This thread does instead what the worker
  // does with a bubble that is over: it defers the bubble's chunks. No chunk or step starts
  // (stop_ is set and the policy is bounded), so no fill runs here. Unbounded fill runs whole
  // whatever the end says: it stays the worker's.
  if (!hasTask_ || !config_.fillBounded)
    return;
  hasTask_ = false;
  lock.unlock();
  pfrt_status st = PFRT_OK;
  std::string message;
  try {
    runTask(task_);
  } catch (const Error &e) {
    st = e.status();
    message = e.what();
  } catch (const std::exception &e) {
    st = PFRT_ERROR_INTERNAL;
    message = std::string("internal error: ") + e.what();
  }
  lock.lock();
  if (st != PFRT_OK && workerStatus_ == PFRT_OK) {
    workerStatus_ = st;
    workerError_ = message;
  }
  taskDone_ = true;
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
  while (queued_) {
    std::shared_ptr<DeviceCommand> c;
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return !commands_.empty() || quit_; });
      if (void (*pause)() = testWorkerPause.load(); pause && !quit_) {
        lock.unlock();
        pause();
        lock.lock();
      }
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
  while (!queued_) {
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return hasTask_ || quit_; });
      if (void (*pause)() = testWorkerPause.load(); pause && !quit_) {
        lock.unlock();
        pause();
        lock.lock();
      }
      if (quit_)
        break;
      if (!hasTask_)
        continue; // bubble_end took it back
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
  roomUs_[0] = std::max(roomUs_[0], task.deadlineUs - sessionNowUs()); // its room, all of it
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
    // A later pass of a batch whose earlier pass is still queued (passed over by drain: it fits
    // no bubble) stays for its planned bubble, behind that pass.
    if (own.passBegin > 0 && js.backlog.holds(own.sampleBegin))
      continue;
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
  // In plan order, except that a chunk no bubble can hold as things stand (starving()) waits
  // without holding up the work of other batches behind it: `parked` are the batches passed over
  // (their later passes wait too), `i` the first item not passed over.
  std::vector<uint64_t> parked;
  size_t i = 0;
  while ((i = js.backlog.firstNotParked(i, parked)) < js.backlog.size()) {
    const WorkItem item = js.backlog.at(i);
    double predicted = -1;
    // The slot's own chunk is the last item of its backlog while ownQueued_ (runSlot); everything
    // before it, and all of an unplanned bubble's backlog, is deferred work.
    const bool own = ownQueued_ && i + 1 == js.backlog.size();
    if (!fits(js, item, task, &predicted)) {
      // Its longest head that fits (or an inference chunk's first samples that fit) runs now;
      // the rest, or all of it, waits first in line.
      WorkItem head;
      const double roomUs = (task.deadlineUs - admittedUs_) / config_.timeScale;
      if (!config_.fillBounded || stopped(task))
        return false;
      if (js.splitToFit(i, js.shape, roomUs, config_.fillSplit, &head, &predicted) ==
          FillQueue::Split::None) {
        if (!starving(predicted))
          return false; // a bubble can hold it: it waits first in line
        parked.push_back(item.sampleBegin);
        ++i;
        continue;
      }
      ++js.chunksSplit;
      if (exec(js, job, head, predicted, task, !own))
        return false; // stopped between passes: the bubble is over
      continue;
    }
    js.backlog.erase(i);
    if (exec(js, job, item, predicted, task, !own))
      return false; // its rest is queued (first in line): the own chunk, if it was, still waits
    if (own)
      ownQueued_ = false;
  }
  return true;
}

bool Session::starving(double predictedUs) const {
  return predictedUs * config_.timeScale > std::max(roomUs_[0], roomUs_[1]);
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
  ownQueued_ = hasOwn;
  drain(js, job, task);
  const bool ownWaits = ownQueued_;
  ownQueued_ = false;
  if (ownWaits) {
    ++js.chunksDeferred; // the slot's own chunk (or what is left of it) is still queued
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

} // namespace session
} // namespace pfrt
