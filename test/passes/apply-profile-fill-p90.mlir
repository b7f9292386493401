// RUN: pipefill-opt %s "--pipefill-apply-profile=profile=%S/Inputs/fill-p90.profile.pbtxt" | FileCheck %s

// Layer 0 takes its p90 (31 us/sample), not its mean (25); layer 1 has no p90 and takes its mean.
// CHECK-LABEL: pipefill.fill_job @j
// CHECK-NEXT: pipefill.layer "a" forward 3.100000e+01
// CHECK-NEXT: pipefill.layer "b" forward 1.200000e+01
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
