//===- Compile.cpp - the compiler, in process, for embedders --------------===//
#include "python/src/Compile.h"

#include "codegen/Report.h"
#include "codegen/Translate.h"
#include "dialect/PipefillDialect.h"
#include "dialect/stream/PfstreamOps.h"
#include "passes/Passes.h"
#include "support/Files.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace pipefill::embed {

namespace {

struct CaptureBuffer {
  std::string text;
  llvm::raw_string_ostream stream{text};
};

/// Formats every diagnostic exactly as the tools do (SourceMgr style, with
/// the source line), and keeps errors and warnings apart instead of printing.
class CapturingHandler : private CaptureBuffer, public SourceMgrDiagnosticHandler {
public:
  CapturingHandler(llvm::SourceMgr &mgr, MLIRContext *context)
      : SourceMgrDiagnosticHandler(mgr, context, CaptureBuffer::stream) {
    setHandler([this](Diagnostic &diag) {
      text.clear();
      emitDiagnostic(diag);
      stream.flush();
      std::string message = text;
      while (!message.empty() && message.back() == '\n')
        message.pop_back();
      if (diag.getSeverity() == DiagnosticSeverity::Error)
        errors.push_back(std::move(message));
      else if (diag.getSeverity() == DiagnosticSeverity::Warning)
        warnings.push_back(std::move(message));
      return success();
    });
  }

  /// Throws CompileFailure naming `what` and every error seen.
  [[noreturn]] void fail(const std::string &what) {
    std::string message = what;
    if (errors.empty())
      errors.push_back("error: " + what + " failed without a diagnostic");
    for (const std::string &e : errors)
      message += "\n" + e;
    throw CompileFailure(message, errors);
  }

  std::vector<std::string> errors, warnings;
};

} // namespace

struct CompiledPlan::Impl {
  std::unique_ptr<MLIRContext> context;
  llvm::SourceMgr sourceMgr;
  OwningOpRef<ModuleOp> module;
  std::string name;
  std::vector<std::string> warnings;
};

CompiledPlan::CompiledPlan(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
CompiledPlan::~CompiledPlan() = default;

static std::unique_ptr<CompiledPlan::Impl>
compileBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer, const CompileOptions &options) {
  auto impl = std::make_unique<CompiledPlan::Impl>();
  // One thread: a compile is a short sequence of module passes, and a thread
  // pool per plan would cost more than it saves.
  impl->context = std::make_unique<MLIRContext>(MLIRContext::Threading::DISABLED);
  impl->context->loadDialect<PipefillDialect, pfstream::PfstreamDialect>();
  // A diagnostic on the module would carry the whole IR (tools/DiagnosticDefaults.h).
  impl->context->printOpOnDiagnostic(false);
  impl->sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());

  CapturingHandler diagnostics(impl->sourceMgr, impl->context.get());
  if (options.torchScheduleJob.empty()) {
    impl->module = importJobSpec(impl->sourceMgr, impl->context.get());
    if (!impl->module)
      diagnostics.fail("the JobSpec could not be imported");
  } else {
    impl->module =
        importTorchSchedule(impl->sourceMgr, impl->context.get(), options.torchScheduleJob);
    if (!impl->module)
      diagnostics.fail("the torch action table could not be imported");
  }

  PassManager pm(impl->context.get());
  pipefill::CompileOptions pipelineOptions;
  pipelineOptions.profile = options.profile;
  buildCompilePipeline(pm, pipelineOptions);
  if (failed(pm.run(*impl->module)))
    diagnostics.fail("the --pipefill-compile pipeline failed");

  std::optional<ReportData> report = computeReport(*impl->module);
  if (!report)
    diagnostics.fail("the compiled module has no simulated pipeline");
  impl->name = report->name;
  impl->warnings = std::move(diagnostics.warnings);
  return impl;
}

std::unique_ptr<CompiledPlan> CompiledPlan::fromText(const std::string &text,
                                                     const std::string &sourceName,
                                                     const CompileOptions &options) {
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(text, sourceName);
  return std::unique_ptr<CompiledPlan>(new CompiledPlan(compileBuffer(std::move(buffer), options)));
}

std::unique_ptr<CompiledPlan> CompiledPlan::fromFile(const std::string &path,
                                                     const CompileOptions &options) {
  std::string text; // read with a bound: a path to /dev/zero is an error, not a growing process
  const pipefill::ReadStatus read = pipefill::readBoundedFile(path, pipefill::kMaxInputBytes, text);
  if (!read)
    throw FileError("cannot open JobSpec (" + read.message + ")", path, read.error);
  return std::unique_ptr<CompiledPlan>(new CompiledPlan(
      compileBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, path), options)));
}

const std::string &CompiledPlan::name() const { return impl->name; }
const std::vector<std::string> &CompiledPlan::warnings() const { return impl->warnings; }

template <typename Export>
static std::string exportWith(CompiledPlan::Impl &impl, const char *what, Export exportFn) {
  CapturingHandler diagnostics(impl.sourceMgr, impl.context.get());
  std::string out;
  llvm::raw_string_ostream os(out);
  if (failed(exportFn(*impl.module, os)))
    diagnostics.fail(std::string("exporting the ") + what + " failed");
  os.flush();
  return out;
}

std::string CompiledPlan::reportJson() const {
  return exportWith(*impl, "report", [](ModuleOp m, llvm::raw_ostream &os) {
    return exportReport(m, os);
  });
}
std::string CompiledPlan::summary() const {
  return exportWith(*impl, "summary", [](ModuleOp m, llvm::raw_ostream &os) {
    return exportSummary(m, os);
  });
}
std::string CompiledPlan::trace() const {
  return exportWith(*impl, "trace", [](ModuleOp m, llvm::raw_ostream &os) {
    return exportTrace(m, os);
  });
}
std::string CompiledPlan::svg() const {
  return exportWith(*impl, "SVG", [](ModuleOp m, llvm::raw_ostream &os) {
    return exportSvg(m, os);
  });
}

std::string CompiledPlan::mlir(bool debugInfo) const {
  std::string out;
  llvm::raw_string_ostream os(out);
  OpPrintingFlags flags;
  if (debugInfo)
    flags.enableDebugInfo();
  impl->module->print(os, flags);
  os.flush();
  return out;
}

std::string CompiledPlan::streamProgram(int64_t iterations, bool text) const {
  if (iterations < 1 || iterations > 0xFFFFFFFFll) // the program's loop count is 32 bits
    throw std::invalid_argument("iterations must be >= 1 and < 2**32 (got " +
                                std::to_string(iterations) + ")");
  CapturingHandler diagnostics(impl->sourceMgr, impl->context.get());
  OwningOpRef<ModuleOp> lowered = impl->module->clone();
  PassManager pm(impl->context.get());
  pm.addPass(createLowerToStream(LowerToStreamOptions{iterations}));
  if (failed(pm.run(*lowered)))
    diagnostics.fail("lowering to a stream program failed");
  std::string out;
  llvm::raw_string_ostream os(out);
  if (failed(exportStreamProgram(*lowered, os, text)))
    diagnostics.fail("exporting the stream program failed");
  os.flush();
  return out;
}

BubbleColumns CompiledPlan::bubbles() const {
  CapturingHandler diagnostics(impl->sourceMgr, impl->context.get());
  std::optional<ReportData> r = computeReport(*impl->module);
  if (!r)
    diagnostics.fail("reading the plan failed");
  BubbleColumns c;
  for (const ReportStage &s : r->stages)
    for (const ReportBubble &b : s.bubbles) {
      c.stage.push_back(s.stage);
      c.startUs.push_back(b.startUs);
      c.durationUs.push_back(b.durationUs);
      c.filledUs.push_back(b.filledUs);
      c.freeBytes.push_back(b.freeBytes);
      c.fills.push_back(b.numFills);
      c.kind.push_back(b.kind.str());
    }
  return c;
}

StageColumns CompiledPlan::stages() const {
  CapturingHandler diagnostics(impl->sourceMgr, impl->context.get());
  std::optional<ReportData> r = computeReport(*impl->module);
  if (!r)
    diagnostics.fail("reading the plan failed");
  StageColumns c;
  for (const ReportStage &s : r->stages) {
    c.stage.push_back(s.stage);
    c.busyUs.push_back(s.busyUs);
    c.idleUs.push_back(s.idleUs);
    c.peakMemoryBytes.push_back(s.peakBytes);
    c.bubbles.push_back(static_cast<int64_t>(s.bubbles.size()));
  }
  return c;
}

} // namespace pipefill::embed
