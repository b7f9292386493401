// RUN: pipefill-opt %s --pipefill-plan-fill --split-input-file --verify-diagnostics

// Planner settings the planner cannot use are refused by the pipeline's verifier, at the
// pipeline, in the attributes' own names (the planner refuses them too, in its words: "cannot
// plan fill work" with a note per problem, for a caller that builds its input without the IR).
// A safety margin of 1 leaves no bubble time to plan.
// expected-error @+1 {{'pipefill.pipeline' op safety_margin = 1 must be below 1: it is the share of each bubble kept free}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 1.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
}

// -----

// A batch size the planner cannot run.
// expected-error @+1 {{'pipefill.pipeline' op batch_sizes holds 0: a batch size must be in [1, 2^31-1]}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 0>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
}

// -----

// No batch size to try.
// expected-error @+1 {{'pipefill.pipeline' op batch_sizes is empty (leave it out for the planner's default sizes)}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
}

// -----

// No HBM bandwidth: no layer time can be modelled.
// expected-error @+1 {{'pipefill.pipeline' op hbm_bandwidth_gbps must be positive: fill layers' memory time is their bytes over it}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, hbm_bandwidth_gbps = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
}
