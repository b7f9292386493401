pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.send to 1 bytes 8 tag 0 planned 0.0 at 0.0
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
      pfstream.recv from 0 bytes 16 tag 0 at 0.0
    }
  }
}
