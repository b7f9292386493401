// RUN: pipefill-opt %s --split-input-file --verify-diagnostics
// The pipeline's shape limits (support/Limits.h, docs/reliability.md), the
// ones the JobSpec reader checks, on MLIR written by hand: each factor and
// their product. The verifier used to size a table by num_microbatches x
// virtual_stages (wrapping to a small size at 2^32 x 2^32, then writing past
// it: a segfault) or to run out of memory at 10^12 micro-batches.

// The tester's reproducer: 2^32 micro-batches and chunks.
// expected-error @+1 {{num_microbatches = 4294967296 exceeds the limit of 65536}}
pipefill.pipeline @t schedule interleaved_1f1b attributes {num_stages = 1 : i64, num_microbatches = 4294967296 : i64, virtual_stages = 4294967296 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 70000 chunk 100000 duration 1.0
  }
}

// -----

// expected-error @+1 {{num_microbatches = 1000000000000 exceeds the limit of 65536}}
pipefill.pipeline @t schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 1000000000000 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
  }
}

// -----

// expected-error @+1 {{num_microbatches = 65537 exceeds the limit of 65536}}
pipefill.pipeline @t schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 65537 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
  }
}

// -----

// expected-error @+1 {{virtual_stages = 65 exceeds the limit of 64}}
pipefill.pipeline @t schedule interleaved_1f1b attributes {num_stages = 1 : i64, num_microbatches = 1 : i64, virtual_stages = 65 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
  }
}

// -----

// expected-error @+1 {{num_stages = 1025 exceeds the limit of 1024}}
pipefill.pipeline @t schedule gpipe attributes {num_stages = 1025 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
}

// -----

// Each factor within its limit, the product past 2^22 (2 x 65536 x 33).
// expected-error @+1 {{has num_stages x num_microbatches x virtual_stages = 4325376 micro-batch chunks; at most 4194304 are allowed}}
pipefill.pipeline @t schedule interleaved_1f1b attributes {num_stages = 2 : i64, num_microbatches = 65536 : i64, virtual_stages = 33 : i64, device_memory_bytes = 1000 : i64} {
}

// -----

// Exactly at every limit (65536 x 64 = 2^22 chunks) the shape is valid and
// the instruction at the last micro-batch and chunk is in range: the only
// error is that the stage runs one of its 2^22 chunks, not all of them.
pipefill.pipeline @t schedule interleaved_1f1b attributes {num_stages = 1 : i64, num_microbatches = 65536 : i64, virtual_stages = 64 : i64, device_memory_bytes = 1000 : i64} {
  // expected-error @+1 {{never runs the forward of micro-batch 0 chunk 0}}
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    pipefill.forward mb 65535 chunk 63 duration 1.0
    pipefill.backward mb 65535 chunk 63 duration 1.0
  }
}

// -----

// One past the last micro-batch is still the verifier's range error.
pipefill.pipeline @t schedule interleaved_1f1b attributes {num_stages = 1 : i64, num_microbatches = 65536 : i64, virtual_stages = 64 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0} {
    // expected-error @+1 {{micro-batch 65536 is out of range [0, 65536)}}
    pipefill.forward mb 65536 chunk 63 duration 1.0
  }
}
