//===- PlannerInternal.h - Private types of the fill planner ----*- C++ -*-===//
//
// Shared by the planner's four layers (private; not installed, not included
// outside algo/fill/ except by the fill benchmark and tests):
//   Config.cpp       job validation and knob settings -> per-op costs
//   Packer.cpp       packing one setting on one stage (greedy and exact)
//   StagePlanner.cpp choosing jobs and settings per stage; planFill()
//   Explain.cpp      why jobs are unplaced and bubble time is idle
// docs/planner.md documents the model these implement.
//
//===----------------------------------------------------------------------===//

#ifndef PIPEFILL_ALGO_FILL_PLANNERINTERNAL_H
#define PIPEFILL_ALGO_FILL_PLANNERINTERNAL_H

#include "algo/fill/Planner.h"
#include "support/Format.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace pipefill::fill::detail {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxChunksPerBubble = 1 << 20;

std::string jobLabel(const Job &job, int index);

struct Knobs {
  int batch = 1;
  WeightPlacement weights = WeightPlacement::Resident;
  ActPlacement acts = ActPlacement::Device;
  OptimizerPlacement optimizer = OptimizerPlacement::Device;
  bool checkpoint = false;
};

std::string describe(const Knobs &k, bool training);

/// Cost of one op of one batch under fixed knobs.
struct OpCost {
  double computeUs = 0;
  double inUs = 0, outUs = 0;  // PCIe copy time before / after compute
  int64_t inBytes = 0, outBytes = 0;
  int64_t workBytes = 0;       // device bytes while computing (not buffers)
  int64_t boundaryBytes = 0;   // activation handed to the next op
  double boundaryUs = 0;       // its PCIe copy time
};

/// One job under one knob setting: the per-op costs and batch aggregates.
struct JobConfig {
  int job = 0;
  Knobs knobs;
  bool hostActs = false;
  std::vector<OpCost> ops;
  int64_t persistentBytes = 0;
  double batchUs = 0;           // makespan of the whole-batch chunk
  int64_t batchTransient = 0;   // its transient bytes
  double batchComputeUs = 0, batchCopyUs = 0;
  double lowerBatchUs = 0;      // max(sum compute, sum in, sum out)
  double usefulPerBatch = 0;    // dedicated-speed time of one batch
  double valuePerBatch = 0;     // priority * usefulPerBatch
  double minOpUs = 0;           // no chunk is shorter (excl. context switch)
  double maxOpLowerUs = 0;      // the slowest op: no chunk holding it is shorter
  int64_t minOpTransient = 0;   // no chunk needs fewer transient bytes
  /// No PCIe copies at all: a chunk [p, e) takes the sum of its ops'
  /// compute (prefixComputeUs[e] - prefixComputeUs[p], up to rounding) and
  /// its largest working set, which the packer's fast path uses.
  bool noCopies = false;
  std::vector<double> prefixComputeUs; // size ops + 1
  /// The ops by their least time alone (the most of compute, copy-in and
  /// copy-out; a chunk holding the op takes at least that), slowest first:
  /// per distinct least time `us`, the sums of compute, copy-in and copy-out
  /// over the ops at least that slow. Each batch runs those ops in at least
  /// one chunk, in bubbles longer than a context switch plus `us`.
  struct Tier {
    double us = 0;
    double computeUs = 0, inUs = 0, outUs = 0;
  };
  std::vector<Tier> tiers;
};

/// A chunk of `cfg` in a bubble: stage, bubble, job and the knobs set; the
/// caller sets the layers, samples, times and place.
Chunk chunkOf(const JobConfig &cfg, int stage, int bubbleId);

/// A tail chunk: `repeat` whole batches of `cfg` (a smaller batch size of an
/// assigned job) from `sampleBegin`, each taking `predictedUs`.
Chunk tailChunk(const JobConfig &cfg, int stage, int bubbleId,
                int64_t sampleBegin, double predictedUs, int iteration,
                int repeat, double offsetUs);

/// The assignment of `cfg` on `stage`: the knobs, the iteration schedule and
/// the persistent bytes; the caller sets what the packing achieved
/// (batches, samples, useful and filled time).
Assignment assignmentFor(const JobConfig &cfg, int stage, int prefix, int period);

/// Incremental evaluation of a chunk, op by op: the double-buffered
/// copy-in / compute / copy-out pipeline
///   F_j = max(F_{j-1}, E_{j-2}) + in_j        (in buffer of op j-2 free)
///   E_j = max(E_{j-1}, F_j, G_{j-2}) + c_j    (out buffer of op j-2 free)
///   G_j = max(G_{j-1}, E_j) + out_j
///   makespan = max(E_last, G_last)
/// and its transient bytes
///   max work + max consecutive pair of in buffers + same for out buffers.
class ChunkBuilder {
public:
  void reset() { *this = ChunkBuilder(); }

  void push(double inUs, double computeUs, double outUs, int64_t inBytes,
            int64_t outBytes, int64_t workBytes) {
    double f = std::max(f1, e2) + inUs;
    double e = std::max({e1, f, g2}) + computeUs;
    double g = std::max(g1, e) + outUs;
    f1 = f;
    e2 = e1;
    e1 = e;
    g2 = g1;
    g1 = g;
    lastOutUs = outUs;
    maxWork = std::max(maxWork, workBytes);
    maxInPair = std::max(maxInPair, lastIn + inBytes);
    maxOutPairBefore = maxOutPair;
    prevOut = lastOut;
    maxOutPair = std::max(maxOutPair, lastOut + outBytes);
    lastIn = inBytes;
    lastOut = outBytes;
    compute += computeUs;
    copy += inUs + outUs;
  }

  double makespan() const { return std::max(e1, g1); }
  int64_t transient() const { return maxWork + maxInPair + maxOutPair; }
  double computeUs() const { return compute; }
  double copyUs() const { return copy; }

  /// Makespan and transient bytes if the last op also copied out `extra`.
  void withExtraOut(double extraUs, int64_t extraBytes, double &time,
                    int64_t &bytes) const {
    time = std::max(e1, g1 + extraUs);
    int64_t pair = prevOut + lastOut + extraBytes;
    bytes = maxWork + maxInPair + std::max(maxOutPairBefore, pair);
  }

private:
  double f1 = 0, e1 = 0, e2 = 0, g1 = 0, g2 = 0, lastOutUs = 0;
  int64_t maxWork = 0, maxInPair = 0, maxOutPair = 0, maxOutPairBefore = 0;
  int64_t lastIn = 0, lastOut = 0, prevOut = 0;
  double compute = 0, copy = 0;
};

/// Builds the op costs of `job` under `k`; false if the setting is unusable
/// (needs PCIe bandwidth that is not there, or absurd sizes).
bool buildConfig(const Job &job, int jobIndex, const Knobs &k,
                 const Hardware &hw, JobConfig &cfg);

/// Where the chunks of one simulation go (only for the chosen assignments).
struct Emitter {
  std::vector<Chunk> *chunks = nullptr;
  int stage = 0;
  const std::vector<int> *bubbleIds = nullptr;
  const std::vector<double> *offsetBase = nullptr;
  int iteration = 0;
  std::vector<double> maxUse;        // per bubble, over all iterations
  std::vector<int64_t> maxTransient; // per bubble, over all iterations
};

struct SimResult {
  int prefix = 0, period = 1;
  int64_t opsPeriod = 0;     // ops completed over one period
  double filledPeriod = 0;   // bubble time used over one period
};

/// Answers "is there a bubble with at least this much time and memory?".
class BubbleFrontier {
public:
  /// From a slot's bubbles: their time budgets and free bytes. A packing
  /// with this frontier takes the same budgets, and the free bytes less its
  /// persistent bytes (pack()).
  void build(const std::vector<double> &budget, const std::vector<int64_t> &mem) {
    points.clear();
    runStarts.clear();
    for (size_t k = 0; k < budget.size(); ++k) {
      if (k > 0 && sameBits(budget[k], budget[k - 1]) && mem[k] == mem[k - 1])
        continue; // the run's first bubble stands for it
      runStarts.push_back(uint32_t(k));
      points.push_back({budget[k], mem[k]});
    }
    runStarts.push_back(uint32_t(budget.size()));
    std::sort(points.begin(), points.end(),
              [](const auto &a, const auto &b) { return a.first > b.first; });
    for (size_t i = 1; i < points.size(); ++i)
      points[i].second = std::max(points[i].second, points[i - 1].second);
  }
  /// Where the runs of consecutive bubbles with bit-equal budgets and equal
  /// free bytes start, then the number of bubbles. A pipeline's bubbles
  /// come in few runs (1F1B 64 x 512: ~130 per stage of ~500 bubbles), and
  /// a packing treats the bubbles of a run alike.
  const std::vector<uint32_t> &runs() const { return runStarts; }
  bool empty() const { return points.empty(); }
  bool fits(double time, int64_t bytes) const {
    // Points with budget >= time form a prefix; its memory is a running max.
    size_t lo = 0, hi = points.size();
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (points[mid].first >= time)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo > 0 && points[lo - 1].second >= bytes;
  }
  double maxTime() const { return points.empty() ? -kInf : points.front().first; }
  int64_t maxBytes() const {
    return points.empty() ? std::numeric_limits<int64_t>::min()
                          : points.back().second;
  }

private:
  static bool sameBits(double a, double b) {
    uint64_t x, y;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    return x == y;
  }
  std::vector<std::pair<double, int64_t>> points;
  std::vector<uint32_t> runStarts;
};

/// Variants of the greedy, only for configurations with activations on the
/// host, where a chunk boundary costs two activation copies and moving the
/// cursor a little can make the next bubble's chunk much more expensive.
/// wholeBatchStarts: a batch is only started by a whole-batch chunk (never a
/// partial one in the time left at the end of a bubble). minEfficiency: a
/// chunk runs only if compute / (context switch + makespan) reaches it.
struct Policy {
  bool wholeBatchStarts = false;
  double minEfficiency = 0;
  /// Only whole-batch chunks (the joint search tries it so that the time a
  /// job's partial chunks would take can go to tail chunks or other jobs).
  bool wholeBatchesOnly = false;
};
const Policy kPolicies[] = {{false, 0, false}, {true, 0, false}, {false, 0.5, false}, {true, 0.5, false}};

/// How a configuration is packed: the greedy with a policy, or exactly.
struct Method {
  bool exact = false;
  Policy policy;
};

/// Per job: its validity and its knob settings.
struct JobInfo {
  std::string reason; // non-empty: cannot be planned at all
  std::vector<JobConfig> configs;
  /// Per config: the all-device one of the same batch (weights resident,
  /// activations and optimizer state on the device, no checkpointing).
  std::vector<int> allDevice;
};

/// The most samples of one job a bubble may hold: chunk repeats, sample
/// offsets and the planner's per-bubble walks are sized for it (a job whose
/// per-sample time is 10^-6 us against bubbles of 10^9 us overflowed a 32-bit
/// repeat count and ran the planner out of memory).
constexpr double kMaxSamplesPerBubble = double(int64_t(1) << 31);

/// Validates a job and builds its knob settings (Config.cpp); a job with more
/// than kMaxSamplesPerBubble samples of work in a bubble of `longestBubbleUs`
/// is not planned (its reason says why).
JobInfo buildJob(const Job &job, int index, const Hardware &hw,
                 const Config &config, double longestBubbleUs = 0);

/// A stage, validated, with its usable time and memory per bubble.
struct StageInfo {
  int index = 0; // into the input vector
  std::vector<double> budget;   // durationUs * (1 - margin)
  std::vector<int64_t> mem;     // freeBytes - reserve
  std::vector<int> bubbleIds;
  int64_t minFree = 0;          // minFreeBytes - reserve
};

/// The packings to try for a configuration: the exact one when it has PCIe
/// copies (where the greedy is not provably optimal) and is small enough;
/// else the plain greedy, plus its variants with host activations.
std::vector<Method> packingMethods(const JobConfig &cfg,
                                   const std::vector<double> &budget,
                                   const std::vector<int64_t> &mem,
                                   const Config &config);

/// Packs one configuration on one stage (budget[k], mem[k]: the time and the
/// transient bytes bubble k leaves it; frontier: built from `budget` and the
/// bubbles' free bytes before persistent bytes, mem[k] + `persistent`);
/// emits the chunks when `emit` is set.
SimResult pack(const JobConfig &cfg, double ctx,
               const std::vector<double> &budget,
               const std::vector<int64_t> &mem, const BubbleFrontier &frontier,
               int64_t persistent, const Method &method, Emitter *emit);

/// One job of a joint packing: its setting and the settings of its tail
/// chunks (smaller batch sizes, same placements).
struct JointMember {
  const JobConfig *cfg = nullptr;
  std::vector<const JobConfig *> tails;
};

/// A joint packing of a stage (docs/planner.md section 4): one prefix and
/// one period shared by all members; per member, over one period.
struct JointResult {
  bool ok = false;  // false: too large, not run to the end
  double value = 0; // priority-weighted useful us per iteration, steady state
  int prefix = 0, period = 1;
  std::vector<int64_t> opsPeriod; // main-stream ops (whole batches x ops)
  std::vector<int64_t> tailSamplesPeriod;
  std::vector<double> tailUsefulPeriod, tailValuePeriod;
  std::vector<double> filledPeriod; // main stream and tails
  double work = 0; // what the packing took (see jointPackCost)
  /// Steps taken to read the item counts of the grid knapsack's points back:
  /// at most one per grid step and one per point, whatever the bubble's
  /// length. Kept out of `work`, on which the work limits were sized.
  double readBackSteps = 0;
};

/// Work of jointPack() for these members on `bubbles` bubbles.
double jointPackCost(const std::vector<JointMember> &members, size_t bubbles);

/// Packs several jobs jointly on one stage: cursors of all members as the
/// state, a knapsack of whole batches and tail chunks per bubble, Karp's
/// maximum mean cycle over iterations. mem[k]: transient bytes bubble k
/// leaves (free bytes less the members' persistent bytes). Emits the chunks
/// into `out` when set (offsets from the bubble start; peakBytes without the
/// persistent bytes).
JointResult jointPack(const std::vector<JointMember> &members, double ctx,
                      const std::vector<double> &budget,
                      const std::vector<int64_t> &mem,
                      const BubbleFrontier &frontier, int64_t persistent,
                      std::vector<Chunk> *out, int stage,
                      const std::vector<int> &bubbleIds);

/// All bubbles of all stages, for the diagnostics of unplaced jobs.
struct AllBubbles {
  BubbleFrontier frontier;
  int64_t maxMinFree = std::numeric_limits<int64_t>::min();
  double maxBudget = -kInf, maxDuration = 0;
  int64_t maxMem = std::numeric_limits<int64_t>::min();

  AllBubbles(const std::vector<StageInfo> &stages, const Config &config) {
    std::vector<double> budget;
    std::vector<int64_t> mem;
    for (const StageInfo &s : stages) {
      maxMinFree = std::max(maxMinFree, s.minFree);
      budget.insert(budget.end(), s.budget.begin(), s.budget.end());
      mem.insert(mem.end(), s.mem.begin(), s.mem.end());
      for (size_t k = 0; k < s.budget.size(); ++k) {
        maxBudget = std::max(maxBudget, s.budget[k]);
        maxMem = std::max(maxMem, s.mem[k]);
      }
    }
    frontier.build(budget, mem);
    maxDuration = maxBudget / (1 - config.safetyMargin);
  }
};

/// Why a job that was not placed fits nowhere, or "" when some stage has,
/// for some knob setting, a bubble with the time and the memory of every op
/// (a necessary condition for progress, so "" does not prove feasibility).
std::string explainNoFit(const Job &job, const JobInfo &info,
                         const AllBubbles &all, const Config &config);

/// The shortest chunk of every setting of every valid job (context switch
/// included), by time: what accountStage asks "does some chunk this short
/// fit this memory" of. Built once for all stages (Explain.cpp).
struct ShortChunks {
  std::vector<double> us;           // ascending
  std::vector<int> job;             // the setting's job
  std::vector<int64_t> persistent;  // its persistent bytes
  std::vector<int64_t> transient;   // its least transient bytes
  /// What accountStage calls too short: no chunk is shorter.
  double shortest() const { return us.empty() ? kInf : us.front(); }
};
ShortChunks shortChunks(const std::vector<JobInfo> &infos, const Config &config);

/// Where one stage's bubble time goes, from the stage's own part of the
/// plan (`part`: its chunks and assignments, in plan order): useful time,
/// switches, launches and overheads of the steady-state chunks, and why the
/// rest of each bubble stays idle (Explain.cpp).
StageAccount accountStage(const StageInfo &info, const StageBubbles &input,
                          const std::vector<Job> &jobs, const std::vector<JobInfo> &infos,
                          const Hardware &hw, const Config &config,
                          const ShortChunks &shortChunks, const Plan &part);

/// Calls fn(i) for every i < n, on up to `threads` threads (this one
/// included), each i once; fn must only write what belongs to its i.
template <typename Fn> void forEachIndex(size_t n, int threads, Fn &&fn) {
  const size_t workers = std::min<size_t>(n, size_t(std::max(1, threads)));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i)
      fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++)
      fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers; ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();
}

} // namespace pipefill::fill::detail

#endif // PIPEFILL_ALGO_FILL_PLANNERINTERNAL_H
