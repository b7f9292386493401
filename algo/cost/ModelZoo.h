//===- ModelZoo.h - Fill-job layer lists of well-known models -------------===//
//
// Plain C++17. Builds fill::Job layer lists (per-sample forward time, weight,
// activation, and for training backward / gradient / optimizer / stash
// bytes) for the models PipeFill fills bubbles with, from their published
// dimensions. Time per sample = FLOPs / (efficiency x peak); the planner adds
// its own HBM roofline and kernel-launch cost on top (algo/fill/Planner.h).
// Formulas and sources: docs/cost-model.md, "Fill-job model zoo".
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_COST_MODELZOO_H
#define PIPEFILL_ALGO_COST_MODELZOO_H

#include "algo/fill/Planner.h"

#include <string>
#include <vector>

namespace pipefill::cost {

struct ZooOptions {
  double peakTflops = 312;  ///< the GPU's dense bf16 peak (A100 default)
  double efficiency = 0.5;  ///< achieved fraction of peak for these kernels
  /// Sequence length for the sequence models; 0 => the model's default
  /// (BERT 128, XLM-R 256, LLaMA prefill 512, GPT-small 512). Ignored by the
  /// vision models (224 x 224 images).
  int seqLength = 0;
  int64_t samples = 0;      ///< copied into Job::samples
};

struct ZooEntry {
  std::string name;                  ///< canonical, e.g. "bert-large"
  std::vector<std::string> aliases;  ///< also accepted
  fill::JobKind kind = fill::JobKind::Inference;
  std::string description;           ///< one line: dims, task, source
};

/// The zoo, in a fixed order: bert-base, bert-large, xlmr-large, swin-b,
/// llama-7b, gpt-small-train, resnet50-train.
const std::vector<ZooEntry> &zooEntries();
/// "bert-base, bert-large, ..." (canonical names).
std::string zooNames();
/// Canonical name of `name` (case-insensitive, '_' == '-', aliases), or ""
/// if unknown.
std::string canonicalZooName(const std::string &name);

/// Builds the job (name = canonical name). Unknown name: false with an
/// error that lists the known models.
bool zooJob(const std::string &name, const ZooOptions &opts, fill::Job &out,
            std::string &error);

/// Forward FLOPs of one sample of a zoo model (sum over its layers); for
/// tests and reports.
double zooForwardFlopsPerSample(const fill::Job &job, const ZooOptions &opts);

} // namespace pipefill::cost

#endif // PIPEFILL_ALGO_COST_MODELZOO_H
