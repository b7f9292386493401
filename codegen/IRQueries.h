//===- IRQueries.h - small lookups shared by the exporters ------*- C++ -*-===//
#ifndef PIPEFILL_CODEGEN_IRQUERIES_H
#define PIPEFILL_CODEGEN_IRQUERIES_H

#include "dialect/PipefillOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <string>
#include <vector>

namespace pipefill {

/// The module's single pipeline; emits an error on the module and returns
/// null when there is none or more than one.
inline PipelineOp findPipeline(mlir::ModuleOp module) {
  PipelineOp found;
  for (PipelineOp p : module.getOps<PipelineOp>()) {
    if (found) {
      p.emitError() << "expected one pipefill.pipeline per module, found "
                       "another at "
                    << found.getLoc();
      return nullptr;
    }
    found = p;
  }
  if (!found)
    module.emitError() << "contains no pipefill.pipeline";
  return found;
}

/// The module's single pipeline, which must have been simulated (exports
/// need its timeline); emits an error and returns null otherwise.
inline PipelineOp findSimulatedPipeline(mlir::ModuleOp module) {
  PipelineOp pipeline = findPipeline(module);
  if (pipeline && !pipeline.getIterationUs()) {
    pipeline.emitError() << "has not been simulated; run pipefill-opt "
                            "--pipefill-compile (or at least --pipefill-simulate) first";
    return nullptr;
  }
  return pipeline;
}

/// Per-job layer costs, for turning fill chunks into useful work.
class FillJobIndex {
public:
  explicit FillJobIndex(mlir::ModuleOp module) {
    for (FillJobOp job : module.getOps<FillJobOp>()) {
      Entry &e = jobs[job.getSymName()];
      e.op = job;
      // Passes: the forwards of the layers, then (training) the backwards in
      // reverse layer order.
      e.prefixUs.push_back(0);
      llvm::SmallVector<LayerOp> layers(job.getLayers());
      for (LayerOp layer : layers)
        e.prefixUs.push_back(e.prefixUs.back() +
                             layer.getForwardUsPerSample().convertToDouble());
      if (job.getKind() == JobKind::Training)
        for (LayerOp layer : llvm::reverse(layers))
          e.prefixUs.push_back(e.prefixUs.back() +
                               layer.getBackwardUsPerSample().convertToDouble());
    }
    // StringMap entries do not move once inserted.
    for (auto &entry : jobs)
      byName[entry.second.op.getSymNameAttr()] = &entry.second;
  }
  /// GPU time the fill chunk's work would take at dedicated (large-batch)
  /// speed: batch x sum of per-sample pass costs over its pass range (one
  /// run; multiply by the chunk's repeat count).
  double dedicatedUs(const FillChunk &fill) const {
    // By the symbol's uniqued name (a pointer), not its text: this runs once
    // per fill chunk.
    const Entry *entry = byName.lookup(fill.job ? fill.job.getAttr() : mlir::StringAttr());
    if (!entry) {
      auto it = jobs.find(fill.getJob());
      if (it == jobs.end())
        return 0;
      entry = &it->second;
    }
    const auto &p = entry->prefixUs;
    size_t b = std::min<size_t>(fill.layerBegin, p.size() - 1);
    size_t e = std::min<size_t>(fill.layerEnd, p.size() - 1);
    return fill.batch * (p[e] - p[b]);
  }
  FillJobOp lookup(llvm::StringRef name) const {
    auto it = jobs.find(name);
    return it == jobs.end() ? FillJobOp() : it->second.op;
  }

private:
  struct Entry {
    FillJobOp op;
    std::vector<double> prefixUs;
  };
  llvm::StringMap<Entry> jobs;
  llvm::DenseMap<mlir::StringAttr, const Entry *> byName;
};

/// How often a stage's fill chunks run in the steady state: a chunk of the
/// repeating part of its assignment runs once every `period` iterations, a
/// chunk of the prefix never again.
class SteadyState {
public:
  explicit SteadyState(StageOp stage) {
    for (AssignmentOp a : stageAssignments(stage)) {
      schedules[a.getJob()] = {(int64_t)a.getPrefix(), (int64_t)a.getPeriod()};
      byName[a.getJobAttr().getAttr()] = {(int64_t)a.getPrefix(), (int64_t)a.getPeriod()};
    }
  }
  /// Runs per iteration of this chunk (repeat included) in the steady state.
  double weight(const FillChunk &fill) const {
    // By the symbol's uniqued name (a pointer): this runs once per chunk.
    if (fill.job) {
      auto it = byName.find(fill.job.getAttr());
      if (it != byName.end())
        return fill.iteration < it->second.first
                   ? 0
                   : double(fill.repeat) / double(std::max<int64_t>(1, it->second.second));
    }
    return weight(fill.getJob(), fill.iteration, fill.repeat);
  }
  /// The same for a chunk of `job` in plan iteration `iteration` run
  /// `repeat` times.
  double weight(llvm::StringRef job, int64_t iteration, int64_t repeat) const {
    auto it = schedules.find(job);
    int64_t prefix = it == schedules.end() ? 0 : it->second.first;
    int64_t period = it == schedules.end() ? 1 : it->second.second;
    if (iteration < prefix)
      return 0;
    return double(repeat) / double(std::max<int64_t>(1, period));
  }
  /// True when the chunk runs in the first steady-state iteration (what the
  /// pictures show).
  bool inFirstSteadyIteration(const FillChunk &fill) const {
    auto it = schedules.find(fill.getJob());
    int64_t prefix = it == schedules.end() ? 0 : it->second.first;
    return (int64_t)fill.iteration == prefix;
  }

private:
  llvm::StringMap<std::pair<int64_t, int64_t>> schedules;
  llvm::DenseMap<mlir::StringAttr, std::pair<int64_t, int64_t>> byName;
};

} // namespace pipefill

#endif // PIPEFILL_CODEGEN_IRQUERIES_H
