//===- FillChunkTable.cpp - pfstream.fill_chunks' rows --------------------===//
#include "dialect/stream/FillChunkTable.h"
#include "dialect/TableSupport.h"

#include "mlir/Bytecode/BytecodeImplementation.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdint>

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
  // The StreamProgram's fields are 32 bits: a larger number would be cut to a different one.
  else if (r.batch > UINT32_MAX || r.layerEnd > UINT32_MAX || r.period > UINT32_MAX ||
           r.iterationOffset < INT32_MIN || r.iterationOffset > INT32_MAX)
    os << "has a batch, layer, period or offset beyond the StreamProgram's 32-bit fields";
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
  return rowsToAttribute(ctx, table, [](const FillChunkRow &r, Builder &b) {
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
    return fields;
  });
}

LogicalResult
fillChunkTableFromAttribute(FillChunkTable &table, Attribute attr,
                            llvm::function_ref<InFlightDiagnostic()> emitError) {
  return rowsFromAttribute(attr, table, "chunks", emitError,
                           [](TableReader &read, DictionaryAttr row, FillChunkRow &r) {
    r.weightsStreamed = row.contains("weights_streamed");
    r.activationsOnHost = row.contains("activations_on_host");
    return read.i64(row, "layers", r.layerBegin, true) &&
           read.i64(row, "to", r.layerEnd, true) &&
           read.i64(row, "batch", r.batch, true) &&
           read.i64(row, "samples", r.sampleBegin, true) &&
           read.i64(row, "offset", r.iterationOffset, true) &&
           read.f64(row, "planned", r.plannedUs, true) &&
           read.i64(row, "peak", r.peakBytes, true) &&
           read.i64(row, "period", r.period, false) &&
           read.i64(row, "phase", r.phase, false);
  });
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
  writeRows(writer, table, [&](const FillChunkRow &r) {
    for (int64_t v : {r.layerBegin, r.layerEnd, r.batch, r.sampleBegin, r.iterationOffset,
                      r.peakBytes, r.period, r.phase})
      writer.writeSignedVarInt(v);
    writer.writeVarInt(uint64_t(r.weightsStreamed) | uint64_t(r.activationsOnHost) << 1);
    writer.writeVarInt(llvm::bit_cast<uint64_t>(r.plannedUs));
  });
}

LogicalResult readFillChunkTable(DialectBytecodeReader &reader, FillChunkTable &table) {
  return readRows(reader, table, [&](FillChunkRow &r) -> LogicalResult {
    uint64_t flags, planned;
    if (failed(readSignedVarInts(reader, {&r.layerBegin, &r.layerEnd, &r.batch,
                                          &r.sampleBegin, &r.iterationOffset, &r.peakBytes,
                                          &r.period, &r.phase})) ||
        failed(reader.readVarInt(flags)) || failed(reader.readVarInt(planned)))
      return failure();
    if (flags > 3)
      return reader.emitError("chunks: unknown flags ") << flags;
    r.weightsStreamed = flags & 1;
    r.activationsOnHost = flags & 2;
    r.plannedUs = llvm::bit_cast<double>(planned);
    return success();
  });
}

//===----------------------------------------------------------------------===//
// custom<FillChunkTable>
//===----------------------------------------------------------------------===//

namespace {
ParseResult parseRow(OpAsmParser &parser, FillChunkRow &r) {
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
  return parseRows(parser, table, [&](FillChunkRow &r) { return parseRow(parser, r); });
}

void printFillChunkTable(OpAsmPrinter &p, Operation *, ArrayRef<FillChunkRow> table) {
  printRows(p, table, [&](const FillChunkRow &r) {
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
  });
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
