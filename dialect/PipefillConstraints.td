//===- PipefillConstraints.td - constraints both dialects use -*- tablegen -*-===//
//
// Attribute constraints and enum cases shared by the pipefill and pfstream
// dialects, so the two verify the same rule with the same message and spell
// the same cases the same way.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_CONSTRAINTS_TD
#define PIPEFILL_CONSTRAINTS_TD

include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/EnumAttr.td"

// x >= 0 (so +0, -0 and +inf; not NaN), read off the APFloat without
// converting it to a double: the verifier checks this on every timed op.
def Pipefill_NonNegF64 : ConfinedAttr<F64Attr, [
    AttrConstraint<CPred<"::pipefill::isNonNegative(::llvm::cast<::mlir::FloatAttr>($_self))">,
                   "whose value is non-negative">]>;
def Pipefill_NonNegI64 : ConfinedAttr<I64Attr, [IntNonNegative]>;
def Pipefill_PosI64 : ConfinedAttr<I64Attr, [IntPositive]>;

// Names and other text reach StreamPrograms (proto3 strings, which protobuf's
// parser refuses unless they are UTF-8) and JSON reports: UTF-8 only, as the
// JobSpec reader checks (support/Utf8.h).
def Pipefill_Utf8 : AttrConstraint<
    CPred<"::pipefill::isValidUtf8(::llvm::cast<::mlir::StringAttr>($_self).getValue())">,
    "whose text is valid UTF-8">;
def Pipefill_SymbolName : ConfinedAttr<SymbolNameAttr, [Pipefill_Utf8]>;
def Pipefill_Str : ConfinedAttr<StrAttr, [Pipefill_Utf8]>;

// Where a bubble sits in the iteration: the cases, named once. Each dialect
// numbers them its own way: pipefill from 0, as the schedule algorithm does;
// pfstream from 1, as the runtime's StreamProgram enums (0 = unspecified), so
// the exporter stores them by value. passes/LowerToStream.cpp maps one to the
// other by case.
class Pipefill_BubbleKindCases<int first> {
  list<I32EnumAttrCase> cases = [
    I32EnumAttrCase<"Warmup", first, "warmup">,
    I32EnumAttrCase<"Steady", !add(first, 1), "steady">,
    I32EnumAttrCase<"Cooldown", !add(first, 2), "cooldown">,
    I32EnumAttrCase<"Tail", !add(first, 3), "tail">];
}

#endif // PIPEFILL_CONSTRAINTS_TD
