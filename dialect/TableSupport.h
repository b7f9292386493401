//===- TableSupport.h - Reading native table properties ---------*- C++ -*-===//
//
// What the tables kept as native properties (FillTable, FillChunkTable)
// share: the list syntax (`[` rows, one per line `]`), the generic form (an
// array of one dictionary per row, read with the first problem reported
// under the property's name) and the bytecode framing (a count, then the
// rows). Each table supplies how one row prints, parses, converts and
// serializes.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_DIALECT_TABLESUPPORT_H
#define PIPEFILL_DIALECT_TABLESUPPORT_H

#include "mlir/Bytecode/BytecodeImplementation.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"

#include <initializer_list>
#include <limits>
#include <vector>

namespace pipefill {

/// Reads an array of dictionaries: rows() checks the shape, then each row's
/// fields by name. A reader that failed has reported why (when it can) and
/// keeps failing.
class TableReader {
public:
  TableReader(llvm::StringRef property,
              llvm::function_ref<mlir::InFlightDiagnostic()> emitError)
      : property(property), emitError(emitError) {}

  /// The rows of `attr`, or null (reported) when it is not an array of
  /// dictionaries.
  mlir::ArrayAttr rows(mlir::Attribute attr) {
    auto array = llvm::dyn_cast<mlir::ArrayAttr>(attr);
    if (!array || !llvm::all_of(array, [](mlir::Attribute a) {
          return llvm::isa<mlir::DictionaryAttr>(a);
        })) {
      fail("expected an array of dictionaries");
      return {};
    }
    return array;
  }

  /// Field `name` of `row` as an i64 / f64; a missing optional field keeps
  /// `out`. False (reported) on a missing required field or a wrong type.
  bool i64(mlir::DictionaryAttr row, llvm::StringRef name, int64_t &out, bool required) {
    auto v = field<mlir::IntegerAttr>(row, name, required, "an i64");
    if (v && !v.getType().isSignlessInteger(64))
      return fail("'" + name + "' must be an i64");
    if (v)
      out = v.getInt();
    return ok;
  }
  /// An i64 field whose value must fit 32 bits.
  bool i32(mlir::DictionaryAttr row, llvm::StringRef name, int32_t &out, bool required) {
    int64_t wide = out;
    if (!i64(row, name, wide, required))
      return false;
    if (wide < std::numeric_limits<int32_t>::min() || wide > std::numeric_limits<int32_t>::max())
      return fail("'" + name + "' is " + llvm::Twine(wide) + ", beyond 32 bits");
    out = static_cast<int32_t>(wide);
    return ok;
  }
  bool f64(mlir::DictionaryAttr row, llvm::StringRef name, double &out, bool required) {
    auto v = field<mlir::FloatAttr>(row, name, required, "an f64");
    if (v && !v.getType().isF64())
      return fail("'" + name + "' must be an f64");
    if (v)
      out = v.getValueAsDouble();
    return ok;
  }
  /// Field `name` of `row` as attribute type T (required).
  template <typename T> T get(mlir::DictionaryAttr row, llvm::StringRef name, const char *what) {
    return field<T>(row, name, /*required=*/true, what);
  }

  /// Reports `what` (once) and fails.
  bool fail(const llvm::Twine &what) {
    if (ok && emitError)
      emitError() << property << ": " << what;
    ok = false;
    return false;
  }
  bool succeeded() const { return ok; }

private:
  template <typename T>
  T field(mlir::DictionaryAttr row, llvm::StringRef name, bool required, const char *what) {
    mlir::Attribute a = row.get(name);
    if (!a) {
      if (required)
        fail("a chunk has no '" + name + "'");
      return {};
    }
    auto v = llvm::dyn_cast<T>(a);
    if (!v)
      fail("'" + name + "' must be " + what);
    return v;
  }

  llvm::StringRef property;
  llvm::function_ref<mlir::InFlightDiagnostic()> emitError;
  bool ok = true;
};

/// The rows of the generic form: each row's job, then readRow(read, row,
/// out) for the rest (false: failed, reported through `read`).
template <typename Row, typename ReadRow>
mlir::LogicalResult rowsFromAttribute(mlir::Attribute attr, std::vector<Row> &table,
                                      llvm::StringRef property,
                                      llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                                      ReadRow readRow) {
  TableReader read(property, emitError);
  mlir::ArrayAttr rows = read.rows(attr);
  if (!rows)
    return mlir::failure();
  table.clear();
  table.reserve(rows.size());
  for (auto row : rows.getAsRange<mlir::DictionaryAttr>()) {
    Row out;
    out.job = read.get<mlir::FlatSymbolRefAttr>(row, "job", "a flat symbol reference");
    if (!read.succeeded() || !readRow(read, row, out))
      return mlir::failure();
    table.push_back(out);
  }
  return mlir::success();
}

/// `[` the rows, comma-separated, one per line `]` (`[]` when empty).
template <typename Row, typename PrintRow>
void printRows(mlir::OpAsmPrinter &p, llvm::ArrayRef<Row> table, PrintRow printRow) {
  p << "[";
  p.increaseIndent();
  for (size_t i = 0; i < table.size(); ++i) {
    p.printNewline();
    printRow(table[i]);
    if (i + 1 < table.size())
      p << ",";
  }
  p.decreaseIndent();
  if (!table.empty())
    p.printNewline();
  p << "]";
}

/// What printRows prints; each row starts where the parser stands, which
/// becomes its location.
template <typename Row, typename ParseRow>
mlir::ParseResult parseRows(mlir::OpAsmParser &parser, std::vector<Row> &table,
                            ParseRow parseRow) {
  table.clear();
  return parser.parseCommaSeparatedList(mlir::OpAsmParser::Delimiter::Square, [&]() {
    table.emplace_back();
    table.back().loc = parser.getEncodedSourceLoc(parser.getCurrentLocation());
    return parseRow(table.back());
  });
}

/// The generic form: one dictionary per row, from fieldsOf(row, builder).
template <typename Row, typename Fields>
mlir::Attribute rowsToAttribute(mlir::MLIRContext *ctx, const std::vector<Row> &table,
                                Fields fieldsOf) {
  mlir::Builder b(ctx);
  llvm::SmallVector<mlir::Attribute> rows;
  rows.reserve(table.size());
  for (const Row &row : table)
    rows.push_back(b.getDictionaryAttr(fieldsOf(row, b)));
  return b.getArrayAttr(rows);
}

/// Bytecode: the count, then per row its job, its location and what
/// writeRow writes.
template <typename Row, typename WriteRow>
void writeRows(mlir::DialectBytecodeWriter &writer, const std::vector<Row> &table,
               WriteRow writeRow) {
  writer.writeVarInt(table.size());
  for (const Row &row : table) {
    writer.writeAttribute(row.job);
    writer.writeOptionalAttribute(row.loc);
    writeRow(row);
  }
}

/// What writeRows wrote; readRow(row) reads the rest of a row.
template <typename Row, typename ReadRow>
mlir::LogicalResult readRows(mlir::DialectBytecodeReader &reader, std::vector<Row> &table,
                             ReadRow readRow) {
  uint64_t size;
  if (mlir::failed(reader.readVarInt(size)))
    return mlir::failure();
  table.clear();
  for (uint64_t i = 0; i < size; ++i) {
    Row row;
    mlir::Attribute loc;
    if (mlir::failed(reader.readAttribute(row.job)) ||
        mlir::failed(reader.readOptionalAttribute(loc)) || mlir::failed(readRow(row)))
      return mlir::failure();
    row.loc = llvm::dyn_cast_or_null<mlir::LocationAttr>(loc);
    table.push_back(row);
  }
  return mlir::success();
}

/// Signed varints into each of `fields`, in order.
inline mlir::LogicalResult readSignedVarInts(mlir::DialectBytecodeReader &reader,
                                             std::initializer_list<int64_t *> fields) {
  for (int64_t *field : fields)
    if (mlir::failed(reader.readSignedVarInt(*field)))
      return mlir::failure();
  return mlir::success();
}

} // namespace pipefill

#endif // PIPEFILL_DIALECT_TABLESUPPORT_H
