// RUN: not pipefill-opt --pipefill-compile %s 2>&1 | FileCheck %s

// --pipefill-compile used to plan (and simulate) a stage that runs the forward
// of micro-batch 0 but never its backward; the verifier refuses it at the
// forward's file:line, before any pass runs.
// CHECK: compile-incomplete.mlir:[[@LINE+4]]:5: error: 'pipefill.forward' op of micro-batch 0 chunk 0 on stage 0 has no backward (or backward_input and backward_weight)
// CHECK-NOT: error
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
  }
}
