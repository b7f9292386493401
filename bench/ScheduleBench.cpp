//===- ScheduleBench.cpp - Cost of expand + simulate + findBubbles --------===//
//
// Items processed = instructions in the expanded schedule, so the reported
// items_per_second reads as instructions per second (its inverse is the cost
// per instruction). DESIGN target: a 64-stage, 512-microbatch compile well
// under a second on 2 cores, linear in instructions.
//
//===----------------------------------------------------------------------===//

#include "algo/schedule/Schedule.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

using namespace pipefill::sched;

namespace {

PipelineSpec makeSpec(ScheduleKind kind, int p, int m, int v) {
  PipelineSpec spec;
  spec.schedule = kind;
  spec.stages = p;
  spec.microbatches = m;
  spec.virtualStages = v;
  spec.p2pLatencyUs = 10;
  spec.p2pBandwidthGBps = 50;
  spec.tail = true;
  spec.dataParallel = 8;
  spec.gradBytes = 1 << 30;
  spec.dpBandwidthGBps = 100;
  spec.dpLatencyUs = 20;
  spec.optimizerUs = 3000;
  for (int s = 0; s < p; ++s) {
    StageCost c;
    // Mildly non-uniform stages, as after an imperfect layer split.
    c.forwardUs = 1000 + 37 * (s % 7);
    c.backwardUs = 2 * c.forwardUs + 11 * (s % 5);
    c.backwardWeightUs = c.backwardUs / 2;
    c.activationBytes = 16 << 20;
    c.stashBytes = int64_t(512) << 20;
    c.staticBytes = int64_t(20) << 30;
    spec.costs.push_back(c);
  }
  return spec;
}

size_t countInstrs(const Schedule &s) {
  size_t n = 0;
  for (const auto &l : s)
    n += l.size();
  return n;
}

bool expandAndSimulate(const PipelineSpec &spec, Schedule &sched, SimResult &r,
                       std::string &error) {
  return expandSchedule(spec, sched, error) && simulate(spec, sched, r, error);
}

void fail(benchmark::State &state, const std::string &error) {
  state.SkipWithError(error.c_str());
}

// The whole pass chain on one pipeline: expand, simulate, find bubbles.
void BM_Pipeline(benchmark::State &state) {
  auto kind = static_cast<ScheduleKind>(state.range(0));
  int p = int(state.range(1)), m = int(state.range(2));
  int v = kind == ScheduleKind::Interleaved1F1B ? 2 : 1;
  PipelineSpec spec = makeSpec(kind, p, m, v);
  size_t instrs = 0, bubbles = 0;
  double fraction = 0;
  for (auto _ : state) {
    Schedule sched;
    SimResult r;
    std::string error;
    if (!expandAndSimulate(spec, sched, r, error))
      return fail(state, error);
    std::vector<Bubble> b =
        findBubbles(spec, sched, r, int64_t(80) << 30, 100, int64_t(1) << 30);
    benchmark::DoNotOptimize(b.data());
    instrs = countInstrs(sched);
    bubbles = b.size();
    fraction = bubbleFraction(r);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(instrs));
  state.counters["instrs"] = double(instrs);
  state.counters["bubbles"] = double(bubbles);
  state.counters["bubble_frac"] = fraction;
  state.SetLabel(toString(kind));
}

// The phases alone, at the headline size (interleaved v=2, 64 x 512).
void BM_ExpandOnly(benchmark::State &state) {
  PipelineSpec spec = makeSpec(ScheduleKind::Interleaved1F1B, 64, 512, 2);
  size_t instrs = 0;
  for (auto _ : state) {
    Schedule sched;
    std::string error;
    if (!expandSchedule(spec, sched, error))
      return fail(state, error);
    instrs = countInstrs(sched);
    benchmark::DoNotOptimize(sched.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(instrs));
}

void BM_SimulateOnly(benchmark::State &state) {
  PipelineSpec spec = makeSpec(ScheduleKind::Interleaved1F1B, 64, 512, 2);
  Schedule sched;
  std::string error;
  if (!expandSchedule(spec, sched, error))
    return fail(state, error);
  for (auto _ : state) {
    SimResult r;
    if (!simulate(spec, sched, r, error))
      return fail(state, error);
    benchmark::DoNotOptimize(r.iterationUs);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) *
                          int64_t(countInstrs(sched)));
}

void BM_FindBubblesOnly(benchmark::State &state) {
  PipelineSpec spec = makeSpec(ScheduleKind::Interleaved1F1B, 64, 512, 2);
  Schedule sched;
  SimResult r;
  std::string error;
  if (!expandAndSimulate(spec, sched, r, error))
    return fail(state, error);
  for (auto _ : state) {
    std::vector<Bubble> b =
        findBubbles(spec, sched, r, int64_t(80) << 30, 0, 0);
    benchmark::DoNotOptimize(b.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) *
                          int64_t(countInstrs(sched)));
}

constexpr int kGPipe = int(ScheduleKind::GPipe);
constexpr int k1F1B = int(ScheduleKind::OneFOneB);
constexpr int kInterleaved = int(ScheduleKind::Interleaved1F1B);
constexpr int kZB = int(ScheduleKind::ZBH1);

} // namespace

// Headline: interleaved v=2, 64 stages x 512 microbatches.
BENCHMARK(BM_Pipeline)
    ->Name("Headline/interleaved_v2/p64_m512")
    ->Args({kInterleaved, 64, 512})
    ->Unit(benchmark::kMillisecond);
// Scaling in microbatches at p = 64.
BENCHMARK(BM_Pipeline)
    ->Name("ScaleM/interleaved_v2/p64")
    ->ArgsProduct({{kInterleaved}, {64}, {64, 128, 256, 512}})
    ->Unit(benchmark::kMillisecond);
// Scaling in stages at m = 512.
BENCHMARK(BM_Pipeline)
    ->Name("ScaleP/interleaved_v2/m512")
    ->ArgsProduct({{kInterleaved}, {8, 16, 32, 64}, {512}})
    ->Unit(benchmark::kMillisecond);
// The other schedule kinds at the headline size.
BENCHMARK(BM_Pipeline)
    ->Name("Kinds/p64_m512")
    ->ArgsProduct({{kGPipe, k1F1B, kZB}, {64}, {512}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ExpandOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FindBubblesOnly)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
