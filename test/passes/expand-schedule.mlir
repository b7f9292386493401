// RUN: pipefill-opt %s --pipefill-expand-schedule --split-input-file | FileCheck %s

// 1F1B, p=2, m=3: stage 0 warms up with p-1-0 = 1 forward, then alternates
// one forward and one backward, then drains; stage 1 (last) alternates from
// the start. Activations flow down, gradients flow back, with the stage's
// activation_bytes.
// CHECK-LABEL: pipefill.pipeline @one_f_one_b
// CHECK:      pipefill.stage 0
// CHECK-NEXT:   pipefill.forward mb 0 chunk 0 duration 1.000000e+01
// CHECK-NEXT:   pipefill.send activation mb 0 chunk 0 to 1 bytes 8
// CHECK-NEXT:   pipefill.forward mb 1 chunk 0
// CHECK-NEXT:   pipefill.send activation mb 1 chunk 0 to 1 bytes 8
// CHECK-NEXT:   pipefill.recv gradient mb 0 chunk 0 from 1 bytes 8
// CHECK-NEXT:   pipefill.backward mb 0 chunk 0 duration 2.000000e+01
// CHECK-NEXT:   pipefill.forward mb 2 chunk 0
// CHECK-NEXT:   pipefill.send activation mb 2 chunk 0 to 1 bytes 8
// CHECK-NEXT:   pipefill.recv gradient mb 1 chunk 0 from 1 bytes 8
// CHECK-NEXT:   pipefill.backward mb 1 chunk 0
// CHECK-NEXT:   pipefill.recv gradient mb 2 chunk 0 from 1 bytes 8
// CHECK-NEXT:   pipefill.backward mb 2 chunk 0
// CHECK-NEXT: }
// CHECK:      pipefill.stage 1
// CHECK-NEXT:   pipefill.recv activation mb 0 chunk 0 from 0 bytes 8
// CHECK-NEXT:   pipefill.forward mb 0 chunk 0
// CHECK-NEXT:   pipefill.backward mb 0 chunk 0
// CHECK-NEXT:   pipefill.send gradient mb 0 chunk 0 to 0 bytes 8
pipefill.pipeline @one_f_one_b schedule one_f_one_b attributes {num_stages = 2 : i64, num_microbatches = 3 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0, activation_bytes = 8 : i64} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0, activation_bytes = 8 : i64} {
  }
}

// -----

// GPipe: every forward before any backward on every stage.
// CHECK-LABEL: pipefill.pipeline @gpipe
// CHECK:      pipefill.stage 0
// CHECK-NEXT:   pipefill.forward mb 0
// CHECK-NEXT:   pipefill.send activation mb 0
// CHECK-NEXT:   pipefill.forward mb 1
// CHECK-NEXT:   pipefill.send activation mb 1
// CHECK-NOT:    pipefill.forward
// CHECK:        pipefill.backward
pipefill.pipeline @gpipe schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 2 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
}

// -----

// Interleaved with v=2: chunk durations are the stage cost / v, and device 1's
// chunk 0 hands its activation back to device 0's chunk 1.
// CHECK-LABEL: pipefill.pipeline @interleaved
// CHECK:     pipefill.stage 0
// CHECK:       pipefill.forward mb 0 chunk 0 duration 5.000000e+00
// CHECK:       pipefill.recv activation mb 0 chunk 0 from 1
// CHECK-NEXT:  pipefill.forward mb 0 chunk 1 duration 5.000000e+00
// CHECK:     pipefill.stage 1
// CHECK:       pipefill.send activation mb 0 chunk 0 to 0
pipefill.pipeline @interleaved schedule interleaved_1f1b attributes {num_stages = 2 : i64, num_microbatches = 2 : i64, virtual_stages = 2 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
}

// -----

// ZB-H1 splits each backward into backward_input (B - W) and backward_weight
// (W); the tail adds the all-reduce (ring: 2(d-1)/d * bytes / bw, with 1 GB/s =
// 1e3 bytes/us: 2*1/2*1000/1000 = 1 us) and the optimizer step.
// CHECK-LABEL: pipefill.pipeline @zb
// CHECK:     pipefill.stage 1
// CHECK:       pipefill.backward_input mb 0 chunk 0 duration 1.200000e+01
// CHECK:       pipefill.backward_weight mb 0 chunk 0 duration 8.000000e+00
// CHECK:       pipefill.allreduce_grads bytes 1000 duration 1.000000e+00
// CHECK-NEXT:  pipefill.optimizer_step duration 3.000000e+00
// CHECK-NEXT: }
pipefill.pipeline @zb schedule zb_h1 attributes {num_stages = 2 : i64, num_microbatches = 2 : i64, device_memory_bytes = 1000 : i64, tail, data_parallel = 2 : i64, grad_bytes = 1000 : i64, allreduce_bandwidth_gbps = 1.0, optimizer_us = 3.0} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0, backward_weight_us = 8.0} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0, backward_weight_us = 8.0} {
  }
}

// -----

// A pipeline that already holds instructions is left as written.
// CHECK-LABEL: pipefill.pipeline @handwritten
// CHECK:      pipefill.stage 0
// CHECK-NEXT:   pipefill.forward mb 0 chunk 0 duration 7.000000e+00
// CHECK-NEXT:   pipefill.backward mb 0 chunk 0 duration 9.000000e+00
// CHECK-NEXT: }
pipefill.pipeline @handwritten schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0} {
    pipefill.forward mb 0 chunk 0 duration 7.0
    pipefill.backward mb 0 chunk 0 duration 9.0
  }
}
