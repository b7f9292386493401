//===- TorchTrace.h - measured stage costs from torch profiler traces -----===//
//
// Plain C++17: turns the events of torch.profiler Chrome traces of a
// torch.distributed.pipelining job (one trace per rank, or one merged) into
// measured per-instruction compute times and the idle gaps of each rank's
// compute stream (FreeRide's profiling method). The JSON itself is read by
// codegen/ImportTorchTrace.cpp; docs/torch.md gives the mapping.
//
// Which events are actions:
//  - `PP:<action>` ranges, which torch's `_PipelineScheduleRuntime` records
//    around every action it runs (`PP:2F1`, `PP:0I3`,
//    `PP:(0F3;7B1)OVERLAP_F_B`, ...); communication and bookkeeping actions
//    are skipped;
//  - `Forward <mb>` / `Backward <mb>` ranges, which the single-stage
//    schedule ScheduleGPipe records (Schedule1F1B records none); their stage is the
//    trace's rank.
// An action's compute time is the span of the operator events (category
// cpu_op) nested in its range on the same thread, communication operators
// (c10d::, gloo, nccl, record_param_comms) left out: torch's F range also
// holds the wait for its input, which is idle time, not compute. A range
// with no nested operators counts whole. In an OVERLAP_F_B range the
// autograd operators belong to its backward sub-actions and the others to its
// forward ones.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_ALGO_TORCH_TORCHTRACE_H
#define PIPEFILL_ALGO_TORCH_TORCHTRACE_H

#include "algo/schedule/Schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pipefill::torchsched {

/// A complete ("ph": "X") trace event. Times in microseconds.
struct TraceEvent {
  std::string name, cat;
  double ts = 0, dur = 0;
  std::string thread; ///< pid and tid, as one key
  int line = 0;       ///< 1-based line in the file (action events), or 0
};

struct TraceFile {
  std::string path;
  int rank = -1; ///< distributedInfo.rank, or -1
  std::vector<TraceEvent> events;
};

/// Where torch stage s lives: device (pipefill stage) and chunk.
struct StagePlacement {
  int devices = 1, chunks = 1;
  int microbatches = 0; ///< the pipeline's micro-batches (0: not checked)
  std::vector<int> deviceOfStage, chunkOfStage; ///< [devices * chunks]
};

/// The measured mean of one compute instruction.
struct MeasuredOp {
  sched::InstrKind kind = sched::InstrKind::Forward;
  int device = 0, chunk = 0, microbatch = 0, stage = 0;
  double meanUs = 0;      ///< compute time
  double meanStartUs = 0; ///< start relative to the iteration's origin
  int samples = 0;        ///< iterations averaged
};

struct MeasuredGap {
  int device = 0;
  double startUs = 0, durationUs = 0;
  sched::BubbleKind kind = sched::BubbleKind::Steady;
};

struct TraceProfile {
  std::vector<MeasuredOp> ops;   ///< sorted by device, then start
  std::vector<MeasuredGap> gaps; ///< of the last profiled iteration
  std::vector<double> deviceIterationUs; ///< per device: first start to last end
  double iterationUs = 0; ///< mean over the averaged iterations
  int iterations = 0;     ///< iterations seen in the traces
};

/// A problem, located in a trace file (line 0: the file as a whole).
struct TraceDiag {
  std::string path;
  int line = 0;
  std::string message;
};

/// Measures the compute instructions and gaps. Iterations: the k-th
/// occurrence of an action belongs to iteration k; with more than one
/// iteration the first is left out of the means (warm-up). Fails on traces
/// without action events, action names that do not parse, stages or
/// micro-batches outside the placement, times outside the project's clock
/// (|ts| <= 1e15 us, dur <= 1e9 us: support/Limits.h), single-stage labels
/// without a rank, one action seen in two traces, and actions seen a
/// different number of times (the iterations would mix).
bool profileFromTraces(const std::vector<TraceFile> &files,
                       const StagePlacement &placement, TraceProfile &out,
                       TraceDiag &diag);

} // namespace pipefill::torchsched

#endif // PIPEFILL_ALGO_TORCH_TORCHTRACE_H
