//===- ExactSolver.cpp - Exact reference optimum (see ExactSolver.h) ------===//

#include "algo/fill/tests/ExactSolver.h"

#include <algorithm>
#include <cmath>
#include <limits>

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
