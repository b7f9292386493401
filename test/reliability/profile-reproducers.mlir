// Profiles are read by the shared reader: errors carry the profile's own
// file:line:col, a profile of another program is refused, and non-finite or
// out-of-range measurements never reach the IR (a huge one used to hang the
// compiler).
// RUN: sed 's/program: "p_stream"/program: "other_stream"/' %S/../passes/Inputs/one-stage.profile.pbtxt > %t.other.pbtxt
// RUN: not pipefill-opt %s "--pipefill-apply-profile=profile=%t.other.pbtxt" 2>&1 | FileCheck %s --check-prefix=OTHER
// OTHER: other.pbtxt:1:1: error: the profile was measured for program 'other_stream', not 'p'
// A profile of another program with another shape is refused as another program's, before any
// of its entries is compared or applied (it used to report the stage count).
// RUN: cp %t.other.pbtxt %t.other2.pbtxt && sed -n '4,$p' %t.other.pbtxt >> %t.other2.pbtxt
// RUN: not pipefill-opt %s "--pipefill-apply-profile=profile=%t.other2.pbtxt" 2>&1 | FileCheck %s --check-prefix=OTHER2
// OTHER2: other2.pbtxt:1:1: error: the profile was measured for program 'other_stream', not 'p'
// OTHER2-NOT: stages but profile
// RUN: sed 's/measured_us: 3/measured_us: 1e300/' %S/../passes/Inputs/one-stage.profile.pbtxt > %t.huge.pbtxt
// RUN: not timeout 20 pipefill-opt %s "--pipefill-apply-profile=profile=%t.huge.pbtxt" 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: huge.pbtxt:6:32: error: stages[0].instructions[0].measured_us must be at most 1e+09 (got 1e+300)
// RUN: sed 's/forward_us: 3/forward_us: nan/' %S/../passes/Inputs/one-stage.profile.pbtxt > %t.nan.pbtxt
// RUN: not pipefill-opt %s "--pipefill-apply-profile=profile=%t.nan.pbtxt" 2>&1 | FileCheck %s --check-prefix=NAN
// NAN: nan.pbtxt:5:3: error: stages[0].forward_us must be a number in [0, 1e+09] (got nan)
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
}
