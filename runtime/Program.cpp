#include "runtime/Program.h"

#include <algorithm>
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

[[noreturn]] void fail(const std::string &message) {
  throw Error(PFRT_ERROR_INVALID_PROGRAM, message);
}

struct OpRef {
  uint32_t device, stream, op;
};

// Family of a job's activations: rows per sample x width.
void checkJob(const Program &program, uint32_t j) {
  const FillJob &job = program.jobs[j];
  std::string where = "fill job " + std::to_string(j) + " ('" + job.name + "')";
  if (job.kind != PFRT_FILL_INFERENCE && job.kind != PFRT_FILL_TRAINING)
    fail(where + ": kind must be INFERENCE or TRAINING");
  if (job.layers.empty())
    fail(where + ": has no layers");
  bool encoder = false, mlp = false;
  uint32_t width = 0;
  uint32_t hidden = 0, seq = 0;
  for (size_t l = 0; l < job.layers.size(); ++l) {
    const pfrt_fill_layer_desc &d = job.layers[l].desc;
    std::string lw = where + " layer " + std::to_string(l);
    if (d.planned_us_per_sample < 0 || d.planned_backward_us_per_sample < 0)
      fail(lw + ": negative planned time");
    switch (d.kind) {
    case PFRT_LAYER_ENCODER:
      if (job.kind == PFRT_FILL_TRAINING)
        fail(lw + ": TRAINING jobs support MLP and GEMM_CHAIN layers only");
      if (d.hidden == 0 || d.heads == 0 || d.seq == 0 || d.ffn == 0)
        fail(lw + ": encoder layer needs hidden, heads, seq and ffn > 0");
      if (d.hidden % d.heads != 0)
        fail(lw + ": hidden (" + std::to_string(d.hidden) + ") is not a multiple of heads (" +
             std::to_string(d.heads) + ")");
      if (encoder && (d.hidden != hidden || d.seq != seq))
        fail(lw + ": all encoder layers of a job must have the same hidden and seq");
      if (width != 0 && width != d.hidden)
        fail(lw + ": input width " + std::to_string(d.hidden) +
             " does not match the previous layer's output width " + std::to_string(width));
      encoder = true;
      hidden = d.hidden;
      seq = d.seq;
      width = d.hidden;
      break;
    case PFRT_LAYER_MLP:
      if (d.in == 0 || d.hidden == 0 || d.out == 0)
        fail(lw + ": MLP layer needs in, hidden and out > 0");
      if (width != 0 && width != d.in)
        fail(lw + ": MLP input width " + std::to_string(d.in) +
             " does not match the previous layer's output width " + std::to_string(width));
      mlp = true;
      width = d.out;
      break;
    case PFRT_LAYER_GEMM_CHAIN:
      if (d.width != 0 && width != 0 && d.width != width)
        fail(lw + ": GEMM_CHAIN width " + std::to_string(d.width) +
             " does not match the previous layer's output width " + std::to_string(width));
      if (width == 0)
        width = d.width ? d.width : 64;
      break;
    default:
      fail(lw + ": unknown layer kind " + std::to_string(static_cast<int>(d.kind)));
    }
  }
  if (encoder && mlp)
    fail(where + ": mixes ENCODER and MLP layers (one family per job)");
}

} // namespace

ProgramInfo validate(const Program &program) {
  ProgramInfo info;
  if (program.devices.empty())
    fail("program has no devices");
  const uint32_t numDevices = static_cast<uint32_t>(program.devices.size());
  info.devices.resize(numDevices);
  info.jobs.resize(program.jobs.size());
  for (uint32_t j = 0; j < program.jobs.size(); ++j) {
    checkJob(program, j);
    info.jobs[j].passes = program.jobs[j].passes();
  }

  // Node numbering for the dependency graph.
  std::vector<std::vector<uint32_t>> base(numDevices);
  std::vector<OpRef> nodes;
  for (uint32_t d = 0; d < numDevices; ++d) {
    const Device &dev = program.devices[d];
    for (uint32_t s = 0; s < dev.streams.size(); ++s) {
      base[d].push_back(static_cast<uint32_t>(nodes.size()));
      for (uint32_t i = 0; i < dev.streams[s].ops.size(); ++i)
        nodes.push_back({d, s, i});
    }
  }
  std::vector<std::vector<uint32_t>> edges(nodes.size());
  auto node = [&](uint32_t d, uint32_t s, uint32_t i) { return base[d][s] + i; };
  auto loc = [&](uint32_t d, uint32_t s, uint32_t i) { return opLocation(program, d, s, i); };

  using ChannelKey = std::tuple<uint32_t, uint32_t, uint32_t>; // src, dst, tag
  std::map<ChannelKey, OpRef> sends, recvs;

  for (uint32_t d = 0; d < numDevices; ++d) {
    const Device &dev = program.devices[d];
    ProgramInfo::DeviceInfo &di = info.devices[d];
    if (dev.streams.empty())
      fail("device " + std::to_string(d) + " has no streams");
    int mains = 0;
    for (uint32_t s = 0; s < dev.streams.size(); ++s) {
      const Stream &st = dev.streams[s];
      if (st.role != PFRT_STREAM_MAIN && st.role != PFRT_STREAM_FILL &&
          st.role != PFRT_STREAM_COPY)
        fail("device " + std::to_string(d) + " stream " + std::to_string(s) +
             ": role must be MAIN, FILL or COPY");
      if (st.priority < PFRT_PRIORITY_DEFAULT || st.priority > PFRT_PRIORITY_LOW)
        fail("device " + std::to_string(d) + " stream " + std::to_string(s) +
             ": unknown priority " + std::to_string(static_cast<int>(st.priority)));
      if (st.role == PFRT_STREAM_MAIN) {
        if (mains++ == 0)
          di.mainStream = s;
      }
    }
    if (mains != 1)
      fail("device " + std::to_string(d) + " has " + std::to_string(mains) +
           " MAIN streams; exactly one is required");

    di.eventWaiters.assign(dev.events.size(), 0);
    di.streamHasFill.assign(dev.streams.size(), false);
    std::vector<std::vector<OpRef>> recordsOf(dev.events.size()), waitsOf(dev.events.size());
    std::map<uint32_t, int> allocs, frees;

    // Bubbles first (fill chunks refer to them regardless of order).
    for (uint32_t s = 0; s < dev.streams.size(); ++s) {
      const Stream &st = dev.streams[s];
      for (uint32_t i = 0; i < st.ops.size(); ++i) {
        const Op &op = st.ops[i];
        if (op.kind != OpKind::Bubble)
          continue;
        if (s != di.mainStream)
          fail(loc(d, s, i) + ": bubble markers belong on the MAIN stream");
        if (op.bubble.planned_duration_us < 0 || op.bubble.planned_start_us < 0)
          fail(loc(d, s, i) + ": negative bubble start or duration");
        if (op.bubble.kind < PFRT_BUBBLE_UNSPECIFIED || op.bubble.kind > PFRT_BUBBLE_TAIL)
          fail(loc(d, s, i) + ": unknown bubble kind");
        if (!di.bubbleOp.emplace(op.bubble.bubble_id, i).second)
          fail(loc(d, s, i) + ": bubble id " + std::to_string(op.bubble.bubble_id) +
               " is used twice on this device");
      }
    }

    for (uint32_t s = 0; s < dev.streams.size(); ++s) {
      const Stream &st = dev.streams[s];
      for (uint32_t i = 0; i < st.ops.size(); ++i) {
        const Op &op = st.ops[i];
        if (i + 1 < st.ops.size())
          edges[node(d, s, i)].push_back(node(d, s, i + 1));
        switch (op.kind) {
        case OpKind::Compute:
          if (op.compute < PFRT_COMPUTE_FORWARD || op.compute > PFRT_COMPUTE_OPTIMIZER)
            fail(loc(d, s, i) + ": unknown compute kind " +
                 std::to_string(static_cast<int>(op.compute)));
          if (op.plannedUs < 0)
            fail(loc(d, s, i) + ": negative planned_us");
          if (st.role == PFRT_STREAM_FILL)
            fail(loc(d, s, i) + ": main-job compute on a FILL stream");
          break;
        case OpKind::Send:
        case OpKind::Recv: {
          if (op.peer >= numDevices)
            fail(loc(d, s, i) + ": peer device " + std::to_string(op.peer) +
                 " does not exist (program has " + std::to_string(numDevices) + " devices)");
          if (op.peer == d)
            fail(loc(d, s, i) + ": peer is the device itself");
          if (op.plannedUs < 0)
            fail(loc(d, s, i) + ": negative planned_us");
          bool isSend = op.kind == OpKind::Send;
          ChannelKey key = isSend ? ChannelKey{d, op.peer, op.tag} : ChannelKey{op.peer, d, op.tag};
          auto &table = isSend ? sends : recvs;
          auto inserted = table.emplace(key, OpRef{d, s, i});
          if (!inserted.second) {
            const OpRef &o = inserted.first->second;
            fail(loc(d, s, i) + ": a second " + (isSend ? "send" : "recv") + " with tag " +
                 std::to_string(op.tag) + " between devices " + std::to_string(std::get<0>(key)) +
                 " and " + std::to_string(std::get<1>(key)) + " (first at " +
                 loc(o.device, o.stream, o.op) + ")");
          }
          break;
        }
        case OpKind::Record:
        case OpKind::Wait:
          if (op.event >= dev.events.size())
            fail(loc(d, s, i) + ": event " + std::to_string(op.event) +
                 " does not exist (device has " + std::to_string(dev.events.size()) + " events)");
          (op.kind == OpKind::Record ? recordsOf : waitsOf)[op.event].push_back({d, s, i});
          break;
        case OpKind::Bubble:
          break;
        case OpKind::Fill: {
          const pfrt_fill_chunk_desc &f = op.fill;
          if (st.role == PFRT_STREAM_MAIN)
            fail(loc(d, s, i) + ": fill chunks must not run on the MAIN stream");
          if (f.job >= program.jobs.size())
            fail(loc(d, s, i) + ": fill job " + std::to_string(f.job) +
                 " does not exist (program has " + std::to_string(program.jobs.size()) +
                 " fill jobs)");
          if (!di.bubbleOp.count(f.bubble_id))
            fail(loc(d, s, i) + ": bubble id " + std::to_string(f.bubble_id) +
                 " is not a bubble of device " + std::to_string(d));
          uint32_t passes = info.jobs[f.job].passes;
          if (f.layer_begin >= f.layer_end || f.layer_end > passes)
            fail(loc(d, s, i) + ": layer range [" + std::to_string(f.layer_begin) + ", " +
                 std::to_string(f.layer_end) + ") is not within the job's " +
                 std::to_string(passes) + " passes");
          if (f.batch == 0)
            fail(loc(d, s, i) + ": batch must be > 0");
          if (f.iteration_offset > 0)
            fail(loc(d, s, i) + ": iteration_offset must be <= 0");
          if (f.planned_us < 0)
            fail(loc(d, s, i) + ": negative planned_us");
          ProgramInfo::JobInfo &ji = info.jobs[f.job];
          auto placed = ji.streamOnDevice.emplace(d, s);
          if (!placed.second && placed.first->second != s)
            fail(loc(d, s, i) + ": chunks of fill job " + std::to_string(f.job) +
                 " on device " + std::to_string(d) + " are on streams " +
                 std::to_string(placed.first->second) + " and " + std::to_string(s) +
                 "; one stream per job and device is required");
          ji.minIterationOffset = std::min(ji.minIterationOffset, f.iteration_offset);
          di.streamHasFill[s] = true;
          break;
        }
        case OpKind::Copy:
          if (op.direction != PFRT_COPY_HOST_TO_DEVICE && op.direction != PFRT_COPY_DEVICE_TO_HOST)
            fail(loc(d, s, i) + ": unknown copy direction");
          if (op.plannedUs < 0)
            fail(loc(d, s, i) + ": negative planned_us");
          break;
        case OpKind::Alloc:
          if (allocs[op.buffer]++)
            fail(loc(d, s, i) + ": buffer " + std::to_string(op.buffer) + " is allocated twice");
          break;
        case OpKind::Free:
          if (frees[op.buffer]++)
            fail(loc(d, s, i) + ": buffer " + std::to_string(op.buffer) + " is freed twice");
          break;
        }
      }
    }
    for (const auto &kv : allocs)
      if (!frees.count(kv.first))
        fail("device " + std::to_string(d) + ": buffer " + std::to_string(kv.first) +
             " is allocated but never freed in the iteration body");
    for (const auto &kv : frees)
      if (!allocs.count(kv.first))
        fail("device " + std::to_string(d) + ": buffer " + std::to_string(kv.first) +
             " is freed but never allocated");
    for (uint32_t e = 0; e < dev.events.size(); ++e) {
      if (recordsOf[e].size() > 1) {
        const OpRef &o = recordsOf[e][1];
        fail(loc(o.device, o.stream, o.op) + ": event " + std::to_string(e) +
             " is recorded twice in the iteration body (once per iteration is allowed)");
      }
      if (!waitsOf[e].empty() && recordsOf[e].empty()) {
        const OpRef &o = waitsOf[e][0];
        fail(loc(o.device, o.stream, o.op) + ": waits on event " + std::to_string(e) +
             " which is never recorded");
      }
      di.eventWaiters[e] = static_cast<uint32_t>(waitsOf[e].size());
      for (const OpRef &w : waitsOf[e]) {
        const OpRef &r = recordsOf[e][0];
        edges[node(r.device, r.stream, r.op)].push_back(node(w.device, w.stream, w.op));
      }
    }
  }

  for (const auto &kv : sends) {
    auto it = recvs.find(kv.first);
    const OpRef &o = kv.second;
    if (it == recvs.end())
      fail(loc(o.device, o.stream, o.op) + ": send to device " +
           std::to_string(std::get<1>(kv.first)) + " with tag " +
           std::to_string(std::get<2>(kv.first)) + " has no matching recv");
    const OpRef &r = it->second;
    uint64_t sb = program.devices[o.device].streams[o.stream].ops[o.op].bytes;
    uint64_t rb = program.devices[r.device].streams[r.stream].ops[r.op].bytes;
    if (sb != rb)
      fail(loc(r.device, r.stream, r.op) + ": recv of " + std::to_string(rb) +
           " bytes does not match the send of " + std::to_string(sb) + " bytes at " +
           loc(o.device, o.stream, o.op));
    edges[node(o.device, o.stream, o.op)].push_back(node(r.device, r.stream, r.op));
  }
  for (const auto &kv : recvs)
    if (!sends.count(kv.first)) {
      const OpRef &o = kv.second;
      fail(loc(o.device, o.stream, o.op) + ": recv from device " +
           std::to_string(std::get<0>(kv.first)) + " with tag " +
           std::to_string(std::get<2>(kv.first)) + " has no matching send");
    }

  // Deadlock: the dependency graph of one iteration must be acyclic (edges across iterations only
  // follow stream order, so the unrolled run is then acyclic too).
  {
    std::vector<uint32_t> indeg(nodes.size(), 0);
    for (const auto &out : edges)
      for (uint32_t v : out)
        ++indeg[v];
    std::deque<uint32_t> ready;
    for (uint32_t v = 0; v < nodes.size(); ++v)
      if (!indeg[v])
        ready.push_back(v);
    size_t done = 0;
    while (!ready.empty()) {
      uint32_t u = ready.front();
      ready.pop_front();
      ++done;
      for (uint32_t v : edges[u])
        if (--indeg[v] == 0)
          ready.push_back(v);
    }
    if (done != nodes.size()) {
      // Report the first blocked op that waits on something (the head of a stream's stuck part).
      for (uint32_t v = 0; v < nodes.size(); ++v) {
        if (!indeg[v])
          continue;
        const OpRef &o = nodes[v];
        if (o.op > 0 && indeg[node(o.device, o.stream, o.op - 1)])
          continue;
        fail(loc(o.device, o.stream, o.op) +
             ": can never run: the waits/receives of one iteration form a dependency cycle "
             "(deadlock)");
      }
      fail("the waits/receives of one iteration form a dependency cycle (deadlock)");
    }
  }

  // Every free is ordered after its alloc (same stream later, or through waits/receives).
  for (uint32_t d = 0; d < numDevices; ++d) {
    const Device &dev = program.devices[d];
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
      std::vector<char> seen(nodes.size(), 0);
      std::deque<uint32_t> queue{node(a.device, a.stream, a.op)};
      const uint32_t target = node(f.device, f.stream, f.op);
      bool found = false;
      while (!queue.empty() && !found) {
        uint32_t u = queue.front();
        queue.pop_front();
        for (uint32_t v : edges[u]) {
          if (v == target)
            found = true;
          if (!seen[v]) {
            seen[v] = 1;
            queue.push_back(v);
          }
        }
      }
      if (!found)
        fail(loc(f.device, f.stream, f.op) + ": frees buffer " + std::to_string(kv.first) +
             " but is not ordered after its alloc at " + loc(a.device, a.stream, a.op) +
             " (same stream, or a wait on an event recorded after the alloc)");
    }
  }

  // Fill never blocks main: no MAIN-stream op may be reachable from a FILL-stream op.
  {
    std::vector<char> reached(nodes.size(), 0);
    std::vector<uint32_t> origin(nodes.size(), 0);
    std::deque<uint32_t> queue;
    for (uint32_t v = 0; v < nodes.size(); ++v) {
      const OpRef &o = nodes[v];
      if (program.devices[o.device].streams[o.stream].role == PFRT_STREAM_FILL) {
        reached[v] = 1;
        origin[v] = v;
        queue.push_back(v);
      }
    }
    while (!queue.empty()) {
      uint32_t u = queue.front();
      queue.pop_front();
      for (uint32_t v : edges[u]) {
        if (reached[v])
          continue;
        reached[v] = 1;
        origin[v] = origin[u];
        const OpRef &o = nodes[v];
        if (program.devices[o.device].streams[o.stream].role == PFRT_STREAM_MAIN) {
          const OpRef &f = nodes[origin[v]];
          fail(loc(o.device, o.stream, o.op) + ": the MAIN stream depends on " +
               loc(f.device, f.stream, f.op) + "; fill work must never block the main stream");
        }
        queue.push_back(v);
      }
    }
  }

  // Fill jobs: placement, sample stride, and batch continuity.
  for (uint32_t j = 0; j < program.jobs.size(); ++j) {
    const FillJob &job = program.jobs[j];
    ProgramInfo::JobInfo &ji = info.jobs[j];
    std::string where = "fill job " + std::to_string(j) + " ('" + job.name + "')";
    if (job.kind == PFRT_FILL_TRAINING && ji.streamOnDevice.size() > 1)
      fail(where + ": a TRAINING job must be placed on one device (it is on devices " +
           std::to_string(ji.streamOnDevice.begin()->first) + " and " +
           std::to_string(std::next(ji.streamOnDevice.begin())->first) + ")");
    // Chunks per device in stream order.
    std::map<uint32_t, std::vector<std::pair<uint32_t, const pfrt_fill_chunk_desc *>>> chunks;
    uint64_t derived = 0;
    std::vector<std::pair<uint64_t, uint64_t>> starts; // [begin, end) of batches begun
    for (const auto &ds : ji.streamOnDevice) {
      const Stream &st = program.devices[ds.first].streams[ds.second];
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
             std::to_string(ji.stride) + " samples per iteration");
      if (k && starts[k].first < starts[k - 1].second)
        fail(where + ": batches [" + std::to_string(starts[k - 1].first) + ", " +
             std::to_string(starts[k - 1].second) + ") and [" + std::to_string(starts[k].first) +
             ", " + std::to_string(starts[k].second) + ") overlap");
    }
    // Simulate the cursor over enough iterations to see every batch begin and end.
    const int64_t span = -static_cast<int64_t>(ji.minIterationOffset);
    int64_t period = 1;
    for (const auto &dc : chunks)
      for (const auto &c : dc.second) {
        int64_t p = c.second->period ? c.second->period : 1;
        if (period != 1 && p != period)
          fail(loc(dc.first, ji.streamOnDevice[dc.first], c.first) + ": " + where +
               " mixes periods " + std::to_string(period) + " and " + std::to_string(p) +
               "; all chunks of a job share one period");
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
          int64_t sb = static_cast<int64_t>(f.sample_begin) + logical * static_cast<int64_t>(ji.stride);
          auto found = flights.find(sb);
          if (f.layer_begin == 0) {
            if (found != flights.end())
              fail(loc(d, s, c.first) + ": begins samples [" + std::to_string(sb) + ", ...) of " +
                   where + " again while that batch is still in flight at layer " +
                   std::to_string(found->second.next));
            flights[sb] = {f.layer_end, f.batch, it};
          } else {
            if (found == flights.end()) {
              // The batch began before the simulated window only when this chunk continues a batch
              // of an earlier iteration that was skipped (logical < 0); anything else is an error.
              fail(loc(d, s, c.first) + ": continues layers [" + std::to_string(f.layer_begin) +
                   ", " + std::to_string(f.layer_end) + ") of samples [" + std::to_string(sb) +
                   ", ...) of " + where +
                   " but no chunk on this device began that batch (check sample_begin and "
                   "iteration_offset)");
            }
            if (found->second.next != f.layer_begin)
              fail(loc(d, s, c.first) + ": continues " + where + " at layer " +
                   std::to_string(f.layer_begin) + " but the batch is at layer " +
                   std::to_string(found->second.next));
            if (found->second.batch != f.batch)
              fail(loc(d, s, c.first) + ": batch " + std::to_string(f.batch) +
                   " differs from the batch " + std::to_string(found->second.batch) +
                   " the chunk that began it used");
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
               std::to_string(fl.second.next) + ")");
    }
  }
  return info;
}

} // namespace pfrt
