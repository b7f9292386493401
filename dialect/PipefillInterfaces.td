//===- PipefillInterfaces.td - pipefill op interfaces ------*- tablegen -*-===//
#ifndef PIPEFILL_INTERFACES_TD
#define PIPEFILL_INTERFACES_TD

include "mlir/IR/OpBase.td"

def InstructionOpInterface : OpInterface<"InstructionOpInterface"> {
  let cppNamespace = "::pipefill";
  let description = [{
    One instruction of a stage's stream (every op of a `pipefill.stage` except
    bubbles and assignments): what it is, which micro-batch and model chunk it
    belongs to, how long it occupies the device, and the timing that
    `pipefill-simulate` wrote on it. Passes and exporters read instructions
    through this interface instead of switching over the op classes, and the
    timing is read from the op's properties, never by attribute name.
    Instructions that belong to no micro-batch (the all-reduce and the
    optimizer step) report micro-batch -1 and chunk 0.
  }];
  let methods = [
    InterfaceMethod<"Which instruction this is.", "::pipefill::InstrKind",
      "getInstrKind", (ins), [{}], [{ return ConcreteOp::kInstrKind; }]>,
    InterfaceMethod<"The micro-batch index, or -1 for per-iteration instructions.",
      "int64_t", "getMicrobatchIndex", (ins), [{}], [{
        if constexpr (::pipefill::detail::kHasMicrobatch<ConcreteOp>)
          return static_cast<int64_t>($_op.getMicrobatch());
        else
          return -1;
      }]>,
    InterfaceMethod<"The local model chunk (0 without virtual stages).",
      "int64_t", "getChunkIndex", (ins), [{}], [{
        if constexpr (::pipefill::detail::kHasMicrobatch<ConcreteOp>)
          return static_cast<int64_t>($_op.getChunk());
        else
          return 0;
      }]>,
    InterfaceMethod<"Device time in microseconds (0 for sends and receives).",
      "double", "getDeviceUs", (ins), [{}], [{
        if constexpr (::pipefill::detail::kHasDuration<ConcreteOp>)
          return $_op.getDurationUs();
        else
          return 0.0;
      }]>,
    InterfaceMethod<"Sets the device time (compute, all-reduce, optimizer).",
      "void", "setDeviceUs", (ins "double":$us), [{}], [{
        if constexpr (::pipefill::detail::kHasDuration<ConcreteOp>)
          $_op.setDurationUs(us);
      }]>,
    InterfaceMethod<"The peer stage of a send or receive, else -1.",
      "int64_t", "getPeerStage", (ins), [{}], [{
        if constexpr (::pipefill::detail::kHasPeer<ConcreteOp>)
          return static_cast<int64_t>($_op.getPeer());
        else
          return -1;
      }]>,
    InterfaceMethod<"Bytes moved (transfers, all-reduce), else 0.",
      "int64_t", "getInstrBytes", (ins), [{}], [{
        if constexpr (::pipefill::detail::kHasBytes<ConcreteOp>)
          return static_cast<int64_t>($_op.getBytes());
        else
          return 0;
      }]>,
    InterfaceMethod<"What a send or receive carries (activation otherwise).",
      "::pipefill::Payload", "getTransferPayload", (ins), [{}], [{
        if constexpr (::pipefill::detail::kHasPeer<ConcreteOp>)
          return $_op.getPayload();
        else
          return ::pipefill::Payload::Activation;
      }]>,
    InterfaceMethod<"Simulated start, end and live bytes (each unset before "
                    "simulation).", "const ::pipefill::InstrTiming &", "getTiming",
      (ins), [{}], [{ return $_op.getProperties().timing; }]>,
    InterfaceMethod<"Writes the simulated timing.", "void", "setTiming",
      (ins "double":$startUs, "double":$endUs, "int64_t":$liveBytes), [{}], [{
        ::pipefill::InstrTiming &t = $_op.getProperties().timing;
        t.startUs = startUs;
        t.endUs = endUs;
        t.liveBytes = liveBytes;
      }]>,
    InterfaceMethod<"Drops the simulated timing.", "void", "clearTiming", (ins), [{}], [{
        $_op.getProperties().timing = ::pipefill::InstrTiming();
      }]>
  ];
  let extraSharedClassDeclaration = [{
    /// Simulated start in microseconds, or `fallback` before simulation.
    double getStartUsOr(double fallback) {
      const ::pipefill::InstrTiming &t = $_op.getTiming();
      return t.hasStart() ? t.startUs : fallback;
    }
    /// Simulated end in microseconds, or `fallback` before simulation.
    double getEndUsOr(double fallback) {
      const ::pipefill::InstrTiming &t = $_op.getTiming();
      return t.hasEnd() ? t.endUs : fallback;
    }
  }];
}

#endif // PIPEFILL_INTERFACES_TD
