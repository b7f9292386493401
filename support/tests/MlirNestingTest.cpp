// The pre-parse nesting scan of MLIR text: the first bracket past the limit, at its line and
// column, for every bracket kind; strings, comments, arrows and stray brackets do not count.
#include "support/MlirNesting.h"

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
TEST(MlirNesting, TheLimitIsInclusiveForEveryBracket) {
  for (char open : std::string("{[(<")) {
    const char close = std::string("}])>")[std::string("{[(<").find(open)];
    const std::string ok = repeat(std::string(1, open), 512) + repeat(std::string(1, close), 512);
    EXPECT_FALSE(findTooDeepNesting(ok)) << open;
    const std::string deep = "x" + repeat(std::string(1, open), 513);
    auto err = findTooDeepNesting(deep);
    ASSERT_TRUE(err) << open;
    EXPECT_EQ(err->offset, 513u);
    EXPECT_EQ(err->line, 1u);
    EXPECT_EQ(err->column, 514u);
    EXPECT_EQ(err->bracket, open);
    EXPECT_EQ(err->message(), std::string("'") + open +
                                  "' nested deeper than 512 levels (the MLIR parser recurses "
                                  "per level and would overflow its stack)");
    EXPECT_EQ(err->diagnostic("in.mlir", 512),
              "in.mlir:1:514: error: " + err->message(512));
  }
}

// Mixed brackets add up, as the parser's recursion does; the location counts lines and columns
// from 1.
TEST(MlirNesting, MixedBracketsAddUpAndLinesAreCounted) {
  const std::string text = "module {\n  a = [(<\n    {";
  EXPECT_FALSE(findTooDeepNesting(text, 5));
  auto err = findTooDeepNesting(text, 4);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->line, 3u);
  EXPECT_EQ(err->column, 5u);
  EXPECT_EQ(err->bracket, '{');
}

// Closed brackets do not count: a long flat file of small nests passes.
TEST(MlirNesting, SiblingsDoNotAccumulate) {
  EXPECT_FALSE(findTooDeepNesting(repeat("{[(<>)]}\n", 10000), 4));
  EXPECT_TRUE(findTooDeepNesting(repeat("{[(<>)]}\n", 10000), 3));
}

// Brackets in string literals (escaped quotes included) and in comments are text.
TEST(MlirNesting, StringsAndCommentsAreSkipped) {
  EXPECT_FALSE(findTooDeepNesting("a = \"" + repeat("{[(<", 1000) + "\"", 1));
  EXPECT_FALSE(findTooDeepNesting("a = \"\\\"" + repeat("{", 1000) + "\\\\\" {", 1));
  EXPECT_TRUE(findTooDeepNesting("a = \"\\\\\" {{", 1));
  EXPECT_FALSE(findTooDeepNesting("// " + repeat("[", 1000) + "\n{", 1));
  // A newline ends an unterminated string (MLIR's lexer refuses it there): what follows counts.
  auto err = findTooDeepNesting("a = \"{{\n{{", 1);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->line, 2u);
  EXPECT_EQ(err->column, 2u);
}

// `->` closes nothing: affine_map<(d0) -> (d0)> stays open after its arrow. `>` closes only a
// `<` on top (the `>=` of an integer set is inside parentheses).
TEST(MlirNesting, ArrowsAndComparisonsCloseNothing) {
  auto err = findTooDeepNesting("#m = affine_map<(d0) -> (d0)[{", 2);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->bracket, '{');
  EXPECT_FALSE(findTooDeepNesting("affine_set<(d0) : (d0 >= 0)>", 2));
  EXPECT_FALSE(findTooDeepNesting(repeat("affine_set<(d0) : (d0 >= 0)>\n", 1000), 2));
  EXPECT_FALSE(findTooDeepNesting("func.func @f() -> ()", 1));
}

// Stray closers and an unmatched `<` (a less-than of some custom syntax) do not pile up: a closer
// pops back to its own opener, and one with no opener is ignored.
TEST(MlirNesting, StrayBracketsDoNotPileUp) {
  EXPECT_FALSE(findTooDeepNesting(repeat("{ a < b }\n", 10000), 2));
  EXPECT_FALSE(findTooDeepNesting(repeat("} ] ) >", 10000) + "{", 1));
  EXPECT_TRUE(findTooDeepNesting(repeat("} ] ) >", 10000) + "{{", 1));
}

// The test suite's deepest IR (7 levels) is far below the limit; the crash reports' inputs are
// refused.
TEST(MlirNesting, TheReportedInputsAreRefused) {
  auto modules = findTooDeepNesting(repeat("module {", 5000) + repeat("}", 5000));
  ASSERT_TRUE(modules);
  EXPECT_EQ(modules->column, 512u * 8 + 8);
  auto arrays = findTooDeepNesting("module attributes {p.a = " + repeat("[", 10000) +
                                   repeat("]", 10000) + "} {}");
  ASSERT_TRUE(arrays);
  EXPECT_EQ(arrays->bracket, '[');
  EXPECT_EQ(arrays->column, 26u + 511);
}
