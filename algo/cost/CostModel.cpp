//===- CostModel.cpp - Stage costs of a transformer from its dimensions ---===//

#include "algo/cost/CostModel.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

namespace pipefill::cost {

std::string normalizeModelName(const std::string &name) {
  std::string out;
  for (char c : name) {
    if (c == '_' || c == ' ')
      c = '-';
    out += char(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

namespace {

bool fail(std::string &error, std::string *field, const std::string &f,
          const std::string &message) {
  error = message;
  if (field)
    *field = f;
  return false;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

} // namespace

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

const std::vector<GpuPreset> &gpuPresets() {
  static const std::vector<GpuPreset> presets = [] {
    std::vector<GpuPreset> v;
    GpuPreset a100;
    a100.name = "A100-80GB";
    a100.peakTflops = 312;     // dense bf16, A100 datasheet
    a100.hbmGBps = 2039;       // SXM 80GB
    a100.memoryBytes = int64_t(80 * kGiB);
    a100.pcieGBps = 25;        // PCIe 4.0 x16, achievable per direction
    a100.interNodeGBps = 25;   // HDR InfiniBand 200 Gb/s per GPU
    a100.netLatencyUs = 10;
    a100.kernelLaunchUs = 5;
    a100.defaultEfficiency = 0.50;
    a100.efficiencySource =
        "Megatron-LM on A100-80GB: 52% of peak for GPT-3 175B (Narayanan et "
        "al., SC'21); 41.5-51.4% MFU for 22B-175B (Korthikanti et al., 2022)";
    v.push_back(a100);

    GpuPreset h100;
    h100.name = "H100-80GB";
    h100.peakTflops = 989;     // dense bf16, H100 SXM datasheet
    h100.hbmGBps = 3350;
    h100.memoryBytes = int64_t(80 * kGiB);
    h100.pcieGBps = 50;        // PCIe 5.0 x16
    h100.interNodeGBps = 50;   // NDR InfiniBand 400 Gb/s per GPU
    h100.netLatencyUs = 10;
    h100.kernelLaunchUs = 5;
    h100.defaultEfficiency = 0.45;
    h100.efficiencySource =
        "Megatron-Core on H100: up to 47% MFU for GPT-3 175B (NVIDIA "
        "Megatron-LM performance tables)";
    v.push_back(h100);

    GpuPreset h200 = h100;
    h200.name = "H200";
    h200.hbmGBps = 4800;
    h200.memoryBytes = int64_t(141e9); // datasheet "141 GB"
    h200.efficiencySource =
        "same compute as H100 SXM; Megatron-Core H100 MFU (~47%) rounded "
        "down to 45%";
    v.push_back(h200);
    return v;
  }();
  return presets;
}

bool findGpuPreset(const std::string &name, GpuPreset &out,
                   std::string &error) {
  std::string key = normalizeModelName(name);
  for (const GpuPreset &p : gpuPresets()) {
    std::string full = normalizeModelName(p.name);
    std::string shortName = full.substr(0, full.find('-'));
    if (key == full || key == shortName) {
      out = p;
      return true;
    }
  }
  std::string known;
  for (const GpuPreset &p : gpuPresets())
    known += (known.empty() ? "" : ", ") + p.name;
  error = "unknown GPU preset '" + name + "'; known presets: " + known;
  return false;
}

//===----------------------------------------------------------------------===//
// Formulas
//===----------------------------------------------------------------------===//

double layerParams(int64_t h, int64_t ffn) {
  double H = double(h), F = double(ffn);
  return 4 * H * H + 2 * H * F + F + 9 * H;
}

double layerGemmFlopsPerToken(int64_t h, int64_t ffn) {
  double H = double(h), F = double(ffn);
  return 2 * (4 * H * H + 2 * H * F);
}

double layerAttentionFlopsPerToken(int64_t h, int64_t s) {
  return 4.0 * double(s) * double(h);
}

double layerStashBytes(int64_t s, int64_t b, int64_t h, int64_t a, int64_t tp,
                       bool recompute) {
  double sbh = double(s) * double(b) * double(h);
  if (recompute)
    return 2 * sbh / double(tp);
  return sbh * (34.0 + 5.0 * double(a) * double(s) / double(h)) / double(tp);
}

double bytesPerParam(int zeroStage, int dp) {
  double optimizer = 12;
  if (zeroStage >= 1 && dp > 1)
    optimizer /= double(dp);
  return 2 + 4 + optimizer;
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

bool validateConfig(const TransformerConfig &c, std::string &error,
                    std::string *field) {
  auto positive = [&](const char *name, int64_t v) {
    if (v >= 1)
      return true;
    std::ostringstream os;
    os << "model." << name << " must be at least 1 (got " << v << ")";
    return fail(error, field, name, os.str());
  };
  if (!positive("layers", c.layers) || !positive("hidden", c.hidden) ||
      !positive("heads", c.heads) || !positive("seq_length", c.seqLength) ||
      !positive("vocab", c.vocab) ||
      !positive("micro_batch_size", c.microBatchSize) ||
      !positive("tp", c.tp) || !positive("pp", c.pp) ||
      !positive("dp", c.dp) || !positive("global_batch", c.globalBatch))
    return false;
  if (c.ffnHidden < 0)
    return fail(error, field, "ffn_hidden",
                "model.ffn_hidden must be positive (got " +
                    std::to_string(c.ffnHidden) + ")");
  if (c.hidden % c.heads != 0)
    return fail(error, field, "heads",
                "model.hidden (" + std::to_string(c.hidden) +
                    ") must be a multiple of model.heads (" +
                    std::to_string(c.heads) + ")");
  if (c.heads % c.tp != 0)
    return fail(error, field, "tp",
                "model.heads (" + std::to_string(c.heads) +
                    ") must be a multiple of model.tp (" +
                    std::to_string(c.tp) +
                    "): tensor parallelism splits the attention heads");
  int ffn = c.ffnHidden ? c.ffnHidden : 4 * c.hidden;
  if (ffn % c.tp != 0)
    return fail(error, field, "tp",
                "the MLP width (" + std::to_string(ffn) +
                    ") must be a multiple of model.tp (" +
                    std::to_string(c.tp) + ")");
  if (c.layers < c.pp)
    return fail(error, field, "pp",
                "model.pp (" + std::to_string(c.pp) +
                    ") exceeds model.layers (" + std::to_string(c.layers) +
                    "): every stage needs at least one layer");
  if (c.zeroStage != 0 && c.zeroStage != 1)
    return fail(error, field, "zero_stage",
                "model.zero_stage must be 0 or 1 (got " +
                    std::to_string(c.zeroStage) +
                    "); ZeRO-2/3 are not modelled");
  if (c.efficiency != 0 && !(c.efficiency > 0 && c.efficiency <= 1))
    return fail(error, field, "efficiency",
                "model.efficiency must be in (0, 1] (got " +
                    std::to_string(c.efficiency) + ")");
  GpuPreset preset;
  std::string gpuError;
  if (!findGpuPreset(c.gpu, preset, gpuError))
    return fail(error, field, "gpu", "model.gpu: " + gpuError);
  int m = 0;
  return microbatchCount(c, m, error, field);
}

bool microbatchCount(const TransformerConfig &c, int &microbatches,
                     std::string &error, std::string *field) {
  int64_t perStep = int64_t(c.dp) * int64_t(c.microBatchSize);
  if (perStep < 1 || c.globalBatch < 1)
    return fail(error, field, "global_batch",
                "model.global_batch, dp and micro_batch_size must be "
                "positive");
  if (c.globalBatch % perStep != 0) {
    std::ostringstream os;
    os << "model.global_batch (" << c.globalBatch
       << ") is not a multiple of dp x micro_batch_size (" << c.dp << " x "
       << c.microBatchSize << " = " << perStep
       << "), so the micro-batch count is not an integer";
    return fail(error, field, "global_batch", os.str());
  }
  int64_t m = c.globalBatch / perStep;
  if (m > (int64_t(1) << 30))
    return fail(error, field, "global_batch",
                "model.global_batch gives too many micro-batches (" +
                    std::to_string(m) + ")");
  microbatches = int(m);
  return true;
}

//===----------------------------------------------------------------------===//
// Costs
//===----------------------------------------------------------------------===//

bool computeModelCosts(const TransformerConfig &input,
                       sched::ScheduleKind schedule, int virtualStages,
                       ModelCosts &out, std::string &error,
                       std::string *field) {
  if (!validateConfig(input, error, field))
    return false;
  out = ModelCosts();
  TransformerConfig c = input;
  if (!c.ffnHidden)
    c.ffnHidden = 4 * c.hidden;
  GpuPreset gpu;
  findGpuPreset(c.gpu, gpu, error);
  c.gpu = gpu.name;
  double eff = c.efficiency > 0 ? c.efficiency : gpu.defaultEfficiency;
  int m = 0;
  microbatchCount(c, m, error, field);

  const int64_t h = c.hidden, s = c.seqLength, b = c.microBatchSize,
                a = c.heads, V = c.vocab, F = c.ffnHidden, tp = c.tp;
  const int p = c.pp;
  const double tokens = double(s) * double(b);
  const double flopsPerUs = eff * gpu.peakTflops * 1e6; // FLOP per us
  const double gemm = layerGemmFlopsPerToken(h, F);
  const double attn = layerAttentionFlopsPerToken(h, s);
  const double pLayer = layerParams(h, F);
  const double embedParams = double(V) * double(h);
  const double headFlops = 2.0 * double(h) * double(V); // per token
  const double sbh = double(s) * double(b) * double(h);
  const double bpp = bytesPerParam(c.zeroStage, c.dp);

  out.config = c;
  out.gpu = gpu;
  out.microbatches = m;
  out.hw.gpu = gpu.name;
  out.hw.gpuMemoryBytes = gpu.memoryBytes;
  out.hw.p2pLatencyUs = gpu.netLatencyUs;
  out.hw.p2pBandwidthGBps = gpu.interNodeGBps;
  out.hw.pcieGBps = gpu.pcieGBps;
  out.hw.hbmGBps = gpu.hbmGBps;
  out.hw.kernelLaunchUs = gpu.kernelLaunchUs;
  out.hw.peakTflops = gpu.peakTflops;
  out.hw.efficiency = eff;

  // One V h table when the pipeline has one stage (tied), else two copies.
  out.totalParams = double(c.layers) * pLayer + embedParams + 2.0 * h;
  out.modelFlopsPerIteration =
      3.0 * double(c.globalBatch) * double(s) *
      (double(c.layers) * (gemm + attn) + headFlops);

  int base = c.layers / p, extra = c.layers % p;
  std::vector<int> count(p, base);
  // Extra layers go to the inner stages first (1, 2, ...), then stage 0.
  for (int i = 0, s_ = (p > 1 ? 1 : 0); i < extra; ++i) {
    count[s_]++;
    s_ = s_ + 1 < p ? s_ + 1 : 0;
  }

  auto &spec = out.spec;
  spec = sched::PipelineSpec();
  spec.stages = p;
  spec.microbatches = m;
  spec.virtualStages = virtualStages < 1 ? 1 : virtualStages;
  spec.schedule = schedule;
  spec.p2pLatencyUs = gpu.netLatencyUs;
  spec.p2pBandwidthGBps = gpu.interNodeGBps;
  spec.tail = true;
  spec.dataParallel = c.dp;
  spec.dpBandwidthGBps = gpu.interNodeGBps;
  spec.dpLatencyUs = gpu.netLatencyUs;

  int first = 0;
  double maxOptimizerUs = 0;
  int64_t maxGrad = 0;
  for (int st = 0; st < p; ++st) {
    StageModel sm;
    sm.stage = st;
    sm.firstLayer = first;
    sm.layers = count[st];
    first += count[st];
    sm.embedding = st == 0;
    sm.lmHead = st == p - 1;
    double n = sm.layers;
    double params = n * pLayer;
    if (sm.embedding)
      params += embedParams;
    if (sm.lmHead) {
      params += 2.0 * h; // final layernorm
      if (p > 1)
        params += embedParams; // the LM head's own copy of the table
    }
    sm.params = params / double(tp);

    double fwd = n * tokens * (gemm + attn);
    double bwdWeight = n * tokens * gemm;
    if (sm.lmHead) {
      fwd += tokens * headFlops;
      bwdWeight += tokens * headFlops;
    }
    double bwd = 2 * fwd;
    if (c.recompute)
      bwd += n * tokens * (gemm + attn);
    sm.forwardFlops = fwd / double(tp);
    sm.backwardFlops = bwd / double(tp);
    sm.backwardWeightFlops = bwdWeight / double(tp);

    double stash = n * layerStashBytes(s, b, h, a, tp, c.recompute);
    if (sm.embedding)
      stash += sbh / double(tp); // embedding dropout mask (1 byte)
    if (sm.lmHead)
      stash += 2 * sbh / double(tp) +
               4.0 * double(s) * double(b) * double(V) / double(tp);
    sm.stashBytes = int64_t(std::llround(stash));

    double stat = sm.params * bpp;
    if (c.recompute && sm.layers > 0)
      stat += layerStashBytes(s, b, h, a, tp, /*recompute=*/false);
    sm.staticBytes = int64_t(std::llround(stat));
    sm.gradBytes = int64_t(std::llround(2.0 * sm.params));

    sched::StageCost cost;
    cost.forwardUs = sm.forwardFlops / flopsPerUs;
    cost.backwardUs = sm.backwardFlops / flopsPerUs;
    cost.backwardWeightUs = sm.backwardWeightFlops / flopsPerUs;
    cost.activationBytes = int64_t(std::llround(2 * sbh / double(tp)));
    cost.stashBytes = sm.stashBytes;
    cost.staticBytes = sm.staticBytes;
    spec.costs.push_back(cost);

    double optParams =
        c.zeroStage >= 1 ? sm.params / double(c.dp) : sm.params;
    maxOptimizerUs = std::max(maxOptimizerUs, optParams *
                                                  kOptimizerBytesPerParam /
                                                  (gpu.hbmGBps * 1e3));
    maxGrad = std::max(maxGrad, sm.gradBytes);
    out.stages.push_back(sm);
  }
  spec.gradBytes = maxGrad;
  spec.optimizerUs = maxOptimizerUs;
  return true;
}

double modelFlopsUtilization(const ModelCosts &costs, double iterationUs) {
  double gpus = double(costs.config.tp) * costs.config.pp * costs.config.dp;
  if (!(iterationUs > 0) || gpus <= 0 || costs.hw.peakTflops <= 0)
    return 0;
  return costs.modelFlopsPerIteration /
         (gpus * costs.hw.peakTflops * 1e12 * iterationUs * 1e-6);
}

} // namespace pipefill::cost
