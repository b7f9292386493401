// Cluster-scale benchmarks (DESIGN.md section 9): the 40B GPT of the study on
// 8192 GPUs (TP 8 x PP 16 x DP 64, 16 micro-batches), 7 zoo fill models, and
// a 10,000-job synthetic queue.
//   BM_AnalyzePipeline: cost model + 1F1B expansion + simulation + bubbles +
//                       one fill plan per (stage, model) pair (16 x 7).
//   BM_SimulateQueue/P: the discrete-event simulation of the queue under
//                       policy P (0 fifo, 1 sjf, 2 efficiency).
//   BM_Study:           the whole 1K-8K x {gpipe, 1f1b} study (8 points).

#include "algo/cluster/Analysis.h"
#include "algo/cost/ModelZoo.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

using namespace pipefill;
using namespace pipefill::cluster;

namespace {

PipelineSetup gpt40b(int gpus) {
  PipelineSetup s;
  cost::TransformerConfig &c = s.model;
  c.layers = 48;
  c.hidden = 8192;
  c.heads = 64;
  c.seqLength = 2048;
  c.vocab = 51200;
  c.tp = 8;
  c.pp = 16;
  c.dp = gpus / 128;
  c.globalBatch = 1024;
  c.zeroStage = 1;
  s.planner.minBubbleUs = 100;
  s.planner.reserveBytes = int64_t(2) << 30;
  return s;
}

std::vector<fill::Job> zooModels() {
  std::vector<fill::Job> jobs;
  for (const cost::ZooEntry &e : cost::zooEntries()) {
    fill::Job j;
    std::string error;
    cost::zooJob(e.name, cost::ZooOptions(), j, error);
    jobs.push_back(j);
  }
  return jobs;
}

void check(bool ok, const std::string &error) {
  if (!ok) {
    std::fprintf(stderr, "bench-cluster: %s\n", error.c_str());
    std::exit(1);
  }
}

struct Fixture {
  PipelineAnalysis analysis;
  ClusterModel cluster;
  std::vector<TraceJob> trace;
  Fixture() {
    std::string error;
    check(analyzePipeline(gpt40b(8192), zooModels(), analysis, error), error);
    cluster = clusterModelFrom(analysis);
    // Offered load ~1.3x the saturated capacity (~3.7K GPU-equivalents):
    // the queue builds up, so the policies make different choices.
    TraceGenOptions g;
    g.jobs = 10000;
    g.jobsPerHour = 300;
    g.medianGpuSeconds = 36000;
    g.sigma = 1.0;
    g.seed = 1;
    check(generateTrace(g, cluster.models, cluster.usefulSPerSample, trace,
                        error),
          error);
  }
};

Fixture &fixture() {
  static Fixture f;
  return f;
}

void BM_AnalyzePipeline(benchmark::State &state) {
  PipelineSetup setup = gpt40b(8192);
  std::vector<fill::Job> models = zooModels();
  for (auto _ : state) {
    PipelineAnalysis a;
    std::string error;
    check(analyzePipeline(setup, models, a, error), error);
    benchmark::DoNotOptimize(a.iterationUs);
    state.counters["planner_calls"] = a.plannerCalls;
  }
}
BENCHMARK(BM_AnalyzePipeline)->Unit(benchmark::kMillisecond);

void BM_SimulateQueue(benchmark::State &state) {
  Fixture &f = fixture();
  SimOptions o;
  o.policy = allPolicies()[size_t(state.range(0))];
  o.gpusPerJob = 8;
  PolicyResult r;
  for (auto _ : state) {
    std::string error;
    check(simulateQueue(f.cluster, f.trace, o, r, error), error);
    benchmark::DoNotOptimize(r.usefulGpuS);
  }
  state.SetLabel(toString(o.policy));
  state.counters["gpus"] = f.cluster.totalGpus();
  state.counters["jobs"] = double(f.trace.size());
  state.counters["gpu_equivalents"] = r.gpuEquivalents;
  state.counters["jct_p50_h"] = r.completionS.p50 / 3600;
  state.SetItemsProcessed(int64_t(state.iterations()) *
                          int64_t(f.trace.size()));
}
BENCHMARK(BM_SimulateQueue)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

void BM_Study(benchmark::State &state) {
  std::vector<fill::Job> models = zooModels();
  StudyOptions o;
  for (auto _ : state) {
    std::vector<StudyPoint> pts;
    std::string error;
    check(runStudy(gpt40b(1024), models, o, pts, error), error);
    benchmark::DoNotOptimize(pts.data());
  }
}
BENCHMARK(BM_Study)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
