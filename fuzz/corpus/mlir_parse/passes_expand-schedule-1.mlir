// GPipe: every forward before any backward on every stage.
pipefill.pipeline @gpipe schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 2 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
}
