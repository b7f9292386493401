// Turns the executor's raw timeline into the run report: iteration times, bubbles (measured
// main-stream gaps vs planned), fill throughput, overruns, checksums, the JSON document, the
// terminal summary table and the MeasuredProfile.
#ifndef PFRT_REPORT_H
#define PFRT_REPORT_H

#include "runtime/Executor.h"
#include "proto/profile.pb.h"

#include <memory>
#include <string>
#include <vector>

namespace pipefill {
class JsonWriter;
} // namespace pipefill

namespace pfrt {

// An op's start/end in modelled microseconds since the run's start (-1: did not run).
struct OpTime {
  double start = -1, end = -1;
  double duration() const { return start >= 0 && end >= 0 ? end - start : 0; }
};

struct BubbleReport {
  uint32_t bubbleId = 0;
  pfrt_bubble_kind kind = PFRT_BUBBLE_UNSPECIFIED;
  uint32_t opIndex = 0;
  double plannedStartUs = 0, plannedUs = 0;
  uint64_t freeBytes = 0;
  std::vector<double> measuredUs; // per iteration, -1 where not measurable (last tail bubble)
  // Per iteration, where it began (report time; -1: not reached): its marker, or for a bubble
  // right after another one (no compute between) the planned end of that one (Report.cpp).
  std::vector<double> beginUs;
  // Per iteration, where main resumed compute after it (-1: not known): its end, or for a bubble of
  // such a chain the end of the chain's idle stretch. Fill still running then is an overrun.
  std::vector<double> idleEndUs;
  double measuredMeanUs = 0;      // over measurable iterations; -1 when no iteration closed it
  double startMeanUs = 0;         // relative to the device's iteration start
  double plannedFillUs = 0;       // planned_us of its chunks per iteration (periodic: / period)
  double fillUsMean = 0;          // measured fill-chunk time per iteration
  double switchLatencyMeanUs = -1;
  uint64_t overruns = 0;
  double overrunUs = 0;
};

// One stream's op times, iteration after iteration: op i of iteration k at times[k * ops + i].
// Read as [k][i]; size() is the iteration count.
struct StreamTimes {
  size_t ops = 0, iterations = 0;
  std::vector<OpTime> times;
  size_t size() const { return iterations; }
  const OpTime *operator[](size_t k) const { return times.data() + k * ops; }
};

struct DeviceReport {
  uint32_t device = 0, stage = 0;
  std::string backend;
  // "measured" (main compute timed on a clock), "modelled" (host fast model) or "emulated"
  // (replay: planned times).
  std::string timeSource;
  bool fill = false;
  double iterationUsMean = 0;
  double mainBusyUsMean = 0;
  double plannedIterationUs = 0;
  uint64_t memoryBytes = 0, minFreeBytes = 0;
  bool minFreeKnown = false, minFreeMeasured = false;
  std::vector<BubbleReport> bubbles;
  uint32_t mainStream = 0;
  std::vector<int32_t> streamPriority; // applied by the backend (CUDA), INT32_MIN if none
  // Per stream: the report's one copy of the timeline (16 bytes per op and iteration; the run's
  // slots are released as they are converted).
  std::vector<StreamTimes> streamOps;
  std::vector<double> iterationStart, iterationEnd; // per iteration
  size_t iterations() const { return iterationStart.size(); }
  const StreamTimes &mainOps() const { return streamOps[mainStream]; }
};

struct ReportData {
  std::string programName;
  std::string backend;
  std::string rankTransfer; // RunResult::rankTransfer
  bool measuredTime = false;
  double timeScale = 1.0;
  int32_t replayDevice = -1;
  bool fillEnabled = true;
  bool profileMode = false;
  uint32_t maxDim = 0;
  int64_t firstIteration = 0;
  uint32_t iterations = 0;
  double plannedIterationUs = 0;
  std::vector<double> iterationUs;
  double iterationUsMean = 0;
  double plannedBubbleUsPerIteration = 0, plannedFillUsPerIteration = 0;
  double plannedChunksPerIteration = 0; // fill chunks the plan runs per iteration where fill runs
  double bubbleUsPerIteration = 0, fillUsPerIteration = 0;
  // Bubbles whose gap no iteration of the run closed (a one-iteration run's tail bubbles: their
  // gap ends in the next iteration): left out of bubbleUsPerIteration; their planned time.
  uint64_t bubblesUnobserved = 0;
  double unobservedPlannedUs = 0;
  uint64_t overrunCount = 0;
  double overrunUs = 0, overrunMaxUs = 0;
  // Chunk by chunk (a bubble's slot may run several): chunks that ended past their bubble's
  // measured end, and their overrun split into the part the chunk ran longer than predicted and
  // the rest (the bubble ended before the deadline the bound admitted the chunk against).
  uint64_t overrunChunks = 0;
  double overrunLongerUs = 0, overrunShorterBubbleUs = 0;
  // Host, measured time: of the overrun, the part explained by the fill thread not running
  // during its chunk (wall time minus the thread's CPU time: waiting for a core, which a
  // SCHED_IDLE thread does whenever main or another process wants its core). -1: not known.
  double overrunThreadWaitingUs = -1;
  double switchLatencyMeanUs = -1, switchLatencyMaxUs = -1;
  // Switch latency only on bubbles whose fill stream was idle when they began (no queueing).
  double switchIdleP50Us = -1, switchIdleP99Us = -1;
  uint64_t switchIdleCount = 0;
  std::vector<double> switchIdleUs; // the latencies behind the percentiles, sorted
  // Host-timed fill work items (times relative to the run start, real us).
  std::vector<RunResult::ChunkRun> chunkRuns;
  double realIterationUsMean = 0; // devices that ran for real (not emulated)
  bool fillBounded = true, fillSplit = true, boundedOnHost = true;
  bool boundedOnDevice = false; // CUDA's gates (DeviceGate.h)
  double fillUsRun = 0;           // time of the fill chunks that ran (this run)
  std::vector<DeviceReport> devices;
  std::vector<RunResult::Job> jobs;
  // Per job: every device it has chunks on is emulated (replay), so its fill does not run in
  // this run (its samples_planned is 0, like its planned fill work).
  std::vector<bool> jobEmulated;
  bool resumed = false;
  bool stopped = false; // stopped early on a stop request
  uint32_t iterationsRequested = 0;
  std::string checkpointPath;
  double hostLagUs = 0; // modelled us
  double emulatedSpeedRatio = 0; // RunResult::emulatedSpeedRatio
  std::string json, summary;
  pipefill::rt::MeasuredProfile profile;
};

// Consumes the run: its timeline moves into the report (one copy of it is held at any time).
ReportData buildReport(const Program &program, const ProgramInfo &info, RunResult &&run);

// Fill chunks run, deferred (left for a later bubble), skipped, pending (still queued) and split
// (ran a head of their passes, the rest deferred).
struct ChunkCounts {
  uint64_t run = 0, deferred = 0, skipped = 0, pending = 0, split = 0;
  uint64_t stoppedOnDevice = 0; // CUDA's device-side bound (DeviceGate.h)
};

// Totals over a run's fill jobs: their chunks and the samples they ran and had planned (this run).
struct JobTotals {
  ChunkCounts chunks;
  uint64_t samplesThisRun = 0, samplesPlanned = 0;
  uint64_t iterationsHeld = 0, samplesHeld = 0;
};
JobTotals jobTotals(const std::vector<RunResult::Job> &jobs);

// Whether the time of chunk `c` was modelled, not measured: in the modelled time model a chunk
// of GEMM_CHAIN stand-ins only lasts its planned time on the scaled clock (HostBackend), like
// main compute; every other chunk is real work timed on the clock.
bool chunkTimeModelled(const ReportData &r, const RunResult::ChunkRun &c);
// "measured", "modelled" (every chunk that ran was), "measured, GEMM_CHAIN-only chunks modelled"
// or "not run" (no fill): what the report's fill chunk times are.
const char *fillChunksLabel(const ReportData &r);

// `c` as chunks_run, chunks_deferred, chunks_split, chunks_skipped, chunks_pending and
// chunks_stopped_on_device: the names
// of every JSON report (run, session, compare).
void writeChunkCounts(pipefill::JsonWriter &w, const ChunkCounts &c);

// The bubble bound's outcome: the chunk counts, fill_us_run, overrun_us and
// overrun_fraction_of_fill (0 when no fill ran).
void writeFillBoundCounts(pipefill::JsonWriter &w, const ChunkCounts &c, double fillUsRun,
                          double overrunUs);

} // namespace pfrt

struct pfrt_report {
  pfrt::ReportData data;
  // The program the timeline belongs to (pfrt_report_write_trace); null for another rank's part.
  std::shared_ptr<const pfrt::Program> program;
  // Rank mode: this rank's part (RankResult JSON), its rank and the world; -1/0 otherwise.
  std::string rankJson;
  int32_t rank = -1, world = 0;
};

#endif // PFRT_REPORT_H
