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
#include "support/Checked.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <mutex>
#include <map>
#include <memory>
#include <thread>
#include <unordered_set>

namespace pipefill::fill {
namespace detail {
namespace {

struct Candidate {
  int job;
  int config;
  double bound;
  double tierBound; // BoundTable::tierBound, at least the value too
};

/// Upper bound on the steady-state value of a configuration, from the bubble
/// time it could use. Over one period each op runs the same number of times
/// B (whole batches) and every batch needs at least one chunk, so the time
/// used is >= B * (lowerBatchUs + ctx) and >= B * lowerBatchUs + (#bubbles
/// used) * ctx; and each op runs at most (bubble time) / (ctx + its time)
/// times per bubble.
class BoundTable {
public:
  /// The budgets sorted in decreasing order, kept as their distinct values
  /// with the running sums and counts at each value's end: a pipeline's
  /// stage has hundreds of bubbles but a few dozen lengths, and the bounds
  /// of every setting search this table several times per slot. The sums
  /// are those of the budgets one by one in sorted order, so a bound is
  /// the same as over the whole sorted list.
  BoundTable(const std::vector<double> &budget, double ctx) : ctx(ctx) {
    std::vector<double> all = budget;
    std::sort(all.begin(), all.end(), std::greater<double>());
    double sum = 0;
    prefix.assign(1, 0);
    counts.assign(1, 0);
    for (size_t i = 0; i < all.size(); ++i) {
      sum += all[i];
      if (i + 1 < all.size() && all[i + 1] == all[i])
        continue;
      sorted.push_back(all[i]);
      prefix.push_back(sum);
      counts.push_back(i + 1);
    }
  }
  double bound(const JobConfig &cfg) const {
    double threshold = ctx + cfg.minOpUs;
    // The bubbles with budget >= threshold (sorted descending).
    size_t at = atLeast(threshold);
    size_t count = counts[at];
    double s1 = prefix[at];
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
    if (x > 0)
      batches = std::min(batches, prefix[atLeast(x)] / x);
    return batches * cfg.valuePerBatch;
  }

  /// A second bound, from the ops by how slow they are (JobConfig::tiers):
  /// per period each batch runs the ops of a tier in at least one chunk in
  /// the bubbles long enough for the tier's fastest op, taking there at
  /// least a context switch plus the most of the tier's compute, copy-in
  /// and copy-out sums. Where a job's ops are long beside most bubbles this
  /// is far below bound() (1F1B 32 x 256 x 100: 3x for many settings).
  double tierBound(const JobConfig &cfg) const {
    double batches = kInf;
    for (const JobConfig::Tier &t : cfg.tiers) {
      double need = ctx + std::max({t.computeUs, t.inUs, t.outUs});
      if (!(need > 0))
        continue;
      batches = std::min(batches, prefix[atLeast(ctx + t.us)] / need);
    }
    // Slack for the rounding of the sums here and in the packer.
    return batches * cfg.valuePerBatch * (1 + 1e-9);
  }

private:
  /// How many distinct budgets are >= x (they lead the table).
  size_t atLeast(double x) const {
    return std::upper_bound(sorted.begin(), sorted.end(), x, std::greater<double>()) -
           sorted.begin();
  }
  double ctx;
  std::vector<double> sorted;  // distinct budgets, decreasing
  std::vector<double> prefix;  // prefix[i]: sum of the budgets >= sorted[i - 1]
  std::vector<size_t> counts;  // counts[i]: how many budgets those are
};

/// A stage plan under construction: the jobs placed so far (slots), the
/// window each bubble has given them (the most they use of it in any
/// iteration) and their memory.
struct Layout {
  struct Slot {
    const JobConfig *cfg = nullptr;
    Method method;
    std::vector<char> allowed; // bubbles the job's main stream may use
    std::vector<double> cap;   // most of each bubble it may use (empty: all)
    double value = 0;          // priority-weighted useful us per iteration
  };
  std::vector<double> windowEnd;
  std::vector<int64_t> transientMax; // -1: no chunk yet
  int64_t persistent = 0;
  std::vector<char> onStage;
  double value = 0;
  std::vector<Slot> slots;
};

/// One whole-batch chunk kind that can fill the time left in a bubble.
struct TailItem {
  int slot = 0;
  const JobConfig *cfg = nullptr;
  double time = 0;  // context switch + makespan
  double value = 0; // priority * useful us
};

/// Plans one stage: jointly, over orders of jobs and restrictions of jobs to
/// bubble lengths, each evaluated slot by slot; then the time left in each
/// bubble goes to tail chunks.
class StagePlanner {
public:
  StagePlanner(const StageInfo &stage, int stageId, const std::vector<Job> &jobs,
               const std::vector<JobInfo> &infos, const Config &config,
               Plan &plan)
      : stage(stage), stageId(stageId), jobs(jobs), infos(infos),
        config(config), plan(plan), memSorted(stage.mem) {
    std::sort(memSorted.begin(), memSorted.end());
    memSorted.erase(std::unique(memSorted.begin(), memSorted.end()), memSorted.end());
  }

  void run() {
    size_t numBubbles = stage.budget.size();
    Layout start;
    start.windowEnd.assign(numBubbles, 0);
    start.transientMax.assign(numBubbles, -1);
    start.onStage.assign(jobs.size(), 0);
    maxSlots = config.allowMultipleJobsPerStage
                   ? std::max(1, config.maxJobsPerStage)
                   : 1;
    // Restrictions to the longer or the shorter bubbles only where there are
    // few distinct bubble lengths (small stages).
    std::vector<double> lengths = stage.budget;
    std::sort(lengths.begin(), lengths.end());
    lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
    int validJobs = 0;
    for (const JobInfo &info : infos)
      validJobs += info.reason.empty();
    small = config.jointSearch && numBubbles <= 16 && validJobs <= 4;
    if (small && lengths.size() >= 2 && lengths.size() <= 6)
      thresholds.assign(lengths.begin() + 1, lengths.end());
    branching = config.jointSearch ? std::max(1, config.jointBranching) : 1;
    plansLeft = config.jointSearch ? std::max(1, config.maxStagePlans) : 1;

    bestTotal = -1;
    search(start);
    if (small && config.jointExactWorkLimit > 0 && exactJoint())
      return;
    if (bestTotal <= 0)
      return;

    // Replay the best sequence, emitting its chunks.
    Layout layout = start;
    size_t firstChunk = plan.chunks.size();
    std::vector<size_t> assignmentOf;
    for (const Layout::Slot &slot : bestSlots) {
      SimResult r = apply(layout, slot, &plan.chunks);
      const JobConfig &cfg = *slot.cfg;
      Assignment a = assignmentFor(cfg, stageId, r.prefix, r.period);
      a.batchesPerPeriod = r.opsPeriod / int64_t(cfg.ops.size());
      a.samplesPerIteration =
          double(a.batchesPerPeriod) * cfg.knobs.batch / r.period;
      a.usefulUs = double(a.batchesPerPeriod) * cfg.usefulPerBatch / r.period;
      a.filledUs = r.filledPeriod / r.period;
      assignmentOf.push_back(plan.assignments.size());
      plan.assignments.push_back(a);
    }
    emitTails(layout, assignmentOf);
    for (size_t i = firstChunk; i < plan.chunks.size(); ++i)
      plan.chunks[i].peakBytes += layout.persistent;
  }

private:
  /// The tail settings of a job's setting: smaller batches, same placements.
  std::vector<const JobConfig *> tailsOf(const JobConfig &main) const {
    std::vector<const JobConfig *> out;
    if (!config.tailChunks)
      return out;
    for (const JobConfig &cfg : infos[main.job].configs) {
      const Knobs &a = cfg.knobs, &b = main.knobs;
      if (a.batch < b.batch && a.weights == b.weights && a.acts == b.acts &&
          a.optimizer == b.optimizer && a.checkpoint == b.checkpoint)
        out.push_back(&cfg);
    }
    return out;
  }

  JointResult runJoint(const std::vector<JointMember> &members,
                       std::vector<Chunk> *out) {
    int64_t persistent = 0;
    for (const JointMember &m : members)
      persistent += m.cfg->persistentBytes;
    std::vector<int64_t> mem(stage.mem.size());
    for (size_t k = 0; k < mem.size(); ++k)
      mem[k] = stage.mem[k] - persistent;
    frontier.build(stage.budget, stage.mem);
    return jointPack(members, config.contextSwitchUs, stage.budget, mem,
                     frontier, persistent, out, stageId, stage.bubbleIds);
  }

  /// Exact joint packing of small stages (docs/planner.md section 4): every
  /// setting of every job alone (with its tail chunks), then sets of jobs
  /// from each job's jointExactSettings best settings, in decreasing order
  /// of the sum of their values alone (an upper bound: a job shares the
  /// stage's time and memory with the others) until the bound cannot beat
  /// the best plan found, or jointExactWorkLimit is spent. If the best beats
  /// the slot search, its chunks and assignments are emitted; returns
  /// whether it did.
  bool exactJoint() {
    const size_t nb = stage.budget.size();
    double spent = 0;
    const double limit = config.jointExactWorkLimit;
    struct Choice {
      const JobConfig *cfg;
      double value;
    };
    std::vector<std::vector<Choice>> perJob(jobs.size());
    double best = std::max(0.0, bestTotal);
    std::vector<JointMember> bestMembers;
    frontier.build(stage.budget, stage.mem);
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (!infos[j].reason.empty() || numOps(jobs[j]) > config.jointExactMaxOps)
        continue;
      const std::vector<JobConfig> &cfgs = infos[j].configs;
      std::vector<double> alone(cfgs.size(), -1);
      for (size_t c = 0; c < cfgs.size(); ++c) {
        const JobConfig &cfg = cfgs[c];
        if (cfg.persistentBytes > stage.minFree)
          continue;
        frontier.build(stage.budget, stage.mem);
        if (!everyOpFits(cfg, cfg.persistentBytes))
          continue;
        std::vector<JointMember> members = {{&cfg, tailsOf(cfg)}};
        double cost = jointPackCost(members, nb);
        if (spent + cost > limit)
          continue;
        JointResult r = runJoint(members, nullptr);
        spent += r.work;
        if (!r.ok || !(r.value > 0))
          continue;
        alone[c] = r.value;
        if (r.value > best * (1 + 1e-9) + 1e-12) {
          best = r.value;
          bestMembers = members;
        }
      }
      std::vector<Choice> packed;
      for (size_t c = 0; c < cfgs.size(); ++c)
        if (alone[c] > 0)
          packed.push_back({&cfgs[c], alone[c]});
      std::stable_sort(packed.begin(), packed.end(),
                       [](const Choice &x, const Choice &y) {
                         return x.value > y.value;
                       });
      if (int(packed.size()) > config.jointExactSettings)
        packed.resize(std::max(0, config.jointExactSettings));
      perJob[j] = packed;
    }
    // Sets of two or more jobs, one setting each.
    struct Combo {
      double bound;
      std::vector<const JobConfig *> cfgs;
    };
    std::vector<Combo> combos;
    std::vector<int> live;
    for (size_t j = 0; j < jobs.size(); ++j)
      if (!perJob[j].empty())
        live.push_back(int(j));
    std::function<void(size_t, Combo &, int64_t)> grow =
        [&](size_t i, Combo &cur, int64_t persistent) {
          if (cur.cfgs.size() >= 2)
            combos.push_back(cur);
          if (int(cur.cfgs.size()) >= maxSlots || combos.size() > 100000)
            return;
          for (size_t q = i; q < live.size(); ++q)
            for (const Choice &c : perJob[live[q]]) {
              if (persistent + c.cfg->persistentBytes > stage.minFree)
                continue;
              cur.cfgs.push_back(c.cfg);
              cur.bound += c.value;
              grow(q + 1, cur, persistent + c.cfg->persistentBytes);
              cur.bound -= c.value;
              cur.cfgs.pop_back();
            }
        };
    Combo empty{0, {}};
    if (maxSlots >= 2)
      grow(0, empty, 0);
    std::stable_sort(combos.begin(), combos.end(),
                     [](const Combo &x, const Combo &y) { return x.bound > y.bound; });
    for (const Combo &combo : combos) {
      if (combo.bound <= best * (1 + 1e-9) + 1e-12)
        break;
      std::vector<JointMember> members;
      for (const JobConfig *cfg : combo.cfgs)
        members.push_back({cfg, tailsOf(*cfg)});
      double cost = jointPackCost(members, nb);
      if (spent + cost > limit)
        continue;
      JointResult r = runJoint(members, nullptr);
      spent += r.work;
      if (r.ok && r.value > best * (1 + 1e-9) + 1e-12) {
        best = r.value;
        bestMembers = members;
      }
    }
    if (bestMembers.empty())
      return false;
    // Emit the best joint plan.
    size_t firstChunk = plan.chunks.size();
    size_t firstAssignment = plan.assignments.size();
    JointResult r = runJoint(bestMembers, &plan.chunks);
    int64_t persistent = 0;
    for (size_t j = 0; j < bestMembers.size(); ++j) {
      const JobConfig &cfg = *bestMembers[j].cfg;
      int64_t batches = r.opsPeriod[j] / int64_t(cfg.ops.size());
      if (batches == 0 && r.tailSamplesPeriod[j] == 0)
        continue; // placed but never run: drop it
      Assignment a = assignmentFor(cfg, stageId, r.prefix, r.period);
      a.batchesPerPeriod = batches;
      a.tailSamplesPerIteration = r.tailSamplesPeriod[j] / r.period;
      a.samplesPerIteration =
          double(batches * cfg.knobs.batch + r.tailSamplesPeriod[j]) / r.period;
      a.usefulUs = (double(batches) * cfg.usefulPerBatch + r.tailUsefulPeriod[j]) /
                   r.period;
      a.filledUs = r.filledPeriod[j] / r.period;
      persistent += cfg.persistentBytes;
      plan.assignments.push_back(a);
    }
    // A member that never runs in the period (only in the prefix, if at
    // all) is dropped with its chunks.
    plan.chunks.erase(
        std::remove_if(plan.chunks.begin() + firstChunk, plan.chunks.end(),
                       [&](const Chunk &c) {
                         for (size_t i = firstAssignment;
                              i < plan.assignments.size(); ++i)
                           if (plan.assignments[i].job == c.job)
                             return false;
                         return true;
                       }),
        plan.chunks.end());
    for (size_t i = firstChunk; i < plan.chunks.size(); ++i)
      plan.chunks[i].peakBytes += persistent;
    return true;
  }

  /// Depth-first over slot choices; a leaf is a whole stage plan, scored by
  /// its main streams plus the tails its leftover time takes.
  void search(const Layout &layout) {
    std::vector<Layout::Slot> options;
    if (int(layout.slots.size()) < maxSlots)
      options = topOptions(layout);
    double total = layout.value + tailValue(layout);
    if (total > bestTotal * (1 + 1e-12) + 1e-12) {
      bestTotal = total;
      bestSlots = layout.slots;
    }
    if (options.empty())
      return;
    --plansLeft;
    for (size_t i = 0; i < options.size(); ++i) {
      if (i > 0 && plansLeft <= 0)
        break;
      Layout child = layout;
      apply(child, options[i], nullptr);
      search(child);
    }
  }

  /// Adds a slot to the layout; emits its chunks into `out` when set.
  SimResult apply(Layout &layout, const Layout::Slot &slot,
                  std::vector<Chunk> *out) {
    size_t numBubbles = stage.budget.size();
    const JobConfig &cfg = *slot.cfg;
    std::vector<double> budget = slotBudget(layout, slot.allowed);
    for (size_t k = 0; k < slot.cap.size(); ++k)
      budget[k] = std::min(budget[k], slot.cap[k]);
    int64_t total = layout.persistent + cfg.persistentBytes;
    std::vector<int64_t> mem(numBubbles);
    for (size_t k = 0; k < numBubbles; ++k)
      mem[k] = stage.mem[k] - total;
    frontier.build(budget, stage.mem);
    Emitter emit;
    emit.chunks = out;
    emit.stage = stageId;
    emit.bubbleIds = &stage.bubbleIds;
    emit.offsetBase = &layout.windowEnd;
    emit.maxUse.assign(numBubbles, 0);
    emit.maxTransient.assign(numBubbles, -1);
    SimResult r = pack(cfg, config.contextSwitchUs, budget, mem, frontier,
                       total, slot.method, &emit);
    countWork(cfg);
    layout.onStage[cfg.job] = 1;
    layout.persistent = total;
    for (size_t k = 0; k < numBubbles; ++k) {
      layout.windowEnd[k] += emit.maxUse[k];
      layout.transientMax[k] =
          std::max(layout.transientMax[k], emit.maxTransient[k]);
    }
    layout.value += slot.value;
    layout.slots.push_back(slot);
    return r;
  }

  std::vector<double> slotBudget(const Layout &layout,
                                 const std::vector<char> &allowed) const {
    std::vector<double> budget(stage.budget.size());
    for (size_t k = 0; k < budget.size(); ++k)
      budget[k] = allowed[k] ? std::max(0.0, stage.budget[k] - layout.windowEnd[k])
                             : 0.0;
    return budget;
  }

  /// The options for the next slot, best first, at most `branching`.
  /// Small stages (joint mode): per job, bubble restriction and batch size
  /// the best setting (bound-ordered search within the group), each scored
  /// by the whole plan it completes (this slot's value plus the tail chunks
  /// the time left would take). Large stages: the best (job, setting) by
  /// its own value, the search stopping once no bound can beat it.
  std::vector<Layout::Slot> topOptions(const Layout &layout,
                                       bool rollout = true) {
    // Joint mode while the stage's work budget lasts.
    const bool small = this->small && work <= config.jointWorkLimit;
    std::vector<Layout::Slot> found; // small: one per group; large: the best
    for (const std::vector<char> &mask : bubbleMasks(small))
      searchMask(layout, mask, small, found);
    if (!small)
      return found;
    for (Layout::Slot &slot : found)
      compact(layout, slot);
    if (!rollout)
      return found;
    return rankByRollout(layout, found);
  }

  /// The bubble restrictions a slot is searched under: every bubble, and in
  /// joint mode the bubbles at least and below each threshold.
  std::vector<std::vector<char>> bubbleMasks(bool small) const {
    size_t numBubbles = stage.budget.size();
    std::vector<std::vector<char>> masks;
    masks.push_back(std::vector<char>(numBubbles, 1));
    for (double t : small ? thresholds : std::vector<double>()) {
      std::vector<char> longer(numBubbles), shorter(numBubbles);
      for (size_t k = 0; k < numBubbles; ++k) {
        longer[k] = stage.budget[k] >= t;
        shorter[k] = stage.budget[k] < t;
      }
      masks.push_back(longer);
      masks.push_back(shorter);
    }
    return masks;
  }

  /// The (job, setting) pairs that may fill a slot over `budget`, with their
  /// bounds, best bound first: those whose persistent bytes the placed chunks
  /// tolerate, less the settings their job's all-device setting dominates.
  std::vector<Candidate> slotCandidates(const Layout &layout,
                                        const std::vector<double> &budget) {
    size_t numBubbles = stage.budget.size();
    // Largest persistent total the chunks already placed tolerate.
    int64_t persistentCap = stage.minFree;
    int64_t maxMem = std::numeric_limits<int64_t>::min();
    for (size_t k = 0; k < numBubbles; ++k) {
      if (layout.transientMax[k] >= 0)
        persistentCap =
            std::min(persistentCap, stage.mem[k] - layout.transientMax[k]);
      maxMem = std::max(maxMem, stage.mem[k]);
    }
    const int64_t persistent = layout.persistent;
    BoundTable bounds(budget, config.contextSwitchUs);
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
    std::vector<Candidate> candidates;
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (layout.onStage[j] || !infos[j].reason.empty())
        continue;
      const std::vector<JobConfig> &cfgs = infos[j].configs;
      for (size_t c = 0; c < cfgs.size(); ++c) {
        const JobConfig &cfg = cfgs[c];
        int64_t total = persistent + cfg.persistentBytes;
        // satSub: maxMem is INT64_MIN on a stage without bubbles.
        if (total > persistentCap || satSub(maxMem, total) < cfg.minOpTransient)
          continue;
        int a = infos[j].allDevice[c];
        if (a != int(c) && dominated(cfgs[a], cfg))
          continue;
        double bound = bounds.bound(cfg);
        if (bound > 0)
          candidates.push_back({int(j), int(c), bound, bounds.tierBound(cfg)});
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate &a, const Candidate &b) {
                       return a.bound > b.bound;
                     });
    return candidates;
  }

  /// Packs the candidates of one bubble restriction in bound order into
  /// `found`: in small mode the best slot per (job, batch) group (and per
  /// whole-batch group), in large mode the single best slot.
  void searchMask(const Layout &layout, const std::vector<char> &mask,
                  bool small, std::vector<Layout::Slot> &found) {
    size_t numBubbles = stage.budget.size();
    std::vector<double> budget = slotBudget(layout, mask);
    const int64_t persistent = layout.persistent;
    frontier.build(budget, stage.mem);
    std::vector<Candidate> candidates = slotCandidates(layout, budget);
    // Group: (job, batch) in small mode, everything in large mode.
    std::map<std::pair<int, int>, size_t> group; // -> index into found
    double largeBest = found.empty() ? 0 : found[0].value;
    std::vector<int64_t> mem(numBubbles);
    int sims = 0;
    // Large mode without a simulation cap: the candidates in the order of
    // the tighter tierBound, which finds the best early and stops sooner
    // (1F1B 32 x 256 x 100: 8300 packings -> 4800). The result is what the bound
    // order gives: the best value, of equal values the candidate first in
    // bound order (its index), of one candidate's equal methods the first.
    const bool byTier = !small && config.maxSimulationsPerSlot <= 0;
    std::vector<size_t> order(candidates.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    if (byTier)
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return candidates[a].tierBound > candidates[b].tierBound;
      });
    // The index of the best's candidate (-1: found by an earlier mask).
    int64_t bestIndex = found.empty() ? std::numeric_limits<int64_t>::max() : -1;
    for (size_t i : order) {
      const Candidate &cand = candidates[i];
      const JobConfig &cfg = infos[cand.job].configs[cand.config];
      std::pair<int, int> key =
          small ? std::make_pair(cand.job, cfg.knobs.batch) : std::make_pair(0, 0);
      std::pair<int, int> wholeKey = {cand.job, -cfg.knobs.batch};
      auto g = group.find(key);
      double groupBest = small ? (g == group.end() ? 0 : found[g->second].value)
                               : largeBest;
      if (byTier) {
        // Neither bound reaches the best: no later candidate's tierBound
        // does; this one's value is below it.
        if (cand.tierBound <= largeBest)
          break;
        if (cand.bound < largeBest)
          continue;
      } else {
        if (!small && cand.bound <= largeBest)
          break;
        if (cand.bound <= groupBest)
          continue;
      }
      if (config.maxSimulationsPerSlot > 0 &&
          sims >= config.maxSimulationsPerSlot)
        break;
      int64_t total = persistent + cfg.persistentBytes;
      if (!everyOpFits(cfg, total))
        continue;
      ++sims;
      for (size_t k = 0; k < numBubbles; ++k)
        mem[k] = stage.mem[k] - total;
      std::vector<Method> methods = packingMethods(cfg, budget, mem, config);
      if (small && cfg.ops.size() > 1) {
        Method whole;
        whole.policy.wholeBatchesOnly = true;
        methods.push_back(whole);
      }
      for (const Method &method : methods) {
        SimResult r = pack(cfg, config.contextSwitchUs, budget, mem,
                           frontier, total, method, nullptr);
        countWork(cfg);
        double batches = double(r.opsPeriod / int64_t(cfg.ops.size()));
        double value = batches * cfg.valuePerBatch / r.period;
        Layout::Slot slot{&cfg, method, mask, {}, value};
        if (!small) {
          if (value > largeBest ||
              (value == largeBest && value > 0 && int64_t(i) < bestIndex)) {
            largeBest = value;
            bestIndex = int64_t(i);
            found.assign(1, slot);
          }
          continue;
        }
        auto k2 = method.policy.wholeBatchesOnly ? wholeKey : key;
        auto g2 = group.find(k2);
        if (g2 == group.end()) {
          if (value > 0) {
            group[k2] = found.size();
            found.push_back(slot);
          }
        } else if (value > found[g2->second].value) {
          found[g2->second] = slot;
        }
      }
    }
  }

  /// Scores each option by the whole plan it completes: the option, then
  /// greedily the best next option by its own completion, until the stage
  /// is full, plus the tail chunks of the time left. The best `branching`.
  std::vector<Layout::Slot> rankByRollout(const Layout &layout,
                                          std::vector<Layout::Slot> &found) {
    std::vector<std::pair<double, size_t>> order;
    for (size_t i = 0; i < found.size(); ++i) {
      Layout child = layout;
      apply(child, found[i], nullptr);
      order.push_back({rolloutValue(child), i});
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto &x, const auto &y) { return x.first > y.first; });
    // The two best options also with every bubble capped to leave room for
    // one op or one whole batch of another job, even at a loss: the rollout
    // says whether the other job gains more.
    size_t base = found.size();
    for (size_t r = 0; r < order.size() && r < 2; ++r) {
      for (double d : roomFor(layout, found[order[r].second].cfg->job)) {
        Layout::Slot slot = found[order[r].second];
        std::vector<double> budget = slotBudget(layout, slot.allowed);
        std::vector<double> cap(budget.size());
        bool any = false;
        for (size_t k = 0; k < budget.size(); ++k) {
          cap[k] = budget[k] > d ? budget[k] - d : budget[k];
          any |= budget[k] > d;
        }
        if (!any || work > config.jointWorkLimit)
          continue;
        slot.cap = cap;
        slot.value = packValue(layout, slot);
        if (!(slot.value > 0))
          continue;
        Layout child = layout;
        apply(child, slot, nullptr);
        order.push_back({rolloutValue(child), found.size()});
        found.push_back(slot);
      }
    }
    if (found.size() > base)
      std::stable_sort(order.begin(), order.end(), [](const auto &x, const auto &y) {
        return x.first > y.first;
      });
    std::vector<Layout::Slot> best;
    for (size_t i = 0; i < order.size() && int(i) < branching; ++i)
      best.push_back(found[order[i].second]);
    return best;
  }

  /// Room worth leaving for the other jobs: the shortest chunk (one op) and
  /// the shortest whole batch of each job not yet on the stage.
  std::vector<double> roomFor(const Layout &layout, int job) const {
    std::vector<double> room;
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (int(j) == job || layout.onStage[j] || !infos[j].reason.empty())
        continue;
      double op = kInf, batch = kInf;
      for (const JobConfig &c : infos[j].configs) {
        op = std::min(op, config.contextSwitchUs + c.minOpUs);
        batch = std::min(batch, config.contextSwitchUs + c.batchUs);
      }
      if (op < kInf)
        room.push_back(op);
      if (batch < kInf && batch != op)
        room.push_back(batch);
    }
    return room;
  }

  /// Value of a slot packed under its restriction and caps.
  double packValue(const Layout &layout, const Layout::Slot &slot) {
    const JobConfig &cfg = *slot.cfg;
    std::vector<double> budget = slotBudget(layout, slot.allowed);
    for (size_t k = 0; k < slot.cap.size(); ++k)
      budget[k] = std::min(budget[k], slot.cap[k]);
    int64_t total = layout.persistent + cfg.persistentBytes;
    std::vector<int64_t> mem(stage.budget.size());
    for (size_t k = 0; k < mem.size(); ++k)
      mem[k] = stage.mem[k] - total;
    frontier.build(budget, stage.mem);
    SimResult r = pack(cfg, config.contextSwitchUs, budget, mem, frontier,
                       total, slot.method, nullptr);
    countWork(cfg);
    return double(r.opsPeriod / int64_t(cfg.ops.size())) * cfg.valuePerBatch /
           r.period;
  }

  /// Work of one packing, in bubble x op x iteration steps (the greedy
  /// visits every bubble for up to ops + 1 iterations).
  void countWork(const JobConfig &cfg) {
    double ops = double(cfg.ops.size());
    work += double(stage.budget.size()) * ops * (ops + 1);
  }

  /// Caps the slot's use of its bubbles, longest first, where that frees
  /// room for a whole batch (or two) of another job without lowering the
  /// slot's value: the time one job leaves in a bubble can then go to
  /// another (the windows are fixed per bubble, so this is how a job that
  /// could run elsewhere makes way).
  void compact(const Layout &layout, Layout::Slot &slot) {
    const JobConfig &cfg = *slot.cfg;
    std::vector<double> room;
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (int(j) == cfg.job || layout.onStage[j] || !infos[j].reason.empty())
        continue;
      double least = kInf;
      for (const JobConfig &c : infos[j].configs)
        least = std::min(least, config.contextSwitchUs + c.batchUs);
      if (least < kInf)
        for (int m = 1; m <= 2; ++m)
          room.push_back(m * least);
    }
    if (room.empty())
      return;
    std::sort(room.begin(), room.end(), std::greater<double>());
    size_t numBubbles = stage.budget.size();
    std::vector<double> budget = slotBudget(layout, slot.allowed);
    std::vector<size_t> order;
    for (size_t k = 0; k < numBubbles; ++k)
      if (budget[k] > 0)
        order.push_back(k);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return budget[x] > budget[y]; });
    int64_t total = layout.persistent + cfg.persistentBytes;
    std::vector<int64_t> mem(numBubbles);
    for (size_t k = 0; k < numBubbles; ++k)
      mem[k] = stage.mem[k] - total;
    std::vector<double> capped = budget;
    for (size_t k : order)
      for (double d : room) {
        if (d >= budget[k])
          continue;
        std::vector<double> trial = capped;
        trial[k] = budget[k] - d;
        frontier.build(trial, stage.mem);
        if (work > config.jointWorkLimit)
          break;
        SimResult r = pack(cfg, config.contextSwitchUs, trial, mem, frontier,
                           total, slot.method, nullptr);
        countWork(cfg);
        double value = double(r.opsPeriod / int64_t(cfg.ops.size())) *
                       cfg.valuePerBatch / r.period;
        if (value >= slot.value * (1 - 1e-9)) {
          capped = trial;
          break;
        }
      }
    if (capped != budget)
      slot.cap = capped;
  }

  /// Value of the greedy completion of a layout: repeatedly the option whose
  /// own completion (its value plus the tails of the time left) is best.
  double rolloutValue(Layout layout) {
    while (int(layout.slots.size()) < maxSlots) {
      std::vector<Layout::Slot> options = topOptions(layout, false);
      double bestScore = -1;
      Layout bestChild;
      for (const Layout::Slot &o : options) {
        Layout child = layout;
        apply(child, o, nullptr);
        double score = child.value + tailValue(child);
        if (score > bestScore) {
          bestScore = score;
          bestChild = std::move(child);
        }
      }
      if (bestScore < 0)
        break;
      layout = std::move(bestChild);
    }
    return layout.value + tailValue(layout);
  }

  /// The tail chunk kinds of a layout: whole batches of a smaller batch
  /// size with the same placement knobs, per job on the stage.
  std::vector<TailItem> tailItems(const Layout &layout) const {
    std::vector<TailItem> items;
    if (!config.tailChunks)
      return items;
    for (size_t s = 0; s < layout.slots.size(); ++s) {
      const JobConfig &main = *layout.slots[s].cfg;
      for (const JobConfig &cfg : infos[main.job].configs) {
        const Knobs &a = cfg.knobs, &b = main.knobs;
        if (a.batch >= b.batch || a.weights != b.weights || a.acts != b.acts ||
            a.optimizer != b.optimizer || a.checkpoint != b.checkpoint)
          continue;
        items.push_back({int(s), &cfg, config.contextSwitchUs + cfg.batchUs,
                         cfg.valuePerBatch});
      }
    }
    // Densest first.
    std::sort(items.begin(), items.end(), [](const TailItem &x, const TailItem &y) {
      return x.value * y.time > y.value * x.time;
    });
    return items;
  }

  /// Best multiset of tail items within `time`, each fitting `mem` free
  /// transient bytes (branch and bound over counts, densest first; exact
  /// unless the node budget runs out, then the best found).
  static double bestTails(const std::vector<TailItem> &items, double time,
                          int64_t mem, std::vector<int64_t> *counts) {
    std::vector<const TailItem *> usable;
    std::vector<size_t> index;
    for (size_t i = 0; i < items.size(); ++i)
      if (items[i].time > 0 && items[i].time <= time &&
          items[i].cfg->batchTransient <= mem) {
        usable.push_back(&items[i]);
        index.push_back(i);
      }
    if (counts)
      counts->assign(items.size(), 0);
    if (usable.empty())
      return 0;
    double best = 0;
    std::vector<int64_t> cur(usable.size()), bestCounts(usable.size());
    int nodes = 0;
    std::function<void(size_t, double, double)> dfs = [&](size_t i, double left,
                                                           double value) {
      if (value > best) {
        best = value;
        bestCounts = cur;
      }
      if (i == usable.size() || ++nodes > 20000)
        return;
      const TailItem &it = *usable[i];
      if (value + left * it.value / it.time <= best * (1 + 1e-12))
        return; // even the densest remaining item cannot beat the best
      int64_t most = int64_t(std::floor(left / it.time));
      while (most > 0 && double(most) * it.time > left)
        --most;
      for (int64_t n = most; n >= 0; --n) {
        cur[i] = n;
        dfs(i + 1, left - double(n) * it.time, value + double(n) * it.value);
        if (nodes > 20000)
          break;
        // Past the last item every n is a leaf, uncounted by the node
        // budget, worth no more than n = most (values are not negative):
        // none can beat it. Trying them all took left / time leaves, minutes
        // for a bubble that holds millions of short items.
        if (i + 1 == usable.size() && it.value >= 0)
          break;
      }
      cur[i] = 0;
    };
    dfs(0, time, 0);
    if (counts)
      for (size_t u = 0; u < usable.size(); ++u)
        (*counts)[index[u]] = bestCounts[u];
    return best;
  }

  double tailValue(const Layout &layout) const {
    std::vector<TailItem> items = tailItems(layout);
    if (items.empty())
      return 0;
    double total = 0;
    for (size_t k = 0; k < stage.budget.size(); ++k)
      total += bestTails(items, stage.budget[k] - layout.windowEnd[k],
                         stage.mem[k] - layout.persistent, nullptr);
    return total;
  }

  /// Emits the tail chunks after every window: the same chunks in every
  /// listed iteration of the owning assignment; samples are numbered along
  /// the assignment's own tail stream.
  void emitTails(Layout &layout, const std::vector<size_t> &assignmentOf) {
    std::vector<TailItem> items = tailItems(layout);
    if (items.empty())
      return;
    size_t numBubbles = stage.budget.size();
    std::vector<std::vector<int64_t>> counts(numBubbles);
    bool any = false;
    for (size_t k = 0; k < numBubbles; ++k) {
      bestTails(items, stage.budget[k] - layout.windowEnd[k],
                stage.mem[k] - layout.persistent, &counts[k]);
      for (int64_t n : counts[k])
        any |= n > 0;
    }
    if (!any)
      return;
    std::vector<int64_t> tailSamples(layout.slots.size(), 0);
    std::vector<double> perIterUseful(layout.slots.size(), 0),
        perIterFilled(layout.slots.size(), 0),
        perIterSamples(layout.slots.size(), 0);
    for (size_t k = 0; k < numBubbles; ++k)
      for (size_t i = 0; i < items.size(); ++i) {
        const TailItem &it = items[i];
        perIterUseful[it.slot] += double(counts[k][i]) * it.cfg->usefulPerBatch;
        perIterFilled[it.slot] += double(counts[k][i]) * it.time;
        perIterSamples[it.slot] += double(counts[k][i] * it.cfg->knobs.batch);
      }
    for (size_t s = 0; s < layout.slots.size(); ++s) {
      Assignment &a = plan.assignments[assignmentOf[s]];
      int iterations = a.prefixIterations + a.periodIterations;
      for (int t = 0; t < iterations; ++t)
        for (size_t k = 0; k < numBubbles; ++k) {
          double offset = layout.windowEnd[k];
          for (size_t i = 0; i < items.size(); ++i) {
            const TailItem &it = items[i];
            if (counts[k][i] > 0 && it.slot == int(s)) {
              const JobConfig &cfg = *it.cfg;
              plan.chunks.push_back(tailChunk(cfg, stageId, stage.bubbleIds[k],
                                              tailSamples[s], it.time, t,
                                              int(counts[k][i]), offset));
              tailSamples[s] += counts[k][i] * cfg.knobs.batch;
            }
            if (counts[k][i] > 0)
              offset += double(counts[k][i]) * it.time;
          }
        }
      a.samplesPerIteration += perIterSamples[s];
      a.usefulUs += perIterUseful[s];
      a.filledUs += perIterFilled[s];
      a.tailSamplesPerIteration = int64_t(perIterSamples[s]);
    }
    for (size_t k = 0; k < numBubbles; ++k)
      for (size_t i = 0; i < items.size(); ++i)
        if (counts[k][i] > 0)
          layout.transientMax[k] =
              std::max(layout.transientMax[k], items[i].cfg->batchTransient);
  }

  /// Necessary for progress: every op fits, alone, in some bubble.
  bool everyOpFits(const JobConfig &cfg, int64_t persistent) const {
    for (const OpCost &op : cfg.ops)
      if (!frontier.fits(config.contextSwitchUs +
                             std::max({op.computeUs, op.inUs, op.outUs}),
                         persistent + op.workBytes + op.inBytes + op.outBytes))
        return false;
    return true;
  }

  BubbleFrontier frontier; // the current slot's budgets, free bytes

  const StageInfo &stage;
  int stageId;
  const std::vector<Job> &jobs;
  const std::vector<JobInfo> &infos;
  const Config &config;
  Plan &plan;
  std::vector<int64_t> memSorted; // the stage's distinct free bytes, ascending

  bool small = false; // joint search with restrictions and batch groups
  double work = 0;     // see countWork()
  int maxSlots = 1, branching = 1, plansLeft = 1;
  std::vector<double> thresholds;
  double bestTotal = -1;
  std::vector<Layout::Slot> bestSlots;
};

} // namespace
} // namespace detail

using namespace detail;

namespace {
/// Plans and accounts every stage, each into its own part, on up to
/// config.threads threads (a stage's planner reads only the stage, the jobs
/// and the config); the parts are then appended in stage order, which gives
/// the same chunks, assignments and accounts as planning in order. With a
/// sink, a stage's chunks go to it as soon as the stage is accounted.
void planStages(const std::vector<StageBubbles> &stages,
                const std::vector<StageInfo> &infos, const std::vector<Job> &jobs,
                const std::vector<JobInfo> &jobInfos, const Hardware &hw,
                const Config &config, const ChunkSink &sink, Plan &plan) {
  const ShortChunks shorts = shortChunks(jobInfos, config);
  std::vector<Plan> parts(infos.size());
  std::mutex progressMutex;
  size_t planned = 0;
  forEachIndex(infos.size(), config.threads, [&](size_t i) {
    const StageInfo &info = infos[i];
    Plan &part = parts[i];
    StagePlanner(info, stages[info.index].stage, jobs, jobInfos, config, part).run();
    part.accounts.push_back(
        accountStage(info, stages[info.index], jobs, jobInfos, hw, config, shorts, part));
    if (sink) {
      sink(info.index, std::move(part.chunks));
      std::vector<Chunk>().swap(part.chunks);
    }
    if (config.progress) {
      std::lock_guard<std::mutex> lock(progressMutex);
      config.progress(++planned, infos.size());
    }
  });
  // Appended into room reserved once, each part freed once appended: the
  // chunks are in memory about once, not twice (2.3 million at 1F1B
  // 128 x 4096 x 100, ~100 bytes each).
  size_t total = plan.chunks.size();
  for (const Plan &part : parts)
    total += part.chunks.size();
  plan.chunks.reserve(total);
  for (Plan &part : parts) {
    plan.chunks.insert(plan.chunks.end(), part.chunks.begin(), part.chunks.end());
    std::vector<Chunk>().swap(part.chunks);
    plan.assignments.insert(plan.assignments.end(), part.assignments.begin(),
                            part.assignments.end());
    plan.accounts.insert(plan.accounts.end(), part.accounts.begin(), part.accounts.end());
  }
}
} // namespace

Plan planFill(const std::vector<StageBubbles> &stages,
              const std::vector<Job> &jobs, const Hardware &hw,
              const Config &config, const ChunkSink &sink) {
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
  std::unordered_set<int> stagesSeen, idsSeen;
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageBubbles &sb = stages[s];
    std::string error;
    if (!stagesSeen.insert(sb.stage).second)
      error = "appears more than once";
    else if (sb.minFreeBytes < 0)
      error = format("minFreeBytes is negative (%lld)",
                     static_cast<long long>(sb.minFreeBytes));
    // Ids are checked with a set: 10^3-10^4 bubbles per stage.
    idsSeen.clear();
    for (size_t k = 0; k < sb.bubbles.size() && error.empty(); ++k) {
      const Bubble &b = sb.bubbles[k];
      if (!std::isfinite(b.durationUs) || b.durationUs < 0)
        error = format("bubble %d has an invalid duration (%g us)", b.id, b.durationUs);
      else if (!std::isfinite(b.startUs))
        error = format("bubble %d has an invalid start (%g us)", b.id, b.startUs);
      else if (b.freeBytes < 0)
        error = format("bubble %d has negative free bytes (%lld)", b.id,
                       static_cast<long long>(b.freeBytes));
      if (error.empty() && !idsSeen.insert(b.id).second)
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
  double longestBubbleUs = 0;
  for (const StageInfo &info : infos)
    for (double budget : info.budget)
      longestBubbleUs = std::max(longestBubbleUs, budget);
  if (configOk)
    forEachIndex(jobs.size(), config.threads, [&](size_t j) {
      jobInfos[j] = buildJob(jobs[j], int(j), hw, config, longestBubbleUs);
    });

  if (configOk)
    planStages(stages, infos, jobs, jobInfos, hw, config, sink, plan);

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
  plan.usefulFraction = plan.bubbleUs > 0 ? plan.usefulUs / plan.bubbleUs : 0;
  return plan;
}

} // namespace pipefill::fill

