//===- JsonStream.cpp - one big JSON array, one element at a time ---------===//
//
// The scanner mirrors llvm::json's Parser (llvm/lib/Support/JSON.cpp, LLVM
// 19) around the pieces it hands to llvm::json::parse: the same white space
// (space, tab, CR, LF), the same messages, and the same position for each
// (after the byte that was wrong, at the text's end when it ended early).
//
//===----------------------------------------------------------------------===//
#include "codegen/JsonStream.h"

#include "llvm/Support/Error.h"

#include <algorithm>
#include <cstdlib>

namespace pipefill {
namespace {

bool isNumberChar(char c) {
  return (c >= '0' && c <= '9') || c == 'e' || c == 'E' || c == '+' || c == '-' || c == '.';
}

/// Past the closing quote of the string whose opening quote is at `at`, or the
/// text's end: a backslash escapes the next byte.
size_t stringEnd(llvm::StringRef text, size_t at) {
  const size_t size = text.size();
  for (size_t i = at + 1; i < size; ++i) {
    if (text[i] == '"')
      return i + 1;
    if (text[i] == '\\')
      ++i;
  }
  return size;
}

/// An llvm::json::ParseError's message and byte offset ("[line:col, byte=N]: message").
struct ParseFailure {
  size_t offset = 0;
  std::string message;
};

ParseFailure parseFailure(llvm::Error error) {
  ParseFailure failure;
  llvm::handleAllErrors(std::move(error), [&](const llvm::ErrorInfoBase &e) {
    failure.message = e.message();
  });
  llvm::StringRef text = failure.message;
  size_t byte = text.find("byte="), colon = text.find("]: ");
  if (byte != llvm::StringRef::npos && colon != llvm::StringRef::npos && byte < colon) {
    failure.offset = size_t(std::strtoull(text.data() + byte + 5, nullptr, 10));
    failure.message = text.substr(colon + 3).str();
  }
  return failure;
}

class Reader {
public:
  Reader(llvm::StringRef text, llvm::StringRef key, JsonStreamHandler &handler,
         JsonStreamError &error, JsonStreamStats &stats)
      : text_(text), key_(key), handler_(handler), error_(error), stats_(stats) {}

  bool read() {
    size_t bad = 0;
    if (!llvm::json::isUTF8(text_, &bad))
      return fail(bad, "Invalid UTF-8 sequence");
    eatSpace();
    if (peek() == '[') {
      handler_.arrayBegins(JsonStreamHandler::npos);
      if (!streamArray())
        return false;
    } else if (peek() == '{') {
      if (!streamObject())
        return false;
    } else {
      llvm::json::Value value(nullptr);
      if (!parsePiece(value))
        return false;
    }
    eatSpace();
    return at_ == text_.size() || fail(at_, "Text after end of document");
  }

private:
  char peek() const { return at_ < text_.size() ? text_[at_] : 0; }
  char next() { return at_ < text_.size() ? text_[at_++] : 0; }
  void eatSpace() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\r' || text_[at_] == '\n'))
      ++at_;
  }

  bool fail(size_t offset, llvm::StringRef message) {
    offset = std::min(offset, text_.size());
    llvm::StringRef before = text_.take_front(offset);
    size_t lastNewline = before.rfind('\n');
    error_.offset = offset;
    error_.line = unsigned(before.count('\n') + 1);
    error_.column =
        unsigned(lastNewline == llvm::StringRef::npos ? offset : offset - lastNewline - 1);
    error_.message = message.str();
    return false;
  }

  /// Parses the value at the cursor with llvm::json::parse and moves past it.
  bool parsePiece(llvm::json::Value &out) {
    const size_t begin = at_, end = jsonValueEnd(text_, begin);
    ++stats_.pieces;
    llvm::Expected<llvm::json::Value> piece = llvm::json::parse(text_.slice(begin, end));
    if (piece) {
      out = std::move(*piece);
      at_ = end;
      return true;
    }
    llvm::consumeError(piece.takeError());
    ++stats_.reparsed;
    // Malformed where the scanner looked: what the whole document's parser saw from `begin`.
    llvm::Expected<llvm::json::Value> rest = llvm::json::parse(text_.substr(begin));
    if (rest) {
      out = std::move(*rest);
      at_ = text_.size();
      return true;
    }
    ParseFailure failure = parseFailure(rest.takeError());
    if (failure.message != "Text after end of document")
      return fail(begin + failure.offset, failure.message);
    // A valid value that ends (with its trailing white space) at the failure.
    llvm::Expected<llvm::json::Value> valid =
        llvm::json::parse(text_.slice(begin, begin + failure.offset));
    if (!valid) {
      ParseFailure again = parseFailure(valid.takeError());
      return fail(begin + again.offset, again.message);
    }
    out = std::move(*valid);
    at_ = begin + failure.offset;
    return true;
  }

  /// The array at the cursor, one element at a time.
  bool streamArray() {
    ++at_; // '['
    eatSpace();
    if (peek() == ']') {
      ++at_;
      return true;
    }
    for (;;) {
      const size_t begin = at_;
      llvm::json::Value value(nullptr);
      if (!parsePiece(value))
        return false;
      handler_.element(std::move(value), begin, at_);
      eatSpace();
      switch (next()) {
      case ',':
        eatSpace();
        continue;
      case ']':
        return true;
      default:
        return fail(at_, "Expected , or ] after array element");
      }
    }
  }

  /// The top-level object at the cursor, one member at a time.
  bool streamObject() {
    ++at_; // '{'
    eatSpace();
    if (peek() == '}') {
      ++at_;
      return true;
    }
    for (;;) {
      const size_t keyAt = at_;
      if (peek() != '"') {
        next();
        return fail(at_, "Expected object key");
      }
      llvm::json::Value key(nullptr);
      if (!parsePiece(key))
        return false;
      std::string name = key.getAsString() ? key.getAsString()->str() : std::string();
      eatSpace();
      if (next() != ':')
        return fail(at_, "Expected : after object key");
      eatSpace();
      if (name == key_ && peek() == '[') {
        handler_.arrayBegins(keyAt);
        if (!streamArray())
          return false;
      } else {
        llvm::json::Value value(nullptr);
        if (!parsePiece(value))
          return false;
        handler_.member(name, std::move(value), keyAt);
      }
      eatSpace();
      switch (next()) {
      case ',':
        eatSpace();
        continue;
      case '}':
        return true;
      default:
        return fail(at_, "Expected , or } after object property");
      }
    }
  }

  llvm::StringRef text_, key_;
  JsonStreamHandler &handler_;
  JsonStreamError &error_;
  JsonStreamStats &stats_;
  size_t at_ = 0;
};

} // namespace

size_t jsonValueEnd(llvm::StringRef text, size_t at) {
  const size_t size = text.size();
  if (at >= size)
    return size;
  switch (text[at]) {
  case '"':
    return stringEnd(text, at);
  case 'n':
  case 't':
    return std::min(size, at + 4);
  case 'f':
    return std::min(size, at + 5);
  case '[':
  case '{': {
    size_t depth = 0;
    for (size_t i = at; i < size;) {
      const char c = text[i];
      if (c == '"') {
        i = stringEnd(text, i);
        continue;
      }
      if (c == '[' || c == '{')
        ++depth;
      else if ((c == ']' || c == '}') && --depth == 0)
        return i + 1;
      ++i;
    }
    return size;
  }
  default:
    if (!isNumberChar(text[at]))
      return at + 1; // not a value: the parser refuses its first byte
    size_t i = at + 1;
    while (i < size && isNumberChar(text[i]))
      ++i;
    return i;
  }
}

bool streamJson(llvm::StringRef text, llvm::StringRef streamedKey, JsonStreamHandler &handler,
                JsonStreamError &error, JsonStreamStats *stats) {
  JsonStreamStats ignored;
  return Reader(text, streamedKey, handler, error, stats ? *stats : ignored).read();
}

} // namespace pipefill
