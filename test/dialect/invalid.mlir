// RUN: pipefill-opt %s --split-input-file --verify-diagnostics
// One case per verifier error of the pipefill dialect.

// expected-error @+1 {{virtual_stages = 2 requires schedule interleaved_1f1b (or imported)}}
pipefill.pipeline @p schedule one_f_one_b attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, virtual_stages = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  // expected-error @+1 {{expected only 'pipefill.stage' ops}}
  builtin.module {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  // expected-error @+1 {{has index 1 at position 0; stages must be numbered 0..1 in order}}
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

// expected-error @+1 {{has 1 stages but num_stages = 2}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{ends (1 us) before it starts (2 us)}}
    pipefill.forward mb 0 chunk 0 duration 1.0 start 2.0 end 1.0
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.forward' op start must be a finite number >= 0 (got -2)}}
    pipefill.forward mb 0 chunk 0 duration 1.0 start -2.0 end 1.0
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{live bytes must be >= 0}}
    pipefill.forward mb 0 chunk 0 duration 1.0 start 0.0 end 1.0 live -5
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // The generic form: timing is a dictionary of start_us, end_us, live_bytes.
    // expected-error @+1 {{timing: unknown key 'begin_us'}}
    "pipefill.forward"() <{microbatch = 0 : i64, chunk = 0 : i64, duration_us = 1.0, timing = {begin_us = 0.0}}> : () -> ()
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{timing: expected a dictionary}}
    "pipefill.forward"() <{microbatch = 0 : i64, chunk = 0 : i64, duration_us = 1.0, timing = 5 : i64}> : () -> ()
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{timing: 'live_bytes' must be an i64 >= 0}}
    "pipefill.forward"() <{microbatch = 0 : i64, chunk = 0 : i64, duration_us = 1.0, timing = {live_bytes = -1 : i64}}> : () -> ()
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{micro-batch 2 is out of range [0, 2)}}
    pipefill.forward mb 2 chunk 0 duration 1.0
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{chunk 1 is out of range [0, 1)}}
    pipefill.forward mb 0 chunk 1 duration 1.0
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    // expected-error @+1 {{repeats the forward of micro-batch 0 chunk 0 on stage 0}}
    pipefill.forward mb 0 chunk 0 duration 1.0
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{of micro-batch 1 chunk 0 comes before its forward on stage 0}}
    pipefill.backward mb 1 chunk 0 duration 1.0
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 1.0
    // expected-error @+1 {{repeats the backward of micro-batch 0 chunk 0 on stage 0}}
    pipefill.backward mb 0 chunk 0 duration 1.0
  }
}

// -----

pipefill.pipeline @p schedule zb_h1 attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, backward_weight_us = 1.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    // expected-error @+1 {{of micro-batch 0 chunk 0 comes before its backward_input on stage 0}}
    pipefill.backward_weight mb 0 chunk 0 duration 1.0
  }
}

// -----

// A repeated backward_weight is refused at the second one (the verifier used
// to pass it and pipefill-simulate then blamed the pipeline for a missing
// backward_input).
pipefill.pipeline @p schedule zb_h1 attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, backward_weight_us = 1.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward_input mb 0 chunk 0 duration 1.0
    pipefill.backward_weight mb 0 chunk 0 duration 1.0
    // expected-error @+1 {{'pipefill.backward_weight' op repeats the backward_weight of micro-batch 0 chunk 0 on stage 0}}
    pipefill.backward_weight mb 0 chunk 0 duration 1.0
  }
}

// -----

// A pipeline that holds instructions is complete: a stage without any (here
// the last one, which --to-torch-schedule used to drop from its table)...
pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
  // expected-error @+1 {{'pipefill.stage' op never runs the forward of micro-batch 0 chunk 0; a pipeline with instructions runs the forward and backward of every micro-batch and chunk on every stage}}
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0} {
  }
}

// -----

// ... a stage that skips a micro-batch its peer runs...
pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  // expected-error @+1 {{never runs the forward of micro-batch 1 chunk 0}}
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
    pipefill.forward mb 1 chunk 0 duration 1.0
    pipefill.backward mb 1 chunk 0 duration 2.0
  }
}

// -----

// ... a chunk it never runs (chunk 1 of an interleaved stage)...
pipefill.pipeline @p schedule interleaved_1f1b attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, virtual_stages = 2 : i64, device_memory_bytes = 100 : i64} {
  // expected-error @+1 {{never runs the forward of micro-batch 0 chunk 1}}
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 0.5
    pipefill.backward mb 0 chunk 0 duration 1.0
  }
}

// -----

// ... a forward without its backward (reported at the forward)...
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
    // expected-error @+1 {{'pipefill.forward' op of micro-batch 1 chunk 0 on stage 0 has no backward (or backward_input and backward_weight)}}
    pipefill.forward mb 1 chunk 0 duration 1.0
  }
}

// -----

// ... and a backward_input without its backward_weight.
pipefill.pipeline @p schedule zb_h1 attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, backward_weight_us = 1.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    // expected-error @+1 {{'pipefill.backward_input' op of micro-batch 0 chunk 0 on stage 0 has no backward_weight}}
    pipefill.backward_input mb 0 chunk 0 duration 1.0
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    // expected-error @+1 {{peer stage 2 is out of range [0, 2)}}
    pipefill.send activation mb 0 chunk 0 to 2 bytes 8
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{names its own stage 0 as peer}}
    pipefill.send activation mb 0 chunk 0 to 0 bytes 8
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.send activation mb 0 chunk 0 to 1 bytes 8
    // expected-error @+1 {{duplicates a transfer of activation micro-batch 0 chunk 0}}
    pipefill.send activation mb 0 chunk 0 to 1 bytes 8
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{of activation micro-batch 0 chunk 0 to stage 1 has no matching recv on stage 1}}
    pipefill.send activation mb 0 chunk 0 to 1 bytes 8
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.send activation mb 0 chunk 0 to 1 bytes 8
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{expects 16 bytes but the matching send from stage 0 sends 8}}
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 16
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{of gradient micro-batch 0 chunk 0 from stage 0 has no matching send on stage 0}}
    pipefill.recv gradient mb 0 chunk 0 from 0 bytes 16
  }
}

// -----

pipefill.pipeline @p schedule zb_h1 attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  // expected-error @+1 {{backward_weight_us (3) exceeds backward_us (2)}}
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, backward_weight_us = 3.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{claims 200 free bytes, more than the device's 100}}
    pipefill.bubble warmup start 0.0 duration 1.0 free 200
  }
}

// -----

// A bubble's start, duration and free bytes are native numbers: their ranges
// are the verifier's (a finite time >= 0, bytes >= 0; -0 passes).
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start -0.0 duration 0.0 free 0
    // expected-error @+1 {{'pipefill.bubble' op start must be a finite number >= 0 (got -1)}}
    pipefill.bubble warmup start -1.0 duration 1.0 free 20
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.bubble' op duration must be a finite number >= 0 (got nan)}}
    pipefill.bubble warmup start 0.0 duration 0x7FF8000000000000 free 20
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.bubble' op duration must be a finite number >= 0 (got inf)}}
    pipefill.bubble warmup start 0.0 duration 0x7FF0000000000000 free 20
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.bubble' op free bytes must be >= 0 (got -3)}}
    pipefill.bubble warmup start 0.0 duration 1.0 free -3
  }
}

// -----

// The generic form spells them as attributes; one left out is unset, which
// the verifier reports.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.bubble' op start must be a finite number >= 0 (got nan)}}
    "pipefill.bubble"() <{kind = 0 : i32, duration_us = 1.0, free_bytes = 5 : i64}> : () -> ()
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{expected an i64 attribute}}
    "pipefill.bubble"() <{kind = 0 : i32, start_us = 0.0, duration_us = 1.0, free_bytes = 5.0}> : () -> ()
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // The generic form: a time is an f64 attribute.
    // expected-error @+1 {{expected an f64 attribute}}
    "pipefill.bubble"() <{kind = 0 : i32, start_us = 0 : i64, duration_us = 1.0, free_bytes = 5 : i64}> : () -> ()
  }
}

// -----

pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{holds 12 us of fill work but lasts only 10 us}}
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      @j layers 0 to 1 batch 1 samples 0 weights resident acts device time 6.0 mem 1,
      @j layers 0 to 1 batch 1 samples 1 weights resident acts device time 6.0 mem 1
    ]
  }
}

// -----

pipefill.fill_job @j inference samples 1 {
  // expected-error @+1 {{is not allowed in a fill job; expected only 'pipefill.layer'}}
  builtin.module {
  }
}

// -----

// expected-error @+1 {{'j' has no layers}}
pipefill.fill_job @j inference samples 1 {
}

// -----

pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{has an empty layer range [1, 1)}}
      @j layers 1 to 1 batch 1 samples 0 weights resident acts device time 6.0 mem 1
    ]
  }
}

// -----

pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{needs 60 bytes but the bubble has 50 free}}
      @j layers 0 to 1 batch 1 samples 0 weights resident acts device time 6.0 mem 60
    ]
  }
}

// -----

pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{holds 11 us of fill work but lasts only 10 us}}
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      @j layers 0 to 1 batch 1 samples 0 weights resident acts device time 11.0 mem 1
    ]
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{refers to @nope, which is not a 'pipefill.fill_job'}}
      @nope layers 0 to 1 batch 1 samples 0 weights resident acts device time 1.0 mem 1
    ]
  }
}

// -----

pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{runs layers up to 3 but @j has 1}}
      @j layers 0 to 3 batch 1 samples 0 weights resident acts device time 1.0 mem 1
    ]
  }
}

// -----

// A bubble's fill chunks are rows of its table, not ops.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{custom op 'pipefill.fill' is unknown}}
    pipefill.fill @j layers 0 to 1 batch 1 samples 0 weights resident acts device time 1.0 mem 1
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{expected 'resident' or 'streamed'}}
      @j layers 0 to 1 batch 1 samples 0 weights sideways acts device time 1.0 mem 1
    ]
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{expected 'device' or 'host'}}
      @j layers 0 to 1 batch 1 samples 0 weights resident acts disk time 1.0 mem 1
    ]
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+2 {{expected 'mem'}}
      @j layers 0 to 1 batch 1 samples 0 weights resident acts device time 1.0
    ]
  }
}

// -----

pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      @j layers 0 to 1 batch 1 samples 0 weights resident acts device time 1.0 mem 1,
      // expected-error @+1 {{'pipefill.bubble' op fill 1 time must be a finite number >= 0 (got -1)}}
      @j layers 0 to 1 batch 1 samples 1 weights resident acts device time -1.0 mem 1
    ]
  }
}

// -----

pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{'pipefill.bubble' op fill 0 offset must be a finite number >= 0 (got nan)}}
      @j layers 0 to 1 batch 1 samples 0 weights resident acts device time 1.0 mem 1 offset 0x7FF8000000000000
    ]
  }
}

// -----

pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{'pipefill.bubble' op fill 0 must have a batch and a repeat count of at least 1 (got 1 and 0)}}
      @j layers 0 to 1 batch 1 samples 0 weights resident acts device time 1.0 mem 1 repeat 0
    ]
  }
}

// -----

pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{'pipefill.bubble' op fill 0 has a batch of 65537 samples; the runtime runs at most 65536}}
      @j layers 0 to 1 batch 65537 samples 0 weights resident acts device time 1.0 mem 1
    ]
  }
}

// -----

pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{'pipefill.bubble' op fill 0 is in iteration 2000000000 of its plan, past any prefix and period (1001024)}}
      @j layers 0 to 1 batch 1 samples 0 weights resident acts device time 1.0 mem 1 iteration 2000000000
    ]
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // The generic form: the table is an array of dictionaries.
    // expected-error @+1 {{fills: expected an array of dictionaries}}
    "pipefill.bubble"() <{kind = 0 : i32, start_us = 0.0, duration_us = 1.0, free_bytes = 5 : i64, fills = 3 : i64}> : () -> ()
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{fills: a chunk has no 'mem'}}
    "pipefill.bubble"() <{kind = 0 : i32, start_us = 0.0, duration_us = 1.0, free_bytes = 5 : i64, fills = [{job = @j, layers = 0 : i64, to = 1 : i64, batch = 1 : i64, samples = 0 : i64, weights = 0 : i32, acts = 0 : i32, time = 1.0}]}> : () -> ()
  }
}

// -----

// A chunk's layers, batch, iteration and repeat are 32-bit (dialect/FillTable.h):
// larger values are refused, in the custom form and in the generic one.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      // expected-error @+1 {{integer value too large}}
      @j layers 0 to 4294967297 batch 1 samples 0 weights resident acts device time 1.0 mem 1
    ]
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{fills: 'repeat' is 4294967296, beyond 32 bits}}
    "pipefill.bubble"() <{kind = 0 : i32, start_us = 0.0, duration_us = 1.0, free_bytes = 5 : i64, fills = [{job = @j, layers = 0 : i64, to = 1 : i64, batch = 1 : i64, samples = 0 : i64, weights = 0 : i32, acts = 0 : i32, time = 1.0, mem = 1 : i64, repeat = 4294967296 : i64}]}> : () -> ()
  }
}

// -----

// expected-error @+1 {{'pipefill.forward' op expects parent op 'pipefill.stage'}}
pipefill.forward mb 0 chunk 0 duration 1.0

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.forward' op duration_us must be a number >= 0 (got -1)}}
    pipefill.forward mb 0 chunk 0 duration -1.0
  }
}

// -----

// NaN is not >= 0.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.forward' op duration_us must be a number >= 0 (got nan)}}
    pipefill.forward mb 0 chunk 0 duration 0x7FF8000000000000
  }
}

// -----

// The JobSpec's bound for one op (1e9 us) holds here too: 1e300 us printed as 1e30 ms in the
// summary. The bound itself passes.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0e9
    // expected-error @+1 {{'pipefill.backward' op duration_us 1e+300 exceeds 1e+09 us (1000 s), the limit for one instruction}}
    pipefill.backward mb 0 chunk 0 duration 1.0e300
  }
}

// -----

// -0.0 (== 0) passes; the smallest negative denormal does not.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.forward mb 0 chunk 0 duration -0.0
    // expected-error @+1 {{'pipefill.forward' op duration_us must be a number >= 0 (got -4.94066e-324)}}
    pipefill.forward mb 1 chunk 0 duration 0x8000000000000001
  }
}

// -----

// Instruction fields are native numbers (no attribute constraint): the op's
// verifier checks each, in the custom and in the generic form, where a
// missing key leaves the field unset (-1, NaN).
pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.backward' op microbatch must be >= 0 (got -1)}}
    pipefill.backward mb -1 chunk 0 duration 1.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.backward_weight' op chunk must be >= 0 (got -2)}}
    pipefill.backward_weight mb 0 chunk -2 duration 1.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.send' op peer must be >= 0 (got -1)}}
    pipefill.send activation mb 0 chunk 0 to -1 bytes 8
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.recv' op bytes must be >= 0 (got -8)}}
    pipefill.recv gradient mb 0 chunk 0 from 1 bytes -8
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.allreduce_grads' op bytes must be >= 0 (got -5)}}
    pipefill.allreduce_grads bytes -5 duration 1.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.optimizer_step' op duration_us must be a number >= 0 (got -3)}}
    pipefill.optimizer_step duration -3.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.backward_input' op duration_us must be a number >= 0 (got nan)}}
    "pipefill.backward_input"() <{microbatch = 0 : i64, chunk = 0 : i64}> : () -> ()
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.send' op microbatch must be >= 0 (got -1)}}
    "pipefill.send"() <{payload = 0 : i32, chunk = 0 : i64, peer = 1 : i64, bytes = 8 : i64}> : () -> ()
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{expected an i64 attribute}}
    "pipefill.forward"() <{microbatch = 0 : i32, chunk = 0 : i64, duration_us = 1.0}> : () -> ()
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

// +inf is >= 0 but past the bound of one instruction (it passed until that bound; -inf never).
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.forward' op duration_us inf exceeds 1e+09 us (1000 s), the limit for one instruction}}
    pipefill.forward mb 0 chunk 0 duration 0x7FF0000000000000
  }
}

// -----

pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 2 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.forward' op duration_us must be a number >= 0 (got -inf)}}
    pipefill.forward mb 1 chunk 0 duration 0xFFF0000000000000
  }
}

// -----

// expected-error @+1 {{attribute 'num_microbatches' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 0 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
  }
}

// -----

// Names reach StreamPrograms (proto3 strings) and JSON reports: UTF-8 only.
// expected-error @+1 {{attribute 'sym_name' failed to satisfy constraint: string attribute whose text is valid UTF-8}}
pipefill.fill_job @"b\FFrt" inference samples 10 {
  pipefill.layer "enc" forward 2.0e1 weights 100 activations 10
}

// -----

pipefill.fill_job @bert inference samples 10 {
  // expected-error @+1 {{attribute 'name' failed to satisfy constraint: string attribute whose text is valid UTF-8}}
  pipefill.layer "e\C3" forward 2.0e1 weights 100 activations 10
}

// -----

// Assignments lead their stage: readers take the stage's leading ops as its
// assignments, so one after an instruction (or a bubble) is refused.
pipefill.fill_job @a inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.assignment @a batch 1 weights resident acts device prefix 0 period 1 batches 1 samples 1.0 persistent 1
    pipefill.forward mb 0 chunk 0 duration 1.0
    // expected-error @+1 {{'pipefill.assignment' op must come before every instruction and bubble of its stage (after 'pipefill.forward')}}
    pipefill.assignment @a batch 1 weights resident acts device prefix 0 period 1 batches 1 samples 1.0 persistent 1
  }
}

// -----

pipefill.fill_job @a inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills []
    // expected-error @+1 {{'pipefill.assignment' op must come before every instruction and bubble of its stage (after 'pipefill.bubble')}}
    pipefill.assignment @a batch 1 weights resident acts device prefix 0 period 1 batches 1 samples 1.0 persistent 1
  }
}

// -----

// A layer's dimensions are 32-bit in the runtime: a larger one was exported cut to its low bits
// (4294967360 as 64), a different layer.
pipefill.fill_job @j inference samples 1 {
  // expected-error @+1 {{hidden = 4294967360 exceeds the runtime's 32-bit limit of 4294967295}}
  pipefill.layer "l" forward 1.0 weights 1 activations 1 {workload = "ENCODER_LAYER", hidden = 4294967360 : i64, heads = 1 : i64, seq = 1 : i64, ffn = 1 : i64}
}

// -----

pipefill.fill_job @j inference samples 1 {
  // expected-error @+1 {{ffn = 4294967424 exceeds the runtime's 32-bit limit}}
  pipefill.layer "l" forward 1.0 weights 1 activations 1 {workload = "MLP", hidden = 64 : i64, ffn = 4294967424 : i64}
}

// -----

pipefill.fill_job @j inference samples 1 {
  // expected-error @+1 {{hidden = 1073741824 gives ffn = 4 x hidden = 4294967296, over the runtime's 32-bit limit of 4294967295; give ffn explicitly}}
  pipefill.layer "l" forward 1.0 weights 1 activations 1 {workload = "MLP", hidden = 1073741824 : i64}
}

// -----

// The largest 32-bit dimensions pass, and so does a hidden whose 4 x fits.
pipefill.fill_job @j inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1 {workload = "MLP", hidden = 1073741823 : i64}
  pipefill.layer "m" forward 1.0 weights 1 activations 1 {workload = "GEMM_CHAIN", hidden = 4294967295 : i64}
}

// -----

// Optimizer states on the host and activation checkpointing are for training jobs.
pipefill.fill_job @a inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{'pipefill.assignment' op sets training knobs for inference job @a}}
    pipefill.assignment @a batch 1 weights resident acts device prefix 0 period 1 batches 1 samples 1.0 persistent 1 {checkpoint}
  }
}
