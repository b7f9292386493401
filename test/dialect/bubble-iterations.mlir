// RUN: pipefill-opt %s --split-input-file --verify-diagnostics | FileCheck %s
// A bubble's fill work must fit in every iteration of the run: two jobs with
// the same prefix and period may share it differently in each iteration
// (6 + 4 us, then 3 + 7 us, in a 10 us bubble; their largest totals, 6 and
// 7 us, would not fit side by side, and need not).

pipefill.fill_job @a inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.fill_job @b inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
// CHECK-LABEL: pipefill.pipeline @p
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.assignment @a batch 1 weights resident acts device prefix 0 period 2 batches 2 samples 1.0 persistent 1
    pipefill.assignment @b batch 1 weights resident acts device prefix 0 period 2 batches 2 samples 1.0 persistent 1
    // CHECK: pipefill.bubble
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      @a layers 0 to 1 batch 1 samples 0 weights resident acts device time 6.0 mem 1 iteration 0,
      @b layers 0 to 1 batch 1 samples 0 weights resident acts device time 4.0 mem 1 iteration 0,
      @a layers 0 to 1 batch 1 samples 1 weights resident acts device time 3.0 mem 1 iteration 1,
      @b layers 0 to 1 batch 1 samples 1 weights resident acts device time 7.0 mem 1 iteration 1
    ]
  }
}

// -----

// The same with 4 us of @a in the second iteration: 11 us in a 10 us bubble.
pipefill.fill_job @a inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.fill_job @b inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.assignment @a batch 1 weights resident acts device prefix 0 period 2 batches 2 samples 1.0 persistent 1
    pipefill.assignment @b batch 1 weights resident acts device prefix 0 period 2 batches 2 samples 1.0 persistent 1
    // expected-error @+1 {{holds 11 us of fill work but lasts only 10 us}}
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      @a layers 0 to 1 batch 1 samples 0 weights resident acts device time 6.0 mem 1 iteration 0,
      @b layers 0 to 1 batch 1 samples 0 weights resident acts device time 4.0 mem 1 iteration 0,
      @a layers 0 to 1 batch 1 samples 1 weights resident acts device time 4.0 mem 1 iteration 1,
      @b layers 0 to 1 batch 1 samples 1 weights resident acts device time 7.0 mem 1 iteration 1
    ]
  }
}

// -----

// Different periods: @a's iteration 1 (period 2) meets @b's iteration 0
// (period 3) in iteration 3 of the run: 7 + 4 = 11 us.
pipefill.fill_job @a inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.fill_job @b inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.assignment @a batch 1 weights resident acts device prefix 0 period 2 batches 2 samples 1.0 persistent 1
    pipefill.assignment @b batch 1 weights resident acts device prefix 0 period 3 batches 1 samples 0.333 persistent 1
    // expected-error @+1 {{holds 11 us of fill work but lasts only 10 us}}
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      @a layers 0 to 1 batch 1 samples 0 weights resident acts device time 3.0 mem 1 iteration 0,
      @b layers 0 to 1 batch 1 samples 0 weights resident acts device time 4.0 mem 1 iteration 0,
      @a layers 0 to 1 batch 1 samples 1 weights resident acts device time 7.0 mem 1 iteration 1
    ]
  }
}

// -----

// A prefix of 2^63 - 1 made the horizon (max prefix + lcm of the periods)
// overflow, so no iteration was checked and 18 us passed in a 10 us bubble.
// Prefix, period and batch have the runtime's limits (support/Limits.h).
pipefill.fill_job @a inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{prefix = 9223372036854775807 exceeds the limit of 1000000}}
    pipefill.assignment @a batch 1 weights resident acts device prefix 9223372036854775807 period 2 batches 2 samples 1.0 persistent 1
  }
}

// -----

pipefill.fill_job @a inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{period = 1025 exceeds the limit of 1024}}
    pipefill.assignment @a batch 1 weights resident acts device prefix 0 period 1025 batches 2 samples 1.0 persistent 1
  }
}

// -----

pipefill.fill_job @a inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    // expected-error @+1 {{batch = 4294967297 exceeds the limit of 65536}}
    pipefill.assignment @a batch 4294967297 weights resident acts device prefix 0 period 1 batches 2 samples 1.0 persistent 1
  }
}

// -----

// At the largest prefix the horizon (10^6 + 6 iterations) is past what the
// verifier enumerates, so the jobs' largest per-iteration totals must fit
// together: 9 + 9 us in a 10 us bubble is an error (the overflow let it pass).
pipefill.fill_job @a inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.fill_job @b inference samples 1 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1
}
pipefill.pipeline @p schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 1.0} {
    pipefill.assignment @a batch 1 weights resident acts device prefix 1000000 period 2 batches 2 samples 1.0 persistent 1
    pipefill.assignment @b batch 1 weights resident acts device prefix 0 period 3 batches 1 samples 0.333 persistent 1
    // expected-error @+1 {{holds 18 us of fill work but lasts only 10 us}}
    pipefill.bubble warmup start 0.0 duration 10.0 free 50 fills [
      @a layers 0 to 1 batch 1 samples 0 weights resident acts device time 9.0 mem 1 iteration 0,
      @b layers 0 to 1 batch 1 samples 0 weights resident acts device time 9.0 mem 1 iteration 0
    ]
  }
}
