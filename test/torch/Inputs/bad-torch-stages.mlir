// torch_stages must give one torch stage per chunk.
pipefill.pipeline @p schedule imported attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, virtual_stages = 2 : i64, device_memory_bytes = 1000 : i64} {
  // expected-error @+1 {{has torch_stages for 3 chunks but the pipeline has virtual_stages = 2}}
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, torch_stages = array<i64: 0, 1, 2>} {
    pipefill.forward mb 0 chunk 0 duration 0.5
    pipefill.forward mb 0 chunk 1 duration 0.5
    pipefill.backward mb 0 chunk 1 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 1.0
  }
}

// -----

// ... and number the torch stages once each.
pipefill.pipeline @p schedule imported attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, virtual_stages = 2 : i64, device_memory_bytes = 1000 : i64} {
  // expected-error @+1 {{has torch_stages that do not number the pipeline's stages 0..1 once each}}
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, torch_stages = array<i64: 1, 1>} {
    pipefill.forward mb 0 chunk 0 duration 0.5
    pipefill.forward mb 0 chunk 1 duration 0.5
    pipefill.backward mb 0 chunk 1 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 1.0
  }
}
