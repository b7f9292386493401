//===- JsonStreamTest.cpp - streamJson against llvm::json::parse ----------===//
//
// streamJson must accept what llvm::json::parse accepts, with the same values,
// and refuse the rest with the same message at the same byte, line and
// column. Most tests are differential: the text is read both ways.
//
//===----------------------------------------------------------------------===//
#include "codegen/JsonStream.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace pipefill;

namespace {

/// Rebuilds the document from what the reader handed over.
class Rebuild : public JsonStreamHandler {
public:
  void arrayBegins(size_t keyOffset) override {
    arrays.push_back(keyOffset);
    current = llvm::json::Array();
    documentIsArray = keyOffset == npos;
    if (!documentIsArray)
      object["traceEvents"] = llvm::json::Array();
  }
  void element(llvm::json::Value &&value, size_t begin, size_t end) override {
    current.push_back(std::move(value));
    pieces.push_back({begin, end});
    if (!documentIsArray)
      object["traceEvents"] = llvm::json::Array(current); // the last one counts, as in llvm
  }
  void member(llvm::StringRef key, llvm::json::Value &&value, size_t keyOffset) override {
    object[key.str()] = std::move(value); // an ObjectKey from a StringRef does not own it
    keys.push_back(keyOffset);
  }
  llvm::json::Value document() const {
    if (documentIsArray)
      return llvm::json::Array(current);
    return llvm::json::Object(object);
  }

  bool documentIsArray = false;
  llvm::json::Array current;
  llvm::json::Object object;
  std::vector<size_t> arrays, keys;
  std::vector<std::pair<size_t, size_t>> pieces;
};

struct Whole {
  bool ok = false;
  llvm::json::Value value = nullptr;
  unsigned line = 0, column = 0, offset = 0;
  std::string message;
};

Whole parseWhole(llvm::StringRef text) {
  Whole whole;
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(text);
  if (v) {
    whole.ok = true;
    whole.value = std::move(*v);
    return whole;
  }
  llvm::handleAllErrors(v.takeError(), [&](const llvm::ErrorInfoBase &e) {
    std::string m = e.message();
    char rest[256] = {0};
    EXPECT_EQ(std::sscanf(m.c_str(), "[%u:%u, byte=%u]: %255[^\n]", &whole.line,
                          &whole.column, &whole.offset, rest),
              4)
        << m;
    whole.message = rest;
  });
  return whole;
}

/// Reads `text` both ways; EXPECTs the same answer. Returns the stream's stats.
JsonStreamStats same(const std::string &text, const char *what = "") {
  SCOPED_TRACE(std::string(what) + " text: " + text);
  Whole whole = parseWhole(text);
  Rebuild rebuilt;
  JsonStreamError error;
  JsonStreamStats stats;
  bool ok = streamJson(text, "traceEvents", rebuilt, error, &stats);
  EXPECT_EQ(ok, whole.ok);
  if (ok && whole.ok && (whole.value.getAsArray() || whole.value.getAsObject())) {
    EXPECT_EQ(rebuilt.document(), whole.value);
  }
  if (whole.ok) { // valid text: the scanner found every piece's end, nothing was parsed twice
    EXPECT_EQ(stats.reparsed, 0u);
  }
  if (!ok && !whole.ok) {
    EXPECT_EQ(error.message, whole.message);
    EXPECT_EQ(error.offset, whole.offset);
    EXPECT_EQ(error.line, whole.line);
    EXPECT_EQ(error.column, whole.column);
  }
  return stats;
}

const char *kTrace = R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "H"}],
 "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "a]}[{\"", "ts": 1.5e1, "dur": 2, "args": {"x": [1, {"y": "}"}], "z": null}},
  {"ph": "X", "name": "PP:0F0\\", "ts": -1, "dur": 0, "args": {"s": "\u005d\u0022\ud83d\ude00\uD800"}},
	{"ph":"i","s":"t","b":true,"f":false}
 ],
 "distributedInfo": {"rank": 1}}
)";

} // namespace

// Each piece is exactly its value's text: strings with brackets and escaped
// quotes, nested objects, literals and numbers, and nothing is parsed twice.
TEST(JsonStream, ValueEndsAtTheParsersEnd) {
  auto end = [](llvm::StringRef text) { return jsonValueEnd(text, 0); };
  EXPECT_EQ(end(R"("a]}\"b" , 1)"), 8u);
  EXPECT_EQ(end(R"("a\\" ]")"), 5u);
  EXPECT_EQ(end(R"("\u0022\\\"" x)"), 12u);
  EXPECT_EQ(end(R"({"a": "}", "b": [1, {"c": "]"}]} ,)"), 32u);
  EXPECT_EQ(end("[[],{}] ]"), 7u);
  EXPECT_EQ(end("true,"), 4u);
  EXPECT_EQ(end("false]"), 5u);
  EXPECT_EQ(end("null}"), 4u);
  EXPECT_EQ(end("-1.5e+3,"), 7u);
  EXPECT_EQ(end("1 2"), 1u);
  EXPECT_EQ(end("]"), 1u);           // no value: its first byte
  EXPECT_EQ(end("[1, \"]"), 6u);     // unterminated: the text's end
  EXPECT_EQ(end("\"abc\\"), 5u);
  EXPECT_EQ(end("tr"), 2u);
  EXPECT_EQ(jsonValueEnd("ab", 2), 2u);
}

// A trace with the awkward cases in one text: escaped quotes and brackets in
// strings, unicode escapes and surrogates, nested args, tabs, traceEvents
// neither first nor last. Same document, each element one piece, no reparse.
TEST(JsonStream, ReadsATraceOneEventAtATime) {
  JsonStreamStats stats = same(kTrace);
  EXPECT_EQ(stats.reparsed, 0u);
  Rebuild rebuilt;
  JsonStreamError error;
  ASSERT_TRUE(streamJson(kTrace, "traceEvents", rebuilt, error));
  ASSERT_EQ(rebuilt.pieces.size(), 3u);
  EXPECT_EQ(llvm::StringRef(kTrace).slice(rebuilt.pieces[2].first, rebuilt.pieces[2].second),
            R"({"ph":"i","s":"t","b":true,"f":false})");
  ASSERT_EQ(rebuilt.arrays.size(), 1u);
  EXPECT_EQ(llvm::StringRef(kTrace).substr(rebuilt.arrays[0], 14), "\"traceEvents\":");
  EXPECT_EQ(rebuilt.keys.size(), 3u); // schemaVersion, deviceProperties, distributedInfo
}

// White space anywhere, an empty array, a document that is an array, a
// scalar document, a key written with escapes, a streamed key whose value is
// no array, and a repeated key (the last counts, as in llvm).
TEST(JsonStream, ShapesAndWhiteSpace) {
  for (const char *text :
       {"{\"traceEvents\":[]}", " \t\r\n{ \"traceEvents\" :\r\n[\t] } \n", "{}", "[]", "[ ]",
        "[{\"a\":1} ,\n{\"b\":[2]}]", "42", "\"s\"", "null", " true ",
        "{\"trace\\u0045vents\": [1, 2]}", "{\"traceEvents\": {\"a\": [1]}}",
        "{\"traceEvents\": 5}", "{\"traceEvents\": [1], \"traceEvents\": [2, 3]}",
        "{\"a\":1,\"a\":2}", "{\"traceEvents\":[[[[]]]]}", "[\"\\ud800\\u0041\"]",
        "{\"traceEvents\": [null,true ,false, -0.5e-3, \"x\"], \"n\": null, \"t\": true}"}) {
    JsonStreamStats stats = same(text);
    EXPECT_EQ(stats.reparsed, 0u) << text;
  }
}

// Malformed text: the same message at the same place, wherever it is.
TEST(JsonStream, MalformedLikeTheParser) {
  for (const char *text :
       {"", "  ", "{", "[", "{\"traceEvents\": [", "{\"traceEvents\": [{\"a\": 1}",
        "{\"traceEvents\": [{\"a\": 1},", "{\"traceEvents\": [1 2]}", "{\"traceEvents\": [1,]}",
        "{\"traceEvents\": [1]]", "{\"traceEvents\": [1]} x", "{\"traceEvents\": [1]}}",
        "{\"a\" 1}", "{\"a\": 1,}", "{a: 1}", "{\"a\": 1 \"b\": 2}", "[{\"a\": [1}]",
        "[{\"a\": \"\\x\"}]", "[\"\\u12\", 1]", "[\"\\u12\"]", "[\"\\uD800\\u12\"]",
        "[tru]", "[truex]", "[nul, 1]", "[fals]", "[1.2.3]", "[-]", "[+]", "[1e]",
        "[\"a\nb\"]", "[\"\x01\"]", "{\"traceEvents\": [\"unterminated]}",
        "{\"k\\q\": 1}", "{\"traceEvents\"", "{\"traceEvents\":", "[1,\n  2,\n  }",
        "{\"x\": [1, {\"y\": ]}]}", "[\xff]", "{\"a\": 1}\n\xc3", "[1]\n\n  [2]"}) {
    same(text, "malformed");
  }
  std::string nul = "[1, \0]";
  nul.resize(6);
  same(nul, "nul byte");
}

// Every prefix of a valid trace (a file cut short anywhere) and every byte of
// it deleted or replaced by a byte that matters to the scanner.
TEST(JsonStream, TruncatedAndMutatedTraces) {
  const std::string trace = kTrace;
  for (size_t n = 0; n <= trace.size(); ++n)
    same(trace.substr(0, n), "prefix");
  for (size_t i = 0; i < trace.size(); ++i) {
    same(trace.substr(0, i) + trace.substr(i + 1), "deleted");
    for (char c : {'"', '\\', '[', ']', '{', '}', ',', ':', ' ', '\n', 'u', '1', 'e', 't'})
      if (trace[i] != c) {
        std::string mutated = trace;
        mutated[i] = c;
        same(mutated, "replaced");
      }
  }
}

// Errors in a later event are found at their line and column; an error in the
// structure after good events comes after they were handed over.
TEST(JsonStream, ErrorPositionAfterManyEvents) {
  std::string text = "{\"traceEvents\": [\n";
  for (int i = 0; i < 100; ++i)
    text += "  {\"ph\": \"X\", \"name\": \"e" + std::to_string(i) + "\"},\n";
  text += "  {\"ph\": \"X\" \"name\": \"bad\"}\n]}";
  same(text);
  Rebuild rebuilt;
  JsonStreamError error;
  ASSERT_FALSE(streamJson(text, "traceEvents", rebuilt, error));
  EXPECT_EQ(rebuilt.pieces.size(), 100u);
  EXPECT_EQ(error.line, 102u);
  EXPECT_EQ(error.column, 14u);
  EXPECT_EQ(error.message, "Expected , or } after object property");
}
