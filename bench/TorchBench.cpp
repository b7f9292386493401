//===- TorchBench.cpp - Cost of importing a torch action table ------------===//
//
// Parse + check (placement, completeness, deadlock run) + conversion of a
// torch table written from pipefill's interleaved 1F1B order, at sizes up to
// 64 ranks x 512 micro-batches x 2 chunks. Items = compute actions, so
// items_per_second reads as actions per second; the sizes double the work
// to show the cost stays linear.
//
//===----------------------------------------------------------------------===//

#include "algo/torch/TorchSchedule.h"

#include <benchmark/benchmark.h>

using namespace pipefill;
using namespace pipefill::torchsched;

namespace {

sched::PipelineSpec spec(int p, int m) {
  sched::PipelineSpec s;
  s.schedule = sched::ScheduleKind::Interleaved1F1B;
  s.stages = p;
  s.microbatches = m;
  s.virtualStages = 2;
  sched::StageCost c;
  c.forwardUs = 1000;
  c.backwardUs = 2000;
  c.activationBytes = 16 << 20;
  s.costs.assign(p, c);
  return s;
}

std::string table(const sched::PipelineSpec &s, size_t &actions) {
  sched::Schedule native;
  std::string error;
  sched::expandSchedule(s, native, error);
  std::vector<std::vector<ExportOp>> rows(native.size());
  actions = 0;
  for (size_t d = 0; d < native.size(); ++d)
    for (const sched::Instr &in : native[d])
      if (in.kind == sched::InstrKind::Forward || sched::isBackwardFamily(in.kind)) {
        rows[d].push_back({in.kind, in.chunk * s.stages + int(d), in.microbatch, -1});
        ++actions;
      }
  return formatTable(rows);
}

/// Parses and checks `text` into `imp`; false (the benchmark marked failed) on an error.
bool parseAndCheck(benchmark::State &state, const std::string &text, Imported &imp) {
  Table t;
  Diag d;
  if (parseTable(text, t, d) && checkTable(t, imp, d))
    return true;
  state.SkipWithError(d.message.c_str());
  return false;
}

void BM_ImportTable(benchmark::State &state) {
  sched::PipelineSpec s = spec(int(state.range(0)), int(state.range(1)));
  size_t actions = 0;
  std::string text = table(s, actions);
  for (auto _ : state) {
    Imported imp;
    if (!parseAndCheck(state, text, imp))
      return;
    sched::Schedule out;
    toPipefill(imp, s, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(actions));
}
BENCHMARK(BM_ImportTable)
    ->Args({16, 128})
    ->Args({32, 128})
    ->Args({64, 128})
    ->Args({64, 256})
    ->Args({64, 512})
    ->Unit(benchmark::kMillisecond);

/// A valid but fully serial table: rank r runs rF0 rB0 rF1 rB1 ..., so every rank waits for the
/// one before it at every micro-batch. The deadlock run's sweep over every rank per step made
/// this micro-batches x ranks^2 (1024 x 256: 47 s); its worklist wakes only the neighbours of a
/// rank that moved. Doubling the ranks should double the time.
void BM_ImportSerialTable(benchmark::State &state) {
  const int p = int(state.range(0)), m = int(state.range(1));
  std::vector<std::vector<ExportOp>> rows(p);
  for (int r = 0; r < p; ++r)
    for (int b = 0; b < m; ++b) {
      rows[r].push_back({sched::InstrKind::Forward, r, b, -1});
      rows[r].push_back({sched::InstrKind::Backward, r, b, -1});
    }
  const std::string text = formatTable(rows);
  for (auto _ : state) {
    Imported imp;
    if (!parseAndCheck(state, text, imp))
      return;
    benchmark::DoNotOptimize(imp);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * 2 * p * m);
}
BENCHMARK(BM_ImportSerialTable)
    ->Args({128, 64})
    ->Args({256, 64})
    ->Args({512, 64})
    ->Args({1024, 64})
    ->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
