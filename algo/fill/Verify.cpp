//===- Verify.cpp - Independent check of a fill plan ----------------------===//
//
// Recomputes every chunk from the layers and its knobs with its own loops
// (it shares only the per-layer time model of Model.cpp with the planner) and
// checks time, memory, structure and the cursor/sample bookkeeping.
//
//===----------------------------------------------------------------------===//

#include "algo/fill/PlannerInternal.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

namespace pipefill::fill {
namespace {

using pipefill::format;

constexpr size_t kMaxViolations = 200;

struct Recomputed {
  double predictedUs = 0;
  int64_t transientBytes = 0;
};

/// Persistent device bytes of one job with the given knobs.
int64_t persistentOf(const Job &job, int batch, WeightPlacement w,
                     ActPlacement a, OptimizerPlacement o, bool ckpt) {
  bool training = job.kind == JobKind::Training;
  int64_t total = 0;
  int64_t maxAct = 0;
  for (const Layer &l : job.layers) {
    if (w == WeightPlacement::Resident)
      total += l.weightBytes;
    if (training && o == OptimizerPlacement::Device)
      total += l.optimizerBytes;
    if (a == ActPlacement::Device && training) {
      int64_t keep = ckpt ? l.activationBytesPerSample
                          : std::max(l.activationBytesPerSample,
                                     l.stashBytesPerSample);
      total += int64_t(batch) * keep;
    }
    if (l.activationBytesPerSample > maxAct)
      maxAct = l.activationBytesPerSample;
  }
  if (a == ActPlacement::Device)
    total += int64_t(batch) * maxAct;
  return total;
}

/// Per-op scratch of recompute(), reused from chunk to chunk.
struct RecomputeBuffers {
  std::vector<double> in, out, compute, F, E, G;
  std::vector<int64_t> inB, outB, work;
};

/// The chunk's makespan and transient bytes, recomputed from scratch.
Recomputed recompute(const Job &job, const Chunk &c, const Hardware &hw,
                     const Config &config, RecomputeBuffers &buf) {
  bool training = job.kind == JobKind::Training;
  int n = int(job.layers.size());
  int total = training ? 2 * n : n;
  int64_t b = c.batch;
  double pcieBytesPerUs = hw.pcieGBps * 1e3;
  bool streamed = c.weights == WeightPlacement::Streamed;
  bool hostActs = c.acts == ActPlacement::Host;
  bool hostOpt = training && c.optimizer == OptimizerPlacement::Host;

  std::vector<double> &in = buf.in, &out = buf.out, &compute = buf.compute;
  std::vector<int64_t> &inB = buf.inB, &outB = buf.outB, &work = buf.work;
  for (auto *v : {&in, &out, &compute})
    v->clear();
  for (auto *v : {&inB, &outB, &work})
    v->clear();
  for (int op = c.layerBegin; op < c.layerEnd; ++op) {
    bool backward = training && op >= n;
    const Layer &l = job.layers[backward ? 2 * n - 1 - op : op];
    int64_t act = b * l.activationBytesPerSample;
    int64_t bigStash = b * std::max(l.activationBytesPerSample,
                                    l.stashBytesPerSample);
    int64_t stash = c.checkpoint ? act : bigStash;
    int64_t i = 0, o = 0, w = 2 * act;
    double t;
    if (backward) {
      t = layerBackwardUs(l, c.batch, hw) + layerOptimizerUs(l, hw);
      if (c.checkpoint) {
        t += layerForwardUs(l, c.batch, hw);
        w += bigStash;
      }
      w += l.gradBytes;
      if (streamed) {
        i += l.weightBytes;
        o += l.weightBytes;
      }
      if (hostOpt) {
        i += l.optimizerBytes;
        o += l.optimizerBytes;
      }
      if (hostActs)
        i += stash;
    } else {
      t = layerForwardUs(l, c.batch, hw);
      if (streamed)
        i += l.weightBytes;
      if (training && hostActs) {
        o += stash;
        w += stash;
      }
    }
    compute.push_back(t);
    inB.push_back(i);
    outB.push_back(o);
    work.push_back(w);
  }
  // Activations between chunks live on the host: copy the input in and the
  // output out, unless the chunk starts / ends the batch.
  if (hostActs && c.layerBegin > 0) {
    int prev = c.layerBegin - 1;
    const Layer &l = job.layers[training && prev >= n ? 2 * n - 1 - prev : prev];
    inB.front() += b * l.activationBytesPerSample;
  }
  if (hostActs && c.layerEnd < total) {
    int last = c.layerEnd - 1;
    const Layer &l = job.layers[training && last >= n ? 2 * n - 1 - last : last];
    outB.back() += b * l.activationBytesPerSample;
  }
  size_t m = compute.size();
  for (size_t j = 0; j < m; ++j) {
    in.push_back(inB[j] ? double(inB[j]) / pcieBytesPerUs : 0.0);
    out.push_back(outB[j] ? double(outB[j]) / pcieBytesPerUs : 0.0);
  }
  // Double-buffered pipeline: copy-in finish F, compute finish E, copy-out
  // finish G; the in (out) buffer of op j-2 is reused by op j.
  std::vector<double> &F = buf.F, &E = buf.E, &G = buf.G;
  F.assign(m, 0);
  E.assign(m, 0);
  G.assign(m, 0);
  for (size_t j = 0; j < m; ++j) {
    double fPrev = j >= 1 ? F[j - 1] : 0, eTwoBack = j >= 2 ? E[j - 2] : 0;
    F[j] = std::max(fPrev, eTwoBack) + in[j];
    double ePrev = j >= 1 ? E[j - 1] : 0, gTwoBack = j >= 2 ? G[j - 2] : 0;
    E[j] = std::max(std::max(ePrev, F[j]), gTwoBack) + compute[j];
    double gPrev = j >= 1 ? G[j - 1] : 0;
    G[j] = std::max(gPrev, E[j]) + out[j];
  }
  Recomputed r;
  r.predictedUs = config.contextSwitchUs + std::max(E[m - 1], G[m - 1]);
  int64_t maxWork = 0, maxIn = 0, maxOut = 0;
  for (size_t j = 0; j < m; ++j) {
    maxWork = std::max(maxWork, work[j]);
    maxIn = std::max(maxIn, inB[j] + (j + 1 < m ? inB[j + 1] : 0));
    maxOut = std::max(maxOut, outB[j] + (j + 1 < m ? outB[j + 1] : 0));
  }
  r.transientBytes = maxWork + maxIn + maxOut;
  return r;
}

bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-6 * std::max(1.0, std::fabs(b));
}

/// The plan checker: one method per rule family, sharing the indexes built
/// while checking assignments and chunks.
class Checker {
public:
  Checker(const std::vector<StageBubbles> &stages, const std::vector<Job> &jobs,
          const Hardware &hw, const Config &config, const Plan &plan)
      : stages(stages), jobs(jobs), hw(hw), config(config), plan(plan) {
    for (const StageBubbles &s : stages) {
      stageById.emplace(s.stage, &s);
      std::unordered_map<int, int> &index = bubbleIndex[&s];
      for (size_t k = 0; k < s.bubbles.size(); ++k)
        index.emplace(s.bubbles[k].id, int(k)); // the first of a repeated id
    }
  }

  std::vector<Violation> run() {
    checkAssignments();
    for (size_t i = 0; i < plan.chunks.size(); ++i)
      checkChunk(i);
    sortByBubble();
    for (size_t b = 0; b < byBubble.size();) {
      size_t e = b;
      while (e < byBubble.size() && byBubble[e].stage == byBubble[b].stage &&
             byBubble[e].bubble == byBubble[b].bubble)
        ++e;
      bubbleGroups.reset(byBubble.data() + b, byBubble.data() + e);
      checkBubble({byBubble[b].stage, byBubble[b].bubble}, bubbleGroups);
      b = e;
    }
    checkTailSamples();
    for (auto &[key, ap] : assignment)
      checkCursor(key, *ap);
    checkMetrics();
    if (dropped)
      report(format("... and %zu more violations", dropped));
    return std::move(v);
  }

private:
  static constexpr double tol = 1e-6;

  struct Ref {
    int bubbleIndex;
    size_t chunk;
  };
  /// (job or tail window key, iteration) -> chunks
  /// One chunk of a bubble, by its window key and iteration (a group).
  struct BubbleEntry {
    int stage, bubble, window, iteration;
    size_t chunk;
    bool operator<(const BubbleEntry &o) const {
      return std::tie(stage, bubble, window, iteration, chunk) <
             std::tie(o.stage, o.bubble, o.window, o.iteration, o.chunk);
    }
  };
  /// A bubble's chunks by (window key, iteration), in key order, each
  /// group's chunks in plan order: spans of one sorted vector of entries
  /// rather than a map of vectors per bubble (two map lookups and a vector
  /// per chunk were a third of the check's time, in malloc and free).
  class Groups {
  public:
    class List {
    public:
      struct Iter {
        const BubbleEntry *e;
        size_t operator*() const { return e->chunk; }
        Iter &operator++() { return ++e, *this; }
        bool operator!=(const Iter &o) const { return e != o.e; }
      };
      List(const BubbleEntry *b, const BubbleEntry *e) : b(b), e(e) {}
      Iter begin() const { return {b}; }
      Iter end() const { return {e}; }
      std::vector<size_t> toVector() const {
        std::vector<size_t> out;
        for (size_t i : *this)
          out.push_back(i);
        return out;
      }

    private:
      const BubbleEntry *b, *e;
    };
    using Entry = std::pair<std::pair<int, int>, List>;

    /// The groups of entries [begin, end), replacing the previous ones
    /// (the room is kept from one bubble to the next).
    void reset(const BubbleEntry *begin, const BubbleEntry *end) {
      groups.clear();
      for (const BubbleEntry *g = begin; g != end;) {
        const BubbleEntry *h = g;
        while (h != end && h->window == g->window && h->iteration == g->iteration)
          ++h;
        groups.push_back({{g->window, g->iteration}, List(g, h)});
        g = h;
      }
    }
    auto begin() const { return groups.begin(); }
    auto end() const { return groups.end(); }
    const List *find(std::pair<int, int> key) const {
      auto it = std::lower_bound(groups.begin(), groups.end(), key,
                                 [](const Entry &g, std::pair<int, int> k) { return g.first < k; });
      return it != groups.end() && it->first == key ? &it->second : nullptr;
    }

  private:
    std::vector<Entry> groups;
  };

  void add(Violation::On on, int index, std::string s) {
    if (v.size() < kMaxViolations)
      v.push_back({on, index, std::move(s)});
    else
      ++dropped;
  }
  void report(std::string s) { add(Violation::On::Plan, -1, std::move(s)); }
  void onStage(int stage, std::string s) {
    add(Violation::On::Stage, stage, std::move(s));
  }
  void onAssignment(size_t i, std::string s) {
    add(Violation::On::Assignment, int(i), std::move(s));
  }
  void onChunk(size_t i, std::string s) {
    add(Violation::On::Chunk, int(i), std::move(s));
  }

  void sortRefs(std::vector<Ref> &refs) const {
    std::sort(refs.begin(), refs.end(), [&](const Ref &x, const Ref &y) {
      const Chunk &cx = plan.chunks[x.chunk], &cy = plan.chunks[y.chunk];
      return std::make_tuple(cx.iteration, x.bubbleIndex, cx.offsetUs) <
             std::make_tuple(cy.iteration, y.bubbleIndex, cy.offsetUs);
    });
  }

  void checkAssignments();
  void checkChunk(size_t i);
  void checkChunkTimeAndMemory(size_t i, const Job &job, const Bubble &bubble);
  void checkBubble(std::pair<int, int> key, const Groups &groups);
  /// Window key -> assignment, by key.
  using Owners = std::vector<std::pair<int, const Assignment *>>;
  void checkBubbleIterations(std::pair<int, int> key, const Groups &groups,
                             const Owners &owner, int64_t horizon);
  void checkBubbleWindows(std::pair<int, int> key, const Groups &groups);
  void checkTailSamples();
  void checkCursor(std::pair<int, int> key, const Assignment &a);
  void checkMetrics();

  const std::vector<StageBubbles> &stages;
  const std::vector<Job> &jobs;
  const Hardware &hw;
  const Config &config;
  const Plan &plan;

  std::vector<Violation> v;
  size_t dropped = 0;
  std::map<int, const StageBubbles *> stageById;
  /// Per stage: bubble id -> index of its first bubble with that id.
  std::unordered_map<const StageBubbles *, std::unordered_map<int, int>>
      bubbleIndex;
  RecomputeBuffers buffers;
  /// What recompute() depends on in a chunk.
  struct ChunkKey {
    int job, layerBegin, layerEnd, batch;
    WeightPlacement weights;
    ActPlacement acts;
    OptimizerPlacement optimizer;
    bool checkpoint;
    bool operator==(const ChunkKey &o) const {
      return std::tie(job, layerBegin, layerEnd, batch, weights, acts,
                      optimizer, checkpoint) ==
             std::tie(o.job, o.layerBegin, o.layerEnd, o.batch, o.weights,
                      o.acts, o.optimizer, o.checkpoint);
    }
  };
  /// Hash of a ChunkKey -> the chunks recomputed with it.
  std::unordered_map<uint64_t, std::vector<std::pair<ChunkKey, Recomputed>>>
      recomputed;
  std::map<std::pair<int, int>, const Assignment *> assignment;
  std::map<int, int64_t> stagePersistent;
  std::map<const Assignment *, size_t> assignmentIndex;
  std::map<std::pair<int, int>, std::vector<Ref>> byAssignment, tailsByAssignment;
  // checkBubble's buffers, kept from one bubble to the next.
  Groups bubbleGroups;
  Owners owners;
  std::vector<std::pair<double, size_t>> activeChunks;
  /// checkChunk's lookups for the previous chunk (map nodes do not move).
  struct Last {
    int stageId = 0, bubbleId = std::numeric_limits<int>::min(), job = -1, bubble = -1;
    const StageBubbles *stage = nullptr;
    const std::unordered_map<int, int> *index = nullptr;
    const Assignment *assignment = nullptr;
    std::vector<Ref> *refs = nullptr, *tailRefs = nullptr;
  } last;
  /// (stage, bubble index) -> (job, iteration) -> chunks
  std::vector<BubbleEntry> byBubble;
  /// Sorts byBubble. A compiled plan lists its chunks bubble by bubble (the
  /// IR's order), so the entries usually arrive in runs of one bubble: then
  /// each run is sorted on its own, a few entries each rather than
  /// log(all) compares per entry (1F1B 64 x 512: the sort took 43M
  /// instructions, now under 10M).
  /// The result is the same total order either way.
  void sortByBubble() {
    auto samePlace = [](const BubbleEntry &a, const BubbleEntry &b) {
      return a.stage == b.stage && a.bubble == b.bubble;
    };
    auto placeBefore = [](const BubbleEntry &a, const BubbleEntry &b) {
      return std::tie(a.stage, a.bubble) < std::tie(b.stage, b.bubble);
    };
    if (!std::is_sorted(byBubble.begin(), byBubble.end(), placeBefore)) {
      std::sort(byBubble.begin(), byBubble.end());
      return;
    }
    for (auto b = byBubble.begin(); b != byBubble.end();) {
      auto e = b;
      while (e != byBubble.end() && samePlace(*e, *b))
        ++e;
      std::sort(b, e);
      b = e;
    }
  }
  std::map<std::pair<int, int>, int64_t> tailPeriodSamples;
};

/// Assignments: one per (stage, job), consistent knobs, persistent bytes.
void Checker::checkAssignments() {
  for (size_t ai = 0; ai < plan.assignments.size(); ++ai) {
    const Assignment &a = plan.assignments[ai];
    assignmentIndex[&a] = ai;
    if (!stageById.count(a.stage)) {
      onAssignment(ai, format("is on stage %d, which has no bubbles", a.stage));
      continue;
    }
    if (a.job < 0 || a.job >= int(jobs.size()) || jobs[a.job].layers.empty()) {
      onAssignment(ai, format("names fill job #%d, which does not exist or has "
                              "no layers", a.job));
      continue;
    }
    if (!assignment.emplace(std::make_pair(a.stage, a.job), &a).second)
      onAssignment(ai, format("is a second pipefill.assignment of @%s on stage %d",
                              jobs[a.job].name.c_str(), a.stage));
    if (a.batch <= 0 || a.periodIterations < 1 || a.prefixIterations < 0)
      onAssignment(ai, format("has batch %d, prefix %d, period %d: batch and "
                              "period must be positive, prefix non-negative",
                              a.batch, a.prefixIterations, a.periodIterations));
    if (jobs[a.job].kind == JobKind::Inference &&
        (a.optimizer != OptimizerPlacement::Device || a.checkpoint))
      onAssignment(ai, format("puts the optimizer on the host or checkpoints, "
                              "but @%s is an inference job",
                              jobs[a.job].name.c_str()));
    int64_t p = persistentOf(jobs[a.job], a.batch, a.weights, a.acts,
                             a.optimizer, a.checkpoint);
    if (p != a.persistentBytes)
      onAssignment(ai, format("says persistent %lld B, but @%s at batch %d with "
                              "weights %s, acts %s keeps %lld B on the device",
                              static_cast<long long>(a.persistentBytes),
                              jobs[a.job].name.c_str(), a.batch,
                              toString(a.weights), toString(a.acts),
                              static_cast<long long>(p)));
    stagePersistent[a.stage] += p;
  }
  for (auto &[id, bytes] : stagePersistent) {
    int64_t limit = stageById[id]->minFreeBytes - config.reserveBytes;
    if (bytes > limit)
      onStage(id, format("its fill jobs keep %lld B on the device across bubbles, "
                         "more than the %lld B free all iteration",
                         static_cast<long long>(bytes),
                         static_cast<long long>(limit)));
  }
}

/// One chunk: where it is, its knobs against its assignment, and (via
/// checkChunkTimeAndMemory) its time and memory recomputed; indexes it for
/// the per-bubble and per-assignment checks.
void Checker::checkChunk(size_t i) {
  const Chunk &c = plan.chunks[i];
  auto report = [&](std::string s) { onChunk(i, std::move(s)); };
  // Chunks come bubble by bubble, mostly a job's run after another's: the
  // previous chunk's stage, bubble and assignment are looked up once.
  if (!last.stage || last.stageId != c.stage) {
    auto st = stageById.find(c.stage);
    last = Last();
    last.stageId = c.stage;
    last.stage = st == stageById.end() ? nullptr : st->second;
    last.index = last.stage ? &bubbleIndex.at(last.stage) : nullptr;
  }
  if (!last.stage) {
    report(format("is on stage %d, which has no bubbles", c.stage));
    return;
  }
  if (last.bubbleId != c.bubbleId) {
    auto it = last.index->find(c.bubbleId);
    last.bubbleId = c.bubbleId;
    last.bubble = it == last.index->end() ? -1 : it->second;
  }
  int k = last.bubble;
  if (k < 0) {
    report(format("is in bubble %d, which stage %d does not have", c.bubbleId, c.stage));
    return;
  }
  if (c.job < 0 || c.job >= int(jobs.size())) {
    report(format("names fill job #%d, which does not exist", c.job));
    return;
  }
  const Job &job = jobs[c.job];
  int total = numOps(job);
  if (c.layerBegin < 0 || c.layerEnd > total || c.layerBegin >= c.layerEnd) {
    report(format("runs layers %d to %d, but @%s has %d (ops of a batch)", c.layerBegin, c.layerEnd, job.name.c_str(), total));
    return;
  }
  if (c.batch <= 0 || c.repeat < 1) {
    report(format("has batch %d and repeat %d; both must be positive", c.batch, c.repeat));
    return;
  }
  if (c.repeat > 1 && (c.layerBegin != 0 || c.layerEnd != total))
    report(format("repeats %d times but runs layers %d to %d, not a whole batch", c.repeat, c.layerBegin, c.layerEnd));
  if (last.job != c.job) {
    auto as = assignment.find({c.stage, c.job});
    last.job = c.job;
    last.assignment = as == assignment.end() ? nullptr : as->second;
    last.refs = last.tailRefs = nullptr;
  }
  if (!last.assignment) {
    report(format("has no pipefill.assignment for @%s on stage %d", job.name.c_str(), c.stage));
    return;
  }
  const Assignment &a = *last.assignment;
  // A tail chunk: a whole batch of a smaller batch size, same placements.
  bool tail = c.batch < a.batch;
  if (tail && (c.layerBegin != 0 || c.layerEnd != total))
    report(format("runs batch %d, below its assignment's %d (a tail "
                  "chunk), but layers %d to %d are not a whole batch",
                  c.batch, a.batch, c.layerBegin, c.layerEnd));
  if ((!tail && a.batch != c.batch) || a.weights != c.weights ||
      a.acts != c.acts || a.optimizer != c.optimizer ||
      a.checkpoint != c.checkpoint)
    report(format("runs batch %d, weights %s, acts %s, unlike its pipefill.assignment (batch %d, weights %s, acts %s)", c.batch, toString(c.weights), toString(c.acts), a.batch, toString(a.weights), toString(a.acts)));
  if (c.iteration < 0 || c.iteration >= a.prefixIterations + a.periodIterations)
    report(format("is in iteration %d, outside its assignment's prefix %d + period %d", c.iteration, a.prefixIterations, a.periodIterations));
  bool needsPcie = c.weights == WeightPlacement::Streamed ||
                   c.acts == ActPlacement::Host ||
                   (job.kind == JobKind::Training &&
                    c.optimizer == OptimizerPlacement::Host);
  if (needsPcie && !(hw.pcieGBps > 0)) {
    report("copies over PCIe (weights streamed or activations on the host), but the hardware has no PCIe bandwidth");
    return;
  }
  checkChunkTimeAndMemory(i, job, last.stage->bubbles[k]);
  // Tail chunks form a window of their own after every job's window.
  int windowKey = tail ? c.job + int(jobs.size()) : c.job;
  std::vector<Ref> *&refs = tail ? last.tailRefs : last.refs;
  if (!refs)
    refs = &(tail ? tailsByAssignment : byAssignment)[{c.stage, c.job}];
  refs->push_back({k, i});
  byBubble.push_back({c.stage, k, windowKey, c.iteration, i});
}

/// A placed chunk's time and peak memory against the recomputation and its
/// bubble's limits.
void Checker::checkChunkTimeAndMemory(size_t i, const Job &job,
                                      const Bubble &bubble) {
  const Chunk &c = plan.chunks[i];
  auto report = [&](std::string s) { onChunk(i, std::move(s)); };
  // Chunks of the same ops, batch and knobs recur in every iteration and
  // bubble: each is recomputed once.
  uint64_t key = uint64_t(uint32_t(c.job));
  for (uint64_t part : {uint64_t(uint32_t(c.layerBegin)), uint64_t(uint32_t(c.layerEnd)),
                        uint64_t(uint32_t(c.batch)),
                        uint64_t(int(c.weights) | int(c.acts) << 2 |
                                 int(c.optimizer) << 4 | int(c.checkpoint) << 6)})
    key = key * 0x100000001B3ull ^ part;
  ChunkKey exact{c.job, c.layerBegin, c.layerEnd, c.batch, c.weights, c.acts,
                 c.optimizer, c.checkpoint};
  Recomputed r;
  auto [it, inserted] = recomputed.try_emplace(key);
  auto &entries = it->second;
  auto hit = std::find_if(entries.begin(), entries.end(),
                          [&](const auto &e) { return e.first == exact; });
  if (hit != entries.end()) {
    r = hit->second;
  } else {
    r = recompute(job, c, hw, config, buffers);
    entries.push_back({exact, r});
  }
  if (!close(c.predictedUs, r.predictedUs))
    report(format("says time %.6f us, but its layers, copies and the context "
                  "switch take %.6f us", c.predictedUs, r.predictedUs));
  int64_t peak = stagePersistent[c.stage] + r.transientBytes;
  if (peak != c.peakBytes)
    report(format("says mem %lld B, but the stage's persistent fill bytes "
                  "and its working set come to %lld B",
                  static_cast<long long>(c.peakBytes),
                  static_cast<long long>(peak)));
  if (peak > bubble.freeBytes - config.reserveBytes)
    report(format("needs %lld B, but its bubble has %lld B free",
                  static_cast<long long>(peak),
                  static_cast<long long>(bubble.freeBytes -
                                         config.reserveBytes)));
  double limit = bubble.durationUs * (1 - config.safetyMargin);
  double end = c.offsetUs + c.repeat * std::max(c.predictedUs, r.predictedUs);
  if (c.offsetUs < -tol || end > limit + tol)
    report(format("runs [%.3f, %.3f) us into its bubble, which allows "
                  "[0, %.3f) us (duration less the safety margin)",
                  c.offsetUs, end, limit));
}

/// Per bubble and iteration of the run: the fill chunks of every job (and
/// the tail chunks) that run then do not overlap. Iteration i of the run is
/// the listed iteration i < prefix ? i : prefix + (i - prefix) % period of
/// each assignment, so all of them repeat after max prefix + lcm(periods)
/// iterations; where that is over kMaxHorizon, the stricter check of
/// checkBubbleWindows (every job's window, over all its iterations, apart
/// from the others').
void Checker::checkBubble(std::pair<int, int> key, const Groups &groups) {
  constexpr int64_t kMaxHorizon = 4096;
  int64_t maxPrefix = 0, lcm = 1;
  bool bounded = true;
  Owners &owner = owners; // the groups come by window key
  owner.clear();
  for (auto &[jobIter, list] : groups) {
    if (!owner.empty() && owner.back().first == jobIter.first)
      continue;
    int job = jobIter.first % int(jobs.size());
    const Assignment &a = *assignment[{key.first, job}];
    owner.push_back({jobIter.first, &a});
    maxPrefix = std::max<int64_t>(maxPrefix, a.prefixIterations);
    int64_t p = std::max(1, a.periodIterations);
    int64_t g = p, h = lcm;
    while (h) {
      int64_t t = g % h;
      g = h;
      h = t;
    }
    lcm = lcm / g * p;
    if (lcm > kMaxHorizon)
      bounded = false;
  }
  if (bounded && maxPrefix + lcm <= kMaxHorizon)
    checkBubbleIterations(key, groups, owner, maxPrefix + lcm);
  else
    checkBubbleWindows(key, groups);
}

/// The exact check: every iteration of the run up to `horizon`.
void Checker::checkBubbleIterations(std::pair<int, int> key, const Groups &groups,
                                    const Owners &owner, int64_t horizon) {
  const Bubble &bubble = stageById[key.first]->bubbles[key.second];
  double limit = bubble.durationUs * (1 - config.safetyMargin);
  bool reported = false;
  std::vector<std::pair<double, size_t>> &active = activeChunks;
  for (int64_t t = 0; t < horizon && !reported; ++t) {
    active.clear();
    for (auto &[windowKey, a] : owner) {
      int64_t listed =
          t < a->prefixIterations
              ? t
              : a->prefixIterations +
                    (t - a->prefixIterations) % a->periodIterations;
      const Groups::List *list = groups.find({windowKey, int(listed)});
      if (!list)
        continue;
      for (size_t idx : *list)
        active.push_back({plan.chunks[idx].offsetUs, idx});
    }
    std::sort(active.begin(), active.end());
    double prevEnd = -1e300, total = 0;
    size_t prev = 0;
    for (auto &[offset, idx] : active) {
      const Chunk &c = plan.chunks[idx];
      if (offset < prevEnd - tol) {
        if (plan.chunks[prev].job == c.job &&
            (plan.chunks[prev].batch < c.batch) ==
                (c.batch < assignment[{key.first, c.job}]->batch))
          onChunk(idx, format("overlaps the previous fill chunk of its job in "
                              "bubble %d, iteration %lld",
                              bubble.id, static_cast<long long>(t)));
        else
          onStage(key.first,
                  format("bubble %d: the fill chunks of different jobs "
                         "overlap in time in iteration %lld",
                         bubble.id, static_cast<long long>(t)));
        reported = true;
      }
      if (offset + c.repeat * c.predictedUs > prevEnd) {
        prevEnd = offset + c.repeat * c.predictedUs;
        prev = idx;
      }
      total += c.repeat * c.predictedUs;
    }
    if (!reported && total > limit + tol) {
      onStage(key.first, format("bubble %d: its fill chunks take %.3f us in "
                                "iteration %lld, more than the %.3f us it "
                                "allows",
                                bubble.id, total, static_cast<long long>(t),
                                limit));
      reported = true;
    }
  }
}

/// The stricter check past the horizon: each job's window over all its
/// iterations, apart from the other jobs' windows.
void Checker::checkBubbleWindows(std::pair<int, int> key, const Groups &groups) {
  const Bubble &bubble = stageById[key.first]->bubbles[key.second];
  double limit = bubble.durationUs * (1 - config.safetyMargin);
  std::map<int, std::pair<double, double>> span; // job -> [start, end)
  std::map<int, double> maxTotal;                 // job -> max sum of time
  for (auto &[jobIter, list] : groups) {
    std::vector<size_t> sorted = list.toVector();
    std::sort(sorted.begin(), sorted.end(), [&](size_t x, size_t y) {
      return plan.chunks[x].offsetUs < plan.chunks[y].offsetUs;
    });
    double sum = 0, prevEnd = -1e300;
    for (size_t idx : sorted) {
      const Chunk &c = plan.chunks[idx];
      if (c.offsetUs < prevEnd - tol)
        onChunk(idx, format("overlaps the previous fill chunk of its job in "
                            "bubble %d, iteration %d",
                            bubble.id, jobIter.second));
      prevEnd = c.offsetUs + c.repeat * c.predictedUs;
      sum += c.repeat * c.predictedUs;
      auto it = span.find(jobIter.first);
      if (it == span.end())
        span[jobIter.first] = {c.offsetUs, prevEnd};
      else
        it->second = {std::min(it->second.first, c.offsetUs),
                      std::max(it->second.second, prevEnd)};
    }
    maxTotal[jobIter.first] = std::max(maxTotal[jobIter.first], sum);
  }
  std::vector<std::pair<double, double>> spans;
  double total = 0;
  for (auto &[job, s] : span)
    spans.push_back(s);
  for (auto &[job, t] : maxTotal)
    total += t;
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second - tol)
      onStage(key.first, format("bubble %d: the fill chunks of different jobs "
                                "overlap in time", bubble.id));
  if (total > limit + tol)
    onStage(key.first, format("bubble %d: its fill chunks take %.3f us, more "
                              "than the %.3f us it allows",
                              bubble.id, total, limit));
}

/// Tail chunks: samples numbered continuously along their own stream; the
/// period's tail samples count towards samplesPerIteration.
void Checker::checkTailSamples() {
  for (auto &[key, refs] : tailsByAssignment) {
    const Assignment &a = *assignment[key];
    sortRefs(refs);
    int64_t next = 0;
    for (const Ref &ref : refs) {
      const Chunk &c = plan.chunks[ref.chunk];
      if (c.sampleBegin != next) {
        onChunk(ref.chunk, format("is a tail chunk of @%s starting at sample "
                                  "%lld, but the job's previous tail ends at %lld",
                                  jobs[a.job].name.c_str(),
                                  static_cast<long long>(c.sampleBegin),
                                  static_cast<long long>(next)));
        break;
      }
      next += int64_t(c.repeat) * c.batch;
      if (c.iteration >= a.prefixIterations)
        tailPeriodSamples[key] += int64_t(c.repeat) * c.batch;
    }
  }
}

/// Cursor and sample bookkeeping of one assignment, including the period
/// loop.
void Checker::checkCursor(std::pair<int, int> key, const Assignment &a) {
  if (!byAssignment.count(key) && !tailPeriodSamples.count(key))
    return;
  std::vector<Ref> &refs = byAssignment[key];
  const Job &job = jobs[a.job];
  int total = numOps(job);
  sortRefs(refs);
  int cursor = 0;
  int64_t batchIndex = 0;
  int periodStartCursor = 0;
  int64_t periodStartBatch = -1;
  for (const Ref &ref : refs) {
    const Chunk &c = plan.chunks[ref.chunk];
    if (periodStartBatch < 0 && c.iteration >= a.prefixIterations) {
      periodStartCursor = cursor;
      periodStartBatch = batchIndex;
    }
    if (c.layerBegin != cursor || c.sampleBegin != batchIndex * c.batch) {
      onChunk(ref.chunk, format("starts at layer %d sample %lld, but the "
                                "previous fill chunks of @%s leave it at layer "
                                "%d sample %lld",
                                c.layerBegin,
                                static_cast<long long>(c.sampleBegin),
                                jobs[a.job].name.c_str(), cursor,
                                static_cast<long long>(batchIndex * c.batch)));
      return;
    }
    if (c.repeat > 1) {
      batchIndex += c.repeat;
    } else {
      cursor = c.layerEnd;
      if (cursor == total) {
        cursor = 0;
        ++batchIndex;
      }
    }
  }
  if (periodStartBatch < 0) { // no chunk in the period
    periodStartCursor = cursor;
    periodStartBatch = batchIndex;
  }
  if (cursor != periodStartCursor)
    onAssignment(assignmentIndex[&a],
                 format("has fill chunks that do not close the period (layer %d "
                        "at its start, layer %d at its end)",
                        periodStartCursor, cursor));
  int64_t batches = batchIndex - periodStartBatch;
  if (batches != a.batchesPerPeriod)
    onAssignment(assignmentIndex[&a],
                 format("says batches %lld per period, but its fill chunks "
                        "complete %lld",
                        static_cast<long long>(a.batchesPerPeriod),
                        static_cast<long long>(batches)));
  double samples =
      double(batches * a.batch + tailPeriodSamples[key]) / a.periodIterations;
  if (!close(a.samplesPerIteration, samples))
    onAssignment(assignmentIndex[&a],
                 format("says samples %g per iteration, but its fill chunks do %g",
                        a.samplesPerIteration, samples));
}

/// Plan metrics: bubble time, filled time and fraction.
void Checker::checkMetrics() {
  double bubbleUs = 0;
  for (const StageBubbles &s : stages)
    for (const Bubble &b : s.bubbles)
      bubbleUs += b.durationUs;
  double filled = 0;
  for (const Chunk &c : plan.chunks) {
    auto as = assignment.find({c.stage, c.job});
    if (as != assignment.end() && c.iteration >= as->second->prefixIterations)
      filled += c.repeat * c.predictedUs / as->second->periodIterations;
  }
  if (plan.errors.empty() && !close(plan.bubbleUs, bubbleUs))
    report(format("the plan's bubble time %g us differs from the bubbles' %g us",
                  plan.bubbleUs, bubbleUs));
  if (!close(plan.filledUs, filled))
    report(format("the plan's filled time %g us differs from its fill chunks' %g us",
                  plan.filledUs, filled));
  if (plan.filledFraction > 1 + tol || plan.filledUs > plan.bubbleUs + tol)
    report(format("the plan's filled fraction %g exceeds 1", plan.filledFraction));
}

} // namespace

std::vector<Violation> checkPlan(const std::vector<StageBubbles> &stages,
                                 const std::vector<Job> &jobs,
                                 const Hardware &hw, const Config &config,
                                 const Plan &plan) {
  return Checker(stages, jobs, hw, config, plan).run();
}

std::vector<std::string> verifyPlan(const std::vector<StageBubbles> &stages,
                                    const std::vector<Job> &jobs,
                                    const Hardware &hw, const Config &config,
                                    const Plan &plan) {
  std::vector<std::string> out;
  for (const Violation &x : checkPlan(stages, jobs, hw, config, plan)) {
    std::string where;
    if (x.on == Violation::On::Chunk) {
      const Chunk &c = plan.chunks[x.index];
      where = format("fill chunk %d (stage %d, bubble %d, @%s layers %d to %d, "
                     "iteration %d): ",
                     x.index, c.stage, c.bubbleId,
                     c.job >= 0 && c.job < int(jobs.size())
                         ? jobs[c.job].name.c_str()
                         : "?",
                     c.layerBegin, c.layerEnd, c.iteration);
    } else if (x.on == Violation::On::Assignment) {
      const Assignment &a = plan.assignments[x.index];
      where = format("assignment %d (stage %d, @%s): ", x.index, a.stage,
                     a.job >= 0 && a.job < int(jobs.size())
                         ? jobs[a.job].name.c_str()
                         : "?");
    } else if (x.on == Violation::On::Stage) {
      where = format("stage %d: ", x.index);
    }
    out.push_back(where + x.message);
  }
  return out;
}

} // namespace pipefill::fill
