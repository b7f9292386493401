//===- JsonNesting.h - JSON text nested too deep to parse -------*- C++ -*-===//
//
// llvm::json::parse recurses once per nested array or object and has no
// depth limit: 100 000 `[` overflow its stack (SIGSEGV, and the crash handler
// then hung on a torch trace given to pipefill-translate). Chrome traces nest
// a few levels (an event's `args` object); JSON inputs are scanned with this
// first and refused at the first `[` or `{` deeper than the limit: a linear
// pass over the bytes, no recursion.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_JSONNESTING_H
#define PIPEFILL_SUPPORT_JSONNESTING_H

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pipefill {

/// The deepest nesting a JSON input may have. torch.profiler's Chrome traces
/// nest 3 levels (top object, traceEvents, an event's args); llvm::json::parse
/// handles 20 000 levels on an 8 MiB stack and crashes at 100 000.
constexpr int kMaxJsonNesting = 256;

/// Where JSON text first nests deeper than the limit: the bracket's byte
/// offset and its 1-based line and column.
struct TooDeepJson {
  size_t offset = 0, line = 1, column = 1;
  char bracket = '[';

  std::string message(int limit = kMaxJsonNesting) const {
    return std::string("'") + bracket + "' nested deeper than " + std::to_string(limit) +
           " levels";
  }
};

/// The first `[` or `{` of JSON text `text` (outside strings) deeper than
/// `limit` levels, or nullopt. Closers only decrease the depth: mismatched or
/// stray ones are the parser's to report.
inline std::optional<TooDeepJson> findTooDeepJson(std::string_view text,
                                                  int limit = kMaxJsonNesting) {
  int depth = 0;
  size_t line = 1, lineStart = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      lineStart = i + 1;
    } else if (c == '"') {
      // A string ends at its closing quote; a backslash escapes the next byte.
      while (i + 1 < text.size() && text[i + 1] != '"')
        i += (text[i + 1] == '\\' && i + 2 < text.size()) ? 2 : 1;
      ++i;
    } else if (c == '[' || c == '{') {
      if (depth >= limit)
        return TooDeepJson{i, line, i - lineStart + 1, c};
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_JSONNESTING_H
