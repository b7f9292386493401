//===- Simulator.cpp - Discrete-event simulation of the fill-job queue ----===//
//
// State: free GPUs per class, one queue per model (all jobs of a model have
// the same runnable classes, so only each queue's head can be dispatched),
// a min-heap of completions and the arrival cursor. At each event time:
// completions free their gangs, arrivals join their model's queue, then the
// policy dispatches while some (queued model, free class) pair can run.
//
//===----------------------------------------------------------------------===//

#include "algo/cluster/Cluster.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <queue>

namespace pipefill::cluster {

const char *toString(Policy p) {
  switch (p) {
  case Policy::Fifo:
    return "fifo";
  case Policy::Sjf:
    return "sjf";
  case Policy::Efficiency:
    return "efficiency";
  }
  return "?";
}

bool parsePolicy(const std::string &text, Policy &out) {
  std::string t;
  for (char c : text)
    t += char(std::tolower(static_cast<unsigned char>(c)));
  if (t == "fifo")
    out = Policy::Fifo;
  else if (t == "sjf" || t == "shortest-job-first")
    out = Policy::Sjf;
  else if (t == "efficiency" || t == "efficiency-aware" || t == "eff")
    out = Policy::Efficiency;
  else
    return false;
  return true;
}

const std::vector<Policy> &allPolicies() {
  static const std::vector<Policy> all = {Policy::Fifo, Policy::Sjf,
                                          Policy::Efficiency};
  return all;
}

int ClusterModel::totalGpus() const {
  int n = 0;
  for (const GpuClass &c : classes)
    n += c.gpus;
  return n;
}

double ClusterModel::mainBusyGpus() const {
  double busy = 0;
  for (const GpuClass &c : classes)
    busy += double(c.gpus) * c.busyFraction;
  return busy;
}

int ClusterModel::modelIndex(const std::string &name) const {
  for (size_t i = 0; i < models.size(); ++i)
    if (models[i] == name)
      return int(i);
  return -1;
}

bool ClusterModel::validate(std::string &error) const {
  if (classes.empty()) {
    error = "the cluster has no GPU classes";
    return false;
  }
  if (usefulSPerSample.size() != models.size() ||
      samplesPerS.size() != classes.size() ||
      efficiency.size() != classes.size()) {
    error = "the cluster model's tables do not match its classes and models";
    return false;
  }
  for (size_t c = 0; c < classes.size(); ++c) {
    if (classes[c].gpus < 0 || !(classes[c].busyFraction >= 0)) {
      error = "GPU class '" + classes[c].name +
              "' has a negative GPU count or busy fraction";
      return false;
    }
    if (samplesPerS[c].size() != models.size() ||
        efficiency[c].size() != models.size()) {
      error = "the cluster model's rate table for '" + classes[c].name +
              "' does not list every model";
      return false;
    }
    for (size_t m = 0; m < models.size(); ++m)
      if (!(samplesPerS[c][m] >= 0) || !std::isfinite(samplesPerS[c][m]) ||
          !(efficiency[c][m] >= 0)) {
        error = "invalid rate for model '" + models[m] + "' on '" +
                classes[c].name + "'";
        return false;
      }
  }
  for (size_t m = 0; m < models.size(); ++m)
    if (!(usefulSPerSample[m] > 0)) {
      error = "model '" + models[m] + "' needs a positive per-sample cost";
      return false;
    }
  return true;
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty())
    return p;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    size_t n = v.size();
    size_t k = size_t(std::ceil(q / 100.0 * double(n)));
    return v[std::min(n, std::max<size_t>(k, 1)) - 1];
  };
  p.p50 = rank(50);
  p.p90 = rank(90);
  p.p99 = rank(99);
  p.max = v.back();
  double sum = 0;
  for (double x : v)
    sum += x;
  p.mean = sum / double(v.size());
  return p;
}

namespace {

struct QueueKey {
  double tier;  // priority, higher first
  double key;   // arrival (FIFO, EFFICIENCY) or work (SJF), lower first
  int job;      // trace order
};
struct LaterKey {
  bool operator()(const QueueKey &a, const QueueKey &b) const {
    if (a.tier != b.tier)
      return a.tier < b.tier;
    if (a.key != b.key)
      return a.key > b.key;
    return a.job > b.job;
  }
};
/// True if a should be dispatched before b.
bool before(const QueueKey &a, const QueueKey &b) {
  return LaterKey()(b, a);
}

struct Completion {
  double time;
  int job;
  int gpuClass;
  bool operator>(const Completion &o) const {
    return time != o.time ? time > o.time : job > o.job;
  }
};

/// Checks the model and options of a queue simulation; false with `error`.
bool checkQueueInputs(const ClusterModel &cm, const SimOptions &opts,
                      std::string &error) {
  if (!cm.validate(error))
    return false;
  const int g = opts.gpusPerJob;
  if (g < 1) {
    error = "gpus per job must be at least 1";
    return false;
  }
  if (!(opts.efficiencyTolerance >= 0 && opts.efficiencyTolerance < 1)) {
    error = "the efficiency tolerance must be in [0, 1)";
    return false;
  }
  int largest = 0;
  for (const GpuClass &c : cm.classes)
    largest = std::max(largest, c.gpus);
  if (g > largest) {
    error = "a fill job needs a gang of " + std::to_string(g) +
            " GPUs but the largest GPU class has " + std::to_string(largest);
    return false;
  }
  return true;
}

/// One outcome per trace job (model, arrival, useful GPU-seconds), the trace
/// checked on the way; false with `error`.
bool readTrace(const ClusterModel &cm, const std::vector<TraceJob> &trace,
               PolicyResult &out, std::string &error) {
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceJob &t = trace[i];
    JobOutcome &o = out.jobs[i];
    o.job = int(i);
    o.arrivalS = t.arrivalS;
    o.model = cm.modelIndex(t.model);
    if (o.model < 0) {
      error = "job " + std::to_string(i) + " uses model '" + t.model +
              "', which the cluster has no rates for";
      return false;
    }
    if (!(t.samples >= 1) || !(t.arrivalS >= 0) || !(t.priority > 0)) {
      error = "job " + std::to_string(i) +
              " needs samples >= 1, arrival >= 0 and priority > 0";
      return false;
    }
    if (i && t.arrivalS < trace[i - 1].arrivalS) {
      error = "the trace is not sorted by arrival time (job " +
              std::to_string(i) + ")";
      return false;
    }
    o.usefulGpuS = double(t.samples) * cm.usefulSPerSample[o.model];
  }
  return true;
}

/// The event loop of the queue: per-model queues, free GPUs per class, the
/// running gangs, and the policy's choice of (model, class) to start next.
class QueueSim {
public:
  QueueSim(const ClusterModel &cm, const std::vector<TraceJob> &trace,
           const SimOptions &opts, PolicyResult &out)
      : cm(cm), trace(trace), opts(opts), out(out), g(opts.gpusPerJob),
        C(int(cm.classes.size())), M(int(cm.models.size())),
        runs(size_t(C) * M, 0), anywhere(M, 0), freeGpus(C), queues(M) {
    // Runnable classes per model.
    for (int c = 0; c < C; ++c)
      for (int m = 0; m < M; ++m)
        if (cm.samplesPerS[c][m] > 0 && cm.classes[c].gpus >= g) {
          runs[size_t(c) * M + m] = 1;
          anywhere[m] = 1;
        }
    for (int c = 0; c < C; ++c)
      freeGpus[c] = cm.classes[c].gpus;
  }

  /// Arrivals and completions in time order until every job is done.
  void run() {
    size_t next = 0;
    const size_t n = trace.size();
    while (next < n || !running.empty()) {
      double now = std::min(next < n ? trace[next].arrivalS : INFINITY,
                            running.empty() ? INFINITY : running.top().time);
      while (!running.empty() && running.top().time <= now) {
        freeGpus[running.top().gpuClass] += g;
        running.pop();
      }
      while (next < n && trace[next].arrivalS <= now) {
        int j = int(next++);
        int m = out.jobs[j].model;
        if (anywhere[m])
          queues[m].push(keyOf(j));
      }
      dispatch(now);
    }
  }

private:
  bool fits(int c, int m) const {
    return runs[size_t(c) * M + m] && freeGpus[c] >= g;
  }

  QueueKey keyOf(int j) const {
    const TraceJob &t = trace[j];
    double k = opts.policy == Policy::Sjf ? out.jobs[j].usefulGpuS
                                          : t.arrivalS;
    return QueueKey{t.priority, k, j};
  }

  int firstFit(int m) const {
    for (int c = 0; c < C; ++c)
      if (fits(c, m))
        return c;
    return -1;
  }

  int bestFit(int m) const {
    int best = -1;
    for (int c = 0; c < C; ++c)
      if (fits(c, m) &&
          (best < 0 || cm.samplesPerS[c][m] > cm.samplesPerS[best][m]))
        best = c;
    return best;
  }

  void start(int m, int c, double now) {
    QueueKey k = queues[m].top();
    queues[m].pop();
    JobOutcome &o = out.jobs[k.job];
    o.gpuClass = c;
    o.startS = now;
    o.endS = now + double(trace[k.job].samples) /
                       (double(g) * cm.samplesPerS[c][m]);
    freeGpus[c] -= g;
    running.push({o.endS, k.job, c});
  }

  /// Starts jobs while one fits.
  void dispatch(double now) {
    for (;;) {
      int pickModel = -1, pickClass = -1;
      if (opts.policy != Policy::Efficiency)
        pickInQueueOrder(pickModel, pickClass);
      else
        pickByEfficiency(now, pickModel, pickClass);
      if (pickModel < 0)
        return;
      start(pickModel, pickClass, now);
    }
  }

  /// FIFO and SJF: the first head in queue order that fits, first fit.
  void pickInQueueOrder(int &pickModel, int &pickClass) const {
    for (int m = 0; m < M; ++m) {
      if (queues[m].empty())
        continue;
      int c = firstFit(m);
      if (c < 0)
        continue;
      if (pickModel < 0 ||
          before(queues[m].top(), queues[pickModel].top())) {
        pickModel = m;
        pickClass = c;
      }
    }
  }

  /// The efficiency policy, after its starvation guard: the oldest runnable
  /// head of the highest tier that waited >= agingS runs first, on its best
  /// class. Priorities are strict tiers here too: the guard acts inside the
  /// tier (a model's head is its highest-priority, oldest job, so the heads
  /// of the top tier are that tier's oldest job of each model). It looked at
  /// every head: an aged priority-1 job of a model whose head was priority 2
  /// stayed hidden while another model's aged priority-1 job went before the
  /// priority-2 jobs.
  void pickByEfficiency(double now, int &pickModel, int &pickClass) const {
    double topTier = -1;
    for (int m = 0; m < M; ++m)
      if (!queues[m].empty() && bestFit(m) >= 0)
        topTier = std::max(topTier, queues[m].top().tier);
    for (int m = 0; m < M; ++m) {
      if (queues[m].empty() || queues[m].top().tier != topTier || bestFit(m) < 0)
        continue;
      const QueueKey &h = queues[m].top();
      if (now - h.key >= opts.agingS &&
          (pickModel < 0 || h.key < queues[pickModel].top().key ||
           (h.key == queues[pickModel].top().key &&
            h.job < queues[pickModel].top().job))) {
        pickModel = m;
      }
    }
    if (pickModel >= 0)
      pickClass = bestFit(pickModel);
    else
      pickBestRate(topTier, pickModel, pickClass);
  }

  /// Score: useful GPU-seconds recovered per second by the gang (samples/s x
  /// dedicated seconds per sample). Within one class this ranks models by
  /// planned efficiency (the class's bubble time is fixed); across classes it
  /// sends a job where it finishes soonest. Pairs within
  /// `efficiencyTolerance` of the best score count as equally good and are
  /// served in queue order, so noise-level differences do not starve a model.
  void pickBestRate(double topTier, int &pickModel, int &pickClass) const {
    double bestRate = -1;
    for (int m = 0; m < M; ++m) {
      if (queues[m].empty() || queues[m].top().tier != topTier)
        continue;
      for (int c = 0; c < C; ++c)
        if (fits(c, m))
          bestRate = std::max(bestRate, cm.samplesPerS[c][m] *
                                            cm.usefulSPerSample[m]);
    }
    double cut = bestRate * (1 - opts.efficiencyTolerance);
    double pickRate = -1;
    for (int m = 0; m < M; ++m) {
      if (queues[m].empty() || queues[m].top().tier != topTier)
        continue;
      for (int c = 0; c < C; ++c) {
        if (!fits(c, m))
          continue;
        double rate = cm.samplesPerS[c][m] * cm.usefulSPerSample[m];
        if (rate < cut)
          continue;
        bool better =
            pickModel < 0 ||
            (m != pickModel &&
             before(queues[m].top(), queues[pickModel].top())) ||
            (m == pickModel && rate > pickRate);
        if (better) {
          pickModel = m;
          pickClass = c;
          pickRate = rate;
        }
      }
    }
  }

  const ClusterModel &cm;
  const std::vector<TraceJob> &trace;
  const SimOptions &opts;
  PolicyResult &out;
  const int g, C, M;
  std::vector<char> runs;     // (class, model) -> the model runs there
  std::vector<char> anywhere; // model -> runs on some class
  std::vector<int> freeGpus;
  std::vector<std::priority_queue<QueueKey, std::vector<QueueKey>, LaterKey>>
      queues;
  std::priority_queue<Completion, std::vector<Completion>,
                      std::greater<Completion>>
      running;
};

/// Completed and unschedulable jobs, useful GPU-seconds within the horizon,
/// occupancy, gains and the completion / queueing percentiles.
void computeMetrics(const ClusterModel &cm, const std::vector<TraceJob> &trace,
                    const SimOptions &opts, PolicyResult &out) {
  const int g = opts.gpusPerJob;
  double lastArrival = trace.empty() ? 0 : trace.back().arrivalS;
  std::vector<double> completion, queueing;
  double makespan = 0, occupied = 0;
  for (JobOutcome &o : out.jobs) {
    if (o.gpuClass < 0) {
      ++out.unschedulable;
      continue;
    }
    ++out.completed;
    makespan = std::max(makespan, o.endS);
    completion.push_back(o.endS - o.arrivalS);
    queueing.push_back(o.startS - o.arrivalS);
    out.totalUsefulGpuS += o.usefulGpuS;
    out.jobsPerClass[o.gpuClass]++;
  }
  out.makespanS = makespan;
  double horizon = opts.horizonS > 0
                       ? opts.horizonS
                       : (lastArrival > 0 ? lastArrival : makespan);
  out.horizonS = horizon;
  if (horizon > 0) {
    for (const JobOutcome &o : out.jobs) {
      if (o.gpuClass < 0)
        continue;
      double overlap = std::max(0.0, std::min(o.endS, horizon) - o.startS);
      double duration = o.endS - o.startS;
      double useful = duration > 0 ? o.usefulGpuS * overlap / duration : 0;
      out.usefulGpuS += useful;
      out.usefulPerClass[o.gpuClass] += useful;
      occupied += double(g) * overlap;
    }
    out.mainBusyGpuS = cm.mainBusyGpus() * horizon;
    out.utilizationGain =
        out.mainBusyGpuS > 0 ? out.usefulGpuS / out.mainBusyGpuS : 0;
    out.gpuEquivalents = out.usefulGpuS / horizon;
    int gpus = cm.totalGpus();
    out.occupancy = gpus ? occupied / (double(gpus) * horizon) : 0;
  }
  if (makespan > 0) {
    double busy = cm.mainBusyGpus() * makespan;
    out.totalUtilizationGain = busy > 0 ? out.totalUsefulGpuS / busy : 0;
    out.totalGpuEquivalents = out.totalUsefulGpuS / makespan;
  }
  out.completionS = percentiles(completion);
  out.queueingS = percentiles(queueing);
}

} // namespace

bool simulateQueue(const ClusterModel &cm, const std::vector<TraceJob> &trace,
                   const SimOptions &opts, PolicyResult &out,
                   std::string &error) {
  if (!checkQueueInputs(cm, opts, error))
    return false;
  const int C = int(cm.classes.size());
  out = PolicyResult();
  out.policy = opts.policy;
  out.gpusPerJob = opts.gpusPerJob;
  out.jobs.resize(trace.size());
  out.jobsPerClass.assign(C, 0);
  out.usefulPerClass.assign(C, 0);
  if (!readTrace(cm, trace, out, error))
    return false;
  QueueSim(cm, trace, opts, out).run();
  computeMetrics(cm, trace, opts, out);
  return true;
}

} // namespace pipefill::cluster
