//===- Schedule.h - Pipeline schedules, timeline simulation, bubbles ------===//
//
// Plain C++17 algorithms behind pipefill-expand-schedule, pipefill-simulate
// and pipefill-insert-bubbles. No MLIR/LLVM dependency; the passes convert
// between IR and these small data types. Semantics are documented in
// docs/schedules.md.
//
// Errors are reported by returning false and filling `error` with a sentence;
// nothing here throws or aborts on bad input.
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_SCHEDULE_SCHEDULE_H
#define PIPEFILL_ALGO_SCHEDULE_SCHEDULE_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pipefill::sched {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved1F1B, ZBH1 };
enum class InstrKind {
  Forward,
  Backward,
  BackwardInput,
  BackwardWeight,
  Send,
  Recv,
  AllReduceGrads,
  OptimizerStep
};
enum class Payload { Activation, Gradient };
enum class BubbleKind { Warmup, Steady, Cooldown, Tail };

/// Per-stage (per device) costs. Times in microseconds, sizes in bytes.
struct StageCost {
  double forwardUs = 0;  ///< whole stage forward (all its chunks together)
  double backwardUs = 0; ///< whole backward (input grad + weight grad)
  double backwardWeightUs = 0; ///< weight-grad share of backwardUs (ZB only)
  int64_t activationBytes = 0; ///< output activation sent to the next stage
                               ///< (and the gradient that comes back for it)
  int64_t stashBytes = 0;  ///< activations kept from forward to backward,
                           ///< per microbatch, whole stage
  int64_t staticBytes = 0; ///< params + grads + optimizer state
};

struct PipelineSpec {
  int stages = 1;        ///< p: devices in the pipeline
  int microbatches = 1;  ///< m
  int virtualStages = 1; ///< v: model chunks per device (interleaved only)
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  std::vector<StageCost> costs; ///< size == stages (caller expands one entry)
  double p2pLatencyUs = 0;
  double p2pBandwidthGBps = 0; ///< 0 => transfers cost only latency
  // Iteration tail (optional): data-parallel all-reduce, then optimizer step.
  bool tail = false;
  int dataParallel = 1;
  int64_t gradBytes = 0; ///< per stage
  double dpBandwidthGBps = 0, dpLatencyUs = 0;
  double optimizerUs = 0;
  /// ZB: share of a microbatch's stash still held after BackwardInput and
  /// released by BackwardWeight.
  double weightGradStashFraction = 0.5;
};

/// One instruction of a stage's ordered list.
///
/// `bytes` means: payload size for Send/Recv; stash bytes allocated for
/// Forward; the gradient bytes reduced for AllReduceGrads (informational);
/// unused (0) otherwise (a backward frees what its forward took).
/// `durationUs` is read for compute kinds only: a Send or Recv takes no
/// device time, and a transfer's time comes from the spec's p2p model.
/// For Send/Recv, `chunk` is the chunk of the *sending* side and `peer` the
/// other device; a Recv matches the Send with the same (payload, microbatch,
/// chunk) going from its peer to its own stage.
struct Instr {
  InstrKind kind = InstrKind::Forward;
  int microbatch = -1;
  int chunk = 0;
  int peer = -1;
  Payload payload = Payload::Activation;
  int64_t bytes = 0;
  double durationUs = 0; ///< compute kinds only
  // Results of simulate():
  double startUs = 0, endUs = 0;
  int64_t liveBytesAfter = 0;
};

/// One ordered instruction list per stage (device).
using Schedule = std::vector<std::vector<Instr>>;

/// Checks the spec (sizes, finite non-negative costs, schedule constraints).
bool validateSpec(const PipelineSpec &spec, std::string &error);

/// Builds the per-stage instruction lists for spec.schedule, including
/// sends/recvs and the optional tail. Replaces `out`.
bool expandSchedule(const PipelineSpec &spec, Schedule &out,
                    std::string &error);
/// The list of one stage (what expandSchedule puts in out[stage]); stages
/// depend only on the spec, so they can be built in parallel. `spec` must
/// have passed validateSpec.
void expandStage(const PipelineSpec &spec, int stage, std::vector<Instr> &out);

struct StageTimeline {
  double busyUs = 0, idleUs = 0;
  int64_t peakBytes = 0;
};
struct SimResult {
  double iterationUs = 0;
  std::vector<StageTimeline> stages;
};

/// Runs the schedule with the durations stored in the instructions (they may
/// have been edited after expansion, or the schedule built by hand) and fills
/// startUs/endUs/liveBytesAfter in place. Uses the spec only for p2p cost,
/// static bytes (costs[s].staticBytes, 0 if costs is empty) and
/// weightGradStashFraction. Reports malformed instructions, unmatched or
/// mismatched send/recv pairs, backward without forward, and deadlocks as
/// errors naming stage and instruction index.
bool simulate(const PipelineSpec &spec, Schedule &schedule, SimResult &result,
              std::string &error);

/// Runs fn(s) for every stage s < n, in any order and on any threads; each
/// call writes only what belongs to its stage.
using ForEachStage = std::function<void(size_t n, const std::function<void(size_t)> &fn)>;

/// simulate(), with the per-stage checks (field ranges, forward before
/// backward, memory) run through `forEachStage` (pipefill-simulate runs them
/// on MLIR's threads). The result and the first error are the same as
/// simulate()'s, whatever the order the stages run in.
bool simulate(const PipelineSpec &spec, Schedule &schedule, SimResult &result,
              std::string &error, const ForEachStage &forEachStage);

/// The stream model's one deadlock rule (support/Graph.h, shared with the
/// runtime validator) on a schedule: nodes are the instructions, edges follow
/// each stage's order and each send to the recv it matches (matched as
/// simulate() matches them). Returns true when every instruction can run.
/// Otherwise `error` says why and, when one instruction is to blame, `stage`
/// and `index` name it (the head of a stuck stage, or an unmatched
/// transfer); else stage is -1. Needs no timings.
bool checkDeadlockFree(const Schedule &schedule, int &stage, size_t &index,
                       std::string &error);

struct Bubble {
  int stage = 0;
  double startUs = 0, durationUs = 0;
  int64_t freeBytes = 0;
  BubbleKind kind = BubbleKind::Steady;
  /// Index into the stage's list before which a bubble op goes: the first
  /// non-Send instruction at or after the gap; == size for a trailing gap.
  size_t insertBefore = 0;
};

/// Idle gaps of a simulated schedule, per stage in time order, stages in
/// order. Gaps shorter than minDurationUs (and empty gaps) are skipped.
std::vector<Bubble> findBubbles(const PipelineSpec &spec,
                                const Schedule &schedule,
                                const SimResult &result,
                                int64_t gpuMemoryBytes, double minDurationUs,
                                int64_t reserveBytes);
/// The same for stage s alone, appended to `out` (what findBubbles puts
/// there for s): stages are independent, so they can be found in parallel.
void findStageBubbles(const PipelineSpec &spec, const Schedule &schedule, int s,
                      const SimResult &result, int64_t gpuMemoryBytes,
                      double minDurationUs, int64_t reserveBytes,
                      std::vector<Bubble> &out);

/// latency + bytes / bandwidth (GB/s = 1e9 bytes/s).
double p2pTransferUs(const PipelineSpec &spec, int64_t bytes);
/// Ring all-reduce of gradBytes over dataParallel replicas:
/// 2(d-1) * latency + 2(d-1)/d * gradBytes / bandwidth; 0 when d <= 1.
double allReduceUs(const PipelineSpec &spec);
/// A send or recv of `payload` for (mb, chunk) to / from stage `peer`.
Instr transferInstr(InstrKind kind, Payload payload, int mb, int chunk,
                    int peer, int64_t bytes);
/// Appends the end of an iteration (spec.tail) to a stage's list: the
/// gradient all-reduce when dataParallel > 1, then the optimizer step when
/// it takes time.
void appendIterationTail(const PipelineSpec &spec, std::vector<Instr> &list);
/// Sum of idle time / (stages x iteration); 0 for an empty result.
double bubbleFraction(const SimResult &result);

bool isCompute(InstrKind kind);        ///< occupies the device
bool isBackwardFamily(InstrKind kind); ///< Backward, BackwardInput/Weight

// Names used in IR and reports: "gpipe", "1f1b", "interleaved_1f1b",
// "zb_h1"; "forward", ..., "allreduce_grads", "optimizer_step";
// "activation", "gradient"; "warmup", "steady", "cooldown", "tail".
const char *toString(ScheduleKind kind);
const char *toString(InstrKind kind);
const char *toString(Payload payload);
const char *toString(BubbleKind kind);
/// Accept the names above and the JobSpec enum spellings (GPIPE,
/// ONE_F_ONE_B, INTERLEAVED_1F1B, ZB_H1, ...), case-insensitively.
bool parseScheduleKind(const std::string &text, ScheduleKind &out);
bool parseInstrKind(const std::string &text, InstrKind &out);
bool parsePayload(const std::string &text, Payload &out);
bool parseBubbleKind(const std::string &text, BubbleKind &out);

/// Short human description, e.g. "recv gradient mb 3 chunk 1 from stage 2".
std::string describeInstr(const Instr &instr);

} // namespace pipefill::sched

#endif // PIPEFILL_ALGO_SCHEDULE_SCHEDULE_H
