//===- ModelZoo.cpp - Fill-job layer lists of well-known models -----------===//
//
// Every model is written as a list of layers with FLOPs and bytes computed
// from its published dimensions (docs/cost-model.md lists them). Conventions:
//  - bf16 weights and activations (2 bytes); FLOPs = 2 x multiply-adds;
//  - activationBytesPerSample is the largest tensor a layer materializes per
//    sample (MLP intermediate or attention scores or the output), so the
//    planner's working set 2 x batch x activation covers input + that tensor;
//  - training jobs: backward = 2 x forward FLOPs, bf16 gradients (2 bytes per
//    param), Adam with fp32 master weights and moments (12 bytes per param),
//    stash = what backward needs without checkpointing.
//
//===----------------------------------------------------------------------===//

#include "algo/cost/ModelZoo.h"

#include "algo/cost/CostModel.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace pipefill::cost {
namespace {

struct Builder {
  const ZooOptions &opts;
  fill::Job &job;
  bool training;

  double us(double flops) const {
    return flops / (opts.efficiency * opts.peakTflops * 1e6);
  }
  /// Adds a layer; `params` in parameters, bytes in bytes.
  void add(const std::string &name, double forwardFlops, double params,
           double activationBytes, double stashBytes = 0) {
    fill::Layer l;
    l.name = name;
    l.forwardUsPerSample = us(forwardFlops);
    l.weightBytes = int64_t(std::llround(2 * params));
    l.activationBytesPerSample = int64_t(std::llround(activationBytes));
    if (training) {
      l.backwardUsPerSample = 2 * l.forwardUsPerSample;
      l.gradBytes = int64_t(std::llround(2 * params));
      l.optimizerBytes = int64_t(std::llround(12 * params));
      l.stashBytesPerSample = int64_t(std::llround(stashBytes));
    }
    job.layers.push_back(l);
  }
};

/// Transformer encoder / decoder layer with a GELU MLP (BERT, XLM-R, GPT).
void transformerLayers(Builder &b, const std::string &prefix, int layers,
                       int64_t h, int64_t heads, int64_t ffn, int64_t s) {
  double flops = double(s) * (layerGemmFlopsPerToken(h, ffn) +
                              layerAttentionFlopsPerToken(h, s));
  double act = 2.0 * std::max({double(s) * ffn, double(heads) * s * s,
                               double(s) * h});
  // Korthikanti et al. without tensor parallelism: s h (34 + 5 a s / h).
  double stash = double(s) * h * (34.0 + 5.0 * heads * double(s) / h);
  for (int i = 0; i < layers; ++i)
    b.add(prefix + "." + std::to_string(i), flops, layerParams(h, ffn), act,
          stash);
}

void bert(Builder &b, int layers, int64_t h, int64_t heads, int64_t vocab,
          int64_t positions, int64_t s) {
  // Word + position + token-type tables and a layernorm; ~10 FLOPs per
  // element for the adds and the layernorm.
  double params = double(vocab + positions + 2) * h + 2.0 * h;
  b.add("embedding", 10.0 * s * h, params, 2.0 * s * h, 2.0 * s * h);
  transformerLayers(b, "encoder", layers, h, heads, 4 * h, s);
}

void swinB(Builder &b) {
  // Swin-B (Liu et al. 2021): 224x224 input, patch 4, window 7, embed 128,
  // depths 2-2-18-2, heads 4-8-16-32; 15.4 GMACs, 88M params.
  const int64_t M2 = 49;
  int64_t N = 56 * 56, C = 128;
  b.add("patch_embed", 2.0 * N * 48 * C, 48.0 * C + C + 2.0 * C,
        2.0 * N * C);
  const int depths[4] = {2, 2, 18, 2};
  const int heads[4] = {4, 8, 16, 32};
  for (int st = 0; st < 4; ++st) {
    double macs = 12.0 * N * C * C + 2.0 * N * M2 * C;
    double params = 12.0 * C * C + 13.0 * C + 169.0 * heads[st];
    double act = 2.0 * std::max(double(N) * 4 * C, double(heads[st]) * N * M2);
    for (int i = 0; i < depths[st]; ++i)
      b.add("stage" + std::to_string(st + 1) + ".block" + std::to_string(i),
            2 * macs, params, act);
    if (st < 3) {
      // Patch merging: layernorm(4C) + linear 4C -> 2C on N / 4 tokens.
      b.add("stage" + std::to_string(st + 1) + ".merge",
            2.0 * (N / 4) * 4 * C * 2 * C, 8.0 * C * C + 8.0 * C,
            2.0 * N * C);
      N /= 4;
      C *= 2;
    }
  }
  b.add("head", 2.0 * C * 1000, C * 1000.0 + 1000 + 2.0 * C, 2.0 * N * C);
}

void llama7b(Builder &b, int64_t s) {
  // LLaMA-7B (Touvron et al. 2023): 32 layers, h 4096, 32 heads, SwiGLU MLP
  // 11008, vocabulary 32000, untied embedding and LM head; 6.74B params.
  // Batch prefill (scoring): the KV cache is not kept, the LM head runs on
  // the last token only.
  const int64_t h = 4096, heads = 32, ffn = 11008, V = 32000;
  b.add("embedding", 0.0, double(V) * h, 2.0 * s * h);
  double gemm = 2.0 * (4.0 * h * h + 3.0 * h * ffn);
  double flops = double(s) * (gemm + layerAttentionFlopsPerToken(h, s));
  double params = 4.0 * h * h + 3.0 * h * ffn + 2.0 * h;
  double act = 2.0 * std::max({2.0 * s * ffn, double(heads) * s * s,
                               double(s) * h});
  for (int i = 0; i < 32; ++i)
    b.add("decoder." + std::to_string(i), flops, params, act);
  b.add("lm_head", 2.0 * h * V, double(V) * h + h, 4.0 * V);
}

void gptSmallTrain(Builder &b, int64_t s) {
  // GPT-2 small (Radford et al. 2019): 12 layers, h 768, 12 heads, vocabulary
  // 50257, 1024 positions; 124M params (LM head counted as its own copy).
  const int64_t h = 768, heads = 12, V = 50257, positions = 1024;
  b.add("embedding", 10.0 * s * h, double(V + positions) * h, 2.0 * s * h,
        2.0 * s * h);
  transformerLayers(b, "block", 12, h, heads, 4 * h, s);
  // Final layernorm + LM head; the fp32 logits feed the cross entropy.
  b.add("lm_head", 2.0 * s * h * V, double(V) * h + 2.0 * h, 2.0 * s * V,
        4.0 * s * V + 2.0 * s * h);
}

void resnet50Train(Builder &b) {
  // ResNet-50 v1.5 (He et al. 2016; stride in the 3x3 conv): 224x224 input,
  // 4.1 GMACs, 25.6M params.
  // Stem: 7x7/2 conv 3 -> 64 at 112x112, BN, ReLU, 3x3/2 max pool.
  double stemOut = 112.0 * 112 * 64;
  b.add("stem", 2.0 * stemOut * 147, 147.0 * 64 + 2 * 64, 2.0 * stemOut,
        2.0 * 2 * stemOut + 2.0 * 56 * 56 * 64);
  struct StageDef {
    int mid, blocks, stride;
  };
  const StageDef stages[4] = {{64, 3, 1}, {128, 4, 2}, {256, 6, 2},
                              {512, 3, 2}};
  double Hin = 56, Cin = 64;
  for (int st = 0; st < 4; ++st) {
    for (int i = 0; i < stages[st].blocks; ++i) {
      double mid = stages[st].mid, out = 4 * mid;
      double stride = i == 0 ? stages[st].stride : 1;
      double H = Hin / stride;
      bool ds = i == 0;
      double macs = Hin * Hin * Cin * mid + H * H * 9 * mid * mid +
                    H * H * mid * out + (ds ? H * H * Cin * out : 0);
      double params = Cin * mid + 9 * mid * mid + mid * out +
                      (ds ? Cin * out : 0) +
                      2 * (2 * mid + out + (ds ? out : 0));
      double elems = Hin * Hin * mid + H * H * mid + H * H * out +
                     (ds ? H * H * out : 0);
      double act = 2.0 * std::max({Hin * Hin * mid, H * H * out,
                                   Hin * Hin * Cin});
      // Each conv output and its BN output are kept for backward (bf16).
      b.add("layer" + std::to_string(st + 1) + "." + std::to_string(i),
            2 * macs, params, act, 2.0 * 2 * elems);
      Hin = H;
      Cin = out;
    }
  }
  b.add("fc", 2.0 * 2048 * 1000, 2048.0 * 1000 + 1000, 2.0 * 2048,
        2.0 * 2048 + 4.0 * 1000);
}

} // namespace

const std::vector<ZooEntry> &zooEntries() {
  static const std::vector<ZooEntry> entries = {
      {"bert-base", {"bert_base", "bertbase"}, fill::JobKind::Inference,
       "BERT-base inference: 12 layers, h 768, 12 heads, seq 128 (110M "
       "params)"},
      {"bert-large", {"bertlarge"}, fill::JobKind::Inference,
       "BERT-large inference: 24 layers, h 1024, 16 heads, seq 128 (335M "
       "params)"},
      {"xlmr-large", {"xlm-r", "xlmr", "xlm-r-large", "xlm-roberta-large"},
       fill::JobKind::Inference,
       "XLM-R large inference: 24 layers, h 1024, 16 heads, 250k vocabulary, "
       "seq 256 (560M params)"},
      {"swin-b", {"swin", "swin-base", "swinb"}, fill::JobKind::Inference,
       "Swin-B image classification inference at 224x224 (88M params, 15.4 "
       "GMACs)"},
      {"llama-7b", {"llama7b", "llama-7b-prefill", "llama"},
       fill::JobKind::Inference,
       "LLaMA-7B batch prefill (scoring): 32 layers, h 4096, SwiGLU 11008, "
       "seq 512 (6.7B params)"},
      {"gpt-small-train", {"gpt2-small", "gpt-small", "gpt2-train"},
       fill::JobKind::Training,
       "GPT-2 small training: 12 layers, h 768, 12 heads, seq 512, Adam "
       "(124M params)"},
      {"resnet50-train", {"resnet50", "resnet-50", "resnet-50-train"},
       fill::JobKind::Training,
       "ResNet-50 training at 224x224, Adam (25.6M params, 4.1 GMACs)"},
  };
  return entries;
}

std::string zooNames() {
  std::string out;
  for (const ZooEntry &e : zooEntries())
    out += (out.empty() ? "" : ", ") + e.name;
  return out;
}

std::string canonicalZooName(const std::string &name) {
  std::string key = normalizeModelName(name);
  for (const ZooEntry &e : zooEntries()) {
    if (key == e.name)
      return e.name;
    for (const std::string &alias : e.aliases)
      if (key == normalizeModelName(alias))
        return e.name;
  }
  return "";
}

bool zooJob(const std::string &name, const ZooOptions &opts, fill::Job &out,
            std::string &error) {
  std::string canonical = canonicalZooName(name);
  if (canonical.empty()) {
    error = "unknown model '" + name + "'; known models: " + zooNames();
    return false;
  }
  if (!(opts.peakTflops > 0) || !(opts.efficiency > 0 && opts.efficiency <= 1)) {
    error = "the model zoo needs a positive peak FLOP/s and an efficiency in "
            "(0, 1]";
    return false;
  }
  if (opts.seqLength < 0) {
    error = "the sequence length must be positive";
    return false;
  }
  out = fill::Job();
  out.name = canonical;
  out.samples = opts.samples;
  const ZooEntry *entry = nullptr;
  for (const ZooEntry &e : zooEntries())
    if (e.name == canonical)
      entry = &e;
  out.kind = entry->kind;
  Builder b{opts, out, out.kind == fill::JobKind::Training};
  auto seq = [&](int64_t def) { return opts.seqLength ? opts.seqLength : def; };
  if (canonical == "bert-base")
    bert(b, 12, 768, 12, 30522, 512, seq(128));
  else if (canonical == "bert-large")
    bert(b, 24, 1024, 16, 30522, 512, seq(128));
  else if (canonical == "xlmr-large")
    bert(b, 24, 1024, 16, 250002, 514, seq(256));
  else if (canonical == "swin-b")
    swinB(b);
  else if (canonical == "llama-7b")
    llama7b(b, seq(512));
  else if (canonical == "gpt-small-train")
    gptSmallTrain(b, seq(512));
  else
    resnet50Train(b);
  return true;
}

double zooForwardFlopsPerSample(const fill::Job &job, const ZooOptions &opts) {
  double us = 0;
  for (const fill::Layer &l : job.layers)
    us += l.forwardUsPerSample;
  return us * opts.efficiency * opts.peakTflops * 1e6;
}

} // namespace pipefill::cost
