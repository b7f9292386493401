//===- FillBench.cpp - Fill planner at pipeline scale ---------------------===//
//
// 100 fill jobs (10-50 layers each; 70% inference, 30% training) planned onto
// the bubbles of 64 stages of an interleaved 1F1B pipeline (64 stages x 512
// micro-batches, 2 virtual stages), synthesised per stage as: the warm-up
// wait, 63 warm-up gaps, 63 cool-down gaps, a few steady-state gaps and the
// optimizer / all-reduce tail, from 100 us to 50 ms, with free memory that
// shrinks while activations are stashed. Target: well under a second.
//
//===----------------------------------------------------------------------===//

#include "algo/fill/Planner.h"
#include "algo/fill/PlannerInternal.h"
#include "algo/fill/tests/RandomJobs.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

namespace {

using namespace pipefill::fill;

constexpr int kStages = 64;
constexpr int kMicrobatches = 512;
constexpr int kJobs = 100;

std::vector<StageBubbles> makeStages(std::mt19937_64 &rng) {
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  const double fwd = 250, bwd = 500; // per micro-batch and virtual stage
  const double busy = kMicrobatches * 2 * (fwd + bwd);
  const int64_t gb = 1000000000;
  std::vector<StageBubbles> stages;
  for (int s = 0; s < kStages; ++s) {
    StageBubbles sb;
    sb.stage = s;
    std::vector<std::pair<double, int64_t>> shape; // duration, free bytes
    if (s > 0)
      shape.push_back({s * fwd, 30 * gb});        // waiting for the first input
    for (int i = 0; i < kStages - 1; ++i)         // warm-up: stash grows
      shape.push_back({fwd * uni(0.4, 1.2), int64_t((30 - 0.35 * i) * gb)});
    for (int i = 0; i < 8; ++i)                   // steady state
      shape.push_back({uni(100, 500), 6 * gb});
    for (int i = 0; i < kStages - 1; ++i)         // cool-down: stash drains
      shape.push_back({bwd * uni(0.4, 1.2), int64_t((8 + 0.35 * i) * gb)});
    shape.push_back({uni(5000, 50000), 32 * gb}); // optimizer / all-reduce
    double t = 0;
    int id = 0;
    for (auto &[duration, free] : shape) {
      Bubble b;
      b.id = id++;
      b.startUs = t;
      b.durationUs = duration;
      b.freeBytes = free;
      sb.bubbles.push_back(b);
      t += duration + busy / shape.size();
    }
    sb.iterationUs = t;
    sb.minFreeBytes = 5 * gb;
    stages.push_back(sb);
  }
  return stages;
}

std::vector<Job> makeJobs(std::mt19937_64 &rng) {
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  std::vector<Job> jobs;
  for (int j = 0; j < kJobs; ++j) {
    Job job;
    job.name = "fill" + std::to_string(j);
    job.kind = j % 10 < 7 ? JobKind::Inference : JobKind::Training;
    job.samples = int64_t(uni(1e5, 1e7));
    job.priority = uni(0.5, 3);
    job.arrivalUs = uni(0, 1e9);
    int layers = pick(10, 50);
    double scale = uni(0.2, 5); // job size
    for (int l = 0; l < layers; ++l) {
      Layer layer;
      layer.name = "layer" + std::to_string(l);
      layer.forwardUsPerSample = scale * uni(0.5, 10);
      layer.weightBytes = int64_t(scale * uni(1e6, 4e7));
      layer.activationBytesPerSample = int64_t(uni(1.6e4, 2e6));
      if (job.kind == JobKind::Training) {
        layer.backwardUsPerSample = 2 * layer.forwardUsPerSample;
        layer.gradBytes = layer.weightBytes;
        layer.optimizerBytes = 2 * layer.weightBytes;
        layer.stashBytesPerSample = 4 * layer.activationBytesPerSample;
      }
      job.layers.push_back(layer);
    }
    jobs.push_back(job);
  }
  return jobs;
}

struct Problem {
  std::vector<StageBubbles> stages;
  std::vector<Job> jobs;
  Hardware hw;
  Config config;
};

const Problem &problem() {
  static Problem p = [] {
    Problem q;
    std::mt19937_64 rng(64512);
    q.stages = makeStages(rng);
    q.jobs = makeJobs(rng);
    return q;
  }();
  return p;
}

void report(benchmark::State &state, const Plan &plan) {
  size_t bubbles = 0;
  for (const StageBubbles &s : problem().stages)
    bubbles += s.bubbles.size();
  int scheduled = 0;
  for (const JobResult &r : plan.jobs)
    scheduled += r.stages > 0;
  state.counters["bubbles"] = double(bubbles);
  state.counters["chunks"] = double(plan.chunks.size());
  state.counters["assignments"] = double(plan.assignments.size());
  state.counters["jobs_placed"] = scheduled;
  state.counters["filled_fraction"] = plan.filledFraction;
  state.counters["useful_over_filled"] =
      plan.filledUs > 0 ? plan.usefulUs / plan.filledUs : 0;
}

void BM_PlanFill64x512x100(benchmark::State &state) {
  const Problem &p = problem();
  Plan plan;
  for (auto _ : state) {
    plan = planFill(p.stages, p.jobs, p.hw, p.config);
    benchmark::DoNotOptimize(plan.chunks.data());
  }
  report(state, plan);
}
BENCHMARK(BM_PlanFill64x512x100)->Unit(benchmark::kMillisecond)->MinTime(2);

void BM_PlanFillOneJobPerStage(benchmark::State &state) {
  const Problem &p = problem();
  Config config = p.config;
  config.allowMultipleJobsPerStage = false;
  Plan plan;
  for (auto _ : state) {
    plan = planFill(p.stages, p.jobs, p.hw, config);
    benchmark::DoNotOptimize(plan.chunks.data());
  }
  report(state, plan);
}
BENCHMARK(BM_PlanFillOneJobPerStage)->Unit(benchmark::kMillisecond)->MinTime(2);

// Small stages, as in JointExactTest (2-4 stages of 2-4 bubbles of 40 us to
// 1 ms, 1-3 jobs of 1-3 layers, a quarter training, PCIe 0-32 GB/s, tight
// memory; bubbles drawn directly instead of simulated): 200 instances per
// iteration. Arg 0: the slot search only (jointExactWorkLimit = 0); arg 1:
// with the exact joint packing (the default). Counter `value` is the sum of
// priority-weighted useful us per iteration over the 200 instances.
struct SmallInstance {
  std::vector<StageBubbles> stages;
  std::vector<Job> jobs;
  Hardware hw;
  Config config;
};

const std::vector<SmallInstance> &smallInstances() {
  static std::vector<SmallInstance> all = [] {
    std::mt19937_64 rng(13);
    auto uni = [&](double lo, double hi) {
      return std::uniform_real_distribution<double>(lo, hi)(rng);
    };
    auto pick = [&](int lo, int hi) {
      return std::uniform_int_distribution<int>(lo, hi)(rng);
    };
    std::vector<SmallInstance> out;
    for (int i = 0; i < 200; ++i) {
      SmallInstance in;
      int stages = pick(2, 4);
      for (int s = 0; s < stages; ++s) {
        StageBubbles sb;
        sb.stage = s;
        int nb = pick(2, 4);
        int64_t minFree = int64_t(uni(2e6, 40e6));
        for (int k = 0; k < nb; ++k) {
          Bubble b;
          b.id = k;
          b.durationUs = std::round(uni(40, 1000));
          b.freeBytes = minFree + int64_t(uni(0, 20e6));
          sb.bubbles.push_back(b);
        }
        sb.minFreeBytes = minFree;
        in.stages.push_back(sb);
      }
      const double pcie[] = {0, 8, 16, 32};
      in.hw.pcieGBps = pcie[pick(0, 3)];
      in.config.contextSwitchUs = pick(0, 1) ? 10 : 20;
      in.config.batchSizes = {4, 8};
      in.config.maxJobsPerStage = 3;
      in.jobs = randomFillJobs(rng, /*variedTraining=*/false);
      out.push_back(in);
    }
    return out;
  }();
  return all;
}

void BM_PlanFillSmallStages(benchmark::State &state) {
  double value = 0;
  for (auto _ : state) {
    value = 0;
    for (const SmallInstance &in : smallInstances()) {
      Config config = in.config;
      if (state.range(0) == 0)
        config.jointExactWorkLimit = 0;
      Plan plan = planFill(in.stages, in.jobs, in.hw, config);
      for (const Assignment &a : plan.assignments)
        value += a.usefulUs * in.jobs[a.job].priority;
      benchmark::DoNotOptimize(plan.chunks.data());
    }
  }
  state.counters["value"] = value;
}
BENCHMARK(BM_PlanFillSmallStages)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MinTime(2);

// Times the greedy packing of every setting on the bubbles (their time
// budgets and free bytes), as the stage planner runs it for each candidate.
// Counter `ops_per_period` (the packed ops per period, summed) checks the
// work is the same from run to run.
void timeGreedyPacking(benchmark::State &state,
                       const std::vector<pipefill::fill::detail::JobConfig> &cfgs,
                       double contextSwitchUs, const std::vector<double> &budget,
                       const std::vector<int64_t> &mem) {
  using namespace pipefill::fill::detail;
  BubbleFrontier frontier;
  frontier.build(budget, mem);
  Method greedy;
  int64_t ops = 0;
  for (auto _ : state) {
    ops = 0;
    for (const JobConfig &cfg : cfgs) {
      std::vector<int64_t> m(mem.size());
      for (size_t k = 0; k < mem.size(); ++k)
        m[k] = mem[k] - cfg.persistentBytes;
      SimResult r = pack(cfg, contextSwitchUs, budget, m, frontier,
                         cfg.persistentBytes, greedy, nullptr);
      ops += r.opsPeriod;
    }
    benchmark::DoNotOptimize(ops);
  }
  state.counters["settings"] = double(cfgs.size());
  state.counters["ops_per_period"] = double(ops);
}

// The planner's inner loop alone: the greedy packing (GreedyPacker, whose
// per-bubble step is packBubble) of one knob setting of every job on stage
// 32's 136 bubbles, as the stage planner runs it for each candidate. Arg 0:
// all-device settings (no PCIe copies); arg 1: weights streamed and
// activations on the host (copies, so chunk times are not prefix sums).
void BM_PackBubbleGreedy(benchmark::State &state) {
  using namespace pipefill::fill::detail;
  const Problem &p = problem();
  const StageBubbles &stage = p.stages[32];
  std::vector<double> budget;
  std::vector<int64_t> mem;
  for (const Bubble &b : stage.bubbles) {
    budget.push_back(b.durationUs * (1 - p.config.safetyMargin));
    mem.push_back(b.freeBytes);
  }
  std::vector<JobConfig> cfgs;
  for (size_t j = 0; j < p.jobs.size(); ++j) {
    Knobs k;
    k.batch = 8;
    if (state.range(0)) {
      k.weights = WeightPlacement::Streamed;
      k.acts = ActPlacement::Host;
    }
    JobConfig cfg;
    if (buildConfig(p.jobs[j], int(j), k, p.hw, cfg))
      cfgs.push_back(cfg);
  }
  timeGreedyPacking(state, cfgs, p.config.contextSwitchUs, budget, mem);
}
BENCHMARK(BM_PackBubbleGreedy)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MinTime(1);

// The inner loop at the size of a real compile: one stage of a simulated
// 1F1B pipeline of 64 stages x 512 micro-batches (bench/gen_job.py 64 512 100
// ONE_F_ONE_B; stage 10): a 26.8 ms and a 284 ms wait, 450 gaps of 1362.18 us
// whose lengths differ in their last bits (as the simulator's sums leave
// them), 53 gaps of 3362.18 us and a 46.8 ms tail, 74.35-74.45 GB free. Every
// job's all-device setting at batch Arg is packed greedily, as the stage
// planner's search does for each candidate (the value search itself is in
// BM_PlanFill*). Counter `ops_per_period` checks the work is the same from
// run to run.
void BM_PackPipelineStage(benchmark::State &state) {
  using namespace pipefill::fill::detail;
  const Problem &p = problem();
  std::vector<double> duration = {26810.8864, 284195.39584};
  std::mt19937_64 rng(10);
  for (int i = 0; i < 450; ++i)
    duration.push_back(1362.1772799999453 +
                       double(int(rng() % 9) - 4) * 2.2737367544323206e-13);
  for (int i = 0; i < 53; ++i)
    duration.push_back(3362.1772799999453);
  duration.push_back(46810.8864);
  std::vector<double> budget;
  std::vector<int64_t> mem;
  for (size_t k = 0; k < duration.size(); ++k) {
    budget.push_back(duration[k] * (1 - p.config.safetyMargin));
    mem.push_back(k % 6 == 5 ? 74451862272 : 74351862272);
  }
  std::vector<JobConfig> cfgs;
  std::mt19937_64 jobRng(42);
  for (int j = 0; j < 100; ++j) { // bench/gen_job.py's inference jobs
    Job job;
    job.name = "job" + std::to_string(j);
    int layers = 10 + int(jobRng() % 41);
    for (int l = 0; l < layers; ++l) {
      Layer layer;
      layer.forwardUsPerSample = 2 + double(jobRng() % 5800) / 100;
      layer.weightBytes = int64_t(1 + jobRng() % 64) * 1048576;
      layer.activationBytesPerSample = int64_t(64 + jobRng() % 4033) * 1024;
      job.layers.push_back(layer);
    }
    Knobs k;
    k.batch = int(state.range(0));
    JobConfig cfg;
    if (buildConfig(job, j, k, p.hw, cfg))
      cfgs.push_back(cfg);
  }
  timeGreedyPacking(state, cfgs, p.config.contextSwitchUs, budget, mem);
  state.counters["bubbles"] = double(budget.size());
}
BENCHMARK(BM_PackPipelineStage)->Arg(8)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->MinTime(1);

void BM_VerifyPlan(benchmark::State &state) {
  const Problem &p = problem();
  Plan plan = planFill(p.stages, p.jobs, p.hw, p.config);
  size_t violations = 0;
  for (auto _ : state) {
    violations = verifyPlan(p.stages, p.jobs, p.hw, p.config, plan).size();
    benchmark::DoNotOptimize(violations);
  }
  state.counters["violations"] = double(violations);
}
BENCHMARK(BM_VerifyPlan)->Unit(benchmark::kMillisecond)->MinTime(2);

} // namespace

BENCHMARK_MAIN();
