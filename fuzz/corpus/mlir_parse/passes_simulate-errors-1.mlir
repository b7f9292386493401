// GPipe stashes all 8 micro-batches: 600 static + 8 x 100 = 1400 > 1000.
pipefill.pipeline @oom schedule gpipe attributes {num_stages = 1 : i64, num_microbatches = 8 : i64, device_memory_bytes = 1000 : i64} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, stash_bytes = 100 : i64, static_bytes = 600 : i64} {
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.forward mb 1 chunk 0 duration 1.0
    pipefill.forward mb 2 chunk 0 duration 1.0
    pipefill.forward mb 3 chunk 0 duration 1.0
    pipefill.forward mb 4 chunk 0 duration 1.0
    pipefill.forward mb 5 chunk 0 duration 1.0
    pipefill.forward mb 6 chunk 0 duration 1.0
    pipefill.forward mb 7 chunk 0 duration 1.0
    pipefill.backward mb 0 chunk 0 duration 2.0
    pipefill.backward mb 1 chunk 0 duration 2.0
    pipefill.backward mb 2 chunk 0 duration 2.0
    pipefill.backward mb 3 chunk 0 duration 2.0
    pipefill.backward mb 4 chunk 0 duration 2.0
    pipefill.backward mb 5 chunk 0 duration 2.0
    pipefill.backward mb 6 chunk 0 duration 2.0
    pipefill.backward mb 7 chunk 0 duration 2.0
  }
}
