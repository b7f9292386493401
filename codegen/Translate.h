//===- Translate.h - pipefill import and export entry points ----*- C++ -*-===//
//
// Translations between the pipefill dialect and the outside world. Each is a
// plain function so tools and tests can call it directly; registerTranslations
// wires them into pipefill-translate.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_CODEGEN_TRANSLATE_H
#define PIPEFILL_CODEGEN_TRANSLATE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>

namespace pipefill {

/// Parses a JobSpec in protobuf text format from the main buffer of
/// `sourceMgr` and builds a module holding one `pipefill.pipeline` and the
/// `pipefill.fill_job` declarations. Syntax and semantic errors are emitted as
/// diagnostics located at file:line:col of the offending text; returns null
/// on error.
mlir::OwningOpRef<mlir::ModuleOp> importJobSpec(llvm::SourceMgr &sourceMgr,
                                                mlir::MLIRContext *context);

/// Writes the report JSON of DESIGN section 8.
mlir::LogicalResult exportReport(mlir::ModuleOp module, llvm::raw_ostream &os);
/// Writes a human-readable summary table of the report.
mlir::LogicalResult exportSummary(mlir::ModuleOp module, llvm::raw_ostream &os);
/// Writes a Chrome trace (Perfetto-compatible JSON).
mlir::LogicalResult exportTrace(mlir::ModuleOp module, llvm::raw_ostream &os);
/// Writes an SVG picture of the schedule.
mlir::LogicalResult exportSvg(mlir::ModuleOp module, llvm::raw_ostream &os);

/// Writes the module's pfstream.program as a StreamProgram protobuf, binary
/// or text format. A program that pipefill-run would refuse to load is
/// refused instead, with the runtime's message at the op (fill chunk row,
/// stream, device or fill-job layer) it points at (runtime/ProgramCheck.h).
mlir::LogicalResult exportStreamProgram(mlir::ModuleOp module,
                                        llvm::raw_ostream &os, bool text);
/// Writes the StreamProgram that pipefill-lower-to-stream (with
/// `iterations`) followed by exportStreamProgram gives for a compiled
/// module, without building the pfstream IR in between: the stages are
/// lowered straight into the program's messages (passes/StageLowering.h),
/// each stage's instructions read only while it is lowered. Like the pass,
/// it first checks the instruction order for deadlocks, unless `checkOrder`
/// is false: for a caller that has just simulated this very order
/// (pipefill-simulate fails on the orders the check rejects,
/// algo/schedule/tests/ErrorTest.cpp), where the check would only cost the
/// whole pipeline's instruction lists in memory. Likewise `checkWithRuntime`
/// loads the program through the runtime's loader as exportStreamProgram
/// does (the errors point at the stages); pipefill-compile does so only
/// under --verify-ir: the lowering is the pass's own code, and the check
/// costs several times the export (docs/compiler.md).
mlir::LogicalResult lowerAndExportStreamProgram(mlir::ModuleOp module, int64_t iterations,
                                                llvm::raw_ostream &os, bool text,
                                                bool checkOrder = true,
                                                bool checkWithRuntime = true);
/// Writes C++ source holding the program as the runtime's tables
/// (runtime/pfrt_tables.h) and a main() that runs them (a standalone runtime
/// binary once compiled).
mlir::LogicalResult exportCpp(mlir::ModuleOp module, llvm::raw_ostream &os);

/// Reads a torch.distributed.pipelining action table (CSV) from the main
/// buffer of `sourceMgr` and the JobSpec `jobFile` into a pipeline whose
/// stages already hold their instructions (schedule `imported`); see
/// docs/torch.md. Errors are located at the table's file:line:col.
mlir::OwningOpRef<mlir::ModuleOp>
importTorchSchedule(llvm::SourceMgr &sourceMgr, mlir::MLIRContext *context,
                    llvm::StringRef jobFile);
/// Writes the compute order as torch's compute-only action table (CSV).
mlir::LogicalResult exportTorchSchedule(mlir::ModuleOp module,
                                        llvm::raw_ostream &os);
/// Measures the pipeline's compute instructions from torch.profiler Chrome
/// traces and writes a text MeasuredProfile for --pipefill-compile=profile=.
mlir::LogicalResult exportTorchTraceProfile(mlir::ModuleOp module,
                                            llvm::raw_ostream &os,
                                            llvm::ArrayRef<std::string> traces);
/// An export of a module to text or bytes.
using ExportFunction = std::function<mlir::LogicalResult(mlir::ModuleOp, llvm::raw_ostream &)>;
/// Registers translation `name` from MLIR, as mlir's
/// TranslateFromMLIRRegistration with both pipefill dialects does, except
/// that text nested too deep for the parser is refused before parsing
/// (support/MlirNesting.h) and a top-level op other than a builtin.module
/// (--no-implicit-module) is an error, not handed to `function`.
void registerFromMLIR(llvm::StringRef name, llvm::StringRef description,
                      ExportFunction function);

/// False, with the error printed, when an option of one translation was given
/// to another (--job belongs to --import-torch-schedule, --torch-trace to
/// --torch-trace-to-profile): it would be ignored without a word (FromMLIR.cpp).
bool checkTranslationOptions(llvm::StringRef translation);

/// Register --import-torch-schedule (with --job), --to-torch-schedule and
/// --torch-trace-to-profile (with --torch-trace).
void registerTorchScheduleImport();
void registerTorchScheduleExport();
void registerTorchTraceImport();

/// Registers all of the above with mlir-translate's registry.
void registerTranslations();

} // namespace pipefill

#endif // PIPEFILL_CODEGEN_TRANSLATE_H
