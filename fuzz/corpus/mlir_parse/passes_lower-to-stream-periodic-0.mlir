// A periodic plan (prefix 1, period 2, 1 batch per period, 2 layers, batch 3):
// iteration 0 (prefix) begins batch 0 (samples 0-2) and runs layer 0;
// iteration 1 finishes batch 0 and iteration 2 begins batch 1 (samples 3-5),
// iteration 3 = period start again ... The runtime starts in the steady state:
// the prefix chunk is dropped, iteration k becomes phase k - prefix, samples are
// renumbered within the period (batch 1 is the period's first batch -> 0), and
// finishing a batch begun in the previous period uses offset -1.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64, iteration_us = 30.0} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 10.0} {
    pipefill.assignment @j batch 3 weights resident acts device prefix 1 period 2 batches 1 samples 1.5 persistent 10
    pipefill.forward mb 0 chunk 0 duration 10.0 start 0.0 end 10.0
    pipefill.bubble steady start 10.0 duration 10.0 free 500 fills [
      @j layers 0 to 1 batch 3 samples 0 weights resident acts device time 5.0 mem 10,
      @j layers 1 to 2 batch 3 samples 0 weights resident acts device time 5.0 mem 10 iteration 1,
      @j layers 0 to 1 batch 3 samples 3 weights resident acts device time 5.0 mem 10 iteration 2
    ]
    pipefill.backward mb 0 chunk 0 duration 10.0 start 20.0 end 30.0
  }
}
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "a" forward 1.0 weights 10 activations 1
  pipefill.layer "b" forward 1.0 weights 10 activations 1
}
