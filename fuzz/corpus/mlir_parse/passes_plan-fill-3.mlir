// A tail chunk (docs/planner.md section 4): a one-layer job at 2 us/sample in
// a 1442 us bubble with a 5% margin (budget 1369.9 us). Batch 256 takes
// 20 + 5 + 512 = 537 us: two fit and leave 295.9 us, where one batch-128
// chunk (281 us) runs as a tail: 640 samples per iteration, 14.9 us (1% of
// the bubble) left idle because no chunk is that short (batch 64: 153 us).
// The stage's account: filled 1355 = useful 1280 + 3 switches x 20 + 3
// launches x 5; idle 87 = margin 72.1 + 14.9.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1642.0, reserve_bytes = 0 : i64, safety_margin = 0.05, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 64, 128, 256>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 1442.0 free 99000000000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 1542.0 end 1642.0
  }
}
pipefill.fill_job @one inference samples 1000000 {
  pipefill.layer "l0" forward 2.0 weights 0 activations 1000
}
