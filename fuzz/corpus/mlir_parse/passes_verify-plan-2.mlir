// A fill op without an assignment on its stage.
pipefill.pipeline @orphan schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 fills [
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 190.0 mem 3800
    ]
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}
