//===- PipefillDialect.h - the pipefill dialect -----------------*- C++ -*-===//
#ifndef PIPEFILL_DIALECT_PIPEFILLDIALECT_H
#define PIPEFILL_DIALECT_PIPEFILLDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialect/PipefillDialect.h.inc"

namespace mlir {
class DialectBytecodeReader;
} // namespace mlir

namespace pipefill {
/// Fails (with an error) unless the bytecode being read carries the
/// dialect's current format version. Called once per op that has native
/// properties, by the readers of the instructions' timing and the bubbles'
/// fill table (every such op has one of the two): a file from before
/// versioning would otherwise be read field by field as if it were in
/// today's encoding. Not per property: the check is a lookup by dialect
/// name, and per property it was 6% of reading a 64 x 512 plan.
mlir::LogicalResult checkBytecodeVersion(mlir::DialectBytecodeReader &reader);
} // namespace pipefill

#endif // PIPEFILL_DIALECT_PIPEFILLDIALECT_H
