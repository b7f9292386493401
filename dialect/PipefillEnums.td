//===- PipefillEnums.td - enums of the pipefill dialect ----*- tablegen -*-===//
#ifndef PIPEFILL_ENUMS_TD
#define PIPEFILL_ENUMS_TD

include "mlir/IR/EnumAttr.td"
include "dialect/PipefillConstraints.td"

def Pipefill_ScheduleKind : I32EnumAttr<"ScheduleKind", "pipeline schedule", [
    I32EnumAttrCase<"GPipe", 0, "gpipe">,
    I32EnumAttrCase<"OneFOneB", 1, "one_f_one_b">,
    I32EnumAttrCase<"Interleaved1F1B", 2, "interleaved_1f1b">,
    I32EnumAttrCase<"ZBH1", 3, "zb_h1">,
    // An order read from outside (a torch.distributed.pipelining action
    // table): its stages hold their instructions already; never expanded.
    I32EnumAttrCase<"Imported", 4, "imported">
  ]> {
  let cppNamespace = "::pipefill";
}

def Pipefill_BubbleKind : I32EnumAttr<"BubbleKind", "where a bubble sits in the iteration",
                                     Pipefill_BubbleKindCases<0>.cases> {
  let cppNamespace = "::pipefill";
}

def Pipefill_JobKind : I32EnumAttr<"JobKind", "fill job kind", [
    I32EnumAttrCase<"Inference", 0, "inference">,
    I32EnumAttrCase<"Training", 1, "training">
  ]> {
  let cppNamespace = "::pipefill";
}

def Pipefill_Payload : I32EnumAttr<"Payload", "what a send or receive carries", [
    I32EnumAttrCase<"Activation", 0, "activation">,
    I32EnumAttrCase<"Gradient", 1, "gradient">
  ]> {
  let cppNamespace = "::pipefill";
}

def Pipefill_WeightPlacement : I32EnumAttr<"WeightPlacement",
    "where a fill chunk's weights live", [
    I32EnumAttrCase<"Resident", 0, "resident">,
    I32EnumAttrCase<"Streamed", 1, "streamed">
  ]> {
  let cppNamespace = "::pipefill";
}

def Pipefill_ActPlacement : I32EnumAttr<"ActPlacement",
    "where a fill batch's activations wait between bubbles", [
    I32EnumAttrCase<"Device", 0, "device">,
    I32EnumAttrCase<"Host", 1, "host">
  ]> {
  let cppNamespace = "::pipefill";
}

def Pipefill_InstrKind : I32EnumAttr<"InstrKind", "kind of a stage instruction", [
    I32EnumAttrCase<"Forward", 0, "forward">,
    I32EnumAttrCase<"Backward", 1, "backward">,
    I32EnumAttrCase<"BackwardInput", 2, "backward_input">,
    I32EnumAttrCase<"BackwardWeight", 3, "backward_weight">,
    I32EnumAttrCase<"Send", 4, "send">,
    I32EnumAttrCase<"Recv", 5, "recv">,
    I32EnumAttrCase<"AllReduceGrads", 6, "allreduce_grads">,
    I32EnumAttrCase<"OptimizerStep", 7, "optimizer_step">
  ]> {
  let cppNamespace = "::pipefill";
}

#endif // PIPEFILL_ENUMS_TD
