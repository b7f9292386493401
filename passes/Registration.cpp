//===- Registration.cpp - pass and pipeline registration ------------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace pipefill {
namespace {
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"
} // namespace

void registerPasses() { registerPipefillPasses(); }

} // namespace pipefill
