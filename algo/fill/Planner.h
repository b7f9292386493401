//===- Planner.h - Fill-job planner for pipeline bubbles --------*- C++ -*-===//
//
// Plain C++17 (no MLIR/LLVM). Given every pipeline stage's repeating bubbles
// (duration, free bytes) and a list of fill jobs made of layers, decide which
// fill work runs in which bubble: per (stage, job) the batch size and memory
// placement knobs, and the chunks (contiguous op ranges of one batch) packed
// into each bubble, iteration after iteration, until the schedule repeats.
//
// The cost model, the packing rules and the guarantees are documented in
// docs/planner.md; the formulas are repeated next to the declarations below.
//
// Errors never throw: invalid inputs are returned as Plan::errors (stage,
// hardware and config problems) or as Plan::unscheduled entries (job
// problems), and verifyPlan() returns the list of violations it found.
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_FILL_PLANNER_H
#define PIPEFILL_ALGO_FILL_PLANNER_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pipefill::fill {

enum class JobKind { Inference, Training };

/// Where a job's weights live. Resident: all layers' weights stay on the
/// device across bubbles (counted against StageBubbles::minFreeBytes).
/// Streamed: each op's weights are copied from pinned host memory over PCIe
/// inside the chunk, double-buffered and overlapped with compute.
enum class WeightPlacement { Resident, Streamed };

/// Where a batch's activations wait between bubbles (and, for training, the
/// activations stashed for backward). Device: reserved in minFreeBytes.
/// Host: copied out at the end of a chunk and back in at the start of the next
/// (and, for training, each stash right after its forward and back before its
/// backward); the copies are charged inside the bubble.
enum class ActPlacement { Device, Host };

/// Training only: where optimizer states live. Device: resident (minFreeBytes).
/// Host: copied in before and out after each layer's fused update.
enum class OptimizerPlacement { Device, Host };

struct Layer {
  std::string name;
  /// Compute-bound per-sample forward time at large batch (us).
  double forwardUsPerSample = 0;
  int64_t weightBytes = 0;
  /// Bytes of the layer's output per sample; the working set of the layer
  /// is input + output = 2 * batch * activationBytesPerSample.
  int64_t activationBytesPerSample = 0;
  // Training only.
  double backwardUsPerSample = 0;
  int64_t gradBytes = 0;
  int64_t optimizerBytes = 0;
  /// Training only: bytes per sample kept for backward without activation
  /// checkpointing; 0 means activationBytesPerSample. With checkpointing only
  /// activationBytesPerSample is kept and the forward is recomputed.
  int64_t stashBytesPerSample = 0;
};

struct Job {
  std::string name;
  JobKind kind = JobKind::Inference;
  int64_t samples = 0;
  double priority = 1;
  /// Not used by the planner (it plans the steady state); kept for the
  /// cluster-level scheduler.
  double arrivalUs = 0;
  std::vector<Layer> layers;
};

struct Bubble {
  int id = 0;
  double startUs = 0, durationUs = 0;
  int64_t freeBytes = 0;
};

/// One stage's bubbles, in time order; they repeat every iteration.
struct StageBubbles {
  int stage = 0;
  double iterationUs = 0;
  /// Minimum free memory over the whole iteration: what a fill job keeps on
  /// the device across bubbles must fit here.
  int64_t minFreeBytes = 0;
  std::vector<Bubble> bubbles;
};

struct Hardware {
  double pcieGBps = 25;    // host <-> device, each direction (1 GB = 1e9 B)
  double hbmGBps = 2000;   // device memory bandwidth
  double kernelLaunchUs = 5;
};

struct Config {
  double contextSwitchUs = 20;  // paid by every chunk
  double safetyMargin = 0.05;   // fraction of each bubble kept empty
  int64_t reserveBytes = 0;     // subtracted from every free-bytes figure
  std::vector<int> batchSizes = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  bool allowMultipleJobsPerStage = true;
  /// At most this many jobs share one stage (only with the flag above).
  int maxJobsPerStage = 4;
  /// Knob search: candidates are simulated in order of an upper bound on
  /// their throughput until the bound falls below the best found, or until
  /// this many simulations were run for one slot of one stage (0 = no cap,
  /// an exact search over the knob space).
  int maxSimulationsPerSlot = 0;
  /// A knob setting with PCIe copies (streamed weights, activations or
  /// optimizer state on the host) is packed exactly (see docs/planner.md)
  /// when usable bubbles x ops^3 + ops^4 is at most this, else greedily.
  /// Without copies the greedy is optimal. 0 = always greedy.
  int64_t exactPackingLimit = 50000;
  bool allowCheckpointing = true;
  /// Joint planning of the jobs that share a stage (docs/planner.md section
  /// 4): several orders of jobs and, on stages with few distinct bubble
  /// lengths, jobs restricted to the longer or the shorter bubbles are
  /// evaluated as whole stage plans and the best is kept. false = the
  /// slot-by-slot greedy choice (the best single job first), kept to show
  /// what the joint search adds.
  bool jointSearch = true;
  /// At most this many whole stage plans are evaluated per stage (the search
  /// is exhaustive below it); at most jointBranching options per slot.
  int maxStagePlans = 48;
  int jointBranching = 4;
  /// The joint search of a stage stops widening once its packings have
  /// taken this much work (bubbles x ops x (ops + 1) per packing); it then
  /// completes the plan slot by slot. Keeps compile time bounded.
  double jointWorkLimit = 20000;
  /// Whole-batch chunks of a smaller batch size (tail chunks) fill the time
  /// each bubble has left after the jobs' windows.
  bool tailChunks = true;
  /// Exact joint packing of small stages (docs/planner.md section 4): the
  /// cursors of all jobs on the stage as one state, so a job's time can go
  /// to another in some iterations and not others. Per stage at most this
  /// much work (joint states x options x bubbles); 0 = off.
  double jointExactWorkLimit = 3e5;
  /// Settings per job (its best alone) combined with the other jobs'.
  int jointExactSettings = 4;
  /// Only jobs of at most this many ops per batch are packed jointly (the
  /// joint states multiply the jobs' ops); larger ones keep the slot plan.
  int jointExactMaxOps = 8;
  /// Stages are planned independently of each other, on up to this many
  /// threads; the plan is the same for any count (stage parts are appended
  /// in stage order).
  int threads = 1;
  /// Called with (stages planned, stages) after each stage, from the
  /// planner's threads one call at a time; for a progress line on long plans.
  std::function<void(size_t, size_t)> progress;
};

/// One contiguous range of ops of one batch of one job, run in one bubble.
/// Ops: an inference job of n layers has n ops (op i = forward of layer i); a
/// training job has 2n ops (op i < n = forward of layer i, op n + k = backward
/// of layer n - 1 - k fused with that layer's optimizer update); see opLayer().
struct Chunk {
  int stage = 0;
  int bubbleId = 0;
  int job = 0;                     // index into the jobs passed to planFill
  int layerBegin = 0, layerEnd = 0;  // op range [begin, end)
  int batch = 0;
  /// First sample of the batch, counted along this (stage, job) assignment's
  /// own stream of batches: batch number * batch. In the k-th repetition of
  /// the period add k * batchesPerPeriod * batch (see Assignment).
  int64_t sampleBegin = 0;
  WeightPlacement weights = WeightPlacement::Resident;
  ActPlacement acts = ActPlacement::Device;
  OptimizerPlacement optimizer = OptimizerPlacement::Device;
  bool checkpoint = false;
  /// Per run of the chunk: compute = sum of op compute times, copy = sum of
  /// all PCIe copy times (overlapped or not), predicted = context switch +
  /// makespan of the double-buffered copy/compute pipeline.
  double computeUs = 0, copyUs = 0, predictedUs = 0;
  /// Device bytes of fill work while it runs: every persistent byte of every
  /// fill job on the stage + this chunk's transient bytes.
  int64_t peakBytes = 0;
  /// Index into the assignment's schedule of iterations (see Assignment).
  int iteration = 0;
  /// The chunk runs `repeat` times back to back (whole batches only, each a
  /// new batch, each paying the context switch).
  int repeat = 1;
  /// Start time relative to the bubble start.
  double offsetUs = 0;
};

/// One job running on one stage with fixed knobs.
struct Assignment {
  int stage = 0;
  int job = 0;
  int batch = 0;
  WeightPlacement weights = WeightPlacement::Resident;
  ActPlacement acts = ActPlacement::Device;
  OptimizerPlacement optimizer = OptimizerPlacement::Device;
  bool checkpoint = false;
  /// The chunks of this assignment are listed for iterations
  /// [0, prefixIterations + periodIterations); iteration i >= prefix runs the
  /// chunks listed for prefix + (i - prefix) % periodIterations.
  int prefixIterations = 0;
  int periodIterations = 1;
  int64_t batchesPerPeriod = 0;
  /// Samples per iteration run as tail chunks (over the period, rounded
  /// down): whole batches of a smaller batch size than `batch` (same
  /// placement knobs) in the time each bubble has left. Their
  /// chunks have `batch` below the assignment's and number their samples
  /// along a stream of their own (Chunk::sampleBegin from 0).
  int64_t tailSamplesPerIteration = 0;
  /// Steady state, per iteration (tail chunks included).
  double samplesPerIteration = 0;
  double usefulUs = 0;  // dedicated-speed GPU time of the work done
  double filledUs = 0;  // bubble time used (sum of predictedUs)
  int64_t persistentBytes = 0;  // kept on the device across bubbles
};

struct JobResult {
  std::string name;
  double samplesPerIteration = 0;
  /// Dedicated-speed GPU time of the work done / bubble time it used.
  double efficiency = 0;
  double usefulUs = 0, filledUs = 0;  // per iteration, all stages
  int stages = 0;                     // stages running the job
  /// samples / samplesPerIteration (infinity when not scheduled).
  double iterationsToComplete = 0;
};

struct Unscheduled {
  std::string name;
  std::string reason;
};

/// Where one stage's bubble time goes, per iteration in the steady state
/// (planned, not measured). bubbleUs = filledUs + idleUs; filledUs =
/// usefulUs + switchUs + launchUs + otherOverheadUs; idleUs = marginUs +
/// tooShortUs + memoryUs + granularityUs.
struct StageAccount {
  int stage = 0;
  double bubbleUs = 0;
  double filledUs = 0;        // planned chunk time
  double usefulUs = 0;        // dedicated-speed time of the work in it
  double switchUs = 0;        // one context switch per chunk run
  double launchUs = 0;        // one kernel launch per layer call
  double otherOverheadUs = 0; // memory-bound layers, small batches, copies
  double idleUs = 0;
  double marginUs = 0;        // the safety margin, kept empty on purpose
  /// Idle time left in a bubble (beyond the margin) because no fill job
  /// has a chunk that short (any job, any knob setting, one op) ...
  double tooShortUs = 0;
  /// ... because chunks short enough exist but none fits the bubble's free
  /// memory next to what the stage's fill jobs keep on the device ...
  double memoryUs = 0;
  /// ... or because the placed jobs' whole ops and batches do not add up
  /// to the bubble (their next chunk is longer than the time left).
  double granularityUs = 0;
};

struct Plan {
  std::vector<Chunk> chunks;
  std::vector<Assignment> assignments;
  std::vector<JobResult> jobs;  // one per input job, same order
  std::vector<Unscheduled> unscheduled;
  /// Invalid stage, hardware or config input; affected stages are skipped.
  std::vector<std::string> errors;
  // Per iteration, all stages (steady state).
  double bubbleUs = 0, filledUs = 0;
  double filledFraction = 0;
  double usefulUs = 0;
  /// usefulUs / bubbleUs: the share of bubble time that becomes work at
  /// dedicated speed (filledFraction less switches, launches, overheads).
  double usefulFraction = 0;
  /// One per valid stage, in input order: where its bubble time goes.
  std::vector<StageAccount> accounts;
};

/// Receives one stage's chunks (`stage` indexes the stages passed to
/// planFill), in plan order, once the stage is planned and accounted; called
/// from the planner's threads, each stage once.
using ChunkSink = std::function<void(int stage, std::vector<Chunk> &&chunks)>;

/// Plans fill work into every stage's bubbles. With a `sink`, each stage's
/// chunks go to it instead of into Plan::chunks (which stays empty): a
/// caller that stores them elsewhere never holds every chunk twice (1F1B
/// 128 x 4096 x 100: 2.3 million chunks, ~220 MB).
Plan planFill(const std::vector<StageBubbles> &stages,
              const std::vector<Job> &jobs, const Hardware &hw,
              const Config &config, const ChunkSink &sink = {});

/// One violation found by checkPlan(), attached to what causes it: a chunk
/// or an assignment (index into the plan's vectors), a stage (its id), or
/// the plan as a whole. The message is in IR terms (the keywords of the
/// fill chunk rows of pipefill.bubble and of pipefill.assignment), without
/// the location.
struct Violation {
  enum class On { Plan, Stage, Assignment, Chunk } on = On::Plan;
  int index = -1;
  std::string message;
};

/// Independent check of a plan (own loops, not the planner's packing code).
std::vector<Violation> checkPlan(const std::vector<StageBubbles> &stages,
                                 const std::vector<Job> &jobs,
                                 const Hardware &hw, const Config &config,
                                 const Plan &plan);

/// checkPlan()'s violations as text, each prefixed with what it is on;
/// empty means the plan is valid.
std::vector<std::string> verifyPlan(const std::vector<StageBubbles> &stages,
                                    const std::vector<Job> &jobs,
                                    const Hardware &hw, const Config &config,
                                    const Plan &plan);

//===----------------------------------------------------------------------===//
// Time model (us). roof(work, bytes) = kernelLaunchUs + max(work, bytes /
// (hbmGBps * 1e3)). Used by the planner and by the verifier.
//===----------------------------------------------------------------------===//

/// kernelLaunchUs + max(b * forwardUsPerSample,
///                      (weightBytes + 2 b activationBytesPerSample) / hbm).
double layerForwardUs(const Layer &layer, int batch, const Hardware &hw);
/// kernelLaunchUs + max(b * backwardUsPerSample,
///     (weightBytes + gradBytes + 2 b activationBytesPerSample) / hbm).
double layerBackwardUs(const Layer &layer, int batch, const Hardware &hw);
/// Fused optimizer update: kernelLaunchUs +
/// (2 weightBytes + gradBytes + 2 optimizerBytes) / hbm, or 0 for a layer
/// without weights, gradients and optimizer state.
double layerOptimizerUs(const Layer &layer, const Hardware &hw);

/// Number of ops per batch: layers (inference) or 2 * layers (training).
int numOps(const Job &job);
/// The layer an op runs, and whether it is the backward (+ update) op.
int opLayer(const Job &job, int op, bool *isBackward = nullptr);
/// Dedicated-speed GPU time of one sample: sum of forwardUsPerSample (plus
/// backwardUsPerSample for training).
double usefulUsPerSample(const Job &job);

const char *toString(WeightPlacement p);
const char *toString(ActPlacement p);
const char *toString(OptimizerPlacement p);
/// "12.0 GB", "512.0 MB", "64.0 KB", "17 B" (decimal units).
std::string formatBytes(int64_t bytes);
/// "850.0 us", "2.10 ms", "1.25 s".
std::string formatUs(double us);

} // namespace pipefill::fill

#endif // PIPEFILL_ALGO_FILL_PLANNER_H
