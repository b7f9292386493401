// RUN: pipefill-opt %s "--pipefill-apply-profile=profile=%S/Inputs/chunk-gap.profile.pbtxt" | FileCheck %s
// RUN: pipefill-opt %s "--pipefill-apply-profile=profile=%S/Inputs/chunk-gap-unmeasured.profile.pbtxt" | FileCheck %s --check-prefix=KEPT

// The measured mean gap between a bubble's chunks (55 us) replaces the JobSpec's fixed cost per
// chunk (context_switch_us, 5 us here); an unmeasured one leaves it.
// CHECK: pipefill.pipeline @p
// CHECK-SAME: context_switch_us = 5.500000e+01
// KEPT: pipefill.pipeline @p
// KEPT-SAME: context_switch_us = 5.000000e+00
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64, context_switch_us = 5.0 : f64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
}
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "a" forward 10.0 weights 10 activations 1
}
