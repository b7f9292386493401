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
pipefill.fill_job @slow inference samples 1000 {
  pipefill.layer "huge" forward 5000.0 weights 1000 activations 100
}
pipefill.fill_job @big inference samples 1000 {
  pipefill.layer "ffn" forward 1.0 weights 30000000000 activations 100
}
pipefill.fill_job @empty inference samples 0 {
  pipefill.layer "l" forward 1.0 weights 1000 activations 100
}
