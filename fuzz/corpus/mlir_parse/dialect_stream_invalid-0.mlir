// One case per verifier error of the pfstream dialect.

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
    }
  }
}
