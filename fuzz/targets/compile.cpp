// libFuzzer target: the whole compiler on a JobSpec text, as pipefill-compile runs it: import
// (front end and IR construction), --pipefill-compile (expand, simulate, bubbles, plan fill,
// verify plan), verify the IR, lower to stream programs and export the StreamProgram. Errors
// are diagnostics; any crash, sanitizer report, hang (-timeout) or memory blow-up is a finding,
// and so is an exported StreamProgram that the runtime's loader and validator refuse (whatever
// the compiler accepts, the runtime runs: docs/reliability.md).
// Pipelines of more than 64 instructions' worth (stages x micro-batches x virtual stages) are
// skipped after import. Every schedule kind fits (4 x 8 x 2 interleaved, 2 x 32, ...), and the
// planner's work depends more on the fill jobs and stage costs than on the pipeline's length;
// larger pipelines mostly make each input slower: mutations of the 128-instruction
// llama13b-interleaved seed took ~200 ms each under ASan + UBSan, 7x those of <= 64, and were
// half the grown corpus, which kept a 10^6-input run at days. Their front end, schedule
// expansion, simulation and bubbles (<= 4096 chunks) are the jobspec target's under the same
// sanitizers; the whole compile of such pipelines is in the lit tests (test/compile) and bench/.
#include "QuietContext.h"
#include "codegen/Translate.h"
#include "dialect/PipefillDialect.h"
#include "passes/Passes.h"
#include "runtime/pfrt.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pipefill::fuzz::QuietContext quiet;
  mlir::MLIRContext &ctx = *quiet.get();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.pbtxt"),
      llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module = pipefill::importJobSpec(sourceMgr, &ctx);
  if (!module)
    return 0;
  for (pipefill::PipelineOp p : module->getOps<pipefill::PipelineOp>())
    if (int64_t(p.getNumStages()) * p.getNumMicrobatches() * p.getVirtualStages() > 64)
      return 0;
  mlir::PassManager pm(&ctx);
  pipefill::CompileOptions options;
  pipefill::buildCompilePipeline(pm, options);
  if (mlir::failed(pm.run(*module)) || mlir::failed(mlir::verify(*module)))
    return 0;
  mlir::PassManager lower(&ctx);
  lower.addPass(pipefill::createLowerToStream());
  if (mlir::failed(lower.run(*module)))
    return 0;
  std::string program;
  llvm::raw_string_ostream os(program);
  if (mlir::failed(pipefill::exportStreamProgram(*module, os, /*text=*/false)))
    return 0;
  pfrt_program *loaded = nullptr;
  if (pfrt_program_load_memory(program.data(), program.size(), "fuzz.pb", &loaded) != PFRT_OK ||
      pfrt_program_validate(loaded) != PFRT_OK) {
    std::fprintf(stderr, "the runtime refused the compiler's StreamProgram: %s\n",
                 pfrt_last_error());
    std::abort();
  }
  pfrt_program_destroy(loaded);
  return 0;
}
