// The pre-parse nesting scan of JSON text: the first bracket past the limit, at its line and
// column; brackets inside strings (with escaped quotes) do not count.
#include "support/JsonNesting.h"

#include <gtest/gtest.h>

#include <string>

using namespace pipefill;

namespace {

std::string repeat(const std::string &s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += s;
  return out;
}

} // namespace

// Exactly `limit` levels pass; one more is refused at the bracket that opens it.
TEST(JsonNesting, TheLimitIsInclusive) {
  EXPECT_FALSE(findTooDeepJson(repeat("[", 256) + repeat("]", 256)));
  EXPECT_FALSE(findTooDeepJson(repeat("{\"a\":", 256) + "1" + repeat("}", 256)));
  auto err = findTooDeepJson(" " + repeat("[", 257));
  ASSERT_TRUE(err);
  EXPECT_EQ(err->offset, 257u);
  EXPECT_EQ(err->line, 1u);
  EXPECT_EQ(err->column, 258u);
  EXPECT_EQ(err->bracket, '[');
  EXPECT_EQ(err->message(), "'[' nested deeper than 256 levels");
  // Siblings do not add up: 1000 arrays side by side are one level deep.
  EXPECT_FALSE(findTooDeepJson("[" + repeat("[1],", 1000) + "[2]]"));
}

TEST(JsonNesting, LinesAndColumnsCountFromTheLastNewline) {
  auto err = findTooDeepJson("{\n  \"x\":\n" + repeat("[", 3), 3);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->line, 3u);
  EXPECT_EQ(err->column, 3u);
  EXPECT_EQ(err->bracket, '[');
}

// Brackets in strings, escaped quotes included, are text; so is a string left open.
TEST(JsonNesting, StringsAreNotBrackets) {
  EXPECT_FALSE(findTooDeepJson("[\"" + repeat("[", 1000) + "\"]"));
  EXPECT_FALSE(findTooDeepJson("[\"a\\\"" + repeat("{", 1000) + "\"]"));
  EXPECT_FALSE(findTooDeepJson("[\"" + repeat("[", 1000)));
  // After the string closes, brackets count again.
  EXPECT_TRUE(findTooDeepJson("\"[\"" + repeat("[", 257)));
}
