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
// The table is checked as --import-torch-schedule checks it before it is
// written (torchsched::checkTableShape and checkTableOrder), so what is
// exported imports again and torch can run it, and the table must have one
// row per stage. The dialect verifier accepts orders that torch cannot run
// (it checks each stage's order on its own, so stages may deadlock each
// other): the export names the operation at the refused cell.
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

/// Checks `text` as the importer would; on a refusal, the error is emitted on
/// the operation of the refused cell (`cellOps[rank][cell]`), on the stage
/// of a refused row, or on the pipeline.
static LogicalResult checkAsImported(PipelineOp pipeline, const std::string &text,
                                     llvm::ArrayRef<std::vector<Operation *>> cellOps) {
  torchsched::Table table;
  torchsched::Imported imported;
  torchsched::Diag diag;
  if (torchsched::parseTable(text, table, diag) &&
      torchsched::checkTableShape(table, imported, diag)) {
    // A stage without compute writes an empty row, which a reader drops at
    // the end of the table: one rank per stage, or the table is not this
    // pipeline's.
    if (imported.ranks != int64_t(pipeline.getNumStages())) {
      for (StageOp stage : pipeline.getStages())
        if (stage.getIndex() == uint64_t(imported.ranks))
          return stage.emitError()
                 << "cannot be written as a torch action table: it runs no forward or "
                    "backward, so the table would have "
                 << imported.ranks << " rank rows for " << pipeline.getNumStages()
                 << " stages";
      return pipeline.emitError() << "cannot be written as a torch action table: it has "
                                  << imported.ranks << " rank rows for "
                                  << pipeline.getNumStages() << " stages";
    }
    if (torchsched::checkTableOrder(table, imported, diag))
      return success();
  }
  Operation *at = pipeline;
  auto stages = pipeline.getStages();
  for (size_t r = 0; r < table.rowLine.size(); ++r)
    if (diag.loc.col == 0 && diag.loc.line == table.rowLine[r])
      for (StageOp stage : stages)
        if (stage.getIndex() == r)
          at = stage;
  for (size_t r = 0; r < table.ranks.size() && r < cellOps.size(); ++r)
    for (size_t k = 0; k < table.ranks[r].size() && k < cellOps[r].size(); ++k) {
      const torchsched::Action &cell = table.ranks[r][k];
      bool here = cell.loc.line == diag.loc.line && cell.loc.col == diag.loc.col;
      for (const torchsched::Action &sub : cell.sub)
        here |= sub.loc.line == diag.loc.line && sub.loc.col == diag.loc.col;
      if (here)
        at = cellOps[r][k];
    }
  at->emitError() << "cannot be written as a torch action table that torch can run: "
                  << diag.message;
  return failure();
}

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
  std::vector<std::vector<Operation *>> cellOps; // [rank][cell] -> its first op
  for (StageOp stage : pipeline.getStages()) {
    int64_t d = stage.getIndex();
    auto &row = rows.emplace_back();
    auto &cells = cellOps.emplace_back();
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
      if (out.overlapGroup < 0 || row.empty() || row.back().overlapGroup != out.overlapGroup)
        cells.push_back(&op);
      row.push_back(out);
    }
  }
  std::string text = torchsched::formatTable(rows);
  if (failed(checkAsImported(pipeline, text, cellOps)))
    return failure();
  os << text;
  return success();
}

void registerTorchScheduleExport() {
  registerFromMLIR("to-torch-schedule",
                   "write the compute order as a torch.distributed.pipelining action table "
                   "(compute-only CSV)",
                   exportTorchSchedule);
}

} // namespace pipefill
