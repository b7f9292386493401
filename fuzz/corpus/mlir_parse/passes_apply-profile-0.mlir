// Measured times replace planned durations; earlier timing results are dropped
// so pipefill-simulate recomputes them.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64, iteration_us = 1.0} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0 start 0.0 end 1.0
  }
}
