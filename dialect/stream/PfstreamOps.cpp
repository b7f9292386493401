//===- PfstreamOps.cpp - the pfstream dialect -----------------------------===//
//
// Verifiers enforce the stream model the runtime relies on: numbering, one
// main stream per device, bubbles only on the main stream, events recorded at
// most once, matched sends and receives, and above all that the main stream
// never depends on fill work.
//
//===----------------------------------------------------------------------===//
#include "dialect/stream/PfstreamOps.h"
#include "dialect/PipefillOps.h"
#include "dialect/PipefillConstraints.h"
#include "support/Limits.h"
#include "support/Utf8.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <map>
#include <tuple>

using namespace mlir;
using namespace pipefill::pfstream;

#include "dialect/stream/PfstreamDialect.cpp.inc"
#include "dialect/stream/PfstreamEnums.cpp.inc"

#define GET_OP_CLASSES
#include "dialect/stream/PfstreamOps.cpp.inc"

void PfstreamDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/stream/PfstreamOps.cpp.inc"
      >();
}

/// The StreamProgram's range (support/Limits.h): the exported field is 32
/// bits, and the runtime refuses more than kMaxIterations.
LogicalResult ProgramOp::verify() {
  if (getIterations() > static_cast<uint64_t>(kMaxIterations))
    return emitOpError() << "iterations = " << getIterations() << " exceeds the limit of "
                         << kMaxIterations << " per run";
  return success();
}

LogicalResult ProgramOp::verifyRegions() {
  int64_t position = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::pair<Operation *, int64_t>>
      sends, recvs;
  for (Operation &op : getBody().front()) {
    auto device = dyn_cast<DeviceOp>(op);
    if (!device)
      return op.emitOpError()
             << "is not allowed in a program; expected only 'pfstream.device'";
    if ((int64_t)device.getIndex() != position)
      return device.emitOpError() << "has index " << device.getIndex()
                                  << " at position " << position
                                  << "; devices must be numbered in order";
    ++position;
    int64_t self = device.getIndex();
    auto result = device.walk([&](Operation *inner) -> WalkResult {
      if (auto send = dyn_cast<SendOp>(inner)) {
        auto key = std::make_tuple(self, (int64_t)send.getPeer(), (int64_t)send.getTag());
        if (!sends.emplace(key, std::make_pair(inner, (int64_t)send.getBytes())).second) {
          inner->emitOpError() << "reuses tag " << send.getTag() << " to device "
                               << send.getPeer();
          return WalkResult::interrupt();
        }
      } else if (auto recv = dyn_cast<RecvOp>(inner)) {
        auto key = std::make_tuple((int64_t)recv.getPeer(), self, (int64_t)recv.getTag());
        if (!recvs.emplace(key, std::make_pair(inner, (int64_t)recv.getBytes())).second) {
          inner->emitOpError() << "reuses tag " << recv.getTag() << " from device "
                               << recv.getPeer();
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();
  }
  for (auto &[key, send] : sends) {
    auto it = recvs.find(key);
    if (it == recvs.end())
      return send.first->emitOpError()
             << "to device " << std::get<1>(key) << " with tag "
             << std::get<2>(key) << " has no matching recv";
    if (it->second.second != send.second)
      return it->second.first->emitOpError()
             << "expects " << it->second.second << " bytes but the send carries "
             << send.second;
  }
  for (auto &[key, recv] : recvs)
    if (!sends.count(key))
      return recv.first->emitOpError()
             << "from device " << std::get<0>(key) << " with tag "
             << std::get<2>(key) << " has no matching send";
  return success();
}

LogicalResult DeviceOp::verifyRegions() {
  int64_t numEvents = 0, numStreams = 0, mainStreams = 0;
  SmallVector<StreamOp> streams;
  for (Operation &op : getBody().front()) {
    if (auto event = dyn_cast<EventOp>(op)) {
      if ((int64_t)event.getIndex() != numEvents)
        return event.emitOpError() << "has index " << event.getIndex()
                                   << "; events must be numbered 0, 1, ... in order";
      ++numEvents;
    } else if (auto stream = dyn_cast<StreamOp>(op)) {
      if ((int64_t)stream.getIndex() != numStreams)
        return stream.emitOpError() << "has index " << stream.getIndex()
                                    << "; streams must be numbered 0, 1, ... in order";
      ++numStreams;
      if (stream.getRole() == StreamRole::Main)
        ++mainStreams;
      streams.push_back(stream);
    } else {
      return op.emitOpError() << "is not allowed in a device; expected "
                                 "'pfstream.event' or 'pfstream.stream'";
    }
  }
  if (mainStreams != 1)
    return emitOpError() << "has " << mainStreams
                         << " main streams; exactly one is required";

  // Who records each event, and which bubbles exist.
  llvm::DenseMap<int64_t, StreamOp> recorder;
  llvm::DenseSet<int64_t> bubbles;
  for (StreamOp stream : streams) {
    for (Operation &op : stream.getBody().front()) {
      if (auto record = dyn_cast<RecordOp>(op)) {
        if ((int64_t)record.getEvent() >= numEvents)
          return record.emitOpError() << "names event " << record.getEvent()
                                      << " but the device declares " << numEvents;
        if (!recorder.try_emplace(record.getEvent(), stream).second)
          return record.emitOpError() << "records event " << record.getEvent()
                                      << ", which is already recorded in this iteration";
      } else if (auto wait = dyn_cast<WaitOp>(op)) {
        if ((int64_t)wait.getEvent() >= numEvents)
          return wait.emitOpError() << "names event " << wait.getEvent()
                                    << " but the device declares " << numEvents;
      } else if (auto bubble = dyn_cast<BubbleOp>(op)) {
        if (stream.getRole() != StreamRole::Main)
          return bubble.emitOpError() << "must be on the main stream";
        if (!bubbles.insert(bubble.getBubbleId()).second)
          return bubble.emitOpError() << "repeats bubble id " << bubble.getBubbleId();
      } else if (isa<ComputeOp, SendOp, RecvOp>(op) &&
                 stream.getRole() == StreamRole::Fill) {
        return op.emitOpError() << "of the main job is not allowed on a fill stream";
      }
    }
  }
  for (StreamOp stream : streams)
    for (FillChunksOp chunks : stream.getBody().front().getOps<FillChunksOp>()) {
      if (stream.getRole() == StreamRole::Main)
        return chunks.emitOpError() << "must not run on the main stream";
      if (!bubbles.contains(chunks.getBubbleId()))
        return chunks.emitOpError() << "names bubble " << chunks.getBubbleId()
                                    << ", which the main stream does not mark";
    }

  // Fill never blocks main: a stream "depends on fill" if it is a fill stream
  // or waits on an event recorded by such a stream; the main stream must not.
  llvm::DenseSet<Operation *> tainted;
  for (StreamOp s : streams)
    if (s.getRole() == StreamRole::Fill)
      tainted.insert(s);
  for (bool changed = true; changed;) {
    changed = false;
    for (StreamOp s : streams) {
      if (tainted.contains(s))
        continue;
      for (WaitOp wait : s.getBody().front().getOps<WaitOp>()) {
        auto it = recorder.find(wait.getEvent());
        if (it != recorder.end() && tainted.contains(it->second)) {
          if (s.getRole() == StreamRole::Main)
            return wait.emitOpError()
                   << "makes the main stream wait on fill work (event "
                   << wait.getEvent() << "); fill must never block the main job";
          tainted.insert(s);
          changed = true;
          break;
        }
      }
    }
  }
  return success();
}

InFlightDiagnostic FillChunksOp::emitChunkError(size_t i) {
  LocationAttr loc = getChunks()[i].loc;
  return mlir::emitError(loc ? Location(loc) : getLoc())
         << "'" << getOperationName() << "' op chunk " << i << " ";
}

LogicalResult FillChunksOp::verify() {
  ArrayRef<FillChunkRow> chunks = getChunks();
  for (size_t i = 0; i < chunks.size(); ++i) {
    std::string error = checkFillChunkRow(chunks[i]);
    if (!error.empty())
      return emitChunkError(i) << error;
  }
  return success();
}

LogicalResult FillChunksOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  ArrayRef<FillChunkRow> chunks = getChunks();
  FlatSymbolRefAttr lastRef;
  pipefill::FillJobOp job;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const FillChunkRow &chunk = chunks[i];
    // A bubble's chunks name a few jobs: each looked up once.
    if (chunk.job != lastRef) {
      lastRef = chunk.job;
      job = symbolTable.lookupNearestSymbolFrom<pipefill::FillJobOp>(*this, chunk.job);
    }
    if (!job)
      return emitChunkError(i) << "refers to " << chunk.job
                               << ", which is not a 'pipefill.fill_job'";
    int64_t passes =
        job.getNumLayers() * (job.getKind() == pipefill::JobKind::Training ? 2 : 1);
    if (chunk.layerBegin >= chunk.layerEnd || chunk.layerEnd > passes)
      return emitChunkError(i) << "runs passes [" << chunk.layerBegin << ", " << chunk.layerEnd
                               << ") but " << chunk.job << " has " << passes;
  }
  return success();
}
