//===- FillTable.h - The fill chunks of a bubble, as one table -*- C++ -*-===//
//
// pipefill.bubble holds the fill work planned into it as a native property:
// one FillChunk per chunk, in order. A 64 x 512 plan has ~150,000 chunks;
// as ops each cost an Operation, a dozen uniqued attributes and a verifier
// run, as rows they cost what their fields cost (docs/compiler.md).
//
// The bubble prints them one per line:
//
//   pipefill.bubble steady start 1.0e2 duration 8.75e2 free 99000000000 fills [
//     @enc layers 0 to 10 batch 8 samples 0 weights resident acts device
//         time 8.7e2 mem 1048576,
//     @enc layers 10 to 12 ... mem 1048576 iteration 1 repeat 2 offset 8.7e2
//   ]
//
// with `copy`, `iteration`, `repeat` and `offset` only where they differ
// from 0, 0, 1 and 0. The generic form (and conversion to attributes) is an
// array of dictionaries with the field names of the row syntax.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_DIALECT_FILLTABLE_H
#define PIPEFILL_DIALECT_FILLTABLE_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/Hashing.h"

#include <vector>

namespace mlir {
class DialectBytecodeReader;
class DialectBytecodeWriter;
} // namespace mlir

namespace pipefill {
enum class WeightPlacement : uint32_t;
enum class ActPlacement : uint32_t;

/// One chunk of fill work in a bubble: layers [layerBegin, layerEnd) of fill
/// job `job` on `batch` samples from sample `sampleBegin`, with its weights
/// and activations placed as given; `predictedUs` includes the context
/// switch and the copies not hidden, `peakBytes` is its device memory. It
/// runs in iteration `iteration` of its job's plan on this stage (the
/// stage's pipefill.assignment), `repeat` times back to back (whole batches
/// only), starting `offsetUs` after the bubble starts.
///
/// Layer indices, batch, iteration and repeat are 32-bit (the parser, the
/// bytecode reader and the generic form reject larger values): a 1F1B
/// 128 x 4096 plan holds 2.6 million chunks, and 88 bytes a chunk instead of
/// 104 is 42 MB of the driver's peak there.
struct FillChunk {
  mlir::FlatSymbolRefAttr job;
  int64_t sampleBegin = 0;
  double predictedUs = 0;
  int64_t peakBytes = 0;
  double copyUs = 0;
  double offsetUs = 0;
  /// Where diagnostics about the chunk point: its line when parsed, else
  /// null (the bubble's location). Not part of its value (==, hash).
  mlir::LocationAttr loc;
  int32_t layerBegin = 0, layerEnd = 0, batch = 1, iteration = 0, repeat = 1;
  WeightPlacement weights{};
  ActPlacement acts{};

  llvm::StringRef getJob() const { return job.getValue(); }
  bool operator==(const FillChunk &o) const;
  bool operator!=(const FillChunk &o) const { return !(*this == o); }
};

/// pipefill.bubble's `fills` property.
using FillTable = std::vector<FillChunk>;

/// Why a chunk's own fields are invalid (a negative time, an empty layer
/// range, ...), or the empty string; the bubble's verifier reports it with
/// the chunk's index.
std::string checkFillChunk(const FillChunk &chunk);

// The property's conversions, called by the ops' generated code.
mlir::Attribute fillTableToAttribute(mlir::MLIRContext *ctx, const FillTable &table);
mlir::LogicalResult
fillTableFromAttribute(FillTable &table, mlir::Attribute attr,
                       llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
llvm::hash_code hashFillTable(const FillTable &table);
void writeFillTable(mlir::DialectBytecodeWriter &writer, const FillTable &table);
mlir::LogicalResult readFillTable(mlir::DialectBytecodeReader &reader, FillTable &table);

// The custom<FillTable> directive of pipefill.bubble's assembly format.
mlir::ParseResult parseFillTable(mlir::OpAsmParser &parser, FillTable &table);
void printFillTable(mlir::OpAsmPrinter &printer, mlir::Operation *op,
                    llvm::ArrayRef<FillChunk> table);
} // namespace pipefill

#endif // PIPEFILL_DIALECT_FILLTABLE_H
