//===- InstrTiming.cpp - The instructions' timing property ----------------===//
#include "dialect/InstrTiming.h"

#include "mlir/Bytecode/BytecodeImplementation.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/Format.h"

using namespace mlir;

namespace pipefill {

bool InstrTiming::operator==(const InstrTiming &o) const {
  // By bits, as attributes compare (NaN, the unset value, equals itself).
  return llvm::bit_cast<uint64_t>(startUs) == llvm::bit_cast<uint64_t>(o.startUs) &&
         llvm::bit_cast<uint64_t>(endUs) == llvm::bit_cast<uint64_t>(o.endUs) &&
         liveBytes == o.liveBytes;
}

std::string checkTiming(const InstrTiming &t) {
  std::string out;
  llvm::raw_string_ostream os(out);
  auto time = [&](const char *name, double v, bool set) {
    if (set && !(std::isfinite(v) && !(v < 0)))
      os << name << " must be a finite number >= 0 (got " << llvm::format("%g", v) << ")";
    return out.empty();
  };
  time("start", t.startUs, t.hasStart()) && time("end", t.endUs, t.hasEnd());
  return out;
}

Attribute timingToAttribute(MLIRContext *ctx, const InstrTiming &t) {
  Builder b(ctx);
  SmallVector<NamedAttribute, 3> fields;
  if (t.hasEnd())
    fields.push_back(b.getNamedAttr("end_us", b.getF64FloatAttr(t.endUs)));
  if (t.hasLive())
    fields.push_back(b.getNamedAttr("live_bytes", b.getI64IntegerAttr(t.liveBytes)));
  if (t.hasStart())
    fields.push_back(b.getNamedAttr("start_us", b.getF64FloatAttr(t.startUs)));
  return b.getDictionaryAttr(fields);
}

LogicalResult timingFromAttribute(InstrTiming &t, Attribute attr,
                                  llvm::function_ref<InFlightDiagnostic()> emitError) {
  auto fail = [&](const Twine &what) {
    if (emitError)
      emitError() << "timing: " << what;
    return failure();
  };
  auto dict = dyn_cast<DictionaryAttr>(attr);
  if (!dict)
    return fail("expected a dictionary");
  t = InstrTiming();
  for (NamedAttribute field : dict) {
    StringRef name = field.getName().getValue();
    if (name == "start_us" || name == "end_us") {
      auto v = dyn_cast<FloatAttr>(field.getValue());
      if (!v || !v.getType().isF64())
        return fail("'" + name + "' must be an f64");
      (name == "start_us" ? t.startUs : t.endUs) = v.getValueAsDouble();
    } else if (name == "live_bytes") {
      auto v = dyn_cast<IntegerAttr>(field.getValue());
      if (!v || !v.getType().isSignlessInteger(64) || v.getInt() < 0)
        return fail("'live_bytes' must be an i64 >= 0");
      t.liveBytes = v.getInt();
    } else {
      return fail("unknown key '" + name + "'");
    }
  }
  return success();
}

llvm::hash_code hashTiming(const InstrTiming &t) {
  return llvm::hash_combine(llvm::bit_cast<uint64_t>(t.startUs),
                            llvm::bit_cast<uint64_t>(t.endUs), t.liveBytes);
}

void writeTiming(DialectBytecodeWriter &writer, const InstrTiming &t) {
  writer.writeVarInt(llvm::bit_cast<uint64_t>(t.startUs));
  writer.writeVarInt(llvm::bit_cast<uint64_t>(t.endUs));
  writer.writeSignedVarInt(t.liveBytes);
}

LogicalResult readTiming(DialectBytecodeReader &reader, InstrTiming &t) {
  uint64_t start, end;
  if (failed(reader.readVarInt(start)) || failed(reader.readVarInt(end)) ||
      failed(reader.readSignedVarInt(t.liveBytes)))
    return failure();
  t.startUs = llvm::bit_cast<double>(start);
  t.endUs = llvm::bit_cast<double>(end);
  return success();
}

ParseResult parseTiming(OpAsmParser &parser, InstrTiming &t) {
  t = InstrTiming();
  if (succeeded(parser.parseOptionalKeyword("start")) && parser.parseFloat(t.startUs))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("end")) && parser.parseFloat(t.endUs))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("live"))) {
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseInteger(t.liveBytes))
      return failure();
    if (t.liveBytes < 0)
      return parser.emitError(loc) << "live bytes must be >= 0";
  }
  return success();
}

void printTiming(OpAsmPrinter &p, Operation *, const InstrTiming &t) {
  if (t.hasStart()) {
    p << " start ";
    p.printFloat(llvm::APFloat(t.startUs));
  }
  if (t.hasEnd()) {
    p << " end ";
    p.printFloat(llvm::APFloat(t.endUs));
  }
  if (t.hasLive())
    p << " live " << t.liveBytes;
}

LogicalResult f64FromAttribute(double &storage, Attribute attr,
                               llvm::function_ref<InFlightDiagnostic()> emitError) {
  auto v = dyn_cast<FloatAttr>(attr);
  if (!v || !v.getType().isF64()) {
    if (emitError)
      emitError() << "expected an f64 attribute";
    return failure();
  }
  storage = v.getValueAsDouble();
  return success();
}

LogicalResult i64FromAttribute(int64_t &storage, Attribute attr,
                               llvm::function_ref<InFlightDiagnostic()> emitError) {
  auto v = dyn_cast<IntegerAttr>(attr);
  if (!v || !v.getType().isSignlessInteger(64)) {
    if (emitError)
      emitError() << "expected an i64 attribute";
    return failure();
  }
  storage = v.getInt();
  return success();
}

ParseResult parseF64(OpAsmParser &parser, double &value) { return parser.parseFloat(value); }

void printF64(OpAsmPrinter &p, Operation *, double value) { p.printFloat(llvm::APFloat(value)); }

ParseResult parseI64(OpAsmParser &parser, int64_t &value) { return parser.parseInteger(value); }

void printI64(OpAsmPrinter &p, Operation *, int64_t value) { p << value; }

} // namespace pipefill
