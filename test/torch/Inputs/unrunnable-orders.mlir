// Orders torch cannot run. The export checks its table as
// --import-torch-schedule would, and refuses these at the stage or the
// operation instead of writing a table that does not import again; an
// incomplete pipeline is refused by the dialect verifier before that.

// Stage 1 runs nothing: --to-torch-schedule used to write `0F0,0B0` and an
// empty row, a one-rank table for two stages, and exit 0.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
  // expected-error @+1 {{'pipefill.stage' op never runs the forward of micro-batch 0 chunk 0}}
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0} {
  }
}

// -----

// Each stage's order is fine on its own, but stage 0 waits for the backward
// of micro-batch 0 before it sends the forward of micro-batch 1 that stage 1
// runs first: a deadlock, reported at the first blocked operation.
pipefill.pipeline @p schedule one_f_one_b attributes {num_stages = 2 : i64, num_microbatches = 2 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    // expected-error @+1 {{cannot be written as a torch action table that torch can run: deadlock: rank 0 blocks at 0B0}}
    pipefill.backward mb 0 chunk 0 duration 2.0
    pipefill.forward mb 1 chunk 0 duration 1.0
    pipefill.backward mb 1 chunk 0 duration 2.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 1 chunk 0 duration 1.0
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
    pipefill.backward mb 1 chunk 0 duration 2.0
  }
}
