module {
  pfstream.program @tiny_stream iterations 1 planned 30207.77216 {
    pfstream.device 0 attributes {backward_input_us = 4.000000e+03 : f64, backward_us = 4.000000e+03 : f64, forward_us = 2.000000e+03 : f64, memory_bytes = 16000000000 : i64, p2p_bandwidth_gbps = 2.500000e+01 : f64, p2p_latency_us = 1.000000e+01 : f64, pcie_bandwidth_gbps = 2.500000e+01 : f64, planned_iteration_us = 30207.77216 : f64, static_bytes = 1000000000 : i64} {
      pfstream.event 0 "bubble0"
      pfstream.event 1 "bubble1"
      pfstream.stream 0 main priority high {
        pfstream.compute forward mb 0 chunk 0 planned 2.000000e+03 at 0.000000e+00
        pfstream.send to 1 bytes 1048576 tag 0 planned 51.943040000000003 at 2.000000e+03
        pfstream.compute forward mb 1 chunk 0 planned 2.000000e+03 at 2.000000e+03
        pfstream.send to 1 bytes 1048576 tag 1 planned 51.943040000000003 at 4.000000e+03
        pfstream.record 0
        pfstream.bubble 0 steady start 4.000000e+03 duration 4103.8860800000002 free 14700000000
        pfstream.recv from 1 bytes 1048576 tag 4 at 4.000000e+03
        pfstream.compute backward mb 0 chunk 0 planned 4.000000e+03 at 8103.8860800000002
        pfstream.compute forward mb 2 chunk 0 planned 2.000000e+03 at 12103.88608
        pfstream.send to 1 bytes 1048576 tag 2 planned 51.943040000000003 at 14103.88608
        pfstream.recv from 1 bytes 1048576 tag 5 at 14103.88608
        pfstream.compute backward mb 1 chunk 0 planned 4.000000e+03 at 14103.88608
        pfstream.compute forward mb 3 chunk 0 planned 2.000000e+03 at 18103.88608
        pfstream.send to 1 bytes 1048576 tag 3 planned 51.943040000000003 at 20103.88608
        pfstream.bubble 1 cooldown start 20103.88608 duration 103.88608000000022 free 14700000000
        pfstream.recv from 1 bytes 1048576 tag 6 at 20103.88608
        pfstream.compute backward mb 2 chunk 0 planned 4.000000e+03 at 20207.77216
        pfstream.record 1
        pfstream.bubble 2 cooldown start 24207.77216 duration 2.000000e+03 free 14800000000
        pfstream.recv from 1 bytes 1048576 tag 7 at 24207.77216
        pfstream.compute backward mb 3 chunk 0 planned 4.000000e+03 at 26207.77216
      }
      pfstream.stream 1 fill priority low {
        pfstream.wait 0
        pfstream.fill_chunks bubble 0 [
          @enc layers 0 to 4 batch 8 samples 0 offset 0 planned 1.960000e+03 peak 39845888 period 2,
          @enc layers 0 to 3 batch 8 samples 8 offset 0 planned 1.475000e+03 peak 39845888 period 2,
          @enc layers 0 to 4 batch 1 samples 40 offset 0 planned 2.800000e+02 peak 36175872 period 2,
          @enc layers 2 to 4 batch 8 samples 16 offset 0 planned 9.900000e+02 peak 39845888 period 2 phase 1,
          @enc layers 0 to 4 batch 8 samples 24 offset 0 planned 1.960000e+03 peak 39845888 period 2 phase 1,
          @enc layers 0 to 1 batch 8 samples 32 offset 0 planned 5.050000e+02 peak 39845888 period 2 phase 1,
          @enc layers 0 to 4 batch 1 samples 42 offset 0 planned 2.800000e+02 peak 36175872 period 2 phase 1
        ]
        pfstream.wait 1
        pfstream.fill_chunks bubble 2 [
          @enc layers 3 to 4 batch 8 samples 8 offset 0 planned 5.050000e+02 peak 39845888 period 2,
          @enc layers 0 to 2 batch 8 samples 16 offset 0 planned 9.900000e+02 peak 39845888 period 2,
          @enc layers 0 to 4 batch 1 samples 41 offset 0 planned 2.800000e+02 peak 36175872 period 2,
          @enc layers 1 to 4 batch 8 samples 32 offset 0 planned 1.475000e+03 peak 39845888 period 2 phase 1,
          @enc layers 0 to 4 batch 1 samples 43 offset 0 planned 2.800000e+02 peak 36175872 period 2 phase 1
        ]
      }
    }
    pfstream.device 1 attributes {backward_input_us = 4.000000e+03 : f64, backward_us = 4.000000e+03 : f64, forward_us = 2.000000e+03 : f64, memory_bytes = 16000000000 : i64, p2p_bandwidth_gbps = 2.500000e+01 : f64, p2p_latency_us = 1.000000e+01 : f64, pcie_bandwidth_gbps = 2.500000e+01 : f64, planned_iteration_us = 30207.77216 : f64, stage = 1 : i64, static_bytes = 1000000000 : i64} {
      pfstream.event 0 "bubble0"
      pfstream.event 1 "bubble1"
      pfstream.stream 0 main priority high {
        pfstream.record 0
        pfstream.bubble 0 warmup start 0.000000e+00 duration 2051.9430400000001 free 14900000000
        pfstream.recv from 0 bytes 1048576 tag 0 at 0.000000e+00
        pfstream.compute forward mb 0 chunk 0 planned 2.000000e+03 at 2051.9430400000001
        pfstream.compute backward mb 0 chunk 0 planned 4.000000e+03 at 4051.9430400000001
        pfstream.send to 0 bytes 1048576 tag 4 planned 51.943040000000003 at 8051.9430400000001
        pfstream.recv from 0 bytes 1048576 tag 1 at 8051.9430400000001
        pfstream.compute forward mb 1 chunk 0 planned 2.000000e+03 at 8051.9430400000001
        pfstream.compute backward mb 1 chunk 0 planned 4.000000e+03 at 10051.94304
        pfstream.send to 0 bytes 1048576 tag 5 planned 51.943040000000003 at 14051.94304
        pfstream.bubble 1 steady start 14051.94304 duration 103.88608000000022 free 14900000000
        pfstream.recv from 0 bytes 1048576 tag 2 at 14051.94304
        pfstream.compute forward mb 2 chunk 0 planned 2.000000e+03 at 14155.82912
        pfstream.compute backward mb 2 chunk 0 planned 4.000000e+03 at 16155.82912
        pfstream.send to 0 bytes 1048576 tag 6 planned 51.943040000000003 at 20155.829120000002
        pfstream.recv from 0 bytes 1048576 tag 3 at 20155.829120000002
        pfstream.compute forward mb 3 chunk 0 planned 2.000000e+03 at 20155.829120000002
        pfstream.compute backward mb 3 chunk 0 planned 4.000000e+03 at 22155.829120000002
        pfstream.send to 0 bytes 1048576 tag 7 planned 51.943040000000003 at 26155.829120000002
        pfstream.record 1
        pfstream.bubble 2 cooldown start 26155.829120000002 duration 4051.9430399999983 free 14900000000
      }
      pfstream.stream 1 fill priority low {
        pfstream.wait 0
        pfstream.fill_chunks bubble 0 [
          @enc layers 0 to 3 batch 8 samples 0 offset 0 planned 1.475000e+03 peak 39845888 period 2,
          @enc layers 0 to 4 batch 1 samples 40 offset 0 planned 2.800000e+02 peak 36175872 period 2,
          @enc layers 2 to 4 batch 8 samples 16 offset 0 planned 9.900000e+02 peak 39845888 period 2 phase 1,
          @enc layers 0 to 1 batch 8 samples 24 offset 0 planned 5.050000e+02 peak 39845888 period 2 phase 1,
          @enc layers 0 to 4 batch 1 samples 42 offset 0 planned 2.800000e+02 peak 36175872 period 2 phase 1
        ]
        pfstream.wait 1
        pfstream.fill_chunks bubble 2 [
          @enc layers 3 to 4 batch 8 samples 0 offset 0 planned 5.050000e+02 peak 39845888 period 2,
          @enc layers 0 to 4 batch 8 samples 8 offset 0 planned 1.960000e+03 peak 39845888 period 2,
          @enc layers 0 to 2 batch 8 samples 16 offset 0 planned 9.900000e+02 peak 39845888 period 2,
          @enc layers 0 to 4 batch 1 samples 41 offset 0 planned 2.800000e+02 peak 36175872 period 2,
          @enc layers 1 to 4 batch 8 samples 24 offset 0 planned 1.475000e+03 peak 39845888 period 2 phase 1,
          @enc layers 0 to 4 batch 8 samples 32 offset 0 planned 1.960000e+03 peak 39845888 period 2 phase 1,
          @enc layers 0 to 4 batch 1 samples 43 offset 0 planned 2.800000e+02 peak 36175872 period 2 phase 1
        ]
      }
    }
  }
  pipefill.fill_job @enc inference samples 100000 attributes {efficiency = 0.96174863387978138 : f64, samples_per_iteration = 4.400000e+01 : f64} {
    pipefill.layer "encoder.0" forward 6.000000e+01 weights 8388608 activations 262144 {ffn = 128 : i64, heads = 4 : i64, hidden = 64 : i64, seq = 16 : i64, workload = "ENCODER_LAYER"}
    pipefill.layer "encoder.1" forward 6.000000e+01 weights 8388608 activations 262144 {ffn = 128 : i64, heads = 4 : i64, hidden = 64 : i64, seq = 16 : i64, workload = "ENCODER_LAYER"}
    pipefill.layer "encoder.2" forward 6.000000e+01 weights 8388608 activations 262144 {ffn = 128 : i64, heads = 4 : i64, hidden = 64 : i64, seq = 16 : i64, workload = "ENCODER_LAYER"}
    pipefill.layer "encoder.3" forward 6.000000e+01 weights 8388608 activations 262144 {ffn = 128 : i64, heads = 4 : i64, hidden = 64 : i64, seq = 16 : i64, workload = "ENCODER_LAYER"}
  }
}

