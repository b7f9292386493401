// The Session class behind pfrt_session_* (pfrt.h, docs/integration.md) and the state its parts
// share: Session.cpp (construction, bubbles, the worker and the plan's chunks), SessionTasks.cpp
// (fill tasks), SessionState.cpp (iteration ends, checkpoints, stats and the report) and
// SessionApi.cpp (the C entry points). Internal to the runtime; the design is in Session.cpp.
#ifndef PFRT_SESSION_IMPL_H
#define PFRT_SESSION_IMPL_H

#include "runtime/SessionTasks.h"

#include "runtime/Backend.h"
#include "runtime/FillQueue.h"
#include "runtime/Program.h"
#include "runtime/pfrt.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace pfrt {
namespace session {

// The clock of bubble deadlines, bound decisions and task step times (setSessionClockForTesting).
double sessionNowUs();

inline constexpr uint32_t kHostDefaultMaxDim = 128; // as pfrt_run's host backend

[[noreturn]] inline void invalid(const std::string &message) {
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

inline constexpr int64_t kEdgeUnset = -2;

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
  // Writes the bubble's result to `out` before it reports a fill task's failure (the bubble is
  // over either way, and its numbers are known).
  void end(uint32_t bubbleId, pfrt_session_bubble_result &out);
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
  // A chunk predicted at `predictedUs` (planned us) that no bubble of the rank can hold as things
  // stand: longer than the room of every bubble run in this iteration and the last one (before a
  // whole iteration has run: the plan's longest bubble). In drain it waits without holding up the
  // rest.
  bool starving(double predictedUs) const;
  // The rooms before any iteration has run (construction, checkpoint load).
  void resetRooms();
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
  // Checkpoints are taken and loaded between iterations (a load restarts the iteration).
  void checkIterationStart(const char *call) const;
  // Host, bubble_end: the open planned bubble's length, for lengthFactor.
  void recordLength(double endUs);
  // Host, bubble_end: runs a bubble the worker has not taken yet on this thread (lock held on
  // entry and return).
  void takeBackUnstarted(std::unique_lock<std::mutex> &lock);
  // A task's failure, reported (and cleared) by the next bubble_wait / bubble_end.
  void throwTaskError() const;

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
  mutable std::string taskError_; // worker: a failed step's message (read after taskDone_)
  mutable pfrt_status taskErrorStatus_ = PFRT_OK;

  // CUDA: bubbles are edges on the framework's stream, run by the worker from a queue. Host with
  // host_end_at_once: the same queue, with edges on the host clock (queued_).
  bool device_ = false;
  bool queued_ = false;
  size_t maxQueued_ = 0;
  std::deque<std::shared_ptr<DeviceCommand>> commands_; // guarded by m_
  std::shared_ptr<DeviceCommand> openCommand_;          // caller's thread: the open bubble's
  void *openStream_ = nullptr;                          // and its main_stream

  // Loop position. iteration_ is the worker's (CUDA: it lags behind the framework); loopIteration_
  // the caller's.
  int64_t iteration_ = 0;
  int64_t loopIteration_ = 0;
  uint32_t nextBubble_ = 0;     // bubbles below this index are over in this iteration
  uint32_t loopBubbles_ = 0;    // caller: bubbles (planned or not) begun in this iteration
  std::vector<bool> slotDone_;  // per slot, this iteration
  bool open_ = false;
  bool openUnplanned_ = false;
  uint32_t openBubble_ = 0;
  bool openWaited_ = false; // bubble_wait was called: the bubble's length is the fill's, not known
  uint32_t openIndex_ = 0;   // host: the open planned bubble's index into bubbles_
  double openBeginUs_ = 0;   // host: when it began

  // Host: each planned bubble's measured / planned length (begin -> end call) in its last
  // kLengthHistory iterations; NaN for one the framework handed to fill whole (bubble_wait: the
  // fill set its length), which measures nothing but ages the others out, so one short bubble
  // does not hold a waited bubble's prediction down for good. A bubble begun without a duration
  // is predicted to last its plan x the smallest of them (1 before any), as the executor's bound
  // does (docs/runtime.md §4b).
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
  // Worker: the slot's own chunk (or what is left of it) is queued; while drain runs it is the
  // backlog's last item.
  bool ownQueued_ = false;
  // Worker: the largest room (real us from when the worker took the bubble to its deadline) of
  // the bubbles run in this iteration [0] and in the last one [1] (resetRooms: the plan's longest
  // bubble before one has run), for starving().
  double roomUs_[2] = {0, 0};
  std::string json_;
};

} // namespace session
} // namespace pfrt

#endif // PFRT_SESSION_IMPL_H
