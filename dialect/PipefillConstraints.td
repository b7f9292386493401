//===- PipefillConstraints.td - constraints both dialects use -*- tablegen -*-===//
//
// Attribute constraints shared by the pipefill and pfstream dialects, so the
// two verify the same rule with the same message.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_CONSTRAINTS_TD
#define PIPEFILL_CONSTRAINTS_TD

include "mlir/IR/CommonAttrConstraints.td"

def Pipefill_NonNegF64 : ConfinedAttr<F64Attr, [
    AttrConstraint<CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0">,
                   "whose value is non-negative">]>;
def Pipefill_NonNegI64 : ConfinedAttr<I64Attr, [IntNonNegative]>;
def Pipefill_PosI64 : ConfinedAttr<I64Attr, [IntPositive]>;

#endif // PIPEFILL_CONSTRAINTS_TD
