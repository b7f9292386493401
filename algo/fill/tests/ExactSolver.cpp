//===- ExactSolver.cpp - Exact reference optimum (see ExactSolver.h) ------===//

#include "algo/fill/tests/ExactSolver.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

namespace pipefill::fill::exact {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// One op, described from the model in docs/planner.md.
struct Op {
  double compute = 0;
  int64_t in = 0, out = 0, work = 0;
  int64_t handoff = 0; // activation passed to the next op
};

double roof(const Hardware &hw, double work, double bytes) {
  double memTime = bytes / (hw.hbmGBps * 1000.0);
  return hw.kernelLaunchUs + (work > memTime ? work : memTime);
}

std::vector<Op> makeOps(const Job &job, const KnobChoice &k,
                        const Hardware &hw, int64_t &persistent) {
  const bool train = job.kind == JobKind::Training;
  const int64_t b = k.batch;
  const double bd = k.batch;
  std::vector<Op> fwd, bwd;
  persistent = 0;
  int64_t largestAct = 0;
  for (const Layer &l : job.layers) {
    int64_t a = l.activationBytesPerSample;
    int64_t s = l.stashBytesPerSample > a ? l.stashBytesPerSample : a;
    int64_t kept = b * (k.checkpoint ? a : s);
    largestAct = std::max(largestAct, a);
    double f = roof(hw, bd * l.forwardUsPerSample,
                    double(l.weightBytes) + 2.0 * bd * double(a));
    Op op;
    op.compute = f;
    op.work = 2 * b * a;
    op.handoff = b * a;
    if (k.weights == WeightPlacement::Streamed)
      op.in = l.weightBytes;
    if (train && k.acts == ActPlacement::Host) {
      op.out = kept;
      op.work += kept;
    }
    fwd.push_back(op);
    if (!train)
      continue;
    Op back;
    double bw = roof(hw, bd * l.backwardUsPerSample,
                     double(l.weightBytes + l.gradBytes) + 2.0 * bd * double(a));
    double upd = 0;
    if (l.weightBytes + l.gradBytes + l.optimizerBytes > 0)
      upd = roof(hw, 0,
                 2.0 * double(l.weightBytes) + double(l.gradBytes) +
                     2.0 * double(l.optimizerBytes));
    back.compute = bw + upd + (k.checkpoint ? f : 0.0);
    back.work = 2 * b * a + l.gradBytes + (k.checkpoint ? b * s : 0);
    back.handoff = b * a;
    if (k.weights == WeightPlacement::Streamed) {
      back.in += l.weightBytes;
      back.out += l.weightBytes;
    }
    if (k.optimizer == OptimizerPlacement::Host) {
      back.in += l.optimizerBytes;
      back.out += l.optimizerBytes;
    } else {
      persistent += l.optimizerBytes;
    }
    if (k.acts == ActPlacement::Host)
      back.in += kept;
    else
      persistent += kept;
    bwd.push_back(back);
    (void)s;
  }
  for (const Layer &l : job.layers)
    if (k.weights == WeightPlacement::Resident)
      persistent += l.weightBytes;
  if (k.acts == ActPlacement::Device)
    persistent += b * largestAct;
  std::reverse(bwd.begin(), bwd.end());
  fwd.insert(fwd.end(), bwd.begin(), bwd.end());
  return fwd;
}

/// Time (excluding the context switch) and transient bytes of the chunk of
/// ops [p, e), from scratch.
void chunkCost(const std::vector<Op> &ops, int p, int e, bool hostActs,
               const Hardware &hw, double &time, int64_t &bytes) {
  const int total = int(ops.size());
  const double rate = hw.pcieGBps * 1000.0;
  int m = e - p;
  std::vector<int64_t> in(m), out(m);
  for (int j = 0; j < m; ++j) {
    in[j] = ops[p + j].in;
    out[j] = ops[p + j].out;
  }
  if (hostActs && p > 0)
    in[0] += ops[p - 1].handoff;
  if (hostActs && e < total)
    out[m - 1] += ops[e - 1].handoff;
  // Copy-in engine, compute engine and copy-out engine, two buffers each.
  double copyInDone = 0, computeDone = 0, copyOutDone = 0;
  std::vector<double> computeEnd(m), copyOutEnd(m);
  for (int j = 0; j < m; ++j) {
    double inStart = copyInDone;
    if (j >= 2)
      inStart = std::max(inStart, computeEnd[j - 2]);
    copyInDone = inStart + (in[j] ? double(in[j]) / rate : 0.0);
    double start = std::max(computeDone, copyInDone);
    if (j >= 2)
      start = std::max(start, copyOutEnd[j - 2]);
    computeDone = start + ops[p + j].compute;
    computeEnd[j] = computeDone;
    double outStart = std::max(copyOutDone, computeDone);
    copyOutDone = outStart + (out[j] ? double(out[j]) / rate : 0.0);
    copyOutEnd[j] = copyOutDone;
  }
  time = std::max(computeDone, copyOutDone);
  int64_t w = 0, pi = 0, po = 0;
  for (int j = 0; j < m; ++j) {
    w = std::max(w, ops[p + j].work);
    pi = std::max(pi, in[j] + (j + 1 < m ? in[j + 1] : 0));
    po = std::max(po, out[j] + (j + 1 < m ? out[j + 1] : 0));
  }
  bytes = w + pi + po;
}

std::vector<int> batchChoices(const Job &job, const Config &config) {
  std::vector<int> out;
  for (int b : config.batchSizes)
    if (b > 0 && b <= job.samples &&
        std::find(out.begin(), out.end(), b) == out.end())
      out.push_back(b);
  if (out.empty())
    out.push_back(int(job.samples));
  return out;
}

} // namespace

double bestOpsPerIteration(const StageBubbles &stage, const Job &job,
                           const KnobChoice &knobs, const Hardware &hw,
                           const Config &config, double *finiteHorizon,
                           int *horizon, double *maxEdge) {
  int64_t persistent = 0;
  std::vector<Op> ops = makeOps(job, knobs, hw, persistent);
  const int n = int(ops.size());
  if (persistent > stage.minFreeBytes - config.reserveBytes)
    return 0;
  const bool hostActs = knobs.acts == ActPlacement::Host;
  const double ctx = config.contextSwitchUs;

  // All chunks [p, e).
  std::vector<std::vector<double>> T(n, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int64_t>> M(n, std::vector<int64_t>(n + 1, 0));
  double cheapest = kInf;
  for (int p = 0; p < n; ++p)
    for (int e = p + 1; e <= n; ++e) {
      chunkCost(ops, p, e, hostActs, hw, T[p][e], M[p][e]);
      cheapest = std::min(cheapest, ctx + T[p][e]);
    }

  // adv[k][c][c2] = best advance inside bubble k from cursor c to c2.
  const size_t numBubbles = stage.bubbles.size();
  std::vector<std::vector<std::vector<double>>> adv(
      numBubbles, std::vector<std::vector<double>>(n, std::vector<double>(n, kNegInf)));
  for (size_t k = 0; k < numBubbles; ++k) {
    const Bubble &bubble = stage.bubbles[k];
    double budget = bubble.durationUs * (1 - config.safetyMargin);
    int64_t mem = bubble.freeBytes - config.reserveBytes - persistent;
    for (int c = 0; c < n; ++c) {
      adv[k][c][c] = 0;
      // best[a]: least time to advance by a ops from cursor c; entries are
      // only created from feasible ones, so the loop ends.
      std::vector<double> best(1, 0.0);
      for (int a = 0; a < int(best.size()) && a < 100000; ++a) {
        if (best[a] > budget)
          continue;
        if (a > 0) {
          int c2 = (c + a) % n;
          adv[k][c][c2] = std::max(adv[k][c][c2], double(a));
        }
        int q = (c + a) % n;
        for (int e = q + 1; e <= n; ++e) {
          if (M[q][e] > mem)
            continue;
          int a2 = a + (e - q);
          if (int(best.size()) <= a2)
            best.resize(a2 + 1, kInf);
          double t = best[a] + ctx + T[q][e];
          if (t < best[a2])
            best[a2] = t;
        }
      }
    }
  }
  (void)cheapest;

  // W[c][c'] = best advance over one iteration.
  std::vector<std::vector<double>> W(n, std::vector<double>(n, kNegInf));
  for (int c0 = 0; c0 < n; ++c0) {
    std::vector<double> reach(n, kNegInf); // cursor -> best advance so far
    reach[c0] = 0;
    for (size_t k = 0; k < numBubbles; ++k) {
      std::vector<double> next(n, kNegInf);
      for (int c = 0; c < n; ++c) {
        if (reach[c] == kNegInf)
          continue;
        for (int c2 = 0; c2 < n; ++c2)
          if (adv[k][c][c2] != kNegInf)
            next[c2] = std::max(next[c2], reach[c] + adv[k][c][c2]);
      }
      reach = next;
    }
    W[c0] = reach;
  }

  // Nodes reachable from cursor 0.
  std::vector<int> ids(n, -1), nodes;
  nodes.push_back(0);
  ids[0] = 0;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int v = 0; v < n; ++v)
      if (W[nodes[i]][v] != kNegInf && ids[v] < 0) {
        ids[v] = int(nodes.size());
        nodes.push_back(v);
      }
  const int r = int(nodes.size());
  // Karp: D[k][v] = best weight of a walk of exactly k edges from 0 to v.
  std::vector<std::vector<double>> D(r + 1, std::vector<double>(r, kNegInf));
  D[0][0] = 0;
  for (int k = 1; k <= r; ++k)
    for (int u = 0; u < r; ++u) {
      if (D[k - 1][u] == kNegInf)
        continue;
      for (int v = 0; v < r; ++v) {
        double w = W[nodes[u]][nodes[v]];
        if (w != kNegInf)
          D[k][v] = std::max(D[k][v], D[k - 1][u] + w);
      }
    }
  double lambda = kNegInf;
  for (int v = 0; v < r; ++v) {
    if (D[r][v] == kNegInf)
      continue;
    double worst = kInf;
    for (int k = 0; k < r; ++k)
      if (D[k][v] != kNegInf)
        worst = std::min(worst, (D[r][v] - D[k][v]) / double(r - k));
    lambda = std::max(lambda, worst);
  }
  if (finiteHorizon) {
    int steps = 4 * n;
    std::vector<double> f(n, kNegInf);
    f[0] = 0;
    double edge = 0;
    for (int u = 0; u < n; ++u)
      for (int v = 0; v < n; ++v)
        if (W[u][v] != kNegInf)
          edge = std::max(edge, W[u][v]);
    for (int s = 0; s < steps; ++s) {
      std::vector<double> g(n, kNegInf);
      for (int u = 0; u < n; ++u)
        if (f[u] != kNegInf)
          for (int v = 0; v < n; ++v)
            if (W[u][v] != kNegInf)
              g[v] = std::max(g[v], f[u] + W[u][v]);
      f = g;
    }
    *finiteHorizon = *std::max_element(f.begin(), f.end());
    *horizon = steps;
    *maxEdge = edge;
  }
  return std::max(lambda, 0.0);
}

Optimum solve(const std::vector<StageBubbles> &stages,
              const std::vector<Job> &jobs, const Hardware &hw,
              const Config &config) {
  // value[s][j]: best value of job j alone on stage s over all knobs.
  std::vector<std::vector<double>> value(stages.size(),
                                         std::vector<double>(jobs.size(), 0));
  for (size_t s = 0; s < stages.size(); ++s)
    for (size_t j = 0; j < jobs.size(); ++j) {
      const Job &job = jobs[j];
      if (job.layers.empty() || job.samples <= 0 || !(job.priority > 0))
        continue;
      const bool train = job.kind == JobKind::Training;
      double usefulPerSample = 0;
      for (const Layer &l : job.layers)
        usefulPerSample += l.forwardUsPerSample +
                           (train ? l.backwardUsPerSample : 0.0);
      const int n = train ? 2 * int(job.layers.size()) : int(job.layers.size());
      for (int b : batchChoices(job, config))
        for (int w = 0; w < 2; ++w)
          for (int a = 0; a < 2; ++a)
            for (int o = 0; o < (train ? 2 : 1); ++o)
              for (int ck = 0; ck < (train && config.allowCheckpointing ? 2 : 1);
                   ++ck) {
                KnobChoice k;
                k.batch = b;
                k.weights = w ? WeightPlacement::Streamed : WeightPlacement::Resident;
                k.acts = a ? ActPlacement::Host : ActPlacement::Device;
                k.optimizer = o ? OptimizerPlacement::Host : OptimizerPlacement::Device;
                k.checkpoint = ck;
                bool pcie = w || a || o;
                if (pcie && !(hw.pcieGBps > 0))
                  continue;
                double ops = bestOpsPerIteration(stages[s], job, k, hw, config);
                double v = ops / n * b * usefulPerSample * job.priority;
                value[s][j] = std::max(value[s][j], v);
              }
    }
  // Every assignment of at most one job to each stage.
  Optimum best;
  std::vector<int> pick(stages.size(), -1);
  const int options = int(jobs.size()) + 1;
  size_t combos = 1;
  for (size_t s = 0; s < stages.size(); ++s)
    combos *= size_t(options);
  for (size_t code = 0; code < combos; ++code) {
    size_t x = code;
    double total = 0;
    for (size_t s = 0; s < stages.size(); ++s) {
      pick[s] = int(x % options) - 1;
      x /= options;
      if (pick[s] >= 0)
        total += value[s][pick[s]];
    }
    if (total > best.value) {
      best.value = total;
      best.jobOfStage = pick;
    }
  }
  return best;
}

} // namespace pipefill::fill::exact

//===----------------------------------------------------------------------===//
// Joint optimum: several jobs per stage, tail chunks (docs/planner.md 4).
//===----------------------------------------------------------------------===//

namespace pipefill::fill::exact {
namespace {

/// One job under one knob setting, as the joint search sees it.
struct Setting {
  int job = 0;
  KnobChoice knobs;
  int n = 0;
  int64_t persistent = 0;
  double valuePerOp = 0; // priority * useful us of one op of a batch
  std::vector<std::vector<double>> T;   // chunk [p, e) time, no switch
  std::vector<std::vector<int64_t>> M;  // chunk [p, e) transient bytes
  struct Tail {
    double time = 0; // switch + whole-batch makespan
    int64_t bytes = 0;
    double value = 0;
  };
  std::vector<Tail> tails; // whole batches of smaller batch sizes
  double density = 0;      // most value per us of any chunk or tail
};

Setting makeSetting(const Job &job, int index, const KnobChoice &k,
                    const std::vector<int> &batches, const Hardware &hw,
                    const Config &config) {
  Setting s;
  s.job = index;
  s.knobs = k;
  std::vector<Op> ops = makeOps(job, k, hw, s.persistent);
  s.n = int(ops.size());
  const bool hostActs = k.acts == ActPlacement::Host;
  s.T.assign(s.n, std::vector<double>(s.n + 1, kInf));
  s.M.assign(s.n, std::vector<int64_t>(s.n + 1, 0));
  for (int p = 0; p < s.n; ++p)
    for (int e = p + 1; e <= s.n; ++e)
      chunkCost(ops, p, e, hostActs, hw, s.T[p][e], s.M[p][e]);
  double usefulPerSample = 0;
  for (const Layer &l : job.layers)
    usefulPerSample += l.forwardUsPerSample +
                       (job.kind == JobKind::Training ? l.backwardUsPerSample : 0.0);
  s.valuePerOp = job.priority * usefulPerSample * k.batch / s.n;
  for (int p = 0; p < s.n; ++p)
    for (int e = p + 1; e <= s.n; ++e)
      if (config.contextSwitchUs + s.T[p][e] > 0)
        s.density = std::max(s.density, (e - p) * s.valuePerOp /
                                            (config.contextSwitchUs + s.T[p][e]));
  if (config.tailChunks)
    for (int b : batches) {
      if (b >= k.batch)
        continue;
      KnobChoice t = k;
      t.batch = b;
      int64_t unused = 0;
      std::vector<Op> tops = makeOps(job, t, hw, unused);
      Setting::Tail tail;
      chunkCost(tops, 0, int(tops.size()), hostActs, hw, tail.time, tail.bytes);
      tail.time += config.contextSwitchUs;
      tail.value = job.priority * usefulPerSample * b;
      if (tail.time > 0)
        s.density = std::max(s.density, tail.value / tail.time);
      s.tails.push_back(tail);
    }
  return s;
}

/// best[a]: least time (switches included) to advance a setting by a ops
/// from cursor c inside one bubble, chunks within memLimit; kInf if not.
std::vector<double> advanceTimes(const Setting &s, int c, double budget,
                                 int64_t memLimit, double ctx) {
  std::vector<double> best(1, 0.0);
  for (int a = 0; a < int(best.size()) && a < 100000; ++a) {
    if (best[a] > budget)
      continue;
    int q = (c + a) % s.n;
    for (int e = q + 1; e <= s.n; ++e) {
      if (s.M[q][e] > memLimit)
        continue;
      int a2 = a + (e - q);
      double t = best[a] + ctx + s.T[q][e];
      if (t > budget)
        continue;
      if (int(best.size()) <= a2)
        best.resize(a2 + 1, kInf);
      best[a2] = std::min(best[a2], t);
    }
  }
  return best;
}

using Frontier = std::vector<std::pair<double, double>>; // (time, value)

/// Keeps the points no other point beats in both time and value.
void prune(Frontier &f) {
  std::sort(f.begin(), f.end(), [](const auto &x, const auto &y) {
    return x.first < y.first || (x.first == y.first && x.second > y.second);
  });
  Frontier out;
  for (const auto &p : f)
    if (out.empty() || p.second > out.back().second)
      out.push_back(p);
  f.swap(out);
}

using Set = std::vector<const Setting *>;
using Matrix = std::vector<std::vector<double>>;

/// The (time, value) frontier of all multisets of the set's tail chunks
/// within `budget` (unbounded knapsack: add one more copy of the item to
/// every point until nothing new fits).
Frontier tailFrontier(const Set &set, double budget, int64_t mem) {
  Frontier tails = {{0.0, 0.0}};
  for (const Setting *s : set)
    for (const Setting::Tail &t : s->tails) {
      if (t.bytes > mem || !(t.time > 0) || t.time > budget)
        continue;
      Frontier all = tails, wave = tails;
      while (!wave.empty()) {
        Frontier shifted;
        shifted.reserve(wave.size());
        for (const auto &p : wave)
          if (p.first + t.time <= budget)
            shifted.push_back({p.first + t.time, p.second + t.value});
        all.insert(all.end(), shifted.begin(), shifted.end());
        prune(all);
        // Only the points of this wave that survived go on.
        wave.clear();
        for (const auto &p : shifted)
          if (std::binary_search(all.begin(), all.end(), p))
            wave.push_back(p);
      }
      tails.swap(all);
    }
  return tails;
}

/// E[from][to]: the best value of one bubble taking the joint state (a
/// mixed-radix tuple of cursors) from `from` to `to`, tails included.
Matrix bubbleValues(const Set &set, int states, double budget, int64_t mem,
                    double ctx) {
  auto digit = [&](int state, size_t j) {
    for (size_t i = 0; i < j; ++i)
      state /= set[i]->n;
    return state % set[j]->n;
  };
  auto weight = [&](size_t j) {
    int w = 1;
    for (size_t i = 0; i < j; ++i)
      w *= set[i]->n;
    return w;
  };
  Matrix E(states, std::vector<double>(states, kNegInf));
  Frontier tails = tailFrontier(set, budget, mem);
  auto tailBest = [&](double left) {
    // Largest value with time <= left (frontier sorted by time).
    auto it = std::upper_bound(tails.begin(), tails.end(), left,
                               [](double x, const auto &p) { return x < p.first; });
    return it == tails.begin() ? kNegInf : std::prev(it)->second;
  };
  // options[j][c][end]: (time, value) frontier of job j's advances from
  // cursor c to cursor `end` inside this bubble.
  std::vector<std::vector<std::vector<Frontier>>> options(set.size());
  for (size_t j = 0; j < set.size(); ++j) {
    const Setting &s = *set[j];
    options[j].assign(s.n, std::vector<Frontier>(s.n));
    for (int c = 0; c < s.n; ++c) {
      std::vector<double> best = advanceTimes(s, c, budget, mem, ctx);
      for (int a = 0; a < int(best.size()); ++a)
        if (best[a] <= budget)
          options[j][c][(c + a) % s.n].push_back({best[a], a * s.valuePerOp});
      for (Frontier &f : options[j][c])
        prune(f);
    }
  }
  std::vector<Frontier> partial(states), next(states);
  for (int from = 0; from < states; ++from) {
    // partial[key]: frontier over the jobs so far, by their end cursors.
    std::vector<int> keys = {0}, nextKeys;
    partial[0].assign(1, {0.0, 0.0});
    for (size_t j = 0; j < set.size(); ++j) {
      int c = digit(from, j), w = weight(j);
      nextKeys.clear();
      for (int key : keys)
        for (int end = 0; end < set[j]->n; ++end) {
          const Frontier &opts = options[j][c][end];
          if (opts.empty())
            continue;
          int to = key + end * w;
          Frontier &dst = next[to];
          if (dst.empty())
            nextKeys.push_back(to);
          for (const auto &p : partial[key])
            for (const auto &o : opts)
              if (p.first + o.first <= budget)
                dst.push_back({p.first + o.first, p.second + o.second});
        }
      for (int key : keys)
        partial[key].clear();
      for (int key : nextKeys)
        prune(next[key]);
      std::swap(partial, next);
      keys.swap(nextKeys);
    }
    for (int to : keys) {
      double v = kNegInf;
      for (const auto &p : partial[to])
        v = std::max(v, p.second + tailBest(budget - p.first));
      E[from][to] = v;
      partial[to].clear();
    }
  }
  return E;
}

/// Karp's maximum mean cycle of W over the states reachable from state 0;
/// 0 when there is none with a positive mean.
double maxMeanCycle(const Matrix &W) {
  const int states = int(W.size());
  std::vector<int> ids(states, -1), nodes = {0};
  ids[0] = 0;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int v = 0; v < states; ++v)
      if (W[nodes[i]][v] != kNegInf && ids[v] < 0) {
        ids[v] = int(nodes.size());
        nodes.push_back(v);
      }
  const int r = int(nodes.size());
  Matrix D(r + 1, std::vector<double>(r, kNegInf));
  D[0][0] = 0;
  for (int len = 1; len <= r; ++len)
    for (int u = 0; u < r; ++u)
      if (D[len - 1][u] != kNegInf)
        for (int v = 0; v < r; ++v) {
          double w = W[nodes[u]][nodes[v]];
          if (w != kNegInf)
            D[len][v] = std::max(D[len][v], D[len - 1][u] + w);
        }
  double lambda = 0;
  for (int v = 0; v < r; ++v) {
    if (D[r][v] == kNegInf)
      continue;
    double worst = kInf;
    for (int len = 0; len < r; ++len)
      if (D[len][v] != kNegInf)
        worst = std::min(worst, (D[r][v] - D[len][v]) / double(r - len));
    lambda = std::max(lambda, worst);
  }
  return lambda;
}

/// Best long-run value per iteration of one stage running `settings`
/// together (each job's own cursor), with their tail chunks.
double jointValue(const StageBubbles &stage, const Set &set,
                  const Config &config) {
  const double ctx = config.contextSwitchUs;
  int64_t persistent = 0;
  for (const Setting *s : set)
    persistent += s->persistent;
  if (persistent > stage.minFreeBytes - config.reserveBytes)
    return 0;
  // Joint state: mixed-radix tuple of cursors.
  int states = 1;
  for (const Setting *s : set)
    states *= s->n;
  // Per bubble: E[k][from][to] = best value of one bubble.
  const size_t nb = stage.bubbles.size();
  std::vector<Matrix> E(nb);
  for (size_t k = 0; k < nb; ++k) {
    const Bubble &bubble = stage.bubbles[k];
    const double budget = bubble.durationUs * (1 - config.safetyMargin);
    const int64_t mem = bubble.freeBytes - config.reserveBytes - persistent;
    E[k] = bubbleValues(set, states, budget, mem, ctx);
  }
  // One iteration: W[from][to] by a DP over the bubbles.
  Matrix W(states, std::vector<double>(states, kNegInf));
  for (int s0 = 0; s0 < states; ++s0) {
    std::vector<double> reach(states, kNegInf);
    reach[s0] = 0;
    for (size_t k = 0; k < nb; ++k) {
      std::vector<double> next(states, kNegInf);
      for (int u = 0; u < states; ++u)
        if (reach[u] != kNegInf)
          for (int v = 0; v < states; ++v)
            if (E[k][u][v] != kNegInf)
              next[v] = std::max(next[v], reach[u] + E[k][u][v]);
      reach.swap(next);
    }
    W[s0] = reach;
  }
  return maxMeanCycle(W);
}

} // namespace

double solveJoint(const std::vector<StageBubbles> &stages,
                  const std::vector<Job> &jobs, const Hardware &hw,
                  const Config &config, int maxJobsPerStage) {
  double total = 0;
  for (const StageBubbles &stage : stages) {
    // Every knob setting of every valid job, with its value alone.
    std::vector<std::vector<Setting>> settings(jobs.size());
    std::vector<std::vector<double>> alone(jobs.size());
    for (size_t j = 0; j < jobs.size(); ++j) {
      const Job &job = jobs[j];
      if (job.layers.empty() || job.samples <= 0 || !(job.priority > 0))
        continue;
      const bool train = job.kind == JobKind::Training;
      std::vector<int> batches = batchChoices(job, config);
      for (int b : batches)
        for (int w = 0; w < 2; ++w)
          for (int a = 0; a < 2; ++a)
            for (int o = 0; o < (train ? 2 : 1); ++o)
              for (int ck = 0; ck < (train && config.allowCheckpointing ? 2 : 1); ++ck) {
                if ((w || a || o) && !(hw.pcieGBps > 0))
                  continue;
                KnobChoice k;
                k.batch = b;
                k.weights = w ? WeightPlacement::Streamed : WeightPlacement::Resident;
                k.acts = a ? ActPlacement::Host : ActPlacement::Device;
                k.optimizer = o ? OptimizerPlacement::Host : OptimizerPlacement::Device;
                k.checkpoint = ck;
                settings[j].push_back(makeSetting(job, int(j), k, batches, hw, config));
              }
    }
    // A setting no better than another of the same job and batch in every
    // respect (persistent bytes, every chunk's time and bytes, every tail)
    // can be replaced by it in any joint plan: dropped (one of equals kept).
    auto noBetter = [](const Setting &b, const Setting &a) { // b <= a
      if (a.knobs.batch != b.knobs.batch || a.persistent > b.persistent ||
          a.tails.size() != b.tails.size())
        return false;
      for (int p = 0; p < a.n; ++p)
        for (int e = p + 1; e <= a.n; ++e)
          if (a.T[p][e] > b.T[p][e] || a.M[p][e] > b.M[p][e])
            return false;
      for (size_t i = 0; i < a.tails.size(); ++i)
        if (a.tails[i].time > b.tails[i].time || a.tails[i].bytes > b.tails[i].bytes)
          return false;
      return true;
    };
    for (size_t j = 0; j < jobs.size(); ++j) {
      std::vector<Setting> kept;
      std::vector<double> keptAlone;
      for (size_t i = 0; i < settings[j].size(); ++i) {
        bool drop = false;
        for (size_t o = 0; o < settings[j].size() && !drop; ++o)
          drop = o != i && noBetter(settings[j][i], settings[j][o]) &&
                 (!noBetter(settings[j][o], settings[j][i]) || o < i);
        if (drop)
          continue;
        double v = jointValue(stage, {&settings[j][i]}, config);
        if (v > 0) { // a setting worthless alone adds nothing jointly
          kept.push_back(settings[j][i]);
          keptAlone.push_back(v);
        }
      }
      settings[j].swap(kept);
      alone[j].swap(keptAlone);
    }
    // Every subset of jobs and setting per job; a combination is evaluated
    // only if the sum of its members' values alone (an upper bound: sharing
    // a stage only takes time and memory away) can beat the best.
    struct Combo {
      std::vector<const Setting *> set;
      double bound;
    };
    // A second bound: the stage's total budget at the densest chunk of any
    // member (every us of fill work yields at most that much value).
    double totalBudget = 0;
    for (const Bubble &b : stage.bubbles)
      totalBudget += b.durationUs * (1 - config.safetyMargin);
    std::vector<Combo> combos;
    std::vector<const Setting *> cur;
    std::function<void(size_t, double)> build = [&](size_t j, double bound) {
      if (j == jobs.size()) {
        double dense = 0;
        for (const Setting *s : cur)
          dense = std::max(dense, s->density);
        if (cur.size() > 1)
          bound = std::min(bound, totalBudget * dense);
        if (!cur.empty())
          combos.push_back({cur, bound});
        return;
      }
      build(j + 1, bound);
      if (int(cur.size()) >= maxJobsPerStage)
        return;
      for (size_t i = 0; i < settings[j].size(); ++i) {
        cur.push_back(&settings[j][i]);
        build(j + 1, bound + alone[j][i]);
        cur.pop_back();
      }
    };
    build(0, 0);
    std::sort(combos.begin(), combos.end(),
              [](const Combo &a, const Combo &b) { return a.bound > b.bound; });
    // Exact values of combinations, memoized. Also a bound: dropping job j
    // from a joint plan leaves a plan of the others (with more memory and
    // time), and j's own part is at most its value alone, so
    // value(S) <= value(S - j) + alone(j) for every member j.
    std::map<std::vector<const Setting *>, double> memo;
    std::map<const Setting *, double> aloneOf;
    for (size_t j = 0; j < jobs.size(); ++j)
      for (size_t i = 0; i < settings[j].size(); ++i)
        aloneOf[&settings[j][i]] = alone[j][i];
    std::function<double(const std::vector<const Setting *> &)> exactValue =
        [&](const std::vector<const Setting *> &set) {
          if (set.size() == 1)
            return aloneOf[set[0]];
          auto it = memo.find(set);
          if (it != memo.end())
            return it->second;
          double v = jointValue(stage, set, config);
          memo[set] = v;
          return v;
        };
    double best = 0;
    for (const Combo &c : combos) {
      if (c.bound <= best * (1 + 1e-12))
        break;
      if (c.set.size() > 2) {
        double bound = c.bound;
        for (size_t drop = 0; drop < c.set.size() && bound > best; ++drop) {
          std::vector<const Setting *> rest;
          for (size_t i = 0; i < c.set.size(); ++i)
            if (i != drop)
              rest.push_back(c.set[i]);
          bound = std::min(bound, exactValue(rest) + aloneOf[c.set[drop]]);
        }
        if (bound <= best * (1 + 1e-12))
          continue;
      }
      best = std::max(best, exactValue(c.set));
    }
    total += best;
  }
  return total;
}

} // namespace pipefill::fill::exact
