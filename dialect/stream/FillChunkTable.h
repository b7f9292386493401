//===- FillChunkTable.h - A bubble's runtime fill chunks --------*- C++ -*-===//
//
// pfstream.fill_chunks holds the runtime chunks the fill stream runs in one
// bubble, as a native property: one FillChunkRow per chunk, in order (the
// stream-side counterpart of pipefill.bubble's table, dialect/FillTable.h).
// One op per bubble instead of one per chunk: a 128 x 4096 plan has 2.7
// million of them.
//
//   pfstream.fill_chunks bubble 0 [
//     @bert layers 0 to 24 batch 32 samples 0 offset 0 planned 2.5e3 peak 3000000000,
//     @bert layers 0 to 12 batch 32 samples 32 offset -1 planned 1.2e3 peak 3000000000
//         weights streamed acts host period 2 phase 1
//   ]
//
// with `weights streamed`, `acts host`, `period` and `phase` only where they
// differ from resident, device, 1 and 0. The generic form is an array of
// dictionaries with the field names of the row syntax.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_DIALECT_STREAM_FILLCHUNKTABLE_H
#define PIPEFILL_DIALECT_STREAM_FILLCHUNKTABLE_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/Hashing.h"

#include <vector>

namespace mlir {
class DialectBytecodeReader;
class DialectBytecodeWriter;
} // namespace mlir

namespace pipefill::pfstream {

/// One runtime chunk: passes [layerBegin, layerEnd) of `job` on `batch`
/// samples. Plans repeat with `period`: the chunk runs in loop iterations
/// it >= phase with (it - phase) % period == 0, on samples sampleBegin +
/// (r + iterationOffset) * S, r the period index and S the samples the
/// device begins per period (iterationOffset -1 continues a batch begun in
/// the previous period).
struct FillChunkRow {
  mlir::FlatSymbolRefAttr job;
  int64_t layerBegin = 0, layerEnd = 0, batch = 0, sampleBegin = 0;
  int64_t iterationOffset = 0;
  bool weightsStreamed = false, activationsOnHost = false;
  double plannedUs = 0;
  int64_t peakBytes = 0;
  int64_t period = 1, phase = 0;
  /// Where diagnostics about the chunk point (its line when parsed); not
  /// part of its value.
  mlir::LocationAttr loc;

  llvm::StringRef getJob() const { return job.getValue(); }
  bool operator==(const FillChunkRow &o) const;
  bool operator!=(const FillChunkRow &o) const { return !(*this == o); }
};

/// pfstream.fill_chunks' `chunks` property.
using FillChunkTable = std::vector<FillChunkRow>;

/// Why a chunk's own fields are invalid, or the empty string.
std::string checkFillChunkRow(const FillChunkRow &row);

// The property's conversions, called by the op's generated code.
mlir::Attribute fillChunkTableToAttribute(mlir::MLIRContext *ctx, const FillChunkTable &table);
mlir::LogicalResult
fillChunkTableFromAttribute(FillChunkTable &table, mlir::Attribute attr,
                            llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
llvm::hash_code hashFillChunkTable(const FillChunkTable &table);
void writeFillChunkTable(mlir::DialectBytecodeWriter &writer, const FillChunkTable &table);
mlir::LogicalResult readFillChunkTable(mlir::DialectBytecodeReader &reader,
                                       FillChunkTable &table);

// The custom<FillChunkTable> directive.
mlir::ParseResult parseFillChunkTable(mlir::OpAsmParser &parser, FillChunkTable &table);
void printFillChunkTable(mlir::OpAsmPrinter &printer, mlir::Operation *op,
                         llvm::ArrayRef<FillChunkRow> table);

// A main-stream op's planned start (Pfstream_PlannedStartProp): from its
// generic-form attribute, and the custom<PlannedStart> directive; both
// reject a negative or infinite time.
mlir::LogicalResult
plannedStartFromAttribute(double &start, mlir::Attribute attr,
                          llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
mlir::ParseResult parsePlannedStart(mlir::OpAsmParser &parser, double &start);
void printPlannedStart(mlir::OpAsmPrinter &printer, mlir::Operation *op, double start);

} // namespace pipefill::pfstream

#endif // PIPEFILL_DIALECT_STREAM_FILLCHUNKTABLE_H
