// 1F1B, p=2, m=3: stage 0 warms up with p-1-0 = 1 forward, then alternates
// one forward and one backward, then drains; stage 1 (last) alternates from
// the start. Activations flow down, gradients flow back, with the stage's
// activation_bytes.
pipefill.pipeline @one_f_one_b schedule one_f_one_b attributes {num_stages = 2 : i64, num_microbatches = 3 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0, activation_bytes = 8 : i64} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0, activation_bytes = 8 : i64} {
  }
}
