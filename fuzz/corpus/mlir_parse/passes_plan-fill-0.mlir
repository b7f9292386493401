// One 875 us bubble, one job of 10 layers at 10 us/sample, batch forced to 8,
// no safety margin, 20 us context switch, 5 us launch per layer and no memory
// pressure. A layer at batch 8 takes 5 + 8 x 10 = 85 us, so a whole batch is
// 20 + 10 x 85 = 870 us <= 875: one batch per iteration, period 1, 8 samples
// per iteration, efficiency 8 x 10 x 10 / 870 = 0.9195.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
  pipefill.layer "l2" forward 10.0 weights 1000 activations 100
  pipefill.layer "l3" forward 10.0 weights 1000 activations 100
  pipefill.layer "l4" forward 10.0 weights 1000 activations 100
  pipefill.layer "l5" forward 10.0 weights 1000 activations 100
  pipefill.layer "l6" forward 10.0 weights 1000 activations 100
  pipefill.layer "l7" forward 10.0 weights 1000 activations 100
  pipefill.layer "l8" forward 10.0 weights 1000 activations 100
  pipefill.layer "l9" forward 10.0 weights 1000 activations 100
}
