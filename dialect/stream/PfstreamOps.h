//===- PfstreamOps.h - the pfstream dialect ---------------------*- C++ -*-===//
#ifndef PIPEFILL_DIALECT_STREAM_PFSTREAMOPS_H
#define PIPEFILL_DIALECT_STREAM_PFSTREAMOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

#include "dialect/stream/PfstreamDialect.h.inc"
#include "dialect/stream/PfstreamEnums.h.inc"
#include "dialect/stream/FillChunkTable.h"

#define GET_OP_CLASSES
#include "dialect/stream/PfstreamOps.h.inc"

#endif // PIPEFILL_DIALECT_STREAM_PFSTREAMOPS_H
