pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0 start 2.0 end 1.0
  }
}
