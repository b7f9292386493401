// A chunk claiming less time than its layers take (2 layers at batch 8 take
// 20 + 2 x 85 = 190 us, not 100) is caught by recomputation, as is an
// assignment whose persistent bytes disagree (2 x 1000 weights + 8 x 100
// activations = 2800). Each violation is reported on the op that causes it,
// in the terms of its assembly, then once on the pipeline.
pipefill.pipeline @lie schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.0 persistent 2200
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 fills [
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 100.0 mem 3800
    ]
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}
