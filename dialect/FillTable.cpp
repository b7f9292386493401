//===- FillTable.cpp - pipefill.bubble's fill chunks ----------------------===//
#include "dialect/FillTable.h"
#include "dialect/PipefillOps.h"

#include "mlir/Bytecode/BytecodeImplementation.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace pipefill {

bool FillChunk::operator==(const FillChunk &o) const {
  // Times compared by their bits, as attributes would be (0.0 vs -0.0, NaN).
  auto same = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  return job == o.job && layerBegin == o.layerBegin && layerEnd == o.layerEnd &&
         batch == o.batch && sampleBegin == o.sampleBegin && weights == o.weights &&
         acts == o.acts && same(predictedUs, o.predictedUs) && peakBytes == o.peakBytes &&
         same(copyUs, o.copyUs) && iteration == o.iteration && repeat == o.repeat &&
         same(offsetUs, o.offsetUs);
}

namespace {
/// Finite and >= 0 (-0.0 included), as Pipefill_NonNegF64.
bool nonNegative(double v) { return std::isfinite(v) && !(v < 0); }
uint64_t bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
double fromBits(uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}
} // namespace

std::string checkFillChunk(const FillChunk &c) {
  std::string out;
  llvm::raw_string_ostream os(out);
  auto time = [&](const char *name, double v) {
    if (!nonNegative(v))
      os << name << " must be a finite number >= 0 (got " << llvm::format("%g", v) << ")";
    return out.empty();
  };
  if (!c.job)
    os << "names no fill job";
  else if (c.layerBegin < 0 || c.sampleBegin < 0 || c.peakBytes < 0 || c.iteration < 0)
    os << "has a negative layer, sample, byte count or iteration";
  else if (c.layerBegin >= c.layerEnd)
    os << "has an empty layer range [" << c.layerBegin << ", " << c.layerEnd << ")";
  else if (c.batch < 1 || c.repeat < 1)
    os << "must have a batch and a repeat count of at least 1 (got " << c.batch << " and "
       << c.repeat << ")";
  else if (time("time", c.predictedUs) && time("copy", c.copyUs))
    time("offset", c.offsetUs);
  return out;
}

//===----------------------------------------------------------------------===//
// Attributes (the generic form)
//===----------------------------------------------------------------------===//

Attribute fillTableToAttribute(MLIRContext *ctx, const FillTable &table) {
  Builder b(ctx);
  SmallVector<Attribute> rows;
  rows.reserve(table.size());
  for (const FillChunk &c : table) {
    SmallVector<NamedAttribute, 13> fields = {
        b.getNamedAttr("job", c.job ? Attribute(c.job) : b.getUnitAttr()),
        b.getNamedAttr("layers", b.getI64IntegerAttr(c.layerBegin)),
        b.getNamedAttr("to", b.getI64IntegerAttr(c.layerEnd)),
        b.getNamedAttr("batch", b.getI64IntegerAttr(c.batch)),
        b.getNamedAttr("samples", b.getI64IntegerAttr(c.sampleBegin)),
        b.getNamedAttr("weights", WeightPlacementAttr::get(ctx, c.weights)),
        b.getNamedAttr("acts", ActPlacementAttr::get(ctx, c.acts)),
        b.getNamedAttr("time", b.getF64FloatAttr(c.predictedUs)),
        b.getNamedAttr("mem", b.getI64IntegerAttr(c.peakBytes)),
        b.getNamedAttr("copy", b.getF64FloatAttr(c.copyUs)),
        b.getNamedAttr("iteration", b.getI64IntegerAttr(c.iteration)),
        b.getNamedAttr("repeat", b.getI64IntegerAttr(c.repeat)),
        b.getNamedAttr("offset", b.getF64FloatAttr(c.offsetUs))};
    rows.push_back(b.getDictionaryAttr(fields));
  }
  return b.getArrayAttr(rows);
}

LogicalResult fillTableFromAttribute(FillTable &table, Attribute attr,
                                     llvm::function_ref<InFlightDiagnostic()> emitError) {
  auto fail = [&](const Twine &what) {
    if (emitError)
      emitError() << "fills: " << what;
    return failure();
  };
  auto rows = dyn_cast<ArrayAttr>(attr);
  if (!rows)
    return fail("expected an array of dictionaries");
  table.clear();
  table.reserve(rows.size());
  for (Attribute row : rows) {
    auto dict = dyn_cast<DictionaryAttr>(row);
    if (!dict)
      return fail("expected an array of dictionaries");
    FillChunk c;
    auto i64 = [&](StringRef name, int64_t &out, bool required) {
      Attribute a = dict.get(name);
      if (!a)
        return !required || succeeded(fail("a chunk has no '" + name + "'"));
      auto v = dyn_cast<IntegerAttr>(a);
      if (!v || !v.getType().isSignlessInteger(64))
        return succeeded(fail("'" + name + "' must be an i64"));
      out = v.getInt();
      return true;
    };
    auto f64 = [&](StringRef name, double &out, bool required) {
      Attribute a = dict.get(name);
      if (!a)
        return !required || succeeded(fail("a chunk has no '" + name + "'"));
      auto v = dyn_cast<FloatAttr>(a);
      if (!v || !v.getType().isF64())
        return succeeded(fail("'" + name + "' must be an f64"));
      out = v.getValueAsDouble();
      return true;
    };
    c.job = dyn_cast_or_null<FlatSymbolRefAttr>(dict.get("job"));
    if (!c.job)
      return fail("a chunk's 'job' must be a flat symbol reference");
    auto weights = dyn_cast_or_null<WeightPlacementAttr>(dict.get("weights"));
    auto acts = dyn_cast_or_null<ActPlacementAttr>(dict.get("acts"));
    if (!weights || !acts)
      return fail("a chunk needs 'weights' and 'acts' placements");
    c.weights = weights.getValue();
    c.acts = acts.getValue();
    if (!i64("layers", c.layerBegin, true) || !i64("to", c.layerEnd, true) ||
        !i64("batch", c.batch, true) || !i64("samples", c.sampleBegin, true) ||
        !f64("time", c.predictedUs, true) || !i64("mem", c.peakBytes, true) ||
        !f64("copy", c.copyUs, false) || !i64("iteration", c.iteration, false) ||
        !i64("repeat", c.repeat, false) || !f64("offset", c.offsetUs, false))
      return failure();
    table.push_back(c);
  }
  return success();
}


//===----------------------------------------------------------------------===//
// Bytecode: a count, then per chunk the job, its location and its fields as
// varints (times by their bits).
//===----------------------------------------------------------------------===//

llvm::hash_code hashFillTable(const FillTable &table) {
  llvm::hash_code h = llvm::hash_value(table.size());
  for (const FillChunk &c : table)
    h = llvm::hash_combine(h, c.job, c.layerBegin, c.layerEnd, c.batch, c.sampleBegin,
                           static_cast<uint32_t>(c.weights), static_cast<uint32_t>(c.acts),
                           bits(c.predictedUs), c.peakBytes, bits(c.copyUs), c.iteration,
                           c.repeat, bits(c.offsetUs));
  return h;
}

void writeFillTable(DialectBytecodeWriter &writer, const FillTable &table) {
  writer.writeVarInt(table.size());
  for (const FillChunk &c : table) {
    writer.writeAttribute(c.job);
    writer.writeOptionalAttribute(c.loc);
    for (int64_t v : {c.layerBegin, c.layerEnd, c.batch, c.sampleBegin, c.peakBytes,
                      c.iteration, c.repeat})
      writer.writeSignedVarInt(v);
    writer.writeVarInt(static_cast<uint64_t>(c.weights));
    writer.writeVarInt(static_cast<uint64_t>(c.acts));
    for (double v : {c.predictedUs, c.copyUs, c.offsetUs})
      writer.writeVarInt(bits(v));
  }
}

LogicalResult readFillTable(DialectBytecodeReader &reader, FillTable &table) {
  uint64_t size;
  if (failed(reader.readVarInt(size)))
    return failure();
  table.clear();
  for (uint64_t i = 0; i < size; ++i) {
    FillChunk c;
    uint64_t weights, acts, time, copy, offset;
    Attribute loc;
    if (failed(reader.readAttribute(c.job)) || failed(reader.readOptionalAttribute(loc)) ||
        failed(reader.readSignedVarInt(c.layerBegin)) ||
        failed(reader.readSignedVarInt(c.layerEnd)) ||
        failed(reader.readSignedVarInt(c.batch)) ||
        failed(reader.readSignedVarInt(c.sampleBegin)) ||
        failed(reader.readSignedVarInt(c.peakBytes)) ||
        failed(reader.readSignedVarInt(c.iteration)) ||
        failed(reader.readSignedVarInt(c.repeat)) || failed(reader.readVarInt(weights)) ||
        failed(reader.readVarInt(acts)) || failed(reader.readVarInt(time)) ||
        failed(reader.readVarInt(copy)) || failed(reader.readVarInt(offset)))
      return failure();
    if (!symbolizeWeightPlacement(static_cast<uint32_t>(weights)) ||
        !symbolizeActPlacement(static_cast<uint32_t>(acts)))
      return reader.emitError("fills: unknown weight or activation placement");
    c.loc = dyn_cast_or_null<LocationAttr>(loc);
    c.weights = static_cast<WeightPlacement>(weights);
    c.acts = static_cast<ActPlacement>(acts);
    c.predictedUs = fromBits(time);
    c.copyUs = fromBits(copy);
    c.offsetUs = fromBits(offset);
    table.push_back(c);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// custom<FillTable>
//===----------------------------------------------------------------------===//

namespace {
ParseResult parseChunk(OpAsmParser &parser, FillChunk &c) {
  c.loc = parser.getEncodedSourceLoc(parser.getCurrentLocation());
  StringAttr job;
  StringRef weights, acts;
  SMLoc weightsLoc, actsLoc;
  if (parser.parseSymbolName(job) || parser.parseKeyword("layers") ||
      parser.parseInteger(c.layerBegin) || parser.parseKeyword("to") ||
      parser.parseInteger(c.layerEnd) || parser.parseKeyword("batch") ||
      parser.parseInteger(c.batch) || parser.parseKeyword("samples") ||
      parser.parseInteger(c.sampleBegin) || parser.parseKeyword("weights"))
    return failure();
  weightsLoc = parser.getCurrentLocation();
  if (parser.parseKeyword(&weights) || parser.parseKeyword("acts"))
    return failure();
  actsLoc = parser.getCurrentLocation();
  if (parser.parseKeyword(&acts) || parser.parseKeyword("time") ||
      parser.parseFloat(c.predictedUs) || parser.parseKeyword("mem") ||
      parser.parseInteger(c.peakBytes))
    return failure();
  c.job = FlatSymbolRefAttr::get(job);
  std::optional<WeightPlacement> w = symbolizeWeightPlacement(weights);
  if (!w)
    return parser.emitError(weightsLoc) << "expected 'resident' or 'streamed'";
  std::optional<ActPlacement> a = symbolizeActPlacement(acts);
  if (!a)
    return parser.emitError(actsLoc) << "expected 'device' or 'host'";
  c.weights = *w;
  c.acts = *a;
  // The optional fields, in this order.
  if (succeeded(parser.parseOptionalKeyword("copy")) && parser.parseFloat(c.copyUs))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("iteration")) && parser.parseInteger(c.iteration))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("repeat")) && parser.parseInteger(c.repeat))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("offset")) && parser.parseFloat(c.offsetUs))
    return failure();
  return success();
}
} // namespace

ParseResult parseFillTable(OpAsmParser &parser, FillTable &table) {
  table.clear();
  if (failed(parser.parseOptionalKeyword("fills")))
    return success();
  return parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, [&]() {
    table.emplace_back();
    return parseChunk(parser, table.back());
  });
}

void printFillTable(OpAsmPrinter &p, Operation *, ArrayRef<FillChunk> table) {
  if (table.empty())
    return;
  p << " fills [";
  p.increaseIndent();
  for (size_t i = 0; i < table.size(); ++i) {
    const FillChunk &c = table[i];
    p.printNewline();
    p << c.job << " layers " << c.layerBegin << " to " << c.layerEnd << " batch " << c.batch
      << " samples " << c.sampleBegin << " weights " << stringifyWeightPlacement(c.weights)
      << " acts " << stringifyActPlacement(c.acts) << " time ";
    p.printFloat(llvm::APFloat(c.predictedUs));
    p << " mem " << c.peakBytes;
    if (bits(c.copyUs) != 0) {
      p << " copy ";
      p.printFloat(llvm::APFloat(c.copyUs));
    }
    if (c.iteration != 0)
      p << " iteration " << c.iteration;
    if (c.repeat != 1)
      p << " repeat " << c.repeat;
    if (bits(c.offsetUs) != 0) {
      p << " offset ";
      p.printFloat(llvm::APFloat(c.offsetUs));
    }
    if (i + 1 < table.size())
      p << ",";
  }
  p.decreaseIndent();
  p.printNewline();
  p << "]";
}

} // namespace pipefill
