//===- JsonStream.h - one big JSON array, one element at a time -*- C++ -*-===//
//
// A torch profiler trace is one JSON object whose "traceEvents" array holds
// every event; llvm::json::parse of the whole file takes about 60 times the
// file's size (a 300 MB trace, 18 GB). streamJson reads the same text one
// piece at a time: a small scanner walks the top-level object (or array) and
// hands each element of the streamed array, and each other top-level member,
// to llvm::json::parse on its own, so the values alive at once are one
// element (or one member). It accepts exactly the texts llvm::json::parse
// accepts and refuses the others with llvm's message at llvm's position.
//
// The scanner finds where a piece ends by its first byte: a string at its
// closing quote (a backslash escapes the next byte), an array or object at
// its matching bracket outside strings, a number after its run of number
// characters, true/false/null after 4 or 5 bytes. Where that guess and the
// parser disagree (the piece is malformed, so the parser failed inside it),
// the piece is parsed again up to the text's end, which is what the whole
// document's parser saw from there: its error, and its end of a valid piece,
// are then llvm's own.
//
// llvm::json::parse recurses once per nesting level: callers refuse deep text
// first (support/JsonNesting.h); the scanner itself nests two levels.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_CODEGEN_JSONSTREAM_H
#define PIPEFILL_CODEGEN_JSONSTREAM_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <cstddef>
#include <string>

namespace pipefill {

/// Why and where JSON text is malformed, as llvm::json::ParseError says it:
/// the byte offset, its 1-based line and llvm's column (the bytes between the
/// line's start and the offset: 0 for the line's first byte).
struct JsonStreamError {
  size_t offset = 0;
  unsigned line = 1, column = 0;
  std::string message;
};

/// What streamJson hands over, in the text's order.
class JsonStreamHandler {
public:
  virtual ~JsonStreamHandler() = default;
  /// The streamed array begins: the offset of its key's opening quote, or
  /// `npos` when the document itself is an array.
  virtual void arrayBegins(size_t keyOffset) { (void)keyOffset; }
  /// One element of the streamed array; its text is [begin, end).
  virtual void element(llvm::json::Value &&value, size_t begin, size_t end) = 0;
  /// A member of the top-level object other than a streamed array (the
  /// streamed key too, when its value is no array), parsed whole.
  virtual void member(llvm::StringRef key, llvm::json::Value &&value, size_t keyOffset) {
    (void)key, (void)value, (void)keyOffset;
  }
  static constexpr size_t npos = llvm::StringRef::npos;
};

/// How the reading went, for tests and benchmarks: the pieces given to
/// llvm::json::parse, and those parsed again to the text's end because the
/// scanner's end was not the parser's (only malformed pieces, in valid text
/// none).
struct JsonStreamStats {
  size_t pieces = 0, reparsed = 0;
};

/// Reads JSON text `text`: the array of the top-level object's member(s)
/// named `streamedKey` (after llvm's unescaping), or the document when it is
/// an array, one element at a time; any other top-level member whole. Returns
/// false with `error` set where llvm::json::parse(text) would fail (the first
/// problem in the text's order; invalid UTF-8 anywhere first, as llvm checks
/// that before parsing); the handler has then seen what came before it.
bool streamJson(llvm::StringRef text, llvm::StringRef streamedKey, JsonStreamHandler &handler,
                JsonStreamError &error, JsonStreamStats *stats = nullptr);

/// Where the JSON value starting at byte `at` of `text` ends, by the scanner's
/// rules above (for a valid value, exactly its end); text.size() when it does
/// not end. For tests.
size_t jsonValueEnd(llvm::StringRef text, size_t at);

} // namespace pipefill

#endif // PIPEFILL_CODEGEN_JSONSTREAM_H
