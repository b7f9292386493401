pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
      pfstream.bubble 0 steady start 2.0 duration 1.0 free 0
    }
  }
}
