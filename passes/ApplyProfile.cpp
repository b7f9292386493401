//===- ApplyProfile.cpp - pipefill-apply-profile --------------------------===//
#include "passes/Passes.h"
#include "proto/profile.pb.h"
#include "support/Format.h"
#include "support/Files.h"
#include "support/Limits.h"
#include "support/ProtoText.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/MemoryBuffer.h"

#include <google/protobuf/text_format.h>

#include <cerrno>
#include <cstdio>
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

/// The iteration's tail: the gradient all-reduce and the optimizer step.
bool isTailKind(Kind kind) {
  return kind == rt::ComputeOp::ALLREDUCE || kind == rt::ComputeOp::OPTIMIZER;
}

struct ApplyProfilePass : public impl::ApplyProfileBase<ApplyProfilePass> {
  using ApplyProfileBase::ApplyProfileBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (profile.empty()) {
      module.emitError() << "pipefill-apply-profile needs profile=FILE";
      return signalPassFailure();
    }
    std::string data;
    const ReadStatus read = readBoundedFile(profile, kMaxInputBytes, data);
    if (!read) {
      // At the profile itself, as its parse errors are (the module's location is the JobSpec's
      // first line, which said nothing about a missing profile).
      // An input over the limit at the module: a diagnostic at the file would read it whole to
      // show its first line.
      emitError(read.error == EFBIG
                    ? module.getLoc()
                    : Location(FileLineColLoc::get(module.getContext(), profile, 1, 1)))
          << "cannot read profile '" << profile << "': " << read.message;
      return signalPassFailure();
    }
    rt::MeasuredProfile measured;
    // Text by the name the runtime wrote it under, else by its bytes (support/ProtoText.h).
    bool text = readsAsTextProto(profile, data);
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
          failed(apply(pipeline, measured, text ? &tree : nullptr, /*dryRun=*/true)))
        return signalPassFailure();
    for (PipelineOp pipeline : module.getOps<PipelineOp>())
      if (failed(apply(pipeline, measured, text ? &tree : nullptr, /*dryRun=*/false)))
        return signalPassFailure();
    applyFillCosts(module, measured);
    applyChunkGap(module, measured);
  }

  // The measured gap between consecutive fill chunks of a bubble becomes the pipelines' fixed
  // cost per chunk (context_switch_us): the planner then packs a bubble with what its chunks
  // really cost together, not with the JobSpec's guess (the runtime's own switch on an H200 was
  // about 50 us against the 5 to 20 us JobSpecs say). The mean: a bubble pays the sum of its
  // chunks' gaps.
  void applyChunkGap(ModuleOp module, const rt::MeasuredProfile &measured) {
    if (!measured.has_fill_chunk_gap() || !measured.fill_chunk_gap().measured() ||
        measured.fill_chunk_gap().samples() == 0)
      return;
    const double gap = measured.fill_chunk_gap().mean_us();
    for (PipelineOp pipeline : module.getOps<PipelineOp>())
      pipeline.setContextSwitchUs(llvm::APFloat(gap));
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

  using Tree = google::protobuf::TextFormat::ParseInfoTree;
  /// An instruction's identity in a profile: (kind, micro-batch, chunk).
  using Key = std::tuple<int, int64_t, int64_t>;

  /// An error at a position in the profile (line 1 of a binary one).
  InFlightDiagnostic profileError(SourcePos p) {
    return emitError(FileLineColLoc::get(&getContext(), profile, p.known() ? p.line : 1,
                                         p.known() ? p.column : 1));
  }

  /// Which entry of the profile's `stages` measured each stage of the
  /// pipeline: the entry whose `stage` field names it. A compiled program
  /// runs stage s on device s, so a `device` given must agree. Only a
  /// profile whose entries name no stage and no device at all (every field
  /// 0 and, in text, not written: hand-written profiles) is read in list
  /// order. Each stage must be measured once; `measured` has as many entries
  /// as the pipeline has stages.
  FailureOr<SmallVector<int>> stageEntries(PipelineOp pipeline,
                                           const rt::MeasuredProfile &measured,
                                           const Tree *tree) {
    const int numStages = measured.stages_size();
    SmallVector<int> entryOf(numStages, -1);
    bool named = false;
    for (int e = 0; e < numStages; ++e) {
      const rt::MeasuredStage &ms = measured.stages(e);
      const Tree *stageTree = nestedTree(measured, tree, "stages", e);
      named = named || ms.stage() != 0 || ms.device() != 0 ||
              fieldWritten(ms, stageTree, "stage") || fieldWritten(ms, stageTree, "device");
    }
    for (int e = 0; e < numStages; ++e) {
      if (!named) {
        entryOf[e] = e;
        continue;
      }
      const rt::MeasuredStage &ms = measured.stages(e);
      const Tree *stageTree = nestedTree(measured, tree, "stages", e);
      SourcePos at = fieldPos(measured, tree, "stages", e);
      const int64_t stage = ms.stage();
      if (stage >= numStages)
        return profileError(fieldPos(ms, stageTree, "stage", -1, at))
               << "stages[" << e << "] measured stage " << stage << ", but pipeline '"
               << pipeline.getSymName() << "' has " << numStages << " stages";
      if ((ms.device() != 0 || fieldWritten(ms, stageTree, "device")) && ms.device() != stage)
        return profileError(fieldPos(ms, stageTree, "device", -1, at))
               << "stages[" << e << "] measured stage " << stage << " on device " << ms.device()
               << ", but the compiled program runs stage " << stage << " on device " << stage;
      if (int first = entryOf[stage]; first >= 0) {
        SourcePos firstAt = fieldPos(measured, tree, "stages", first);
        auto diag = profileError(fieldPos(ms, stageTree, "stage", -1, at))
                    << "stages[" << e << "] measured stage " << stage << " again (first: stages["
                    << first << "]";
        if (firstAt.known())
          diag << " at line " << firstAt.line;
        return diag << ")";
      }
      entryOf[stage] = e;
    }
    return entryOf;
  }

  /// Replaces the instruction times by the measured ones; with dryRun, only checks that it can.
  /// The profile must match the pipeline: every instruction with a compute kind measured (or
  /// listed as modelled) once, and no entry for an instruction the stage does not have.
  LogicalResult apply(PipelineOp pipeline, const rt::MeasuredProfile &measured,
                      const Tree *tree, bool dryRun) {
    if (!pipeline.isExpanded())
      return pipeline.emitError()
             << "has no instructions to apply a profile to; run "
                "pipefill-expand-schedule first";
    if (measured.stages_size() != (int)pipeline.getNumStages())
      return pipeline.emitError()
             << "has " << pipeline.getNumStages() << " stages but profile '"
             << profile << "' measured " << measured.stages_size();
    FailureOr<SmallVector<int>> entryOf = stageEntries(pipeline, measured, tree);
    if (failed(entryOf))
      return failure();
    if (!dryRun)
      pipeline.removeIterationUsAttr();
    std::set<int> tailKindsTimed;
    for (const rt::MeasuredStage &ms : measured.stages())
      for (const rt::MeasuredInstruction &i : ms.instructions())
        if (isTailKind(i.kind()))
          tailKindsTimed.insert(int(i.kind()));
    for (StageOp stage : pipeline.getStages()) {
      const int e = (*entryOf)[stage.getIndex()];
      const rt::MeasuredStage &ms = measured.stages(e);
      const Tree *stageTree = nestedTree(measured, tree, "stages", e);
      auto instrError = [&](int j) {
        return profileError(fieldPos(ms, stageTree, "instructions", j,
                                     fieldPos(measured, tree, "stages", e)))
               << "stages[" << e << "].instructions[" << j << "] ";
      };
      auto describe = [](const rt::MeasuredInstruction &i) {
        return rt::ComputeOp::Kind_Name(i.kind()) + " of micro-batch " +
               std::to_string(i.microbatch()) + " chunk " + std::to_string(i.chunk());
      };
      // Each instruction's entry; a second entry for one would silently win.
      std::map<Key, int> entryOfKey;
      for (int j = 0; j < ms.instructions_size(); ++j) {
        const rt::MeasuredInstruction &i = ms.instructions(j);
        Key key{(int)i.kind(), (int64_t)i.microbatch(), (int64_t)i.chunk()};
        auto [it, inserted] = entryOfKey.emplace(key, j);
        if (!inserted) {
          SourcePos firstAt = fieldPos(ms, stageTree, "instructions", it->second);
          auto diag = instrError(j) << "measured the " << describe(i) << " of stage "
                                    << stage.getIndex() << " again (first: instructions["
                                    << it->second << "]";
          if (firstAt.known())
            diag << " at line " << firstAt.line;
          return diag << ")";
        }
      }
      // The stage's weight-gradient share must stay within its backward (the stage verifier's
      // rule): a measured backward below it is the profile's error, at the profile's line.
      const double backward = ms.backward_us() * pipeline.getVirtualStages();
      const double weight = stage.getBackwardWeightUs().convertToDouble();
      if (ms.backward_us() > 0 && backward < weight)
        return profileError(fieldPos(ms, stageTree, "backward_us", -1,
                                     fieldPos(measured, tree, "stages", e)))
               << "stages[" << e << "].backward_us " << fmtNum(ms.backward_us()) << " puts stage "
               << stage.getIndex() << "'s backward at " << fmtNum(backward)
               << " us, below its backward_weight_us (" << fmtNum(weight)
               << " us), which is part of the backward";
      if (!dryRun) {
        if (ms.forward_us() > 0)
          stage.setForwardUs(llvm::APFloat(ms.forward_us() * pipeline.getVirtualStages()));
        if (ms.backward_us() > 0)
          stage.setBackwardUs(llvm::APFloat(ms.backward_us() * pipeline.getVirtualStages()));
        stage.removeBusyUsAttr();
        stage.removeIdleUsAttr();
        stage.removePeakBytesAttr();
      }
      std::vector<bool> used(ms.instructions_size(), false);
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
        auto it = entryOfKey.find({(int)*kind, mb, instr.getChunkIndex()});
        // A profile that does not time the iteration's tail (a torch trace: the all-reduce and
        // the optimizer step are not pipelining actions) has no entry of that kind on any stage:
        // the plan's cost stays. One that times some of them must time them all.
        if (it == entryOfKey.end() && isTailKind(*kind) && !tailKindsTimed.count(int(*kind)))
          continue;
        if (it == entryOfKey.end())
          return op.emitOpError() << "has no measurement in profile '" << profile
                                  << "' (stage " << stage.getIndex() << ")";
        used[it->second] = true;
        // Only numbers read from a clock count; modelled/emulated entries keep the plan's cost.
        const rt::MeasuredInstruction &entry = ms.instructions(it->second);
        if (entry.measured() && !(entry.measured_us() > 0)) {
          char value[32];
          std::snprintf(value, sizeof value, "%g", entry.measured_us());
          return instrError(it->second)
                 << "is marked measured but has no measured time (measured_us " << value
                 << "): a compute takes time; a profile of a run that timed nothing marks "
                    "nothing measured";
        }
        if (entry.measured() && !dryRun)
          instr.setDeviceUs(entry.measured_us());
      }
      // An entry no instruction matched measured something this pipeline does not run.
      for (int j = 0; j < ms.instructions_size(); ++j)
        if (!used[j])
          return instrError(j) << "measured the " << describe(ms.instructions(j))
                               << ", which stage " << stage.getIndex() << " of pipeline '"
                               << pipeline.getSymName() << "' does not run";
    }
    return success();
  }
};
} // namespace
} // namespace pipefill
