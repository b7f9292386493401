// The MLIR context of the MLIR-side fuzz targets: both pipefill dialects (pipefill, pfstream)
// loaded, no threads, and diagnostics counted as the expected outcome of most inputs rather than
// printed.
#ifndef PIPEFILL_FUZZ_TARGETS_QUIETCONTEXT_H
#define PIPEFILL_FUZZ_TARGETS_QUIETCONTEXT_H

#include "dialect/PipefillDialect.h"
#include "dialect/stream/PfstreamOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

namespace pipefill::fuzz {

class QuietContext {
public:
  QuietContext() : ctx(registry(), mlir::MLIRContext::Threading::DISABLED) {
    ctx.loadAllAvailableDialects();
  }
  mlir::MLIRContext *get() { return &ctx; }

private:
  static mlir::DialectRegistry registry() {
    mlir::DialectRegistry r;
    r.insert<PipefillDialect, pfstream::PfstreamDialect>();
    return r;
  }

  mlir::MLIRContext ctx;
  mlir::ScopedDiagnosticHandler quiet{&ctx, [](mlir::Diagnostic &) { return mlir::success(); }};
};

} // namespace pipefill::fuzz

#endif // PIPEFILL_FUZZ_TARGETS_QUIETCONTEXT_H
