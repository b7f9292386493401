//===- Trace.cpp - a run's timeline as a Chrome trace ----------------------===//
//
// Processes are devices, threads are streams; each device gets one more
// thread, "main (planned)", with the plan's main-stream ops and bubbles laid
// out from where the device really began each iteration, so drift within an
// iteration shows as the two tracks sliding apart. Fill chunks the host timed
// are drawn from their own clock reads (one event per chunk run, deferred ones
// included, in the bubble they ran in); fill ops the device timed (CUDA) are
// drawn from their slots.
//
//===----------------------------------------------------------------------===//
#include "runtime/Trace.h"

#include "support/Json.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace pfrt {
namespace {

using pipefill::JsonWriter;

std::string computeLabel(const Op &op) {
  std::string prefix;
  switch (op.compute) {
  case PFRT_COMPUTE_FORWARD: prefix = "F"; break;
  case PFRT_COMPUTE_BACKWARD:
  case PFRT_COMPUTE_BACKWARD_INPUT: prefix = "B"; break;
  case PFRT_COMPUTE_BACKWARD_WEIGHT: prefix = "W"; break;
  case PFRT_COMPUTE_ALLREDUCE: return "allreduce";
  case PFRT_COMPUTE_OPTIMIZER: return "optimizer";
  }
  return prefix + std::to_string(op.microbatch) + (op.chunk ? "." + std::to_string(op.chunk) : "");
}

const char *roleName(pfrt_stream_role role) {
  switch (role) {
  case PFRT_STREAM_MAIN: return "main";
  case PFRT_STREAM_FILL: return "fill";
  case PFRT_STREAM_COPY: return "copy";
  }
  return "stream";
}

class TraceWriter {
public:
  TraceWriter(const ReportData &r, const Program &program, uint64_t maxOps)
      : r_(r), program_(program), maxOps_(maxOps), w_(2) {}

  std::string write() {
    // A long run's trace keeps its last iterations: about a million ops (some 150 MB of JSON)
    // is what the viewers open, and the string is built in memory.
    uint64_t perIteration = 0;
    for (const Device &dev : program_.devices)
      for (const Stream &st : dev.streams)
        perIteration += st.ops.size();
    perIteration = std::max<uint64_t>(perIteration, 1);
    const uint64_t keep = std::max<uint64_t>(maxOps_ / perIteration, 1);
    firstK_ = r_.iterations > keep ? r_.iterations - keep : 0;
    w_.beginObject();
    w_.value("displayTimeUnit", "ms");
    w_.beginObject("otherData");
    w_.value("program", r_.programName);
    w_.value("backend", r_.backend);
    // The unit of every timestamp; where each slice's time came from is its own "time".
    w_.value("time_unit", "plan us from the run's start (real us / time_scale)");
    w_.value("time_scale", r_.timeScale);
    w_.value("first_iteration", r_.firstIteration + static_cast<int64_t>(firstK_));
    w_.value("iterations", static_cast<uint64_t>(r_.iterations - firstK_));
    if (firstK_)
      w_.value("note", "the run's first " + std::to_string(firstK_) + " of " +
                           std::to_string(r_.iterations) + " iterations are left out (size)");
    w_.value("fill", r_.fillEnabled);
    w_.value("fill_policy", !r_.fillBounded ? "unbounded" : r_.fillSplit ? "bounded" : "whole");
    w_.endObject();
    w_.beginArray("traceEvents");
    indexChunkRuns();
    for (const DeviceReport &d : r_.devices)
      device(d);
    w_.endArray();
    w_.endObject();
    return w_.str();
  }

private:
  // Chunk runs the host timed, per device (in completion order).
  void indexChunkRuns() {
    for (const RunResult::ChunkRun &c : r_.chunkRuns)
      if (c.start >= 0 && c.end >= 0)
        hostChunks_[c.device].push_back(&c);
  }

  // A metadata event (process or thread name / sort index); tid < 0: the process's.
  template <typename V>
  void meta(const char *name, uint32_t pid, int64_t tid, const char *key, const V &v) {
    w_.beginObject();
    w_.value("name", name).value("ph", "M").value("pid", pid);
    if (tid >= 0)
      w_.value("tid", tid);
    w_.beginObject("args").value(key, v).endObject();
    w_.endObject();
  }
  // Opens a complete event; the caller writes its args and calls endEvent().
  void beginEvent(const std::string &name, const char *cat, uint32_t pid, uint32_t tid,
                  double ts, double dur) {
    w_.beginObject();
    w_.value("name", name).value("cat", cat).value("ph", "X");
    w_.value("pid", pid).value("tid", tid).value("ts", ts).value("dur", dur < 0 ? 0.0 : dur);
    w_.beginObject("args");
  }
  void endEvent() { w_.endObject().endObject(); }

  void device(const DeviceReport &d) {
    const Device &dev = program_.devices[d.device];
    std::string label = "device " + std::to_string(d.device) + " (stage " +
                        std::to_string(d.stage) + ", " + d.backend + ", " + d.timeSource + ")";
    meta("process_name", d.device, -1, "name", label);
    meta("process_sort_index", d.device, -1, "sort_index", int64_t(d.device));
    const uint32_t streams = static_cast<uint32_t>(dev.streams.size());
    for (uint32_t s = 0; s < streams; ++s) {
      meta("thread_name", d.device, s, "name",
           dev.streams[s].name + " (" + roleName(dev.streams[s].role) + ")");
      const int64_t order = s == d.mainStream ? 0 : s + 2; // main, its plan, the others
      meta("thread_sort_index", d.device, s, "sort_index", order);
    }
    meta("thread_name", d.device, streams, "name", "main (planned)");
    meta("thread_sort_index", d.device, streams, "sort_index", int64_t(1));

    const bool hostTimedFill = hostChunks_.count(d.device) != 0;
    for (uint32_t s = 0; s < streams; ++s)
      streamOps(d, dev, s, hostTimedFill);
    bubbles(d);
    if (hostTimedFill)
      chunkRuns(d);
    planned(d, dev, streams);
  }

  // Where a transfer's or a wait's time came from: CUDA times them on the GPU; the host places
  // them at the stream's intended (modelled) times, only compute and fill being real work.
  const char *transferTime(const DeviceReport &d, const Op *op = nullptr) const {
    if (d.timeSource == "emulated")
      return "emulated";
    if (d.timeSource != "measured" || d.backend == "host")
      return "modelled";
    if (op && (op->kind == OpKind::Send || op->kind == OpKind::Recv)) {
      // CUDA replay: a transfer with an emulated peer lasts its plan (a send keeps the stream
      // busy for it; a receive waits for the peer's modelled send). CUDA ranks without NCCL:
      // transfers to another rank are modelled at their planned time.
      for (const DeviceReport &p : r_.devices)
        if (p.device == op->peer && p.timeSource == "emulated")
          return "planned";
      if (!r_.rankTransfer.empty() && r_.rankTransfer != "nccl" && op->peer != d.device)
        return "modelled"; // as labels.transfers_between_ranks says
    }
    return "measured";
  }

  void streamOps(const DeviceReport &d, const Device &dev, uint32_t s, bool hostTimedFill) {
    const Stream &st = dev.streams[s];
    for (size_t k = firstK_; k < d.streamOps[s].size(); ++k)
      for (size_t i = 0; i < st.ops.size(); ++i) {
        const Op &op = st.ops[i];
        const OpTime t = d.streamOps[s][k][i];
        if (t.start < 0 || t.end < 0)
          continue;
        const int64_t iteration = r_.firstIteration + static_cast<int64_t>(k);
        switch (op.kind) {
        case OpKind::Compute:
          beginEvent(computeLabel(op), "compute", d.device, s, t.start, t.duration());
          w_.value("iteration", iteration).value("planned_us", effectivePlannedUs(dev, op));
          w_.value("time", d.timeSource);
          endEvent();
          break;
        case OpKind::Send:
        case OpKind::Recv:
        case OpKind::Copy: {
          std::string name =
              op.kind == OpKind::Send   ? "send to device " + std::to_string(op.peer)
              : op.kind == OpKind::Recv ? "recv from device " + std::to_string(op.peer)
              : op.direction == PFRT_COPY_HOST_TO_DEVICE ? "copy host to device"
                                                         : "copy device to host";
          beginEvent(name, "transfer", d.device, s, t.start, t.duration());
          w_.value("iteration", iteration).value("bytes", op.bytes);
          if (op.kind != OpKind::Recv)
            w_.value("planned_us", effectivePlannedUs(dev, op));
          w_.value("time", transferTime(d, &op));
          endEvent();
          break;
        }
        case OpKind::Wait:
          if (t.duration() <= 0)
            break;
          beginEvent("wait " + dev.events[op.event].name, "wait", d.device, s, t.start,
                     t.duration());
          w_.value("iteration", iteration).value("time", transferTime(d));
          endEvent();
          break;
        case OpKind::Fill:
          if (hostTimedFill) // drawn from the chunk runs instead
            break;
          beginEvent(jobName(op.fill.job), "fill", d.device, s, t.start, t.duration());
          w_.value("iteration", iteration).value("bubble_id", op.fill.bubble_id);
          w_.value("passes", passes(op.fill.layer_begin, op.fill.layer_end));
          w_.value("planned_us", op.fill.planned_us).value("time", d.timeSource);
          endEvent();
          break;
        case OpKind::Bubble: // from the report's bubbles (their measured window)
        case OpKind::Record:
        case OpKind::Alloc:
        case OpKind::Free:
          break;
        }
      }
  }

  void bubbles(const DeviceReport &d) {
    for (const BubbleReport &b : d.bubbles)
      for (size_t k = firstK_; k < b.measuredUs.size(); ++k) {
        const double begin = b.beginUs[k];
        if (begin < 0 || b.measuredUs[k] < 0)
          continue;
        beginEvent(std::string("bubble (") + bubbleKindName(b.kind) + ")", "bubble", d.device,
                   d.mainStream, begin, b.measuredUs[k]);
        w_.value("iteration", r_.firstIteration + static_cast<int64_t>(k));
        w_.value("bubble_id", b.bubbleId).value("planned_us", b.plannedUs);
        w_.value("free_bytes", b.freeBytes).value("time", d.timeSource);
        endEvent();
      }
  }

  void chunkRuns(const DeviceReport &d) {
    std::map<uint32_t, const BubbleReport *> byId;
    for (const BubbleReport &b : d.bubbles)
      byId[b.bubbleId] = &b;
    const double scale = r_.timeScale > 0 ? r_.timeScale : 1.0;
    for (const RunResult::ChunkRun *c : hostChunks_[d.device]) {
      if (c->iteration < r_.firstIteration + static_cast<int64_t>(firstK_))
        continue;
      const double start = c->start / scale, end = c->end / scale;
      beginEvent(jobName(c->job), "fill", d.device, c->stream, start, end - start);
      w_.value("iteration", c->iteration).value("bubble_id", c->bubbleId);
      w_.value("batch", c->batch).value("passes", passes(c->passBegin, c->passEnd));
      w_.value("planned_us", c->plannedUs);
      if (c->predictedUs >= 0)
        w_.value("predicted_us", c->predictedUs);
      w_.value("deferred", c->deferred);
      if (c->cpuUs >= 0)
        w_.value("cpu_us", c->cpuUs / scale);
      // Still running when main resumed compute after its bubble.
      auto b = byId.find(c->bubbleId);
      const int64_t k = c->iteration - r_.firstIteration;
      if (b != byId.end() && k >= 0 && static_cast<size_t>(k) < b->second->measuredUs.size()) {
        const double idleEnd = b->second->idleEndUs[k];
        if (idleEnd >= 0 && end > idleEnd + 1e-3)
          w_.value("overrun_us", end - idleEnd);
      }
      w_.value("time", chunkTimeModelled(r_, *c) ? "modelled" : "measured");
      endEvent();
    }
  }

  // The plan's main stream, each iteration placed where the device's first compute began (not
  // its first bubble: a warm-up bubble's marker runs as soon as the previous iteration's work is
  // done on this device, before the pipeline's iteration begins).
  void planned(const DeviceReport &d, const Device &dev, uint32_t tid) {
    const Stream &main = dev.streams[d.mainStream];
    for (size_t k = firstK_; k < d.iterations(); ++k) {
      double origin = -1;
      for (size_t i = 0; i < main.ops.size() && origin < 0; ++i)
        if (main.ops[i].kind == OpKind::Compute && d.mainOps()[k][i].start >= 0)
          origin = d.mainOps()[k][i].start - main.ops[i].plannedStartUs;
      if (origin < 0)
        continue;
      const int64_t iteration = r_.firstIteration + static_cast<int64_t>(k);
      for (const Op &op : main.ops) {
        if (op.kind == OpKind::Compute) {
          const double us = effectivePlannedUs(dev, op);
          beginEvent(computeLabel(op), "planned", d.device, tid, origin + op.plannedStartUs, us);
        } else if (op.kind == OpKind::Bubble) {
          beginEvent(std::string("bubble (") + bubbleKindName(op.bubble.kind) + ")", "planned",
                     d.device, tid, origin + op.bubble.planned_start_us,
                     op.bubble.planned_duration_us);
        } else {
          continue;
        }
        w_.value("iteration", iteration).value("time", "planned");
        endEvent();
      }
    }
  }

  std::string jobName(uint32_t job) const {
    return job < program_.jobs.size() ? program_.jobs[job].name : "job " + std::to_string(job);
  }
  static std::string passes(uint32_t begin, uint32_t end) {
    return std::to_string(begin) + "-" + std::to_string(end);
  }

  const ReportData &r_;
  const Program &program_;
  const uint64_t maxOps_;
  JsonWriter w_;
  std::map<uint32_t, std::vector<const RunResult::ChunkRun *>> hostChunks_;
  size_t firstK_ = 0; // the first report iteration in the trace
};

} // namespace

std::string runTraceJson(const ReportData &report, const Program &program, uint64_t maxOps) {
  return TraceWriter(report, program, maxOps).write();
}

} // namespace pfrt
