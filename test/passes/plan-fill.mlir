// RUN: pipefill-opt %s --pipefill-plan-fill --pipefill-verify-plan --split-input-file --verify-diagnostics | FileCheck %s

// One 875 us bubble, one job of 10 layers at 10 us/sample, batch forced to 8,
// no safety margin, 20 us context switch, 5 us launch per layer and no memory
// pressure. A layer at batch 8 takes 5 + 8 x 10 = 85 us, so a whole batch is
// 20 + 10 x 85 = 870 us <= 875: one batch per iteration, period 1, 8 samples
// per iteration, efficiency 8 x 10 x 10 / 870 = 0.9195.
// CHECK-LABEL: pipefill.stage 0
// CHECK-NEXT: pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.000000e+00
// CHECK: pipefill.bubble steady start 1.000000e+02 duration 8.750000e+02 free 99000000000 fills [
// CHECK-NEXT: @enc layers 0 to 10 batch 8 samples 0 weights resident acts device time 8.700000e+02
// CHECK: pipefill.fill_job @enc inference samples 1000 attributes {efficiency = 0.91954022988505746 : f64, samples_per_iteration = 8.000000e+00 : f64}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
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
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 1000000000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
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

// -----

// A tail chunk (docs/planner.md section 4): a one-layer job at 2 us/sample in
// a 1442 us bubble with a 5% margin (budget 1369.9 us). Batch 256 takes
// 20 + 5 + 512 = 537 us: two fit and leave 295.9 us, where one batch-128
// chunk (281 us) runs as a tail: 640 samples per iteration, 14.9 us (1% of
// the bubble) left idle because no chunk is that short (batch 64: 153 us).
// The stage's account: filled 1355 = useful 1280 + 3 switches x 20 + 3
// launches x 5; idle 87 = margin 72.1 + 14.9.
// CHECK-LABEL: pipefill.stage 0
// CHECK-SAME: pipefill.fill_account = {bubble_us = 1.442000e+03 : f64, filled_us = 1.355000e+03 : f64, granularity_us = 0.000000e+00 : f64, idle_us = 8.700000e+01 : f64, launch_us = 1.500000e+01 : f64, margin_us = 72.{{[0-9]+}} : f64, memory_us = 0.000000e+00 : f64, other_overhead_us = 0.000000e+00 : f64, switch_us = 6.000000e+01 : f64, too_short_us = 14.{{[0-9]+}} : f64, useful_us = 1.280000e+03 : f64}
// CHECK-NEXT: pipefill.assignment @one batch 256 weights resident acts device prefix 0 period 1 batches 2 samples 6.400000e+02
// CHECK: @one layers 0 to 1 batch 256 samples 0 {{.*}} time 5.370000e+02 {{.*}}repeat 2
// CHECK-NEXT: @one layers 0 to 1 batch 128 samples 0 {{.*}} time 2.810000e+02 {{.*}}offset 1.074000e+03
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1642.0, reserve_bytes = 0 : i64, safety_margin = 0.05, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 64, 128, 256>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 1442.0 free 99000000000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 1542.0 end 1642.0
  }
}
pipefill.fill_job @one inference samples 1000000 {
  pipefill.layer "l0" forward 2.0 weights 0 activations 1000
}
