// Names in SVG and in generated C++ comments: escaped, and no byte of them can end the comment or
// make the SVG ill-formed.
#include "support/Xml.h"

#include <gtest/gtest.h>

using namespace pipefill;

TEST(Xml, EscapesMarkupAndReplacesForbiddenControls) {
  EXPECT_EQ(xmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(xmlEscape(std::string("a\x01" "b", 3)), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(xmlEscape("line\none\ttab\r"), "line one tab ");
  EXPECT_EQ(xmlEscape("gr\xC3\xBC\xC3\x9F"), "gr\xC3\xBC\xC3\x9F"); // UTF-8 passes
  EXPECT_EQ(xmlEscape(std::string("\0", 1)), "\xEF\xBF\xBD");
}

TEST(Xml, CommentTextCannotEndTheComment) {
  const std::string s = commentSafe("job\n#error injected\r\x7f");
  EXPECT_EQ(s, "job\\x0a#error injected\\x0d\\x7f");
  EXPECT_EQ(s.find('\n'), std::string::npos);
  EXPECT_EQ(commentSafe("plain name/with */ and \\"), "plain name/with */ and \\");
}
