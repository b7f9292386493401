#include "support/Files.h"
#include "support/ProtoText.h"

#include "proto/pipefill.pb.h"

#include <gtest/gtest.h>

using namespace pipefill;

namespace {

TEST(ProtoText, SyntaxErrorsCarryFileLineColumn) {
  JobSpec spec;
  Diagnostics d;
  EXPECT_FALSE(parseTextProto("a.pbtxt", "pipeline {\n  stages: wide\n}\n", spec, nullptr, d));
  ASSERT_EQ(d.errorCount(), 1u);
  EXPECT_EQ(d.str(), "a.pbtxt:2:11: error: Expected integer, got: wide");
}

// An unknown enum value is reported on the value, not on the token after it.
TEST(ProtoText, UnknownEnumPointsAtTheValue) {
  JobSpec spec;
  Diagnostics d;
  EXPECT_FALSE(parseTextProto("a.pbtxt", "pipeline {\n  schedule: ZIGZAG\n}\n", spec, nullptr, d));
  EXPECT_EQ(d.str(),
            "a.pbtxt:2:13: error: Unknown enumeration value of \"ZIGZAG\" for field \"schedule\".");
}

TEST(ProtoText, DeepNestingIsRefusedNotRecursed) {
  std::string text;
  for (int i = 0; i < 100000; ++i)
    text += "pipeline {";
  JobSpec spec;
  Diagnostics d;
  EXPECT_FALSE(parseTextProto("deep.pbtxt", text, spec, nullptr, d));
  EXPECT_TRUE(d.hasErrors());
}

TEST(ProtoText, TruncatedBinaryIsAnError) {
  JobSpec spec;
  spec.set_name("x");
  spec.mutable_pipeline()->set_stages(4);
  std::string bytes = spec.SerializeAsString();
  JobSpec back;
  Diagnostics d;
  EXPECT_TRUE(parseBinaryProto("j.pb", bytes, back, d)) << d.str();
  EXPECT_FALSE(parseBinaryProto("j.pb", bytes.substr(0, bytes.size() - 1), back, d));
  EXPECT_NE(d.str().find("j.pb: error: not a valid binary JobSpec"), std::string::npos);
}

// An input over kMaxInputBytes is refused before it is parsed, text or binary
// (the tools' readers stop at the limit first; this is the parsers' own check).
TEST(ProtoText, InputOverTheSizeLimitIsRefused) {
  const std::string big(kMaxInputBytes + 1, ' ');
  const std::string expected = "input is " + std::to_string(kMaxInputBytes + 1) +
                               " bytes; the limit is " + std::to_string(kMaxInputBytes) +
                               " bytes";
  JobSpec spec;
  Diagnostics text, binary;
  EXPECT_FALSE(parseTextProto("big.pbtxt", big, spec, nullptr, text));
  EXPECT_EQ(text.str(), "big.pbtxt: error: " + expected);
  EXPECT_FALSE(parseBinaryProto("big.pb", big, spec, binary));
  EXPECT_EQ(binary.str(), "big.pb: error: " + expected);
}

TEST(ProtoText, FieldPositions) {
  JobSpec spec;
  google::protobuf::TextFormat::ParseInfoTree tree;
  Diagnostics d;
  ASSERT_TRUE(parseTextProto("a", "name: \"x\"\nstage { forward_us: 1 }\nstage {\n  static_bytes: 5\n}\n",
                             spec, &tree, d));
  SourcePos p = fieldPos(spec, &tree, "stage", 1);
  EXPECT_EQ(p.line, 3);
  const auto *t = nestedTree(spec, &tree, "stage", 1);
  SourcePos q = fieldPos(spec.stage(1), t, "static_bytes");
  EXPECT_EQ(q.line, 4);
  EXPECT_EQ(q.column, 3);
  EXPECT_FALSE(fieldWritten(spec.stage(1), t, "forward_us"));
}

} // namespace
