pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
    pfstream.stream 1 fill priority low {
      pfstream.compute forward mb 0 chunk 0 planned 1.0 at 0.0
    }
  }
}
