// Fill never blocks main, even through a copy stream.
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.event 0 "fill_done"
    pfstream.event 1 "copy_done"
    pfstream.stream 0 main priority high {
      pfstream.wait 1
    }
    pfstream.stream 1 fill priority low {
      pfstream.record 0
    }
    pfstream.stream 2 copy priority normal {
      pfstream.wait 0
      pfstream.record 1
    }
  }
}
