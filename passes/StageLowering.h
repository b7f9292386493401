//===- StageLowering.h - one stage's lowering to streams --------*- C++ -*-===//
//
// The lowering of a compiled stage to its device's streams, written once and
// emitted into a StreamSink: pipefill-lower-to-stream's sink builds pfstream
// ops; the driver's (codegen/ExportStreamProgram.cpp) writes the
// StreamProgram message directly, without materializing the pfstream IR.
// Both therefore give the same program (test/compile/driver.test compares
// them byte for byte).
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_PASSES_STAGELOWERING_H
#define PIPEFILL_PASSES_STAGELOWERING_H

#include "dialect/PipefillOps.h"
#include "dialect/stream/PfstreamOps.h"
#include "algo/schedule/Schedule.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace pipefill {

/// A device's header: memory, links and the calibration of its compute.
struct DeviceHeader {
  int64_t stage = 0;
  uint64_t memoryBytes = 0, staticBytes = 0;
  double plannedIterationUs = 0, p2pLatencyUs = 0, p2pBandwidthGbps = 0, pcieBandwidthGbps = 0;
  double forwardUs = 0, backwardUs = 0, backwardInputUs = 0, backwardWeightUs = 0;
  /// Set where the stage has the per-iteration all-reduce / optimizer step.
  std::optional<double> allreduceUs, optimizerUs;
};

/// Where a stage's lowering goes. The main-stream calls come in stream
/// order, as do the fill-stream calls.
class StreamSink {
public:
  virtual ~StreamSink();
  virtual void header(const DeviceHeader &h) = 0;
  /// Event `index` (named "bubble<index>"), for the filled bubble at `loc`.
  virtual void event(mlir::Location loc, uint64_t index) = 0;
  /// The main stream and, when some bubble is filled, the fill stream.
  virtual void streams(mlir::Location loc, bool fill) = 0;
  // The main stream.
  virtual void record(mlir::Location loc, int64_t event) = 0;
  virtual void bubble(BubbleOp bubble, int64_t id) = 0;
  virtual void send(mlir::Location loc, int64_t peer, int64_t bytes, int64_t tag,
                    double plannedUs, double startUs) = 0;
  virtual void recv(mlir::Location loc, int64_t peer, int64_t bytes, int64_t tag,
                    double startUs) = 0;
  virtual void compute(mlir::Location loc, InstrKind kind, int64_t microbatch, int64_t chunk,
                       double plannedUs, double startUs) = 0;
  // The fill stream.
  virtual void wait(mlir::Location loc, int64_t event) = 0;
  virtual void fillChunks(mlir::Location loc, int64_t bubbleId,
                          pfstream::FillChunkTable &&chunks) = 0;
};

/// What every stage's lowering reads of the pipeline (read-only, shared by
/// the threads that lower stages in parallel).
struct PipelineFacts {
  explicit PipelineFacts(PipelineOp pipeline);
  PipelineOp pipeline;
  double latency = 0, bandwidth = 0;
  int64_t v = 1, m = 1;
};

/// The runtime refuses any duration over kMaxUs (support/Limits.cpp: one op,
/// bubble, fill chunk or iteration). Every op, bubble and chunk lies within
/// the planned iteration, so checking the iteration checks them all: an
/// error on `anchor` when `iterationUs` is over it.
mlir::LogicalResult checkIterationFitsRuntime(mlir::Operation *anchor, double iterationUs);

pfstream::ComputeKind toStreamKind(InstrKind kind);
pfstream::BubbleKind toStreamKind(BubbleKind kind);

/// A stage's bubbles in block order. The lowering's helpers take them from
/// their caller, which reads them once per stage: each walk of a stage's
/// 10^3-10^5 ops chases a list pointer per op.
llvm::SmallVector<BubbleOp> stageBubbles(StageOp stage);

/// Lowers `stage` into `sink`: its header, one event per filled bubble, the
/// streams, then its instructions (`instrs`, the ops `instrOps`, in block
/// order, as scheduleFromIR reads them with their timing) and bubbles in
/// block order, each filled bubble's chunks on the fill stream. `bubbles`
/// are the stage's (stageBubbles).
void lowerStage(const PipelineFacts &facts, StageOp stage, llvm::ArrayRef<sched::Instr> instrs,
                llvm::ArrayRef<mlir::Operation *> instrOps, llvm::ArrayRef<BubbleOp> bubbles,
                StreamSink &sink);

/// Per planned chunk of `bubbles` (the stage's, stageBubbles) that lowers to
/// runtime chunks: its job and the samples of the batches those begin (the
/// rows with layerBegin 0), without building them.
void countLoweredChunks(
    StageOp stage, llvm::ArrayRef<BubbleOp> bubbles,
    llvm::function_ref<void(mlir::FlatSymbolRefAttr job, int64_t begunSamples)> fn);

} // namespace pipefill

#endif // PIPEFILL_PASSES_STAGELOWERING_H
