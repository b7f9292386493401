//===- Verify.cpp - Independent check of a fill plan ----------------------===//
//
// Recomputes every chunk from the layers and its knobs with its own loops
// (it shares only the per-layer time model of Model.cpp with the planner) and
// checks time, memory, structure and the cursor/sample bookkeeping.
//
//===----------------------------------------------------------------------===//

#include "algo/fill/Planner.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <tuple>

namespace pipefill::fill {
namespace {

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

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

/// The chunk's makespan and transient bytes, recomputed from scratch.
Recomputed recompute(const Job &job, const Chunk &c, const Hardware &hw,
                     const Config &config) {
  bool training = job.kind == JobKind::Training;
  int n = int(job.layers.size());
  int total = training ? 2 * n : n;
  int64_t b = c.batch;
  double pcieBytesPerUs = hw.pcieGBps * 1e3;
  bool streamed = c.weights == WeightPlacement::Streamed;
  bool hostActs = c.acts == ActPlacement::Host;
  bool hostOpt = training && c.optimizer == OptimizerPlacement::Host;

  std::vector<double> in, out, compute;
  std::vector<int64_t> inB, outB, work;
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
  std::vector<double> F(m), E(m), G(m);
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

} // namespace

std::vector<std::string> verifyPlan(const std::vector<StageBubbles> &stages,
                                    const std::vector<Job> &jobs,
                                    const Hardware &hw, const Config &config,
                                    const Plan &plan) {
  std::vector<std::string> v;
  size_t dropped = 0;
  auto report = [&](std::string s) {
    if (v.size() < kMaxViolations)
      v.push_back(std::move(s));
    else
      ++dropped;
  };
  const double tol = 1e-6;

  std::map<int, const StageBubbles *> stageById;
  for (const StageBubbles &s : stages)
    stageById.emplace(s.stage, &s);
  auto findBubble = [&](const StageBubbles &s, int id) -> int {
    for (size_t k = 0; k < s.bubbles.size(); ++k)
      if (s.bubbles[k].id == id)
        return int(k);
    return -1;
  };

  // Assignments: one per (stage, job), consistent knobs, persistent bytes.
  std::map<std::pair<int, int>, const Assignment *> assignment;
  std::map<int, int64_t> stagePersistent;
  for (const Assignment &a : plan.assignments) {
    if (!stageById.count(a.stage)) {
      report(format("assignment: unknown stage %d", a.stage));
      continue;
    }
    if (a.job < 0 || a.job >= int(jobs.size()) || jobs[a.job].layers.empty()) {
      report(format("assignment on stage %d: invalid job %d", a.stage, a.job));
      continue;
    }
    if (!assignment.emplace(std::make_pair(a.stage, a.job), &a).second)
      report(format("stage %d: job %d assigned twice", a.stage, a.job));
    if (a.batch <= 0 || a.periodIterations < 1 || a.prefixIterations < 0)
      report(format("stage %d job %d: invalid batch/period/prefix", a.stage, a.job));
    if (jobs[a.job].kind == JobKind::Inference &&
        (a.optimizer != OptimizerPlacement::Device || a.checkpoint))
      report(format("stage %d job %d: training knobs on an inference job", a.stage, a.job));
    int64_t p = persistentOf(jobs[a.job], a.batch, a.weights, a.acts,
                             a.optimizer, a.checkpoint);
    if (p != a.persistentBytes)
      report(format("stage %d job %d: persistentBytes %lld, recomputed %lld",
                    a.stage, a.job, static_cast<long long>(a.persistentBytes),
                    static_cast<long long>(p)));
    stagePersistent[a.stage] += p;
  }
  for (auto &[id, bytes] : stagePersistent) {
    int64_t limit = stageById[id]->minFreeBytes - config.reserveBytes;
    if (bytes > limit)
      report(format("stage %d: %lld persistent fill bytes exceed the minimum "
                    "free memory %lld",
                    id, static_cast<long long>(bytes),
                    static_cast<long long>(limit)));
  }

  // Chunks, one by one.
  struct Ref {
    int bubbleIndex;
    size_t chunk;
  };
  std::map<std::pair<int, int>, std::vector<Ref>> byAssignment, tailsByAssignment;
  // (stage, bubble index) -> (job, iteration) -> chunks
  std::map<std::pair<int, int>, std::map<std::pair<int, int>, std::vector<size_t>>>
      byBubble;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const Chunk &c = plan.chunks[i];
    std::string where = format("chunk %zu (stage %d, bubble %d, job %d, ops "
                               "[%d, %d), iteration %d)",
                               i, c.stage, c.bubbleId, c.job, c.layerBegin,
                               c.layerEnd, c.iteration);
    auto st = stageById.find(c.stage);
    if (st == stageById.end()) {
      report(where + ": unknown stage");
      continue;
    }
    int k = findBubble(*st->second, c.bubbleId);
    if (k < 0) {
      report(where + ": no such bubble on the stage");
      continue;
    }
    if (c.job < 0 || c.job >= int(jobs.size())) {
      report(where + ": no such job");
      continue;
    }
    const Job &job = jobs[c.job];
    int total = numOps(job);
    if (c.layerBegin < 0 || c.layerEnd > total || c.layerBegin >= c.layerEnd) {
      report(where + format(": invalid op range (job has %d ops)", total));
      continue;
    }
    if (c.batch <= 0 || c.repeat < 1) {
      report(where + ": invalid batch or repeat");
      continue;
    }
    if (c.repeat > 1 && (c.layerBegin != 0 || c.layerEnd != total))
      report(where + ": repeated chunk is not a whole batch");
    auto as = assignment.find({c.stage, c.job});
    if (as == assignment.end()) {
      report(where + ": no assignment for this (stage, job)");
      continue;
    }
    const Assignment &a = *as->second;
    // A tail chunk: a whole batch of a smaller batch size, same placements.
    bool tail = c.batch < a.batch;
    if (tail && (c.layerBegin != 0 || c.layerEnd != total))
      report(where + format(": batch %d differs from the assignment's %d but "
                            "the chunk is not a whole batch (tail chunk)",
                            c.batch, a.batch));
    if ((!tail && a.batch != c.batch) || a.weights != c.weights ||
        a.acts != c.acts || a.optimizer != c.optimizer ||
        a.checkpoint != c.checkpoint)
      report(where + ": knobs differ from the assignment's");
    if (c.iteration < 0 || c.iteration >= a.prefixIterations + a.periodIterations)
      report(where + ": iteration outside the assignment's schedule");
    bool needsPcie = c.weights == WeightPlacement::Streamed ||
                     c.acts == ActPlacement::Host ||
                     (job.kind == JobKind::Training &&
                      c.optimizer == OptimizerPlacement::Host);
    if (needsPcie && !(hw.pcieGBps > 0)) {
      report(where + ": needs PCIe copies but pcieGBps is 0");
      continue;
    }
    Recomputed r = recompute(job, c, hw, config);
    if (!close(c.predictedUs, r.predictedUs))
      report(where + format(": predictedUs %.6f, recomputed %.6f", c.predictedUs,
                            r.predictedUs));
    int64_t peak = stagePersistent[c.stage] + r.transientBytes;
    if (peak != c.peakBytes)
      report(where + format(": peakBytes %lld, recomputed %lld",
                            static_cast<long long>(c.peakBytes),
                            static_cast<long long>(peak)));
    const Bubble &bubble = st->second->bubbles[k];
    if (peak > bubble.freeBytes - config.reserveBytes)
      report(where + format(": needs %lld bytes, bubble has %lld free",
                            static_cast<long long>(peak),
                            static_cast<long long>(bubble.freeBytes -
                                                   config.reserveBytes)));
    double limit = bubble.durationUs * (1 - config.safetyMargin);
    double end = c.offsetUs + c.repeat * std::max(c.predictedUs, r.predictedUs);
    if (c.offsetUs < -tol || end > limit + tol)
      report(where + format(": runs [%.3f, %.3f) us, bubble allows [0, %.3f)",
                            c.offsetUs, end, limit));
    // Tail chunks form a window of their own after every job's window.
    int windowKey = tail ? c.job + int(jobs.size()) : c.job;
    (tail ? tailsByAssignment : byAssignment)[{c.stage, c.job}].push_back({k, i});
    byBubble[{c.stage, k}][{windowKey, c.iteration}].push_back(i);
  }

  // Per bubble: chunks of one (job, iteration) do not overlap, the jobs'
  // windows do not overlap, and the per-iteration totals fit.
  for (auto &[key, groups] : byBubble) {
    const Bubble &bubble = stageById[key.first]->bubbles[key.second];
    double limit = bubble.durationUs * (1 - config.safetyMargin);
    std::map<int, std::pair<double, double>> span; // job -> [start, end)
    std::map<int, double> maxTotal;                 // job -> max sum of time
    for (auto &[jobIter, list] : groups) {
      std::vector<size_t> sorted = list;
      std::sort(sorted.begin(), sorted.end(), [&](size_t x, size_t y) {
        return plan.chunks[x].offsetUs < plan.chunks[y].offsetUs;
      });
      double sum = 0, prevEnd = -1e300;
      for (size_t idx : sorted) {
        const Chunk &c = plan.chunks[idx];
        if (c.offsetUs < prevEnd - tol)
          report(format("stage %d bubble %d job %d iteration %d: chunks overlap",
                        key.first, bubble.id, jobIter.first, jobIter.second));
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
        report(format("stage %d bubble %d: windows of different jobs overlap",
                      key.first, bubble.id));
    if (total > limit + tol)
      report(format("stage %d bubble %d: fill work %.3f us exceeds %.3f us",
                    key.first, bubble.id, total, limit));
  }

  // Tail chunks: samples numbered continuously along their own stream; the
  // period's tail samples count towards samplesPerIteration.
  std::map<std::pair<int, int>, int64_t> tailPeriodSamples;
  for (auto &[key, refs] : tailsByAssignment) {
    const Assignment &a = *assignment[key];
    std::sort(refs.begin(), refs.end(), [&](const Ref &x, const Ref &y) {
      const Chunk &cx = plan.chunks[x.chunk], &cy = plan.chunks[y.chunk];
      return std::make_tuple(cx.iteration, x.bubbleIndex, cx.offsetUs) <
             std::make_tuple(cy.iteration, y.bubbleIndex, cy.offsetUs);
    });
    int64_t next = 0;
    for (const Ref &ref : refs) {
      const Chunk &c = plan.chunks[ref.chunk];
      if (c.sampleBegin != next) {
        report(format("stage %d job %d: tail chunk %zu starts at sample %lld, "
                      "expected %lld",
                      a.stage, a.job, ref.chunk,
                      static_cast<long long>(c.sampleBegin),
                      static_cast<long long>(next)));
        break;
      }
      next += int64_t(c.repeat) * c.batch;
      if (c.iteration >= a.prefixIterations)
        tailPeriodSamples[key] += int64_t(c.repeat) * c.batch;
    }
  }

  // Cursor and sample bookkeeping per assignment, including the period loop.
  for (auto &[key, ap] : assignment) {
    if (!byAssignment.count(key) && !tailPeriodSamples.count(key))
      continue;
    std::vector<Ref> &refs = byAssignment[key];
    const Assignment &a = *ap;
    const Job &job = jobs[a.job];
    int total = numOps(job);
    std::sort(refs.begin(), refs.end(), [&](const Ref &x, const Ref &y) {
      const Chunk &cx = plan.chunks[x.chunk], &cy = plan.chunks[y.chunk];
      return std::make_tuple(cx.iteration, x.bubbleIndex, cx.offsetUs) <
             std::make_tuple(cy.iteration, y.bubbleIndex, cy.offsetUs);
    });
    int cursor = 0;
    int64_t batchIndex = 0;
    int periodStartCursor = 0;
    int64_t periodStartBatch = -1;
    bool ok = true;
    for (const Ref &ref : refs) {
      const Chunk &c = plan.chunks[ref.chunk];
      if (periodStartBatch < 0 && c.iteration >= a.prefixIterations) {
        periodStartCursor = cursor;
        periodStartBatch = batchIndex;
      }
      if (c.layerBegin != cursor || c.sampleBegin != batchIndex * c.batch) {
        report(format("stage %d job %d: chunk %zu starts at op %d sample %lld, "
                      "expected op %d sample %lld",
                      a.stage, a.job, ref.chunk, c.layerBegin,
                      static_cast<long long>(c.sampleBegin), cursor,
                      static_cast<long long>(batchIndex * c.batch)));
        ok = false;
        break;
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
    if (!ok)
      continue;
    if (periodStartBatch < 0) { // no chunk in the period
      periodStartCursor = cursor;
      periodStartBatch = batchIndex;
    }
    if (cursor != periodStartCursor)
      report(format("stage %d job %d: the period does not close (op %d at its "
                    "start, op %d at its end)",
                    a.stage, a.job, periodStartCursor, cursor));
    int64_t batches = batchIndex - periodStartBatch;
    if (batches != a.batchesPerPeriod)
      report(format("stage %d job %d: %lld batches per period, listed %lld",
                    a.stage, a.job, static_cast<long long>(batches),
                    static_cast<long long>(a.batchesPerPeriod)));
    double samples =
        double(batches * a.batch + tailPeriodSamples[key]) / a.periodIterations;
    if (!close(a.samplesPerIteration, samples))
      report(format("stage %d job %d: samplesPerIteration %g, recomputed %g",
                    a.stage, a.job, a.samplesPerIteration, samples));
  }

  // Plan metrics.
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
    report(format("plan: bubbleUs %g, recomputed %g", plan.bubbleUs, bubbleUs));
  if (!close(plan.filledUs, filled))
    report(format("plan: filledUs %g, recomputed %g", plan.filledUs, filled));
  if (plan.filledFraction > 1 + tol || plan.filledUs > plan.bubbleUs + tol)
    report(format("plan: filledFraction %g exceeds 1", plan.filledFraction));
  if (dropped)
    v.push_back(format("... and %zu more violations", dropped));
  return v;
}

} // namespace pipefill::fill
