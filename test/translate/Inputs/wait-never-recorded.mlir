// The fill stream waits on event 0, which no stream records (pipefill-run
// refuses the program; stream-program-refused.mlir).
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.event 0 "bubble0"
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
    }
    pfstream.stream 1 fill priority low {
      pfstream.wait 0
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 1 batch 4 samples 0 offset 0 planned 20.0 peak 100
      ]
    }
  }
}
