// Interleaved with v=2: chunk durations are the stage cost / v, and device 1's
// chunk 0 hands its activation back to device 0's chunk 1.
pipefill.pipeline @interleaved schedule interleaved_1f1b attributes {num_stages = 2 : i64, num_microbatches = 2 : i64, virtual_stages = 2 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
}
