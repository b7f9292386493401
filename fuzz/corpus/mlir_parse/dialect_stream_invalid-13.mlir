pipefill.fill_job @j inference samples 10 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 4 [
        @j layers 0 to 1 batch 1 samples 0 offset 0 planned 1.0 peak 0
      ]
    }
  }
}
