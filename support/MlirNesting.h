//===- MlirNesting.h - MLIR text nested too deep to parse -------*- C++ -*-===//
//
// MLIR's parser recurses once per nested region, attribute or type bracket,
// so `module {` written 5000 times, or an array attribute 10000 `[` deep,
// overflows its stack (SIGSEGV) before any diagnostic. pipefill-opt and
// pipefill-translate scan MLIR text inputs with this first (bytecode inputs
// are not text and skip it) and refuse the input at the first bracket deeper
// than the limit: a linear pass over the bytes, no recursion, no parse.
//
// Counted: `{`, `[`, `(` and `<` outside string literals and `//` comments.
// The first three always close in MLIR; a closer pops back to its own opener,
// so an unmatched `<` (a less-than in some dialect's custom syntax) is
// forgotten at the end of the enclosing bracket. `>` closes only a `<` on top
// of the stack and never as the `->` of a function type; `>=` of an integer
// set sits inside `(` and is ignored that way.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_MLIRNESTING_H
#define PIPEFILL_SUPPORT_MLIRNESTING_H

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipefill {

/// The deepest nesting an MLIR text input may have. The deepest IR of the
/// test suite nests 7 levels (test/dialect/stream/invalid.mlir), the IR the
/// examples compile and lower to at most 5, with --mlir-print-debuginfo too;
/// on an 8 MiB stack the parser overflows between 4 000 and 5 000 nested
/// `module {` (8 000 `[`). 512 is 70 times the real depth and 8 times below
/// the crash.
constexpr int kMaxMlirNesting = 512;

/// Where an input first nests deeper than the limit: the opening bracket's
/// byte offset, 1-based line and column (in bytes, as MLIR's locations) and
/// the bracket itself.
struct TooDeepNesting {
  size_t offset = 0;
  size_t line = 1;
  size_t column = 1;
  char bracket = '{';

  std::string message(int limit = kMaxMlirNesting) const {
    return std::string("'") + bracket + "' nested deeper than " + std::to_string(limit) +
           " levels (the MLIR parser recurses per level and would overflow its stack)";
  }
  /// `FILE:LINE:COL: error: MESSAGE`, without the source line: that line can
  /// be megabytes of brackets.
  std::string diagnostic(std::string_view file, int limit = kMaxMlirNesting) const {
    return std::string(file) + ":" + std::to_string(line) + ":" + std::to_string(column) +
           ": error: " + message(limit);
  }
};

/// The first opening bracket of MLIR text `text` that lies deeper than
/// `limit` levels, or nullopt when none does.
inline std::optional<TooDeepNesting> findTooDeepNesting(std::string_view text,
                                                        int limit = kMaxMlirNesting) {
  static constexpr char kOpeners[] = "{[(<";
  static constexpr char kClosers[] = "}])>";
  std::vector<char> stack; // the openers still open, never more than limit + 1
  size_t openCount[4] = {0, 0, 0, 0};
  size_t line = 1, lineStart = 0;
  const size_t n = text.size();
  auto kindOf = [](const char *set, char c) -> int {
    for (int k = 0; k < 4; ++k)
      if (set[k] == c)
        return k;
    return -1;
  };
  auto pop = [&] {
    --openCount[kindOf(kOpeners, stack.back())];
    stack.pop_back();
  };
  for (size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      lineStart = i + 1;
    } else if (c == '"') {
      // A string literal ends at its closing quote; an escape hides the next
      // byte. A newline ends it too (MLIR's lexer refuses it there).
      while (i + 1 < n && text[i + 1] != '"' && text[i + 1] != '\n')
        i += (text[i + 1] == '\\' && i + 2 < n && text[i + 2] != '\n') ? 2 : 1;
      if (i + 1 < n && text[i + 1] == '"')
        ++i;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      while (i + 1 < n && text[i + 1] != '\n')
        ++i;
    } else if (int open = kindOf(kOpeners, c); open >= 0) {
      if (stack.size() >= static_cast<size_t>(limit))
        return TooDeepNesting{i, line, i - lineStart + 1, c};
      stack.push_back(c);
      ++openCount[open];
    } else if (int close = kindOf(kClosers, c); close >= 0) {
      if (c == '>') {
        if (i > 0 && text[i - 1] == '-')
          continue; // the arrow of a function type
        if (!stack.empty() && stack.back() == '<')
          pop();
        continue;
      }
      if (openCount[close] == 0)
        continue; // a stray closer: the parser reports it
      while (stack.back() != kOpeners[close])
        pop(); // unmatched `<` inside this bracket
      pop();
    }
  }
  return std::nullopt;
}

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_MLIRNESTING_H
