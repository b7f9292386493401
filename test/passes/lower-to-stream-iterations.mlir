// The loop count must be in the runtime's range 1..10^6 (support/Limits.h):
// the StreamProgram's field is 32 bits, so a larger count used to wrap
// (99999999999 became 1215752191, 2^32 + 5 became 5).
// RUN: not pipefill-opt %s --pipefill-simulate --pipefill-lower-to-stream=iterations=99999999999 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not pipefill-opt %s --pipefill-simulate --pipefill-lower-to-stream=iterations=4294967301 2>&1 | FileCheck %s --check-prefix=WRAP
// RUN: not pipefill-opt %s --pipefill-simulate --pipefill-lower-to-stream=iterations=1000001 2>&1 | FileCheck %s --check-prefix=ABOVE
// RUN: not pipefill-opt %s --pipefill-simulate --pipefill-lower-to-stream=iterations=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not pipefill-opt %s --pipefill-simulate --pipefill-lower-to-stream=iterations=-1 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: pipefill-opt %s --pipefill-simulate --pipefill-lower-to-stream=iterations=1000000 | FileCheck %s --check-prefix=MAX
// HUGE: lower-to-stream-iterations.mlir:[[@LINE+7]]:1: error: cannot be lowered with iterations = 99999999999: the runtime runs 1 to 1000000 iterations per run
// WRAP: error: cannot be lowered with iterations = 4294967301:
// ABOVE: error: cannot be lowered with iterations = 1000001:
// ZERO: error: cannot be lowered with iterations = 0:
// NEG: error: cannot be lowered with iterations = -1:
// The largest count is lowered as written.
// MAX: pfstream.program @p_stream iterations 1000000 planned
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
}
