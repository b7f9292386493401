pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.send activation mb 0 chunk 0 to 0 bytes 8
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}
