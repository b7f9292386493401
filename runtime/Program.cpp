#include "runtime/Program.h"

#include "support/Checked.h"
#include "support/Graph.h"
#include "support/LayerRules.h"
#include "support/Limits.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <set>
#include <sstream>
#include <tuple>

namespace pfrt {

const char *opKindName(OpKind kind) {
  switch (kind) {
  case OpKind::Compute: return "compute";
  case OpKind::Send: return "send";
  case OpKind::Recv: return "recv";
  case OpKind::Record: return "record";
  case OpKind::Wait: return "wait";
  case OpKind::Bubble: return "bubble";
  case OpKind::Fill: return "fill";
  case OpKind::Copy: return "copy";
  case OpKind::Alloc: return "alloc";
  case OpKind::Free: return "free";
  }
  return "?";
}

const char *computeKindName(pfrt_compute_kind kind) {
  switch (kind) {
  case PFRT_COMPUTE_FORWARD: return "forward";
  case PFRT_COMPUTE_BACKWARD: return "backward";
  case PFRT_COMPUTE_BACKWARD_INPUT: return "backward_input";
  case PFRT_COMPUTE_BACKWARD_WEIGHT: return "backward_weight";
  case PFRT_COMPUTE_ALLREDUCE: return "allreduce";
  case PFRT_COMPUTE_OPTIMIZER: return "optimizer";
  }
  return "?";
}

const char *bubbleKindName(pfrt_bubble_kind kind) {
  switch (kind) {
  case PFRT_BUBBLE_UNSPECIFIED: return "unspecified";
  case PFRT_BUBBLE_WARMUP: return "warmup";
  case PFRT_BUBBLE_STEADY: return "steady";
  case PFRT_BUBBLE_COOLDOWN: return "cooldown";
  case PFRT_BUBBLE_TAIL: return "tail";
  }
  return "?";
}

const char *fillKindName(pfrt_fill_kind kind) {
  return kind == PFRT_FILL_TRAINING ? "training" : "inference";
}

pfrt_priority Stream::effectivePriority() const {
  if (priority != PFRT_PRIORITY_DEFAULT)
    return priority;
  switch (role) {
  case PFRT_STREAM_MAIN: return PFRT_PRIORITY_HIGH;
  case PFRT_STREAM_FILL: return PFRT_PRIORITY_LOW;
  case PFRT_STREAM_COPY: return PFRT_PRIORITY_NORMAL;
  }
  return PFRT_PRIORITY_NORMAL;
}

std::string opLocation(const Program &program, uint32_t device, uint32_t stream, uint32_t op) {
  std::ostringstream os;
  os << "device " << device << " stream " << stream;
  if (device < program.devices.size() && stream < program.devices[device].streams.size()) {
    const Stream &s = program.devices[device].streams[stream];
    if (!s.name.empty())
      os << " ('" << s.name << "')";
    if (op < s.ops.size())
      os << " op " << op << " (" << opKindName(s.ops[op].kind) << ")";
  }
  return os.str();
}

double effectivePlannedUs(const Device &device, const Op &op) {
  if (op.plannedUs > 0)
    return op.plannedUs;
  const pfrt_device_desc &d = device.desc;
  switch (op.kind) {
  case OpKind::Compute:
    switch (op.compute) {
    case PFRT_COMPUTE_FORWARD: return d.forward_us;
    case PFRT_COMPUTE_BACKWARD: return d.backward_us;
    case PFRT_COMPUTE_BACKWARD_INPUT: return d.backward_input_us;
    case PFRT_COMPUTE_BACKWARD_WEIGHT: return d.backward_weight_us;
    case PFRT_COMPUTE_ALLREDUCE: return d.allreduce_us;
    case PFRT_COMPUTE_OPTIMIZER: return d.optimizer_us;
    }
    return 0;
  case OpKind::Send:
    if (d.p2p_bandwidth_gbps > 0)
      return d.p2p_latency_us + static_cast<double>(op.bytes) / (d.p2p_bandwidth_gbps * 1e3);
    return d.p2p_latency_us;
  case OpKind::Copy:
    if (d.pcie_bandwidth_gbps > 0)
      return static_cast<double>(op.bytes) / (d.pcie_bandwidth_gbps * 1e3);
    return 0;
  case OpKind::Bubble:
    return op.bubble.planned_duration_us;
  case OpKind::Fill:
    return op.fill.planned_us;
  default:
    return 0;
  }
}

double plannedIterationUs(const Program &program) {
  if (program.plannedIterationUs > 0)
    return program.plannedIterationUs;
  double best = 0;
  for (const Device &d : program.devices)
    best = std::max(best, d.desc.planned_iteration_us);
  if (best > 0)
    return best;
  for (const Device &d : program.devices) {
    double sum = 0;
    for (const Stream &s : d.streams) {
      if (s.role != PFRT_STREAM_MAIN)
        continue;
      for (const Op &op : s.ops) {
        if (op.kind == OpKind::Compute || op.kind == OpKind::Send ||
            (op.kind == OpKind::Bubble && op.bubble.emulate_idle))
          sum += effectivePlannedUs(d, op);
      }
    }
    best = std::max(best, sum);
  }
  return best;
}

namespace {

struct OpRef {
  uint32_t device, stream, op;
};

// Where a refusal points (ProgramCheck.h), beside the message that names it.
ProgramSite opSite(uint32_t d, uint32_t s, uint32_t i) { return {d, s, i, -1, -1}; }
ProgramSite opSite(const OpRef &o) { return opSite(o.device, o.stream, o.op); }
ProgramSite streamSite(uint32_t d, uint32_t s) { return {d, s, -1, -1, -1}; }
ProgramSite deviceSite(uint32_t d) { return {d, -1, -1, -1, -1}; }
ProgramSite jobSite(uint32_t j, int64_t layer = -1) { return {-1, -1, -1, j, layer}; }

[[noreturn]] void fail(const std::string &message, const ProgramSite &site = {}) {
  throw Error(PFRT_ERROR_INVALID_PROGRAM, message, site);
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A time field: finite and within [0, limit].
void checkTime(double v, double limit, const std::string &where, const char *field,
               const ProgramSite &site = {}) {
  if (!(v >= 0 && v <= limit))
    fail(where + ": " + field + " must be in [0, " + num(limit) + "] us (got " + num(v) + ")",
         site);
}

void checkBytes(uint64_t v, const std::string &where, const char *field,
                const ProgramSite &site = {}) {
  if (static_cast<double>(v) > pipefill::kMaxBytes)
    fail(where + ": " + field + " must be at most 2^50 (got " + std::to_string(v) + ")", site);
}

// The stream-model rules of docs/runtime.md ("Validation"), one function each, in the order they
// run. Each adds what later rules need (the dependency graph, the per-device facts) to the state.
class Validator {
public:
  explicit Validator(const Program &program) : program_(program) {}
  ProgramInfo run();

private:
  // Sizes and numbers within the documented limits (docs/reliability.md).
  void checkLimits();
  // Job shapes: dims > 0, heads divide hidden, chained widths, one family, TRAINING layers.
  void checkJobShapes();
  // One MAIN stream per device; known roles and priorities.
  void checkStreamRoles(uint32_t d);
  // Bubbles only on MAIN, with unique ids.
  void checkBubbles(uint32_t d);
  // Per-op fields and references; builds the dependency graph's stream-order edges.
  void checkOps(uint32_t d);
  void checkFillChunk(uint32_t d, uint32_t s, uint32_t i);
  // Every alloc freed once.
  void checkAllocPairs(uint32_t d);
  // One record per event, no wait on an unrecorded event; record -> wait edges.
  void checkEvents(uint32_t d);
  // Matched sends/recvs of equal size; send -> recv edges.
  void checkSendRecvPairs();
  // The dependency graph of one iteration is acyclic.
  void checkNoDeadlock();
  // Every free ordered after its alloc.
  void checkFreeAfterAlloc();
  // No MAIN-stream op depends on a FILL-stream op.
  void checkFillNeverBlocksMain();
  // Every batch begun once, continued in order, finished.
  void checkBatchContinuity(uint32_t j);

  uint32_t node(uint32_t d, uint32_t s, uint32_t i) const { return base_[d][s] + i; }
  std::string loc(uint32_t d, uint32_t s, uint32_t i) const {
    return opLocation(program_, d, s, i);
  }
  std::string loc(const OpRef &o) const { return loc(o.device, o.stream, o.op); }
  const Op &opAt(const OpRef &o) const {
    return program_.devices[o.device].streams[o.stream].ops[o.op];
  }

  const Program &program_;
  ProgramInfo info_;
  std::vector<std::vector<uint32_t>> base_;
  std::vector<OpRef> nodes_;
  std::vector<std::vector<uint32_t>> edges_;
  using ChannelKey = std::tuple<uint32_t, uint32_t, uint32_t>; // src, dst, tag
  std::map<ChannelKey, OpRef> sends_, recvs_;
  // Per device being checked.
  std::vector<std::vector<OpRef>> recordsOf_, waitsOf_;
  std::map<uint32_t, int> allocs_, frees_;
};

ProgramInfo Validator::run() {
  if (program_.devices.empty())
    fail("program has no devices");
  checkLimits();
  const uint32_t numDevices = static_cast<uint32_t>(program_.devices.size());
  info_.devices.resize(numDevices);
  info_.jobs.resize(program_.jobs.size());
  checkJobShapes();

  base_.assign(numDevices, {});
  for (uint32_t d = 0; d < numDevices; ++d) {
    const Device &dev = program_.devices[d];
    for (uint32_t s = 0; s < dev.streams.size(); ++s) {
      base_[d].push_back(static_cast<uint32_t>(nodes_.size()));
      for (uint32_t i = 0; i < dev.streams[s].ops.size(); ++i)
        nodes_.push_back({d, s, i});
    }
  }
  edges_.assign(nodes_.size(), {});

  for (uint32_t d = 0; d < numDevices; ++d) {
    checkStreamRoles(d);
    checkBubbles(d);
    checkOps(d);
    checkAllocPairs(d);
    checkEvents(d);
  }
  checkSendRecvPairs();
  checkNoDeadlock();
  checkFreeAfterAlloc();
  checkFillNeverBlocksMain();
  for (uint32_t j = 0; j < program_.jobs.size(); ++j)
    checkBatchContinuity(j);
  return std::move(info_);
}

void Validator::checkLimits() {
  if (program_.devices.size() > kMaxDevices)
    fail("program has " + std::to_string(program_.devices.size()) + " devices; at most " +
         std::to_string(kMaxDevices) + " are supported");
  if (program_.iterations > kMaxIterations)
    fail("iterations = " + std::to_string(program_.iterations) + " exceeds " +
         std::to_string(kMaxIterations) +
         " per run; run fewer and resume from the checkpoint");
  checkTime(program_.plannedIterationUs, pipefill::kMaxUs, "program", "planned_iteration_us");
  size_t streams = 0;
  for (uint32_t d = 0; d < program_.devices.size(); ++d) {
    const Device &dev = program_.devices[d];
    std::string where = "device " + std::to_string(d);
    if (dev.streams.size() > kMaxStreamsPerDevice)
      fail(where + " has " + std::to_string(dev.streams.size()) + " streams; at most " +
               std::to_string(kMaxStreamsPerDevice) +
               " per device are supported (each is a thread on the host backend)",
           deviceSite(d));
    streams += dev.streams.size();
    const pfrt_device_desc &dd = dev.desc;
    for (auto f : {std::make_pair(dd.forward_us, "forward_us"),
                   std::make_pair(dd.backward_us, "backward_us"),
                   std::make_pair(dd.backward_input_us, "backward_input_us"),
                   std::make_pair(dd.backward_weight_us, "backward_weight_us"),
                   std::make_pair(dd.allreduce_us, "allreduce_us"),
                   std::make_pair(dd.optimizer_us, "optimizer_us"),
                   std::make_pair(dd.planned_iteration_us, "planned_iteration_us"),
                   std::make_pair(dd.p2p_latency_us, "p2p_latency_us")})
      checkTime(f.first, pipefill::kMaxUs, where, f.second, deviceSite(d));
    checkTime(dd.p2p_bandwidth_gbps, 1e6, where, "p2p_bandwidth_gbps", deviceSite(d));
    checkTime(dd.pcie_bandwidth_gbps, 1e6, where, "pcie_bandwidth_gbps", deviceSite(d));
    checkBytes(dd.memory_bytes, where, "memory_bytes", deviceSite(d));
    checkBytes(dd.static_bytes, where, "static_bytes", deviceSite(d));
    for (uint32_t s = 0; s < dev.streams.size(); ++s) {
      const Stream &st = dev.streams[s];
      if (st.ops.size() > kMaxOpsPerStream)
        fail(where + " stream " + std::to_string(s) + " has " + std::to_string(st.ops.size()) +
                 " ops; at most " + std::to_string(kMaxOpsPerStream) + " are supported",
             streamSite(d, s));
      for (uint32_t i = 0; i < st.ops.size(); ++i) {
        const Op &op = st.ops[i];
        std::string w = loc(d, s, i);
        checkTime(op.plannedUs, pipefill::kMaxUs, w, "planned_us", opSite(d, s, i));
        checkTime(op.plannedStartUs, pipefill::kMaxClockUs, w, "planned_start_us", opSite(d, s, i));
        checkBytes(op.bytes, w, "bytes", opSite(d, s, i));
        if (op.kind == OpKind::Bubble) {
          checkTime(op.bubble.planned_duration_us, pipefill::kMaxUs, w, "planned_duration_us",
                    opSite(d, s, i));
          checkTime(op.bubble.planned_start_us, pipefill::kMaxClockUs, w, "planned_start_us",
                    opSite(d, s, i));
          checkBytes(op.bubble.free_bytes, w, "free_bytes", opSite(d, s, i));
        } else if (op.kind == OpKind::Fill) {
          const pfrt_fill_chunk_desc &f = op.fill;
          checkTime(f.planned_us, pipefill::kMaxUs, w, "planned_us", opSite(d, s, i));
          checkBytes(f.peak_bytes, w, "peak_bytes", opSite(d, s, i));
          if (f.iteration_offset < -kMaxIterationSpan)
            fail(w + ": iteration_offset " + std::to_string(f.iteration_offset) + " is below -" +
                     std::to_string(kMaxIterationSpan) +
                     " (a batch may span at most that many iterations)",
                 opSite(d, s, i));
          if (f.period > kMaxIterationSpan || f.phase > kMaxIterationSpan)
            fail(w + ": period and phase must be at most " + std::to_string(kMaxIterationSpan),
                 opSite(d, s, i));
          if (f.batch > kMaxFillBatch)
            fail(w + ": batch " + std::to_string(f.batch) + " exceeds " +
                     std::to_string(kMaxFillBatch),
                 opSite(d, s, i));
          if (static_cast<double>(f.sample_begin) >= pipefill::kMaxBytes)
            fail(w + ": sample_begin must be below 2^50", opSite(d, s, i));
        }
      }
    }
  }
  if (streams > kMaxStreams)
    fail("program has " + std::to_string(streams) + " streams in all; the host backend runs "
         "one thread per stream and supports at most " + std::to_string(kMaxStreams));
  if (program_.jobs.size() > kMaxFillJobs)
    fail("program has " + std::to_string(program_.jobs.size()) + " fill jobs; at most " +
         std::to_string(kMaxFillJobs) + " are supported");
  for (uint32_t j = 0; j < program_.jobs.size(); ++j) {
    const FillJob &job = program_.jobs[j];
    std::string where = "fill job " + std::to_string(j) + " ('" + job.name + "')";
    if (job.layers.size() > kMaxFillLayers)
      fail(where + ": " + std::to_string(job.layers.size()) + " layers; at most " +
               std::to_string(kMaxFillLayers) + " are supported",
           jobSite(j));
    if (static_cast<double>(job.samples) > 1e15)
      fail(where + ": samples must be at most 1e15 (got " + std::to_string(job.samples) + ")",
           jobSite(j));
    if (job.samplesPerIteration > (uint64_t(1) << 20))
      fail(where + ": samples_per_iteration must be at most 2^20", jobSite(j));
    if (!(job.learningRate >= 0 && job.learningRate <= 10))
      fail(where + ": learning_rate must be in [0, 10] (got " + num(job.learningRate) + ")",
           jobSite(j));
    for (size_t l = 0; l < job.layers.size(); ++l) {
      const pfrt_fill_layer_desc &d = job.layers[l].desc;
      std::string lw = where + " layer " + std::to_string(l);
      checkTime(d.planned_us_per_sample, pipefill::kMaxUs, lw, "planned_us_per_sample",
                jobSite(j, l));
      checkTime(d.planned_backward_us_per_sample, pipefill::kMaxUs, lw,
                "planned_backward_us_per_sample", jobSite(j, l));
      checkBytes(d.weight_bytes, lw, "weight_bytes", jobSite(j, l));
      for (uint32_t dim : {d.hidden, d.seq, d.in, d.out, d.width})
        if (dim > kMaxLayerDim)
          fail(lw + ": a dimension of " + std::to_string(dim) + " exceeds " +
                   std::to_string(kMaxLayerDim),
               jobSite(j, l));
      if (d.ffn > 4 * kMaxLayerDim || d.heads > 4096 || d.dim > 16384)
        fail(lw + ": ffn, heads or dim out of range", jobSite(j, l));
    }
  }
}

void Validator::checkJobShapes() {
  for (uint32_t j = 0; j < program_.jobs.size(); ++j) {
    const FillJob &job = program_.jobs[j];
    std::string where = "fill job " + std::to_string(j) + " ('" + job.name + "')";
    if (job.kind != PFRT_FILL_INFERENCE && job.kind != PFRT_FILL_TRAINING)
      fail(where + ": kind must be INFERENCE or TRAINING", jobSite(j));
    std::vector<pipefill::LayerShape> shapes;
    for (size_t l = 0; l < job.layers.size(); ++l) {
      const pfrt_fill_layer_desc &d = job.layers[l].desc;
      pipefill::LayerShape shape;
      switch (d.kind) {
      case PFRT_LAYER_ENCODER: shape.family = pipefill::LayerFamily::Encoder; break;
      case PFRT_LAYER_MLP: shape.family = pipefill::LayerFamily::Mlp; break;
      case PFRT_LAYER_GEMM_CHAIN: shape.family = pipefill::LayerFamily::GemmChain; break;
      default:
        fail(where + " layer " + std::to_string(l) + ": unknown layer kind " +
                 std::to_string(static_cast<int>(d.kind)),
             jobSite(j, l));
      }
      shape.hidden = d.hidden;
      shape.heads = d.heads;
      shape.seq = d.seq;
      shape.ffn = d.ffn;
      shape.in = d.in;
      shape.out = d.out;
      shape.width = d.width;
      shapes.push_back(shape);
    }
    pipefill::LayerProblem problem;
    if (!pipefill::checkFillLayers(job.kind == PFRT_FILL_TRAINING, shapes, problem))
      fail(where + (problem.layer >= 0 ? " layer " + std::to_string(problem.layer) : "") + ": " +
               problem.message,
           jobSite(j, problem.layer));
    info_.jobs[j].passes = job.passes();
  }
}

void Validator::checkStreamRoles(uint32_t d) {
  const Device &dev = program_.devices[d];
  ProgramInfo::DeviceInfo &di = info_.devices[d];
  if (dev.streams.empty())
    fail("device " + std::to_string(d) + " has no streams", deviceSite(d));
  int mains = 0;
  for (uint32_t s = 0; s < dev.streams.size(); ++s) {
    const Stream &st = dev.streams[s];
    if (st.role != PFRT_STREAM_MAIN && st.role != PFRT_STREAM_FILL && st.role != PFRT_STREAM_COPY)
      fail("device " + std::to_string(d) + " stream " + std::to_string(s) +
               ": role must be MAIN, FILL or COPY",
           streamSite(d, s));
    if (st.priority < PFRT_PRIORITY_DEFAULT || st.priority > PFRT_PRIORITY_LOW)
      fail("device " + std::to_string(d) + " stream " + std::to_string(s) + ": unknown priority " +
               std::to_string(static_cast<int>(st.priority)),
           streamSite(d, s));
    if (st.role == PFRT_STREAM_MAIN && mains++ == 0)
      di.mainStream = s;
  }
  if (mains != 1)
    fail("device " + std::to_string(d) + " has " + std::to_string(mains) +
             " MAIN streams; exactly one is required",
         deviceSite(d));
  di.eventWaiters.assign(dev.events.size(), 0);
  di.streamHasFill.assign(dev.streams.size(), false);
}

void Validator::checkBubbles(uint32_t d) {
  // Bubbles first: fill chunks refer to them regardless of order.
  const Device &dev = program_.devices[d];
  ProgramInfo::DeviceInfo &di = info_.devices[d];
  for (uint32_t s = 0; s < dev.streams.size(); ++s) {
    const Stream &st = dev.streams[s];
    for (uint32_t i = 0; i < st.ops.size(); ++i) {
      const Op &op = st.ops[i];
      if (op.kind != OpKind::Bubble)
        continue;
      if (s != di.mainStream)
        fail(loc(d, s, i) + ": bubble markers belong on the MAIN stream", opSite(d, s, i));
      if (op.bubble.planned_duration_us < 0 || op.bubble.planned_start_us < 0)
        fail(loc(d, s, i) + ": negative bubble start or duration", opSite(d, s, i));
      if (op.bubble.kind < PFRT_BUBBLE_UNSPECIFIED || op.bubble.kind > PFRT_BUBBLE_TAIL)
        fail(loc(d, s, i) + ": unknown bubble kind", opSite(d, s, i));
      if (!di.bubbleOp.emplace(op.bubble.bubble_id, i).second)
        fail(loc(d, s, i) + ": bubble id " + std::to_string(op.bubble.bubble_id) +
                 " is used twice on this device",
             opSite(d, s, i));
    }
  }
}

void Validator::checkOps(uint32_t d) {
  const Device &dev = program_.devices[d];
  const uint32_t numDevices = static_cast<uint32_t>(program_.devices.size());
  recordsOf_.assign(dev.events.size(), {});
  waitsOf_.assign(dev.events.size(), {});
  allocs_.clear();
  frees_.clear();
  for (uint32_t s = 0; s < dev.streams.size(); ++s) {
    const Stream &st = dev.streams[s];
    for (uint32_t i = 0; i < st.ops.size(); ++i) {
      const Op &op = st.ops[i];
      if (i + 1 < st.ops.size())
        edges_[node(d, s, i)].push_back(node(d, s, i + 1));
      switch (op.kind) {
      case OpKind::Compute:
        if (op.compute < PFRT_COMPUTE_FORWARD || op.compute > PFRT_COMPUTE_OPTIMIZER)
          fail(loc(d, s, i) + ": unknown compute kind " +
                   std::to_string(static_cast<int>(op.compute)),
               opSite(d, s, i));
        if (st.role == PFRT_STREAM_FILL)
          fail(loc(d, s, i) + ": main-job compute on a FILL stream", opSite(d, s, i));
        break;
      case OpKind::Send:
      case OpKind::Recv: {
        if (op.peer >= numDevices)
          fail(loc(d, s, i) + ": peer device " + std::to_string(op.peer) +
                   " does not exist (program has " + std::to_string(numDevices) + " devices)",
               opSite(d, s, i));
        if (op.peer == d)
          fail(loc(d, s, i) + ": peer is the device itself", opSite(d, s, i));
        bool isSend = op.kind == OpKind::Send;
        ChannelKey key = isSend ? ChannelKey{d, op.peer, op.tag} : ChannelKey{op.peer, d, op.tag};
        auto &table = isSend ? sends_ : recvs_;
        auto inserted = table.emplace(key, OpRef{d, s, i});
        if (!inserted.second)
          fail(loc(d, s, i) + ": a second " + (isSend ? "send" : "recv") + " with tag " +
                   std::to_string(op.tag) + " between devices " + std::to_string(std::get<0>(key)) +
                   " and " + std::to_string(std::get<1>(key)) + " (first at " +
                   loc(inserted.first->second) + ")",
               opSite(d, s, i));
        break;
      }
      case OpKind::Record:
      case OpKind::Wait:
        if (op.event >= dev.events.size())
          fail(loc(d, s, i) + ": event " + std::to_string(op.event) +
                   " does not exist (device has " + std::to_string(dev.events.size()) + " events)",
               opSite(d, s, i));
        (op.kind == OpKind::Record ? recordsOf_ : waitsOf_)[op.event].push_back({d, s, i});
        break;
      case OpKind::Bubble:
        break;
      case OpKind::Fill:
        checkFillChunk(d, s, i);
        break;
      case OpKind::Copy:
        if (op.direction != PFRT_COPY_HOST_TO_DEVICE && op.direction != PFRT_COPY_DEVICE_TO_HOST)
          fail(loc(d, s, i) + ": unknown copy direction", opSite(d, s, i));
        break;
      case OpKind::Alloc:
        if (allocs_[op.buffer]++)
          fail(loc(d, s, i) + ": buffer " + std::to_string(op.buffer) + " is allocated twice",
               opSite(d, s, i));
        break;
      case OpKind::Free:
        if (frees_[op.buffer]++)
          fail(loc(d, s, i) + ": buffer " + std::to_string(op.buffer) + " is freed twice",
               opSite(d, s, i));
        break;
      }
    }
  }
}

void Validator::checkFillChunk(uint32_t d, uint32_t s, uint32_t i) {
  const Stream &st = program_.devices[d].streams[s];
  const pfrt_fill_chunk_desc &f = st.ops[i].fill;
  ProgramInfo::DeviceInfo &di = info_.devices[d];
  if (st.role == PFRT_STREAM_MAIN)
    fail(loc(d, s, i) + ": fill chunks must not run on the MAIN stream", opSite(d, s, i));
  if (f.job >= program_.jobs.size())
    fail(loc(d, s, i) + ": fill job " + std::to_string(f.job) + " does not exist (program has " +
             std::to_string(program_.jobs.size()) + " fill jobs)",
         opSite(d, s, i));
  if (!di.bubbleOp.count(f.bubble_id))
    fail(loc(d, s, i) + ": bubble id " + std::to_string(f.bubble_id) +
             " is not a bubble of device " + std::to_string(d),
         opSite(d, s, i));
  uint32_t passes = info_.jobs[f.job].passes;
  if (f.layer_begin >= f.layer_end || f.layer_end > passes)
    fail(loc(d, s, i) + ": layer range [" + std::to_string(f.layer_begin) + ", " +
             std::to_string(f.layer_end) + ") is not within the job's " + std::to_string(passes) +
             " passes",
         opSite(d, s, i));
  if (f.batch == 0)
    fail(loc(d, s, i) + ": batch must be > 0", opSite(d, s, i));
  if (f.iteration_offset > 0)
    fail(loc(d, s, i) + ": iteration_offset must be <= 0", opSite(d, s, i));
  ProgramInfo::JobInfo &ji = info_.jobs[f.job];
  auto placed = ji.streamOnDevice.emplace(d, s);
  if (!placed.second && placed.first->second != s)
    fail(loc(d, s, i) + ": chunks of fill job " + std::to_string(f.job) + " on device " +
             std::to_string(d) + " are on streams " + std::to_string(placed.first->second) +
             " and " + std::to_string(s) + "; one stream per job and device is required",
         opSite(d, s, i));
  ji.minIterationOffset = std::min(ji.minIterationOffset, f.iteration_offset);
  di.streamHasFill[s] = true;
}

void Validator::checkAllocPairs(uint32_t d) {
  for (const auto &kv : allocs_)
    if (!frees_.count(kv.first))
      fail("device " + std::to_string(d) + ": buffer " + std::to_string(kv.first) +
               " is allocated but never freed in the iteration body",
           deviceSite(d));
  for (const auto &kv : frees_)
    if (!allocs_.count(kv.first))
      fail("device " + std::to_string(d) + ": buffer " + std::to_string(kv.first) +
               " is freed but never allocated",
           deviceSite(d));
}

void Validator::checkEvents(uint32_t d) {
  ProgramInfo::DeviceInfo &di = info_.devices[d];
  for (uint32_t e = 0; e < recordsOf_.size(); ++e) {
    if (recordsOf_[e].size() > 1)
      fail(loc(recordsOf_[e][1]) + ": event " + std::to_string(e) +
               " is recorded twice in the iteration body (once per iteration is allowed)",
           opSite(recordsOf_[e][1]));
    if (!waitsOf_[e].empty() && recordsOf_[e].empty())
      fail(loc(waitsOf_[e][0]) + ": waits on event " + std::to_string(e) +
               " which is never recorded",
           opSite(waitsOf_[e][0]));
    di.eventWaiters[e] = static_cast<uint32_t>(waitsOf_[e].size());
    for (const OpRef &w : waitsOf_[e]) {
      const OpRef &r = recordsOf_[e][0];
      edges_[node(r.device, r.stream, r.op)].push_back(node(w.device, w.stream, w.op));
    }
  }
}

void Validator::checkSendRecvPairs() {
  for (const auto &kv : sends_) {
    auto it = recvs_.find(kv.first);
    const OpRef &o = kv.second;
    if (it == recvs_.end())
      fail(loc(o) + ": send to device " + std::to_string(std::get<1>(kv.first)) + " with tag " +
               std::to_string(std::get<2>(kv.first)) + " has no matching recv",
           opSite(o));
    const OpRef &r = it->second;
    uint64_t sb = opAt(o).bytes, rb = opAt(r).bytes;
    if (sb != rb)
      fail(loc(r) + ": recv of " + std::to_string(rb) + " bytes does not match the send of " +
               std::to_string(sb) + " bytes at " + loc(o),
           opSite(r));
    edges_[node(o.device, o.stream, o.op)].push_back(node(r.device, r.stream, r.op));
  }
  for (const auto &kv : recvs_)
    if (!sends_.count(kv.first))
      fail(loc(kv.second) + ": recv from device " + std::to_string(std::get<0>(kv.first)) +
               " with tag " + std::to_string(std::get<2>(kv.first)) + " has no matching send",
           opSite(kv.second));
}

void Validator::checkNoDeadlock() {
  // Edges across iterations only follow stream order, so an acyclic graph of one iteration makes
  // the unrolled run acyclic too.
  int64_t blocked = pipefill::findBlockedNode(edges_, [&](uint32_t v) {
    const OpRef &o = nodes_[v];
    return o.op > 0 ? static_cast<int64_t>(node(o.device, o.stream, o.op - 1)) : int64_t(-1);
  });
  if (blocked >= 0)
    fail(loc(nodes_[blocked]) +
             ": can never run: the waits/receives of one iteration form a dependency cycle "
             "(deadlock)",
         opSite(nodes_[blocked]));
}

void Validator::checkFreeAfterAlloc() {
  for (uint32_t d = 0; d < program_.devices.size(); ++d) {
    const Device &dev = program_.devices[d];
    std::map<uint32_t, OpRef> allocAt, freeAt;
    for (uint32_t s = 0; s < dev.streams.size(); ++s)
      for (uint32_t i = 0; i < dev.streams[s].ops.size(); ++i) {
        const Op &op = dev.streams[s].ops[i];
        if (op.kind == OpKind::Alloc)
          allocAt[op.buffer] = {d, s, i};
        else if (op.kind == OpKind::Free)
          freeAt[op.buffer] = {d, s, i};
      }
    for (const auto &kv : allocAt) {
      const OpRef &a = kv.second, &f = freeAt.at(kv.first);
      std::vector<char> seen(nodes_.size(), 0);
      std::deque<uint32_t> queue{node(a.device, a.stream, a.op)};
      const uint32_t target = node(f.device, f.stream, f.op);
      bool found = false;
      while (!queue.empty() && !found) {
        uint32_t u = queue.front();
        queue.pop_front();
        for (uint32_t v : edges_[u]) {
          if (v == target)
            found = true;
          if (!seen[v]) {
            seen[v] = 1;
            queue.push_back(v);
          }
        }
      }
      if (!found)
        fail(loc(f) + ": frees buffer " + std::to_string(kv.first) +
                 " but is not ordered after its alloc at " + loc(a) +
                 " (same stream, or a wait on an event recorded after the alloc)",
             opSite(f));
    }
  }
}

void Validator::checkFillNeverBlocksMain() {
  std::vector<char> reached(nodes_.size(), 0);
  std::vector<uint32_t> origin(nodes_.size(), 0);
  std::deque<uint32_t> queue;
  auto role = [&](uint32_t v) {
    return program_.devices[nodes_[v].device].streams[nodes_[v].stream].role;
  };
  for (uint32_t v = 0; v < nodes_.size(); ++v)
    if (role(v) == PFRT_STREAM_FILL) {
      reached[v] = 1;
      origin[v] = v;
      queue.push_back(v);
    }
  while (!queue.empty()) {
    uint32_t u = queue.front();
    queue.pop_front();
    for (uint32_t v : edges_[u]) {
      if (reached[v])
        continue;
      reached[v] = 1;
      origin[v] = origin[u];
      if (role(v) == PFRT_STREAM_MAIN)
        fail(loc(nodes_[v]) + ": the MAIN stream depends on " + loc(nodes_[origin[v]]) +
                 "; fill work must never block the main stream",
             opSite(nodes_[v]));
      queue.push_back(v);
    }
  }
}

void Validator::checkBatchContinuity(uint32_t j) {
  const FillJob &job = program_.jobs[j];
  ProgramInfo::JobInfo &ji = info_.jobs[j];
  std::string where = "fill job " + std::to_string(j) + " ('" + job.name + "')";
  if (job.kind == PFRT_FILL_TRAINING && ji.streamOnDevice.size() > 1)
    fail(where + ": a TRAINING job must be placed on one device (it is on devices " +
             std::to_string(ji.streamOnDevice.begin()->first) + " and " +
             std::to_string(std::next(ji.streamOnDevice.begin())->first) + ")",
         jobSite(j));
  // Chunks per device in stream order.
  std::map<uint32_t, std::vector<std::pair<uint32_t, const pfrt_fill_chunk_desc *>>> chunks;
  uint64_t derived = 0;
  std::vector<std::pair<uint64_t, uint64_t>> starts; // [begin, end) of batches begun
  for (const auto &ds : ji.streamOnDevice) {
    const Stream &st = program_.devices[ds.first].streams[ds.second];
    for (uint32_t i = 0; i < st.ops.size(); ++i) {
      const Op &op = st.ops[i];
      if (op.kind != OpKind::Fill || op.fill.job != j)
        continue;
      chunks[ds.first].push_back({i, &op.fill});
      if (op.fill.layer_begin == 0) {
        derived += op.fill.batch;
        starts.push_back({op.fill.sample_begin, op.fill.sample_begin + op.fill.batch});
      }
    }
  }
  ji.stride = job.samplesPerIteration ? job.samplesPerIteration : derived;
  std::sort(starts.begin(), starts.end());
  for (size_t k = 0; k < starts.size(); ++k) {
    if (starts[k].second > ji.stride)
      fail(where + ": batch [" + std::to_string(starts[k].first) + ", " +
               std::to_string(starts[k].second) + ") lies outside the " +
               std::to_string(ji.stride) + " samples per iteration",
           jobSite(j));
    if (k && starts[k].first < starts[k - 1].second)
      fail(where + ": batches [" + std::to_string(starts[k - 1].first) + ", " +
               std::to_string(starts[k - 1].second) + ") and [" + std::to_string(starts[k].first) +
               ", " + std::to_string(starts[k].second) + ") overlap",
           jobSite(j));
  }
  // Simulate the cursor over enough iterations to see every batch begin and end. The limits
  // bound span and period by kMaxIterationSpan, so this loop is bounded too.
  const int64_t span = -static_cast<int64_t>(ji.minIterationOffset);
  int64_t period = 1;
  for (const auto &dc : chunks)
    for (const auto &c : dc.second) {
      int64_t p = c.second->period ? c.second->period : 1;
      if (period != 1 && p != period)
        fail(loc(dc.first, ji.streamOnDevice[dc.first], c.first) + ": " + where +
                 " mixes periods " + std::to_string(period) + " and " + std::to_string(p) +
                 "; all chunks of a job share one period",
             opSite(dc.first, ji.streamOnDevice[dc.first], c.first));
      period = p;
    }
  const int64_t simIterations = (span + 2) * period;
  for (const auto &dc : chunks) {
    const uint32_t d = dc.first;
    const uint32_t s = ji.streamOnDevice[d];
    struct Flight {
      uint32_t next;
      uint32_t batch;
      int64_t began;
    };
    std::map<int64_t, Flight> flights; // by absolute sample begin
    for (int64_t it = 0; it < simIterations; ++it) {
      for (const auto &c : dc.second) {
        const pfrt_fill_chunk_desc &f = *c.second;
        int64_t logical = 0;
        if (!chunkRunsIn(f, it, &logical) || logical < 0)
          continue;
        int64_t sb =
            static_cast<int64_t>(f.sample_begin) + logical * static_cast<int64_t>(ji.stride);
        auto found = flights.find(sb);
        if (f.layer_begin == 0) {
          if (found != flights.end())
            fail(loc(d, s, c.first) + ": begins samples [" + std::to_string(sb) + ", ...) of " +
                     where + " again while that batch is still in flight at layer " +
                     std::to_string(found->second.next),
                 opSite(d, s, c.first));
          flights[sb] = {f.layer_end, f.batch, it};
        } else {
          if (found == flights.end())
            fail(loc(d, s, c.first) + ": continues layers [" + std::to_string(f.layer_begin) +
                     ", " + std::to_string(f.layer_end) + ") of samples [" + std::to_string(sb) +
                     ", ...) of " + where +
                     " but no chunk on this device began that batch (check sample_begin and "
                     "iteration_offset)",
                 opSite(d, s, c.first));
          if (found->second.next != f.layer_begin)
            fail(loc(d, s, c.first) + ": continues " + where + " at layer " +
                     std::to_string(f.layer_begin) + " but the batch is at layer " +
                     std::to_string(found->second.next),
                 opSite(d, s, c.first));
          if (found->second.batch != f.batch)
            fail(loc(d, s, c.first) + ": batch " + std::to_string(f.batch) +
                     " differs from the batch " + std::to_string(found->second.batch) +
                     " the chunk that began it used",
                 opSite(d, s, c.first));
          found->second.next = f.layer_end;
        }
        auto cur = flights.find(sb);
        if (cur->second.next == ji.passes)
          flights.erase(cur);
      }
    }
    for (const auto &fl : flights)
      if (fl.second.began + (span + 1) * period <= simIterations - 1)
        fail(where + ": on device " + std::to_string(d) + " the batch beginning at sample " +
                 std::to_string(fl.first) + " never reaches the last layer (stuck at layer " +
                 std::to_string(fl.second.next) + ")",
             jobSite(j));
  }
}

} // namespace

ProgramInfo validate(const Program &program) { return Validator(program).run(); }

uint64_t physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && pageSize > 0 ? uint64_t(pages) * uint64_t(pageSize) : uint64_t(1) << 34;
}

void checkRunFits(const Program &program, uint64_t iterations) {
  uint64_t ops = 0, streams = 0;
  for (const Device &d : program.devices)
    for (const Stream &s : d.streams) {
      ops += s.ops.size();
      ++streams;
    }
  // The executor keeps one 16-byte timeline slot per op per iteration (docs/runtime.md §11).
  const uint64_t need = pipefill::satMulU(pipefill::satMulU(ops, iterations), 16);
  const uint64_t have = physicalMemoryBytes();
  if (need > have / 2)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "the run's timeline needs " + std::to_string(need) + " bytes (" +
                    std::to_string(ops) + " ops x " + std::to_string(iterations) +
                    " iterations x 16 B) but the machine has " + std::to_string(have) +
                    " bytes of memory; run fewer iterations and resume from the checkpoint");
  if (streams > kMaxStreams)
    throw Error(PFRT_ERROR_INVALID_ARGUMENT,
                "the run needs " + std::to_string(streams) + " stream threads; at most " +
                    std::to_string(kMaxStreams) + " are supported");
}

} // namespace pfrt
