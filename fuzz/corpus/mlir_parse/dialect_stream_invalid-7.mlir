pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.event 0 "e"
    pfstream.stream 0 main priority high {
      pfstream.record 0
      pfstream.record 0
    }
  }
}
