// An op the StreamProgram has no message for, on the second device (the
// devices are exported in parallel; the error names this op all the same).
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{'test.unknown' op has no StreamProgram form}}
      "test.unknown"() : () -> ()
    }
  }
}
