// The executor: runs a validated program on one or two backends (CUDA replay mode runs one device
// on the GPU and emulates the others on the host backend). Owns the stream threads, event
// generations, send/recv channels, fill-job bookkeeping and checkpoints; produces the raw timeline
// that Report.cpp turns into the run report.
#ifndef PFRT_EXECUTOR_H
#define PFRT_EXECUTOR_H

#include "runtime/Backend.h"
#include "runtime/FillQueue.h"
#include "runtime/Transport.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace pipefill::rt {
class FillCheckpoint;
}

namespace pfrt {

// Where a bubble that follows another one with no main compute between them begins (an
// iteration's tail bubble and the next iteration's warm-up bubble): nothing runs on the device
// between their markers, so the boundary is where the plan puts it, the previous bubble's begin
// plus its planned length, but not before the bubble's own marker, nor after main resumed
// (resumeAt; negative: not yet). The executor's bound and the report both use this rule.
inline double chainedBubbleBegin(double marker, double prevBegin, double prevPlanned,
                                 double resumeAt) {
  const double b = std::max(marker, prevBegin + prevPlanned);
  return resumeAt >= 0 ? std::min(b, resumeAt) : b;
}

// Raw results of a run.
struct RunResult {
  std::string backend;          // "host", "cuda", "cuda-replay"
  // Rank mode on CUDA: "nccl" (sends to other ranks move their bytes) or "modelled" (they take
  // the planned time); empty otherwise.
  std::string rankTransfer;
  // Rank mode: the run's identity (rank 0's random number, received by every rank); 0 otherwise.
  uint64_t runId = 0;
  bool measuredTime = false;    // CUDA: device-measured times
  double timeScale = 1.0;       // real us per modelled us (1 for CUDA)
  int32_t replayDevice = -1;    // device that ran on the GPU in replay mode
  bool fillEnabled = true;
  bool profile = false;
  uint32_t maxDim = 0;
  std::vector<std::string> deviceBackend; // per device: "host", "cuda", "emulated"
  std::vector<bool> deviceFill;           // per device: fill chunks run there
  std::vector<bool> local; // per device: ran in this process (false: another rank's device)
  // per device and stream: the priority the backend applied (CUDA), or INT32_MIN
  std::vector<std::vector<int32_t>> streamPriority;
  int64_t firstIteration = 0;
  uint32_t iterations = 0;      // run by this call
  double runStartUs = 0;        // host clock at the start (slots are absolute host us)
  // slots[device][stream][k * ops + i] for k in [0, iterations)
  std::vector<std::vector<std::vector<TimeSlot>>> slots;
  // per device: minimum free bytes, and whether it is known
  std::vector<uint64_t> minFreeBytes;
  std::vector<bool> minFreeKnown;
  std::vector<bool> minFreeMeasured;

  struct Job {
    std::string name;
    pfrt_fill_kind kind = PFRT_FILL_INFERENCE;
    JobShape shape;
    uint64_t samplesCompleted = 0, samplesThisRun = 0, samplesPlanned = 0;
    // The plan's own batches in flight at the run's last iteration (begun by then, completed
    // later), on the devices planned: completed + pending + held = planned + this, from the start.
    uint64_t samplesInFlightPlanned = 0;
    uint64_t steps = 0;
    double checksum = 0, lossSum = 0, weightsChecksum = 0;
    uint64_t chunksRun = 0, chunksSkipped = 0;
    // Bubble bound: chunks deferred at least once to a later bubble; still waiting at the end
    // (in the checkpoint); samples of batches begun or queued but not finished at the end.
    uint64_t chunksDeferred = 0, chunksPending = 0, samplesPending = 0;
    // Chunks that did not fit and ran a head (their first passes) instead, the rest deferred.
    uint64_t chunksSplit = 0;
    // Chunks the device stopped (CUDA, DeviceGate.h): at a later pass (also counted in
    // chunksRun) or before their first (not run: deferred, first in line).
    uint64_t chunksStoppedOnDevice = 0;
    // Backpressure (FillQueue::planIteration): loop iterations in which the job began nothing
    // new because two iterations of its work were deferred (summed over devices, since the job
    // began), and the samples the plan completes in those iterations: planned, not yet begun.
    uint64_t iterationsHeld = 0, samplesHeld = 0;
  };
  std::vector<Job> jobs;
  bool resumed = false;
  // Stopped early on a stop request: `iterations` < iterationsRequested.
  bool stopped = false;
  uint32_t iterationsRequested = 0;
  std::string checkpointPath;
  double hostLagUs = 0; // real us the host threads lagged behind the modelled clock at worst
  // Host replay: emulated computes lasted planned x this (the real stage's measured/planned
  // ratio); 0: emulated devices kept their planned times.
  double emulatedSpeedRatio = 0;
  bool fillBounded = true;
  bool fillSplit = true;     // the bound runs heads of chunks (PFRT_FILL_BOUNDED)
  bool boundedOnHost = true; // false: the device enforces the bound (CUDA)
  bool boundedOnDevice = false; // CUDA: chunks also ran behind device-side gates (DeviceGate.h)

  // One fill work item (a planned chunk, possibly run in a later bubble than planned).
  struct ChunkRun {
    uint32_t device = 0, job = 0, stream = 0, op = 0; // the FillChunkOp slot it ran in
    uint32_t bubbleId = 0;
    int64_t iteration = 0;          // absolute loop index it ran in
    uint32_t passBegin = 0, passEnd = 0, batch = 0;
    double plannedUs = 0;           // the plan's time for the chunk
    double predictedUs = -1;        // planned us the bound used (-1: unbounded)
    double start = -1, end = -1;    // host clock (real us); -1 when the device timed it
    bool deferred = false;          // planned for an earlier bubble
    double cpuUs = -1;              // CPU time its thread spent in it (host), -1 when unknown
  };
  std::vector<ChunkRun> chunkRuns; // host-timed executions, in completion order per stream
};

class Executor {
public:
  Executor(const Program &program, const ProgramInfo &info, const RunConfig &config);
  ~Executor();
  // Runs the program; throws Error on failure.
  RunResult run();

  // Used by backends.
  // Blocks until the waits of generation gen - ring of `event` are all enqueued (lets a backend
  // reuse a ring of ring device events per event safely).
  void waitForEventConsumers(uint32_t device, uint32_t event, int64_t gen, int64_t ring);
  // The same for a send/recv channel: blocks until the receives of generations < gen - ring + 1
  // have been enqueued (their backend.recv returned), so ring slot gen % ring can be reused.
  void waitForChannelConsumers(uint32_t src, uint32_t dst, uint32_t tag, int64_t gen,
                               int64_t ring);
  const RunConfig &config() const { return config_; }
  bool aborted() const { return abort_.load(); }

private:
  struct EventState;
  struct JobRun;
  struct BubbleClock;
  class ChannelPublisher;

  void chooseBackends();
  // Steps of run().
  void checkRankOptions(uint32_t numDevices) const;
  bool prepareBackends(uint32_t numDevices);
  void setupBubbleClocks(uint32_t numDevices);
  void setupRunState(uint32_t numDevices);
  // Streams with fill work on the devices that run fill in this process (they take part in the
  // checkpoint barrier).
  uint32_t fillStreams() const;
  void runThreads(uint32_t numDevices);
  // Rank mode: every rank runs the same program with the same run options, or all fail at once.
  void checkRanksAgree();
  void collectResults(uint32_t numDevices);
  void setupJobs();
  // The planned duration of the longest bubble that holds a chunk of `job` on stream `stream` of
  // device d.
  double longestPlannedBubbleUs(uint32_t d, uint32_t stream, uint32_t job) const;
  void loadCheckpoint();
  // Rank mode: every rank resumes at the same iteration (each has its own checkpoint file and
  // keeps its last kCheckpointHistory ones).
  void agreeOnCheckpointIteration();
  // Why `file` (CHECKPOINT.itN) cannot be restored as iteration `iteration` ("" if it can; then
  // its contents in `out`, when given).
  std::string historyCheckpoint(const std::string &file, int64_t iteration,
                                pipefill::rt::FillCheckpoint *out = nullptr) const;
  static constexpr uint32_t kCheckpointHistory = 32;
  // Rank mode: iterations between a stop vote and its reading (agreedStopBefore). A rank waits for
  // a vote only when a peer is that many iterations behind it.
  static constexpr int64_t kStopVoteLag = 2;
  // Why a checkpoint read intact cannot be restored into this run (shapes, counts); empty if fine.
  std::string checkpointContentProblem(const pipefill::rt::FillCheckpoint &cp) const;
  void restoreCheckpoint(const pipefill::rt::FillCheckpoint &cp);
  void writeCheckpoint(int64_t iterationsDone);
  void planSamples();
  void streamThread(uint32_t device, uint32_t stream);
  void execRecv(StreamCtx &ctx, Backend &backend, const Op &op, uint32_t index, TimeSlot &slot);
  void execRecord(StreamCtx &ctx, Backend &backend, const Op &op, TimeSlot &slot);
  void execWait(StreamCtx &ctx, Backend &backend, const Op &op, TimeSlot &slot);
  void runFill(StreamCtx &ctx, const Op &op, Backend &backend, TimeSlot &slot);
  // Runs one work item: Skipped when it cannot run (its batch's state is gone), Cut when it
  // stopped between passes because its bubble ended, or the device skipped it (the rest, or all
  // of it, is first in line again). bubbleToken: its bubble's begin edge (FillExec).
  enum class ItemRan { Skipped, Ran, Cut };
  ItemRan execItem(StreamCtx &ctx, Backend &backend, JobRun &jr, FillQueue &dj, uint32_t job,
                   const WorkItem &item, double deadlineUs, double predictedUs, bool deferred,
                   const pfrt_fill_chunk_desc &slotChunk, int64_t bubbleToken);
  // Main stream side of the bubble clock.
  void bubbleBegins(StreamCtx &ctx, Backend &backend, uint32_t bubbleId);
  void mainResumes(StreamCtx &ctx, Backend &backend);
  // Fill side: waits until the bubble has begun (on the device's stream, not only on the host);
  // returns its predicted end (host clock): begin + planned duration, or the time the main stream
  // resumed if it already has. *beginToken (when given): its begin edge's token
  // (Backend::markEdge; -1 when resolved on the host).
  double bubbleDeadline(Backend &backend, uint32_t device, uint32_t bubbleId, int64_t iteration,
                        int64_t *beginToken = nullptr);
  // result_.boundedOnDevice: bounded, and every backend that ran fill checked it on the device.
  void noteDeviceBound();
  void checkpointBarrier(StreamCtx &ctx, Backend &backend);
  // Clean stop: true when stream s of device d must not begin `iteration` (a stop was requested
  // and some stream has not begun it; every stream then finishes the iterations before stopAt_).
  // Ranks stop at one iteration they agree on (agreedStopBefore).
  bool stopBefore(uint32_t d, uint32_t s, int64_t iteration);
  // Rank mode: this rank's main stream posts a vote (this process's stop request) at the start of
  // each iteration k and reads the vote of k - kStopVoteLag, whose result every rank reads alike:
  // the first round any rank voted to stop in, plus the lag, is every rank's stopAt_. The other
  // streams wait until the main stream has decided their iteration.
  bool agreedStopBefore(uint32_t d, uint32_t s, int64_t iteration);
  // Progress callback after each iteration of the last device's main stream.
  void iterationDone(uint32_t device, uint32_t stream, int64_t iteration);
  void fail(const Error &error);
  void memoryAdd(uint32_t device, int64_t bytes);
  // This process runs device d (every device unless one process runs per rank).
  bool isLocal(uint32_t d) const { return config_.rank < 0 || d == static_cast<uint32_t>(config_.rank); }

  const Program &program_;
  const ProgramInfo &info_;
  RunConfig config_;
  RunResult result_;

  std::unique_ptr<Backend> host_, cuda_;
  std::vector<Backend *> backendOf_;
  std::vector<bool> fillOn_;

  std::vector<std::vector<std::unique_ptr<EventState>>> events_;
  std::unique_ptr<Transport> ownTransport_; // in-process, when the config brings none
  Transport *transport_ = nullptr;
  std::vector<std::unique_ptr<JobRun>> jobs_;
  // Per job: the checkpointed state (serialized pipefill.rt.FillDeviceState) of devices that do not
  // run fill in this run (--no-fill, another --stage), written back unchanged with every checkpoint
  // so a later run on them continues their batches; and what of it is pending.
  struct Carried {
    std::vector<std::string> states;
    uint64_t samplesPending = 0, chunksPending = 0;
    // Per state: its device and the iterations it had held. A device that runs no fill begins
    // no work of its plan, so each iteration of this run is one more held iteration: its plan
    // resumes where it stopped, with the continuation of a kept batch first.
    std::vector<std::pair<uint32_t, int64_t>> held;
  };
  std::vector<Carried> carried_;
  std::vector<std::map<uint32_t, uint64_t>> bufferBytes_; // per device: buffer id -> bytes
  std::vector<std::unique_ptr<BubbleClock>> bubbleClocks_; // per device
  std::mutex chunkRunsMutex_;

  int64_t first_ = 0, end_ = 0;

  // memory model
  std::unique_ptr<std::atomic<int64_t>[]> used_, peak_;

  // checkpoint barrier
  std::mutex cpMutex_;
  std::condition_variable cpCv_;
  uint32_t cpParticipants_ = 0, cpArrived_ = 0;
  int64_t cpGeneration_ = 0;

  // clean stop (stopBefore); rank mode: decided_, the last iteration the main stream decided
  std::mutex stopMutex_;
  std::condition_variable stopCv_;
  int64_t maxBegun_ = -1, stopAt_ = INT64_MAX, decided_ = INT64_MIN;

  std::atomic<bool> abort_{false};
  std::mutex errorMutex_;
  bool hasError_ = false;
  pfrt_status errorStatus_ = PFRT_OK;
  std::string errorMessage_;
  std::mutex logMutex_;
};

} // namespace pfrt

#endif // PFRT_EXECUTOR_H
