//===- StreamProgramWire.cpp - a device's message, straight to bytes ------===//
#include "codegen/StreamProgramWire.h"

#include <cstring>

using namespace mlir;

namespace pipefill {
namespace ps = pfstream;

namespace {
// Field numbers of proto/stream_program.proto.
namespace device {
constexpr uint32_t kStage = 1, kMemoryBytes = 2, kStaticBytes = 3, kCalibration = 4,
                   kStreams = 5, kEvents = 6, kPlannedIterationUs = 7, kP2pLatencyUs = 8,
                   kP2pBandwidthGbps = 9, kPcieBandwidthGbps = 10;
} // namespace device
namespace calibration {
constexpr uint32_t kForwardUs = 1, kBackwardUs = 2, kBackwardInputUs = 3,
                   kBackwardWeightUs = 4, kAllreduceUs = 5, kOptimizerUs = 6;
} // namespace calibration
namespace stream {
constexpr uint32_t kName = 1, kRole = 2, kPriority = 3, kOps = 4;
} // namespace stream
constexpr uint32_t kEventName = 1;
// StreamOp's `op` cases.
namespace op {
constexpr uint32_t kCompute = 1, kSend = 2, kRecv = 3, kRecord = 4, kWait = 5, kBubble = 6,
                   kFill = 7;
} // namespace op
namespace compute {
constexpr uint32_t kKind = 1, kMicrobatch = 2, kChunk = 3, kPlannedUs = 4, kPlannedStartUs = 5;
} // namespace compute
namespace transfer { // SendOp and RecvOp
constexpr uint32_t kPeer = 1, kBytes = 2, kTag = 3, kPlannedUs = 4, kPlannedStartUs = 5;
} // namespace transfer
constexpr uint32_t kEvent = 1; // RecordEventOp, WaitEventOp
namespace bubble {
constexpr uint32_t kBubbleId = 1, kKind = 2, kPlannedStartUs = 3, kPlannedDurationUs = 4,
                   kFreeBytes = 5;
} // namespace bubble
namespace fill {
constexpr uint32_t kJob = 1, kBubbleId = 2, kLayerBegin = 3, kLayerEnd = 4, kBatch = 5,
                   kSampleBegin = 6, kIterationOffset = 7, kWeights = 8, kActivations = 9,
                   kPlannedUs = 10, kPeakBytes = 11, kPeriod = 12, kPhase = 13;
} // namespace fill

// The conversions the messages' setters make of ProtoSink's arguments.
uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }
uint64_t u64(int64_t v) { return static_cast<uint64_t>(v); }
} // namespace

template <typename Body>
void WireSink::appendOp(std::string &ops, uint32_t field, Body &&body) {
  // The case's message first, after room for the headers before it.
  // Its headers: the two tags (fields below 16: a byte each) and lengths.
  constexpr size_t kHead = 2 * (1 + 5) + 1;
  // The largest case, a FillChunkOp, has 13 scalar fields.
  char buf[kHead + 13 * WireWriter::kMaxScalarFieldBytes];
  WireWriter msg(buf + kHead);
  body(msg);
  const size_t n = msg.size();
  // ops entry: StreamOp { field: message }.
  char head[kHead];
  WireWriter h(head);
  size_t inner = WireWriter::varintSize(uint64_t(field) << 3) + WireWriter::varintSize(n) + n;
  h.tag(stream::kOps, 2);
  h.varint(inner);
  h.tag(field, 2);
  h.varint(n);
  char *start = buf + kHead - h.size();
  std::memcpy(start, head, h.size());
  ops.append(start, h.size() + n);
}

void WireSink::record(Location, int64_t event) {
  appendOp(mainOps, op::kRecord, [&](WireWriter &w) { w.u32(kEvent, u32(event)); });
}

void WireSink::bubble(BubbleOp bubble, int64_t id) {
  appendOp(mainOps, op::kBubble, [&](WireWriter &w) {
    w.u32(bubble::kBubbleId, u32(id));
    w.i32(bubble::kKind, static_cast<int32_t>(toStreamKind(bubble.getKind())));
    w.f64(bubble::kPlannedStartUs, bubble.getStartUs());
    w.f64(bubble::kPlannedDurationUs, bubble.getDurationUs());
    w.u64(bubble::kFreeBytes, u64(bubble.getFreeBytes()));
  });
}

void WireSink::send(Location, int64_t peer, int64_t bytes, int64_t tag, double plannedUs,
                    double startUs) {
  appendOp(mainOps, op::kSend, [&](WireWriter &w) {
    w.u32(transfer::kPeer, u32(peer));
    w.u64(transfer::kBytes, u64(bytes));
    w.u32(transfer::kTag, u32(tag));
    w.f64(transfer::kPlannedUs, plannedUs);
    w.f64(transfer::kPlannedStartUs, startUs);
  });
}

void WireSink::recv(Location, int64_t peer, int64_t bytes, int64_t tag, double startUs) {
  appendOp(mainOps, op::kRecv, [&](WireWriter &w) {
    w.u32(transfer::kPeer, u32(peer));
    w.u64(transfer::kBytes, u64(bytes));
    w.u32(transfer::kTag, u32(tag));
    w.f64(transfer::kPlannedStartUs, startUs);
  });
}

void WireSink::compute(Location, InstrKind kind, int64_t microbatch, int64_t chunk,
                       double plannedUs, double startUs) {
  appendOp(mainOps, op::kCompute, [&](WireWriter &w) {
    w.i32(compute::kKind, static_cast<int32_t>(toStreamKind(kind)));
    w.u32(compute::kMicrobatch, u32(microbatch));
    w.u32(compute::kChunk, u32(chunk));
    w.f64(compute::kPlannedUs, plannedUs);
    w.f64(compute::kPlannedStartUs, startUs);
  });
}

void WireSink::wait(Location, int64_t event) {
  appendOp(fillOps, op::kWait, [&](WireWriter &w) { w.u32(kEvent, u32(event)); });
}

void WireSink::fillChunks(Location, int64_t bubbleId, ps::FillChunkTable &&chunks) {
  for (const ps::FillChunkRow &chunk : chunks)
    appendOp(fillOps, op::kFill, [&](WireWriter &w) {
      w.u32(fill::kJob, jobInstance.lookup(chunk.job.getAttr()));
      w.u32(fill::kBubbleId, u32(bubbleId));
      w.u32(fill::kLayerBegin, u32(chunk.layerBegin));
      w.u32(fill::kLayerEnd, u32(chunk.layerEnd));
      w.u32(fill::kBatch, u32(chunk.batch));
      w.u64(fill::kSampleBegin, u64(chunk.sampleBegin));
      w.i32(fill::kIterationOffset, static_cast<int32_t>(chunk.iterationOffset));
      w.i32(fill::kWeights, chunk.weightsStreamed ? 1 : 0);      // STREAMED : RESIDENT
      w.i32(fill::kActivations, chunk.activationsOnHost ? 1 : 0); // HOST : DEVICE
      w.f64(fill::kPlannedUs, chunk.plannedUs);
      w.u64(fill::kPeakBytes, u64(chunk.peakBytes));
      w.u32(fill::kPeriod, u32(chunk.period));
      w.u32(fill::kPhase, u32(chunk.phase));
    });
}

void WireSink::finish(std::string &out) {
  out.clear();
  out.reserve(mainOps.size() + fillOps.size() + 32 * events.size() + 512);
  char buf[256];
  auto put = [&](const WireWriter &w) { out.append(w.bytes()); };
  {
    WireWriter w(buf);
    w.u32(device::kStage, u32(head.stage));
    w.u64(device::kMemoryBytes, head.memoryBytes);
    w.u64(device::kStaticBytes, head.staticBytes);
    char cal[64];
    WireWriter c(cal);
    c.f64(calibration::kForwardUs, head.forwardUs);
    c.f64(calibration::kBackwardUs, head.backwardUs);
    c.f64(calibration::kBackwardInputUs, head.backwardInputUs);
    c.f64(calibration::kBackwardWeightUs, head.backwardWeightUs);
    c.f64(calibration::kAllreduceUs, head.allreduceUs.value_or(0.0));
    c.f64(calibration::kOptimizerUs, head.optimizerUs.value_or(0.0));
    w.bytes(device::kCalibration, c.bytes()); // set even when all zero
    put(w);
  }
  // The main stream (index 0, high priority) and the fill stream (1, low):
  // its own fields, then its ops as they were written.
  auto stream = [&](uint64_t index, ps::StreamRole role, ps::Priority priority,
                    const std::string &ops) {
    std::string name = stringifyStreamRole(role).str() + std::to_string(index);
    char own[128];
    WireWriter s(own);
    s.string(stream::kName, name);
    s.i32(stream::kRole, static_cast<int32_t>(role));
    s.i32(stream::kPriority, static_cast<int32_t>(priority));
    WireWriter w(buf);
    w.tag(device::kStreams, 2);
    w.varint(s.size() + ops.size());
    put(w);
    put(s);
    out += ops;
  };
  stream(0, ps::StreamRole::Main, ps::Priority::High, mainOps);
  if (hasFill)
    stream(1, ps::StreamRole::Fill, ps::Priority::Low, fillOps);
  for (uint64_t index : events) {
    char name[32];
    WireWriter e(name);
    e.string(kEventName, "bubble" + std::to_string(index));
    WireWriter w(buf);
    w.bytes(device::kEvents, e.bytes());
    put(w);
  }
  WireWriter w(buf);
  w.f64(device::kPlannedIterationUs, head.plannedIterationUs);
  w.f64(device::kP2pLatencyUs, head.p2pLatencyUs);
  w.f64(device::kP2pBandwidthGbps, head.p2pBandwidthGbps);
  w.f64(device::kPcieBandwidthGbps, head.pcieBandwidthGbps);
  put(w);
}

} // namespace pipefill
