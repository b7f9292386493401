//===- ExportTorchSchedule.cpp - pipefill order -> torch action table -----===//
//
// `pipefill-translate --to-torch-schedule` writes the compute order of each
// stage (rank) as the compute-only CSV that torch.distributed.pipelining's
// `_PipelineScheduleRuntime._load_csv` loads: torch then adds its own
// send/recv actions, and its runtime runs exactly the order pipefill
// simulated and planned. Chunk c of device d is torch stage c*p + d (torch's
// interleaved layout) unless the stage carries `torch_stages` from an
// imported table; compute ops tagged with the same `torch_overlap` group
// are written back as one OVERLAP_F_B cell.
//
//===----------------------------------------------------------------------===//
#include "algo/torch/TorchSchedule.h"
#include "codegen/IRQueries.h"
#include "codegen/TorchPlacement.h"
#include "codegen/Translate.h"
#include "dialect/PipefillOps.h"
#include "dialect/stream/PfstreamOps.h"
#include "passes/ScheduleIR.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

namespace pipefill {

LogicalResult exportTorchSchedule(ModuleOp module, llvm::raw_ostream &os) {
  PipelineOp pipeline = findPipeline(module);
  if (!pipeline)
    return failure();
  if (!pipeline.isExpanded())
    return pipeline.emitError()
           << "has no instructions to export; run pipefill-opt "
              "--pipefill-expand-schedule (or --pipefill-compile) first";
  int64_t p = pipeline.getNumStages(), v = pipeline.getVirtualStages();
  torchsched::StagePlacement placement;
  if (failed(readTorchPlacement(pipeline, placement)))
    return failure();
  std::vector<int64_t> stageOf(p * v); // [device * v + chunk] -> torch stage
  for (int64_t s = 0; s < p * v; ++s)
    stageOf[placement.deviceOfStage[s] * v + placement.chunkOfStage[s]] = s;
  std::vector<std::vector<torchsched::ExportOp>> rows;
  for (StageOp stage : pipeline.getStages()) {
    int64_t d = stage.getIndex();
    auto &row = rows.emplace_back();
    for (Operation &op : stage.getBody().front()) {
      auto instr = dyn_cast<InstructionOpInterface>(op);
      torchsched::ExportOp out;
      const bool compute = instr && isComputeKind(toSchedKind(instr.getInstrKind()));
      if (compute) {
        out.kind = toSchedKind(instr.getInstrKind());
        out.microbatch = instr.getMicrobatchIndex();
        out.stage = stageOf[d * v + instr.getChunkIndex()];
      }
      if (!compute)
        continue;
      if (auto g = op.getAttrOfType<IntegerAttr>("torch_overlap"))
        out.overlapGroup = g.getInt();
      row.push_back(out);
    }
  }
  os << torchsched::formatTable(rows);
  return success();
}

void registerTorchScheduleExport() {
  registerFromMLIR("to-torch-schedule",
                   "write the compute order as a torch.distributed.pipelining action table "
                   "(compute-only CSV)",
                   exportTorchSchedule);
}

} // namespace pipefill
