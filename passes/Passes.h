//===- Passes.h - pipefill passes -------------------------------*- C++ -*-===//
#ifndef PIPEFILL_PASSES_PASSES_H
#define PIPEFILL_PASSES_PASSES_H

#include "dialect/PipefillOps.h"
#include "dialect/stream/PfstreamOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace pipefill {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// Adds the passes of `--pipefill-compile` to `pm`.
void buildCompilePipeline(mlir::OpPassManager &pm);

/// Registers every pipefill pass and the `pipefill-compile` pipeline.
void registerPasses();

} // namespace pipefill

#endif // PIPEFILL_PASSES_PASSES_H
