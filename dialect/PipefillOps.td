//===- PipefillOps.td - pipefill operations ----------------*- tablegen -*-===//
#ifndef PIPEFILL_OPS_TD
#define PIPEFILL_OPS_TD

include "dialect/PipefillDialect.td"
include "dialect/PipefillConstraints.td"
include "dialect/PipefillEnums.td"
include "dialect/PipefillInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/Properties.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"

//===----------------------------------------------------------------------===//
// Attribute constraints
//===----------------------------------------------------------------------===//

// Pipefill_NonNegF64, Pipefill_NonNegI64, Pipefill_PosI64: PipefillConstraints.td.

// Results of pipefill-simulate, set on every instruction once the schedule
// has been simulated: one native property (dialect/InstrTiming.h), printed
// as `start S end E live L` after the instruction's fields.
def Pipefill_TimingProp : Property<"::pipefill::InstrTiming",
                                   "simulated start, end and live bytes"> {
  let convertToAttribute = "::pipefill::timingToAttribute($_ctxt, $_storage)";
  let convertFromAttribute =
      "return ::pipefill::timingFromAttribute($_storage, $_attr, $_diag);";
  let hashProperty = "::pipefill::hashTiming($_storage)";
  let writeToMlirBytecode = "::pipefill::writeTiming($_writer, $_storage)";
  let readFromMlirBytecode = [{
    if (::mlir::failed(::pipefill::checkBytecodeVersion($_reader)) ||
        ::mlir::failed(::pipefill::readTiming($_reader, $_storage)))
      return ::mlir::failure();
  }];
  let defaultValue = "::pipefill::InstrTiming()";
}
defvar TimingArgs = (ins Pipefill_TimingProp:$timing);

// A bubble's start, duration and free bytes: native numbers, not uniqued
// attributes (a 128 x 4096 pipeline has half a million bubbles, nearly all
// with times of their own). The generic form keeps the attribute spelling
// (`start_us = 0.0`, `free_bytes = 5 : i64`); BubbleOp::verify checks the
// ranges (a finite time >= 0, bytes >= 0).
def Pipefill_F64Prop : Property<"double", "an f64 stored natively"> {
  let convertToAttribute =
      "::mlir::FloatAttr::get(::mlir::Float64Type::get($_ctxt), $_storage)";
  let convertFromAttribute = "return ::pipefill::f64FromAttribute($_storage, $_attr, $_diag);";
  let hashProperty = "::llvm::hash_value(::llvm::bit_cast<uint64_t>($_storage))";
  // Unset (a generic form without the key) fails the verifier.
  let defaultValue = "::std::numeric_limits<double>::quiet_NaN()";
  let writeToMlirBytecode = "$_writer.writeVarInt(::llvm::bit_cast<uint64_t>($_storage))";
  let readFromMlirBytecode = [{
    uint64_t bits;
    if (::mlir::failed($_reader.readVarInt(bits)))
      return ::mlir::failure();
    $_storage = ::llvm::bit_cast<double>(bits);
  }];
}
def Pipefill_I64Prop : Property<"int64_t", "an i64 stored natively"> {
  let convertFromAttribute = "return ::pipefill::i64FromAttribute($_storage, $_attr, $_diag);";
  let defaultValue = "-1"; // unset: fails the verifier
  let writeToMlirBytecode = "$_writer.writeSignedVarInt($_storage)";
  let readFromMlirBytecode = [{
    if (::mlir::failed($_reader.readSignedVarInt($_storage)))
      return ::mlir::failure();
  }];
}

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

def Pipefill_PipelineOp : Pipefill_Op<"pipeline", [
    Symbol, IsolatedFromAbove, SingleBlock, NoTerminator]> {
  let summary = "A pipeline-parallel training job: its stages and schedule";
  let description = [{
    Declares one pipeline-parallel job. The single block holds exactly
    `num_stages` `pipefill.stage` ops in stage order. Attributes carry the
    schedule, the micro-batch count, the hardware, the optional iteration
    tail (data-parallel all-reduce and optimizer step) and planner options;
    `iteration_us` appears once the schedule has been simulated. The shape
    has the JobSpec's limits (docs/reliability.md): at most 1024 stages,
    65536 micro-batches, 64 virtual stages and 2^22 micro-batch chunks.

    ```mlir
    pipefill.pipeline @gpt schedule one_f_one_b attributes {
        num_stages = 2 : i64, num_microbatches = 4 : i64,
        device_memory_bytes = 85899345920 : i64} {
      pipefill.stage 0 attributes {forward_us = 1.0e3, backward_us = 2.0e3} {
      }
      pipefill.stage 1 attributes {forward_us = 1.0e3, backward_us = 2.0e3} {
      }
    }
    ```
  }];
  let arguments = (ins
    Pipefill_SymbolName:$sym_name,
    Pipefill_ScheduleKind:$schedule,
    Pipefill_PosI64:$num_stages,
    Pipefill_PosI64:$num_microbatches,
    DefaultValuedAttr<Pipefill_PosI64, "1">:$virtual_stages,
    Pipefill_PosI64:$device_memory_bytes,
    DefaultValuedAttr<Pipefill_NonNegF64, "0.0">:$p2p_latency_us,
    DefaultValuedAttr<Pipefill_NonNegF64, "0.0">:$p2p_bandwidth_gbps,
    DefaultValuedAttr<Pipefill_NonNegF64, "25.0">:$pcie_bandwidth_gbps,
    DefaultValuedAttr<Pipefill_NonNegF64, "2000.0">:$hbm_bandwidth_gbps,
    DefaultValuedAttr<Pipefill_NonNegF64, "5.0">:$kernel_launch_us,
    // Iteration tail.
    UnitAttr:$tail,
    DefaultValuedAttr<Pipefill_PosI64, "1">:$data_parallel,
    DefaultValuedAttr<Pipefill_NonNegI64, "0">:$grad_bytes,
    DefaultValuedAttr<Pipefill_NonNegF64, "0.0">:$allreduce_bandwidth_gbps,
    DefaultValuedAttr<Pipefill_NonNegF64, "0.0">:$allreduce_latency_us,
    DefaultValuedAttr<Pipefill_NonNegF64, "0.0">:$optimizer_us,
    // Planner options.
    DefaultValuedAttr<Pipefill_NonNegF64, "50.0">:$min_bubble_us,
    DefaultValuedAttr<Pipefill_NonNegI64, "1073741824">:$reserve_bytes,
    DefaultValuedAttr<Pipefill_NonNegF64, "20.0">:$context_switch_us,
    DefaultValuedAttr<Pipefill_NonNegF64, "0.05">:$safety_margin,
    OptionalAttr<DenseI64ArrayAttr>:$batch_sizes,
    // Result of pipefill-simulate.
    OptionalAttr<Pipefill_NonNegF64>:$iteration_us);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `schedule` $schedule attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The stages in order.
    auto getStages() { return getBody().front().getOps<StageOp>(); }
    /// True once pipefill-expand-schedule has produced instructions.
    bool isExpanded();
  }];
}

def Pipefill_StageOp : Pipefill_Op<"stage", [
    HasParent<"PipelineOp">, IsolatedFromAbove, SingleBlock, NoTerminator]> {
  let summary = "One pipeline stage (device) and its ordered instruction stream";
  let description = [{
    Holds the stage's profiled per-micro-batch costs and, after
    `pipefill-expand-schedule`, its instructions in execution order. After
    `pipefill-simulate` it also carries `busy_us`, `idle_us` and
    `peak_bytes`. A stage is isolated from above: its instructions refer to
    nothing outside it but symbols, so stages are verified in parallel and
    per-stage work may run on several threads.

    ```mlir
    pipefill.stage 0 attributes {forward_us = 1.0e3, backward_us = 2.0e3,
                                 stash_bytes = 1073741824 : i64} {
      pipefill.forward mb 0 chunk 0 duration 1.0e3
      pipefill.send activation mb 0 chunk 0 to 1 bytes 16777216
    }
    ```
  }];
  let arguments = (ins
    Pipefill_NonNegI64:$index,
    Pipefill_NonNegF64:$forward_us,
    Pipefill_NonNegF64:$backward_us,
    DefaultValuedAttr<Pipefill_NonNegF64, "0.0">:$backward_weight_us,
    DefaultValuedAttr<Pipefill_NonNegI64, "0">:$activation_bytes,
    DefaultValuedAttr<Pipefill_NonNegI64, "0">:$stash_bytes,
    DefaultValuedAttr<Pipefill_NonNegI64, "0">:$static_bytes,
    OptionalAttr<Pipefill_NonNegF64>:$busy_us,
    OptionalAttr<Pipefill_NonNegF64>:$idle_us,
    OptionalAttr<Pipefill_NonNegI64>:$peak_bytes);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$index attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

// Accessors of the instruction fields. InstructionOpInterface and the
// passes find them by name (dialect/PipefillOps.h), and PipefillOps.cpp
// asserts that every class has the ones it should.
defvar MicrobatchAccessors = [{
  int64_t getMicrobatch() { return getProperties().microbatch; }
  int64_t getChunk() { return getProperties().chunk; }
}];
defvar PeerAccessors = [{
  int64_t getPeer() { return getProperties().peer; }
}];
defvar BytesAccessors = [{
  int64_t getBytes() { return getProperties().bytes; }
}];
defvar DurationAccessors = [{
  double getDurationUs() { return getProperties().duration_us; }
  void setDurationUs(double us) { getProperties().duration_us = us; }
}];

// An instruction of a stage's stream; `kind` names its InstrKind case.
//
// Every field of an instruction (micro-batch, chunk, peer, bytes, duration)
// is a native number in the op's properties, like its timing: a pipeline
// has millions of instructions, and uniquing an attribute per field (and
// reading it back through APInt and APFloat) cost nearly as much as
// creating the op (1F1B 64 x 512, callgrind: expand-schedule 209M -> 150M
// instructions, the three schedule passes 360M -> 270M). The text and
// generic forms are unchanged; the op's
// verifier (verifyInstrFields in PipefillOps.cpp) checks what the
// attribute constraints did: integers >= 0, durations >= 0 and not NaN.
class Pipefill_InstrOp<string mnemonic, string kind, code accessors>
    : Pipefill_Op<mnemonic, [HasParent<"StageOp">, InstructionOpInterface]> {
  // ODS (LLVM 19) generates no accessors for native properties: each
  // class names those of its fields.
  let extraClassDeclaration =
      "static constexpr ::pipefill::InstrKind kInstrKind = ::pipefill::InstrKind::" # kind # ";" #
      accessors;
  let hasVerifier = 1;
}


class Pipefill_ComputeOp<string mnemonic, string kind, string what>
    : Pipefill_InstrOp<mnemonic, kind, !strconcat(MicrobatchAccessors, DurationAccessors)> {
  let summary = what # " of one micro-batch on one model chunk";
  let description = [{
    Occupies the device for `duration` microseconds. `mb` is the micro-batch
    index (0 <= mb < num_microbatches), `chunk` the model chunk on this
    device (0 <= chunk < virtual_stages).

    Fields (native properties; generic form `microbatch`, `chunk`: i64 >= 0,
    `duration_us`: f64 >= 0), then the simulated timing (`start`, `end`,
    `live`) once pipefill-simulate has run.

    ```mlir
    pipefill.}] # mnemonic # [{ mb 3 chunk 0 duration 1.5e3
    ```
  }];
  let arguments = !con((ins Pipefill_I64Prop:$microbatch,
                            Pipefill_I64Prop:$chunk,
                            Pipefill_F64Prop:$duration_us), TimingArgs);
  let assemblyFormat =
      "`mb` custom<I64>($microbatch) `chunk` custom<I64>($chunk) `duration` custom<F64>($duration_us) `` custom<Timing>($timing) attr-dict";
}

def Pipefill_ForwardOp : Pipefill_ComputeOp<"forward", "Forward", "Forward pass">;
def Pipefill_BackwardOp : Pipefill_ComputeOp<"backward", "Backward",
    "Whole backward pass (input and weight gradients)">;
def Pipefill_BackwardInputOp : Pipefill_ComputeOp<"backward_input", "BackwardInput",
    "Input-gradient half of a split backward (zero-bubble B)">;
def Pipefill_BackwardWeightOp : Pipefill_ComputeOp<"backward_weight", "BackwardWeight",
    "Weight-gradient half of a split backward (zero-bubble W)">;

def Pipefill_SendOp : Pipefill_InstrOp<"send", "Send",
    !strconcat(MicrobatchAccessors, PeerAccessors, BytesAccessors)> {
  let summary = "Asynchronous point-to-point send to another stage";
  let description = [{
    Sends the activation (after a forward) or the gradient (after a
    backward) of micro-batch `mb`, produced by local chunk `chunk`, to stage
    `to`. A send costs no device time; its data arrives after
    latency + bytes / bandwidth. Every send has exactly one matching
    `pipefill.recv` on the peer (same payload, mb, chunk and bytes).

    Fields (native properties; generic form `microbatch`, `chunk`, `peer`,
    `bytes`: i64 >= 0), then the simulated timing.

    ```mlir
    pipefill.send activation mb 0 chunk 0 to 1 bytes 16777216
    ```
  }];
  let arguments = !con((ins Pipefill_Payload:$payload,
                            Pipefill_I64Prop:$microbatch,
                            Pipefill_I64Prop:$chunk,
                            Pipefill_I64Prop:$peer,
                            Pipefill_I64Prop:$bytes), TimingArgs);
  let assemblyFormat = "$payload `mb` custom<I64>($microbatch) `chunk` custom<I64>($chunk) `to` custom<I64>($peer) `bytes` custom<I64>($bytes) `` custom<Timing>($timing) attr-dict";
}

def Pipefill_RecvOp : Pipefill_InstrOp<"recv", "Recv",
    !strconcat(MicrobatchAccessors, PeerAccessors, BytesAccessors)> {
  let summary = "Wait for a point-to-point transfer from another stage";
  let description = [{
    Completes when the matching `pipefill.send` of stage `from` has arrived.
    `chunk` is the sender's chunk. Waiting costs no device time: time spent
    here is idle time, i.e. bubble.

    Fields (native properties; generic form `microbatch`, `chunk`, `peer`,
    `bytes`: i64 >= 0), then the simulated timing.

    ```mlir
    pipefill.recv activation mb 0 chunk 0 from 0 bytes 16777216
    ```
  }];
  let arguments = !con((ins Pipefill_Payload:$payload,
                            Pipefill_I64Prop:$microbatch,
                            Pipefill_I64Prop:$chunk,
                            Pipefill_I64Prop:$peer,
                            Pipefill_I64Prop:$bytes), TimingArgs);
  let assemblyFormat = "$payload `mb` custom<I64>($microbatch) `chunk` custom<I64>($chunk) `from` custom<I64>($peer) `bytes` custom<I64>($bytes) `` custom<Timing>($timing) attr-dict";
}

def Pipefill_AllReduceGradsOp : Pipefill_InstrOp<"allreduce_grads", "AllReduceGrads",
    !strconcat(BytesAccessors, DurationAccessors)> {
  let summary = "Data-parallel gradient all-reduce of this stage";
  let description = [{
    Ring all-reduce of `bytes` gradient bytes over the data-parallel group;
    part of the iteration tail.

    Fields (native properties; generic form `bytes`: i64 >= 0,
    `duration_us`: f64 >= 0), then the simulated timing.

    ```mlir
    pipefill.allreduce_grads bytes 5000000000 duration 2.5e4
    ```
  }];
  let arguments = !con((ins Pipefill_I64Prop:$bytes,
                            Pipefill_F64Prop:$duration_us), TimingArgs);
  let assemblyFormat = "`bytes` custom<I64>($bytes) `duration` custom<F64>($duration_us) `` custom<Timing>($timing) attr-dict";
}

def Pipefill_OptimizerStepOp : Pipefill_InstrOp<"optimizer_step", "OptimizerStep",
    DurationAccessors> {
  let summary = "Optimizer step of this stage";
  let description = [{
    The last instruction of an iteration with a tail, taking `duration`
    microseconds (native property; generic form `duration_us`: f64 >= 0),
    then the simulated timing.

    ```mlir
    pipefill.optimizer_step duration 4.0e3
    ```
  }];
  let arguments = !con((ins Pipefill_F64Prop:$duration_us), TimingArgs);
  let assemblyFormat = "`duration` custom<F64>($duration_us) `` custom<Timing>($timing) attr-dict";
}

// The fill chunks of a bubble as one native property (dialect/FillTable.h).
def Pipefill_FillTableProp : Property<"::pipefill::FillTable",
                                      "the fill chunks planned into a bubble"> {
  let interfaceType = "::llvm::ArrayRef<::pipefill::FillChunk>";
  let convertFromStorage = "$_storage";
  let assignToStorage = "$_storage.assign($_value.begin(), $_value.end())";
  let convertToAttribute = "::pipefill::fillTableToAttribute($_ctxt, $_storage)";
  let convertFromAttribute =
      "return ::pipefill::fillTableFromAttribute($_storage, $_attr, $_diag);";
  let hashProperty = "::pipefill::hashFillTable($_storage)";
  let writeToMlirBytecode = "::pipefill::writeFillTable($_writer, $_storage)";
  let readFromMlirBytecode = [{
    if (::mlir::failed(::pipefill::checkBytecodeVersion($_reader)) ||
        ::mlir::failed(::pipefill::readFillTable($_reader, $_storage)))
      return ::mlir::failure();
  }];
  let defaultValue = "::pipefill::FillTable()";
}

def Pipefill_BubbleOp : Pipefill_Op<"bubble", [
    HasParent<"StageOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "An idle gap of a stage, with the fill work planned into it";
  let description = [{
    Marks an idle interval of the stage: it starts at `start` microseconds
    into the iteration, lasts `duration` microseconds, and `free` bytes of
    device memory are available throughout it (capacity minus the stage's
    largest live memory during the gap minus the reserve). `kind` says where
    it sits: `warmup` before the stage's first instruction, `steady` between
    forwards, `cooldown` after the last forward, `tail` after the last
    backward when the iteration has a tail. Bubbles repeat every iteration.

    `fills` lists the chunks of fill work planned into the gap, in order,
    one per line (a table, not ops: a plan has 10^5-10^6 of them). A chunk
    runs layers `[layers, to)` of fill job `@job` on a batch of `batch`
    samples starting at sample `samples` (the job's running sample cursor).
    `weights` says whether the layers' weights stay resident on the device
    or are streamed from pinned host memory for this chunk; `acts` where the
    batch's intermediate activations wait between bubbles. `time` is the
    predicted time including the context switch and non-overlapped copies
    (`copy` of it is copies), `mem` the chunk's peak device memory; both
    must fit the bubble. For a training job the range counts passes:
    `[0, n)` are the forwards of its n layers, pass `n + k` is the backward
    and update of layer `n - 1 - k`.

    Plans repeat: the chunks of one job on one stage follow the stage's
    `pipefill.assignment` for that job, which lists `prefix` iterations
    that run once followed by `period` iterations that repeat forever;
    `iteration` (default 0) says in which of those iterations the chunk
    runs. `repeat` (default 1) runs it that many times back to back (whole
    batches only), `offset` (default 0) is its planned start relative to the
    bubble's start.

    ```mlir
    pipefill.bubble warmup start 0.0 duration 3.0e3 free 40000000000 fills [
      @bert layers 0 to 12 batch 32 samples 0 weights resident acts device
          time 2.5e3 mem 2000000000,
      @bert layers 0 to 12 batch 32 samples 32 weights resident acts device
          time 2.5e3 mem 2000000000 iteration 1 offset 2.5e3
    ]
    ```
  }];
  let arguments = (ins Pipefill_BubbleKind:$kind,
                       Pipefill_F64Prop:$start_us,
                       Pipefill_F64Prop:$duration_us,
                       Pipefill_I64Prop:$free_bytes,
                       Pipefill_FillTableProp:$fills);
  let assemblyFormat = [{
    $kind `start` custom<F64>($start_us) `duration` custom<F64>($duration_us)
    `free` custom<I64>($free_bytes) `` custom<FillTable>($fills) attr-dict-with-keyword
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Start and duration (microseconds into the iteration) and free bytes.
    double getStartUs() { return getProperties().start_us; }
    double getDurationUs() { return getProperties().duration_us; }
    int64_t getFreeBytes() { return getProperties().free_bytes; }
    void setStartUs(double us) { getProperties().start_us = us; }
    void setDurationUs(double us) { getProperties().duration_us = us; }
    void setFreeBytes(int64_t bytes) { getProperties().free_bytes = bytes; }
    double getEndUs() { return getStartUs() + getDurationUs(); }
    /// The fill chunks, in order.
    ::llvm::ArrayRef<::pipefill::FillChunk> getFills() { return getProperties().fills; }
    /// The same, to change in place.
    ::pipefill::FillTable &getFillTable() { return getProperties().fills; }
    /// An error about fill chunk `i`, at its line (when parsed) or the
    /// bubble's: "'pipefill.bubble' op fill <i> " and the message.
    ::mlir::InFlightDiagnostic emitFillError(size_t i);
  }];
}

//===----------------------------------------------------------------------===//
// Fill jobs
//===----------------------------------------------------------------------===//

def Pipefill_AssignmentOp : Pipefill_Op<"assignment", [
    HasParent<"StageOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A fill job planned onto a stage, with its knobs and steady state";
  let description = [{
    Written by `pipefill-plan-fill` at the top of a stage (assignments come
    before every other op of their stage, which the verifier checks, so
    readers find them without walking the stage): fill job `job` runs
    on this stage with batch size `batch`, weights resident or streamed,
    activations between bubbles on the device or the host (and, for training,
    optimizer states on the host and activation checkpointing as unit
    attributes). Its chunks form a schedule of `prefix` iterations that run
    once followed by `period` iterations that repeat; each period completes
    `batches` batches, i.e. `samples` samples per iteration on average.
    `persistent` bytes stay on the device across bubbles.

    ```mlir
    pipefill.assignment @bert batch 32 weights resident acts device prefix 0 period 1 batches 6 samples 1.92e2 persistent 603979776
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$job,
                       Pipefill_PosI64:$batch,
                       Pipefill_WeightPlacement:$weights,
                       Pipefill_ActPlacement:$acts,
                       UnitAttr:$optimizer_on_host,
                       UnitAttr:$checkpoint,
                       Pipefill_NonNegI64:$prefix,
                       Pipefill_PosI64:$period,
                       Pipefill_NonNegI64:$batches_per_period,
                       Pipefill_NonNegF64:$samples_per_iteration,
                       Pipefill_NonNegI64:$persistent_bytes);
  let assemblyFormat = [{
    $job `batch` $batch `weights` $weights `acts` $acts `prefix` $prefix `period` $period
    `batches` $batches_per_period `samples` $samples_per_iteration `persistent` $persistent_bytes attr-dict
  }];
  let hasVerifier = 1;
}

def Pipefill_FillJobOp : Pipefill_Op<"fill_job", [
    Symbol, IsolatedFromAbove, SingleBlock, NoTerminator]> {
  let summary = "A pending job whose work may fill bubbles";
  let description = [{
    A batch-inference or small training job: `samples` samples to process,
    its arrival time and priority, and its layers (`pipefill.layer`) in
    execution order. After `pipefill-plan-fill` it carries the planned
    steady-state `samples_per_iteration` and `efficiency` (useful work at
    dedicated speed per bubble time used), or `unscheduled` with the reason
    it fits nowhere.

    ```mlir
    pipefill.fill_job @bert inference samples 1000000 attributes {priority = 1.0} {
      pipefill.layer "encoder" forward 2.0e1 weights 25165824 activations 1572864
    }
    ```
  }];
  let arguments = (ins Pipefill_SymbolName:$sym_name,
                       Pipefill_JobKind:$kind,
                       Pipefill_NonNegI64:$samples,
                       DefaultValuedAttr<Pipefill_NonNegF64, "0.0">:$arrival_us,
                       DefaultValuedAttr<Pipefill_NonNegF64, "1.0">:$priority,
                       // Results of pipefill-plan-fill.
                       OptionalAttr<Pipefill_NonNegF64>:$samples_per_iteration,
                       OptionalAttr<Pipefill_NonNegF64>:$efficiency,
                       OptionalAttr<Pipefill_Str>:$unscheduled);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name $kind `samples` $samples attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    auto getLayers() { return getBody().front().getOps<LayerOp>(); }
    int64_t getNumLayers();
    /// Layers for inference; forward and backward passes for training.
    int64_t getNumPasses();
  }];
}

def Pipefill_LayerOp : Pipefill_Op<"layer", [HasParent<"FillJobOp">]> {
  let summary = "One layer of a fill job";
  let description = [{
    `forward` is the compute-bound forward cost per sample in microseconds,
    `weights` the layer's weight bytes and `activations` the activation bytes
    per sample it keeps live. Training jobs add `backward_us_per_sample`,
    `grad_bytes` and `optimizer_bytes`. The optional `workload` attributes
    (`workload`, `hidden`, `heads`, `seq`, `ffn`) tell the runtime what real
    kernels to run.

    ```mlir
    pipefill.layer "encoder3" forward 2.0e1 weights 25165824 activations 1572864
    ```
  }];
  let arguments = (ins Pipefill_Str:$name,
                       Pipefill_NonNegF64:$forward_us_per_sample,
                       Pipefill_NonNegI64:$weight_bytes,
                       Pipefill_NonNegI64:$activation_bytes_per_sample,
                       DefaultValuedAttr<Pipefill_NonNegF64, "0.0">:$backward_us_per_sample,
                       DefaultValuedAttr<Pipefill_NonNegI64, "0">:$grad_bytes,
                       DefaultValuedAttr<Pipefill_NonNegI64, "0">:$optimizer_bytes,
                       OptionalAttr<Pipefill_Str>:$workload,
                       OptionalAttr<Pipefill_PosI64>:$hidden,
                       OptionalAttr<Pipefill_PosI64>:$heads,
                       OptionalAttr<Pipefill_PosI64>:$seq,
                       OptionalAttr<Pipefill_PosI64>:$ffn);
  let assemblyFormat = "$name `forward` $forward_us_per_sample `weights` $weight_bytes `activations` $activation_bytes_per_sample attr-dict";
  let hasVerifier = 1;
}

#endif // PIPEFILL_OPS_TD
