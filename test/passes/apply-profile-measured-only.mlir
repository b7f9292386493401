// RUN: pipefill-opt %s "--pipefill-apply-profile=profile=%S/Inputs/modelled-and-fill.profile.pbtxt" | FileCheck %s

// Only entries read from a clock are applied: the modelled forward (99 us) leaves the planned
// duration alone; the measured fill-layer cost of layer 0 (25 us/sample) replaces the plan's, the
// unmeasured entry of layer 1 (77) does not.
// CHECK-LABEL: pipefill.pipeline @p
// CHECK: pipefill.forward mb 0 chunk 0 duration 1.000000e+00
// CHECK-LABEL: pipefill.fill_job @j
// CHECK-NEXT: pipefill.layer "a" forward 2.500000e+01
// CHECK-NEXT: pipefill.layer "b" forward 1.000000e+01
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
}
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "a" forward 10.0 weights 10 activations 1
  pipefill.layer "b" forward 10.0 weights 10 activations 1
}
