//===- PfstreamOps.td - the pfstream dialect ---------------*- tablegen -*-===//
#ifndef PFSTREAM_OPS_TD
#define PFSTREAM_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/Properties.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "dialect/PipefillConstraints.td"

def Pfstream_Dialect : Dialect {
  let name = "pfstream";
  let cppNamespace = "::pipefill::pfstream";
  let summary = "Per-device CUDA stream programs";
  let description = [{
    The lowered form of a planned pipeline: one `pfstream.device` per GPU,
    each with prioritized streams (one main stream for the training job,
    low-priority fill streams, copy streams), events, and per stream an
    ordered loop body of operations that map one-to-one onto the CUDA runtime
    API and the pipefill runtime's builder calls (`runtime/pfrt.h`). Streams
    and events are named by their index on the device, exactly as in the
    StreamProgram protobuf the dialect is exported to.
  }];
  let usePropertiesForAttributes = 1;
}

class Pfstream_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pfstream_Dialect, mnemonic, traits>;

// Non-negative numbers: the constraints the pipefill dialect uses.
defvar Pfstream_NonNegF64 = Pipefill_NonNegF64;
defvar Pfstream_NonNegI64 = Pipefill_NonNegI64;
// A number the StreamProgram holds in a uint32 field (proto/stream_program.proto): a larger one
// would be cut to its low 32 bits by the export, a different program that the runtime runs.
def Pfstream_U32 : ConfinedAttr<I64Attr, [IntNonNegative, IntMaxValue<4294967295>]>;

def Pfstream_StreamRole : I32EnumAttr<"StreamRole", "stream role", [
    I32EnumAttrCase<"Main", 1, "main">,
    I32EnumAttrCase<"Fill", 2, "fill">,
    I32EnumAttrCase<"Copy", 3, "copy">]> {
  let cppNamespace = "::pipefill::pfstream";
}
def Pfstream_Priority : I32EnumAttr<"Priority", "stream priority", [
    I32EnumAttrCase<"High", 1, "high">,
    I32EnumAttrCase<"Normal", 2, "normal">,
    I32EnumAttrCase<"Low", 3, "low">]> {
  let cppNamespace = "::pipefill::pfstream";
}
def Pfstream_ComputeKind : I32EnumAttr<"ComputeKind", "main-job compute", [
    I32EnumAttrCase<"Forward", 1, "forward">,
    I32EnumAttrCase<"Backward", 2, "backward">,
    I32EnumAttrCase<"BackwardInput", 3, "backward_input">,
    I32EnumAttrCase<"BackwardWeight", 4, "backward_weight">,
    I32EnumAttrCase<"AllReduce", 5, "allreduce">,
    I32EnumAttrCase<"Optimizer", 6, "optimizer">]> {
  let cppNamespace = "::pipefill::pfstream";
}
// The cases of pipefill's BubbleKind (dialect/PipefillConstraints.td), numbered
// from 1 as the runtime's StreamProgram enums.
def Pfstream_BubbleKind : I32EnumAttr<"BubbleKind", "bubble kind",
                                     Pipefill_BubbleKindCases<1>.cases> {
  let cppNamespace = "::pipefill::pfstream";
}
def Pfstream_CopyDirection : I32EnumAttr<"CopyDirection", "copy direction", [
    I32EnumAttrCase<"HostToDevice", 0, "h2d">,
    I32EnumAttrCase<"DeviceToHost", 1, "d2h">]> {
  let cppNamespace = "::pipefill::pfstream";
}

def Pfstream_ProgramOp : Pfstream_Op<"program", [
    Symbol, IsolatedFromAbove, SingleBlock, NoTerminator]> {
  let summary = "A whole pipeline as per-device stream programs";
  let description = [{
    Holds one `pfstream.device` per device, in device order. Every device's
    streams are loop bodies that the runtime repeats `iterations` times
    (at most 10^6, the runtime's limit; 0 means 1, as in the StreamProgram).
    Fill chunks refer to `pipefill.fill_job` declarations in the same module.

    ```mlir
    pfstream.program @gpt iterations 10 planned 1.2e6 {
      pfstream.device 0 attributes {memory_bytes = 85899345920 : i64} {
        ...
      }
    }
    ```
  }];
  let arguments = (ins Pipefill_SymbolName:$sym_name,
                       Pfstream_NonNegI64:$iterations,
                       Pfstream_NonNegF64:$planned_iteration_us,
                       DefaultValuedAttr<Pfstream_NonNegI64, "0">:$seed);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `iterations` $iterations `planned` $planned_iteration_us attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Pfstream_DeviceOp : Pfstream_Op<"device", [
    HasParent<"ProgramOp">, IsolatedFromAbove, SingleBlock, NoTerminator]> {
  let summary = "The streams and events of one device";
  let description = [{
    `index` is the device's position in the program. The attributes carry the
    memory capacity, the main job's static bytes, the planned per-kind compute
    times (the runtime's calibration) and the interconnect figures. The body
    declares the device's events (`pfstream.event`) and streams
    (`pfstream.stream`), each numbered from 0 in order.

    ```mlir
    pfstream.device 0 attributes {stage = 0 : i64, memory_bytes = 85899345920 : i64} {
      pfstream.event 0 "bubble0"
      pfstream.stream 0 main priority high {
        pfstream.compute forward mb 0 chunk 0 planned 8.3e3 at 0.0
      }
    }
    ```
  }];
  let arguments = (ins Pfstream_NonNegI64:$index,
                       DefaultValuedAttr<Pfstream_U32, "0">:$stage,
                       DefaultValuedAttr<Pfstream_NonNegI64, "0">:$memory_bytes,
                       DefaultValuedAttr<Pfstream_NonNegI64, "0">:$static_bytes,
                       DefaultValuedAttr<Pfstream_NonNegF64, "0.0">:$planned_iteration_us,
                       DefaultValuedAttr<Pfstream_NonNegF64, "0.0">:$p2p_latency_us,
                       DefaultValuedAttr<Pfstream_NonNegF64, "0.0">:$p2p_bandwidth_gbps,
                       DefaultValuedAttr<Pfstream_NonNegF64, "0.0">:$pcie_bandwidth_gbps,
                       DefaultValuedAttr<Pfstream_NonNegF64, "0.0">:$forward_us,
                       DefaultValuedAttr<Pfstream_NonNegF64, "0.0">:$backward_us,
                       DefaultValuedAttr<Pfstream_NonNegF64, "0.0">:$backward_input_us,
                       DefaultValuedAttr<Pfstream_NonNegF64, "0.0">:$backward_weight_us,
                       DefaultValuedAttr<Pfstream_NonNegF64, "0.0">:$allreduce_us,
                       DefaultValuedAttr<Pfstream_NonNegF64, "0.0">:$optimizer_us);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$index attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
}

def Pfstream_EventOp : Pfstream_Op<"event", [HasParent<"DeviceOp">]> {
  let summary = "Declares an event of the device";
  let description = [{
    Events are numbered in declaration order; `pfstream.record` and
    `pfstream.wait` name them by that number. An event is recorded once per
    iteration (a generation counter on the host backend, a cudaEvent_t on
    CUDA).

    ```mlir
    pfstream.event 0 "bubble0"
    ```
  }];
  let arguments = (ins Pfstream_NonNegI64:$index, Pipefill_Str:$name);
  let assemblyFormat = "$index $name attr-dict";
}

def Pfstream_StreamOp : Pfstream_Op<"stream", [
    HasParent<"DeviceOp">, SingleBlock, NoTerminator]> {
  let summary = "A prioritized stream and its ordered loop body";
  let description = [{
    `main` streams run the training job at high priority (exactly one per
    device), `fill` streams run fill work at low priority, `copy` streams
    move offloaded data. The ops of the body run in order, once per
    iteration.

    ```mlir
    pfstream.stream 1 fill priority low {
      pfstream.wait 0
    }
    ```
  }];
  let arguments = (ins Pfstream_NonNegI64:$index, Pfstream_StreamRole:$role,
                       Pfstream_Priority:$priority);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$index $role `priority` $priority attr-dict-with-keyword $body";
}

// A main-stream op's planned start (us): a native double, not a uniqued
// attribute per op (nearly every op has a start of its own). Printed and
// parsed by custom<PlannedStart>, which rejects a negative or infinite time.
def Pfstream_PlannedStartProp : Property<"double", "planned start in microseconds"> {
  let convertToAttribute = "::mlir::Builder($_ctxt).getF64FloatAttr($_storage)";
  let convertFromAttribute =
      "return ::pipefill::pfstream::plannedStartFromAttribute($_storage, $_attr, $_diag);";
  let hashProperty = "::llvm::hash_value(::llvm::bit_cast<uint64_t>($_storage))";
  let writeToMlirBytecode = "$_writer.writeVarInt(::llvm::bit_cast<uint64_t>($_storage))";
  let readFromMlirBytecode = [{
    uint64_t bits;
    if (::mlir::failed($_reader.readVarInt(bits)))
      return ::mlir::failure();
    $_storage = ::llvm::bit_cast<double>(bits);
  }];
  let defaultValue = "0.0";
}

class Pfstream_StreamBodyOp<string mnemonic, list<Trait> traits = []>
    : Pfstream_Op<mnemonic, !listconcat(traits, [HasParent<"StreamOp">])>;

def Pfstream_ComputeOp : Pfstream_StreamBodyOp<"compute"> {
  let summary = "Main-job compute of one pipeline instruction";
  let description = [{
    Runs for the planned time (a calibrated GEMM chain on CUDA, a timed wait
    on the host backend, or a framework callback). `at` is the planned start.

    ```mlir
    pfstream.compute backward mb 3 chunk 0 planned 1.66e4 at 4.2e5
    ```
  }];
  let arguments = (ins Pfstream_ComputeKind:$kind, Pfstream_U32:$microbatch,
                       Pfstream_U32:$chunk, Pfstream_NonNegF64:$planned_us,
                       Pfstream_PlannedStartProp:$planned_start_us);
  let assemblyFormat = "$kind `mb` $microbatch `chunk` $chunk `planned` $planned_us `at` custom<PlannedStart>($planned_start_us) attr-dict";
}

def Pfstream_SendOp : Pfstream_StreamBodyOp<"send"> {
  let summary = "Point-to-point send to a peer device";
  let description = [{
    ```mlir
    pfstream.send to 1 bytes 33554432 tag 0 planned 1.35e3 at 8.3e3
    ```
  }];
  let arguments = (ins Pfstream_U32:$peer, Pfstream_NonNegI64:$bytes,
                       Pfstream_U32:$tag, Pfstream_NonNegF64:$planned_us,
                       Pfstream_PlannedStartProp:$planned_start_us);
  let assemblyFormat = "`to` $peer `bytes` $bytes `tag` $tag `planned` $planned_us `at` custom<PlannedStart>($planned_start_us) attr-dict";
}

def Pfstream_RecvOp : Pfstream_StreamBodyOp<"recv"> {
  let summary = "Point-to-point receive from a peer device";
  let description = [{
    Completes when the send with the same tag from `from` has arrived.

    ```mlir
    pfstream.recv from 0 bytes 33554432 tag 0 at 0.0
    ```
  }];
  let arguments = (ins Pfstream_U32:$peer, Pfstream_NonNegI64:$bytes,
                       Pfstream_U32:$tag, Pfstream_PlannedStartProp:$planned_start_us);
  let assemblyFormat = "`from` $peer `bytes` $bytes `tag` $tag `at` custom<PlannedStart>($planned_start_us) attr-dict";
}

def Pfstream_RecordOp : Pfstream_StreamBodyOp<"record"> {
  let summary = "Record an event on this stream (cudaEventRecord)";
  let description = [{
    ```mlir
    pfstream.record 0
    ```
  }];
  let arguments = (ins Pfstream_U32:$event);
  let assemblyFormat = "$event attr-dict";
}

def Pfstream_WaitOp : Pfstream_StreamBodyOp<"wait"> {
  let summary = "Make this stream wait for an event (cudaStreamWaitEvent)";
  let description = [{
    Later ops of the stream start after the event's record of the same
    iteration. A main stream never waits on an event recorded by a fill
    stream: fill work never blocks the training job.

    ```mlir
    pfstream.wait 0
    ```
  }];
  let arguments = (ins Pfstream_U32:$event);
  let assemblyFormat = "$event attr-dict";
}

def Pfstream_BubbleOp : Pfstream_StreamBodyOp<"bubble"> {
  let summary = "Marks where an idle window of the main stream begins";
  let description = [{
    Does no work; names the window for planning and measurement. Only on a
    main stream.

    ```mlir
    pfstream.bubble 0 steady start 1.3e5 duration 2.9e5 free 60000000000
    ```
  }];
  let arguments = (ins Pfstream_U32:$bubble_id, Pfstream_BubbleKind:$kind,
                       Pfstream_NonNegF64:$planned_start_us,
                       Pfstream_NonNegF64:$planned_duration_us,
                       Pfstream_NonNegI64:$free_bytes);
  let assemblyFormat = "$bubble_id $kind `start` $planned_start_us `duration` $planned_duration_us `free` $free_bytes attr-dict";
}

// The runtime chunks of one bubble as one native property
// (dialect/stream/FillChunkTable.h).
def Pfstream_FillChunkTableProp : Property<"::pipefill::pfstream::FillChunkTable",
                                           "the runtime fill chunks of a bubble"> {
  let interfaceType = "::llvm::ArrayRef<::pipefill::pfstream::FillChunkRow>";
  let convertFromStorage = "$_storage";
  let assignToStorage = "$_storage.assign($_value.begin(), $_value.end())";
  let convertToAttribute =
      "::pipefill::pfstream::fillChunkTableToAttribute($_ctxt, $_storage)";
  let convertFromAttribute =
      "return ::pipefill::pfstream::fillChunkTableFromAttribute($_storage, $_attr, $_diag);";
  let hashProperty = "::pipefill::pfstream::hashFillChunkTable($_storage)";
  let writeToMlirBytecode = "::pipefill::pfstream::writeFillChunkTable($_writer, $_storage)";
  let readFromMlirBytecode = [{
    if (::mlir::failed(::pipefill::pfstream::readFillChunkTable($_reader, $_storage)))
      return ::mlir::failure();
  }];
  let defaultValue = "::pipefill::pfstream::FillChunkTable()";
}

def Pfstream_FillChunksOp : Pfstream_StreamBodyOp<"fill_chunks", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Run the fill chunks planned into one bubble, in order";
  let description = [{
    Runs the chunks of bubble `bubble` of the same device, one after the
    other, one per line (a table: a large plan has millions of chunks). A
    chunk runs passes `[layers, to)` of `@job` on `batch` samples. Plans
    repeat with a `period` (default 1): the chunk runs in loop iterations
    `it >= phase` with `(it - phase) % period == 0`, on samples
    `samples + (r + offset) * S` where `r` is the period index and `S` the
    samples the device begins per period; `offset -1` continues a batch
    begun in the previous period. `weights streamed` streams the layers'
    weights from pinned host memory, `acts host` keeps the batch's
    activations on the host between bubbles. Each device runs its own
    instance of a job (its own sample stream and, for training, its own
    weights). In a StreamProgram each row is one FillChunkOp.

    ```mlir
    pfstream.fill_chunks bubble 0 [
      @bert layers 0 to 24 batch 32 samples 0 offset 0 planned 2.5e3 peak 3000000000,
      @bert layers 0 to 12 batch 32 samples 32 offset -1 planned 1.2e3 peak 3000000000
          weights streamed period 2 phase 1
    ]
    ```
  }];
  let arguments = (ins Pfstream_U32:$bubble_id,
                       Pfstream_FillChunkTableProp:$chunks);
  let assemblyFormat = "`bubble` $bubble_id custom<FillChunkTable>($chunks) attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The chunks, in order.
    ::llvm::ArrayRef<::pipefill::pfstream::FillChunkRow> getChunks() {
      return getProperties().chunks;
    }
    /// The same, to change in place.
    ::pipefill::pfstream::FillChunkTable &getChunkTable() { return getProperties().chunks; }
    /// An error about chunk `i`, at its line (when parsed) or the op's.
    ::mlir::InFlightDiagnostic emitChunkError(size_t i);
  }];
}

def Pfstream_CopyOp : Pfstream_StreamBodyOp<"copy"> {
  let summary = "Asynchronous host<->device copy";
  let description = [{
    ```mlir
    pfstream.copy h2d bytes 25165824 planned 1.0e3
    ```
  }];
  let arguments = (ins Pfstream_CopyDirection:$direction, Pfstream_NonNegI64:$bytes,
                       Pfstream_NonNegF64:$planned_us);
  let assemblyFormat = "$direction `bytes` $bytes `planned` $planned_us attr-dict";
}

#endif // PFSTREAM_OPS_TD
