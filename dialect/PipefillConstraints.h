//===- PipefillConstraints.h - C++ side of PipefillConstraints.td -*- C++ -*-===//
//
// Predicates the ODS constraints of both dialects call.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_DIALECT_PIPEFILLCONSTRAINTS_H
#define PIPEFILL_DIALECT_PIPEFILLCONSTRAINTS_H

#include "mlir/IR/BuiltinAttributes.h"

namespace pipefill {

/// The value is >= 0 as a double compares: +0, -0 and +inf pass, NaN and
/// negative values do not. Read off the APFloat (sign, category) without
/// converting it, which getValueAsDouble() does per call.
inline bool isNonNegative(mlir::FloatAttr attr) {
  const llvm::APFloat &v = attr.getValue();
  return !v.isNaN() && (!v.isNegative() || v.isZero());
}

} // namespace pipefill

#endif // PIPEFILL_DIALECT_PIPEFILLCONSTRAINTS_H
