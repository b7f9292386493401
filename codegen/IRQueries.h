//===- IRQueries.h - small lookups shared by the exporters ------*- C++ -*-===//
#ifndef PIPEFILL_CODEGEN_IRQUERIES_H
#define PIPEFILL_CODEGEN_IRQUERIES_H

#include "dialect/PipefillOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

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

/// Per-job layer costs, for turning fill ops into useful work.
class FillJobIndex {
public:
  explicit FillJobIndex(mlir::ModuleOp module) {
    for (FillJobOp job : module.getOps<FillJobOp>()) {
      Entry &e = jobs[job.getSymName()];
      e.op = job;
      e.prefixUs.push_back(0);
      for (LayerOp layer : job.getLayers()) {
        double perSample = layer.getForwardUsPerSample().convertToDouble();
        if (job.getKind() == JobKind::Training)
          perSample += layer.getBackwardUsPerSample().convertToDouble();
        e.prefixUs.push_back(e.prefixUs.back() + perSample);
      }
    }
  }
  /// GPU time the fill chunk's work would take at dedicated (large-batch)
  /// speed: batch x sum of per-sample layer costs over its layer range.
  double dedicatedUs(FillOp fill) const {
    auto it = jobs.find(fill.getJob());
    if (it == jobs.end())
      return 0;
    const auto &p = it->second.prefixUs;
    size_t b = std::min<size_t>(fill.getLayerBegin(), p.size() - 1);
    size_t e = std::min<size_t>(fill.getLayerEnd(), p.size() - 1);
    return fill.getBatch() * (p[e] - p[b]);
  }
  FillJobOp lookup(llvm::StringRef name) const {
    auto it = jobs.find(name);
    return it == jobs.end() ? FillJobOp() : it->second.op;
  }
  /// Position of a job among the module's fill jobs (for stable colours).
  int indexOf(llvm::StringRef name) const {
    int i = 0;
    for (const auto &e : order) {
      if (e == name)
        return i;
      ++i;
    }
    return -1;
  }

private:
  struct Entry {
    FillJobOp op;
    std::vector<double> prefixUs;
  };
  llvm::StringMap<Entry> jobs;
  std::vector<std::string> order;
};

} // namespace pipefill

#endif // PIPEFILL_CODEGEN_IRQUERIES_H
