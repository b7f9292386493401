//===- pipefill-opt.cpp - the pipefill compiler driver --------------------===//
#include "dialect/PipefillDialect.h"
#include "dialect/stream/PfstreamOps.h"
#include "passes/Passes.h"

#include "tools/HideLLVMOptions.h"

#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<pipefill::PipefillDialect, pipefill::pfstream::PfstreamDialect>();
  pipefill::hideLLVMBackendOptions();
  pipefill::registerPasses();
  // Generic cleanups that are handy in pipelines.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "pipefill compiler: schedules, bubbles and fill plans\n",
      registry));
}
