// Stage 1 runs torch stage 0 and sends its activations to stage 0, which
// runs torch stage 1: torch_stages that reverse the stage order but follow
// the data flow are exported (row 0 is stage 0's, torch stage 1).
pipefill.pipeline @p schedule gpipe attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, torch_stages = array<i64: 1>} {
    pipefill.recv activation mb 0 chunk 0 from 1 bytes 8
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
    pipefill.send gradient mb 0 chunk 0 to 1 bytes 8
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0, torch_stages = array<i64: 0>} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.send activation mb 0 chunk 0 to 0 bytes 8
    pipefill.recv gradient mb 0 chunk 0 from 0 bytes 8
    pipefill.backward mb 0 chunk 0 duration 2.0
  }
}
