// One case per verifier error of the pipefill dialect.

pipefill.pipeline @p schedule one_f_one_b attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, virtual_stages = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}
