//===- PipefillDialect.td - the pipefill dialect -----------*- tablegen -*-===//
#ifndef PIPEFILL_DIALECT_TD
#define PIPEFILL_DIALECT_TD

include "mlir/IR/OpBase.td"

def Pipefill_Dialect : Dialect {
  let name = "pipefill";
  let cppNamespace = "::pipefill";
  let summary = "Pipeline-parallel schedules with explicit bubbles and fill work";
  let description = [{
    The `pipefill` dialect makes a pipeline-parallel training schedule explicit:
    a `pipefill.pipeline` holds one `pipefill.stage` per device, each with its
    ordered instruction stream (forward and backward passes, point-to-point
    sends and receives, the data-parallel gradient all-reduce and the optimizer
    step). Idle time is not implicit: once the schedule has been simulated,
    every idle gap becomes a `pipefill.bubble` op carrying its start, duration
    and free device memory, and the fill work planned into the gap lives in
    the bubble's region as `pipefill.fill` ops that refer to `pipefill.fill_job`
    declarations.
  }];
  let usePropertiesForAttributes = 1;
}

class Pipefill_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pipefill_Dialect, mnemonic, traits>;

#endif // PIPEFILL_DIALECT_TD
