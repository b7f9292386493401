//===- ImportJob.cpp - JobSpec text format -> pipefill dialect ------------===//
//
// The JobSpec is parsed with protobuf's text-format parser. Its syntax errors
// and our semantic checks both become MLIR diagnostics located at the
// file:line:col of the offending text, so a user sees the same kind of message
// for a typo and for an impossible value.
//
//===----------------------------------------------------------------------===//
#include "codegen/Translate.h"
#include "algo/cost/ModelProto.h"
#include "dialect/PipefillOps.h"
#include "proto/pipefill.pb.h"
#include "support/Format.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cmath>

using namespace mlir;
namespace pb = google::protobuf;

namespace pipefill {
namespace {

/// Routes protobuf's parse errors to MLIR diagnostics.
class DiagnosticCollector : public pb::io::ErrorCollector {
public:
  DiagnosticCollector(MLIRContext *ctx, StringRef file, StringRef text)
      : ctx(ctx), file(file), text(text) {}
  void AddError(int line, pb::io::ColumnNumber column,
                const std::string &message) override {
    pointAtValue(message, line, column);
    emitError(FileLineColLoc::get(ctx, file, line + 1, column + 1)) << message;
    hadError = true;
  }
  void AddWarning(int line, pb::io::ColumnNumber column,
                  const std::string &message) override {
    emitWarning(FileLineColLoc::get(ctx, file, line + 1, column + 1))
        << message;
  }
  bool hadError = false;

private:
  /// protobuf reports a bad value at the token after it; move the location
  /// back to the value itself when the message quotes it.
  void pointAtValue(StringRef message, int &line, int &column) {
    auto quoted = message.split('"').second.split('"').first;
    if (quoted.empty() || !message.starts_with("Unknown enumeration value"))
      return;
    size_t offset = 0;
    for (int l = 0; l < line && offset != StringRef::npos; ++l) {
      offset = text.find('\n', offset);
      if (offset != StringRef::npos)
        ++offset;
    }
    if (offset == StringRef::npos)
      return;
    size_t at = text.substr(0, offset + column).rfind(quoted);
    if (at == StringRef::npos)
      return;
    StringRef before = text.substr(0, at);
    line = before.count('\n');
    size_t lineStart = before.rfind('\n');
    column = lineStart == StringRef::npos ? at : at - lineStart - 1;
  }

  MLIRContext *ctx;
  std::string file;
  StringRef text;
};

/// Builds the IR and runs the semantic checks, locating each problem with the
/// parse-info tree.
class Importer {
public:
  Importer(MLIRContext *ctx, StringRef file, const pb::TextFormat::ParseInfoTree &tree)
      : ctx(ctx), file(file.str()), rootTree(tree), builder(ctx) {}

  OwningOpRef<ModuleOp> run(JobSpec &spec);
  bool expandModel(JobSpec &spec);

private:
  /// Location of field `name` (element `index` if repeated) in message
  /// `msg`, whose parse-info tree is `tree`; falls back to `fallback`.
  Location loc(const pb::Message &msg, const pb::TextFormat::ParseInfoTree *tree,
               StringRef name, int index = -1,
               std::optional<Location> fallback = std::nullopt) {
    if (tree) {
      const pb::FieldDescriptor *field =
          msg.GetDescriptor()->FindFieldByName(name.str());
      if (field) {
        auto where = tree->GetLocation(field, index);
        if (where.line >= 0)
          return FileLineColLoc::get(ctx, file, where.line + 1, where.column + 1);
      }
    }
    return fallback ? *fallback : FileLineColLoc::get(ctx, file, 1, 1);
  }
  const pb::TextFormat::ParseInfoTree *nested(const pb::Message &msg,
                                              const pb::TextFormat::ParseInfoTree *tree,
                                              StringRef name, int index = -1) {
    if (!tree)
      return nullptr;
    const pb::FieldDescriptor *field =
        msg.GetDescriptor()->FindFieldByName(name.str());
    return field ? tree->GetTreeForNested(field, index) : nullptr;
  }

  bool checkNonNeg(double value, const pb::Message &msg,
                   const pb::TextFormat::ParseInfoTree *tree, StringRef what,
                   StringRef field) {
    if (std::isfinite(value) && value >= 0)
      return true;
    emitError(loc(msg, tree, field))
        << what << "." << field << " must be a non-negative number (got "
        << fmtNum(value) << ")";
    return false;
  }

  MLIRContext *ctx;
  std::string file;
  const pb::TextFormat::ParseInfoTree &rootTree;
  OpBuilder builder;
};

const char *scheduleName(pipefill::Schedule s) {
  return pipefill::Schedule_Name(s).c_str();
}

/// A `model { }` block stands for the pipeline size, the stage costs, the
/// hardware preset and the iteration tail: fill them into the spec (fields
/// the user wrote in `hardware`/`tail` win over the preset) so the rest of
/// the import treats both kinds of JobSpec alike.
bool Importer::expandModel(JobSpec &spec) {
  const pb::TextFormat::ParseInfoTree *root = &rootTree;
  const Model &model = spec.model();
  const auto *modelTree = nested(spec, root, "model");
  Location modelLoc = loc(spec, root, "model");
  if (spec.stage_size() > 0) {
    emitError(loc(spec, root, "stage", 0))
        << "'stage' entries and a 'model' block are exclusive: the model "
           "block derives the stage costs";
    return false;
  }
  if (spec.pipeline().schedule() == SCHEDULE_UNSPECIFIED) {
    emitError(spec.has_pipeline() ? loc(spec, root, "pipeline") : modelLoc)
        << "pipeline.schedule is missing; expected one of GPIPE, ONE_F_ONE_B, "
           "INTERLEAVED_1F1B, ZB_H1";
    return false;
  }
  sched::PipelineSpec derived;
  switch (spec.pipeline().schedule()) {
  case GPIPE: derived.schedule = sched::ScheduleKind::GPipe; break;
  case INTERLEAVED_1F1B: derived.schedule = sched::ScheduleKind::Interleaved1F1B; break;
  case ZB_H1: derived.schedule = sched::ScheduleKind::ZBH1; break;
  default: derived.schedule = sched::ScheduleKind::OneFOneB; break;
  }
  derived.virtualStages = spec.pipeline().has_virtual_stages()
                              ? spec.pipeline().virtual_stages()
                              : 1;
  cost::HardwareOut hw;
  std::string error, field;
  if (!cost::stageCostsFromModel(model, derived, hw, error, &field)) {
    emitError(field.empty() ? modelLoc : loc(model, modelTree, field, -1, modelLoc))
        << "model: " << error;
    return false;
  }
  Pipeline *pipe = spec.mutable_pipeline();
  const auto *pipeTree = nested(spec, root, "pipeline");
  if (pipe->has_stages() && pipe->stages() != derived.stages) {
    emitError(loc(*pipe, pipeTree, "stages"))
        << "pipeline.stages = " << pipe->stages() << " disagrees with the "
        << "model's pp = " << derived.stages;
    return false;
  }
  if (pipe->has_microbatches() && pipe->microbatches() != derived.microbatches) {
    emitError(loc(*pipe, pipeTree, "microbatches"))
        << "pipeline.microbatches = " << pipe->microbatches()
        << " disagrees with the model's global_batch / (dp x micro_batch_size) = "
        << derived.microbatches;
    return false;
  }
  pipe->set_stages(derived.stages);
  pipe->set_microbatches(derived.microbatches);
  for (const sched::StageCost &c : derived.costs) {
    StageCost *sc = spec.add_stage();
    sc->set_forward_us(c.forwardUs);
    sc->set_backward_us(c.backwardUs);
    sc->set_backward_weight_us(c.backwardWeightUs);
    sc->set_activation_bytes(c.activationBytes);
    sc->set_stash_bytes(c.stashBytes);
    sc->set_static_bytes(c.staticBytes);
  }
  Hardware *h = spec.mutable_hardware();
  if (!h->has_gpu_memory_bytes()) h->set_gpu_memory_bytes(hw.gpuMemoryBytes);
  if (!h->has_p2p_latency_us()) h->set_p2p_latency_us(hw.p2pLatencyUs);
  if (!h->has_p2p_bandwidth_gbps()) h->set_p2p_bandwidth_gbps(hw.p2pBandwidthGBps);
  if (!h->has_pcie_bandwidth_gbps()) h->set_pcie_bandwidth_gbps(hw.pcieGBps);
  if (!h->has_hbm_bandwidth_gbps()) h->set_hbm_bandwidth_gbps(hw.hbmGBps);
  if (!h->has_kernel_launch_us()) h->set_kernel_launch_us(hw.kernelLaunchUs);
  if (!spec.has_tail() && derived.tail) {
    Tail *t = spec.mutable_tail();
    t->set_data_parallel(derived.dataParallel);
    t->set_grad_bytes(derived.gradBytes);
    t->set_allreduce_bandwidth_gbps(derived.dpBandwidthGBps);
    t->set_allreduce_latency_us(derived.dpLatencyUs);
    t->set_optimizer_us(derived.optimizerUs);
  }
  return true;
}

OwningOpRef<ModuleOp> Importer::run(JobSpec &spec) {
  const pb::TextFormat::ParseInfoTree *root = &rootTree;
  Location top = FileLineColLoc::get(ctx, file, 1, 1);
  bool ok = true;
  if (spec.has_model() && !expandModel(spec))
    return nullptr;

  // --- pipeline ------------------------------------------------------------
  if (!spec.has_pipeline()) {
    emitError(top) << "the job has no 'pipeline { stages microbatches schedule }' block";
    return nullptr;
  }
  const Pipeline &pipe = spec.pipeline();
  const auto *pipeTree = nested(spec, root, "pipeline");
  Location pipeLoc = loc(spec, root, "pipeline");
  if (!pipe.has_stages()) {
    emitError(pipeLoc) << "pipeline.stages is missing";
    ok = false;
  } else if (pipe.stages() < 1) {
    emitError(loc(pipe, pipeTree, "stages", -1, pipeLoc))
        << "pipeline.stages must be at least 1 (got " << pipe.stages() << ")";
    ok = false;
  }
  if (!pipe.has_microbatches()) {
    emitError(pipeLoc) << "pipeline.microbatches is missing";
    ok = false;
  } else if (pipe.microbatches() < 1) {
    emitError(loc(pipe, pipeTree, "microbatches", -1, pipeLoc))
        << "pipeline.microbatches must be at least 1 (got "
        << pipe.microbatches() << ")";
    ok = false;
  }
  if (pipe.schedule() == SCHEDULE_UNSPECIFIED) {
    emitError(pipeLoc) << "pipeline.schedule is missing; expected one of "
                          "GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, ZB_H1";
    ok = false;
  }
  int64_t virtualStages = pipe.has_virtual_stages() ? pipe.virtual_stages() : 1;
  if (pipe.schedule() == INTERLEAVED_1F1B && virtualStages < 2) {
    emitError(loc(pipe, pipeTree, "virtual_stages", -1, pipeLoc))
        << "INTERLEAVED_1F1B needs pipeline.virtual_stages >= 2 (got "
        << virtualStages << ")";
    ok = false;
  } else if (pipe.schedule() != INTERLEAVED_1F1B && virtualStages != 1) {
    emitError(loc(pipe, pipeTree, "virtual_stages", -1, pipeLoc))
        << "pipeline.virtual_stages = " << virtualStages << " is only valid with "
        << "INTERLEAVED_1F1B (schedule is " << scheduleName(pipe.schedule())
        << ")";
    ok = false;
  }
  if (!ok)
    return nullptr;
  int64_t numStages = pipe.stages();

  // --- hardware ------------------------------------------------------------
  if (!spec.has_hardware()) {
    emitError(top) << "the job has no 'hardware { gpu_memory_bytes ... }' block";
    return nullptr;
  }
  const Hardware &hw = spec.hardware();
  const auto *hwTree = nested(spec, root, "hardware");
  Location hwLoc = loc(spec, root, "hardware");
  if (!hw.has_gpu_memory_bytes() || hw.gpu_memory_bytes() <= 0) {
    emitError(hw.has_gpu_memory_bytes() ? loc(hw, hwTree, "gpu_memory_bytes")
                                        : hwLoc)
        << "hardware.gpu_memory_bytes must be given and positive";
    return nullptr;
  }
  for (StringRef f : {"p2p_latency_us", "p2p_bandwidth_gbps",
                      "pcie_bandwidth_gbps", "hbm_bandwidth_gbps",
                      "kernel_launch_us"}) {
    const pb::FieldDescriptor *fd = hw.GetDescriptor()->FindFieldByName(f.str());
    double v = hw.GetReflection()->GetDouble(hw, fd);
    ok &= checkNonNeg(v, hw, hwTree, "hardware", f);
  }
  if (!ok)
    return nullptr;

  // --- stage costs ---------------------------------------------------------
  if (spec.stage_size() == 0) {
    emitError(top) << "the job has no 'stage { forward_us backward_us ... }' "
                      "entry (one applies to all stages)";
    return nullptr;
  }
  if (spec.stage_size() != 1 && spec.stage_size() != numStages) {
    emitError(loc(spec, root, "stage", numStages < spec.stage_size() ? numStages : 0))
        << "the job has " << spec.stage_size()
        << " 'stage' entries; expected 1 (for all stages) or " << numStages;
    return nullptr;
  }
  for (int i = 0; i < spec.stage_size(); ++i) {
    const StageCost &sc = spec.stage(i);
    const auto *scTree = nested(spec, root, "stage", i);
    Location scLoc = loc(spec, root, "stage", i);
    std::string what = llvm::formatv("stage[{0}]", i).str();
    if (!sc.has_forward_us() || !sc.has_backward_us()) {
      emitError(scLoc) << what << " is missing "
                       << (!sc.has_forward_us() ? "forward_us" : "backward_us");
      ok = false;
      continue;
    }
    ok &= checkNonNeg(sc.forward_us(), sc, scTree, what, "forward_us");
    ok &= checkNonNeg(sc.backward_us(), sc, scTree, what, "backward_us");
    ok &= checkNonNeg(sc.backward_weight_us(), sc, scTree, what, "backward_weight_us");
    for (StringRef f : {"activation_bytes", "stash_bytes", "static_bytes"}) {
      const pb::FieldDescriptor *fd = sc.GetDescriptor()->FindFieldByName(f.str());
      int64_t v = sc.GetReflection()->GetInt64(sc, fd);
      if (v < 0) {
        emitError(loc(sc, scTree, f)) << what << "." << f
                                      << " must be non-negative (got " << v << ")";
        ok = false;
      }
    }
    if (sc.backward_weight_us() > sc.backward_us()) {
      emitError(loc(sc, scTree, "backward_weight_us", -1, scLoc))
          << what << ".backward_weight_us (" << fmtNum(sc.backward_weight_us())
          << ") exceeds backward_us (" << fmtNum(sc.backward_us())
          << "), which is the whole backward";
      ok = false;
    }
    if (pipe.schedule() == ZB_H1 && !sc.has_backward_weight_us()) {
      emitError(scLoc) << what << " is missing backward_weight_us, which ZB_H1 "
                                  "needs to split the backward";
      ok = false;
    }
    if (sc.static_bytes() + sc.stash_bytes() > hw.gpu_memory_bytes()) {
      emitError(loc(sc, scTree, "static_bytes", -1, scLoc))
          << what << " needs " << sc.static_bytes() + sc.stash_bytes()
          << " bytes (static + one micro-batch's stash) but the GPU has "
          << hw.gpu_memory_bytes();
      ok = false;
    }
  }
  if (!ok)
    return nullptr;

  // --- tail and planner options --------------------------------------------
  const Tail &tail = spec.tail();
  const auto *tailTree = nested(spec, root, "tail");
  if (spec.has_tail()) {
    if (tail.has_data_parallel() && tail.data_parallel() < 1) {
      emitError(loc(tail, tailTree, "data_parallel"))
          << "tail.data_parallel must be at least 1 (got " << tail.data_parallel() << ")";
      ok = false;
    }
    if (tail.grad_bytes() < 0) {
      emitError(loc(tail, tailTree, "grad_bytes"))
          << "tail.grad_bytes must be non-negative (got " << tail.grad_bytes() << ")";
      ok = false;
    }
    ok &= checkNonNeg(tail.allreduce_bandwidth_gbps(), tail, tailTree, "tail", "allreduce_bandwidth_gbps");
    ok &= checkNonNeg(tail.allreduce_latency_us(), tail, tailTree, "tail", "allreduce_latency_us");
    ok &= checkNonNeg(tail.optimizer_us(), tail, tailTree, "tail", "optimizer_us");
    if (tail.data_parallel() > 1 && tail.grad_bytes() > 0 &&
        tail.allreduce_bandwidth_gbps() <= 0) {
      emitError(loc(spec, root, "tail"))
          << "tail.allreduce_bandwidth_gbps must be positive when "
             "data_parallel > 1 and grad_bytes > 0";
      ok = false;
    }
  }
  const Planner &planner = spec.planner();
  const auto *plTree = nested(spec, root, "planner");
  ok &= checkNonNeg(planner.min_bubble_us(), planner, plTree, "planner", "min_bubble_us");
  ok &= checkNonNeg(planner.context_switch_us(), planner, plTree, "planner", "context_switch_us");
  if (planner.reserve_bytes() < 0) {
    emitError(loc(planner, plTree, "reserve_bytes"))
        << "planner.reserve_bytes must be non-negative";
    ok = false;
  }
  if (planner.has_safety_margin() &&
      !(planner.safety_margin() >= 0 && planner.safety_margin() < 1)) {
    emitError(loc(planner, plTree, "safety_margin"))
        << "planner.safety_margin must be in [0, 1) (got "
        << fmtNum(planner.safety_margin()) << ")";
    ok = false;
  }
  for (int i = 0; i < planner.batch_sizes_size(); ++i)
    if (planner.batch_sizes(i) < 1) {
      emitError(loc(planner, plTree, "batch_sizes", i))
          << "planner.batch_sizes must be positive (got "
          << planner.batch_sizes(i) << ")";
      ok = false;
    }

  // --- fill jobs -----------------------------------------------------------
  llvm::StringSet<> jobNames;
  for (int j = 0; j < spec.fill_job_size(); ++j) {
    const FillJob &job = spec.fill_job(j);
    const auto *jobTree = nested(spec, root, "fill_job", j);
    Location jobLoc = loc(spec, root, "fill_job", j);
    std::string what = job.name().empty()
                           ? llvm::formatv("fill_job[{0}]", j).str()
                           : "fill job '" + job.name() + "'";
    if (job.name().empty()) {
      emitError(jobLoc) << what << " has no name";
      ok = false;
    } else if (!jobNames.insert(job.name()).second) {
      emitError(loc(job, jobTree, "name", -1, jobLoc))
          << "duplicate fill job name '" << job.name() << "'";
      ok = false;
    }
    if (job.kind() == JOB_KIND_UNSPECIFIED) {
      emitError(jobLoc) << what << " has no kind; expected INFERENCE or TRAINING";
      ok = false;
    }
    if (!job.has_samples() || job.samples() < 0) {
      emitError(job.has_samples() ? loc(job, jobTree, "samples") : jobLoc)
          << what << (job.has_samples() ? " has a negative sample count"
                                        : " is missing samples");
      ok = false;
    }
    ok &= checkNonNeg(job.arrival_us(), job, jobTree, what, "arrival_us");
    if (job.has_priority() && !(job.priority() > 0)) {
      emitError(loc(job, jobTree, "priority"))
          << what << ".priority must be positive (got " << fmtNum(job.priority()) << ")";
      ok = false;
    }
    if (job.layer_size() == 0) {
      emitError(jobLoc) << what << " has no layers";
      ok = false;
    }
    for (int l = 0; l < job.layer_size(); ++l) {
      const FillLayer &layer = job.layer(l);
      const auto *lTree = nested(job, jobTree, "layer", l);
      Location lLoc = loc(job, jobTree, "layer", l, jobLoc);
      std::string lwhat = what + " layer " +
                          (layer.name().empty() ? std::to_string(l)
                                                : "'" + layer.name() + "'");
      if (!layer.has_forward_us_per_sample()) {
        emitError(lLoc) << lwhat << " is missing forward_us_per_sample";
        ok = false;
        continue;
      }
      ok &= checkNonNeg(layer.forward_us_per_sample(), layer, lTree, lwhat,
                        "forward_us_per_sample");
      ok &= checkNonNeg(layer.backward_us_per_sample(), layer, lTree, lwhat,
                        "backward_us_per_sample");
      for (StringRef f : {"weight_bytes", "activation_bytes_per_sample",
                          "grad_bytes", "optimizer_bytes"}) {
        const pb::FieldDescriptor *fd =
            layer.GetDescriptor()->FindFieldByName(f.str());
        int64_t v = layer.GetReflection()->GetInt64(layer, fd);
        if (v < 0) {
          emitError(loc(layer, lTree, f)) << lwhat << "." << f
                                          << " must be non-negative (got " << v << ")";
          ok = false;
        }
      }
      if (job.kind() == TRAINING && !layer.has_backward_us_per_sample()) {
        emitError(lLoc) << lwhat << " of a TRAINING job is missing "
                                    "backward_us_per_sample";
        ok = false;
      }
      if (layer.has_repeat() && layer.repeat() < 1) {
        emitError(loc(layer, lTree, "repeat"))
            << lwhat << ".repeat must be at least 1 (got " << layer.repeat() << ")";
        ok = false;
      }
    }
  }
  if (!ok)
    return nullptr;

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
    auto stage = builder.create<StageOp>(loc(spec, root, "stage", entry), TypeRange{}, ValueRange{}, ArrayRef<NamedAttribute>{});
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
    const FillJob &job = spec.fill_job(j);
    const auto *jobTree = nested(spec, root, "fill_job", j);
    builder.setInsertionPointToEnd(module->getBody());
    auto jobOp = builder.create<FillJobOp>(loc(spec, root, "fill_job", j), TypeRange{}, ValueRange{}, ArrayRef<NamedAttribute>{});
    jobOp.setSymName(job.name());
    jobOp.setKind(job.kind() == TRAINING ? JobKind::Training : JobKind::Inference);
    jobOp.setSamples(job.samples());
    jobOp.setArrivalUs(llvm::APFloat(job.arrival_us()));
    if (job.has_priority())
      jobOp.setPriority(llvm::APFloat(job.priority()));
    builder.createBlock(&jobOp.getBody());
    for (int l = 0; l < job.layer_size(); ++l) {
      const FillLayer &layer = job.layer(l);
      int repeat = layer.has_repeat() ? layer.repeat() : 1;
      for (int r = 0; r < repeat; ++r) {
        std::string lname = layer.name().empty() ? "layer" + std::to_string(l)
                                                 : layer.name();
        if (repeat > 1)
          lname += "." + std::to_string(r);
        auto layerOp = builder.create<LayerOp>(loc(job, jobTree, "layer", l), TypeRange{}, ValueRange{}, ArrayRef<NamedAttribute>{});
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
  StringRef file = buffer->getBufferIdentifier();
  if (file == "<stdin>")
    file = "-";

  JobSpec spec;
  pb::TextFormat::Parser parser;
  pb::TextFormat::ParseInfoTree tree;
  std::string text = buffer->getBuffer().str();
  DiagnosticCollector collector(context, file, text);
  parser.RecordErrorsTo(&collector);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(text, &spec) || collector.hadError) {
    if (!collector.hadError)
      emitError(FileLineColLoc::get(context, file, 1, 1))
          << "could not parse the JobSpec";
    return nullptr;
  }
  Importer importer(context, file, tree);
  return importer.run(spec);
}

} // namespace pipefill
