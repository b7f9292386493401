pipefill.pipeline @p schedule zb_h1 attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, backward_weight_us = 1.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward_weight mb 0 chunk 0 duration 1.0
  }
}
