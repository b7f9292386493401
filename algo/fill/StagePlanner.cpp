//===- StagePlanner.cpp - Choosing jobs and settings per stage ------------===//
//
// Layer 3 of the planner (docs/planner.md section 4): stages are planned
// independently (a job's samples are treated as unbounded, so the objective
// separates by stage), slot by slot (one job per slot). Settings dominated by
// the all-device setting of the same batch are dropped; the rest get a proven
// upper bound on their value and are simulated in bound order until no bound
// can beat the best value. The winner's chunks are emitted for prefix +
// period iterations; the next slot gets the time left after the most the
// earlier jobs use in each bubble in any iteration, so every job's schedule
// stays periodic.
//
//===----------------------------------------------------------------------===//

#include "algo/fill/PlannerInternal.h"

#include <cmath>
#include <functional>
#include <memory>

namespace pipefill::fill {
namespace detail {
namespace {

struct Candidate {
  int job;
  int config;
  double bound;
};

/// Upper bound on the steady-state value of a configuration, from the bubble
/// time it could use. Over one period each op runs the same number of times
/// B (whole batches) and every batch needs at least one chunk, so the time
/// used is >= B * (lowerBatchUs + ctx) and >= B * lowerBatchUs + (#bubbles
/// used) * ctx; and each op runs at most (bubble time) / (ctx + its time)
/// times per bubble.
class BoundTable {
public:
  BoundTable(const std::vector<double> &budget, double ctx) : ctx(ctx) {
    sorted = budget;
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    prefix.assign(sorted.size() + 1, 0);
    for (size_t i = 0; i < sorted.size(); ++i)
      prefix[i + 1] = prefix[i] + sorted[i];
  }
  double bound(const JobConfig &cfg) const {
    double threshold = ctx + cfg.minOpUs;
    // Number of bubbles with budget >= threshold (sorted descending).
    size_t count = std::upper_bound(sorted.begin(), sorted.end(), threshold,
                                    std::greater<double>()) -
                   sorted.begin();
    double s1 = prefix[count];
    double s2 = s1 - double(count) * ctx;
    if (count == 0 || s2 <= 0)
      return 0;
    double batches = kInf;
    if (cfg.lowerBatchUs + ctx > 0)
      batches = s1 / (cfg.lowerBatchUs + ctx);
    if (cfg.lowerBatchUs > 0)
      batches = std::min(batches, s2 / cfg.lowerBatchUs);
    // Every batch runs the slowest op once, each run in its own chunk of at
    // least ctx + maxOpLowerUs, in a bubble at least that long.
    double x = ctx + cfg.maxOpLowerUs;
    if (x > 0) {
      size_t fit = std::upper_bound(sorted.begin(), sorted.end(), x,
                                    std::greater<double>()) -
                   sorted.begin();
      batches = std::min(batches, prefix[fit] / x);
    }
    return batches * cfg.valuePerBatch;
  }

private:
  double ctx;
  std::vector<double> sorted;
  std::vector<double> prefix;
};

/// Plans one stage: slot by slot, the best (job, configuration) for the
/// bubble time and memory left.
class StagePlanner {
public:
  StagePlanner(const StageInfo &stage, int stageId, const std::vector<Job> &jobs,
               const std::vector<JobInfo> &infos, const Config &config,
               Plan &plan)
      : stage(stage), stageId(stageId), jobs(jobs), infos(infos),
        config(config), plan(plan) {}

  void run() {
    size_t numBubbles = stage.budget.size();
    std::vector<double> windowEnd(numBubbles, 0);
    std::vector<int64_t> transientMax(numBubbles, -1); // -1: no chunk yet
    std::vector<bool> onStage(jobs.size(), false);
    int64_t persistent = 0;
    size_t firstChunk = plan.chunks.size();
    int slots = config.allowMultipleJobsPerStage
                    ? std::max(1, config.maxJobsPerStage)
                    : 1;
    for (int slot = 0; slot < slots; ++slot) {
      std::vector<double> budget(numBubbles);
      for (size_t k = 0; k < numBubbles; ++k)
        budget[k] = std::max(0.0, stage.budget[k] - windowEnd[k]);
      // Largest persistent total the chunks already placed tolerate.
      int64_t persistentCap = stage.minFree;
      int64_t maxMem = std::numeric_limits<int64_t>::min();
      for (size_t k = 0; k < numBubbles; ++k) {
        if (transientMax[k] >= 0)
          persistentCap = std::min(persistentCap, stage.mem[k] - transientMax[k]);
        maxMem = std::max(maxMem, stage.mem[k]);
      }
      BoundTable bounds(budget, config.contextSwitchUs);
      std::vector<int64_t> memSorted = stage.mem;
      std::sort(memSorted.begin(), memSorted.end());
      // The all-device setting A of a batch dominates a setting B of the
      // same batch when A fits every bubble B could use: A's chunks are never
      // slower (no copies, no recompute), so any schedule of B is one of A,
      // and the greedy is optimal for A.
      auto dominated = [&](const JobConfig &a, const JobConfig &b) {
        int64_t totalA = persistent + a.persistentBytes;
        if (totalA > persistentCap)
          return false;
        int64_t needA = totalA + a.batchTransient;
        int64_t needB = persistent + b.persistentBytes + b.minOpTransient;
        auto it = std::lower_bound(memSorted.begin(), memSorted.end(), needB);
        return it == memSorted.end() || *it >= needA;
      };
      frontier.build(budget, stage.mem);
      std::vector<Candidate> candidates;
      for (size_t j = 0; j < jobs.size(); ++j) {
        if (onStage[j] || !infos[j].reason.empty())
          continue;
        const std::vector<JobConfig> &cfgs = infos[j].configs;
        for (size_t c = 0; c < cfgs.size(); ++c) {
          const JobConfig &cfg = cfgs[c];
          int64_t total = persistent + cfg.persistentBytes;
          if (total > persistentCap || maxMem - total < cfg.minOpTransient)
            continue;
          int a = infos[j].allDevice[c];
          if (a != int(c) && dominated(cfgs[a], cfg))
            continue;
          double bound = bounds.bound(cfg);
          if (bound > 0)
            candidates.push_back({int(j), int(c), bound});
        }
      }
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const Candidate &a, const Candidate &b) {
                         return a.bound > b.bound;
                       });
      double bestValue = 0;
      const JobConfig *best = nullptr;
      Method bestMethod;
      std::vector<int64_t> mem(numBubbles);
      int sims = 0;
      for (const Candidate &cand : candidates) {
        if (cand.bound <= bestValue)
          break;
        if (config.maxSimulationsPerSlot > 0 &&
            sims >= config.maxSimulationsPerSlot)
          break;
        const JobConfig &cfg = infos[cand.job].configs[cand.config];
        int64_t total = persistent + cfg.persistentBytes;
        if (!everyOpFits(cfg, total))
          continue;
        ++sims;
        for (size_t k = 0; k < numBubbles; ++k)
          mem[k] = stage.mem[k] - total;
        for (const Method &method : packingMethods(cfg, budget, mem, config)) {
          SimResult r = pack(cfg, config.contextSwitchUs, budget, mem, frontier,
                             total, method, nullptr);
          double batches = double(r.opsPeriod / int64_t(cfg.ops.size()));
          double value = batches * cfg.valuePerBatch / r.period;
          if (value > bestValue) {
            bestValue = value;
            best = &cfg;
            bestMethod = method;
          }
        }
      }
      if (!best)
        break;

      // Emit the winner's chunks.
      const JobConfig &cfg = *best;
      int64_t total = persistent + cfg.persistentBytes;
      for (size_t k = 0; k < numBubbles; ++k)
        mem[k] = stage.mem[k] - total;
      Emitter emit;
      emit.chunks = &plan.chunks;
      emit.stage = stageId;
      emit.bubbleIds = &stage.bubbleIds;
      emit.offsetBase = &windowEnd;
      emit.maxUse.assign(numBubbles, 0);
      emit.maxTransient.assign(numBubbles, -1);
      SimResult r = pack(cfg, config.contextSwitchUs, budget, mem, frontier,
                           total, bestMethod, &emit);

      Assignment a;
      a.stage = stageId;
      a.job = cfg.job;
      a.batch = cfg.knobs.batch;
      a.weights = cfg.knobs.weights;
      a.acts = cfg.knobs.acts;
      a.optimizer = cfg.knobs.optimizer;
      a.checkpoint = cfg.knobs.checkpoint;
      a.prefixIterations = r.prefix;
      a.periodIterations = r.period;
      a.batchesPerPeriod = r.opsPeriod / int64_t(cfg.ops.size());
      a.samplesPerIteration =
          double(a.batchesPerPeriod) * cfg.knobs.batch / r.period;
      a.usefulUs = double(a.batchesPerPeriod) * cfg.usefulPerBatch / r.period;
      a.filledUs = r.filledPeriod / r.period;
      a.persistentBytes = cfg.persistentBytes;
      plan.assignments.push_back(a);

      onStage[cfg.job] = true;
      persistent = total;
      for (size_t k = 0; k < numBubbles; ++k) {
        windowEnd[k] += emit.maxUse[k];
        transientMax[k] = std::max(transientMax[k], emit.maxTransient[k]);
      }
    }
    for (size_t i = firstChunk; i < plan.chunks.size(); ++i)
      plan.chunks[i].peakBytes += persistent;
  }

private:
  /// Necessary for progress: every op fits, alone, in some bubble.
  bool everyOpFits(const JobConfig &cfg, int64_t persistent) const {
    for (const OpCost &op : cfg.ops)
      if (!frontier.fits(config.contextSwitchUs +
                             std::max({op.computeUs, op.inUs, op.outUs}),
                         persistent + op.workBytes + op.inBytes + op.outBytes))
        return false;
    return true;
  }

  BubbleFrontier frontier; // this slot's budgets, free bytes before fill

  const StageInfo &stage;
  int stageId;
  const std::vector<Job> &jobs;
  const std::vector<JobInfo> &infos;
  const Config &config;
  Plan &plan;
};

} // namespace
} // namespace detail

using namespace detail;

Plan planFill(const std::vector<StageBubbles> &stages,
              const std::vector<Job> &jobs, const Hardware &hw,
              const Config &config) {
  Plan plan;
  // Hardware and config.
  if (!std::isfinite(hw.hbmGBps) || hw.hbmGBps <= 0)
    plan.errors.push_back(format("hardware: hbmGBps must be positive (got %g)", hw.hbmGBps));
  if (!std::isfinite(hw.pcieGBps) || hw.pcieGBps < 0)
    plan.errors.push_back(format("hardware: pcieGBps must be >= 0 (got %g)", hw.pcieGBps));
  if (!std::isfinite(hw.kernelLaunchUs) || hw.kernelLaunchUs < 0)
    plan.errors.push_back(format("hardware: kernelLaunchUs must be >= 0 (got %g)", hw.kernelLaunchUs));
  if (!std::isfinite(config.contextSwitchUs) || config.contextSwitchUs < 0)
    plan.errors.push_back(format("config: contextSwitchUs must be >= 0 (got %g)", config.contextSwitchUs));
  if (!(config.safetyMargin >= 0 && config.safetyMargin < 1))
    plan.errors.push_back(format("config: safetyMargin must be in [0, 1) (got %g)", config.safetyMargin));
  if (config.reserveBytes < 0)
    plan.errors.push_back(format("config: reserveBytes must be >= 0 (got %lld)",
                                 static_cast<long long>(config.reserveBytes)));
  if (config.batchSizes.empty())
    plan.errors.push_back("config: batchSizes is empty");
  for (int b : config.batchSizes)
    if (b <= 0)
      plan.errors.push_back(format("config: batch size %d is not positive", b));
  bool configOk = plan.errors.empty();

  // Stages.
  std::vector<StageInfo> infos;
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageBubbles &sb = stages[s];
    std::string error;
    bool duplicate = false;
    for (size_t t = 0; t < s; ++t)
      duplicate |= stages[t].stage == sb.stage;
    if (duplicate)
      error = "appears more than once";
    else if (sb.minFreeBytes < 0)
      error = format("minFreeBytes is negative (%lld)",
                     static_cast<long long>(sb.minFreeBytes));
    for (size_t k = 0; k < sb.bubbles.size() && error.empty(); ++k) {
      const Bubble &b = sb.bubbles[k];
      if (!std::isfinite(b.durationUs) || b.durationUs < 0)
        error = format("bubble %d has an invalid duration (%g us)", b.id, b.durationUs);
      else if (!std::isfinite(b.startUs))
        error = format("bubble %d has an invalid start (%g us)", b.id, b.startUs);
      else if (b.freeBytes < 0)
        error = format("bubble %d has negative free bytes (%lld)", b.id,
                       static_cast<long long>(b.freeBytes));
      for (size_t q = 0; q < k && error.empty(); ++q)
        if (sb.bubbles[q].id == b.id)
          error = format("bubble id %d appears more than once", b.id);
    }
    if (!error.empty()) {
      plan.errors.push_back(format("stage %d: %s; stage skipped", sb.stage, error.c_str()));
      continue;
    }
    StageInfo info;
    info.index = int(s);
    info.minFree = sb.minFreeBytes - config.reserveBytes;
    for (const Bubble &b : sb.bubbles) {
      info.budget.push_back(b.durationUs * (1 - config.safetyMargin));
      info.mem.push_back(b.freeBytes - config.reserveBytes);
      info.bubbleIds.push_back(b.id);
      plan.bubbleUs += b.durationUs;
    }
    infos.push_back(std::move(info));
  }

  // Jobs.
  std::vector<JobInfo> jobInfos(jobs.size());
  for (size_t j = 0; j < jobs.size() && configOk; ++j)
    jobInfos[j] = buildJob(jobs[j], int(j), hw, config);

  if (configOk)
    for (const StageInfo &s : infos)
      StagePlanner(s, stages[s.index].stage, jobs, jobInfos, config, plan).run();

  // Results.
  plan.jobs.resize(jobs.size());
  std::unique_ptr<AllBubbles> allBubbles;
  for (size_t j = 0; j < jobs.size(); ++j)
    plan.jobs[j].name = jobLabel(jobs[j], int(j));
  for (const Assignment &a : plan.assignments) {
    JobResult &r = plan.jobs[a.job];
    r.samplesPerIteration += a.samplesPerIteration;
    r.usefulUs += a.usefulUs;
    r.filledUs += a.filledUs;
    r.stages += 1;
    plan.filledUs += a.filledUs;
    plan.usefulUs += a.usefulUs;
  }
  for (size_t j = 0; j < jobs.size(); ++j) {
    JobResult &r = plan.jobs[j];
    r.efficiency = r.filledUs > 0 ? r.usefulUs / r.filledUs : 0;
    r.iterationsToComplete = r.samplesPerIteration > 0
                                 ? double(jobs[j].samples) / r.samplesPerIteration
                                 : kInf;
    if (r.stages > 0)
      continue;
    std::string reason;
    if (!configOk)
      reason = "not planned: invalid hardware or config (see errors)";
    else if (!jobInfos[j].reason.empty())
      reason = jobInfos[j].reason;
    else {
      if (!allBubbles)
        allBubbles = std::make_unique<AllBubbles>(infos, config);
      reason = explainNoFit(jobs[j], jobInfos[j], *allBubbles, config);
      if (reason.empty())
        reason = "not placed: no stage gave it a higher priority-weighted "
                 "throughput than the jobs placed there";
    }
    plan.unscheduled.push_back({r.name, reason});
  }
  plan.filledFraction = plan.bubbleUs > 0 ? plan.filledUs / plan.bubbleUs : 0;
  return plan;
}

} // namespace pipefill::fill

