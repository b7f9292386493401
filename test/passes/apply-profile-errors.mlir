// RUN: not pipefill-opt %s "--pipefill-apply-profile=profile=%t.missing" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: echo "this is not a profile" > %t.bad.pbtxt
// RUN: not pipefill-opt %s "--pipefill-apply-profile=profile=%t.bad.pbtxt" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not pipefill-opt %s --pipefill-apply-profile 2>&1 | FileCheck %s --check-prefix=NONE
// MISSING: .missing:1:1: error: cannot read profile '{{.*}}.missing': No such file or directory
// BAD: bad.pbtxt:1:6: error: Message type "pipefill.rt.MeasuredProfile" has no field named "this".
// NONE: error: pipefill-apply-profile needs profile=FILE
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
}
