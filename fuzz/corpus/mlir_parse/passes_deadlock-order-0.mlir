// A compiled pipeline (simulated timings present) whose instruction order was
// edited afterwards so that it deadlocks: stage 0 waits for the gradient
// before sending the activation the gradient depends on. The plan verifier
// and the lowering reject it with the runtime validator's rule
// (support/Graph.h), on the instruction that can never run.

pipefill.pipeline @swapped schedule one_f_one_b attributes {device_memory_bytes = 1000 : i64, iteration_us = 6.0 : f64, num_microbatches = 1 : i64, num_stages = 2 : i64} {
  pipefill.stage 0 attributes {backward_us = 2.0 : f64, busy_us = 3.0 : f64, forward_us = 1.0 : f64, idle_us = 3.0 : f64, peak_bytes = 0 : i64} {
    pipefill.forward mb 0 chunk 0 duration 1.0 start 0.0 end 1.0 live 0
    pipefill.recv gradient mb 0 chunk 0 from 1 bytes 8 start 1.0 end 4.0 live 0
    pipefill.send activation mb 0 chunk 0 to 1 bytes 8 start 1.0 end 1.0 live 0
    pipefill.backward mb 0 chunk 0 duration 2.0 start 4.0 end 6.0 live 0
  }
  pipefill.stage 1 attributes {backward_us = 2.0 : f64, busy_us = 3.0 : f64, forward_us = 1.0 : f64, idle_us = 3.0 : f64, peak_bytes = 0 : i64} {
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 8 start 0.0 end 1.0 live 0
    pipefill.forward mb 0 chunk 0 duration 1.0 start 1.0 end 2.0 live 0
    pipefill.backward mb 0 chunk 0 duration 2.0 start 2.0 end 4.0 live 0
    pipefill.send gradient mb 0 chunk 0 to 0 bytes 8 start 4.0 end 4.0 live 0
  }
}
