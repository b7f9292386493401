pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        @nope layers 0 to 1 batch 1 samples 0 offset 0 planned 1.0 peak 0
      ]
    }
  }
}
