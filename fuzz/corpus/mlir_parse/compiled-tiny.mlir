module {
  pipefill.pipeline @tiny schedule one_f_one_b attributes {batch_sizes = array<i64: 1, 2, 4, 8>, device_memory_bytes = 16000000000 : i64, iteration_us = 30207.77216 : f64, min_bubble_us = 1.000000e+02 : f64, num_microbatches = 4 : i64, num_stages = 2 : i64, p2p_bandwidth_gbps = 2.500000e+01 : f64, p2p_latency_us = 1.000000e+01 : f64, reserve_bytes = 100000000 : i64} {
    pipefill.stage 0 attributes {activation_bytes = 1048576 : i64, backward_us = 4.000000e+03 : f64, busy_us = 2.400000e+04 : f64, forward_us = 2.000000e+03 : f64, idle_us = 6207.7721600000004 : f64, peak_bytes = 1200000000 : i64, pipefill.fill_account = {bubble_us = 6207.7721600000004 : f64, filled_us = 5.490000e+03 : f64, granularity_us = 407.38355200000035 : f64, idle_us = 717.77216000000044 : f64, launch_us = 9.000000e+01 : f64, margin_us = 310.38860800000009 : f64, memory_us = 0.000000e+00 : f64, other_overhead_us = 0.000000e+00 : f64, switch_us = 1.200000e+02 : f64, too_short_us = 0.000000e+00 : f64, useful_us = 5.280000e+03 : f64}, stash_bytes = 100000000 : i64, static_bytes = 1000000000 : i64} {
      pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 2 batches 5 samples 2.200000e+01 persistent 35651584
      pipefill.forward mb 0 chunk 0 duration 2.000000e+03 start 0.000000e+00 end 2.000000e+03 live 1100000000
      pipefill.send activation mb 0 chunk 0 to 1 bytes 1048576 start 2.000000e+03 end 2.000000e+03 live 1100000000
      pipefill.forward mb 1 chunk 0 duration 2.000000e+03 start 2.000000e+03 end 4.000000e+03 live 1200000000
      pipefill.send activation mb 1 chunk 0 to 1 bytes 1048576 start 4.000000e+03 end 4.000000e+03 live 1200000000
      pipefill.bubble steady start 4.000000e+03 duration 4103.8860800000002 free 14700000000 fills [
        @enc layers 0 to 4 batch 8 samples 0 weights resident acts device time 1.960000e+03 mem 39845888,
        @enc layers 0 to 3 batch 8 samples 8 weights resident acts device time 1.475000e+03 mem 39845888 offset 1.960000e+03,
        @enc layers 0 to 4 batch 1 samples 0 weights resident acts device time 2.800000e+02 mem 36175872 offset 3.455000e+03,
        @enc layers 2 to 4 batch 8 samples 16 weights resident acts device time 9.900000e+02 mem 39845888 iteration 1,
        @enc layers 0 to 4 batch 8 samples 24 weights resident acts device time 1.960000e+03 mem 39845888 iteration 1 offset 9.900000e+02,
        @enc layers 0 to 1 batch 8 samples 32 weights resident acts device time 5.050000e+02 mem 39845888 iteration 1 offset 2.950000e+03,
        @enc layers 0 to 4 batch 1 samples 2 weights resident acts device time 2.800000e+02 mem 36175872 iteration 1 offset 3.455000e+03
      ]
      pipefill.recv gradient mb 0 chunk 0 from 1 bytes 1048576 start 4.000000e+03 end 8103.8860800000002 live 1200000000
      pipefill.backward mb 0 chunk 0 duration 4.000000e+03 start 8103.8860800000002 end 12103.88608 live 1100000000
      pipefill.forward mb 2 chunk 0 duration 2.000000e+03 start 12103.88608 end 14103.88608 live 1200000000
      pipefill.send activation mb 2 chunk 0 to 1 bytes 1048576 start 14103.88608 end 14103.88608 live 1200000000
      pipefill.recv gradient mb 1 chunk 0 from 1 bytes 1048576 start 14103.88608 end 14103.88608 live 1200000000
      pipefill.backward mb 1 chunk 0 duration 4.000000e+03 start 14103.88608 end 18103.88608 live 1100000000
      pipefill.forward mb 3 chunk 0 duration 2.000000e+03 start 18103.88608 end 20103.88608 live 1200000000
      pipefill.send activation mb 3 chunk 0 to 1 bytes 1048576 start 20103.88608 end 20103.88608 live 1200000000
      pipefill.bubble cooldown start 20103.88608 duration 103.88608000000022 free 14700000000
      pipefill.recv gradient mb 2 chunk 0 from 1 bytes 1048576 start 20103.88608 end 20207.77216 live 1200000000
      pipefill.backward mb 2 chunk 0 duration 4.000000e+03 start 20207.77216 end 24207.77216 live 1100000000
      pipefill.bubble cooldown start 24207.77216 duration 2.000000e+03 free 14800000000 fills [
        @enc layers 3 to 4 batch 8 samples 8 weights resident acts device time 5.050000e+02 mem 39845888,
        @enc layers 0 to 2 batch 8 samples 16 weights resident acts device time 9.900000e+02 mem 39845888 offset 5.050000e+02,
        @enc layers 0 to 4 batch 1 samples 1 weights resident acts device time 2.800000e+02 mem 36175872 offset 1.495000e+03,
        @enc layers 1 to 4 batch 8 samples 32 weights resident acts device time 1.475000e+03 mem 39845888 iteration 1,
        @enc layers 0 to 4 batch 1 samples 3 weights resident acts device time 2.800000e+02 mem 36175872 iteration 1 offset 1.495000e+03
      ]
      pipefill.recv gradient mb 3 chunk 0 from 1 bytes 1048576 start 24207.77216 end 26207.77216 live 1100000000
      pipefill.backward mb 3 chunk 0 duration 4.000000e+03 start 26207.77216 end 30207.77216 live 1000000000
    }
    pipefill.stage 1 attributes {activation_bytes = 1048576 : i64, backward_us = 4.000000e+03 : f64, busy_us = 2.400000e+04 : f64, forward_us = 2.000000e+03 : f64, idle_us = 6207.7721600000004 : f64, peak_bytes = 1100000000 : i64, pipefill.fill_account = {bubble_us = 6207.7721599999986 : f64, filled_us = 5.490000e+03 : f64, granularity_us = 407.3835519999983 : f64, idle_us = 717.77215999999862 : f64, launch_us = 9.000000e+01 : f64, margin_us = 310.38860800000032 : f64, memory_us = 0.000000e+00 : f64, other_overhead_us = 0.000000e+00 : f64, switch_us = 1.200000e+02 : f64, too_short_us = 0.000000e+00 : f64, useful_us = 5.280000e+03 : f64}, stash_bytes = 100000000 : i64, static_bytes = 1000000000 : i64} {
      pipefill.assignment @enc batch 8 weights resident acts device prefix 0 period 2 batches 5 samples 2.200000e+01 persistent 35651584
      pipefill.bubble warmup start 0.000000e+00 duration 2051.9430400000001 free 14900000000 fills [
        @enc layers 0 to 3 batch 8 samples 0 weights resident acts device time 1.475000e+03 mem 39845888,
        @enc layers 0 to 4 batch 1 samples 0 weights resident acts device time 2.800000e+02 mem 36175872 offset 1.495000e+03,
        @enc layers 2 to 4 batch 8 samples 16 weights resident acts device time 9.900000e+02 mem 39845888 iteration 1,
        @enc layers 0 to 1 batch 8 samples 24 weights resident acts device time 5.050000e+02 mem 39845888 iteration 1 offset 9.900000e+02,
        @enc layers 0 to 4 batch 1 samples 2 weights resident acts device time 2.800000e+02 mem 36175872 iteration 1 offset 1.495000e+03
      ]
      pipefill.recv activation mb 0 chunk 0 from 0 bytes 1048576 start 0.000000e+00 end 2051.9430400000001 live 1000000000
      pipefill.forward mb 0 chunk 0 duration 2.000000e+03 start 2051.9430400000001 end 4051.9430400000001 live 1100000000
      pipefill.backward mb 0 chunk 0 duration 4.000000e+03 start 4051.9430400000001 end 8051.9430400000001 live 1000000000
      pipefill.send gradient mb 0 chunk 0 to 0 bytes 1048576 start 8051.9430400000001 end 8051.9430400000001 live 1000000000
      pipefill.recv activation mb 1 chunk 0 from 0 bytes 1048576 start 8051.9430400000001 end 8051.9430400000001 live 1000000000
      pipefill.forward mb 1 chunk 0 duration 2.000000e+03 start 8051.9430400000001 end 10051.94304 live 1100000000
      pipefill.backward mb 1 chunk 0 duration 4.000000e+03 start 10051.94304 end 14051.94304 live 1000000000
      pipefill.send gradient mb 1 chunk 0 to 0 bytes 1048576 start 14051.94304 end 14051.94304 live 1000000000
      pipefill.bubble steady start 14051.94304 duration 103.88608000000022 free 14900000000
      pipefill.recv activation mb 2 chunk 0 from 0 bytes 1048576 start 14051.94304 end 14155.82912 live 1000000000
      pipefill.forward mb 2 chunk 0 duration 2.000000e+03 start 14155.82912 end 16155.82912 live 1100000000
      pipefill.backward mb 2 chunk 0 duration 4.000000e+03 start 16155.82912 end 20155.829120000002 live 1000000000
      pipefill.send gradient mb 2 chunk 0 to 0 bytes 1048576 start 20155.829120000002 end 20155.829120000002 live 1000000000
      pipefill.recv activation mb 3 chunk 0 from 0 bytes 1048576 start 20155.829120000002 end 20155.829120000002 live 1000000000
      pipefill.forward mb 3 chunk 0 duration 2.000000e+03 start 20155.829120000002 end 22155.829120000002 live 1100000000
      pipefill.backward mb 3 chunk 0 duration 4.000000e+03 start 22155.829120000002 end 26155.829120000002 live 1000000000
      pipefill.send gradient mb 3 chunk 0 to 0 bytes 1048576 start 26155.829120000002 end 26155.829120000002 live 1000000000
      pipefill.bubble cooldown start 26155.829120000002 duration 4051.9430399999983 free 14900000000 fills [
        @enc layers 3 to 4 batch 8 samples 0 weights resident acts device time 5.050000e+02 mem 39845888,
        @enc layers 0 to 4 batch 8 samples 8 weights resident acts device time 1.960000e+03 mem 39845888 offset 5.050000e+02,
        @enc layers 0 to 2 batch 8 samples 16 weights resident acts device time 9.900000e+02 mem 39845888 offset 2.465000e+03,
        @enc layers 0 to 4 batch 1 samples 1 weights resident acts device time 2.800000e+02 mem 36175872 offset 3.455000e+03,
        @enc layers 1 to 4 batch 8 samples 24 weights resident acts device time 1.475000e+03 mem 39845888 iteration 1,
        @enc layers 0 to 4 batch 8 samples 32 weights resident acts device time 1.960000e+03 mem 39845888 iteration 1 offset 1.475000e+03,
        @enc layers 0 to 4 batch 1 samples 3 weights resident acts device time 2.800000e+02 mem 36175872 iteration 1 offset 3.455000e+03
      ]
    }
  }
  pipefill.fill_job @enc inference samples 100000 attributes {efficiency = 0.96174863387978138 : f64, samples_per_iteration = 4.400000e+01 : f64} {
    pipefill.layer "encoder.0" forward 6.000000e+01 weights 8388608 activations 262144 {ffn = 128 : i64, heads = 4 : i64, hidden = 64 : i64, seq = 16 : i64, workload = "ENCODER_LAYER"}
    pipefill.layer "encoder.1" forward 6.000000e+01 weights 8388608 activations 262144 {ffn = 128 : i64, heads = 4 : i64, hidden = 64 : i64, seq = 16 : i64, workload = "ENCODER_LAYER"}
    pipefill.layer "encoder.2" forward 6.000000e+01 weights 8388608 activations 262144 {ffn = 128 : i64, heads = 4 : i64, hidden = 64 : i64, seq = 16 : i64, workload = "ENCODER_LAYER"}
    pipefill.layer "encoder.3" forward 6.000000e+01 weights 8388608 activations 262144 {ffn = 128 : i64, heads = 4 : i64, hidden = 64 : i64, seq = 16 : i64, workload = "ENCODER_LAYER"}
  }
}

