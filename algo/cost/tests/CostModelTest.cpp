// Cost model against numbers computed by hand (in the comments) for the
// 40B GPT of the study: L 48, h 8192, a 64, s 2048, V 51200, b 1, TP 8,
// PP 16 (3 layers per stage), DP 8, global batch 1024, A100 at 50% of
// 312 TFLOP/s = 156e12 FLOP/s = 156e6 FLOP/us.

#include "algo/cost/CostModel.h"

#include <gtest/gtest.h>

using namespace pipefill;
using namespace pipefill::cost;

namespace {

TransformerConfig gpt40b() {
  TransformerConfig c;
  c.layers = 48;
  c.hidden = 8192;
  c.heads = 64;
  c.seqLength = 2048;
  c.vocab = 51200;
  c.microBatchSize = 1;
  c.tp = 8;
  c.pp = 16;
  c.dp = 8;
  c.globalBatch = 1024;
  c.gpu = "A100-80GB";
  return c;
}

ModelCosts costsOf(const TransformerConfig &c,
                   sched::ScheduleKind k = sched::ScheduleKind::OneFOneB) {
  ModelCosts out;
  std::string error;
  EXPECT_TRUE(computeModelCosts(c, k, 1, out, error)) << error;
  return out;
}

} // namespace

// The per-layer formulas themselves.
TEST(CostFormulas, Gpt40bLayer) {
  // 12 h^2 + 13 h = 12 * 67108864 + 106496 = 805412864.
  EXPECT_DOUBLE_EQ(layerParams(8192, 4 * 8192), 805412864.0);
  // 24 h^2 = 1610612736; 4 s h = 4 * 2048 * 8192 = 67108864.
  EXPECT_DOUBLE_EQ(layerGemmFlopsPerToken(8192, 4 * 8192), 1610612736.0);
  EXPECT_DOUBLE_EQ(layerAttentionFlopsPerToken(8192, 2048), 67108864.0);
  // s b h (34 + 5 a s / h) / t = 16777216 * (34 + 80) / 8 = 239075328.
  EXPECT_DOUBLE_EQ(layerStashBytes(2048, 1, 8192, 64, 8, false), 239075328.0);
  // Recompute keeps 2 s b h / t = 4194304.
  EXPECT_DOUBLE_EQ(layerStashBytes(2048, 1, 8192, 64, 8, true), 4194304.0);
  EXPECT_DOUBLE_EQ(bytesPerParam(0, 8), 18.0);
  EXPECT_DOUBLE_EQ(bytesPerParam(1, 8), 6.0 + 12.0 / 8);
}

// ffn != 4h: 2 (4h^2 + 2 h ffn); h = 4, ffn = 10: 2 (64 + 80) = 288.
TEST(CostFormulas, GeneralMlpWidth) {
  EXPECT_DOUBLE_EQ(layerGemmFlopsPerToken(4, 10), 288.0);
  // 4h^2 + 2 h ffn + ffn + 9h = 64 + 80 + 10 + 36 = 190.
  EXPECT_DOUBLE_EQ(layerParams(4, 10), 190.0);
}

TEST(CostModel, Gpt40bMicrobatchesAndLayerSplit) {
  ModelCosts c = costsOf(gpt40b());
  EXPECT_EQ(c.microbatches, 128); // 1024 / (8 * 1)
  ASSERT_EQ(c.stages.size(), 16u);
  EXPECT_EQ(c.spec.stages, 16);
  EXPECT_EQ(c.spec.microbatches, 128);
  for (int s = 0; s < 16; ++s) {
    EXPECT_EQ(c.stages[s].layers, 3);
    EXPECT_EQ(c.stages[s].firstLayer, 3 * s);
  }
  EXPECT_TRUE(c.stages[0].embedding);
  EXPECT_TRUE(c.stages[15].lmHead);
  EXPECT_FALSE(c.stages[7].embedding || c.stages[7].lmHead);
}

TEST(CostModel, Gpt40bStageTimes) {
  ModelCosts c = costsOf(gpt40b());
  // Middle stage: 3 layers x 2048 tokens x 1677721600 / 8
  //   = 1288490188800 FLOP -> / 156e6 = 8259.5525 us.
  EXPECT_NEAR(c.stages[5].forwardFlops, 1288490188800.0, 1.0);
  EXPECT_NEAR(c.spec.costs[5].forwardUs, 8259.5525, 1e-3);
  // Backward = 2 x forward = 16519.105 us.
  EXPECT_NEAR(c.spec.costs[5].backwardUs, 16519.105, 1e-3);
  // Weight part: 3 x 2048 x 1610612736 / 8 = 1236950581248 -> 7929.1704 us.
  EXPECT_NEAR(c.spec.costs[5].backwardWeightUs, 7929.1704, 1e-3);
  // First stage: embedding lookup adds no FLOPs.
  EXPECT_NEAR(c.spec.costs[0].forwardUs, 8259.5525, 1e-3);
  // Last stage: LM head 2 h V = 838860800 per token x 2048 / 8
  //   = 214748364800 FLOP = 1376.5921 us more: 9636.1446 us.
  EXPECT_NEAR(c.spec.costs[15].forwardUs, 9636.1446, 1e-3);
  EXPECT_NEAR(c.spec.costs[15].backwardUs, 2 * 9636.1446, 2e-3);
}

TEST(CostModel, Gpt40bMemory) {
  ModelCosts c = costsOf(gpt40b());
  // Stash: 3 x 239075328 = 717225984.
  EXPECT_EQ(c.spec.costs[5].stashBytes, 717225984);
  // First stage + dropout mask s b h / t = 2097152.
  EXPECT_EQ(c.spec.costs[0].stashBytes, 717225984 + 2097152);
  // Last stage + 2 s b h / t (4194304) + fp32 logits 4 s b V / t (52428800).
  EXPECT_EQ(c.spec.costs[15].stashBytes, 717225984 + 4194304 + 52428800);
  // Static, no ZeRO: 3 x 805412864 / 8 = 302029824 params x 18 bytes.
  EXPECT_EQ(c.spec.costs[5].staticBytes, 5436536832);
  // First stage + V h / 8 = 52428800 params: 354458624 x 18.
  EXPECT_EQ(c.spec.costs[0].staticBytes, 6380255232);
  // Activations to the next stage: 2 s b h / t = 4194304 (bf16, scattered).
  EXPECT_EQ(c.spec.costs[5].activationBytes, 4194304);
}

TEST(CostModel, Gpt40bZeroOneShardsOptimizerStates) {
  TransformerConfig cfg = gpt40b();
  cfg.zeroStage = 1;
  ModelCosts c = costsOf(cfg);
  // 302029824 x (2 + 4 + 12 / 8) = 302029824 x 7.5 = 2265223680.
  EXPECT_EQ(c.spec.costs[5].staticBytes, 2265223680);
}

TEST(CostModel, Gpt40bRecompute) {
  TransformerConfig cfg = gpt40b();
  cfg.recompute = true;
  ModelCosts c = costsOf(cfg);
  // Backward = 3 x forward for the layers: 24778.6575 us.
  EXPECT_NEAR(c.spec.costs[5].backwardUs, 3 * 8259.5525, 1e-3);
  // Stash: 3 x 4194304.
  EXPECT_EQ(c.spec.costs[5].stashBytes, 3 * 4194304);
  // Static: params x 18 + one layer's full activations (workspace).
  EXPECT_EQ(c.spec.costs[5].staticBytes, 5436536832 + 239075328);
}

TEST(CostModel, Gpt40bTail) {
  ModelCosts c = costsOf(gpt40b());
  EXPECT_TRUE(c.spec.tail);
  EXPECT_EQ(c.spec.dataParallel, 8);
  // Largest stage: the last one, 302029824 + (51200 x 8192 + 2 x 8192) / 8
  // = 354460672 params -> 708921344 bf16 gradient bytes.
  EXPECT_EQ(c.spec.gradBytes, 708921344);
  EXPECT_DOUBLE_EQ(c.spec.dpBandwidthGBps, 25.0);
  // Adam: 354460672 x 30 bytes / 2039e3 bytes per us = 5215.214 us.
  EXPECT_NEAR(c.spec.optimizerUs, 354460672.0 * 30 / 2039e3, 1e-6);
  EXPECT_NEAR(c.spec.optimizerUs, 5215.214, 1e-3);
  EXPECT_DOUBLE_EQ(c.spec.p2pBandwidthGBps, 25.0);
  EXPECT_DOUBLE_EQ(c.spec.p2pLatencyUs, 10.0);
  EXPECT_EQ(c.hw.gpuMemoryBytes, 85899345920);
}

// Model FLOPs per iteration against Narayanan et al.'s closed form without
// recompute: 72 B s l h^2 (1 + s / 6h) + 6 B s h V.
TEST(CostModel, Gpt3ModelFlopsClosedForm) {
  TransformerConfig c;
  c.layers = 96;
  c.hidden = 12288;
  c.heads = 96;
  c.seqLength = 2048;
  c.vocab = 51200;
  c.tp = 8;
  c.pp = 12; // 8 layers per stage
  c.dp = 16;
  c.globalBatch = 1536;
  ModelCosts m = costsOf(c);
  double B = 1536, s = 2048, l = 96, h = 12288, V = 51200;
  double want = 72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V;
  EXPECT_NEAR(m.modelFlopsPerIteration / want, 1.0, 1e-12);
  // 175B parameters: 96 x (12 h^2 + 13 h) + V h + 2h = 174.56e9.
  EXPECT_NEAR(m.totalParams, 96 * (12 * h * h + 13 * h) + V * h + 2 * h, 1.0);
  EXPECT_EQ(m.microbatches, 96);
}

TEST(CostModel, UnevenLayersGoToInnerStages) {
  TransformerConfig c = gpt40b();
  c.layers = 50; // 16 x 3 + 2: stages 1 and 2 get 4
  ModelCosts m = costsOf(c);
  EXPECT_EQ(m.stages[0].layers, 3);
  EXPECT_EQ(m.stages[1].layers, 4);
  EXPECT_EQ(m.stages[2].layers, 4);
  EXPECT_EQ(m.stages[3].layers, 3);
  EXPECT_EQ(m.stages[15].firstLayer, 47);
}

TEST(CostModel, PresetsAndEfficiency) {
  GpuPreset p;
  std::string error;
  ASSERT_TRUE(findGpuPreset("h100", p, error));
  EXPECT_EQ(p.name, "H100-80GB");
  EXPECT_DOUBLE_EQ(p.peakTflops, 989);
  ASSERT_TRUE(findGpuPreset("h200", p, error));
  EXPECT_DOUBLE_EQ(p.hbmGBps, 4800);
  ASSERT_TRUE(findGpuPreset("a100_80gb", p, error));
  EXPECT_FALSE(findGpuPreset("V100", p, error));
  EXPECT_NE(error.find("A100-80GB, H100-80GB, H200"), std::string::npos);

  TransformerConfig c = gpt40b();
  c.gpu = "H100-80GB";
  c.efficiency = 0.4;
  ModelCosts m = costsOf(c);
  // 1288490188800 / (0.4 x 989e6) = 3256.9519 us.
  EXPECT_NEAR(m.spec.costs[5].forwardUs, 1288490188800.0 / (0.4 * 989e6),
              1e-6);
  EXPECT_DOUBLE_EQ(m.hw.efficiency, 0.4);
  EXPECT_DOUBLE_EQ(m.hw.pcieGBps, 50);
}

TEST(CostModel, Mfu) {
  ModelCosts m = costsOf(gpt40b());
  // With every GPU busy for exactly the model FLOPs at 50% of peak the
  // utilization is 50%.
  double gpus = 8.0 * 16 * 8;
  double us = m.modelFlopsPerIteration / (gpus * 156e6);
  EXPECT_NEAR(modelFlopsUtilization(m, us), 0.5, 1e-12);
}

TEST(CostModelErrors, NamesTheField) {
  std::string error, field;
  ModelCosts out;
  TransformerConfig c = gpt40b();
  c.globalBatch = 1020; // not a multiple of 8
  EXPECT_FALSE(computeModelCosts(c, sched::ScheduleKind::OneFOneB, 1, out,
                                 error, &field));
  EXPECT_EQ(field, "global_batch");
  EXPECT_NE(error.find("not a multiple of dp x micro_batch_size (8 x 1 = 8)"),
            std::string::npos)
      << error;

  c = gpt40b();
  c.globalBatch = 4; // fewer than dp x b
  EXPECT_FALSE(validateConfig(c, error, &field));
  EXPECT_EQ(field, "global_batch");

  c = gpt40b();
  c.tp = 3;
  EXPECT_FALSE(validateConfig(c, error, &field));
  EXPECT_EQ(field, "tp");

  c = gpt40b();
  c.pp = 64;
  EXPECT_FALSE(validateConfig(c, error, &field));
  EXPECT_EQ(field, "pp");

  c = gpt40b();
  c.zeroStage = 3;
  EXPECT_FALSE(validateConfig(c, error, &field));
  EXPECT_EQ(field, "zero_stage");

  c = gpt40b();
  c.gpu = "TPUv4";
  EXPECT_FALSE(validateConfig(c, error, &field));
  EXPECT_EQ(field, "gpu");
  EXPECT_NE(error.find("known presets"), std::string::npos);

  c = gpt40b();
  c.hidden = 0;
  EXPECT_FALSE(validateConfig(c, error, &field));
  EXPECT_EQ(field, "hidden");

  c = gpt40b();
  c.efficiency = 1.5;
  EXPECT_FALSE(validateConfig(c, error, &field));
  EXPECT_EQ(field, "efficiency");
}

// Rules of the plain API that a JobSpec cannot reach (the JobSpec reader's
// ranges come first: ffn_hidden >= 1, efficiency in (0, 1], zero_stage <= 1,
// global_batch <= 2^30): the message and the field each names.
TEST(CostModelErrors, PlainApiMessages) {
  struct Case {
    const char *what;
    void (*edit)(TransformerConfig &);
    const char *field;
    const char *message;
  };
  const Case cases[] = {
      {"negative ffn", [](TransformerConfig &c) { c.ffnHidden = -1; }, "ffn_hidden",
       "model.ffn_hidden must be positive (got -1)"},
      {"zero stage 2", [](TransformerConfig &c) { c.zeroStage = 2; }, "zero_stage",
       "model.zero_stage must be 0 or 1 (got 2); ZeRO-2/3 are not modelled"},
      {"efficiency 1.5", [](TransformerConfig &c) { c.efficiency = 1.5; }, "efficiency",
       "model.efficiency must be in (0, 1] (got 1.500000)"},
      {"2^31 micro-batches",
       [](TransformerConfig &c) {
         c.dp = 1;
         c.globalBatch = int64_t(1) << 31;
       },
       "global_batch", "model.global_batch gives too many micro-batches (2147483648)"},
  };
  for (const Case &k : cases) {
    TransformerConfig c = gpt40b();
    k.edit(c);
    std::string error, field;
    EXPECT_FALSE(validateConfig(c, error, &field)) << k.what;
    EXPECT_EQ(field, k.field) << k.what;
    EXPECT_EQ(error, k.message) << k.what;
  }
}

// microbatchCount on its own (callers such as pipefill-sim call it on
// configs validateConfig has not seen) refuses a zero divisor.
TEST(CostModelErrors, MicrobatchCountNeedsPositiveSizes) {
  TransformerConfig c = gpt40b();
  c.dp = 0;
  int m = 7;
  std::string error, field;
  EXPECT_FALSE(microbatchCount(c, m, error, &field));
  EXPECT_EQ(m, 7);
  EXPECT_EQ(field, "global_batch");
  EXPECT_EQ(error, "model.global_batch, dp and micro_batch_size must be positive");
}

// The derived spec is accepted by the schedule library and simulates; the
// 1F1B iteration is at least the closed form with the slowest stage.
TEST(CostModel, SpecSimulates) {
  TransformerConfig c = gpt40b();
  c.globalBatch = 256; // m = 32, keeps the test fast
  ModelCosts m = costsOf(c);
  std::string error;
  ASSERT_TRUE(sched::validateSpec(m.spec, error)) << error;
  sched::Schedule schedule;
  ASSERT_TRUE(sched::expandSchedule(m.spec, schedule, error)) << error;
  sched::SimResult result;
  ASSERT_TRUE(sched::simulate(m.spec, schedule, result, error)) << error;
  const auto &last = m.spec.costs[15];
  EXPECT_GE(result.iterationUs,
            32 * (last.forwardUs + last.backwardUs) + sched::allReduceUs(m.spec));
  for (int s = 0; s < 16; ++s)
    EXPECT_LT(result.stages[s].peakBytes, m.hw.gpuMemoryBytes);
}
