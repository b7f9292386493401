// RUN: pipefill-opt %s --pipefill-plan-fill --split-input-file --verify-diagnostics

// pipefill-plan-fill plans into the bubbles the IR has, so it refuses one that is not a gap of the
// simulated timeline (IR edited by hand: the steady bubble made 6000 us long in a 875 us gap; it
// was planned 5985 us of fill).
pipefill.pipeline @long schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0 live 1000
    // expected-error @+1 {{spans 100 to 6100 us, outside the stage's idle gap from 100 to 975 us}}
    pipefill.bubble steady start 100.0 duration 6000.0 free 99000000000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
}

// -----

// A bubble before the first instruction starts at 0 and ends where it starts; the tail bubble
// ends at the iteration's end. Both as insert-bubbles makes them: planned without complaint.
pipefill.pipeline @edges schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1200.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64, static_bytes = 500 : i64} {
    pipefill.bubble warmup start 0.0 duration 100.0 free 99999999500
    pipefill.forward mb 0 chunk 0 duration 100.0 start 100.0 end 200.0 live 1000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 200.0 end 300.0 live 500
    pipefill.bubble cooldown start 300.0 duration 900.0 free 99999999500
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
}
