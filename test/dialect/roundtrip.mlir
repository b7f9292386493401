// RUN: pipefill-opt %s | pipefill-opt | FileCheck %s
// RUN: pipefill-opt %s --mlir-print-op-generic | pipefill-opt | FileCheck %s
// RUN: pipefill-opt %s --emit-bytecode | pipefill-opt | FileCheck %s
// Every op of the dialect prints and parses back to the same IR, also
// through the generic form and through bytecode (a bubble's fill table is a
// native property with its own conversions for both).

// CHECK-LABEL: pipefill.pipeline @tiny schedule one_f_one_b
// CHECK-SAME: num_microbatches = 2
pipefill.pipeline @tiny schedule one_f_one_b attributes {num_stages = 2 : i64, num_microbatches = 2 : i64, device_memory_bytes = 1000000 : i64, tail, data_parallel = 2 : i64, grad_bytes = 100 : i64, allreduce_bandwidth_gbps = 1.0, optimizer_us = 5.0} {
  // CHECK: pipefill.stage 0 attributes {backward_us = 2.000000e+00 : f64, forward_us = 1.000000e+00 : f64, stash_bytes = 10 : i64}
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, stash_bytes = 10 : i64} {
    // CHECK-NEXT: pipefill.bubble warmup start 0.000000e+00 duration 1.000000e+00 free 5000 fills [
    // CHECK-NEXT:   @job layers 0 to 1 batch 4 samples 0 weights resident acts device time 5.000000e-01 mem 100,
    // CHECK-NEXT:   @job layers 0 to 1 batch 2 samples 4 weights streamed acts host time 1.000000e-01 mem 90 copy 2.500000e-02 iteration 1 repeat 3 offset 5.000000e-01
    // CHECK-NEXT: ]
    pipefill.bubble warmup start 0.0 duration 1.0 free 5000 fills [
      @job layers 0 to 1 batch 4 samples 0 weights resident acts device time 0.5 mem 100,
      @job layers 0 to 1 batch 2 samples 4 weights streamed acts host time 0.1 mem 90
          copy 0.025 iteration 1 repeat 3 offset 0.5
    ]
    // An empty table prints nothing.
    // CHECK-NEXT: pipefill.bubble steady start 1.000000e+00 duration 0.000000e+00 free 5000{{$}}
    pipefill.bubble steady start 1.0 duration 0.0 free 5000 fills []
    // CHECK: pipefill.forward mb 0 chunk 0 duration 1.000000e+00 start 1.000000e+00 end 2.000000e+00
    pipefill.forward mb 0 chunk 0 duration 1.0 start 1.0 end 2.0
    // Timing: each of start, end and live only where set.
    // CHECK-NEXT: pipefill.send activation mb 0 chunk 0 to 1 bytes 64 start 2.000000e+00 end 2.000000e+00 live 7{{$}}
    pipefill.send activation mb 0 chunk 0 to 1 bytes 64 start 2.0 end 2.0 live 7
    pipefill.forward mb 1 chunk 0 duration 1.0
    pipefill.send activation mb 1 chunk 0 to 1 bytes 64
    // CHECK: pipefill.recv gradient mb 0 chunk 0 from 1 bytes 64 live 3{{$}}
    pipefill.recv gradient mb 0 chunk 0 from 1 bytes 64 live 3
    pipefill.backward mb 0 chunk 0 duration 2.0
    pipefill.recv gradient mb 1 chunk 0 from 1 bytes 64
    pipefill.backward mb 1 chunk 0 duration 2.0
    // CHECK: pipefill.allreduce_grads bytes 100 duration 3.000000e+00
    pipefill.allreduce_grads bytes 100 duration 3.0
    // CHECK-NEXT: pipefill.optimizer_step duration 5.000000e+00
    pipefill.optimizer_step duration 5.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0, backward_weight_us = 1.0} {
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 64
    pipefill.forward mb 0 chunk 0 duration 1.0
    // CHECK: pipefill.backward_input mb 0 chunk 0 duration 1.000000e+00
    pipefill.backward_input mb 0 chunk 0 duration 1.0
    pipefill.send gradient mb 0 chunk 0 to 0 bytes 64
    // CHECK: pipefill.backward_weight mb 0 chunk 0 duration 1.000000e+00
    pipefill.backward_weight mb 0 chunk 0 duration 1.0
    pipefill.recv activation mb 1 chunk 0 from 0 bytes 64
    pipefill.forward mb 1 chunk 0 duration 1.0
    pipefill.backward mb 1 chunk 0 duration 2.0
    pipefill.send gradient mb 1 chunk 0 to 0 bytes 64
  }
}

// CHECK-LABEL: pipefill.fill_job @job inference samples 1000 attributes {priority = 2.000000e+00 : f64} {
// CHECK-NEXT: pipefill.layer "enc" forward 1.000000e+01 weights 1024 activations 64 {hidden = 256 : i64, workload = "ENCODER_LAYER"}
pipefill.fill_job @job inference samples 1000 attributes {priority = 2.0} {
  pipefill.layer "enc" forward 10.0 weights 1024 activations 64 {workload = "ENCODER_LAYER", hidden = 256 : i64}
}

// CHECK-LABEL: pipefill.fill_job @train training samples 10
// CHECK: backward_us_per_sample = 2.000000e+01
pipefill.fill_job @train training samples 10 {
  pipefill.layer "mlp" forward 10.0 weights 1024 activations 64 {backward_us_per_sample = 20.0, grad_bytes = 1024 : i64, optimizer_bytes = 4096 : i64}
}
