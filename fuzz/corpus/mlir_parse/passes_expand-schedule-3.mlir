// ZB-H1 splits each backward into backward_input (B - W) and backward_weight
// (W); the tail adds the all-reduce (ring: 2(d-1)/d * bytes / bw, with 1 GB/s =
// 1e3 bytes/us: 2*1/2*1000/1000 = 1 us) and the optimizer step.
pipefill.pipeline @zb schedule zb_h1 attributes {num_stages = 2 : i64, num_microbatches = 2 : i64, device_memory_bytes = 1000 : i64, tail, data_parallel = 2 : i64, grad_bytes = 1000 : i64, allreduce_bandwidth_gbps = 1.0, optimizer_us = 3.0} {
  pipefill.stage 0 attributes {forward_us = 10.0, backward_us = 20.0, backward_weight_us = 8.0} {
  }
  pipefill.stage 1 attributes {forward_us = 10.0, backward_us = 20.0, backward_weight_us = 8.0} {
  }
}
