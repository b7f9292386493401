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

def ApplyProfile : Pass<"pipefill-apply-profile", "mlir::ModuleOp"> {
  let summary = "Replace planned instruction durations with a measured profile";
  let description = [{
    Closes the loop profile -> compile -> run: reads the MeasuredProfile that
    `pipefill-run --profile-out` wrote (binary, or text for `.pbtxt`) and sets
    every compute instruction's `duration` to the measured mean of the same
    instruction (stage, kind, micro-batch, chunk), and the stage's
    `forward_us`/`backward_us` to the measured means. Timing results of an
    earlier simulation are dropped so `pipefill-simulate` recomputes them.
    Runs after `pipefill-expand-schedule`; `--pipefill-compile=profile=FILE`
    inserts it there.

    The profile's `stages` entries are matched by their `stage` field (a
    `device` given must equal it: a compiled program runs stage s on device
    s); only a profile that names no stage and no device at all is read in
    list order. The profile must match the pipeline, or nothing is changed:
    a stage measured twice or out of range, an instruction measured twice,
    and an entry for an instruction the stage does not run are errors at the
    profile's `file:line:col` (line 1 for a binary profile), as is a compute
    instruction without an entry.
  }];
  let options = [
    Option<"profile", "profile", "std::string", "",
           "MeasuredProfile file written by pipefill-run --profile-out">
  ];
}

def Simulate : Pass<"pipefill-simulate", "mlir::ModuleOp"> {
  let summary = "List-schedule the instructions and annotate start/end times and memory";
  let description = [{
    Runs every stage's instruction list in order against the cross-stage
    dependencies carried by send/recv pairs (a transfer costs
    latency + bytes / bandwidth), and writes the start, end and live bytes
    of every instruction (`start 0.0 end 1.0e3 live 1048576` in its
    timing), `busy_us`, `idle_us` and `peak_bytes`
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

def PlanFill : Pass<"pipefill-plan-fill", "mlir::ModuleOp"> {
  let summary = "Fit fill-job work into every bubble's time and free memory";
  let description = [{
    Plans the module's `pipefill.fill_job`s into the bubbles of every
    pipeline (after `pipefill-insert-bubbles`). For each stage, whose bubbles
    repeat every iteration, and each job it searches the knobs (batch size,
    resident or streamed weights, where activations wait between bubbles,
    and for training the optimizer-state placement and activation
    checkpointing), packs contiguous layer runs of the current batch into
    successive bubbles with a cursor carried across bubbles and iterations,
    and picks the jobs per stage that maximize priority-weighted useful work.
    Every chunk's time (compute, non-overlapped copies, context switch) fits
    its bubble minus the safety margin and its memory fits the bubble's free
    bytes. The result is a `pipefill.assignment` per (stage, job) and the
    fill chunks in the bubbles' `fills` tables; each job gets its planned
    `samples_per_iteration` and `efficiency`. A job that fits nowhere gets a
    warning and an `unscheduled` reason. The algorithm and its guarantees are
    in docs/planner.md.
  }];
  let options = [
    Option<"singleJobPerStage", "single-job-per-stage", "bool", "false",
           "Run at most one fill job on each stage">
  ];
}

def VerifyPlan : Pass<"pipefill-verify-plan", "mlir::ModuleOp"> {
  let summary = "Independently check that planned fill work fits its bubbles";
  let description = [{
    Rebuilds the plan from the IR alone (assignments, fill chunks, bubbles and
    the jobs' layer costs) and checks it with a checker written separately
    from the planner's packing arithmetic: every chunk's recomputed time and
    memory fit its bubble, chunks of one job in one bubble do not overlap,
    the jobs sharing a bubble fit together, what stays on the device across
    bubbles fits the stage's minimum free memory, each job's layer cursor and
    sample counter continue correctly across bubbles and iterations, and the
    period closes. Any violation is an error: a plan that does not verify is
    never handed on. It also checks that the instruction order cannot
    deadlock, with the rule the runtime validator uses (support/Graph.h):
    stage order plus every send to its matching recv must be acyclic.
  }];
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
    in the module; fill chunks refer to them. An instruction order that
    deadlocks is an error on the instruction that can never run (the
    runtime validator's rule, support/Graph.h), never a program.
  }];
  let options = [
    Option<"iterations", "iterations", "int64_t", "1",
           "Loop count written into the program (the runtime can override it)">
  ];
  let dependentDialects = ["pipefill::pfstream::PfstreamDialect"];
}

#endif // PIPEFILL_PASSES_TD
