pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
      pfstream.recv from 0 bytes 16 tag 7 at 0.0
    }
  }
}
