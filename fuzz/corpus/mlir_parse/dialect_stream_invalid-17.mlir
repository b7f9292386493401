pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.recv from 1 bytes 8 tag 3 at 0.0
      pfstream.recv from 1 bytes 8 tag 3 at 0.0
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
    }
  }
}
