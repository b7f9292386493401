// A pipeline that already holds instructions is left as written.
pipefill.pipeline @handwritten schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0} {
    pipefill.forward mb 0 chunk 0 duration 7.0
    pipefill.backward mb 0 chunk 0 duration 9.0
  }
}
