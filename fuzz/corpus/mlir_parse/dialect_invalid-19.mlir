pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      @j layers 0 to 1 batch 1 samples 0 weights resident acts device time 6.0 mem 1,
      @j layers 0 to 1 batch 1 samples 1 weights resident acts device time 6.0 mem 1
    ]
  }
}
