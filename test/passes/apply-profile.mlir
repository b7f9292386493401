// RUN: pipefill-opt %s --split-input-file --verify-diagnostics "--pipefill-apply-profile=profile=%S/Inputs/one-stage.profile.pbtxt" | FileCheck %s

// Measured times replace planned durations; earlier timing results are dropped
// so pipefill-simulate recomputes them.
// CHECK-LABEL: pipefill.pipeline @p
// CHECK-NOT: iteration_us
// CHECK: pipefill.stage 0 attributes {backward_us = 2.000000e+00 : f64, forward_us = 3.000000e+00 : f64}
// CHECK-NEXT: pipefill.forward mb 0 chunk 0 duration 3.000000e+00{{$}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64, iteration_us = 1.0} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0 start 0.0 end 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0 start 1.0 end 3.0
  }
}

// -----

// The profile's program (p_stream) names this pipeline; its shape differs.
// expected-error @+1 {{has 2 stages but profile}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.send activation mb 0 chunk 0 to 1 bytes 8
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 8
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
    // expected-error @+1 {{has no measurement in profile}}
    pipefill.forward mb 1 chunk 0 duration 1.0
    pipefill.backward mb 1 chunk 0 duration 2.0
  }
}

// -----

// expected-error @+1 {{has no instructions to apply a profile to; run pipefill-expand-schedule first}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
  }
}
