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

// -----

// ... in ascending order on each stage (the chunks of a stage are its torch
// stages from first to last, as the importer numbers them).
pipefill.pipeline @p schedule imported attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, virtual_stages = 2 : i64, device_memory_bytes = 1000 : i64} {
  // expected-error @+1 {{has torch_stages that are not ascending: chunk 1 is torch stage 0, chunk 0 torch stage 1; a stage's chunks are its torch stages in ascending order}}
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, torch_stages = array<i64: 1, 0>} {
    pipefill.forward mb 0 chunk 0 duration 0.5
    pipefill.forward mb 0 chunk 1 duration 0.5
    pipefill.backward mb 0 chunk 1 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 1.0
  }
}

// -----

// ... and following the pipeline's data flow. A permutation is not enough:
// here stage 0 sends its activations to stage 1, but torch_stages make stage
// 1 torch stage 0, so the table's data would flow rank 1 -> rank 0 (the
// export used to write it and exit 0).
pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  // expected-error @+1 {{has torch_stages that do not follow the pipeline's data flow: chunk 0 is torch stage 1, so its activations go to torch stage 2 (there is none: the torch stages are 0..1), but it sends the activation of micro-batch 0 to stage 1 (activations go from torch stage s to s+1, gradients from s+1 to s)}}
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, torch_stages = array<i64: 1>} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    // expected-note @+1 {{the send}}
    pipefill.send activation mb 0 chunk 0 to 1 bytes 8
    pipefill.recv gradient mb 0 chunk 0 from 1 bytes 8
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0, torch_stages = array<i64: 0>} {
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 8
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
    pipefill.send gradient mb 0 chunk 0 to 0 bytes 8
  }
}

// -----

// Gradients go from torch stage s + 1 to s: stage 1 (torch stage 1) sends
// its gradient to stage 2, which holds torch stage 2.
pipefill.pipeline @p schedule gpipe attributes {num_stages = 3 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.send activation mb 0 chunk 0 to 1 bytes 8
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
  // expected-error @+1 {{has torch_stages that do not follow the pipeline's data flow: chunk 0 is torch stage 1, so its gradients go to torch stage 0 on stage 0, but it sends the gradient of micro-batch 0 to stage 2}}
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 8
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.send activation mb 0 chunk 0 to 2 bytes 8
    pipefill.backward mb 0 chunk 0 duration 2.0
    // expected-note @+1 {{the send}}
    pipefill.send gradient mb 0 chunk 0 to 2 bytes 8
  }
  pipefill.stage 2 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.recv activation mb 0 chunk 0 from 1 bytes 8
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.recv gradient mb 0 chunk 0 from 1 bytes 8
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
}
