// RUN: pipefill-opt %s --pipefill-plan-fill --pipefill-verify-plan --split-input-file --verify-diagnostics | FileCheck %s

// One 875 us bubble, one job of 10 layers at 10 us/sample, batch forced to 8,
// no safety margin, 20 us context switch, 5 us launch per layer and no memory
// pressure. A layer at batch 8 takes 5 + 8 x 10 = 85 us, so a whole batch is
// 20 + 10 x 85 = 870 us <= 875: one batch per iteration, period 1, 8 samples
// per iteration, efficiency 8 x 10 x 10 / 870 = 0.9195.
// CHECK-LABEL: pipefill.stage 0
// CHECK-NEXT: pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.000000e+00
// CHECK: pipefill.bubble steady start 1.000000e+02 duration 8.750000e+02
// CHECK-NEXT: pipefill.fill @enc layers 0 to 10 batch 8 samples 0 weights resident acts device time 8.700000e+02
// CHECK: pipefill.fill_job @enc inference samples 1000 attributes {efficiency = 0.91954022988505746 : f64, samples_per_iteration = 8.000000e+00 : f64}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 {start_us = 0.0, end_us = 100.0}
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 {
    }
    pipefill.backward mb 0 chunk 0 duration 100.0 {start_us = 975.0, end_us = 1075.0}
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
  pipefill.layer "l2" forward 10.0 weights 1000 activations 100
  pipefill.layer "l3" forward 10.0 weights 1000 activations 100
  pipefill.layer "l4" forward 10.0 weights 1000 activations 100
  pipefill.layer "l5" forward 10.0 weights 1000 activations 100
  pipefill.layer "l6" forward 10.0 weights 1000 activations 100
  pipefill.layer "l7" forward 10.0 weights 1000 activations 100
  pipefill.layer "l8" forward 10.0 weights 1000 activations 100
  pipefill.layer "l9" forward 10.0 weights 1000 activations 100
}

// -----

// Jobs that fit nowhere stay unscheduled with a reason and a warning: a
// layer longer than every bubble, a layer larger than every bubble's free
// memory (streaming cannot help: one layer's weights must be on the device),
// and a job with no samples.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 2000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, batch_sizes = array<i64: 1>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 {start_us = 0.0, end_us = 100.0}
    pipefill.bubble steady start 100.0 duration 875.0 free 1000000000 {
    }
    pipefill.backward mb 0 chunk 0 duration 100.0 {start_us = 975.0, end_us = 1075.0}
  }
}
// expected-warning-re @+1 {{fill job 'slow' is unscheduled: layer 'huge' takes 5.03 ms {{.*}} but the longest bubble allows 875.0 us}}
pipefill.fill_job @slow inference samples 1000 {
  pipefill.layer "huge" forward 5000.0 weights 1000 activations 100
}
// expected-warning-re @+1 {{fill job 'big' is unscheduled: layer 'ffn' needs 30.0 GB {{.*}} but the largest bubble has 1.0 GB free{{.*}}}}
pipefill.fill_job @big inference samples 1000 {
  pipefill.layer "ffn" forward 1.0 weights 30000000000 activations 100
}
// expected-warning @+1 {{fill job 'empty' is unscheduled: the job has no samples (samples = 0)}}
pipefill.fill_job @empty inference samples 0 {
  pipefill.layer "l" forward 1.0 weights 1000 activations 100
}
// CHECK-LABEL: pipefill.fill_job @slow
// CHECK-SAME: unscheduled = "
// CHECK-LABEL: pipefill.fill_job @big
// CHECK-SAME: unscheduled = "
// CHECK-LABEL: pipefill.fill_job @empty
// CHECK-SAME: unscheduled = "

// -----

// expected-error @+1 {{has no simulated bubbles to fill; run pipefill-simulate and pipefill-insert-bubbles first}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
}
pipefill.fill_job @j inference samples 1000 {
  pipefill.layer "l" forward 1.0 weights 1000 activations 100
}
