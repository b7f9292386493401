// Profile entries are matched to the pipeline by their `stage` field, not by
// their place in the list, and every entry must match: a stage measured twice
// or out of range, a device that is not the stage's, an instruction measured
// twice or one the stage does not run are errors at the profile's line.
// (Before, the list position decided, the last of two entries won, and
// entries for instructions that do not exist were ignored.)
// RUN: pipefill-opt %s "--pipefill-apply-profile=profile=%S/Inputs/profile-stages/swapped.pbtxt" | FileCheck %s --check-prefix=SWAPPED
// RUN: not pipefill-opt %s "--pipefill-apply-profile=profile=%S/Inputs/profile-stages/dup-stage.pbtxt" 2>&1 | FileCheck %s --check-prefix=DUP-STAGE
// RUN: not pipefill-opt %s "--pipefill-apply-profile=profile=%S/Inputs/profile-stages/stage-range.pbtxt" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not pipefill-opt %s "--pipefill-apply-profile=profile=%S/Inputs/profile-stages/device-mismatch.pbtxt" 2>&1 | FileCheck %s --check-prefix=DEVICE
// RUN: not pipefill-opt %s "--pipefill-apply-profile=profile=%S/Inputs/profile-stages/dup-instruction.pbtxt" 2>&1 | FileCheck %s --check-prefix=DUP-INSTR
// RUN: not pipefill-opt %s "--pipefill-apply-profile=profile=%S/Inputs/profile-stages/unknown-instruction.pbtxt" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// The profile lists stage 1 (forward 20, backward 40) before stage 0
// (forward 10, backward 30, no `stage` field: 0); each stage gets its own.
// SWAPPED-LABEL: pipefill.stage 0 attributes {backward_us = 3.000000e+01 : f64, forward_us = 1.000000e+01 : f64}
// SWAPPED-NEXT: pipefill.forward mb 0 chunk 0 duration 1.000000e+01{{$}}
// SWAPPED: pipefill.backward mb 0 chunk 0 duration 3.000000e+01{{$}}
// SWAPPED-LABEL: pipefill.stage 1 attributes {backward_us = 4.000000e+01 : f64, forward_us = 2.000000e+01 : f64}
// SWAPPED: pipefill.forward mb 0 chunk 0 duration 2.000000e+01{{$}}
// SWAPPED-NEXT: pipefill.backward mb 0 chunk 0 duration 4.000000e+01{{$}}

// DUP-STAGE: dup-stage.pbtxt:10:3: error: stages[1] measured stage 1 again (first: stages[0] at line 2)
// RANGE: stage-range.pbtxt:3:3: error: stages[0] measured stage 2, but pipeline 'p' has 2 stages
// DEVICE: device-mismatch.pbtxt:3:3: error: stages[0] measured stage 1 on device 0, but the compiled program runs stage 1 on device 1
// DUP-INSTR: dup-instruction.pbtxt:7:3: error: stages[0].instructions[2] measured the FORWARD of micro-batch 0 chunk 0 of stage 0 again (first: instructions[0] at line 5)
// UNKNOWN: unknown-instruction.pbtxt:14:3: error: stages[1].instructions[2] measured the FORWARD of micro-batch 7 chunk 0, which stage 1 of pipeline 'p' does not run
pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.send activation mb 0 chunk 0 to 1 bytes 8
    pipefill.recv gradient mb 0 chunk 0 from 1 bytes 8
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 8
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
    pipefill.send gradient mb 0 chunk 0 to 0 bytes 8
  }
}
