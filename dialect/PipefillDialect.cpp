//===- PipefillDialect.cpp - the pipefill dialect -------------------------===//
#include "dialect/PipefillDialect.h"
#include "dialect/PipefillOps.h"

#include "mlir/Bytecode/BytecodeImplementation.h"

using namespace mlir;
using namespace pipefill;

#include "dialect/PipefillDialect.cpp.inc"

namespace {
/// The dialect's bytecode format version (see checkBytecodeVersion). Raise
/// it whenever the encoding of a native property changes.
///   1: instruction fields and fill-chunk rows as native numbers (what
///      builds before versioning wrote differently, without a version).
constexpr uint64_t kBytecodeVersion = 1;

struct PipefillBytecodeVersion : public DialectVersion {
  explicit PipefillBytecodeVersion(uint64_t version) : version(version) {}
  uint64_t version;
};

/// Writes the format version into every bytecode file that uses the
/// dialect, and refuses files of another version on reading.
struct PipefillBytecodeInterface : public BytecodeDialectInterface {
  explicit PipefillBytecodeInterface(Dialect *dialect) : BytecodeDialectInterface(dialect) {}
  void writeVersion(DialectBytecodeWriter &writer) const override {
    writer.writeVarInt(kBytecodeVersion);
  }
  std::unique_ptr<DialectVersion> readVersion(DialectBytecodeReader &reader) const override {
    uint64_t version;
    if (failed(reader.readVarInt(version)))
      return nullptr;
    if (version != kBytecodeVersion) {
      reader.emitError() << "pipefill bytecode format version " << version
                         << " is not the one this build reads (" << kBytecodeVersion
                         << "); write the file again with this build's tools";
      return nullptr;
    }
    return std::make_unique<PipefillBytecodeVersion>(version);
  }
};
} // namespace

LogicalResult pipefill::checkBytecodeVersion(DialectBytecodeReader &reader) {
  if (succeeded(reader.getDialectVersion<PipefillDialect>()))
    return success(); // readVersion accepted it
  return reader.emitError()
         << "this pipefill bytecode has no format version: it was written by a build "
            "before versioning, whose native properties this build would misread; "
            "write the file again with this build's tools";
}

void PipefillDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/PipefillOps.cpp.inc"
      >();
  addInterfaces<PipefillBytecodeInterface>();
}
