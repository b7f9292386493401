// Profiles are read by the shared reader: errors carry the profile's own
// file:line:col, a profile of another program is refused, and non-finite or
// out-of-range measurements never reach the IR (a huge one used to hang the
// compiler).
// OTHER: other.pbtxt:1:1: error: the profile was measured for program 'other_stream', not 'p'
// HUGE: huge.pbtxt:6:32: error: stages[0].instructions[0].measured_us must be at most 1e+09 (got 1e+300)
// NAN: nan.pbtxt:5:3: error: stages[0].forward_us must be a number in [0, 1e+09] (got nan)
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
  }
}
