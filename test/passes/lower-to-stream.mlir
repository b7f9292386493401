// RUN: pipefill-opt %s --pipefill-lower-to-stream=iterations=5 --split-input-file | FileCheck %s
// RUN: pipefill-opt %s --pipefill-lower-to-stream --split-input-file | pipefill-opt --split-input-file | FileCheck %s --check-prefix=ROUNDTRIP

// A stage becomes a device with a high-priority main stream that keeps the
// stage's order. Transfer tags are (payload * v + chunk) * m + mb, so both
// ends agree; planned transfer time is latency + bytes / bandwidth
// (2 + 1000 / (1 GB/s = 1e3 B/us) = 3 us). A bubble with fill work becomes an
// event recorded on the main stream, a bubble marker, and a wait + chunks on a
// low-priority fill stream; a bubble without fill is only a marker.
// CHECK-LABEL: pfstream.program @p_stream iterations 5 planned 3.000000e+01
// CHECK:      pfstream.device 0 attributes {
// CHECK-SAME:   backward_us = 2.000000e+01 : f64
// CHECK-SAME:   forward_us = 1.000000e+01 : f64
// CHECK-SAME:   memory_bytes = 1000 : i64
// CHECK-NEXT:   pfstream.event 0 "bubble0"
// CHECK-NEXT:   pfstream.stream 0 main priority high {
// CHECK-NEXT:     pfstream.compute forward mb 0 chunk 0 planned 1.000000e+01 at 0.000000e+00
// CHECK-NEXT:     pfstream.send to 1 bytes 1000 tag 0 planned 3.000000e+00 at 1.000000e+01
// CHECK-NEXT:     pfstream.record 0
// CHECK-NEXT:     pfstream.bubble 0 steady start 1.000000e+01 duration 2.600000e+01 free 500
// CHECK-NEXT:     pfstream.recv from 1 bytes 1000 tag 1 at 1.000000e+01
// CHECK-NEXT:     pfstream.compute backward mb 0 chunk 0 planned 2.000000e+01
// CHECK-NEXT:   }
// CHECK-NEXT:   pfstream.stream 1 fill priority low {
// CHECK-NEXT:     pfstream.wait 0
// CHECK-NEXT:     pfstream.fill_chunks bubble 0 [
// CHECK-NEXT:       @j layers 0 to 2 batch 4 samples 0 offset 0 planned 2.000000e+01 peak 100
// CHECK-NEXT:     ]
// CHECK-NEXT:   }
// CHECK:      pfstream.device 1
// CHECK:        pfstream.stream 0 main priority high {
// CHECK-NEXT:     pfstream.bubble 0 warmup
// CHECK-NEXT:     pfstream.recv from 0 bytes 1000 tag 0
// CHECK:          pfstream.send to 0 bytes 1000 tag 1 planned 3.000000e+00
// CHECK-NOT:    pfstream.stream 1
// The fill job declaration stays; the pipeline is gone.
// CHECK:      pipefill.fill_job @j
// CHECK-NOT:  pipefill.pipeline
// ROUNDTRIP: pfstream.program @p_stream
pipefill.pipeline @p schedule one_f_one_b attributes {num_stages = 2 : i64, num_microbatches = 1 : i64, device_memory_bytes = 1000 : i64, p2p_latency_us = 2.0, p2p_bandwidth_gbps = 1.0, iteration_us = 30.0} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0} {
    pipefill.assignment @j batch 4 weights resident acts device prefix 0 period 1 batches 1 samples 4.0 persistent 28
    pipefill.forward mb 0 chunk 0 duration 10.0 start 0.0 end 10.0
    pipefill.send activation mb 0 chunk 0 to 1 bytes 1000 start 10.0 end 10.0
    pipefill.bubble steady start 10.0 duration 26.0 free 500 fills [
      @j layers 0 to 2 batch 4 samples 0 weights resident acts device time 20.0 mem 100
    ]
    pipefill.recv gradient mb 0 chunk 0 from 1 bytes 1000 start 10.0 end 36.0
    pipefill.backward mb 0 chunk 0 duration 20.0 start 36.0 end 56.0
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0} {
    pipefill.bubble warmup start 0.0 duration 13.0 free 900
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 1000 start 0.0 end 13.0
    pipefill.forward mb 0 chunk 0 duration 10.0 start 13.0 end 23.0
    pipefill.backward mb 0 chunk 0 duration 20.0 start 23.0 end 43.0
    pipefill.send gradient mb 0 chunk 0 to 0 bytes 1000 start 43.0 end 43.0
  }
}
pipefill.fill_job @j inference samples 100 {
  pipefill.layer "a" forward 1.0 weights 10 activations 1
  pipefill.layer "b" forward 1.0 weights 10 activations 1
}
