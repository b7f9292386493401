#include "support/Checked.h"
#include "support/LayerRules.h"
#include "support/Limits.h"

#include "proto/pipefill.pb.h"
#include "proto/profile.pb.h"
#include "proto/stream_program.pb.h"

#include <google/protobuf/duration.pb.h>

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <limits>
#include <set>

namespace pb = google::protobuf;
using namespace pipefill;

namespace {

void collectNumeric(const pb::Descriptor *d, std::set<std::string> &seen,
                    std::vector<const pb::FieldDescriptor *> &out) {
  if (!seen.insert(d->full_name()).second)
    return;
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor *f = d->field(i);
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE)
      collectNumeric(f->message_type(), seen, out);
    else if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING &&
             f->cpp_type() != pb::FieldDescriptor::CPPTYPE_BOOL &&
             f->cpp_type() != pb::FieldDescriptor::CPPTYPE_ENUM)
      out.push_back(f);
  }
}

// Every numeric field of every input schema has a documented range.
TEST(Limits, EveryNumericFieldHasARange) {
  std::set<std::string> seen;
  std::vector<const pb::FieldDescriptor *> fields;
  collectNumeric(JobSpec::descriptor(), seen, fields);
  collectNumeric(rt::StreamProgram::descriptor(), seen, fields);
  collectNumeric(rt::MeasuredProfile::descriptor(), seen, fields);
  collectNumeric(rt::FillCheckpoint::descriptor(), seen, fields);
  ASSERT_GT(fields.size(), 100u);
  for (const pb::FieldDescriptor *f : fields)
    EXPECT_NE(findFieldLimit(f->full_name()), nullptr) << f->full_name();
}

// Every table entry names a real field (a typo would silently check nothing).
TEST(Limits, EveryEntryNamesARealField) {
  const pb::DescriptorPool *pool = pb::DescriptorPool::generated_pool();
  JobSpec::descriptor();
  rt::MeasuredProfile::descriptor();
  for (const FieldLimit &l : fieldLimits()) {
    EXPECT_NE(pool->FindFieldByName(l.field), nullptr) << l.field;
    EXPECT_LE(l.min, l.max) << l.field;
  }
  for (const CountLimit &c : countLimits()) {
    const pb::FieldDescriptor *f = pool->FindFieldByName(c.field);
    ASSERT_NE(f, nullptr) << c.field;
    EXPECT_TRUE(f->is_repeated()) << c.field;
  }
}

// docs/reliability.md lists every field of the table (the documented ranges are the checked ones).
TEST(Limits, EveryFieldIsDocumented) {
  std::ifstream in(PIPEFILL_SOURCE_DIR "/docs/reliability.md");
  ASSERT_TRUE(in) << "docs/reliability.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (const FieldLimit &l : fieldLimits()) {
    std::string row = std::string("| `") + l.field + "` | " + (l.positive ? "> " : "") +
                      formatBound(l.min) + " | " + formatBound(l.max) + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << row;
  }
  for (const CountLimit &c : countLimits())
    EXPECT_NE(doc.find(std::string("| `") + c.field + "` | "), std::string::npos) << c.field;
}

// Bounds print as the documentation writes them: powers of two as 2^N, one less as 2^N-1 (an
// exclusive bound written inclusive), never a rounded 2^N for 2^N-1.
TEST(Limits, BoundsPrintAsPowersOfTwo) {
  EXPECT_EQ(formatBound(std::ldexp(1.0, 50)), "2^50");
  EXPECT_EQ(formatBound(std::ldexp(1.0, 50) - 1), "2^50-1");
  EXPECT_EQ(formatBound(-std::ldexp(1.0, 40)), "-2^40");
  EXPECT_EQ(formatBound(4294967295.0), "2^32-1");
  EXPECT_EQ(formatBound(1048576), "2^20");
  EXPECT_EQ(formatBound(1000), "1000");
  EXPECT_EQ(formatBound(3e9), "3e+09");
}

// A sample index below 2^50, as the reason says: 2^50 - 1 is taken, 2^50 is not.
TEST(Limits, SampleIndicesAreBelowTwoToThe50) {
  for (const uint64_t v : {(uint64_t(1) << 50) - 1, uint64_t(1) << 50}) {
    pipefill::rt::FillChunkOp op;
    op.set_sample_begin(v);
    Diagnostics d;
    EXPECT_EQ(checkLimits(op, nullptr, "chunk", d), v < (uint64_t(1) << 50)) << v << d.str();
    if (v >= (uint64_t(1) << 50)) {
      EXPECT_NE(d.str().find("sample_begin"), std::string::npos) << d.str();
    }
  }
}

TEST(Limits, RejectsNonFiniteAndOutOfRangeValues) {
  struct Case {
    double value;
    bool ok;
  } cases[] = {{0, true},      {1e9, true},           {1e9 * 1.0000001, false},
               {-1, false},    {std::nan(""), false}, {INFINITY, false},
               {-INFINITY, false}, {1e300, false}};
  for (const Case &c : cases) {
    JobSpec spec;
    spec.add_stage()->set_forward_us(c.value);
    Diagnostics d;
    EXPECT_EQ(checkLimits(spec, nullptr, "job", d), c.ok) << c.value << " " << d.str();
    if (!c.ok) {
      EXPECT_NE(d.str().find("stage[0].forward_us"), std::string::npos) << d.str();
    }
  }
}

TEST(Limits, IntegerBoundsAndCounts) {
  JobSpec spec;
  spec.add_stage()->set_static_bytes(std::numeric_limits<int64_t>::max() - 10);
  Diagnostics d;
  EXPECT_FALSE(checkLimits(spec, nullptr, "job", d));
  EXPECT_NE(d.str().find("stage[0].static_bytes must be at most 2^50 (got "
                         "9223372036854775797)"),
            std::string::npos)
      << d.str();

  rt::StreamProgram prog;
  rt::DeviceProgram *dev = prog.add_devices();
  for (int i = 0; i < 17; ++i)
    dev->add_streams();
  Diagnostics d2;
  EXPECT_FALSE(checkLimits(prog, nullptr, "p.pb", d2));
  EXPECT_NE(d2.str().find("devices[0].streams has 17 entries; at most 16"), std::string::npos)
      << d2.str();
  dev->mutable_streams()->RemoveLast();
  Diagnostics d3;
  EXPECT_TRUE(checkLimits(prog, nullptr, "p.pb", d3)) << d3.str();
}

// A numeric field the table has no range for (a schema change that forgot its
// limit; here a message of no pipefill schema) is reported, not passed.
TEST(Limits, FieldWithoutARangeIsReported) {
  pb::Duration duration;
  duration.set_seconds(5);
  Diagnostics d;
  EXPECT_FALSE(checkLimits(duration, nullptr, "d.pb", d));
  EXPECT_EQ(d.str(), "d.pb: error: internal: no documented range for google.protobuf.Duration.seconds "
                     "(add it to support/Limits.cpp)");
}

// A value written explicitly as 0 in text is checked even though proto3 cannot
// tell it from an absent field (heads: 0 must not silently become 1).
TEST(Limits, ExplicitZeroInTextIsChecked) {
  JobSpec spec;
  pb::TextFormat::ParseInfoTree tree;
  Diagnostics d;
  ASSERT_TRUE(parseTextProto("j.pbtxt",
                             "fill_job {\n  layer {\n    workload { kind: ENCODER_LAYER "
                             "hidden: 64\n heads: 0 }\n  }\n}\n",
                             spec, &tree, d));
  EXPECT_FALSE(checkLimits(spec, &tree, "j.pbtxt", d));
  EXPECT_EQ(d.str(),
            "j.pbtxt:4:2: error: fill_job[0].layer[0].workload.heads must be at least 1 (got 0)");
}

TEST(Checked, SaturatesInsteadOfWrapping) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(satAdd(max - 1, 5), max);
  EXPECT_EQ(satAdd(min + 1, -5), min);
  EXPECT_EQ(satAdd(40, 2), 42);
  EXPECT_EQ(satMul(int64_t(1) << 40, int64_t(1) << 30), max);
  EXPECT_EQ(satMul(-(int64_t(1) << 40), int64_t(1) << 30), min);
  EXPECT_EQ(satMul(-6, 7), -42);
  EXPECT_EQ(satSub(min, 1), min);
  EXPECT_EQ(satNeg(min), max);
  EXPECT_EQ(satNeg(5), -5);
  EXPECT_EQ(satMulU(uint64_t(1) << 63, 2), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(satAddU(~uint64_t(0), 1), ~uint64_t(0));
}

TEST(LayerRules, RejectsWhatTheRuntimeCannotRun) {
  LayerShape enc;
  enc.family = LayerFamily::Encoder;
  enc.hidden = 64;
  enc.heads = 3;
  enc.seq = 8;
  enc.ffn = 256;
  LayerProblem p;
  EXPECT_FALSE(checkFillLayers(false, {enc}, p));
  EXPECT_EQ(p.message, "hidden (64) is not a multiple of heads (3)");
  enc.heads = 4;
  EXPECT_TRUE(checkFillLayers(false, {enc}, p)) << p.message;
  EXPECT_FALSE(checkFillLayers(true, {enc}, p));
  EXPECT_EQ(p.layer, 0);
  LayerShape mlp;
  mlp.family = LayerFamily::Mlp;
  mlp.in = 64;
  mlp.hidden = 256;
  mlp.out = 32;
  LayerShape mlp2 = mlp;
  mlp2.in = 64;
  EXPECT_FALSE(checkFillLayers(true, {mlp, mlp2}, p));
  EXPECT_EQ(p.layer, 1);
  mlp2.in = 32;
  EXPECT_TRUE(checkFillLayers(true, {mlp, mlp2}, p)) << p.message;
  EXPECT_FALSE(checkFillLayers(false, {}, p));
}

} // namespace

// Protobuf's text parser takes any escaped byte in a string; a name that is not UTF-8 could
// not be written to a StreamProgram (whose binary parser would refuse it) or a JSON report, so
// the reader refuses it at its place.
TEST(Limits, TextFieldsMustBeUtf8) {
  JobSpec spec;
  pb::TextFormat::ParseInfoTree tree;
  Diagnostics d;
  ASSERT_TRUE(parseTextProto("j.pbtxt",
                             "name: \"caf\\303\\251\"\nfill_job {\n  name: \"b\\xffrt\"\n}\n",
                             spec, &tree, d))
      << d.str();
  EXPECT_FALSE(checkLimits(spec, &tree, "j.pbtxt", d));
  EXPECT_EQ(d.str(), "j.pbtxt:3:3: error: fill_job[0].name is not valid UTF-8 (byte 1 is "
                     "0xff): text fields must be UTF-8");
  // The same name in valid UTF-8 passes (the first name, "café", already did).
  spec.mutable_fill_job(0)->set_name("b\xC3\xA9rt");
  Diagnostics d2;
  EXPECT_TRUE(checkLimits(spec, nullptr, "j.pbtxt", d2)) << d2.str();
}
