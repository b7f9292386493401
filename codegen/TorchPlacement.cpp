//===- TorchPlacement.cpp - torch stage numbering of a pipeline ----------===//
#include "codegen/TorchPlacement.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace pipefill {

LogicalResult readTorchPlacement(PipelineOp pipeline,
                                 torchsched::StagePlacement &placement) {
  const int64_t p = pipeline.getNumStages(), v = pipeline.getVirtualStages();
  placement.devices = static_cast<int>(p);
  placement.chunks = static_cast<int>(v);
  placement.microbatches = static_cast<int>(pipeline.getNumMicrobatches());
  placement.deviceOfStage.assign(p * v, -1);
  placement.chunkOfStage.assign(p * v, -1);
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
      placement.deviceOfStage[s] = static_cast<int>(d);
      placement.chunkOfStage[s] = static_cast<int>(c);
    }
  }
  return success();
}

} // namespace pipefill
