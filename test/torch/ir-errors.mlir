// RUN: pipefill-opt --pipefill-expand-schedule %s --split-input-file --verify-diagnostics
// RUN: pipefill-translate --to-torch-schedule %S/Inputs/bad-torch-stages.mlir --verify-diagnostics --split-input-file
// RUN: pipefill-translate --to-torch-schedule %S/Inputs/unrunnable-orders.mlir --verify-diagnostics --split-input-file
// RUN: pipefill-translate --torch-trace-to-profile --torch-trace=%S/Inputs/trace-1f1b-rank0.json %S/Inputs/bad-torch-stages.mlir --verify-diagnostics --split-input-file

// An imported pipeline whose instructions are gone cannot be expanded again.
// expected-error @+1 {{has an imported schedule but no instructions to run; re-import its action table}}
pipefill.pipeline @p schedule imported attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
  }
}

// -----

// Imported schedules may hold several chunks per stage (V-shapes).
pipefill.pipeline @v schedule imported attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, virtual_stages = 2 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, torch_stages = array<i64: 0, 1>} {
    pipefill.forward mb 0 chunk 0 duration 0.5
    pipefill.forward mb 0 chunk 1 duration 0.5
    pipefill.backward mb 0 chunk 1 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 1.0
  }
}
