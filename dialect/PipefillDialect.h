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
/// dialect's current format version. Every native property's reader calls it
/// first: a file from before versioning would otherwise be read field by
/// field as if it were in today's encoding.
mlir::LogicalResult checkBytecodeVersion(mlir::DialectBytecodeReader &reader);
} // namespace pipefill

#endif // PIPEFILL_DIALECT_PIPEFILLDIALECT_H
