// RUN: pipefill-opt %s --pipefill-expand-schedule --pipefill-simulate | FileCheck %s

// 1F1B, p=2, m=3, F=10, B=20, 1 us P2P latency, infinite bandwidth. By hand:
// stage 0: F0 [0,10) F1 [10,20); the gradient of mb 0 leaves stage 1 at 41 and
// arrives at 42: B0 [42,62) F2 [62,72) B1 [72,92); B2 waits for the gradient
// sent at 103: [104,124). Stage 1: F0 waits for the activation (arrives 11):
// [11,21) B0 [21,41) F1 [41,51) B1 [51,71) F2 waits until 73: [73,83) B2 [83,103).
// Memory: static 500 + 100 per stashed micro-batch; stage 0 peaks with
// min(p-0, m) = 2 in flight.
// CHECK-LABEL: pipefill.pipeline @p
// CHECK-SAME: iteration_us = 1.240000e+02
// CHECK:      pipefill.stage 0 attributes {{{.*}}busy_us = 9.000000e+01 : f64{{.*}}idle_us = 3.400000e+01 : f64, peak_bytes = 700 : i64
// CHECK-NEXT:   pipefill.forward mb 0 {{.*}} start 0.000000e+00 end 1.000000e+01 live 600
// CHECK:        pipefill.forward mb 1 {{.*}} start 1.000000e+01 end 2.000000e+01 live 700
// CHECK:        pipefill.recv gradient mb 0 {{.*}} start 2.000000e+01 end 4.200000e+01
// CHECK-NEXT:   pipefill.backward mb 0 {{.*}} start 4.200000e+01 end 6.200000e+01 live 600
// CHECK-NEXT:   pipefill.forward mb 2 {{.*}} start 6.200000e+01 end 7.200000e+01
// CHECK:        pipefill.backward mb 1 {{.*}} start 7.200000e+01 end 9.200000e+01
// CHECK:        pipefill.backward mb 2 {{.*}} start 1.040000e+02 end 1.240000e+02 live 500
// CHECK:      pipefill.stage 1 attributes {{{.*}}peak_bytes = 600 : i64
// CHECK-NEXT:   pipefill.recv activation mb 0 {{.*}}end 1.100000e+01
// CHECK-NEXT:   pipefill.forward mb 0 {{.*}} start 1.100000e+01 end 2.100000e+01
// CHECK:        pipefill.forward mb 2 {{.*}} start 7.300000e+01 end 8.300000e+01
// CHECK:        pipefill.backward mb 2 {{.*}} start 8.300000e+01 end 1.030000e+02
pipefill.pipeline @p schedule one_f_one_b attributes {num_stages = 2 : i64, num_microbatches = 3 : i64, device_memory_bytes = 1000 : i64, p2p_latency_us = 1.0} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0, activation_bytes = 8 : i64, stash_bytes = 100 : i64, static_bytes = 500 : i64} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0, activation_bytes = 8 : i64, stash_bytes = 100 : i64, static_bytes = 500 : i64} {
  }
}
