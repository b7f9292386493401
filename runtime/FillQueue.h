// A fill job's work on one device: its batches in flight, the work the bubble bound deferred and
// the chunk predictor, with the chunk rules that both the executor (pfrt_run, one queue per device
// and job) and sessions (pfrt_session_*, one per job of the rank) apply:
// - a planned chunk runs the samples the periodic plan gives it in this iteration (ownWork);
// - a continuation runs only on a batch in flight (or queued) and only after the pass before it;
// - deferred work runs before newer work of the job (callers push to the back of `backlog`), except
//   that a chunk no bubble can hold is passed over (Session::drain, Executor::runFill), and an
//   inference chunk with no head that fits runs its first samples that do (fittingBatch);
// - a run times the chunk on the backend's stream clock and teaches the predictor.
#ifndef PFRT_FILL_QUEUE_H
#define PFRT_FILL_QUEUE_H

#include "runtime/Backend.h"
#include "runtime/FillPredictor.h"
#include "runtime/Program.h"
#include "runtime/Workload.h"
#include "proto/stream_program.pb.h"

#include <climits>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

namespace pfrt {

// One planned chunk's work: passes [passBegin, passEnd) of the batch at sampleBegin.
struct WorkItem {
  uint64_t sampleBegin = 0;
  uint32_t batch = 0, passBegin = 0, passEnd = 0;
  double plannedUs = 0;
  bool weightsStreamed = false, activationsHost = false;
  uint64_t peakBytes = 0;
};

// The work the bubble bound deferred, in plan order. Fill that keeps falling behind its plan (a
// plan made for a faster machine) makes it long, so it counts the items of each batch: whether a
// batch is queued (FillQueue::ownWork, for every continuation chunk) costs O(1), not a scan.
class Backlog {
public:
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  const WorkItem &front() const { return items_.front(); }
  // The front item, to change its passes or planned time (FillQueue::dropHead, pushRest); its
  // batch (sampleBegin) must stay.
  WorkItem &front() { return items_.front(); }
  // Item i (0: the front), to change its passes or planned time (FillQueue::dropHead); its
  // batch must stay.
  WorkItem &at(size_t i) { return items_.at(i); }
  void push_back(const WorkItem &w);
  void push_front(const WorkItem &w);
  void pop_front();
  // Removes item i (an item runs behind one that no bubble can hold: Session::drain,
  // Executor::runFill).
  void erase(size_t i);
  // Makes item i `w`, which may be of another batch (the rest of a chunk whose first samples run
  // now: FillQueue::fittingBatch).
  void replace(size_t i, const WorkItem &w);
  // The first item from `i` on whose batch is not in `parked` (size() when none): the batches of
  // chunks that no bubble can hold, passed over with their later passes (docs/runtime.md §4b).
  size_t firstNotParked(size_t i, const std::vector<uint64_t> &parked) const;
  void clear();
  // Some queued item belongs to the batch beginning at `sampleBegin`.
  bool holds(uint64_t sampleBegin) const { return batches_.count(sampleBegin) != 0; }
  std::deque<WorkItem>::const_iterator begin() const { return items_.begin(); }
  std::deque<WorkItem>::const_iterator end() const { return items_.end(); }

private:
  std::deque<WorkItem> items_;
  std::unordered_map<uint64_t, uint32_t> batches_; // sampleBegin -> items queued
};

// A batch between its chunks.
struct Flight {
  uint32_t next = 0; // the next pass to run
  uint32_t batch = 0;
  std::unique_ptr<BatchData> data;
};

// The samples chunk `f` completes in plan iteration `planIt` (it runs the job's last pass): its
// batch, cut at the job's `total` samples (0: unbounded); 0 when it completes nothing then.
uint64_t samplesCompletedBy(const pfrt_fill_chunk_desc &f, int64_t planIt, uint32_t passes,
                            uint64_t stride, uint64_t total);

// The samples of the batches chunk `f` runs in plan iterations [from, to), whatever passes it runs:
// each run's batch cut at the job's `total` samples (0: unbounded); runs of logical iterations < 0
// or past `total` count nothing. In closed form (O(1) but for batches cut at `total`), so a plan's
// counts over a long window cost nothing.
uint64_t batchSamplesIn(const pfrt_fill_chunk_desc &f, int64_t from, int64_t to, uint64_t stride,
                        uint64_t total);

// The samples of the batches the plan on a stream has begun (first pass run) in plan iterations
// [0, end) and completes (last pass) at `end` or later: the plan's own batches in flight at `end`.
uint64_t samplesInFlightAt(const Stream &st, uint32_t job, int64_t end, uint32_t passes,
                           uint64_t stride, uint64_t total);

struct FillQueue {
  std::unique_ptr<JobData> data;
  std::map<uint64_t, Flight> flights; // by absolute sample begin
  Backlog backlog;                    // deferred by the bubble bound, in plan order
  ChunkPredictor predictor;

  // Backpressure. Fill that keeps falling behind its plan (bubbles shorter, chunks slower than
  // planned) would grow the backlog, the batches in flight and every checkpoint without bound.
  // So a loop iteration that finds `holdAt` items or more deferred begins no work of the plan:
  // the queue's plan iteration stays where it is while the backlog drains in the job's bubbles,
  // and resumes with the next iteration that finds less. Each held iteration moves the rest of
  // the job's plan on this device one iteration later: its samples are begun later, none skipped,
  // none twice. `holdAt` is two iterations of the job's planned chunks on this device
  // (holdThreshold()); 0 never holds. `held` counts the iterations held since the job began
  // (checkpointed).
  size_t holdAt = 0;
  int64_t held = 0;
  // The job's plan iteration in loop iteration `iteration`; false when the queue holds it. The
  // first call in each loop iteration decides (loop iterations only increase).
  bool planIteration(int64_t iteration, int64_t *planIt);
  // A fresh plan: no iteration held or decided (a new run, a checkpoint restore).
  void resetPlan() {
    held = 0;
    decidedFor_ = INT64_MIN;
    holding_ = false;
  }
  // Two iterations of the chunks of job `job` that stream `st` plans (at least 2).
  static size_t holdThreshold(const Stream &st, uint32_t job);
  // The samples the plan completes in `held` iterations held by loop iteration `loopEnd`
  // (exclusive): plan iterations [loopEnd - held, loopEnd) of the job's chunks on `st`.
  static uint64_t heldSamples(const Stream &st, uint32_t job, uint32_t passes, uint64_t stride,
                              uint64_t total, int64_t held, int64_t loopEnd);
  // The loop iteration after the last one planIteration decided; `otherwise` when none was.
  int64_t loopEnd(int64_t otherwise) const {
    return decidedFor_ == INT64_MIN ? otherwise : decidedFor_ + 1;
  }

  enum class Own {
    NotThisIteration, // not this iteration's part of a periodic plan (not a skip)
    Skipped,          // nothing to run: past the job's samples, or a continuation without its batch
    Held,             // the queue holds this iteration (planIteration): deferred work still runs
    Ready             // `own` holds the chunk's work
  };
  // The work of planned chunk `f` in loop iteration `iteration`. While the queue holds the
  // iteration (planIteration), a chunk of the plan iteration last begun is Held.
  Own ownWork(const pfrt_fill_chunk_desc &f, int64_t iteration, const FillJob &job,
              uint64_t stride, WorkItem &own);

  // Where `item` runs: its batch's flight, created for a first pass. Null when it cannot run (a
  // continuation whose batch is not at its first pass: skipped). *begunTwice is set (and null
  // returned) when a first pass finds its batch already in flight, which the plan never does.
  Flight *admit(const WorkItem &item, bool *begunTwice);

  // The bubble bound's split of a chunk that does not fit what is left of its bubble (FreeRide's
  // steps, at pass granularity): the longest head of `item`, passes [item.passBegin, m) with
  // m < item.passEnd, whose predicted time fits `roomUs` (planned us). The head's planned time is
  // the chunk's in proportion to its passes' planned costs (by pass count where those are 0).
  // False when not even the first pass fits. After the head ran, dropHead leaves the rest of the
  // chunk in `item`: a continuation of the same batch, first in line.
  bool fittingHead(const WorkItem &item, const JobShape &shape, double roomUs, WorkItem *head,
                   double *predictedUs) const;
  static void dropHead(WorkItem &item, const WorkItem &head);
  // The bubble bound's split of an inference chunk by samples, when no head of it fits: the
  // largest of item.batch / 2, / 4, ... (at least 1) whose chunk, the first samples of `item`
  // with its passes, planned at item.plannedUs in proportion to its samples, is predicted to fit
  // `roomUs` (planned us). Only for a chunk that begins and completes its batch (passes
  // [0, shape.passes)) whose batch is not in flight: the samples not run are a batch of their
  // own, with nothing else of the plan to continue it. Never for training, whose batch is an
  // optimizer step. False when none fits. batchRest gives what stays queued.
  bool fittingBatch(const WorkItem &item, const JobShape &shape, double roomUs, WorkItem *part,
                    double *predictedUs) const;
  // The samples of `item` after `part` (fittingBatch), with the rest of its planned time.
  static WorkItem batchRest(const WorkItem &item, const WorkItem &part);
  // Backlog item i, which does not fit what is left of its bubble (`roomUs`, planned us): with
  // `split`, its longest head that fits (fittingHead; the rest stays at i, as dropHead leaves
  // it), else, the chunk counted as refused by the predictor, an inference chunk's first samples
  // that fit (fittingBatch; the rest replaces it at i). *part and *predictedUs: what runs now.
  // None: nothing of it fits (refused; *predictedUs unchanged, the whole chunk's prediction).
  // pfrt_run's executor and sessions admit alike through it.
  enum class Split { Head, Samples, None };
  Split splitToFit(size_t i, const JobShape &shape, double roomUs, bool split, WorkItem *part,
                   double *predictedUs);
  // The planned time of each head of `item`, passes [item.passBegin, item.passBegin + k) for
  // k = 0 .. its pass count: its planned time in proportion to the passes' planned costs (by
  // pass count where those are 0).
  static std::vector<double> plannedHeadsUs(const WorkItem &item, const JobShape &shape);

  struct Ran {
    bool completed = false; // the batch finished (its flight is gone)
    bool cut = false;       // stopped before item.passEnd (the rest is first in line again)
    uint32_t batch = 0;
    uint32_t passEnd = 0;   // the pass after the last one run
    double plannedUs = 0;   // the planned time of the passes that ran
    double startUs = -1, endUs = -1; // the backend's stream clock when `timed`, else -1
    double cpuUs = -1; // CPU time the calling thread spent in it (when timed on a host backend)
    // The device skipped its passes from passEnd on (Backend::lastDeviceStop: a GateOutcome);
    // 0 when it did not. With passEnd == item.passBegin nothing ran (and a batch the chunk
    // would have begun is not in flight).
    uint32_t deviceStop = 0;
  };
  // Runs `item` on its admitted flight. `timed`: read the stream clock around it and add the
  // measured time (in planned us) to the predictor. `deadlineNow` (the bubble's deadline as the
  // clock now knows it, e.g. earlier once main has resumed; empty: none): before each pass
  // after the first, the chunk stops if that pass's share of the prediction no longer fits
  // before it, and the passes not run go back to the front of `backlog` (merged with the rest
  // of the chunk when `item` was a head of it), as a head's rest does. `bubbleToken`: the begin
  // edge of the chunk's bubble (Backend::markEdge; -1: none), for a backend that also checks the
  // bound on the device (FillExec).
  Ran run(StreamCtx &ctx, Backend &backend, Flight &flight, uint32_t job, const JobShape &shape,
          uint32_t passes, const WorkItem &item, const RunConfig &config, double deadlineUs,
          double predictedUs, bool timed, const std::function<double()> &deadlineNow = {},
          int64_t bubbleToken = -1);

  // The passes of `item` from ran.passEnd on, first in line; merged with the chunk's rest, where
  // that waits, when `item` was a head of it (one queued item per chunk).
  void pushRest(const WorkItem &item, const Ran &ran);

  // Checkpoints: this queue's part of a FillDeviceState (training weights, batches in flight with
  // their tensors, deferred work) and back. restore() refuses deferred work outside the job's
  // `passes` or of no samples: it returns what is wrong (empty when restored).
  void save(pipefill::rt::FillDeviceState &ds, bool training) const;
  std::string restore(const pipefill::rt::FillDeviceState &ds, uint32_t passes);
  // The state of a device a checkpoint of `iterationsDone` iterations does not name: every run
  // that fills a device saves its state, so it ran no fill in them. Its plan has not begun, and
  // those iterations count as held.
  void restoreUnfilled(uint32_t device, uint64_t iterationsDone, uint32_t passes);
  // What makes a checkpoint's deferred chunk impossible to run for a job of `passes` passes
  // (batch 0, passes outside the job), as "a deferred chunk of ..."; empty when it can run.
  // restore() refuses the same; checkpoint readers check it before restoring anything.
  static std::string deferredChunkProblem(const pipefill::rt::DeferredChunk &dc,
                                          uint32_t passes);

  // What is wrong with a checkpoint's count of held iterations after `iterationsDone` loop
  // iterations (negative, or more than were run), as "N iterations held ..."; empty when fine.
  static std::string heldProblem(const pipefill::rt::FillDeviceState &ds, uint64_t iterationsDone);

private:
  int64_t decidedFor_ = INT64_MIN; // the loop iteration planIteration last decided
  bool holding_ = false;
};

} // namespace pfrt

#endif // PFRT_FILL_QUEUE_H
