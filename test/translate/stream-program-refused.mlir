// Hand-written pfstream IR that the dialect's verifiers accept but pipefill-run
// would refuse to load: each export refuses it with the runtime's own message
// (runtime/ProgramCheck.h), at the op, chunk row, device or fill-job layer
// that made the offending part of the StreamProgram, and fails.
// RUN: pipefill-translate --to-stream-program %s --split-input-file --verify-diagnostics -o /dev/null
// RUN: pipefill-translate --to-stream-program-text %s --split-input-file --verify-diagnostics -o /dev/null
// RUN: pipefill-translate --to-cpp %s --split-input-file --verify-diagnostics -o /dev/null
// Without --verify-diagnostics: every case is an error and the exit is non-zero.
// RUN: not pipefill-translate --to-stream-program %s --split-input-file -o /dev/null 2>&1 | FileCheck %s
// One file on its own: the file, line and column of the wait, exit 1, and no program file left behind.
// RUN: rm -f %t.pb %t.cpp
// RUN: not pipefill-translate --to-stream-program %S/Inputs/wait-never-recorded.mlir -o %t.pb 2>&1 | FileCheck %s --check-prefix=WAIT
// RUN: not test -e %t.pb
// RUN: not pipefill-translate --to-cpp %S/Inputs/wait-never-recorded.mlir -o %t.cpp 2>&1 | FileCheck %s --check-prefix=WAIT
// RUN: not test -e %t.cpp
// WAIT: wait-never-recorded.mlir:13:7: error: pipefill-run would refuse this StreamProgram: device 0 stream 1 ('fill1') op 0 (wait): waits on event 0 which is never recorded
// WAIT-NEXT: pfstream.wait 0

// A wait on an event that nothing records: the fill stream would wait forever.
// CHECK: error: pipefill-run would refuse this StreamProgram: device 0 stream 1 ('fill1') op 0 (wait): waits on event 0 which is never recorded
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.event 0 "bubble0"
    pfstream.stream 0 main priority high {
      pfstream.compute forward mb 0 chunk 0 planned 10.0 at 0.0
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
    }
    pfstream.stream 1 fill priority low {
      // expected-error @+1 {{pipefill-run would refuse this StreamProgram: device 0 stream 1 ('fill1') op 0 (wait): waits on event 0 which is never recorded}}
      pfstream.wait 0
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 1 batch 4 samples 0 offset 0 planned 20.0 peak 100
      ]
    }
  }
}

// -----

// A chunk of more samples than the runtime runs at once: the error is at its
// row of the table, the third instruction of the fill stream.
// CHECK: error: pipefill-run would refuse this StreamProgram: devices[0].streams[1].ops[2].fill.batch must be at most 65536 (got 100000)
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.event 0 "bubble0"
    pfstream.stream 0 main priority high {
      pfstream.record 0
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
    }
    pfstream.stream 1 fill priority low {
      pfstream.wait 0
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 1 batch 4 samples 0 offset 0 planned 20.0 peak 100,
        // expected-error @+1 {{devices[0].streams[1].ops[2].fill.batch must be at most 65536 (got 100000)}}
        @j layers 0 to 1 batch 100000 samples 4 offset 0 planned 20.0 peak 100
      ]
    }
  }
}

// -----

// A chunk of no samples (the builder's own check).
// CHECK: error: pipefill-run would refuse this StreamProgram: devices[0].streams[1].ops[0]: fill chunk batch must be > 0
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        // expected-error @+1 {{devices[0].streams[1].ops[0]: fill chunk batch must be > 0}}
        @j layers 0 to 1 batch 0 samples 0 offset 0 planned 20.0 peak 100
      ]
    }
  }
}

// -----

// A chunk that continues a batch no chunk began (samples 8 instead of 0).
// CHECK: error: pipefill-run would refuse this StreamProgram: device 0 stream 1 ('fill1') op 1 (fill): continues layers [1, 2) of samples [8, ...) of fill job 0 ('j@0') but no chunk on this device began that batch
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "a" forward 1.0 weights 1 activations 1
  pipefill.layer "b" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 1 batch 2 samples 0 offset 0 planned 20.0 peak 100,
        // expected-error @+1 {{op 1 (fill): continues layers [1, 2) of samples [8, ...) of fill job 0 ('j@0') but no chunk on this device began that batch}}
        @j layers 1 to 2 batch 2 samples 8 offset 0 planned 20.0 peak 100
      ]
    }
  }
}

// -----

// One job's chunks on two fill streams of a device.
// CHECK: error: pipefill-run would refuse this StreamProgram: device 0 stream 2 ('fill2') op 0 (fill): chunks of fill job 0 on device 0 are on streams 1 and 2
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 1 batch 2 samples 0 offset 0 planned 20.0 peak 100
      ]
    }
    pfstream.stream 2 fill priority low {
      pfstream.fill_chunks bubble 0 [
        // expected-error @+1 {{chunks of fill job 0 on device 0 are on streams 1 and 2; one stream per job and device is required}}
        @j layers 0 to 1 batch 2 samples 2 offset 0 planned 20.0 peak 100
      ]
    }
  }
}

// -----

// Two periods for one job's chunks.
// CHECK: error: pipefill-run would refuse this StreamProgram: device 0 stream 1 ('fill1') op 1 (fill): fill job 0 ('j@0') mixes periods 2 and 3
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 1 batch 2 samples 0 offset 0 planned 20.0 peak 100 period 2 phase 0,
        // expected-error @+1 {{fill job 0 ('j@0') mixes periods 2 and 3; all chunks of a job share one period}}
        @j layers 0 to 1 batch 2 samples 2 offset 0 planned 20.0 peak 100 period 3 phase 0
      ]
    }
  }
}

// -----

// A batch spread over more iterations than the runtime carries one.
// CHECK: error: pipefill-run would refuse this StreamProgram: devices[0].streams[1].ops[0].fill.iteration_offset must be at least -1024 (got -2000)
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        // expected-error @+1 {{devices[0].streams[1].ops[0].fill.iteration_offset must be at least -1024 (got -2000)}}
        @j layers 0 to 1 batch 2 samples 0 offset -2000 planned 20.0 peak 100
      ]
    }
  }
}

// -----

// Each device receives before it sends: a deadlock across devices.
// CHECK: error: pipefill-run would refuse this StreamProgram: device 0 stream 0 ('main0') op 0 (recv): can never run: the waits/receives of one iteration form a dependency cycle (deadlock)
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{device 0 stream 0 ('main0') op 0 (recv): can never run: the waits/receives of one iteration form a dependency cycle (deadlock)}}
      pfstream.recv from 1 bytes 64 tag 1 at 0.0
      pfstream.send to 1 bytes 64 tag 0 planned 1.0 at 60.0
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
      pfstream.recv from 0 bytes 64 tag 0 at 61.0
      pfstream.send to 0 bytes 64 tag 1 planned 1.0 at 60.0
    }
  }
}

// -----

// An op planned to last longer than the runtime's limit.
// CHECK: error: pipefill-run would refuse this StreamProgram: devices[0].streams[0].ops[0].compute.planned_us must be at most 1e+09 (got 2e+09)
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{devices[0].streams[0].ops[0].compute.planned_us must be at most 1e+09 (got 2e+09)}}
      pfstream.compute forward mb 0 chunk 0 planned 2.0e9 at 0.0
    }
  }
}

// -----

// More streams on a device than the host backend runs: at the device.
// CHECK: error: pipefill-run would refuse this StreamProgram: devices[0].streams has 17 entries; at most 16 are allowed
pfstream.program @p iterations 1 planned 100.0 {
  // expected-error @+1 {{devices[0].streams has 17 entries; at most 16 are allowed}}
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
    pfstream.stream 1 copy priority normal {
    }
    pfstream.stream 2 copy priority normal {
    }
    pfstream.stream 3 copy priority normal {
    }
    pfstream.stream 4 copy priority normal {
    }
    pfstream.stream 5 copy priority normal {
    }
    pfstream.stream 6 copy priority normal {
    }
    pfstream.stream 7 copy priority normal {
    }
    pfstream.stream 8 copy priority normal {
    }
    pfstream.stream 9 copy priority normal {
    }
    pfstream.stream 10 copy priority normal {
    }
    pfstream.stream 11 copy priority normal {
    }
    pfstream.stream 12 copy priority normal {
    }
    pfstream.stream 13 copy priority normal {
    }
    pfstream.stream 14 copy priority normal {
    }
    pfstream.stream 15 copy priority normal {
    }
    pfstream.stream 16 copy priority normal {
    }
  }
}

// -----

// A fill job's layer the runtime cannot run (heads must divide hidden): at the layer.
// CHECK: error: pipefill-run would refuse this StreamProgram: fill job 0 ('j@0') layer 0: hidden (64) is not a multiple of heads (3)
pipefill.fill_job @j inference samples 100 {
  // expected-error @+1 {{fill job 0 ('j@0') layer 0: hidden (64) is not a multiple of heads (3)}}
  pipefill.layer "l" forward 1.0 weights 1 activations 1 {workload = "ENCODER_LAYER", hidden = 64 : i64, heads = 3 : i64}
}
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 1 batch 2 samples 0 offset 0 planned 20.0 peak 100
      ]
    }
  }
}

// -----

// A training job of encoder layers (the runtime trains MLP and GEMM-chain layers only).
// CHECK: error: pipefill-run would refuse this StreamProgram: fill job 0 ('j@0') layer 1: TRAINING jobs support MLP and GEMM_CHAIN layers only
pipefill.fill_job @j training samples 100 {
  pipefill.layer "a" forward 1.0 weights 1 activations 1 {backward_us_per_sample = 2.0}
  // expected-error @+1 {{fill job 0 ('j@0') layer 1: TRAINING jobs support MLP and GEMM_CHAIN layers only (this is an encoder layer)}}
  pipefill.layer "b" forward 1.0 weights 1 activations 1 {workload = "ENCODER_LAYER", hidden = 64 : i64, heads = 2 : i64, backward_us_per_sample = 2.0}
}
pfstream.program @p iterations 1 planned 100.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 4 batch 2 samples 0 offset 0 planned 20.0 peak 100
      ]
    }
  }
}
