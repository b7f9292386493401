//===- ImportJob.cpp - JobSpec text format -> pipefill dialect ------------===//
//
// The JobSpec front end (algo/jobspec, plain C++) parses the text with field
// positions and checks every rule and range; its diagnostics become MLIR
// diagnostics at the same file:line:col, so pipefill-sim and the importer
// print the same message for the same bad JobSpec. This file only builds IR
// from a JobSpec the front end accepted.
//
//===----------------------------------------------------------------------===//
#include "codegen/Translate.h"
#include "algo/jobspec/JobSpecReader.h"
#include "dialect/PipefillOps.h"
#include "proto/pipefill.pb.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;
namespace pb = google::protobuf;

namespace pipefill {
namespace {

/// Emits the front end's diagnostics as MLIR diagnostics.
void emitDiagnostics(MLIRContext *ctx, const Diagnostics &diags) {
  for (const Diagnostic &d : diags.all()) {
    Location loc = FileLineColLoc::get(ctx, d.file, d.line > 0 ? d.line : 1,
                                       d.column > 0 ? d.column : 1);
    if (d.severity == Diagnostic::Severity::Error)
      emitError(loc) << d.message;
    else
      emitWarning(loc) << d.message;
  }
}

/// Builds the IR of a checked JobSpec.
class Importer {
public:
  Importer(MLIRContext *ctx, const jobspec::JobSource &job)
      : ctx(ctx), job(job), builder(ctx) {}
  OwningOpRef<ModuleOp> run();

private:
  Location loc(SourcePos p, std::optional<Location> fallback = std::nullopt) {
    if (p.known())
      return FileLineColLoc::get(ctx, job.file, p.line, p.column);
    return fallback ? *fallback : FileLineColLoc::get(ctx, job.file, 1, 1);
  }
  MLIRContext *ctx;
  const jobspec::JobSource &job;
  OpBuilder builder;
};

OwningOpRef<ModuleOp> Importer::run() {
  const JobSpec &spec = job.spec;
  Location top = FileLineColLoc::get(ctx, job.file, 1, 1);
  const Pipeline &pipe = spec.pipeline();
  Location pipeLoc = loc(job.top("pipeline"));
  int64_t numStages = pipe.stages();
  int64_t virtualStages = pipe.has_virtual_stages() ? pipe.virtual_stages() : 1;
  const Hardware &hw = spec.hardware();
  const Tail &tail = spec.tail();
  const Planner &planner = spec.planner();

  // --- build the IR --------------------------------------------------------
  OwningOpRef<ModuleOp> module = ModuleOp::create(top);
  builder.setInsertionPointToEnd(module->getBody());

  ScheduleKind kind;
  switch (pipe.schedule()) {
  case GPIPE: kind = ScheduleKind::GPipe; break;
  case INTERLEAVED_1F1B: kind = ScheduleKind::Interleaved1F1B; break;
  case ZB_H1: kind = ScheduleKind::ZBH1; break;
  default: kind = ScheduleKind::OneFOneB; break;
  }
  std::string name = spec.name().empty() ? "job" : spec.name();
  auto pipeline = builder.create<PipelineOp>(pipeLoc, TypeRange{}, ValueRange{}, ArrayRef<NamedAttribute>{});
  pipeline.setSymName(name);
  pipeline.setSchedule(kind);
  pipeline.setNumStages(numStages);
  pipeline.setNumMicrobatches(pipe.microbatches());
  pipeline.setVirtualStages(virtualStages);
  pipeline.setDeviceMemoryBytes(hw.gpu_memory_bytes());
  pipeline.setP2pLatencyUs(llvm::APFloat(hw.p2p_latency_us()));
  pipeline.setP2pBandwidthGbps(llvm::APFloat(hw.p2p_bandwidth_gbps()));
  if (hw.has_pcie_bandwidth_gbps())
    pipeline.setPcieBandwidthGbps(llvm::APFloat(hw.pcie_bandwidth_gbps()));
  if (hw.has_hbm_bandwidth_gbps())
    pipeline.setHbmBandwidthGbps(llvm::APFloat(hw.hbm_bandwidth_gbps()));
  if (hw.has_kernel_launch_us())
    pipeline.setKernelLaunchUs(llvm::APFloat(hw.kernel_launch_us()));
  if (spec.has_tail()) {
    pipeline.setTail(true);
    pipeline.setDataParallel(tail.has_data_parallel() ? tail.data_parallel() : 1);
    pipeline.setGradBytes(tail.grad_bytes());
    pipeline.setAllreduceBandwidthGbps(llvm::APFloat(tail.allreduce_bandwidth_gbps()));
    pipeline.setAllreduceLatencyUs(llvm::APFloat(tail.allreduce_latency_us()));
    pipeline.setOptimizerUs(llvm::APFloat(tail.optimizer_us()));
  }
  if (planner.has_min_bubble_us())
    pipeline.setMinBubbleUs(llvm::APFloat(planner.min_bubble_us()));
  if (planner.has_reserve_bytes())
    pipeline.setReserveBytes(planner.reserve_bytes());
  if (planner.has_context_switch_us())
    pipeline.setContextSwitchUs(llvm::APFloat(planner.context_switch_us()));
  if (planner.has_safety_margin())
    pipeline.setSafetyMargin(llvm::APFloat(planner.safety_margin()));
  if (planner.batch_sizes_size() > 0) {
    SmallVector<int64_t> sizes(planner.batch_sizes().begin(),
                               planner.batch_sizes().end());
    pipeline.setBatchSizes(sizes);
  }

  Block *pipeBody = builder.createBlock(&pipeline.getBody());
  for (int64_t s = 0; s < numStages; ++s) {
    int entry = spec.stage_size() == 1 ? 0 : s;
    const StageCost &sc = spec.stage(entry);
    builder.setInsertionPointToEnd(pipeBody);
    auto stage = builder.create<StageOp>(loc(job.top("stage", entry)), TypeRange{}, ValueRange{}, ArrayRef<NamedAttribute>{});
    stage.setIndex(s);
    stage.setForwardUs(llvm::APFloat(sc.forward_us()));
    stage.setBackwardUs(llvm::APFloat(sc.backward_us()));
    stage.setBackwardWeightUs(llvm::APFloat(sc.backward_weight_us()));
    stage.setActivationBytes(sc.activation_bytes());
    stage.setStashBytes(sc.stash_bytes());
    stage.setStaticBytes(sc.static_bytes());
    builder.createBlock(&stage.getBody());
  }

  for (int j = 0; j < spec.fill_job_size(); ++j) {
    const FillJob &fj = spec.fill_job(j);
    const auto *jobTree = job.sub("fill_job", j);
    builder.setInsertionPointToEnd(module->getBody());
    auto jobOp = builder.create<FillJobOp>(loc(job.top("fill_job", j)), TypeRange{}, ValueRange{}, ArrayRef<NamedAttribute>{});
    jobOp.setSymName(fj.name());
    jobOp.setKind(fj.kind() == TRAINING ? JobKind::Training : JobKind::Inference);
    jobOp.setSamples(fj.samples());
    jobOp.setArrivalUs(llvm::APFloat(fj.arrival_us()));
    if (fj.has_priority())
      jobOp.setPriority(llvm::APFloat(fj.priority()));
    builder.createBlock(&jobOp.getBody());
    for (int l = 0; l < fj.layer_size(); ++l) {
      const FillLayer &layer = fj.layer(l);
      int repeat = layer.has_repeat() ? layer.repeat() : 1;
      for (int r = 0; r < repeat; ++r) {
        std::string lname = layer.name().empty() ? "layer" + std::to_string(l)
                                                 : layer.name();
        if (repeat > 1)
          lname += "." + std::to_string(r);
        auto layerOp = builder.create<LayerOp>(loc(fieldPos(fj, jobTree, "layer", l)), TypeRange{}, ValueRange{}, ArrayRef<NamedAttribute>{});
        layerOp.setName(lname);
        layerOp.setForwardUsPerSample(llvm::APFloat(layer.forward_us_per_sample()));
        layerOp.setWeightBytes(layer.weight_bytes());
        layerOp.setActivationBytesPerSample(layer.activation_bytes_per_sample());
        layerOp.setBackwardUsPerSample(llvm::APFloat(layer.backward_us_per_sample()));
        layerOp.setGradBytes(layer.grad_bytes());
        layerOp.setOptimizerBytes(layer.optimizer_bytes());
        if (layer.has_workload()) {
          const Workload &w = layer.workload();
          layerOp.setWorkload(Workload::Kind_Name(w.kind()));
          if (w.hidden() > 0) layerOp.setHidden(w.hidden());
          if (w.heads() > 0) layerOp.setHeads(w.heads());
          if (w.seq() > 0) layerOp.setSeq(w.seq());
          if (w.ffn() > 0) layerOp.setFfn(w.ffn());
        }
      }
    }
  }

  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace

OwningOpRef<ModuleOp> importJobSpec(llvm::SourceMgr &sourceMgr,
                                    MLIRContext *context) {
  context->loadDialect<PipefillDialect>();
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  std::string file = buffer->getBufferIdentifier().str();
  if (file == "<stdin>")
    file = "-";
  jobspec::JobSource job;
  Diagnostics diags;
  bool ok = jobspec::readJobSpec(file, buffer->getBuffer().str(), job, diags) &&
            jobspec::checkCompileJob(job, diags);
  emitDiagnostics(context, diags);
  if (!ok)
    return nullptr;
  return Importer(context, job).run();
}

} // namespace pipefill
