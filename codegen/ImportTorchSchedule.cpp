//===- ImportTorchSchedule.cpp - torch action table -> pipefill dialect ---===//
//
// `pipefill-translate --import-torch-schedule TABLE.csv --job JOB.pbtxt`
// reads the per-rank action table that torch.distributed.pipelining's
// `_PipelineScheduleRuntime._load_csv` loads, checks it (algo/torch), takes
// the stage costs, hardware, tail, planner options and fill jobs from the
// JobSpec, and prints a pipeline whose stages (one per rank) already hold
// their instructions, so pipefill-expand-schedule leaves it as it is and the
// rest of --pipefill-compile simulates it, finds its bubbles and plans fill.
//
// Every instruction is located at its table cell; problems with the table
// are reported at file:line:col of the cell, problems with the JobSpec at
// the JobSpec's file:line:col. The table's shape is checked first, its rank
// count compared with the job's, and only then its order (the costly part).
//
//===----------------------------------------------------------------------===//
#include "algo/torch/TorchSchedule.h"
#include "codegen/Translate.h"
#include "dialect/PipefillOps.h"
#include "passes/ScheduleIR.h"
#include "support/Files.h"
#include "support/ProtoText.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;

namespace pipefill {
namespace {

llvm::cl::opt<std::string> &jobOption() {
  static llvm::cl::opt<std::string> job(
      "job",
      llvm::cl::desc("JobSpec (text format) with the stage costs, hardware and "
                     "fill jobs for --import-torch-schedule"),
      llvm::cl::value_desc("file"), llvm::cl::init(""));
  return job;
}

} // namespace

OwningOpRef<ModuleOp> importTorchSchedule(llvm::SourceMgr &sourceMgr,
                                          MLIRContext *context,
                                          StringRef jobFile) {
  context->loadDialect<PipefillDialect>();
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  StringRef file = buffer->getBufferIdentifier();
  if (file == "<stdin>")
    file = "-";
  auto at = [&](torchsched::Loc loc) {
    return FileLineColLoc::get(context, file, std::max(loc.line, 1),
                               std::max(loc.col, 1));
  };

  torchsched::Table table;
  torchsched::Imported imported;
  torchsched::Diag diag;
  if (!torchsched::parseTable(buffer->getBuffer(), table, diag) ||
      !torchsched::checkTableShape(table, imported, diag)) {
    emitError(at(diag.loc)) << diag.message;
    return nullptr;
  }

  if (jobFile.empty()) {
    emitError(at({1, 1}))
        << "--import-torch-schedule needs --job=JOB.pbtxt for the stage "
           "costs, hardware and fill jobs";
    return nullptr;
  }
  std::string jobText;
  const ReadStatus read = readBoundedFile(jobFile.str(), kMaxInputBytes, jobText);
  if (!read) {
    emitError(at({1, 1})) << "cannot read the job '" << jobFile << "': " << read.message;
    return nullptr;
  }
  llvm::SourceMgr jobSources;
  jobSources.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(jobText, jobFile),
                                llvm::SMLoc());
  OwningOpRef<ModuleOp> module = importJobSpec(jobSources, context);
  if (!module)
    return nullptr;
  PipelineOp pipeline;
  for (PipelineOp p : module->getOps<PipelineOp>())
    pipeline = p;
  if (!pipeline) {
    emitError(at({1, 1})) << "the job '" << jobFile << "' has no pipeline";
    return nullptr;
  }

  // The table decides the shape; the job must agree with it.
  std::string rows = std::to_string(imported.ranks);
  if ((int64_t)pipeline.getNumStages() != imported.ranks) {
    emitError(pipeline.getLoc())
        << "pipeline.stages = " << pipeline.getNumStages() << " but the action "
        << "table '" << file << "' has " << rows << " rank rows";
    return nullptr;
  }
  // Only now the order: its run to completion costs ranks x actions, too
  // much to spend on a table of more ranks than the job's. A table that runs
  // another number of micro-batches is usually off by one somewhere: its
  // order says where, before the job says how many.
  if (!torchsched::checkTableOrder(table, imported, diag)) {
    emitError(at(diag.loc)) << diag.message;
    return nullptr;
  }
  if ((int64_t)pipeline.getNumMicrobatches() != imported.microbatches) {
    emitError(pipeline.getLoc())
        << "pipeline.microbatches = " << pipeline.getNumMicrobatches()
        << " but the action table '" << file << "' runs "
        << imported.microbatches << " micro-batches";
    return nullptr;
  }
  int64_t jobChunks = pipeline.getVirtualStages();
  if (jobChunks != 1 && jobChunks != imported.chunksPerRank) {
    emitError(pipeline.getLoc())
        << "pipeline.virtual_stages = " << jobChunks << " but the action table '"
        << file << "' places " << imported.chunksPerRank
        << " stage(s) on every rank";
    return nullptr;
  }
  pipeline.setSchedule(ScheduleKind::Imported);
  pipeline.setVirtualStages(imported.chunksPerRank);

  sched::PipelineSpec spec = specFromIR(pipeline);
  if (imported.splitBackward) {
    bool anyWeight = false;
    for (const sched::StageCost &c : spec.costs)
      anyWeight |= c.backwardWeightUs > 0;
    if (!anyWeight)
      emitWarning(pipeline.getLoc())
          << "the action table splits backwards into I and W, but no stage "
             "has backward_weight_us: every W is planned at 0 us";
  }
  sched::Schedule schedule;
  torchsched::toPipefill(imported, spec, schedule);

  Builder b(context);
  OpBuilder builder(context);
  InstrBuilder instrs(context);
  StringAttr overlapId = b.getStringAttr("torch_overlap");
  size_t r = 0;
  for (StageOp stage : pipeline.getStages()) {
    stage->setAttr("torch_stages",
                   b.getDenseI64ArrayAttr(llvm::SmallVector<int64_t>(
                       imported.stagesOfRank[r].begin(),
                       imported.stagesOfRank[r].end())));
    if (stage.getBody().empty())
      builder.createBlock(&stage.getBody());
    builder.setInsertionPointToEnd(&stage.getBody().front());
    // Walk the instructions beside the compute order they came from: each
    // compute takes its cell's location, and the transfers around it too.
    const auto &order = imported.order[r];
    size_t next = 0;
    Location loc = at({table.rowLine[r], 1});
    for (const sched::Instr &in : schedule[r]) {
      bool compute = in.kind == sched::InstrKind::Forward ||
                     sched::isBackwardFamily(in.kind);
      // A recv goes right before its compute: take that compute's cell.
      if (in.kind == sched::InstrKind::Recv && next < order.size())
        loc = at(order[next].loc);
      if (compute && next < order.size())
        loc = at(order[next].loc);
      Operation *op = instrs.build(builder, loc, in);
      if (compute && next < order.size()) {
        if (order[next].overlapGroup >= 0)
          op->setAttr(overlapId, b.getI64IntegerAttr(order[next].overlapGroup));
        ++next;
      }
    }
    ++r;
  }
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

void registerTorchScheduleImport() {
  jobOption();
  static TranslateToMLIRRegistration importTorch(
      "import-torch-schedule",
      "import a torch.distributed.pipelining action table (CSV, with --job) "
      "into the pipefill dialect",
      [](llvm::SourceMgr &sourceMgr, MLIRContext *context) -> OwningOpRef<Operation *> {
        OwningOpRef<ModuleOp> module =
            importTorchSchedule(sourceMgr, context, jobOption().getValue());
        if (!module)
          return nullptr;
        return OwningOpRef<Operation *>(module.release());
      });
}

} // namespace pipefill
