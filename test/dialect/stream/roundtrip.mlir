// RUN: pipefill-opt %s | pipefill-opt | FileCheck %s
// RUN: pipefill-opt %s --mlir-print-op-generic | pipefill-opt | FileCheck %s
// RUN: pipefill-opt %s --emit-bytecode | pipefill-opt | FileCheck %s
// The stream ops print and parse back to the same IR, also through the
// generic form and through bytecode (pfstream.fill_chunks' table is a native
// property with its own conversions for both).

pipefill.fill_job @j training samples 100 {
  pipefill.layer "l" forward 1.0 weights 1 activations 1 {backward_us_per_sample = 2.0}
}

// CHECK-LABEL: pfstream.program @p iterations 3 planned 1.000000e+02
pfstream.program @p iterations 3 planned 100.0 {
  pfstream.device 0 {
    // CHECK: pfstream.event 0 "bubble0"
    pfstream.event 0 "bubble0"
    pfstream.stream 0 main priority high {
      // CHECK: pfstream.compute forward mb 0 chunk 0 planned 1.000000e+01 at 0.000000e+00
      pfstream.compute forward mb 0 chunk 0 planned 10.0 at 0.0
      // CHECK-NEXT: pfstream.record 0
      pfstream.record 0
      // CHECK-NEXT: pfstream.bubble 0 steady start 1.000000e+01 duration 5.000000e+01 free 1000
      pfstream.bubble 0 steady start 10.0 duration 50.0 free 1000
      // CHECK-NEXT: pfstream.send to 1 bytes 64 tag 0 planned 1.000000e+00 at 6.000000e+01
      pfstream.send to 1 bytes 64 tag 0 planned 1.0 at 60.0
    }
    pfstream.stream 1 fill priority low {
      // CHECK: pfstream.wait 0
      pfstream.wait 0
      // CHECK-NEXT: pfstream.fill_chunks bubble 0 [
      // CHECK-NEXT:   @j layers 0 to 1 batch 4 samples 0 offset 0 planned 2.000000e+01 peak 100,
      // CHECK-NEXT:   @j layers 1 to 2 batch 4 samples 4 offset -1 planned 2.500000e+01 peak 90 weights streamed acts host period 3 phase 2
      // CHECK-NEXT: ]
      pfstream.fill_chunks bubble 0 [
        @j layers 0 to 1 batch 4 samples 0 offset 0 planned 20.0 peak 100,
        @j layers 1 to 2 batch 4 samples 4 offset -1 planned 25.0 peak 90
            weights streamed acts host period 3 phase 2
      ]
      // An empty table.
      // CHECK-NEXT: pfstream.fill_chunks bubble 0 []
      pfstream.fill_chunks bubble 0 []
      // CHECK-NEXT: pfstream.copy h2d bytes 1024 planned 2.000000e+00
      pfstream.copy h2d bytes 1024 planned 2.0
    }
  }
  pfstream.device 1 {
    pfstream.stream 0 main priority high {
      // CHECK: pfstream.recv from 0 bytes 64 tag 0 at 6.100000e+01
      pfstream.recv from 0 bytes 64 tag 0 at 61.0
    }
  }
}
