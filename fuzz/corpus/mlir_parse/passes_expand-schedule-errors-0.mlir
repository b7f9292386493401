// Megatron's interleaved schedule needs m to be a multiple of p.
pipefill.pipeline @p schedule interleaved_1f1b attributes {num_stages = 4 : i64, num_microbatches = 6 : i64, virtual_stages = 2 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
  pipefill.stage 2 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
  pipefill.stage 3 attributes {forward_us = 10.0, backward_us = 20.0} {
  }
}
