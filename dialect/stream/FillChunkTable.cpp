//===- FillChunkTable.cpp - pfstream.fill_chunks' rows --------------------===//
#include "dialect/stream/FillChunkTable.h"

#include "mlir/Bytecode/BytecodeImplementation.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;

namespace pipefill::pfstream {

bool FillChunkRow::operator==(const FillChunkRow &o) const {
  return job == o.job && layerBegin == o.layerBegin && layerEnd == o.layerEnd &&
         batch == o.batch && sampleBegin == o.sampleBegin &&
         iterationOffset == o.iterationOffset && weightsStreamed == o.weightsStreamed &&
         activationsOnHost == o.activationsOnHost &&
         llvm::bit_cast<uint64_t>(plannedUs) == llvm::bit_cast<uint64_t>(o.plannedUs) &&
         peakBytes == o.peakBytes && period == o.period && phase == o.phase;
}

std::string checkFillChunkRow(const FillChunkRow &r) {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (!r.job)
    os << "names no fill job";
  else if (r.layerBegin < 0 || r.batch < 0 || r.sampleBegin < 0 || r.peakBytes < 0 ||
           r.phase < 0)
    os << "has a negative layer, batch, sample, byte count or phase";
  else if (r.period < 1)
    os << "has period " << r.period << "; it must be at least 1";
  else if (r.phase >= r.period)
    os << "has phase " << r.phase << " outside its period " << r.period;
  else if (!(std::isfinite(r.plannedUs) && !(r.plannedUs < 0)))
    os << "planned must be a finite number >= 0 (got " << llvm::format("%g", r.plannedUs)
       << ")";
  return out;
}

//===----------------------------------------------------------------------===//
// Attributes (the generic form)
//===----------------------------------------------------------------------===//

Attribute fillChunkTableToAttribute(MLIRContext *ctx, const FillChunkTable &table) {
  Builder b(ctx);
  SmallVector<Attribute> rows;
  rows.reserve(table.size());
  for (const FillChunkRow &r : table) {
    SmallVector<NamedAttribute, 12> fields = {
        b.getNamedAttr("job", r.job ? Attribute(r.job) : b.getUnitAttr()),
        b.getNamedAttr("layers", b.getI64IntegerAttr(r.layerBegin)),
        b.getNamedAttr("to", b.getI64IntegerAttr(r.layerEnd)),
        b.getNamedAttr("batch", b.getI64IntegerAttr(r.batch)),
        b.getNamedAttr("samples", b.getI64IntegerAttr(r.sampleBegin)),
        b.getNamedAttr("offset", b.getI64IntegerAttr(r.iterationOffset)),
        b.getNamedAttr("planned", b.getF64FloatAttr(r.plannedUs)),
        b.getNamedAttr("peak", b.getI64IntegerAttr(r.peakBytes)),
        b.getNamedAttr("period", b.getI64IntegerAttr(r.period)),
        b.getNamedAttr("phase", b.getI64IntegerAttr(r.phase))};
    if (r.weightsStreamed)
      fields.push_back(b.getNamedAttr("weights_streamed", b.getUnitAttr()));
    if (r.activationsOnHost)
      fields.push_back(b.getNamedAttr("activations_on_host", b.getUnitAttr()));
    rows.push_back(b.getDictionaryAttr(fields));
  }
  return b.getArrayAttr(rows);
}

LogicalResult
fillChunkTableFromAttribute(FillChunkTable &table, Attribute attr,
                            llvm::function_ref<InFlightDiagnostic()> emitError) {
  auto fail = [&](const Twine &what) {
    if (emitError)
      emitError() << "chunks: " << what;
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
    FillChunkRow r;
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
    r.job = dyn_cast_or_null<FlatSymbolRefAttr>(dict.get("job"));
    if (!r.job)
      return fail("a chunk's 'job' must be a flat symbol reference");
    auto planned = dyn_cast_or_null<FloatAttr>(dict.get("planned"));
    if (!planned || !planned.getType().isF64())
      return fail("a chunk's 'planned' must be an f64");
    r.plannedUs = planned.getValueAsDouble();
    r.weightsStreamed = dict.contains("weights_streamed");
    r.activationsOnHost = dict.contains("activations_on_host");
    if (!i64("layers", r.layerBegin, true) || !i64("to", r.layerEnd, true) ||
        !i64("batch", r.batch, true) || !i64("samples", r.sampleBegin, true) ||
        !i64("offset", r.iterationOffset, true) || !i64("peak", r.peakBytes, true) ||
        !i64("period", r.period, false) || !i64("phase", r.phase, false))
      return failure();
    table.push_back(r);
  }
  return success();
}

llvm::hash_code hashFillChunkTable(const FillChunkTable &table) {
  llvm::hash_code h = llvm::hash_value(table.size());
  for (const FillChunkRow &r : table)
    h = llvm::hash_combine(h, r.job, r.layerBegin, r.layerEnd, r.batch, r.sampleBegin,
                           r.iterationOffset, r.weightsStreamed, r.activationsOnHost,
                           llvm::bit_cast<uint64_t>(r.plannedUs), r.peakBytes, r.period,
                           r.phase);
  return h;
}

//===----------------------------------------------------------------------===//
// Bytecode: a count, then per chunk the job, its location and its fields as
// varints (the planned time by its bits, the two flags in one varint).
//===----------------------------------------------------------------------===//

void writeFillChunkTable(DialectBytecodeWriter &writer, const FillChunkTable &table) {
  writer.writeVarInt(table.size());
  for (const FillChunkRow &r : table) {
    writer.writeAttribute(r.job);
    writer.writeOptionalAttribute(r.loc);
    for (int64_t v : {r.layerBegin, r.layerEnd, r.batch, r.sampleBegin, r.iterationOffset,
                      r.peakBytes, r.period, r.phase})
      writer.writeSignedVarInt(v);
    writer.writeVarInt(uint64_t(r.weightsStreamed) | uint64_t(r.activationsOnHost) << 1);
    writer.writeVarInt(llvm::bit_cast<uint64_t>(r.plannedUs));
  }
}

LogicalResult readFillChunkTable(DialectBytecodeReader &reader, FillChunkTable &table) {
  uint64_t size;
  if (failed(reader.readVarInt(size)))
    return failure();
  table.clear();
  for (uint64_t i = 0; i < size; ++i) {
    FillChunkRow r;
    Attribute loc;
    uint64_t flags, planned;
    if (failed(reader.readAttribute(r.job)) || failed(reader.readOptionalAttribute(loc)))
      return failure();
    for (int64_t *v : {&r.layerBegin, &r.layerEnd, &r.batch, &r.sampleBegin,
                       &r.iterationOffset, &r.peakBytes, &r.period, &r.phase})
      if (failed(reader.readSignedVarInt(*v)))
        return failure();
    if (failed(reader.readVarInt(flags)) || failed(reader.readVarInt(planned)))
      return failure();
    if (flags > 3)
      return reader.emitError("chunks: unknown flags ") << flags;
    r.loc = dyn_cast_or_null<LocationAttr>(loc);
    r.weightsStreamed = flags & 1;
    r.activationsOnHost = flags & 2;
    r.plannedUs = llvm::bit_cast<double>(planned);
    table.push_back(r);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// custom<FillChunkTable>
//===----------------------------------------------------------------------===//

namespace {
ParseResult parseRow(OpAsmParser &parser, FillChunkRow &r) {
  r.loc = parser.getEncodedSourceLoc(parser.getCurrentLocation());
  StringAttr job;
  if (parser.parseSymbolName(job) || parser.parseKeyword("layers") ||
      parser.parseInteger(r.layerBegin) || parser.parseKeyword("to") ||
      parser.parseInteger(r.layerEnd) || parser.parseKeyword("batch") ||
      parser.parseInteger(r.batch) || parser.parseKeyword("samples") ||
      parser.parseInteger(r.sampleBegin) || parser.parseKeyword("offset") ||
      parser.parseInteger(r.iterationOffset) || parser.parseKeyword("planned") ||
      parser.parseFloat(r.plannedUs) || parser.parseKeyword("peak") ||
      parser.parseInteger(r.peakBytes))
    return failure();
  r.job = FlatSymbolRefAttr::get(job);
  // The optional fields, in this order.
  if (succeeded(parser.parseOptionalKeyword("weights"))) {
    if (parser.parseKeyword("streamed"))
      return failure();
    r.weightsStreamed = true;
  }
  if (succeeded(parser.parseOptionalKeyword("acts"))) {
    if (parser.parseKeyword("host"))
      return failure();
    r.activationsOnHost = true;
  }
  if (succeeded(parser.parseOptionalKeyword("period")) && parser.parseInteger(r.period))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("phase")) && parser.parseInteger(r.phase))
    return failure();
  return success();
}
} // namespace

ParseResult parseFillChunkTable(OpAsmParser &parser, FillChunkTable &table) {
  table.clear();
  return parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, [&]() {
    table.emplace_back();
    return parseRow(parser, table.back());
  });
}

void printFillChunkTable(OpAsmPrinter &p, Operation *, ArrayRef<FillChunkRow> table) {
  p << "[";
  p.increaseIndent();
  for (size_t i = 0; i < table.size(); ++i) {
    const FillChunkRow &r = table[i];
    p.printNewline();
    p << r.job << " layers " << r.layerBegin << " to " << r.layerEnd << " batch " << r.batch
      << " samples " << r.sampleBegin << " offset " << r.iterationOffset << " planned ";
    p.printFloat(llvm::APFloat(r.plannedUs));
    p << " peak " << r.peakBytes;
    if (r.weightsStreamed)
      p << " weights streamed";
    if (r.activationsOnHost)
      p << " acts host";
    if (r.period != 1)
      p << " period " << r.period;
    if (r.phase != 0)
      p << " phase " << r.phase;
    if (i + 1 < table.size())
      p << ",";
  }
  p.decreaseIndent();
  if (!table.empty())
    p.printNewline();
  p << "]";
}

//===----------------------------------------------------------------------===//
// Planned starts
//===----------------------------------------------------------------------===//

namespace {
bool validStart(double v) { return std::isfinite(v) && !(v < 0); }
} // namespace

LogicalResult plannedStartFromAttribute(double &start, Attribute attr,
                                        llvm::function_ref<InFlightDiagnostic()> emitError) {
  auto v = dyn_cast<FloatAttr>(attr);
  if (!v || !v.getType().isF64() || !validStart(v.getValueAsDouble())) {
    if (emitError)
      emitError() << "planned_start_us must be a finite f64 >= 0";
    return failure();
  }
  start = v.getValueAsDouble();
  return success();
}

ParseResult parsePlannedStart(OpAsmParser &parser, double &start) {
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseFloat(start))
    return failure();
  if (!validStart(start))
    return parser.emitError(loc) << "planned start must be a finite number >= 0 (got "
                                 << llvm::formatv("{0}", llvm::format("%g", start)).str()
                                 << ")";
  return success();
}

void printPlannedStart(OpAsmPrinter &p, Operation *, double start) {
  p.printFloat(llvm::APFloat(start));
}

} // namespace pipefill::pfstream
