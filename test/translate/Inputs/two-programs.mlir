// Two stream programs in one module: the exports write one StreamProgram; the
// error is at the second.
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
  }
}
// expected-error @+1 {{expected one pfstream.program per module}}
pfstream.program @q iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
  }
}
