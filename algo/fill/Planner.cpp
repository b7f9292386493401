//===- Planner.cpp - Fill-job planner -------------------------------------===//
//
// Search structure (docs/planner.md has the model, the rationale and the
// guarantees):
//  1. Every job is validated and each knob setting (batch, weights,
//     activations, optimizer, checkpointing) is turned into per-op costs
//     once; these do not depend on the stage.
//  2. Stages are planned independently (a job's samples are treated as
//     unbounded, so the objective separates by stage), slot by slot (one job
//     per slot). Settings dominated by the all-device setting of the same
//     batch are dropped; the rest get a proven upper bound on their value and
//     are simulated in bound order until no bound can beat the best value.
//  3. Packing one setting on one stage: greedily (whole batches back to
//     back, else the longest run of ops that fits, split into several chunks
//     where memory cuts it short; never stopping at an op no bubble can
//     start), or exactly (closed-walk optimum over cursor states) for small
//     settings with PCIe copies, where the greedy is not provably optimal.
//     Bubbles repeat every iteration, so the cursor at an iteration start
//     determines the rest: the schedule is a prefix plus a period.
//  4. The winner's chunks are emitted for prefix + period iterations; the
//     next slot gets the time left after the most the earlier jobs use in
//     each bubble in any iteration, so every job's schedule stays periodic.
//
//===----------------------------------------------------------------------===//

#include "algo/fill/Planner.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <memory>

namespace pipefill::fill {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxChunksPerBubble = 1 << 20;

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

std::string jobLabel(const Job &job, int index) {
  return job.name.empty() ? format("#%d", index) : job.name;
}

struct Knobs {
  int batch = 1;
  WeightPlacement weights = WeightPlacement::Resident;
  ActPlacement acts = ActPlacement::Device;
  OptimizerPlacement optimizer = OptimizerPlacement::Device;
  bool checkpoint = false;
};

std::string describe(const Knobs &k, bool training) {
  std::string s = format("batch %d, weights %s, activations on %s", k.batch,
                         toString(k.weights), toString(k.acts));
  if (training)
    s += format(", optimizer on %s%s", toString(k.optimizer),
                k.checkpoint ? ", checkpointing" : "");
  return s;
}

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
};

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
  cfg.usefulPerBatch = double(b) * usefulUsPerSample(job);
  cfg.valuePerBatch = job.priority * cfg.usefulPerBatch;
  return true;
}

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
  void build(const std::vector<double> &budget, const std::vector<int64_t> &mem) {
    points.clear();
    for (size_t k = 0; k < budget.size(); ++k)
      add(budget[k], mem[k]);
    finish();
  }
  void add(double time, int64_t bytes) { points.push_back({time, bytes}); }
  void finish() {
    std::sort(points.begin(), points.end(),
              [](const auto &a, const auto &b) { return a.first > b.first; });
    for (size_t i = 1; i < points.size(); ++i)
      points[i].second = std::max(points[i].second, points[i - 1].second);
  }
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
  std::vector<std::pair<double, int64_t>> points;
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
};
const Policy kPolicies[] = {{false, 0}, {true, 0}, {false, 0.5}, {true, 0.5}};

/// How a configuration is packed: the greedy with a policy, or exactly.
struct Method {
  bool exact = false;
  Policy policy;
};

/// Chunk arithmetic of one job configuration on one stage, shared by the
/// greedy and the exact packer.
class Packer {
public:
  /// mem[k]: bytes for the chunk's transient use in bubble k. frontier: the
  /// slot's bubbles with their free bytes before persistent bytes, which are
  /// `persistent` for this configuration.
  Packer(const JobConfig &cfg, double ctx, const std::vector<double> &budget,
         const std::vector<int64_t> &mem, const BubbleFrontier &frontier,
         int64_t persistent)
      : cfg(cfg), ctx(ctx), budget(budget), mem(mem), frontier(frontier),
        persistent(persistent), numOp(int(cfg.ops.size())) {}

protected:
  struct ChunkCost {
    double time = 0, computeUs = 0, copyUs = 0;
    int64_t bytes = 0;
  };

  /// Bubbles that can hold at least one chunk of this configuration.
  std::vector<int> usableBubbles() const {
    std::vector<int> usable;
    for (size_t k = 0; k < budget.size(); ++k)
      if (budget[k] >= ctx + cfg.minOpUs && mem[k] >= cfg.minOpTransient)
        usable.push_back(int(k));
    return usable;
  }

  /// Pushes op e of a chunk that starts at op p (with the input activation
  /// copy when p > 0 and activations wait on the host).
  void pushOp(int p, int e) {
    const OpCost &op = cfg.ops[e];
    double inUs = op.inUs;
    int64_t inBytes = op.inBytes;
    if (e == p && p > 0 && cfg.hostActs) {
      inUs += cfg.ops[p - 1].boundaryUs;
      inBytes += cfg.ops[p - 1].boundaryBytes;
    }
    builder.push(inUs, op.computeUs, op.outUs, inBytes, op.outBytes,
                 op.workBytes);
  }

  /// Time and bytes of the chunk pushed so far if it ended after op e.
  void endAt(int e, double &time, int64_t &bytes, double &extraCopyUs) const {
    time = builder.makespan();
    bytes = builder.transient();
    extraCopyUs = 0;
    if (e + 1 < numOp && cfg.hostActs) {
      extraCopyUs = cfg.ops[e].boundaryUs;
      builder.withExtraOut(extraCopyUs, cfg.ops[e].boundaryBytes, time, bytes);
    }
  }

  /// Chunk [p, e) from scratch, with its activation copies.
  ChunkCost evalChunk(int p, int e) {
    builder.reset();
    for (int j = p; j < e; ++j)
      pushOp(p, j);
    ChunkCost c;
    double extra = 0;
    endAt(e - 1, c.time, c.bytes, extra);
    c.computeUs = builder.computeUs();
    c.copyUs = builder.copyUs() + extra;
    return c;
  }

  /// time[q]: least total time (context switches included) of a sequence of
  /// chunks from op p to op q within one batch, each fitting memLimit and
  /// reaching minEfficiency; from[q]: where the last of them starts. Pruned
  /// at pruneBudget.
  struct SplitDp {
    bool valid = false;
    std::vector<double> time;
    std::vector<int> from;
  };

  void runSplitDp(int p, double pruneBudget, int64_t memLimit,
                  double minEfficiency, SplitDp &dp) {
    dp.valid = true;
    dp.time.assign(numOp + 1, kInf);
    dp.from.assign(numOp + 1, -1);
    dp.time[p] = 0;
    for (int r = p; r < numOp; ++r) {
      if (dp.time[r] == kInf)
        continue;
      builder.reset();
      for (int e = r; e < numOp; ++e) {
        pushOp(r, e);
        if (dp.time[r] + ctx + builder.makespan() > pruneBudget ||
            builder.transient() > memLimit)
          break; // longer chunks take at least as long and as much memory
        double time, extra;
        int64_t bytes;
        endAt(e, time, bytes, extra);
        double total = dp.time[r] + ctx + time;
        if (bytes <= memLimit && total <= pruneBudget &&
            total < dp.time[e + 1] &&
            builder.computeUs() >= minEfficiency * (ctx + time)) {
          dp.time[e + 1] = total;
          dp.from[e + 1] = r;
        }
      }
    }
  }

  void emitChunk(Emitter *emit, int k, int begin, int end, int64_t batchIndex,
                 double computeUs, double copyUs, double time,
                 int64_t transient, int64_t repeat, double offset) {
    Chunk c;
    c.stage = emit->stage;
    c.bubbleId = (*emit->bubbleIds)[k];
    c.job = cfg.job;
    c.layerBegin = begin;
    c.layerEnd = end;
    c.batch = cfg.knobs.batch;
    c.sampleBegin = batchIndex * cfg.knobs.batch;
    c.weights = cfg.knobs.weights;
    c.acts = cfg.knobs.acts;
    c.optimizer = cfg.knobs.optimizer;
    c.checkpoint = cfg.knobs.checkpoint;
    c.computeUs = computeUs;
    c.copyUs = copyUs;
    c.predictedUs = ctx + time;
    c.peakBytes = transient; // the stage's persistent bytes are added later
    c.iteration = emit->iteration;
    c.repeat = int(repeat);
    c.offsetUs = (*emit->offsetBase)[k] + offset;
    emit->chunks->push_back(c);
    emit->maxUse[k] =
        std::max(emit->maxUse[k], offset + double(repeat) * c.predictedUs);
    emit->maxTransient[k] = std::max(emit->maxTransient[k], transient);
  }

  /// Runs (and emits) the chunks of a split-DP path from op p to op q.
  void runPath(Emitter *emit, int k, const SplitDp &dp, int p, int q,
               int64_t batchIndex, double &used) {
    std::vector<int> cuts;
    for (int e = q; e != p; e = dp.from[e])
      cuts.push_back(e);
    std::reverse(cuts.begin(), cuts.end());
    int from = p;
    for (int to : cuts) {
      ChunkCost c = evalChunk(from, to);
      if (emit)
        emitChunk(emit, k, from, to, batchIndex, c.computeUs, c.copyUs, c.time,
                  c.bytes, 1, used);
      used += ctx + c.time;
      from = to;
    }
  }

  const JobConfig &cfg;
  double ctx;
  const std::vector<double> &budget;
  const std::vector<int64_t> &mem;
  const BubbleFrontier &frontier;
  int64_t persistent;
  int numOp;
  mutable ChunkBuilder builder;
};

/// Greedy periodic packing: in each bubble, whole batches back to back when
/// the cursor is at op 0, otherwise the longest run of ops from the cursor
/// that fits (never ending at a "dead" op from which no chunk fits any
/// bubble); where memory cuts that run short, the least-time split of the
/// rest of the batch into several chunks. The cursor at the start of each
/// iteration determines everything after it, so the run stops when a cursor
/// repeats.
class GreedyPacker : Packer {
public:
  GreedyPacker(const JobConfig &cfg, double ctx,
               const std::vector<double> &budget,
               const std::vector<int64_t> &mem, const BubbleFrontier &frontier,
               int64_t persistent, Policy policy)
      : Packer(cfg, ctx, budget, mem, frontier, persistent), policy(policy) {}

  SimResult run(Emitter *emit) {
    SimResult r;
    std::vector<int> seen(numOp, -1);
    std::vector<int64_t> opsAt;
    std::vector<double> filledAt;
    int cursor = 0;
    int64_t batchIndex = 0;
    std::vector<int> usable = usableBubbles();
    computeLive();
    if (!live[0])
      return r; // no batch can ever start
    for (int t = 0;; ++t) {
      if (seen[cursor] >= 0) {
        r.prefix = seen[cursor];
        r.period = t - r.prefix;
        for (int i = r.prefix; i < t; ++i) {
          r.opsPeriod += opsAt[i];
          r.filledPeriod += filledAt[i];
        }
        return r;
      }
      seen[cursor] = t;
      if (emit)
        emit->iteration = t;
      int64_t ops = 0;
      double filled = 0;
      for (int k : usable) {
        double used = 0;
        ops += packBubble(k, cursor, batchIndex, used, emit);
        filled += used;
      }
      opsAt.push_back(ops);
      filledAt.push_back(filled);
    }
  }

private:
  /// live[c]: some chunk starting at op c fits some bubble (fresh).
  void computeLive() {
    live.assign(numOp, 0);
    const double maxTime = frontier.maxTime();
    const int64_t maxBytes = frontier.maxBytes() - persistent;
    for (int c = 0; c < numOp; ++c) {
      builder.reset();
      for (int e = c; e < numOp; ++e) {
        pushOp(c, e);
        if (ctx + builder.makespan() > maxTime || builder.transient() > maxBytes)
          break;
        double time, extra;
        int64_t bytes;
        endAt(e, time, bytes, extra);
        if (frontier.fits(ctx + time, bytes + persistent)) {
          live[c] = 1;
          break;
        }
        if (!cfg.hostActs)
          break; // without activation copies longer chunks only cost more
      }
    }
  }

  /// Packs bubble k starting at `cursor`; returns the ops completed.
  int64_t packBubble(int k, int &cursor, int64_t &batchIndex, double &used,
                     Emitter *emit) {
    const double limit = budget[k];
    const int64_t memLimit = mem[k];
    int64_t ops = 0;
    for (int64_t guard = 0; guard < kMaxChunksPerBubble; ++guard) {
      // Whole batches back to back.
      if (cursor == 0 && cfg.batchTransient <= memLimit &&
          cfg.batchComputeUs >= policy.minEfficiency * (ctx + cfg.batchUs)) {
        double cost = ctx + cfg.batchUs;
        if (cost > 0 && used + cost <= limit) {
          double n = std::floor((limit - used) / cost);
          int64_t count = int64_t(std::min(n, double(kMaxChunksPerBubble)));
          while (count > 0 && used + double(count) * cost > limit)
            --count;
          if (count > 0) {
            if (emit)
              emitChunk(emit, k, 0, numOp, batchIndex, cfg.batchComputeUs,
                        cfg.batchCopyUs, cfg.batchUs, cfg.batchTransient,
                        count, used);
            used += double(count) * cost;
            batchIndex += count;
            ops += count * numOp;
          }
        }
      }
      if (cursor == 0 && policy.wholeBatchStarts)
        break;
      // The longest run of ops from the cursor that fits.
      int p = cursor;
      builder.reset();
      int best = -1;
      double bestTime = 0, bestCopy = 0, bestCompute = 0;
      int64_t bestBytes = 0;
      bool memoryLimited = false;
      for (int e = p; e < numOp; ++e) {
        pushOp(p, e);
        if (used + ctx + builder.makespan() > limit)
          break; // every longer run takes at least as long
        if (builder.transient() > memLimit) {
          memoryLimited = true; // ... and needs at least as much memory
          break;
        }
        double time, extra;
        int64_t bytes;
        endAt(e, time, bytes, extra);
        memoryLimited |= bytes > memLimit;
        if (used + ctx + time <= limit && bytes <= memLimit &&
            live[(e + 1) % numOp] &&
            builder.computeUs() >= policy.minEfficiency * (ctx + time)) {
          best = e + 1;
          bestTime = time;
          bestBytes = bytes;
          bestCompute = builder.computeUs();
          bestCopy = builder.copyUs() + extra;
        }
      }
      // Where memory cut the run short, several chunks may get further than
      // one (a split drops the buffer pair at the cut): take the farthest op
      // that the least-time split reaches.
      if (memoryLimited) {
        SplitDp local;
        SplitDp *dp = &local;
        if (p == 0) {
          // From op 0 the split depends only on the bubble: cached.
          if (zeroDps.empty())
            zeroDps.resize(budget.size());
          dp = &zeroDps[k];
          if (!dp->valid)
            runSplitDp(0, limit, memLimit, policy.minEfficiency, *dp);
        } else {
          runSplitDp(p, limit - used, memLimit, policy.minEfficiency, local);
        }
        int q = -1;
        for (int e = numOp; e > p; --e)
          if (used + dp->time[e] <= limit && live[e % numOp]) {
            q = e;
            break;
          }
        if (q > best) {
          runPath(emit, k, *dp, p, q, batchIndex, used);
          ops += q - p;
          cursor = q;
          if (cursor == numOp) {
            cursor = 0;
            ++batchIndex;
          }
          continue;
        }
      }
      if (best < 0)
        break;
      if (emit)
        emitChunk(emit, k, p, best, batchIndex, bestCompute, bestCopy,
                  bestTime, bestBytes, 1, used);
      used += ctx + bestTime;
      ops += best - p;
      cursor = best;
      if (cursor == numOp) {
        cursor = 0;
        ++batchIndex;
      }
    }
    return ops;
  }

  Policy policy;
  std::vector<char> live;
  std::vector<SplitDp> zeroDps;
};

/// Exact periodic packing for small problems. Within a bubble, any chunk
/// sequence from cursor c to cursor c' is: the least-time split from c to
/// the batch end (or to c' without wrapping), whole batches at the
/// least-time split of a batch, and the least-time split from op 0 to c'.
/// That gives the largest advance of each bubble for each (c, c'), hence of
/// each iteration; the best long-run advance from cursor 0 is the best mean
/// over closed walks of at most (cursors reachable) iterations.
/// Cost ~ bubbles x ops^3 + ops^4.
class ExactPacker : Packer {
public:
  ExactPacker(const JobConfig &cfg, double ctx,
              const std::vector<double> &budget,
              const std::vector<int64_t> &mem, const BubbleFrontier &frontier,
              int64_t persistent)
      : Packer(cfg, ctx, budget, mem, frontier, persistent) {}

  static double cost(size_t bubbles, int ops) {
    double n = ops;
    return double(bubbles) * n * n * n + n * n * n * n;
  }

  SimResult run(Emitter *emit) {
    SimResult r;
    const int n = numOp;
    usable = usableBubbles();
    const size_t nb = usable.size();
    if (nb == 0)
      return r;
    // Split DPs from every op, per bubble.
    dps.assign(nb, std::vector<SplitDp>(n));
    for (size_t i = 0; i < nb; ++i)
      for (int c = 0; c < n; ++c)
        runSplitDp(c, budget[usable[i]], mem[usable[i]], 0, dps[i][c]);
    // adv[i][c][c2]: largest advance inside bubble i from c to c2.
    adv.assign(nb, std::vector<std::vector<double>>(
                       n, std::vector<double>(n, -kInf)));
    for (size_t i = 0; i < nb; ++i) {
      double limit = budget[usable[i]];
      const SplitDp &zero = dps[i][0];
      double whole = zero.time[n];
      for (int c = 0; c < n; ++c) {
        std::vector<double> &row = adv[i][c];
        const SplitDp &dp = dps[i][c];
        row[c] = 0;
        for (int c2 = c + 1; c2 < n; ++c2)
          if (dp.time[c2] <= limit)
            row[c2] = c2 - c;
        if (!(dp.time[n] <= limit))
          continue;
        double rest = limit - dp.time[n];
        for (int c2 = 0; c2 < n; ++c2) {
          double head = c2 == 0 ? 0 : zero.time[c2];
          if (!(head <= rest))
            continue;
          int64_t m = wholeBatches(rest - head, whole);
          row[c2] = std::max(row[c2], double(n - c) + double(m) * n + c2);
        }
      }
    }
    // W[c0][c]: largest advance of one iteration; parent[c0][i][c]: the
    // cursor before bubble i on that best path.
    std::vector<std::vector<double>> W(n);
    parent.assign(n, std::vector<std::vector<int>>(nb, std::vector<int>(n, -1)));
    for (int c0 = 0; c0 < n; ++c0) {
      std::vector<double> reach(n, -kInf);
      reach[c0] = 0;
      for (size_t i = 0; i < nb; ++i) {
        std::vector<double> next(n, -kInf);
        for (int c = 0; c < n; ++c) {
          if (reach[c] == -kInf)
            continue;
          for (int c2 = 0; c2 < n; ++c2) {
            double a = adv[i][c][c2];
            if (a != -kInf && reach[c] + a > next[c2]) {
              next[c2] = reach[c] + a;
              parent[c0][i][c2] = c;
            }
          }
        }
        reach.swap(next);
      }
      W[c0] = reach;
    }
    // Cursors reachable from 0 (BFS keeps a shortest path to each).
    std::vector<int> via(n, -2), order = {0};
    via[0] = -1;
    for (size_t q = 0; q < order.size(); ++q)
      for (int v = 0; v < n; ++v)
        if (W[order[q]][v] != -kInf && via[v] == -2) {
          via[v] = order[q];
          order.push_back(v);
        }
    const int reach = int(order.size());
    // Best mean closed walk through a reachable cursor, at most `reach` long.
    double bestMean = 0;
    std::vector<int> bestWalk;
    for (int s : order) {
      std::vector<std::vector<double>> best(reach + 1,
                                            std::vector<double>(n, -kInf));
      std::vector<std::vector<int>> from(reach + 1, std::vector<int>(n, -1));
      best[0][s] = 0;
      for (int len = 1; len <= reach; ++len) {
        for (int u : order) {
          if (best[len - 1][u] == -kInf)
            continue;
          for (int v : order)
            if (W[u][v] != -kInf && best[len - 1][u] + W[u][v] > best[len][v]) {
              best[len][v] = best[len - 1][u] + W[u][v];
              from[len][v] = u;
            }
        }
        double mean = best[len][s] / len;
        if (best[len][s] != -kInf && mean > bestMean * (1 + 1e-12) + 1e-12) {
          bestMean = mean;
          bestWalk.assign(len + 1, s);
          for (int l = len, v = s; l > 0; --l) {
            v = from[l][v];
            bestWalk[l - 1] = v;
          }
        }
      }
    }
    if (bestWalk.empty())
      return r; // no progress is possible
    // Iterations: the BFS path from 0 to the walk's start, then the walk.
    std::vector<int> cursors;
    for (int v = bestWalk[0]; v != -1; v = via[v])
      cursors.push_back(v);
    std::reverse(cursors.begin(), cursors.end());
    r.prefix = int(cursors.size()) - 1;
    r.period = int(bestWalk.size()) - 1;
    cursors.insert(cursors.end(), bestWalk.begin() + 1, bestWalk.end());
    int64_t batchIndex = 0;
    for (int t = 0; t + 1 < int(cursors.size()); ++t) {
      if (emit)
        emit->iteration = t;
      double filled = 0;
      int64_t ops = iterate(cursors[t], cursors[t + 1], batchIndex, filled, emit);
      if (t >= r.prefix) {
        r.opsPeriod += ops;
        r.filledPeriod += filled;
      }
    }
    return r;
  }

private:
  static int64_t wholeBatches(double time, double whole) {
    if (!(whole > 0) || whole == kInf || !(time >= 0))
      return 0;
    double m = std::floor(time / whole);
    int64_t count = int64_t(std::min(m, double(kMaxChunksPerBubble)));
    while (count > 0 && double(count) * whole > time)
      --count;
    return count;
  }

  /// Runs one iteration from cursor a to cursor b along the best path.
  int64_t iterate(int a, int b, int64_t &batchIndex, double &filled,
                  Emitter *emit) {
    const size_t nb = usable.size();
    std::vector<int> before(nb + 1);
    before[nb] = b;
    for (size_t i = nb; i-- > 0;)
      before[i] = parent[a][i][before[i + 1]];
    int64_t ops = 0;
    for (size_t i = 0; i < nb; ++i) {
      int c = before[i], c2 = before[i + 1];
      double advance = adv[i][c][c2];
      if (advance <= 0)
        continue;
      int k = usable[i];
      double used = 0;
      const SplitDp &dp = dps[i][c], &zero = dps[i][0];
      if (c2 > c && advance == double(c2 - c)) {
        runPath(emit, k, dp, c, c2, batchIndex, used);
      } else {
        runPath(emit, k, dp, c, numOp, batchIndex, used);
        ++batchIndex;
        int64_t m = (int64_t(advance) - (numOp - c) - c2) / numOp;
        if (m > 0 && zero.from[numOp] == 0) {
          // One chunk per batch: a repeated chunk.
          ChunkCost cc = evalChunk(0, numOp);
          if (emit)
            emitChunk(emit, k, 0, numOp, batchIndex, cc.computeUs, cc.copyUs,
                      cc.time, cc.bytes, m, used);
          used += double(m) * (ctx + cc.time);
          batchIndex += m;
        } else {
          for (int64_t j = 0; j < m; ++j) {
            runPath(emit, k, zero, 0, numOp, batchIndex, used);
            ++batchIndex;
          }
        }
        if (c2 > 0)
          runPath(emit, k, zero, 0, c2, batchIndex, used);
      }
      ops += int64_t(advance);
      filled += used;
    }
    return ops;
  }

  std::vector<int> usable;
  std::vector<std::vector<SplitDp>> dps;
  std::vector<std::vector<std::vector<double>>> adv;
  std::vector<std::vector<std::vector<int>>> parent;
};

/// Per job: its validity and its knob settings.
struct JobInfo {
  std::string reason; // non-empty: cannot be planned at all
  std::vector<JobConfig> configs;
  /// Per config: the all-device one of the same batch (weights resident,
  /// activations and optimizer state on the device, no checkpointing).
  std::vector<int> allDevice;
};

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
                 const Config &config) {
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

/// A stage, validated, with its usable time and memory per bubble.
struct StageInfo {
  int index = 0; // into the input vector
  std::vector<double> budget;   // durationUs * (1 - margin)
  std::vector<int64_t> mem;     // freeBytes - reserve
  std::vector<int> bubbleIds;
  int64_t minFree = 0;          // minFreeBytes - reserve
};

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
        for (const Method &method : methods(cfg, budget, mem)) {
          SimResult r = simulate(cfg, budget, mem, total, method, nullptr);
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
      SimResult r = simulate(cfg, budget, mem, total, bestMethod, &emit);

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
  /// The packings to try for a configuration: the exact one when it has
  /// PCIe copies (where the greedy is not provably optimal) and is small
  /// enough; else the plain greedy, plus its variants with host activations.
  std::vector<Method> methods(const JobConfig &cfg,
                              const std::vector<double> &budget,
                              const std::vector<int64_t> &mem) const {
    bool copies = cfg.hostActs || cfg.batchCopyUs > 0;
    if (copies && config.exactPackingLimit > 0) {
      size_t usable = 0;
      for (size_t k = 0; k < budget.size(); ++k)
        usable += budget[k] >= config.contextSwitchUs + cfg.minOpUs &&
                  mem[k] >= cfg.minOpTransient;
      if (ExactPacker::cost(usable, int(cfg.ops.size())) <=
          double(config.exactPackingLimit))
        return {Method{true, Policy()}};
    }
    std::vector<Method> out;
    for (const Policy &p : kPolicies) {
      if (!cfg.hostActs && (p.wholeBatchStarts || p.minEfficiency > 0))
        continue;
      out.push_back(Method{false, p});
    }
    return out;
  }

  SimResult simulate(const JobConfig &cfg, const std::vector<double> &budget,
                     const std::vector<int64_t> &mem, int64_t persistent,
                     const Method &method, Emitter *emit) const {
    if (method.exact)
      return ExactPacker(cfg, config.contextSwitchUs, budget, mem, frontier,
                         persistent)
          .run(emit);
    return GreedyPacker(cfg, config.contextSwitchUs, budget, mem, frontier,
                        persistent, method.policy)
        .run(emit);
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

  BubbleFrontier frontier; // this slot's budgets, free bytes before fill

  const StageInfo &stage;
  int stageId;
  const std::vector<Job> &jobs;
  const std::vector<JobInfo> &infos;
  const Config &config;
  Plan &plan;
};

/// Why a job that was not placed fits nowhere, or "" when some stage has,
/// for some knob setting, a bubble with the time and the memory of every op
/// (a necessary condition for progress, so "" does not prove feasibility).
/// All bubbles of all stages, for the diagnostics of unplaced jobs.
struct AllBubbles {
  BubbleFrontier frontier;
  int64_t maxMinFree = std::numeric_limits<int64_t>::min();
  double maxBudget = -kInf, maxDuration = 0;
  int64_t maxMem = std::numeric_limits<int64_t>::min();

  AllBubbles(const std::vector<StageInfo> &stages, const Config &config) {
    for (const StageInfo &s : stages) {
      maxMinFree = std::max(maxMinFree, s.minFree);
      for (size_t k = 0; k < s.budget.size(); ++k) {
        frontier.add(s.budget[k], s.mem[k]);
        maxBudget = std::max(maxBudget, s.budget[k]);
        maxMem = std::max(maxMem, s.mem[k]);
      }
    }
    frontier.finish();
    maxDuration = maxBudget / (1 - config.safetyMargin);
  }
};

std::string explainNoFit(const Job &job, const JobInfo &info,
                         const AllBubbles &all, const Config &config) {
  double ctx = config.contextSwitchUs;
  if (all.frontier.empty())
    return "there are no bubbles to fill";
  const int64_t maxMinFree = all.maxMinFree, maxMem = all.maxMem;
  const double maxBudget = all.maxBudget, maxDuration = all.maxDuration;
  auto fits = [&](double time, int64_t bytes) {
    return all.frontier.fits(time, bytes);
  };

  int numOp = numOps(job);
  std::vector<double> minTime(numOp, kInf);
  std::vector<int64_t> minBytes(numOp, std::numeric_limits<int64_t>::max());
  std::vector<const JobConfig *> minTimeCfg(numOp), minBytesCfg(numOp);
  std::vector<char> placeable(numOp, 0);
  int64_t minPersistent = std::numeric_limits<int64_t>::max();
  ChunkBuilder builder;
  for (const JobConfig &cfg : info.configs) {
    minPersistent = std::min(minPersistent, cfg.persistentBytes);
    if (cfg.persistentBytes > maxMinFree)
      continue;
    bool all = true;
    for (int op = 0; op < numOp; ++op) {
      // The op alone, with the activation copies at both ends.
      const OpCost &c = cfg.ops[op];
      double inUs = c.inUs;
      int64_t inBytes = c.inBytes;
      if (op > 0 && cfg.hostActs) {
        inUs += cfg.ops[op - 1].boundaryUs;
        inBytes += cfg.ops[op - 1].boundaryBytes;
      }
      builder.reset();
      builder.push(inUs, c.computeUs, c.outUs, inBytes, c.outBytes,
                   c.workBytes);
      double time = builder.makespan();
      int64_t bytes = builder.transient();
      if (op + 1 < numOp && cfg.hostActs)
        builder.withExtraOut(c.boundaryUs, c.boundaryBytes, time, bytes);
      time += ctx;
      bytes += cfg.persistentBytes;
      if (time < minTime[op]) {
        minTime[op] = time;
        minTimeCfg[op] = &cfg;
      }
      if (bytes < minBytes[op]) {
        minBytes[op] = bytes;
        minBytesCfg[op] = &cfg;
      }
      bool ok = fits(time, bytes);
      placeable[op] = placeable[op] || ok;
      all = all && ok;
    }
    if (all)
      return "";
  }
  bool training = job.kind == JobKind::Training;
  if (info.configs.empty())
    return "no knob setting is usable";
  if (minPersistent > maxMinFree)
    return format("what it must keep on the device across bubbles (%s, "
                  "weights resident: no PCIe bandwidth to stream them) "
                  "exceeds the largest minimum free memory of any stage (%s)",
                  formatBytes(minPersistent).c_str(),
                  formatBytes(std::max<int64_t>(maxMinFree, 0)).c_str());
  for (int op = 0; op < numOp; ++op) {
    if (placeable[op])
      continue;
    bool backward = false;
    const Layer &l = job.layers[opLayer(job, op, &backward)];
    std::string name = format("layer '%s'%s", l.name.c_str(),
                              backward ? " (backward)" : "");
    std::vector<std::string> parts;
    if (minBytes[op] > maxMem)
      parts.push_back(format(
          "%s needs %s (least with %s) but the largest bubble has %s free",
          name.c_str(), formatBytes(minBytes[op]).c_str(),
          describe(minBytesCfg[op]->knobs, training).c_str(),
          formatBytes(std::max<int64_t>(maxMem, 0)).c_str()));
    if (minTime[op] > maxBudget)
      parts.push_back(format(
          "%s takes %s (fastest with %s, incl. %s context switch) but the "
          "longest bubble allows %s (%s less the %g%% margin)",
          parts.empty() ? name.c_str() : "it",
          formatUs(minTime[op]).c_str(),
          describe(minTimeCfg[op]->knobs, training).c_str(),
          formatUs(ctx).c_str(), formatUs(std::max(maxBudget, 0.0)).c_str(),
          formatUs(maxDuration).c_str(), config.safetyMargin * 100));
    if (parts.empty())
      parts.push_back(format(
          "%s needs %s and %s (at best) but no bubble has both that much time "
          "and that much free memory",
          name.c_str(), formatUs(minTime[op]).c_str(),
          formatBytes(minBytes[op]).c_str()));
    std::string s = parts[0];
    for (size_t i = 1; i < parts.size(); ++i)
      s += "; " + parts[i];
    return s;
  }
  return "no single knob setting fits every layer into some bubble";
}

} // namespace

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
