// RUN: pipefill-opt %s --pipefill-verify-plan --split-input-file --verify-diagnostics

// A consistent plan verifies: 2 layers at batch 8 take 20 + 2 x 85 = 190 us;
// resident weights 2 x 1000 plus the batch's 8 x 100 activation bytes stay on
// the device (2800), and the chunk's working set adds 2 x 8 x 100 (4400).
pipefill.pipeline @ok schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.0 persistent 2800
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 fills [
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 190.0 mem 4400
    ]
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}

// -----

// A chunk claiming less time than its layers take (2 layers at batch 8 take
// 20 + 2 x 85 = 190 us, not 100) is caught by recomputation, as is an
// assignment whose persistent bytes disagree (2 x 1000 weights + 8 x 100
// activations = 2800). Each violation is reported on the op that causes it,
// in the terms of its assembly, then once on the pipeline.
// expected-error @+1 {{fill plan does not verify: 3 violation(s)}}
pipefill.pipeline @lie schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    // expected-error @+1 {{'pipefill.assignment' op says persistent 2200 B, but @enc at batch 8 with weights resident, acts device keeps 2800 B on the device}}
    pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.0 persistent 2200
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 fills [
      // expected-error @+2 {{'pipefill.bubble' op fill 0 says time 100.000000 us, but its layers, copies and the context switch take 190.000000 us}}
      // expected-error @+1 {{'pipefill.bubble' op fill 0 says mem 3800 B, but the stage's persistent fill bytes and its working set come to 4400 B}}
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 100.0 mem 3800
    ]
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}

// -----

// A fill chunk without an assignment on its stage.
pipefill.pipeline @orphan schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 fills [
      // expected-error @+1 {{has no pipefill.assignment for @enc on stage 0}}
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 190.0 mem 3800
    ]
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}

// -----

// A fill chunk that starts too late overruns its bubble (700 + 190 > 875 us):
// reported on that op.
// expected-error @+1 {{fill plan does not verify: 1 violation(s)}}
pipefill.pipeline @late schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.0 persistent 2800
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 fills [
      // expected-error @+1 {{'pipefill.bubble' op fill 0 runs [700.000, 890.000) us into its bubble, which allows [0, 875.000) us (duration less the safety margin)}}
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 190.0 mem 4400 offset 700.0
    ]
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}

// -----

// Stages are checked each on its own (in parallel); their violations are
// reported in stage order and counted together.
// expected-error @+1 {{fill plan does not verify: 2 violation(s)}}
pipefill.pipeline @two schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.0 persistent 2800
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0
    pipefill.send activation mb 0 chunk 0 to 1 bytes 8 start 100.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 fills [
      // expected-error @+1 {{'pipefill.bubble' op fill 0 says time 150.000000 us, but its layers, copies and the context switch take 190.000000 us}}
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 150.0 mem 4400
    ]
    pipefill.recv gradient mb 0 chunk 0 from 1 bytes 8 start 975.0 end 975.0
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
  pipefill.stage 1 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 2 samples 16.0 persistent 2800
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 8 start 100.0 end 100.0
    pipefill.forward mb 0 chunk 0 duration 100.0 start 100.0 end 200.0
    pipefill.backward mb 0 chunk 0 duration 100.0 start 200.0 end 300.0
    pipefill.send gradient mb 0 chunk 0 to 0 bytes 8 start 300.0 end 300.0
    pipefill.bubble cooldown start 300.0 duration 775.0 free 99000000000 fills [
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 190.0 mem 4400,
      // expected-error @+1 {{'pipefill.bubble' op fill 1 says time 120.000000 us, but its layers, copies and the context switch take 190.000000 us}}
      @enc layers 0 to 2 batch 8 samples 8 weights resident acts device time 120.0 mem 4400 offset 190.0
    ]
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}

// -----

// The bubbles are the gaps of the simulated timing: an instruction whose duration is not its
// end - start (IR edited by hand: the forward lasts 5000 us, its timing says 100) would have
// fill planned into a gap the run does not have. It verified, lowered and ran.
pipefill.pipeline @stale schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.0 persistent 2800
    // expected-error @+1 {{lasts 5000 us but its simulated timing spans 100 us (start 0, end 100): the timing is not the costs' (re-run pipefill-simulate)}}
    pipefill.forward mb 0 chunk 0 duration 5000.0 start 0.0 end 100.0
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 fills [
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 190.0 mem 4400
    ]
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}

// -----

// Bubbles are the gaps of the simulated timeline too: a bubble edited to outlast its gap (875 us
// to the backward's start at 975) had fill planned into time the run does not have, and verified.
pipefill.pipeline @long schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.0 persistent 2800
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0 live 1000
    // expected-error @+1 {{spans 100 to 6100 us, outside the stage's idle gap from 100 to 975 us in the simulated timeline}}
    pipefill.bubble steady start 100.0 duration 6000.0 free 99000000000 fills [
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 190.0 mem 4400
    ]
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}

// -----

// The same bubble twice: the second overlaps the first (the plan counted its fill twice).
pipefill.pipeline @twice schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.0 persistent 2800
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0 live 1000
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 fills [
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 190.0 mem 4400
    ]
    // expected-error @+1 {{spans 100 to 975 us, outside the stage's idle gap from 975 to 975 us}}
    pipefill.bubble steady start 100.0 duration 875.0 free 99000000000 fills [
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 190.0 mem 4400
    ]
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}

// -----

// More free memory than the device has beside what is live before the bubble (1e11 - 1000).
pipefill.pipeline @roomy schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, device_memory_bytes = 100000000000 : i64, iteration_us = 1075.0, reserve_bytes = 0 : i64, safety_margin = 0.0, context_switch_us = 20.0, kernel_launch_us = 5.0, batch_sizes = array<i64: 8>} {
  pipefill.stage 0 attributes {forward_us = 100.0, backward_us = 100.0, peak_bytes = 1000 : i64} {
    pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 1 batches 1 samples 8.0 persistent 2800
    pipefill.forward mb 0 chunk 0 duration 100.0 start 0.0 end 100.0 live 1000
    // expected-error @+1 {{has 100000000000 free bytes, but the device's 100000000000 less the 1000 bytes live before it leave 99999999000}}
    pipefill.bubble steady start 100.0 duration 875.0 free 100000000000 fills [
      @enc layers 0 to 2 batch 8 samples 0 weights resident acts device time 190.0 mem 4400
    ]
    pipefill.backward mb 0 chunk 0 duration 100.0 start 975.0 end 1075.0
  }
}
pipefill.fill_job @enc inference samples 1000 {
  pipefill.layer "l0" forward 10.0 weights 1000 activations 100
  pipefill.layer "l1" forward 10.0 weights 1000 activations 100
}
