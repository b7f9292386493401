// Model zoo: layer lists against published FLOPs / parameter counts and
// hand-computed per-layer figures.

#include "algo/cost/ModelZoo.h"

#include <gtest/gtest.h>

using namespace pipefill;
using namespace pipefill::cost;

namespace {
fill::Job job(const std::string &name, ZooOptions opts = {}) {
  fill::Job j;
  std::string error;
  EXPECT_TRUE(zooJob(name, opts, j, error)) << error;
  return j;
}
double weights(const fill::Job &j) {
  double w = 0;
  for (const fill::Layer &l : j.layers)
    w += double(l.weightBytes);
  return w;
}
} // namespace

// BERT-large encoder layer at s = 128: 128 x (24 x 1024^2 + 4 x 128 x 1024)
// = 128 x 25690112 = 3288334336 FLOP; at 0.5 x 312 TFLOP/s = 156e6 FLOP/us
// that is 21.0791 us per sample. Weights (12 h^2 + 13 h) x 2 = 25192448 B.
TEST(ModelZoo, BertLargeLayer) {
  fill::Job j = job("bert-large");
  EXPECT_EQ(j.kind, fill::JobKind::Inference);
  ASSERT_EQ(j.layers.size(), 25u); // embedding + 24 encoders
  const fill::Layer &l = j.layers[1];
  EXPECT_EQ(l.name, "encoder.0");
  EXPECT_NEAR(l.forwardUsPerSample, 3288334336.0 / 156e6, 1e-9);
  EXPECT_NEAR(l.forwardUsPerSample, 21.0791, 1e-4);
  EXPECT_EQ(l.weightBytes, 25192448);
  // Largest tensor: the MLP intermediate s x 4h = 128 x 4096 x 2 bytes.
  EXPECT_EQ(l.activationBytesPerSample, 1048576);
}

TEST(ModelZoo, PublishedSizes) {
  ZooOptions o;
  // BERT-base ~110M params, BERT-large ~335M (bf16: 2 bytes each).
  EXPECT_NEAR(weights(job("bert-base")) / 2 / 1e6, 110, 2);
  EXPECT_NEAR(weights(job("bert-large")) / 2 / 1e6, 335, 3);
  // XLM-R large ~560M, of which the 250k x 1024 embedding is 256M.
  EXPECT_NEAR(weights(job("xlmr-large")) / 2 / 1e6, 560, 5);
  // Swin-B: 88M params, 15.4 GMACs = 30.8 GFLOP per image.
  fill::Job swin = job("swin-b");
  EXPECT_NEAR(weights(swin) / 2 / 1e6, 88, 1.5);
  EXPECT_NEAR(zooForwardFlopsPerSample(swin, o) / 2e9, 15.4, 0.3);
  // LLaMA-7B: 6.74B params.
  EXPECT_NEAR(weights(job("llama-7b")) / 2 / 1e9, 6.74, 0.01);
  // ResNet-50: 25.6M params, 4.1 GMACs.
  fill::Job rn = job("resnet50-train");
  EXPECT_EQ(rn.kind, fill::JobKind::Training);
  EXPECT_NEAR(weights(rn) / 2 / 1e6, 25.6, 0.2);
  EXPECT_NEAR(zooForwardFlopsPerSample(rn, o) / 2e9, 4.1, 0.1);
  // GPT-2 small: 124M params without the LM head's own copy of the table.
  fill::Job gpt = job("gpt-small-train");
  double head = double(gpt.layers.back().weightBytes);
  EXPECT_NEAR((weights(gpt) - head) / 2 / 1e6, 124.4, 0.5);
}

// GPT-2 small block at s = 512: 512 x (24 x 768^2 + 4 x 512 x 768)
// = 512 x 15728640 = 8053063680 FLOP -> 51.6222 us; backward 2x; grads 2
// bytes and Adam 12 bytes per param (7087872 params); stash
// s h (34 + 5 a s / h) = 393216 x 74 = 29097984 bytes.
TEST(ModelZoo, GptSmallTrainingLayer) {
  fill::Job j = job("gpt-small-train");
  const fill::Layer &l = j.layers[1];
  EXPECT_EQ(l.name, "block.0");
  EXPECT_NEAR(l.forwardUsPerSample, 8053063680.0 / 156e6, 1e-9);
  EXPECT_NEAR(l.backwardUsPerSample, 2 * 8053063680.0 / 156e6, 1e-9);
  EXPECT_EQ(l.weightBytes, 2 * 7087872);
  EXPECT_EQ(l.gradBytes, 2 * 7087872);
  EXPECT_EQ(l.optimizerBytes, 12 * 7087872);
  EXPECT_EQ(l.stashBytesPerSample, 29097984);
}

TEST(ModelZoo, OptionsScaleTimes) {
  ZooOptions fast;
  fast.peakTflops = 989;
  fast.efficiency = 0.45;
  fill::Job a = job("bert-base"), b = job("bert-base", fast);
  EXPECT_NEAR(a.layers[3].forwardUsPerSample / b.layers[3].forwardUsPerSample,
              989 * 0.45 / (312 * 0.5), 1e-12);
  ZooOptions longer;
  longer.seqLength = 256;
  longer.samples = 42;
  fill::Job c = job("bert-base", longer);
  EXPECT_EQ(c.samples, 42);
  EXPECT_GT(c.layers[3].forwardUsPerSample,
            2 * a.layers[3].forwardUsPerSample);
}

TEST(ModelZoo, LookupIsCaseInsensitiveWithAliases) {
  EXPECT_EQ(canonicalZooName("BERT-Large"), "bert-large");
  EXPECT_EQ(canonicalZooName("XLM_R"), "xlmr-large");
  EXPECT_EQ(canonicalZooName("ResNet-50"), "resnet50-train");
  EXPECT_EQ(canonicalZooName("gpt9"), "");
  fill::Job j;
  std::string error;
  EXPECT_FALSE(zooJob("gpt9", ZooOptions(), j, error));
  EXPECT_EQ(error, "unknown model 'gpt9'; known models: bert-base, "
                   "bert-large, xlmr-large, swin-b, llama-7b, "
                   "gpt-small-train, resnet50-train");
}

// Every zoo job is well-formed for the planner: non-negative costs,
// training jobs carry backward/optimizer data.
TEST(ModelZoo, AllWellFormed) {
  for (const ZooEntry &e : zooEntries()) {
    fill::Job j = job(e.name);
    EXPECT_EQ(j.name, e.name);
    EXPECT_FALSE(j.layers.empty());
    EXPECT_GT(fill::usefulUsPerSample(j), 0) << e.name;
    for (const fill::Layer &l : j.layers) {
      EXPECT_GE(l.forwardUsPerSample, 0);
      EXPECT_GT(l.activationBytesPerSample, 0) << e.name << " " << l.name;
      if (e.kind == fill::JobKind::Training) {
        EXPECT_GT(l.optimizerBytes, 0);
        EXPECT_GT(l.stashBytesPerSample, 0);
      }
    }
  }
}
