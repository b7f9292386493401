//===- Passes.td - pipefill passes -------------------------*- tablegen -*-===//
#ifndef PIPEFILL_PASSES_TD
#define PIPEFILL_PASSES_TD

include "mlir/Pass/PassBase.td"

#endif // PIPEFILL_PASSES_TD
