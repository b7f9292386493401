// Every op of the dialect prints and parses back to the same IR.

pipefill.pipeline @tiny schedule one_f_one_b attributes {num_stages = 2 : i64, num_microbatches = 2 : i64, device_memory_bytes = 1000000 : i64, tail, data_parallel = 2 : i64, grad_bytes = 100 : i64, allreduce_bandwidth_gbps = 1.0, optimizer_us = 5.0} {
  pipefill.stage 0 attributes {forward_us = 1.0, backward_us = 2.0, stash_bytes = 10 : i64} {
    pipefill.bubble warmup start 0.0 duration 1.0 free 5000 fills [
      @job layers 0 to 1 batch 4 samples 0 weights resident acts device time 0.5 mem 100
    ]
    pipefill.forward mb 0 chunk 0 duration 1.0 start 1.0 end 2.0
    pipefill.send activation mb 0 chunk 0 to 1 bytes 64
    pipefill.forward mb 1 chunk 0 duration 1.0
    pipefill.send activation mb 1 chunk 0 to 1 bytes 64
    pipefill.recv gradient mb 0 chunk 0 from 1 bytes 64
    pipefill.backward mb 0 chunk 0 duration 2.0
    pipefill.recv gradient mb 1 chunk 0 from 1 bytes 64
    pipefill.backward mb 1 chunk 0 duration 2.0
    pipefill.allreduce_grads bytes 100 duration 3.0
    pipefill.optimizer_step duration 5.0
  }
  pipefill.stage 1 attributes {forward_us = 1.0, backward_us = 2.0, backward_weight_us = 1.0} {
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 64
    pipefill.forward mb 0 chunk 0 duration 1.0
    pipefill.backward_input mb 0 chunk 0 duration 1.0
    pipefill.send gradient mb 0 chunk 0 to 0 bytes 64
    pipefill.backward_weight mb 0 chunk 0 duration 1.0
    pipefill.recv activation mb 1 chunk 0 from 0 bytes 64
    pipefill.forward mb 1 chunk 0 duration 1.0
    pipefill.backward mb 1 chunk 0 duration 2.0
    pipefill.send gradient mb 1 chunk 0 to 0 bytes 64
  }
}

pipefill.fill_job @job inference samples 1000 attributes {priority = 2.0} {
  pipefill.layer "enc" forward 10.0 weights 1024 activations 64 {workload = "ENCODER_LAYER", hidden = 256 : i64}
}

pipefill.fill_job @train training samples 10 {
  pipefill.layer "mlp" forward 10.0 weights 1024 activations 64 {backward_us_per_sample = 20.0, grad_bytes = 1024 : i64, optimizer_bytes = 4096 : i64}
}
