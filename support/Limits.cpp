//===- Limits.cpp - documented ranges of every numeric input field --------===//
//
// Why these bounds: they are far above any real job (the largest published
// pipeline-parallel runs use pp <= 128, a few thousand micro-batches, GPUs
// with < 1 TB of memory), and small enough that the products the compiler and
// runtime form (bytes x micro-batches, microseconds x iterations, samples x
// per-sample cost) stay exact in 64-bit integers and finite in doubles.
//
//===----------------------------------------------------------------------===//
#include "support/Limits.h"
#include "support/Utf8.h"

#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <unordered_map>

namespace pb = google::protobuf;

namespace pipefill {

namespace {
constexpr double B = kMaxBytes;
constexpr double US = kMaxUs;
constexpr double CLOCK = kMaxClockUs;
constexpr double U32 = 4294967295.0;
constexpr double U64 = 18446744073709551615.0;
constexpr double I32 = 2147483647.0;
constexpr double BW = 1e6; // GB/s: 1 PB/s, above any link or memory
constexpr const char *kBytes = "1 PiB bounds every memory, so byte products stay in 64 bits";
constexpr const char *kTime = "1000 s per operation or per sample";
constexpr const char *kClock = "absolute times up to ~31 years";
constexpr const char *kBw = "1 PB/s, above any link or memory bandwidth";
constexpr const char *kId = "identifiers are 31-bit";
constexpr const char *kFree = "any value";

/// Every numeric input field with its range and why (the table checkLimits
/// reads; docs/generated lists it).
constexpr FieldLimit kFieldLimits[] = {
    // --- JobSpec (proto/pipefill.proto) --------------------------------
    {"pipefill.Pipeline.stages", 1, kMaxStages, false, "pipeline depth up to 1024 devices"},
    {"pipefill.Pipeline.microbatches", 1, kMaxMicrobatches, false, "micro-batches per iteration"},
    {"pipefill.Pipeline.virtual_stages", 1, kMaxVirtualStages, false, "model chunks per device"},
    {"pipefill.StageCost.forward_us", 0, US, false, kTime},
    {"pipefill.StageCost.backward_us", 0, US, false, kTime},
    {"pipefill.StageCost.backward_weight_us", 0, US, false, kTime},
    {"pipefill.StageCost.activation_bytes", 0, B, false, kBytes},
    {"pipefill.StageCost.stash_bytes", 0, B, false, kBytes},
    {"pipefill.StageCost.static_bytes", 0, B, false, kBytes},
    {"pipefill.Hardware.gpu_memory_bytes", 0, B, true, kBytes},
    {"pipefill.Hardware.p2p_latency_us", 0, US, false, kTime},
    {"pipefill.Hardware.p2p_bandwidth_gbps", 0, BW, false, kBw},
    {"pipefill.Hardware.pcie_bandwidth_gbps", 0, BW, false, kBw},
    {"pipefill.Hardware.hbm_bandwidth_gbps", 0, BW, false, kBw},
    {"pipefill.Hardware.kernel_launch_us", 0, US, false, kTime},
    {"pipefill.Tail.data_parallel", 1, 1048576, false, "2^20 data-parallel replicas"},
    {"pipefill.Tail.grad_bytes", 0, B, false, kBytes},
    {"pipefill.Tail.allreduce_bandwidth_gbps", 0, BW, false, kBw},
    {"pipefill.Tail.allreduce_latency_us", 0, US, false, kTime},
    {"pipefill.Tail.optimizer_us", 0, US, false, kTime},
    {"pipefill.Workload.hidden", 1, 65536, false, "layer width up to 65536"},
    {"pipefill.Workload.heads", 1, 4096, false, "attention heads"},
    {"pipefill.Workload.seq", 1, 65536, false, "sequence length up to 65536"},
    {"pipefill.Workload.ffn", 1, 262144, false, "MLP width up to 262144"},
    {"pipefill.FillLayer.forward_us_per_sample", 0, US, false, kTime},
    {"pipefill.FillLayer.weight_bytes", 0, B, false, kBytes},
    {"pipefill.FillLayer.activation_bytes_per_sample", 0, 1099511627776.0, false,
     "1 TiB per sample, so batch x bytes stays in 64 bits"},
    {"pipefill.FillLayer.backward_us_per_sample", 0, US, false, kTime},
    {"pipefill.FillLayer.grad_bytes", 0, B, false, kBytes},
    {"pipefill.FillLayer.optimizer_bytes", 0, B, false, kBytes},
    {"pipefill.FillLayer.repeat", 1, 1024, false,
     "a job expands to at most 4096 layers (see fill_job layer count)"},
    {"pipefill.FillJob.samples", 0, 1e15, false, "10^15 samples"},
    {"pipefill.FillJob.arrival_us", 0, CLOCK, false, kClock},
    {"pipefill.FillJob.priority", 0, 1e6, true, "relative weight up to 10^6"},
    {"pipefill.Planner.min_bubble_us", 0, US, false, kTime},
    {"pipefill.Planner.reserve_bytes", 0, B, false, kBytes},
    {"pipefill.Planner.context_switch_us", 0, US, false, kTime},
    {"pipefill.Planner.safety_margin", 0, 0.99, false, "a fraction below 1"},
    {"pipefill.Planner.batch_sizes", 1, 65536, false, "fill batch up to 65536 samples"},
    {"pipefill.Model.layers", 1, 100000, false, "transformer layers"},
    {"pipefill.Model.hidden", 1, 1048576, false, "hidden size up to 2^20"},
    {"pipefill.Model.heads", 1, 65536, false, "attention heads"},
    {"pipefill.Model.seq_length", 1, 16777216, false, "sequence length up to 2^24"},
    {"pipefill.Model.vocab", 1, 16777216, false, "vocabulary up to 2^24"},
    {"pipefill.Model.ffn_hidden", 1, 4194304, false, "MLP width up to 2^22"},
    {"pipefill.Model.micro_batch_size", 1, 65536, false, "sequences per micro-batch"},
    {"pipefill.Model.tp", 1, 1024, false, "tensor-parallel degree"},
    {"pipefill.Model.pp", 1, 1024, false, "pipeline depth up to 1024 devices"},
    {"pipefill.Model.dp", 1, 1048576, false, "2^20 data-parallel replicas"},
    {"pipefill.Model.global_batch", 1, 1073741824, false, "2^30 sequences per iteration"},
    {"pipefill.Model.efficiency", 0, 1, true, "a fraction of peak"},
    {"pipefill.Model.zero_stage", 0, 1, false, "ZeRO stages 0 and 1 are modelled"},

    // --- StreamProgram (proto/stream_program.proto) --------------------
    {"pipefill.rt.StreamProgram.version", 0, 1000, false, "schema version"},
    {"pipefill.rt.StreamProgram.iterations", 0, kMaxIterations, false,
     "10^6 iterations per run; longer runs resume from checkpoints"},
    {"pipefill.rt.StreamProgram.planned_iteration_us", 0, US, false, kTime},
    {"pipefill.rt.StreamProgram.seed", 0, U64, false, kFree},
    {"pipefill.rt.DeviceProgram.stage", 0, 4095, false, "device index"},
    {"pipefill.rt.DeviceProgram.memory_bytes", 0, B, false, kBytes},
    {"pipefill.rt.DeviceProgram.static_bytes", 0, B, false, kBytes},
    {"pipefill.rt.DeviceProgram.planned_iteration_us", 0, US, false, kTime},
    {"pipefill.rt.DeviceProgram.p2p_latency_us", 0, US, false, kTime},
    {"pipefill.rt.DeviceProgram.p2p_bandwidth_gbps", 0, BW, false, kBw},
    {"pipefill.rt.DeviceProgram.pcie_bandwidth_gbps", 0, BW, false, kBw},
    {"pipefill.rt.StageCalibration.forward_us", 0, US, false, kTime},
    {"pipefill.rt.StageCalibration.backward_us", 0, US, false, kTime},
    {"pipefill.rt.StageCalibration.backward_input_us", 0, US, false, kTime},
    {"pipefill.rt.StageCalibration.backward_weight_us", 0, US, false, kTime},
    {"pipefill.rt.StageCalibration.allreduce_us", 0, US, false, kTime},
    {"pipefill.rt.StageCalibration.optimizer_us", 0, US, false, kTime},
    {"pipefill.rt.StageCalibration.gemm_dim", 0, 16384, false,
     "host GEMM stand-in dimension (memory 3 x dim^2 floats)"},
    {"pipefill.rt.ComputeOp.microbatch", 0, I32, false, kId},
    {"pipefill.rt.ComputeOp.chunk", 0, I32, false, kId},
    {"pipefill.rt.ComputeOp.planned_us", 0, US, false, kTime},
    {"pipefill.rt.ComputeOp.planned_start_us", 0, CLOCK, false, kClock},
    {"pipefill.rt.SendOp.peer", 0, 4095, false, "device index"},
    {"pipefill.rt.SendOp.bytes", 0, B, false, kBytes},
    {"pipefill.rt.SendOp.tag", 0, I32, false, kId},
    {"pipefill.rt.SendOp.planned_us", 0, US, false, kTime},
    {"pipefill.rt.SendOp.planned_start_us", 0, CLOCK, false, kClock},
    {"pipefill.rt.RecvOp.peer", 0, 4095, false, "device index"},
    {"pipefill.rt.RecvOp.bytes", 0, B, false, kBytes},
    {"pipefill.rt.RecvOp.tag", 0, I32, false, kId},
    {"pipefill.rt.RecvOp.planned_us", 0, US, false, kTime},
    {"pipefill.rt.RecvOp.planned_start_us", 0, CLOCK, false, kClock},
    {"pipefill.rt.RecordEventOp.event", 0, 65535, false, "events per device"},
    {"pipefill.rt.WaitEventOp.event", 0, 65535, false, "events per device"},
    {"pipefill.rt.BubbleOp.bubble_id", 0, I32, false, kId},
    {"pipefill.rt.BubbleOp.planned_start_us", 0, CLOCK, false, kClock},
    {"pipefill.rt.BubbleOp.planned_duration_us", 0, US, false, kTime},
    {"pipefill.rt.BubbleOp.free_bytes", 0, B, false, kBytes},
    {"pipefill.rt.FillChunkOp.job", 0, 4095, false, "fill-job index"},
    {"pipefill.rt.FillChunkOp.bubble_id", 0, I32, false, kId},
    {"pipefill.rt.FillChunkOp.layer_begin", 0, 8192, false, "passes per job (2 x 4096 layers)"},
    {"pipefill.rt.FillChunkOp.layer_end", 0, 8192, false, "passes per job (2 x 4096 layers)"},
    {"pipefill.rt.FillChunkOp.batch", 0, 65536, false, "fill batch up to 65536 samples"},
    {"pipefill.rt.FillChunkOp.sample_begin", 0, B - 1, false, "sample indices below 2^50"},
    {"pipefill.rt.FillChunkOp.iteration_offset", -1024, 0, false,
     "a batch may span at most 1024 iterations"},
    {"pipefill.rt.FillChunkOp.planned_us", 0, US, false, kTime},
    {"pipefill.rt.FillChunkOp.peak_bytes", 0, B, false, kBytes},
    {"pipefill.rt.FillChunkOp.period", 0, kMaxFillPeriod, false, "a chunk repeats at most every 1024 iterations"},
    {"pipefill.rt.FillChunkOp.phase", 0, 1023, false, "phase below the period"},
    {"pipefill.rt.CopyOp.bytes", 0, B, false, kBytes},
    {"pipefill.rt.CopyOp.planned_us", 0, US, false, kTime},
    {"pipefill.rt.AllocOp.buffer", 0, I32, false, kId},
    {"pipefill.rt.AllocOp.bytes", 0, B, false, kBytes},
    {"pipefill.rt.FreeOp.buffer", 0, I32, false, kId},
    {"pipefill.rt.FillWorkload.samples", 0, 1e15, false, "10^15 samples"},
    {"pipefill.rt.FillWorkload.samples_per_iteration", 0, 1048576, false,
     "2^20 samples per iteration"},
    {"pipefill.rt.FillWorkload.seed", 0, U64, false, kFree},
    {"pipefill.rt.FillWorkload.learning_rate", 0, 10, false, "SGD step size"},
    {"pipefill.rt.FillWorkloadLayer.planned_us_per_sample", 0, US, false, kTime},
    {"pipefill.rt.FillWorkloadLayer.planned_backward_us_per_sample", 0, US, false, kTime},
    {"pipefill.rt.FillWorkloadLayer.weight_bytes", 0, B, false, kBytes},
    {"pipefill.rt.FillWorkloadLayer.activation_bytes_per_sample", 0, 1099511627776.0, false,
     "1 TiB per sample"},
    {"pipefill.rt.EncoderLayerWorkload.hidden", 0, 65536, false, "layer width up to 65536"},
    {"pipefill.rt.EncoderLayerWorkload.heads", 0, 4096, false, "attention heads"},
    {"pipefill.rt.EncoderLayerWorkload.seq", 0, 65536, false, "sequence length up to 65536"},
    {"pipefill.rt.EncoderLayerWorkload.ffn", 0, 262144, false, "MLP width up to 262144"},
    {"pipefill.rt.MlpLayerWorkload.in", 0, 65536, false, "layer width up to 65536"},
    {"pipefill.rt.MlpLayerWorkload.hidden", 0, 262144, false, "MLP width up to 262144"},
    {"pipefill.rt.MlpLayerWorkload.out", 0, 65536, false, "layer width up to 65536"},
    {"pipefill.rt.GemmChainWorkload.dim", 0, 16384, false, "GEMM dimension"},
    {"pipefill.rt.GemmChainWorkload.width", 0, 65536, false, "layer width up to 65536"},
    {"pipefill.rt.FillCheckpoint.program_fingerprint", 0, U64, false, kFree},
    {"pipefill.rt.FillCheckpoint.iterations_done", 0, U32, false, "32-bit counter"},
    {"pipefill.rt.FillCheckpoint.max_dim", 0, 262144, false, "widest layer"},
    {"pipefill.rt.FillJobCheckpoint.samples_done", 0, kMaxCheckpointCount, false, "10^15 samples"},
    {"pipefill.rt.FillJobCheckpoint.checksum", -1e300, 1e300, false, "a finite number"},
    {"pipefill.rt.FillJobCheckpoint.steps_done", 0, kMaxCheckpointCount, false, "10^15 steps"},
    {"pipefill.rt.FillJobCheckpoint.loss_sum", -1e300, 1e300, false, "a finite number"},
    {"pipefill.rt.FillTaskCheckpoint.steps_done", 0, kMaxCheckpointCount, false, "10^15 steps"},
    {"pipefill.rt.FillTaskCheckpoint.samples_done", 0, kMaxCheckpointCount, false, "10^15 samples"},
    {"pipefill.rt.FillDeviceState.device", 0, 4095, false, "device index"},
    {"pipefill.rt.FillDeviceState.iterations_held", 0, U32, false,
     "32-bit counter (at most iterations_done)"},
    {"pipefill.rt.InFlightBatch.sample_begin", 0, B - 1, false, "sample indices below 2^50"},
    {"pipefill.rt.InFlightBatch.batch", 0, 65536, false, "fill batch up to 65536 samples"},
    {"pipefill.rt.InFlightBatch.next_layer", 0, 8192, false, "passes per job"},
    {"pipefill.rt.FloatTensor.values", -3.4e38, 3.4e38, false, "finite floats"},
    {"pipefill.rt.DeferredChunk.sample_begin", 0, B - 1, false, "sample indices below 2^50"},
    {"pipefill.rt.DeferredChunk.batch", 0, 65536, false, "fill batch up to 65536 samples"},
    {"pipefill.rt.DeferredChunk.layer_begin", 0, 8192, false, "passes per job (2 x 4096 layers)"},
    {"pipefill.rt.DeferredChunk.layer_end", 0, 8192, false, "passes per job (2 x 4096 layers)"},
    {"pipefill.rt.DeferredChunk.planned_us", 0, US, false, kTime},
    {"pipefill.rt.DeferredChunk.peak_bytes", 0, B, false, kBytes},

    // --- MeasuredProfile (proto/profile.proto) -------------------------
    {"pipefill.rt.MeasuredProfile.iterations", 0, 1000000, false, "iterations per run"},
    {"pipefill.rt.MeasuredProfile.iterations_requested", 0, 1000000, false,
     "iterations a stopped run was asked for"},
    {"pipefill.rt.MeasuredProfile.iteration_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredProfile.planned_iteration_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredProfile.replay_device", -1, 4095, false, "device index or -1"},
    {"pipefill.rt.MeasuredStage.device", 0, 4095, false, "device index"},
    {"pipefill.rt.MeasuredStage.stage", 0, 4095, false, "stage index"},
    {"pipefill.rt.MeasuredStage.forward_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredStage.backward_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredStage.backward_input_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredStage.backward_weight_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredStage.allreduce_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredStage.optimizer_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredStage.min_free_bytes", 0, B, false, kBytes},
    {"pipefill.rt.MeasuredStage.memory_bytes", 0, B, false, kBytes},
    {"pipefill.rt.MeasuredStage.iteration_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredInstruction.op_index", 0, I32, false, kId},
    {"pipefill.rt.MeasuredInstruction.microbatch", 0, I32, false, kId},
    {"pipefill.rt.MeasuredInstruction.chunk", 0, I32, false, kId},
    {"pipefill.rt.MeasuredInstruction.planned_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredInstruction.measured_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredInstruction.start_us", 0, CLOCK, false, kClock},
    {"pipefill.rt.MeasuredBubble.bubble_id", 0, I32, false, kId},
    {"pipefill.rt.MeasuredBubble.planned_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredBubble.measured_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredBubble.start_us", 0, CLOCK, false, kClock},
    {"pipefill.rt.MeasuredBubble.planned_free_bytes", 0, B, false, kBytes},
    {"pipefill.rt.MeasuredInstruction.modelled_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredBubble.modelled_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredFillLayer.layer", 0, 8192, false, "layers per job"},
    {"pipefill.rt.MeasuredFillLayer.planned_us_per_sample", 0, US, false, kTime},
    {"pipefill.rt.MeasuredFillLayer.measured_us_per_sample", 0, US, false, kTime},
    {"pipefill.rt.MeasuredFillLayer.planned_backward_us_per_sample", 0, US, false, kTime},
    {"pipefill.rt.MeasuredFillLayer.measured_backward_us_per_sample", 0, US, false, kTime},
    {"pipefill.rt.MeasuredFillLayer.p90_us_per_sample", 0, US, false, kTime},
    {"pipefill.rt.MeasuredFillLayer.p90_backward_us_per_sample", 0, US, false, kTime},
    {"pipefill.rt.MeasuredFillLayer.samples", 0, 1e15, false, "10^15 samples"},
    {"pipefill.rt.MeasuredFillLayer.max_dim", 0, 262144, false, "widest layer"},
    {"pipefill.rt.MeasuredChunkGap.mean_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredChunkGap.p50_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredChunkGap.p90_us", 0, US, false, kTime},
    {"pipefill.rt.MeasuredChunkGap.samples", 0, 1e15, false, "10^15 chunks"},
};

/// Every repeated input field with its most elements.
constexpr CountLimit kCountLimits[] = {
    {"pipefill.JobSpec.stage", 1024, "one entry per stage"},
    {"pipefill.JobSpec.fill_job", 10000, "fill jobs per JobSpec"},
    {"pipefill.FillJob.layer", 4096, "layer entries per job"},
    {"pipefill.Planner.batch_sizes", 64, "candidate batch sizes"},
    {"pipefill.rt.StreamProgram.devices", 4096, "devices per program"},
    {"pipefill.rt.StreamProgram.fill_jobs", 4096, "fill jobs per program"},
    {"pipefill.rt.DeviceProgram.streams", 16,
     "each stream is a thread on the host backend; 16 per device"},
    {"pipefill.rt.DeviceProgram.events", 65536, "events per device"},
    {"pipefill.rt.ProgramStream.ops", 4194304, "2^22 ops per stream"},
    {"pipefill.rt.FillWorkload.layers", 4096, "layers per fill job"},
    {"pipefill.rt.FillCheckpoint.jobs", 4096, "fill jobs per program"},
    {"pipefill.rt.FillJobCheckpoint.devices", 4096, "devices per program"},
    {"pipefill.rt.FillDeviceState.weights", 16384, "weight tensors per device"},
    {"pipefill.rt.FillDeviceState.in_flight", 65536, "batches in flight"},
    {"pipefill.rt.FillDeviceState.deferred", 4194304, "deferred chunks (2^22)"},
    {"pipefill.rt.InFlightBatch.tensors", 16384, "tensors per batch"},
    {"pipefill.rt.FloatTensor.values", 268435456, "2^28 floats (1 GiB) per tensor"},
    {"pipefill.rt.MeasuredProfile.stages", 4096, "devices per program"},
    {"pipefill.rt.MeasuredStage.instructions", 4194304, "2^22 ops per stream"},
    {"pipefill.rt.MeasuredStage.bubbles", 4194304, "2^22 ops per stream"},
};

} // namespace

const std::vector<FieldLimit> &fieldLimits() {
  static const std::vector<FieldLimit> table(std::begin(kFieldLimits),
                                             std::end(kFieldLimits));
  return table;
}

const std::vector<CountLimit> &countLimits() {
  static const std::vector<CountLimit> table(std::begin(kCountLimits),
                                             std::end(kCountLimits));
  return table;
}

const FieldLimit *findFieldLimit(const std::string &fullName) {
  static const std::map<std::string, const FieldLimit *> index = [] {
    std::map<std::string, const FieldLimit *> m;
    for (const FieldLimit &l : fieldLimits())
      m[l.field] = &l;
    return m;
  }();
  auto it = index.find(fullName);
  return it == index.end() ? nullptr : it->second;
}

const CountLimit *findCountLimit(const std::string &fullName) {
  for (const CountLimit &l : countLimits())
    if (fullName == l.field)
      return &l;
  return nullptr;
}

std::string formatBound(double v) {
  if (v == 4294967295.0)
    return "2^32-1";
  if (v == 2147483647.0)
    return "2^31-1";
  if (v == 18446744073709551615.0)
    return "2^64-1";
  char buf[40];
  const double a = std::fabs(v);
  if (v == std::floor(v) && a < 1e6) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  if (v == std::floor(v) && a >= 1048576 && a < 1e19) {
    // A power of two, or one less (an exclusive bound written inclusive: 2^50-1).
    const int l = static_cast<int>(std::lround(std::log2(a + 1)));
    if (std::ldexp(1.0, l) == a || std::ldexp(1.0, l) == a + 1) {
      std::snprintf(buf, sizeof buf, "%s2^%d%s", v < 0 ? "-" : "", l,
                    std::ldexp(1.0, l) == a ? "" : "-1");
      return buf;
    }
  }
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

namespace {

bool isNumeric(const pb::FieldDescriptor *f) {
  switch (f->cpp_type()) {
  case pb::FieldDescriptor::CPPTYPE_INT32:
  case pb::FieldDescriptor::CPPTYPE_INT64:
  case pb::FieldDescriptor::CPPTYPE_UINT32:
  case pb::FieldDescriptor::CPPTYPE_UINT64:
  case pb::FieldDescriptor::CPPTYPE_DOUBLE:
  case pb::FieldDescriptor::CPPTYPE_FLOAT:
    return true;
  default:
    return false;
  }
}

/// A `string` field (`bytes` fields hold raw bytes and are not text).
bool isText(const pb::FieldDescriptor *f) { return f->type() == pb::FieldDescriptor::TYPE_STRING; }

/// The value as a double.
double numericValue(const pb::Message &msg, const pb::FieldDescriptor *f, int index) {
  const pb::Reflection *r = msg.GetReflection();
  bool rep = f->is_repeated();
  switch (f->cpp_type()) {
  case pb::FieldDescriptor::CPPTYPE_INT32:
    return rep ? r->GetRepeatedInt32(msg, f, index) : r->GetInt32(msg, f);
  case pb::FieldDescriptor::CPPTYPE_INT64:
    return static_cast<double>(rep ? r->GetRepeatedInt64(msg, f, index) : r->GetInt64(msg, f));
  case pb::FieldDescriptor::CPPTYPE_UINT32:
    return rep ? r->GetRepeatedUInt32(msg, f, index) : r->GetUInt32(msg, f);
  case pb::FieldDescriptor::CPPTYPE_UINT64:
    return static_cast<double>(rep ? r->GetRepeatedUInt64(msg, f, index) : r->GetUInt64(msg, f));
  case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    return rep ? r->GetRepeatedDouble(msg, f, index) : r->GetDouble(msg, f);
  case pb::FieldDescriptor::CPPTYPE_FLOAT:
    return rep ? r->GetRepeatedFloat(msg, f, index) : r->GetFloat(msg, f);
  default:
    return 0;
  }
}

/// The value's exact text, for a message: integers in full (a 64-bit value
/// would round as a double), floating-point values as %g.
std::string numericText(const pb::Message &msg, const pb::FieldDescriptor *f, int index) {
  const pb::Reflection *r = msg.GetReflection();
  bool rep = f->is_repeated();
  switch (f->cpp_type()) {
  case pb::FieldDescriptor::CPPTYPE_INT32:
    return std::to_string(rep ? r->GetRepeatedInt32(msg, f, index) : r->GetInt32(msg, f));
  case pb::FieldDescriptor::CPPTYPE_INT64:
    return std::to_string(rep ? r->GetRepeatedInt64(msg, f, index) : r->GetInt64(msg, f));
  case pb::FieldDescriptor::CPPTYPE_UINT32:
    return std::to_string(rep ? r->GetRepeatedUInt32(msg, f, index) : r->GetUInt32(msg, f));
  case pb::FieldDescriptor::CPPTYPE_UINT64:
    return std::to_string(rep ? r->GetRepeatedUInt64(msg, f, index) : r->GetUInt64(msg, f));
  default: {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%g", numericValue(msg, f, index));
    return buf;
  }
  }
}

std::string rangeMessage(const std::string &path, const FieldLimit &l, double v,
                         const std::string &text) {
  if (std::isnan(v))
    return path + " must be a number in [" + formatBound(l.min) + ", " + formatBound(l.max) +
           "] (got nan)";
  if (l.positive && !(v > l.min))
    return path + " must be positive (got " + text + ")";
  if (v < l.min) {
    if (l.min == 0)
      return path + " must be non-negative (got " + text + ")";
    return path + " must be at least " + formatBound(l.min) + " (got " + text + ")";
  }
  return path + " must be at most " + formatBound(l.max) + " (got " + text + "): " + l.why;
}

/// Walks a message and its nested messages once. What only an error needs
/// (the field's path such as "stage[2].forward_us", its file position, the
/// value's text) is built only for an error: a JobSpec has 10^4-10^5 fields,
/// and building every path and position up front was most of the walk.
struct Walker {
  const std::string &file;
  Diagnostics &diags;
  bool ok = true;

  /// The message being walked and how it was reached: field `field`
  /// (element `index`, -1 when not repeated) of the message of `parent`.
  struct Node {
    const Node *parent;
    const pb::Message *msg;
    const pb::TextFormat::ParseInfoTree *tree;
    const pb::FieldDescriptor *field;
    int index;
  };

  const std::string *rootPrefix = nullptr;
  std::unordered_map<const pb::FieldDescriptor *, const FieldLimit *> limits = {};

  /// "prefix.stage[2]" of the message at `n`.
  std::string pathOf(const Node &n) const {
    if (!n.parent)
      return *rootPrefix;
    std::string up = pathOf(*n.parent);
    std::string name = n.field->name();
    if (n.index >= 0)
      name += "[" + std::to_string(n.index) + "]";
    return up.empty() ? name : up + "." + name;
  }
  /// The path of field `f` (element `k`, -1 for the whole field) of the message at `n`.
  std::string pathOf(const Node &n, const pb::FieldDescriptor *f, int k = -1) const {
    std::string up = pathOf(n);
    std::string name = up.empty() ? f->name() : up + "." + f->name();
    if (k >= 0)
      name += "[" + std::to_string(k) + "]";
    return name;
  }
  /// Where the message at `n` was written (its parent's position when not).
  SourcePos posOf(const Node &n) const {
    if (!n.parent)
      return {};
    return fieldPos(*n.parent->msg, n.parent->tree, n.field->name(), n.index, posOf(*n.parent));
  }
  SourcePos posOf(const Node &n, const pb::FieldDescriptor *f, int k) const {
    return fieldPos(*n.msg, n.tree, f->name(), k, posOf(n));
  }

  void error(SourcePos pos, const std::string &message) {
    diags.error(file, pos.line, pos.column, message);
    ok = false;
  }

  void walk(const Node &n) {
    const pb::Message &msg = *n.msg;
    const pb::Descriptor *d = msg.GetDescriptor();
    const pb::Reflection *r = msg.GetReflection();
    for (int i = 0; i < d->field_count(); ++i) {
      const pb::FieldDescriptor *f = d->field(i);
      if (f->is_repeated()) {
        int size = r->FieldSize(msg, f);
        if (size == 0)
          continue;
        if (const CountLimit *c = findCountLimit(f->full_name()); c && size > c->max) {
          error(posOf(n, f, int(c->max)),
                pathOf(n, f) + " has " + std::to_string(size) + " entries; at most " +
                    formatBound(c->max) + " are allowed: " + c->why);
          continue;
        }
        if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
          for (int k = 0; k < size && ok; ++k)
            walk(Node{&n, &r->GetRepeatedMessage(msg, f, k), nestedTree(msg, n.tree, f->name(), k),
                      f, k});
        } else if (isText(f)) {
          for (int k = 0; k < size; ++k)
            if (!checkUtf8(r->GetRepeatedString(msg, f, k), n, f, k))
              break;
        } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_ENUM) {
          for (int k = 0; k < size; ++k)
            if (!checkEnum(r->GetRepeatedEnumValue(msg, f, k), n, f, k))
              break;
        } else if (isNumeric(f)) {
          const FieldLimit *l = limitFor(n, f);
          if (!l)
            continue;
          for (int k = 0; k < size; ++k) {
            double v = numericValue(msg, f, k);
            if (!inRange(*l, v)) {
              error(posOf(n, f, k), rangeMessage(pathOf(n, f, k), *l, v, numericText(msg, f, k)));
              break;
            }
          }
        }
        continue;
      }
      bool present = r->HasField(msg, f) || fieldWritten(msg, n.tree, f->name());
      if (!present)
        continue;
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        walk(Node{&n, &r->GetMessage(msg, f), nestedTree(msg, n.tree, f->name()), f, -1});
        continue;
      }
      if (isText(f)) {
        checkUtf8(r->GetString(msg, f), n, f, -1);
        continue;
      }
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_ENUM) {
        checkEnum(r->GetEnumValue(msg, f), n, f, -1);
        continue;
      }
      if (!isNumeric(f))
        continue;
      const FieldLimit *l = limitFor(n, f);
      if (!l)
        continue;
      double v = numericValue(msg, f, -1);
      if (!inRange(*l, v))
        error(posOf(n, f, -1), rangeMessage(pathOf(n, f), *l, v, numericText(msg, f, -1)));
    }
  }

  /// proto3 strings must be UTF-8 (protobuf's binary parser refuses a
  /// StreamProgram whose strings are not; its text parser takes any escaped
  /// byte), so text reaches no later stage, file or JSON report unless it is.
  bool checkUtf8(const std::string &value, const Node &n, const pb::FieldDescriptor *f, int k) {
    size_t bad = firstInvalidUtf8(value);
    if (bad == std::string::npos)
      return true;
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", unsigned(static_cast<unsigned char>(value[bad])));
    error(posOf(n, f, k), pathOf(n, f, k) + " is not valid UTF-8 (byte " +
                              std::to_string(bad) + " is " + hex +
                              "): text fields must be UTF-8");
    return false;
  }

  /// proto3 enums are open: a number the enum does not name (`schedule: 7`, a byte flipped in a
  /// binary file) parses, and a switch's default branch would plan it as some other value.
  bool checkEnum(int value, const Node &n, const pb::FieldDescriptor *f, int k) {
    const pb::EnumDescriptor *e = f->enum_type();
    if (e->FindValueByNumber(value))
      return true;
    std::string names;
    for (int i = 0; i < e->value_count(); ++i) {
      const std::string &name = e->value(i)->name();
      if (name.size() >= 12 && name.compare(name.size() - 12, 12, "_UNSPECIFIED") == 0)
        continue;
      names += (names.empty() ? "" : ", ") + name;
    }
    error(posOf(n, f, k), pathOf(n, f, k) + " is " + std::to_string(value) + ", which is not a " +
                              e->name() + " (expected one of " + names + ")");
    return false;
  }

  static bool inRange(const FieldLimit &l, double v) {
    if (l.positive ? !(v > l.min) : !(v >= l.min))
      return false;
    return v <= l.max;
  }

  const FieldLimit *limitFor(const Node &n, const pb::FieldDescriptor *f) {
    auto [it, inserted] = limits.try_emplace(f, nullptr);
    if (inserted)
      it->second = findFieldLimit(f->full_name());
    if (!it->second)
      error(posOf(n, f, -1), "internal: no documented range for " + f->full_name() +
                                 " (add it to support/Limits.cpp)");
    return it->second;
  }
};

} // namespace

bool checkLimits(const pb::Message &msg, const pb::TextFormat::ParseInfoTree *tree,
                 const std::string &file, Diagnostics &diags, const std::string &pathPrefix) {
  Walker w{file, diags};
  w.rootPrefix = &pathPrefix;
  w.walk(Walker::Node{nullptr, &msg, tree, nullptr, -1});
  return w.ok;
}

} // namespace pipefill
