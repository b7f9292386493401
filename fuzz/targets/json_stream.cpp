// libFuzzer target: codegen/JsonStream.h (the torch trace import's reader) against
// llvm::json::parse of the whole text: the same answer, the same values, and for malformed text
// the same message at the same byte; valid text without a piece parsed twice. Aborts on any
// difference.
#include "codegen/JsonStream.h"
#include "support/JsonNesting.h"

#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct Rebuild : pipefill::JsonStreamHandler {
  void arrayBegins(size_t keyOffset) override {
    current = llvm::json::Array();
    isArray = keyOffset == npos;
    if (!isArray)
      object["traceEvents"] = llvm::json::Array();
  }
  void element(llvm::json::Value &&value, size_t, size_t) override {
    current.push_back(std::move(value));
    if (!isArray)
      object["traceEvents"] = llvm::json::Array(current);
  }
  void member(llvm::StringRef key, llvm::json::Value &&value, size_t) override {
    object[key.str()] = std::move(value);
  }
  bool isArray = false;
  llvm::json::Array current;
  llvm::json::Object object;
};

[[noreturn]] void differ(const char *what) {
  std::fprintf(stderr, "streamJson and llvm::json::parse differ: %s\n", what);
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  // llvm::json::parse recurses per level: the import refuses deep text first, so does this.
  if (pipefill::findTooDeepJson(std::string_view(text.data(), text.size())))
    return 0;
  Rebuild rebuilt;
  pipefill::JsonStreamError error;
  pipefill::JsonStreamStats stats;
  const bool ok = pipefill::streamJson(text, "traceEvents", rebuilt, error, &stats);
  llvm::Expected<llvm::json::Value> whole = llvm::json::parse(text);
  if (ok != bool(whole))
    differ(ok ? "only the stream accepts" : "only the parser accepts");
  if (whole) {
    // Valid text: the scanner found every piece's end (a miss costs a parse to the text's end).
    if (stats.reparsed != 0)
      differ("a valid piece was parsed twice");
    if (whole->getAsArray() && rebuilt.isArray &&
        !(llvm::json::Value(llvm::json::Array(rebuilt.current)) == *whole))
      differ("array values");
    if (whole->getAsObject() &&
        !(llvm::json::Value(llvm::json::Object(rebuilt.object)) == *whole))
      differ("object values");
    return 0;
  }
  std::string message;
  llvm::handleAllErrors(whole.takeError(),
                        [&](const llvm::ErrorInfoBase &e) { message = e.message(); });
  const std::string expected = "[" + std::to_string(error.line) + ":" +
                               std::to_string(error.column) +
                               ", byte=" + std::to_string(error.offset) + "]: " + error.message;
  if (message != expected)
    differ((message + " vs " + expected).c_str());
  return 0;
}
