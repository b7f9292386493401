//===- CostModel.h - Stage costs of a transformer from its dimensions -----===//
//
// Plain C++17 (no MLIR/LLVM). Turns the dimensions of a GPT-style decoder
// (layers, hidden, heads, sequence, vocabulary, MLP width), its parallel
// layout (TP x PP x DP, micro-batch, global batch) and a GPU preset into the
// per-stage costs the schedule library simulates (sched::StageCost), the
// point-to-point and data-parallel communication costs, and the hardware
// figures the fill planner needs. Every formula and every modelling choice is
// written next to its declaration below and in docs/cost-model.md.
//
// Errors never throw: functions return false and fill `error` with a sentence
// and, where a caller may point at the offending input, `field` with the
// JobSpec field name ("global_batch", "tp", ...).
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_COST_COSTMODEL_H
#define PIPEFILL_ALGO_COST_COSTMODEL_H

#include "algo/schedule/Schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pipefill::cost {

//===----------------------------------------------------------------------===//
// GPU presets
//===----------------------------------------------------------------------===//

/// Datasheet figures of one GPU model (SXM parts) plus a calibrated default
/// efficiency. 1 GB/s = 1e9 bytes/s; 1 TFLOP/s = 1e12 FLOP/s.
struct GpuPreset {
  std::string name;              ///< "A100-80GB", "H100-80GB", "H200"
  double peakTflops = 0;         ///< dense bf16 tensor-core peak
  double hbmGBps = 0;            ///< device memory bandwidth
  int64_t memoryBytes = 0;       ///< device memory capacity
  double pcieGBps = 0;           ///< host <-> device, each direction
  double interNodeGBps = 0;      ///< InfiniBand per GPU (one NIC per GPU)
  double netLatencyUs = 0;       ///< per message, P2P and each all-reduce step
  double kernelLaunchUs = 0;     ///< fixed cost per fill kernel call
  double defaultEfficiency = 0;  ///< achieved fraction of peak (MFU)
  std::string efficiencySource;  ///< where defaultEfficiency comes from
};

/// The presets, in a fixed order: A100-80GB, H100-80GB, H200.
const std::vector<GpuPreset> &gpuPresets();
/// Case-insensitive lookup; also accepts "a100", "h100", "h200" and names
/// with '_' for '-'. Unknown name: false, error lists the known presets.
bool findGpuPreset(const std::string &name, GpuPreset &out,
                   std::string &error);

//===----------------------------------------------------------------------===//
// The main job's model and layout
//===----------------------------------------------------------------------===//

/// Mirror of the JobSpec `model { ... }` block (proto/pipefill.proto) as a
/// plain struct. 0 in ffnHidden / efficiency means "the default".
struct TransformerConfig {
  int layers = 0;          ///< transformer layers L
  int hidden = 0;          ///< h
  int heads = 0;           ///< a
  int seqLength = 0;       ///< s
  int vocab = 0;           ///< V (taken as given: no padding)
  int ffnHidden = 0;       ///< MLP width; 0 => 4h
  int microBatchSize = 1;  ///< b
  int tp = 1, pp = 1, dp = 1;
  int64_t globalBatch = 0; ///< sequences per iteration over all replicas
  bool recompute = false;  ///< full activation recomputation
  std::string gpu = "A100-80GB";
  double efficiency = 0;   ///< fraction of peak FLOP/s; 0 => the preset's
  int zeroStage = 0;       ///< 0, or 1 (optimizer states sharded over dp)
};

/// Checks ranges and divisibility. On failure `field` (if given) names the
/// JobSpec field ("layers", "global_batch", ...).
bool validateConfig(const TransformerConfig &cfg, std::string &error,
                    std::string *field = nullptr);

/// microbatches = globalBatch / (dp * microBatchSize); false unless that is
/// an integer >= 1.
bool microbatchCount(const TransformerConfig &cfg, int &microbatches,
                     std::string &error, std::string *field = nullptr);

//===----------------------------------------------------------------------===//
// Formulas (exposed so tests and the model zoo check/use them directly)
//===----------------------------------------------------------------------===//

/// Parameters of one transformer layer: QKV + output projection with biases
/// (4h^2 + 4h), MLP with biases (2 h ffn + ffn + h), two layernorms (4h):
/// 4h^2 + 2 h ffn + ffn + 9h. (= 12h^2 + 13h for ffn = 4h.)
double layerParams(int64_t h, int64_t ffn);
/// Forward FLOPs of one layer per token, GEMM part: 2 (4h^2 + 2 h ffn)
/// (QKV 6h^2, output projection 2h^2, MLP 4 h ffn).
double layerGemmFlopsPerToken(int64_t h, int64_t ffn);
/// Forward FLOPs of one layer per token, attention part (QK^T and AV):
/// 4 s h. Together with the GEMM part: 24 h^2 (1 + s / (6h)) for ffn = 4h.
double layerAttentionFlopsPerToken(int64_t h, int64_t s);
/// Activation bytes one layer stashes for backward per micro-batch, with
/// tensor + sequence parallelism (Korthikanti et al. 2022, eq. 5):
///   s b h (34 + 5 a s / h) / tp;
/// with full recomputation only the layer input, 2 s b h / tp.
double layerStashBytes(int64_t s, int64_t b, int64_t h, int64_t a, int64_t tp,
                       bool recompute);

/// Bytes per parameter of mixed-precision Adam as Megatron-LM keeps it with
/// bf16: 2 (bf16 weight) + 4 (fp32 main gradient) + 12 (fp32 master weight,
/// Adam m, Adam v) = 18; with ZeRO stage 1 the 12 optimizer bytes are
/// divided by dp.
double bytesPerParam(int zeroStage, int dp);
/// Bytes an Adam step reads and writes per parameter: read master, m, v,
/// fp32 grad (16), write master, m, v (12) and the bf16 weight (2) = 30.
constexpr double kOptimizerBytesPerParam = 30;

//===----------------------------------------------------------------------===//
// Derived costs
//===----------------------------------------------------------------------===//

/// What one GPU of one pipeline stage holds and does per micro-batch (all
/// FLOP and byte figures are per GPU, i.e. already divided by TP).
struct StageModel {
  int stage = 0;
  int firstLayer = 0, layers = 0;  ///< transformer layers [first, first+n)
  bool embedding = false;          ///< holds the word embedding (stage 0)
  bool lmHead = false;             ///< holds final layernorm + LM head (last)
  double params = 0;               ///< per GPU
  double forwardFlops = 0;         ///< per micro-batch, per GPU
  double backwardFlops = 0;        ///< incl. the recompute forward
  double backwardWeightFlops = 0;  ///< weight-gradient part of backwardFlops
  int64_t stashBytes = 0;          ///< per micro-batch
  int64_t staticBytes = 0;
  int64_t gradBytes = 0;           ///< bf16 gradients all-reduced over dp
};

/// Hardware figures for the importer and the fill planner.
struct HardwareOut {
  std::string gpu;               ///< preset name
  int64_t gpuMemoryBytes = 0;
  double p2pLatencyUs = 0;
  double p2pBandwidthGBps = 0;
  double pcieGBps = 0;
  double hbmGBps = 0;
  double kernelLaunchUs = 0;
  double peakTflops = 0;
  double efficiency = 0;         ///< the one used (config or preset default)
};

struct ModelCosts {
  TransformerConfig config;      ///< with defaults filled in (ffnHidden...)
  GpuPreset gpu;
  HardwareOut hw;
  int microbatches = 0;
  double totalParams = 0;        ///< whole model, embedding counted once
  /// Model FLOPs of one iteration over all GPUs (forward + 2x backward,
  /// no recompute): the numerator of MFU.
  double modelFlopsPerIteration = 0;
  std::vector<StageModel> stages;
  /// stages, microbatches, costs, p2p, tail filled; schedule and
  /// virtualStages copied from the caller's request.
  sched::PipelineSpec spec;
};

/// Derives every stage's costs. `schedule` / `virtualStages` are copied into
/// out.spec (they do not change per-device costs: an interleaved device holds
/// the same layers in v chunks).
///
/// Choices (docs/cost-model.md):
///  - layers split evenly over pp stages; when pp does not divide L the
///    remaining layers go one each to stages 1, 2, ... (the inner stages,
///    since the outer ones also hold the embedding / LM head);
///  - stage 0 holds the word embedding (V h params, lookup FLOPs ~ 0, an
///    s b h / tp byte dropout mask stashed); the last stage holds the final
///    layernorm and its own copy of the LM head (V h params, Megatron keeps
///    two copies when pp > 1; one shared copy when pp == 1), 2 h V forward
///    FLOPs per token, and stashes 2 s b h / tp + 4 s b V / tp bytes (fp32
///    logits for the vocab-parallel cross entropy); no positional table
///    (rotary embeddings);
///  - backward = 2 x forward, plus one more forward of the transformer layers
///    with recompute; the weight-gradient part equals the forward GEMM FLOPs
///    (attention score products have no weights);
///  - time = FLOPs / (efficiency x peak); TP all-reduces inside a layer are
///    folded into the efficiency;
///  - static bytes = params x bytesPerParam(); with recompute also one
///    layer's full activations as a rematerialization workspace;
///  - activations sent to the next stage: 2 s b h / tp bytes (bf16,
///    Megatron's scatter-gather over the TP ranks, sequence parallel), over
///    InfiniBand with the preset's latency;
///  - iteration tail: ring all-reduce of the bf16 gradients (2 bytes per
///    param per GPU) over dp replicas on InfiniBand, then an Adam step that is
///    HBM-bound (kOptimizerBytesPerParam per param, divided by dp with
///    ZeRO-1).
bool computeModelCosts(const TransformerConfig &cfg,
                       sched::ScheduleKind schedule, int virtualStages,
                       ModelCosts &out, std::string &error,
                       std::string *field = nullptr);

/// Seconds per iteration -> model FLOP utilization of all GPUs.
double modelFlopsUtilization(const ModelCosts &costs, double iterationUs);

// A model or alias name as looked up: lower case, '_' and ' ' read as '-'.
std::string normalizeModelName(const std::string &name);

} // namespace pipefill::cost

#endif // PIPEFILL_ALGO_COST_COSTMODEL_H
