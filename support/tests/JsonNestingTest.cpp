// The pre-parse nesting scan of JSON text: the first bracket past the limit, at its line and
// column; brackets inside strings (with escaped quotes) do not count.
#include "support/JsonNesting.h"

#include <gtest/gtest.h>

#include <string>

using namespace pipefill;

// Exactly `limit` levels pass; one more is refused at the bracket that opens it.
TEST(JsonNesting, TheLimitIsInclusive) {
  EXPECT_FALSE(findTooDeepJson(std::string(256, '[') + std::string(256, ']')));
  std::string objects;
  for (int i = 0; i < 256; ++i)
    objects += "{\"a\":";
  EXPECT_FALSE(findTooDeepJson(objects + "1" + std::string(256, '}')));
  auto err = findTooDeepJson(" " + std::string(257, '['));
  ASSERT_TRUE(err);
  EXPECT_EQ(err->offset, 257u);
  EXPECT_EQ(err->line, 1u);
  EXPECT_EQ(err->column, 258u);
  EXPECT_EQ(err->bracket, '[');
  EXPECT_EQ(err->message(), "'[' nested deeper than 256 levels");
  // Siblings do not add up: 1000 arrays side by side are one level deep.
  std::string siblings = "[";
  for (int i = 0; i < 1000; ++i)
    siblings += "[1],";
  EXPECT_FALSE(findTooDeepJson(siblings + "[2]]"));
}

TEST(JsonNesting, LinesAndColumnsCountFromTheLastNewline) {
  auto err = findTooDeepJson("{\n  \"x\":\n" + std::string(3, '['), 3);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->line, 3u);
  EXPECT_EQ(err->column, 3u);
  EXPECT_EQ(err->bracket, '[');
}

// Brackets in strings, escaped quotes included, are text; so is a string left open.
TEST(JsonNesting, StringsAreNotBrackets) {
  EXPECT_FALSE(findTooDeepJson("[\"" + std::string(1000, '[') + "\"]"));
  EXPECT_FALSE(findTooDeepJson("[\"a\\\"" + std::string(1000, '{') + "\"]"));
  EXPECT_FALSE(findTooDeepJson("[\"" + std::string(1000, '[')));
  // After the string closes, brackets count again.
  EXPECT_TRUE(findTooDeepJson("\"[\"" + std::string(257, '[')));
}
