//===- StreamProgramBuilder.h - pfstream.program -> StreamProgram -*- C++ -*-===//
//
// The module's pfstream.program as the runtime's StreamProgram protobuf; used
// by --to-stream-program and --to-cpp.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_CODEGEN_STREAMPROGRAMBUILDER_H
#define PIPEFILL_CODEGEN_STREAMPROGRAMBUILDER_H

#include "proto/stream_program.pb.h"

#include "mlir/IR/BuiltinOps.h"

namespace pipefill {

/// Fills `out` from the module's only pfstream.program (an error on the
/// module when there is none or more than one).
mlir::LogicalResult buildStreamProgram(mlir::ModuleOp module, rt::StreamProgram &out);

} // namespace pipefill

#endif // PIPEFILL_CODEGEN_STREAMPROGRAMBUILDER_H
