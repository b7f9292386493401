//===- TorchPlacement.h - torch stage numbering of a pipeline ----*- C++ -*-===//
//
// Which torch.distributed.pipelining stage each (device, chunk) of a pipeline
// is: the `torch_stages` an imported action table left on each stage op, else
// torch's interleaved layout (chunk c of device d is stage c * p + d). Used by
// --to-torch-schedule and --torch-trace-to-profile.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_CODEGEN_TORCHPLACEMENT_H
#define PIPEFILL_CODEGEN_TORCHPLACEMENT_H

#include "algo/torch/TorchTrace.h"
#include "dialect/PipefillOps.h"

namespace pipefill {

/// Fills `placement` (deviceOfStage / chunkOfStage over p * v torch stages);
/// an error on the stage op whose `torch_stages` has the wrong length, does
/// not number the stages 0..p*v-1 once each, is not ascending over its
/// chunks, or disagrees with the pipeline's data flow: each send of the
/// activation of torch stage s must go to the stage holding s + 1, of the
/// gradient to the one holding s - 1.
mlir::LogicalResult readTorchPlacement(PipelineOp pipeline,
                                       torchsched::StagePlacement &placement);

} // namespace pipefill

#endif // PIPEFILL_CODEGEN_TORCHPLACEMENT_H
