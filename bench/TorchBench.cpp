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

void BM_ImportTable(benchmark::State &state) {
  sched::PipelineSpec s = spec(int(state.range(0)), int(state.range(1)));
  size_t actions = 0;
  std::string text = table(s, actions);
  for (auto _ : state) {
    Table t;
    Diag d;
    Imported imp;
    if (!parseTable(text, t, d) || !checkTable(t, imp, d)) {
      state.SkipWithError(d.message.c_str());
      return;
    }
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

} // namespace

BENCHMARK_MAIN();
