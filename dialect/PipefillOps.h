//===- PipefillOps.h - pipefill operations ----------------------*- C++ -*-===//
#ifndef PIPEFILL_DIALECT_PIPEFILLOPS_H
#define PIPEFILL_DIALECT_PIPEFILLOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

#include "dialect/PipefillDialect.h"
#include "dialect/PipefillEnums.h.inc"

#define GET_OP_CLASSES
#include "dialect/PipefillOps.h.inc"

#endif // PIPEFILL_DIALECT_PIPEFILLOPS_H
