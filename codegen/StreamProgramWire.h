//===- StreamProgramWire.h - a device's message, straight to bytes -*- C++ -*-===//
//
// The driver lowers 10^5-10^6 stream ops. Building each as a protobuf
// message (an arena allocation per op and per oneof case) and then
// serializing it cost more than the lowering itself: at 1F1B 64 x 512 x 100
// lowering and writing the program took 456M instructions that way and 309M
// written directly (callgrind). WireSink appends each op
// to its stream's bytes in protobuf's wire format as it is lowered, the way
// Perfetto's protozero writes trace protos, and the device message is
// assembled from those bytes once the stage is done.
//
// The bytes are those the generated serializer writes for the same message
// (proto3: fields in number order, a scalar only when it is not zero, a
// double by its bits, so -0.0 is written, a set sub-message even when
// empty), so a program written this way and one written through the
// messages are equal byte for byte: test/compile/driver.test compares the
// driver's output with pipefill-lower-to-stream + --to-stream-program, and
// support/tests/ProtoWireTest.cpp compares the field writer with protobuf's
// serializer.
//
// The field numbers below are those of proto/stream_program.proto; a field
// added there and set by ProtoSink must be written here too (driver.test
// fails on the bundled examples until it is, where they set it).
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_CODEGEN_STREAMPROGRAMWIRE_H
#define PIPEFILL_CODEGEN_STREAMPROGRAMWIRE_H

#include "passes/StageLowering.h"
#include "support/ProtoWire.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pipefill {

/// A stage's lowering (lowerStage) written as the bytes of its
/// rt::DeviceProgram message: what the message ProtoSink builds
/// (codegen/ExportStreamProgram.cpp) serializes to.
class WireSink final : public StreamSink {
public:
  /// jobInstance: each fill job's instance index on this device.
  explicit WireSink(const llvm::DenseMap<mlir::StringAttr, uint32_t> &jobInstance)
      : jobInstance(jobInstance) {}

  void header(const DeviceHeader &h) override { head = h; }
  void event(mlir::Location, uint64_t index) override { events.push_back(index); }
  void streams(mlir::Location, bool fill) override { hasFill = fill; }
  void record(mlir::Location, int64_t event) override;
  void bubble(BubbleOp bubble, int64_t id) override;
  void send(mlir::Location, int64_t peer, int64_t bytes, int64_t tag, double plannedUs,
            double startUs) override;
  void recv(mlir::Location, int64_t peer, int64_t bytes, int64_t tag, double startUs) override;
  void compute(mlir::Location, InstrKind kind, int64_t microbatch, int64_t chunk,
               double plannedUs, double startUs) override;
  void wait(mlir::Location, int64_t event) override;
  void fillChunks(mlir::Location, int64_t bubbleId, pfstream::FillChunkTable &&chunks) override;

  /// The DeviceProgram message's bytes (replaces `out`).
  void finish(std::string &out);

private:
  /// A StreamOp whose `op` case is field `field`: the case's message is
  /// written by `body` and the whole appended to `ops` as an entry of the
  /// stream's `ops` field.
  template <typename Body> static void appendOp(std::string &ops, uint32_t field, Body &&body);

  const llvm::DenseMap<mlir::StringAttr, uint32_t> &jobInstance;
  DeviceHeader head;
  std::vector<uint64_t> events;
  bool hasFill = false;
  std::string mainOps, fillOps; // repeated StreamOp ops = 4, per stream
};

} // namespace pipefill

#endif // PIPEFILL_CODEGEN_STREAMPROGRAMWIRE_H
