// RUN: pipefill-translate --to-report %s --split-input-file --verify-diagnostics
// RUN: pipefill-translate --to-svg %s --split-input-file --verify-diagnostics
// RUN: pipefill-translate --to-trace %s --split-input-file --verify-diagnostics
// RUN: pipefill-translate --to-stream-program %S/Inputs/no-program.mlir --verify-diagnostics
// RUN: pipefill-translate --to-stream-program %S/Inputs/no-stream-form.mlir --allow-unregistered-dialect --verify-diagnostics
// RUN: pipefill-translate --to-cpp %S/Inputs/no-program.mlir --verify-diagnostics
// RUN: pipefill-translate --to-stream-program %S/Inputs/two-programs.mlir --verify-diagnostics
// RUN: pipefill-translate --to-cpp %S/Inputs/two-programs.mlir --verify-diagnostics

// expected-error @+1 {{has not been simulated; run pipefill-opt --pipefill-compile}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
  }
}

// -----

// expected-error @+1 {{contains no pipefill.pipeline}}
module {
}

// -----

// Two pipelines: the exports read one; the error is at the second and names the first.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
  }
}
// expected-error @+1 {{expected one pipefill.pipeline per module, found another at loc(}}
pipefill.pipeline @q schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
  }
}
