//===- TorchPlacement.cpp - torch stage numbering of a pipeline ----------===//
#include "codegen/TorchPlacement.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace pipefill {

/// Every send of the pipeline follows torch's data flow under `placement`:
/// the activation of torch stage s goes to the device of torch stage s + 1,
/// the gradient to that of s - 1 (a send's chunk is its sender's). The error
/// is on the sending stage, whose `torch_stages` names the sender, with a
/// note at the send.
static LogicalResult checkDataFlow(PipelineOp pipeline,
                                   const torchsched::StagePlacement &placement,
                                   llvm::ArrayRef<int64_t> stageOf) {
  const int64_t v = placement.chunks, total = int64_t(placement.deviceOfStage.size());
  for (StageOp stage : pipeline.getStages()) {
    const int64_t d = stage.getIndex();
    if (stage.getBody().empty())
      continue;
    for (SendOp send : stage.getBody().front().getOps<SendOp>()) {
      const int64_t c = static_cast<int64_t>(send.getChunk()),
                    peer = static_cast<int64_t>(send.getPeer());
      if (c < 0 || c >= v)
        continue; // the verifier's range error
      const bool activation = send.getPayload() == Payload::Activation;
      const int64_t s = stageOf[d * v + c], t = activation ? s + 1 : s - 1;
      if (t >= 0 && t < total && placement.deviceOfStage[t] == peer)
        continue;
      InFlightDiagnostic diag = stage.emitOpError();
      diag << "has torch_stages that do not follow the pipeline's data flow: chunk " << c
           << " is torch stage " << s << ", so its " << (activation ? "activations" : "gradients")
           << " go to torch stage " << t;
      if (t < 0 || t >= total)
        diag << " (there is none: the torch stages are 0.." << total - 1 << ")";
      else
        diag << " on stage " << placement.deviceOfStage[t];
      diag << ", but it sends the " << stringifyPayload(send.getPayload()) << " of micro-batch "
           << send.getMicrobatch() << " to stage " << peer
           << " (activations go from torch stage s to s+1, gradients from s+1 to s)";
      diag.attachNote(send.getLoc()) << "the send";
      return diag;
    }
  }
  return success();
}

LogicalResult readTorchPlacement(PipelineOp pipeline,
                                 torchsched::StagePlacement &placement) {
  const int64_t p = pipeline.getNumStages(), v = pipeline.getVirtualStages();
  placement.devices = static_cast<int>(p);
  placement.chunks = static_cast<int>(v);
  placement.microbatches = static_cast<int>(pipeline.getNumMicrobatches());
  placement.deviceOfStage.assign(p * v, -1);
  placement.chunkOfStage.assign(p * v, -1);
  std::vector<int64_t> stageOf(p * v); // [device * v + chunk] -> torch stage
  for (StageOp stage : pipeline.getStages()) {
    const int64_t d = stage.getIndex();
    auto mapping = stage->getAttrOfType<DenseI64ArrayAttr>("torch_stages");
    if (mapping && (int64_t)mapping.size() != v)
      return stage.emitOpError()
             << "has torch_stages for " << mapping.size()
             << " chunks but the pipeline has virtual_stages = " << v;
    for (int64_t c = 0; c < v; ++c) {
      const int64_t s = mapping ? mapping[c] : c * p + d;
      if (s < 0 || s >= p * v || placement.deviceOfStage[s] >= 0)
        return stage.emitOpError() << "has torch_stages that do not number the "
                                      "pipeline's stages 0.."
                                   << p * v - 1 << " once each";
      // A device's chunks are its torch stages in ascending order (as the
      // importer numbers them): data flows from a chunk to a later one.
      if (c > 0 && s < stageOf[d * v + c - 1])
        return stage.emitOpError()
               << "has torch_stages that are not ascending: chunk " << c << " is torch stage "
               << s << ", chunk " << c - 1 << " torch stage " << stageOf[d * v + c - 1]
               << "; a stage's chunks are its torch stages in ascending order";
      placement.deviceOfStage[s] = static_cast<int>(d);
      placement.chunkOfStage[s] = static_cast<int>(c);
      stageOf[d * v + c] = s;
    }
  }
  return checkDataFlow(pipeline, placement, stageOf);
}

} // namespace pipefill
