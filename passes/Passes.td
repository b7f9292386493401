//===- Passes.td - pipefill passes -------------------------*- tablegen -*-===//
#ifndef PIPEFILL_PASSES_TD
#define PIPEFILL_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExpandSchedule : Pass<"pipefill-expand-schedule", "mlir::ModuleOp"> {
  let summary = "Generate each stage's ordered instructions from the schedule kind";
  let description = [{
    For every `pipefill.pipeline` whose stages are still empty, generates the
    per-stage instruction streams of its schedule (GPipe, 1F1B, interleaved
    1F1B in Megatron order, or ZB-H1 with split backwards), including the
    point-to-point sends and receives with their peers and byte counts and,
    when the pipeline has a tail, the data-parallel gradient all-reduce and
    the optimizer step. Instruction durations come from the stage costs
    (divided by `virtual_stages` for interleaved chunks). Pipelines that
    already hold instructions (hand-written, or expanded before) are left
    alone. Unsupported combinations, such as interleaved 1F1B with a
    micro-batch count that is not a multiple of the stage count, are
    reported as errors.
  }];
  let dependentDialects = ["pipefill::PipefillDialect"];
}

def Simulate : Pass<"pipefill-simulate", "mlir::ModuleOp"> {
  let summary = "List-schedule the instructions and annotate start/end times and memory";
  let description = [{
    Runs every stage's instruction list in order against the cross-stage
    dependencies carried by send/recv pairs (a transfer costs
    latency + bytes / bandwidth), and writes `start_us`, `end_us` and
    `live_bytes` on every instruction, `busy_us`, `idle_us` and `peak_bytes`
    on every stage and `iteration_us` on the pipeline. Live memory is the
    stage's static bytes plus the stashed activations of micro-batches whose
    backward has not finished. Reports an order that deadlocks, and any stage
    whose peak memory exceeds the device's memory, as errors.
  }];
}

def InsertBubbles : Pass<"pipefill-insert-bubbles", "mlir::ModuleOp"> {
  let summary = "Materialize every idle gap as a pipefill.bubble op";
  let description = [{
    After `pipefill-simulate`, inserts one `pipefill.bubble` op at every idle
    gap of a stage that lasts at least the pipeline's `min_bubble_us`, with
    its start, duration, free bytes (device memory minus the largest live
    bytes during the gap minus `reserve_bytes`) and kind (warmup, steady,
    cooldown or tail). Existing bubbles, and any fill work in them, are
    replaced. The options override the pipeline's attributes.
  }];
  let options = [
    Option<"minDurationUs", "min-duration-us", "double", "-1.0",
           "Shortest idle gap that becomes a bubble (default: the pipeline's min_bubble_us)">,
    Option<"reserveBytes", "reserve-bytes", "int64_t", "-1",
           "Memory kept free in every bubble (default: the pipeline's reserve_bytes)">
  ];
}

def LowerToStream : Pass<"pipefill-lower-to-stream", "mlir::ModuleOp"> {
  let summary = "Lower planned pipelines to per-device pfstream programs";
  let description = [{
    Replaces every simulated `pipefill.pipeline` with a `pfstream.program`:
    one `pfstream.device` per stage, a high-priority main stream carrying the
    stage's compute, sends and receives in order, and, on stages with planned
    fill work, a low-priority fill stream. A bubble becomes an event recorded
    on the main stream where the bubble begins, a bubble marker, and on the
    fill stream a wait on that event followed by the bubble's fill chunks. The
    main stream never waits on the fill stream. Transfers get tags that are
    unique per (sender, receiver) pair. `pipefill.fill_job` declarations stay
    in the module; fill chunks refer to them.
  }];
  let options = [
    Option<"iterations", "iterations", "int64_t", "1",
           "Loop count written into the program (the runtime can override it)">
  ];
  let dependentDialects = ["pipefill::pfstream::PfstreamDialect"];
}

#endif // PIPEFILL_PASSES_TD
