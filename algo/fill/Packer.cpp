//===- Packer.cpp - Packing one knob setting on one stage -----------------===//
//
// Layer 2 of the planner (docs/planner.md section 3): greedily (whole
// batches back to back, else the longest run of ops that fits, split into
// several chunks where memory cuts it short; never stopping at an op no
// bubble can start), or exactly (closed-walk optimum over cursor states) for
// small settings with PCIe copies, where the greedy is not provably optimal.
// Bubbles repeat every iteration, so the cursor at an iteration start
// determines the rest: the schedule is a prefix plus a period.
//
//===----------------------------------------------------------------------===//

#include "algo/fill/PlannerInternal.h"
#include "support/Checked.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

namespace pipefill::fill::detail {
namespace {

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
    usable.reserve(budget.size());
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
    Chunk c = chunkOf(cfg, emit->stage, (*emit->bubbleIds)[k]);
    c.layerBegin = begin;
    c.layerEnd = end;
    c.sampleBegin = batchIndex * cfg.knobs.batch;
    c.computeUs = computeUs;
    c.copyUs = copyUs;
    c.predictedUs = ctx + time;
    c.peakBytes = transient; // the stage's persistent bytes are added later
    c.iteration = emit->iteration;
    c.repeat = int(repeat);
    c.offsetUs = (*emit->offsetBase)[k] + offset;
    if (emit->chunks)
      emit->chunks->push_back(c);
    emit->maxUse[k] =
        std::max(emit->maxUse[k], offset + double(repeat) * c.predictedUs);
    emit->maxTransient[k] = std::max(emit->maxTransient[k], transient);
  }

  /// Walks the chunks of a split-DP path from op p to op q, calling
  /// sink(from, to, cost, offset) for each and advancing `used`.
  template <typename Sink>
  void forEachPathChunk(const SplitDp &dp, int p, int q, double &used,
                        Sink &&sink) {
    int cuts[64];
    std::vector<int> more;
    int n = 0;
    for (int e = q; e != p; e = dp.from[e]) {
      if (n < 64)
        cuts[n++] = e;
      else
        more.push_back(e);
    }
    // Visit the cuts in path order (the reverse of how they were found).
    int from = p;
    auto visit = [&](int to) {
      ChunkCost c = evalChunk(from, to);
      sink(from, to, c, used);
      used += ctx + c.time;
      from = to;
    };
    for (size_t i = more.size(); i-- > 0;)
      visit(more[i]);
    for (int i = n; i-- > 0;)
      visit(cuts[i]);
  }

  /// Runs (and emits) the chunks of a split-DP path from op p to op q.
  void runPath(Emitter *emit, int k, const SplitDp &dp, int p, int q,
               int64_t batchIndex, double &used) {
    forEachPathChunk(dp, p, q, used,
                     [&](int from, int to, const ChunkCost &c, double offset) {
                       if (emit)
                         emitChunk(emit, k, from, to, batchIndex, c.computeUs,
                                   c.copyUs, c.time, c.bytes, 1, offset);
                     });
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
///
/// What the greedy does in a bubble depends only on the cursor, the bubble's
/// time and its memory, and no chunk needs more than memCap() bytes, so
/// bubbles of equal time with at least that much memory are one class (a
/// pipeline's bubbles fall into a few); each (class, cursor) step is packed
/// once per run and replayed from the memo (docs/planner.md section 3).
class GreedyPacker : Packer {
public:
  GreedyPacker(const JobConfig &cfg, double ctx,
               const std::vector<double> &budget,
               const std::vector<int64_t> &mem, const BubbleFrontier &frontier,
               int64_t persistent, Policy policy)
      : Packer(cfg, ctx, budget, mem, frontier, persistent), policy(policy) {}

  SimResult run(Emitter *emit) {
    SimResult r;
    // Emitting needs every bubble's index; evaluating only their times and
    // memory, so equal neighbours are one entry there.
    const std::vector<int> &usable = usableEntries(/*merge=*/!emit);
    computeLive();
    if (!live[0])
      return r; // no batch can ever start
    if (!emit && fewAlike(usable))
      return runDirect(usable);
    classify(usable);
    if (!emit) {
      // Mostly distinct bubbles: a memo would not be reused.
      if (2 * int64_t(classLimit.size()) > usableTotal)
        return runDirect(usable);
      return runByRuns(usable);
    }
    stepIndex.assign(classLimit.size() * size_t(numOp), -1);
    recordChunks = emit->chunks != nullptr;
    int64_t batchIndex = 0;
    const bool emitChunks = emit->chunks != nullptr;
    return cycleOfTurns([&](int t, int &cursor, int64_t &ops, double &filled) {
      emit->iteration = t;
      for (size_t u = 0; u < usable.size(); ++u) {
        const Step &step = stepFrom(classOf[u], cursor);
        int k = usable[u];
        if (emitChunks) {
          for (uint32_t i = step.firstChunk; i < step.endChunk; ++i) {
            const Recorded &c = recorded[i];
            emitChunk(emit, k, c.begin, c.end, batchIndex + c.batch, c.computeUs,
                      c.copyUs, c.time, c.transient, c.repeat, c.offset);
          }
        } else {
          // What emitChunk keeps per bubble: the chunks end at `used` at the
          // latest (each starts where the previous ended).
          emit->maxUse[k] = std::max(emit->maxUse[k], step.used);
          emit->maxTransient[k] =
              std::max(emit->maxTransient[k], step.maxTransient);
        }
        cursor = step.cursor;
        batchIndex += step.batches;
        ops += step.ops;
        filled += step.used;
      }
    });
  }

private:
  /// The usable bubbles (Packer::usableBubbles) in order, as entries:
  /// entry u is usableCount[u] bubbles from bubble usable[u]. With `merge`,
  /// consecutive usable bubbles of equal time and memory are one entry (a
  /// 32 x 256 pipeline's stage has ~250 bubbles in ~50 such entries), as the
  /// greedy treats them alike; without it every entry is one bubble.
  const std::vector<int> &usableEntries(bool merge) {
    std::vector<int> &usable = ws.usable;
    usable.clear();
    usableCount.clear();
    usableTotal = 0;
    const double least = ctx + cfg.minOpUs;
    uint64_t lastBits = 0;
    if (!merge) {
      for (size_t k = 0; k < budget.size(); ++k) {
        if (!(budget[k] >= least && mem[k] >= cfg.minOpTransient))
          continue;
        ++usableTotal;
        usable.push_back(int(k));
        usableCount.push_back(1);
      }
      return usable;
    }
    // By the frontier's runs of equal bubbles (budget and free bytes, so
    // equal `mem` too, which is the frontier's less the persistent bytes):
    // a run is usable or not as a whole and merges into one entry, with the
    // previous usable one where that is equal too.
    const std::vector<uint32_t> &runs = frontier.runs();
    assert(runs.size() >= 1 && runs.back() == budget.size());
    for (size_t r = 0; r + 1 < runs.size(); ++r) {
      const size_t k = runs[r];
      const int64_t length = int64_t(runs[r + 1]) - int64_t(k);
      if (!(budget[k] >= least && mem[k] >= cfg.minOpTransient))
        continue;
      usableTotal += length;
      uint64_t bits;
      std::memcpy(&bits, &budget[k], sizeof bits);
      if (!usable.empty() && bits == lastBits && mem[k] == mem[usable.back()]) {
        usableCount.back() += length;
        continue;
      }
      usable.push_back(int(k));
      usableCount.push_back(length);
      lastBits = bits;
    }
    return usable;
  }

  /// One chunk of a step, relative to the step's start.
  struct Recorded {
    int begin = 0, end = 0;
    int64_t batch = 0; // batches completed in the bubble before it
    double computeUs = 0, copyUs = 0, time = 0;
    int64_t transient = 0, repeat = 1;
    double offset = 0;
  };
  /// What packing one bubble class from one cursor does.
  struct Step {
    int cursor = 0;         // after the bubble
    int64_t ops = 0;        // ops completed
    int64_t batches = 0;    // batches completed (the batch index advance)
    double used = 0;        // bubble time used
    int64_t maxTransient = -1;
    uint32_t firstChunk = 0, endChunk = 0; // its chunks in `recorded`
    /// Its decisions (per chunk choice: whole batches taken, end of the
    /// longest run) in `trace`, and whether memory cut a run short.
    uint32_t traceBegin = 0, traceEnd = 0;
    bool memoryLimited = false;
  };

  /// The same periodic run without an emitter, where only the cursors and
  /// the ops count: consecutive bubbles of one group (classes of nearly
  /// equal time, see groupStepFrom) are a run, and a run of L bubbles is
  /// walked until its cursors repeat, the rest of it being whole turns of
  /// that cycle. filledPeriod is then summed turn by turn (equal to the
  /// bubble-by-bubble sum up to rounding; only emitting runs report it).
  SimResult runByRuns(const std::vector<int> &usable) {
    stepIndex.assign(classLimit.size() * size_t(numOp), -1);
    buildRuns(usable);
    visitToken.assign(numOp, 0);
    visitIndex.assign(numOp, 0);
    visitOps.assign(numOp, 0);
    visitFilled.assign(numOp, 0);
    return cycleOfTurns([&](int, int &cursor, int64_t &ops, double &filled) {
      for (const Run &run : runs)
        walkRun(run, cursor, ops, filled);
    });
  }

  /// Runs turns (turn t is one pass over the usable bubbles: `turn` moves
  /// the cursor and adds the turn's ops and filled time) from cursor 0 until
  /// the cursor a turn starts at repeats; the turns since its first visit are
  /// the period.
  template <typename Turn> SimResult cycleOfTurns(Turn &&turn) {
    SimResult r;
    std::vector<int> seen(numOp, -1);
    std::vector<int64_t> opsAt;
    std::vector<double> filledAt;
    int cursor = 0;
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
      int64_t ops = 0;
      double filled = 0;
      turn(t, cursor, ops, filled);
      opsAt.push_back(ops);
      filledAt.push_back(filled);
    }
  }

  /// Whether at most a quarter of the consecutive usable bubbles have times
  /// that agree in all but their last 20 bits (then classes would not pay).
  bool fewAlike(const std::vector<int> &usable) const {
    int64_t alike = usable.empty() ? 0 : usableCount[0] - 1;
    for (size_t u = 1; u < usable.size(); ++u) {
      uint64_t a, b;
      std::memcpy(&a, &budget[usable[u - 1]], sizeof a);
      std::memcpy(&b, &budget[usable[u]], sizeof b);
      alike += ((a >> 20) == (b >> 20)) + usableCount[u] - 1;
    }
    return 4 * alike <= usableTotal;
  }

  /// The same without a memo, bubble by bubble (few bubbles alike).
  SimResult runDirect(const std::vector<int> &usable) {
    const int64_t cap = memCap();
    if (zeroDps.size() < usable.size())
      zeroDps.resize(usable.size());
    for (size_t u = 0; u < usable.size(); ++u)
      zeroDps[u].valid = false;
    trace.clear();
    recorded.clear();
    keepTrace = false;
    Step step;
    return cycleOfTurns([&](int, int &cursor, int64_t &ops, double &filled) {
      for (size_t u = 0; u < usable.size(); ++u) {
        int k = usable[u];
        for (int64_t i = 0; i < usableCount[u]; ++i) {
          packBubble(budget[k], mem[k], mem[k] >= cap, zeroDps[u], cursor, step);
          cursor = step.cursor;
          ops += step.ops;
          filled += step.used;
        }
      }
    });
  }

  /// Consecutive usable bubbles of one group: `length` of them, from the
  /// first bubble of usable entry `begin`.
  struct Run {
    int group = 0;
    size_t begin = 0;
    int64_t length = 0;
  };

  /// Walks a run from `cursor`, adding its ops and used time.
  void walkRun(const Run &run, int &cursor, int64_t &ops, double &filled) {
    int64_t left = run.length;
    int64_t index = 0; // steps since the cycle detection last started
    // The class of the run's bubble `pos` (which only grows): its entry.
    size_t entry = run.begin;
    int64_t entryStart = 0;
    auto classAt = [&](int64_t pos) {
      while (entryStart + usableCount[entry] <= pos)
        entryStart += usableCount[entry++];
      return classOf[entry];
    };
    ++token;
    while (left > 0) {
      const Step *shared = groupStepFrom(run.group, cursor);
      if (!shared) {
        // Not the same for the whole group here: this bubble on its own.
        const Step &step = stepFrom(classAt(run.length - left), cursor);
        cursor = step.cursor;
        ops += step.ops;
        filled += step.used;
        --left;
        ++token;
        index = 0;
        continue;
      }
      if (visitToken[cursor] == token) {
        // The cursors cycle: skip whole turns of the cycle.
        int64_t length = index - visitIndex[cursor];
        int64_t turns = left / length;
        ops += turns * (ops - visitOps[cursor]);
        filled += double(turns) * (filled - visitFilled[cursor]);
        left -= turns * length;
        ++token; // the rest (shorter than the cycle) step by step
        index = 0;
        continue;
      }
      visitToken[cursor] = token;
      visitIndex[cursor] = index;
      visitOps[cursor] = ops;
      visitFilled[cursor] = filled;
      cursor = shared->cursor;
      ops += shared->ops;
      filled += shared->used;
      --left;
      ++index;
    }
  }

  /// The runs: consecutive usable bubbles of one group.
  void buildRuns(const std::vector<int> &usable) {
    groupSteps.assign(groupMin.size() * size_t(numOp), kUnknown);
    runs.clear();
    for (size_t u = 0; u < usable.size(); ++u) {
      int g = groupOf[classOf[u]];
      if (!runs.empty() && runs.back().group == g)
        runs.back().length += usableCount[u];
      else
        runs.push_back({g, u, usableCount[u]});
    }
  }

  /// The step of every bubble of group g from `cursor`, or null when the
  /// classes of the group may differ there. Each decision of packBubble (whole
  /// batches taken, end of the longest run) is monotone in the bubble's time
  /// for a fixed state, and its state after a decision depends only on the
  /// decisions; so when the group's shortest and longest bubbles make the
  /// same decisions (and memory never cuts a run short, where the split
  /// search decides otherwise), every bubble in between makes them too.
  const Step *groupStepFrom(int g, int cursor) {
    int &known = groupSteps[size_t(g) * numOp + cursor];
    if (known == kUnknown) {
      stepFrom(groupMin[g], cursor);
      bool same = true;
      if (groupMax[g] != groupMin[g]) {
        stepFrom(groupMax[g], cursor); // may move the steps: index them after
        const Step &low = steps[stepIndex[size_t(groupMin[g]) * numOp + cursor]];
        const Step &high = steps[stepIndex[size_t(groupMax[g]) * numOp + cursor]];
        same = !low.memoryLimited && !high.memoryLimited &&
               low.traceEnd - low.traceBegin == high.traceEnd - high.traceBegin &&
               std::equal(trace.begin() + low.traceBegin,
                          trace.begin() + low.traceEnd,
                          trace.begin() + high.traceBegin);
      }
      known = same ? kShared : kNotShared;
    }
    return known == kShared
               ? &steps[stepIndex[size_t(groupMin[g]) * numOp + cursor]]
               : nullptr;
  }

  /// No chunk of this configuration needs more transient bytes: the most
  /// work bytes plus twice the most in and out bytes of an op (activation
  /// copies at the chunk's ends included), as a chunk's transient bytes are
  /// its most work bytes plus its largest pairs of in and out buffers.
  int64_t memCap() const {
    int64_t work = 0, in = 0, out = 0;
    for (int j = 0; j < numOp; ++j) {
      const OpCost &op = cfg.ops[j];
      work = std::max(work, op.workBytes);
      in = std::max(in, op.inBytes + (j > 0 ? cfg.ops[j - 1].boundaryBytes : 0));
      out = std::max(out, op.outBytes + op.boundaryBytes);
    }
    return std::max({work + 2 * in + 2 * out, cfg.batchTransient,
                     cfg.minOpTransient});
  }

  /// classOf[u]: the class of usable entry u (equal time, and equal memory
  /// or both at least memCap()); classLimit / classMem: its time and memory.
  /// groupOf[c]: the group of class c: equal memory and time equal in all
  /// but the last 20 bits of the mantissa (a pipeline's simulated bubble
  /// lengths differ in their last bits); groupMin / groupMax: its classes of
  /// least and most time.
  void classify(const std::vector<int> &usable) {
    const int64_t cap = memCap();
    const int64_t kAmple = std::numeric_limits<int64_t>::max();
    // Open addressing on (time bits, memory) for classes and on (time bits
    // >> 20, memory) for groups, sized for every bubble.
    size_t size = 16;
    while (size < 2 * usable.size())
      size *= 2;
    std::vector<int> &classTable = ws.classTable, &groupTable = ws.groupTable;
    std::vector<uint64_t> &groupKey = ws.groupKey;
    std::vector<int64_t> &groupMem = ws.groupMem;
    classTable.assign(size, -1);
    groupTable.assign(size, -1);
    for (auto *v : {&classLimit})
      v->clear();
    for (auto *v : {&classMem, &classEffMem, &groupMem})
      v->clear();
    for (auto *v : {&classBits, &groupKey})
      v->clear();
    for (auto *v : {&groupOf, &groupMin, &groupMax})
      v->clear();
    steps.clear();
    recorded.clear();
    trace.clear();
    auto slotOf = [&](uint64_t bits, int64_t memory) {
      uint64_t h = (bits ^ (uint64_t(memory) * 0x9E3779B97F4A7C15ull)) *
                   0xC2B2AE3D27D4EB4Full;
      return size_t(h >> 20) & (size - 1);
    };
    classOf.resize(usable.size());
    for (size_t u = 0; u < usable.size(); ++u) {
      int k = usable[u];
      double limit = budget[k];
      int64_t memory = mem[k] >= cap ? kAmple : mem[k];
      uint64_t bits;
      std::memcpy(&bits, &limit, sizeof bits);
      size_t slot = slotOf(bits, memory);
      int c;
      while (true) {
        c = classTable[slot];
        if (c < 0 || (classBits[c] == bits && classEffMem[c] == memory))
          break;
        slot = (slot + 1) & (size - 1);
      }
      if (c < 0) {
        c = int(classLimit.size());
        classTable[slot] = c;
        classLimit.push_back(limit);
        classBits.push_back(bits);
        classMem.push_back(mem[k]);
        classEffMem.push_back(memory);
        // Its group.
        uint64_t key = bits >> 20;
        size_t gslot = slotOf(key, memory);
        int g;
        while (true) {
          g = groupTable[gslot];
          if (g < 0 || (groupKey[g] == key && groupMem[g] == memory))
            break;
          gslot = (gslot + 1) & (size - 1);
        }
        if (g < 0) {
          g = int(groupMin.size());
          groupTable[gslot] = g;
          groupKey.push_back(key);
          groupMem.push_back(memory);
          groupMin.push_back(c);
          groupMax.push_back(c);
        } else if (limit < classLimit[groupMin[g]]) {
          groupMin[g] = c;
        } else if (limit > classLimit[groupMax[g]]) {
          groupMax[g] = c;
        }
        groupOf.push_back(g);
      }
      classOf[u] = c;
    }
    if (zeroDps.size() < classLimit.size())
      zeroDps.resize(classLimit.size());
    for (size_t c = 0; c < classLimit.size(); ++c)
      zeroDps[c].valid = false;
  }

  const Step &stepFrom(int cls, int cursor) {
    int &index = stepIndex[size_t(cls) * numOp + cursor];
    if (index < 0) {
      index = int(steps.size());
      steps.emplace_back();
      packBubble(cls, cursor, steps.back());
    }
    return steps[index];
  }

  /// live[c]: some chunk starting at op c fits some bubble (fresh).
  void computeLive() {
    live.assign(numOp, 0);
    const double maxTime = frontier.maxTime();
    const int64_t maxBytes = satSub(frontier.maxBytes(), persistent); // INT64_MIN: no bubble
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

  /// Packs a bubble of class `cls` starting at `cursor` into `step`.
  void packBubble(int cls, int cursor, Step &step) {
    packBubble(classLimit[cls], classMem[cls],
               classEffMem[cls] == std::numeric_limits<int64_t>::max(),
               zeroDps[cls], cursor, step);
  }

  /// A bubble being packed: its limits, where the cursor is, and what has
  /// been packed into it so far.
  struct Fill {
    double limit;
    int64_t memLimit;
    bool ample; // at least memCap() memory
    int cursor;
    double used = 0;
    int64_t ops = 0, batches = 0, maxTransient = -1;
  };

  /// The longest single chunk from the cursor that fits (end -1: none), and
  /// whether memory, not time, cut it short.
  struct Longest {
    int end = -1;
    double time = 0, copyUs = 0, computeUs = 0;
    int64_t bytes = 0;
    bool memoryLimited = false;
  };

  /// Packs a bubble of `limit` time and `memLimit` memory (`ample`: at least
  /// memCap()) from `cursor` into `step`; zeroDp caches its split from op 0.
  /// Per chunk choice: whole batches back to back from op 0, then the
  /// longest run of ops that fits, or where memory cut that run short the
  /// least-time split that gets further.
  void packBubble(const double limit, const int64_t memLimit, bool ample,
                  SplitDp &zeroDp, int cursor, Step &step) {
    Fill f{limit, memLimit, ample, cursor};
    step.firstChunk = uint32_t(recorded.size());
    step.traceBegin = uint32_t(trace.size());
    for (int64_t guard = 0; guard < kMaxChunksPerBubble; ++guard) {
      int64_t taken = takeWholeBatches(f);
      if (keepTrace)
        trace.push_back(taken);
      if (f.cursor == 0 && (policy.wholeBatchStarts || policy.wholeBatchesOnly))
        break;
      const int p = f.cursor;
      Longest best = cfg.noCopies && policy.minEfficiency == 0
                         ? longestByPrefixSums(f)
                         : longestByBuilder(f);
      if (keepTrace)
        trace.push_back(best.end);
      if (best.memoryLimited) {
        step.memoryLimited = true;
        if (splitPastMemory(f, zeroDp, best.end))
          continue;
      }
      if (best.end < 0)
        break;
      record(f, p, best.end, best.computeUs, best.copyUs, best.time, best.bytes,
             1, f.used);
      f.used += ctx + best.time;
      advance(f, best.end);
    }
    step.cursor = f.cursor;
    step.ops = f.ops;
    step.batches = f.batches;
    step.used = f.used;
    step.maxTransient = f.maxTransient;
    step.endChunk = uint32_t(recorded.size());
    step.traceEnd = uint32_t(trace.size());
  }

  /// Notes a chunk of the bubble (kept when chunks are recorded).
  void record(Fill &f, int begin, int end, double computeUs, double copyUs,
              double time, int64_t transient, int64_t repeat, double offset) {
    f.maxTransient = std::max(f.maxTransient, transient);
    if (!recordChunks)
      return;
    Recorded c;
    c.begin = begin;
    c.end = end;
    c.batch = f.batches;
    c.computeUs = computeUs;
    c.copyUs = copyUs;
    c.time = time;
    c.transient = transient;
    c.repeat = repeat;
    c.offset = offset;
    recorded.push_back(c);
  }

  /// Moves the cursor to op `to` (numOp: the batch is done, back to op 0).
  void advance(Fill &f, int to) {
    f.ops += to - f.cursor;
    f.cursor = to;
    if (f.cursor == numOp) {
      f.cursor = 0;
      ++f.batches;
    }
  }

  /// At op 0, as many whole batches back to back as fit (where a batch is
  /// efficient enough and fits the memory); how many.
  int64_t takeWholeBatches(Fill &f) {
    if (f.cursor != 0 || cfg.batchTransient > f.memLimit ||
        !(cfg.batchComputeUs >= policy.minEfficiency * (ctx + cfg.batchUs)))
      return 0;
    double cost = ctx + cfg.batchUs;
    if (!(cost > 0 && f.used + cost <= f.limit))
      return 0;
    double n = std::floor((f.limit - f.used) / cost);
    int64_t count = int64_t(std::min(n, double(kMaxChunksPerBubble)));
    while (count > 0 && f.used + double(count) * cost > f.limit)
      --count;
    if (count <= 0)
      return 0;
    record(f, 0, numOp, cfg.batchComputeUs, cfg.batchCopyUs, cfg.batchUs,
           cfg.batchTransient, count, f.used);
    f.used += double(count) * cost;
    f.batches += count;
    f.ops += count * numOp;
    return count;
  }

  /// longest() without copies: the time of [p, e) is a prefix-sum
  /// difference (binary search), the bytes its largest working set.
  Longest longestByPrefixSums(const Fill &f) {
    Longest best;
    const int p = f.cursor;
    const std::vector<double> &pre = cfg.prefixComputeUs;
    double avail = f.limit - f.used - ctx + pre[p];
    int e = int(std::upper_bound(pre.begin() + p + 1, pre.begin() + numOp + 1,
                                 avail) -
                pre.begin()) - 1;
    int m = p;
    if (f.ample)
      m = std::max(p, e); // no op's working set exceeds the memory
    else
      while (m < e && cfg.ops[m].workBytes <= f.memLimit)
        ++m;
    best.memoryLimited = m < e;
    for (int q = m; q > p; --q) {
      if (!live[q % numOp])
        continue;
      // The sum in op order, exactly as the chunk builder adds it.
      double time = 0;
      int64_t bytes = 0;
      for (int j = p; j < q; ++j) {
        time += cfg.ops[j].computeUs;
        bytes = std::max(bytes, cfg.ops[j].workBytes);
      }
      if (f.used + ctx + time > f.limit)
        continue;
      best.end = q;
      best.time = best.computeUs = time;
      best.bytes = bytes;
      break;
    }
    return best;
  }

  /// The longest chunk from the cursor, built op by op with its copies.
  Longest longestByBuilder(const Fill &f) {
    Longest best;
    const int p = f.cursor;
    builder.reset();
    for (int e = p; e < numOp; ++e) {
      pushOp(p, e);
      if (f.used + ctx + builder.makespan() > f.limit)
        break; // every longer run takes at least as long
      if (builder.transient() > f.memLimit) {
        best.memoryLimited = true; // ... and needs at least as much memory
        break;
      }
      double time, extra;
      int64_t bytes;
      endAt(e, time, bytes, extra);
      best.memoryLimited |= bytes > f.memLimit;
      if (f.used + ctx + time <= f.limit && bytes <= f.memLimit &&
          live[(e + 1) % numOp] &&
          builder.computeUs() >= policy.minEfficiency * (ctx + time)) {
        best.end = e + 1;
        best.time = time;
        best.bytes = bytes;
        best.computeUs = builder.computeUs();
        best.copyUs = builder.copyUs() + extra;
      }
    }
    return best;
  }

  /// Where memory cut the run short, several chunks may get further than
  /// one (a split drops the buffer pair at the cut): takes the farthest op
  /// that the least-time split reaches if that is past `best`.
  bool splitPastMemory(Fill &f, SplitDp &zeroDp, int best) {
    const int p = f.cursor;
    SplitDp local;
    SplitDp *dp = &local;
    if (p == 0) {
      // From op 0 the split depends only on the bubble: cached.
      dp = &zeroDp;
      if (!dp->valid)
        runSplitDp(0, f.limit, f.memLimit, policy.minEfficiency, *dp);
    } else {
      runSplitDp(p, f.limit - f.used, f.memLimit, policy.minEfficiency, local);
    }
    int q = -1;
    for (int e = numOp; e > p; --e)
      if (f.used + dp->time[e] <= f.limit && live[e % numOp]) {
        q = e;
        break;
      }
    if (q <= best)
      return false;
    forEachPathChunk(*dp, p, q, f.used,
                     [&](int from, int to, const ChunkCost &c, double offset) {
                       record(f, from, to, c.computeUs, c.copyUs, c.time,
                              c.bytes, 1, offset);
                     });
    advance(f, q);
    return true;
  }

  /// The buffers of a run, kept per thread from one packing to the next
  /// (a stage is planned with thousands of packings).
  struct Workspace {
    std::vector<int> usable;        // per usable entry: its first bubble
    std::vector<int64_t> usableCount; // ... and how many bubbles it is
    std::vector<int> classOf;       // per usable entry
    std::vector<double> classLimit; // per class: time
    std::vector<int64_t> classMem;  // per class: memory (of its first bubble)
    std::vector<int64_t> classEffMem; // ... or int64 max when ample
    std::vector<uint64_t> classBits;  // per class: the bits of its time
    std::vector<SplitDp> zeroDps;   // per class: the split DP from op 0
    std::vector<int> stepIndex;     // per class and cursor: into steps
    std::vector<Step> steps;
    std::vector<Recorded> recorded;
    std::vector<int64_t> trace;
    std::vector<int> groupOf, groupMin, groupMax; // per class; per group
    std::vector<int> groupSteps;                  // per group and cursor
    std::vector<Run> runs;
    std::vector<uint32_t> visitToken;
    std::vector<int64_t> visitIndex, visitOps;
    std::vector<double> visitFilled;
    std::vector<int> classTable, groupTable;
    std::vector<uint64_t> groupKey;
    std::vector<int64_t> groupMem;
  };
  static Workspace &workspace() {
    static thread_local Workspace w;
    return w;
  }

  Policy policy;
  Workspace &ws = workspace();
  std::vector<char> live; // per op: a chunk can start there
  std::vector<int64_t> &usableCount = ws.usableCount;
  int64_t usableTotal = 0; // usable bubbles
  std::vector<int> &classOf = ws.classOf;
  std::vector<double> &classLimit = ws.classLimit;
  std::vector<int64_t> &classMem = ws.classMem;
  std::vector<int64_t> &classEffMem = ws.classEffMem;
  std::vector<uint64_t> &classBits = ws.classBits;
  std::vector<SplitDp> &zeroDps = ws.zeroDps;
  std::vector<int> &stepIndex = ws.stepIndex;
  std::vector<Step> &steps = ws.steps;
  bool recordChunks = false; // keep each step's chunks (emitting them)
  bool keepTrace = true;     // keep each step's decisions (groups)
  std::vector<Recorded> &recorded = ws.recorded;
  std::vector<int64_t> &trace = ws.trace;
  // Groups and runs (runByRuns).
  static constexpr int kUnknown = 0, kShared = 1, kNotShared = 2;
  std::vector<int> &groupOf = ws.groupOf, &groupMin = ws.groupMin,
                   &groupMax = ws.groupMax;
  std::vector<int> &groupSteps = ws.groupSteps;
  std::vector<Run> &runs = ws.runs;
  // Cycle detection while walking a run, per cursor.
  uint32_t token = 0;
  std::vector<uint32_t> &visitToken = ws.visitToken;
  std::vector<int64_t> &visitIndex = ws.visitIndex, &visitOps = ws.visitOps;
  std::vector<double> &visitFilled = ws.visitFilled;
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

/// Joint packing of several jobs (and their tail chunks) on one stage: the
/// state is the cursor of every member; inside a bubble each member runs the
/// least-time split from its cursor to its new cursor (wrapping through op 0
/// or not), and the time the members' partial batches leave goes to an
/// unbounded knapsack of whole batches (of the members that wrap, at their
/// least-time split) and tail chunks. Composing the bubbles gives the best
/// value of one iteration between every pair of joint states; the best
/// long-run value from all cursors at 0 is the maximum mean cycle (Karp).
/// Ops are valued at valuePerBatch / ops each, which on a closed walk (every
/// member back at its cursor, so whole batches) is exactly the value of the
/// batches completed.
class JointPacker {
public:
  JointPacker(const std::vector<JointMember> &members, double ctx,
              const std::vector<double> &budget,
              const std::vector<int64_t> &mem, const BubbleFrontier &frontier,
              int64_t persistent)
      : members(members), ctx(ctx), budget(budget), mem(mem) {
    for (const JointMember &m : members)
      packers.emplace_back(*m.cfg, ctx, budget, mem, frontier, persistent);
  }

  /// Work of a packing (joint states x per-state options x bubbles, plus
  /// the composition and Karp's algorithm), to decide whether it is run.
  static double cost(const std::vector<JointMember> &members, size_t bubbles) {
    double states = 1, options = 1, items = 0, masks = 1;
    for (const JointMember &m : members) {
      double n = double(m.cfg->ops.size());
      states *= n;
      options *= 2 * n + 1;
      items += 1 + double(m.tails.size());
      masks *= 2;
    }
    // Per bubble: the options of every state and the composition of the
    // iteration; the knapsack frontiers are counted as they are built.
    (void)items;
    (void)masks;
    return double(bubbles) * states * (options + states * states / 4) +
           states * states * states;
  }

  JointResult run(std::vector<Chunk> *out, int stage,
                  const std::vector<int> &bubbleIds) {
    JointResult r;
    if (!buildTransitions())
      return r;
    std::vector<std::vector<double>> W;
    std::vector<int> order;
    iterationValues(W, order);
    std::vector<int> states;
    int first = -1;
    if (!bestCycle(W, order, states, first))
      return r.ok = true, r;
    r.ok = true;
    r.prefix = first;
    r.period = int(states.size()) - 1 - first;
    replay(states, first, out, stage, bubbleIds, r);
    return r;
  }

private:
  /// Joint states (one cursor per member), the split DPs and tail items,
  /// and per bubble and state the best value of each reachable next state.
  /// False when there are too many states or the work budget ran out.
  bool buildTransitions() {
    const size_t m = members.size();
    const size_t nb = budget.size();
    radix.assign(m, 1);
    numStates = 1;
    for (size_t j = 0; j < m; ++j) {
      radix[j] = numStates;
      numStates *= int(members[j].cfg->ops.size());
    }
    if (numStates > kMaxStates)
      return false;
    // Split DPs from every cursor, per member and bubble.
    dps.assign(m, std::vector<std::vector<SplitDpRef>>(nb));
    for (size_t j = 0; j < m; ++j) {
      int n = int(members[j].cfg->ops.size());
      for (size_t k = 0; k < nb; ++k) {
        dps[j][k].resize(n);
        for (int c = 0; c < n; ++c)
          packers[j].splitDp(c, budget[k], mem[k], dps[j][k][c]);
      }
    }
    // Tail items: whole batches of a smaller batch size, per member.
    for (size_t j = 0; j < m; ++j)
      for (const JobConfig *t : members[j].tails)
        tails.push_back({j, t, ctx + t->batchUs, t->valuePerBatch});
    frontiers.assign(nb, std::vector<KnapFrontier>(size_t(1) << m));
    // Per bubble and state, the best value of each reachable next state.
    trans.assign(nb, std::vector<std::vector<std::pair<int, double>>>(numStates));
    for (size_t k = 0; k < nb && !aborted; ++k)
      for (int s = 0; s < numStates && !aborted; ++s)
        trans[k][s] = bubbleMoves(k, s, nullptr, -1);
    return !aborted;
  }

  /// W[s0][s]: best value of one iteration from state s0 to s, for the
  /// states reachable from state 0 (`order`, in discovery order);
  /// parent[s0][k][s]: the state before bubble k on that path.
  void iterationValues(std::vector<std::vector<double>> &W,
                       std::vector<int> &order) {
    const size_t nb = budget.size();
    W.assign(numStates, {});
    parent.assign(numStates, {});
    std::vector<char> seen(numStates, 0);
    order = {0};
    seen[0] = 1;
    for (size_t q = 0; q < order.size(); ++q) {
      int s0 = order[q];
      std::vector<double> reach(numStates, -kInf);
      reach[s0] = 0;
      parent[s0].assign(nb, std::vector<int>(numStates, -1));
      for (size_t k = 0; k < nb; ++k) {
        std::vector<double> next(numStates, -kInf);
        for (int s = 0; s < numStates; ++s) {
          if (reach[s] == -kInf)
            continue;
          for (const auto &[s2, v] : trans[k][s])
            if (reach[s] + v > next[s2]) {
              next[s2] = reach[s] + v;
              parent[s0][k][s2] = s;
            }
        }
        reach.swap(next);
      }
      W[s0] = reach;
      for (int s = 0; s < numStates; ++s)
        if (reach[s] != -kInf && !seen[s]) {
          seen[s] = 1;
          order.push_back(s);
        }
    }
  }

  /// Karp's maximum mean cycle over the iteration graph W. On success the
  /// states of the walk from state 0 through the best cycle (`states`, the
  /// cycle being [first, states.size() - 1]); false when no cycle has a
  /// positive value.
  static bool bestCycle(const std::vector<std::vector<double>> &W,
                        const std::vector<int> &order, std::vector<int> &states,
                        int &first) {
    // Karp: D[k][v] = best k-iteration walk from state 0 to v.
    const int V = int(order.size());
    std::vector<std::vector<double>> D(V + 1, std::vector<double>(V, -kInf));
    std::vector<std::vector<int>> pred(V + 1, std::vector<int>(V, -1));
    D[0][0] = 0;
    for (int len = 1; len <= V; ++len)
      for (int u = 0; u < V; ++u) {
        if (D[len - 1][u] == -kInf)
          continue;
        const std::vector<double> &row = W[order[u]];
        for (int v = 0; v < V; ++v) {
          double w = row[order[v]];
          if (w != -kInf && D[len - 1][u] + w > D[len][v]) {
            D[len][v] = D[len - 1][u] + w;
            pred[len][v] = u;
          }
        }
      }
    double lambda = -kInf;
    int critical = -1;
    for (int v = 0; v < V; ++v) {
      if (D[V][v] == -kInf)
        continue;
      double worst = kInf;
      for (int len = 0; len < V; ++len)
        if (D[len][v] != -kInf)
          worst = std::min(worst, (D[V][v] - D[len][v]) / double(V - len));
      if (worst > lambda) {
        lambda = worst;
        critical = v;
      }
    }
    if (critical < 0 || !(lambda > 1e-12))
      return false;
    // The walk to the critical state holds a best cycle: the segment
    // between two visits of one state with the best mean.
    std::vector<int> walk(V + 1);
    walk[V] = critical;
    for (int len = V; len > 0; --len)
      walk[len - 1] = pred[len][walk[len]];
    int last = -1;
    first = -1;
    double bestMean = -kInf;
    for (int i = 0; i <= V; ++i)
      for (int j = i + 1; j <= V; ++j)
        if (walk[i] == walk[j]) {
          double mean = (D[j][walk[j]] - D[i][walk[i]]) / double(j - i);
          if (mean > bestMean * (1 + 1e-12) + 1e-12 || first < 0) {
            bestMean = mean;
            first = i;
            last = j;
          }
          break;
        }
    if (first < 0 || !(bestMean > 1e-12))
      return false;
    states.resize(last + 1);
    for (int i = 0; i <= last; ++i)
      states[i] = order[walk[i]];
    return true;
  }

  /// Replays (and emits) every iteration of the prefix and the period along
  /// `states`; the period's iterations count into r.
  void replay(const std::vector<int> &states, int first, std::vector<Chunk> *out,
              int stage, const std::vector<int> &bubbleIds, JointResult &r) {
    const size_t m = members.size();
    const size_t nb = budget.size();
    const int last = int(states.size()) - 1;
    r.opsPeriod.assign(m, 0);
    r.tailSamplesPeriod.assign(m, 0);
    r.tailUsefulPeriod.assign(m, 0);
    r.tailValuePeriod.assign(m, 0);
    r.filledPeriod.assign(m, 0);
    std::vector<int64_t> batchIndex(m, 0), tailSample(m, 0);
    cursor.assign(m, 0);
    for (int t = 0; t < last; ++t) {
      int a = states[t], b = states[t + 1];
      std::vector<int> before(nb + 1);
      before[nb] = b;
      for (size_t k = nb; k-- > 0;)
        before[k] = parent[a][k][before[k + 1]];
      for (size_t k = 0; k < nb; ++k) {
        Step step;
        bubbleMoves(k, before[k], &step, before[k + 1]);
        emitStep(k, t, step, out, stage, bubbleIds, batchIndex, tailSample,
                 t >= first ? &r : nullptr);
      }
    }
    double value = 0;
    for (size_t j = 0; j < m; ++j)
      value += (double(r.opsPeriod[j] / int64_t(members[j].cfg->ops.size())) *
                    members[j].cfg->valuePerBatch +
                r.tailValuePeriod[j]) /
               r.period;
    r.value = value;
  }

  static constexpr int kMaxStates = 1024;
  static constexpr size_t kMaxFrontier = 64;

  /// Packer with its split DP exposed.
  class Member : public Packer {
  public:
    using Packer::Packer;
    void splitDp(int p, double limit, int64_t memLimit, SplitDp &dp) {
      runSplitDp(p, limit, memLimit, 0, dp);
    }
    using Packer::ChunkCost;
    using Packer::SplitDp;
    using Packer::emitChunk;
    using Packer::evalChunk;
    using Packer::runPath;
  };
  using SplitDpRef = Member::SplitDp;

  struct Tail {
    size_t member;
    const JobConfig *cfg;
    double time, value;
  };

  /// Pareto points (time, value) of the unbounded knapsack of one bubble's
  /// items, by increasing time and value, with the counts of each item.
  struct KnapFrontier {
    bool built = false;
    std::vector<int> items; // -1 - j: whole batch of member j; t >= 0: tail t
    std::vector<double> time, value;
    std::vector<std::vector<int64_t>> counts;
  };

  /// What one bubble does: per member its new cursor, whether it wraps, and
  /// the knapsack point taken.
  struct Step {
    std::vector<int> to;
    std::vector<char> wrap;
    int mask = 0;
    int point = -1;
  };

  const KnapFrontier &frontierOf(size_t k, int mask) {
    KnapFrontier &f = frontiers[k][mask];
    if (f.built)
      return f;
    f.built = true;
    std::vector<double> itemTime, itemValue;
    for (size_t j = 0; j < members.size(); ++j) {
      if (!(mask >> j & 1))
        continue;
      const SplitDpRef &zero = dps[j][k][0];
      double whole = zero.time[members[j].cfg->ops.size()];
      if (whole > 0 && whole <= budget[k]) {
        f.items.push_back(-1 - int(j));
        itemTime.push_back(whole);
        itemValue.push_back(members[j].cfg->valuePerBatch);
      }
    }
    for (size_t t = 0; t < tails.size(); ++t)
      if (tails[t].time > 0 && tails[t].time <= budget[k] &&
          tails[t].cfg->batchTransient <= mem[k]) {
        f.items.push_back(int(t));
        itemTime.push_back(tails[t].time);
        itemValue.push_back(tails[t].value);
      }
    const size_t ni = f.items.size();
    if (!exactFrontier(f, k, itemTime, itemValue))
      gridFrontier(f, k, itemTime, itemValue);
    (void)ni;
    return f;
  }

  /// Exact Pareto frontier of the knapsack, item by item; false when it
  /// grows past kMaxFrontier points (many short items).
  bool exactFrontier(KnapFrontier &f, size_t k,
                     const std::vector<double> &itemTime,
                     const std::vector<double> &itemValue) {
    const size_t ni = itemTime.size();
    f.time = {0};
    f.value = {0};
    f.counts = {std::vector<int64_t>(ni, 0)};
    struct P {
      double time, value;
      size_t from;
      int64_t count;
    };
    std::vector<P> cand;
    for (size_t i = 0; i < ni; ++i) {
      cand.clear();
      for (size_t p = 0; p < f.time.size(); ++p)
        for (int64_t c = 0;; ++c) {
          double t = f.time[p] + double(c) * itemTime[i];
          if (t > budget[k])
            break;
          cand.push_back({t, f.value[p] + double(c) * itemValue[i], p, c});
          ++work;
          if (cand.size() > 4 * kMaxFrontier)
            return false;
        }
      std::sort(cand.begin(), cand.end(), [](const P &a, const P &b) {
        return a.time < b.time || (a.time == b.time && a.value > b.value);
      });
      std::vector<double> time, value;
      std::vector<std::vector<int64_t>> counts;
      for (const P &c : cand) {
        if (!value.empty() && c.value <= value.back() * (1 + 1e-12))
          continue;
        time.push_back(c.time);
        value.push_back(c.value);
        counts.push_back(f.counts[c.from]);
        counts.back()[i] = c.count;
      }
      if (time.size() > kMaxFrontier)
        return false;
      f.time.swap(time);
      f.value.swap(value);
      f.counts.swap(counts);
    }
    return true;
  }

  /// Many short items: an unbounded knapsack over kGrid steps of the budget,
  /// each item's time rounded up to whole steps (so every point found fits;
  /// rounding loses at most one step per item taken), then its points with
  /// their exact times.
  void gridFrontier(KnapFrontier &f, size_t k,
                    const std::vector<double> &itemTime,
                    const std::vector<double> &itemValue) {
    const size_t ni = itemTime.size();
    double shortest = budget[k];
    for (double t : itemTime)
      shortest = std::min(shortest, t);
    // A step of at most 1/16 of the shortest item (so rounding up loses at
    // most 1/16 of the time taken), at least 256 and at most 4096 steps.
    const int kGrid = int(std::min(
        4096.0, std::max(256.0, std::ceil(16 * budget[k] / shortest))));
    const double step = budget[k] / kGrid;
    std::vector<int> size(ni);
    for (size_t i = 0; i < ni; ++i)
      size[i] = std::max(1, int(std::ceil(itemTime[i] / step - 1e-9)));
    work += double(kGrid) * double(ni + 4);
    std::vector<double> best(kGrid + 1, 0), time(kGrid + 1, 0);
    std::vector<int> last(kGrid + 1, -1);
    for (int g = 1; g <= kGrid; ++g) {
      best[g] = best[g - 1];
      time[g] = time[g - 1];
      last[g] = -2; // same as g - 1
      for (size_t i = 0; i < ni; ++i)
        if (size[i] <= g) {
          double v = best[g - size[i]] + itemValue[i];
          double t = time[g - size[i]] + itemTime[i];
          if (v > best[g] * (1 + 1e-12) && t <= budget[k]) {
            best[g] = v;
            time[g] = t;
            last[g] = int(i);
          }
        }
    }
    // The item counts of every step, in one pass: a step that took an item
    // has the counts of the step it came from plus that item; one that took
    // none (-2) has those of the step before. Walking back from each point
    // instead cost a step per grid step below it, O(kGrid^2) per frontier,
    // minutes on long bubbles (kGrid at its cap, thousands of points).
    std::vector<int> from(kGrid + 1, 0); // the step whose counts g has
    std::vector<int64_t> table(size_t(kGrid + 1) * ni, 0);
    for (int g = 1; g <= kGrid; ++g) {
      ++readBack;
      if (last[g] < 0) {
        from[g] = from[g - 1];
        continue;
      }
      from[g] = g;
      const int64_t *prev = &table[size_t(from[g - size[last[g]]]) * ni];
      std::copy(prev, prev + ni, &table[size_t(g) * ni]);
      ++table[size_t(g) * ni + last[g]];
    }
    f.time = {0};
    f.value = {0};
    f.counts = {std::vector<int64_t>(ni, 0)};
    std::vector<std::pair<double, int>> points;
    for (int g = 1; g <= kGrid; ++g)
      if (last[g] >= 0)
        points.push_back({time[g], g});
    std::sort(points.begin(), points.end());
    for (auto &[t, g] : points) {
      if (!(best[g] > f.value.back() * (1 + 1e-12)))
        continue;
      ++readBack;
      const int64_t *counts = &table[size_t(g) * ni];
      f.time.push_back(t);
      f.value.push_back(best[g]);
      f.counts.emplace_back(counts, counts + ni);
    }
  }

  /// The best value of every state reachable in bubble k from state s; when
  /// `step` is set, the choice that reaches `target` instead.
  std::vector<std::pair<int, double>> bubbleMoves(size_t k, int s, Step *step,
                                                  int target) {
    const size_t m = members.size();
    // Per member: (new cursor, wraps, time, value) options.
    struct Option {
      int to;
      bool wrap;
      double time, value;
    };
    std::vector<std::vector<Option>> options(m);
    for (size_t j = 0; j < m; ++j) {
      int n = int(members[j].cfg->ops.size());
      int c = (s / radix[j]) % n;
      double perOp = members[j].cfg->valuePerBatch / n;
      const SplitDpRef &dp = dps[j][k][c], &zero = dps[j][k][0];
      options[j].push_back({c, false, 0, 0});
      for (int c2 = c + 1; c2 < n; ++c2)
        if (dp.time[c2] <= budget[k])
          options[j].push_back({c2, false, dp.time[c2], perOp * (c2 - c)});
      double end = dp.time[n];
      if (!(end <= budget[k]))
        continue;
      for (int c2 = 0; c2 < n; ++c2) {
        double t = end + (c2 == 0 ? 0 : zero.time[c2]);
        if (t <= budget[k])
          options[j].push_back({c2, true, t, perOp * (n - c + c2)});
      }
    }
    std::map<int, double> best;
    std::vector<size_t> pick(m, 0);
    double bestTarget = -kInf;
    std::function<void(size_t, int, int, double, double)> rec =
        [&](size_t j, int state, int mask, double time, double value) {
          if (aborted)
            return;
          if (j == m) {
            if (step && state != target)
              return;
            const KnapFrontier &f = frontierOf(k, mask);
            if (aborted)
              return;
            double left = budget[k] - time;
            size_t p = std::upper_bound(f.time.begin(), f.time.end(), left) -
                       f.time.begin();
            if (p == 0)
              return;
            double v = value + f.value[p - 1];
            if (step) {
              if (v > bestTarget) {
                bestTarget = v;
                step->to.assign(m, 0);
                step->wrap.assign(m, 0);
                for (size_t i = 0; i < m; ++i) {
                  step->to[i] = options[i][pick[i]].to;
                  step->wrap[i] = options[i][pick[i]].wrap;
                }
                step->mask = mask;
                step->point = int(p - 1);
              }
              return;
            }
            auto it = best.find(state);
            if (it == best.end() || v > it->second)
              best[state] = v;
            return;
          }
          int n = int(members[j].cfg->ops.size());
          int c = (s / radix[j]) % n;
          for (size_t o = 0; o < options[j].size(); ++o) {
            const Option &opt = options[j][o];
            if (time + opt.time > budget[k])
              continue;
            pick[j] = o;
            rec(j + 1, state + (opt.to - c) * radix[j],
                mask | (opt.wrap ? 1 << j : 0), time + opt.time,
                value + opt.value);
          }
        };
    rec(0, s, 0, 0, 0);
    return {best.begin(), best.end()};
  }

  /// Emits one bubble's chunks: every member's partial batch, its whole
  /// batches, its head of the next batch, then the tail chunks.
  void emitStep(size_t k, int iteration, const Step &step,
                std::vector<Chunk> *out, int stage,
                const std::vector<int> &bubbleIds,
                std::vector<int64_t> &batchIndex,
                std::vector<int64_t> &tailSample, JointResult *period) {
    const KnapFrontier &f = frontierOf(k, step.mask);
    const std::vector<int64_t> &counts = f.counts[step.point];
    std::vector<double> zeros(budget.size(), 0);
    double used = 0;
    for (size_t j = 0; j < members.size(); ++j) {
      const JobConfig &cfg = *members[j].cfg;
      int n = int(cfg.ops.size());
      Member &pk = packers[j];
      Emitter emit;
      emit.chunks = out;
      emit.stage = stage;
      emit.bubbleIds = &bubbleIds;
      emit.offsetBase = &zeros;
      emit.iteration = iteration;
      emit.maxUse.assign(budget.size(), 0);
      emit.maxTransient.assign(budget.size(), -1);
      int c = cursor[j]; // the member's cursor before this bubble
      int c2 = step.to[j];
      const SplitDpRef &dp = dps[j][k][c], &zero = dps[j][k][0];
      double start = used;
      int64_t ops = 0;
      if (!step.wrap[j]) {
        if (c2 > c)
          pk.runPath(&emit, int(k), dp, c, c2, batchIndex[j], used);
        ops = c2 - c;
      } else {
        pk.runPath(&emit, int(k), dp, c, n, batchIndex[j], used);
        ++batchIndex[j];
        int64_t whole = 0;
        for (size_t i = 0; i < f.items.size(); ++i)
          if (f.items[i] == -1 - int(j))
            whole = counts[i];
        if (whole > 0 && zero.from[n] == 0) {
          Member::ChunkCost cc = pk.evalChunk(0, n);
          pk.emitChunk(&emit, int(k), 0, n, batchIndex[j], cc.computeUs,
                       cc.copyUs, cc.time, cc.bytes, whole, used);
          used += double(whole) * (ctx + cc.time);
          batchIndex[j] += whole;
        } else {
          for (int64_t w = 0; w < whole; ++w) {
            pk.runPath(&emit, int(k), zero, 0, n, batchIndex[j], used);
            ++batchIndex[j];
          }
        }
        if (c2 > 0)
          pk.runPath(&emit, int(k), zero, 0, c2, batchIndex[j], used);
        ops = (n - c) + whole * n + c2;
      }
      cursor[j] = c2;
      if (period) {
        period->opsPeriod[j] += ops;
        period->filledPeriod[j] += used - start;
      }
    }
    for (size_t i = 0; i < f.items.size(); ++i) {
      if (f.items[i] < 0 || counts[i] == 0)
        continue;
      const Tail &t = tails[f.items[i]];
      const JobConfig &cfg = *t.cfg;
      if (out) {
        out->push_back(tailChunk(cfg, stage, bubbleIds[k], tailSample[t.member],
                                 t.time, iteration, int(counts[i]), used));
      }
      tailSample[t.member] += counts[i] * cfg.knobs.batch;
      used += double(counts[i]) * t.time;
      if (period) {
        period->tailSamplesPeriod[t.member] += counts[i] * cfg.knobs.batch;
        period->tailUsefulPeriod[t.member] +=
            double(counts[i]) * cfg.usefulPerBatch;
        period->tailValuePeriod[t.member] += double(counts[i]) * t.value;
        period->filledPeriod[t.member] += double(counts[i]) * t.time;
      }
    }
  }

public:
  std::vector<int> cursor; // per member, during the replay

private:
  const std::vector<JointMember> &members;
  double ctx;
  const std::vector<double> &budget;
  const std::vector<int64_t> &mem;
  std::vector<Member> packers;
  std::vector<int> radix;
  int numStates = 1;
  std::vector<std::vector<std::vector<SplitDpRef>>> dps;
  std::vector<Tail> tails;
  std::vector<std::vector<KnapFrontier>> frontiers;
  std::vector<std::vector<std::vector<std::pair<int, double>>>> trans;
  std::vector<std::vector<std::vector<int>>> parent;
  bool aborted = false;

public:
  double work = 0; // knapsack candidates and grid steps, counted as built
  double readBack = 0; // see JointResult::readBackSteps
};

} // namespace

/// The packings to try for a configuration: the exact one when it has
/// PCIe copies (where the greedy is not provably optimal) and is small
/// enough; else the plain greedy, plus its variants with host activations.
std::vector<Method> packingMethods(const JobConfig &cfg,
                                   const std::vector<double> &budget,
                                   const std::vector<int64_t> &mem,
                                   const Config &config) {
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

double jointPackCost(const std::vector<JointMember> &members, size_t bubbles) {
  return JointPacker::cost(members, bubbles);
}

JointResult jointPack(const std::vector<JointMember> &members, double ctx,
                      const std::vector<double> &budget,
                      const std::vector<int64_t> &mem,
                      const BubbleFrontier &frontier, int64_t persistent,
                      std::vector<Chunk> *out, int stage,
                      const std::vector<int> &bubbleIds) {
  JointPacker packer(members, ctx, budget, mem, frontier, persistent);
  JointResult r = packer.run(out, stage, bubbleIds);
  r.work = JointPacker::cost(members, budget.size()) + packer.work;
  r.readBackSteps = packer.readBack;
  return r;
}

SimResult pack(const JobConfig &cfg, double ctx,
               const std::vector<double> &budget,
               const std::vector<int64_t> &mem, const BubbleFrontier &frontier,
               int64_t persistent, const Method &method, Emitter *emit) {
  if (method.exact)
    return ExactPacker(cfg, ctx, budget, mem, frontier, persistent).run(emit);
  return GreedyPacker(cfg, ctx, budget, mem, frontier, persistent,
                      method.policy)
      .run(emit);
}

} // namespace pipefill::fill::detail
