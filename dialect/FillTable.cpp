//===- FillTable.cpp - pipefill.bubble's fill chunks ----------------------===//
#include "dialect/FillTable.h"
#include "dialect/PipefillOps.h"
#include "dialect/TableSupport.h"
#include "support/Limits.h"

#include "mlir/Bytecode/BytecodeImplementation.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <cstring>

using namespace mlir;

// What the field order in FillChunk is for (on LP64 targets).
static_assert(sizeof(void *) != 8 || sizeof(pipefill::FillChunk) == 88,
              "FillChunk is laid out to take 88 bytes");

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
  else if (c.batch > pipefill::kMaxFillBatch)
    os << "has a batch of " << c.batch << " samples; the runtime runs at most "
       << pipefill::kMaxFillBatch;
  else if (c.iteration > pipefill::kMaxFillPrefix + pipefill::kMaxFillPeriod)
    os << "is in iteration " << c.iteration << " of its plan, past any prefix and period ("
       << pipefill::kMaxFillPrefix + pipefill::kMaxFillPeriod << ")";
  else if (time("time", c.predictedUs) && time("copy", c.copyUs))
    time("offset", c.offsetUs);
  return out;
}

//===----------------------------------------------------------------------===//
// Attributes (the generic form)
//===----------------------------------------------------------------------===//

Attribute fillTableToAttribute(MLIRContext *ctx, const FillTable &table) {
  return rowsToAttribute(ctx, table, [&](const FillChunk &c, Builder &b) {
    return SmallVector<NamedAttribute, 13>{
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
  });
}

LogicalResult fillTableFromAttribute(FillTable &table, Attribute attr,
                                     llvm::function_ref<InFlightDiagnostic()> emitError) {
  return rowsFromAttribute(attr, table, "fills", emitError,
                           [](TableReader &read, DictionaryAttr row, FillChunk &c) {
    auto weights = read.get<WeightPlacementAttr>(row, "weights", "a weight placement");
    auto acts = read.get<ActPlacementAttr>(row, "acts", "an activation placement");
    if (!read.succeeded())
      return false;
    c.weights = weights.getValue();
    c.acts = acts.getValue();
    return read.i32(row, "layers", c.layerBegin, true) &&
           read.i32(row, "to", c.layerEnd, true) &&
           read.i32(row, "batch", c.batch, true) &&
           read.i64(row, "samples", c.sampleBegin, true) &&
           read.f64(row, "time", c.predictedUs, true) &&
           read.i64(row, "mem", c.peakBytes, true) &&
           read.f64(row, "copy", c.copyUs, false) &&
           read.i32(row, "iteration", c.iteration, false) &&
           read.i32(row, "repeat", c.repeat, false) &&
           read.f64(row, "offset", c.offsetUs, false);
  });
}

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
  writeRows(writer, table, [&](const FillChunk &c) {
    for (int64_t v : {int64_t(c.layerBegin), int64_t(c.layerEnd), int64_t(c.batch),
                      c.sampleBegin, c.peakBytes, int64_t(c.iteration), int64_t(c.repeat)})
      writer.writeSignedVarInt(v);
    writer.writeVarInt(static_cast<uint64_t>(c.weights));
    writer.writeVarInt(static_cast<uint64_t>(c.acts));
    for (double v : {c.predictedUs, c.copyUs, c.offsetUs})
      writer.writeVarInt(bits(v));
  });
}

LogicalResult readFillTable(DialectBytecodeReader &reader, FillTable &table) {
  return readRows(reader, table, [&](FillChunk &c) -> LogicalResult {
    uint64_t weights, acts, time, copy, offset;
    int64_t layerBegin, layerEnd, batch, iteration, repeat;
    if (failed(readSignedVarInts(reader, {&layerBegin, &layerEnd, &batch, &c.sampleBegin,
                                          &c.peakBytes, &iteration, &repeat})) ||
        failed(reader.readVarInt(weights)) || failed(reader.readVarInt(acts)) ||
        failed(reader.readVarInt(time)) || failed(reader.readVarInt(copy)) ||
        failed(reader.readVarInt(offset)))
      return failure();
    for (auto [wide, narrow] : {std::pair{layerBegin, &c.layerBegin}, {layerEnd, &c.layerEnd},
                                {batch, &c.batch}, {iteration, &c.iteration},
                                {repeat, &c.repeat}}) {
      if (wide < std::numeric_limits<int32_t>::min() ||
          wide > std::numeric_limits<int32_t>::max())
        return reader.emitError("fills: a layer, batch, iteration or repeat count beyond 32 bits");
      *narrow = static_cast<int32_t>(wide);
    }
    if (!symbolizeWeightPlacement(static_cast<uint32_t>(weights)) ||
        !symbolizeActPlacement(static_cast<uint32_t>(acts)))
      return reader.emitError("fills: unknown weight or activation placement");
    c.weights = static_cast<WeightPlacement>(weights);
    c.acts = static_cast<ActPlacement>(acts);
    c.predictedUs = fromBits(time);
    c.copyUs = fromBits(copy);
    c.offsetUs = fromBits(offset);
    return success();
  });
}

//===----------------------------------------------------------------------===//
// custom<FillTable>
//===----------------------------------------------------------------------===//

namespace {
ParseResult parseChunk(OpAsmParser &parser, FillChunk &c) {
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
  return parseRows(parser, table, [&](FillChunk &c) { return parseChunk(parser, c); });
}

void printFillTable(OpAsmPrinter &p, Operation *, ArrayRef<FillChunk> table) {
  if (table.empty())
    return;
  p << " fills ";
  printRows(p, table, [&](const FillChunk &c) {
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
  });
}

} // namespace pipefill
