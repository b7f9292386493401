// RUN: pipefill-opt %s --pipefill-expand-schedule --pipefill-simulate --pipefill-insert-bubbles | FileCheck %s
// RUN: pipefill-opt %s --pipefill-expand-schedule --pipefill-simulate --pipefill-insert-bubbles=min-duration-us=15 | FileCheck %s --check-prefix=MIN

// Same pipeline as simulate.mlir (iteration 124 us). Stage 0 idles [20,42)
// waiting for the first gradient (steady: forwards remain), then [92,104)
// after its last forward (cooldown). Stage 1 idles [0,11) before its first
// instruction (warmup), [71,73) waiting for mb 2, and [103,124) at the end
// (cooldown). Free bytes = 1000 - live during the gap - reserve 100.
// CHECK-LABEL: pipefill.stage 0
// CHECK:      pipefill.send activation mb 1
// CHECK-NEXT: pipefill.bubble steady start 2.000000e+01 duration 2.200000e+01 free 200
// CHECK:      pipefill.recv gradient mb 0
// CHECK:      pipefill.bubble cooldown start 9.200000e+01 duration 1.200000e+01 free 300{{$}}
// CHECK-NEXT: pipefill.recv gradient mb 2
// CHECK-LABEL: pipefill.stage 1
// CHECK-NEXT: pipefill.bubble warmup start 0.000000e+00 duration 1.100000e+01 free 400
// CHECK:      pipefill.bubble steady start 7.100000e+01 duration 2.000000e+00 free 400
// CHECK:      pipefill.send gradient mb 2
// CHECK-NEXT: pipefill.bubble cooldown start 1.030000e+02 duration 2.100000e+01 free 400

// With a 15 us minimum only stage 0's 22 us and stage 1's 21 us gaps remain.
// MIN:     pipefill.bubble steady start 2.000000e+01 duration 2.200000e+01
// MIN:     pipefill.bubble cooldown start 1.030000e+02 duration 2.100000e+01
// MIN-NOT: pipefill.bubble
pipefill.pipeline @p schedule one_f_one_b attributes {num_stages = 2 : i64, num_microbatches = 3 : i64, device_memory_bytes = 1000 : i64, p2p_latency_us = 1.0, min_bubble_us = 0.0, reserve_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0, activation_bytes = 8 : i64, stash_bytes = 100 : i64, static_bytes = 500 : i64} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0, activation_bytes = 8 : i64, stash_bytes = 100 : i64, static_bytes = 500 : i64} {
  }
}
