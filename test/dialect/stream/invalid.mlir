// RUN: pipefill-opt %s --split-input-file --verify-diagnostics
// One case per verifier error of the pfstream dialect.

pfstream.program @p iterations 1 planned 1.0 {
  // expected-error @+1 {{has index 1 at position 0; devices must be numbered in order}}
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  // expected-error @+1 {{is not allowed in a program; expected only 'pfstream.device'}}
  builtin.module {
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  // expected-error @+1 {{has 0 main streams; exactly one is required}}
  pfstream.device 0 {
    pfstream.stream 0 fill priority low {
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    // expected-error @+1 {{has index 1; events must be numbered 0, 1, ... in order}}
    pfstream.event 1 "e"
    pfstream.stream 0 main priority high {
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    // expected-error @+1 {{has index 2; streams must be numbered 0, 1, ... in order}}
    pfstream.stream 2 main priority high {
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    // expected-error @+1 {{is not allowed in a device; expected 'pfstream.event' or 'pfstream.stream'}}
    builtin.module {
    }
    pfstream.stream 0 main priority high {
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{names event 0 but the device declares 0}}
      pfstream.record 0
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.event 0 "e"
    pfstream.stream 0 main priority high {
      pfstream.record 0
      // expected-error @+1 {{records event 0, which is already recorded in this iteration}}
      pfstream.record 0
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{names event 3 but the device declares 0}}
      pfstream.wait 3
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
    pfstream.stream 1 fill priority low {
      // expected-error @+1 {{must be on the main stream}}
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
      // expected-error @+1 {{repeats bubble id 0}}
      pfstream.bubble 0 steady start 2.0 duration 1.0 free 0
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
    pfstream.stream 1 fill priority low {
      // expected-error @+1 {{of the main job is not allowed on a fill stream}}
      pfstream.compute forward mb 0 chunk 0 planned 1.0 at 0.0
    }
  }
}

// -----

pipefill.fill_job @j inference samples 10 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
      // expected-error @+1 {{must not run on the main stream}}
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 1 batch 1 samples 0 offset 0 planned 1.0 peak 0
      ]
    }
  }
}

// -----

pipefill.fill_job @j inference samples 10 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
    pfstream.stream 1 fill priority low {
      // expected-error @+1 {{names bubble 4, which the main stream does not mark}}
      pfstream.fill_chunks bubble 4 [
        @j layers 0 to 1 batch 1 samples 0 offset 0 planned 1.0 peak 0
      ]
    }
  }
}

// -----

// Fill never blocks main, even through a copy stream.
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.event 0 "fill_done"
    pfstream.event 1 "copy_done"
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{makes the main stream wait on fill work (event 1); fill must never block the main job}}
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

// -----

pipefill.fill_job @j inference samples 10 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      // expected-error @+2 {{'pfstream.fill_chunks' op chunk 0 runs passes [0, 2) but @j has 1}}
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 2 batch 1 samples 0 offset 0 planned 1.0 peak 0
      ]
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      // expected-error @+2 {{'pfstream.fill_chunks' op chunk 0 refers to @nope, which is not a 'pipefill.fill_job'}}
      pfstream.fill_chunks bubble 0 [
        @nope layers 0 to 1 batch 1 samples 0 offset 0 planned 1.0 peak 0
      ]
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.recv from 1 bytes 8 tag 3 at 0.0
      // expected-error @+1 {{reuses tag 3 from device 1}}
      pfstream.recv from 1 bytes 8 tag 3 at 0.0
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.send to 1 bytes 8 tag 0 planned 0.0 at 0.0
      // expected-error @+1 {{reuses tag 0 to device 1}}
      pfstream.send to 1 bytes 8 tag 0 planned 0.0 at 0.0
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{to device 1 with tag 0 has no matching recv}}
      pfstream.send to 1 bytes 8 tag 0 planned 0.0 at 0.0
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.send to 1 bytes 8 tag 0 planned 0.0 at 0.0
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{expects 16 bytes but the send carries 8}}
      pfstream.recv from 0 bytes 16 tag 0 at 0.0
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{from device 0 with tag 7 has no matching send}}
      pfstream.recv from 0 bytes 16 tag 7 at 0.0
    }
  }
}

// -----

// Names become proto3 strings of the StreamProgram: UTF-8 only.
// expected-error @+1 {{attribute 'sym_name' failed to satisfy constraint: string attribute whose text is valid UTF-8}}
pfstream.program @"p\80" iterations 1 planned 1.0 {
}

// -----

pipefill.fill_job @j inference samples 10 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 1 batch 1 samples 0 offset 0 planned 1.0 peak 0,
        // expected-error @+1 {{'pfstream.fill_chunks' op chunk 1 has phase 2 outside its period 2}}
        @j layers 0 to 1 batch 1 samples 1 offset 0 planned 1.0 peak 0 period 2 phase 2
      ]
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        // expected-error @+1 {{'pfstream.fill_chunks' op chunk 0 planned must be a finite number >= 0 (got -1)}}
        @j layers 0 to 1 batch 1 samples 0 offset 0 planned -1.0 peak 0
      ]
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        // expected-error @+1 {{expected 'streamed'}}
        @j layers 0 to 1 batch 1 samples 0 offset 0 planned 1.0 peak 0 weights resident
      ]
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      // The generic form: the table is an array of dictionaries.
      // expected-error @+1 {{chunks: a chunk has no 'planned'}}
      "pfstream.fill_chunks"() <{bubble_id = 0 : i64, chunks = [{job = @j, layers = 0 : i64, to = 1 : i64, batch = 1 : i64, samples = 0 : i64, offset = 0 : i64, peak = 0 : i64}]}> : () -> ()
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{planned start must be a finite number >= 0 (got -1)}}
      pfstream.compute forward mb 0 chunk 0 planned 1.0 at -1.0
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      // The generic form: a planned start is an f64 attribute.
      // expected-error @+1 {{planned_start_us must be a finite f64 >= 0}}
      "pfstream.recv"() <{peer = 1 : i64, bytes = 8 : i64, tag = 0 : i64, planned_start_us = 3 : i64}> : () -> ()
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      // expected-error @+1 {{chunks: 'planned' must be an f64}}
      "pfstream.fill_chunks"() <{bubble_id = 0 : i64, chunks = [{job = @j, layers = 0 : i64, to = 1 : i64, batch = 1 : i64, samples = 0 : i64, offset = 0 : i64, planned = 2 : i64, peak = 0 : i64}]}> : () -> ()
    }
  }
}

// -----

pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      // expected-error @+1 {{chunks: 'layers' must be an i64}}
      "pfstream.fill_chunks"() <{bubble_id = 0 : i64, chunks = [{job = @j, layers = 0 : i32, to = 1 : i64, batch = 1 : i64, samples = 0 : i64, offset = 0 : i64, planned = 2.0, peak = 0 : i64}]}> : () -> ()
    }
  }
}

// -----

// The runtime's limit (support/Limits.h); the exported field is 32 bits.
// expected-error @+1 {{iterations = 1000001 exceeds the limit of 1000000 per run}}
pfstream.program @p iterations 1000001 planned 1.0 {
}

// -----

// expected-error @+1 {{iterations = 4294967301 exceeds the limit of 1000000 per run}}
pfstream.program @p iterations 4294967301 planned 1.0 {
}

// -----

// A number beyond the StreamProgram's uint32 field: the export would cut it
// to its low 32 bits (tag 4294967296 would become tag 0).
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      // expected-error @+1 {{attribute 'tag' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative whose maximum value is 4294967295}}
      pfstream.send to 1 bytes 1 tag 4294967296 planned 1.0 at 0.0
    }
  }
}

// -----

// A chunk's batch beyond the StreamProgram's 32 bits (2^32 + 2 would become 2).
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        // expected-error @+1 {{'pfstream.fill_chunks' op chunk 0 has a batch, layer, period or offset beyond the StreamProgram's 32-bit fields}}
        @j layers 0 to 1 batch 4294967298 samples 0 offset 0 planned 1.0 peak 0
      ]
    }
  }
}

// -----

// An offset beyond int32 (4294967296 would become 0).
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pfstream.program @p iterations 1 planned 1.0 {
  pfstream.device 0 {
    pfstream.stream 0 main priority high {
      pfstream.bubble 0 steady start 0.0 duration 1.0 free 0
    }
    pfstream.stream 1 fill priority low {
      pfstream.fill_chunks bubble 0 [
        // expected-error @+1 {{'pfstream.fill_chunks' op chunk 0 has a batch, layer, period or offset beyond the StreamProgram's 32-bit fields}}
        @j layers 0 to 1 batch 1 samples 0 offset 4294967296 planned 1.0 peak 0
      ]
    }
  }
}
