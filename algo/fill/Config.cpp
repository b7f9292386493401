//===- Config.cpp - Fill jobs validated and turned into per-op costs ------===//
//
// Layer 1 of the planner: every job is validated and each knob setting
// (batch, weights, activations, optimizer, checkpointing) is turned into
// per-op costs once; these do not depend on the stage (docs/planner.md
// sections 1, 2 and 4).
//
//===----------------------------------------------------------------------===//

#include "algo/fill/PlannerInternal.h"

#include <cmath>
#include <cstdio>

namespace pipefill::fill::detail {

std::string jobLabel(const Job &job, int index) {
  return job.name.empty() ? format("#%d", index) : job.name;
}

std::string describe(const Knobs &k, bool training) {
  std::string s = format("batch %d, weights %s, activations on %s", k.batch,
                         toString(k.weights), toString(k.acts));
  if (training)
    s += format(", optimizer on %s%s", toString(k.optimizer),
                k.checkpoint ? ", checkpointing" : "");
  return s;
}

namespace {
/// A chunk's or an assignment's copy of the knobs it runs with.
template <typename T> void setKnobs(T &t, const Knobs &k) {
  t.batch = k.batch;
  t.weights = k.weights;
  t.acts = k.acts;
  t.optimizer = k.optimizer;
  t.checkpoint = k.checkpoint;
}

/// cfg.tiers from its ops.
void computeTiers(JobConfig &cfg) {
  std::vector<const OpCost *> ops;
  for (const OpCost &op : cfg.ops)
    ops.push_back(&op);
  auto least = [](const OpCost *op) {
    return std::max({op->computeUs, op->inUs, op->outUs});
  };
  std::stable_sort(ops.begin(), ops.end(), [&](const OpCost *a, const OpCost *b) {
    return least(a) > least(b);
  });
  // Every tier gives a bound, so any of them may be left out: a tier is
  // kept when its ops are at most 0.8x as slow as the last kept (and the
  // slowest and the whole batch always), ~36 -> ~8 tiers per setting here,
  // as the planner evaluates the bound for each candidate of each slot.
  cfg.tiers.clear();
  JobConfig::Tier tier;
  for (size_t i = 0; i < ops.size(); ++i) {
    tier.us = least(ops[i]);
    tier.computeUs += ops[i]->computeUs;
    tier.inUs += ops[i]->inUs;
    tier.outUs += ops[i]->outUs;
    bool lastOfTier = i + 1 == ops.size() || least(ops[i + 1]) != tier.us;
    if (lastOfTier && (cfg.tiers.empty() || i + 1 == ops.size() ||
                       tier.us <= 0.8 * cfg.tiers.back().us))
      cfg.tiers.push_back(tier);
  }
}
} // namespace

Chunk chunkOf(const JobConfig &cfg, int stage, int bubbleId) {
  Chunk c;
  c.stage = stage;
  c.bubbleId = bubbleId;
  c.job = cfg.job;
  setKnobs(c, cfg.knobs);
  return c;
}

Chunk tailChunk(const JobConfig &cfg, int stage, int bubbleId,
                int64_t sampleBegin, double predictedUs, int iteration,
                int repeat, double offsetUs) {
  Chunk c = chunkOf(cfg, stage, bubbleId);
  c.layerBegin = 0;
  c.layerEnd = int(cfg.ops.size());
  c.sampleBegin = sampleBegin;
  c.computeUs = cfg.batchComputeUs;
  c.copyUs = cfg.batchCopyUs;
  c.predictedUs = predictedUs;
  c.peakBytes = cfg.batchTransient;
  c.iteration = iteration;
  c.repeat = repeat;
  c.offsetUs = offsetUs;
  return c;
}

Assignment assignmentFor(const JobConfig &cfg, int stage, int prefix, int period) {
  Assignment a;
  a.stage = stage;
  a.job = cfg.job;
  setKnobs(a, cfg.knobs);
  a.prefixIterations = prefix;
  a.periodIterations = period;
  a.persistentBytes = cfg.persistentBytes;
  return a;
}

/// Builds the op costs of `job` under `k`; false if the setting is unusable
/// (needs PCIe bandwidth that is not there).
bool buildConfig(const Job &job, int jobIndex, const Knobs &k,
                 const Hardware &hw, JobConfig &cfg) {
  bool training = job.kind == JobKind::Training;
  bool streamed = k.weights == WeightPlacement::Streamed;
  bool hostActs = k.acts == ActPlacement::Host;
  bool hostOpt = training && k.optimizer == OptimizerPlacement::Host;
  double pcie = hw.pcieGBps * 1e3;
  if ((streamed || hostActs || hostOpt) && !(pcie > 0))
    return false;
  auto copyUs = [&](int64_t bytes) { return bytes ? double(bytes) / pcie : 0.0; };

  // Refuse settings whose byte counts would overflow (absurd inputs).
  double totalBytes = 0;
  for (const Layer &l : job.layers)
    totalBytes += double(l.weightBytes) + double(l.gradBytes) +
                  double(l.optimizerBytes) +
                  4.0 * double(k.batch) *
                      (double(l.activationBytesPerSample) +
                       double(l.stashBytesPerSample));
  if (!(totalBytes < 1e18))
    return false;

  cfg = JobConfig();
  cfg.job = jobIndex;
  cfg.knobs = k;
  cfg.hostActs = hostActs;
  int numOp = numOps(job);
  int64_t b = k.batch;
  cfg.ops.resize(numOp);
  int64_t stashSum = 0, maxAct = 0, weightSum = 0, optSum = 0;
  for (const Layer &l : job.layers) {
    int64_t full = std::max(l.activationBytesPerSample,
                            l.stashBytesPerSample ? l.stashBytesPerSample
                                                  : l.activationBytesPerSample);
    stashSum += b * (k.checkpoint ? l.activationBytesPerSample : full);
    maxAct = std::max(maxAct, l.activationBytesPerSample);
    weightSum += l.weightBytes;
    optSum += l.optimizerBytes;
  }
  for (int op = 0; op < numOp; ++op) {
    bool backward = false;
    const Layer &l = job.layers[opLayer(job, op, &backward)];
    OpCost &c = cfg.ops[op];
    int64_t act = b * l.activationBytesPerSample;
    int64_t full = b * std::max(l.activationBytesPerSample,
                                l.stashBytesPerSample ? l.stashBytesPerSample
                                                      : l.activationBytesPerSample);
    int64_t stash = training ? (k.checkpoint ? act : full) : 0;
    if (!backward) {
      c.computeUs = layerForwardUs(l, k.batch, hw);
      c.workBytes = 2 * act + (training && hostActs ? stash : 0);
      c.inBytes = streamed ? l.weightBytes : 0;
      c.outBytes = training && hostActs ? stash : 0;
    } else {
      c.computeUs = (k.checkpoint ? layerForwardUs(l, k.batch, hw) : 0) +
                    layerBackwardUs(l, k.batch, hw) + layerOptimizerUs(l, hw);
      c.workBytes = 2 * act + l.gradBytes + (k.checkpoint ? full : 0);
      c.inBytes = (streamed ? l.weightBytes : 0) +
                  (hostOpt ? l.optimizerBytes : 0) + (hostActs ? stash : 0);
      c.outBytes = (streamed ? l.weightBytes : 0) +
                   (hostOpt ? l.optimizerBytes : 0);
    }
    c.inUs = copyUs(c.inBytes);
    c.outUs = copyUs(c.outBytes);
    c.boundaryBytes = act;
    c.boundaryUs = hostActs ? copyUs(act) : 0;
  }
  cfg.persistentBytes = (streamed ? 0 : weightSum) +
                        (training && !hostOpt ? optSum : 0) +
                        (hostActs ? 0 : b * maxAct + (training ? stashSum : 0));

  ChunkBuilder builder;
  double sumC = 0, sumIn = 0, sumOut = 0;
  cfg.minOpUs = kInf;
  cfg.minOpTransient = std::numeric_limits<int64_t>::max();
  for (const OpCost &c : cfg.ops) {
    builder.push(c.inUs, c.computeUs, c.outUs, c.inBytes, c.outBytes,
                 c.workBytes);
    sumC += c.computeUs;
    sumIn += c.inUs;
    sumOut += c.outUs;
    cfg.minOpUs = std::min(cfg.minOpUs, c.computeUs);
    cfg.maxOpLowerUs =
        std::max(cfg.maxOpLowerUs, std::max({c.computeUs, c.inUs, c.outUs}));
    cfg.minOpTransient =
        std::min(cfg.minOpTransient, c.workBytes + c.inBytes + c.outBytes);
  }
  cfg.batchUs = builder.makespan();
  cfg.batchTransient = builder.transient();
  cfg.batchComputeUs = builder.computeUs();
  cfg.batchCopyUs = builder.copyUs();
  cfg.lowerBatchUs = std::max({sumC, sumIn, sumOut});
  cfg.noCopies = !hostActs && sumIn == 0 && sumOut == 0;
  cfg.prefixComputeUs.assign(1, 0.0);
  for (const OpCost &c : cfg.ops)
    cfg.prefixComputeUs.push_back(cfg.prefixComputeUs.back() + c.computeUs);
  computeTiers(cfg);
  cfg.usefulPerBatch = double(b) * usefulUsPerSample(job);
  cfg.valuePerBatch = job.priority * cfg.usefulPerBatch;
  return true;
}

std::string checkLayer(const Job &job, const Layer &l) {
  auto bad = [&](const char *field, double v) {
    return format("layer '%s' has an invalid %s (%g)", l.name.c_str(), field,
                  v);
  };
  // Negative, not a number, or beyond any machine (1 PB, 1e12 us).
  auto badTime = [](double v) { return !(v >= 0 && v <= 1e12); };
  auto badBytes = [](int64_t v) { return v < 0 || v > int64_t(1e15); };
  if (badTime(l.forwardUsPerSample))
    return bad("forwardUsPerSample", l.forwardUsPerSample);
  if (badBytes(l.weightBytes))
    return bad("weightBytes", double(l.weightBytes));
  if (badBytes(l.activationBytesPerSample))
    return bad("activationBytesPerSample", double(l.activationBytesPerSample));
  if (job.kind == JobKind::Training) {
    if (badTime(l.backwardUsPerSample))
      return bad("backwardUsPerSample", l.backwardUsPerSample);
    if (badBytes(l.gradBytes))
      return bad("gradBytes", double(l.gradBytes));
    if (badBytes(l.optimizerBytes))
      return bad("optimizerBytes", double(l.optimizerBytes));
    if (badBytes(l.stashBytesPerSample))
      return bad("stashBytesPerSample", double(l.stashBytesPerSample));
  }
  return "";
}

JobInfo buildJob(const Job &job, int index, const Hardware &hw,
                 const Config &config, double longestBubbleUs) {
  JobInfo info;
  if (job.layers.empty()) {
    info.reason = "the job has no layers";
    return info;
  }
  if (job.samples <= 0) {
    info.reason = format("the job has no samples (samples = %lld)",
                         static_cast<long long>(job.samples));
    return info;
  }
  if (!std::isfinite(job.priority) || job.priority <= 0) {
    info.reason = format("priority must be positive (got %g)", job.priority);
    return info;
  }
  for (const Layer &l : job.layers) {
    std::string r = checkLayer(job, l);
    if (!r.empty()) {
      info.reason = r;
      return info;
    }
  }
  if (!(usefulUsPerSample(job) > 0)) {
    info.reason = "the job has no work: every layer's per-sample time is 0";
    return info;
  }
  if (longestBubbleUs / usefulUsPerSample(job) > kMaxSamplesPerBubble) {
    info.reason = format("one sample is %g us of work, so the longest bubble (%g us) would hold "
                         "%.3g samples; at most 2^31 per bubble are planned (are the layers' "
                         "per-sample times in us?)",
                         usefulUsPerSample(job), longestBubbleUs,
                         longestBubbleUs / usefulUsPerSample(job));
    return info;
  }
  // Batch sizes: the configured ones not above the job's samples; a job
  // smaller than every batch size runs all its samples as one batch.
  std::vector<int> batches;
  for (int b : config.batchSizes)
    if (b > 0 && b <= job.samples)
      batches.push_back(b);
  if (batches.empty())
    batches.push_back(int(job.samples));
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());

  bool training = job.kind == JobKind::Training;
  // Checkpointing only helps when some layer stashes more than its output.
  bool checkpointHelps = false;
  for (const Layer &l : job.layers)
    checkpointHelps |= l.stashBytesPerSample > l.activationBytesPerSample;
  bool tryCheckpoint = training && config.allowCheckpointing && checkpointHelps;

  for (int b : batches)
    for (WeightPlacement w : {WeightPlacement::Resident, WeightPlacement::Streamed})
      for (ActPlacement a : {ActPlacement::Device, ActPlacement::Host})
        for (OptimizerPlacement o :
             {OptimizerPlacement::Device, OptimizerPlacement::Host}) {
          if (!training && o == OptimizerPlacement::Host)
            continue;
          for (bool ckpt : {false, true}) {
            if (ckpt && !tryCheckpoint)
              continue;
            Knobs k{b, w, a, o, ckpt};
            JobConfig cfg;
            if (buildConfig(job, index, k, hw, cfg)) {
              bool isAllDevice = w == WeightPlacement::Resident &&
                                 a == ActPlacement::Device &&
                                 o == OptimizerPlacement::Device && !ckpt;
              int self = int(info.configs.size());
              info.allDevice.push_back(isAllDevice ? self
                                                   : info.allDevice.back());
              info.configs.push_back(std::move(cfg));
            }
          }
        }
  return info;
}

} // namespace pipefill::fill::detail
