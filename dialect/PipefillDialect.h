//===- PipefillDialect.h - the pipefill dialect -----------------*- C++ -*-===//
#ifndef PIPEFILL_DIALECT_PIPEFILLDIALECT_H
#define PIPEFILL_DIALECT_PIPEFILLDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialect/PipefillDialect.h.inc"

#endif // PIPEFILL_DIALECT_PIPEFILLDIALECT_H
