// The importer's entry point: a JobSpec `model { }` block -> PipelineSpec.

#include "algo/cost/ModelProto.h"

#include "proto/pipefill.pb.h"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

using namespace pipefill;

namespace {
pipefill::Model parse(const std::string &text) {
  pipefill::Model m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m));
  return m;
}
const char *kGpt40b =
    "layers: 48 hidden: 8192 heads: 64 seq_length: 2048 vocab: 51200 "
    "micro_batch_size: 1 tp: 8 pp: 16 dp: 8 global_batch: 1024 "
    "gpu: \"A100-80GB\"";
} // namespace

TEST(ModelProto, FillsSpecAndHardware) {
  sched::PipelineSpec spec;
  spec.schedule = sched::ScheduleKind::ZBH1;
  cost::HardwareOut hw;
  std::string error;
  ASSERT_TRUE(cost::stageCostsFromModel(parse(kGpt40b), spec, hw, error))
      << error;
  EXPECT_EQ(spec.schedule, sched::ScheduleKind::ZBH1); // kept
  EXPECT_EQ(spec.stages, 16);
  EXPECT_EQ(spec.microbatches, 128);
  ASSERT_EQ(spec.costs.size(), 16u);
  EXPECT_NEAR(spec.costs[3].forwardUs, 8259.5525, 1e-3);
  EXPECT_TRUE(spec.tail);
  EXPECT_EQ(spec.dataParallel, 8);
  EXPECT_EQ(hw.gpuMemoryBytes, 85899345920);
  EXPECT_DOUBLE_EQ(hw.pcieGBps, 25);
  EXPECT_DOUBLE_EQ(hw.hbmGBps, 2039);
  EXPECT_EQ(hw.gpu, "A100-80GB");
}

TEST(ModelProto, Defaults) {
  cost::TransformerConfig cfg;
  std::string error;
  ASSERT_TRUE(cost::configFromProto(
      parse("layers: 4 hidden: 64 heads: 4 seq_length: 16 vocab: 100 tp: 1 "
            "pp: 2 global_batch: 8"),
      cfg, error))
      << error;
  EXPECT_EQ(cfg.dp, 1);
  EXPECT_EQ(cfg.microBatchSize, 1);
  EXPECT_EQ(cfg.gpu, "A100-80GB");
  EXPECT_EQ(cfg.zeroStage, 0);
  EXPECT_EQ(cfg.ffnHidden, 0); // 4h, filled in by computeModelCosts
}

TEST(ModelProto, MissingAndBadFields) {
  cost::TransformerConfig cfg;
  std::string error, field;
  EXPECT_FALSE(cost::configFromProto(
      parse("layers: 4 hidden: 64 heads: 4 seq_length: 16 vocab: 100 tp: 1 "
            "pp: 2"),
      cfg, error, &field));
  EXPECT_EQ(error, "model.global_batch is missing");

  EXPECT_FALSE(cost::configFromProto(
      parse("layers: 4 hidden: 64 heads: 4 seq_length: 16 vocab: 100 tp: 1 "
            "pp: 2 dp: 3 global_batch: 8"),
      cfg, error, &field));
  EXPECT_EQ(field, "global_batch");

  EXPECT_FALSE(cost::configFromProto(
      parse("layers: 4 hidden: 64 heads: 4 seq_length: 16 vocab: 100 tp: 1 "
            "pp: 2 global_batch: 8 efficiency: 0"),
      cfg, error, &field));
  EXPECT_EQ(field, "efficiency");

  EXPECT_FALSE(cost::configFromProto(
      parse("layers: 4 hidden: 64 heads: 4 seq_length: 16 vocab: 100 tp: 1 "
            "pp: 2 global_batch: 8 gpu: \"B200\""),
      cfg, error, &field));
  EXPECT_EQ(field, "gpu");
  EXPECT_NE(error.find("unknown GPU preset 'B200'"), std::string::npos);
}
