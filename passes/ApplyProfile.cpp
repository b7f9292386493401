//===- ApplyProfile.cpp - pipefill-apply-profile --------------------------===//
#include "passes/Passes.h"
#include "proto/profile.pb.h"
#include "support/Limits.h"
#include "support/ProtoText.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/MemoryBuffer.h"

#include <google/protobuf/text_format.h>

#include <map>
#include <set>
#include <tuple>

using namespace mlir;

namespace pipefill {
#define GEN_PASS_DEF_APPLYPROFILE
#include "passes/Passes.h.inc"

namespace {
using Kind = rt::ComputeOp::Kind;

/// The profile's name for an instruction's measured time; none for transfers.
std::optional<Kind> measuredKind(InstrKind kind) {
  switch (kind) {
  case InstrKind::Forward: return rt::ComputeOp::FORWARD;
  case InstrKind::Backward: return rt::ComputeOp::BACKWARD;
  case InstrKind::BackwardInput: return rt::ComputeOp::BACKWARD_INPUT;
  case InstrKind::BackwardWeight: return rt::ComputeOp::BACKWARD_WEIGHT;
  case InstrKind::AllReduceGrads: return rt::ComputeOp::ALLREDUCE;
  case InstrKind::OptimizerStep: return rt::ComputeOp::OPTIMIZER;
  case InstrKind::Send:
  case InstrKind::Recv: break;
  }
  return std::nullopt;
}

struct ApplyProfilePass : public impl::ApplyProfileBase<ApplyProfilePass> {
  using ApplyProfileBase::ApplyProfileBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (profile.empty()) {
      module.emitError() << "pipefill-apply-profile needs profile=FILE";
      return signalPassFailure();
    }
    auto buffer = llvm::MemoryBuffer::getFile(profile);
    if (!buffer) {
      module.emitError() << "cannot read profile '" << profile
                         << "': " << buffer.getError().message();
      return signalPassFailure();
    }
    rt::MeasuredProfile measured;
    std::string data = (*buffer)->getBuffer().str();
    bool text = StringRef(profile).ends_with(".pbtxt") ||
                StringRef(profile).ends_with(".txtpb") ||
                StringRef(profile).ends_with(".textproto");
    // The shared reader (support/ProtoText.h) and limits: errors carry the profile's own
    // file:line:col.
    Diagnostics diags;
    google::protobuf::TextFormat::ParseInfoTree tree;
    bool ok = text ? parseTextProto(profile, data, measured, &tree, diags)
                   : parseBinaryProto(profile, data, measured, diags);
    ok = ok && checkLimits(measured, text ? &tree : nullptr, profile, diags);
    for (const Diagnostic &d : diags.all())
      emitError(FileLineColLoc::get(&getContext(), d.file, d.line > 0 ? d.line : 1,
                                    d.column > 0 ? d.column : 1))
          << d.message;
    if (!ok)
      return signalPassFailure();
    // Everything is checked before anything is changed: the profile's program first (a profile
    // of another program is named as such, whatever else differs), then its shape and entries.
    for (PipelineOp pipeline : module.getOps<PipelineOp>())
      if (failed(checkIdentity(pipeline, measured, text ? &tree : nullptr)) ||
          failed(apply(pipeline, measured, /*dryRun=*/true)))
        return signalPassFailure();
    for (PipelineOp pipeline : module.getOps<PipelineOp>())
      if (failed(apply(pipeline, measured, /*dryRun=*/false)))
        return signalPassFailure();
    applyFillCosts(module, measured);
  }

  // Fill-job layer costs measured by the runtime (only entries marked measured): the fill
  // planner then sizes chunks for what the layers really cost where they ran. Where the profile
  // has it, the cost the runtime's bubble bound admits chunks at (their p90) is used rather than
  // the mean: a chunk planned at its mean cost does not fit its bubble half the time.
  void applyFillCosts(ModuleOp module, const rt::MeasuredProfile &measured) {
    for (const rt::MeasuredFillLayer &fl : measured.fill_layers()) {
      if (!fl.measured() || !(fl.measured_us_per_sample() > 0))
        continue;
      const double forward =
          fl.p90_us_per_sample() > 0 ? fl.p90_us_per_sample() : fl.measured_us_per_sample();
      const double backward = fl.p90_backward_us_per_sample() > 0
                                  ? fl.p90_backward_us_per_sample()
                                  : fl.measured_backward_us_per_sample();
      module.walk([&](FillJobOp job) {
        if (job.getSymName() != fl.job())
          return;
        int64_t index = 0;
        for (LayerOp layer : job.getLayers())
          if (index++ == (int64_t)fl.layer()) {
            layer.setForwardUsPerSample(llvm::APFloat(forward));
            if (backward > 0)
              layer.setBackwardUsPerSample(llvm::APFloat(backward));
          }
      });
    }
  }

  /// A profile of another program is refused (at the profile's `program` line).
  LogicalResult checkIdentity(PipelineOp pipeline, const rt::MeasuredProfile &measured,
                              const google::protobuf::TextFormat::ParseInfoTree *tree) {
    // The runtime names the program after the lowered pfstream program, `<pipeline>_stream`.
    std::string name = pipeline.getSymName().str();
    if (measured.program().empty() || measured.program() == name ||
        measured.program() == name + "_stream")
      return success();
    SourcePos p = fieldPos(measured, tree, "program");
    return emitError(FileLineColLoc::get(&getContext(), profile, p.known() ? p.line : 1,
                                         p.known() ? p.column : 1))
           << "the profile was measured for program '" << measured.program() << "', not '"
           << name << "'";
  }

  /// Replaces the instruction times by the measured ones; with dryRun, only checks that it can.
  LogicalResult apply(PipelineOp pipeline, const rt::MeasuredProfile &measured, bool dryRun) {
    if (!pipeline.isExpanded())
      return pipeline.emitError()
             << "has no instructions to apply a profile to; run "
                "pipefill-expand-schedule first";
    if (measured.stages_size() != (int)pipeline.getNumStages())
      return pipeline.emitError()
             << "has " << pipeline.getNumStages() << " stages but profile '"
             << profile << "' measured " << measured.stages_size();
    if (!dryRun)
      pipeline.removeIterationUsAttr();
    int s = 0;
    for (StageOp stage : pipeline.getStages()) {
      const rt::MeasuredStage &ms = measured.stages(s++);
      std::map<std::tuple<int, int64_t, int64_t>, double> byKey;
      std::set<std::tuple<int, int64_t, int64_t>> unmeasured;
      for (const rt::MeasuredInstruction &i : ms.instructions()) {
        // Only numbers read from a clock count; modelled/emulated entries keep the plan's cost.
        std::tuple<int, int64_t, int64_t> key{(int)i.kind(), (int64_t)i.microbatch(),
                                              (int64_t)i.chunk()};
        if (i.measured())
          byKey[key] = i.measured_us();
        else
          unmeasured.insert(key);
      }
      if (!dryRun) {
        if (ms.forward_us() > 0)
          stage.setForwardUs(llvm::APFloat(ms.forward_us() * pipeline.getVirtualStages()));
        if (ms.backward_us() > 0)
          stage.setBackwardUs(llvm::APFloat(ms.backward_us() * pipeline.getVirtualStages()));
        stage.removeBusyUsAttr();
        stage.removeIdleUsAttr();
        stage.removePeakBytesAttr();
      }
      for (Operation &op : stage.getBody().front()) {
        auto instr = dyn_cast<InstructionOpInterface>(op);
        if (!instr)
          continue;
        if (!dryRun)
          instr.clearTiming();
        std::optional<Kind> kind = measuredKind(instr.getInstrKind());
        if (!kind)
          continue; // transfers take their time from the interconnect model
        int64_t mb = std::max<int64_t>(0, instr.getMicrobatchIndex());
        auto it = byKey.find({(int)*kind, mb, instr.getChunkIndex()});
        if (it == byKey.end() &&
            unmeasured.count({(int)*kind, mb, instr.getChunkIndex()}))
          continue; // only modelled in the profile: keep the compiler's cost
        if (it == byKey.end())
          return op.emitOpError() << "has no measurement in profile '" << profile
                                  << "' (stage " << stage.getIndex() << ")";
        if (!dryRun)
          instr.setDeviceUs(it->second);
      }
    }
    return success();
  }
};
} // namespace
} // namespace pipefill
