//===- InstrTiming.h - Simulated timing of an instruction -------*- C++ -*-===//
//
// pipefill-simulate's result on each instruction (start, end, live bytes
// after it) as one native property: three numbers, not three uniqued
// attributes per instruction (a 128 x 4096 pipeline has 3 million
// instructions, nearly all with times of their own). Printed after the
// instruction's fields, each only when set:
//
//   pipefill.forward mb 0 chunk 0 duration 1.0e3 start 2.0e3 end 3.0e3 live 1048576
//
// The generic form (and conversion to an attribute) is a dictionary with
// the keys start_us, end_us and live_bytes.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_DIALECT_INSTRTIMING_H
#define PIPEFILL_DIALECT_INSTRTIMING_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/Hashing.h"

#include <cmath>
#include <limits>
#include <string>

namespace mlir {
class DialectBytecodeReader;
class DialectBytecodeWriter;
} // namespace mlir

namespace pipefill {

/// Simulated start and end (microseconds into the iteration) and the
/// stage's live bytes after the instruction; NaN and -1 mean "not set"
/// (before pipefill-simulate, or where an input gives only some of them).
struct InstrTiming {
  double startUs = std::numeric_limits<double>::quiet_NaN();
  double endUs = std::numeric_limits<double>::quiet_NaN();
  int64_t liveBytes = -1;

  bool hasStart() const { return !std::isnan(startUs); }
  bool hasEnd() const { return !std::isnan(endUs); }
  bool hasLive() const { return liveBytes >= 0; }
  bool empty() const { return !hasStart() && !hasEnd() && !hasLive(); }
  bool operator==(const InstrTiming &o) const;
  bool operator!=(const InstrTiming &o) const { return !(*this == o); }
};

/// Why set fields are invalid (a negative or infinite time), or "".
std::string checkTiming(const InstrTiming &timing);

// The property's conversions, called by the ops' generated code.
mlir::Attribute timingToAttribute(mlir::MLIRContext *ctx, const InstrTiming &timing);
mlir::LogicalResult timingFromAttribute(InstrTiming &timing, mlir::Attribute attr,
                                        llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
llvm::hash_code hashTiming(const InstrTiming &timing);
void writeTiming(mlir::DialectBytecodeWriter &writer, const InstrTiming &timing);
mlir::LogicalResult readTiming(mlir::DialectBytecodeReader &reader, InstrTiming &timing);

// The custom<Timing> directive of the instructions' assembly formats.
mlir::ParseResult parseTiming(mlir::OpAsmParser &parser, InstrTiming &timing);
void printTiming(mlir::OpAsmPrinter &printer, mlir::Operation *op, const InstrTiming &timing);

// Native f64 / i64 properties (BubbleOp's start, duration and free bytes):
// from their attribute spelling in the generic form, and the custom<F64> and
// custom<I64> directives, which print as the attributes did.
mlir::LogicalResult f64FromAttribute(double &storage, mlir::Attribute attr,
                                     llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
mlir::LogicalResult i64FromAttribute(int64_t &storage, mlir::Attribute attr,
                                     llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
mlir::ParseResult parseF64(mlir::OpAsmParser &parser, double &value);
void printF64(mlir::OpAsmPrinter &printer, mlir::Operation *op, double value);
mlir::ParseResult parseI64(mlir::OpAsmParser &parser, int64_t &value);
void printI64(mlir::OpAsmPrinter &printer, mlir::Operation *op, int64_t value);

} // namespace pipefill

#endif // PIPEFILL_DIALECT_INSTRTIMING_H
